"""agentlog's persistent map and vector, against plain dicts and lists.

The properties: every operation gives what the same operation on a dict or list gives; the
input is never changed; a map's shape depends only on its keys (so the same content has the
same nodes in every process and in whatever order it was made); vectors are full tries but for
their right edge; untouched subtrees are shared.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.folding.persistent import (
    DELETED,
    PMap,
    PVector,
    _level,
    map_changed_keys,
    pmap,
    pvector,
    update_map,
    vector_prefix,
)

keys = st.text(alphabet="abcdefghij", min_size=1, max_size=4)
small_maps = st.dictionaries(keys, st.integers(), max_size=200)


def shape(node: Any) -> Any:
    """A map's tree as nested tuples of keys: two maps with one shape are built alike."""
    if node._h == 0:
        return ("leaf", node._k)
    return ("node", node._h, tuple(shape(kid) for kid in node._v))


def check_map(m: PMap[Any, Any]) -> None:
    """The invariants of a map's tree (all its nodes)."""
    items = list(m.iteritems())
    assert [k for k, _ in items] == sorted(k for k, _ in items)
    assert len(items) == len(m)
    # the shape is the one built from scratch: it depends only on the keys
    assert shape(m) == shape(pmap(dict(items)))

    def walk(node: Any) -> None:
        assert node._lk == (node._k[-1] if node._k else None)
        if node._h == 0:
            assert node._n == len(node._k)
            inner = node._k[:-1]
            assert all(_level(k) == 0 for k in inner), "a leaf holds a key that ends a leaf"
            if node._k:
                assert node._lv == _level(node._k[-1])
            return
        assert node._n == sum(kid._n for kid in node._v)
        assert node._k == tuple(kid._lk for kid in node._v)
        for kid in node._v:
            assert kid._h == node._h - 1
            walk(kid)

    walk(m)


@settings(max_examples=150, deadline=None)
@given(small_maps, st.lists(st.tuples(keys, st.one_of(st.none(), st.integers())), max_size=60))
def test_updates_match_a_dict(start: dict[str, int], changes: list[tuple[str, int | None]]) -> None:
    m = pmap(start)
    expected = dict(start)
    batch: dict[str, Any] = {}
    for key, value in changes:
        if value is None:
            expected.pop(key, None)
            batch[key] = DELETED
        else:
            expected[key] = value
            batch[key] = value
    one_by_one = m
    for key, value in changes:
        one_by_one = one_by_one.discard(key) if value is None else one_by_one.set(key, value)
    at_once = update_map(m, batch)
    for result in (one_by_one, at_once):
        assert dict(result.iteritems()) == expected
        check_map(result)
    assert dict(m.iteritems()) == start  # unchanged
    assert sorted(map_changed_keys(m, at_once)) == sorted(
        k for k in set(start) | set(expected) if start.get(k, "-") != expected.get(k, "-")
        or (k in start) != (k in expected))


@settings(max_examples=60, deadline=None)
@given(st.lists(keys, unique=True, max_size=300), st.randoms(use_true_random=False))
def test_the_shape_does_not_depend_on_history(names: list[str], rnd: Any) -> None:
    forwards = pmap()
    for name in names:
        forwards = forwards.set(name, 1)
    shuffled = list(names)
    rnd.shuffle(shuffled)
    backwards = pmap({name: 1 for name in names + ["zz-extra"]}).remove("zz-extra")
    for name in shuffled[: len(shuffled) // 2]:
        backwards = backwards.remove(name).set(name, 1)
    assert shape(forwards) == shape(backwards) == shape(pmap({n: 1 for n in names}))


def test_big_maps_share_untouched_nodes() -> None:
    m = pmap({f"n{i}": i for i in range(20_000)})
    assert m._h >= 2
    n = m.set("n123", -1)
    shared = sum(1 for a, b in zip(m._v, n._v) if a is b)
    assert shared == len(m._v) - 1  # only the child that holds n123 was copied
    assert map_changed_keys(m, n) == ["n123"]
    assert m.set("n123", m["n123"]) is m and m.discard("nope") is m


def test_map_api() -> None:
    m = pmap({"a": 1, "b": 2})
    assert m == {"a": 1, "b": 2} and {"a": 1, "b": 2} == m and m != {"a": 1}
    assert list(m) == ["a", "b"] and list(m.keys()) == ["a", "b"] and list(m.values()) == [1, 2]
    assert list(m.items()) == [("a", 1), ("b", 2)] and ("a", 1) in m.items()
    assert m.get("c", 0) == 0 and m.get(3) is None and 3 not in m and "a" in m
    assert m.update({"c": 3}, {"a": 0}) == {"a": 0, "b": 2, "c": 3}
    assert m.update_with(lambda x, y: x + y, {"a": 10}) == {"a": 11, "b": 2}
    ev = m.evolver()
    ev["c"] = 3
    del ev["a"]
    assert ev.is_dirty() and "a" not in ev and ev["c"] == 3
    assert ev.persistent() == {"b": 2, "c": 3} and m == {"a": 1, "b": 2}
    with pytest.raises(KeyError):
        m.remove("zz")
    with pytest.raises(KeyError):
        m["zz"]
    with pytest.raises(TypeError, match="state map keys are strings"):
        m.set(1, 2)  # type: ignore[arg-type]
    assert hash(m) == hash(pmap({"b": 2, "a": 1}))
    assert pickle.loads(pickle.dumps(m)) == m
    assert repr(pmap()) == "pmap({})"
    assert m.transform(("x", "y"), 5) == {"a": 1, "b": 2, "x": {"y": 5}}
    assert pmap({"v": pvector([1, 2])}).transform(("v", 1), lambda n: n * 10)["v"] == [1, 20]


def vector_ok(v: PVector[Any]) -> None:
    """Full but for the right edge; sizes add up."""
    def walk(node: Any, rightmost: bool) -> None:
        if node._h == 0:
            assert len(node._v) == node._n <= 32
            assert rightmost or node._n == 32
            return
        assert node._n == sum(kid._n for kid in node._v) and len(node._v) <= 32
        for i, kid in enumerate(node._v):
            assert kid._h == node._h - 1
            walk(kid, rightmost and i == len(node._v) - 1)
        assert rightmost or node._n == 32 ** (node._h + 1)
    walk(v, True)


ops = st.one_of(
    st.tuples(st.just("append"), st.integers()),
    st.tuples(st.just("extend"), st.lists(st.integers(), max_size=80)),
    st.tuples(st.just("set"), st.integers(min_value=0, max_value=5000), st.integers()),
    st.tuples(st.just("delete"), st.integers(min_value=0, max_value=5000)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(), max_size=1200), st.lists(ops, max_size=30))
def test_vector_operations_match_a_list(start: list[int], steps: list[Any]) -> None:
    v = pvector(start)
    expected = list(start)
    ev = v.evolver()
    for step in steps:
        kind = step[0]
        if kind == "append":
            v, _ = v.append(step[1]), expected.append(step[1])
            ev.append(step[1])
        elif kind == "extend":
            v, _ = v.extend(step[1]), expected.extend(step[1])
            ev.extend(step[1])
        elif kind == "set" and expected:
            i = step[1] % len(expected)
            expected[i] = step[2]
            v = v.set(i, step[2])
            ev[i] = step[2]
        elif kind == "delete" and expected:
            i = step[1] % len(expected)
            del expected[i]
            v = v.delete(i)
            del ev[i]
        vector_ok(v)
        assert v.tolist() == expected and len(v) == len(expected)
    assert ev.persistent().tolist() == expected
    vector_ok(ev.persistent())
    assert list(pvector(start)) == start
    if expected:
        assert v[-1] == expected[-1] and v[len(expected) // 2] == expected[len(expected) // 2]


def test_vector_api_and_sharing() -> None:
    v = pvector(range(5000))
    w = v.set(4000, -1)
    assert vector_prefix(v, w) == 4000 and vector_prefix(v, v) == 5000
    assert vector_prefix(v, v.append(1)) == 5000
    assert v == list(range(5000)) and v != tuple(range(5000)) and v == pvector(range(5000))
    assert v[10:13] == [10, 11, 12] and isinstance(v[10:13], PVector)
    assert v.index(7) == 7 and v.count(7) == 1 and v.remove(0)[0] == 1
    assert pickle.loads(pickle.dumps(w)) == w and hash(pvector([1])) == hash(pvector([1]))
    assert v.extend([]) is v and v.evolver().persistent() is v
    with pytest.raises(IndexError):
        v[5000]
    # the 31 full leaves before the last are the very same objects after an append
    u = v.append(5000)
    assert all(a is b for a, b in zip(v._v[:-1], u._v[:-1]))
