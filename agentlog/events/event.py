"""The event and the blob reference.

An :class:`Event` only holds values: the writer stamps ``seq``, ``ts`` and ``hash`` when it
appends. A :class:`BlobRef` names content-addressed bytes; reading them goes through a reader
that the store attaches, so this module stays pure.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Final

from ..errors import InvalidBlobRefError

__all__ = ["USAGE_FIELDS", "BlobRef", "Event", "blob_digest", "is_blob_json"]

#: The typed usage columns, in schema order: filled on ``llm.response`` / ``tool.result``.
USAGE_FIELDS: Final = ("model", "input_tokens", "output_tokens", "cached_tokens",
                       "cost_usd", "duration_ms")

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

BlobReader = Callable[[str], bytes]


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One appended fact of a run.

    ``payload`` is a mapping decoded from canonical JSON, in which blob references appear as
    :class:`BlobRef` objects. Treat it as read-only: reducers freeze what they keep.

    >>> e = Event(seq=0, type="note", payload={"text": "hi"})
    >>> e.type, e.payload["text"]
    ('note', 'hi')
    """

    seq: int
    """Position in the run, 0-based, dense."""
    type: str
    """Dotted name of the fact, e.g. ``llm.response``."""
    payload: Mapping[str, Any] = field(default_factory=dict)
    """The event's data; large values are :class:`BlobRef` objects."""
    actor: str | None = None
    """The component that produced the event."""
    caused_by: int | None = None
    """The seq of the event that triggered this one."""
    span_id: str | None = None
    """The span the event belongs to."""
    ts: int = 0
    """Wall clock at append, in microseconds since the Unix epoch (UTC). Never read by reducers."""
    model: str | None = None
    """Usage: the model that answered (``llm.response``)."""
    input_tokens: int | None = None
    """Usage: input tokens, cached ones included (OpenTelemetry GenAI convention)."""
    output_tokens: int | None = None
    """Usage: output tokens."""
    cached_tokens: int | None = None
    """Usage: input tokens read from the provider's cache (a part of ``input_tokens``)."""
    cost_usd: float | None = None
    """Usage: cost in US dollars, ``None`` when unknown."""
    duration_ms: float | None = None
    """Usage: how long the call took."""
    hash: str = ""
    """The chain hash (64 hex), empty until the writer appends the event."""

    @property
    def time(self) -> datetime:
        """``ts`` as an aware UTC datetime."""
        return datetime.fromtimestamp(self.ts / 1_000_000, tz=UTC)


def stamped(seq: int, type: str, payload: Mapping[str, Any], actor: str | None, caused_by: int | None,
            span_id: str | None, ts: int, model: str | None, input_tokens: int | None,
            output_tokens: int | None, cached_tokens: int | None, cost_usd: float | None,
            duration_ms: float | None, hash: str) -> Event:
    """``Event(seq=seq, type=type, ...)`` with every field given in order: the event the writer
    returns for each append, made without the fourteen keywords of the dataclass ``__init__``
    (which only sets the fields: an :class:`Event` has no ``__post_init__``).

    >>> stamped(0, "note", {}, None, None, None, 5, None, None, None, None, None, None, "h") == Event(
    ...     seq=0, type="note", ts=5, hash="h")
    True
    """
    event = _new(Event)
    _seq(event, seq)
    _type(event, type)
    _payload(event, payload)
    _actor(event, actor)
    _caused_by(event, caused_by)
    _span_id(event, span_id)
    _ts(event, ts)
    _model(event, model)
    _input_tokens(event, input_tokens)
    _output_tokens(event, output_tokens)
    _cached_tokens(event, cached_tokens)
    _cost_usd(event, cost_usd)
    _duration_ms(event, duration_ms)
    _hash(event, hash)
    return event


_new = object.__new__
# The slots' setters, in field order. stamped() sets every field, so a field added to Event
# must be added there too: this line fails at import while it is not (and a test pins
# that stamped() makes the event Event() makes).
(_seq, _type, _payload, _actor, _caused_by, _span_id, _ts, _model, _input_tokens, _output_tokens,
 _cached_tokens, _cost_usd, _duration_ms, _hash) = (getattr(Event, f.name).__set__ for f in fields(Event))


@dataclass(frozen=True, slots=True)
class BlobRef:
    """A reference to content-addressed bytes in the store's blob folder.

    In a payload it is written as ``{"$blob": "sha256:<hex>", "size": n, "media_type": t}``.
    Reading needs a reader, which the store attaches when it decodes an event.

    >>> ref = BlobRef("sha256:" + "a" * 64, 3, "text/plain")
    >>> ref.to_json()["size"]
    3
    """

    digest: str
    """``sha256:`` followed by 64 lower-case hex digits."""
    size: int
    """Length in bytes."""
    media_type: str = "application/octet-stream"
    """What the bytes are, e.g. ``text/html``."""
    reader: BlobReader | None = field(default=None, compare=False, repr=False)
    """Reads the bytes of a digest; attached by the store."""

    def __post_init__(self) -> None:
        if type(self.digest) is not str or not _DIGEST.fullmatch(self.digest):
            raise InvalidBlobRefError(self.digest)

    @property
    def hex(self) -> str:
        """The 64 hex digits of the digest."""
        return self.digest[7:]

    def read_bytes(self) -> bytes:
        """Return the blob's bytes (checked against the digest by the store).

        Raises:
            BlobNotFoundError: the blob is not in the store.
            BlobIntegrityError: its bytes do not hash to the digest.
            RuntimeError: the reference has no store attached.
        """
        if self.reader is None:
            raise RuntimeError(f"{self.digest} is not attached to a store; read it with store.blobs.read()")
        return self.reader(self.digest)

    def text(self, encoding: str = "utf-8") -> str:
        """Return the blob decoded as text."""
        return self.read_bytes().decode(encoding)

    def json(self) -> Any:
        """Return the blob parsed as JSON."""
        return json.loads(self.read_bytes())

    def to_json(self) -> dict[str, Any]:
        """The reference object written into payloads."""
        return {"$blob": self.digest, "size": self.size, "media_type": self.media_type}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], reader: BlobReader | None = None,
                  *, where: str = "") -> BlobRef:
        """Build a reference from its payload object, refusing anything malformed.

        Raises:
            InvalidBlobRefError: the digest is not ``sha256:`` + 64 lower-case hex, or the
                size is not a non-negative integer.
        """
        digest, size = obj.get("$blob"), obj.get("size")
        if type(digest) is not str or not _DIGEST.fullmatch(digest):
            raise InvalidBlobRefError(digest, where)
        if type(size) is not int or size < 0:
            raise InvalidBlobRefError(obj, where or "size")
        media = obj.get("media_type") or "application/octet-stream"
        return cls(digest, size, str(media), reader)

    @classmethod
    def of(cls, raw: bytes, media_type: str = "application/octet-stream",
           reader: BlobReader | None = None) -> BlobRef:
        """The reference of ``raw``'s bytes (hashed here; nothing is stored).

        >>> BlobRef.of(b"abc").digest[:15], BlobRef.of(b"abc").size
        ('sha256:ba7816bf', 3)
        """
        return cls(blob_digest(raw), len(raw), media_type, reader)

    def __repr__(self) -> str:
        return f"BlobRef({self.digest[:19]}…, {self.size:,} bytes, {self.media_type})"


def blob_digest(raw: bytes) -> str:
    """The digest that names ``raw`` in the blob folder: ``sha256:`` + 64 lower-case hex.

    >>> blob_digest(b"")[:19]
    'sha256:e3b0c44298fc'
    """
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def is_blob_json(obj: Any) -> bool:
    """True if ``obj`` is a payload object of the form ``{"$blob": ..., ...}``."""
    return type(obj) is dict and "$blob" in obj
