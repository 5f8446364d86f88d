"""Benchmark the fold engine: bulk fold throughput, random access, snapshot memory, diff cost.

Run ``python bench/fold.py [--quick]``. Progress goes to stderr; the last line on stdout is
one JSON object with the figures (``--quick`` runs 100,000 events instead of 1,000,000).

Two workloads of ``state.patch`` events with 1–3 ops each, made in memory by a seeded
generator:

``simple``
    add/replace of scalar values: 60 % at ``/k<0..999>``, 30 % at ``/obj<0..99>/f<0..9>``
    (two deep), 10 % ``add /log/-`` (a list that grows).
``mixed``
    an agent's scratchpad: 35 % ``replace /step`` (a counter), 20 % ``add
    /scratch/k<0..199>`` (a small working set), 20 % ``add /notes/n<i>`` of a new ``{"text",
    "score"}`` note (a map that keeps growing; every path is new), 10 % ``add /log/-``, 10 %
    ``replace /notes/n<i>/score`` of one of the 1,000 newest notes, 5 % ``remove`` of the
    oldest note.

The baseline applies the same ops to plain dicts and lists in place (values copied, so the
state never aliases a payload): the limit for a fold that keeps no history.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Iterator
from itertools import islice
from typing import Any

from agentlog.events import Event
from agentlog.folding import Reducers, SnapshotIndex, diff_states, fold, freeze, thaw
from agentlog.folding.engine import default_every


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def generate_simple(n: int, seed: int = 7) -> Iterator[Event]:
    """The simple workload, seq 0..n-1 (event 0 sets up the containers)."""
    rng = random.Random(seed)
    yield Event(seq=0, type="state.patch", payload={"ops": [
        {"op": "add", "path": "/log", "value": []},
        *({"op": "add", "path": f"/obj{j}", "value": {}} for j in range(100)),
    ]})
    for seq in range(1, n):
        ops = []
        for _ in range(rng.randint(1, 3)):
            r = rng.random()
            if r < 0.6:
                ops.append({"op": "add", "path": f"/k{rng.randrange(1000)}", "value": rng.randrange(10**6)})
            elif r < 0.9:
                ops.append({"op": "add", "path": f"/obj{rng.randrange(100)}/f{rng.randrange(10)}",
                            "value": rng.random()})
            else:
                ops.append({"op": "add", "path": "/log/-", "value": seq})
        yield Event(seq=seq, type="state.patch", payload={"ops": ops})


def generate_mixed(n: int, seed: int = 7) -> Iterator[Event]:
    """The mixed workload, seq 0..n-1 (event 0 sets up the containers)."""
    rng = random.Random(seed)
    yield Event(seq=0, type="state.patch", payload={"ops": [
        {"op": "add", "path": "/step", "value": 0},
        {"op": "add", "path": "/scratch", "value": {}},
        {"op": "add", "path": "/notes", "value": {}},
        {"op": "add", "path": "/log", "value": []},
    ]})
    live: deque[int] = deque()
    made = 0
    for seq in range(1, n):
        ops = []
        for _ in range(rng.randint(1, 3)):
            r = rng.random()
            if r < 0.35:
                ops.append({"op": "replace", "path": "/step", "value": seq})
            elif r < 0.55:
                ops.append({"op": "add", "path": f"/scratch/k{rng.randrange(200)}", "value": rng.randrange(10**6)})
            elif r < 0.75 or len(live) < 2:
                ops.append({"op": "add", "path": f"/notes/n{made}",
                            "value": {"text": f"note {made} at {seq}", "score": rng.random()}})
                live.append(made)
                made += 1
            elif r < 0.85:
                ops.append({"op": "add", "path": "/log/-", "value": f"step {seq}: ok"})
            elif r < 0.95:
                i = live[-1 - rng.randrange(min(1000, len(live)))]
                ops.append({"op": "replace", "path": f"/notes/n{i}/score", "value": rng.random()})
            else:
                ops.append({"op": "remove", "path": f"/notes/n{live.popleft()}"})
        yield Event(seq=seq, type="state.patch", payload={"ops": ops})


def plain_copy(value: Any) -> Any:
    """A JSON value copied so that the state never aliases an event's payload."""
    t = type(value)
    if t is dict:
        return {k: plain_copy(v) for k, v in value.items()}
    if t is list:
        return [plain_copy(v) for v in value]
    return value


def plain_apply(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """The same ops on plain dicts/lists, in place (no history kept, no checks beyond JSON's)."""
    for op in ops:
        parts = op["path"].split("/")[1:]
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if type(parent) is list else parent[part]
        last, kind = parts[-1], op["op"]
        if kind == "remove":
            del parent[last]
            continue
        value = op["value"]
        if type(value) is dict or type(value) is list:
            value = plain_copy(value)
        if type(parent) is list:
            if last == "-":
                parent.append(value)
            else:
                parent[int(last)] = value
        else:
            if kind == "replace" and last not in parent:
                raise KeyError(last)
            parent[last] = value


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def traced(fn: Any) -> tuple[int, Any]:
    """Bytes still allocated after ``fn()`` (what its result holds), by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        gc.collect()
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return size, result


def throughput(name: str, events: list[Event], reducers: Reducers, every: int,
               repeats: int) -> tuple[dict[str, Any], SnapshotIndex]:
    n = len(events)
    log(f"[{name}] baseline: plain dicts in place ({repeats}x) …")
    base_times = []
    for _ in range(repeats):
        doc: dict[str, Any] = {}
        gc.collect()
        secs, _ = timed(lambda doc=doc: [plain_apply(doc, e.payload["ops"]) for e in events])
        base_times.append(secs)
    base_s = statistics.median(base_times)
    log(f"[{name}] building the snapshot index ({repeats}x) …")
    times, cpus = [], []
    for _ in range(repeats):
        index = None
        gc.collect()
        index = SnapshotIndex(lambda a, b: events[a:b], n, reducers, every=every)
        cpu = time.process_time()
        secs, _ = timed(index.build)
        cpus.append(time.process_time() - cpu)
        times.append(secs)
    best, best_cpu = statistics.median(times), statistics.median(cpus)  # medians, as the baseline
    final = index.at(n - 1)
    if thaw(final["vars"]) != doc:
        raise SystemExit(f"[{name}] the fold and the baseline disagree")
    log(f"[{name}] at(n) for 1,000 random n …")
    rng = random.Random(1)
    times = []
    for _ in range(1000):
        k = rng.randrange(n)
        t = time.perf_counter()
        index.at(k)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {
        "ops": sum(len(e.payload["ops"]) for e in events),
        "index_build_events_per_s": round(n / best),
        "index_build_s": round(best, 3),
        "index_build_cpu_s": round(best_cpu, 3),
        "baseline_dict_events_per_s": round(n / base_s),
        "ratio_to_dict_baseline": round(base_s / best, 3),
        "at_ms_median": round(statistics.median(times), 3),
        "at_ms_p99": round(times[int(len(times) * 0.99) - 1], 3),
    }, index


def memory(name: str, gen: Any, n: int, reducers: Reducers, every: int) -> dict[str, Any]:
    """Snapshots versus the final state alone versus deepcopy snapshots, by tracemalloc.

    Events are generated while traced and dropped as the fold goes (as when a store decodes
    them), so both figures include the values the states hold.
    """
    log(f"[{name}] memory: the final state alone …")

    def final_only() -> Any:
        state = fold(gen(n), reducers)

        return state

    def build_all() -> SnapshotIndex:
        index = SnapshotIndex(lambda a, b: islice(gen(n), a, b), n, reducers, every=every).build()

        return index

    final_bytes, _final = traced(final_only)
    log(f"[{name}] memory: every snapshot …")

    all_bytes, index = traced(build_all)
    # deepcopy per snapshot (plain-dict snapshots): sampled at 11 snapshots and summed over
    # all of them by the trapezoid rule; deepcopy shares str/int/float, as the states do.
    log(f"[{name}] memory: deepcopy per snapshot (11 sampled) …")
    snaps = index._snapshots
    picks = sorted({round(i * (len(snaps) - 1) / 10) for i in range(11)})
    sizes = []
    for j in picks:
        plain = thaw(snaps[j])
        size, _ = traced(lambda plain=plain: copy.deepcopy(plain))
        sizes.append(size)
    total = float(sizes[0])
    for (j0, s0), (j1, s1) in zip(zip(picks, sizes), zip(picks[1:], sizes[1:])):
        total += (s0 + s1) / 2 * (j1 - j0)
    return {
        "snapshots": index.snapshot_count,
        "final_state_mb": round(final_bytes / 2**20, 1),
        "all_snapshots_mb": round(all_bytes / 2**20, 1),
        "all_snapshots_over_final": round(all_bytes / final_bytes, 2),
        "deepcopy_final_mb": round(sizes[-1] / 2**20, 1),
        "deepcopy_all_snapshots_mb_estimated": round(total / 2**20, 1),
    }


def diff_cost(reducers: Reducers) -> dict[str, Any]:
    out = {}
    for keys in (10_000, 100_000):
        log(f"diff_states on a {keys:,}-key state …")
        before = fold([], reducers, initial=Reducers.standard().initial_state().set(
            "vars", freeze({f"k{i}": i for i in range(keys)})))
        event = Event(seq=0, type="state.patch", payload={"ops": [
            {"op": "replace", "path": "/k123", "value": -1}]})
        after = fold([event], reducers, initial=before)
        reps = 200
        secs, patches = timed(lambda a=before, b=after, k=reps: [diff_states(a, b) for _ in range(k)])
        assert len(patches[0]) == 1, patches[0]
        out[f"diff_us_{keys}_keys"] = round(secs / reps * 1e6, 1)
        # the same change made outside the fold (no lineage note): bucket scan in C
        other = before.set("vars", before["vars"].set("k123", -1))
        secs, patches = timed(lambda a=before, b=other: [diff_states(a, b) for _ in range(20)])
        assert len(patches[0]) == 1, patches[0]
        out[f"diff_us_{keys}_keys_outside_fold"] = round(secs / 20 * 1e6, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 events instead of 1,000,000")
    parser.add_argument("--every", type=int, default=None,
                        help="events between snapshots (default: default_every(events))")
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    every = args.every or default_every(n)
    reducers = Reducers.standard()
    out: dict[str, Any] = {"events": n, "every": every, "python": sys.version.split()[0],
                           "cpus": os.cpu_count(), "loadavg_at_start": round(os.getloadavg()[0], 2)}
    for name, gen in (("simple", generate_simple), ("mixed", generate_mixed)):
        log(f"[{name}] generating {n:,} events …")
        events = list(gen(n))
        figures, index = throughput(name, events, reducers, every, repeats=3)
        del events, index
        gc.collect()
        figures.update(memory(name, gen, n, reducers, every))
        out[name] = figures
        gc.collect()
    out.update(diff_cost(reducers))
    out["targets_met"] = {
        f"{name}_{what}": ok
        for name in ("simple", "mixed")
        for what, ok in (
            ("index_build_ge_250k_per_s", out[name]["index_build_events_per_s"] >= 250_000),
            ("at_median_le_20ms", out[name]["at_ms_median"] <= 20),
            ("snapshots_le_2x_final", out[name]["all_snapshots_over_final"] <= 2),
        )
    }
    log("done")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
