"""Spans from other tracers into agentlog runs: one run per trace.

==========================================  ======================================================
span                                        agentlog events
==========================================  ======================================================
any span                                    ``span.started`` {name, kind, parent, attributes, otel
                                            ids} at its start, ``span.ended`` {name, status ok /
                                            error, error: status message} at its end
kind: ``gen_ai.operation.name`` chat /      ``llm``; ``execute_tool`` → ``tool``; ``invoke_agent``
text_completion / generate_content,         / ``create_agent`` → ``agent``;
or ``openinference.span.kind`` LLM          ``openinference.span.kind`` TOOL, AGENT, CHAIN,
                                            RETRIEVER, EMBEDDING … → lower case; an
                                            ``http.request.method`` → ``http``; else ``chain``
``llm`` span                                ``llm.request`` {key, model, messages, params} at the
                                            start; ``llm.response`` {key, model, message,
                                            finish_reason, usage, cost_source} at the end, with
                                            the usage columns; a failed call without a response →
                                            ``error`` {kind: llm.response}
model                                       request: ``gen_ai.request.model`` ·
                                            ``llm.request.model_name`` · ``llm.model_name``;
                                            response: ``gen_ai.response.model`` ·
                                            ``llm.response.model_name`` · ``llm.model_name``
tokens                                      input: ``gen_ai.usage.input_tokens`` ·
                                            ``gen_ai.usage.prompt_tokens`` ·
                                            ``llm.token_count.prompt``; output: ``…output_tokens``
                                            · ``…completion_tokens`` ·
                                            ``llm.token_count.completion``; cached:
                                            ``gen_ai.usage.cache_read.input_tokens`` ·
                                            ``llm.token_count.prompt_details.cache_read``; cache
                                            writes likewise (``cache_creation`` / ``cache_write``)
messages                                    ``gen_ai.input.messages`` / ``output.messages`` (JSON
                                            parts) · ``llm.input_messages.N.message.*`` /
                                            ``llm.output_messages.*`` · ``input.value`` JSON with
                                            ``messages``
cost                                        ``agentlog.cost_usd`` · ``llm.cost.total`` (source
                                            ``provider``); else priced from the catalog
                                            (``computed``), else unknown
``tool`` span                               ``tool.call`` {key, name, args, idempotency_key} and
                                            ``tool.result`` {key, name, result | error}; name:
                                            ``gen_ai.tool.name`` · ``tool.name`` · the span name;
                                            args: ``gen_ai.tool.call.arguments`` · ``input.value``;
                                            result: ``gen_ai.tool.call.result`` · ``output.value``
span events                                 ``exception`` → ``error`` {error, type, stacktrace};
                                            events agentlog exported → their type and payload
                                            again; others → ``otel.event`` {name, attributes}
==========================================  ======================================================

Events are in time order (ties: parents start before children and end after them), with
``ts`` from the span times (ns → µs). ``caused_by`` links a response to its request and an end
to its start. What does not map: span links, resources (kept in the run's tags:
``service.name``), and attributes of the two conventions that agentlog has no column for stay
in ``span.started``'s ``attributes``. Token counts that break ``cached ≤ input`` are read as
counted apart from the cache (Anthropic's way) and added up.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from ..events import ERROR, LLM_REQUEST, LLM_RESPONSE, SPAN_ENDED, SPAN_STARTED, TOOL_CALL, TOOL_RESULT, Event
from . import semconv as sc
from ._common import finite, write_run
from .messages import from_openinference, from_parts
from .otlp_read import OtelSpan

if TYPE_CHECKING:
    from ..store import Run, Store

__all__ = ["runs_from_spans", "span_kind"]

_AGENT_OPS: Final = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
_USAGE: Final = ("model", "input_tokens", "output_tokens", "cached_tokens", "cost_usd", "duration_ms")


def span_kind(attrs: Mapping[str, Any]) -> str:
    """The agentlog span kind of a span's attributes.

    >>> span_kind({"gen_ai.operation.name": "chat"}), span_kind({"openinference.span.kind": "TOOL"})
    ('llm', 'tool')
    """
    kind = attrs.get(sc.AL_SPAN_KIND)
    if isinstance(kind, str) and kind:
        return kind
    op = attrs.get(sc.GEN_AI_OPERATION)
    if op in sc.LLM_OPERATIONS:
        return "llm"
    if op == "execute_tool":
        return "tool"
    if op in _AGENT_OPS:
        return "agent"
    if op == "embeddings":
        return "embedding"
    oi = attrs.get(sc.OI_KIND)
    if isinstance(oi, str) and oi.upper() in sc.OI_KINDS:
        return sc.OI_KINDS[oi.upper()]
    if "http.request.method" in attrs or "http.method" in attrs:
        return "http"
    return "chain"


def _first(attrs: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _json_value(text: Any) -> Any:
    """A JSON text parsed, or the value itself when it is not JSON text."""
    if isinstance(text, str):
        try:
            return finite(json.loads(text))
        except ValueError:
            return text
    return finite(text)


def _count(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) and number >= 0 else None


# --- items: events before their seq is known --------------------------------------------------


class _Ref:
    """A span's agentlog id, known once its ``span.started`` has a seq."""

    __slots__ = ("id",)

    def __init__(self, fixed: str | None) -> None:
        self.id = fixed


@dataclass(slots=True)
class _Item:
    order: tuple[Any, ...]
    type: str
    payload: dict[str, Any]
    ns: int
    span: _Ref | None = None
    parent: _Ref | None = None
    """For ``span.started``: the parent span, written into the payload once known."""
    cause: _Item | None = None
    actor: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    old_seq: int | None = None
    old_cause: int | None = None
    seq: int = -1


@dataclass(slots=True)
class _Trace:
    spans: list[OtelSpan]
    items: list[_Item] = field(default_factory=list)


def _depths(spans: list[OtelSpan]) -> dict[str, int]:
    by_id = {s.span_id: s for s in spans}
    depth: dict[str, int] = {}

    def of(span_id: str) -> int:
        seen = []
        node: str | None = span_id
        while node is not None and node not in depth and node in by_id and node not in seen:
            seen.append(node)
            node = by_id[node].parent_id
        base = depth.get(node, -1) if node is not None else -1
        for n in reversed(seen):
            base += 1
            depth[n] = base
        return depth[span_id]

    for s in spans:
        of(s.span_id)
    return depth


def _llm_items(span: OtelSpan, order: tuple[Any, ...], end: tuple[Any, ...], ref: _Ref) -> list[_Item]:
    from ..keys import canonical_request, llm_key

    a = span.attributes
    request_model = _first(a, sc.GEN_AI_REQUEST_MODEL, sc.OI_REQUEST_MODEL) or _invoked_model(a) \
        or a.get(sc.OI_MODEL)
    response_model = _first(a, sc.GEN_AI_RESPONSE_MODEL, sc.OI_RESPONSE_MODEL, sc.OI_MODEL) or request_model
    messages, params = _request_messages(a), _params(a)
    request = {"model": request_model, "messages": messages, "params": params}
    try:
        canonical = canonical_request(request)
        key = str(a.get(sc.AL_KEY) or llm_key(request))
    except ValueError:
        canonical, key = {"model": request_model, "messages": messages, "params": params}, str(a.get(sc.AL_KEY) or "")
    req = _Item(order + (1,), LLM_REQUEST, {"key": key, **canonical}, span.start_ns, span=ref,
                cause=None)
    out = [req]
    output = _response_message(a)
    usage = _usage(a)
    failed = span.status_code == 2 and output is None and usage is None
    if failed:
        if not any(name == "exception" for name, _, _ in span.events):
            out.append(_Item(end + (0,), ERROR, {"kind": LLM_RESPONSE, "key": key,
                                                 "error": span.status_message or "error"},
                             span.end_ns, span=ref, cause=req))
        return out
    usage = usage or {}
    finish = _first(a, sc.GEN_AI_FINISH_REASONS, sc.OI_FINISH_REASON)
    if isinstance(finish, list):
        finish = finish[0] if finish else None
    cost, source = _cost(a, response_model, usage, span)
    duration = a.get(sc.AL_DURATION)
    columns = {"model": response_model, "input_tokens": usage.get("input_tokens"),
               "output_tokens": usage.get("output_tokens"), "cached_tokens": usage.get("cached_tokens"),
               "cost_usd": cost,
               "duration_ms": float(duration) if isinstance(duration, (int, float))
               else (span.end_ns - span.start_ns) / 1e6}
    payload = {"key": key, "model": response_model, "message": output or {"role": "assistant", "content": None},
               "finish_reason": finish, "usage": usage, "cost_source": source,
               "cache_hit": bool(a.get(sc.AL_CACHE_HIT) or False)}
    if a.get(sc.GEN_AI_RESPONSE_ID) is not None:
        payload["id"] = a[sc.GEN_AI_RESPONSE_ID]
    out.append(_Item(end + (0,), LLM_RESPONSE, payload, span.end_ns, span=ref, cause=req, usage=columns))
    return out


def _invoked_model(a: Mapping[str, Any]) -> Any:
    """The model an OpenInference span says was asked for, in its invocation parameters or input."""
    for key in (sc.OI_INVOCATION_PARAMETERS, sc.OI_INPUT_VALUE):
        value = _json_value(a.get(key))
        if isinstance(value, Mapping) and isinstance(value.get("model"), str):
            return value["model"]
    return None


def _request_messages(a: Mapping[str, Any]) -> list[Any]:
    parts = _json_value(a.get(sc.GEN_AI_INPUT_MESSAGES))
    if isinstance(parts, list):
        return from_parts(parts)
    oi = from_openinference(a, sc.OI_INPUT_MESSAGES)
    if oi:
        return oi
    value = _json_value(a.get(sc.OI_INPUT_VALUE))
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        return list(value["messages"])
    return []


def _response_message(a: Mapping[str, Any]) -> dict[str, Any] | None:
    parts = _json_value(a.get(sc.GEN_AI_OUTPUT_MESSAGES))
    if isinstance(parts, list) and parts:
        return from_parts(parts)[0]
    oi = from_openinference(a, sc.OI_OUTPUT_MESSAGES)
    if oi:
        return oi[0]
    return None


def _params(a: Mapping[str, Any]) -> dict[str, Any]:
    params = _json_value(a.get(sc.AL_PARAMS))
    if isinstance(params, Mapping):
        return dict(params)
    out = {name: a[key] for name, key in sc.GEN_AI_REQUEST_PARAMS.items() if a.get(key) is not None}
    invocation = _json_value(a.get(sc.OI_INVOCATION_PARAMETERS))
    if isinstance(invocation, Mapping):
        out.update({k: v for k, v in invocation.items() if k != "model"})
    return out


def _usage(a: Mapping[str, Any]) -> dict[str, Any] | None:
    """Normalised usage (the ``Usage`` fields) from either convention, ``None`` if none given."""
    from ..capture.usage import Usage

    read = {"input_tokens": (sc.GEN_AI_INPUT_TOKENS, sc.GEN_AI_PROMPT_TOKENS, sc.OI_PROMPT_TOKENS),
            "output_tokens": (sc.GEN_AI_OUTPUT_TOKENS, sc.GEN_AI_COMPLETION_TOKENS, sc.OI_COMPLETION_TOKENS),
            "cached_tokens": (sc.GEN_AI_CACHE_READ, sc.OI_CACHE_READ),
            "cache_write_tokens": (sc.GEN_AI_CACHE_WRITE, sc.OI_CACHE_WRITE)}
    counts = {name: _count(_first(a, *keys)) for name, keys in read.items()}
    if all(v is None for v in counts.values()):
        return None
    values = {k: v or 0 for k, v in counts.items()}
    if values["cached_tokens"] + values["cache_write_tokens"] > values["input_tokens"]:
        # The conventions say input includes cache reads and writes; a tracer that counted
        # them apart (Anthropic's input_tokens) is read the way it counted.
        values["input_tokens"] += values["cached_tokens"] + values["cache_write_tokens"]
    return Usage(**values).to_dict()


def _cost(a: Mapping[str, Any], model: Any, usage: Mapping[str, Any], span: OtelSpan) -> tuple[float | None, str]:
    from .. import pricing
    from ..capture.usage import Usage

    given = _first(a, sc.AL_COST, sc.OI_COST_TOTAL)
    if isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given):
        return float(given), str(a.get(sc.AL_COST_SOURCE) or "provider")
    if a.get(sc.AL_COST_SOURCE) is not None:  # exported by agentlog with an unknown cost
        return None, str(a[sc.AL_COST_SOURCE])
    if not isinstance(model, str) or not usage:
        return None, "unknown"
    provider = _first(a, sc.GEN_AI_PROVIDER, sc.GEN_AI_SYSTEM, sc.OI_PROVIDER, sc.OI_SYSTEM)
    fields = {k: usage.get(k, 0) for k in ("input_tokens", "output_tokens", "cached_tokens",
                                           "cache_write_tokens", "reasoning_tokens")}
    when = datetime.fromtimestamp(span.start_ns / 1e9, tz=UTC)
    found = pricing.cost(model, Usage(**fields), provider=provider if isinstance(provider, str) else None,
                         when=when)
    return found.usd, found.source


def _tool_items(span: OtelSpan, order: tuple[Any, ...], end: tuple[Any, ...], ref: _Ref,
                name: str) -> list[_Item]:
    from ..keys import tool_key

    a = span.attributes
    tool = str(_first(a, sc.GEN_AI_TOOL_NAME, sc.OI_TOOL_NAME) or name)
    args = _json_value(_first(a, sc.GEN_AI_TOOL_ARGUMENTS, sc.OI_INPUT_VALUE))
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        args = {"input": args}
    key = str(a.get(sc.AL_KEY) or tool_key(tool, dict(args)))
    call = _Item(order + (1,), TOOL_CALL, {"key": key, "name": tool, "args": dict(args),
                                           "idempotency_key": _first(a, sc.GEN_AI_TOOL_CALL_ID, sc.OI_TOOL_CALL_ID)},
                 span.start_ns, span=ref)
    payload: dict[str, Any] = {"key": key, "name": tool}
    if span.status_code == 2 or a.get(sc.AL_TOOL_ERROR) is not None:
        payload.update(error=str(a.get(sc.AL_TOOL_ERROR) or span.status_message or "error"),
                       type=str(a.get("error.type") or "Error"))
    else:
        payload["result"] = _json_value(_first(a, sc.GEN_AI_TOOL_RESULT, sc.OI_OUTPUT_VALUE))
    duration = a.get(sc.AL_DURATION)
    cost = a.get(sc.AL_COST)
    usage = {"duration_ms": float(duration) if isinstance(duration, (int, float))
             else (span.end_ns - span.start_ns) / 1e6,
             "cost_usd": float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None}
    return [call, _Item(end + (0,), TOOL_RESULT, payload, span.end_ns, span=ref, cause=call, usage=usage)]


def _event_item(name: str, ns: int, attrs: Mapping[str, Any], order: tuple[Any, ...],
                ref: _Ref | None) -> _Item:
    """A span event: an agentlog event exported before, an exception, or any other event."""
    kind = attrs.get(sc.AL_TYPE)
    if isinstance(kind, str) and kind and isinstance(attrs.get(sc.AL_PAYLOAD), str):
        payload = _json_value(attrs[sc.AL_PAYLOAD])
        usage = {n: attrs.get(f"agentlog.{n}") for n in _USAGE}
        old = attrs.get(sc.AL_SEQ)
        cause = attrs.get(sc.AL_CAUSED_BY)
        actor = attrs.get(sc.AL_ACTOR)
        return _Item(order, kind, dict(payload) if isinstance(payload, Mapping) else {"value": payload},
                     ns, span=ref, actor=actor if isinstance(actor, str) else None, usage=usage,
                     old_seq=old if isinstance(old, int) else None,
                     old_cause=cause if isinstance(cause, int) else None)
    if name == "exception":
        payload = {"error": attrs.get("exception.message"), "type": attrs.get("exception.type")}
        if attrs.get("exception.stacktrace") is not None:
            payload["stacktrace"] = attrs["exception.stacktrace"]
        return _Item(order, ERROR, payload, ns, span=ref)
    return _Item(order, "otel.event", {"name": name, "attributes": finite(dict(attrs))}, ns, span=ref)


def _span_items(span: OtelSpan, depth: int, index: int, refs: Mapping[str, _Ref],
                roots: set[str]) -> list[_Item]:
    a = span.attributes
    ref = refs[span.span_id]
    kind = span_kind(a)
    name = str(a.get(sc.AL_SPAN_NAME) or span.name)
    start = (span.start_ns, 1, depth, index)
    end = (span.end_ns, 3, -depth, index)
    parent = refs.get(span.parent_id) if span.parent_id and span.parent_id not in roots else None
    payload: dict[str, Any] = {"name": name, "kind": kind}
    if sc.AL_SPAN_NAME in a:
        extra = _json_value(a.get(sc.AL_SPAN_ATTRIBUTES))
        if isinstance(extra, Mapping):
            payload["attributes"] = dict(extra)
    else:
        payload["attributes"] = finite(dict(a))
        payload["otel"] = {"trace_id": span.trace_id, "span_id": span.span_id,
                           "parent_span_id": span.parent_id, "kind": span.kind, "scope": span.scope}
    started = _Item(start + (0,), SPAN_STARTED, payload, span.start_ns, span=ref, parent=parent)
    items = [started]
    if kind == "llm":
        items += _llm_items(span, start, end, ref)
    elif kind == "tool":
        items += _tool_items(span, start, end, ref, name)
    for i, (ev_name, ns, attrs) in enumerate(span.events):
        seq = attrs.get(sc.AL_SEQ)
        items.append(_event_item(ev_name, ns, attrs, (ns, 2, seq if isinstance(seq, int) else i, index), ref))
    status = {0: "ok", 1: "ok", 2: "error"}.get(span.status_code, "ok")
    error = (span.status_message or "error") if status == "error" else None
    if a.get("agentlog.span.open") is not True:
        items.append(_Item(end + (1,), SPAN_ENDED, {"name": name, "status": status, "error": error},
                           span.end_ns, span=ref, cause=started))
    return items


def _trace_items(spans: list[OtelSpan]) -> tuple[list[_Item], dict[str, Any]]:
    """The items of one trace in time order, and what its root says about the run."""
    roots = {s.span_id for s in spans if s.attributes.get(sc.AL_ROOT) is True}
    run_info: dict[str, Any] = {}
    depth = _depths(spans)
    ordered = sorted(spans, key=lambda s: (s.start_ns, depth[s.span_id]))
    refs = {s.span_id: _Ref(s.attributes.get(sc.AL_SPAN_ID) if isinstance(s.attributes.get(sc.AL_SPAN_ID), str)
                            else None) for s in ordered}
    items: list[_Item] = []
    for index, span in enumerate(ordered):
        if span.span_id in roots:
            run_info = {"name": span.attributes.get(sc.AL_RUN_NAME),
                        "tags": _json_value(span.attributes.get(sc.AL_RUN_TAGS))}
            for i, (ev_name, ns, attrs) in enumerate(span.events):
                seq = attrs.get(sc.AL_SEQ)
                items.append(_event_item(ev_name, ns, attrs, (ns, 2, seq if isinstance(seq, int) else i, index), None))
            continue
        items.extend(_span_items(span, depth[span.span_id], index, refs, roots))
    items.sort(key=lambda item: item.order)
    return items, run_info


def _events(items: list[_Item]) -> list[Event]:
    """Number the items, resolve span ids and causes, and build the events."""
    old_to_new: dict[int, int] = {}
    for seq, item in enumerate(items):
        item.seq = seq
        if item.old_seq is not None:
            old_to_new[item.old_seq] = seq
        if item.type == SPAN_STARTED and item.span is not None and item.span.id is None:
            item.span.id = f"s{seq}"
    events = []
    for item in items:
        payload = item.payload
        if item.type == SPAN_STARTED:
            payload = {**payload, "parent": item.parent.id if item.parent is not None else None}
        if item.type in ("approval.granted", "approval.denied") and isinstance(payload.get("request"), int):
            payload = {**payload, "request": old_to_new.get(payload["request"], payload["request"])}
        cause = item.cause.seq if item.cause is not None else old_to_new.get(item.old_cause)  # type: ignore[arg-type]
        if cause is not None and cause >= item.seq:
            cause = None
        usage = {k: v for k, v in item.usage.items() if k in _USAGE}
        events.append(Event(seq=item.seq, type=item.type, payload=payload, actor=item.actor,
                            caused_by=cause, span_id=item.span.id if item.span is not None else None,
                            ts=item.ns // 1000, **usage))
    return events


def runs_from_spans(spans: Iterable[OtelSpan], store: Store, *, name: str | None = None) -> list[Run]:
    """One new run per trace id, in the order of the traces' first span starts.

    Returns:
        The new runs.
    """
    traces: dict[str, list[OtelSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    runs = []
    for trace_id, members in sorted(traces.items(), key=lambda kv: min(s.start_ns for s in kv[1])):
        items, info = _trace_items(members)
        events = _events(items)
        service = next((s.resource.get("service.name") for s in members if s.resource.get("service.name")), None)
        tags = info.get("tags") if isinstance(info.get("tags"), (list, Mapping)) else None
        if tags is None:
            tags = {"source": "otlp", "trace_id": trace_id, "service.name": service}
        root = next((s for s in members if s.parent_id is None or s.parent_id not in {m.span_id for m in members}), None)
        run_name = name or info.get("name") or (root.name if root is not None else None) or trace_id
        created = min(s.start_ns for s in members) // 1000
        runs.append(write_run(store, events, run_id=None, name=str(run_name), tags=tags, created_us=created))
    return runs
