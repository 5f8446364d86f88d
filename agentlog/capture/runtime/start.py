"""Starting an agent's run (``al.run_agent``), and the session every start and resume runs.

A session is one stretch of the loop in one process, on the run's writer: it goes through the
one run lifecycle (:mod:`agentlog.capture.lifecycle`), so it ends ``finished``, ``failed``
(with ``run.failed``), ``interrupted`` (Ctrl-C), or stopped ``waiting`` / ``budget_exceeded``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..lifecycle import closing, drive, start
from ..recorder import Recorder
from ..session import resolve_store
from ..sinks import ResponseCache, WriterSink
from .budget import Budget
from .loop import AgentProgram, Loop, Partial
from .steps import Agent

__all__ = ["open_run", "run_agent", "session"]


def open_run(run_or_id: Any, store: Any) -> Any:
    """A run given as a :class:`~agentlog.Run` or an id (looked up in ``store``)."""
    if hasattr(run_or_id, "iter_events"):
        return run_or_id
    return resolve_store(store).run(str(run_or_id))


def session(writer: Any, program: AgentProgram, *, inputs: Any, begin: Callable[[Recorder], None],
            clock: Callable[[], float] | None, state: Any = None, partial: Partial | None = None,
            cache: ResponseCache | None = None, capture_http: bool = True) -> Any:
    """Run one session of ``program``'s loop on ``writer`` and close the run with how it ended.

    Args:
        begin: appends the session's first events (``run.started``, a budget, closing spans
            a crash left open), given the recorder.
        state: the folded state before the session (a resume).
        partial: an :class:`~agentlog.Emit` a crash cut short, to finish first (a resume).
        cache: answers served by key (a resumed fork: its parent's, after the cut).
        capture_http: record the httpx requests of the session (see :func:`run_agent`).

    Returns:
        The run, closed.
    """
    rec = Recorder(WriterSink(writer, cache=cache), inputs=inputs, reducers=program.reducers,
                   state=state, clock=clock or time.time, timer=clock or time.perf_counter,
                   capture_http=capture_http)
    loop = Loop(program, rec, partial)
    with closing(writer):
        drive(rec, lambda _: loop.run(), begin=lambda: begin(rec))
    return writer.run


def run_agent(agent: Agent, *, input: Any, model: Callable[[Mapping[str, Any]], Any] | None,
              tools: Mapping[str, Callable[..., Any]] | None, store: Any = None,
              budget: Budget | None = None, name: str | None = None, run_id: str | None = None,
              clock: Callable[[], float] | None = None, durability: str = "fsync",
              tags: Sequence[str] | Mapping[str, Any] | None = None, redact: Iterable[str] = (),
              capture_http: bool = True) -> Any:
    """Run an agent's loop until it finishes, waits for a decision, or runs out of budget.

    Args:
        agent: has ``next_step(state) -> Step`` (pure); maybe ``name`` and ``reducers``.
        input: the run's input (JSON), ``state["input"]``.
        model: performs model requests (``call(request) -> response``).
        tools: name -> function (see :class:`AgentProgram`).
        store: a :class:`~agentlog.Store`, a path, or ``None`` for the default store.
        budget: limits, recorded in the run (``budget.set``) so a resume keeps them.
        name, run_id, tags: the run's name (default: the agent's), id and labels.
        clock: a fixed clock makes the run byte-identical when repeated (it also times calls).
        durability: ``fsync`` (default: each event is on disk before the loop goes on),
            ``batch`` or ``none``.
        redact: more names whose values never reach the disk (:mod:`agentlog.redact`), kept
            in ``run.json`` for resumes, replays and forks.
        capture_http: as on :func:`~agentlog.recording`: record every httpx request the agent's
            own code sends, by any client (a model endpoint's as an LLM call with tokens and
            cost, :mod:`agentlog.capture.transport`); ``False`` leaves them unrecorded. The
            requests made inside ``model`` and the tools are not recorded again: each of those
            calls is already one row.

    Returns:
        The :class:`~agentlog.Run`; ``run.status`` is ``finished``, ``waiting`` or
        ``budget_exceeded`` (``interrupted`` after Ctrl-C: resume it).

    Raises:
        Whatever the agent or the model raised, after ``run.failed`` was recorded (the error
        carries a note naming the run). A tool's error is not raised: it is recorded, and the
        agent sees it in ``state["tools"]``.
    """
    program = AgentProgram(agent, model=model, tools=tools)
    writer = resolve_store(store).create_run(
        name=name or program.name, tags={"agent": program.name} if tags is None else tags,
        durability=durability, clock=clock, run_id=run_id, redact=redact)

    def begin(rec: Recorder) -> None:
        start(rec)
        if budget is not None:
            rec.emit(budget.body(), actor="al.run_agent")

    return session(writer, program, inputs=input, begin=begin, clock=clock, capture_http=capture_http)
