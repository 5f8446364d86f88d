"""Compare open + fold of two source trees, each side in fresh processes, alternating round by round.

    python bench/open_ab.py --before PATH [--rounds 9] [--events 1000000] [--run DIR]

Timed calls, each in a new Python process after the imports and the store's open
(``al.Store(dir).run("r")``), alternating in every round:

``main``
    ``run.state_at(len(run) - 1, reducers=Reducers.standard())`` with this checkout's agentlog.
``before``
    the same call with ``PYTHONPATH=PATH`` (another checkout, e.g. a ``git worktree`` of an
    older commit).
``fold``
    the plain in-memory ``fold(events, Reducers.standard())`` of the same run's events, read
    first with ``list(run.iter_events())`` (not timed) and the collector run once.

The clock starts after the store is open, on both code sides alike: this bench compares the
read and fold of two trees; ``bench/fresh.py`` times the whole path (imports and the open
included) against the fold. The run is the *simple* workload of ``bench/fold.py`` (written once into ``--run``, or a
temporary folder). Medians of wall and CPU time (``time.process_time``, which counts a
process's read-ahead thread) over the rounds, and the ratios main / fold and before / fold,
in one JSON line. The fresh processes on both sides keep a shared, noisy machine's slow spells
from falling on one side only.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import logger
from fold import generate_simple
from fresh import compile_package, write_run

log = logger("open_ab")

TIMED = r"""
import gc, json, sys, time
import agentlog as al
from agentlog.folding import Reducers, fold
reducers = Reducers.standard()
run = al.Store(sys.argv[1]).run("r")
if sys.argv[2] == "fold":
    events = list(run.iter_events())
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    fold(events, reducers)
else:
    t, c = time.perf_counter(), time.process_time()
    run.state_at(len(run) - 1, reducers=reducers)
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""


def timed(run: Path, side: str, before: str) -> tuple[float, float]:
    """One side's (wall, CPU) seconds in a new process."""
    env = dict(os.environ)
    if side == "before":
        env["PYTHONPATH"] = before
    out = subprocess.run([sys.executable, "-P", "-c", TIMED, str(run), side], capture_output=True, text=True,
                         check=True, env=env)
    wall, cpu = json.loads(out.stdout.strip().splitlines()[-1])
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the other checkout's root (its agentlog/ inside)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--run", help="a folder for the run (made if it holds none; default: a temporary one)")
    args = parser.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.run or tmp)
        if not (root / "runs" / "run_id=r").exists():
            log(f"writing a simple run of {args.events:,} events into {root}")
            import agentlog as al
            write_run(al.Store(root), "r", list(generate_simple(args.events)))
        times: dict[str, list[tuple[float, float]]] = {"main": [], "before": [], "fold": []}
        load = os.getloadavg()[0]
        for i in range(args.rounds):
            for side, pairs in times.items():
                pairs.append(timed(root, side, args.before))
            log(f"round {i + 1}: " + ", ".join(f"{side} {t[-1][0]:.2f} s" for side, t in times.items()))
        out: dict[str, Any] = {"bench": "open_ab", "events": args.events, "rounds": args.rounds,
                               "loadavg_at_start": round(load, 2)}
        for side, pairs in times.items():
            out[f"{side}_s"] = round(statistics.median(p[0] for p in pairs), 3)
            out[f"{side}_cpu_s"] = round(statistics.median(p[1] for p in pairs), 3)
        for side in ("main", "before"):
            out[f"{side}_over_fold"] = round(out[f"{side}_s"] / out["fold_s"], 2)
            out[f"{side}_over_fold_cpu"] = round(out[f"{side}_cpu_s"] / out["fold_cpu_s"], 2)
        out["main_over_before"] = round(out["main_s"] / out["before_s"], 2)
        out["loadavg_at_end"] = round(os.getloadavg()[0], 2)
        print(json.dumps(out))


if __name__ == "__main__":
    main()
