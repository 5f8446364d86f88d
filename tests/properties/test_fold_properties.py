"""Properties of the fold engine: JSON Patch against an oracle, diff round trips, snapshots.

Example counts are modest by default; ``AGENTLOG_PROPERTY_SCALE=5`` runs five times as many.
No deadlines: these tests assert results, never timings.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.errors import PatchError
from agentlog.folding import (
    Reducers,
    SnapshotIndex,
    apply_patch,
    check_determinism,
    diff_states,
    fold,
    freeze,
    same_value,
    thaw,
)
from agentlog.folding.engine import _step
from agentlog.testing.strategies import docs_and_patches, event_runs, json_values, patch_ops, states

STANDARD = Reducers.standard()
SCALE = int(os.environ.get("AGENTLOG_PROPERTY_SCALE", "1"))


def examples(n: int) -> settings:
    return settings(max_examples=n * SCALE, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@examples(100)
@given(docs_and_patches())
def test_apply_patch_agrees_with_jsonpatch(case: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    doc, ops = case
    expected = jsonpatch.apply_patch(copy.deepcopy(doc), copy.deepcopy(ops))
    frozen = freeze(doc)
    got = apply_patch(frozen, ops)
    assert same_value(got, expected), (thaw(got), expected)
    assert same_value(frozen, doc)  # the input is untouched


@examples(50)
@given(docs_and_patches(), st.sampled_from([
    {"op": "remove", "path": "/definitely/not/here"},
    {"op": "replace", "path": "/\u2603missing", "value": 1},
    {"op": "test", "path": "", "value": "never the document"},
    {"op": "add", "path": "no-slash", "value": 1},
]))
def test_a_failing_patch_changes_nothing(case: tuple[dict[str, Any], list[dict[str, Any]]],
                                         bad: dict[str, Any]) -> None:
    doc, ops = case
    frozen = freeze(doc)
    with pytest.raises(PatchError) as info:
        apply_patch(frozen, [*ops, bad])
    assert info.value.index == len(ops)
    assert same_value(frozen, doc)


@examples(100)
@given(states(), states())
def test_diff_then_apply_gives_the_target(a: Any, b: Any) -> None:
    patch = diff_states(a, b)
    assert same_value(apply_patch(a, patch), b)
    assert (len(patch) == 0) == same_value(a, b)


@examples(100)
@given(docs_and_patches(max_ops=8))
def test_diff_of_derived_states(case: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    doc, ops = case
    a = freeze(doc)
    b = apply_patch(a, ops)
    patch = diff_states(a, b)
    assert same_value(apply_patch(a, patch), b)
    # each change's old value is the value its op overwrites, at the point it is applied
    current = a
    for change in patch.changes:
        op = change.op
        assert "old" not in op
        if op["op"] in ("replace", "remove"):
            assert same_value(apply_patch(current, [{"op": "test", "path": op["path"],
                                                     "value": change.old}]), current)
        current = apply_patch(current, [op])
    assert same_value(current, b)


@examples(50)
@given(json_values())
def test_diff_of_a_state_with_itself_is_empty(value: Any) -> None:
    a = freeze(value)
    assert diff_states(a, a) == []
    assert diff_states(a, freeze(copy.deepcopy(value))) == []


@examples(50)
@given(st.data())
def test_patches_keep_untouched_subtrees(data: st.DataObject) -> None:
    doc = data.draw(st.dictionaries(st.sampled_from("abcdef"), json_values(), min_size=2))
    target = data.draw(st.sampled_from(sorted(doc)))
    ops = data.draw(patch_ops(doc[target]))  # relative to the subtree; prefixed below
    ops = [{**op, "path": f"/{target}{op['path']}", **({"from": f"/{target}{op['from']}"}
                                                       if "from" in op else {})} for op in ops]
    a = freeze(doc)
    b = apply_patch(a, ops)
    assert all(b[k] is a[k] for k in a if k != target)


def _step_by_step(events: list[Any]) -> list[Any]:
    state, out = STANDARD.initial_state(), []
    for event in events:
        state = _step(STANDARD._table, state, event)
        out.append(state)
    return out


@examples(60)
@given(event_runs(max_events=25), st.integers(1, 6))
def test_snapshot_index_equals_fold_from_scratch(events: list[Any], every: int) -> None:
    expected = _step_by_step(events)
    index = SnapshotIndex.of(events, STANDARD, every=every)
    for n in range(len(events)):
        assert diff_states(index.at(n), expected[n]) == [], n
    if events:
        assert diff_states(fold(events, STANDARD), expected[-1]) == []
        for event, state in index.states(len(events) // 2):
            assert diff_states(state, expected[event.seq]) == []


@pytest.mark.slow
@examples(200)
@given(event_runs(max_events=60), st.integers(1, 9), st.randoms(use_true_random=False))
def test_snapshot_index_random_access_in_any_order(events: list[Any], every: int,
                                                   rng: Any) -> None:
    expected = _step_by_step(events)
    index = SnapshotIndex.of(events, STANDARD, every=every)
    order = list(range(-1, len(events)))
    rng.shuffle(order)
    for n in order:
        want = expected[n] if n >= 0 else STANDARD.initial_state()
        assert diff_states(index.at(n), want) == [], n


@pytest.mark.slow
@examples(100)
@given(event_runs(max_events=40), st.integers(1, 7))
def test_standard_reducers_pass_the_determinism_check(events: list[Any], every: int) -> None:
    assert check_determinism(events, STANDARD, every=every).ok
