"""A durable writer's WAL ends in zeros it writes its lines over (so a line's commit is an
fdatasync with no new file size to journal): what readers, a reopening writer and verify make
of those zeros, of a crash that leaves them, and of the gap a power loss can leave in them."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from _store_helpers import make_run

from agentlog.errors import CorruptWALError
from agentlog.store import Store, TornWALWarning
from agentlog.store.tail import read_new
from agentlog.store.wal import ZEROS, unpadded


def wal_of(store: Store, run_id: str) -> Path:
    return store.runs_path / f"run_id={run_id}" / "wal.jsonl"


def abandon(writer: Any) -> None:
    """What a killed process leaves of ``writer``: its WAL as it had it (zeros included: no
    close(), so nothing is cut or sealed), its lock released."""
    os.close(writer._wal._fd)
    writer._wal._fd = -1
    writer._lock.release()


def killed(store: Store, n: int, *, run_id: str = "k") -> tuple[Path, bytes]:
    """A run of ``n`` events whose process died (:func:`abandon`). Returns the WAL's path and
    its lines."""
    abandon(make_run(store, n, run_id=run_id, close=False))
    wal = wal_of(store, run_id)
    return wal, unpadded(wal.read_bytes())


@pytest.mark.parametrize("durability", ["fsync", "batch"])
def test_an_open_durable_writers_wal_is_its_lines_then_zeros(store: Store, durability: str) -> None:
    w = make_run(store, 3, run_id="z", close=False, durability=durability)
    data = wal_of(store, "z").read_bytes()
    lines = unpadded(data)
    assert len(data) >= ZEROS and data[len(lines):] == bytes(len(data) - len(lines))
    assert len(lines.splitlines()) == 3 and lines.endswith(b"\n")
    run = store.run("z")
    assert [e.payload["i"] for e in run.iter_events()] == [0, 1, 2]
    w.emit("note", {"i": 3})
    assert [e.payload["i"] for e in read_new(run)] == [3]  # a live reader skips the zeros too
    w.close()
    assert not wal_of(store, "z").exists() and store.run("z").verify().ok


def test_durability_none_appends_with_no_zeros(store: Store) -> None:
    w = make_run(store, 2, run_id="n", close=False, durability="none")
    data = wal_of(store, "n").read_bytes()
    assert unpadded(data) == data and len(data.splitlines()) == 2
    w.close()


def test_lines_are_committed_by_fdatasync_and_the_file_grows_by_an_fsync_per_zeros(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog.store import wal as wal_module

    calls: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(wal_module.os, name)
        monkeypatch.setattr(wal_module.os, name,
                            lambda fd, name=name, real=real: (calls.append(name), real(fd))[1])
    w = make_run(store, 0, run_id="g", close=False)
    calls.clear()
    events = ZEROS // 4000 + 5  # lines of over 4,000 bytes: past the first zeros
    for i in range(events):
        w.emit("note", {"i": i, "text": "x" * 4000})
    assert calls.count("fdatasync") == events
    assert calls.count("fsync") == 1  # the file grown once, by ZEROS more zeros
    assert len(unpadded(wal_of(store, "g").read_bytes())) > ZEROS
    assert os.path.getsize(wal_of(store, "g")) == 2 * ZEROS
    w.close()
    assert len(store.run("g")) == events


def test_a_crash_leaves_zeros_that_readers_and_the_next_writer_ignore(store: Store) -> None:
    wal, lines = killed(store, 4)
    assert wal.stat().st_size > len(lines)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TornWALWarning)  # zeros are not a torn line
        assert len(store.run("k")) == 4
        w = store.writer("k")
    w.emit("note", {"i": 4})
    w.close()
    run = store.run("k")
    assert [e.payload["i"] for e in run.iter_events()] == [0, 1, 2, 3, 4] and run.verify().ok


def test_a_line_torn_over_the_zeros_is_moved_aside_without_them(store: Store) -> None:
    wal, lines = killed(store, 3)
    torn = b'{"hash":"abc","event":{"actor":nu'
    with open(wal, "r+b") as f:  # the write died after these bytes
        f.seek(len(lines))
        f.write(torn)
    with pytest.warns(TornWALWarning, match=r"line 4 is torn"):
        assert len(store.run("k")) == 3
    with pytest.warns(TornWALWarning, match=r"torn last line 4 \(\d+ bytes\) moved to .*wal\.torn-1"):
        w = store.writer("k")
    assert (wal.parent / "wal.torn-1").read_bytes() == torn
    w.close()
    assert len(store.run("k")) == 3 and store.run("k").verify().ok


def test_the_gap_a_power_loss_leaves_before_a_page_it_kept_is_a_torn_tail(store: Store) -> None:
    """Lines written unsynced over the zeros: the disk kept the page of a later one and not
    the page before it. Everything from the line the gap starts in is set aside, not dropped,
    and the events before it stay the run's."""
    wal, lines = killed(store, 3)
    page = (len(lines) // 4096 + 2) * 4096
    residue = b'ail","seq":9,"span_id":null,"ts":1,"type":"note"}}\n'
    with open(wal, "r+b") as f:
        f.seek(page)
        f.write(residue)
    with pytest.warns(TornWALWarning):
        assert len(store.run("k")) == 3
    with pytest.warns(TornWALWarning, match=r"moved to .*wal\.torn-1"):
        w = store.writer("k")
    assert (wal.parent / "wal.torn-1").read_bytes() == residue
    w.emit("note", {"i": 3})
    w.close()
    run = store.run("k")
    assert [e.payload["i"] for e in run.iter_events()] == [0, 1, 2, 3] and run.verify().ok


def test_a_nul_inside_the_lines_is_still_corruption(store: Store) -> None:
    """Only a gap of zeros up to a page boundary is a power loss's: a NUL written into a line
    is damage, refused as before, and nothing is changed."""
    wal, lines = killed(store, 3)
    first = lines.index(b"\n")
    damaged = lines[:first - 5] + b"\0" + lines[first - 4:]
    wal.write_bytes(damaged)
    with pytest.raises(CorruptWALError, match=r"wal\.jsonl:1: not a well-formed WAL line"):
        len(store.run("k"))
    with pytest.raises(CorruptWALError):
        store.writer("k")
    assert wal.read_bytes() == damaged


def test_a_wal_left_by_a_writer_that_could_not_seal_is_lines_only(store: Store) -> None:
    w = make_run(store, 2, run_id="l", close=False)
    w._wal.close()  # what close() does when the seal fails: the WAL stays, the run open
    w._lock.release()
    data = wal_of(store, "l").read_bytes()
    assert data == unpadded(data) and len(data.splitlines()) == 2


def test_bytes_written_over_the_zeros_after_the_last_line_are_a_torn_tail(store: Store) -> None:
    """A stray byte in the zeros (not on a page boundary) after whole lines: no line of the
    writer's, so set aside as torn, and the run stays readable and writable."""
    wal, lines = killed(store, 3)
    stray = len(lines) + 1000 + (4096 - (len(lines) + 1000) % 4096) // 2  # mid-page
    with open(wal, "r+b") as f:
        f.seek(stray)
        f.write(b"\n")
    with pytest.warns(TornWALWarning):
        assert len(store.run("k")) == 3
    with pytest.warns(TornWALWarning, match=r"moved to .*wal\.torn-1"):
        w = store.writer("k")
    assert (wal.parent / "wal.torn-1").read_bytes() == b"\n"
    w.close()
    assert len(store.run("k")) == 3 and store.run("k").verify().ok


def test_a_run_left_with_zeros_reopened_with_durability_none_appends_over_them(store: Store) -> None:
    """An appender with ``none`` appends: it must not write after the zeros a killed durable
    writer left, where readers would take its lines for a torn tail."""
    wal, lines = killed(store, 2)
    w = store.writer("k", durability="none")
    w.emit("note", {"i": 2})
    data = wal.read_bytes()
    assert data == unpadded(data) and data.startswith(lines) and len(data.splitlines()) == 3
    abandon(w)  # killed again
    with warnings.catch_warnings():
        warnings.simplefilter("error", TornWALWarning)
        assert [e.payload["i"] for e in store.run("k").iter_events()] == [0, 1, 2]
