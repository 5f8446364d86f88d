"""Fork a loop run by fold + continue: load the state at the cut, and run the loop on.

A run made by :func:`~agentlog.run_agent` has its next step decided by a pure function of the
folded state, so its Python stack need not be rebuilt by re-running the prefix (as a plain
program's must): :func:`fork_loop` reads the state at the last step boundary at or before the
cut (from the run's checkpoints, so it costs the events after the nearest one), replays only
the part of the step the cut falls in (none when the cut is between steps: every answer
served from the log, each event compared), writes ``fork.started`` and the edits at the cut,
and runs the loop on, as :func:`~agentlog.resume` does. No model or tool call of the prefix is
made again, and a fork of a million-event run costs what the state at its cut costs to read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..events import SPAN_STARTED
from .fork import Edit, ReplaceInput, fork_sink, warn_unserved
from .lifecycle import closing, drive
from .recorder import Recorder
from .replay import deferred_inputs
from .runtime.loop import AgentProgram, Loop
from .runtime.resume import _interrupted_emit

__all__ = ["fork_loop", "step_boundary"]


def made_by(run: Any, at: int, program: AgentProgram) -> bool:
    """Whether the loop spans of the run up to ``at`` are this agent's (their actor is its
    name): folding to the cut trusts that the prefix is what this program would have done,
    which only a replay checks, so another program is forked by replay and diverges there."""
    table = run._columns(("type", "actor"), 0, at + 1)  # two columns, not every event
    for batch in reversed(table.to_batches()):  # the last span.started with an actor decides
        types, actors = batch.column(0), batch.column(1)
        codes = {i for i, name in enumerate(types.dictionary.to_pylist()) if name == SPAN_STARTED}
        indices = types.indices.to_pylist()
        for i in range(len(indices) - 1, -1, -1):
            if indices[i] in codes and (actor := actors[i].as_py()) is not None:
                return bool(actor == program.name)
    return False


def step_boundary(run: Any, at: int, program: AgentProgram) -> tuple[int, Any] | None:
    """The last seq at or before ``at`` where no step of the loop is open, and the state there;
    ``None`` when the run is not a loop run of this agent or has no step before the cut."""
    if not made_by(run, at, program):
        return None
    reducers = program.reducers
    state = run.state_at(at, reducers=reducers)
    loop = state.get("loop")
    if loop is None or loop.get("steps", 0) == 0 and loop.get("step") is None:
        return None
    step = loop.get("step")
    if step is None:
        return at, state
    base = int(step["seq"]) - 1
    if base < 0:
        return None
    return base, run.state_at(base, reducers=reducers)


def fork_loop(run: Any, at: int, *, program: AgentProgram, edits: list[Edit], name: str | None,
              store: Any, run_id: str | None, tags: Mapping[str, Any] | None,
              clock: Callable[[], float] | None) -> Any | None:
    """:func:`~agentlog.fork` for a loop run (see the module docstring); ``None`` when the cut
    is before the loop's first step (the caller re-runs the program instead)."""
    if at < 0 or any(isinstance(e, ReplaceInput) for e in edits):
        return None
    found = step_boundary(run, at, program)
    if found is None:
        return None
    base, state = found
    writer, sink, bind = fork_sink(run, at, edits, name=name, store=store, run_id=run_id, tags=tags, clock=clock,
                                   start=base + 1)
    rec = Recorder(sink, inputs=deferred_inputs(run), reducers=program.reducers, state=state,
                   clock=clock or time.time, timer=clock or time.perf_counter)
    bind(rec)
    partial = _interrupted_emit(run, state, program) if state["loop"]["step"] is None else None
    loop = Loop(program, rec, partial)
    with closing(writer, what="fork recorded as run"):  # no run.started: the run goes on mid-way
        drive(rec, lambda _: loop.run(), begin=lambda: None)
    warn_unserved(run, edits, sink, writer.id)
    return writer.run
