"""Which keys changed between two versions of a map, remembered where the fold made them.

A ``PMap`` does not let Python see which of its internal nodes two versions share, so
finding the one changed key of a 100,000-key map would mean looking at every key. Instead,
wherever agentlog derives a new map from an old one (a patch commit, the object reducers) it
notes ``new = base + changes to these keys``. :func:`changed_keys` follows those notes from
two maps to a common ancestor and returns the keys that may differ, so ``diff_states`` on
nearby states costs what changed.

The notes hold the maps weakly: a note dies with its map and never keeps an old state alive.
A missing note only makes a diff slower, never wrong, because the keys found this way are
compared like any others.

Pure: no I/O (a process-local cache of facts about values that are alive).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["changed_keys", "record"]

_MAX_STEPS: Final = 64


class _Ref(weakref.ref):  # type: ignore[type-arg]
    __slots__ = ("key",)
    key: int


def _gone(ref: _Ref) -> None:
    rec = _NOTES.get(ref.key)
    if rec is not None and rec[0] is ref:  # not a newer note for a reused id
        del _NOTES[ref.key]


# id(new map) -> (weak ref to it, weak ref to the map it was derived from, keys set or removed)
_NOTES: dict[int, tuple[_Ref, weakref.ref[Any], tuple[Any, ...]]] = {}


def record(new: Any, base: Any, keys: Iterable[Any]) -> None:
    """Note that ``new`` is ``base`` with (at most) the given keys set or removed."""
    ref = _Ref(new, _gone)
    ref.key = key = id(new)
    _NOTES[key] = (ref, weakref.ref(base), tuple(keys))


def _parent(node: Any) -> tuple[Any, tuple[Any, ...]] | None:
    note = _NOTES.get(id(node))
    if note is None or note[0]() is not node:
        return None
    parent = note[1]()
    return None if parent is None else (parent, note[2])


def changed_keys(a: Any, b: Any) -> set[Any] | None:
    """The keys that may differ between maps ``a`` and ``b``, or ``None`` if unknown.

    Known when both descend, through recorded derivations, from a common map within a
    few dozen steps.
    """
    if a is b:
        return set()
    seen: dict[int, tuple[Any, frozenset[Any]]] = {}
    node: Any = b
    acc: frozenset[Any] = frozenset()
    for _ in range(_MAX_STEPS):
        seen[id(node)] = (node, acc)
        step = _parent(node)
        if step is None:
            break
        node, acc = step[0], acc.union(step[1])
    node = a
    mine: set[Any] = set()
    for _ in range(_MAX_STEPS):
        hit = seen.get(id(node))
        if hit is not None and hit[0] is node:
            return mine.union(hit[1])
        step = _parent(node)
        if step is None:
            return None
        node = step[0]
        mine.update(step[1])
    return None
