"""The recorder: everything a program does that is not deterministic goes through it.

A *program* is any callable that takes a :class:`Recorder`. Model calls, tool calls, the
clock, uuids and random numbers, state patches and spans go through the recorder, so they land
in the log; on replay and in forks the recorder serves the recorded answers instead of calling
out. The recorder does not know which of these it is doing: its sink decides
(:mod:`agentlog.capture.sinks`).

>>> import agentlog as al, tempfile
>>> def hello(rec):
...     answer = rec.llm({"model": "echo", "messages": [{"role": "user", "content": "hi"}]},
...                      call=lambda req: {"content": "hello", "usage": {"prompt_tokens": 3,
...                                                                      "completion_tokens": 1}})
...     return answer.content
>>> run = al.record(hello, store=tempfile.mkdtemp(), name="hello")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import random as _random
import time
import uuid as _uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TypeVar

from .. import pricing
from ..errors import RecordError, ReplayMissError, ToolError
from ..events import (ERROR, LLM_REQUEST, LLM_RESPONSE, SPAN_ENDED, SPAN_STARTED, STATE_PATCH,
                     TOOL_CALL, TOOL_RESULT, BlobRef, Event)
from ..keys import REQUEST_SLOTS, canonical_request, llm_key, tool_key
from .llm import LLMResult, response_fields
from .sinks import INTERRUPTED, Interrupted, Served, Sink

__all__ = ["LLMCallError", "Recorder", "active_recorder", "span", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

_active: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("agentlog_recorder", default=None)
_current_span: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar(
    "agentlog_span", default=None)


#: :meth:`Recorder._recorded_result` when the log has no result and the tool must run.
_LIVE: Any = object()


class LLMCallError(RecordError):
    """A model call failed; on replay the recorded failure is raised again."""

    def __init__(self, seq: int, error: str) -> None:
        self.seq, self.error = seq, error
        super().__init__(f"model call (seq {seq}) failed: {error}")


def active_recorder() -> Recorder | None:
    """The recorder of the program running in this context, if any."""
    return _active.get()


def _takes_idempotency_key(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "idempotency_key" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _span_error(exc: BaseException) -> str:
    # A process stopped by a crash (seen again on replay) or by Ctrl-C is resumable: its spans
    # end as "interrupted", the same text al.resume writes for spans a crash left open.
    return INTERRUPTED if isinstance(exc, (Interrupted, KeyboardInterrupt)) else _error_text(exc)


def _plain(value: Any) -> Any:
    """A payload value with blob references read back as text (a request asked again)."""
    if isinstance(value, BlobRef):
        return value.text()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class Recorder:
    """The handle a program does its non-deterministic work through.

    Args:
        sink: where events go and recorded answers come from.
        inputs: the program's inputs, as recorded in ``run.started``.
        reducers: the reducer set for :attr:`state` (default: the default projection).
        state: the state before the first event this recorder emits (a resumed or forked run).
        actor: the default ``actor`` of the events.
        clock: wall clock for :meth:`now` (seconds since the epoch).
        live_llm: when set, performs model calls instead of the program's own ``call``.
        timer: measures the ``duration_ms`` of calls (a fixed clock makes them reproducible).
    """

    def __init__(self, sink: Sink, *, inputs: Any = None, reducers: Any = None,
                 state: Any = None, actor: str | None = None,
                 clock: Callable[[], float] = time.time,
                 live_llm: Callable[[Mapping[str, Any]], Any] | None = None,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        self._sink = sink
        sink.observer = self._observe
        self.inputs = inputs
        self.actor = actor
        self._clock = clock
        self.timer = timer
        self._live_llm = live_llm
        self._reducers = reducers
        self._state = state
        self._unfolded: list[Event] = []
        self.live_calls = 0
        self.served_calls = 0

    # --- state ------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The id of the run being written (or replayed)."""
        return self._sink.run_id

    @property
    def next_seq(self) -> int:
        """The seq the next event will get (so far: the number of events in the run)."""
        return self._sink.next_seq

    @property
    def state(self) -> Any:
        """The folded state after the last event, computed lazily and incrementally."""
        from ..fold import fold  # the fold engine is pure; imported on first use
        if self._state is None or self._unfolded:
            events, self._unfolded = self._unfolded, []
            self._state = fold(events, reducers=self._reducers, initial=self._state)
        return self._state

    def _observe(self, event: Event) -> None:
        self._unfolded.append(event)

    # --- plain events -----------------------------------------------------------------------

    def emit(self, type: str, payload: Mapping[str, Any] | None = None, *, actor: str | None = None,
             caused_by: int | None = None, span_id: str | None = None, **usage: Any) -> Event:
        """Append an event of any type; the current span and actor are filled in."""
        return self._sink.emit(type, dict(payload or {}), actor=actor or self.actor,
                               caused_by=caused_by, span_id=span_id or self.current_span, **usage)

    def patch(self, ops: Sequence[Mapping[str, Any]], *, actor: str | None = None) -> Event:
        """Append a ``state.patch``: RFC 6902 ops on ``state["vars"]``, checked before writing.

        Raises:
            PatchError: an op does not apply to the current state (nothing is written).
        """
        from ..fold import apply_patch
        ops = [dict(op) for op in ops]
        apply_patch(self.state["vars"], ops)  # fail here, not later in every fold
        return self.emit(STATE_PATCH, {"ops": ops}, actor=actor)

    def blob(self, data: bytes | str, media_type: str | None = None) -> BlobRef:
        """Store bytes or text as a content-addressed blob and return its reference."""
        return self._sink.put_blob(data, media_type)

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
        span_id = f"s{self._sink.next_seq}"
        payload: dict[str, Any] = {"name": name, "kind": kind, "parent": self.current_span}
        if attributes:
            payload["attributes"] = dict(attributes)
        started = self.emit(SPAN_STARTED, payload, actor=actor, span_id=span_id)
        token = _current_span.set((id(self), span_id))
        try:
            yield span_id
        except BaseException as exc:
            _current_span.reset(token)
            self.emit(SPAN_ENDED, {"name": name, "status": "error", "error": _span_error(exc)},
                      actor=actor, caused_by=started.seq, span_id=span_id)
            raise
        _current_span.reset(token)
        self.emit(SPAN_ENDED, {"name": name, "status": "ok", "error": None},
                  actor=actor, caused_by=started.seq, span_id=span_id)

    # --- model calls ------------------------------------------------------------------------

    def _llm_request(self, request: Mapping[str, Any], actor: str | None) -> tuple[str, Event]:
        key = llm_key(request)
        event = self.emit(LLM_REQUEST, {"key": key, **canonical_request(request)}, actor=actor)
        return key, event

    def _served(self, served: Served, caused_by: int, actor: str | None) -> Event:
        self.served_calls += 1
        return self._sink.emit(served.type, dict(served.payload), actor=actor or self.actor,
                               caused_by=caused_by, span_id=self.current_span, **served.fields)

    def _llm_answer(self, key: str, request_event: Event, actor: str | None) -> LLMResult | None:
        served = self._sink.lookup(LLM_RESPONSE, key)
        if served is None:
            return None
        event = self._served(served, request_event.seq, actor)
        if event.type == ERROR:
            raise LLMCallError(event.seq, str(event.payload.get("error")))
        return LLMResult.from_event(event)

    def _llm_call_fn(self, call: Any, key: str) -> Any:
        fn = self._live_llm or call
        if fn is None:
            raise ReplayMissError(f"run {self.run_id}: no recorded answer for model request {key[:16]}… "
                                  "and no call= to make it live")
        return fn

    def _llm_record(self, raw: Any, key: str, request: Mapping[str, Any], request_event: Event,
                    started: float, provider: str | None, actor: str | None) -> LLMResult:
        self.live_calls += 1
        duration = (self.timer() - started) * 1000
        fields, usage = response_fields(raw, provider=provider)
        model = fields.pop("model") or request.get("model")
        when = datetime.fromtimestamp(request_event.ts / 1e6, tz=UTC) if request_event.ts else None
        cost = pricing.cost(model, usage, provider=provider, when=when) if model else None
        payload = {"key": key, "model": model, **fields, "usage": asdict(usage),
                   "cost_source": cost.source if cost else "unknown", "cache_hit": False}
        event = self.emit(LLM_RESPONSE, payload, actor=actor, caused_by=request_event.seq,
                          model=model, input_tokens=usage.input_tokens,
                          output_tokens=usage.output_tokens, cached_tokens=usage.cached_tokens,
                          cost_usd=cost.usd if cost else None, duration_ms=duration)
        return LLMResult.from_event(event)

    def _call_failed(self, kind: str, key: str, cause: Event, exc: BaseException,
                     actor: str | None) -> Event:
        return self.emit(ERROR, {"kind": kind, "key": key, "error": _error_text(exc),
                                 "type": type(exc).__name__}, actor=actor, caused_by=cause.seq)

    def llm(self, request: Mapping[str, Any], call: Callable[[Mapping[str, Any]], Any] | None = None,
            *, provider: str | None = None, actor: str | None = None) -> LLMResult:
        """Ask a model, or serve the recorded answer.

        Emits ``llm.request`` then ``llm.response`` (usage columns and cost filled) inside a span
        of kind ``llm``; a failed call emits ``error`` and raises :class:`LLMCallError`.

        Args:
            request: a chat-style mapping: model, messages, tools, params, response_format
                (nested under ``params`` or flat, OpenAI-style).
            call: performs the request and returns the provider's response (an SDK object, a
                mapping, or a string).
            provider: the provider's name, when the usage shape alone is ambiguous.
        """
        with self.span(str(request.get("model") or "llm"), kind="llm", actor=actor):
            key, request_event = self._llm_request(request, actor)
            return self._llm_complete(key, request, request_event, call, provider, actor)

    def _llm_complete(self, key: str, request: Mapping[str, Any], request_event: Event,
                      call: Any, provider: str | None, actor: str | None) -> LLMResult:
        answer = self._llm_answer(key, request_event, actor)
        if answer is not None:
            return answer
        fn = self._llm_call_fn(call, key)
        started = self.timer()
        try:
            raw = fn(request)
        except Exception as exc:
            raise self._llm_failed(key, request_event, exc, actor) from exc
        return self._llm_record(raw, key, request, request_event, started, provider, actor)

    def _llm_failed(self, key: str, request_event: Event, exc: Exception, actor: str | None) -> LLMCallError:
        failed = self._call_failed("llm.response", key, request_event, exc, actor)
        return LLMCallError(failed.seq, _error_text(exc))

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
        payload = request_event.payload
        request = {slot: _plain(payload.get(slot)) for slot in REQUEST_SLOTS}
        with self.span(str(request.get("model") or "llm"), kind="llm", actor=actor):
            return self._llm_complete(str(payload["key"]), request, request_event, call, provider, actor)

    async def allm(self, request: Mapping[str, Any],
                   call: Callable[[Mapping[str, Any]], Awaitable[Any]] | None = None,
                   *, provider: str | None = None, actor: str | None = None) -> LLMResult:
        """The async twin of :meth:`llm`: ``call`` is awaited."""
        with self.span(str(request.get("model") or "llm"), kind="llm", actor=actor):
            key, request_event = self._llm_request(request, actor)
            answer = self._llm_answer(key, request_event, actor)
            if answer is not None:
                return answer
            fn = self._llm_call_fn(call, key)
            started = self.timer()
            try:
                raw = fn(request)
                raw = await raw if inspect.isawaitable(raw) else raw
            except Exception as exc:
                raise self._llm_failed(key, request_event, exc, actor) from exc
            return self._llm_record(raw, key, request, request_event, started, provider, actor)

    # --- tool calls -------------------------------------------------------------------------

    def _tool_request(self, name: str, args: Mapping[str, Any], actor: str | None) -> tuple[str, Event]:
        key = tool_key(name, args)
        idem = f"{self.run_id}:{self._sink.next_seq}"
        event = self.emit(TOOL_CALL, {"key": key, "name": name, "args": dict(args),
                                      "idempotency_key": idem}, actor=actor)
        return key, event

    def _tool_answer(self, key: str, name: str, call_event: Event, actor: str | None) -> Event | None:
        served = self._sink.lookup(TOOL_RESULT, key)
        if served is None:
            return None
        event = self._served(served, call_event.seq, actor)
        if "error" in event.payload and event.payload["error"] is not None:
            raise ToolError(name, event.seq, str(event.payload["error"]))
        return event

    @staticmethod
    def _tool_kwargs(fn: Callable[..., Any], args: Mapping[str, Any], call_event: Event) -> dict[str, Any]:
        kwargs = dict(args)
        if _takes_idempotency_key(fn):
            kwargs["idempotency_key"] = call_event.payload["idempotency_key"]
        return kwargs

    def _tool_done(self, key: str, name: str, call_event: Event, started: float, result: Any = None,
                   exc: BaseException | None = None, actor: str | None = None) -> Event:
        self.live_calls += 1
        duration = (self.timer() - started) * 1000
        payload: dict[str, Any] = {"key": key, "name": name}
        if exc is None:
            payload["result"] = result
        else:
            payload.update(error=_error_text(exc), type=type(exc).__name__)
        return self.emit(TOOL_RESULT, payload, actor=actor, caused_by=call_event.seq, duration_ms=duration)

    def tool(self, name: str, args: Mapping[str, Any] | None = None,
             fn: Callable[..., Any] | None = None, *, actor: str | None = None) -> Any:
        """Call a tool, or serve its recorded result.

        Emits ``tool.call`` (with an idempotency key ``f"{run_id}:{seq}"``, passed to ``fn`` when
        it takes an ``idempotency_key`` argument) and ``tool.result`` inside a span of kind
        ``tool``. ``fn`` is called as ``fn(**args)``; its result must be JSON (bytes become a
        blob). A failing tool is recorded and raises :class:`~agentlog.errors.ToolError`.

        Returns:
            the result as stored in the log (so recording and replay return the same value).
        """
        args = dict(args or {})
        with self.span(name, kind="tool", actor=actor):
            key, call_event = self._tool_request(name, args, actor)
            return self._tool_complete(key, name, args, call_event, fn, actor)

    def _recorded_result(self, key: str, name: str, call_event: Event,
                         fn: Callable[..., Any] | None, actor: str | None) -> Any:
        """The call's recorded result, or :data:`_LIVE` when ``fn`` must run now."""
        served = self._tool_answer(key, name, call_event, actor)
        if served is not None:
            return served.payload.get("result")
        if fn is None:
            raise ReplayMissError(f"run {self.run_id}: no recorded result for tool {name!r} "
                                  f"(key {key[:16]}…) and no fn= to call it live")
        return _LIVE

    def _tool_failed(self, key: str, name: str, call_event: Event, started: float,
                     exc: Exception, actor: str | None) -> ToolError:
        done = self._tool_done(key, name, call_event, started, exc=exc, actor=actor)
        return ToolError(name, done.seq, _error_text(exc))

    def _tool_complete(self, key: str, name: str, args: Mapping[str, Any], call_event: Event,
                       fn: Callable[..., Any] | None, actor: str | None) -> Any:
        recorded = self._recorded_result(key, name, call_event, fn, actor)
        if recorded is not _LIVE:
            return recorded
        assert fn is not None
        started = self.timer()
        try:
            result = fn(**self._tool_kwargs(fn, args, call_event))
        except Exception as exc:
            raise self._tool_failed(key, name, call_event, started, exc, actor) from exc
        return self._tool_done(key, name, call_event, started, result, actor=actor).payload.get("result")

    def answer_tool(self, call_event: Event, fn: Callable[..., Any] | None = None, *,
                    actor: str | None = None) -> Any:
        """Finish a tool call that the log holds without its result (a crash came between).

        ``fn`` is called with the call's recorded args and its *original* idempotency key, so
        a downstream service that already did the work recognises the repeat; the result is
        ``caused_by`` the original ``tool.call``, inside a new span of kind ``tool``. On replay
        the recorded result is served.

        Raises:
            ToolError: the tool failed (recorded).
        """
        payload = call_event.payload
        name, args = str(payload["name"]), dict(payload.get("args") or {})
        with self.span(name, kind="tool", actor=actor):
            return self._tool_complete(str(payload["key"]), name, args, call_event, fn, actor)

    async def atool(self, name: str, args: Mapping[str, Any] | None = None,
                    fn: Callable[..., Any] | None = None, *, actor: str | None = None) -> Any:
        """The async twin of :meth:`tool`: ``fn`` may be a coroutine function."""
        args = dict(args or {})
        with self.span(name, kind="tool", actor=actor):
            key, call_event = self._tool_request(name, args, actor)
            recorded = self._recorded_result(key, name, call_event, fn, actor)
            if recorded is not _LIVE:
                return recorded
            assert fn is not None
            started = self.timer()
            try:
                result = fn(**self._tool_kwargs(fn, args, call_event))
                result = await result if inspect.isawaitable(result) else result
            except Exception as exc:
                raise self._tool_failed(key, name, call_event, started, exc, actor) from exc
            return self._tool_done(key, name, call_event, started, result, actor=actor).payload.get("result")

    # --- recorded values --------------------------------------------------------------------

    def _value(self, kind: str, make: Callable[[], Any]) -> Any:
        served = self._sink.lookup(kind, "")
        if served is not None:
            return self._served(served, None, None).payload["value"]  # type: ignore[arg-type]
        return self.emit(kind, {"value": make()}).payload["value"]

    def external_events(self) -> list[Event] | None:
        """The events appended to the run from outside while its program was stopped here.

        A program that stops and is resumed later (the loop runtime) asks this where it
        stops: on replay, the recorded decisions and budget changes at this point are folded
        into :attr:`state` and returned; when recording live there are none (``None``).
        """
        return self._sink.external()

    def now(self) -> float:
        """The wall clock (seconds since the epoch), recorded, and served back on replay."""
        return float(self._value("time.now", self._clock))

    def uuid(self) -> _uuid.UUID:
        """A random UUID, recorded, and served back on replay."""
        return _uuid.UUID(self._value("uuid.new", lambda: str(_uuid.uuid4())))

    def random(self) -> float:
        """A random float in [0, 1), recorded, and served back on replay."""
        return float(self._value("random.value", _random.random))

    def __repr__(self) -> str:
        return f"<Recorder run={self.run_id} next_seq={self._sink.next_seq}>"


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
                rec = _active.get()
                if rec is None:
                    return await func(*args, **kwargs)
                return await rec.atool(tool_name, arguments(*args, **kwargs), func)
            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = _active.get()
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
                rec = _active.get()
                if rec is None:
                    return await func(*args, **kwargs)
                with rec.span(span_name, kind=kind):
                    return await func(*args, **kwargs)
            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = _active.get()
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
    try:
        yield rec
    finally:
        _active.reset(token)
