"""Turn what a program emits into the payload that is hashed and stored, in one walk.

On the way: secrets become ``"[REDACTED]"`` by :mod:`agentlog.redact`'s one policy, with the
run's own names (before hashing, since redacting later would break the chain): a scalar under
a key named like a credential, and the password and secret query parameters of a URL;
``bytes`` and long strings become blobs; blob
reference objects become :class:`BlobRef`; mappings become dicts and sequences lists. The
result is then encoded by :func:`agentlog.canonical.canonical_json`, which refuses anything
that has no canonical form and names its path. :meth:`PayloadPreparer.encode` does both: the
walk notes what orjson might not write as the canonical encoder does (a float near 0 or not
finite, a key that is not a ``str``, a value of another type), so a payload with none of these
is encoded with no second walk, and any other payload the checked way, with the same text and
the same errors.

Blobs are only hashed here; the writer stores them once the whole event is accepted, so a
rejected emit writes nothing.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..canonical import TINY, canonical_json
from ..errors import InvalidBlobRefError
from ..events import BlobRef
from ..redact import MARKER, PROPERTIES, Redactor, looks_like_url
from .blobs import BYTES_MEDIA_TYPE, TEXT_MEDIA_TYPE

__all__ = ["PayloadPreparer", "PreparedPayload"]

_BINARY = (bytes, bytearray, memoryview)
_SECRET_KEPT = 4096  # key names a preparer remembers (forgotten all at once when full)
_URL_SCHEMES = ("http://", "https://")  # the text looks_like_url reads further


class PreparedPayload(NamedTuple):
    """A payload ready to encode: the value and the blobs it needs stored (a tuple: one is
    made for every event written)."""

    value: dict[str, Any]
    """The payload as it will be stored, with :class:`BlobRef` objects for blobs."""
    new_blobs: list[tuple[BlobRef, bytes]]
    """Blobs made from values of this payload: ``(ref, bytes)`` to store."""
    refs: list[tuple[BlobRef, str]]
    """References the program passed in, with their paths, to check they are stored."""


class PayloadPreparer:
    """One writer's payload walk: its redaction names, blob threshold and blob reader.

    >>> p = PayloadPreparer(redact=["X-Secret"], threshold=8, reader=None)
    >>> out = p.prepare({"Authorization": "Bearer s3cr3t", "x-secret": 1, "big": "0123456789"})
    >>> out.value["Authorization"], out.value["x-secret"], out.value["big"].size
    ('[REDACTED]', '[REDACTED]', 10)
    """

    def __init__(self, *, redact: Iterable[str], threshold: int,
                 reader: Callable[[str], bytes] | None) -> None:
        self.redactor = Redactor(redact)
        """The run's redaction policy (the built-in names and the run's own)."""
        self.threshold = threshold
        self._reader = reader
        # A str of n characters has between n and 4n UTF-8 bytes: below this length no
        # encoding is needed to know it stays inline.
        self._quick = threshold // 4
        self._secret: dict[str, bool] = {}  # key name -> a secret's (see _learn)

    def with_threshold(self, threshold: int) -> PayloadPreparer:
        """The same walk (one redactor, one memory of secret names) with another blob
        threshold."""
        other = copy.copy(self)
        other.threshold, other._quick = threshold, threshold // 4
        return other

    def prepare(self, payload: Mapping[str, Any]) -> PreparedPayload:
        """Walk ``payload`` once; the caller has checked that it is a mapping.

        Raises:
            InvalidBlobRefError: an object with a ``$blob`` key is not a valid reference
                (every such object is read back as a reference, so none may be ambiguous).
        """
        return self._prepare(payload, [])

    def encode(self, payload: Mapping[str, Any]) -> tuple[PreparedPayload, str]:
        """:meth:`prepare`, and the canonical JSON of the result (what
        ``canonical_json(value, path="payload")`` returns or raises), in one walk when the
        payload holds nothing odd (see the module docstring).

        Raises:
            InvalidBlobRefError: as for :meth:`prepare`.
            CanonicalJSONError: a value has no canonical form (named by its path).

        >>> p = PayloadPreparer(redact=(), threshold=64, reader=None)
        >>> p.encode({"b": 1e-05, "a": [1, 2.5], "api_key": "sk-1"})[1]
        '{"a":[1,2.5],"api_key":"[REDACTED]","b":1e-05}'
        """
        odd: list[bool] = []
        prepared = self._prepare(payload, odd)
        return prepared, canonical_json(prepared.value, path="payload", walked=not odd)

    def _prepare(self, payload: Mapping[str, Any], odd: list[bool]) -> PreparedPayload:
        if "$blob" in payload:
            # Read back it would decode as a BlobRef, not a mapping.
            raise InvalidBlobRefError(payload["$blob"], "payload (a payload cannot itself be a "
                                                        "blob reference; put it under a key)")
        new: list[tuple[BlobRef, bytes]] = []
        refs: list[tuple[BlobRef, str]] = []
        value = self._mapping(payload, "payload", new, refs, odd)
        return PreparedPayload(value, new, refs)

    # ``odd`` gets a mark for each value that orjson might not write as the canonical encoder
    # does (canonical_json's ``walked``): a float near 0 or not finite, a key that is not a
    # str, a value of any other type (a scalar subclass, a set, a date, ...).

    def _mapping(self, obj: Mapping[Any, Any], path: str, new: list[tuple[BlobRef, bytes]],
                 refs: list[tuple[BlobRef, str]], odd: list[bool], schema: bool = False) -> dict[Any, Any]:
        known, learn, walk, quick = self._secret, self._learn, self._walk, self._quick
        out: dict[Any, Any] = {}
        for key, item in obj.items():
            if type(key) is str:
                secret = known.get(key)
                if secret is None:
                    secret = learn(key)
                if secret and not (schema and isinstance(item, Mapping)):
                    out[key] = MARKER
                    continue
            else:
                odd.append(True)
            t = type(item)  # the common scalars without a call: short text that is no URL, numbers
            if (t is str and len(item) <= quick and not item.startswith(_URL_SCHEMES)) or t is int or item is None \
                    or t is bool:
                out[key] = item
            elif t is float:
                if item and not TINY <= abs(item) < math.inf:  # near 0, or not finite
                    odd.append(True)
                out[key] = item
            elif t is dict and "$blob" not in item:  # a plain object: no call to _walk
                out[key] = self._mapping(item, _join(path, key), new, refs, odd, schema=key == PROPERTIES)
            else:
                out[key] = walk(item, path, key, new, refs, odd)
        return out

    def _walk(self, value: Any, parent: str, key: Any, new: list[tuple[BlobRef, bytes]],
              refs: list[tuple[BlobRef, str]], odd: list[bool]) -> Any:
        t = type(value)
        if t is str:
            if looks_like_url(value):
                value = self.redactor.url(value)
            n = len(value)
            if n > self._quick and (n > self.threshold or _utf8_len(value) > self.threshold):
                try:
                    raw = value.encode("utf-8")
                except UnicodeEncodeError:
                    return value  # canonical_json names the field
                return self._blob(raw, TEXT_MEDIA_TYPE, new)
            return value
        if t is int or t is bool or value is None:
            return value
        if t is float:
            if value and not TINY <= abs(value) < math.inf:
                odd.append(True)
            return value
        if t is dict or isinstance(value, Mapping):
            path = _join(parent, key)
            if "$blob" in value:
                ref = BlobRef.from_json(value, self._reader, where=path)
                refs.append((ref, path))
                return ref
            return self._mapping(value, path, new, refs, odd, schema=key == PROPERTIES)
        if t is list or t is tuple:
            path = _join(parent, key)
            return [self._walk(item, path, i, new, refs, odd) for i, item in enumerate(value)]
        if isinstance(value, BlobRef):
            ref = BlobRef(value.digest, value.size, value.media_type, self._reader)
            refs.append((ref, _join(parent, key)))
            return ref
        if isinstance(value, _BINARY):
            return self._blob(bytes(value), BYTES_MEDIA_TYPE, new)
        if isinstance(value, Sequence) and not isinstance(value, str):  # PVector, ...
            path = _join(parent, key)
            return [self._walk(item, path, i, new, refs, odd) for i, item in enumerate(value)]
        odd.append(True)
        return value  # scalars subclasses pass; anything else is refused by canonical_json

    def _learn(self, name: str) -> bool:
        """Whether a key of this name holds a secret: the redactor's answer, remembered by the
        preparer, so the walk asks a dict, not a method, about the names it has seen."""
        if len(self._secret) >= _SECRET_KEPT:
            self._secret.clear()
        found = self._secret[name] = self.redactor.is_secret(name)
        return found

    def _blob(self, raw: bytes, media_type: str, new: list[tuple[BlobRef, bytes]]) -> BlobRef:
        ref = BlobRef.of(raw, media_type, self._reader)
        new.append((ref, raw))
        return ref


def _join(parent: str, key: Any) -> str:
    # Same spelling as canonical_json's paths, so messages agree.
    if type(key) is int:
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if type(key) is str else f"{parent}[{key!r}]"


def _utf8_len(text: str) -> int:
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return 0  # lone surrogate: stays inline, and canonical_json refuses it by path
