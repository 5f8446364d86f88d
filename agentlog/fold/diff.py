"""``diff_states``: the JSON Patch that turns one state into another.

The walk skips every pair of subtrees that are the same object, so diffing two nearby
states of a fold costs what changed between them, not the size of the state:

- **Maps**: only keys that may differ are looked at. Where the fold derived one map from the
  other it noted the keys it touched (:mod:`agentlog.fold._lineage`), and those are all that
  is compared. Otherwise the two ``PMap``\\ s' bucket vectors are compared by identity at C
  speed and only the keys of differing buckets are looked at; maps of other types compare
  every key. Keys come out sorted, so a diff reads the same in every process.
- **Vectors**: the common prefix and suffix (identical or equal elements) are skipped. What
  is left is an append (``add /-``), a removal from the end (indices from the highest down,
  so each stays valid), a pairwise diff when both sides have the same length, a small LCS
  alignment when the middles are short, or else a pairwise diff plus the surplus added or
  removed. An element that changed is diffed into, never replaced whole, when it is paired.

Every op keeps the value it overwrites as ``"old"`` (for display; ``apply_patch`` ignores it),
and ``apply_patch(a, diff_states(a, b))`` equals ``b`` exactly (``1`` and ``1.0`` differ).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress, count
from operator import is_not
from typing import Any, Final

from pyrsistent import PMap

from . import _lineage
from .patch import Patch
from .pointer import escape_token
from .values import same_value

__all__ = ["diff_states"]

_LCS_LIMIT: Final = 4_096  # cells of the LCS table (middle of a × middle of b)
_SMALL: Final = 128  # keys in two maps that are compared one by one without looking further
_MISSING: Any = object()
_TEXT = (str, bytes, bytearray)


def diff_states(a: Any, b: Any) -> Patch:
    """Return the JSON Patch that turns ``a`` into ``b``.

    Args:
        a: a state (or any frozen JSON value).
        b: another.

    Returns:
        A :class:`~agentlog.fold.patch.Patch` such that ``apply_patch(a, patch) == b``;
        each ``replace``/``remove`` op also keeps the value it overwrites as ``"old"``.
        Empty when they are equal.

    >>> from agentlog.fold.values import freeze
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
    ops: list[dict[str, Any]] = []
    _diff(a, b, "", ops)
    return Patch._trusted(ops)


def _is_seq(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, _TEXT)


def _diff(a: Any, b: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if a is b:
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        _diff_map(a, b, path, ops)
    elif _is_seq(a) and _is_seq(b):
        _diff_seq(a, b, path, ops)
    elif not same_value(a, b):
        ops.append({"op": "replace", "path": path, "value": b, "old": a})


def _bucket_keys(a: Any, b: Any) -> set[Any] | None:
    """Keys in the buckets where two ``PMap`` s differ, found by an identity scan in C."""
    # PMap's bucket vector is private API: any surprise falls back to comparing every key.
    buckets_a, buckets_b = getattr(a, "_buckets", None), getattr(b, "_buckets", None)
    if buckets_a is None or buckets_b is None or len(buckets_a) != len(buckets_b):
        return None
    keys: set[Any] = set()
    for i in compress(count(), map(is_not, buckets_a, buckets_b)):
        for bucket in (buckets_a[i], buckets_b[i]):
            if bucket:
                keys.update(k for k, _ in bucket)
    return keys


def _sorted(keys: set[Any]) -> list[Any]:
    try:
        return sorted(keys)
    except TypeError:  # keys of mixed types: not JSON, but still diffable
        return sorted(keys, key=repr)


def _diff_map(a: Mapping[Any, Any], b: Mapping[Any, Any], path: str,
              ops: list[dict[str, Any]]) -> None:
    keys = None
    if type(a) is PMap and type(b) is PMap and len(a) + len(b) > _SMALL:
        keys = _lineage.changed_keys(a, b)
        if keys is None:
            keys = _bucket_keys(a, b)
    if keys is None:
        keys = set(a) | set(b)
    for key in _sorted(keys):
        old, new = a.get(key, _MISSING), b.get(key, _MISSING)
        if old is new:
            continue
        where = f"{path}/{escape_token(key)}"
        if old is _MISSING:
            ops.append({"op": "add", "path": where, "value": new})
        elif new is _MISSING:
            ops.append({"op": "remove", "path": where, "old": old})
        else:
            _diff(old, new, where, ops)


def _same(x: Any, y: Any) -> bool:
    return x is y or same_value(x, y)


def _diff_seq(a: Sequence[Any], b: Sequence[Any], path: str, ops: list[dict[str, Any]]) -> None:
    na, nb = len(a), len(b)
    n = min(na, nb)
    # common prefix: identical elements found in C, then equal ones
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
            ops.append({"op": "add", "path": where, "value": b[p + j]})
    elif lb == 0:
        for i in range(p + la - 1, p - 1, -1):  # from the end, so each index stays valid
            ops.append({"op": "remove", "path": f"{path}/{i}", "old": a[i]})
    elif la == lb or la * lb > _LCS_LIMIT:
        _pairwise(a, b, p, la, lb, s == 0, path, ops)
    else:
        _aligned(a, b, p, la, lb, path, ops)


def _pairwise(a: Sequence[Any], b: Sequence[Any], p: int, la: int, lb: int, at_end: bool,
              path: str, ops: list[dict[str, Any]]) -> None:
    """Diff the middles element by element, then add or remove the surplus."""
    for k in range(min(la, lb)):
        _diff(a[p + k], b[p + k], f"{path}/{p + k}", ops)
    for k in range(lb, la):  # a's surplus: remove from the end of the middle
        i = p + la - 1 - (k - lb)
        ops.append({"op": "remove", "path": f"{path}/{i}", "old": a[i]})
    for k in range(la, lb):  # b's surplus: insert after the paired elements
        where = f"{path}/-" if at_end else f"{path}/{p + k}"
        ops.append({"op": "add", "path": where, "value": b[p + k]})


def _aligned(a: Sequence[Any], b: Sequence[Any], p: int, la: int, lb: int, path: str,
             ops: list[dict[str, Any]]) -> None:
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
            ops.append({"op": "remove", "path": f"{path}/{cur}", "old": xs[dels[k]]})
        for k in range(len(dels), len(ins)):
            ops.append({"op": "add", "path": f"{path}/{cur}", "value": ys[ins[k]]})
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
