"""Persistent maps and vectors: what a state is made of, with the same shape in every process.

A state is a tree of :class:`PMap` (JSON objects) and :class:`PVector` (JSON arrays). Both
have pyrsistent's API (``get``, ``set``, ``remove``, ``discard``, ``update``, ``evolver``,
``transform``; ``append``, ``extend``, ``set``, ``delete``), never change, and share every
untouched node with the value they were made from. They are agentlog's own, rather than
pyrsistent's, for three reasons the fold and the store need:

- **One shape per content.** A :class:`PMap` is a sorted tree whose node boundaries are chosen
  by the keys themselves (a key ends a node of height ``h`` when its *level*, read from a
  CRC-32 of the key, is above ``h``; as in Prolly trees and Merkle search trees). So the same
  keys give the same tree whatever order they were set in and whatever the process's hash
  seed, and a node's content digest is a fact about the content. A :class:`PVector` is a
  32-way positional trie, full but for its right edge, so its shape depends only on its length.
- **Nodes that know themselves.** Each node has room for its content digest and for where a
  checkpoint stored it (filled by :mod:`agentlog.folding.encode` and the store, on the node
  itself: no cache keyed by object ids). Two states compare by digest, subtree by subtree.
- **Nodes loaded on demand.** A node read from a checkpoint starts as a shell that knows its
  size, height and digest, and fills its content the first time something looks inside (the
  store's loader checks the digest before anything is used).

Iteration over a :class:`PMap` is in sorted key order (a pyrsistent map's order depended on
the hash seed). Keys are strings (JSON object keys).

>>> m = pmap({"b": 1, "a": pvector([2])})
>>> m
pmap({'a': pvector([2]), 'b': 1})
>>> m.set("c", 3).remove("b")
pmap({'a': pvector([2]), 'c': 3})
>>> m.set("b", 1) is m, m == {"a": [2], "b": 1}
(True, True)
>>> v = pvector(range(3)).append(3)
>>> v, v[-1], v.set(0, "x")[0]
(pvector([0, 1, 2, 3]), 3, 'x')

Pure: no I/O (a shell's loader is called only when the store made the shell).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from typing import Any, Final, Generic, Protocol, TypeVar, overload
from zlib import crc32

__all__ = ["DELETED", "Loader", "MapEvolver", "PMap", "PVector", "VectorEvolver", "map_changed_keys",
           "map_of_dict", "pmap", "pvector", "update_map", "vector_prefix"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_BITS: Final = 5
_WIDTH: Final = 1 << _BITS          # 32: vector fan-out, and expected map node size
_MASK: Final = _WIDTH - 1
_MAX_LEVEL: Final = 6              # 30 of the CRC's 32 bits
_ABSENT: Any = object()


class _Deleted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DELETED"


DELETED: Final[Any] = _Deleted()
"""In the changes given to :func:`update_map`: remove this key."""


class Loader(Protocol):
    """Where a stored node came from: fills its content on first use (see :mod:`.encode`)."""

    def load(self, node: Any) -> None:
        """Set ``node``'s content fields (checked against its digest), or raise."""


def _level(key: str) -> int:
    """How many node heights ``key`` ends: the count of trailing zero 5-bit groups of its CRC-32.

    Only the tree's shape depends on it (a crafted key set can make nodes uneven, never
    wrong); content digests are SHA-256 (:mod:`.encode`).
    """
    h = crc32(key.encode("utf-8", "surrogatepass"))
    if h & _MASK:
        return 0
    level = 1
    h >>= _BITS
    while level < _MAX_LEVEL and not h & _MASK:
        level += 1
        h >>= _BITS
    return level


def _key_error(key: Any) -> TypeError:
    return TypeError(f"state map keys are strings (JSON object keys), got {type(key).__name__} {key!r}")


# --- PMap --------------------------------------------------------------------------------------


class PMap(Mapping[K, V]):
    """A persistent map with pyrsistent's API, sorted by key. Make one with :func:`pmap`.

    Each instance is also a node of the tree: a leaf holds entries, an inner node holds the
    nodes below it (and the last key of each). Only the root is ever handed to users.
    """

    __slots__ = ("__weakref__", "_at", "_d", "_h", "_k", "_lk", "_lv", "_n", "_v")

    _k: tuple[Any, ...] | None  # leaf: the keys; inner: the last key of each child
    _lk: Any                    # the last key (known before a stored node is filled)
    _v: tuple[Any, ...] | None  # leaf: the values; inner: the children (PMap nodes)
    _n: int                     # entries below
    _h: int                     # height: 0 for a leaf
    _lv: int                    # the level of the last key
    _d: bytes | None            # content digest, once computed or read
    _at: Loader | None          # where a checkpoint stored it, once written or read

    def __init__(self) -> None:  # pragma: no cover - instances come from _node and pmap()
        raise TypeError("make a PMap with agentlog.folding.pmap(mapping) or freeze(mapping)")

    # -- reading --------------------------------------------------------------------------

    def _kv(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        k = self._k
        if k is None:
            self._fill()
            k = self._k
        return k, self._v  # type: ignore[return-value]

    def _fill(self) -> None:
        at = self._at
        if at is None:  # pragma: no cover - a shell always has a loader
            raise RuntimeError("an empty map node has no loader")
        at.load(self)

    def _find(self, key: Any) -> Any:
        node = self
        while True:
            k = node._k
            if k is None:
                node._fill()
                k = node._k
            i = bisect_left(k, key)  # type: ignore[arg-type]
            if node._h == 0:
                return node._v[i] if i < len(k) and k[i] == key else _ABSENT  # type: ignore[index,arg-type]
            if i == len(k):  # type: ignore[arg-type]
                return _ABSENT
            node = node._v[i]  # type: ignore[index]

    def __getitem__(self, key: K) -> V:
        if type(key) is not str and not isinstance(key, str):
            raise KeyError(key)
        value = self._find(key)
        if value is _ABSENT:
            raise KeyError(key)
        return value  # type: ignore[no-any-return]

    def get(self, key: K, default: Any = None) -> Any:
        """The value of ``key``, or ``default``."""
        if type(key) is not str and not isinstance(key, str):
            return default
        value = self._find(key)
        return default if value is _ABSENT else value

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return self._find(key) is not _ABSENT

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def _leaves(self) -> Iterator[PMap[K, V]]:
        if self._h == 0:
            self._kv()
            yield self
            return
        stack = [iter(self._kv()[1])]
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
            elif node._h == 0:
                node._kv()
                yield node
            else:
                stack.append(iter(node._kv()[1]))

    def __iter__(self) -> Iterator[K]:
        if self._h == 0:
            return iter(self._kv()[0])
        return (key for leaf in self._leaves() for key in leaf._k)  # type: ignore[union-attr]

    def iteritems(self) -> Iterator[tuple[K, V]]:
        """The ``(key, value)`` pairs in key order."""
        if self._h == 0:
            k, v = self._kv()
            return zip(k, v)
        return (pair for leaf in self._leaves() for pair in zip(leaf._k, leaf._v))  # type: ignore[arg-type]

    def itervalues(self) -> Iterator[V]:
        """The values in key order."""
        if self._h == 0:
            return iter(self._kv()[1])
        return (value for leaf in self._leaves() for value in leaf._v)  # type: ignore[union-attr]

    def keys(self) -> KeysView[K]:
        """A view of the keys, in order."""
        return _Keys(self)

    def values(self) -> ValuesView[V]:
        """A view of the values, in key order."""
        return _Values(self)

    def items(self) -> ItemsView[K, V]:
        """A view of the ``(key, value)`` pairs, in key order."""
        return _Items(self)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(other) != self._n:
            return False
        if type(other) is PMap and self._d is not None and self._d == other._d:
            return True
        missing = _ABSENT
        if type(other) is PMap:
            return all(a == b for a, b in zip(self.iteritems(), other.iteritems()))
        return all(other.get(key, missing) == value for key, value in self.iteritems())

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash(frozenset(self.iteritems()))

    def __repr__(self) -> str:
        return f"pmap({dict(self.iteritems())!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return pmap, (dict(self.iteritems()),)

    # -- making new maps ------------------------------------------------------------------

    def set(self, key: K, value: V) -> PMap[K, V]:
        """A map with ``key`` set to ``value`` (this map itself if it already holds that object)."""
        if isinstance(key, str):
            done = _set_in_place(self, key, value)
            if done is not None:
                return done
        return update_map(self, {key: value})

    def remove(self, key: K) -> PMap[K, V]:
        """A map without ``key``.

        Raises:
            KeyError: the key is not in the map.
        """
        if key not in self:
            raise KeyError(key)
        done = _set_in_place(self, key, DELETED)  # type: ignore[arg-type]
        return done if done is not None else update_map(self, {key: DELETED})

    def discard(self, key: K) -> PMap[K, V]:
        """A map without ``key`` (this map itself if it has no such key)."""
        if key not in self:
            return self
        return update_map(self, {key: DELETED})

    def update(self, *maps: Mapping[K, V]) -> PMap[K, V]:
        """A map with every key of ``maps`` set (later maps win)."""
        changes: dict[Any, Any] = {}
        for m in maps:
            changes.update(m.items() if isinstance(m, PMap) else m)
        return update_map(self, changes) if changes else self

    __add__ = update
    __or__ = update

    def update_with(self, fn: Callable[[V, V], V], *maps: Mapping[K, V]) -> PMap[K, V]:
        """Like :meth:`update`, but a key already present gets ``fn(current, new)``."""
        changes: dict[Any, Any] = {}
        for m in maps:
            for key, value in m.items():
                current = changes.get(key, _ABSENT)
                if current is _ABSENT:
                    current = self._find(key) if isinstance(key, str) else _ABSENT
                changes[key] = value if current is _ABSENT else fn(current, value)
        return update_map(self, changes) if changes else self

    def evolver(self) -> MapEvolver[K, V]:
        """A mutable view that collects changes; ``persistent()`` makes the new map."""
        return MapEvolver(self)

    def transform(self, *transformations: Any) -> PMap[K, V]:
        """Apply ``path, value_or_function`` pairs: each path is a sequence of keys and indices.

        A callable gets the current value and returns the new one; missing maps on the way are
        created empty. (pyrsistent's matchers are not supported.)

        >>> pmap({"usage": pmap({"calls": 1})}).transform(("usage", "calls"), lambda n: n + 1)
        pmap({'usage': pmap({'calls': 2})})
        """
        if len(transformations) % 2:
            raise TypeError("transform takes path, value pairs")
        result: Any = self
        for path, change in zip(transformations[::2], transformations[1::2]):
            result = _transform(result, tuple(path), change)
        return result  # type: ignore[no-any-return]


class _Keys(KeysView[Any]):
    def __iter__(self) -> Iterator[Any]:
        return iter(self._mapping)  # type: ignore[attr-defined]


class _Values(ValuesView[Any]):
    def __iter__(self) -> Iterator[Any]:
        return self._mapping.itervalues()  # type: ignore[attr-defined,no-any-return]


class _Items(ItemsView[Any, Any]):
    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return self._mapping.iteritems()  # type: ignore[attr-defined,no-any-return]


def _transform(value: Any, path: tuple[Any, ...], change: Any) -> Any:
    if not path:
        return change(value) if callable(change) else change
    head, rest = path[0], path[1:]
    if isinstance(value, PVector):
        return value.set(head, _transform(value[head], rest, change))
    base = value if isinstance(value, PMap) else pmap(value) if isinstance(value, Mapping) else _EMPTY_MAP
    current = base.get(head, _ABSENT)
    if current is _ABSENT:
        if rest:
            current = _EMPTY_MAP
        elif callable(change):
            raise KeyError(head)
    return base.set(head, _transform(current, rest, change))


def _set_in_place(root: PMap[Any, Any], key: str, value: Any) -> PMap[Any, Any] | None:
    """One key set or removed where no node boundary moves (the usual case): the leaf and the
    path above it copied, everything else shared. ``None`` when boundaries would move."""
    path: list[tuple[PMap[Any, Any], tuple[Any, ...], int]] = []
    node = root
    while node._h:
        keys, kids = node._kv()
        i = bisect_left(keys, key)
        if i == len(keys):
            return None  # past the last key: the right edge changes
        path.append((node, kids, i))
        node = kids[i]
    keys, vals = node._kv()
    p = bisect_left(keys, key)
    n = len(keys)
    if p < n and keys[p] == key:
        if value is DELETED:
            if p == n - 1:
                return None  # the leaf's last key: its boundary goes
            new = _node(keys[:p] + keys[p + 1:], vals[:p] + vals[p + 1:], 0, node._lv, n - 1)
            delta = -1
        else:
            if vals[p] is value:
                return root
            new = _node(keys, vals[:p] + (value,) + vals[p + 1:], 0, node._lv, n)
            delta = 0
    else:
        if value is DELETED:
            return root
        if p == n or _level(key):
            return None  # a new last key, or one that ends a leaf
        new = _node(keys[:p] + (key,) + keys[p:], vals[:p] + (value,) + vals[p:], 0, node._lv, n + 1)
        delta = 1
    for parent, kids, i in reversed(path):
        new = _node(parent._k, kids[:i] + (new,) + kids[i + 1:], parent._h, parent._lv,
                    parent._n + delta)
    return new


def _node(keys: tuple[Any, ...], values: tuple[Any, ...], height: int, level: int,
          size: int) -> PMap[Any, Any]:
    node: PMap[Any, Any] = object.__new__(PMap)
    node._k, node._v, node._n, node._h, node._lv = keys, values, size, height, level
    node._lk = keys[-1] if keys else None
    node._d = node._at = None
    return node


def shell_map(height: int, size: int, last: Any, level: int, digest: bytes,
              at: Loader) -> PMap[Any, Any]:
    """A map node that fills its content from ``at`` on first use (for the store's loader)."""
    node: PMap[Any, Any] = object.__new__(PMap)
    node._k = node._v = None
    node._n, node._h, node._lk, node._lv, node._d, node._at = size, height, last, level, digest, at
    return node


def fill_map(node: PMap[Any, Any], keys: tuple[Any, ...], values: tuple[Any, ...]) -> None:
    """Give a shell its content (the loader calls this once it checked the digest)."""
    node._v = values
    node._k = keys


_EMPTY_MAP: PMap[Any, Any] = _node((), (), 0, 0, 0)


def _group(nodes: list[PMap[Any, Any]], height: int) -> list[PMap[Any, Any]]:
    """Nodes of ``height`` holding ``nodes`` (of ``height - 1``), ended where a level allows."""
    out = []
    start = 0
    for i, node in enumerate(nodes):
        if node._lv >= height + 1 or i == len(nodes) - 1:
            kids = tuple(nodes[start:i + 1])
            out.append(_node(tuple(kid._lk for kid in kids), kids, height, node._lv,
                             sum(kid._n for kid in kids)))
            start = i + 1
    return out


def _last_key(node: PMap[Any, Any]) -> Any:
    return node._lk


def _build_map(keys: list[Any], values: list[Any]) -> PMap[Any, Any]:
    """The map of sorted, distinct ``keys``: leaves cut after every key of level >= 1."""
    n = len(keys)
    if n == 0:
        return _EMPTY_MAP
    for key in keys[:-1]:  # 31 keys in 32 end no node: a quick look at the CRC's low bits
        if not crc32(key.encode("utf-8", "surrogatepass")) & _MASK:
            break
    else:  # one leaf, the usual case for a small map
        return _node(tuple(keys), tuple(values), 0, _level(keys[-1]), n)
    levels = [_level(key) for key in keys]
    leaves: list[PMap[Any, Any]] = []
    start = 0
    for i, level in enumerate(levels):
        if level or i == n - 1:
            leaves.append(_node(tuple(keys[start:i + 1]), tuple(values[start:i + 1]), 0, level,
                                i + 1 - start))
            start = i + 1
    return _finish(leaves)


def _finish(nodes: list[PMap[Any, Any]]) -> PMap[Any, Any]:
    """The root over ``nodes`` (of one height, in order): group upwards, then drop lone roots."""
    if not nodes:
        return _EMPTY_MAP
    height = nodes[0]._h
    while len(nodes) > 1:
        height += 1
        nodes = _group(nodes, height)
    root = nodes[0]
    while root._h > 0:
        kids = root._kv()[1]
        if len(kids) != 1:
            break
        root = kids[0]
    return root


def _concat(a: PMap[Any, Any], b: PMap[Any, Any]) -> PMap[Any, Any]:
    """Join ``a`` (ending at a key that ends no node of its height) with ``b``, its right
    neighbour of the same height."""
    ak, av = a._kv()
    bk, bv = b._kv()
    if a._h == 0:
        return _node(ak + bk, av + bv, 0, b._lv, a._n + b._n)
    last = av[-1]
    if last._lv < a._h:  # a's last child is open too: join it with b's first child
        kids = av[:-1] + (_concat(last, bv[0]),) + bv[1:]
        keys = ak[:-1] + (bk[0],) + bk[1:]
    else:
        kids, keys = av + bv, ak + bk
    return _node(keys, kids, a._h, b._lv, a._n + b._n)


def _update_leaf(leaf: PMap[Any, Any], ikeys: list[Any], ivals: list[Any], lo: int,
                 hi: int) -> tuple[PMap[Any, Any], ...]:
    keys, vals = leaf._kv()
    n = len(keys)
    nk: list[Any] = []
    nv: list[Any] = []
    marks: dict[int, int] = {}  # position in nk -> level, where it may be nonzero
    i = 0
    changed = False
    for j in range(lo, hi):
        key, value = ikeys[j], ivals[j]
        p = bisect_left(keys, key, i)
        if p > i:
            nk.extend(keys[i:p])
            nv.extend(vals[i:p])
            if p == n:  # the old last key went by: it keeps its level
                marks[len(nk) - 1] = leaf._lv
        i = p
        if p < n and keys[p] == key:
            i = p + 1
            if value is DELETED:
                changed = True
                continue
            if vals[p] is not value:
                changed = True
            nk.append(key)
            nv.append(value)
            if p == n - 1:
                marks[len(nk) - 1] = leaf._lv
        elif value is not DELETED:
            changed = True
            nk.append(key)
            nv.append(value)
            level = _level(key)
            if level:
                marks[len(nk) - 1] = level
    if not changed:
        return (leaf,)
    if i < n:
        nk.extend(keys[i:])
        nv.extend(vals[i:])
        marks[len(nk) - 1] = leaf._lv
    out = []
    start = 0
    last = len(nk) - 1
    for p in sorted(marks):
        level = marks[p]
        if level or p == last:
            out.append(_node(tuple(nk[start:p + 1]), tuple(nv[start:p + 1]), 0, level, p + 1 - start))
            start = p + 1
    if start <= last:  # the rest ends at a key of level 0
        out.append(_node(tuple(nk[start:]), tuple(nv[start:]), 0, 0, last + 1 - start))
    return tuple(out)


def _update_node(node: PMap[Any, Any], ikeys: list[Any], ivals: list[Any], lo: int,
                 hi: int) -> tuple[PMap[Any, Any], ...]:
    """``node`` with the changes ``ikeys[lo:hi]`` (all in its key range): nodes of its height,
    each ended where a level allows but maybe the last (which the caller joins on)."""
    if node._h == 0:
        return _update_leaf(node, ikeys, ivals, lo, hi)
    keys, kids = node._kv()
    last = len(kids) - 1
    results: dict[int, tuple[PMap[Any, Any], ...]] = {}
    same_shape = True
    j = lo
    while j < hi:  # only the children that changes fall in are visited
        i = bisect_left(keys, ikeys[j])
        if i >= last:
            i, end = last, hi
        else:
            end = bisect_right(ikeys, keys[i], j, hi)
        kid = kids[i]
        frags = _update_node(kid, ikeys, ivals, j, end)
        j = end
        if len(frags) == 1 and frags[0] is kid:
            continue
        results[i] = frags
        if len(frags) != 1 or frags[0]._lv != kid._lv or frags[0]._lk != kid._lk:
            same_shape = False
    if not results:
        return (node,)
    if same_shape:  # every boundary stays: swap the changed children in
        new_kids = list(kids)
        size = node._n
        for i, frags in results.items():
            size += frags[0]._n - kids[i]._n
            new_kids[i] = frags[0]
        return (_node(keys, tuple(new_kids), node._h, node._lv, size),)
    height = node._h
    out: list[PMap[Any, Any]] = []
    pending: PMap[Any, Any] | None = None
    for i, kid in enumerate(kids):
        for frag in results.get(i, (kid,)):
            if pending is not None:
                frag, pending = _concat(pending, frag), None
            if frag._lv >= height:
                out.append(frag)
            else:
                pending = frag
    if pending is not None:
        out.append(pending)
    if not out:
        return ()
    return tuple(_group(out, height))


def update_map(base: PMap[Any, Any], changes: Mapping[Any, Any]) -> PMap[Any, Any]:
    """``base`` with ``changes`` applied: ``changes[key]`` is the new value, or :data:`DELETED`.

    Removing a missing key is a no-op; setting a key to the very object it holds changes
    nothing. Returns ``base`` itself when nothing changed. Costs the nodes the changed keys
    are in (one pass for all of them), never the whole map.

    Raises:
        TypeError: a key is not a string.
    """
    if not changes:
        return base
    try:
        ikeys = sorted(changes)
    except TypeError:
        bad = next(k for k in changes if not isinstance(k, str))
        raise _key_error(bad) from None
    if not isinstance(ikeys[0], str) or not isinstance(ikeys[-1], str):
        raise _key_error(ikeys[0] if not isinstance(ikeys[0], str) else ikeys[-1])
    ivals = list(map(changes.__getitem__, ikeys))
    frags = _update_node(base, ikeys, ivals, 0, len(ikeys))
    if len(frags) == 1 and frags[0] is base:
        return base
    return _finish(list(frags))


def map_of_dict(items: dict[str, Any]) -> PMap[Any, Any]:
    """A :class:`PMap` of a ``dict`` (values kept as they are).

    Raises:
        TypeError: a key is not a string.
    """
    if not items:
        return _EMPTY_MAP
    try:
        keys = sorted(items)
    except TypeError:
        raise _key_error(next(k for k in items if not isinstance(k, str))) from None
    if type(keys[0]) is not str and not isinstance(keys[0], str):
        raise _key_error(keys[0])
    return _build_map(keys, [items[k] for k in keys])


def pmap(initial: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None) -> PMap[Any, Any]:
    """A :class:`PMap` of ``initial`` (values kept as they are: see ``freeze`` for deep).

    >>> pmap({"b": 2, "a": 1})
    pmap({'a': 1, 'b': 2})
    """
    if not initial:
        return _EMPTY_MAP
    if isinstance(initial, PMap):
        return initial
    return map_of_dict(dict(initial.items() if isinstance(initial, Mapping) else initial))


class MapEvolver(Generic[K, V]):
    """Changes collected over a map; :meth:`persistent` makes the new map in one pass."""

    __slots__ = ("_base", "_changes")

    def __init__(self, base: PMap[K, V]) -> None:
        self._base = base
        self._changes: dict[Any, Any] = {}

    def __getitem__(self, key: K) -> V:
        value = self._changes.get(key, _ABSENT)
        if value is _ABSENT:
            return self._base[key]
        if value is DELETED:
            raise KeyError(key)
        return value  # type: ignore[no-any-return]

    def get(self, key: K, default: Any = None) -> Any:
        """The value of ``key`` with the changes so far, or ``default``."""
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: K, value: V) -> None:
        if not isinstance(key, str):
            raise _key_error(key)
        self._changes[key] = value

    def set(self, key: K, value: V) -> MapEvolver[K, V]:
        """Set ``key``; returns the evolver."""
        self[key] = value
        return self

    def __delitem__(self, key: K) -> None:
        if key not in self:
            raise KeyError(key)
        self._changes[key] = DELETED

    def remove(self, key: K) -> MapEvolver[K, V]:
        """Remove ``key`` (KeyError if missing); returns the evolver."""
        del self[key]
        return self

    def __contains__(self, key: object) -> bool:
        value = self._changes.get(key, _ABSENT)
        if value is _ABSENT:
            return key in self._base
        return value is not DELETED

    def __len__(self) -> int:
        return len(self.persistent())

    def is_dirty(self) -> bool:
        """Whether a change was made (even one that sets a key to its value)."""
        return bool(self._changes)

    def persistent(self) -> PMap[K, V]:
        """The map with the changes (the base itself if none changed anything)."""
        return update_map(self._base, self._changes)


# --- PVector -----------------------------------------------------------------------------------


class PVector(Sequence[T]):
    """A persistent vector with pyrsistent's API: a 32-way trie. Make one with :func:`pvector`.

    Each instance is also a node: a leaf holds up to 32 elements, an inner node up to 32
    nodes, all full but the last.
    """

    __slots__ = ("__weakref__", "_at", "_d", "_h", "_n", "_v")

    _v: tuple[Any, ...] | None  # leaf: elements; inner: children
    _n: int                     # elements below
    _h: int                     # height: 0 for a leaf
    _d: bytes | None
    _at: Loader | None

    def __init__(self) -> None:  # pragma: no cover
        raise TypeError("make a PVector with agentlog.folding.pvector(iterable) or freeze(list)")

    def _items(self) -> tuple[Any, ...]:
        v = self._v
        if v is None:
            at = self._at
            if at is None:  # pragma: no cover
                raise RuntimeError("an empty vector node has no loader")
            at.load(self)
            v = self._v
        return v  # type: ignore[return-value]

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def _at_index(self, i: int) -> Any:
        node = self
        h = node._h
        while h:
            items = node._v
            if items is None:
                items = node._items()
            node = items[(i >> (_BITS * h)) & _MASK]
            h -= 1
        items = node._v
        if items is None:
            items = node._items()
        return items[i & _MASK]

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> PVector[T]: ...

    def __getitem__(self, index: int | slice) -> T | PVector[T]:
        if isinstance(index, slice):
            return _build_vector(self.tolist()[index])
        n = self._n
        if type(index) is not int:
            index = index.__index__()
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("vector index out of range")
        if self._h == 0:
            return self._items()[index]  # type: ignore[no-any-return]
        return self._at_index(index)  # type: ignore[no-any-return]

    def _leaves(self) -> Iterator[tuple[Any, ...]]:
        if self._h == 0:
            yield self._items()
            return
        stack = [iter(self._items())]
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
            elif node._h == 0:
                yield node._items()
            else:
                stack.append(iter(node._items()))

    def __iter__(self) -> Iterator[T]:
        if self._h == 0:
            return iter(self._items())
        return (x for leaf in self._leaves() for x in leaf)

    def __reversed__(self) -> Iterator[T]:
        return reversed(self.tolist())

    def tolist(self) -> list[T]:
        """The elements as a list."""
        if self._h == 0:
            return list(self._items())
        out: list[T] = []
        for leaf in self._leaves():
            out.extend(leaf)
        return out

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """The first index of ``value``."""
        return self.tolist().index(value, start, self._n if stop is None else stop)

    def count(self, value: Any) -> int:
        """How many elements equal ``value``."""
        return self.tolist().count(value)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is PVector:
            if other._n != self._n:
                return False
            if self._d is not None and self._d == other._d:
                return True
            return all(a is b or a == b for a, b in zip(self, other))
        if isinstance(other, list):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, (PVector, list)):
            return NotImplemented
        return self.tolist() < list(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"pvector({self.tolist()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return pvector, (self.tolist(),)

    # -- making new vectors ---------------------------------------------------------------

    def append(self, value: T) -> PVector[T]:
        """A vector with ``value`` added at the end."""
        n = self._n
        if n == 0 or n == _WIDTH ** (self._h + 1):
            return _extend(self, (value,))
        return _append(self, value)

    def extend(self, values: Iterable[T]) -> PVector[T]:
        """A vector with ``values`` added at the end (this vector itself if there are none)."""
        items = values if isinstance(values, (list, tuple)) else list(values)
        return _extend(self, items) if items else self

    def __add__(self, other: Iterable[T]) -> PVector[T]:
        return self.extend(other)

    def set(self, index: int, value: T) -> PVector[T]:
        """A vector with element ``index`` set (``index == len``: appended)."""
        n = self._n
        if index < 0:
            index += n
        if index == n:
            return self.append(value)
        if not 0 <= index < n:
            raise IndexError(f"index {index} out of range")
        return _set_many(self, [(index, value)])

    def mset(self, *pairs: Any) -> PVector[T]:
        """``mset(i, v, j, w, ...)``: several elements set at once."""
        if len(pairs) % 2:
            raise TypeError("mset takes index, value pairs")
        vector = self
        for i, v in zip(pairs[::2], pairs[1::2]):
            vector = vector.set(i, v)
        return vector

    def delete(self, index: int, stop: int | None = None) -> PVector[T]:
        """A vector without element ``index`` (or ``index:stop``)."""
        items = self.tolist()
        if stop is None:
            del items[index]
        else:
            del items[index:stop]
        return _build_vector(items)

    def remove(self, value: Any) -> PVector[T]:
        """A vector without the first element equal to ``value`` (ValueError if none)."""
        items = self.tolist()
        items.remove(value)
        return _build_vector(items)

    def evolver(self) -> VectorEvolver[T]:
        """A mutable view that collects changes; ``persistent()`` makes the new vector."""
        return VectorEvolver(self)

    def transform(self, *transformations: Any) -> PVector[T]:
        """As :meth:`PMap.transform`, starting at this vector."""
        if len(transformations) % 2:
            raise TypeError("transform takes path, value pairs")
        result: Any = self
        for path, change in zip(transformations[::2], transformations[1::2]):
            result = _transform(result, tuple(path), change)
        return result  # type: ignore[no-any-return]


def _vnode(items: tuple[Any, ...], height: int, size: int) -> PVector[Any]:
    node: PVector[Any] = object.__new__(PVector)
    node._v, node._n, node._h = items, size, height
    node._d = node._at = None
    return node


def shell_vector(height: int, size: int, digest: bytes, at: Loader) -> PVector[Any]:
    """A vector node that fills its content from ``at`` on first use (for the store's loader)."""
    node: PVector[Any] = object.__new__(PVector)
    node._v = None
    node._n, node._h, node._d, node._at = size, height, digest, at
    return node


def fill_vector(node: PVector[Any], items: tuple[Any, ...]) -> None:
    """Give a shell its content (the loader calls this once it checked the digest)."""
    node._v = items


_EMPTY_VECTOR: PVector[Any] = _vnode((), 0, 0)


def _append(vector: PVector[Any], value: Any) -> PVector[Any]:
    """``vector`` (not full) with ``value`` after its last element: the right edge copied."""
    n = vector._n
    stack: list[tuple[PVector[Any], tuple[Any, ...], int]] = []
    node = vector
    while True:
        if node._h == 0:
            new = _vnode(node._items() + (value,), 0, node._n + 1)
            break
        items = node._items()
        i = (n >> (_BITS * node._h)) & _MASK
        stack.append((node, items, i))
        if i == len(items):  # a new right edge below here
            new = _vnode((value,), 0, 1)
            for h in range(1, node._h):
                new = _vnode((new,), h, 1)
            break
        node = items[i]
    for parent, items, i in reversed(stack):
        kids = items + (new,) if i == len(items) else items[:-1] + (new,)
        new = _vnode(kids, parent._h, parent._n + 1)
    return new


def _pack(nodes: list[PVector[Any]], height: int) -> list[PVector[Any]]:
    """Nodes of ``height`` over ``nodes`` (of ``height - 1``), 32 to a node."""
    return [_vnode(tuple(nodes[i:i + _WIDTH]), height, sum(n._n for n in nodes[i:i + _WIDTH]))
            for i in range(0, len(nodes), _WIDTH)]


def _build_vector(items: Sequence[Any]) -> PVector[Any]:
    n = len(items)
    if n == 0:
        return _EMPTY_VECTOR
    if n <= _WIDTH:
        return _vnode(tuple(items), 0, n)
    nodes = [_vnode(tuple(items[i:i + _WIDTH]), 0, min(_WIDTH, n - i)) for i in range(0, n, _WIDTH)]
    height = 0
    while len(nodes) > 1:
        height += 1
        nodes = _pack(nodes, height)
    return nodes[0]


def _push(node: PVector[Any], items: Sequence[Any]) -> list[PVector[Any]]:
    """``node`` (the right edge of its trie) followed by ``items``: nodes of its height."""
    if node._h == 0:
        merged = node._items() + tuple(items)
        return [_vnode(merged[i:i + _WIDTH], 0, min(_WIDTH, len(merged) - i))
                for i in range(0, len(merged), _WIDTH)]
    kids = node._items()
    last = kids[-1]
    if last._n == _WIDTH ** last._h * _WIDTH:  # the last child is full: start new ones
        fresh = _build_level(items, node._h - 1)
        nodes = list(kids) + fresh
    else:
        nodes = list(kids[:-1]) + _push(last, items)
    return _pack(nodes, node._h)


def _build_level(items: Sequence[Any], height: int) -> list[PVector[Any]]:
    """``items`` as full nodes of ``height`` (the last maybe not full)."""
    nodes = [_vnode(tuple(items[i:i + _WIDTH]), 0, min(_WIDTH, len(items) - i))
             for i in range(0, len(items), _WIDTH)]
    for h in range(1, height + 1):
        nodes = _pack(nodes, h)
    return nodes


def _extend(vector: PVector[Any], items: Sequence[Any]) -> PVector[Any]:
    if vector._n == 0:
        return _build_vector(items)
    if vector._n == _WIDTH ** (vector._h + 1):  # full: the trie grows a level
        nodes = [vector] + _build_level(items, vector._h)
    else:
        nodes = _push(vector, items)
    height = vector._h
    while len(nodes) > 1:
        height += 1
        nodes = _pack(nodes, height)
    return nodes[0]


def _set_many(node: PVector[Any], sets: list[tuple[int, Any]]) -> PVector[Any]:
    """``node`` with the (sorted, in range, relative) ``sets`` applied; itself if all are the
    objects already there."""
    items = node._items()
    if node._h == 0:
        new = list(items)
        changed = False
        for i, value in sets:
            if new[i] is not value:
                new[i] = value
                changed = True
        return _vnode(tuple(new), 0, node._n) if changed else node
    shift = _BITS * node._h
    span = 1 << shift
    kids = list(items)
    changed = False
    start = 0
    while start < len(sets):
        child = sets[start][0] >> shift
        end = start
        while end < len(sets) and sets[end][0] >> shift == child:
            end += 1
        base = child * span
        new_kid = _set_many(kids[child], [(i - base, v) for i, v in sets[start:end]])
        if new_kid is not kids[child]:
            kids[child] = new_kid
            changed = True
        start = end
    return _vnode(tuple(kids), node._h, node._n) if changed else node


def pvector(iterable: Iterable[Any] = ()) -> PVector[Any]:
    """A :class:`PVector` of the elements (kept as they are: see ``freeze`` for deep).

    >>> pvector("ab")
    pvector(['a', 'b'])
    """
    if isinstance(iterable, PVector):
        return iterable
    return _build_vector(iterable if isinstance(iterable, (list, tuple)) else list(iterable))


class VectorEvolver(Generic[T]):
    """Changes collected over a vector; :meth:`persistent` makes the new vector.

    Setting elements and appending cost O(1) each and are applied in one pass; an insert or
    a delete before the end works on a list copy (O(n), as for any array).
    """

    __slots__ = ("_base", "_extra", "_list", "_sets")

    def __init__(self, base: PVector[T]) -> None:
        self._base = base
        self._sets: dict[int, Any] = {}
        self._extra: list[Any] = []
        self._list: list[Any] | None = None

    def __len__(self) -> int:
        if self._list is not None:
            return len(self._list)
        return self._base._n + len(self._extra)

    def __getitem__(self, index: int) -> T:
        if self._list is not None:
            return self._list[index]  # type: ignore[no-any-return]
        n = self._base._n
        if index < 0:
            index += n + len(self._extra)
        if index >= n:
            return self._extra[index - n]  # type: ignore[no-any-return]
        value = self._sets.get(index, _ABSENT)
        return self._base[index] if value is _ABSENT else value

    def __setitem__(self, index: int, value: T) -> None:
        if self._list is not None:
            self._list[index] = value
            return
        n = self._base._n
        size = n + len(self._extra)
        if index < 0:
            index += size
        if index == size:
            self._extra.append(value)
        elif not 0 <= index < size:
            raise IndexError(f"index {index} out of range")
        elif index >= n:
            self._extra[index - n] = value
        else:
            self._sets[index] = value

    def set(self, index: int, value: T) -> VectorEvolver[T]:
        """Set element ``index``; returns the evolver."""
        self[index] = value
        return self

    def append(self, value: T) -> VectorEvolver[T]:
        """Add ``value`` at the end; returns the evolver."""
        if self._list is not None:
            self._list.append(value)
        else:
            self._extra.append(value)
        return self

    def extend(self, values: Iterable[T]) -> VectorEvolver[T]:
        """Add ``values`` at the end; returns the evolver."""
        (self._list if self._list is not None else self._extra).extend(values)
        return self

    def _as_list(self) -> list[Any]:
        if self._list is None:
            items = self._base.tolist()
            for i, value in self._sets.items():
                items[i] = value
            items.extend(self._extra)
            self._list = items
        return self._list

    def insert(self, index: int, value: T) -> VectorEvolver[T]:
        """Insert ``value`` before ``index`` (O(n)); returns the evolver."""
        if index == len(self):
            return self.append(value)
        self._as_list().insert(index, value)
        return self

    def __delitem__(self, index: int) -> None:
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError(f"index {index} out of range")
        if self._list is None and self._extra and index == size - 1:
            self._extra.pop()
            return
        del self._as_list()[index]

    def delete(self, index: int) -> VectorEvolver[T]:
        """Delete element ``index``; returns the evolver."""
        del self[index]
        return self

    def is_dirty(self) -> bool:
        """Whether a change was made."""
        return self._list is not None or bool(self._sets) or bool(self._extra)

    def persistent(self) -> PVector[T]:
        """The vector with the changes (the base itself if there were none)."""
        if self._list is not None:
            items = self._list
            base = self._base
            if len(items) == base._n and all(a is b for a, b in zip(items, base)):
                return base
            return _build_vector(items)
        vector = self._base
        if self._sets:
            vector = _set_many(vector, sorted(self._sets.items()))
        if self._extra:
            vector = _extend(vector, self._extra)
        return vector


# --- structure-aware comparisons (diff_states uses them) ---------------------------------------


def vector_prefix(a: PVector[Any], b: PVector[Any]) -> int:
    """How many leading elements ``a`` and ``b`` share as the same objects, skipping whole
    subtrees that are the same node (or have the same digest).

    >>> v = pvector(range(100)); vector_prefix(v, v.set(70, -1))
    70
    """
    if a._h != b._h:
        return _flat_prefix(a, b, 0)
    return _node_prefix(a, b, 0, min(a._n, b._n))


def _same(a: Any, b: Any) -> bool:
    return a is b or (a._d is not None and a._d == b._d)


def _node_prefix(a: PVector[Any], b: PVector[Any], base: int, limit: int) -> int:
    if _same(a, b):
        return base + min(a._n, b._n)
    ia, ib = a._items(), b._items()
    if a._h == 0:
        for i, (x, y) in enumerate(zip(ia, ib)):
            if x is not y:
                return base + i
        return base + min(len(ia), len(ib))
    span = _WIDTH ** a._h
    for i, (x, y) in enumerate(zip(ia, ib)):
        if not _same(x, y):
            return _node_prefix(x, y, base + i * span, limit)
    return int(min(limit, base + min(len(ia), len(ib)) * span))


def _flat_prefix(a: PVector[Any], b: PVector[Any], start: int) -> int:
    n = min(a._n, b._n)
    for i, (x, y) in enumerate(zip(a, b)):
        if x is not y:
            return i
    return n


def map_changed_keys(a: PMap[Any, Any], b: PMap[Any, Any]) -> list[Any]:
    """The keys whose entries differ between ``a`` and ``b`` (missing on one side, or not the
    same object), in key order, skipping every subtree that is the same node or has the same
    digest on both sides. Costs the nodes that differ, not the size of the maps.

    >>> a = pmap({f"k{i}": i for i in range(1000)})
    >>> map_changed_keys(a, a.set("k7", -1).remove("k9").set("new", 0))
    ['k7', 'k9', 'new']
    """
    if not a._n or not b._n:
        return list(a) + list(b)  # one side is empty: every key of the other
    out: list[Any] = []
    _diff_seqs([a], [b], out)
    return out


def _diff_seqs(xs: list[PMap[Any, Any]], ys: list[PMap[Any, Any]], out: list[Any]) -> None:
    """Nodes ``xs`` and ``ys`` cover the same key range, in order: add the keys that differ."""
    while xs and ys and xs[0]._h != ys[0]._h:  # bring both to one height
        if xs[0]._h > ys[0]._h:
            xs = [kid for x in xs for kid in x._kv()[1]]
        else:
            ys = [kid for y in ys for kid in y._kv()[1]]
    i = j = 0
    nx, ny = len(xs), len(ys)
    while i < nx or j < ny:
        if i < nx and j < ny and xs[i]._lk == ys[j]._lk:
            _diff_pair(xs[i], ys[j], out)
            i += 1
            j += 1
            continue
        # a stretch where the two sides end their nodes at different keys: take nodes from
        # the side that ends first until both end at one key (or a side runs out)
        gx: list[PMap[Any, Any]] = []
        gy: list[PMap[Any, Any]] = []
        if i < nx:
            gx.append(xs[i])
            i += 1
        if j < ny:
            gy.append(ys[j])
            j += 1
        while gx and gy and gx[-1]._lk != gy[-1]._lk:
            if gx[-1]._lk < gy[-1]._lk:
                if i == nx:
                    break
                gx.append(xs[i])
                i += 1
            else:
                if j == ny:
                    break
                gy.append(ys[j])
                j += 1
        if i == nx:  # x has nothing further: the rest of y belongs to this stretch
            gy.extend(ys[j:])
            j = ny
        if j == ny:
            gx.extend(xs[i:])
            i = nx
        if (gx or gy)[0]._h == 0:
            _diff_entries(gx, gy, out)
        else:
            _diff_seqs([k for x in gx for k in x._kv()[1]], [k for y in gy for k in y._kv()[1]], out)


def _diff_pair(x: PMap[Any, Any], y: PMap[Any, Any], out: list[Any]) -> None:
    if _same(x, y):
        return
    if x._h == 0:
        _diff_entries([x], [y], out)
    else:
        _diff_seqs(list(x._kv()[1]), list(y._kv()[1]), out)


def _diff_entries(xs: list[PMap[Any, Any]], ys: list[PMap[Any, Any]], out: list[Any]) -> None:
    ka = [k for x in xs for k in x._kv()[0]]
    va = [v for x in xs for v in x._v]  # type: ignore[union-attr]
    kb = [k for y in ys for k in y._kv()[0]]
    vb = [v for y in ys for v in y._v]  # type: ignore[union-attr]
    i = j = 0
    while i < len(ka) and j < len(kb):
        a, b = ka[i], kb[j]
        if a == b:
            if va[i] is not vb[j]:
                out.append(a)
            i += 1
            j += 1
        elif a < b:
            out.append(a)
            i += 1
        else:
            out.append(b)
            j += 1
    out.extend(ka[i:])
    out.extend(kb[j:])
