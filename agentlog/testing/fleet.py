"""A generated fleet of runs, recorded through the real writer: for the remote-store tests and
``bench/fleet.py``.

Each run is a loop of model answers (several models, some with an unknown cost) and tool
results, with an occasional large tool result that becomes a blob shared across runs. With
``spans=True`` each run is shaped as a recorded agent is: an ``agent`` span holding, per call,
an ``llm`` span (named after the model: ``llm.request`` then ``llm.response``, or a failed call
every so often) and a ``tool`` span (``tool.call`` then ``tool.result``).

>>> import tempfile
>>> store = fleet_store(tempfile.mkdtemp(), runs=3, calls=4)
>>> len(store.list_runs()), len(store.run(store.list_runs()[0]))
(3, 8)
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

from ..events import (
    CallFailed,
    LLMRequest,
    LLMResponse,
    SpanEnded,
    SpanStarted,
    ToolCall,
    ToolResult,
    Usage,
)

if TYPE_CHECKING:
    from ..store.store import Store

__all__ = ["MODELS", "fleet_store"]

#: The models the generated runs call (one of them never priced: unknown costs).
MODELS = ("gpt-4o-mini", "gpt-4o", "claude-3-5-haiku", "local-llama")
_DAY = 86_400.0


def fleet_store(path: str | os.PathLike[str], *, runs: int, calls: int, seed: int = 0,
                segment_events: int = 65536, shared_blob_every: int = 5, spans: bool = False) -> Store:
    """Record ``runs`` runs of ``calls`` model calls each (and as many tool results) into a
    store at ``path``, over a few days of fixed clock time; return the store.

    Args:
        path: the store folder.
        runs: how many runs.
        calls: model calls per run (each followed by a tool result).
        seed: makes the fleet reproducible.
        segment_events: the writer's segment size.
        shared_blob_every: every this many runs, one tool result holds a large text that every
            such run shares (one blob).
        spans: record spans, requests and tool calls around each answer and result (see the
            module docstring): 8 events a call instead of 2 (and the agent span's 2), and every
            13th model call fails.
    """
    from ..store.store import Store

    store = Store(path)
    rng = random.Random(seed)
    big = "shared context " * 2000
    for r in range(runs):
        t = [1_767_225_600.0 + r * _DAY / 7]

        def clock(t: list[float] = t) -> float:
            t[0] += 0.5
            return t[0]

        with store.create_run(run_id=f"fleet-{r:05d}", durability="none", clock=clock,
                              segment_events=segment_events) as w:
            if spans:
                w.emit(SpanStarted(name=f"agent {r % 3}", kind="agent"), span_id="agent", actor="agent")
            for i in range(calls):
                model = MODELS[rng.randrange(len(MODELS))]
                usage = Usage(input_tokens=rng.randrange(10, 5000), output_tokens=rng.randrange(1, 800),
                              cached_tokens=rng.randrange(0, 10))
                cost = None if model == "local-llama" else round(rng.uniform(1e-5, 0.05), 8)
                answer = LLMResponse(key=f"k{r}-{i}", model=model, usage=usage, cost_usd=cost,
                                     cost_source="unknown" if cost is None else "computed",
                                     message={"role": "assistant", "content": f"answer {i} of run {r}"},
                                     duration_ms=float(rng.randrange(50, 3000)))
                result = big if (i == 0 and r % shared_blob_every == 0) else f"result {i}"
                tool = ToolResult(key=f"t{r}-{i}", name="search", result=result,
                                  duration_ms=float(rng.randrange(1, 300)))
                if not spans:
                    w.emit(answer, actor="agent")
                    w.emit(tool, actor="tools")
                    continue
                llm, step = f"llm-{i}", f"tool-{i}"
                w.emit(SpanStarted(name=model, kind="llm", parent="agent"), span_id=llm, actor="agent")
                ask = w.emit(LLMRequest(key=f"k{r}-{i}", model=model,
                                        messages=[{"role": "user", "content": f"question {i} of run {r}"}]),
                             span_id=llm, actor="agent")
                if (r * calls + i) % 13 == 12:
                    w.emit(CallFailed(error="RateLimitError: slow down", type="RateLimitError",
                                      kind=LLMResponse.TYPE, key=f"k{r}-{i}"),
                           span_id=llm, actor="agent", caused_by=ask.seq)
                    w.emit(SpanEnded(name=model, status="error", error="RateLimitError: slow down"),
                           span_id=llm, actor="agent")
                else:
                    w.emit(answer, span_id=llm, actor="agent", caused_by=ask.seq)
                    w.emit(SpanEnded(name=model), span_id=llm, actor="agent")
                w.emit(SpanStarted(name="search", kind="tool", parent="agent"), span_id=step, actor="tools")
                call = w.emit(ToolCall(key=f"t{r}-{i}", name="search", args={"q": f"q{i}"}),
                              span_id=step, actor="tools")
                w.emit(tool, span_id=step, actor="tools", caused_by=call.seq)
                w.emit(SpanEnded(name="search"), span_id=step, actor="tools")
            if spans:
                w.emit(SpanEnded(name=f"agent {r % 3}"), span_id="agent", actor="agent")
    return store
