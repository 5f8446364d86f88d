"""Resume: load a run, fold it, finish what a crash cut short, and run the loop on.

The same operation after a crash, after a decision (``al.approve`` / ``al.deny``) and after a
budget stop:

- spans a crash left open are closed first (``span.ended`` with ``status`` ``error`` and
  ``error`` ``interrupted``);
- a ``tool.call`` without its result is finished with its *original* idempotency key
  (``run_id:seq`` of that call), never issued again; an ``llm.request`` without its answer is
  asked again and answered under that request; an :class:`~agentlog.Emit` cut short emits the
  rest of the facts it decided;
- a fork goes on as it began: the calls its parent made after the cut are served by key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...errors import AgentError
from ...events import INTERRUPTED, Event, RunFailed, SpanEnded, SpanStarted
from ...folding import thaw
from ..recorder import Recorder
from ..replay import deferred_inputs
from ..sinks import RESPONSE_TYPES, ResponseCache, answer_kind
from .budget import Budget
from .loop import AgentProgram, Partial
from .start import open_run, session
from .steps import Agent, Emit

__all__ = ["resume"]


def _last_error(run: Any) -> str:
    last = run.event(len(run) - 1)
    return str(RunFailed.of(last).error) if last.type == RunFailed.TYPE else "no error recorded"


def _interrupted_emit(run: Any, state: Any, program: AgentProgram) -> Partial | None:
    """An :class:`Emit` cut short (a crash left its span open, or it ended ``interrupted``):
    decided again on the state it was decided on, to append the facts it did not."""
    loop = state["loop"]
    step, last = loop["step"], len(run) - 1  # open: its facts run to the end of the log
    if step is None and loop["interrupted"] is not None:
        step = loop["interrupted"]
        last = step["ended"] - 1  # closed as interrupted: its facts run up to the close
    if step is None or step["do"] != "emit":
        return None
    decided_at = step["completes"] if step["completes"] is not None else step["seq"]
    offset = (step["from"] or 0) + (last - step["seq"])
    decided = program.agent.next_step(run.state_at(decided_at - 1, reducers=program.reducers))
    if not isinstance(decided, Emit):
        raise AgentError(f"run {run.id!r}: {program.name}.next_step decided {type(decided).__name__} "
                         f"on the state before seq {decided_at}, where it had decided Emit; "
                         "next_step must be pure (no clock, randomness or I/O)")
    return Partial(decided, offset, decided_at)


def _parent_answers(run: Any) -> ResponseCache | None:
    """For a fork: the parent's answers after the cut that the fork has not used yet, so a
    resumed fork is still served by key, as the fork itself was (``al.fork``)."""
    parent, at = run.parent, run.fork_seq
    if parent is None or at is None:
        return None
    cache = ResponseCache(parent.iter_events(start=at + 1))
    for event in run.iter_events(start=at + 1):
        if event.type in RESPONSE_TYPES:
            cache.take(*answer_kind(event))
    return cache


def _close_open_spans(rec: Recorder, run: Any, state: Any) -> None:
    """Close, innermost first, the spans a crash left open (all inside the open step)."""
    step = state["loop"]["step"]
    if step is None:
        return
    open_spans: dict[str, Event] = {}
    for event in run.iter_events(step["seq"]):
        if event.type == SpanStarted.TYPE and event.span_id is not None:
            open_spans[event.span_id] = event
        elif event.type == SpanEnded.TYPE and event.span_id is not None:
            open_spans.pop(event.span_id, None)
    for span_id, started in reversed(open_spans.items()):
        rec.emit(SpanEnded(name=SpanStarted.of(started).name, status="error", error=INTERRUPTED),
                 actor=started.actor, caused_by=started.seq, span_id=span_id)


def resume(run_or_id: Any, agent: Agent, *, model: Callable[[Mapping[str, Any]], Any] | None,
           tools: Mapping[str, Callable[..., Any]] | None, store: Any = None,
           budget: Budget | None = None, clock: Callable[[], float] | None = None,
           durability: str = "fsync") -> Any:
    """Go on with a run that stopped: after a crash, Ctrl-C, a decision, or a budget stop.

    Loads the run, folds it, closes the spans a crash left open (``interrupted``), finishes
    a tool call or model request that has no answer yet (a tool call with its original
    idempotency key), then runs the loop on. A finished run is left as it is. A fork goes on
    as it began: the calls its parent made after the cut are served from the parent's log.

    Args:
        run_or_id: a :class:`~agentlog.Run` or a run id.
        agent, model, tools: as for :func:`run_agent` (the agent must be the one that ran).
        store: where to look the id up.
        budget: a new budget for the rest of the run (recorded); ``None`` keeps the recorded one.
        clock, durability: as for :func:`run_agent`.

    Returns:
        The :class:`~agentlog.Run`, closed with its new status.

    Raises:
        RunLockedError: another process is writing the run.
        AgentError: the run has no events, or it failed (fork it before the failure instead).
    """
    run = open_run(run_or_id, store)
    program = AgentProgram(agent, model=model, tools=tools)
    before = run.status
    writer = run.store.writer(run.id, durability=durability, clock=clock)
    try:
        run = writer.run
        if len(run) == 0:
            raise AgentError(f"run {run.id!r} has no events: it stopped before run.started was "
                             "written; start it again with al.run_agent")
        state = run.state_at(len(run) - 1, reducers=program.reducers)
        if state["status"] == "failed":
            raise AgentError(f"run {run.id!r} failed ({_last_error(run)}); a failed run is not "
                             "resumed: fork it before the failure with al.fork(run, at=..., "
                             "program=al.AgentProgram(...))")
        partial = _interrupted_emit(run, state, program)
    except BaseException:
        writer.close(status=before)
        raise
    if state["status"] == "finished":
        writer.close(status="finished")
        return writer.run

    def begin(rec: Recorder) -> None:
        _close_open_spans(rec, run, state)
        if budget is not None and budget.to_json() != thaw(state["loop"]["budget"]):
            rec.emit(budget.body(), actor="al.resume")

    return session(writer, program, inputs=deferred_inputs(run), begin=begin, clock=clock, state=state,
                   partial=partial, cache=_parent_answers(run))
