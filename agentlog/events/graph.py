"""State and its graph projection: JSON Patch on ``vars``, objects and relations with provenance.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Body, event_type, optional

__all__ = ["ObjectCreated", "ObjectUpdated", "RelationCreated", "StatePatch"]


@event_type("state.patch")
@dataclass(frozen=True, slots=True, kw_only=True)
class StatePatch(Body):
    """RFC 6902 JSON Patch operations applied to ``state["vars"]``."""

    ops: Sequence[Mapping[str, Any]]
    """The operations, e.g. ``{"op": "add", "path": "/plan", "value": [...]}``."""


@event_type("object.created")
@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectCreated(Body):
    """An object of the graph projection was created (``state["objects"][id]``)."""

    id: str
    """Its id (unique in the run)."""
    kind: str
    """What it is, e.g. ``company``."""
    data: Mapping[str, Any] | None = None
    """Its fields."""


@event_type("object.updated")
@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectUpdated(Body):
    """An object's fields were changed (a shallow merge of ``data``)."""

    id: str
    """The object's id."""
    data: Mapping[str, Any] | None = None
    """The fields set (top-level keys replaced)."""


@event_type("relation.created")
@dataclass(frozen=True, slots=True, kw_only=True)
class RelationCreated(Body):
    """A relation between two objects (``state["relations"][id]``)."""

    kind: str
    """What it is, e.g. ``supplies``."""
    source: str
    """The source object's id."""
    target: str
    """The target object's id."""
    id: str | None = optional()
    """Its id (default ``r<seq>``)."""
    data: Mapping[str, Any] | None = optional()
    """Its fields."""
