"""Canonical JSON: the one byte form of a value that agentlog hashes and stores.

Sorted keys, no spaces, UTF-8 (no ``\\u`` escapes for non-ASCII), no NaN or infinity, string
keys only. Mappings (``dict``, pyrsistent ``PMap``) become objects; lists, tuples and
``PVector`` become arrays; a :class:`~agentlog.events.BlobRef` becomes its reference object.
Anything else is refused with a :class:`~agentlog.errors.CanonicalJSONError` naming the
field path, because a value that does not round-trip cannot be hashed honestly.

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import CanonicalJSONError

__all__ = ["canonical_json", "dumps_str", "loads"]

# The C encoder does the work; ``default`` only meets types we convert ourselves.
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
    default=lambda o: _convert(o),
)
_SCALARS = (str, int, float, bool, type(None))

#: ``json.encoder.encode_basestring``: a JSON string literal, non-ASCII kept (C speed).
dumps_str = json.encoder.encode_basestring

loads = json.loads


def canonical_json(value: Any, *, path: str = "$") -> str:
    """Return the canonical JSON text of ``value``.

    Args:
        value: a JSON-like value (mappings with ``str`` keys, sequences, str, int, finite
            float, bool, None, BlobRef).
        path: the name used for ``value`` in error messages.

    Raises:
        CanonicalJSONError: naming the path of the first value that has no canonical form.

    >>> canonical_json({"b": [1, 2.5, None], "a": "é"})
    '{"a":"é","b":[1,2.5,null]}'
    >>> canonical_json({"x": float("nan")}, path="payload")
    Traceback (most recent call last):
    ...
    agentlog.errors.CanonicalJSONError: payload.x: NaN is not JSON; use null or a string
    """
    _check(value, path)
    return _ENCODER.encode(value)


def _convert(obj: Any) -> Any:
    to_json = getattr(obj, "to_json", None)
    if to_json is not None:  # BlobRef
        return to_json()
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes, bytearray)):
        return list(obj)
    raise TypeError(type(obj).__name__)  # unreachable after _check


def _check(value: Any, path: str) -> None:
    """Walk ``value`` and raise at the first thing the encoder would get wrong."""
    t = type(value)
    if t is str:
        if not value.isascii():
            _check_utf8(value, path)
        return
    if t is int or t is bool or value is None:
        return
    if t is float:
        if not math.isfinite(value):
            what = "NaN" if math.isnan(value) else "infinity"
            raise CanonicalJSONError(path, f"{what} is not JSON; use null or a string")
        return
    if t is dict or isinstance(value, Mapping):
        for key, item in value.items():
            if type(key) is not str:
                raise CanonicalJSONError(f"{path}[{key!r}]",
                                         f"keys must be strings, got {type(key).__name__}")
            _check(item, f"{path}.{key}")
        return
    if t is list or t is tuple:
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]")
        return
    if hasattr(value, "to_json") and hasattr(value, "digest"):  # BlobRef
        return
    if isinstance(value, _SCALARS):  # subclasses: IntEnum, StrEnum, bool
        if isinstance(value, float) and not math.isfinite(value):
            raise CanonicalJSONError(path, "NaN or infinity is not JSON; use null or a string")
        return
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]")
        return
    hint = " (store bytes with put_blob)" if isinstance(value, (bytes, bytearray)) else ""
    raise CanonicalJSONError(path, f"{type(value).__name__} is not JSON{hint}")


def _check_utf8(value: str, path: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalJSONError(path, f"string is not valid UTF-8 ({exc.reason} at {exc.start})") from None
