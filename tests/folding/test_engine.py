"""fold and SnapshotIndex."""

from __future__ import annotations

import gc
from itertools import pairwise
from typing import Any

import pytest

from agentlog.errors import FoldError, ReducerError
from agentlog.events import Event
from agentlog.folding import Reducers, SnapshotIndex, State, diff_states, fold, thaw
from agentlog.folding.engine import KEEP, PatchBatch, _step, as_events_fn

STANDARD = Reducers.standard()


def patch(seq: int, *ops: dict[str, Any]) -> Event:
    return Event(seq=seq, type="state.patch", payload={"ops": list(ops)})


def mixed_run(n: int) -> list[Event]:
    """Patches interleaved with other reducers' events, so the fast path opens and closes."""
    events = []
    for seq in range(n):
        if seq == 0:
            events.append(patch(0, {"op": "add", "path": "/log", "value": []},
                                {"op": "add", "path": "/m", "value": {}}))
        elif seq % 7 == 3:
            events.append(Event(seq=seq, type="tool.result", duration_ms=1.0))
        elif seq % 11 == 5:
            events.append(Event(seq=seq, type="note", payload={"text": "ignored"}))
        else:
            events.append(patch(seq, {"op": "add", "path": "/log/-", "value": seq},
                                {"op": "add", "path": f"/m/k{seq % 13}", "value": {"at": seq}},
                                {"op": "replace", "path": "/log/0", "value": -seq}))
    return events


def step_by_step(events: list[Event], reducers: Reducers = STANDARD) -> list[State]:
    state = reducers.initial_state()
    out = []
    for event in events:
        state = _step(reducers._table, state, event)
        out.append(state)
    return out


def test_fold_fast_path_equals_one_event_at_a_time() -> None:
    events = mixed_run(300)
    states = step_by_step(events)
    assert diff_states(fold(events, STANDARD), states[-1]) == []
    assert fold(events[:1], STANDARD) == states[0]


def test_fold_of_nothing_is_the_initial_state() -> None:
    assert fold([], STANDARD) is STANDARD.initial_state()
    start = STANDARD.initial_state().set("status", "x")
    assert fold([], STANDARD, initial=start) is start


@pytest.mark.parametrize("enabled", [True, False])
def test_fold_restores_the_garbage_collector(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        fold(mixed_run(50), STANDARD)
        assert gc.isenabled() is enabled
        with pytest.raises(ReducerError):
            fold([patch(0, {"op": "remove", "path": "/nope"})], STANDARD)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_the_collector_is_paused_for_the_fold_call_only() -> None:
    seen: list[bool] = []

    def watch(state: Any, event: Any) -> Any:
        seen.append(gc.isenabled())
        return state

    reducers = STANDARD.with_reducer("note", watch)
    events = [Event(seq=i, type="note", payload={}) for i in range(3)]
    assert gc.isenabled()
    fold(events, reducers)
    assert seen == [False] * 3 and gc.isenabled()
    seen.clear()
    for _ in SnapshotIndex.of(events, reducers, every=2).states(0, 3):  # a generator: not paused
        assert gc.isenabled()
    assert True in seen


def test_fold_keeps_a_program_s_frozen_objects_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        fold(mixed_run(20), STANDARD)
        # an unfreeze would empty the permanent generation; a few frozen objects may be freed
        # meanwhile by another thread of the suite (a server's, a cluster's)
        assert gc.get_freeze_count() >= frozen - 100
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("every", [1, 3, 10, 1000])
def test_index_at_equals_fold_from_scratch(every: int) -> None:
    events = mixed_run(60)
    expected = step_by_step(events)
    index = SnapshotIndex.of(events, STANDARD, every=every)
    assert index.at(-1) is STANDARD.initial_state()
    for n in [59, 0, 30, 31, 32, 5, 58, 2]:  # out of order: the step-on cache must not leak
        assert diff_states(index.at(n), expected[n]) == [], n
    for n in range(60):
        assert diff_states(index.at(n), expected[n]) == [], n


def test_index_at_or_before() -> None:
    index = SnapshotIndex.of(mixed_run(25), STANDARD, every=10)
    assert index.at_or_before(-1)[0] == -1
    assert index.at_or_before(8)[0] == -1
    assert index.at_or_before(9)[0] == 9
    seq, state = index.at_or_before(24)
    assert seq == 19 and state is index.at(19)
    assert index.snapshot_count == 3
    assert repr(index) == "<SnapshotIndex 25 events, every 10, 3 snapshots>"


def test_index_is_built_lazily_by_one_bulk_fold() -> None:
    events = mixed_run(100)
    calls: list[tuple[int, int]] = []

    def source(start: int, stop: int) -> list[Event]:
        calls.append((start, stop))
        return events[start:stop]

    index = SnapshotIndex(source, len(events), STANDARD, every=10)
    assert calls == []
    index.at(99)
    assert calls[0] == (0, 100)
    assert index.snapshot_count == 11
    calls.clear()
    index.at(55)
    assert calls == [(50, 56)]  # at most every - 1 events from the nearest snapshot


def test_with_stored_states_a_fold_keeps_the_last_snapshots_it_passes() -> None:
    """With stored states to fall back on, a long fold keeps the last KEEP snapshots it passes
    (the ones an LRU of KEEP would hold), each the state after its events, and reads every
    event once."""
    events = mixed_run(400)
    expected = step_by_step(events)
    read: list[int] = []

    def source(start: int, stop: int) -> list[Event]:
        read.extend(range(start, stop))
        return events[start:stop]

    index = SnapshotIndex(source, len(events), STANDARD, every=10, stored=lambda n: None)
    assert diff_states(index.at(399), expected[399]) == []
    assert sorted(read) == list(range(400))
    held = dict(index._kept)
    assert sorted(held) == list(range(40 - KEEP + 1, 41))
    for j, state in held.items():
        assert diff_states(state, expected[j * 10 - 1]) == [], j


def batched(events: list[Event], size: int) -> list[Any]:
    """``events`` with each run of patches as PatchBatch objects of at most ``size`` payloads,
    as a store's columnar reader gives them."""
    out: list[Any] = []
    for event in events:
        last = out[-1] if out else None
        if event.type != "state.patch":
            out.append(event)
        elif type(last) is PatchBatch and len(last.payloads) < size:
            last.payloads.append(event.payload)
        else:
            out.append(PatchBatch(event.seq, [event.payload]))
    return out


@pytest.mark.parametrize(("every", "size"), [(1, 4), (3, 5), (10, 1), (10, 64), (1000, 7)])
@pytest.mark.parametrize("stored", [False, True])
def test_patch_batches_fold_as_their_events(every: int, size: int, stored: bool) -> None:
    """Batches of patch payloads, cut across snapshot boundaries, give the states the events
    give one at a time, on the bulk fold and on the stored-state path (its last few events are
    stepped one at a time)."""
    events = mixed_run(120)
    expected = step_by_step(events)

    def light(start: int, stop: int) -> list[Any]:
        return batched(events[start:stop], size)

    index = SnapshotIndex(lambda a, b: events[a:b], len(events), STANDARD, every=every,
                          stored=(lambda n: None) if stored else None, fold_events=light)
    for n in [119, 0, 64, 65, 3, 118, 40]:
        assert diff_states(index.at(n), expected[n]) == [], n


def test_a_bad_patch_in_a_batch_names_its_seq() -> None:
    good = {"ops": [{"op": "add", "path": "/a", "value": 1}]}
    bad = {"ops": [{"op": "remove", "path": "/missing"}]}
    batch = PatchBatch(10, [good, good, good, bad, good])
    index = SnapshotIndex(lambda a, b: [], 15, STANDARD, every=100,
                          fold_events=lambda a, b: [PatchBatch(0, [good] * 10), batch])
    with pytest.raises(ReducerError) as caught:
        index.at(14)
    assert caught.value.seq == 13 and caught.value.type == "state.patch"


def test_a_patch_batch_needs_the_fast_path() -> None:
    custom = STANDARD.with_reducer("state.patch", lambda state, event: state)
    with pytest.raises(TypeError, match="fast path"):
        fold([PatchBatch(0, [{"ops": []}])], custom)


def test_states_iterates_with_persistent_states() -> None:
    events = mixed_run(40)
    expected = step_by_step(events)
    index = SnapshotIndex.of(events, STANDARD, every=8)
    got = list(index.states(5, 30))
    assert [e.seq for e, _ in got] == list(range(5, 30))
    for event, state in got:
        assert diff_states(state, expected[event.seq]) == []
    assert len(list(index.states())) == 40
    assert list(index.states(40)) == []
    with pytest.raises(IndexError):
        index.states(5, 41)


def test_states_share_structure_step_to_step() -> None:
    events = mixed_run(30)
    index = SnapshotIndex.of(events, STANDARD, every=8)
    states = [s for _, s in index.states()]
    for before, after in pairwise(states):
        assert after["objects"] is before["objects"]
        assert after["approvals"] is before["approvals"]


def test_extend_when_the_run_grows() -> None:
    events = mixed_run(50)
    live = events[:23]
    index = SnapshotIndex(lambda a, b: live[a:b], len(live), STANDARD, every=5)
    assert thaw(index.at(22)) == thaw(fold(live, STANDARD))
    live.extend(events[23:])
    with pytest.raises(IndexError):
        index.at(40)
    index.extend(len(live))
    assert diff_states(index.at(49), fold(events, STANDARD)) == []
    assert index.snapshot_count == 11
    with pytest.raises(ValueError, match="a run only grows"):
        index.extend(10)


def test_index_with_custom_reducers_and_initial() -> None:
    def count(state: State, event: Event) -> State:
        return state.set("n", state["n"] + 1)

    events = [Event(seq=i, type="tick" if i % 2 else "tock") for i in range(20)]
    index = SnapshotIndex.of(events, {"tick": count}, initial={"n": 100}, every=3)
    assert [index.at(n)["n"] for n in (-1, 0, 1, 2, 19)] == [100, 100, 101, 101, 110]


def test_index_argument_checks() -> None:
    events = mixed_run(5)
    with pytest.raises(ValueError, match="every must be a positive int"):
        SnapshotIndex.of(events, every=0)
    index = SnapshotIndex.of(events, STANDARD)
    for bad in (5, -2):
        with pytest.raises(IndexError, match=r"the run has 5 events \(seq 0..4\)"):
            index.at(bad)


def test_index_checks_the_source_against_the_count() -> None:
    events = mixed_run(10)
    index = SnapshotIndex(lambda a, b: events[a:b], 12, STANDARD, every=4)
    with pytest.raises(FoldError, match=r"events\(0, 12\) gave 10 events, expected 12"):
        index.at(3)


def test_reducer_errors_surface_from_the_index() -> None:
    events = mixed_run(30)
    events[17] = patch(17, {"op": "remove", "path": "/nope"})
    index = SnapshotIndex.of(events, STANDARD, every=5)
    with pytest.raises(ReducerError) as info:
        index.at(3)
    assert info.value.seq == 17


def test_event_sources() -> None:
    events = mixed_run(6)

    class Run:
        def iter_events(self, start: int = 0, stop: int | None = None) -> Any:
            return iter(events[start:stop])

        def __len__(self) -> int:
            return len(events)

    fn, count = as_events_fn(Run())
    assert count == 6 and [e.seq for e in fn(2, 4)] == [2, 3]
    fn, count = as_events_fn(iter(events))
    assert count == 6 and [e.seq for e in fn(4, 6)] == [4, 5]
