"""The values a state holds: freezing at the boundary, thawing for display, JSON equality.

A state is a tree of :class:`~agentlog.folding.persistent.PMap` (JSON objects, string keys) and
:class:`~agentlog.folding.persistent.PVector` (JSON arrays), agentlog's persistent map and vector
with pyrsistent's API, whose leaves are ``str``, ``int``, ``float``, ``bool``, ``None`` or a
:class:`~agentlog.events.BlobRef`, which stays as it is. Values enter the state through
:func:`freeze` and leave it through :func:`thaw`.

Two equalities are used. :func:`json_equal` is RFC 6902's (the ``test`` op): ``1 == 1.0``,
but ``True != 1`` and arrays differ from objects. :func:`same_value` is stricter, as
:func:`~agentlog.folding.diff.diff_states` needs it: ``1`` and ``1.0`` differ, because their
canonical JSON differs.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from .persistent import PMap, PVector, map_of_dict, pmap, pvector

__all__ = ["EMPTY_MAP", "EMPTY_VECTOR", "PVECTOR", "State", "freeze", "json_equal", "same_value", "short",
           "thaw"]

State: TypeAlias = PMap[str, Any]
"""A fold state: a ``PMap`` tree (see the module docstring)."""

EMPTY_MAP: PMap[str, Any] = pmap()
EMPTY_VECTOR: PVector[Any] = pvector()
PVECTOR: type = PVector  # the vector type (a name kept from when it was pyrsistent's C type)

_SCALARS = frozenset({str, int, float, bool, type(None)})
_TEXT = (str, bytes, bytearray)


def freeze(value: Any) -> Any:
    """Return ``value`` as a persistent tree: mappings become ``PMap``, lists and tuples ``PVector``.

    agentlog's persistent containers are taken as they are (they are frozen already), so
    moving a subtree of a state elsewhere costs nothing and keeps it shared; any other mapping
    or sequence (a pyrsistent one too) is copied into them. Scalars and
    :class:`~agentlog.events.BlobRef` objects are kept as they are. Tuples become vectors (JSON
    has only arrays).

    Args:
        value: a JSON-like value.

    Returns:
        The frozen value.

    >>> freeze({"a": [1, (2, 3)]})
    pmap({'a': pvector([1, pvector([2, 3])])})
    >>> v = freeze([1]); freeze(v) is v
    True
    """
    t = type(value)
    if t in _SCALARS or t is PMap or t is PVECTOR:
        return value
    scalars = _SCALARS
    if t is dict or isinstance(value, Mapping):
        if t is dict:
            for v in value.values():
                if type(v) not in scalars:
                    break
            else:  # all scalars, the common case: no copy needed before building
                return map_of_dict(value)
        return map_of_dict({k: v if type(v) in scalars else freeze(v) for k, v in value.items()})
    if t is list or t is tuple or (isinstance(value, Sequence) and not isinstance(value, _TEXT)):
        return pvector([v if type(v) in scalars else freeze(v) for v in value])
    return value  # BlobRef, or anything else opaque: kept, and canonical JSON judges it later


def thaw(value: Any) -> Any:
    """Return a plain ``dict``/``list`` copy of a frozen value (scalars and blob refs kept).

    Args:
        value: a state or any part of one.

    Returns:
        The same tree made of ``dict`` and ``list``.

    >>> thaw(freeze({"a": [1, {"b": None}]}))
    {'a': [1, {'b': None}]}
    """
    t = type(value)
    if t in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, _TEXT):
        return [thaw(v) for v in value]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality, as RFC 6902's ``test`` op defines it.

    Numbers compare by value (``1 == 1.0``); booleans equal only booleans; objects equal
    objects with the same members, arrays equal arrays element by element. A
    :class:`~agentlog.events.BlobRef` equals its reference object.

    Args:
        a: a JSON-like value (plain or frozen).
        b: another.

    Returns:
        Whether they are the same JSON value.

    >>> json_equal(1, 1.0), json_equal(True, 1), json_equal([1], {"0": 1})
    (True, False, False)
    >>> json_equal(freeze({"a": [1, 2]}), {"a": [1, 2.0]})
    True
    """
    return _equal(a, b, False)


def same_value(a: Any, b: Any) -> bool:
    """Strict equality: JSON equality where ``int`` and ``float`` also differ.

    Two values are the same when their canonical JSON is the same. Identical subtrees
    (``is``) are not descended into.

    Args:
        a: a JSON-like value (plain or frozen).
        b: another.

    Returns:
        Whether they are the same value.

    >>> same_value(1, 1.0), same_value(freeze([1, "x"]), [1, "x"])
    (False, True)
    """
    return _equal(a, b, True)


def _equal(a: Any, b: Any, strict: bool) -> bool:
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta in _SCALARS or tb in _SCALARS:
        if ta is bool or tb is bool or ta is str or tb is str or a is None or b is None:
            return ta is tb and a == b
        if strict:
            return ta is tb and a == b
        # int/float only: anything else (a container, a BlobRef) is never equal to a number
        return ta in (int, float) and tb in (int, float) and a == b
    if ta is not tb:  # a BlobRef equals its reference object
        if _is_blob(a):
            a = a.to_json()
        if _is_blob(b):
            b = b.to_json()
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        missing = _MISSING
        for key, value in a.items():
            other = b.get(key, missing)
            if other is missing or not _equal(value, other, strict):
                return False
        return True
    if isinstance(a, Sequence) and not isinstance(a, _TEXT):
        if not isinstance(b, Sequence) or isinstance(b, _TEXT) or len(a) != len(b):
            return False
        return all(x is y or _equal(x, y, strict) for x, y in zip(a, b))
    if isinstance(b, (Mapping, Sequence)):
        return False
    return bool(a == b)


def _is_blob(value: Any) -> bool:
    return hasattr(value, "digest") and hasattr(value, "to_json")


_MISSING: Any = object()


def short(value: Any, limit: int = 60) -> str:
    """A one-line JSON rendering of a value for display, cut at ``limit`` characters.

    Args:
        value: a JSON-like value (plain or frozen).
        limit: longer text is cut to ``limit - 1`` characters, then ``…`` and the full length.

    Returns:
        The text.

    >>> short(freeze({"b": [1, "x"], "a": None}))
    '{"a": null, "b": [1, "x"]}'
    >>> short("x" * 100, limit=20)
    '"xxxxxxxxxxxxxxxxxx… (102 chars)'
    """
    plain = thaw(value)
    try:  # keys sorted: a PMap's order depends on the hash seed, and displays must not
        text = json.dumps(plain, ensure_ascii=False, default=_display_default, sort_keys=True)
    except TypeError:  # keys of mixed types: not JSON, shown as they come
        text = json.dumps(plain, ensure_ascii=False, default=_display_default)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 1]}… ({len(text):,} chars)"


def _display_default(obj: Any) -> Any:
    return repr(obj)
