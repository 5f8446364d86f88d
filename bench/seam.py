"""Benchmark the local read path through the filesystem seam against the tree before it.

    python bench/seam.py --baseline TREE [--quick]

``TREE`` is a checkout of the code before the seam (``git archive <commit> | tar -x -C TREE``).
One store is made with this tree (the on-disk format did not change); then each call below
runs in a **fresh Python process**, timed after ``import agentlog`` (the work a user waits
for: opening the store and the run, reading, folding), alternately with ``PYTHONPATH=TREE``
(before) and with this tree (after), 5 times each; medians, and after/before ratios:

- ``events``: ``al.Store(p).run(id).events`` on a run of 400,000 events (model answers and
  tool results, ``agentlog.testing.fleet``), 7 segments;
- ``state_at``: ``al.Store(p).run(id).state_at(last)`` on the same run;
- ``verify``: ``al.Store(p).run(id).verify()``;
- ``store_cost``: ``al.Store(p).cost()`` over 40 runs (the one above and 39 of 2,000 events).

Progress on stderr; one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import logger

log = logger("seam")
HERE = Path(__file__).resolve().parents[1]

_CALL = """
import sys, time
import agentlog as al
t0 = time.perf_counter()
store = al.Store(sys.argv[1])
what = sys.argv[3]
if what == "store_cost":
    store.cost()
else:
    run = store.run(sys.argv[2])
    if what == "events":
        run.events
    elif what == "state_at":
        run.state_at(len(run) - 1)
    else:
        assert run.verify().ok
print(time.perf_counter() - t0)
"""


def _once(tree: Path, store: Path, run_id: str, what: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", _CALL, str(store), run_id, what], env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a checkout of the tree before the seam")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from agentlog.testing.fleet import fleet_store

    calls = 20_000 if args.quick else 200_000
    root = Path(tempfile.mkdtemp(prefix="agentlog-seam-"))
    store = fleet_store(root / "big", runs=1, calls=calls, segment_events=65536)
    fleet_store(root / "big", runs=0, calls=0)
    small = fleet_store(root / "small", runs=39, calls=1000, seed=1)
    for folder in (small.runs_path).iterdir():  # the 39 small runs beside the big one
        folder.rename(store.runs_path / folder.name.replace("fleet-", "small-"))
    for blob in (small.path / "blobs").rglob("*"):
        if blob.is_file():
            dest = store.path / blob.relative_to(small.path)
            dest.parent.mkdir(parents=True, exist_ok=True)
            blob.replace(dest)
    run_id = "fleet-00000"
    log(f"store at {store.path}: {calls * 2:,}-event run and 39 small ones")
    figures: dict[str, dict[str, float]] = {}
    for what in ("events", "state_at", "verify", "store_cost"):
        before, after = [], []
        for _ in range(5):
            before.append(_once(Path(args.baseline), store.path, run_id, what))
            after.append(_once(HERE, store.path, run_id, what))
        b, a = statistics.median(before), statistics.median(after)
        figures[what] = {"before_s": round(b, 4), "after_s": round(a, 4), "after_over_before": round(a / b, 3)}
        log(f"{what}: before {b:.3f}s after {a:.3f}s ({a / b:.3f}x)")
    print(json.dumps({"bench": "seam", "quick": args.quick, "run_events": calls * 2,
                      "loadavg_at_end": round(os.getloadavg()[0], 2), **figures}))


if __name__ == "__main__":
    main()
