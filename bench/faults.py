"""The fault matrix: SIGKILL a writer again and again (at random moments and in the middle of
seals), and count what is lost and what is left behind.

    python bench/faults.py [--kills N]

A child process appends with ``durability="fsync"`` (small notes, pages that span writes, and
blobs) and prints each acknowledged seq and hash; the parent kills it, at a random moment or
paused at a step of a seal, counts the temp files the kill left, and checks that every
acknowledged event is on disk with its hash and that the run verifies. The next child reopens
the run (recovering what the crash left) and goes on. Every ninth kill is followed by a
simulated torn write (the start of a line written where the next line would go). Prints progress on stderr and a JSON line with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import logger

from agentlog.store import Store, TornWALWarning
from agentlog.store.wal import unpadded

log = logger("faults")

CHILD = r"""
import random, sys, time
import agentlog.store.writer as writer_module
from agentlog.store import Store

store_path, pause_at, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
if pause_at != "-":
    def hook(step):
        if step == pause_at:
            print("PAUSE", flush=True)
            time.sleep(3600)
    writer_module.seal_hook = hook
rng = random.Random(seed)
w = Store(store_path).writer("crash")
print("READY", w.seq, flush=True)
i = 0
while True:
    size = rng.choice([10, 100, 1000, 6000, 20000])  # 20000: a blob
    e = w.emit("note", {"seed": seed, "i": i, "pad": chr(97 + i % 26) * size})
    print(e.seq, e.hash, flush=True)
    i += 1
"""
STEPS = ("segment-written", "segment-renamed", "wal-rotated")


def temp_files(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if ".tmp-" in p.name)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=100)
    args = parser.parse_args()
    rng = random.Random(20261203)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "store")
        store.create_run(run_id="crash", segment_events=7).close()
        acked: dict[int, str] = {}
        lost_total = tears = verify_failures = temp_seen = 0
        paused = dict.fromkeys(STEPS, 0)
        wal = store.runs_path / "run_id=crash" / "wal.jsonl"
        for k in range(args.kills):
            pause = STEPS[(k // 3) % 3] if k % 3 == 0 else "-"
            proc = subprocess.Popen([sys.executable, "-c", CHILD, str(store.path), pause, str(k)], env=env(),
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            assert proc.stdout is not None
            ready = proc.stdout.readline().split()
            assert ready and ready[0] == b"READY", ready
            if pause == "-":
                time.sleep(rng.uniform(0, 0.05))
            else:
                for line in proc.stdout:
                    if line == b"PAUSE\n":
                        paused[pause] += 1
                        break
                    ack(line, acked)
            os.kill(proc.pid, signal.SIGKILL)
            for line in proc.stdout:
                ack(line, acked)
            proc.stdout.close()
            proc.wait()
            temp_seen += temp_files(store.path)
            if k % 9 == 4:  # as if the kill had cut a write short
                tear(wal, b'{"hash":"' + b"0" * 64 + b'","event":{"actor":null,"cach')
                tears += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TornWALWarning)
                run = store.run("crash")
                hashes = run.table().column("hash").to_pylist()
                verify_failures += not run.verify().ok
            lost = [s for s, h in acked.items() if s >= len(hashes) or hashes[s] != h]
            lost_total = max(lost_total, len(lost))
            if k % 10 == 9:
                log(f"{k + 1} kills, {len(acked):,} events acknowledged, {len(lost)} lost, "
                    f"{temp_files(store.path)} temp files now")
        # a fresh process's first writer: recovers the last crash, sweeps the temp files
        reopen = ("import sys, warnings; from agentlog.store import Store; "
                  "warnings.simplefilter('ignore'); Store(sys.argv[1]).writer('crash').close()")
        subprocess.run([sys.executable, "-c", reopen, str(store.path)], env=env(), check=True)
        run = store.run("crash")
        hashes = run.table().column("hash").to_pylist()
        final_lost = sum(1 for s, h in acked.items() if s >= len(hashes) or hashes[s] != h)
        result = {"bench": "faults", "kills": args.kills, "kills_inside_a_seal": paused,
                  "events_acknowledged": len(acked), "acknowledged_lost_max": lost_total,
                  "acknowledged_lost_at_end": final_lost, "verify_failures": verify_failures,
                  "torn_writes": tears, "torn_lines_kept": len(list(run.path.glob("wal.torn-*"))),
                  "temp_files_seen_after_kills": temp_seen, "temp_files_left_at_end": temp_files(store.path),
                  "final_verify_ok": run.verify().ok, "status": run.status}
    print(json.dumps(result))


def tear(wal: Path, start: bytes) -> None:
    """Write the start of a line where the writer's next line would go: over the zeros a
    durable writer keeps ahead of its lines (see ``agentlog.store.wal``), or at the end."""
    data = wal.read_bytes() if wal.exists() else b""
    with open(wal, "r+b" if data else "ab") as f:
        f.seek(len(unpadded(data)))
        f.write(start)


def ack(line: bytes, acked: dict[int, str]) -> None:
    parts = line.split()
    if len(parts) == 2 and line.endswith(b"\n") and len(parts[1]) == 64:
        acked[int(parts[0])] = parts[1].decode()


if __name__ == "__main__":
    main()
