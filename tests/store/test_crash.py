"""SIGKILL a writer again and again, also in the middle of seals: no acknowledged event is lost.

A child process appends with ``durability="fsync"`` and prints each acknowledged seq and hash.
The parent kills it, at a random moment or paused at a chosen step of a seal, then checks
that every acknowledged event is on disk with its hash and that the run verifies. The next
child reopens the run with ``store.writer`` (which recovers what the crash left) and goes on.
Some kills are followed by a simulated torn write (the start of a line appended to the WAL),
since a SIGKILL rarely lands inside the write itself.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
import warnings

from _store_helpers import PYTHON, child_env

from agentlog.store import Store, TornWALWarning

_CHILD = r"""
import random, sys, time
import agentlog.store.writer as writer_module
from agentlog.store import Store

store_path, run_id, pause_at, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if pause_at != "-":
    def hook(step):
        if step == pause_at:
            print("PAUSE", flush=True)
            time.sleep(3600)
    writer_module.seal_hook = hook
rng = random.Random(seed)
w = Store(store_path).writer(run_id)
print("READY", w.seq, flush=True)
i = 0
while True:
    # mostly small lines; now and then one spanning pages (may be torn) or a blob
    size = rng.choice([10, 100, 1000, 6000, 20000])
    e = w.emit("note", {"seed": seed, "i": i, "pad": "x" * size})
    print(e.seq, e.hash, flush=True)
    i += 1
"""

KILLS = 51
TEAR = b'{"hash":"' + b"0" * 64 + b'","event":{"actor":null,"cach'
STEPS = ("segment-written", "segment-renamed", "wal-rotated")


def test_sigkill_loses_no_acknowledged_event(store: Store) -> None:
    rng = random.Random(20261202)
    store.create_run(run_id="crash", segment_events=7).close()
    acked: dict[int, str] = {}
    paused = {step: 0 for step in STEPS}
    wal = store.runs_path / "run_id=crash" / "wal.jsonl"
    tears = 0
    for k in range(KILLS):
        pause = STEPS[(k // 3) % 3] if k % 3 == 0 else "-"  # 18 kills inside a seal
        proc = subprocess.Popen([PYTHON, "-c", _CHILD, str(store.path), "crash", pause, str(k)],
                                env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready[0] == b"READY", ready
        assert int(ready[1]) >= (max(acked) + 1 if acked else 0)
        if pause == "-":
            time.sleep(rng.uniform(0, 0.04))
        else:
            for line in proc.stdout:
                if line == b"PAUSE\n":
                    paused[pause] += 1
                    break
                _ack(line, acked)
        os.kill(proc.pid, signal.SIGKILL)
        for line in proc.stdout:  # what it acknowledged before it died
            _ack(line, acked)
        proc.stdout.close()
        assert proc.wait() == -signal.SIGKILL
        tear = k % 9 == 4
        if tear:  # as if the kill had cut a write short: the start of a line, no newline
            with open(wal, "ab") as f:
                f.write(TEAR)
            tears += 1

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = store.run("crash")
            hashes = run.table().column("hash").to_pylist()
            report = run.verify()
        assert all(issubclass(w.category, TornWALWarning) for w in caught), [str(w.message) for w in caught]
        assert not tear or caught
        assert report.ok, str(report)
        missing = [seq for seq, h in acked.items() if seq >= len(hashes) or hashes[seq] != h]
        assert missing == [], f"kill {k}: acknowledged events lost or changed: {missing[:10]}"

    assert min(paused.values()) >= 5, paused
    assert len(acked) > KILLS
    # the temp files the kills left (half segments, new WALs, blobs) go with the next process's
    # first writer
    reopen = ("import sys, warnings; from agentlog.store import Store; "
              "warnings.simplefilter('ignore'); Store(sys.argv[1]).writer('crash').close()")
    subprocess.run([PYTHON, "-c", reopen, str(store.path)], env=child_env(), check=True, timeout=60)
    assert [p for p in store.path.rglob("*") if ".tmp-" in p.name] == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornWALWarning)
        w = store.writer("crash")
    w.close()
    run = store.run("crash")
    assert run.verify().ok and run.status == "closed"
    # every torn line was moved aside by the next writer, none dropped: each simulated tear is
    # in one torn file, and any other torn file is a line a kill really cut short (a 20 kB
    # line spans pages), never a whole one
    torn = [p.read_bytes() for p in run.path.glob("wal.torn-*")]
    assert sum(t.endswith(TEAR) for t in torn) == tears >= 5
    assert all(t.endswith(TEAR) or not t.endswith(b"\n") for t in torn), [t[-80:] for t in torn]
    hashes = run.table().column("hash").to_pylist()
    assert all(hashes[seq] == h for seq, h in acked.items())


def _ack(line: bytes, acked: dict[int, str]) -> None:
    parts = line.split()
    if len(parts) == 2 and line.endswith(b"\n") and len(parts[1]) == 64:  # a whole line only
        acked[int(parts[0])] = parts[1].decode()
