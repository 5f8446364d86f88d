"""The fold's own read of a stored run: stretches of ``state.patch`` rows decoded in bulk, the
next segment read in a thread while this one is folded; states and errors as the events give."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from _store_helpers import rewrite_segment

import agentlog.store.run as run_module
from agentlog.errors import CorruptEventError, CorruptSegmentError, EventVersionError, ReducerError
from agentlog.events import BlobRef
from agentlog.folding import Reducers, diff_states, fold
from agentlog.store import Store

STANDARD = Reducers.standard()
BIG = 2**70  # past 64 bits: orjson would read it as a float
N = 230


def payload(i: int) -> dict[str, Any]:
    if i == 0:
        return {"ops": [{"op": "add", "path": "/log", "value": []}]}
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/log/-", "value": i},
                                 {"op": "add", "path": f"/k{i % 5}", "value": {"at": i}}]
    if i % 17 == 3:
        ops.append({"op": "add", "path": "/big", "value": BIG + i})
    if i % 23 == 7:
        ops.append({"op": "add", "path": "/text", "value": f"{i} " + "x" * 200})  # a blob
    return {"ops": ops}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A run of N events in segments of 40: patches, and a note every 13th event."""
    with Store(tmp_path).create_run(run_id="r", durability="none", segment_events=40,
                                    blob_threshold=128) as w:
        for i in range(N):
            if i % 13 == 12:
                w.emit("note", {"text": f"note {i}"})
            else:
                w.emit("state.patch", payload(i))
    return tmp_path


@pytest.fixture
def ahead(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Read ahead on any read, in stretches of 7 rows; the list counts the reads ahead."""
    calls: list[int] = []
    read_ahead = run_module._read_ahead

    def counted(jobs: list[Any]) -> Any:
        calls.append(len(jobs))
        return read_ahead(jobs)

    monkeypatch.setattr(run_module, "_AHEAD", 0)
    monkeypatch.setattr(run_module, "_LIGHT_BATCH", 7)
    monkeypatch.setattr(run_module, "_read_ahead", counted)
    return calls


@pytest.mark.parametrize("n", [N - 1, 0, 39, 40, 117, 200])
def test_state_at_of_a_fresh_run_equals_the_fold_of_its_events(root: Path, ahead: list[int], n: int) -> None:
    events = list(Store(root).run("r").iter_events(0, n + 1))
    got = Store(root).run("r").state_at(n, reducers=STANDARD)
    assert diff_states(got, fold(events, STANDARD)) == []
    if n >= 40:
        assert ahead, "a read over two segments or more is read ahead"
    last_big = max((i for i in range(n + 1) if i % 17 == 3 and i % 13 != 12), default=None)
    if last_big is not None:
        assert got["vars"]["big"] == BIG + last_big and type(got["vars"]["big"]) is int
    if n >= 7:
        assert isinstance(got["vars"]["text"], BlobRef)


def test_without_the_bulk_path_the_states_are_the_same(root: Path, ahead: list[int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Were ``state.patch`` at another version, every row would be read as an event and lifted."""
    monkeypatch.setattr(run_module, "_BULK", False)
    events = list(Store(root).run("r").iter_events())
    assert diff_states(Store(root).run("r").state_at(N - 1, reducers=STANDARD), fold(events, STANDARD)) == []


def test_a_bad_payload_in_a_segment_read_ahead_names_its_seq(root: Path, ahead: list[int]) -> None:
    [_, second, *_] = sorted((root / "runs" / "run_id=r").glob("events-*.parquet"))

    def spoil(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[5]["payload"] = '{"ops": [not json'
        return rows

    rewrite_segment(second, spoil)
    with pytest.raises(CorruptEventError) as caught:
        Store(root).run("r").state_at(N - 1, reducers=STANDARD)
    assert caught.value.seq == 45 and second.name in str(caught.value)


def test_a_damaged_segment_read_ahead_is_named(root: Path, ahead: list[int]) -> None:
    [_, _, third, *_] = sorted((root / "runs" / "run_id=r").glob("events-*.parquet"))
    data = third.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little") + 8  # Parquet: footer, its length, "PAR1"
    third.write_bytes(data[:4] + b"\0" * (len(data) - 4 - footer) + data[-footer:])  # the pages zeroed
    run = Store(root).run("r")
    assert len(run) == N  # the footer reads: the damage shows when the thread reads the pages
    with pytest.raises(CorruptSegmentError, match=third.name):
        run.state_at(N - 1, reducers=STANDARD)
    assert ahead


def test_a_patch_of_a_newer_version_in_a_bulk_stretch_is_refused_naming_its_seq(root: Path, ahead: list[int]) -> None:
    """The bulk read skips the lifting of each payload only where none is versioned: a patch
    written by a newer agentlog is refused, never folded as if it were this version's."""
    [_, second, *_] = sorted((root / "runs" / "run_id=r").glob("events-*.parquet"))

    def newer(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        payload = json.loads(rows[3]["payload"])
        rows[3]["payload"] = json.dumps({"$v": 99, **payload}, separators=(",", ":"), sort_keys=True)
        return rows

    rewrite_segment(second, newer)
    with pytest.raises(EventVersionError) as caught:
        Store(root).run("r").state_at(N - 1, reducers=STANDARD)
    assert str(caught.value).startswith("run r seq 43: state.patch $v: 99")


def test_a_fold_that_fails_midway_leaves_no_reading_thread(tmp_path: Path, ahead: list[int]) -> None:
    """A reducer error in the first segment ends the read: the thread reading the next one
    is joined before the error reaches the caller."""
    with Store(tmp_path).create_run(run_id="r", durability="none", segment_events=40) as w:
        w.emit("state.patch", payload(0))
        w.emit("state.patch", {"ops": [{"op": "remove", "path": "/missing"}]})
        for i in range(2, N):
            w.emit("state.patch", payload(i))
    with pytest.raises(ReducerError) as caught:
        Store(tmp_path).run("r").state_at(N - 1, reducers=STANDARD)
    assert caught.value.seq == 1 and ahead
    assert not [t for t in threading.enumerate() if t.name.startswith("agentlog-read-ahead")]


def varied(i: int) -> dict[str, Any]:
    """A patch of every kind of op, a path with escapes, an integer past 64 bits, a string
    with a dollar sign, and members RFC 6902 ignores; no blob (no value over the threshold)."""
    if i == 0:
        return {"ops": [{"op": "add", "path": "/log", "value": []}, {"op": "add", "path": "/a~1b", "value": {}}]}
    return {"ops": [
        {"op": "add", "path": "/log/-", "value": {"i": i, "big": BIG + i} if i % 9 == 0 else i},
        {"op": "add", "path": f"/a~1b/k{i % 4}", "value": f"${i}" if i % 11 == 0 else [i, None, 0.5]},
        {"op": "copy", "from": "/a~1b", "path": "/copied", "comment": "ignored"},
        {"op": "move", "from": "/copied", "path": "/moved"},
        {"op": "test", "path": "/log/0", "value": 1},
        {"op": "remove", "path": "/moved"},
        {"op": "replace", "path": "/last", "value": i} if i > 1 else {"op": "add", "path": "/last", "value": i},
    ]}


def test_patches_without_markers_are_read_as_structs_with_the_same_states(
        tmp_path: Path, ahead: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches that hold no ``"$"`` marker are decoded as msgspec structs (counted here); the
    states equal the fold of the events, which carry dicts; batches with a ``$`` in a string
    are read as dicts."""
    read: list[bool] = []
    patches = run_module._patches

    def counted(joined: bytes, n: int) -> Any:
        got = patches(joined, n)
        read.append(got is not None)
        return got

    monkeypatch.setattr(run_module, "_patches", counted)
    with Store(tmp_path).create_run(run_id="r", durability="none", segment_events=40) as w:
        for i in range(N):
            w.emit("state.patch", varied(i))
    events = list(Store(tmp_path).run("r").iter_events())
    for n in (0, 1, 60, N - 1):
        got = Store(tmp_path).run("r").state_at(n, reducers=STANDARD)
        assert diff_states(got, fold(events[:n + 1], STANDARD)) == []
    big = got["vars"]["log"][53]  # the value of seq 54
    assert big == {"i": 54, "big": BIG + 54} and type(big["big"]) is int
    assert read.count(True) > 10 and read.count(False) == 0, read  # the $ batches never reach _patches


def test_a_bad_op_in_a_struct_batch_names_its_seq(tmp_path: Path, ahead: list[int]) -> None:
    with Store(tmp_path).create_run(run_id="r", durability="none", segment_events=40) as w:
        for i in range(N):
            w.emit("state.patch", {"ops": [{"op": "add", "path": "/x"}]} if i == 101 else varied(i))
    with pytest.raises(ReducerError, match="no 'value' member") as caught:
        Store(tmp_path).run("r").state_at(N - 1, reducers=STANDARD)
    assert caught.value.seq == 101
