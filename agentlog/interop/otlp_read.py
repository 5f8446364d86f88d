"""Read spans from what other tracers write or send, into one plain shape (:class:`OtelSpan`).

Three sources:

- **OTLP/JSON**: an ``ExportTraceServiceRequest`` (``resourceSpans`` → ``scopeSpans`` →
  ``spans``), one per file or one per line (the collector's ``file`` exporter), or the body of
  an OTLP/HTTP JSON request. It is parsed into the official protobuf message
  (``opentelemetry-proto``) by protobuf's JSON mapping (``google.protobuf.json_format``), so
  enums as integers or names and int64 values as strings or numbers read as the spec says.
  The one thing the OTLP/JSON spec does differently from the plain protobuf mapping is ids:
  hex there, base64 here; both are accepted.
- **OTLP/protobuf**: the body of an OTLP/HTTP protobuf request (:func:`spans_of_protobuf`).
- **ConsoleSpanExporter**: the OpenTelemetry Python SDK's pretty JSON, one object per span,
  concatenated (``context.trace_id`` ``0x…``, ``kind`` ``SpanKind.CLIENT``, ISO times,
  attributes as plain JSON). No library reads it, so it is read here.

And one live source: a finished or started SDK span (:func:`from_sdk_span`), for the span
processor. Shell code (reads files); the result is pure data.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._common import Source, iso_to_us, json_values, may_hold_surrogate, read_text, source_name
from .errors import InteropFormatError

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["OtelSpan", "from_sdk_span", "read_spans", "request_of_json", "spans_of_json", "spans_of_protobuf",
           "spans_of_request"]

_KINDS: Final = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_CODES: Final = {"UNSET": 0, "OK": 1, "ERROR": 2}
_ID_FIELDS: Final = (("traceId", 16), ("spanId", 8), ("parentSpanId", 8))


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelSpan:
    """A span, wherever it came from."""

    trace_id: str
    """32 lower-case hex digits."""
    span_id: str
    """16 lower-case hex digits."""
    parent_id: str | None
    """The parent's span id, ``None`` for a root."""
    name: str
    kind: str
    """``INTERNAL``, ``SERVER``, ``CLIENT``, ``PRODUCER``, ``CONSUMER`` or ``UNSPECIFIED``."""
    start_ns: int
    end_ns: int
    status_code: int
    """0 unset, 1 ok, 2 error."""
    status_message: str | None
    attributes: Mapping[str, Any]
    events: tuple[tuple[str, int, Mapping[str, Any]], ...] = ()
    """``(name, time in ns, attributes)``."""
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str | None = None
    where: str = ""
    """``file:line`` the span was read from, for messages."""


def read_spans(src: Source | Mapping[str, Any]) -> list[OtelSpan]:
    """Every span of an OTLP/JSON or ConsoleSpanExporter file (or a parsed request).

    Raises:
        InteropFormatError: naming the file and line of what is not JSON or not a span.
    """
    if isinstance(src, Mapping):
        return spans_of_json(src, "<request>", 1)
    name = source_name(src)
    text = read_text(src)
    # Parsed JSON holds a lone surrogate only where the text holds one, itself or as a JSON
    # escape (a file decoded from UTF-8: only as an escape): a text with neither needs no
    # walk of each request for one (_check_text).
    unicode = not may_hold_surrogate(text)
    spans: list[OtelSpan] = []
    for line, value in json_values(text, name):
        for item in (value if isinstance(value, list) else [value]):
            if isinstance(item, Mapping) and "resourceSpans" in item:
                spans.extend(spans_of_json(item, name, line, unicode=unicode))
            elif isinstance(item, Mapping) and "context" in item and "name" in item:
                spans.append(_console(item, name, line))
            else:
                raise InteropFormatError(name, line, "neither an OTLP ExportTraceServiceRequest "
                                                     "(resourceSpans) nor a ConsoleSpanExporter span")
    return spans


# --- OTLP/JSON: read directly where it is plain, else through the official protobuf messages ---


def spans_of_json(request: Mapping[str, Any], name: str, line: int | None, *,
                  unicode: bool = False) -> list[OtelSpan]:
    """The spans of an OTLP/JSON ``ExportTraceServiceRequest``.

    A request in the shape exporters write (hex ids, enums and int64 values as the spec's JSON
    mapping writes them) is read directly; anything else (base64 ids, values of another type,
    bytes values, a malformed field) goes through protobuf's JSON mapping, which reads what the
    mapping allows and names what it refuses. The direct reader exists for speed: protobuf's
    JSON mapping is pure Python and took three quarters of an import's time.

    Args:
        unicode: the caller knows that no string of ``request`` holds a lone surrogate (it
            read the JSON text), so it is not looked for.

    Raises:
        InteropFormatError: not an ``ExportTraceServiceRequest`` (names the field), or text
            that is not valid Unicode.
    """
    if not unicode:
        _check_text(request, name, line)
    where = f"{name}:{line}"
    try:
        return list(_plain_spans(request, where))
    except _NotPlain:
        return spans_of_request(request_of_json(request, name, line), where)


class _NotPlain(Exception):
    """The direct reader met something only protobuf's JSON mapping decides."""


def _plain_spans(request: Mapping[str, Any], where: str) -> Iterator[OtelSpan]:
    for rs in _plain_list(request.get("resourceSpans")):
        rs = _plain_obj(rs)
        resource = _plain_attrs(_plain_obj(rs.get("resource")).get("attributes"))
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")
        for ss in _plain_list(scopes):
            ss = _plain_obj(ss)
            scope_obj = _plain_obj(ss.get("scope") if "scope" in ss else ss.get("instrumentationLibrary"))
            scope = _plain_str(scope_obj.get("name")) or None
            for span in _plain_list(ss.get("spans")):
                yield _plain_span(_plain_obj(span), resource, scope, where)


def _plain_span(span: Mapping[str, Any], resource: Mapping[str, Any], scope: str | None, where: str) -> OtelSpan:
    trace_id = _plain_id(span.get("traceId"), 16)
    span_id = _plain_id(span.get("spanId"), 8)
    if trace_id is None or span_id is None:
        raise _NotPlain  # protobuf's path says what is missing
    status = _plain_obj(span.get("status"))
    start = _plain_uint(span.get("startTimeUnixNano"))
    events = tuple((_plain_str(e.get("name")), _plain_uint(e.get("timeUnixNano")), _plain_attrs(e.get("attributes")))
                   for e in map(_plain_obj, _plain_list(span.get("events"))))
    return OtelSpan(trace_id=trace_id, span_id=span_id, parent_id=_plain_id(span.get("parentSpanId"), 8),
                    name=_plain_str(span.get("name")), kind=_KINDS[_plain_enum(span.get("kind"), _KIND_NAMES)],
                    start_ns=start, end_ns=max(start, _plain_uint(span.get("endTimeUnixNano"))),
                    status_code=_plain_enum(status.get("code"), _CODE_NAMES),
                    status_message=_plain_str(status.get("message")) or None,
                    attributes=_plain_attrs(span.get("attributes")), events=events,
                    resource=resource, scope=scope, where=where)


_KIND_NAMES: Final = {f"SPAN_KIND_{v}": k for k, v in _KINDS.items()}
_CODE_NAMES: Final = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_UINT64: Final = 2**64


def _plain_obj(value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise _NotPlain
    return value


def _plain_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise _NotPlain
    return value


def _plain_str(value: Any) -> str:
    if value is None:
        return ""
    if type(value) is not str:
        raise _NotPlain
    return value


def _plain_id(value: Any, size: int) -> str | None:
    """A hex id (``None`` when missing, empty or all zeros); anything else is not plain."""
    if value is None or value == "":
        return None
    if type(value) is not str or len(value) != size * 2 or not _HEX.issuperset(value):
        raise _NotPlain
    text = value.lower()
    return None if text == "0" * (size * 2) else text


def _plain_uint(value: Any) -> int:
    if value is None:
        return 0
    if type(value) is str and value.isascii() and value.isdigit():
        n = int(value)
    elif type(value) is int:
        n = value
    else:
        raise _NotPlain
    if not 0 <= n < _UINT64:
        raise _NotPlain
    return n


def _plain_enum(value: Any, names: Mapping[str, int]) -> int:
    if value is None:
        return 0
    if type(value) is int and value in names.values():
        return value
    if type(value) is str and value in names:
        return names[value]
    raise _NotPlain


def _plain_attrs(items: Any) -> dict[str, Any]:
    out = {}
    for kv in _plain_list(items):
        kv = _plain_obj(kv)
        key = _plain_str(kv.get("key"))
        value = kv.get("value")
        if type(value) is dict and len(value) == 1:  # most values: a string, read here
            text = value.get("stringValue")
            if type(text) is str:
                out[key] = text
                continue
        out[key] = _plain_value(value)
    return out


def _plain_value(value: Any) -> Any:
    """The Python value of an OTLP/JSON ``AnyValue`` in its plain shapes."""
    v = _plain_obj(value)
    if not v:
        return None
    if len(v) != 1:
        raise _NotPlain
    [(kind, x)] = v.items()
    if kind == "stringValue" and type(x) is str:
        return x
    if kind == "boolValue" and type(x) is bool:
        return x
    if kind == "intValue" and (type(x) is int or (type(x) is str and x.removeprefix("-").isdigit() and x.isascii())):
        n = int(x)
        if -2**63 <= n < 2**63:
            return n
    if kind == "doubleValue" and type(x) in (int, float) and math.isfinite(x):
        return float(x)
    if kind == "arrayValue":
        return [_plain_value(item) for item in _plain_list(_plain_obj(x).get("values"))]
    if kind == "kvlistValue":
        return _plain_attrs(_plain_obj(x).get("values"))
    raise _NotPlain  # bytes values, values of another type: protobuf's mapping decides


# --- OTLP, through the official protobuf messages ---------------------------------------------


def _b64_id(value: Any, size: int, name: str, line: int | None, what: str) -> str:
    """An id in the base64 protobuf's JSON mapping wants, from OTLP/JSON's hex (or base64)."""
    text = str(value)
    if len(text) == size * 2:
        try:
            return base64.b64encode(bytes.fromhex(text)).decode("ascii")
        except ValueError:
            pass
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise InteropFormatError(name, line, f"{what} {text!r} is neither {size * 2} hex digits nor "
                                             f"base64 of {size} bytes", field=what)
    return text


def _json_span(span: Any, name: str, line: int | None) -> Any:
    if not isinstance(span, Mapping):
        return span  # json_format names what is wrong
    out = dict(span)
    for key, size in _ID_FIELDS:
        if out.get(key) not in (None, ""):
            out[key] = _b64_id(out[key], size, name, line, key)
    if isinstance(out.get("links"), list):
        out["links"] = [_json_span(link, name, line) for link in out["links"]]
    return out


def _json_scope(ss: Any, name: str, line: int | None) -> Any:
    if not isinstance(ss, Mapping):
        return ss
    out = {k: v for k, v in ss.items() if k not in ("instrumentationLibrary", "spans")}
    if "scope" not in out and isinstance(ss.get("instrumentationLibrary"), Mapping):
        out["scope"] = ss["instrumentationLibrary"]  # the name before OTLP 0.15
    spans = ss.get("spans")
    out["spans"] = [_json_span(s, name, line) for s in spans] if isinstance(spans, list) else spans
    return out


def request_of_json(request: Mapping[str, Any], name: str, line: int | None) -> ExportTraceServiceRequest:
    """An OTLP/JSON ``ExportTraceServiceRequest`` (hex or base64 ids) as the protobuf message.

    Raises:
        InteropFormatError: not an ``ExportTraceServiceRequest`` (names what protobuf refused).
    """
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    resources = []
    for rs in _items(request.get("resourceSpans"), f"{name}:{line}", "resourceSpans"):
        if isinstance(rs, Mapping):
            scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
            rs = {k: v for k, v in rs.items() if k not in ("scopeSpans", "instrumentationLibrarySpans")}
            rs["scopeSpans"] = [_json_scope(ss, name, line) for ss in scopes] if isinstance(scopes, list) \
                else scopes
        resources.append(rs)
    _check_text(resources, name, line)
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict({"resourceSpans": resources}, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise _parse_error(exc, name, line) from None
    return message


def _check_text(value: Any, name: str, line: int | None) -> None:
    """Refuse text that is not Unicode (a lone surrogate, as ``\\udc80`` in JSON may write):
    protobuf's parser fails on it inside C with a ``SystemError`` instead of a parse error."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InteropFormatError(name, line, f"holds text that is not valid Unicode ({exc.reason} "
                                             f"at character {exc.start})") from None


def _parse_error(exc: Exception, name: str, line: int | None) -> InteropFormatError:
    """protobuf's parse error, naming the innermost field it names ("Failed to parse X field")."""
    text = str(exc)
    fields = re.findall(r"Failed to parse (\w+) field", text)
    problem = text.rsplit("field: ", 1)[-1] if fields else text
    return InteropFormatError(name, line, f"not an OTLP ExportTraceServiceRequest ({problem})",
                              field=fields[-1] if fields else None)


def spans_of_protobuf(data: bytes, where: str = "<protobuf>") -> list[OtelSpan]:
    """The spans of an OTLP/HTTP protobuf body.

    Raises:
        InteropFormatError: the bytes are not an ``ExportTraceServiceRequest``.
    """
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    try:
        request = ExportTraceServiceRequest.FromString(data)
    except DecodeError as exc:
        raise InteropFormatError(where, None, f"not an OTLP ExportTraceServiceRequest ({exc})") from None
    return spans_of_request(request, where)


def _value(v: AnyValue) -> Any:
    """The Python value of an OTLP ``AnyValue``."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode("ascii")
    return None if kind is None else getattr(v, kind)


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


def _hex(raw: bytes, size: int, where: str, what: str) -> str | None:
    """A hex id; ``None`` for an empty or all-zero id."""
    if not raw or raw == bytes(size):
        return None
    if len(raw) != size:
        path, _, line = where.rpartition(":")
        raise InteropFormatError(path if line.isdigit() else where, int(line) if line.isdigit() else None,
                                 f"{what} of {len(raw)} bytes; an id has {size}", field=what)
    return raw.hex()


def spans_of_request(request: ExportTraceServiceRequest, where: str) -> list[OtelSpan]:
    """The spans of an ``ExportTraceServiceRequest`` message."""
    return list(_spans_of_request(request, where))


def _spans_of_request(request: ExportTraceServiceRequest, where: str) -> Iterator[OtelSpan]:
    for rs in request.resource_spans:
        resource = _attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name or None
            for span in ss.spans:
                trace_id = _hex(span.trace_id, 16, where, "traceId")
                span_id = _hex(span.span_id, 8, where, "spanId")
                if trace_id is None or span_id is None:
                    path, _, line = where.rpartition(":")
                    raise InteropFormatError(path if line.isdigit() else where,
                                             int(line) if line.isdigit() else None,
                                             "a span without a trace id or span id", field="spanId")
                start = span.start_time_unix_nano
                yield OtelSpan(trace_id=trace_id, span_id=span_id,
                               parent_id=_hex(span.parent_span_id, 8, where, "parentSpanId"),
                               name=span.name, kind=_KINDS.get(span.kind, "UNSPECIFIED"),
                               # an unfinished span is sent with end 0: it ends where it starts
                               start_ns=start, end_ns=max(start, span.end_time_unix_nano),
                               status_code=span.status.code, status_message=span.status.message or None,
                               attributes=_attrs(span.attributes),
                               events=tuple((e.name, e.time_unix_nano, _attrs(e.attributes))
                                            for e in span.events),
                               resource=resource, scope=scope, where=where)


# --- a live SDK span ----------------------------------------------------------------------------


def _plain_attributes(attributes: Any) -> dict[str, Any]:
    """SDK attributes (tuples for arrays) as JSON-like data."""
    if not attributes:
        return {}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()}


def from_sdk_span(span: ReadableSpan, *, end: bool = True, resource: bool = False, copy: bool = True,
                  ids: tuple[str, str] | None = None) -> OtelSpan:
    """An OpenTelemetry SDK span, as it is now.

    Args:
        end: the span ended (``False``: just started, no end time or status yet).
        resource: with the resource's attributes (the live processor does not need them).
        copy: copy the attributes and events as JSON-like data (``False``: the span's own
            read-only attributes and no events, for a span only its status is read from).
        ids: its trace and span id in hex, when the caller has them already.
    """
    parent = span.parent
    if ids is None:
        context = span.get_span_context()
        ids = (f"{context.trace_id:032x}", f"{context.span_id:016x}") if context else ("0" * 32, "0" * 16)
    start = span.start_time or 0
    status = span.status
    return OtelSpan(trace_id=ids[0], span_id=ids[1],
                    parent_id=f"{parent.span_id:016x}" if parent is not None else None,
                    name=span.name, kind=span.kind.name,
                    start_ns=start, end_ns=max(start, span.end_time or start) if end else start,
                    status_code=status.status_code.value if end else 0,
                    status_message=status.description or None if end else None,
                    attributes=_plain_attributes(span.attributes) if copy else (span.attributes or {}),
                    events=tuple((e.name, e.timestamp, _plain_attributes(e.attributes))
                                 for e in span.events) if end and copy and span.events else (),
                    resource=dict(span.resource.attributes) if resource and span.resource is not None else {},
                    scope=span.instrumentation_scope.name if span.instrumentation_scope else None,
                    where="live")


# --- ConsoleSpanExporter ------------------------------------------------------------------------


def _split(where: str) -> tuple[str, int | None]:
    path, _, line = where.rpartition(":")
    return (path, int(line)) if line.isdigit() else (where, None)



def _obj(value: Any, where: str, field: str) -> Mapping[str, Any]:
    """``value`` if it is an object, ``{}`` if it is missing; else the file is malformed."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InteropFormatError(*_split(where), f"must be an object, got {type(value).__name__}", field=field)
    return value


def _items(value: Any, where: str, field: str) -> list[Any]:
    """``value`` if it is a list, ``[]`` if it is missing; else the file is malformed."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InteropFormatError(*_split(where), f"must be a list, got {type(value).__name__}", field=field)
    return value


#: Span times must fall in years 1970..9999, as nanoseconds since the epoch.
_NS_MAX = 253_402_300_799_999_999_999

def _console_id(value: Any, size: int, where: str, what: str) -> str | None:
    text = str(value or "").removeprefix("0x")
    if not text:
        return None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raw = b""
    if len(raw) != size:
        raise InteropFormatError(*_split(where), f"{what} {text!r} is not {size * 2} hex digits", field=what)
    return None if raw == bytes(size) else raw.hex()


def _kind(value: Any) -> str:
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return _KINDS.get(int(value), "UNSPECIFIED")
    text = str(value or "UNSPECIFIED")
    return text.removeprefix("SPAN_KIND_").removeprefix("SpanKind.")


def _ns(text: Any, where: str, what: str) -> int:
    if text is None:
        return 0
    try:
        ns = iso_to_us(str(text)) * 1000
    except (ValueError, OverflowError):
        raise InteropFormatError(*_split(where), f"not an ISO time: {text!r}", field=what) from None
    if not 0 <= ns <= _NS_MAX:
        raise InteropFormatError(*_split(where), f"not a time in years 1970..9999: {text!r}", field=what)
    return ns


def _plain(value: Any, where: str, field: str) -> dict[str, Any]:
    """A ConsoleSpanExporter attribute map (plain JSON)."""
    return dict(_obj(value, where, field))


def _console(span: Mapping[str, Any], name: str, line: int) -> OtelSpan:
    where = f"{name}:{line}"
    context = span.get("context") or {}
    if not isinstance(context, Mapping):
        raise InteropFormatError(*_split(where), f"must be an object, got {type(context).__name__}",
                                 field="context")
    trace_id = _console_id(context.get("trace_id"), 16, where, "trace_id")
    span_id = _console_id(context.get("span_id"), 8, where, "span_id")
    if trace_id is None or span_id is None:
        raise InteropFormatError(name, line, "a span without a trace id or span id", field="context")
    start = _ns(span.get("start_time"), where, "start_time")
    status = _obj(span.get("status"), where, "status")
    events = tuple((str(e.get("name") or ""), _ns(e.get("timestamp"), where, "timestamp"),
                    _plain(e.get("attributes"), where, "events[].attributes"))
                   for e in (_obj(x, where, "events[]") for x in _items(span.get("events"), where, "events")))
    description = status.get("description")
    return OtelSpan(trace_id=trace_id, span_id=span_id,
                    parent_id=_console_id(span.get("parent_id"), 8, where, "parent_id"),
                    name=str(span.get("name") or ""), kind=_kind(span.get("kind")),
                    start_ns=start, end_ns=max(start, _ns(span.get("end_time"), where, "end_time")),
                    status_code=_CODES.get(str(status.get("status_code") or "UNSET"), 0),
                    status_message=str(description) if description else None,
                    attributes=_plain(span.get("attributes"), where, "attributes"), events=events,
                    resource=_plain(_obj(span.get("resource"), where, "resource").get("attributes"), where,
                                    "resource.attributes"),
                    where=where)
