"""Budgets: limits checked before every model or tool call against the folded ``usage``.

An overrun appends ``budget.exceeded`` and the run stops cleanly with status
``budget_exceeded``; ``al.resume(..., budget=...)`` with a larger one goes on.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...events import BudgetExceeded, BudgetSet

__all__ = ["LIMITS", "Budget", "Overrun"]

#: The limits a budget may set, in the order they are checked (after ``max_events``).
LIMITS: Final = ("max_cost_usd", "max_tokens", "max_llm_calls", "max_tool_calls", "max_events")


@dataclass(frozen=True, slots=True, kw_only=True)
class Overrun:
    """Which budget limit a step would pass."""

    limit: str
    """The name of the limit, e.g. ``max_llm_calls``."""
    value: float | int | None
    """Its value in the folded state (``None``: a cost that is not known)."""
    max: float | int
    """The limit."""
    note: str = ""
    """Anything else worth saying."""

    def body(self) -> BudgetExceeded:
        """The ``budget.exceeded`` event that records it."""
        return BudgetExceeded(limit=self.limit, value=self.value, max=self.max, note=self.note or None)


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
        for name in LIMITS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or value < 0):
                raise ValueError(f"Budget({name}={value!r}): a limit is a number >= 0, or None")

    def to_json(self) -> dict[str, Any]:
        """The limits as recorded in ``budget.set``."""
        return {name: getattr(self, name) for name in LIMITS}

    def body(self) -> BudgetSet:
        """The ``budget.set`` event that records this budget for the rest of a run."""
        return BudgetSet(budget=self.to_json())

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Budget | None:
        """The budget recorded in a ``budget.set`` payload (``None`` for none)."""
        if data is None:
            return None
        return cls(**{name: data.get(name) for name in LIMITS})

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
