"""Benchmark the span waterfall: figure build time for 1k / 10k / 100k spans, ``run.spans()``
apart, and the Chromium render time of the 100k figure.

    python bench/widgets_waterfall.py

Progress goes to stderr; one JSON line with the figures goes to stdout. Everything happens in
a temp dir. Times are medians of 3 trials.

- Synthetic runs are written through the store's writer (``durability="none"``, one segment,
  a scripted clock so the spans spread over time like a real run): a root ``agent`` span and,
  per step, an ``agent`` step span holding an ``llm`` span (with usage) and a ``tool`` span
  (one in 97 failing): ``1 + 3k`` spans, 8 events per step.
- ``spans_s``: ``run.spans()`` on a freshly opened run (nothing cached).
- ``figure_s``: ``waterfall_figure(run, spans=table)`` with the span table already computed:
  the figure alone. ``total_s``: a fresh run to a figure (both). Targets: 10k spans <= 2 s,
  100k <= 10 s (total).
- ``render_100k_s``: Chromium (Debian's, through Playwright) from ``page.goto`` of the
  self-contained HTML (plotly.js inlined) to ``.main-svg`` visible; ``render_100k_bars_s``
  until every bar is in the DOM. The same for the 1k-span figure as the baseline.
- ``full_detail_10k_*``: the 10k run drawn with aggregation off (one bar per span): what
  aggregation saves.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import logger, median_time

import agentlog as al
from agentlog.widgets.waterfall import waterfall_figure

SIZES = (1_000, 10_000, 100_000)
TRIALS = 3
T0 = 1_796_241_600.0
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]


log = logger("widgets_waterfall")



class Clock:
    """A scripted clock: the builder moves it forward between events."""

    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def write_run(store: Any, run_id: str, n_spans: int, seed: int = 1) -> Any:
    """A run of ``n_spans`` spans (``1 + 3k``, rounded up), 8 events per step."""
    rnd = random.Random(seed)
    clock = Clock()
    w = store.create_run(run_id=run_id, clock=clock, durability="none", segment_events=4 * n_spans + 10)
    w.emit("span.started", {"name": "agent", "kind": "agent", "parent": None}, span_id="root")
    for k in range(-(-(n_spans - 1) // 3)):
        p, lm, tl = f"p{k}", f"l{k}", f"t{k}"
        clock.t += 0.002
        w.emit("span.started", {"name": f"step {k}", "kind": "agent", "parent": "root"}, span_id=p)
        clock.t += 0.003
        w.emit("span.started", {"name": "gpt-4o-mini", "kind": "llm", "parent": p}, span_id=lm)
        clock.t += rnd.uniform(0.3, 2.0)
        w.emit("llm.response", {"key": f"k{k}", "model": "gpt-4o-mini"}, span_id=lm, model="gpt-4o-mini",
               input_tokens=rnd.randint(100, 4000), output_tokens=rnd.randint(5, 400), cached_tokens=0,
               cost_usd=rnd.uniform(1e-5, 1e-3))
        w.emit("span.ended", {"name": "gpt-4o-mini", "status": "ok", "error": None}, span_id=lm)
        clock.t += 0.002
        w.emit("span.started", {"name": "search", "kind": "tool", "parent": p}, span_id=tl)
        clock.t += rnd.uniform(0.01, 0.3)
        failed = k % 97 == 96
        w.emit("span.ended", {"name": "search", "status": "error" if failed else "ok",
                              "error": "TimeoutError" if failed else None}, span_id=tl)
        clock.t += 0.002
        w.emit("span.ended", {"name": f"step {k}", "status": "ok", "error": None}, span_id=p)
    clock.t += 0.001
    w.emit("span.ended", {"name": "agent", "status": "ok", "error": None}, span_id="root")
    w.close("finished")
    return store.run(run_id)


def bench_build(store: Any, n: int) -> dict[str, Any]:
    run_id = f"spans-{n}"
    t0 = time.perf_counter()
    write_run(store, run_id, n)
    log(f"wrote {run_id} in {time.perf_counter() - t0:.1f} s")
    spans_s = median_time(TRIALS, lambda: store.run(run_id).spans())
    table = store.run(run_id).spans()
    run = store.run(run_id)
    figure_s = median_time(TRIALS, lambda: waterfall_figure(run, spans=table))
    total_s = median_time(TRIALS, lambda: waterfall_figure(store.run(run_id)))
    meta = waterfall_figure(run, spans=table).layout.meta["agentlog"]
    log(f"{len(table):,} spans: spans() {spans_s:.3f} s, figure {figure_s:.3f} s, total {total_s:.3f} s, "
        f"{meta['bars']:,} bars")
    return {f"spans_{n}": len(table), f"spans_{n}_s": round(spans_s, 3),
            f"figure_{n}_s": round(figure_s, 3), f"total_{n}_s": round(total_s, 3),
            f"bars_{n}": meta["bars"], f"aggregated_{n}": meta["aggregated"]}


def render_times(browser: Any, path: Path, bars: int) -> tuple[float, float]:
    """Median seconds from goto to ``.main-svg`` visible, and to every bar in the DOM."""
    svg, full = [], []
    for _ in range(TRIALS):
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        t0 = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector(".main-svg", state="visible", timeout=120_000)
        svg.append(time.perf_counter() - t0)
        page.wait_for_function(f"document.querySelectorAll('.barlayer .point').length >= {bars}",
                               timeout=120_000)
        full.append(time.perf_counter() - t0)
        page.close()
    return statistics.median(svg), statistics.median(full)


def bench_render(store: Any, tmp: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright
    figs = {"100k": waterfall_figure(store.run("spans-100000")),
            "1k": waterfall_figure(store.run("spans-1000")),
            "full_detail_10k": waterfall_figure(store.run("spans-10000"), max_bars=10**9)}
    out: dict[str, Any] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for name, fig in figs.items():
                path = tmp / f"waterfall_{name}.html"
                fig.write_html(path, include_plotlyjs=True)
                bars = fig.layout.meta["agentlog"]["bars"]
                svg, full = render_times(browser, path, bars)
                log(f"render {name}: .main-svg {svg:.3f} s, all {bars:,} bars {full:.3f} s "
                    f"({path.stat().st_size / 1e6:.1f} MB)")
                out[f"render_{name}_s"] = round(svg, 3)
                out[f"render_{name}_bars_s"] = round(full, 3)
                out[f"html_{name}_mb"] = round(path.stat().st_size / 1e6, 2)
        finally:
            browser.close()
    out["render_100k_over_1k"] = round(out["render_100k_s"] / out["render_1k_s"], 2)
    out["render_full_detail_10k_over_100k"] = round(out["render_full_detail_10k_bars_s"]
                                                   / out["render_100k_bars_s"], 2)
    return out


def measure() -> dict[str, Any]:
    """Build the runs, time spans(), the figures and the Chromium render; return the figures."""
    tmp = Path(tempfile.mkdtemp(prefix="agentlog-bench-waterfall-"))
    try:
        store = al.Store(tmp / "store")
        figures: dict[str, Any] = {"bench": "widgets_waterfall", "trials": TRIALS}
        for n in SIZES:
            figures.update(bench_build(store, n))
        run10 = store.run("spans-10000")
        table10 = run10.spans()
        full = median_time(TRIALS, lambda: waterfall_figure(run10, spans=table10, max_bars=10**9))
        figures["full_detail_10k_figure_s"] = round(full, 3)
        figures["target_10k_s"], figures["target_100k_s"] = 2.0, 10.0
        figures["within_target"] = (figures["total_10000_s"] <= 2.0 and figures["total_100000_s"] <= 10.0)
        figures.update(bench_render(store, tmp))
        return figures
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(measure()))
