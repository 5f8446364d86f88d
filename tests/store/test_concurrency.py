"""Several processes at once: writers of different runs, shared blobs, a reader of a live run."""

from __future__ import annotations

import subprocess

from _store_helpers import PYTHON, child_env

from agentlog.store import Store

_WRITE_RUN = """
import sys
from agentlog.store import Store
st = Store(sys.argv[1])
name = sys.argv[2]
shared = "shared page " * 10_000          # the same blob in every run
with st.create_run(run_id=name, segment_events=13, durability="batch") as w:
    for i in range(300):
        payload = {"i": i, "who": name}
        if i % 50 == 0:
            payload["page"] = shared
            payload["own"] = (name + " ") * 5_000
        w.emit("note", payload)
print("done")
"""


def test_several_processes_write_different_runs_into_one_store(store: Store) -> None:
    names = [f"proc-{k}" for k in range(4)]
    procs = [subprocess.Popen([PYTHON, "-c", _WRITE_RUN, str(store.path), name], env=child_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for name in names]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    assert sorted(store.list_runs()) == names
    reports = store.verify(progress=False)
    assert all(r.ok and r.events == 300 for r in reports.values()), reports
    for name in names:
        run = store.run(name)
        assert [e.payload["who"] for e in run.iter_events()] == [name] * 300
    # one shared blob + one own blob per run
    assert len(list(store.blobs)) == 1 + len(names)
    assert store.dataset().count_rows() == 4 * 300


_LIVE_WRITER = """
import sys
from agentlog.store import Store
w = Store(sys.argv[1]).create_run(run_id="live", segment_events=7, durability="none")
w.emit("note", {"i": 0})
print("started", flush=True)
for i in range(1, 4000):
    w.emit("note", {"i": i, "pad": "x" * (i % 300)})
w.close()
"""


def test_a_live_run_read_from_another_process_has_no_gap_or_duplicate(store: Store) -> None:
    writer = subprocess.Popen([PYTHON, "-c", _LIVE_WRITER, str(store.path)], env=child_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "started"
    seen: list[tuple[int, str]] = []  # (length, head) of each snapshot
    reads = 0
    run = store.run("live")
    while writer.poll() is None or reads < 3:
        run.refresh()
        table = run.table()
        seqs = table.column("seq").to_pylist()
        assert seqs == list(range(len(seqs)))  # no gap, no duplicate, in order
        events = list(run.iter_events(max(0, len(seqs) - 20)))
        assert [e.seq for e in events] == seqs[max(0, len(seqs) - 20):]
        if seqs:
            seen.append((len(seqs), table.column("hash")[-1].as_py()))
        reads += 1
    _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    final = store.run("live")
    assert len(final) == 4000 and final.verify().ok
    hashes = final.table().column("hash").to_pylist()
    assert all(hashes[n - 1] == head for n, head in seen)  # every snapshot was a true prefix
    assert len({n for n, _ in seen}) > 1  # it did read the run while it grew
