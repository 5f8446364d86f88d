"""Synthetic span runs for the waterfall and cost-dashboard tests (and the browser test).

:func:`span_run` writes a run of ``1 + 3 * steps`` spans through the store's writer
(``durability="none"``, a scripted clock): a root ``agent`` span, then per step an ``agent``
step span holding an ``llm`` span (a priced or unpriced model answer) and a ``tool`` span,
every ``error_every``-th tool span failing.
"""

from __future__ import annotations

import random
from typing import Any

T0 = 1_796_241_600.0  # 2026-12-02 20:00:00 UTC


class StepClock:
    """A clock the writer reads; the builder moves it forward."""

    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def span_run(store: Any, n_spans: int, *, run_id: str = "synthetic", error_every: int = 0,
             model: str = "gpt-4o-mini", priced: bool = True, seed: int = 1,
             tool_payload: str = "ok") -> Any:
    """A run of ``n_spans`` spans (rounded down to ``1 + 3k``), returned as a :class:`Run`."""
    rnd = random.Random(seed)
    clock = StepClock()
    w = store.create_run(run_id=run_id, name=run_id, clock=clock, durability="none",
                         segment_events=1_000_000)
    w.emit("run.started", {"inputs": "synthetic"})
    clock.advance(0.001)
    w.emit("span.started", {"name": "agent", "kind": "agent", "parent": None}, span_id="root",
           actor="agent")
    for k in range((n_spans - 1) // 3):
        step, llm, tool = f"p{k}", f"l{k}", f"t{k}"
        clock.advance(0.002)
        w.emit("span.started", {"name": f"step {k}", "kind": "agent", "parent": "root"}, span_id=step,
               actor="agent")
        clock.advance(0.003)
        w.emit("span.started", {"name": model, "kind": "llm", "parent": step}, span_id=llm, actor="agent")
        clock.advance(rnd.uniform(0.3, 2.0))
        cost = rnd.uniform(1e-5, 1e-3) if priced else None
        w.emit("llm.response", {"key": f"k{k}", "model": model,
                                "message": {"role": "assistant", "content": f"answer {k}"}},
               span_id=llm, actor="agent", model=model, input_tokens=rnd.randint(100, 4000),
               output_tokens=rnd.randint(5, 400), cached_tokens=0, cost_usd=cost)
        clock.advance(0.001)
        w.emit("span.ended", {"name": model, "status": "ok", "error": None}, span_id=llm, actor="agent")
        clock.advance(0.002)
        w.emit("span.started", {"name": "search", "kind": "tool", "parent": step}, span_id=tool,
               actor="agent")
        clock.advance(rnd.uniform(0.01, 0.3))
        failed = bool(error_every) and k % error_every == error_every - 1
        w.emit("tool.result", {"key": f"t{k}", "name": "search", "result": tool_payload},
               span_id=tool, actor="agent", duration_ms=5.0)
        clock.advance(0.001)
        w.emit("span.ended", {"name": "search", "status": "error" if failed else "ok",
                              "error": "TimeoutError: search took too long" if failed else None},
               span_id=tool, actor="agent")
        clock.advance(0.002)
        w.emit("span.ended", {"name": f"step {k}", "status": "ok", "error": None}, span_id=step,
               actor="agent")
    clock.advance(0.001)
    w.emit("span.ended", {"name": "agent", "status": "ok", "error": None}, span_id="root", actor="agent")
    w.emit("run.finished", {"result": "done"})
    w.close("finished")
    return store.run(run_id)
