"""Opening a writer cleans the temp files a dead writer left, never one a live writer holds."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from _store_helpers import PYTHON, child_env, make_run

from agentlog.store import Store, tmp
from agentlog.store._fs import open_temp, temp_name


@pytest.fixture(autouse=True)
def fresh_process_state() -> None:
    """Each test behaves as a new process: the store-wide sweep has not run yet."""
    tmp._swept.clear()


def temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".tmp-" in p.name)


def plant_dead(path: Path, data: bytes = b"half") -> Path:
    """A temp file beside ``path`` as a killed writer leaves it (no process holds it)."""
    t = path.with_name(temp_name(path.name))
    t.parent.mkdir(parents=True, exist_ok=True)
    t.write_bytes(data)
    return t


def test_reopening_a_run_deletes_what_its_dead_writer_left(store: Store) -> None:
    w = make_run(store, 3, run_id="r", close=False)
    w._wal.close()
    w._lock.release()  # the writer died
    run_dir = store.runs_path / "run_id=r"
    for name in ("events-000000000000.parquet", "wal.jsonl", "run.json"):
        plant_dead(run_dir / name)
    assert len(temps(run_dir)) == 3
    store.writer("r").close()
    assert temps(store.path) == []
    assert len(store.run("r")) == 3


def test_the_first_writer_sweeps_other_runs_and_blobs(store: Store) -> None:
    make_run(store, 2, run_id="old")
    ref = store.blobs.put(b"x" * 100)
    dead_blob = plant_dead(store.blobs.path(ref.digest))
    dead_seg = plant_dead(store.runs_path / "run_id=old" / "events-000000000002.parquet")
    creating = store.runs_path / temp_name("run_id=ghost")
    creating.mkdir()
    (creating / ".lock").touch()
    past = time.time() - 3600
    os.utime(creating, (past, past))
    tmp._swept.clear()
    make_run(store, 1, run_id="new")
    assert not dead_blob.exists() and not dead_seg.exists() and not creating.exists()
    assert temps(store.path) == []


def test_a_live_writers_temp_files_are_kept(store: Store, tmp_path: Path) -> None:
    ref = store.blobs.put(b"y" * 100)
    target = store.blobs.path(ref.digest)
    # another process is in the middle of writing a blob: it holds its temp file's lock
    code = ("import sys, time; from pathlib import Path; from agentlog.store._fs import open_temp; "
            "fd, t = open_temp(Path(sys.argv[1])); print(t, flush=True); time.sleep(60)")
    child = subprocess.Popen([PYTHON, "-c", code, str(target)], env=child_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        live_blob = Path(child.stdout.readline().strip())
        # a run whose writer is alive (here, in this process) with a temp file in its folder
        w = make_run(store, 2, run_id="busy", close=False)
        live_seg = plant_dead(store.runs_path / "run_id=busy" / "events-000000000000.parquet")
        # a run folder being created right now: young, its lock held
        creating = store.runs_path / temp_name("run_id=being-made")
        creating.mkdir()
        from agentlog.store.lock import RunLock
        held = RunLock.acquire(creating, "being-made")
        tmp._swept.clear()
        removed = tmp.sweep_store(store)
        assert removed == []
        assert live_blob.exists() and live_seg.exists() and creating.exists()
        held.release()
        w.close()
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    # its writer is gone now: the next sweep takes it
    assert tmp.remove_if_dead(live_blob) and not live_blob.exists()


def test_a_young_creation_folder_without_its_lock_is_kept(store: Store) -> None:
    make_run(store, 1, run_id="a")
    creating = store.runs_path / temp_name("run_id=just-made")
    creating.mkdir()  # its creator has not taken the lock yet
    assert tmp.sweep_store(store) == [] and creating.exists()


def test_a_temp_file_a_sweep_took_is_replaced_by_another_name(tmp_path: Path) -> None:
    target = tmp_path / "f"
    fd, t = open_temp(target)
    try:
        assert not tmp.remove_if_dead(t)  # we hold it
    finally:
        os.close(fd)
    assert tmp.remove_if_dead(t) and not t.exists()


def test_dead_checkpoint_writers_temp_files_go_live_ones_stay(store: Store, tmp_path: Path) -> None:
    """A writer killed while it wrote a checkpoint leaves a pack or a manifest half-written in
    ``checkpoints/``: the run's next writer (and the first writer's sweep, for other runs)
    removes it; one that a live ``agentlog checkpoint`` holds stays."""
    make_run(store, 2, run_id="mine", close=True)
    make_run(store, 2, run_id="other", close=True)
    mine = store.runs_path / "run_id=mine" / "checkpoints"
    other = store.runs_path / "run_id=other" / "checkpoints"
    dead_pack = plant_dead(mine / "nodes-000000000001-0123456789abcdef.pack")
    dead_manifest = plant_dead(other / "ckpt-000000000001-0123456789abcdef.json")
    fd, live = open_temp(other / "nodes-000000000001-0123456789abcdef.pack")  # held, as a live builder does
    try:
        tmp._swept.clear()
        store.writer("mine").close()
        assert not dead_pack.exists() and not dead_manifest.exists()
        assert live.exists()
    finally:
        os.close(fd)
    assert [Path(t).name for t in temps(store.path)] == [live.name]
    store.writer("other").close()
    assert temps(store.path) == []
