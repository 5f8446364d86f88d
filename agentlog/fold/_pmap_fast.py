"""Build a ``PMap`` with many keys changed at once, faster than its evolver.

``PMap`` is a vector of buckets (lists of ``(key, value)`` pairs) indexed by
``hash(key) % len(buckets)``. Its evolver changes one key at a time in pure Python (about
1.5 µs a key); a fold's commit changes hundreds at once. :func:`update` groups the changes by
bucket, copies each touched bucket once, writes them through one C vector evolver, and grows
the bucket vector once at the end if it got too full (by ``PMap``'s own rule: more than
about 1.5 keys per bucket). The result is an ordinary ``PMap`` that shares every untouched bucket.

This reads ``PMap``'s private layout (``_buckets``, ``_size``, ``PMap(size, buckets)``), so a
self-test at import compares it with the public evolver; if pyrsistent ever changes its
layout, :data:`ENABLED` is False and callers use the evolver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import chain
from typing import Any

from pyrsistent import PMap, pmap, pvector

__all__ = ["ENABLED", "build", "lookup", "update"]

# PMap(size, buckets), which pyrsistent's type stubs do not show
_new: Callable[[type, int, Any], PMap[Any, Any]] = PMap.__new__  # type: ignore[assignment]


def update(base: PMap[Any, Any], changes: Mapping[Any, Any], deleted: Any) -> PMap[Any, Any]:
    """``base`` with ``changes`` applied: ``changes[key]`` is the new value, or ``deleted``.

    Removing a missing key is a no-op; setting a key to the very object it holds changes
    nothing. Returns ``base`` itself when nothing changed.
    """
    buckets = base._buckets
    n = len(buckets)
    size = base._size
    if len(changes) > n:
        # More changes than buckets (a map filled from empty, say): rebuild once, O(size +
        # changes), rather than pile thousands of keys into a few buckets.
        items = dict(base.iteritems())
        for key, value in changes.items():
            if value is deleted:
                items.pop(key, None)
            else:
                items[key] = value
        if len(items) == size and all(items.get(k, deleted) is v for k, v in base.iteritems()):
            return base
        return _rehash(items.items(), len(items), n)
    # touched[i]: the new list for bucket i. Buckets of ``base`` are shared with it and never
    # changed in place; new lists are made exactly as long as they need to be (snapshots
    # keep every version, so a spare slot per list adds up).
    touched: dict[int, list[tuple[Any, Any]]] = {}
    seen = touched.get
    for key, value in changes.items():
        i = hash(key) % n
        bucket = seen(i)
        if bucket is None:
            bucket = buckets[i]
            if not bucket:  # an empty bucket: the usual case for a new key
                if value is not deleted:
                    touched[i] = [(key, value)]
                    size += 1
                continue
        pos = -1
        if bucket:
            for j, pair in enumerate(bucket):
                if pair[0] == key:
                    pos = j
                    break
        if pos >= 0:
            if value is deleted:
                touched[i] = bucket[:pos] + bucket[pos + 1:]
                size -= 1
            elif bucket[pos][1] is not value:
                new = list(bucket)
                new[pos] = (key, value)
                touched[i] = new
        elif value is not deleted:
            touched[i] = [*bucket, (key, value)] if bucket else [(key, value)]
            size += 1
    if not touched:
        return base
    if n < 0.67 * size:  # fuller than PMap allows: grow, rehashing once
        pairs = chain.from_iterable(touched.get(i, b) or () for i, b in enumerate(buckets))
        return _rehash(pairs, size, n)
    ev = buckets.evolver()
    for i in sorted(touched):  # in index order, the evolver copies each trie node once, in turn
        ev[i] = touched[i] or None
    return _new(PMap, size, ev.persistent())


def _rehash(pairs: Any, size: int, n: int) -> PMap[Any, Any]:
    # Room to double before the next growth, as PMap's own doubling leaves (so growth
    # costs O(1) per key, amortised).
    while n < 1.34 * size:
        n *= 2
    table: list[Any] = [None] * n
    for pair in pairs:
        i = hash(pair[0]) % n
        bucket = table[i]
        if bucket:
            bucket.append(pair)
        else:
            table[i] = [pair]
    return _new(PMap, size, pvector(table))


def _lookup(pm: PMap[Any, Any], key: Any, default: Any) -> Any:
    """``pm.get(key, default)`` in one call (``PMap.get`` makes four)."""
    buckets = pm._buckets
    bucket = buckets[hash(key) % len(buckets)]
    if bucket:
        for pair in bucket:
            if pair[0] == key:
                return pair[1]
    return default


def _public_lookup(pm: PMap[Any, Any], key: Any, default: Any) -> Any:
    return pm.get(key, default)


def build(items: dict[Any, Any]) -> PMap[Any, Any]:
    """A new ``PMap`` of a ``dict`` (the same layout ``pmap()`` makes, a little faster)."""
    if not items:
        return _EMPTY
    n = 2 * len(items)
    table: list[Any] = [None] * n
    for pair in items.items():
        i = hash(pair[0]) % n
        bucket = table[i]
        if bucket:
            bucket.append(pair)
        else:
            table[i] = [pair]
    return _new(PMap, len(items), pvector(table))


_EMPTY: PMap[Any, Any] = pmap()


def _self_test() -> bool:
    try:
        marker = object()
        base = pmap({f"k{i}": i for i in range(50)})
        changes: dict[Any, Any] = {f"k{i}": marker for i in range(0, 50, 7)}
        changes.update({f"k{i}": -i for i in range(3, 50, 5)})
        changes.update({f"n{i}": i for i in range(200)})  # forces a rehash
        expected = base.evolver()
        for key, value in changes.items():
            if value is marker:
                if key in expected:  # type: ignore[operator]  # the evolver has __contains__
                    expected.remove(key)
            else:
                expected[key] = value
        got = update(base, changes, marker)
        small = update(base, {"k1": -1}, marker)
        made = build({"a": 1, "b": [2]})
        missing = object()
        return (type(got) is PMap and got == expected.persistent() and len(got) == len(expected)
                and _lookup(got, "n7", missing) == 7 and _lookup(got, "k0", missing) is missing
                and _lookup(_EMPTY, "x", missing) is missing
                and dict(got) == dict(expected.persistent()) and small["k1"] == -1
                and len(small) == 50 and small.set("z", 0)["z"] == 0
                and update(base, {"k1": 1}, marker) is base and made == {"a": 1, "b": [2]}
                and made.set("c", 3).remove("a") == {"b": [2], "c": 3})
    except Exception:  # noqa: BLE001  # pragma: no cover - any surprise means: do not use it
        return False


ENABLED: bool = _self_test()
"""Whether the fast path agrees with pyrsistent's own evolver in this process."""

lookup = _lookup if ENABLED else _public_lookup
"""``lookup(pm, key, default)``: ``pm.get(key, default)``, faster when the layout is known."""
