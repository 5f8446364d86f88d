"""Benchmark record, strict replay, the response cache and forking.

Run ``python bench/replay.py [--quick]``. Progress goes to stderr; the last line on stdout is
one JSON object with the figures (``--quick`` divides the sizes by 10).

The program makes ``calls`` model calls in a row (a 0 ms or a 2 ms fake model, the OpenAI
Chat Completions shape, priced as ``gpt-4o-mini``), each followed by a ``state.patch`` of its
answer. Figures:

``record_vs_replay``
    recording (default durability, ``fsync``) and strict replay (every answer served from the
    log, every event compared with the recorded one) of 10,000 calls, for each latency:
    replay events/s and replay time as a fraction of the recording time.
``cache``
    one lookup = the request's cache key (SHA-256 of its canonical form) plus the
    ``ResponseCache`` take: median and p99 µs over 10,000 lookups.
``fork``
    a 2,000-step program with the 2 ms model (each step: a model call and a tool call),
    forked at its middle event with a program whose second half asks different questions (as
    after an upstream edit: those calls are new, so the fork really makes them), vs recording
    that whole program from scratch.
    Target: fork ≤ 55 % of a full re-run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentlog as al
from agentlog.capture.sinks import ResponseCache
from agentlog.keys import llm_key
from agentlog.testing.fakes import FakeLLM

MODEL = "gpt-4o-mini"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def request(i: int, note: str = "") -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "system", "content": "You count."},
                                         {"role": "user", "content": f"step {i}{note}"}]}


def counting_program(calls: int, model: FakeLLM) -> Callable[[Any], int]:
    def program(rec: Any) -> int:
        for i in range(calls):
            answer = rec.llm(request(i), call=model)
            rec.patch([{"op": "add", "path": "/last", "value": answer.content}])
        return calls
    return program


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def record_vs_replay(store: al.Store, calls: int, latency: float) -> dict[str, Any]:
    program = counting_program(calls, FakeLLM(lambda r: "ok", model=MODEL, latency=latency))
    record_s, run = timed(lambda: al.record(program, store=store, name=f"count-{latency}"))
    strict = counting_program(calls, FakeLLM.forbidden())
    replay_s, result = timed(lambda: al.replay(strict, run, mode="strict"))
    assert result.ok, result
    return {"latency_ms": latency * 1000, "events": len(run), "record_s": round(record_s, 3),
            "replay_s": round(replay_s, 3), "replay_events_per_s": round(len(run) / replay_s),
            "replay_fraction_of_record": round(replay_s / record_s, 4)}


def cache_lookup(run: Any, calls: int) -> dict[str, float]:
    lookups = min(calls, 10_000)
    samples = []
    for _ in range(3):
        cache = ResponseCache(run.iter_events())
        for i in range(lookups):
            start = time.perf_counter()
            found = cache.take("llm.response", llm_key(request(i)))
            samples.append(time.perf_counter() - start)
            assert found is not None
    samples.sort()
    return {"lookups": len(samples), "median_us": round(statistics.median(samples) * 1e6, 2),
            "p99_us": round(samples[int(len(samples) * 0.99)] * 1e6, 2)}


def stepping_program(steps: int, model: FakeLLM, *, changed_from: int | None = None) -> Callable[[Any], int]:
    """Each step a model call and a tool call; from step ``changed_from`` on, the prompts differ
    (as after an edit upstream), so those calls are new and really go to the model."""
    def program(rec: Any) -> int:
        for i in range(steps):
            note = " (revised)" if changed_from is not None and i >= changed_from else ""
            answer = rec.llm(request(i, note), call=model)
            rec.tool("note", {"text": answer.content, "i": i}, lambda text, i: len(text) + i)
        return steps
    return program


def fork_vs_rerun(store: al.Store, steps: int) -> dict[str, Any]:
    original = stepping_program(steps, FakeLLM(lambda r: "ok", model=MODEL, latency=0.002))
    run = al.record(original, store=store, name="steps")
    at = len(run) // 2
    model = FakeLLM(lambda r: "ok", model=MODEL, latency=0.002)
    changed = stepping_program(steps, model, changed_from=steps // 2)
    fork_s, forked = timed(lambda: al.fork(run, at, program=changed))
    fork_calls = model.calls
    rerun_s, _ = timed(lambda: al.record(changed, store=store, name="steps-again"))
    assert forked.verify().ok
    return {"steps": steps, "events": len(run), "fork_at": at, "fork_model_calls": fork_calls,
            "rerun_model_calls": model.calls - fork_calls, "fork_s": round(fork_s, 3),
            "rerun_s": round(rerun_s, 3), "fork_over_rerun": round(fork_s / rerun_s, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes divided by 10")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    calls, steps = 10_000 // scale, 2_000 // scale
    root = Path(tempfile.mkdtemp(prefix="agentlog-bench-replay-"))
    try:
        store = al.Store(root)
        figures: dict[str, Any] = {"bench": "replay", "calls": calls}
        for latency in (0.0, 0.002):
            log(f"record + strict replay, {calls} calls, {latency * 1000:g} ms model")
            figures[f"model_{latency * 1000:g}ms"] = record_vs_replay(store, calls, latency)
        log("cache lookups")
        figures["cache"] = cache_lookup(_run_named(store, "count-0.0"), calls)
        log(f"fork at the middle of {steps} steps vs a full re-run")
        figures["fork"] = fork_vs_rerun(store, steps)
        figures["targets"] = {
            "strict_replay_0ms_events_per_s>=20000":
                figures["model_0ms"]["replay_events_per_s"] >= 20_000,
            "fork_over_rerun<=0.55": figures["fork"]["fork_over_rerun"] <= 0.55}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures))


def _run_named(store: al.Store, name: str) -> Any:
    for run_id in store.list_runs():
        run = store.run(run_id)
        if run.name == name:
            return run
    raise LookupError(name)


if __name__ == "__main__":
    main()
