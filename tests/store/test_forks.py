"""Forks reference their parent's prefix; reading stitches it; verify checks the lineage."""

from __future__ import annotations

import json
from typing import Any

import pyarrow.compute as pc
import pytest
from _store_helpers import FixedClock, make_run, rewrite_segment

from agentlog.chain import ProblemKind
from agentlog.errors import EventNotFoundError, RunNotFoundError
from agentlog.store import Store


def fork(store: Store, parent: str, at: int, run_id: str, n: int, **kwargs: Any) -> Any:
    w = store.create_run(run_id=run_id, fork_of=(parent, at), clock=FixedClock(2e9), **kwargs)
    for i in range(n):
        w.emit("note", {"fork": run_id, "i": i})
    w.close()
    return store.run(run_id)


def test_fork_shares_the_parent_prefix(store: Store) -> None:
    parent = make_run(store, 10, run_id="parent", segment_events=4)
    child = fork(store, "parent", 5, "child", 3, segment_events=2)
    meta = json.loads((child.path / "run.json").read_text())
    assert meta["parent"] == {"run_id": "parent", "seq": 5, "hash": parent.event(5).hash}
    assert (child.fork_seq, child.parent.id, len(child)) == (5, "parent", 9)  # type: ignore[union-attr]
    events = list(child.iter_events())
    assert [e.seq for e in events] == list(range(9))
    assert [e.hash for e in events[:6]] == [e.hash for e in parent.iter_events(0, 6)]
    assert [e.payload for e in events[6:]] == [{"fork": "child", "i": i} for i in range(3)]
    # the fork's partition holds only its own events, named from seq 6
    files = sorted(p.name for p in child.path.glob("events-*.parquet"))
    assert files == ["events-000000000006.parquet", "events-000000000008.parquet"]
    table = child.table()
    assert table.column("seq").to_pylist() == list(range(9))
    assert table.column("hash").to_pylist()[:6] == parent.table().column("hash").to_pylist()[:6]
    assert child.event(2) == parent.event(2) and child.event(7).payload["i"] == 1
    assert child.verify().ok and child.verify().events == 9
    assert store.dataset().to_table(filter=pc.field("run_id") == "child").num_rows == 3


def test_fork_writer_starts_after_the_cut(store: Store) -> None:
    parent = make_run(store, 4, run_id="p")
    w = store.create_run(run_id="f", fork_of=("p", 1))
    assert (w.seq, w.head) == (2, parent.event(1).hash)
    e = w.emit("note", {"parent": "p"})
    assert e.seq == 2
    w.close()
    assert store.run("f").verify().ok


def test_empty_fork(store: Store) -> None:
    parent = make_run(store, 4, run_id="p")
    child = fork(store, "p", 3, "empty", 0)
    assert len(child) == 4 and child.head == parent.head and child.verify().ok


def test_fork_of_a_fork(store: Store) -> None:
    make_run(store, 6, run_id="g0")
    fork(store, "g0", 3, "g1", 4)       # 0..3 from g0, 4..7 own
    g2 = fork(store, "g1", 5, "g2", 2)  # 0..5 from g1 (0..3 from g0), 6..7 own
    events = list(g2.iter_events())
    assert [e.seq for e in events] == list(range(8))
    assert [e.payload.get("fork") for e in events] == [None] * 4 + ["g1", "g1", "g2", "g2"]
    assert g2.table().num_rows == 8 and g2.verify().ok
    assert [e.seq for e in g2.iter_events(2, 7)] == [2, 3, 4, 5, 6]


def test_bad_fork_points(store: Store) -> None:
    make_run(store, 3, run_id="p")
    with pytest.raises(EventNotFoundError):
        store.create_run(run_id="x", fork_of=("p", 3))
    with pytest.raises(EventNotFoundError):
        store.create_run(run_id="x", fork_of=("p", -2))
    with pytest.raises(RunNotFoundError):
        store.create_run(run_id="x", fork_of=("nope", 0))
    assert store.list_runs() == ["p"]


def test_fork_at_minus_one_shares_nothing_but_the_lineage(store: Store) -> None:
    make_run(store, 3, run_id="p")
    with store.create_run(run_id="x", fork_of=("p", -1)) as w:
        w.emit("note", {"i": 0})
    fork = store.run("x")
    assert fork.meta["parent"] == {"run_id": "p", "seq": -1, "hash": "0" * 64}
    assert len(fork) == 1 and fork.event(0).payload == {"i": 0} and fork.verify().ok


def test_verify_catches_a_parent_whose_prefix_was_altered(store: Store) -> None:
    make_run(store, 8, run_id="p", segment_events=4)
    fork(store, "p", 5, "f", 2)

    def alter(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[2]["payload"] = rows[2]["payload"].replace("event 2", "event X")
        return rows

    rewrite_segment(store.runs_path / "run_id=p" / "events-000000000000.parquet", alter)
    report = store.run("f").verify()
    assert [(p.kind, p.seq) for p in report.problems] == [(ProblemKind.CHAIN_BROKEN, 2)]


def test_verify_catches_a_parent_rewritten_at_the_fork_seq(store: Store) -> None:
    make_run(store, 8, run_id="p", segment_events=4)
    fork(store, "p", 5, "f", 2)

    def alter(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[1]["hash"] = "e" * 64  # seq 5
        return rows

    rewrite_segment(store.runs_path / "run_id=p" / "events-000000000004.parquet", alter)
    report = store.run("f").verify()
    assert (ProblemKind.FORK_PREFIX, 5) in [(p.kind, p.seq) for p in report.problems]
    assert report.first_bad_seq == 5


def test_verify_a_fork_whose_parent_is_gone(store: Store) -> None:
    import shutil

    make_run(store, 4, run_id="p")
    fork(store, "p", 1, "f", 2)
    shutil.rmtree(store.runs_path / "run_id=p")
    report = store.run("f").verify()
    assert [(p.kind, p.seq) for p in report.problems] == [(ProblemKind.FORK_PREFIX, 0)]
    assert "cannot be read" in report.problems[0].message


def test_reopen_a_fork(store: Store) -> None:
    make_run(store, 4, run_id="p")
    fork(store, "p", 2, "f", 1)
    w = store.writer("f")
    assert w.seq == 4
    w.emit("note", {})
    w.close()
    run = store.run("f")
    assert len(run) == 5 and run.verify().ok
