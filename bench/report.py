"""Benchmark the static HTML report: time to write it and its size, per sample run and for a
synthetic 100,000-event run.

    python bench/report.py [--quick]

Progress goes to stderr; one JSON line with the figures goes to stdout. Everything happens in a
temp dir. Each time is the median of 3 trials, each on a freshly opened store (nothing cached),
of ``write_report(run, path)`` (for ``sre-0001`` also ``vs=sre-0001-calm``). For the long run
the time of each step (verify, summary, waterfall, cost, events) is reported too, and the page
size against the plotly.js bundle inlined in it (about 4.7 MB of any report): the report adds
what the run adds. The long run lists its first 2,000 events (``agentlog.report.EVENT_LIMIT``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import logger, median_time

import agentlog as al
from agentlog.report import write_report

log = logger("report")



def write_long_run(store: Any, run_id: str, n_events: int, seed: int = 7) -> Any:
    """An agent-like run: 8-event steps (an llm span with request and response, a tool span with
    call and result) under one agent span, written fast (``durability="none"``, one segment)."""
    rnd = random.Random(seed)
    w = store.create_run(run_id=run_id, name="synthetic long run", durability="none",
                         segment_events=n_events + 10)
    w.emit("span.started", {"name": "agent", "kind": "agent", "parent": None}, span_id="root")
    step = 0
    while w.seq < n_events - 1:
        seq = w.seq
        block = [
            ("span.started", {"name": "gpt-4o-mini", "kind": "llm", "parent": "root"}, {}),
            ("llm.request", {"key": f"k{step}", "model": "gpt-4o-mini",
                             "messages": [{"role": "user", "content": f"step {step}"}]}, {}),
            ("llm.response", {"key": f"k{step}", "cost_source": "computed",
                              "message": {"role": "assistant", "content": f"answer {step}"}},
             {"model": "gpt-4o-mini", "input_tokens": rnd.randint(100, 4000),
              "output_tokens": rnd.randint(5, 400), "duration_ms": rnd.uniform(100, 2000),
              "cost_usd": rnd.uniform(1e-5, 1e-3)}),
            ("span.ended", {"name": "gpt-4o-mini", "status": "ok", "error": None}, {}),
            ("span.started", {"name": "search", "kind": "tool", "parent": "root"}, {}),
            ("tool.call", {"key": f"t{step}", "name": "search", "args": {"q": f"q{step}"}}, {}),
            ("tool.result", {"key": f"t{step}", "name": "search", "result": f"r{step}"},
             {"duration_ms": rnd.uniform(1, 50)}),
            ("span.ended", {"name": "search", "status": "ok", "error": None}, {}),
        ]
        for k, (type_, payload, usage) in enumerate(block[: n_events - 1 - w.seq]):
            w.emit(type_, payload, span_id=f"s{seq}" if k < 4 else f"s{seq + 4}", **usage)
        step += 1
    w.emit("span.ended", {"name": "agent", "status": "ok", "error": None}, span_id="root")
    w.close("finished")
    return store.run(run_id)


def bench_one(root: Path, run_id: str, out: Path, trials: int, vs: str | None = None) -> dict[str, Any]:
    def once() -> Path:
        store = al.Store(root)  # fresh: no table or snapshot cached
        return write_report(store.run(run_id), out, vs=store.run(vs) if vs else None)

    seconds = median_time(trials, once)
    return {"s": round(seconds, 3), "mb": round(out.stat().st_size / 1e6, 2)}


def steps(root: Path, run_id: str, out: Path) -> dict[str, float]:
    """Seconds spent in each step of one report (the progress callback marks the starts; the
    last step includes assembling and writing the page)."""
    marks: list[tuple[str, float]] = []
    store = al.Store(root)
    t0 = time.perf_counter()
    write_report(store.run(run_id), out, progress=lambda step: marks.append((step, time.perf_counter())))
    marks.append(("write", time.perf_counter()))
    result = {"open": round(marks[0][1] - t0, 3)}
    for (name, start), (_, end) in itertools.pairwise(marks):
        result[name] = round(end - start, 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 20,000-event long run, 1 trial")
    args = parser.parse_args()
    trials = 1 if args.quick else 3
    n_long = 20_000 if args.quick else 100_000
    from plotly.offline import get_plotlyjs
    plotly_mb = len(get_plotlyjs().encode()) / 1e6

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        store = al.examples.sample_store(copy_to=root)
        result: dict[str, Any] = {"trials": trials, "plotly_js_mb": round(plotly_mb, 2)}
        samples = {}
        for rid in store.list_runs():
            samples[rid] = bench_one(root, rid, Path(tmp) / f"{rid}.html", trials)
            log(f"{rid}: {samples[rid]['s']:.3f} s, {samples[rid]['mb']:.2f} MB")
        result["samples"] = samples
        result["sre_vs_calm"] = bench_one(root, "sre-0001", Path(tmp) / "vs.html", trials, vs="sre-0001-calm")
        log(f"sre-0001 vs sre-0001-calm: {result['sre_vs_calm']}")

        log(f"writing a {n_long:,}-event run")
        t0 = time.perf_counter()
        write_long_run(al.Store(root), "long", n_long)
        log(f"written in {time.perf_counter() - t0:.1f} s; reporting it")
        long = bench_one(root, "long", Path(tmp) / "long.html", trials)
        long["events"] = n_long
        runs = [steps(root, "long", Path(tmp) / "long.html") for _ in range(trials)]
        long["steps_s"] = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
        long["mb_beyond_plotly_js"] = round(long["mb"] - plotly_mb, 2)
        log(f"long: {long}")
        result["long_run"] = long
        times = [v["s"] for v in samples.values()]
        result["samples_median_s"] = round(statistics.median(times), 3)
        result["samples_max_s"] = round(max(times), 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
