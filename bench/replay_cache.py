"""Benchmark the replay cache (``ResponseCache``): what building it and looking answers up cost,
in CPU time, as used (the recorded run read as lookups need it) and with the run read first.

    python bench/replay_cache.py [--calls N] [--rounds R]

A run of ``calls`` model calls (a 0 ms fake model, each answer followed by a ``state.patch``)
is recorded once; then, per round, on a freshly opened run: ``ResponseCache(run.iter_events())``
(``build``), and one lookup per call in recorded order, each timed alone (the request's key,
``llm_key``, plus ``cache.take``). ``as_used`` is how replay and fork use it: the run is read as
far as each answer asked for, so a lookup's time includes reading its part of the run.
``read_first`` reads the whole run while building (``len(cache)``), as the cache of commit
9bec6c3 did, so its lookups time the lookup alone. Medians over rounds; the last line on
stdout is one JSON object. Comparing trees: ``PYTHONPATH=<tree> python bench/replay_cache.py``
(the file uses only names both trees have).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from typing import Any

import agentlog as al
from agentlog.capture.sinks import ResponseCache
from agentlog.keys import llm_key
from agentlog.testing.fakes import FakeLLM

MODEL = "gpt-4o-mini"


def request(i: int) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "system", "content": "You count."},
                                         {"role": "user", "content": f"step {i}"}]}


def program_of(calls: int) -> Any:
    model = FakeLLM(lambda r: "ok", model=MODEL, latency=0)

    def program(rec: Any) -> int:
        for i in range(calls):
            answer = rec.llm(request(i), call=model)
            rec.patch([{"op": "add", "path": "/last", "value": answer.content}])
        return calls
    return program


def measure(store: str, run_id: str, calls: int, read_first: bool) -> tuple[float, float, float]:
    """(build s, median lookup s, all lookups s) of one round on a freshly opened run."""
    run = al.Store(store).run(run_id)
    start = time.process_time()
    cache = ResponseCache(run.iter_events())
    if read_first:
        len(cache)
    build = time.process_time() - start
    samples = []
    for i in range(calls):
        start = time.process_time()
        found = cache.take("llm.response", llm_key(request(i)))
        samples.append(time.process_time() - start)
        assert found is not None
    return build, statistics.median(samples), sum(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "replay_cache", "calls": args.calls, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp:
        run = al.record(program_of(args.calls), store=tmp, name="cache")
        for read_first in (False, True):
            rounds = [measure(tmp, run.id, args.calls, read_first) for _ in range(args.rounds)]
            build, median, total = (statistics.median(x) for x in zip(*rounds))
            name = "read_first" if read_first else "as_used"
            out[name] = {"build_ms": round(build * 1e3, 1), "lookup_median_us": round(median * 1e6, 1),
                         "lookups_total_ms": round(total * 1e3, 1),
                         "build_plus_lookups_ms": round((build + total) * 1e3, 1)}
            print(f"{name}: {out[name]}", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
