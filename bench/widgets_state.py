"""Benchmark the state views: Scrubber steps and jumps on a 100,000-event run, DiffView builds.

    python bench/widgets_state.py [--quick]

Progress goes to stderr; the last line on stdout is one JSON object with the figures.
Everything happens in a temp dir.

The run is agent-like and its state grows: 8-event steps of a model call (span, request,
response with usage, span end), a tool call (call, result) and two ``state.patch`` events
of 1-3 ops each (a counter, a small scratch map, a ``notes`` map that keeps growing with some
notes rescored or removed, a ``log`` list that keeps growing), written through the store's
writer (``durability="none"``). By the end ``vars.notes`` holds about 10,000 notes and
``vars.log`` about 4,800 lines, so a naive tree would be megabytes of HTML per step.

- **Scrubber step**: ``scrubber.step(+1)`` from the middle of the run, >= 500 times, with
  the ipywidgets view built (so each step also pushes the HTML into the widgets and moves the
  chart's marker): the event read, one event folded, ``diff_states``, the event panel, the
  state tree and the patch rendered. Median and p99. Target: median <= 30 ms.
- **Scrubber jump**: ``scrubber.goto(n)`` to >= 200 random seqs (the snapshot index folds up
  to K events, then the same work). Median and p99.
- **DiffView build**: ``DiffView(run, fork)`` on freshly opened runs (nothing cached), for a
  fork sharing all but the last 1,000 events and one sharing only the first 1,000; the build
  includes ``al.diff``, the states at the divergence and their trees, and the summary.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

import agentlog as al
from agentlog.widgets.diffview import DiffView
from agentlog.widgets.scrubber import Scrubber

MODEL = "gpt-4o-mini"


def log(msg: str) -> None:
    print(f"[bench/widgets_state] {msg}", file=sys.stderr, flush=True)


class _Scratchpad:
    """Seeded ``state.patch`` ops over a growing state (the mixed workload of bench/fold.py)."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.live: deque[int] = deque()
        self.made = 0

    def setup(self) -> list[dict[str, Any]]:
        return [{"op": "add", "path": "/step", "value": 0}, {"op": "add", "path": "/scratch", "value": {}},
                {"op": "add", "path": "/notes", "value": {}}, {"op": "add", "path": "/log", "value": []}]

    def ops(self, seq: int, variant: str) -> list[dict[str, Any]]:
        rnd, out = self.rnd, []
        for _ in range(rnd.randint(1, 3)):
            r = rnd.random()
            if r < 0.3:
                out.append({"op": "replace", "path": "/step", "value": seq})
            elif r < 0.5:
                out.append({"op": "add", "path": f"/scratch/k{rnd.randrange(200)}", "value": rnd.randrange(10**6)})
            elif r < 0.75 or len(self.live) < 2:
                out.append({"op": "add", "path": f"/notes/n{self.made}",
                            "value": {"text": f"note {self.made} at {seq}{variant}", "score": rnd.random()}})
                self.live.append(self.made)
                self.made += 1
            elif r < 0.85:
                out.append({"op": "add", "path": "/log/-", "value": f"step {seq}: ok{variant}"})
            elif r < 0.95:
                i = self.live[-1 - rnd.randrange(min(1000, len(self.live)))]
                out.append({"op": "replace", "path": f"/notes/n{i}/score", "value": rnd.random()})
            else:
                out.append({"op": "remove", "path": f"/notes/n{self.live.popleft()}"})
        return out


def emit_steps(w: Any, n_events: int, pad: _Scratchpad, rnd: random.Random, *, first_step: int = 0,
               variant: str = "") -> None:
    """Emit ``n_events`` events in 8-event steps (see the module docstring)."""
    step, emitted = first_step, 0
    while emitted < n_events:
        seq = w.seq
        block: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
            ("span.started", {"name": MODEL, "kind": "llm", "parent": "root"}, {}),
            ("llm.request", {"key": f"k{step}", "model": MODEL,
                             "messages": [{"role": "system", "content": "You keep notes."},
                                          {"role": "user", "content": f"step {step}{variant}"}]}, {}),
            ("llm.response", {"key": f"k{step}", "model": MODEL,
                              "message": {"role": "assistant", "content": f"answer {step}{variant}"}},
             {"model": MODEL, "input_tokens": rnd.randint(100, 4000), "output_tokens": rnd.randint(5, 400),
              "cached_tokens": rnd.randint(0, 100), "duration_ms": rnd.uniform(100, 2000),
              "cost_usd": rnd.uniform(1e-5, 1e-2)}),
            ("span.ended", {"name": MODEL, "status": "ok", "error": None}, {}),
            ("state.patch", {"ops": pad.ops(seq + 4, variant)}, {}),
            ("tool.call", {"key": f"t{step}", "name": "search", "args": {"q": f"q{step}"}}, {}),
            ("tool.result", {"key": f"t{step}", "name": "search", "result": f"r{step}{variant}"},
             {"duration_ms": rnd.uniform(1, 50)}),
            ("state.patch", {"ops": pad.ops(seq + 7, variant)}, {}),
        ]
        for k, (type_, payload, usage) in enumerate(block[: n_events - emitted]):
            caused_by = seq + k - 1 if type_ in ("llm.response", "tool.result") else None
            w.emit(type_, payload, span_id=f"s{seq}", caused_by=caused_by, actor="agent", **usage)
        emitted += min(len(block), n_events - emitted)
        step += 1


def write_run(store: Any, run_id: str, n: int) -> Any:
    w = store.create_run(run_id=run_id, durability="none", segment_events=n + 10)
    pad = _Scratchpad(1)
    w.emit("state.patch", {"ops": pad.setup()}, span_id="root")
    emit_steps(w, n - 1, pad, random.Random(1))
    w.close("finished")
    return store.run(run_id)


def write_fork(store: Any, parent: Any, at: int, run_id: str) -> Any:
    """A fork sharing ``parent``'s events ``0..at``; its own events follow the same kind of
    steps with other values."""
    w = store.create_run(run_id=run_id, fork_of=(parent.id, at), durability="none",
                         segment_events=len(parent) + 10)
    pad = _Scratchpad(2)
    pad.made = 10**6  # new note ids: no clash with the parent's
    emit_steps(w, len(parent) - (at + 1), pad, random.Random(2), first_step=at // 8, variant="*")
    w.close("finished")
    return store.run(run_id)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def bench_scrubber(root: Path, n: int, steps: int, jumps: int) -> dict[str, Any]:
    store = al.Store(root)
    t0 = time.perf_counter()
    write_run(store, "long", n)
    log(f"wrote a {n:,}-event run in {time.perf_counter() - t0:.1f} s")
    run = store.run("long")
    t0 = time.perf_counter()
    s = Scrubber(run, start=n // 2)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    s.widget  # noqa: B018 - build the ipywidgets view, so steps also update it
    widget_s = time.perf_counter() - t0
    final = run.state_at(n - 1)["vars"]
    log(f"scrubber opened in {open_s:.2f} s (index built), widget in {widget_s:.2f} s; "
        f"final vars: {len(final['notes']):,} notes, {len(final['log']):,} log lines")
    forward: list[float] = []
    html_bytes: list[int] = []
    for _ in range(steps):
        t0 = time.perf_counter()
        s.step(+1)
        forward.append(time.perf_counter() - t0)
        html_bytes.append(len(s.state_html) + len(s.event_html) + len(s.patch_html))
    log(f"forward step: median {ms(statistics.median(forward))} ms, p99 {ms(percentile(forward, 0.99))} ms")
    rnd = random.Random(11)
    jump: list[float] = []
    for _ in range(jumps):
        target = rnd.randrange(n)
        t0 = time.perf_counter()
        s.goto(target)
        jump.append(time.perf_counter() - t0)
    log(f"random jump: median {ms(statistics.median(jump))} ms, p99 {ms(percentile(jump, 0.99))} ms")
    backward: list[float] = []
    for _ in range(min(steps, 200)):
        t0 = time.perf_counter()
        s.goto(s.seq - 1 if s.seq > 0 else 1)
        backward.append(time.perf_counter() - t0)
    median_step = statistics.median(forward)
    return {"events": n, "scrubber_open_s": round(open_s, 3), "scrubber_widget_s": round(widget_s, 3),
            "step_forward_median_ms": ms(median_step), "step_forward_p99_ms": ms(percentile(forward, 0.99)),
            "step_forward_n": len(forward),
            "step_back_median_ms": ms(statistics.median(backward)),
            "jump_median_ms": ms(statistics.median(jump)), "jump_p99_ms": ms(percentile(jump, 0.99)),
            "jump_n": len(jump), "step_html_kb_median": round(statistics.median(html_bytes) / 1024, 1),
            "final_notes": len(final["notes"]), "final_log_lines": len(final["log"]),
            "step_target_ms": 30.0, "step_within_target": median_step <= 0.030}


def bench_diffview(root: Path, n: int, trials: int) -> dict[str, Any]:
    store = al.Store(root)
    parent = store.run("long")
    t0 = time.perf_counter()
    write_fork(store, parent, n - 1_001, "fork-late")
    write_fork(store, parent, 999, "fork-early")
    log(f"wrote two forks in {time.perf_counter() - t0:.1f} s")
    out: dict[str, Any] = {}
    for name, at in (("late", n - 1_001), ("early", 999)):
        times, goto = [], []
        view = None
        for _ in range(trials):
            fresh = al.Store(root)
            t0 = time.perf_counter()
            view = DiffView(fresh.run("long"), fresh.run(f"fork-{name}"))
            view.summary_html  # noqa: B018 - part of what is shown
            times.append(time.perf_counter() - t0)
        assert view is not None and view.divergence_seq == at + 1, view
        rnd = random.Random(5)
        for _ in range(50):
            step = rnd.randrange(view.divergence_step or 0, len(view.rows))
            t0 = time.perf_counter()
            view.goto(step)
            goto.append(time.perf_counter() - t0)
        log(f"DiffView, fork {name} (diverges at {at + 1:,}): build {statistics.median(times):.2f} s, "
            f"goto median {ms(statistics.median(goto))} ms; {len(view.rows):,} aligned steps, "
            f"{len(view.patch)} differences at the last goto")
        out[f"diffview_{name}_build_s"] = round(statistics.median(times), 3)
        out[f"diffview_{name}_goto_median_ms"] = ms(statistics.median(goto))
        out[f"diffview_{name}_aligned_steps"] = len(view.rows)
    return out


def measure(quick: bool | None = None) -> dict[str, Any]:
    """Run the benchmark; return the figures (see the module docstring).

    Args:
        quick: 20,000 events and fewer steps; by default, ``--quick`` on the command line.
    """
    if quick is None:
        quick = "--quick" in sys.argv[1:]
    n = 20_000 if quick else 100_000
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-widgets-") as tmp:
        root = Path(tmp) / "store"
        figures = bench_scrubber(root, n, steps=200 if quick else 500, jumps=50 if quick else 200)
        figures.update(bench_diffview(root, n, trials=1 if quick else 3))
    return figures


if __name__ == "__main__":
    print(json.dumps(measure()))
