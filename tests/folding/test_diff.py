"""diff_states and the Patch value."""

from __future__ import annotations

from typing import Any

import pytest

from agentlog.events import Event
from agentlog.folding import (
    NO_VALUE,
    Change,
    Patch,
    apply_patch,
    diff_states,
    fold,
    freeze,
    persistent,
    pmap,
    same_value,
    thaw,
)


def roundtrip(a: Any, b: Any) -> Patch:
    patch = diff_states(a, b)
    assert same_value(apply_patch(a, patch), b)
    return patch


def test_identical_states_give_an_empty_patch() -> None:
    a = freeze({"x": [1, {"y": 2}]})
    assert diff_states(a, a) == Patch([]) == []
    assert diff_states(a, freeze({"x": [1, {"y": 2}]})) == []
    assert not diff_states(a, a)


def test_map_changes() -> None:
    a = freeze({"keep": {"deep": 1}, "change": 1, "gone": [1], "nested": {"a": 1, "b": 2}})
    b = a.discard("gone").set("change", 2).set("new", {"n": 1}).set(
        "nested", a["nested"].set("b", 3))
    patch = roundtrip(a, b)
    assert [dict(op) for op in patch] == [
        {"op": "replace", "path": "/change", "value": 2},
        {"op": "remove", "path": "/gone"},
        {"op": "replace", "path": "/nested/b", "value": 3},
        {"op": "add", "path": "/new", "value": b["new"]},
    ]
    assert [c.old for c in patch.changes] == [1, a["gone"], 2, NO_VALUE]


def test_ops_are_exactly_rfc_6902() -> None:
    """Only the members RFC 6902 defines for each op: the old value is beside it, not in it."""
    a = freeze({"x": [1, 2, 3], "y": {"z": 1}, "w": 0})
    b = freeze({"x": [1, 9], "y": {"q": 2}, "v": 0})
    allowed = {"add": {"op", "path", "value"}, "remove": {"op", "path"},
               "replace": {"op", "path", "value"}}
    patch = roundtrip(a, b)
    assert patch and all(set(op) == allowed[op["op"]] for op in patch)
    assert all(c.op is op for c, op in zip(patch.changes, patch, strict=True))


def test_types_are_compared_strictly() -> None:
    a = freeze({"i": 1, "t": True, "l": [1], "o": {}})
    b = freeze({"i": 1.0, "t": 1, "l": {}, "o": []})
    patch = roundtrip(a, b)
    assert sorted(op["path"] for op in patch) == ["/i", "/l", "/o", "/t"]
    assert all(op["op"] == "replace" for op in patch)


def test_root_of_different_types_is_replaced() -> None:
    patch = roundtrip(freeze({"a": 1}), freeze([1]))
    assert [dict(op) for op in patch] == [{"op": "replace", "path": "", "value": freeze([1])}]
    assert patch.changes[0].old == freeze({"a": 1})


def test_one_append_is_one_add() -> None:
    items = freeze([{"m": i} for i in range(100)])
    patch = roundtrip(items, items.append(freeze({"m": 100})))
    assert [dict(op) for op in patch] == [{"op": "add", "path": "/-", "value": freeze({"m": 100})}]


def test_removal_from_the_end_goes_from_the_highest_index() -> None:
    items = freeze(list(range(10)))
    patch = roundtrip(items, freeze(list(range(7))))
    assert [op["path"] for op in patch] == ["/9", "/8", "/7"]
    assert [c.old for c in patch.changes] == [9, 8, 7]


def test_insert_in_the_middle_is_an_indexed_add() -> None:
    items = freeze(list(range(10)))
    patch = roundtrip(items, freeze([0, 1, 2, "x", 3, 4, 5, 6, 7, 8, 9]))
    assert [dict(op) for op in patch] == [{"op": "add", "path": "/3", "value": "x"}]


def test_edited_element_is_diffed_into() -> None:
    a = freeze([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    b = a.set(1, a[1].set("content", "hello"))
    patch = roundtrip(a, b)
    assert [dict(op) for op in patch] == [{"op": "replace", "path": "/1/content", "value": "hello"}]
    assert patch.changes[0].old == "yo"


def test_lcs_middles() -> None:
    a = freeze(["a", "b", "c", "d", "e", "f"])
    b = freeze(["a", "x", "c", "e", "y", "z", "f"])
    patch = roundtrip(a, b)
    assert len(patch) <= 4  # b→x, remove d, add y, add z
    long_a = freeze(list(range(200)))
    long_b = freeze(list(reversed(range(200))))
    roundtrip(long_a, long_b)  # beyond the LCS limit: pairwise, still exact


def test_escaped_keys_in_paths() -> None:
    patch = roundtrip(freeze({"a/b": 1, "~": 2}), freeze({"a/b": 2, "~": 3}))
    assert sorted(op["path"] for op in patch) == ["/a~1b", "/~0"]


def test_same_subtrees_are_not_descended() -> None:
    class Exploding(dict):  # type: ignore[type-arg]
        def items(self):  # type: ignore[no-untyped-def]
            raise AssertionError("descended into a shared subtree")

    shared = Exploding(x=1)
    a = pmap({"shared": shared, "n": 1})
    b = a.set("n", 2)
    assert [op["path"] for op in diff_states(a, b)] == ["/n"]


def entries_looked_at(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the map entries diff_states compares one by one (in the nodes that differ)."""
    seen: list[int] = []
    real = persistent._diff_entries

    def counting(xs: Any, ys: Any, out: Any) -> None:
        seen.append(sum(len(x) for x in xs) + sum(len(y) for y in ys))
        real(xs, ys, out)

    monkeypatch.setattr(persistent, "_diff_entries", counting)
    return seen


def test_nearby_fold_states_diff_without_scanning_big_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    """States one event apart: only the nodes that hold the changed key are compared."""
    start = freeze({"vars": {f"k{i}": i for i in range(5000)}})
    state = fold([Event(seq=0, type="state.patch", payload={"ops": [
        {"op": "replace", "path": "/k42", "value": -1}]})], initial=start)
    seen = entries_looked_at(monkeypatch)
    patch = diff_states(start, state)
    assert [dict(op) for op in patch] == [{"op": "replace", "path": "/vars/k42", "value": -1}]
    assert patch.changes[0].old == 42
    assert [op["path"] for op in diff_states(state, start)] == ["/vars/k42"]
    assert 0 < sum(seen) < 400  # a leaf or two of 5,000 keys


def test_maps_made_apart_diff_by_their_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Maps made outside any fold share the untouched nodes too; two maps built apart with the
    same keys have the same shape, so only the nodes whose entries differ are compared."""
    a = freeze({f"k{i}": i for i in range(5000)})
    b = a.set("k1", -1).remove("k2").set("new", 0)
    seen = entries_looked_at(monkeypatch)
    patch = roundtrip(a, b)
    assert [op["path"] for op in patch] == ["/k1", "/k2", "/new"]
    assert sum(seen) < 600
    built_apart = freeze({**{f"k{i}": i for i in range(5000)}, "k1": -1})
    assert [op["path"] for op in diff_states(a, built_apart)] == ["/k1"]


def test_patch_text() -> None:
    a = freeze({"vars": {"x": 1, "y": 3}, "usage": {"llm_calls": 2}, "log": []})
    b = freeze({"vars": {"x": 1, "z": "<script>alert(1)</script>" * 5}, "usage": {"llm_calls": 3},
                "log": ["a"]})
    assert str(diff_states(a, b)) == (
        '+ /log/- = "a"\n'
        "~ /usage/llm_calls: 2 → 3\n"
        "- /vars/y (was 3)\n"
        '+ /vars/z = "<script>alert(1)</script><script>alert(1)</script><script>… (127 chars)')
    assert str(Patch([])) == "(no changes)"
    assert str(Patch([{"op": "move", "from": "/a", "path": "/b"},
                      {"op": "copy", "from": "/a", "path": "/c"},
                      {"op": "test", "path": "/d", "value": None},
                      {"op": "remove", "path": "/e"}])) == (
        "→ /b (moved from /a)\n+ /c (copied from /a)\n? /d == null\n- /e")


def test_the_fold_renders_no_html() -> None:
    assert not hasattr(Patch([]), "_repr_html_")


def test_patch_value() -> None:
    patch = Patch([Change({"op": "replace", "path": "/a", "value": 2}, old=1),
                   {"op": "move", "from": "/b", "path": "/c"},
                   {"op": "test", "path": "/d", "value": 1}])
    assert patch.paths == ("/a", "/b", "/c")
    assert len(patch) == 3 and patch.changes[0].old == 1 and "old" not in patch[0]
    assert patch.changes[1:] == (Change(patch[1]), Change(patch[2]))
    assert str(patch).splitlines()[0] == "~ /a: 1 → 2"
    assert isinstance(patch[1:], Patch) and len(patch[1:]) == 2
    with pytest.raises(TypeError):
        patch[0]["op"] = "remove"  # type: ignore[index]
    assert patch == [{"op": "replace", "path": "/a", "value": 2},
                     {"op": "move", "from": "/b", "path": "/c"},
                     {"op": "test", "path": "/d", "value": 1}]
    assert patch != patch[:2]
    assert repr(patch) == "<Patch 3 ops: /a, /b, /c>"
    assert (patch[:1] + patch[1:]) == patch
    assert patch != Patch(list(patch))  # the same ops, but the old value is not known
    assert patch.to_json()[0] == {"op": "replace", "path": "/a", "value": 2}
    with pytest.raises(TypeError, match="op 0"):
        Patch([{"path": "/x"}])


def test_patch_to_json_thaws_values() -> None:
    patch = diff_states(freeze({}), freeze({"a": {"b": [1]}}))
    assert patch.to_json() == [{"op": "add", "path": "/a", "value": {"b": [1]}}]
    assert type(patch.to_json()[0]["value"]) is dict
    assert thaw(patch[0]["value"]) == {"b": [1]}
