"""A team store on S3 (moto's server on loopback): push, push again, resume a killed push, two
pushes at once, a clash, pull, and reading runs, state, views and tables remotely."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.errors import ReadOnlyStoreError, RunIdClashError
from agentlog.examples import sample_store
from agentlog.store.push import IDENTITY


def _local(tmp_path: Path) -> al.Store:
    """The sample store (forks, blobs, several providers) plus a run with fold checkpoints and a
    big blob."""
    store = al.Store(tmp_path / "local")
    shutil.copytree(sample_store().path, store.path)
    with store.create_run(run_id="big-blob", segment_events=4) as w:
        for i in range(10):
            w.emit("state.patch", {"ops": [{"op": "add", "path": f"/k{i}", "value": "x" * 20_000 + str(i)}]})
    from agentlog.folding import Reducers
    from agentlog.store.checkpoints import build_checkpoints
    build_checkpoints(store.run("big-blob"), Reducers.default(), every=3)
    return store


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentlog.cli", *args], check=False, capture_output=True,
                          text=True, env=env, timeout=120)


def test_push_twice_and_read_everything_remotely(tmp_path: Path, bucket: str) -> None:
    local = _local(tmp_path)
    url = f"{bucket}/team"
    first = local.push(url)
    assert first.runs and set(first.runs) == set(local.list_runs())
    assert first.files_sent > 0 and first.files_skipped == 0 and first.blobs_sent > 0
    again = local.push(url)
    assert again.files_sent == 0 and again.bytes_sent == 0
    assert again.bytes_skipped == first.bytes_sent and again.blobs_skipped == first.blobs_sent

    remote = al.Store(url)
    assert remote.url == url and sorted(remote.list_runs()) == sorted(local.list_runs())
    for run_id in local.list_runs():
        mine, theirs = local.run(run_id), remote.run(run_id)
        assert theirs.table().equals(mine.table()), run_id
        assert theirs.verify().ok, run_id
        last = len(mine) - 1
        for n in (0, last // 2, last):
            assert theirs.state_at(n) == mine.state_at(n), (run_id, n)
        assert theirs.events.equals(mine.events)
    big = remote.run("big-blob")
    assert big.event(9).payload == local.run("big-blob").event(9).payload  # blobs read on demand
    assert [c.seq for c in _checkpoints(big)] == [c.seq for c in _checkpoints(local.run("big-blob"))]
    assert remote.run("sre-0001").waterfall() is not None and remote.run("sre-0001").spans().equals(
        local.run("sre-0001").spans())
    assert all(r.ok for r in remote.verify().values())
    # the store-wide tables through DuckDB, on S3
    assert remote.runs().equals(local.runs())
    assert remote.cost().equals(local.cost())
    query = "select run_id, count(*) as n from events group by run_id order by run_id"
    assert remote.sql(query).equals(local.sql(query))


def _checkpoints(run: al.Run) -> list[object]:
    from agentlog.store.checkpoints import list_checkpoints
    return list_checkpoints(run.path, run.store.fs)


def test_a_remote_store_does_not_record(bucket: str) -> None:
    remote = al.Store(f"{bucket}/team")
    with pytest.raises(ReadOnlyStoreError, match=f"{bucket}/team is a remote store.*push"):
        remote.create_run(run_id="x")
    with pytest.raises(ReadOnlyStoreError):
        remote.blobs.put("hello")
    with pytest.raises(ReadOnlyStoreError, match="cannot append"):
        remote.writer("x")
    with pytest.raises(ReadOnlyStoreError, match="cannot collect garbage"):
        remote.gc()


def test_an_open_run_goes_up_to_its_last_sealed_segment(tmp_path: Path, bucket: str) -> None:
    local = al.Store(tmp_path / "local")
    url = f"{bucket}/team"
    w = local.create_run(run_id="live", segment_events=5)
    for i in range(12):
        w.emit("note", {"text": f"n{i}"})
    local.push(url)
    remote = al.Store(url)
    assert len(remote.run("live")) == 10 and remote.run("live").status == "open"
    assert remote.run("live").verify().ok
    w.close()
    local.push(url)
    again = al.Store(url).run("live")
    assert len(again) == 12 and again.status == "closed" and again.verify().ok


def test_a_different_run_under_the_same_id_is_refused(tmp_path: Path, any_bucket: str) -> None:
    url = f"{any_bucket}/team"
    a, b = al.Store(tmp_path / "a"), al.Store(tmp_path / "b")
    with a.create_run(run_id="same", clock=lambda: 1000.0) as w:
        w.emit("note", {"text": "a"})
    with b.create_run(run_id="same", clock=lambda: 2000.0) as w:
        w.emit("note", {"text": "b"})
    a.push(url)
    with pytest.raises(RunIdClashError, match="'same'.*another run with this id"):
        b.push(url)
    assert al.Store(url).run("same").event(0).payload == {"text": "a"}  # nothing overwritten


def test_pull_brings_a_fork_back_whole(tmp_path: Path, bucket: str) -> None:
    local = _local(tmp_path)
    url = f"{bucket}/team"
    local.push(url)
    fork = next(r for r in local.list_runs() if local.run(r).fork_seq is not None)
    other = al.Store(tmp_path / "other")
    report = other.pull(url, fork)
    assert fork in report.runs and len(report.runs) >= 2  # with its parent
    assert other.run(fork).table().equals(local.run(fork).table())
    assert other.run(fork).verify().ok
    assert other.pull(url, fork).files_sent == 0  # pulled again: all there
    assert other.run(fork).verify().ok


def test_pull_from_a_store_in_a_folder(tmp_path: Path) -> None:
    """A team store may be a shared folder (a path, or file://): a fork pulled from one comes
    whole with its parent, and again adds nothing."""
    local = _local(tmp_path)
    shared = tmp_path / "shared"
    local.push(str(shared))
    fork = next(r for r in local.list_runs() if local.run(r).fork_seq is not None)
    for url in (str(shared), f"file://{shared}"):
        other = al.Store(tmp_path / f"other-{len(url)}")
        report = other.pull(url, fork)
        assert fork in report.runs and len(report.runs) >= 2 and report.files_sent > 0
        assert other.run(fork).table().equals(local.run(fork).table())
        assert other.run(fork).verify().ok
        assert other.pull(url, fork).files_sent == 0


_SLOW_PUSH = """
import sys, time, s3fs
real = s3fs.S3FileSystem.put_file
def slow(self, *a, **k):  # a slow network: every file takes a while
    time.sleep(0.3)
    return real(self, *a, **k)
s3fs.S3FileSystem.put_file = slow
from agentlog.cli import main
sys.exit(main(["--store", sys.argv[1], "push", sys.argv[2]]))
"""


def test_a_killed_push_resumes(tmp_path: Path, bucket: str, s3_env: dict[str, str]) -> None:
    local = _local(tmp_path)
    url = f"{bucket}/team"
    env = dict(os.environ, **s3_env)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_PUSH, str(local.path), url], env=env)
    remote = al.Store(url)
    deadline = time.monotonic() + 60
    def data() -> list[str]:  # what the push copied (not the ids it claimed first)
        return [k for k in remote.fs.find(remote.path) if not k.endswith(IDENTITY)]  # type: ignore[attr-defined]

    while not data() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    held = data()
    assert held, "the push sent nothing before it was killed"
    assert len(remote.list_runs()) < len(local.list_runs()), "the push finished before it was killed"
    resumed = local.push(url)
    assert resumed.files_skipped >= len(held) - 1 and resumed.files_sent > 0
    remote = al.Store(url)
    assert sorted(remote.list_runs()) == sorted(local.list_runs())
    bad = {k: str(r) for k, r in remote.verify().items() if not r.ok}
    assert not bad, bad
    n = "select count(*) as n from events"
    assert remote.sql(n)["n"][0] == local.sql(n)["n"][0]  # nothing duplicated


def test_two_machines_push_overlapping_stores_at_once(tmp_path: Path, bucket: str,
                                                      s3_env: dict[str, str]) -> None:
    base = _local(tmp_path)
    stores = []
    for name in ("m1", "m2"):
        store = al.Store(tmp_path / name)
        shutil.copytree(base.path, store.path)  # the runs both machines hold
        with store.create_run(run_id=f"only-{name}") as w:
            w.emit("note", {"text": "y" * 30_000})  # a blob both push...
            w.emit("note", {"text": name})
        stores.append(store)
    url = f"{bucket}/team"
    env = dict(os.environ, **s3_env)
    procs = [subprocess.Popen([sys.executable, "-m", "agentlog.cli", "--store", str(s.path), "push", url, "--json"],
                              env=env, stdout=subprocess.PIPE, text=True) for s in stores]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    reports = [json.loads(o) for o in outs]
    assert all(r["files_sent"] > 0 for r in reports)
    remote = al.Store(url)
    want = sorted(set(base.list_runs()) | {"only-m1", "only-m2"})
    assert sorted(remote.list_runs()) == want
    assert all(r.ok for r in remote.verify().values())
    n = "select count(*) as n from events"
    assert remote.sql(n)["n"][0] == base.sql(n)["n"][0] + 4
    # verify --all URL fans out over the runs from the command line
    out = _cli("verify", "--all", url, "--jobs", "4", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert sorted(r["run_id"] for r in json.loads(out.stdout) if r["ok"]) == want


def test_verify_all_url_finds_a_damaged_run(tmp_path: Path, bucket: str, s3_env: dict[str, str]) -> None:
    local = _local(tmp_path)
    url = f"{bucket}/team"
    local.push(url)
    remote = al.Store(url)
    seg = next(k for k in remote.fs.find(remote.runs_path / "run_id=sre-0002")  # type: ignore[attr-defined]
               if k.endswith(".parquet"))
    fs = remote.fs.fs  # type: ignore[attr-defined]
    fs.pipe_file(seg, fs.cat_file(seg)[:-40])  # a truncated segment
    out = _cli("verify", "--all", url, env=dict(os.environ, **s3_env))
    assert out.returncode == 1
    assert "run sre-0002:" in out.stdout and "problem" in out.stdout


def test_follow_pushes_what_each_seal_adds(tmp_path: Path, bucket: str) -> None:
    from agentlog.store.push import PushReport, follow

    local = al.Store(tmp_path / "local")
    url = f"{bucket}/team"
    w = local.create_run(run_id="growing", segment_events=5)
    seen: list[int] = []

    def grow(report: PushReport) -> None:  # between two pushes, the run seals one more segment
        seen.append(len(al.Store(url).run("growing")) if "growing" in al.Store(url).list_runs() else 0)
        for i in range(5):
            w.emit("note", {"text": f"{len(seen)}-{i}"})

    for i in range(7):
        w.emit("note", {"text": f"start {i}"})
    total = follow(local, url, interval=0.05, rounds=3, on_round=grow)
    assert seen == [5, 10, 15]  # each round pushed up to the last sealed segment
    assert total.files_sent >= 3 and total.runs == ["growing"]  # a segment a round, and run.json
    w.close()
    local.push(url)
    assert al.Store(url).run("growing").verify().ok and len(al.Store(url).run("growing")) == 22


def test_al_open_takes_a_remote_run_folder(tmp_path: Path) -> None:
    local = al.Store(tmp_path / "local")
    with local.create_run(run_id="one") as w:
        w.emit("note", {"text": "hi"})
    local.push("memory://open-test/team")
    assert al.open("memory://open-test/team/runs/run_id=one").event(0).payload == {"text": "hi"}
    assert al.open("memory://open-test/team").id == "one"
    assert al.open("memory://open-test/team", "one").store.url == "memory://open-test/team"


def test_two_runs_under_one_id_pushed_at_once_one_wins(tmp_path: Path, bucket: str,
                                                       s3_env: dict[str, str]) -> None:
    url = f"{bucket}/team"
    stores = []
    for n in (1, 2):
        store = al.Store(tmp_path / f"m{n}")
        with store.create_run(run_id="same", clock=lambda n=n: 1000.0 * n) as w:
            for i in range(20):
                w.emit("note", {"text": f"machine {n} note {i}"})
        stores.append(store)
    env = dict(os.environ, **s3_env)
    procs = [subprocess.Popen([sys.executable, "-m", "agentlog.cli", "--store", str(s.path), "push", url],
                              env=env, stderr=subprocess.PIPE, text=True) for s in stores]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 4], errs
    assert any("another run with this id" in e for e in errs)
    winner = al.Store(url).run("same")
    assert winner.verify().ok and len(winner) == 20
    text = winner.event(0).payload["text"]
    assert text in ("machine 1 note 0", "machine 2 note 0")
    assert all(e.payload["text"].startswith(text[:9]) for e in winner.iter_events())  # one machine's run only


def test_a_reader_sees_what_another_machine_pushed_into_a_folder_it_listed(any_bucket: str, another_machine: Any) -> None:
    """fsspec keeps a listing of every folder a recursive listing passed through, and a later
    listing does not replace it; a reader that listed a blob folder with one blob in it must
    still find the second blob another machine puts there (the killed-push resume once reported
    such a blob missing). gcsfs keeps listings the same way."""
    import hashlib

    by_folder: dict[str, list[bytes]] = {}
    n = 0
    while not any(len(v) == 2 for v in by_folder.values()):  # two blobs in one folder
        data = str(n).encode()
        by_folder.setdefault(hashlib.sha256(data).hexdigest()[:2], []).append(data)
        n += 1
    one, two = next(v for v in by_folder.values() if len(v) == 2)
    first, second = (hashlib.sha256(d).hexdigest() for d in (one, two))
    other = another_machine
    remote = al.Store(f"{any_bucket}/team")
    other.pipe_file(f"{remote.url}/blobs/sha256/{first[:2]}/{first[2:]}", one)
    assert remote.fs.find(remote.path)  # type: ignore[attr-defined]
    assert remote.blobs.exists("sha256:" + first) and not remote.blobs.exists("sha256:" + second)
    other.pipe_file(f"{remote.url}/blobs/sha256/{second[:2]}/{second[2:]}", two)
    assert len(remote.fs.find(remote.path)) == 2  # type: ignore[attr-defined]
    assert remote.blobs.exists("sha256:" + second)
    assert remote.blobs.read("sha256:" + second) == two
