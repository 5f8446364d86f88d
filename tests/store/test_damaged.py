"""A run folder whose run.json is lost or damaged never vanishes, is never mistaken for
another run, and can be repaired from its own events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _store_helpers import FixedClock, make_run, tree_bytes

from agentlog.chain import ProblemKind
from agentlog.errors import AmbiguousRunError, RunDamagedError, RunNotFoundError, StoreError
from agentlog.store import Store


def meta_path(store: Store, run_id: str) -> Path:
    return store.runs_path / f"run_id={run_id}" / "run.json"


@pytest.fixture
def two(store: Store) -> Store:
    """refunds-0001 (its run.json deleted) beside refunds-0001-approve, whose id it prefixes."""
    for rid in ("refunds-0001", "refunds-0001-approve"):
        make_run(store, 5, run_id=rid, name=f"{rid} name")
    meta_path(store, "refunds-0001").unlink()
    return store


def test_a_run_without_run_json_is_listed_and_verified_as_a_problem(two: Store) -> None:
    assert two.list_runs() == ["refunds-0001", "refunds-0001-approve"]
    reports = two.verify(progress=False)
    assert [r.ok for r in reports.values()] == [False, True]
    problem = reports["refunds-0001"].problems[0]
    assert problem.kind == ProblemKind.UNREADABLE and "there is no run.json" in problem.message
    frame = two.runs()
    assert frame.set_index("run_id").loc["refunds-0001", "status"] == "damaged"


def test_an_exact_id_wins_over_a_prefix_even_when_damaged(two: Store) -> None:
    with pytest.raises(RunDamagedError) as caught:
        two.run("refunds-0001")
    assert caught.value.run_id == "refunds-0001"
    assert "agentlog repair refunds-0001" in str(caught.value)
    assert two.run("refunds-0001-a").id == "refunds-0001-approve"


def test_a_prefix_matching_only_a_damaged_run_is_an_error_never_another_run(store: Store) -> None:
    make_run(store, 3, run_id="alpha-1")
    make_run(store, 3, run_id="beta-1")
    meta_path(store, "alpha-1").unlink()
    with pytest.raises(RunDamagedError, match="alpha-1"):
        store.run("alph")
    make_run(store, 3, run_id="alpha-2")
    with pytest.raises(AmbiguousRunError) as caught:  # a damaged run still counts as a match
        store.run("alpha")
    assert caught.value.matches == ["alpha-1", "alpha-2"]
    with pytest.raises(RunNotFoundError):
        store.run("gamma")


def test_a_writer_refuses_a_damaged_run_and_changes_nothing(two: Store) -> None:
    before = tree_bytes(two.path)
    with pytest.raises(RunDamagedError):
        two.writer("refunds-0001")
    assert tree_bytes(two.path) == before


@pytest.mark.parametrize(("change", "field"), [
    ({"parent": "refunds"}, "parent"),
    ({"parent": {"run_id": "x", "seq": "3", "hash": "0" * 64}}, "parent.seq"),
    ({"writer": {"segment_events": "many"}}, "writer.segment_events"),
    ({"writer": {"redact": "authorization"}}, "writer.redact"),
    ({"writer": {"blob_threshold": -1}}, "writer.blob_threshold"),
    ({"count": "5"}, "count"),
    ({"head": 7}, "head"),
    ({"created": "yesterday"}, "created"),
    ({"name": ["a"]}, "name"),
    ({"schema_version": None}, "schema_version"),
])
def test_a_run_json_field_of_the_wrong_type_is_a_damaged_run_naming_the_field(
        store: Store, change: dict[str, object], field: str) -> None:
    make_run(store, 3, run_id="r")
    path = meta_path(store, "r")
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    for attempt in (lambda: store.run("r"), lambda: store.writer("r")):
        with pytest.raises(RunDamagedError, match=f"field {field}:"):
            attempt()
    assert store.verify(progress=False)["r"].problems[0].kind == ProblemKind.UNREADABLE


def test_run_json_that_is_not_json_is_damaged(store: Store) -> None:
    make_run(store, 3, run_id="r")
    meta_path(store, "r").write_bytes(b'{"id": "r", \xff')
    with pytest.raises(RunDamagedError, match="not valid JSON"):
        store.run("r")


# --- repair ------------------------------------------------------------------------------------


def test_repair_rebuilds_run_json_from_the_events(two: Store) -> None:
    original = two.run("refunds-0001-approve")  # the same events, written the same way
    report = two.repair("refunds-0001")
    assert report.repaired and report.events == 5 and report.head == original.head
    assert report.unknown == ("name", "tags", "writer", "status") and report.kept is None
    run = two.run("refunds-0001")
    assert run.verify().ok and len(run) == 5 and run.name is None and run.status == "unknown"
    meta = run.meta
    assert meta["repaired"]["unknown"] == ["name", "tags", "writer", "status"]
    assert meta["repaired"]["inferred"] == ["created", "closed"]
    assert meta["created"] == "2026-12-02T20:00:48.001000Z"  # the first event's time (FixedClock)
    assert [e.payload for e in run.iter_events()] == [e.payload for e in original.iter_events()]


def test_repair_of_a_healthy_run_changes_nothing(store: Store) -> None:
    make_run(store, 3, run_id="r")
    before = tree_bytes(store.path)
    report = store.repair("r")
    assert not report.repaired and str(report) == "run r: run.json is fine; nothing to repair"
    assert tree_bytes(store.path) == before


def test_repair_keeps_the_damaged_file_and_salvages_its_good_fields(store: Store) -> None:
    make_run(store, 4, run_id="r", name="keep me", tags={"team": "a"})
    path = meta_path(store, "r")
    damaged = {**json.loads(path.read_text()), "parent": 12, "count": "x"}
    path.write_text(json.dumps(damaged))
    report = store.repair("r")
    assert report.kept == "run.json.damaged-1"
    assert json.loads((path.parent / "run.json.damaged-1").read_text()) == damaged
    run = store.run("r")
    assert (run.name, run.meta["tags"], run.status) == ("keep me", {"team": "a"}, "unknown")
    assert report.unknown == ("status",) and run.verify().ok


def test_repair_of_an_open_run_keeps_it_open_and_writable(store: Store) -> None:
    w = make_run(store, 10, run_id="crashed", segment_events=4, close=False)
    w._wal.close()
    w._lock.release()  # a crash: no close, the WAL holds events 8 and 9
    meta_path(store, "crashed").unlink()
    report = store.repair("crashed")
    assert (report.status, report.events) == ("open", 10)
    w2 = store.writer("crashed", clock=FixedClock())
    w2.emit("note", {"after": "repair"})
    w2.close()
    run = store.run("crashed")
    assert len(run) == 11 and run.verify().ok


def test_repair_of_a_fork_finds_its_parent_through_the_chain(store: Store) -> None:
    make_run(store, 6, run_id="parent")
    make_run(store, 6, run_id="other", clock=FixedClock(start=1_700_000_000))  # another chain
    w = store.create_run(run_id="fork", fork_of=("parent", 3), clock=FixedClock(start=1_800_000_000))
    w.emit("note", {"mine": 1})
    w.close()
    meta_path(store, "fork").unlink()
    report = store.repair("fork")
    assert report.parent == ("parent", 3) and report.events == 5
    fork = store.run("fork")
    assert fork.fork_seq == 3 and fork.verify().ok
    assert fork.event(2).hash == store.run("parent").event(2).hash


def test_repair_of_a_fork_whose_parent_is_gone_changes_nothing(store: Store) -> None:
    make_run(store, 6, run_id="parent")
    w = store.create_run(run_id="fork", fork_of=("parent", 3))
    w.emit("note", {"mine": 1})
    w.close()
    meta_path(store, "fork").unlink()
    import shutil
    shutil.rmtree(store.runs_path / "run_id=parent")
    before = tree_bytes(store.path)
    with pytest.raises(StoreError, match="starts at seq 4, so it is a fork"):
        store.repair("fork")
    assert tree_bytes(store.path) == before


def test_al_open_of_a_damaged_run_folder_names_it(two: Store) -> None:
    import agentlog as al

    with pytest.raises(RunDamagedError, match="refunds-0001"):
        al.open(two.runs_path / "run_id=refunds-0001")
    assert al.open(two.runs_path / "run_id=refunds-0001-approve").id == "refunds-0001-approve"
