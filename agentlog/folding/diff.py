"""``diff_states``: the JSON Patch that turns one state into another.

The walk skips every pair of subtrees that are the same object, so diffing two nearby
states of a fold costs what changed between them, not the size of the state:

- **Maps**: the two trees are walked side by side (:func:`~agentlog.folding.persistent.map_changed_keys`)
  and every subtree that is the same node on both sides, or has the same content digest, is
  skipped, so only keys in nodes that differ are looked at. A map's shape depends only on its
  keys, so this works for any two maps: made by one fold, by two processes, or loaded from
  checkpoints (whose nodes carry their digests). Maps of other types compare every key. Keys
  come out sorted, so a diff reads the same in every process.
- **Vectors**: the common prefix (whole identical subtrees skipped at once) and suffix
  (identical or equal elements) are skipped. What
  is left is an append (``add /-``), a removal from the end (indices from the highest down,
  so each stays valid), a pairwise diff when both sides have the same length, a small LCS
  alignment when the middles are short, or else a pairwise diff plus the surplus added or
  removed. An element that changed is diffed into, never replaced whole, when it is paired.

The ops are exactly RFC 6902; the value each ``replace``/``remove`` overwrites is kept beside
it (``patch.changes``, for display), and ``apply_patch(a, diff_states(a, b))`` equals ``b``
exactly (``1`` and ``1.0`` differ).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress, count
from operator import is_not
from typing import Any, Final

from .patch import NO_VALUE, Patch
from .persistent import PMap, PVector, map_changed_keys, vector_prefix
from .pointer import escape_token
from .values import same_value

__all__ = ["diff_states"]

_LCS_LIMIT: Final = 4_096  # cells of the LCS table (middle of a × middle of b)
_MISSING: Any = object()
_TEXT = (str, bytes, bytearray)


def diff_states(a: Any, b: Any) -> Patch:
    """Return the JSON Patch that turns ``a`` into ``b``.

    Args:
        a: a state (or any frozen JSON value).
        b: another.

    Returns:
        A :class:`~agentlog.folding.patch.Patch` of RFC 6902 ops such that
        ``apply_patch(a, patch) == b``; ``patch.changes`` pairs each ``replace``/``remove``
        with the value it overwrites. Empty when they are equal.

    >>> from agentlog.folding.values import freeze
    >>> a = freeze({"vars": {"x": 1, "y": 3}, "log": ["a"]})
    >>> b = freeze({"vars": {"x": 2, "z": True}, "log": ["a", "b"]})
    >>> print(diff_states(a, b))
    + /log/- = "b"
    ~ /vars/x: 1 → 2
    - /vars/y (was 3)
    + /vars/z = true
    >>> diff_states(a, a)
    <Patch 0 ops>
    """
    out = _Out()
    _diff(a, b, "", out)
    return Patch._trusted(out.ops, out.old)


class _Out:
    """The ops found so far, and beside each the value it overwrites (``NO_VALUE`` for adds)."""

    __slots__ = ("old", "ops")

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.old: list[Any] = []

    def add(self, path: str, value: Any) -> None:
        self.ops.append({"op": "add", "path": path, "value": value})
        self.old.append(NO_VALUE)

    def remove(self, path: str, old: Any) -> None:
        self.ops.append({"op": "remove", "path": path})
        self.old.append(old)

    def replace(self, path: str, value: Any, old: Any) -> None:
        self.ops.append({"op": "replace", "path": path, "value": value})
        self.old.append(old)


def _is_seq(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, _TEXT)


def _diff(a: Any, b: Any, path: str, ops: _Out) -> None:
    if a is b:
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        _diff_map(a, b, path, ops)
    elif _is_seq(a) and _is_seq(b):
        _diff_seq(a, b, path, ops)
    elif not same_value(a, b):
        ops.replace(path, b, a)


def _sorted(keys: set[Any]) -> list[Any]:
    try:
        return sorted(keys)
    except TypeError:  # keys of mixed types: not JSON, but still diffable
        return sorted(keys, key=repr)


def _diff_map(a: Mapping[Any, Any], b: Mapping[Any, Any], path: str,
              ops: _Out) -> None:
    if type(a) is PMap and type(b) is PMap:
        keys: list[Any] = map_changed_keys(a, b)
    else:
        keys = _sorted(set(a) | set(b))
    for key in keys:
        old, new = a.get(key, _MISSING), b.get(key, _MISSING)
        if old is new:
            continue
        where = f"{path}/{escape_token(key)}"
        if old is _MISSING:
            ops.add(where, new)
        elif new is _MISSING:
            ops.remove(where, old)
        else:
            _diff(old, new, where, ops)


def _same(x: Any, y: Any) -> bool:
    return x is y or same_value(x, y)


def _diff_seq(a: Sequence[Any], b: Sequence[Any], path: str, ops: _Out) -> None:
    na, nb = len(a), len(b)
    n = min(na, nb)
    # common prefix: identical elements (whole shared subtrees at once), then equal ones
    if type(a) is PVector and type(b) is PVector:
        p = vector_prefix(a, b)
    else:
        p = next(compress(count(), map(is_not, a, b)), n)
    while p < n and same_value(a[p], b[p]):
        p += 1
    # common suffix, not overlapping the prefix
    s = 0
    while s < n - p and _same(a[na - 1 - s], b[nb - 1 - s]):
        s += 1
    la, lb = na - s - p, nb - s - p
    if la == 0 and lb == 0:
        return
    if la == 0:
        for j in range(lb):
            where = f"{path}/-" if s == 0 else f"{path}/{p + j}"
            ops.add(where, b[p + j])
    elif lb == 0:
        for i in range(p + la - 1, p - 1, -1):  # from the end, so each index stays valid
            ops.remove(f"{path}/{i}", a[i])
    elif la == lb or la * lb > _LCS_LIMIT:
        _pairwise(a, b, p, la, lb, s == 0, path, ops)
    else:
        _aligned(a, b, p, la, lb, path, ops)


def _pairwise(a: Sequence[Any], b: Sequence[Any], p: int, la: int, lb: int, at_end: bool,
              path: str, ops: _Out) -> None:
    """Diff the middles element by element, then add or remove the surplus."""
    for k in range(min(la, lb)):
        _diff(a[p + k], b[p + k], f"{path}/{p + k}", ops)
    for k in range(lb, la):  # a's surplus: remove from the end of the middle
        i = p + la - 1 - (k - lb)
        ops.remove(f"{path}/{i}", a[i])
    for k in range(la, lb):  # b's surplus: insert after the paired elements
        where = f"{path}/-" if at_end else f"{path}/{p + k}"
        ops.add(where, b[p + k])


def _aligned(a: Sequence[Any], b: Sequence[Any], p: int, la: int, lb: int, path: str,
             ops: _Out) -> None:
    """Diff short middles along a longest common subsequence.

    Between two kept elements, deleted and inserted elements are first paired up and diffed
    into (an edited element becomes a nested diff, not a remove and an add), then the
    surplus is removed or added. ``cur`` is the index in the array as the ops so far leave it.
    """
    xs = [a[p + i] for i in range(la)]
    ys = [b[p + j] for j in range(lb)]
    # lengths[i][j]: LCS length of xs[i:] and ys[j:]
    lengths = [[0] * (lb + 1) for _ in range(la + 1)]
    for i in range(la - 1, -1, -1):
        row, below = lengths[i], lengths[i + 1]
        for j in range(lb - 1, -1, -1):
            row[j] = below[j + 1] + 1 if _same(xs[i], ys[j]) else max(below[j], row[j + 1])
    cur = p
    dels: list[int] = []
    ins: list[int] = []

    def flush() -> None:
        nonlocal cur
        for k in range(min(len(dels), len(ins))):
            _diff(xs[dels[k]], ys[ins[k]], f"{path}/{cur}", ops)
            cur += 1
        for k in range(len(ins), len(dels)):
            ops.remove(f"{path}/{cur}", xs[dels[k]])
        for k in range(len(dels), len(ins)):
            ops.add(f"{path}/{cur}", ys[ins[k]])
            cur += 1
        dels.clear()
        ins.clear()

    i = j = 0
    while i < la or j < lb:
        if i < la and j < lb and _same(xs[i], ys[j]):
            flush()
            cur += 1
            i += 1
            j += 1
        elif j < lb and (i == la or lengths[i][j + 1] >= lengths[i + 1][j]):
            ins.append(j)
            j += 1
        else:
            dels.append(i)
            i += 1
    flush()
