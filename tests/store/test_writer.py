"""The writer: durability modes, sealing, run.json, close, reopen, one writer per run."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from _store_helpers import PYTHON, T0, FixedClock, child_env, make_run

from agentlog.chain import GENESIS
from agentlog.errors import RunClosedError, RunExistsError, RunLockedError
from agentlog.events import Note
from agentlog.store import Durability, Store
from agentlog.store.wal import unpadded
from agentlog.store.writer import Emit


def test_durability_accepts_strings_and_lists_valid_values() -> None:
    assert Durability("fsync") is Durability.FSYNC and Durability("BATCH") is Durability.BATCH
    assert Durability.NONE == "none"
    with pytest.raises(ValueError) as info:
        Durability("sometimes")
    assert str(info.value) == "durability 'sometimes' is not one of 'fsync', 'batch', 'none'"


def test_bad_durability_in_create_run(store: Store) -> None:
    with pytest.raises(ValueError, match="not one of 'fsync', 'batch', 'none'"):
        store.create_run(durability="always")
    assert not store.path.exists()


@pytest.mark.parametrize("mode", ["fsync", "batch", "none"])
def test_every_mode_records_the_same_run(tmp_path: Path, mode: str) -> None:
    st = Store(tmp_path / mode)
    w = st.create_run(run_id="m", durability=mode, clock=FixedClock(), segment_events=4)
    for i in range(10):
        w.emit("note", {"i": i})
    assert len(w.run) == 10  # written to the OS at once in every mode
    w.flush()
    w.close()
    ref = Store(tmp_path / "ref")
    make_run(ref, 10, run_id="m", segment_events=4, payload=lambda i: {"i": i})
    assert st.run("m").head == ref.run("m").head


def test_batch_group_commit_counts_and_timer(store: Store, fsyncs: list[int]) -> None:
    synced = fsyncs
    w = store.create_run(run_id="b", durability="batch")
    w._wal._batch_events, w._wal._batch_s = 5, 3600.0  # groups of 5; no timer
    fd = w._wal._fd
    synced.clear()  # fds of files closed before may have had the same number
    for i in range(12):
        w.emit("note", {"i": i})
    assert synced.count(fd) == 2  # after 5 and 10
    w.flush()
    assert synced.count(fd) == 3  # the last 2
    w.flush()
    assert synced.count(fd) == 3  # nothing pending
    w.close()

    t = store.create_run(run_id="t", durability="batch")
    t._wal._batch_s = 0.01
    fd = t._wal._fd
    synced.clear()
    t.emit("note", {})
    deadline = time.monotonic() + 30
    while synced.count(fd) < 1 and time.monotonic() < deadline:  # the timer commits it
        time.sleep(0.005)
    assert synced.count(fd) == 1
    t.close()


def test_fsync_mode_syncs_every_line(store: Store, fsyncs: list[int]) -> None:
    synced = fsyncs
    w = store.create_run(run_id="f")
    fd = w._wal._fd
    synced.clear()
    for i in range(3):
        w.emit("note", {"i": i})
        assert synced.count(fd) == i + 1
    w.close()


@pytest.mark.usefixtures("no_background_write")  # fsyncs counted exactly
@pytest.mark.parametrize("end", ["synced append", "flush", "close"])
def test_an_unsynced_batch_is_written_at_once_and_fsynced_by_the_next_sync(
        store: Store, fsyncs: list[int], end: str) -> None:
    """``emit_many(..., sync=False)``: the lines reach the file (a reader sees them, a killed
    process keeps them) with no fsync; the next synced append, flush or close fsyncs them."""
    synced = fsyncs
    w = store.create_run(run_id="u")
    fd = w._wal._fd
    synced.clear()
    w.emit_many([Emit(Note(extra={"text": "asked"})), Emit(Note(extra={"text": "asked too"}))], sync=False)
    assert synced == []
    assert [e.payload["text"] for e in store.run("u").iter_events()] == ["asked", "asked too"]
    if end == "close":
        w.close()  # the WAL's fsync comes first, before the seal (whose files reuse fd numbers)
        assert synced[0] == fd
        return
    if end == "synced append":
        w.emit_many([Emit(Note(extra={"text": "answered"}))])
    else:
        w.flush()
    assert synced == [fd]
    w.close()


def test_an_unsynced_batch_no_write_syncs_is_fsynced_within_hold_ms(store: Store, fsyncs: list[int]) -> None:
    """When no later write syncs them, the writer's thread fsyncs the lines written with
    ``sync=False`` (``HOLD_MS`` after the first of them), once."""
    w = store.create_run(run_id="later")
    fd = w._wal._fd
    fsyncs.clear()
    w.emit_many([Emit(Note(extra={"text": "asked"}))], sync=False)
    w.emit_many([Emit(Note(extra={"text": "asked again"}))], sync=False)
    deadline = time.monotonic() + 30
    while fsyncs.count(fd) < 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert fsyncs.count(fd) == 1
    w.flush()
    assert fsyncs.count(fd) == 1  # nothing left unsynced
    w.close()


@pytest.mark.parametrize("mode", ["batch", "none"])
def test_sync_false_changes_nothing_in_the_other_modes(store: Store, fsyncs: list[int], mode: str) -> None:
    def count(sync: bool) -> int:
        fsyncs.clear()
        w = store.create_run(run_id=f"{mode}-{sync}", durability=mode)
        fd = w._wal._fd
        for i in range(3):
            w.emit_many([Emit(Note(extra={"text": str(i)}))], sync=sync)
        w.flush()
        w.close()
        return fsyncs.count(fd)

    assert count(False) == count(True)


def test_run_json_fields(store: Store) -> None:
    clock = FixedClock()
    w = store.create_run(run_id="meta", name="triage", tags=["a", "b"], clock=clock)
    path = store.runs_path / "run_id=meta" / "run.json"
    meta = json.loads(path.read_text())
    assert meta == {"schema_version": 1, "id": "meta", "name": "triage",
                    "created": "2026-12-02T20:00:48.000000Z", "tags": ["a", "b"], "parent": None,
                    "head": GENESIS, "count": 0, "status": "open", "closed": None,
                    "writer": {"segment_events": 65536, "blob_threshold": 16384, "redact": []}}
    w.emit("note", {})
    w.close()
    meta = json.loads(path.read_text())
    assert (meta["status"], meta["count"], meta["head"]) == ("closed", 1, store.run("meta").head)
    assert meta["closed"] == "2026-12-02T20:00:48.002000Z"
    assert store.run("meta").meta == meta


def test_default_run_id_from_clock_and_random(store: Store) -> None:
    a = store.create_run(clock=lambda: T0)
    b = store.create_run(clock=lambda: T0)
    assert re.fullmatch(r"20261202-200048-[0-9a-f]{8}", a.id) and a.id != b.id
    a.close(), b.close()


@pytest.mark.parametrize("bad", ["", "-x", "a/b", "..", "a b", "x" * 129, "é"])
def test_run_ids_are_validated(store: Store, bad: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        store.create_run(run_id=bad)


def test_run_exists(store: Store) -> None:
    make_run(store, 1, run_id="dup")
    with pytest.raises(RunExistsError) as info:
        store.create_run(run_id="dup")
    assert str(info.value) == "run 'dup' already exists; open it with store.writer('dup') to append"
    assert [p.name for p in store.runs_path.iterdir()] == ["run_id=dup"]


def test_seals_every_segment_events_and_on_close(store: Store) -> None:
    w = make_run(store, 0, run_id="s", segment_events=3, close=False)
    run_dir = store.runs_path / "run_id=s"
    for i in range(7):
        w.emit("note", {"i": i})
    assert sorted(p.name for p in run_dir.glob("events-*")) == [
        "events-000000000000.parquet", "events-000000000003.parquet"]
    assert len(unpadded((run_dir / "wal.jsonl").read_bytes()).splitlines()) == 1
    w.close()
    assert sorted(p.name for p in run_dir.iterdir()) == [
        ".lock", "events-000000000000.parquet", "events-000000000003.parquet",
        "events-000000000006.parquet", "run.json"]


def test_close_is_idempotent_and_emit_after_close_fails(store: Store) -> None:
    w = make_run(store, 2, run_id="c", close=False)
    w.close()
    w.close()
    assert w.closed
    with pytest.raises(RunClosedError) as info:
        w.emit("note", {})
    assert str(info.value) == "run 'c': this writer is closed; open a new one with store.writer('c')"
    with pytest.raises(RunClosedError):
        w.put_blob(b"x")


def test_context_manager_records_failure(store: Store) -> None:
    with pytest.raises(KeyError), store.create_run(run_id="ctx") as w:
        w.emit("note", {"before": "the error"})
        raise KeyError("boom")
    assert w.closed
    run = store.run("ctx")
    assert run.status == "failed" and len(run) == 1 and run.verify().ok
    with store.create_run(run_id="ctx2") as w2:
        w2.emit("note", {})
    assert store.run("ctx2").status == "closed"


def test_reopen_and_append(store: Store) -> None:
    make_run(store, 5, run_id="re", segment_events=2)
    w = store.writer("re")
    assert (w.seq, w.head) == (5, store.run("re").head)
    assert store.run("re").status == "open"
    e = w.emit("x.granted", {"by": "me"})
    assert e.seq == 5
    w.close("closed")
    run = store.run("re")
    assert len(run) == 6 and run.verify().ok and run.status == "closed"


def test_reopen_a_crashed_run_keeps_the_wal(store: Store) -> None:
    w = make_run(store, 5, run_id="cr", segment_events=3, close=False)
    w._lock.release()  # simulate a dead process: lock gone, WAL and segment left behind
    w2 = store.writer("cr")
    assert w2.seq == 5
    w2.emit("note", {"after": "crash"})
    w2.close()
    run = store.run("cr")
    assert [e.seq for e in run.iter_events()] == list(range(6)) and run.verify().ok


def test_second_writer_in_this_process_is_refused(store: Store) -> None:
    w = make_run(store, 1, run_id="lk", close=False)
    with pytest.raises(RunLockedError) as info:
        store.writer("lk")
    assert info.value.run_id == "lk" and "one writer per run" in str(info.value)
    w.close()
    store.writer("lk").close()  # released on close


_HOLD = """
import sys
from agentlog.store import Store
w = Store(sys.argv[1]).writer("held")
print("locked", flush=True)
sys.stdin.readline()
w.close()
"""

_TRY = """
import sys
from agentlog.errors import RunLockedError
from agentlog.store import Store
try:
    Store(sys.argv[1]).writer("held")
except RunLockedError as exc:
    print("refused:", exc)
"""


def test_second_writer_in_another_process_is_refused(store: Store) -> None:
    make_run(store, 1, run_id="held")
    holder = subprocess.Popen([PYTHON, "-c", _HOLD, str(store.path)], env=child_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError):
            store.writer("held")
        other = subprocess.run([PYTHON, "-c", _TRY, str(store.path)], env=child_env(),
                               capture_output=True, text=True, timeout=60, check=False)
        assert other.stdout.startswith("refused: run 'held' is being written by another writer")
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    store.writer("held").close()


def test_writer_repr_and_run_property(store: Store) -> None:
    w = make_run(store, 2, run_id="rp", close=False)
    assert repr(w) == "<RunWriter rp next seq 2 fsync>"
    assert len(w.run) == 2
    w.close()
    assert repr(w) == "<RunWriter rp closed fsync>"


def test_a_failed_seal_keeps_the_events_and_is_retried(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    import agentlog.store.writer as writer_module

    real = writer_module.write_segment
    calls = []

    def flaky(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module, "write_segment", flaky)
    w = make_run(store, 2, run_id="full", segment_events=3, close=False)
    with pytest.warns(RuntimeWarning, match="sealing a segment failed"):
        e = w.emit("note", {"third": True})
    assert e.seq == 2 and w.seq == 3 and len(w.run) == 3
    w.emit("note", {"fourth": True})  # the seal is retried, and works
    assert [p.name for p in w.path.glob("events-*")] == ["events-000000000000.parquet"]
    w.close()
    run = store.run("full")
    assert len(run) == 4 and run.verify().ok


@pytest.mark.parametrize(("size", "inline", "kept"), [
    (40_000, False, False), (40_000, True, True), (1 << 20, True, True), ((1 << 20) + 1, True, False)])
def test_an_inline_emit_keeps_its_strings_in_the_event_up_to_inline_max(tmp_path: Path, size: int,
                                                                        inline: bool, kept: bool) -> None:
    from agentlog.events import HTTPResponse
    from agentlog.store.writer import INLINE_MAX

    assert INLINE_MAX == 1 << 20
    text = "y" * size
    with Store(tmp_path).create_run(run_id="r", durability="none") as w:  # threshold: 16 KiB
        w.emit_many([Emit(HTTPResponse(key="k", status=200, headers={}, body=text), inline=inline)])
    stored = Store(tmp_path).run("r").event(0)
    assert isinstance(stored.payload["body"], str) is kept
    assert HTTPResponse.of(stored).content == text.encode()
    assert bool([p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]) is not kept
