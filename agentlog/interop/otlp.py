"""OTLP/JSON: a run as an OpenTelemetry trace with the GenAI conventions, and traces back in.

:func:`export_otlp` turns a run into one ``ExportTraceServiceRequest`` (``resourceSpans`` →
``scopeSpans`` → ``spans``) in the OTLP/JSON encoding: trace and span ids as hex, times as
nanosecond strings, enum values as integers, attributes as ``{key, value: {stringValue |
intValue | doubleValue | boolValue | arrayValue}}``. :func:`import_otlp` reads such files
(and the SDK's ``ConsoleSpanExporter`` output) back, one run per trace; see
:mod:`agentlog.interop.otlp_import` for the mapping in.

Out (agentlog → OTLP):

=====================================  ========================================================
agentlog                               OTLP
=====================================  ========================================================
the run                                a root span (``agentlog.run.root``) from the first to the
                                       last event; trace id = sha256("agentlog:" + run id)[:32]
``span.started`` / ``span.ended``      a span: id = sha256(run id, span id)[:16], parent link,
                                       start/end times, status OK, or ERROR (code 2) with the
                                       error as message; a span never ended ends at the run's end
span kind ``llm``                      CLIENT span ``chat {model}``: ``gen_ai.operation.name``
                                       = chat, ``gen_ai.request.model``,
                                       ``gen_ai.response.model``, ``gen_ai.response.id``,
                                       ``gen_ai.response.finish_reasons``,
                                       ``gen_ai.usage.input_tokens`` / ``output_tokens`` /
                                       ``cache_read.input_tokens`` /
                                       ``cache_creation.input_tokens``,
                                       ``gen_ai.input.messages`` / ``output.messages`` (JSON),
                                       ``agentlog.cost_usd``; OpenInference ``llm.model_name``
                                       and ``llm.token_count.*`` too
span kind ``tool``                     INTERNAL span ``execute_tool {name}``:
                                       ``gen_ai.tool.name``, ``gen_ai.tool.call.id``
                                       (idempotency key), ``gen_ai.tool.call.arguments`` /
                                       ``result`` (JSON)
span kind ``agent``                    INTERNAL span ``invoke_agent {name}``,
                                       ``gen_ai.agent.name``
other events                           span events of the event's span (the root's when it has
                                       none), named by type (``error`` → ``exception`` with
                                       ``exception.message``), with the payload as JSON in
                                       ``agentlog.payload``
=====================================  ========================================================

What does not map: blob contents go into message attributes as text (binary blobs as a
reference that no OTLP reader resolves); ``caused_by`` links other than request → response
and start → end are not kept; a span's events keep their order but ``llm.request`` /
``llm.response`` come back at the span's start and end. JSONL is the lossless format.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..canonical import canonical_json
from ..events import (
    ERROR,
    LLM_REQUEST,
    LLM_RESPONSE,
    RUN_FAILED,
    SPAN_ENDED,
    SPAN_STARTED,
    TOOL_CALL,
    TOOL_RESULT,
    USAGE_FIELDS,
    BlobRef,
    CallFailed,
    Event,
    LLMRequest,
    LLMResponse,
    SpanEnded,
    SpanStarted,
    ToolCall,
    ToolResult,
)
from . import semconv as sc
from .messages import to_parts

if TYPE_CHECKING:
    from ..store import Run, Store
    from ._common import Source

__all__ = ["export_otlp", "import_otlp", "span_id_of", "trace_id_of", "write_otlp"]

#: OTLP ``Span.SpanKind`` and ``Status.StatusCode`` values (the JSON encoding uses the integers).
KIND_INTERNAL, KIND_SERVER, KIND_CLIENT = 1, 2, 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
_OTLP_KIND: Final = {"llm": KIND_CLIENT, "http": KIND_CLIENT, "embedding": KIND_CLIENT}
_OI_KIND: Final = {"llm": "LLM", "tool": "TOOL", "agent": "AGENT", "chain": "CHAIN",
                   "retriever": "RETRIEVER", "embedding": "EMBEDDING"}
_MAX_TEXT_BLOB: Final = 1 << 20  # read text blobs up to 1 MiB into message attributes


def trace_id_of(run_id: str) -> str:
    """The OTLP trace id (32 hex) of a run: the same run gives the same trace id.

    >>> trace_id_of("r1")
    'b702e4861e9823c471100c67c1cd72f2'
    """
    return hashlib.sha256(f"agentlog:{run_id}".encode()).hexdigest()[:32]


def span_id_of(run_id: str, span_id: str) -> str:
    """The OTLP span id (16 hex) of an agentlog span of a run.

    >>> len(span_id_of("r1", "s3"))
    16
    """
    return hashlib.sha256(f"{run_id}\x00{span_id}".encode()).hexdigest()[:16]


# --- attribute values ---------------------------------------------------------------------------


def any_value(value: Any) -> dict[str, Any] | None:
    """An OTLP ``AnyValue`` in the JSON encoding; mappings become JSON text, ``None`` → ``None``.

    >>> any_value(3), any_value(True), any_value(["a", 1.5])
    ({'intValue': '3'}, {'boolValue': True}, {'arrayValue': {'values': [{'stringValue': 'a'}, {'doubleValue': 1.5}]}})
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 is a string in proto3 JSON
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) for v in value):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": _json(value)}


def _attributes(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in attrs.items():
        encoded = any_value(value)
        if encoded is not None:
            out.append({"key": key, "value": encoded})
    return out


def _inert(value: Any) -> Any:
    """A value with blob references turned into plain objects no reader resolves."""
    if isinstance(value, BlobRef):
        return {"blob": value.digest, "size": value.size, "media_type": value.media_type}
    if isinstance(value, Mapping):
        return {str(k): _inert(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_inert(v) for v in value]
    return value


def _json(value: Any) -> str:
    return canonical_json(_inert(value))


def _readable(value: Any) -> Any:
    """Blob references in message content read back as text (small text blobs only)."""
    if isinstance(value, BlobRef):
        if value.media_type.startswith("text/") and value.size <= _MAX_TEXT_BLOB and value.reader:
            return value.text()
        return _inert(value)
    if isinstance(value, Mapping):
        return {str(k): _readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_readable(v) for v in value]
    return value


# --- the spans of a run ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Span:
    """An agentlog span being turned into an OTLP span."""

    id: str
    name: str
    kind: str
    parent: str | None
    start: int
    end: int | None = None
    status: str | None = None
    error: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    request: Event | None = None
    response: Event | None = None
    events: list[Event] = field(default_factory=list)


def _collect(events: Iterable[Event]) -> tuple[list[_Span], list[Event], int, int, bool]:
    """Spans in start order, the events outside any span, first and last ts, and failure."""
    spans: dict[str, _Span] = {}
    loose: list[Event] = []
    first = last = None
    failed = False
    for event in events:
        first = event.ts if first is None else first
        last = event.ts if last is None else max(last, event.ts)
        span = spans.get(event.span_id) if event.span_id is not None else None
        if event.type == SPAN_STARTED and event.span_id is not None:
            body = SpanStarted.of(event)
            spans[event.span_id] = _Span(id=event.span_id, name=str(body.name or event.span_id),
                                         kind=str(body.kind or "chain"), parent=body.parent, start=event.ts,
                                         attributes=dict(body.attributes or {}))
        elif event.type == SPAN_ENDED and span is not None:
            ended = SpanEnded.of(event)
            error = ended.error.text() if isinstance(ended.error, BlobRef) else ended.error
            span.end, span.status, span.error = event.ts, ended.status, error
            span.kind = ended.kind or span.kind
            span.attributes.update(ended.attributes or {})
        elif event.type in (LLM_REQUEST, TOOL_CALL) and span is not None and span.request is None:
            span.request = event
        elif event.type in (LLM_RESPONSE, TOOL_RESULT) and span is not None and span.response is None:
            span.response = event
        elif span is not None:
            span.events.append(event)
        else:
            failed = failed or event.type == RUN_FAILED
            loose.append(event)
    return list(spans.values()), loose, first or 0, last or 0, failed


def _llm_attributes(span: _Span) -> dict[str, Any]:
    req = LLMRequest.of(span.request) if span.request is not None else None
    out: dict[str, Any] = {sc.GEN_AI_OPERATION: sc.OP_CHAT, sc.OI_KIND: sc.OI_LLM,
                           sc.GEN_AI_REQUEST_MODEL: req.model if req is not None else None}
    params = req.params if req is not None else None
    if isinstance(params, Mapping):
        for name, key in sc.GEN_AI_REQUEST_PARAMS.items():
            if isinstance(params.get(name), (int, float)):
                out[key] = params[name]
        if params:
            out[sc.AL_PARAMS] = _json(params)
    if req is not None:
        out[sc.GEN_AI_INPUT_MESSAGES] = _json(to_parts(_readable(req.messages)))
        if req.key:
            out[sc.AL_KEY] = req.key
    if span.response is not None:
        out.update(_response_attributes(span.response, req.model if req is not None else None))
    return out


def _response_attributes(event: Event, asked: str | None) -> dict[str, Any]:
    res = LLMResponse.of(event)
    model = event.model or res.model
    out: dict[str, Any] = {
        sc.GEN_AI_RESPONSE_MODEL: model, sc.OI_MODEL: model or asked, sc.GEN_AI_RESPONSE_ID: res.id,
        sc.GEN_AI_INPUT_TOKENS: event.input_tokens, sc.GEN_AI_OUTPUT_TOKENS: event.output_tokens,
        sc.GEN_AI_CACHE_READ: event.cached_tokens,
        sc.GEN_AI_CACHE_WRITE: res.usage and res.usage.cache_write_tokens or None,
        sc.GEN_AI_REASONING_TOKENS: res.usage and res.usage.reasoning_tokens or None,
        sc.OI_PROMPT_TOKENS: event.input_tokens, sc.OI_COMPLETION_TOKENS: event.output_tokens,
        sc.OI_CACHE_READ: event.cached_tokens, sc.AL_COST: event.cost_usd, sc.AL_COST_SOURCE: res.cost_source,
        sc.AL_CACHE_HIT: res.cache_hit, sc.AL_DURATION: event.duration_ms}
    if event.input_tokens is not None and event.output_tokens is not None:
        out[sc.OI_TOTAL_TOKENS] = event.input_tokens + event.output_tokens
    if res.finish_reason:
        out[sc.GEN_AI_FINISH_REASONS] = [str(res.finish_reason)]
    if isinstance(res.message, Mapping):
        parts = to_parts([_readable(res.message)])
        if res.finish_reason:
            parts[0]["finish_reason"] = res.finish_reason
        out[sc.GEN_AI_OUTPUT_MESSAGES] = _json(parts)
    return out


def _tool_attributes(span: _Span) -> dict[str, Any]:
    call = ToolCall.of(span.request) if span.request is not None else None
    name = (call.name if call is not None else None) or span.name
    out: dict[str, Any] = {sc.GEN_AI_OPERATION: sc.OP_EXECUTE_TOOL, sc.OI_KIND: "TOOL",
                           sc.GEN_AI_TOOL_NAME: name, sc.OI_TOOL_NAME: name,
                           sc.GEN_AI_TOOL_CALL_ID: call.idempotency_key if call is not None else None}
    if call is not None:
        out[sc.GEN_AI_TOOL_ARGUMENTS] = out[sc.OI_INPUT_VALUE] = _json(_readable(call.args or {}))
        out[sc.AL_KEY] = call.key
    if span.response is not None:
        result = ToolResult.of(span.response)
        if result.error is None:
            out[sc.GEN_AI_TOOL_RESULT] = out[sc.OI_OUTPUT_VALUE] = _json(_readable(result.result))
        else:
            out[sc.AL_TOOL_ERROR], out[sc.ERROR_TYPE] = str(_readable(result.error)), result.type or "Error"
        out[sc.AL_DURATION] = span.response.duration_ms
        out[sc.AL_COST] = span.response.cost_usd
    return out


def _span_attributes(span: _Span) -> tuple[str, dict[str, Any]]:
    """The OTLP name and attributes of a span, by its kind."""
    base: dict[str, Any] = {sc.AL_SPAN_ID: span.id, sc.AL_SPAN_NAME: span.name, sc.AL_SPAN_KIND: span.kind}
    if span.attributes:
        base[sc.AL_SPAN_ATTRIBUTES] = _json(span.attributes)
        base.update({k: v for k, v in span.attributes.items() if k not in base})
    if span.kind == "llm":
        base.update(_llm_attributes(span))
        return f"{sc.OP_CHAT} {base.get(sc.GEN_AI_REQUEST_MODEL) or span.name}", base
    if span.kind == "tool":
        base.update(_tool_attributes(span))
        return f"{sc.OP_EXECUTE_TOOL} {base[sc.GEN_AI_TOOL_NAME]}", base
    if span.kind == "agent":
        base.update({sc.GEN_AI_OPERATION: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: span.name, sc.OI_KIND: "AGENT"})
        return f"{sc.OP_INVOKE_AGENT} {span.name}", base
    base[sc.OI_KIND] = _OI_KIND.get(span.kind, "CHAIN")
    return span.name, base


def _span_event(event: Event) -> dict[str, Any]:
    attrs: dict[str, Any] = {sc.AL_TYPE: event.type, sc.AL_SEQ: event.seq, sc.AL_ACTOR: event.actor,
                             sc.AL_CAUSED_BY: event.caused_by, sc.AL_PAYLOAD: _json(event.payload)}
    for name in USAGE_FIELDS:
        attrs[sc.AL_COLUMN_PREFIX + name] = getattr(event, name)
    name = event.type
    if event.type == ERROR:
        failed = CallFailed.of(event)
        name = sc.EXCEPTION_EVENT
        attrs[sc.EXCEPTION_TYPE] = failed.type or "Error"
        attrs[sc.EXCEPTION_MESSAGE] = str(_readable(failed.error))
    return {"timeUnixNano": str(event.ts * 1000), "name": name, "attributes": _attributes(attrs)}


def _otlp_span(span: _Span, trace_id: str, run_id: str, parent: str, end: int) -> dict[str, Any]:
    name, attrs = _span_attributes(span)
    status: dict[str, Any] = {"code": STATUS_UNSET}
    if span.status == "error":
        status = {"code": STATUS_ERROR, "message": str(span.error or "error")}
    elif span.status is not None:
        status = {"code": STATUS_OK}
    if span.end is None:
        attrs[sc.AL_SPAN_OPEN] = True
    return {"traceId": trace_id, "spanId": span_id_of(run_id, span.id), "parentSpanId": parent,
            "name": name, "kind": _OTLP_KIND.get(span.kind, KIND_INTERNAL),
            "startTimeUnixNano": str(span.start * 1000),
            "endTimeUnixNano": str((span.end if span.end is not None else end) * 1000),
            "attributes": _attributes(attrs), "events": [_span_event(e) for e in span.events],
            "status": status}


def export_otlp(run: Run, *, service_name: str = "agentlog") -> dict[str, Any]:
    """A run as an OTLP/JSON ``ExportTraceServiceRequest``.

    Args:
        run: the run (a fork with its parent's prefix).
        service_name: the ``service.name`` resource attribute.

    Returns:
        ``{"resourceSpans": [...]}``, ready for ``json.dumps`` or an OTLP/HTTP JSON endpoint.
    """
    from ._common import no_gc

    with no_gc():
        return _export(run, service_name)


def _export(run: Run, service_name: str) -> dict[str, Any]:
    from .._version import __version__

    spans, loose, first, last, failed = _collect(run.iter_events())
    trace_id = trace_id_of(run.id)
    root_id = span_id_of(run.id, "<run>")
    tags = run.meta.get("tags")
    root_attrs = {sc.AL_ROOT: True, sc.AL_RUN_ID: run.id, sc.AL_RUN_NAME: run.name,
                  sc.AL_RUN_TAGS: _json(tags) if tags else None, sc.OI_KIND: "AGENT",
                  sc.GEN_AI_OPERATION: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: run.name or run.id}
    root = {"traceId": trace_id, "spanId": root_id, "parentSpanId": "", "name": run.name or run.id,
            "kind": KIND_INTERNAL, "startTimeUnixNano": str(first * 1000),
            "endTimeUnixNano": str(last * 1000), "attributes": _attributes(root_attrs),
            "events": [_span_event(e) for e in loose],
            "status": {"code": STATUS_ERROR, "message": "run failed"} if failed else {"code": STATUS_UNSET}}
    known = {s.id for s in spans}
    out = [root]
    for span in spans:
        parent = span_id_of(run.id, span.parent) if span.parent in known else root_id
        out.append(_otlp_span(span, trace_id, run.id, parent, last))
    resource = {"attributes": _attributes({sc.SERVICE_NAME: service_name, sc.AL_RUN_ID: run.id})}
    scope = {"name": "agentlog", "version": __version__}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": out}]}]}


def write_otlp(run: Run, path: str | os.PathLike[str], *, service_name: str = "agentlog") -> int:
    """Write :func:`export_otlp` of a run to a file, as one JSON line (the collector's file
    exporter format).

    Returns:
        The number of spans written (the run's root span included).
    """
    from ._common import no_gc

    request = export_otlp(run, service_name=service_name)
    with no_gc():
        text = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
    Path(path).write_text(text + "\n", encoding="utf-8")
    return sum(len(ss["spans"]) for rs in request["resourceSpans"] for ss in rs["scopeSpans"])


def import_otlp(src: Source | Mapping[str, Any], store: Store | str | os.PathLike[str], *,
                name: str | None = None) -> list[Run]:
    """Import traces: one run per trace id (``otlp-<trace id>``), in the order of the traces'
    first spans.

    Idempotent: a trace whose run is in the store already gets only the spans the run does not
    hold yet, so importing the same file twice leaves the run as it is, and a file with more
    spans of the trace extends it. The runs cannot be replayed or forked
    (:attr:`~agentlog.Run.replayable` says why): they hold what a tracer saw, not a program's
    recorded answers.

    Reads an OTLP/JSON ``ExportTraceServiceRequest`` (one object, or one per line as the
    collector's file exporter writes them; hex or base64 ids, integer or named enums, int64 as
    strings or numbers), the OpenTelemetry SDK's ``ConsoleSpanExporter`` output (its pretty
    JSON per span, concatenated), or an already parsed request. Spans with GenAI or
    OpenInference attributes become model and tool calls; see
    :mod:`agentlog.interop.otlp_import`.

    Args:
        src: a path, an open text stream, or a request as a mapping.
        store: the store (or its path) to import into.
        name: the runs' name; default: the trace's root span name.

    Returns:
        The run of each trace (new, extended or as it was).

    Raises:
        InteropFormatError: not JSON, or JSON that is neither OTLP nor console spans (names
            the file and line).
    """
    from ._common import no_gc, store_of
    from .otlp_import import runs_from_spans
    from .otlp_read import read_spans

    with no_gc():
        return runs_from_spans(read_spans(src), store_of(store), name=name)
