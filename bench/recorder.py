"""Benchmark what recording and strict replay cost per call, in CPU time.

Run ``python bench/recorder.py [--calls N] [--rounds R] [--durability fsync|batch|none]``. Progress goes to stderr; the last
line on stdout is one JSON object with the figures.

The program makes ``calls`` rounds of one model call (a 0 ms fake model returning the OpenAI
Chat Completions shape with usage, priced as ``gpt-4o-mini``; its request carries an
``api_key`` field) and one tool call (whose args carry an ``api_key``), so each round goes
through the provider boundary, pricing, the redaction policy, the cache keys, the recorder's
steps and the writer (``durability="none"`` unless ``--durability`` says otherwise: by default
the disk is not what is measured; with ``fsync`` the wall-clock figures say what the disk's
waits add: ``rec.llm`` makes one fsync a call, ``rec.tool`` two). Timed calls,
each on a fresh store, CPU time of this process (``time.process_time``: the machine is
shared, and wall time moves with the load):

``record``
    ``al.record(program)``, including closing the run (sealing its segment).
``replay``
    ``al.replay(program, run)`` in strict mode: every answer served, every event compared.
``baseline``
    the same program run with a stand-in recorder that only calls the model and the tool:
    what the program costs without agentlog.

Figures are medians over ``rounds``; ``record_us_per_call`` is (record - baseline) divided by
the number of model and tool calls (2 per round), likewise ``replay_us_per_call``;
``record_wall_us_per_call`` is the same by the wall clock.
Comparing two versions of agentlog: run this file from each tree (``PYTHONPATH=<tree>``).
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
from typing import Any

import agentlog as al

MODEL = "gpt-4o-mini"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fake_model(request: Any) -> dict[str, Any]:
    text = f"ok {len(request['messages'])}"
    return {"id": "c1", "object": "chat.completion", "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23,
                      "prompt_tokens_details": {"cached_tokens": 0}}}


def lookup(q: str, api_key: str) -> dict[str, Any]:
    return {"q": q, "rows": 3}


def program_of(calls: int) -> Callable[[Any], int]:
    def program(rec: Any) -> int:
        for i in range(calls):
            rec.llm({"model": MODEL, "api_key": "sk-bench", "temperature": 0,
                     "messages": [{"role": "user", "content": f"step {i}"}]}, call=fake_model)
            rec.tool("lookup", {"q": f"q{i}", "api_key": "sk-bench"}, fn=lookup)
        return calls
    return program


class _Durable(al.Store):
    """A store whose runs are written with the durability of the class (so the same file
    measures versions of ``al.record`` that take no ``durability``)."""

    durability = "none"

    def create_run(self, **kwargs: Any) -> Any:
        return super().create_run(**{**kwargs, "durability": self.durability})


class _Plain:
    """The program's calls without recording."""

    def llm(self, request: Any, call: Any) -> Any:
        return call(request)

    def tool(self, name: str, args: Any, fn: Any) -> Any:
        return fn(**args)


def _cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.process_time()
    value = fn()
    return time.process_time() - start, value


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """CPU seconds, wall seconds and the value of ``fn()``."""
    wall = time.perf_counter()
    cpu, value = _cpu(fn)
    return cpu, time.perf_counter() - wall, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--durability", choices=["fsync", "batch", "none"], default="none")
    args = parser.parse_args()
    _Durable.durability = args.durability
    program = program_of(args.calls)
    record, record_wall, replay, baseline, baseline_wall = [], [], [], [], []
    for r in range(args.rounds):
        root = tempfile.mkdtemp(prefix="bench-recorder-")
        try:
            store = _Durable(root)
            cpu, wall, run = _timed(lambda store=store: al.record(program, store=store, name="bench"))
            record.append(cpu)
            record_wall.append(wall)
            cpu, result = _cpu(lambda run=run: al.replay(program, run))
            assert result.ok, str(result)
            replay.append(cpu)
            cpu, wall, _ = _timed(lambda: program(_Plain()))
            baseline.append(cpu)
            baseline_wall.append(wall)
            log(f"round {r + 1}: record {record[-1]:.3f} s, replay {replay[-1]:.3f} s, "
                f"baseline {baseline[-1]:.4f} s ({len(run):,} events)")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    rec_s, rep_s, base_s = (statistics.median(x) for x in (record, replay, baseline))
    rec_wall, base_wall = statistics.median(record_wall), statistics.median(baseline_wall)
    print(json.dumps({
        "bench": "recorder", "calls": args.calls, "rounds": args.rounds, "events": len(run),
        "durability": args.durability,
        "record_wall_us_per_call": round((rec_wall - base_wall) / (2 * args.calls) * 1e6, 1),
        "record_cpu_s": round(rec_s, 4), "replay_cpu_s": round(rep_s, 4), "baseline_cpu_s": round(base_s, 5),
        "record_us_per_call": round((rec_s - base_s) / (2 * args.calls) * 1e6, 1),
        "replay_us_per_call": round((rep_s - base_s) / (2 * args.calls) * 1e6, 1),
        "replay_over_record": round(rep_s / rec_s, 3)}))


if __name__ == "__main__":
    main()
