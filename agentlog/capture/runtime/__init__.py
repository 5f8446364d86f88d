"""The loop runtime: a pure agent decides, the executor acts, and every result is logged first.

An *agent* is any object with a ``next_step(state)`` method (and, optionally, a ``name`` and
its own ``reducers``). Given the folded state of the run so far, it returns one step:

- :class:`CallModel` — ask the model (``model=`` performs it; the answer is recorded);
- :class:`CallTool` — run a tool (``needs_approval=True`` waits for a person's decision);
- :class:`RequestApproval` — ask a person about any action;
- :class:`Emit` — append facts the agent derived from the state (graph objects with their
  provenance, ``state.patch`` ops);
- :class:`Finish` — stop with a result.

``next_step`` is pure: no clock, no randomness, no I/O. Same state in, same step out. Everything
it needs is in the state: ``state["input"]``, the conversation in ``state["messages"]``, every
tool result in ``state["tools"]``, decisions in ``state["approvals"]``, ``state["vars"]``,
``state["objects"]``, and the model's last answer in ``state["loop"]["answer"]`` (see
:mod:`agentlog.capture.loopstate`).

The executor (:class:`AgentProgram`, a program like any other, :mod:`.loop`) performs each step through the
recorder, inside a span of kind ``agent`` whose children are the step's ``llm`` / ``tool``
spans, so each result is appended before the loop decides again::

    run = al.run_agent(agent, input=ticket, model=call_model, tools={"lookup": lookup},
                       budget=al.Budget(max_cost_usd=0.50))

**Resume is the same loop.** ``al.resume(run, agent, model=..., tools=...)`` loads the run,
folds it, and continues, in any process, after a crash or after a decision:

- spans a crash left open are closed first (``span.ended`` with ``status`` ``error`` and
  ``error`` ``interrupted``);
- a ``tool.call`` without its result is finished with its *original* idempotency key
  (``run_id:seq`` of that call), never issued again; an ``llm.request`` without its answer is
  asked again and answered under that request; an :class:`Emit` cut short emits the rest of
  the facts it decided;
- ``al.approve`` / ``al.deny`` append the decision from anywhere; on resume a granted gated
  tool call runs, a denied one never does (the agent reads the decision in
  ``state["approvals"]["decided"]`` and decides what to do).

**Budgets** (:class:`Budget`) are checked before every model or tool call against the folded
``usage`` and the event count; an overrun appends ``budget.exceeded`` and the run stops cleanly
with status ``budget_exceeded`` (``al.resume(..., budget=...)`` with a larger one goes on).

**Replay and forks** work as for any program: ``al.replay(AgentProgram(agent, ...), run)``
replays a run, resumed or not, and ``al.fork(run, at, program=AgentProgram(...), edit=...)``
forks it. Where the recorded process died, replay closes the spans as the resume did and goes
on the same way; where it stopped for a decision, replay folds in the recorded decision.

The package holds one concern per module: :mod:`.steps` (what an agent decides),
:mod:`.budget`, :mod:`.loop` (deciding and acting), :mod:`.start` (``run_agent`` and the
session every start and resume runs, on the one run lifecycle of
:mod:`agentlog.capture.lifecycle`), :mod:`.resume` and :mod:`.approvals`.

>>> import agentlog as al, tempfile
>>> class Shout:
...     name = "shout"
...     def next_step(self, state):
...         if not state["tools"]:
...             return al.CallTool("upper", {"text": state["input"]})
...         return al.Finish(state["tools"][-1]["result"])
>>> run = al.run_agent(Shout(), input="hi", model=None, tools={"upper": lambda text: text.upper()},
...                    store=tempfile.mkdtemp(), durability="none")
>>> run.status, run.event(len(run) - 1).payload
('finished', {'result': 'HI'})
"""

from __future__ import annotations

from .approvals import approve, deny
from .budget import Budget, Overrun
from .loop import AgentProgram
from .resume import resume
from .start import run_agent
from .steps import Agent, CallModel, CallTool, Emit, Fact, Finish, RequestApproval, Step

__all__ = ["Agent", "AgentProgram", "Budget", "CallModel", "CallTool", "Emit", "Fact", "Finish",
           "Overrun", "RequestApproval", "Step", "approve", "deny", "resume", "run_agent"]
