"""apply_patch: RFC 6902 conformance, errors, persistence and structural sharing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentlog.errors import FoldError, PatchError, PatchTestError
from agentlog.events import BlobRef
from agentlog.folding import apply_patch, freeze, json_equal, parse_pointer, pmap, pvector, same_value, thaw
from agentlog.folding._transient import PatchOp, PatchPayload

DATA = Path(__file__).parent / "data" / "json-patch-tests"


def _cases() -> list[Any]:
    params = []
    for name in ("tests.json", "spec_tests.json"):
        for i, case in enumerate(json.loads((DATA / name).read_text())):
            if case.get("disabled") or "patch" not in case:
                continue
            label = f"{name}:{i}:{case.get('comment', '')[:40]}"
            params.append(pytest.param(case, id=label))
    return params


CASES = _cases()


def test_the_vectors_are_all_there() -> None:
    # 95 + 17 records, 3 + 1 disabled: a truncated copy would quietly test less
    assert len(CASES) == 108


@pytest.mark.parametrize("case", CASES)
def test_rfc6902_conformance(case: dict[str, Any]) -> None:
    doc = freeze(case["doc"])
    if "error" in case:
        with pytest.raises(PatchError):
            apply_patch(doc, case["patch"])
        assert thaw(doc) == case["doc"]  # the input is untouched
    else:
        result = apply_patch(doc, case["patch"])
        assert same_value(thaw(result), case["expected"]) or thaw(result) == case["expected"]
        assert json_equal(result, case["expected"])


# --- pinned error messages -----------------------------------------------------------------

DOC = freeze({"a": {"b": [1, 2]}, "s": "text"})


@pytest.mark.parametrize("ops, message", [
    ([{"op": "remove", "path": "/a/b/5"}],
     "op 0 (remove '/a/b/5'): index 5 is out of range for the array at '/a/b' (length 2)"),
    ([{"op": "add", "path": "/a/x", "value": 1}, {"op": "replace", "path": "/nope/c", "value": 1}],
     "op 1 (replace '/nope/c'): no member 'nope' in the object at the root"),
    ([{"op": "add", "path": "/a/b/01", "value": 0}],
     ("op 0 (add '/a/b/01'): '01' is not an array index for the array at '/a/b' "
      "(use digits without leading zeros, or '-' to append)")),
    ([{"op": "add", "path": "/s/x", "value": 0}],
     "op 0 (add '/s/x'): cannot go into a string at '/s'"),
    ([{"op": "replace", "path": "/a/b/-", "value": 0}],
     "op 0 (replace '/a/b/-'): '-' names the end of the array at '/a/b', past its last element"),
    ([{"op": "move", "from": "/a", "path": "/a/b/0"}],
     "op 0 (move '/a/b/0'): cannot move '/a' into its own child"),
    ([{"op": "copy", "from": "/zz", "path": "/y"}],
     "op 0 (copy '/y'): 'from' '/zz': no member 'zz' in the object at the root"),
    ([{"op": "add", "path": "a", "value": 1}],
     "op 0 (add 'a'): 'path': a JSON Pointer must be empty or start with '/'"),
    ([{"op": "add", "path": "/a~2", "value": 1}],
     ("op 0 (add '/a~2'): 'path': '~' must be followed by '0' or '1' "
      "(write '~0' for '~' and '~1' for '/')")),
    ([{"op": "add", "path": "/x"}], "op 0 (add '/x'): the operation has no 'value' member"),
    ([{"op": "spam", "path": "/x"}],
     "op 0 (spam '/x'): unknown op 'spam'; use one of add, remove, replace, move, copy, test"),
    ([{"op": "add", "value": 1}], "op 0 (add ''): the operation has no 'path' member"),
    ([{"op": "add", "path": None, "value": 1}],
     "op 0 (add 'null'): 'path' must be a JSON Pointer string, got null"),
    ([{"op": "remove", "path": ""}], "op 0 (remove ''): cannot remove the whole document"),
])
def test_error_messages(ops: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(PatchError) as info:
        apply_patch(DOC, ops)
    assert str(info.value) == message
    assert isinstance(info.value, FoldError) and isinstance(info.value, ValueError)


def test_error_attributes() -> None:
    with pytest.raises(PatchError) as info:
        apply_patch(DOC, [{"op": "test", "path": "/s", "value": "text"},
                          {"op": "remove", "path": "/a/missing"}])
    err = info.value
    assert (err.index, err.op, err.path) == (1, "remove", "/a/missing")
    assert err.problem == "no member 'missing' in the object at '/a'"


def test_test_failure_is_a_patch_test_error() -> None:
    with pytest.raises(PatchTestError) as info:
        apply_patch(DOC, [{"op": "test", "path": "/a/b", "value": [1, 3]}])
    assert str(info.value) == "op 0 (test '/a/b'): the value is [1, 2], expected [1, 3]"


def test_ops_must_be_a_list() -> None:
    with pytest.raises(TypeError, match="a JSON Patch is a list of operations, got dict"):
        apply_patch(DOC, {"op": "add", "path": "/x", "value": 1})  # type: ignore[arg-type]


# --- semantics ----------------------------------------------------------------------------

def test_failed_patch_leaves_input_untouched() -> None:
    before = thaw(DOC)
    with pytest.raises(PatchError):
        apply_patch(DOC, [{"op": "add", "path": "/a/b/-", "value": 3},
                          {"op": "remove", "path": "/s"},
                          {"op": "remove", "path": "/nope"}])
    assert thaw(DOC) == before
    assert len(DOC["a"]["b"]) == 2


def test_json_equality_in_test_ops() -> None:
    doc = freeze({"n": 1, "t": True, "l": [1], "o": {"0": 1}})
    assert apply_patch(doc, [{"op": "test", "path": "/n", "value": 1.0}]) is doc
    for path, value in (("/t", 1), ("/n", True), ("/l", {"0": 1}), ("/o", [1]), ("/n", "1")):
        with pytest.raises(PatchTestError):
            apply_patch(doc, [{"op": "test", "path": path, "value": value}])


def test_pointer_escapes_and_special_keys() -> None:
    doc = freeze({"a/b": 1, "m~n": 2, "": 3, "-": 4})
    out = apply_patch(doc, [
        {"op": "replace", "path": "/a~1b", "value": 10},
        {"op": "replace", "path": "/m~0n", "value": 20},
        {"op": "replace", "path": "/", "value": 30},
        {"op": "replace", "path": "/-", "value": 40},
    ])
    assert thaw(out) == {"a/b": 10, "m~n": 20, "": 30, "-": 40}
    assert parse_pointer("/~01") == ("~1",)


def test_array_operations() -> None:
    doc = freeze({"l": [0, 1, 2, 3]})
    out = apply_patch(doc, [
        {"op": "add", "path": "/l/1", "value": "x"},      # insert in the middle
        {"op": "add", "path": "/l/-", "value": "end"},    # append
        {"op": "add", "path": "/l/6", "value": "end2"},   # insert at len = append
        {"op": "remove", "path": "/l/0"},
        {"op": "replace", "path": "/l/0", "value": "X"},
        {"op": "move", "from": "/l/1", "path": "/l/3"},
        {"op": "copy", "from": "/l/0", "path": "/l/0"},
    ])
    assert thaw(out) == {"l": ["X", "X", 2, 3, 1, "end", "end2"]}


def test_writes_below_array_elements_then_shift() -> None:
    doc = freeze({"l": [{"a": 1}, {"a": 2}, {"a": 3}]})
    out = apply_patch(doc, [
        {"op": "replace", "path": "/l/1/a", "value": 20},
        {"op": "replace", "path": "/l/2/a", "value": 30},
        {"op": "add", "path": "/l/0", "value": {"a": 0}},   # shifts the edited elements
        {"op": "replace", "path": "/l/3/a", "value": 300},
        {"op": "remove", "path": "/l/1"},
        {"op": "add", "path": "/l/1/b", "value": "b"},
    ])
    assert thaw(out) == {"l": [{"a": 0}, {"a": 20, "b": "b"}, {"a": 300}]}
    assert thaw(doc) == {"l": [{"a": 1}, {"a": 2}, {"a": 3}]}


def test_copy_then_edit_does_not_alias() -> None:
    doc = freeze({"src": {"x": 1}})
    out = apply_patch(doc, [
        {"op": "add", "path": "/src/y", "value": 2},
        {"op": "copy", "from": "/src", "path": "/dst"},
        {"op": "add", "path": "/src/z", "value": 3},
        {"op": "add", "path": "/dst/w", "value": 4},
    ])
    assert thaw(out) == {"src": {"x": 1, "y": 2, "z": 3}, "dst": {"x": 1, "y": 2, "w": 4}}


def test_move_a_subtree_being_edited() -> None:
    doc = freeze({"a": {"x": {"deep": 1}}, "b": {}})
    out = apply_patch(doc, [
        {"op": "add", "path": "/a/x/deeper", "value": 2},
        {"op": "move", "from": "/a/x", "path": "/b/x"},
        {"op": "add", "path": "/b/x/deepest", "value": 3},
    ])
    assert thaw(out) == {"a": {}, "b": {"x": {"deep": 1, "deeper": 2, "deepest": 3}}}


def test_root_operations() -> None:
    doc = freeze({"a": 1})
    assert apply_patch(doc, [{"op": "replace", "path": "", "value": [1]}]) == pvector([1])
    assert thaw(apply_patch(doc, [{"op": "add", "path": "", "value": {"b": 2}}])) == {"b": 2}
    assert thaw(apply_patch(doc, [{"op": "copy", "from": "", "path": "/self"}])) == {
        "a": 1, "self": {"a": 1}}
    assert apply_patch(5, [{"op": "replace", "path": "", "value": 6}]) == 6


def test_values_are_frozen_and_not_aliased() -> None:
    value = {"list": [1, {"x": (1, 2)}]}
    out = apply_patch(freeze({}), [{"op": "add", "path": "/v", "value": value}])
    value["list"].append(99)
    assert out["v"] == freeze({"list": [1, {"x": [1, 2]}]})
    assert type(out["v"]) is type(pmap())
    assert type(out["v"]["list"][1]["x"]) is type(pvector())


def test_blob_refs_are_kept_as_they_are() -> None:
    ref = BlobRef("sha256:" + "b" * 64, 10, "text/html")
    out = apply_patch(freeze({}), [{"op": "add", "path": "/page", "value": {"body": ref}},
                                   {"op": "test", "path": "/page/body", "value": ref.to_json()}])
    assert out["page"]["body"] is ref


def test_old_members_are_ignored() -> None:
    out = apply_patch(freeze({"a": 1}), [{"op": "replace", "path": "/a", "value": 2, "old": 1}])
    assert thaw(out) == {"a": 2}


# --- persistence --------------------------------------------------------------------------

def test_untouched_subtrees_are_shared() -> None:
    doc = freeze({"big": {f"k{i}": {"v": i} for i in range(200)}, "other": [1, 2], "n": 0})
    out = apply_patch(doc, [{"op": "replace", "path": "/big/k7/v", "value": -7}])
    assert out["other"] is doc["other"]
    assert all(out["big"][k] is doc["big"][k] for k in doc["big"] if k != "k7")
    assert out["big"]["k7"]["v"] == -7 and doc["big"]["k7"]["v"] == 7


@pytest.mark.parametrize("ops", [
    [],
    [{"op": "test", "path": "/a", "value": [1]}],
    [{"op": "move", "from": "/a", "path": "/a"}],
    [{"op": "copy", "from": "/a", "path": "/a"}],
    [{"op": "add", "path": "/x", "value": 1}, {"op": "remove", "path": "/x"}],
])
def test_no_op_patch_returns_the_same_object(ops: list[dict[str, Any]]) -> None:
    doc = freeze({"a": [1], "b": {"c": 2}})
    assert apply_patch(doc, ops) is doc


def test_plain_documents_are_frozen_first() -> None:
    out = apply_patch({"a": [1]}, [{"op": "add", "path": "/a/-", "value": 2}])
    assert out == freeze({"a": [1, 2]})


def test_many_changes_to_one_map_in_one_patch() -> None:
    doc = freeze({"m": {f"k{i}": i for i in range(50)}})
    ops: list[dict[str, Any]] = [{"op": "add", "path": f"/m/n{i}", "value": i} for i in range(300)]
    ops += [{"op": "remove", "path": f"/m/k{i}"} for i in range(0, 50, 3)]
    ops += [{"op": "replace", "path": f"/m/k{i}", "value": -i} for i in range(1, 50, 3)]
    out = apply_patch(doc, ops)
    expected = {f"k{i}": (-i if i % 3 == 1 else i) for i in range(50) if i % 3}
    expected.update({f"n{i}": i for i in range(300)})
    assert thaw(out["m"]) == expected
    assert len(out["m"]) == len(expected)
    # the result is an ordinary PMap
    assert out["m"].set("zz", 1)["zz"] == 1 and "k0" not in out["m"]


def test_rebuilding_a_small_map_with_a_renamed_key() -> None:
    # more changes than buckets, same size, different keys (found by hypothesis)
    doc = freeze({"": None})
    out = apply_patch(doc, [{"op": "move", "from": "/", "path": "/~1"},
                            {"op": "move", "from": "/~1", "path": "/~0"}])
    assert thaw(out) == {"~": None}


# --- the bulk reader's structs --------------------------------------------------------------

def _as_structs(ops: Any) -> list[PatchOp] | None:
    """``ops`` decoded as the store's bulk reader decodes them; None where it would not (the
    reader then reads the batch as dicts)."""
    try:
        return msgspec.json.decode(json.dumps(ops), type=list[PatchOp])
    except msgspec.DecodeError:
        return None


def _outcome(doc: Any, ops: Any) -> tuple[str, Any]:
    try:
        return "ok", thaw(apply_patch(doc, ops))
    except PatchError as exc:
        return type(exc).__name__, str(exc)


STRUCT_CASES = [case for case in CASES if _as_structs(case.values[0]["patch"]) is not None]


def test_most_vectors_decode_as_structs() -> None:
    # the rest hold an op that is not an object with string 'op' and 'path' (read as dicts)
    assert len(STRUCT_CASES) >= 95


@pytest.mark.parametrize("case", STRUCT_CASES)
def test_structs_apply_as_dicts_do(case: dict[str, Any]) -> None:
    """Results and errors (their messages too) of the conformance vectors are the same for the
    operations as :class:`PatchOp` structs and as the dicts they were decoded from."""
    doc, ops = freeze(case["doc"]), case["patch"]
    structs = _as_structs(ops)
    assert structs is not None and all(type(op) is PatchOp for op in structs)
    assert _outcome(doc, structs) == _outcome(doc, ops)


@pytest.mark.parametrize("ops", [
    [{"op": "add", "path": "/x"}], [{"op": "test", "path": "/s"}], [{"op": "copy", "path": "/y"}],
    [{"op": "spam", "path": "/x"}], [{"op": "add", "path": "a", "value": 1}],
    [{"op": "add", "path": "/a~2", "value": 1}], [{"op": "move", "from": "/a", "path": "/a/b/0"}],
    [{"op": "add", "path": "/a~1b", "value": None, "note": "ignored"}],
    [{"op": "test", "path": "/a/b", "value": [1, 2]}, {"op": "copy", "from": "/a/b", "path": "/c"}],
])
def test_structs_fail_and_succeed_as_dicts_do(ops: list[dict[str, Any]]) -> None:
    structs = _as_structs(ops)
    assert structs is not None
    assert _outcome(DOC, structs) == _outcome(DOC, ops)


def test_a_struct_reads_back_as_the_json_object_it_was() -> None:
    ops = [{"op": "move", "from": "/a", "path": "/b"}, {"op": "add", "path": "/x", "value": None},
           {"op": "remove", "path": "/y"}]
    structs = _as_structs(ops)
    assert structs is not None
    assert [op.to_dict() for op in structs] == ops
    assert PatchPayload(ops=structs).to_dict() == {"ops": ops}
    assert structs[0].get("from") == "/a" and structs[2].get("value", "none") == "none"
