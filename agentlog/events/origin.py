"""Where an imported event came from: the source system's own event, kept whole in one place.

An event imported from another system (drangue, ActiveGraph) is written in agentlog's
vocabulary, a typed body, so that every view reads it as it reads a recorded one. The source's
own event is kept beside the body's fields under one payload key, :data:`ORIGIN_KEY`, as an
:class:`Origin`: the system, and the source's type, id, seq, time and payload as they were.
Nothing of the source is mixed into the vocabulary's keys, and the source event can be read
back from the payload alone (:func:`origin_of`).

An event the vocabulary has no type for keeps the source's type under a prefix
(``drangue.user_message``) and its payload is the origin alone.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from ..errors import EventSchemaError
from .base import Body, Value
from .event import Event

__all__ = ["ORIGIN_KEY", "SOURCE_TAG", "Origin", "origin_of", "with_origin"]

#: The payload key of an imported event's :class:`Origin`.
ORIGIN_KEY: Final = "origin"
#: The run tag that names the system an imported run came from (``otlp``, ``drangue``,
#: ``activegraph``). Such a run holds what that system recorded, not a program's answers, so
#: it cannot be replayed or forked (:attr:`agentlog.Run.replayable`).
SOURCE_TAG: Final = "source"


@dataclass(frozen=True, slots=True, kw_only=True)
class Origin(Value):
    """The source system's own event, as it was.

    >>> o = Origin(system="drangue", type="tool_result", seq=7, payload={"content": "ok"})
    >>> o.to_json()
    {'system': 'drangue', 'type': 'tool_result', 'payload': {'content': 'ok'}, 'seq': 7}
    >>> Origin.from_json(o.to_json()) == o
    True
    """

    FIELDS: ClassVar[tuple[str, ...]] = ("system", "type", "payload", "id", "seq", "ts", "caused_by",
                                         "detail")

    system: str
    """The system that wrote it: ``drangue``, ``activegraph``."""
    type: str
    """Its type in that system."""
    payload: Mapping[str, Any]
    """Its payload, as the source wrote it (non-finite numbers as text)."""
    id: str | None = None
    """Its id in that system, if it has one."""
    seq: int | None = None
    """Its position in the source run, if the source numbers them."""
    ts: Any = None
    """Its time as the source wrote it (seconds, ISO text, ...)."""
    caused_by: str | None = None
    """The id of the source event that caused it, if the source says."""
    detail: Mapping[str, Any] | None = None
    """Anything else the source stored beside the payload (a frame id, a duration)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form kept under :data:`ORIGIN_KEY` (fields that are ``None`` left out)."""
        out: dict[str, Any] = {"system": self.system, "type": self.type, "payload": dict(self.payload)}
        for name in ("id", "seq", "ts", "caused_by", "detail"):
            value = getattr(self, name)
            if value is not None:
                out[name] = dict(value) if name == "detail" else value
        return out

    @classmethod
    def from_json(cls, data: Any, *, where: str = ORIGIN_KEY) -> Origin:
        """An origin from its JSON form.

        Raises:
            EventSchemaError: not an object with ``system``, ``type`` and ``payload``.
        """
        if not isinstance(data, Mapping):
            raise EventSchemaError(where, ORIGIN_KEY, data, "an object")
        for name in ("system", "type"):
            if not isinstance(data.get(name), str):
                raise EventSchemaError(where, f"{ORIGIN_KEY}.{name}", data.get(name), "str")
        payload = data.get("payload")
        if not isinstance(payload, Mapping):
            raise EventSchemaError(where, f"{ORIGIN_KEY}.payload", payload, "an object")
        detail = data.get("detail")
        return cls(system=data["system"], type=data["type"], payload=payload, id=data.get("id"),
                   seq=data.get("seq"), ts=data.get("ts"), caused_by=data.get("caused_by"),
                   detail=detail if isinstance(detail, Mapping) else None)


def with_origin(body: Body | None, origin: Origin) -> dict[str, Any]:
    """The payload of an imported event: the body's fields and the origin (``None``: the
    origin alone, for a type the vocabulary does not have).

    >>> from agentlog.events import RunFinished
    >>> with_origin(RunFinished(result=3), Origin(system="s", type="done", payload={"out": 3}))
    {'result': 3, 'origin': {'system': 's', 'type': 'done', 'payload': {'out': 3}}}
    """
    payload = {} if body is None else body.to_payload()
    payload[ORIGIN_KEY] = origin.to_json()
    return payload


def origin_of(event: Event) -> Origin | None:
    """The origin of an imported event, ``None`` for an event agentlog recorded itself."""
    data = event.payload.get(ORIGIN_KEY)
    return None if data is None else Origin.from_json(data, where=event.type)
