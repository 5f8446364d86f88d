"""Benchmark the user's path into a stored run: a fresh process that opens it and asks for a state.

    python bench/fresh.py [--quick]

Every figure times the public call a user makes, in a new Python process (imports done, page
cache warm), against a baseline measured in this process (medians of 3 on both sides):

``open_and_fold``
    ``al.Store(p).run(id).state_at(last)`` on a run of ``state.patch`` events (the ``simple``
    and ``mixed`` workloads of ``bench/fold.py``) with no checkpoints: columnar loading and the
    fold, against ``SnapshotIndex.of(events).build()`` on the same events in memory.
``checkpoints``
    ``agentlog checkpoint`` (``build_checkpoints``, one every 16,384 events, its default) on the mixed run:
    its time and bytes against the segments' bytes; then, in a fresh process, ``state_at(n)``
    for random n, each on a newly opened run (``al.Store(p).run(id)``): median and p99; and
    the memory the run holds after those calls (tracemalloc) against the final state alone.
``activegraph``
    ActiveGraph's own workload, side by side with activegraph (a ``bench`` extra): N events
    alternating ``object.created`` and an update of that object (ActiveGraph's
    ``patch_object``, agentlog's ``object.updated``). ActiveGraph: ``Runtime.load(db)`` in a
    fresh process. agentlog: ``run.state_at(last)`` and ``run.state_at(N // 2)`` in a fresh
    process, with the run's checkpoints (built once, timed apart) and without.

Progress on stderr; one JSON line of figures on stdout. ``--quick``: 100,000 events (10,000 for
ActiveGraph) instead of 1,000,000 (100,000).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from fold import generate_mixed, generate_simple

from agentlog.fold import Reducers, SnapshotIndex
from agentlog.store import Store
from agentlog.store.checkpoints import build_checkpoints

STANDARD = Reducers.standard()


def log(msg: str) -> None:
    print(f"[bench/fresh] {msg}", file=sys.stderr, flush=True)


def in_fresh_process(code: str) -> Any:
    """Run ``code`` in a new interpreter; it prints one JSON value last."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def du(path: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in path.glob(pattern))


def write_run(store: Store, run_id: str, events: list[Any]) -> Any:
    w = store.create_run(run_id=run_id, durability="none")
    for e in events:
        w.emit(e.type, dict(e.payload))
    w.close()
    return store.run(run_id)


def open_and_fold(root: Path, name: str, events: list[Any]) -> dict[str, Any]:
    store = Store(root / name)
    write_run(store, "r", events)
    code = (f"import time, json\nt = time.perf_counter()\nimport agentlog as al\n"
            f"from agentlog.fold import Reducers\n"
            f"s = al.Store({str(root / name)!r}).run('r').state_at({len(events) - 1}, reducers=Reducers.standard())\n"
            f"print(json.dumps(time.perf_counter() - t))")
    fresh = [in_fresh_process(code) for _ in range(3)]
    memory = []
    for _ in range(3):
        gc.collect()
        t = time.perf_counter()
        SnapshotIndex.of(events, STANDARD).build()
        memory.append(time.perf_counter() - t)
    f, m = statistics.median(fresh), statistics.median(memory)
    log(f"{name}: fresh open + state_at(last) {f:.2f} s (imports included) vs in-memory index build {m:.2f} s")
    return {"events": len(events), "fresh_open_state_at_last_s": round(f, 3),
            "in_memory_index_build_s": round(m, 3), "ratio": round(f / m, 2)}


RANDOM_ACCESS = r"""
import json, random, statistics, sys, time, tracemalloc
import agentlog as al
from agentlog.fold import Reducers, fold
root, count, trials = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(5)
times = []
for _ in range(trials):
    n = rng.randrange(count)
    t = time.perf_counter()
    al.Store(root).run("r").state_at(n, reducers=Reducers.standard())
    times.append((time.perf_counter() - t) * 1000)
times.sort()
tracemalloc.start()
run = al.Store(root).run("r")
for _ in range(trials):
    run.state_at(rng.randrange(count), reducers=Reducers.standard())
held = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
events = list(run.iter_events())
tracemalloc.start()
final = fold(events, Reducers.standard())
alone = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
print(json.dumps({"median_ms": statistics.median(times), "p99_ms": times[int(len(times) * 0.99) - 1],
                  "held_mb": held / 2**20, "final_state_mb": alone / 2**20}))
"""


def checkpoints(root: Path, events: list[Any], trials: int) -> dict[str, Any]:
    store = Store(root / "ck")
    run = write_run(store, "r", events)
    t = time.perf_counter()
    written = build_checkpoints(run, STANDARD)
    build_s = time.perf_counter() - t
    ck = du(run.path / "checkpoints", "*")
    seg = du(run.path, "events-*.parquet")
    log(f"checkpoints: {len(written)} in {build_s:.1f} s, {ck / 2**20:.1f} MB = {ck / seg:.3f} of the segments")
    script = root / "random_access.py"
    script.write_text(RANDOM_ACCESS)
    out = subprocess.run([sys.executable, str(script), str(root / "ck"), str(len(events)), str(trials)],
                         capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    log(f"random state_at in a fresh process: median {figures['median_ms']:.0f} ms, p99 {figures['p99_ms']:.0f} ms; "
        f"held {figures['held_mb']:.1f} MB vs final state {figures['final_state_mb']:.1f} MB")
    return {"events": len(events), "checkpoints": len(written), "build_s": round(build_s, 2),
            "checkpoint_bytes": ck, "segment_bytes": seg, "checkpoint_over_segments": round(ck / seg, 3),
            "state_at_random_trials": trials,
            "state_at_random_median_ms": round(figures["median_ms"], 1),
            "state_at_random_p99_ms": round(figures["p99_ms"], 1),
            "memory_held_after_random_access_mb": round(figures["held_mb"], 1),
            "final_state_mb": round(figures["final_state_mb"], 1),
            "memory_over_final": round(figures["held_mb"] / figures["final_state_mb"], 2)}


def activegraph_side_by_side(root: Path, n: int) -> dict[str, Any]:
    from activegraph import FrozenClock, Graph, IDGen, Runtime

    db = root / "ag.db"
    graph = Graph(ids=IDGen(), clock=FrozenClock("2026-01-01T00:00:00Z"), run_id="bench")
    Runtime(graph, persist_to=str(db), seed=0)
    store = Store(root / "ag-agentlog")
    w = store.create_run(run_id="r", durability="none")
    for i in range(n // 2):
        obj = graph.add_object("note", {"i": i, "text": f"note {i}"})
        graph.patch_object(obj.id, {"i": i + 1, "seen": True})
        w.emit("object.created", {"id": obj.id, "kind": "note", "data": {"i": i, "text": f"note {i}"}})
        w.emit("object.updated", {"id": obj.id, "data": {"i": i + 1, "seen": True}})
    w.close()
    ag_code = (f"import time, json\nt = time.perf_counter()\nfrom activegraph import Runtime\n"
               f"rt = Runtime.load({str(db)!r}, 'bench')\nprint(json.dumps(time.perf_counter() - t))")
    ours = (lambda k: f"import time, json\nt = time.perf_counter()\nimport agentlog as al\n"
            f"from agentlog.fold import Reducers\n"
            f"s = al.Store({str(root / 'ag-agentlog')!r}).run('r').state_at({k}, reducers=Reducers.standard())\n"
            f"print(json.dumps(time.perf_counter() - t))")
    ag = statistics.median(in_fresh_process(ag_code) for _ in range(3))
    no_ck = statistics.median(in_fresh_process(ours(n - 1)) for _ in range(3))
    run = store.run("r")
    t = time.perf_counter()
    build_checkpoints(run, STANDARD)
    build_s = time.perf_counter() - t
    last = statistics.median(in_fresh_process(ours(n - 1)) for _ in range(3))
    mid = statistics.median(in_fresh_process(ours(n // 2)) for _ in range(3))
    log(f"activegraph {n:,} events: Runtime.load {ag:.2f} s; agentlog state_at(last) {last:.2f} s "
        f"(no checkpoints {no_ck:.2f} s), state_at({n // 2:,}) {mid:.2f} s")
    from importlib.metadata import version
    return {"events": n, "activegraph_version": version("activegraph"), "activegraph_load_s": round(ag, 3),
            "agentlog_state_at_last_s": round(last, 3), "agentlog_state_at_mid_s": round(mid, 3),
            "agentlog_state_at_last_no_checkpoints_s": round(no_ck, 3), "checkpoint_build_s": round(build_s, 2),
            "ratio_last": round(ag / last, 1), "ratio_mid": round(ag / mid, 1),
            "ratio_last_no_checkpoints": round(ag / no_ck, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    ag_n = 10_000 if args.quick else 100_000
    trials = 50 if args.quick else 200
    out: dict[str, Any] = {"bench": "fresh", "quick": args.quick, "loadavg_at_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-fresh-") as tmp:
        root = Path(tmp)
        for name, gen in (("simple", generate_simple), ("mixed", generate_mixed)):
            log(f"{name}: {n:,} events")
            events = list(gen(n))
            out[f"open_and_fold_{name}"] = open_and_fold(root, name, events)
            if name == "mixed":
                out["checkpoints_mixed"] = checkpoints(root, events, trials)
            del events
            gc.collect()
        out["activegraph"] = activegraph_side_by_side(root, ag_n)
    ck, ag = out["checkpoints_mixed"], out["activegraph"]
    out["targets"] = {
        "open_and_fold_within_2x": all(out[f"open_and_fold_{k}"]["ratio"] <= 2 for k in ("simple", "mixed")),
        "state_at_median_le_200ms": ck["state_at_random_median_ms"] <= 200,
        "state_at_p99_le_500ms": ck["state_at_random_p99_ms"] <= 500,
        "checkpoints_le_15pct_of_segments": ck["checkpoint_over_segments"] <= 0.15,
        "memory_le_2x_final": ck["memory_over_final"] <= 2,
        "activegraph_ge_10x": ag["ratio_last"] >= 10,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
