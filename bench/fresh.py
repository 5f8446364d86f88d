"""Benchmark the user's path into a stored run: a fresh process that opens it and asks for a state.

    python bench/fresh.py [--quick]

Every figure times the public call a user makes, in a new Python process (imports done, page
cache warm, agentlog's bytecode written first: :func:`compile_package`), against a baseline
measured in this process (medians of 3 on both sides). Random access reports wall and CPU
time (``time.process_time``: on a machine shared with other work the CPU figure is the
steadier one), and the load average at the start and end of the run:

``open_and_fold``
    ``al.Store(p).run(id).state_at(last)`` on a run of ``state.patch`` events (the ``simple``
    and ``mixed`` workloads of ``bench/fold.py``) with no checkpoints: columnar loading and the
    fold, against ``SnapshotIndex.of(events).build()`` on the same events in memory (the
    first wave's fold figure: it keeps a snapshot every few thousand events) and against
    the plain ``fold(events)`` (no snapshots: the stricter baseline, the issue's), medians of
    5, the three sides alternating round by round. The fresh side is timed from before
    ``import agentlog`` (so imports count) and also from after the imports (``..._call_s``,
    and its CPU time, ``..._call_cpu_s``, against the plain fold's). Beside them, ``decode_only_s``: the stored
    payloads decoded into Python objects and dropped, nothing else (:func:`decode_only`);
    ``floor_ratio_vs_fold`` is (fold + that) / fold, the least open + fold could cost.
``checkpoints``
    for each workload, ``agentlog checkpoint`` (``build_checkpoints``, one every 12,288
    events, its default): its time and bytes against the segments' bytes; then
    ``al.Store(p).run(id).state_at(n)`` for random n, **each in a new Python process** (the
    call timed after the imports, ``agentlog.store``'s included, which ``import agentlog`` defers
    to the first ``al.Store``; the imports' time reported beside, and the call with the store's
    own imports, pyarrow's, as ``..._with_store_import_...``): median and p99; and,
    in one more process, the memory (tracemalloc) held after ``state_at`` of 50 random n on
    one run object, against the final state alone (folded from the run's events). The count
    starts after the store and the run are open and the modules ``state_at`` uses are
    imported: it is what the run holds (states, kept snapshots, caches), not the imports.
``activegraph``
    ActiveGraph's own workload, side by side with activegraph (a ``bench`` extra): N events
    alternating ``object.created`` and an update of that object (ActiveGraph's
    ``patch_object``, agentlog's ``object.updated``). ActiveGraph: ``Runtime.load(db)`` in a
    fresh process. agentlog: ``run.state_at(last)`` and ``run.state_at(N // 2)`` in a fresh
    process, with the run's checkpoints (built once, timed apart) and without.

Progress on stderr; one JSON line of figures on stdout. ``--quick``: 100,000 events (10,000 for
ActiveGraph, 30 random-access processes) instead of 1,000,000 (100,000; 200 processes).
``--only NAME`` runs one part (``open_and_fold``, ``checkpoints``, ``activegraph``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from fold import generate_mixed, generate_simple

from agentlog.folding import Reducers, SnapshotIndex, fold
from agentlog.store import Store
from agentlog.store.checkpoints import EVERY, build_checkpoints

STANDARD = Reducers.standard()


def log(msg: str) -> None:
    print(f"[bench/fresh] {msg} (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def compile_package() -> None:
    """Write agentlog's bytecode, as an installed package has it. This machine sets
    ``PYTHONDONTWRITEBYTECODE``: without this, every new process compiled agentlog's modules
    from source again (about 90 ms of each fresh ``state_at`` in the first measurements)."""
    import compileall

    import agentlog
    compileall.compile_dir(str(Path(agentlog.__file__).parent), quiet=1)


def in_fresh_process(code: str) -> Any:
    """Run ``code`` in a new interpreter; it prints one JSON value last. ``-P``: the working
    directory is not put on ``sys.path``, so a run from a checkout with ``PYTHONPATH=<another
    tree>`` times that tree (without it, ``-c`` code imported the checkout's own agentlog)."""
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def du(path: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in path.glob(pattern))


def write_run(store: Store, run_id: str, events: list[Any]) -> Any:
    w = store.create_run(run_id=run_id, durability="none")
    for e in events:
        w.emit(e.type, dict(e.payload))
    w.close()
    return store.run(run_id)


def open_and_fold(root: Path, name: str, events: list[Any], rounds: int = 5) -> dict[str, Any]:
    """The run ``root / name`` (written by ``write_run``, no checkpoints yet) opened fresh.

    The three sides alternate, a round each (a fresh process, the in-memory index build, the
    plain fold), so that a slow spell of a shared machine falls on all three; medians of
    ``rounds``. CPU time is reported beside the wall clock (the fresh side's
    ``time.process_time`` counts its read-ahead thread too)."""
    code = (f"import time, json\nt = time.perf_counter()\nimport agentlog as al\n"
            f"from agentlog.folding import Reducers\nr = Reducers.standard()\n"
            f"c, p = time.perf_counter(), time.process_time()\n"
            f"s = al.Store({str(root / name)!r}).run('r').state_at({len(events) - 1}, reducers=r)\n"
            f"e = time.perf_counter()\nprint(json.dumps([e - t, e - c, time.process_time() - p]))")
    fresh, call, call_cpu, memory, plain, plain_cpu = [], [], [], [], [], []
    for _ in range(rounds):
        whole, alone, cpu = in_fresh_process(code)
        fresh.append(whole)
        call.append(alone)
        call_cpu.append(cpu)
        gc.collect()
        t = time.perf_counter()
        SnapshotIndex.of(events, STANDARD).build()
        memory.append(time.perf_counter() - t)
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        fold(events, STANDARD)
        plain.append(time.perf_counter() - t)
        plain_cpu.append(time.process_time() - c)
    f, m, p = statistics.median(fresh), statistics.median(memory), statistics.median(plain)
    one, one_cpu, p_cpu = statistics.median(call), statistics.median(call_cpu), statistics.median(plain_cpu)
    d = decode_only(root / name)
    log(f"{name}: fresh open + state_at(last) {f:.2f} s (imports included) vs in-memory index build {m:.2f} s, "
        f"plain fold {p:.2f} s; decoding the payloads alone {d:.2f} s")
    return {"events": len(events), "rounds": rounds, "fresh_open_state_at_last_s": round(f, 3),
            "fresh_open_state_at_last_call_s": round(one, 3),
            "fresh_open_state_at_last_call_cpu_s": round(one_cpu, 3),
            "in_memory_index_build_s": round(m, 3), "ratio": round(f / m, 2),
            "ratio_call_only": round(one / m, 2),
            "in_memory_fold_s": round(p, 3), "in_memory_fold_cpu_s": round(p_cpu, 3),
            "ratio_vs_fold": round(f / p, 2), "ratio_vs_fold_call_only": round(one / p, 2),
            "ratio_vs_fold_call_only_cpu": round(one_cpu / p_cpu, 2),
            "decode_only_s": round(d, 3), "floor_ratio_vs_fold": round((p + d) / p, 2)}


def decode_only(root: Path, batch: int = 16_384) -> float:
    """The run's stored payload texts decoded into Python objects and dropped, one call per
    ``batch`` as the fold's read makes it (msgspec's structs where the store reads a batch
    so, orjson's dicts elsewhere), the collector off (as in a fold); the texts are read and
    joined before the clock starts. Median of 3. No reader that hands a fold these objects
    pays less: with the plain fold's time it is the floor under open + fold."""
    import orjson
    import pyarrow.parquet as pq

    from agentlog.store.run import _joined
    try:
        from agentlog.store.run import _patches
    except ImportError:  # a tree from before the structs (run beside this one, PYTHONPATH=<it>)
        def _patches(joined: bytes, n: int) -> None:
            return None

    texts: list[str] = []
    for path in sorted((root / "runs" / "run_id=r").glob("events-*.parquet")):
        texts.extend(pq.read_table(path, columns=["payload"]).column(0).to_pylist())
    joined = [(_joined(texts[i:i + batch]), len(texts[i:i + batch]))  # as the store joins them
              for i in range(0, len(texts), batch)]
    del texts
    times = []
    for _ in range(3):
        gc.collect()
        gc.disable()
        t = time.perf_counter()
        for one, n in joined:
            if b"$" in one or _patches(one, n) is None:  # as the store chooses
                orjson.loads(one)
        times.append(time.perf_counter() - t)
        gc.enable()
    return statistics.median(times)


ONE_STATE = r"""
import json, sys, time
t, tc = time.perf_counter(), time.process_time()
import agentlog as al
from agentlog.folding import Reducers
reducers = Reducers.standard()
s, sc = time.perf_counter(), time.process_time()
import agentlog.store  # what al.Store imports on first use (pyarrow, numpy): timed apart
c, cc = time.perf_counter(), time.process_time()
al.Store(sys.argv[1]).run("r").state_at(int(sys.argv[2]), reducers=reducers)
e, ec = time.perf_counter(), time.process_time()
print(json.dumps({"call_ms": (e - c) * 1000, "imports_ms": (c - t) * 1000,
                  "store_import_ms": (c - s) * 1000,
                  "call_cpu_ms": (ec - cc) * 1000, "imports_cpu_ms": (cc - tc) * 1000}))
"""

MEMORY = r"""
import gc, json, random, sys, tracemalloc
import agentlog as al
import agentlog.store.checkpoints  # the modules state_at imports, before the count starts
from agentlog.folding import Reducers, fold
root, count, trials = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(5)
reducers = Reducers.standard()
run = al.Store(root).run("r")
len(run)
gc.collect()
tracemalloc.start()
for _ in range(trials):
    run.state_at(rng.randrange(count), reducers=reducers)
gc.collect()
held = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
events = list(run.iter_events())
gc.collect()
tracemalloc.start()
final = fold(events, reducers)
alone = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
print(json.dumps({"held_mb": held / 2**20, "final_state_mb": alone / 2**20}))
"""


def checkpoints(root: Path, name: str, events: list[Any], trials: int, every: int | None) -> dict[str, Any]:
    """Checkpoints of the run ``root / name`` (written by ``write_run``), then random access."""
    run = Store(root / name).run("r")
    t = time.perf_counter()
    written = build_checkpoints(run, STANDARD, every=every)
    build_s = time.perf_counter() - t
    ck = du(run.path / "checkpoints", "*")
    seg = du(run.path, "events-*.parquet")
    log(f"{name} checkpoints: {len(written)} in {build_s:.1f} s, {ck / 2**20:.1f} MB = {ck / seg:.3f} of the segments")
    one, memory = root / "one_state.py", root / "memory.py"
    one.write_text(ONE_STATE)
    memory.write_text(MEMORY)
    rng = random.Random(5)
    calls, imports, cpu, imports_cpu, with_store = [], [], [], [], []
    for _ in range(trials):
        n = rng.randrange(len(events))
        out = subprocess.run([sys.executable, str(one), str(root / name), str(n)],
                             capture_output=True, text=True, check=True)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        calls.append(figures["call_ms"])
        imports.append(figures["imports_ms"])
        cpu.append(figures["call_cpu_ms"])
        imports_cpu.append(figures["imports_cpu_ms"])
        with_store.append(figures["call_ms"] + figures["store_import_ms"])
    calls.sort()
    cpu.sort()
    with_store.sort()
    out = subprocess.run([sys.executable, str(memory), str(root / name), str(len(events)), "50"],
                         capture_output=True, text=True, check=True)
    mem = json.loads(out.stdout.strip().splitlines()[-1])
    median, p99 = statistics.median(calls), calls[max(0, int(len(calls) * 0.99) - 1)]
    log(f"{name}: random state_at, one new process each: median {median:.0f} ms, p99 {p99:.0f} ms "
        f"(CPU {statistics.median(cpu):.0f} / {cpu[max(0, int(len(cpu) * 0.99) - 1)]:.0f} ms) "
        f"(imports {statistics.median(imports):.0f} ms); held {mem['held_mb']:.1f} MB vs final state "
        f"{mem['final_state_mb']:.1f} MB")
    return {"events": len(events), "every": every or EVERY, "checkpoints": len(written), "build_s": round(build_s, 2),
            "checkpoint_bytes": ck, "segment_bytes": seg, "checkpoint_over_segments": round(ck / seg, 3),
            "state_at_random_processes": trials,
            "state_at_random_median_ms": round(median, 1), "state_at_random_p99_ms": round(p99, 1),
            "state_at_random_max_ms": round(calls[-1], 1),
            "state_at_random_cpu_median_ms": round(statistics.median(cpu), 1),
            "state_at_random_cpu_p99_ms": round(cpu[max(0, int(len(cpu) * 0.99) - 1)], 1),
            "state_at_random_with_store_import_median_ms": round(statistics.median(with_store), 1),
            "state_at_random_with_store_import_p99_ms": round(with_store[max(0, int(len(with_store) * 0.99) - 1)], 1),
            "imports_median_ms": round(statistics.median(imports), 1),
            "imports_cpu_median_ms": round(statistics.median(imports_cpu), 1),
            "memory_held_after_50_random_mb": round(mem["held_mb"], 1),
            "final_state_mb": round(mem["final_state_mb"], 1),
            "memory_over_final": round(mem["held_mb"] / mem["final_state_mb"], 2)}


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
            f"from agentlog.folding import Reducers\n"
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
    parser.add_argument("--only", choices=("open_and_fold", "checkpoints", "activegraph"))
    parser.add_argument("--every", type=int, default=None,
                        help="events between checkpoints (default: agentlog's, 12,288)")
    parser.add_argument("--trials", type=int, default=None,
                        help="random-access processes per workload (default 200; 30 with --quick)")
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    ag_n = 10_000 if args.quick else 100_000
    trials = args.trials or (30 if args.quick else 200)
    want = (lambda part: args.only in (None, part))
    compile_package()
    out: dict[str, Any] = {"bench": "fresh", "quick": args.quick, "loadavg_at_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-fresh-") as tmp:
        root = Path(tmp)
        for name, gen in (("simple", generate_simple), ("mixed", generate_mixed)):
            if not (want("open_and_fold") or want("checkpoints")):
                break
            log(f"{name}: {n:,} events")
            events = list(gen(n))
            t = time.perf_counter()
            write_run(Store(root / name), "r", events)
            log(f"{name}: written in {time.perf_counter() - t:.0f} s")
            if want("open_and_fold"):
                out[f"open_and_fold_{name}"] = open_and_fold(root, name, events)
            if want("checkpoints"):
                out[f"checkpoints_{name}"] = checkpoints(root, name, events, trials, args.every)
            del events
            gc.collect()
        if want("activegraph"):
            out["activegraph"] = activegraph_side_by_side(root, ag_n)
    out["loadavg_at_end"] = round(os.getloadavg()[0], 2)
    targets: dict[str, bool] = {}
    if want("open_and_fold"):
        # the baseline is the plain in-memory fold (its 0.85 s for 300k events)
        targets["open_and_fold_within_2x_of_fold"] = all(out[f"open_and_fold_{k}"]["ratio_vs_fold"] <= 2
                                                         for k in ("simple", "mixed"))
    if want("checkpoints"):
        for k in ("simple", "mixed"):
            ck = out[f"checkpoints_{k}"]
            targets[f"{k}_state_at_median_le_200ms"] = ck["state_at_random_median_ms"] <= 200
            targets[f"{k}_state_at_p99_le_500ms"] = ck["state_at_random_p99_ms"] <= 500
            targets[f"{k}_memory_le_2x_final"] = ck["memory_over_final"] <= 2
        targets["mixed_checkpoints_le_15pct_of_segments"] = out["checkpoints_mixed"]["checkpoint_over_segments"] <= 0.15
    if want("activegraph"):
        targets["activegraph_ge_10x"] = out["activegraph"]["ratio_last"] >= 10
    out["targets"] = targets
    print(json.dumps(out))


if __name__ == "__main__":
    main()
