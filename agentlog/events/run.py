"""The life of a run: started, finished, failed, forked; budgets; errors; notes; recorded values.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Body, Text, event_type, optional

__all__ = ["BudgetExceeded", "BudgetSet", "CallFailed", "ForkStarted", "Note", "RandomValue",
           "RunFailed", "RunFinished", "RunStarted", "TimeNow", "UUIDNew"]


@event_type("run.started")
@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(Body):
    """The program began, with its inputs (``rec.inputs``)."""

    inputs: Any = None
    """What the program was given (any JSON value)."""


@event_type("run.finished")
@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(Body):
    """The program returned."""

    result: Any = None
    """What it returned (any JSON value)."""


@event_type("run.failed")
@dataclass(frozen=True, slots=True, kw_only=True)
class RunFailed(Body):
    """The program raised."""

    error: Text
    """``"<exception type>: <message>"``."""
    type: str | None = None
    """The exception's class name."""


@event_type("fork.started")
@dataclass(frozen=True, slots=True, kw_only=True)
class ForkStarted(Body):
    """The first event of a fork after its parent's prefix: what was kept and what changed."""

    parent_run: str
    """The parent's run id."""
    parent_seq: int
    """The parent's last event the fork keeps (``-1``: none)."""
    parent_hash: str
    """The parent's chain hash at ``parent_seq``."""
    edits: Sequence[Mapping[str, Any]]
    """The edits applied at the cut, as each edit's ``describe()`` says them."""


@event_type("budget.set")
@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetSet(Body):
    """A budget recorded for the rest of a run (``al.run_agent(budget=...)``, ``al.resume``)."""

    budget: Mapping[str, Any]
    """The limits: ``max_cost_usd``, ``max_tokens``, ``max_llm_calls``, ``max_tool_calls``,
    ``max_events`` (``None`` for no limit)."""


@event_type("budget.exceeded")
@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExceeded(Body):
    """A budget limit was reached before a step; the run stopped."""

    limit: str
    """The limit's name, e.g. ``max_llm_calls``."""
    value: float | None
    """What was spent (``None``: a cost that is not known)."""
    max: float
    """The limit."""
    note: Text | None = optional()
    """Anything else worth saying."""


@event_type("error")
@dataclass(frozen=True, slots=True, kw_only=True)
class CallFailed(Body):
    """A model, tool or HTTP call failed; replay fails it the same way.

    Also an exception a traced span recorded (imported from OpenTelemetry), with no call.
    """

    error: Text | None
    """``"<exception type>: <message>"``."""
    type: str | None = None
    """The exception's class name."""
    kind: str | None = optional()
    """The response type the call would have had (``llm.response``, ``tool.result``,
    ``http.response``); none for an exception that answers no call."""
    key: str | None = optional()
    """The failed call's cache key."""
    stacktrace: Text | None = optional()
    """The traceback, when the source recorded one."""


@event_type("note", open=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class Note(Body):
    """Anything a program wants in the log; its payload is the program's own."""


@event_type("time.now")
@dataclass(frozen=True, slots=True, kw_only=True)
class TimeNow(Body):
    """``rec.now()``: the wall clock, served back on replay."""

    value: float
    """Seconds since the epoch."""


@event_type("uuid.new")
@dataclass(frozen=True, slots=True, kw_only=True)
class UUIDNew(Body):
    """``rec.uuid()``: a random UUID, served back on replay."""

    value: str
    """The UUID's text."""


@event_type("random.value")
@dataclass(frozen=True, slots=True, kw_only=True)
class RandomValue(Body):
    """``rec.random()``: a random float in [0, 1), served back on replay."""

    value: float
    """The number."""
