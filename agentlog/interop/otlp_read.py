"""Read spans from the files other tracers write, into one plain shape.

Two formats:

- **OTLP/JSON**: an ``ExportTraceServiceRequest`` (``resourceSpans`` → ``scopeSpans`` →
  ``spans``), one per file or one per line (the collector's ``file`` exporter). Ids in hex, as
  the OTLP spec says, or in base64, as a plain protobuf JSON printer writes them; enum values
  as integers or names; int64 values as strings or numbers.
- **ConsoleSpanExporter**: the OpenTelemetry Python SDK's pretty JSON, one object per span,
  concatenated (``context.trace_id`` ``0x…``, ``kind`` ``SpanKind.CLIENT``, ISO times,
  attributes as plain JSON).

Shell code (reads files); the result is pure data.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ._common import Source, iso_to_us, json_values, read_text, source_name
from .errors import InteropFormatError

__all__ = ["OtelSpan", "read_spans"]

_KINDS: Final = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_CODES: Final = {"STATUS_CODE_UNSET": 0, "UNSET": 0, "STATUS_CODE_OK": 1, "OK": 1,
                 "STATUS_CODE_ERROR": 2, "ERROR": 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelSpan:
    """A span, whatever file it came from."""

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
        return list(_request(src, "<request>", 1))
    name = source_name(src)
    spans: list[OtelSpan] = []
    for line, value in json_values(read_text(src), name):
        for item in (value if isinstance(value, list) else [value]):
            if isinstance(item, Mapping) and "resourceSpans" in item:
                spans.extend(_request(item, name, line))
            elif isinstance(item, Mapping) and "context" in item and "name" in item:
                spans.append(_console(item, name, line))
            else:
                raise InteropFormatError(name, line, "neither an OTLP ExportTraceServiceRequest "
                                                     "(resourceSpans) nor a ConsoleSpanExporter span")
    return spans


# --- OTLP/JSON ----------------------------------------------------------------------------------


def _id(value: Any, size: int, where: str, what: str) -> str | None:
    """A hex id from hex or base64 text; ``None`` for an empty or all-zero id."""
    if value in (None, ""):
        return None
    text = str(value)
    if len(text) == size * 2:
        try:
            bytes.fromhex(text)
            out = text.lower()
        except ValueError:
            out = ""
    else:
        out = ""
    if not out:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != size:
            raise InteropFormatError(*_split(where), f"{what} {text!r} is neither {size * 2} hex "
                                                    f"digits nor base64 of {size} bytes", field=what)
        out = raw.hex()
    return None if out == "0" * (size * 2) else out


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


def _value(v: Any, where: str = "") -> Any:
    """The Python value of an OTLP ``AnyValue`` (JSON encoding)."""
    if not isinstance(v, Mapping):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return _int(v["intValue"], where, "intValue")
    if "doubleValue" in v:
        try:
            return float(v["doubleValue"])
        except (TypeError, ValueError):
            raise InteropFormatError(*_split(where), f"not a number: {v['doubleValue']!r:.40}",
                                     field="doubleValue") from None
    if "arrayValue" in v:
        values = _obj(v["arrayValue"], where, "arrayValue").get("values")
        return [_value(x, where) for x in _items(values, where, "arrayValue.values")]
    if "kvlistValue" in v:
        return _attrs(_obj(v["kvlistValue"], where, "kvlistValue").get("values"), where)
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attrs(items: Any, where: str = "") -> dict[str, Any]:
    return {str(kv.get("key")): _value(kv.get("value"), where)
            for kv in _items(items, where, "attributes") if isinstance(kv, Mapping)}


#: Span times must fall in years 1970..9999, as nanoseconds since the epoch.
_NS_MAX = 253_402_300_799_999_999_999


def _int(value: Any, where: str, what: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise InteropFormatError(*_split(where), f"not an integer: {value!r:.40}", field=what) from None
    if isinstance(value, bool) or not -2**63 <= number < 2**64:
        raise InteropFormatError(*_split(where), f"not an int64: {value!r:.40}", field=what)
    return number


def _time(value: Any, where: str, what: str) -> int:
    number = _int(value, where, what)
    if not 0 <= number <= _NS_MAX:
        raise InteropFormatError(*_split(where), f"not a time in years 1970..9999: {number}", field=what)
    return number


def _kind(value: Any) -> str:
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return _KINDS.get(int(value), "UNSPECIFIED")
    text = str(value or "UNSPECIFIED")
    return text.removeprefix("SPAN_KIND_").removeprefix("SpanKind.")


def _request(request: Mapping[str, Any], name: str, line: int) -> Iterator[OtelSpan]:
    where = f"{name}:{line}"
    for rs in _items(request.get("resourceSpans"), where, "resourceSpans"):
        rs = _obj(rs, where, "resourceSpans[]")
        resource = _attrs(_obj(rs.get("resource"), where, "resource").get("attributes"), where)
        for ss in _items(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans"), where, "scopeSpans"):
            ss = _obj(ss, where, "scopeSpans[]")
            scope = _obj(ss.get("scope") or ss.get("instrumentationLibrary"), where, "scope").get("name")
            for span in _items(ss.get("spans"), where, "spans"):
                yield _otlp_span(_obj(span, where, "spans[]"), resource,
                                 scope if isinstance(scope, str) else None, where)


def _otlp_span(span: Mapping[str, Any], resource: Mapping[str, Any], scope: str | None,
               where: str) -> OtelSpan:
    trace_id = _id(span.get("traceId"), 16, where, "traceId")
    span_id = _id(span.get("spanId"), 8, where, "spanId")
    if trace_id is None or span_id is None:
        raise InteropFormatError(*_split(where), "a span without a trace id or span id", field="spanId")
    status = _obj(span.get("status"), where, "status")
    code = status.get("code", 0)
    events = tuple((str(e.get("name") or ""), _time(e.get("timeUnixNano", 0), where, "timeUnixNano"),
                    _attrs(e.get("attributes"), where))
                   for e in (_obj(x, where, "events[]") for x in _items(span.get("events"), where, "events")))
    start = _time(span.get("startTimeUnixNano", 0), where, "startTimeUnixNano")
    # An unfinished span is exported with end 0; it ends where it starts rather than at 1970.
    end = max(start, _time(span.get("endTimeUnixNano", 0), where, "endTimeUnixNano"))
    message = status.get("message")
    return OtelSpan(trace_id=trace_id, span_id=span_id,
                    parent_id=_id(span.get("parentSpanId"), 8, where, "parentSpanId"),
                    name=str(span.get("name") or ""), kind=_kind(span.get("kind")),
                    start_ns=start, end_ns=end,
                    status_code=_CODES.get(code, 0) if isinstance(code, str) else _code(code, where),
                    status_message=str(message) if message else None,
                    attributes=_attrs(span.get("attributes"), where), events=events, resource=resource,
                    scope=scope, where=where)


def _code(value: Any, where: str) -> int:
    code = _int(value, where, "status.code")
    return code if code in (0, 1, 2) else 0


# --- ConsoleSpanExporter ------------------------------------------------------------------------


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
    context = _obj(span.get("context"), where, "context")
    trace_id = _id(str(context.get("trace_id") or "").removeprefix("0x"), 16, where, "trace_id")
    span_id = _id(str(context.get("span_id") or "").removeprefix("0x"), 8, where, "span_id")
    if trace_id is None or span_id is None:
        raise InteropFormatError(name, line, "a span without a trace id or span id", field="context")
    parent = span.get("parent_id")
    start = _ns(span.get("start_time"), where, "start_time")
    status = _obj(span.get("status"), where, "status")
    events = tuple((str(e.get("name") or ""), _ns(e.get("timestamp"), where, "timestamp"),
                    _plain(e.get("attributes"), where, "events[].attributes"))
                   for e in (_obj(x, where, "events[]") for x in _items(span.get("events"), where, "events")))
    description = status.get("description")
    return OtelSpan(trace_id=trace_id, span_id=span_id,
                    parent_id=_id(str(parent).removeprefix("0x"), 8, where, "parent_id") if parent else None,
                    name=str(span.get("name") or ""), kind=_kind(span.get("kind")),
                    start_ns=start, end_ns=max(start, _ns(span.get("end_time"), where, "end_time")),
                    status_code=_CODES.get(str(status.get("status_code") or "UNSET"), 0),
                    status_message=str(description) if description else None,
                    attributes=_plain(span.get("attributes"), where, "attributes"), events=events,
                    resource=_plain(_obj(span.get("resource"), where, "resource").get("attributes"), where,
                                    "resource.attributes"),
                    where=where)
