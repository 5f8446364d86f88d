"""What an agent decides: one step per ``next_step(state)``.

- :class:`CallModel` — ask the model;
- :class:`CallTool` — run a tool (``needs_approval=True`` waits for a person's decision);
- :class:`RequestApproval` — ask a person about any action;
- :class:`Emit` — append facts derived from the state (:class:`Fact`: a typed event body);
- :class:`Finish` — stop with a result.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..._words import with_article
from ...events import Body, check_payload
from ..loopstate import tool_action

__all__ = ["STEPS", "Agent", "CallModel", "CallTool", "Emit", "Fact", "Finish", "RequestApproval", "Step",
           "budget_kind"]


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


@dataclass(frozen=True, slots=True, init=False)
class Fact:
    """One event an :class:`Emit` step appends: a typed body, or a type of the agent's own
    with its payload.

    >>> from agentlog.events import ObjectCreated
    >>> f = Fact(ObjectCreated(id="co1", kind="company", data={"name": "Northwind"}), caused_by=4)
    >>> f.type, f.payload["kind"], f.caused_by
    ('object.created', 'company', 4)
    >>> Fact("my.finding", {"score": 3}).payload
    {'score': 3}

    A standard type given by name is checked here, as its body would be
    (:class:`~agentlog.errors.EventSchemaError`).
    """

    body: Body | None
    """The typed body (``None`` for a type outside the vocabulary)."""
    type: str
    """The event type, e.g. ``object.created``, ``relation.created``, ``state.patch``."""
    payload: Mapping[str, Any]
    """The event's payload."""
    actor: str | None
    """Who produced it (default: the agent's name)."""
    caused_by: int | None
    """The seq of the event it derives from (its provenance)."""

    def __init__(self, event: Body | str, payload: Mapping[str, Any] | None = None,
                 actor: str | None = None, caused_by: int | None = None) -> None:
        if isinstance(event, Body):
            if payload is not None:
                raise TypeError(f"{with_article(event.TYPE)} body carries its payload; pass no payload with it")
            body: Body | None = event
        else:
            body = check_payload(event, payload or {})
        setter = object.__setattr__
        setter(self, "body", body)
        setter(self, "type", body.TYPE if body is not None else event)
        setter(self, "payload", body.to_payload() if body is not None else dict(payload or {}))
        setter(self, "actor", actor)
        setter(self, "caused_by", caused_by)


@dataclass(frozen=True, slots=True)
class Emit:
    """Append facts the agent derived from the state, in one step.

    >>> from agentlog.events import StatePatch
    >>> Emit([Fact(StatePatch(ops=[{"op": "add", "path": "/seen", "value": 3}]))]).facts[0].type
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
#: Every kind of step.
STEPS: Final = (CallModel, CallTool, RequestApproval, Emit, Finish)


class Agent(Protocol):
    """What the loop runs: ``next_step(state) -> Step``, pure."""

    def next_step(self, state: Any) -> Step: ...


def budget_kind(step: Step) -> str:
    """Which budget limits apply before a step: ``model``, ``tool`` or ``other``."""
    return "model" if isinstance(step, CallModel) else "tool" if isinstance(step, CallTool) else "other"
