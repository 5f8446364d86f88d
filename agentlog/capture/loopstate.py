"""What the loop runtime folds for an agent, besides the default projection.

:func:`agent_reducers` layers these reducers over an agent's own reducer set (by default the
standard projection: ``vars``, ``messages``, ``objects``, ``relations``, ``usage``,
``approvals``, ``status``), and adds three root keys:

``input``
    ``run.started``: the run's input (what ``al.run_agent(input=...)`` was given).
``tools``
    ``tool.result``: every finished tool call, in order, as ``{"name", "args", "result",
    "error", "call", "seq", "answer"}``: ``call`` and ``seq`` are the seqs of its
    ``tool.call`` and ``tool.result``, ``answer`` the seq of the model answer that came before
    it (``None`` if none did), so an agent can tell which results answer its last turn.
``loop``
    the runtime's own bookkeeping. Agents read ``answer``; the rest drives the loop:

    - ``steps``: how many step spans (kind ``agent``) have started;
    - ``step``: the open step span ``{"span", "seq", "do", "facts", "completes", "from"}``,
      ``None`` between steps (a crash leaves it set: that is how a resume finds it);
    - ``interrupted``: the last step whose span ended ``interrupted`` (Ctrl-C, or a resume
      that closed it), with ``ended``: its closing seq; cleared when the next step starts;
    - ``pending``: the call the log holds without its answer: ``{"kind": "tool", "seq", "key",
      "name", "args", "idempotency_key"}`` or ``{"kind": "llm", "seq", "key", "model",
      "tools", "params", "response_format"}`` (the messages are ``state["messages"]``);
    - ``answer``: the model's last answer ``{"seq", "content", "tool_calls"}``;
    - ``granted``: the seqs of granted approval requests whose tool call has not run yet;
    - ``budget``: the budget of the last ``budget.set``; ``exceeded``: the last
      ``budget.exceeded`` payload since then.

Pure: the reducers read events and states only.

>>> from agentlog.events import Event
>>> from agentlog.folding import fold
>>> r = agent_reducers()
>>> s = fold([Event(seq=0, type="run.started", payload={"inputs": {"ticket": 7}}),
...           Event(seq=1, type="tool.call", payload={"key": "k", "name": "lookup", "args": {"id": 7},
...                                                   "idempotency_key": "run:1"})], reducers=r)
>>> s["input"]["ticket"], s["loop"]["pending"]["idempotency_key"]
(7, 'run:1')
>>> s = fold([Event(seq=2, type="tool.result", payload={"key": "k", "name": "lookup", "result": "ok"},
...                 caused_by=1)], reducers=r, initial=s)
>>> s["loop"]["pending"] is None, s["tools"][0]["result"]
(True, 'ok')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ..canonical import canonical_json
from ..events import (
    INTERRUPTED,
    ApprovalGranted,
    BudgetExceeded,
    BudgetSet,
    Event,
    LLMRequest,
    LLMResponse,
    RunStarted,
    SpanEnded,
    SpanStarted,
    ToolCall,
    ToolResult,
)
from ..folding import Reducers, freeze, pmap, thaw
from ..folding.reducers import reducer_name
from ..folding.values import EMPTY_VECTOR, State

__all__ = ["LOOP_INITIAL", "action_key", "agent_reducers", "tool_action"]

LOOP_INITIAL: Final = pmap({"steps": 0, "step": None, "interrupted": None, "pending": None,
                            "answer": None, "granted": EMPTY_VECTOR, "budget": None, "exceeded": None})
"""``state["loop"]`` before the first event."""


def tool_action(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``action`` of an approval request that gates a tool call.

    >>> tool_action("refund", {"amount": 840})
    {'tool': 'refund', 'args': {'amount': 840}}
    """
    return {"tool": name, "args": dict(args)}


def action_key(action: Any) -> str:
    """A value that is equal for equal actions, frozen or not (their canonical JSON).

    >>> action_key(freeze({"b": [1], "a": 2})) == action_key({"a": 2, "b": (1,)})
    True
    """
    return canonical_json(thaw(action))


def _loop(state: State) -> Any:
    return state.get("loop", LOOP_INITIAL)


def _set_loop(state: State, **changes: Any) -> State:
    loop = _loop(state)
    for key, value in changes.items():  # set() per key: cheaper than update() for one or two
        loop = loop.set(key, value)
    return state.set("loop", loop)


_SPAN, _TOOL, _CALL, _ASK = SpanStarted.K, ToolResult.K, ToolCall.K, LLMRequest.K


def record_input(state: State, event: Event) -> State:
    """``run.started``: keep the run's input."""
    return state.set("input", freeze(event.payload.get(RunStarted.K.inputs)))


def open_step(state: State, event: Event) -> State:
    """``span.started`` of kind ``agent``: a step begins."""
    payload = event.payload
    if payload.get(_SPAN.kind) != "agent":
        return state
    attrs = payload.get(_SPAN.attributes) or {}
    step = pmap({"span": event.span_id, "seq": event.seq, "do": attrs.get("do"),
                 "facts": attrs.get("facts"), "completes": attrs.get("completes"),
                 "from": attrs.get("from")})
    return _set_loop(state, steps=_loop(state)["steps"] + 1, step=step, interrupted=None)


def close_step(state: State, event: Event) -> State:
    """``span.ended`` of the open step span: the step is over (kept if it was interrupted)."""
    step = _loop(state)["step"]
    if step is None or step["span"] != event.span_id:
        return state
    if event.payload.get(SpanEnded.K.error) == INTERRUPTED:
        return _set_loop(state, step=None, interrupted=step.set("ended", event.seq))
    return _set_loop(state, step=None)


def call_tool(state: State, event: Event) -> State:
    """``tool.call``: the call is pending until its result; it uses up a matching grant."""
    p = event.payload
    loop = _loop(state)
    args = p.get(_CALL.args) or {}
    pending = pmap({"kind": "tool", "seq": event.seq, "key": p.get(_CALL.key), "name": p.get(_CALL.name),
                    "args": freeze(args), "idempotency_key": p.get(_CALL.idempotency_key)})
    granted = loop["granted"]
    if granted:
        wanted = action_key(tool_action(str(p.get(_CALL.name)), args))
        decided = state.get("approvals", pmap()).get("decided", pmap())
        for i, seq in enumerate(granted):
            entry = decided.get(str(seq))
            if entry is not None and action_key(entry.get("action")) == wanted:
                granted = granted.delete(i)
                break
    return state.set("loop", loop.set("pending", pending).set("granted", granted))


def finish_tool(state: State, event: Event) -> State:
    """``tool.result``: append the finished call to ``tools``; nothing is pending."""
    loop = _loop(state)
    p = event.payload
    call = loop["pending"] if loop["pending"] is not None and loop["pending"]["kind"] == "tool" else None
    answer = loop["answer"]
    entry = pmap({"name": p.get(_TOOL.name), "args": call["args"] if call is not None else None,
                  "result": freeze(p.get(_TOOL.result)), "error": p.get(_TOOL.error),
                  "call": event.caused_by, "seq": event.seq,
                  "answer": answer["seq"] if answer is not None else None})
    return state.set("tools", state.get("tools", EMPTY_VECTOR).append(entry)).set(
        "loop", loop.set("pending", None))


def ask_model(state: State, event: Event) -> State:
    """``llm.request``: the request is pending until its answer."""
    p = event.payload
    pending = pmap({"kind": "llm", "seq": event.seq, "key": p.get(_ASK.key), "model": p.get(_ASK.model),
                    "tools": freeze(p.get(_ASK.tools)), "params": freeze(p.get(_ASK.params)),
                    "response_format": freeze(p.get(_ASK.response_format))})
    return _set_loop(state, pending=pending)


def model_answered(state: State, event: Event) -> State:
    """``llm.response``: keep the answer (its text is the reasoning an approver sees)."""
    message = LLMResponse.of(event).message  # the assistant message's own keys: "content", ...
    answer = pmap({"seq": event.seq, "content": message.get("content"),
                   "tool_calls": freeze(message.get("tool_calls") or [])})
    return _set_loop(state, pending=None, answer=answer)


def grant(state: State, event: Event) -> State:
    """``approval.granted``: the gated tool call may run (once)."""
    loop = _loop(state)
    return state.set("loop", loop.set("granted", loop["granted"].append(event.payload[ApprovalGranted.K.request])))


def set_budget(state: State, event: Event) -> State:
    """``budget.set``: the budget for the rest of the run; a past overrun no longer stops it
    (``status`` goes back from ``budget_exceeded`` to ``running``)."""
    state = _set_loop(state, budget=freeze(event.payload.get(BudgetSet.K.budget)), exceeded=None)
    return state.set("status", "running") if state.get("status") == "budget_exceeded" else state


def budget_exceeded(state: State, event: Event) -> State:
    """``budget.exceeded``: remembered, so a resume does not record the same overrun twice."""
    return _set_loop(state, exceeded=freeze(dict(event.payload)))


_LOOP_REDUCERS: Final[tuple[tuple[str, Callable[[State, Event], State]], ...]] = (
    (RunStarted.TYPE, record_input),
    (SpanStarted.TYPE, open_step),
    (SpanEnded.TYPE, close_step),
    (ToolCall.TYPE, call_tool),
    (ToolResult.TYPE, finish_tool),
    (LLMRequest.TYPE, ask_model),
    (LLMResponse.TYPE, model_answered),
    (ApprovalGranted.TYPE, grant),
    (BudgetSet.TYPE, set_budget),
    (BudgetExceeded.TYPE, budget_exceeded),
)

# Run.state_at keeps its snapshot index per reducer set object: hand out one set per base.
_BUILT: dict[int, tuple[Reducers, Reducers]] = {}


def agent_reducers(base: Reducers | None = None) -> Reducers:
    """The loop runtime's reducers layered over ``base`` (default: the standard projection).

    The same set object is returned for the same ``base``, so folds through a run's snapshot
    index are shared. Reducers already in ``base`` are not added twice.

    Args:
        base: an agent's own reducer set.

    Returns:
        A :class:`~agentlog.folding.Reducers` whose initial state also has ``input``, ``tools``
        and ``loop``.
    """
    base = Reducers.standard() if base is None else base
    held = _BUILT.get(id(base))
    if held is not None and held[0] is base:
        return held[1]
    built = base
    for type_, fn in _LOOP_REDUCERS:
        if reducer_name(fn) not in built.names(type_):
            built = built.with_reducer(type_, fn)
    initial = base.initial_state()
    extra = {"input": None, "tools": EMPTY_VECTOR, "loop": LOOP_INITIAL}
    built = built.with_initial(initial.update({k: v for k, v in extra.items() if k not in initial}))
    _BUILT[id(base)] = (base, built)
    return built
