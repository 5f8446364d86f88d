"""Spans: named, nested stretches of a run (an agent turn, a model call, a tool call).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .base import Body, Text, event_type, optional

__all__ = ["INTERRUPTED", "SpanEnded", "SpanEvent", "SpanStarted"]

#: The ``error`` of a ``span.ended`` that a resume wrote for a span a crash left open (or
#: that Ctrl-C closed): the run can be resumed from there.
INTERRUPTED: Final = "interrupted"


@event_type("span.started")
@dataclass(frozen=True, slots=True, kw_only=True)
class SpanStarted(Body):
    """A span opened; its id is the event's ``span_id``."""

    name: str
    """What the span is, e.g. the model or tool name."""
    kind: str
    """``agent``, ``llm``, ``tool``, ``chain``, ``http``, ..."""
    parent: str | None = None
    """The enclosing span's id."""
    attributes: Mapping[str, Any] | None = optional()
    """More about it (the loop runtime's step number, OpenTelemetry attributes, ...)."""
    otel: Mapping[str, Any] | None = optional()
    """For a span from OpenTelemetry: its trace id, span id, parent span id, kind and scope."""


@event_type("span.ended")
@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEnded(Body):
    """A span closed: ``ok``, or ``error`` with the error text (:data:`INTERRUPTED` after a crash)."""

    name: str | None = None
    """The span's name, as when it started."""
    status: str = "ok"
    """``ok`` or ``error``."""
    error: Text | None = None
    """What went wrong, for ``error``."""
    kind: str | None = optional()
    """The span's kind, when its end tells one its start did not (a framework's span whose
    attributes are set as it ends, as LangChain's are): it replaces the ``span.started``'s. What
    a tracer saw, as ``attributes``: a strict replay does not compare it."""
    attributes: Mapping[str, Any] | None = optional()
    """The attributes set or changed after the span started (a framework's span: its output,
    often its input too), over the ``span.started``'s. What a tracer saw, not what the program
    did: a strict replay does not compare them (they can hold values new on every run, such
    as LangChain's message ids)."""

    @property
    def interrupted(self) -> bool:
        """True for the close of a span that a crash or Ctrl-C cut short."""
        return self.status == "error" and self.error == INTERRUPTED


@event_type("span.event")
@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEvent(Body):
    """Something a tracer recorded at a point inside a span (an OpenTelemetry span event that
    has no agentlog type of its own); folds to nothing."""

    name: str
    """The event's name, as the tracer gave it."""
    attributes: Mapping[str, Any] | None = optional()
    """Its attributes."""
