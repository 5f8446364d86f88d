"""Human approval: a request, then a decision appended from anywhere (``al.approve``/``al.deny``).

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import Body, Text, event_type

__all__ = ["ApprovalDenied", "ApprovalGranted", "ApprovalRequested"]


@event_type("approval.requested", open=True)
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(Body):
    """A person is asked to decide about an action; the run waits. Open: an agent may add
    what the person should see (its reasoning, say)."""

    action: Any
    """What the decision is about (any JSON value; a gated tool call is ``{"tool", "args"}``)."""
    reason: Text = ""
    """Why, for the person deciding."""


@event_type("approval.granted")
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalGranted(Body):
    """A person granted the request at seq :attr:`request`."""

    request: int
    """The seq of the ``approval.requested`` event."""
    by: str | None = None
    """Who decided (``None``: a source that does not say)."""
    note: Text | None = ""
    """Why."""


@event_type("approval.denied")
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDenied(Body):
    """A person denied the request at seq :attr:`request`: the action never runs."""

    request: int
    """The seq of the ``approval.requested`` event."""
    by: str | None = None
    """Who decided (``None``: a source that does not say)."""
    note: Text | None = ""
    """Why."""
