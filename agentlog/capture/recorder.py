"""The recorder: everything a program does that is not deterministic goes through it.

A *program* is any callable that takes a :class:`Recorder`. Model calls, tool calls, the
clock, uuids and random numbers, state patches and spans go through the recorder, so they land
in the log; on replay and in forks the recorder serves the recorded answers instead of calling
out. The recorder does not know which of these it is doing: its sink decides
(:mod:`agentlog.capture.sinks`). Each call is written once, as steps
(:mod:`agentlog.capture.effects`) that ``rec.llm`` drives synchronously and ``await rec.allm``
asynchronously.

Secrets in tool arguments and model requests are redacted (:mod:`agentlog.redact`, with the
run's own names) before the call's cache key is computed and before anything is written.

>>> import agentlog as al, tempfile
>>> def hello(rec):
...     answer = rec.llm({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
...                      call=lambda req: {"content": "hello", "usage": {"prompt_tokens": 3,
...                                                                      "completion_tokens": 1}})
...     return answer.content
>>> run = al.record(hello, store=tempfile.mkdtemp(), name="hello")
>>> run.status, [e.type for e in run.iter_events()][2:4], run.event(3).input_tokens
('finished', ['llm.request', 'llm.response'], 3)
>>> run.event(3).cost_usd > 0, run.event(len(run) - 1).payload
(True, {'result': 'hello'})
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import logging
import random as _random
import threading
import time
import uuid as _uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from .. import pricing
from ..canonical import plain_numbers
from ..errors import RecordError, ReplayMissError, ToolError
from ..events import (
    ERROR,
    INTERRUPTED,
    LLM_RESPONSE,
    TOOL_RESULT,
    BlobRef,
    Body,
    CallFailed,
    Event,
    LLMRequest,
    LLMResponse,
    RandomValue,
    SpanEnded,
    SpanStarted,
    StatePatch,
    TimeNow,
    ToolCall,
    ToolResult,
    UUIDNew,
)
from ..keys import canonical_llm_key, canonical_request, tool_key
from ..redact import Redactor
from ..store.writer import Emit, item_body
from .effects import Opaque, Steps, arun, run
from .providers import LLMResult, normalize
from .sinks import Interrupted, Sink, item_span
from .streams import assemble, drain, is_stream, stream_api

__all__ = ["SPAN_PARENTS", "Deferred", "LLMCallError", "OpenSpan", "Recorder", "SpanParent", "active_recorder", "call_failed", "error_text", "span", "takes_idempotency_key",
           "tool"]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
V = TypeVar("V", TimeNow, UUIDNew, RandomValue)

#: The recorder of the program running in a context; ``None`` set: none here, on purpose.
#: Unset (a thread started without a copy of its starter's context): see :func:`active_recorder`.
_active: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("agentlog_recorder")
_open: dict[Recorder, int] = {}  # the recorders active somewhere in the process: how many times
_open_lock = threading.Lock()
_ambiguous_told = False
_current_span: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar(
    "agentlog_span", default=None)


SpanParent = Callable[["Recorder"], str | None]

#: Where a tracer says which span it has open here: each gives, for a recorder, the agentlog
#: span id of the span open in the calling context, or ``None``. The OpenTelemetry processor
#: registers one (:mod:`agentlog.otel`), so a span the recorder opens inside a framework's span
#: (a model call the HTTP transport records, a recorded tool) nests under it.
SPAN_PARENTS: list[SpanParent] = []


class LLMCallError(RecordError):
    """A model call failed; on replay the recorded failure is raised again."""

    def __init__(self, seq: int, error: str) -> None:
        self.seq, self.error = seq, error
        super().__init__(f"model call (seq {seq}) failed: {error}")


def active_recorder() -> Recorder | None:
    """The recorder of the program running in this context, if any; in a context that never
    had one set (a thread the program started, which Python starts without a copy of the
    starter's context: a ``ThreadPoolExecutor``'s), the one recording open in the process,
    if there is exactly one (a call made from such a thread while several are open is not
    recorded: which run it belongs to is not known; a warning says so once)."""
    rec = _active.get(_UNSET)
    if rec is not _UNSET:
        return cast("Recorder | None", rec)
    if not _open:
        return None
    with _open_lock:
        if len(_open) == 1:
            return next(iter(_open))
    _tell_ambiguous()
    return None


_UNSET: Any = object()


def _tell_ambiguous() -> None:
    global _ambiguous_told
    if not _ambiguous_told:
        _ambiguous_told = True
        log.warning("agentlog: a call from a thread that no recording started (it has no copy of a "
                    "recording's context) while %d recordings are open: not recorded. Run the "
                    "thread's work in contextvars.copy_context() of the recording's thread.", len(_open))


def takes_idempotency_key(fn: Callable[..., Any]) -> bool:
    """True if ``fn`` accepts an ``idempotency_key`` keyword (by name or ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "idempotency_key" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def error_text(exc: BaseException) -> str:
    """``"<exception type>: <message>"``, as errors are recorded."""
    return f"{type(exc).__name__}: {exc}"


def _span_error(exc: BaseException) -> str:
    # A process stopped by a crash (seen again on replay) or by Ctrl-C is resumable: its spans
    # end as "interrupted", the same text al.resume writes for spans a crash left open.
    return INTERRUPTED if isinstance(exc, (Interrupted, KeyboardInterrupt)) else error_text(exc)


def _unblob(value: Any) -> Any:
    """A payload value with blob references read back as text (a request asked again)."""
    if isinstance(value, BlobRef):
        return value.text()
    if isinstance(value, Mapping):
        return {k: _unblob(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unblob(v) for v in value]
    return value


class Deferred:
    """A value read on first use: the ``inputs`` of a :class:`Recorder` that goes on with a
    stored run (a resume, a fork by fold), which are in the run's first event, read from the
    log only if the program asks for :attr:`Recorder.inputs`.

    >>> Deferred(lambda: {"q": 1})()
    {'q': 1}
    """

    __slots__ = ("_load",)

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load

    def __call__(self) -> Any:
        return self._load()


def call_failed(kind: str, key: str, exc: BaseException) -> CallFailed:
    """The ``error`` event of a call of ``kind`` with ``key`` that raised ``exc``."""
    return CallFailed(kind=kind, key=key, error=error_text(exc), type=type(exc).__name__)


class Recorder:
    """The handle a program does its non-deterministic work through.

    Args:
        sink: where events go and recorded answers come from.
        inputs: the program's inputs, as recorded in ``run.started`` (a :class:`Deferred`:
            read on first use of :attr:`inputs`).
        reducers: the reducer set for :attr:`state` (default: the default projection).
        state: the state before the first event this recorder emits (a resumed or forked run).
        actor: the default ``actor`` of the events.
        clock: wall clock for :meth:`now` (seconds since the epoch).
        live_llm: when set, performs model calls instead of the program's own ``call``.
        timer: measures the ``duration_ms`` of calls (a fixed clock makes them reproducible).
        capture_http: record every httpx request sent while this recorder is active, by any
            client (:mod:`agentlog.capture.transport`); ``False`` leaves them unrecorded.
    """

    def __init__(self, sink: Sink, *, inputs: Any = None, reducers: Any = None,
                 state: Any = None, actor: str | None = None,
                 clock: Callable[[], float] = time.time,
                 live_llm: Callable[[Mapping[str, Any]], Any] | None = None,
                 timer: Callable[[], float] = time.perf_counter, capture_http: bool = True) -> None:
        self._sink = sink
        self.capture_http = capture_http
        """Whether httpx requests sent while this recorder is active are recorded."""
        sink.observer = self._observe
        attach = getattr(sink, "checkpoint_from", None)
        if attach is not None:  # a run being written: checkpoint the state at its seals
            attach(lambda: self.state, reducers)
        self._inputs = inputs
        self.actor = actor
        self._clock = clock
        self.timer = timer
        self._live_llm = live_llm
        self._reducers = reducers
        self._state = state
        self._unfolded: list[Event] = []
        self.live_calls = 0
        """Calls that went out (model, tool, HTTP)."""
        self.served_calls = 0
        """Calls answered from a log."""

    # --- state ------------------------------------------------------------------------------

    @property
    def inputs(self) -> Any:
        """The program's inputs, as recorded in ``run.started``."""
        if type(self._inputs) is Deferred:
            self._inputs = self._inputs()
        return self._inputs

    @inputs.setter
    def inputs(self, value: Any) -> None:
        self._inputs = value

    @property
    def run_id(self) -> str:
        """The id of the run being written (or replayed)."""
        return self._sink.run_id

    @property
    def next_seq(self) -> int:
        """The seq the next event will get (so far: the number of events in the run)."""
        return self._sink.next_seq

    @property
    def redactor(self) -> Redactor:
        """The run's redaction policy (:mod:`agentlog.redact`)."""
        return self._sink.redactor

    @property
    def state(self) -> Any:
        """The folded state after the last event, computed lazily and incrementally."""
        from ..folding import fold  # the fold engine is pure; imported on first use
        if self._state is None or self._unfolded:
            events, self._unfolded = self._unfolded, []
            self._state = fold(events, reducers=self._reducers, initial=self._state)
        return self._state

    def _observe(self, event: Event) -> None:
        self._unfolded.append(event)

    # --- plain events -----------------------------------------------------------------------

    def emit(self, type: str | Body, payload: Mapping[str, Any] | None = None, *, actor: str | None = None,
             caused_by: int | None = None, span_id: str | None = None, **usage: Any) -> Event:
        """Append an event; the current span and the recorder's actor are filled in.

        Args:
            type: a typed body (``al.events.Note(...)``, ``StatePatch(ops=...)``), or an event
                type with its ``payload`` (and usage columns as keywords).
        """
        actor, span_id = actor or self.actor, span_id or self.current_span
        if isinstance(type, Body):
            return self._sink.emit(type, actor=actor, caused_by=caused_by, span_id=span_id)
        return self._sink.emit(type, dict(payload or {}), actor=actor, caused_by=caused_by,
                               span_id=span_id, **usage)

    def emit_many(self, items: Sequence[Emit], *, taken: list[Event] | None = None,
                  sync: bool = True) -> list[Event]:
        """Append several events as one batch: into a run being written, with one WAL write and
        all of them or none (:meth:`~agentlog.RunWriter.emit_many`); on replay, compared one
        by one. Unlike :meth:`emit`, the items' ``actor`` and ``span_id`` are taken as given.

        A batch that the run's writer refuses as a whole is written again one event at a time,
        so the run holds what appending them one by one holds: the events before the refused
        one (which raises again).

        Args:
            items: the events; one may name an earlier one of the batch as its cause
                (``Emit.caused_by_item``).
            taken: a list the events are appended to as they are written, so that a caller
                can tell, when this raises, which of them were.
            sync: ``False`` leaves the batch's fsync to the next write that makes one
                (:meth:`~agentlog.RunWriter.emit_many`'s ``sync``).
        """
        sink = self._sink
        events: list[Event] = []
        if getattr(sink, "atomic_batches", False):
            before = sink.next_seq
            try:
                events = sink.emit_many(items, sync=sync)
            except Exception:
                if sink.next_seq != before:  # written, then something after failed
                    raise
            else:
                if taken is not None:
                    taken.extend(events)
                return events
        if getattr(sink, "compares_batches", False):  # a replay: the batch found in the log as a whole
            return sink.emit_many(items, sync=sync, taken=taken)  # type: ignore[call-arg]
        for item in items:
            caused_by = item.caused_by if item.caused_by_item is None else events[item.caused_by_item].seq
            event = sink.emit(item_body(item, sink.run_id, sink.next_seq), actor=item.actor, caused_by=caused_by,
                              span_id=item_span(item, events, sink.next_seq))
            events.append(event)
            if taken is not None:
                taken.append(event)
        return events

    def patch(self, ops: Sequence[Mapping[str, Any]], *, actor: str | None = None) -> Event:
        """Append a ``state.patch``: RFC 6902 ops on ``state["vars"]``, checked before writing.

        Raises:
            PatchError: an op does not apply to the current state (nothing is written).
        """
        from ..folding import apply_patch
        ops = [dict(op) for op in ops]
        apply_patch(self.state["vars"], ops)  # fail here, not later in every fold
        return self.emit(StatePatch(ops=ops), actor=actor)

    def blob(self, data: bytes | str, media_type: str | None = None) -> BlobRef:
        """Store bytes or text as a content-addressed blob and return its reference."""
        return self._sink.put_blob(data, media_type)

    def serve(self, kind: str, key: str, cause: Event | None, *, actor: str | None = None) -> Event | None:
        """The recorded answer of kind ``kind`` to the call with ``key``, appended as this
        call's answer (``caused_by`` ``cause``), or ``None`` when the call must go out live."""
        event = self._sink.serve(kind, key, actor=actor or self.actor,
                                 caused_by=None if cause is None else cause.seq,
                                 span_id=self.current_span)
        if event is not None:
            self.served_calls += 1
        return event

    # --- spans ------------------------------------------------------------------------------

    @property
    def current_span(self) -> str | None:
        """The id of the innermost open span of this recorder in this context."""
        current = _current_span.get()
        return current[1] if current is not None and current[0] == id(self) else None

    @contextlib.contextmanager
    def span(self, name: str, kind: str = "chain", *, actor: str | None = None,
             attributes: Mapping[str, Any] | None = None) -> Iterator[str]:
        """Group the events inside into a span; yields the span id.

        ``span.ended`` records ``status`` ``ok`` or ``error`` with the error text. Nesting follows
        ``contextvars``, so spans nest correctly across ``asyncio`` tasks.
        """
        opened = self.open_span(name, kind, actor=actor, attributes=attributes)
        token = _current_span.set((id(self), opened.span_id))
        try:
            yield opened.span_id
        except BaseException as exc:
            _current_span.reset(token)
            opened.close(exc)
            raise
        _current_span.reset(token)
        opened.close()

    def open_span(self, name: str, kind: str = "chain", *, actor: str | None = None,
                  attributes: Mapping[str, Any] | None = None) -> OpenSpan:
        """Write ``span.started`` and return the span, to be closed later with
        :meth:`OpenSpan.close` (a span that outlives the code that opened it: a stream read
        after the call returned). Events go into it when given its ``span_id``, or inside
        :meth:`OpenSpan.entered`. :meth:`span` is this with a ``with`` block."""
        body = self._span_started(name, kind, attributes)
        [started] = self.emit_many([Emit(body, actor or self.actor, span_item=0)])
        assert started.span_id is not None
        return OpenSpan(self, name, started.span_id, started.seq, actor)

    def _span_started(self, name: str, kind: str,
                      attributes: Mapping[str, Any] | None = None) -> SpanStarted:
        """The ``span.started`` of a span about to be opened here; its id is the seq it gets,
        taken as it is written (``Emit.span_item``), so spans opened at once from several
        threads never share one."""
        parent = self.current_span
        order = self._sink.order
        for hook in SPAN_PARENTS:  # the innermost span open here, of whoever opened it last
            other = hook(self)
            if other is not None and order(other) > order(parent):
                parent = other
        return SpanStarted(name=name, kind=kind, parent=parent, attributes=dict(attributes) if attributes else None)

    # --- model calls ------------------------------------------------------------------------

    def llm(self, request: Mapping[str, Any], call: Callable[[Mapping[str, Any]], Any] | None = None,
            *, provider: str | None = None, actor: str | None = None) -> LLMResult:
        """Ask a model, or serve the recorded answer.

        Emits ``llm.request`` then ``llm.response`` (usage columns and cost filled) inside a span
        of kind ``llm``; a failed call emits ``error`` and raises :class:`LLMCallError`.

        Args:
            request: a chat-style mapping: model, messages, tools, params, response_format
                (nested under ``params`` or flat, OpenAI-style).
            call: performs the request and returns the provider's response (an SDK object, a
                mapping, or a string; see :mod:`agentlog.capture.providers`), or the SDK's
                stream of chunks (``stream=True``): it is read to the end and recorded as one
                answer (:mod:`agentlog.capture.streams`); usage is what the stream reported,
                and without any (OpenAI's ``stream_options.include_usage`` not asked) the cost
                is unknown. An async stream needs :meth:`allm`.
            provider: the provider's name, when the usage shape alone is ambiguous (and to
                price the call at that provider).
        """
        return run(self._llm_steps(request, call, provider, actor, None))

    async def allm(self, request: Mapping[str, Any],
                   call: Callable[[Mapping[str, Any]], Awaitable[Any] | Any] | None = None,
                   *, provider: str | None = None, actor: str | None = None) -> LLMResult:
        """:meth:`llm` for async code: ``call`` may return an awaitable, which is awaited."""
        return await arun(self._llm_steps(request, call, provider, actor, None))

    def answer_llm(self, request_event: Event, call: Callable[[Mapping[str, Any]], Any] | None = None,
                   *, provider: str | None = None, actor: str | None = None) -> LLMResult:
        """Answer a model request that the log holds without its response (a crash came between).

        The recorded request is asked again (its blobs read back as text, so the key is the
        same) and the answer is ``caused_by`` the original ``llm.request``, inside a new span
        of kind ``llm``; on replay it is served from the log like any answer.

        Args:
            request_event: the ``llm.request`` left without an answer.
            call: performs the request (as in :meth:`llm`).
        """
        asked = LLMRequest.of(request_event)
        request = {"model": asked.model, "messages": _unblob(asked.messages), "tools": _unblob(asked.tools),
                   "params": _unblob(asked.params), "response_format": _unblob(asked.response_format)}
        return run(self._llm_steps(request, call, provider, actor, request_event))

    def _llm_request(self, request: Mapping[str, Any], provider: str | None, *,
                     redacted: bool = False, text: bytes | None = None) -> LLMRequest:
        """The request as recorded: canonical, its secrets redacted, keyed by what is recorded.
        ``redacted``: the caller found nothing in ``request`` to redact (with these names or
        more), so the canonical form is not copied again to redact it. ``text``: the JSON
        text ``request`` was parsed from (the transport's request body): its values are plain
        JSON, used as they are, and its numbers say whether the key needs the check walk."""
        canonical = canonical_request(request, plain=text is not None)
        if not redacted:
            canonical = self.redactor.value(canonical)
        key = canonical_llm_key(canonical, walked=text is not None and plain_numbers(text))
        return LLMRequest(key=key, provider=provider, **canonical)

    def _llm_steps(self, request: Mapping[str, Any], call: Any, provider: str | None,
                   actor: str | None, asked: Event | None) -> Steps[LLMResult]:
        name = str(request.get("model") or "llm")
        if asked is None:
            try:
                body = self._llm_request(request, provider)
            except Exception:
                with self.span(name, kind="llm", actor=actor):
                    raise  # as when it was made inside the span: opened, and ended with the error
            # The request has no effect but its answer: fsynced with the answer (one fsync a call).
            span, asked = self._open_with(name, "llm", body, actor, sync=False)
            key: str | None = body.key
        else:
            span, key = self.open_span(name, "llm", actor=actor), None
        try:
            with span.entered():
                key = key or LLMRequest.of(asked).key  # an earlier run's request: read in the span
                return (yield from self._llm_answered(span, request, call, provider, actor, asked, key))
        except BaseException as exc:
            if not span.ended:
                span.close(exc)
            raise

    def _llm_answered(self, span: OpenSpan, request: Mapping[str, Any], call: Any, provider: str | None,
                      actor: str | None, asked: Event, key: str) -> Steps[LLMResult]:
        """The answer of a model request written in ``span``: served, or asked live; the span
        is ended with it."""
        served = self.serve(LLM_RESPONSE, key, asked, actor=actor)
        if served is not None:
            if served.type == ERROR:
                raise LLMCallError(served.seq, str(CallFailed.of(served).error))
            span.close()
            return LLMResult.from_event(served)
        fn = self._live_llm or call
        if fn is None:
            raise ReplayMissError(f"run {self.run_id}: no recorded answer for model request "
                                  f"{key[:16]}… and no call= to make it live")
        started = self.timer()
        try:
            raw = yield Opaque(fn, request)
        except Exception as exc:
            failed = self.emit(call_failed(LLM_RESPONSE, key, exc), actor=actor, caused_by=asked.seq)
            raise LLMCallError(failed.seq, error_text(exc)) from exc
        self.live_calls += 1
        streamed = is_stream(raw)
        if streamed:  # an SDK's stream: its chunks, assembled into the response they stand for
            chunks = yield Opaque(drain, raw)
            raw = assemble(stream_api(chunks), chunks)
        answered = self._llm_answer(raw, key, request, asked, started, provider)
        if streamed:
            answered = replace(answered, streamed=True)
            if not (raw.get("usage") or raw.get("usageMetadata")):  # none reported
                answered = replace(answered, usage=None, cost_usd=None, cost_source="unknown")
        return LLMResult.from_event(self._close_with(span, answered, asked.seq, actor))

    def _llm_answer(self, raw: Any, key: str, request: Mapping[str, Any], asked: Event,
                    started: float, provider: str | None) -> LLMResponse:
        duration = (self.timer() - started) * 1000
        answer = normalize(raw, provider=provider)
        model = answer.model or request.get("model")
        when = datetime.fromtimestamp(asked.ts / 1e6, tz=UTC) if asked.ts else None
        cost = pricing.cost(model, answer.usage, provider=provider, when=when) if model else None
        return answer.response(key=key, model=model, cost_usd=cost.usd if cost else None,
                               cost_source=cost.source if cost else "unknown", duration_ms=duration)

    # --- tool calls -------------------------------------------------------------------------

    def tool(self, name: str, args: Mapping[str, Any] | None = None,
             fn: Callable[..., Any] | None = None, *, actor: str | None = None) -> Any:
        """Call a tool, or serve its recorded result.

        Emits ``tool.call`` (with an idempotency key ``f"{run_id}:{seq}"``, passed to ``fn`` when
        it takes an ``idempotency_key`` argument) and ``tool.result`` inside a span of kind
        ``tool``. ``fn`` is called as ``fn(**args)``; its result must be JSON (bytes become a
        blob). A failing tool is recorded and raises :class:`~agentlog.errors.ToolError`.
        Arguments named like secrets are recorded (and keyed) as ``"[REDACTED]"``; ``fn`` gets
        them as given.

        Returns:
            the result as stored in the log (so recording and replay return the same value).
        """
        return run(self._tool_steps(name, dict(args or {}), fn, actor, None))

    async def atool(self, name: str, args: Mapping[str, Any] | None = None,
                    fn: Callable[..., Any] | None = None, *, actor: str | None = None) -> Any:
        """:meth:`tool` for async code: ``fn`` may be a coroutine function."""
        return await arun(self._tool_steps(name, dict(args or {}), fn, actor, None))

    def answer_tool(self, call_event: Event, fn: Callable[..., Any] | None = None, *,
                    actor: str | None = None) -> Any:
        """Finish a tool call that the log holds without its result (a crash came between).

        ``fn`` is called with the call's recorded args and its *original* idempotency key, so
        a downstream service that already did the work recognises the repeat; the result is
        ``caused_by`` the original ``tool.call``, inside a new span of kind ``tool``. On replay
        the recorded result is served. (A redacted argument is recorded as ``"[REDACTED]"``,
        and that is what ``fn`` gets here: give tools their secrets some other way.)

        Raises:
            ToolError: the tool failed (recorded).
        """
        called = ToolCall.of(call_event)
        return run(self._tool_steps(called.name, dict(called.args), fn, actor, call_event))

    def tool_call(self, name: str, args: Mapping[str, Any], *, actor: str | None = None) -> Event:
        """Append the ``tool.call`` of a call about to be made (secrets redacted, keyed, with its
        idempotency key), for code that makes the call itself."""
        [event] = self.emit_many([Emit(self._tool_call(name, args), actor or self.actor, span_id=self.current_span,
                                       keyed=True)])
        return event

    def _tool_call(self, name: str, args: Mapping[str, Any]) -> ToolCall:
        """The ``tool.call`` of a call, its idempotency key set as it is written
        (:attr:`Emit.keyed <agentlog.store.writer.Emit.keyed>`)."""
        safe = self.redactor.value(args)
        return ToolCall(key=tool_key(name, safe), name=name, args=safe)

    def _tool_steps(self, name: str, args: dict[str, Any], fn: Callable[..., Any] | None,
                    actor: str | None, called: Event | None) -> Steps[Any]:
        if called is None:
            try:
                first = self._tool_call(name, args)
            except Exception:
                with self.span(name, kind="tool", actor=actor):
                    raise  # as when it was made inside the span: opened, and ended with the error
            span, called = self._open_with(name, "tool", first, actor, keyed=True)  # on disk before the tool runs
        else:
            span = self.open_span(name, "tool", actor=actor)
        try:
            with span.entered():
                # read back: its idempotency key as it was written (or an earlier run's call)
                call = ToolCall.of(called)
                return (yield from self._tool_answered(span, call, called, args, fn, actor))
        except BaseException as exc:
            if not span.ended:
                span.close(exc)
            raise

    def _tool_answered(self, span: OpenSpan, call: ToolCall, called: Event, args: dict[str, Any],
                       fn: Callable[..., Any] | None, actor: str | None) -> Steps[Any]:
        """The result of a tool call written in ``span``: served, or made live; the span is
        ended with it."""
        name = call.name
        served = self.serve(TOOL_RESULT, call.key, called, actor=actor)
        if served is not None:
            if served.type == ERROR:
                raise ToolError(name, served.seq, str(CallFailed.of(served).error))
            answer = ToolResult.of(served)
            if answer.failed:
                raise ToolError(name, served.seq, str(answer.error))
            span.close()
            return answer.result
        if fn is None:
            raise ReplayMissError(f"run {self.run_id}: no recorded result for tool {name!r} "
                                  f"(key {call.key[:16]}…) and no fn= to call it live")
        kwargs = dict(args)
        if takes_idempotency_key(fn):
            kwargs["idempotency_key"] = call.idempotency_key
        started = self.timer()
        try:
            result = yield Opaque(fn, **kwargs)
        except Exception as exc:
            self.live_calls += 1
            done = self.emit(ToolResult(key=call.key, name=name, error=error_text(exc),
                                        type=type(exc).__name__, duration_ms=self._since(started)),
                             actor=actor, caused_by=called.seq)
            raise ToolError(name, done.seq, error_text(exc)) from exc
        self.live_calls += 1
        done = self._close_with(span, ToolResult(key=call.key, name=name, result=result,
                                                 duration_ms=self._since(started)), called.seq, actor)
        return ToolResult.of(done).result

    def _open_with(self, name: str, kind: str, first: Body, actor: str | None, *,
                   sync: bool = True, keyed: bool = False) -> tuple[OpenSpan, Event]:
        """Open a span and write its first event, in one batch (one WAL write, one fsync, or
        with ``sync=False`` none: :meth:`emit_many`); the span and that event. The events are
        those of ``first`` emitted inside :meth:`span` (``keyed``: :attr:`Emit.keyed
        <agentlog.store.writer.Emit.keyed>`)."""
        started = self._span_started(name, kind)
        who = actor or self.actor
        taken: list[Event] = []
        try:
            self.emit_many([Emit(started, who, span_item=0), Emit(first, who, span_item=0, keyed=keyed)],
                           taken=taken, sync=sync)
        except BaseException as exc:
            if taken:  # the span was opened, its first event refused: it ends with the error
                OpenSpan(self, name, str(taken[0].span_id), taken[0].seq, actor).close(exc)
            raise
        return OpenSpan(self, name, str(taken[0].span_id), taken[0].seq, actor), taken[1]

    def _close_with(self, span: OpenSpan, last: Body, caused_by: int, actor: str | None) -> Event:
        """Write ``last`` and end ``span``, in one batch; the event of ``last``."""
        events = self.emit_many([Emit(last, actor or self.actor, caused_by, span.span_id), span.ending()])
        span.ended = True
        return events[0]

    def _since(self, started: float) -> float:
        return (self.timer() - started) * 1000

    # --- recorded values --------------------------------------------------------------------

    def _value(self, cls: type[V], make: Callable[[], Any]) -> Any:
        event = self.serve(cls.TYPE, "", None) or self.emit(cls(value=make()))
        return cls.of(event).value

    def external_events(self) -> list[Event] | None:
        """The events appended to the run from outside while its program was stopped here.

        A program that stops and is resumed later (the loop runtime) asks this where it
        stops: on replay, the recorded decisions and budget changes at this point are folded
        into :attr:`state` and returned; when recording live there are none (``None``).
        """
        return self._sink.external()

    def now(self) -> float:
        """The wall clock (seconds since the epoch), recorded, and served back on replay."""
        return float(self._value(TimeNow, self._clock))

    def uuid(self) -> _uuid.UUID:
        """A random UUID, recorded, and served back on replay."""
        return _uuid.UUID(self._value(UUIDNew, lambda: str(_uuid.uuid4())))

    def random(self) -> float:
        """A random float in [0, 1), recorded, and served back on replay."""
        return float(self._value(RandomValue, _random.random))

    def __repr__(self) -> str:
        return f"<Recorder run={self.run_id} next_seq={self._sink.next_seq}>"


class OpenSpan:
    """A span opened by :meth:`Recorder.open_span`, not closed yet."""

    __slots__ = ("actor", "ended", "name", "rec", "span_id", "started_seq")

    def __init__(self, rec: Recorder, name: str, span_id: str, started_seq: int, actor: str | None) -> None:
        self.rec, self.name, self.span_id, self.started_seq, self.actor = rec, name, span_id, started_seq, actor
        self.ended = False
        """True once its ``span.ended`` is written (by :meth:`close`, or in a batch: :meth:`ending`)."""

    @contextlib.contextmanager
    def entered(self) -> Iterator[str]:
        """Make this span the current one of its recorder in this context, inside the block."""
        token = _current_span.set((id(self.rec), self.span_id))
        try:
            yield self.span_id
        finally:
            _current_span.reset(token)

    def close(self, error: BaseException | None = None) -> Event:
        """Write ``span.ended``: ``ok``, or ``error`` with ``error``'s text."""
        event = self.rec.emit(self.ending(error).body, actor=self.actor, caused_by=self.started_seq,
                              span_id=self.span_id)
        self.ended = True
        return event

    def ending(self, error: BaseException | None = None) -> Emit:
        """The ``span.ended`` :meth:`close` writes, as the last item of a batch
        (:meth:`Recorder.emit_many`); set :attr:`ended` once the batch is written."""
        body = SpanEnded(name=self.name) if error is None else SpanEnded(
            name=self.name, status="error", error=_span_error(error))
        return Emit(body, self.actor or self.rec.actor, self.started_seq, self.span_id)


# --- decorators for existing code -------------------------------------------------------------


def tool(fn: F | None = None, *, name: str | None = None) -> Any:
    """Make a function a recorded tool call while a recorder is active (a plain call otherwise).

    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     return a + b
    >>> add(1, 2)   # no recorder active: a plain call
    3
    """
    def decorate(func: F) -> F:
        tool_name = name or func.__name__
        signature = inspect.signature(func)

        def arguments(*args: Any, **kwargs: Any) -> dict[str, Any]:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return dict(bound.arguments)

        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                rec = active_recorder()
                if rec is None:
                    return await func(*args, **kwargs)
                return await rec.atool(tool_name, arguments(*args, **kwargs), func)
            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = active_recorder()
            if rec is None:
                return func(*args, **kwargs)
            return rec.tool(tool_name, arguments(*args, **kwargs), func)
        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


def span(fn: F | None = None, *, name: str | None = None, kind: str = "chain") -> Any:
    """Wrap a function in a span while a recorder is active (a plain call otherwise).

    >>> @span(kind="agent")
    ... def plan() -> str:
    ...     return "ok"
    >>> plan()
    'ok'
    """
    def decorate(func: F) -> F:
        span_name = name or func.__name__
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                rec = active_recorder()
                if rec is None:
                    return await func(*args, **kwargs)
                with rec.span(span_name, kind=kind):
                    return await func(*args, **kwargs)
            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = active_recorder()
            if rec is None:
                return func(*args, **kwargs)
            with rec.span(span_name, kind=kind):
                return func(*args, **kwargs)
        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


@contextlib.contextmanager
def activate(rec: Recorder) -> Iterator[Recorder]:
    """Make ``rec`` the active recorder of this context (for ``@tool`` and ``@span``)."""
    token = _active.set(rec)
    with _open_lock:
        _open[rec] = _open.get(rec, 0) + 1
    try:
        yield rec
    finally:
        _active.reset(token)
        with _open_lock:
            if _open[rec] == 1:
                del _open[rec]
            else:
                _open[rec] -= 1
