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

import orjson

from .errors import CanonicalJSONError

__all__ = ["canonical_json", "dumps_str", "loads", "long_int", "plain_numbers"]

# The C encoder does the work; ``default`` only meets types we convert ourselves.
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
    default=lambda o: _convert(o),
)
_SCALARS = (str, int, float, bool, type(None))
_ORJSON = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS  # a BlobRef goes to _convert
#: orjson writes floats as ``repr`` does, but for 1e-9 <= |x| < 1e-4 (``0.00001`` for
#: ``1e-05``): a value holding such a float is written by the standard encoder.
TINY = 1e-4

#: ``json.encoder.encode_basestring``: a JSON string literal, non-ASCII kept (C speed).
dumps_str = json.encoder.encode_basestring

loads = json.loads

#: Digits to "0"; ":", ",", "[" and "-" (what comes before an integer in canonical JSON) to " ";
#: every other byte to "x": an integer of 19 digits or more shows as " " and 19 "0" (one
#: translate and one find, in C), a fraction's digits or a hex digest's do not.
_MARKS = bytes(ord("0") if 48 <= c <= 57 else ord(" ") if chr(c) in ":,[-" else ord("x")
               for c in range(256))
_INT19 = b" " + b"0" * 19


def long_int(data: bytes) -> bool:
    """Whether the JSON text ``data`` may hold an integer literal past 64 bits (19 digits or
    more), which orjson would read as a float, silently; the standard library reads it
    exactly. (A string holding such digits says yes too: it is then read by the standard
    library, the same value more slowly.)

    >>> long_int(b'{"n":12345678901234567890}'), long_int(b'{"x":0.12345678901234567890}')
    (True, False)
    """
    return data.translate(_MARKS).find(_INT19) >= 0


#: What a JSON number orjson does not write as the canonical encoder does is spelled with: a
#: negative exponent or four zeros after the point (0 < abs(x) < 1e-4), or the standard
#: library's NaN and Infinity literals.
_ODD_NUMBERS = (b"e-", b"E-", b".0000", b"NaN", b"Infinity")


def plain_numbers(data: bytes) -> bool:
    """Whether the JSON text ``data``, read by the standard library, holds no number that
    ``canonical_json(..., walked=True)`` would need the check walk for: no float with
    0 < abs(x) < 1e-4 and no NaN or infinity. A string spelling one says no too (the value is
    then written the checked way, to the same text). Integers past 64 bits and lone
    surrogates need no look: orjson refuses them, and ``walked`` then takes the checked way.

    >>> plain_numbers(b'{"temperature":0.2,"n":3}'), plain_numbers(b'{"top_p":1e-05}')
    (True, False)
    """
    return not any(odd in data for odd in _ODD_NUMBERS)


def canonical_json(value: Any, *, path: str = "$", walked: bool = False) -> str:
    """Return the canonical JSON text of ``value``.

    Args:
        value: a JSON-like value (mappings with ``str`` keys, sequences, str, int, finite
            float, bool, None, BlobRef).
        path: the name used for ``value`` in error messages.
        walked: the caller has walked ``value`` already and found only ``dict``, ``list``,
            :class:`~agentlog.events.BlobRef` and values of exactly ``str``, ``int``,
            ``bool``, ``None`` and ``float`` with no float that is 0 < abs(x) < 1e-4 or not
            finite (the writer's payload walk, :mod:`agentlog.store.payload`): the check walk
            is skipped. Whatever else orjson refuses (a key that is not a str, a lone
            surrogate, an integer past 64 bits) still goes the checked way, so the text and
            the errors are the same either way.

    Raises:
        CanonicalJSONError: naming the path of the first value that has no canonical form.

    >>> canonical_json({"b": [1, 2.5, None], "a": "é"})
    '{"a":"é","b":[1,2.5,null]}'
    >>> canonical_json({"x": float("nan")}, path="payload")
    Traceback (most recent call last):
    ...
    agentlog.errors.CanonicalJSONError: payload.x: NaN is not JSON; use null or a string
    """
    if walked or _check(value, path):
        try:  # orjson writes the same text for these values, ~8x faster (tested against _ENCODER)
            return orjson.dumps(value, default=_convert, option=_ORJSON).decode()
        except TypeError:  # an integer past 64 bits, a float subclass: the standard encoder
            if walked:  # or something the check names (a key that is not a str, a surrogate)
                return canonical_json(value, path=path)
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


class _Bad(Exception):
    """Raised by :func:`_walk` at a value with no canonical form; the path is put together
    on the way out (so the walk builds no path strings while all is well)."""

    def __init__(self, problem: str, part: str = "") -> None:
        self.problem = problem
        self.parts = [part] if part else []


def _check(value: Any, path: str) -> bool:
    """Walk ``value`` and raise at the first thing the encoder would get wrong; return whether
    orjson writes it as the standard encoder does (no float in orjson's other range)."""
    try:
        return _walk(value)
    except _Bad as bad:
        raise CanonicalJSONError(path + "".join(reversed(bad.parts)), bad.problem) from None


def _walk(value: Any) -> bool:
    t = type(value)
    if t is str:
        if not value.isascii():
            _utf8(value)
        return True
    if t is int or t is bool or value is None:
        return True
    if t is float:
        if not math.isfinite(value):
            what = "NaN" if math.isnan(value) else "infinity"
            raise _Bad(f"{what} is not JSON; use null or a string")
        return not value or abs(value) >= TINY
    same = True
    if t is dict or isinstance(value, Mapping):
        for key, item in value.items():
            if type(key) is not str:
                raise _Bad(f"keys must be strings, got {type(key).__name__}", f"[{key!r}]")
            u = type(item)
            if (u is str and item.isascii()) or u is int or item is None or u is bool:
                continue  # the common scalars, without a call
            try:
                same = _walk(item) and same
            except _Bad as bad:
                bad.parts.append(f".{key}")
                raise
        return same
    if t is list or t is tuple or (isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))
                                   and not (hasattr(value, "to_json") and hasattr(value, "digest"))
                                   and not isinstance(value, _SCALARS)):
        for i, item in enumerate(value):
            u = type(item)
            if (u is str and item.isascii()) or u is int or item is None or u is bool:
                continue
            try:
                same = _walk(item) and same
            except _Bad as bad:
                bad.parts.append(f"[{i}]")
                raise
        return same
    if hasattr(value, "to_json") and hasattr(value, "digest"):  # BlobRef
        return True
    if isinstance(value, _SCALARS):  # subclasses: IntEnum, StrEnum, bool
        if isinstance(value, float) and not math.isfinite(value):
            raise _Bad("NaN or infinity is not JSON; use null or a string")
        return False  # the standard encoder, as it always wrote them
    hint = " (store bytes with put_blob)" if isinstance(value, (bytes, bytearray)) else ""
    raise _Bad(f"{type(value).__name__} is not JSON{hint}")


def _utf8(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Bad(f"string is not valid UTF-8 ({exc.reason} at {exc.start})") from None


def _check_utf8(value: str, path: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalJSONError(path, f"string is not valid UTF-8 ({exc.reason} at {exc.start})") from None
