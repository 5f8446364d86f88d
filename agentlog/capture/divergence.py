"""A replayed event that is not the recorded one, explained.

Strict replay compares each event a program emits with the event recorded at the same seq:
type, actor, cause, span, payload and usage columns, never ``ts`` (a recorded fact, not
something a program decides). The first difference becomes a :class:`Divergence` that names
the seq, shows both events and the structural diff of their payloads, and, for a call whose
key is not in the log, the nearest recorded keys.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..canonical import canonical_json
from ..events import USAGE_FIELDS, BlobRef, Event
from ..events.event import blob_digest

__all__ = ["COMPARED_FIELDS", "Divergence", "as_recorded", "differing_fields"]

#: What strict replay compares. ``ts`` is left out: it records when, not what.
COMPARED_FIELDS = ("type", "actor", "caused_by", "span_id", "payload", *USAGE_FIELDS)


def _value(event: Event, name: str) -> Any:
    value = getattr(event, name)
    return canonical_json(value) if name == "payload" else value


def differing_fields(expected: Event, actual: Event) -> tuple[str, ...]:
    """The names of the compared fields in which two events differ.

    >>> a = Event(seq=0, type="note", payload={"x": 1})
    >>> differing_fields(a, Event(seq=0, type="note", payload={"x": 2}, ts=9))
    ('payload',)
    """
    return tuple(n for n in COMPARED_FIELDS if _value(expected, n) != _value(actual, n))


def as_recorded(recorded: Any, value: Any) -> Any:
    """``value`` (what a program emits) with each string or bytes that the ``recorded``
    payload holds as a blob of the same bytes replaced by that blob reference.

    The store keeps some values as blobs that a program gives inline: the writer moves long
    text to a blob, and version 1 of ``http.request``/``http.response`` kept every body as
    one. Such a value is the same value in another form, not a divergence.

    >>> text = "x" * 20
    >>> ref = BlobRef.of(text.encode(), "text/plain")
    >>> as_recorded({"a": ref, "b": 1}, {"a": text, "b": 2}) == {"a": ref, "b": 2}
    True
    """
    if type(recorded) is BlobRef:
        if isinstance(value, str):
            data = value.encode("utf-8", "surrogatepass")
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
        else:
            return value
        return recorded if blob_digest(data) == recorded.digest else value
    if isinstance(recorded, Mapping) and isinstance(value, Mapping):
        return {k: as_recorded(recorded[k], v) if k in recorded else v for k, v in value.items()}
    if isinstance(recorded, (list, tuple)) and isinstance(value, (list, tuple)) and len(recorded) == len(value):
        return [as_recorded(r, v) for r, v in zip(recorded, value, strict=True)]
    return value


def _short(event: Event | None) -> str:
    if event is None:
        return "nothing"
    text = canonical_json(event.payload)
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{event.type} actor={event.actor} caused_by={event.caused_by} span={event.span_id} {text}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Divergence:
    """Where and how a replay left the recorded run."""

    run_id: str
    """The recorded run."""
    seq: int
    """The first seq at which the replay differs."""
    expected: Event | None
    """The recorded event (``None`` when the program emitted more events than were recorded)."""
    actual: Event | None
    """What the program emitted (``None`` when it stopped early)."""
    fields: tuple[str, ...] = ()
    """The compared fields that differ."""
    diff: Any = None
    """The structural diff of the two payloads (a :class:`~agentlog.Patch`), when both exist."""
    nearest_keys: tuple[str, ...] = ()
    """For a call whose key is not in the log: the recorded keys of the same kind nearby."""
    note: str = ""
    """Anything else worth saying."""
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __str__(self) -> str:
        lines = [f"run {self.run_id}: replay diverged at seq {self.seq}"]
        if self.fields:
            lines.append(f"  differs in: {', '.join(self.fields)}")
        lines.append(f"  expected: {_short(self.expected)}")
        lines.append(f"  actual:   {_short(self.actual)}")
        if self.diff is not None and len(self.diff):
            lines.append("  payload diff (expected → actual):")
            lines.extend("    " + line for line in str(self.diff).splitlines()[:20])
        if self.nearest_keys:
            lines.append("  nearest recorded keys: " + ", ".join(k[:16] + "…" for k in self.nearest_keys))
        if self.note:
            lines.append("  " + self.note)
        return "\n".join(lines)


def payload_diff(expected: Event, actual: Event) -> Any:
    """The structural diff between two payloads (needs the fold engine, imported lazily)."""
    from ..folding import diff_states, freeze
    return diff_states(freeze(_plain(expected.payload)), freeze(_plain(actual.payload)))


def _plain(payload: Mapping[str, Any]) -> Any:
    import json
    return json.loads(canonical_json(payload))
