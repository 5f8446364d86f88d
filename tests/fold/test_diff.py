"""diff_states and the Patch value."""

from __future__ import annotations

from typing import Any

import pytest
from pyrsistent import pmap

from agentlog.events import Event
from agentlog.fold import Patch, apply_patch, diff_states, fold, freeze, same_value, thaw
from agentlog.fold import diff as diff_module


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
        {"op": "replace", "path": "/change", "value": 2, "old": 1},
        {"op": "remove", "path": "/gone", "old": a["gone"]},
        {"op": "replace", "path": "/nested/b", "value": 3, "old": 2},
        {"op": "add", "path": "/new", "value": b["new"]},
    ]


def test_types_are_compared_strictly() -> None:
    a = freeze({"i": 1, "t": True, "l": [1], "o": {}})
    b = freeze({"i": 1.0, "t": 1, "l": {}, "o": []})
    patch = roundtrip(a, b)
    assert sorted(op["path"] for op in patch) == ["/i", "/l", "/o", "/t"]
    assert all(op["op"] == "replace" for op in patch)


def test_root_of_different_types_is_replaced() -> None:
    patch = roundtrip(freeze({"a": 1}), freeze([1]))
    assert [dict(op) for op in patch] == [
        {"op": "replace", "path": "", "value": freeze([1]), "old": freeze({"a": 1})}]


def test_one_append_is_one_add() -> None:
    items = freeze([{"m": i} for i in range(100)])
    patch = roundtrip(items, items.append(freeze({"m": 100})))
    assert [dict(op) for op in patch] == [{"op": "add", "path": "/-", "value": freeze({"m": 100})}]


def test_removal_from_the_end_goes_from_the_highest_index() -> None:
    items = freeze(list(range(10)))
    patch = roundtrip(items, freeze(list(range(7))))
    assert [op["path"] for op in patch] == ["/9", "/8", "/7"]
    assert [op["old"] for op in patch] == [9, 8, 7]


def test_insert_in_the_middle_is_an_indexed_add() -> None:
    items = freeze(list(range(10)))
    patch = roundtrip(items, freeze([0, 1, 2, "x", 3, 4, 5, 6, 7, 8, 9]))
    assert [dict(op) for op in patch] == [{"op": "add", "path": "/3", "value": "x"}]


def test_edited_element_is_diffed_into() -> None:
    a = freeze([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    b = a.set(1, a[1].set("content", "hello"))
    patch = roundtrip(a, b)
    assert [dict(op) for op in patch] == [
        {"op": "replace", "path": "/1/content", "value": "hello", "old": "yo"}]


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


def test_nearby_fold_states_diff_without_scanning_big_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    """States one event apart: the fold's notes name the changed keys (no bucket scan)."""
    start = freeze({"vars": {f"k{i}": i for i in range(5000)}})
    state = fold([Event(seq=0, type="state.patch", payload={"ops": [
        {"op": "replace", "path": "/k42", "value": -1}]})], initial=start)

    def no_scan(a: Any, b: Any) -> None:
        raise AssertionError("scanned every bucket")

    monkeypatch.setattr(diff_module, "_bucket_keys", no_scan)
    patch = diff_states(start, state)
    assert [dict(op) for op in patch] == [
        {"op": "replace", "path": "/vars/k42", "value": -1, "old": 42}]
    assert [op["path"] for op in diff_states(state, start)] == ["/vars/k42"]


def test_unrelated_maps_use_the_bucket_scan() -> None:
    a = freeze({f"k{i}": i for i in range(5000)})
    b = a.set("k1", -1).remove("k2").set("new", 0)  # made by pyrsistent: no notes
    patch = roundtrip(a, b)
    assert [op["path"] for op in patch] == ["/k1", "/k2", "/new"]


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


def test_patch_html_escapes_everything() -> None:
    patch = Patch([{"op": "add", "path": "/<b>", "value": "<script>alert('x')</script>"},
                   {"op": "replace", "path": "/a&b", "value": 1, "old": "<i>"}])
    html = patch._repr_html_()
    assert "<script>" not in html and "<b>" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "<code>/&lt;b&gt;</code>" in html and "/a&amp;b" in html
    assert "Patch · 2 ops" in html
    assert html.count("<tr") == 2


def test_patch_html_is_cut_past_200_rows() -> None:
    patch = Patch([{"op": "add", "path": f"/k{i}", "value": i} for i in range(250)])
    html = patch._repr_html_()
    assert html.count('<tr class="al-add">') == 200
    assert "… 50 more" in html


def test_patch_value() -> None:
    patch = Patch([{"op": "replace", "path": "/a", "value": 2, "old": 1},
                   {"op": "move", "from": "/b", "path": "/c"},
                   {"op": "test", "path": "/d", "value": 1}])
    assert patch.paths == ("/a", "/b", "/c")
    assert len(patch) == 3 and patch[0]["old"] == 1
    assert isinstance(patch[1:], Patch) and len(patch[1:]) == 2
    with pytest.raises(TypeError):
        patch[0]["op"] = "remove"  # type: ignore[index]
    assert patch == [{"op": "replace", "path": "/a", "value": 2, "old": 1},
                     {"op": "move", "from": "/b", "path": "/c"},
                     {"op": "test", "path": "/d", "value": 1}]
    assert patch != patch[:2]
    assert repr(patch) == "<Patch 3 ops: /a, /b, /c>"
    assert (patch[:1] + patch[1:]) == patch
    assert patch.to_json()[0] == {"op": "replace", "path": "/a", "value": 2, "old": 1}
    with pytest.raises(TypeError, match="op 0"):
        Patch([{"path": "/x"}])


def test_patch_to_json_thaws_values() -> None:
    patch = diff_states(freeze({}), freeze({"a": {"b": [1]}}))
    assert patch.to_json() == [{"op": "add", "path": "/a", "value": {"b": [1]}}]
    assert type(patch.to_json()[0]["value"]) is dict
    assert thaw(patch[0]["value"]) == {"b": [1]}
