"""gc: reports by default, deletes with apply, keeps what any run (or a fork's parent) references."""

from __future__ import annotations

import os
import time

from _store_helpers import make_run

from agentlog.store import Store


def test_dry_run_then_apply(store: Store) -> None:
    w = store.create_run(run_id="g", blob_threshold=8)
    kept = w.emit("note", {"page": "referenced page"}).payload["page"]
    orphan = w.put_blob(b"never referenced")
    orphan2 = store.blobs.put("another orphan")
    w.close()
    stale = store.blobs.path(kept.digest).with_name(".abc.tmp-1-ff")
    stale.write_bytes(b"half")
    run_tmp = store.runs_path / "run_id=g" / ".run.json.tmp-1-aa"
    run_tmp.write_bytes(b"{}")

    dry = store.gc(min_age=0)
    assert (dry.applied, dry.blobs, dry.referenced) == (False, 2, 1)
    assert dry.bytes == orphan.size + orphan2.size
    assert dry.digests == tuple(sorted([orphan.digest, orphan2.digest]))
    assert (dry.temp_files, dry.temp_bytes) == (2, 6)
    assert store.blobs.exists(orphan.digest) and stale.exists()  # nothing deleted

    done = store.gc(apply=True, min_age=0)
    assert (done.applied, done.blobs, done.bytes) == (True, 2, dry.bytes)
    assert not store.blobs.exists(orphan.digest) and not store.blobs.exists(orphan2.digest)
    assert store.blobs.exists(kept.digest)
    assert not stale.exists() and not run_tmp.exists()
    assert store.gc(min_age=0).blobs == 0
    assert store.run("g").verify().ok
    assert str(done) == (f"gc (applied): 2 unreferenced blobs ({dry.bytes} bytes), "
                         "2 stale temp files (6 bytes); 1 blobs referenced")


def test_recent_files_are_kept(store: Store) -> None:
    store.blobs.put(b"just written")
    report = store.gc(apply=True)  # default grace period
    assert (report.blobs, report.kept_recent) == (0, 1) and len(list(store.blobs)) == 1
    old = time.time() - 3600
    for digest in store.blobs:
        os.utime(store.blobs.path(digest), (old, old))
    assert store.gc(apply=True).blobs == 1 and list(store.blobs) == []


def test_blobs_referenced_only_through_a_parent_prefix_are_kept(store: Store) -> None:
    w = store.create_run(run_id="parent", blob_threshold=8)
    prefix_blob = w.emit("note", {"page": "only in the prefix"}).payload["page"]
    w.emit("note", {"n": 1})
    w.close()
    f = store.create_run(run_id="fork", fork_of=("parent", 1))
    f.emit("note", {"own": "short"})
    f.close()
    assert store.gc(apply=True, min_age=0).blobs == 0
    assert store.blobs.exists(prefix_blob.digest)
    assert store.run("fork").verify().ok


def test_references_in_an_open_wal_count(store: Store) -> None:
    w = make_run(store, 0, run_id="live", close=False, blob_threshold=4)
    ref = w.emit("note", {"page": "in the WAL only"}).payload["page"]
    assert store.gc(apply=True, min_age=0).blobs == 0 and store.blobs.exists(ref.digest)
    w.close()
