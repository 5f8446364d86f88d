"""The loop: the agent decides on the folded state, the executor acts, and every result is
logged before the agent decides again.

:class:`AgentProgram` is an agent with its model and tools, as a program like any other;
each step runs inside a span of kind ``agent`` whose children are the step's ``llm`` /
``tool`` spans.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...errors import AgentError, DivergenceError, ReducerError, ToolError
from ...events import (
    ApprovalRequested,
    BlobRef,
    Event,
    LLMRequest,
    ToolCall,
    ToolResult,
)
from ...folding import Reducers, fold, thaw
from ..lifecycle import Stopped
from ..loopstate import action_key, agent_reducers
from ..recorder import Recorder, error_text, takes_idempotency_key
from ..sinks import Interrupted
from .budget import Budget
from .steps import STEPS, Agent, CallModel, CallTool, Emit, Fact, Finish, RequestApproval, Step, budget_kind

__all__ = ["REASONING", "AgentProgram", "Partial", "agent_name", "llm_request_event", "tool_call_event"]

#: The key of ``approval.requested`` (an open type) under which the loop puts the model's last
#: answer, the reasoning the person deciding sees.
REASONING: Final = "reasoning"


def agent_name(agent: Any) -> str:
    """An agent's ``name``, else its class name."""
    return str(getattr(agent, "name", None) or type(agent).__name__)


class AgentProgram:
    """An agent with its model and tools, as a program: ``program(rec)`` runs the loop.

    ``al.run_agent`` and ``al.resume`` drive it; ``al.record``, ``al.replay`` and ``al.fork``
    take it like any program (its :attr:`reducers` are used for the state).

    Args:
        agent: has ``next_step(state) -> Step``; maybe ``name`` and ``reducers``.
        model: performs a model request (``call(request) -> response``), as in ``rec.llm``.
        tools: name -> function. A tool is called with its args as keywords, plus
            ``idempotency_key`` if it takes one. A tool that takes ``rec`` does its own I/O
            through the recorder (``al.transport.client(rec)``): it is re-run on replay, its calls
            served from the log, so its result must be small or a ``rec.blob()``.
        budget: limits for this program; ``None``: the budget recorded in the run applies.
    """

    def __init__(self, agent: Agent, *, model: Callable[[Mapping[str, Any]], Any] | None = None,
                 tools: Mapping[str, Callable[..., Any]] | None = None,
                 budget: Budget | None = None) -> None:
        if not callable(getattr(agent, "next_step", None)):
            raise TypeError(f"an agent needs a next_step(state) method; {type(agent).__name__} has none")
        self.agent = agent
        self.model = model
        self.tools = dict(tools or {})
        self.budget = budget
        self.name = agent_name(agent)
        self.__name__ = self.name
        self.reducers: Reducers = agent_reducers(getattr(agent, "reducers", None))

    def __call__(self, rec: Recorder) -> Any:
        return Loop(self, rec).run()

    def __repr__(self) -> str:
        return f"<AgentProgram {self.name} tools={sorted(self.tools)}>"


@dataclass(frozen=True, slots=True)
class Partial:
    """An :class:`Emit` cut short: the facts from ``offset`` on are still to be appended."""

    step: Emit
    offset: int
    decided_at: int
    """The seq of the span in which the step first ran (it was decided on the state before)."""


def _takes(fn: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _unknown_tool(name: str, known: list[str]) -> Callable[..., Any]:
    def missing(**_: Any) -> Any:
        raise LookupError(f"no tool named {name!r}; this agent has {', '.join(known) or 'none'}")
    return missing


def _text(value: Any) -> str:
    if isinstance(value, BlobRef):
        return value.text()
    return "" if value is None else str(value)


def _label(action: Any) -> str:
    if isinstance(action, Mapping) and "tool" in action:
        return str(action["tool"])
    text = str(thaw(action))
    return text if len(text) <= 40 else text[:39] + "…"


def tool_call_event(pending: Any) -> Event:
    """The ``tool.call`` a pending tool call (``state["loop"]["pending"]``) was recorded as."""
    return Event(seq=pending["seq"], type=ToolCall.TYPE, payload=ToolCall(
        key=pending["key"], name=pending["name"], args=thaw(pending["args"]),
        idempotency_key=pending["idempotency_key"]).to_payload())


def llm_request_event(state: Any, pending: Any) -> Event:
    """The ``llm.request`` a pending model request was recorded as."""
    # While the request waits for its answer, the conversation is the request's messages.
    return Event(seq=pending["seq"], type=LLMRequest.TYPE, payload=LLMRequest(
        key=pending["key"], model=pending["model"], messages=thaw(state["messages"]),
        tools=thaw(pending["tools"]) or (), params=thaw(pending["params"]),
        response_format=thaw(pending["response_format"])).to_payload())


class Loop:
    """One pass of a program over a recorder: decide, act, repeat."""

    def __init__(self, program: AgentProgram, rec: Recorder, partial: Partial | None = None) -> None:
        self.program, self.rec, self.partial = program, rec, partial
        self.actor = program.name

    def run(self) -> Any:
        """Run until the agent finishes (its result) or the run stops (:class:`Stopped`)."""
        while True:
            try:
                return self._steps()
            except Interrupted:
                # Replay met the point where the recorded process died: the spans closed as the
                # resume closed them; the next pass finishes what was in flight, as it did.
                continue

    def _steps(self) -> Any:
        rec = self.rec
        while True:
            rec.external_events()  # on replay: decisions and budgets appended while stopped
            state = rec.state
            pending = state["loop"]["pending"]
            if pending is not None:
                self._complete_call(state, pending)
            elif self.partial is not None:
                partial, self.partial = self.partial, None
                self._emit(state, partial.step, partial.offset, partial.decided_at)
            else:
                step = self._decide(state)
                if isinstance(step, Finish):
                    return step.result
                if not self._over_budget(state, step):
                    self._act(state, step)

    def _decide(self, state: Any) -> Step:
        step = self.program.agent.next_step(state)
        if not isinstance(step, STEPS):
            raise AgentError(f"{self.actor}.next_step returned {type(step).__name__}; return one of "
                             "CallModel, CallTool, RequestApproval, Emit, Finish")
        return step

    def _pause(self, status: str, reason: str) -> None:
        """Stop here, unless the log shows the run went on from here (replay)."""
        if self.rec.external_events():
            return
        raise Stopped(status, reason)

    # --- budget -----------------------------------------------------------------------------

    def _over_budget(self, state: Any, step: Step) -> bool:
        loop = state["loop"]
        budget = self.program.budget or Budget.from_json(thaw(loop["budget"]))
        if budget is None:
            return False
        over = budget.check(state["usage"], self.rec.next_seq, step=budget_kind(step))
        if over is None:
            return False
        if loop["exceeded"] is None:  # a resume that stops again records nothing new
            self.rec.emit(over.body(), actor=self.actor)
        self._pause("budget_exceeded", f"{over.limit} reached ({over.value} of {over.max})")
        return True

    # --- acting -----------------------------------------------------------------------------

    def _span(self, state: Any, do: str, label: str, **attributes: Any) -> Any:
        n = state["loop"]["steps"] + 1
        return self.rec.span(f"{do} {label}".rstrip(), kind="agent", actor=self.actor,
                             attributes={"step": n, "do": do, **attributes})

    def _act(self, state: Any, step: Step) -> None:
        if isinstance(step, CallModel):
            with self._span(state, "call_model", str(step.request.get("model") or "")):
                self.rec.llm(step.request, call=self.program.model, actor=self.actor)
        elif isinstance(step, CallTool):
            if step.needs_approval and not self._granted(state, step.action):
                self._ask(state, step.action, step.reason)
                return
            with self._span(state, "call_tool", step.name):
                self._run_tool(step.name, dict(step.args), None)
        elif isinstance(step, RequestApproval):
            self._ask(state, step.action, step.reason)
        elif isinstance(step, Emit):
            if not step.facts:
                raise AgentError(f"{self.actor}.next_step returned an Emit with no facts; it would "
                                 "decide the same again forever")
            self._emit(state, step, 0, None)

    def _granted(self, state: Any, action: Any) -> bool:
        wanted = action_key(action)
        decided = state["approvals"]["decided"]
        return any(str(seq) in decided and action_key(decided[str(seq)].get("action")) == wanted
                   for seq in state["loop"]["granted"])

    def _ask(self, state: Any, action: Any, reason: str) -> None:
        wanted = action_key(action)
        waiting = any(action_key(entry.get("action")) == wanted
                      for entry in state["approvals"]["pending"].values())
        if not waiting:
            answer = state["loop"]["answer"]
            reasoning = _text(answer["content"]) if answer is not None else ""
            with self._span(state, "approval", _label(action)):  # caused by the answer that proposed it
                self.rec.emit(ApprovalRequested(action=thaw(action), reason=reason,
                                                extra={REASONING: reasoning}),
                              actor=self.actor, caused_by=answer["seq"] if answer is not None else None)
        self._pause("waiting", f"approval of {_label(action)}")

    def _run_tool(self, name: str, args: dict[str, Any], pending: Any) -> None:
        fn = self.program.tools.get(name) or _unknown_tool(name, sorted(self.program.tools))
        if _takes(fn, "rec"):
            self._composite(fn, name, args, pending)
            return
        try:
            if pending is None:
                self.rec.tool(name, args, fn, actor=self.actor)
            else:
                self.rec.answer_tool(tool_call_event(pending), fn, actor=self.actor)
        except ToolError:
            pass  # recorded as the call's error: the agent reads it in state["tools"]

    def _composite(self, fn: Callable[..., Any], name: str, args: dict[str, Any], pending: Any) -> None:
        """A tool that does its own I/O through the recorder: re-run on replay (its calls are
        served), so its result is never served itself and has no duration of its own."""
        rec = self.rec
        with rec.span(name, kind="tool", actor=self.actor):
            called = rec.tool_call(name, args, actor=self.actor) if pending is None else tool_call_event(pending)
            call = ToolCall.of(called)
            kwargs: dict[str, Any] = {**args, "rec": rec}
            if takes_idempotency_key(fn):
                kwargs["idempotency_key"] = call.idempotency_key
            try:
                done = ToolResult(key=call.key, name=name, result=fn(**kwargs))
            except DivergenceError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure is the tool's recorded answer
                done = ToolResult(key=call.key, name=name, error=error_text(exc), type=type(exc).__name__)
            rec.emit(done, actor=self.actor, caused_by=called.seq)

    def _complete_call(self, state: Any, pending: Any) -> None:
        """Finish the call a crash left without its answer, under its original request."""
        tool = pending["kind"] == "tool"
        label = str((pending["name"] if tool else pending["model"]) or "")
        with self._span(state, "resume", label, call=pending["seq"]):
            if tool:
                self._run_tool(str(pending["name"]), thaw(pending["args"]), pending)
            else:
                self.rec.answer_llm(llm_request_event(state, pending), call=self.program.model,
                                    actor=self.actor)

    def _emit(self, state: Any, step: Emit, offset: int, decided_at: int | None) -> None:
        facts = step.facts[offset:]
        if not facts:
            return
        attributes: dict[str, Any] = {"facts": len(facts)}
        if decided_at is not None:
            attributes.update({"completes": decided_at, "from": offset})
        first = decided_at if decided_at is not None else self.rec.next_seq
        done = 0
        label = facts[0].type if len(facts) == 1 else f"{len(facts)} facts"
        try:
            with self._span(state, "emit", label, **attributes):
                for fact in facts:
                    self._append(fact)
                    done += 1
        except Interrupted:
            self.partial = Partial(step, offset + done, first)
            raise

    def _append(self, fact: Fact) -> None:
        rec = self.rec
        actor = fact.actor or self.actor
        # A fact no reducer accepts would poison every later fold: refuse it before writing.
        trial = Event(seq=rec.next_seq, type=fact.type, payload=fact.payload, actor=actor,
                      caused_by=fact.caused_by)
        try:
            fold([trial], reducers=self.program.reducers, initial=rec.state)
        except ReducerError as exc:
            raise AgentError(f"{self.actor}: the fact {fact.type} was refused before it was "
                             f"written: {exc.cause}") from exc
        if fact.body is not None:
            rec.emit(fact.body, actor=actor, caused_by=fact.caused_by)
        else:
            rec.emit(fact.type, fact.payload, actor=actor, caused_by=fact.caused_by)
