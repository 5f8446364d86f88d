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

The executor (:class:`AgentProgram`, a program like any other) performs each step through the
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

>>> import agentlog as al, tempfile
>>> class Shout:
...     name = "shout"
...     def next_step(self, state):
...         if not state["tools"]:
...             return al.CallTool("upper", {"text": state["input"]})
...         return al.Finish(state["tools"][-1]["result"])
>>> run = al.run_agent(Shout(), input="hi", model=None, tools={"upper": str.upper},
...                    store=tempfile.mkdtemp(), durability="none")  # doctest: +SKIP
>>> run.status, run.event(len(run) - 1).payload  # doctest: +SKIP
('finished', {'result': 'HI'})
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..errors import AgentError, ApprovalError, DivergenceError, ReducerError, ToolError
from ..events import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    APPROVAL_REQUESTED,
    BUDGET_EXCEEDED,
    ERROR,
    LLM_REQUEST,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    SPAN_ENDED,
    SPAN_STARTED,
    TOOL_CALL,
    TOOL_RESULT,
    BlobRef,
    Event,
)
from ..fold import Reducers, fold, thaw
from ..keys import tool_key
from .loopstate import action_key, agent_reducers, tool_action
from .recorder import Recorder, activate
from .replay import recorded_inputs
from .session import Stopped, resolve_store
from .sinks import BUDGET_SET, INTERRUPTED, RESPONSE_TYPES, Interrupted, ResponseCache, WriterSink

__all__ = ["Agent", "AgentProgram", "Budget", "CallModel", "CallTool", "Emit", "Fact", "Finish",
           "Overrun", "RequestApproval", "Step", "approve", "deny", "resume", "run_agent"]


# --- steps: what an agent decides ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallModel:
    """Ask the model.

    >>> CallModel({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}).request["model"]
    'gpt-4o-mini'
    """

    request: Mapping[str, Any]
    """A chat-style request: ``model``, ``messages``, and maybe ``tools``, ``params``."""


@dataclass(frozen=True, slots=True)
class CallTool:
    """Run a tool, once; with ``needs_approval`` only after a person granted it.

    >>> CallTool("refund", {"order": "ORD-1", "amount": 840}, needs_approval=True).action
    {'tool': 'refund', 'args': {'order': 'ORD-1', 'amount': 840}}
    """

    name: str
    """The tool's name in ``tools=``."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments (JSON values)."""
    needs_approval: bool = False
    """Wait for ``al.approve`` before running (``al.deny``: it never runs)."""
    reason: str = ""
    """Why, for the person deciding."""

    @property
    def action(self) -> dict[str, Any]:
        """The action an approval request for this call names."""
        return tool_action(self.name, self.args)


@dataclass(frozen=True, slots=True)
class RequestApproval:
    """Ask a person to decide about ``action``; the run waits until they do."""

    action: Any
    """What the decision is about (any JSON value)."""
    reason: str = ""
    """Why, for the person deciding."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One event an :class:`Emit` step appends.

    >>> Fact("object.created", {"id": "co1", "kind": "company", "data": {"name": "Northwind"}}).type
    'object.created'
    """

    type: str
    """The event type, e.g. ``object.created``, ``relation.created``, ``state.patch``."""
    payload: Mapping[str, Any] = field(default_factory=dict)
    """The event's payload (see :mod:`agentlog.fold.reducers` for the standard shapes)."""
    actor: str | None = None
    """Who produced it (default: the agent's name)."""
    caused_by: int | None = None
    """The seq of the event it derives from (its provenance)."""


@dataclass(frozen=True, slots=True)
class Emit:
    """Append facts the agent derived from the state, in one step.

    >>> Emit([Fact("state.patch", {"ops": [{"op": "add", "path": "/seen", "value": 3}]})]).facts[0].type
    'state.patch'
    """

    facts: Sequence[Fact]
    """The events, in order (at least one)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "facts", tuple(self.facts))


@dataclass(frozen=True, slots=True)
class Finish:
    """Stop: the run is finished with ``result`` (a JSON value)."""

    result: Any = None


Step = CallModel | CallTool | RequestApproval | Emit | Finish
_STEPS: Final = (CallModel, CallTool, RequestApproval, Emit, Finish)


class Agent(Protocol):
    """What the loop runs: ``next_step(state) -> Step``, pure."""

    def next_step(self, state: Any) -> Step: ...


# --- budgets -----------------------------------------------------------------------------------

_LIMITS: Final = ("max_cost_usd", "max_tokens", "max_llm_calls", "max_tool_calls", "max_events")


@dataclass(frozen=True, slots=True, kw_only=True)
class Overrun:
    """Which budget limit a step would pass: the payload of ``budget.exceeded``."""

    limit: str
    """The name of the limit, e.g. ``max_llm_calls``."""
    value: float | int | None
    """Its value in the folded state (``None``: a cost that is not known)."""
    max: float | int
    """The limit."""
    note: str = ""
    """Anything else worth saying."""

    def to_json(self) -> dict[str, Any]:
        """The ``budget.exceeded`` payload."""
        payload: dict[str, Any] = {"limit": self.limit, "value": self.value, "max": self.max}
        if self.note:
            payload["note"] = self.note
        return payload


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Limits checked before every model or tool call (``max_events``: before every step).

    A limit is reached when the value already spent is at or above it, so a run goes over by
    at most the one step in flight. A cost that is not known (a model with no price) counts as
    reaching ``max_cost_usd``: a budget that cannot be checked stops the run.

    >>> b = Budget(max_llm_calls=2, max_cost_usd=0.01)
    >>> used = {"llm_calls": 2, "cost_usd": 0.001, "cost_unknown_calls": 0}
    >>> b.check(used, events=40, step="model")
    Overrun(limit='max_llm_calls', value=2, max=2, note='')
    >>> b.check(used, events=40, step="tool") is None
    True
    >>> Budget.from_json(b.to_json()) == b
    True
    """

    max_cost_usd: float | None = None
    """Dollars spent on model calls (and tools that report a cost)."""
    max_tokens: int | None = None
    """Input plus output tokens."""
    max_llm_calls: int | None = None
    """Model calls."""
    max_tool_calls: int | None = None
    """Tool calls."""
    max_events: int | None = None
    """Events in the run (a fork counts its parent's prefix)."""

    def __post_init__(self) -> None:
        for name in _LIMITS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or value < 0):
                raise ValueError(f"Budget({name}={value!r}): a limit is a number >= 0, or None")

    def to_json(self) -> dict[str, Any]:
        """The limits as recorded in ``budget.set``."""
        return {name: getattr(self, name) for name in _LIMITS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Budget | None:
        """The budget recorded in a ``budget.set`` payload (``None`` for none)."""
        if data is None:
            return None
        return cls(**{name: data.get(name) for name in _LIMITS})

    def check(self, usage: Mapping[str, Any], events: int, *, step: str) -> Overrun | None:
        """The first limit reached before a step, or ``None``.

        Args:
            usage: ``state["usage"]``.
            events: how many events the run has.
            step: ``"model"``, ``"tool"``, or ``"other"`` (only ``max_events`` applies).
        """
        if self.max_events is not None and events >= self.max_events:
            return Overrun(limit="max_events", value=events, max=self.max_events)
        if step == "other":
            return None
        if self.max_cost_usd is not None:
            unknown = usage.get("cost_unknown_calls", 0)
            if unknown:
                return Overrun(limit="max_cost_usd", value=None, max=self.max_cost_usd,
                               note=f"{unknown} call(s) of unknown cost; set a price with al.pricing.set")
            spent = usage.get("cost_usd", 0.0)
            if spent >= self.max_cost_usd:
                return Overrun(limit="max_cost_usd", value=spent, max=self.max_cost_usd)
        if self.max_tokens is not None:
            tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
            if tokens >= self.max_tokens:
                return Overrun(limit="max_tokens", value=tokens, max=self.max_tokens)
        calls = usage.get("llm_calls", 0) if step == "model" else usage.get("tool_calls", 0)
        limit = self.max_llm_calls if step == "model" else self.max_tool_calls
        if limit is not None and calls >= limit:
            return Overrun(limit=f"max_{'llm' if step == 'model' else 'tool'}_calls", value=calls, max=limit)
        return None


def _kind(step: Step) -> str:
    return "model" if isinstance(step, CallModel) else "tool" if isinstance(step, CallTool) else "other"


# --- the program -------------------------------------------------------------------------------


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
        return _Loop(self, rec).run()

    def __repr__(self) -> str:
        return f"<AgentProgram {self.name} tools={sorted(self.tools)}>"


@dataclass(frozen=True, slots=True)
class _Partial:
    """An :class:`Emit` cut short: the facts from ``offset`` on are still to be appended."""

    step: Emit
    offset: int
    decided_at: int
    """The seq of the span in which the step first ran (it was decided on the state before)."""


def _takes(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or (name == "idempotency_key" and any(p.kind is p.VAR_KEYWORD
                                                                 for p in params.values()))


def _does_own_io(fn: Callable[..., Any]) -> bool:
    try:
        return "rec" in inspect.signature(fn).parameters
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


class _Loop:
    """One pass of a program over a recorder: decide, act, repeat."""

    def __init__(self, program: AgentProgram, rec: Recorder, partial: _Partial | None = None) -> None:
        self.program, self.rec, self.partial = program, rec, partial
        self.actor = program.name

    def run(self) -> Any:
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
        if not isinstance(step, _STEPS):
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
        over = budget.check(state["usage"], self.rec.next_seq, step=_kind(step))
        if over is None:
            return False
        if loop["exceeded"] is None:  # a resume that stops again records nothing new
            self.rec.emit(BUDGET_EXCEEDED, over.to_json(), actor=self.actor)
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
                self.rec.emit(APPROVAL_REQUESTED, {"action": thaw(action), "reason": reason,
                                                   "reasoning": reasoning}, actor=self.actor,
                              caused_by=answer["seq"] if answer is not None else None)
        self._pause("waiting", f"approval of {_label(action)}")

    def _run_tool(self, name: str, args: dict[str, Any], pending: Any) -> None:
        fn = self.program.tools.get(name) or _unknown_tool(name, sorted(self.program.tools))
        if _does_own_io(fn):
            self._composite(fn, name, args, pending)
            return
        try:
            if pending is None:
                self.rec.tool(name, args, fn, actor=self.actor)
            else:
                self.rec.answer_tool(_tool_call_event(pending), fn, actor=self.actor)
        except ToolError:
            pass  # recorded as the call's error: the agent reads it in state["tools"]

    def _composite(self, fn: Callable[..., Any], name: str, args: dict[str, Any], pending: Any) -> None:
        rec = self.rec
        with rec.span(name, kind="tool", actor=self.actor):
            if pending is None:
                key, idem = tool_key(name, args), f"{rec.run_id}:{rec.next_seq}"
                call = rec.emit(TOOL_CALL, {"key": key, "name": name, "args": args,
                                            "idempotency_key": idem}, actor=self.actor).seq
            else:
                key, idem, call = pending["key"], pending["idempotency_key"], pending["seq"]
            kwargs: dict[str, Any] = {**args, "rec": rec}
            if _takes(fn, "idempotency_key"):
                kwargs["idempotency_key"] = idem
            payload: dict[str, Any] = {"key": key, "name": name}
            try:
                payload["result"] = fn(**kwargs)
            except DivergenceError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure is the tool's recorded answer
                payload.update(error=f"{type(exc).__name__}: {exc}", type=type(exc).__name__)
            # No duration: the tool is re-run on replay, and its span already says how long.
            rec.emit(TOOL_RESULT, payload, actor=self.actor, caused_by=call)

    def _complete_call(self, state: Any, pending: Any) -> None:
        """Finish the call a crash left without its answer, under its original request."""
        tool = pending["kind"] == "tool"
        label = str((pending["name"] if tool else pending["model"]) or "")
        with self._span(state, "resume", label, call=pending["seq"]):
            if tool:
                self._run_tool(str(pending["name"]), thaw(pending["args"]), pending)
            else:
                self.rec.answer_llm(_llm_request_event(state, pending), call=self.program.model,
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
            self.partial = _Partial(step, offset + done, first)
            raise

    def _append(self, fact: Fact) -> None:
        rec = self.rec
        actor = fact.actor or self.actor
        # A fact no reducer accepts would poison every later fold: refuse it before writing.
        trial = Event(seq=rec.next_seq, type=fact.type, payload=dict(fact.payload), actor=actor,
                      caused_by=fact.caused_by)
        try:
            fold([trial], reducers=self.program.reducers, initial=rec.state)
        except ReducerError as exc:
            raise AgentError(f"{self.actor}: the fact {fact.type} was refused before it was "
                             f"written: {exc.cause}") from exc
        rec.emit(fact.type, dict(fact.payload), actor=actor, caused_by=fact.caused_by)


def _tool_call_event(pending: Any) -> Event:
    return Event(seq=pending["seq"], type=TOOL_CALL, payload={
        "key": pending["key"], "name": pending["name"], "args": thaw(pending["args"]),
        "idempotency_key": pending["idempotency_key"]})


def _llm_request_event(state: Any, pending: Any) -> Event:
    # While the request waits for its answer, the conversation is the request's messages.
    return Event(seq=pending["seq"], type=LLM_REQUEST, payload={
        "key": pending["key"], "model": pending["model"], "messages": thaw(state["messages"]),
        "tools": thaw(pending["tools"]), "params": thaw(pending["params"]),
        "response_format": thaw(pending["response_format"])})


# --- driving a session: run_agent and resume ---------------------------------------------------


def _recorder(writer: Any, program: AgentProgram, inputs: Any, clock: Callable[[], float] | None,
              state: Any = None, cache: ResponseCache | None = None) -> Recorder:
    return Recorder(WriterSink(writer, cache=cache), inputs=inputs, reducers=program.reducers,
                    state=state, clock=clock or time.time, timer=clock or time.perf_counter)


def _session(writer: Any, rec: Recorder, begin: Callable[[], None], loop: Callable[[], Any]) -> Any:
    """Run one session of the loop and close the run with how it ended."""
    try:
        with activate(rec):
            begin()
            try:
                result = loop()
            except (Stopped, DivergenceError):
                raise
            except Exception as exc:
                rec.emit(RUN_FAILED, {"error": f"{type(exc).__name__}: {exc}", "type": type(exc).__name__})
                raise
            rec.emit(RUN_FINISHED, {"result": result})
    except Stopped as stop:
        writer.close(status=stop.status)
        return writer.run
    except Exception as exc:
        writer.close(status="failed")
        exc.add_note(f"agentlog: recorded as run {writer.id}")
        raise
    except BaseException:
        writer.close(status="interrupted")  # Ctrl-C: the spans ended as interrupted; resumable
        raise
    writer.close(status="finished")
    return writer.run


def run_agent(agent: Agent, *, input: Any, model: Callable[[Mapping[str, Any]], Any] | None,
              tools: Mapping[str, Callable[..., Any]] | None, store: Any = None,
              budget: Budget | None = None, name: str | None = None, run_id: str | None = None,
              clock: Callable[[], float] | None = None, durability: str = "fsync",
              tags: Sequence[str] | Mapping[str, Any] | None = None) -> Any:
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

    Returns:
        The :class:`~agentlog.Run`; ``run.status`` is ``finished``, ``waiting`` or
        ``budget_exceeded``.

    Raises:
        Whatever the agent or the model raised, after ``run.failed`` was recorded (the error
        carries a note naming the run). A tool's error is not raised: it is recorded, and the
        agent sees it in ``state["tools"]``.
    """
    program = AgentProgram(agent, model=model, tools=tools)
    writer = resolve_store(store).create_run(
        name=name or program.name, tags={"agent": program.name} if tags is None else tags,
        durability=durability, clock=clock, run_id=run_id)
    rec = _recorder(writer, program, input, clock)

    def begin() -> None:
        rec.emit(RUN_STARTED, {"inputs": input})
        if budget is not None:
            rec.emit(BUDGET_SET, {"budget": budget.to_json()}, actor="al.run_agent")

    return _session(writer, rec, begin, _Loop(program, rec).run)


def _open_run(run_or_id: Any, store: Any) -> Any:
    if hasattr(run_or_id, "iter_events"):
        return run_or_id
    return resolve_store(store).run(str(run_or_id))


def _last_error(run: Any) -> str:
    last = run.event(len(run) - 1)
    return str(last.payload.get("error") or "no error recorded")


def _interrupted_emit(run: Any, state: Any, program: AgentProgram) -> _Partial | None:
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
    return _Partial(decided, offset, decided_at)


def _parent_answers(run: Any) -> ResponseCache | None:
    """For a fork: the parent's answers after the cut that the fork has not used yet, so a
    resumed fork is still served by key, as the fork itself was (``al.fork``)."""
    parent, at = run.parent, run.fork_seq
    if parent is None or at is None:
        return None
    cache = ResponseCache(parent.iter_events(start=at + 1))
    for event in run.iter_events(start=at + 1):
        if event.type in RESPONSE_TYPES:
            kind = str(event.payload.get("kind", event.type)) if event.type == ERROR else event.type
            cache.take(kind, str(event.payload.get("key", "")))
    return cache


def _close_open_spans(rec: Recorder, run: Any, state: Any) -> None:
    """Close, innermost first, the spans a crash left open (all inside the open step)."""
    step = state["loop"]["step"]
    if step is None:
        return
    open_spans: dict[str, Event] = {}
    for event in run.iter_events(step["seq"]):
        if event.type == SPAN_STARTED and event.span_id is not None:
            open_spans[event.span_id] = event
        elif event.type == SPAN_ENDED and event.span_id is not None:
            open_spans.pop(event.span_id, None)
    for span_id, started in reversed(open_spans.items()):
        rec.emit(SPAN_ENDED, {"name": started.payload.get("name"), "status": "error",
                              "error": INTERRUPTED},
                 actor=started.actor, caused_by=started.seq, span_id=span_id)


def resume(run_or_id: Any, agent: Agent, *, model: Callable[[Mapping[str, Any]], Any] | None,
           tools: Mapping[str, Callable[..., Any]] | None, store: Any = None,
           budget: Budget | None = None, clock: Callable[[], float] | None = None,
           durability: str = "fsync") -> Any:
    """Go on with a run that stopped: after a crash, a decision, or a budget stop.

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
    run = _open_run(run_or_id, store)
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
    rec = _recorder(writer, program, recorded_inputs(run), clock, state=state, cache=_parent_answers(run))

    def begin() -> None:
        _close_open_spans(rec, run, state)
        if budget is not None and budget.to_json() != thaw(state["loop"]["budget"]):
            rec.emit(BUDGET_SET, {"budget": budget.to_json()}, actor="al.resume")

    return _session(writer, rec, begin, _Loop(program, rec, partial).run)


# --- decisions ---------------------------------------------------------------------------------


def _decide(type_: str, run_or_id: Any, request_seq: int, by: str, note: str, store: Any,
            clock: Callable[[], float] | None) -> Event:
    if isinstance(request_seq, bool) or not isinstance(request_seq, int):
        raise TypeError(f"request_seq must be the int seq of an approval.requested event, got {request_seq!r}")
    if not isinstance(by, str) or not by:
        raise TypeError(f"by must name who decides (a non-empty str), got {by!r}")
    run = _open_run(run_or_id, store)
    before = run.status
    writer = run.store.writer(run.id, clock=clock)
    try:
        current = writer.run
        approvals = current.state_at(len(current) - 1, reducers=Reducers.standard())["approvals"]
        key = str(request_seq)
        done = approvals["decided"].get(key)
        if done is not None:
            raise ApprovalError(run.id, request_seq, f"it was already {done['decision']} by "
                                f"{done['by']} (seq {done['decision_seq']})")
        if key not in approvals["pending"]:
            waiting = ", ".join(sorted(approvals["pending"], key=int)) or "none"
            raise ApprovalError(run.id, request_seq, "no approval request waits at that seq "
                                f"(waiting: {waiting})")
        event: Event = writer.emit(type_, {"request": request_seq, "by": by, "note": note},
                                   actor=by, caused_by=request_seq)
        left = len(approvals["pending"]) - 1
    except BaseException:
        writer.close(status=before)
        raise
    # "ready": decided, and al.resume goes on from here.
    writer.close(status="waiting" if left else "ready")
    return event


def approve(run_or_id: Any, request_seq: int, by: str, note: str = "", *, store: Any = None,
            clock: Callable[[], float] | None = None) -> Event:
    """Grant a waiting approval request; ``al.resume`` then runs the gated action.

    Works from any process, any time later: it appends ``approval.granted`` (``{"request",
    "by", "note"}``) to the run through its own writer.

    Args:
        run_or_id: a :class:`~agentlog.Run` or a run id.
        request_seq: the seq of the ``approval.requested`` event
            (``state["approvals"]["pending"]`` lists them).
        by: who decides.
        note: why, for the agent and the audit trail.

    Returns:
        The appended event. The run is closed with status ``ready`` (``waiting`` while other
        requests still wait).

    Raises:
        ApprovalError: no request waits at that seq, or it was decided already.
        RunLockedError: the run is being written (it is not stopped).
    """
    return _decide(APPROVAL_GRANTED, run_or_id, request_seq, by, note, store, clock)


def deny(run_or_id: Any, request_seq: int, by: str, note: str = "", *, store: Any = None,
         clock: Callable[[], float] | None = None) -> Event:
    """Deny a waiting approval request: the gated action never runs; the agent sees the denial.

    The same as :func:`approve`, appending ``approval.denied``.
    """
    return _decide(APPROVAL_DENIED, run_or_id, request_seq, by, note, store, clock)
