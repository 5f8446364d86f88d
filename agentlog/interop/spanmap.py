"""What one OpenTelemetry span becomes in agentlog's vocabulary: the one mapping, used by the
OTLP import, the OTLP/HTTP endpoint (:mod:`agentlog.otel.server`) and the live span processor
(:mod:`agentlog.otel.processor`).

==========================================  ======================================================
span                                        agentlog events (typed bodies)
==========================================  ======================================================
any span                                    :class:`SpanStarted` {name, kind, parent, attributes,
                                            otel: ids, kind, scope} at its start;
                                            :class:`SpanEnded` {name, status ok / error, error:
                                            status message} at its end
kind: ``gen_ai.operation.name`` chat /      ``llm``; ``execute_tool`` → ``tool``; ``invoke_agent``
text_completion / generate_content,         / ``create_agent`` → ``agent``;
or ``openinference.span.kind`` LLM          ``openinference.span.kind`` TOOL, AGENT, CHAIN,
                                            RETRIEVER, EMBEDDING … → lower case; an
                                            ``http.request.method`` → ``http``; else ``chain``
``llm`` span                                :class:`LLMRequest` {key, model, messages, params} and
                                            :class:`LLMResponse` {key, model, message,
                                            finish_reason, usage, cost_source} with the usage
                                            columns; a failed call without a response →
                                            :class:`CallFailed` {kind: llm.response}
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
                                            writes likewise (``cache_creation`` / ``cache_write``);
                                            reasoning likewise
messages                                    ``gen_ai.input.messages`` / ``output.messages`` (JSON
                                            parts) · ``llm.input_messages.N.message.*`` /
                                            ``llm.output_messages.*`` · ``input.value`` JSON with
                                            ``messages``
cost                                        ``agentlog.cost_usd`` · ``llm.cost.total`` (source
                                            ``provider``); else priced from the catalog
                                            (``computed``), else unknown
``tool`` span                               :class:`ToolCall` {key, name, args, idempotency_key}
                                            and :class:`ToolResult` {key, name, result | error};
                                            name: ``gen_ai.tool.name`` · ``tool.name`` · the span
                                            name; args: ``gen_ai.tool.call.arguments`` ·
                                            ``input.value``; result: ``gen_ai.tool.call.result`` ·
                                            ``output.value``
span events                                 ``exception`` → :class:`CallFailed` {error, type,
                                            stacktrace}; events agentlog exported → their type
                                            and payload again; others → :class:`SpanEvent`
                                            {name, attributes}
==========================================  ======================================================

**One model call, one row.** Two instrumentations often trace the same call, one inside the
other (the OpenAI Agents SDK's ``response`` span around the OpenAI client's span; a LangChain
chat-model span around it). An ``llm`` span with an ``llm`` span below it is not a call of its
own: only the innermost writes :class:`LLMRequest` / :class:`LLMResponse`, so tokens and cost
count once (:func:`llm_below`). The outer span stays a span, with its attributes.

The source's own data is kept where the vocabulary has a place for it: every attribute in
:attr:`SpanStarted.attributes`, the ids in :attr:`SpanStarted.otel`. Token counts that break
``cached ≤ input`` are read as counted apart from the cache (Anthropic's way) and added up.

Pure, but for the price catalog (:mod:`agentlog.pricing`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, get_args

from ..events import (
    ApprovalDenied,
    ApprovalGranted,
    Body,
    CallFailed,
    CostSource,
    LLMRequest,
    LLMResponse,
    SpanEnded,
    SpanEvent,
    SpanStarted,
    ToolCall,
    ToolResult,
    Usage,
)
from ..events.event import USAGE_FIELDS
from . import semconv as sc
from ._common import finite, may_hold_surrogate
from .messages import from_openinference, from_parts
from .otlp_read import OtelSpan

__all__ = ["LLM", "Out", "call_outs", "ended", "ended_of", "event_outs", "llm_below", "span_kind", "started",
           "started_of"]

#: The agentlog span kind of a model call.
LLM: Final = "llm"
_COST_SOURCES: Final = frozenset(get_args(CostSource))
_STATUS: Final = {0: "ok", 1: "ok", 2: "error"}


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
        return LLM
    if op == sc.OP_EXECUTE_TOOL:
        return "tool"
    if op in sc.AGENT_OPERATIONS:
        return "agent"
    if op == sc.OP_EMBEDDINGS:
        return "embedding"
    oi = attrs.get(sc.OI_KIND)
    if isinstance(oi, str) and oi.upper() in sc.OI_KINDS:
        return str(sc.OI_KINDS[oi.upper()])
    if any(key in attrs for key in sc.HTTP_METHODS):
        return "http"
    return "chain"


@dataclass(frozen=True, slots=True)
class Out:
    """One event a span gives: type, payload and usage columns, and, for an event agentlog
    exported before, its actor and its seq and cause in the exported run."""

    type: str
    given: Mapping[str, Any] | None = None
    """The payload of an exported event (``None`` for a body's: see :attr:`payload`)."""
    columns: Mapping[str, Any] = field(default_factory=dict)
    actor: str | None = None
    old_seq: int | None = None
    old_cause: int | None = None
    body: Body | None = None
    """The checked body the event was made of (``None`` for an exported event of any type)."""

    @classmethod
    def of(cls, body: Body) -> Out:
        """The event of a typed body."""
        return cls(body.TYPE, None, body.columns(), body=body)

    @property
    def payload(self) -> Mapping[str, Any]:
        """The event's payload: the body's (made when asked: a writer given the body makes
        it itself), or the exported one."""
        if self.body is not None:
            return self.body.to_payload()
        return self.given if self.given is not None else {}


# --- small readers ------------------------------------------------------------------------------


def _first(attrs: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def json_value(text: Any) -> Any:
    """A JSON text parsed, or the value itself when it is not JSON text.

    >>> json_value('{"a": 1}'), json_value("plain")
    ({'a': 1}, 'plain')
    """
    if isinstance(text, str):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        # Parsed JSON holds only dicts with string keys, lists and scalars: only a NaN or
        # Infinity token or a surrogate (escaped, or in the text itself) can give what
        # finite() changes, and a text with none needs no second walk (a false alarm only
        # costs the walk).
        if "NaN" in text or "Infinity" in text or may_hold_surrogate(text):
            return finite(value)
        return value
    return finite(text)


def _count(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) and number >= 0 else None


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


# --- the span itself ------------------------------------------------------------------------------


def span_name(span: OtelSpan) -> str:
    """The span's name (an agentlog export's own name when it has one)."""
    name = span.attributes.get(sc.AL_SPAN_NAME) or span.name
    return str(name)


def started(span: OtelSpan, *, parent: str | None, ids: bool = True, kind: str | None = None) -> SpanStarted:
    """The ``span.started`` of a span.

    Args:
        parent: the agentlog id of the enclosing span.
        ids: keep the span's trace and span ids (``False`` for the live processor: they are
            random, and a replay must write the same payload).
        kind: the span's kind, when the caller has it already (:func:`span_kind`).
    """
    otel: dict[str, Any] = {"kind": span.kind, "scope": span.scope}
    if ids:
        otel = {"trace_id": span.trace_id, "span_id": span.span_id, "parent_span_id": span.parent_id, **otel}
    return started_of(span.name, span.attributes, otel, parent=parent, kind=kind)


def started_of(name: str, a: Mapping[str, Any], otel: Mapping[str, Any], *, parent: str | None,
               kind: str | None = None) -> SpanStarted:
    """:func:`started` from the parts of a span (the live processor reads an SDK span
    straight into it): its name, attributes and the ``otel`` part of the body."""
    if sc.AL_SPAN_NAME in a:  # exported by agentlog: its own attributes, not the conventions'
        extra = json_value(a.get(sc.AL_SPAN_ATTRIBUTES))
        attributes = dict(extra) if isinstance(extra, Mapping) else None
        name = str(a[sc.AL_SPAN_NAME] or name)
    else:
        attributes = finite(dict(a)) if a else {}
    return SpanStarted(name=name, kind=kind or span_kind(a), parent=parent, attributes=attributes, otel=otel)


def ended(span: OtelSpan) -> SpanEnded | None:
    """The ``span.ended`` of a span (``None`` for a span an agentlog export marked open)."""
    return ended_of(span.name, span.attributes, span.status_code, span.status_message)


def ended_of(name: str, a: Mapping[str, Any], status_code: int, status_message: str | None, *,
             started: SpanStarted | None = None, kind: str | None = None,
             attributes: bool = True) -> SpanEnded | None:
    """:func:`ended` from the parts of a span: name, attributes, status code (0 unset, 1 ok,
    2 error) and message.

    ``started``: the ``span.started`` written when the span began (the live processor), when
    the span's attributes may have changed since: the end keeps those set or changed after it,
    and the kind they tell (``kind``, when the caller has it: :func:`span_kind`) when it is not
    the start's; with ``attributes`` false, the kind alone.
    """
    if a.get(sc.AL_SPAN_OPEN) is True:
        return None
    status = _STATUS.get(status_code, "ok")
    error = (status_message or "error") if status == "error" else None
    if started is None or not a or sc.AL_SPAN_NAME in a:
        return SpanEnded(name=str(a.get(sc.AL_SPAN_NAME) or name), status=status, error=error)
    before = started.attributes or {}
    later = {key: value for key, value in finite(dict(a)).items()
             if key not in before or before[key] != value} if attributes else {}
    kind = kind or span_kind(a)
    return SpanEnded(name=name, status=status, error=error, kind=None if kind == started.kind else kind,
                     attributes=later or None)


def llm_below(spans: Iterable[tuple[str, str | None, str]]) -> set[str]:
    """The ids of the spans that have an ``llm`` span below them (at any depth).

    Args:
        spans: ``(span id, parent id, kind)`` of every span known in the trace.

    >>> sorted(llm_below([("a", None, "llm"), ("b", "a", "llm"), ("c", "b", "tool")]))
    ['a']
    """
    known = list(spans)
    parents = {sid: parent for sid, parent, _ in known}
    kinds = {sid: kind for sid, _, kind in known}
    out: set[str] = set()
    for sid, kind in kinds.items():
        if kind != LLM:
            continue
        seen = {sid}
        node = parents.get(sid)
        while node is not None and node not in seen and node not in out:
            seen.add(node)
            if node in kinds:
                out.add(node)
            node = parents.get(node)
    return out


# --- calls ----------------------------------------------------------------------------------------


def call_outs(span: OtelSpan, *, timed: bool = True, kind: str | None = None) -> list[Out]:
    """The call a span made: request and answer (``[]`` for a span that is no call).

    Args:
        timed: fill ``duration_ms`` from the span's times (``False`` for the live processor:
            a replay must write the same columns).
        kind: the span's kind, when the caller has it already.
    """
    kind = kind or span_kind(span.attributes)
    if kind == LLM:
        return _llm(span, timed)
    if kind == "tool":
        return _tool(span, timed)
    return []


def _duration(span: OtelSpan, timed: bool) -> float | None:
    given = _number(span.attributes.get(sc.AL_DURATION))
    if given is not None:
        return given
    return (span.end_ns - span.start_ns) / 1e6 if timed else None


def _llm(span: OtelSpan, timed: bool) -> list[Out]:
    from ..keys import canonical_request, llm_key

    a = span.attributes
    request_model = _first(a, sc.GEN_AI_REQUEST_MODEL, sc.OI_REQUEST_MODEL) or _invoked_model(a) \
        or a.get(sc.OI_MODEL)
    response_model = _first(a, sc.GEN_AI_RESPONSE_MODEL, sc.OI_RESPONSE_MODEL, sc.OI_MODEL) or request_model
    messages, params = _request_messages(a), _params(a)
    request = {"model": _text(request_model), "messages": messages, "params": params}
    provider = _text(_first(a, sc.GEN_AI_PROVIDER, sc.GEN_AI_SYSTEM, sc.OI_PROVIDER, sc.OI_SYSTEM))
    try:
        canonical = canonical_request(request)
        key = str(a.get(sc.AL_KEY) or llm_key(request))
    except ValueError:  # a request with no canonical form is kept as it came, keyed as exported
        canonical, key = request, str(a.get(sc.AL_KEY) or "")
    out = [Out.of(LLMRequest(key=key, provider=provider if sc.AL_KEY not in a else None, **canonical))]
    output = _response_message(a)
    usage = _usage(a)
    if span.status_code == 2 and output is None and usage is None:
        if not any(name == sc.EXCEPTION_EVENT for name, _, _ in span.events):
            out.append(Out.of(CallFailed(kind=LLMResponse.TYPE, key=key, error=span.status_message or "error")))
        return out
    finish = _first(a, sc.GEN_AI_FINISH_REASONS, sc.OI_FINISH_REASON)
    if isinstance(finish, list):
        finish = finish[0] if finish else None
    cost, source = _cost(a, response_model, usage, span)
    out.append(Out.of(LLMResponse(
        key=key, model=_text(response_model), message=output or {"role": "assistant", "content": None},
        finish_reason=_text(finish), id=_text(a.get(sc.GEN_AI_RESPONSE_ID)), usage=usage or Usage(),
        cost_source=source, cache_hit=a.get(sc.AL_CACHE_HIT) is True, cost_usd=cost,
        duration_ms=_duration(span, timed))))
    return out


def _invoked_model(a: Mapping[str, Any]) -> Any:
    """The model an OpenInference span says was asked for, in its invocation parameters or input."""
    for key in (sc.OI_INVOCATION_PARAMETERS, sc.OI_INPUT_VALUE):
        value = json_value(a.get(key))
        if isinstance(value, Mapping) and isinstance(value.get("model"), str):
            return value["model"]
    return None


def _request_messages(a: Mapping[str, Any]) -> list[Any]:
    parts = json_value(a.get(sc.GEN_AI_INPUT_MESSAGES))
    if isinstance(parts, list):
        return from_parts(parts)
    oi = from_openinference(a, sc.OI_INPUT_MESSAGES)
    if oi:
        return oi
    value = json_value(a.get(sc.OI_INPUT_VALUE))
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        return [m for m in value["messages"] if isinstance(m, Mapping)]
    return []


def _response_message(a: Mapping[str, Any]) -> dict[str, Any] | None:
    parts = json_value(a.get(sc.GEN_AI_OUTPUT_MESSAGES))
    if isinstance(parts, list) and parts:
        return from_parts(parts)[0]
    oi = from_openinference(a, sc.OI_OUTPUT_MESSAGES)
    if oi:
        return oi[0]
    return None


def _params(a: Mapping[str, Any]) -> dict[str, Any]:
    params = json_value(a.get(sc.AL_PARAMS))
    if isinstance(params, Mapping):
        return dict(params)
    out = {name: a[key] for name, key in sc.GEN_AI_REQUEST_PARAMS.items() if a.get(key) is not None}
    invocation = json_value(a.get(sc.OI_INVOCATION_PARAMETERS))
    if isinstance(invocation, Mapping):
        out.update({k: v for k, v in invocation.items() if k != "model"})
    return out


def _usage(a: Mapping[str, Any]) -> Usage | None:
    """Token counts from either convention, ``None`` if the span gives none."""
    read = {"input_tokens": (sc.GEN_AI_INPUT_TOKENS, sc.GEN_AI_PROMPT_TOKENS, sc.OI_PROMPT_TOKENS),
            "output_tokens": (sc.GEN_AI_OUTPUT_TOKENS, sc.GEN_AI_COMPLETION_TOKENS, sc.OI_COMPLETION_TOKENS),
            "cached_tokens": (sc.GEN_AI_CACHE_READ, sc.OI_CACHE_READ),
            "cache_write_tokens": (sc.GEN_AI_CACHE_WRITE, sc.OI_CACHE_WRITE),
            "reasoning_tokens": (sc.GEN_AI_REASONING_TOKENS, sc.OI_REASONING_TOKENS)}
    counts = {name: _count(_first(a, *keys)) for name, keys in read.items()}
    if all(v is None for v in counts.values()):
        return None
    values = {k: v or 0 for k, v in counts.items()}
    if values["cached_tokens"] + values["cache_write_tokens"] > values["input_tokens"]:
        # The conventions say input includes cache reads and writes; a tracer that counted
        # them apart (Anthropic's input_tokens) is read the way it counted.
        values["input_tokens"] += values["cached_tokens"] + values["cache_write_tokens"]
    values["reasoning_tokens"] = min(values["reasoning_tokens"], values["output_tokens"])
    return Usage(**values)


def _cost(a: Mapping[str, Any], model: Any, usage: Usage | None, span: OtelSpan) -> tuple[float | None, Any]:
    given = _number(_first(a, sc.AL_COST, sc.OI_COST_TOTAL))
    said = a.get(sc.AL_COST_SOURCE)
    source = said if said in _COST_SOURCES else None
    if given is not None:
        return given, source or "provider"
    if source is not None:  # exported by agentlog with an unknown cost
        return None, source
    if not isinstance(model, str) or usage is None:
        return None, "unknown"
    from .. import pricing  # the catalog, only for a cost the span does not give

    provider = _first(a, sc.GEN_AI_PROVIDER, sc.GEN_AI_SYSTEM, sc.OI_PROVIDER, sc.OI_SYSTEM)
    when = datetime.fromtimestamp(span.start_ns / 1e9, tz=UTC)
    found = pricing.cost(model, usage, provider=provider if isinstance(provider, str) else None,
                         when=when)
    return found.usd, found.source


def _tool(span: OtelSpan, timed: bool) -> list[Out]:
    from ..keys import tool_key

    a = span.attributes
    name = str(_first(a, sc.GEN_AI_TOOL_NAME, sc.OI_TOOL_NAME) or span_name(span))
    args = json_value(_first(a, sc.GEN_AI_TOOL_ARGUMENTS, sc.OI_INPUT_VALUE))
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        args = {"input": args}
    key = str(a.get(sc.AL_KEY) or tool_key(name, dict(args)))
    call = ToolCall(key=key, name=name, args=dict(args),
                    idempotency_key=_text(_first(a, sc.GEN_AI_TOOL_CALL_ID, sc.OI_TOOL_CALL_ID)))
    cost = _number(a.get(sc.AL_COST))
    duration = _duration(span, timed)
    if span.status_code == 2 or a.get(sc.AL_TOOL_ERROR) is not None:
        result = ToolResult(key=key, name=name, error=str(a.get(sc.AL_TOOL_ERROR) or span.status_message or "error"),
                            type=str(a.get(sc.ERROR_TYPE) or "Error"), cost_usd=cost, duration_ms=duration)
    else:
        result = ToolResult(key=key, name=name, result=json_value(_first(a, sc.GEN_AI_TOOL_RESULT, sc.OI_OUTPUT_VALUE)),
                            cost_usd=cost, duration_ms=duration)
    return [Out.of(call), Out.of(result)]


# --- span events ----------------------------------------------------------------------------------


def event_outs(span: OtelSpan) -> list[tuple[int, int, Out]]:
    """The span's events: ``(time in ns, order among the span's events, event)``."""
    out: list[tuple[int, int, Out]] = []
    for i, (name, ns, attrs) in enumerate(span.events):
        seq = attrs.get(sc.AL_SEQ)
        out.append((ns, seq if isinstance(seq, int) else i, event_out(name, attrs)))
    return out


def event_out(name: str, attrs: Mapping[str, Any]) -> Out:
    """A span event: an agentlog event exported before, an exception, or any other event."""
    kind = attrs.get(sc.AL_TYPE)
    if isinstance(kind, str) and kind and isinstance(attrs.get(sc.AL_PAYLOAD), str):
        payload = json_value(attrs[sc.AL_PAYLOAD])
        columns = {n: attrs.get(sc.AL_COLUMN_PREFIX + n) for n in USAGE_FIELDS}
        old, cause, actor = attrs.get(sc.AL_SEQ), attrs.get(sc.AL_CAUSED_BY), attrs.get(sc.AL_ACTOR)
        return Out(kind, dict(payload) if isinstance(payload, Mapping) else {"value": payload}, columns,
                   actor=actor if isinstance(actor, str) else None,
                   old_seq=old if isinstance(old, int) else None,
                   old_cause=cause if isinstance(cause, int) else None)
    if name == sc.EXCEPTION_EVENT:
        return Out.of(CallFailed(error=_text(attrs.get(sc.EXCEPTION_MESSAGE)), type=_text(attrs.get(sc.EXCEPTION_TYPE)),
                                 stacktrace=_text(attrs.get(sc.EXCEPTION_STACKTRACE))))
    return Out.of(SpanEvent(name=name, attributes=finite(dict(attrs)) or None))


def renumbered(out: Out, seq_of: Mapping[int, int]) -> Mapping[str, Any]:
    """The payload of an exported approval decision, its request's seq renumbered."""
    if out.type in (ApprovalGranted.TYPE, ApprovalDenied.TYPE):
        request = out.payload.get(ApprovalGranted.K.request)
        if isinstance(request, int) and request in seq_of:
            return {**out.payload, ApprovalGranted.K.request: seq_of[request]}
    return out.payload
