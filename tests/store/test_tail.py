"""read_new: a run written by another process is followed by reading only what was added."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.store.tail import is_live, read_new


def test_new_events_join_the_run_without_rereading_it(tmp_path: Path, monkeypatch: Any) -> None:
    store = al.Store(tmp_path / "s")
    w = store.create_run(run_id="r", durability="none", segment_events=5)
    for k in range(3):
        w.emit("note", {"text": f"n{k}"})
    run = store.run("r")
    assert len(run) == 3
    table_before = run.table()
    reads: list[str] = []
    from agentlog.store import snapshot
    real = snapshot.SegmentCache.read

    def counting(self: Any, path: Path) -> Any:
        reads.append(path.name)
        return real(self, path)

    monkeypatch.setattr(snapshot.SegmentCache, "read", counting)
    w.emit("note", {"text": "n3"})
    new = read_new(run)
    assert [e.seq for e in new] == [3] and len(run) == 4 and reads == []  # the WAL's new line only
    assert run.table().num_rows == table_before.num_rows + 1  # the tables see it
    assert read_new(run) == []
    for k in range(4, 12):  # crosses a seal (every 5 events)
        w.emit("note", {"text": f"n{k}"})
    new = read_new(run)
    assert [e.seq for e in new] == list(range(4, 12)) and len(run) == 12
    assert [e.payload["text"] for e in run.iter_events()] == [f"n{k}" for k in range(12)]
    assert is_live(run)
    w.close()
    assert read_new(run) == [] and not is_live(run)
    assert run.verify().ok


def test_a_line_being_written_waits_for_the_next_read(tmp_path: Path) -> None:
    store = al.Store(tmp_path / "s")
    w = store.create_run(run_id="r", durability="none")
    w.emit("note", {"text": "a"})
    run = store.run("r")
    w.emit("note", {"text": "b"})
    wal = run.path / "wal.jsonl"
    data = wal.read_bytes()
    last = data[: -1].rfind(b"\n") + 1
    wal.write_bytes(data[: last + 10])  # as if the writer were in the middle of the line
    assert read_new(run) == [] and len(run) == 1
    wal.write_bytes(data)
    assert [e.payload["text"] for e in read_new(run)] == ["b"]


@pytest.mark.slow
def test_a_child_process_writes_while_we_read(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import time, agentlog as al
        store = al.Store({str(tmp_path / 's')!r})
        with store.create_run(run_id="child", durability="fsync", segment_events=7) as w:
            for k in range(30):
                w.emit("note", {{"k": k}})
                time.sleep(0.01)
    """)
    store = al.Store(tmp_path / "s")
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        import time
        deadline = time.monotonic() + 60
        while not (tmp_path / "s" / "runs" / "run_id=child" / "run.json").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        run = store.run("child")
        seen = [e.payload["k"] for e in run.iter_events()]
        while is_live(run) and time.monotonic() < deadline:
            seen += [e.payload["k"] for e in read_new(run)]
            time.sleep(0.02)
        seen += [e.payload["k"] for e in read_new(run)]
    finally:
        proc.wait(60)
    assert seen == list(range(30)) and len(run) == 30
