"""Replay a recorded run: every answer from the log, zero tokens.

``strict`` re-runs the program and compares every event it emits with the recorded one; the
first difference is a :class:`~agentlog.capture.divergence.Divergence`. ``permissive`` serves
every call whose key is in the log and sends new ones out live, recording into a new run.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import DivergenceError
from ..events import RunStarted
from .divergence import Divergence
from .effects import Steps, arun
from .effects import run as run_steps
from .lifecycle import Stopped, closing, program_steps
from .recorder import Deferred, Recorder
from .replayable import require_replayable
from .session import Program, program_reducers, resolve_store
from .sinks import Interrupted, ReplaySink, ResponseCache, WriterSink, recorded_by, run_redactor

__all__ = ["ReplayMode", "ReplayResult", "areplay", "assert_replays", "deferred_inputs", "recorded_inputs", "replay",
           "run_coroutine"]

T = TypeVar("T")


class ReplayMode(enum.StrEnum):
    """How :func:`replay` treats calls: ``strict`` or ``permissive``."""

    STRICT = "strict"
    PERMISSIVE = "permissive"

    @classmethod
    def parse(cls, value: str) -> ReplayMode:
        """The mode named ``value``; a bad value lists the valid ones."""
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(repr(m.value) for m in cls)
            raise ValueError(f"mode={value!r} is not a replay mode; use one of {valid}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """What a replay did."""

    mode: ReplayMode
    """``strict`` or ``permissive``."""
    ok: bool
    """True when the program replayed without diverging."""
    events: int
    """How many events the program emitted."""
    served: int
    """Calls answered from the log."""
    live: int
    """Calls that went out live (permissive only)."""
    divergence: Divergence | None = None
    """The first difference (strict only)."""
    run: Any = None
    """The new run (permissive only)."""
    result: Any = None
    """What the program returned."""

    def __str__(self) -> str:
        if self.divergence is not None:
            return str(self.divergence)
        where = f" into run {self.run.id}" if self.run is not None else ""
        return (f"{self.mode} replay ok: {self.events:,} events, {self.served:,} calls from the log, "
                f"{self.live:,} live{where}")


def recorded_inputs(run: Any) -> Any:
    """The inputs recorded in a run's ``run.started`` event (``None`` if it has none)."""
    if len(run) == 0:
        return None
    first = run.event(0)
    return RunStarted.of(first).inputs if first.type == RunStarted.TYPE else None


def deferred_inputs(run: Any) -> Deferred:
    """:func:`recorded_inputs`, read when the program first asks for ``rec.inputs``: a run
    that goes on (a resume, a fork by fold) has its ``run.started`` written already, and
    reading the first event costs a row group of the run's first segment (8,192 rows)."""
    return Deferred(lambda: recorded_inputs(run))


def _strict(program: Program, run: Any, reducers: Any, capture_http: bool) -> Steps[ReplayResult]:
    sink = ReplaySink(run.iter_events(), run_id=run.id, prefix=len(run), recorded_by=recorded_by(run),
                      redactor=run_redactor(run))
    rec = Recorder(sink, inputs=recorded_inputs(run), reducers=program_reducers(program, reducers),
                   capture_http=capture_http)
    divergence, result = None, None
    try:
        try:
            result = yield from program_steps(rec, program)
        except Stopped:
            pass  # stopped without finishing (waiting): fine if the recorded run stopped here too
        left = sink.remaining()
        if left is not None:
            divergence = Divergence(run_id=run.id, seq=left.seq, expected=left, actual=None,
                                    note="the program finished before the recorded run did")
    except DivergenceError as exc:
        divergence = exc.divergence
    except Interrupted as exc:  # a program that does not resume (the loop runtime's does)
        divergence = Divergence(run_id=run.id, seq=exc.seq, expected=run.event(exc.seq), actual=None,
                                note="the recorded process was interrupted here and resumed; this "
                                     "program does not resume (an al.AgentProgram does)")
    except Exception:
        if sink.first_divergence is None:
            raise
    # an SDK may catch the divergence raised inside its HTTP call and fail (or go on) otherwise:
    # the first difference is the one to report
    divergence = sink.first_divergence or divergence
    return ReplayResult(mode=ReplayMode.STRICT, ok=divergence is None, events=sink.pos,
                        served=rec.served_calls, live=rec.live_calls, divergence=divergence,
                        result=result)


def _permissive(program: Program, run: Any, live: Callable[[Mapping[str, Any]], Any] | None,
                store: Any, name: str | None, reducers: Any, capture_http: bool) -> Steps[ReplayResult]:
    writer = resolve_store(store if store is not None else run.store).create_run(
        name=name or f"{run.meta.get('name') or run.id} replay", tags={"replay_of": run.id},
        redact=run_redactor(run).names)
    rec = Recorder(WriterSink(writer, cache=ResponseCache(run.iter_events())),
                   inputs=recorded_inputs(run), reducers=program_reducers(program, reducers),
                   live_llm=live, capture_http=capture_http)
    result = None
    with closing(writer, what="replayed into run"):
        result = yield from program_steps(rec, program)
    new = writer.run
    return ReplayResult(mode=ReplayMode.PERMISSIVE, ok=True, events=len(new),
                        served=rec.served_calls, live=rec.live_calls, run=new, result=result)


def _steps(program: Program, run: Any, mode: str, live: Callable[[Mapping[str, Any]], Any] | None,
           store: Any, name: str | None, reducers: Any, capture_http: bool) -> Steps[ReplayResult]:
    require_replayable(run)
    if ReplayMode.parse(mode) is ReplayMode.STRICT:
        return _strict(program, run, reducers, capture_http)
    return _permissive(program, run, live, store, name, reducers, capture_http)


def replay(program: Program, run: Any, *, mode: str = "strict",
           live: Callable[[Mapping[str, Any]], Any] | None = None, store: Any = None,
           name: str | None = None, reducers: Any = None, capture_http: bool = True) -> ReplayResult:
    """Re-run ``program`` against a recorded run, serving every recorded answer from the log.

    Args:
        program: the program that was recorded (or a changed version of it). An ``async def``
            program is run on an event loop of its own (:func:`areplay` awaits it in yours;
            inside a running loop, a notebook cell, ``await al.areplay(...)`` it).
        run: the recorded :class:`~agentlog.Run`.
        mode: ``"strict"``: compare every emitted event with the recorded one (not ``ts``) and
            stop at the first difference; nothing is written, no call goes out.
            ``"permissive"``: serve calls whose key is in the log, send new ones out through
            ``live`` (or the program's own ``call``), and record into a new run.
        live: performs model calls that the log cannot answer (permissive).
        store: where the permissive run is written (default: the recorded run's store).
        name: the permissive run's name.
        capture_http: serve the program's httpx requests from the log, as they were recorded
            (``False`` for a run recorded with ``capture_http=False``).

    Returns:
        A :class:`ReplayResult`; in strict mode ``result.divergence`` says where and how the
        program left the recorded run.

    Raises:
        NotReplayableError: the run holds no program's recorded answers (an import).
        RuntimeError: an ``async def`` program, called inside a running event loop.
    """
    if inspect.iscoroutinefunction(program):
        return run_coroutine(areplay(program, run, mode=mode, live=live, store=store, name=name,
                                     reducers=reducers, capture_http=capture_http), "al.areplay")
    return run_steps(_steps(program, run, mode, live, store, name, reducers, capture_http))


async def areplay(program: Program, run: Any, *, mode: str = "strict",
                  live: Callable[[Mapping[str, Any]], Any] | None = None, store: Any = None,
                  name: str | None = None, reducers: Any = None, capture_http: bool = True) -> ReplayResult:
    """:func:`replay` for an ``async def program(rec)``, awaited in the running event loop.

    >>> import agentlog as al, asyncio, tempfile
    >>> async def hello(rec):
    ...     await asyncio.sleep(0)
    ...     return rec.uuid().version
    >>> recorded = asyncio.run(al.arecord(hello, store=tempfile.mkdtemp()))
    >>> asyncio.run(al.areplay(hello, recorded)).ok
    True
    """
    return await arun(_steps(program, run, mode, live, store, name, reducers, capture_http))


def run_coroutine(coro: Coroutine[Any, Any, T], instead: str) -> T:
    """Run ``coro`` on an event loop of its own; inside a running loop (a notebook cell), close
    it and say to await ``instead``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError(f"the program is a coroutine function and an event loop is already running here "
                       f"(a notebook cell, an async function): use `await {instead}(...)`")


def assert_replays(run: Any, program: Program) -> ReplayResult:
    """A recorded run as a regression test: strict replay must pass.

    Raises:
        AssertionError: with the divergence explained.
    """
    result = replay(program, run, mode="strict")
    if not result.ok:
        raise AssertionError(str(result.divergence))
    return result
