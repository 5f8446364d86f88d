"""Benchmark interop: JSONL and OTLP export and import throughput on a 100,000-event run.

    python bench/interop.py [--quick]

The run is a realistic mix written through ``RunWriter.emit`` with the recorder's payload
shapes: per step, an agent span holding a model call (``span.started``, ``llm.request``,
``llm.response`` with usage, ``span.ended``), a tool call (same, ``tool.call`` /
``tool.result``), a ``state.patch`` and a ``note``; every 500th tool result is a 20 KB page
(a blob). Throughput is events of the source run per second, one trial each (a trial is
seconds long); export writes a file, import reads it into a fresh store. ``--quick`` uses
10,000 events. Progress goes to stderr; one JSON line with the figures goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentlog.interop import export_jsonl, import_jsonl, import_otlp, write_otlp
from agentlog.store import Store

MODEL = "gpt-4o-mini"


def log(msg: str) -> None:
    print(f"[bench/interop] {msg}", file=sys.stderr, flush=True)


def build(store: Store, target: int) -> Any:
    """A run of exactly ``target`` events (11 per step, notes to fill up)."""
    clock = iter(range(1_767_225_600_000_000, 1_767_225_600_000_000 + 10 * target * 1000, 1000))
    writer = store.create_run(run_id="bench", name="bench", durability="none",
                              clock=lambda: next(clock) / 1e6)
    writer.emit("run.started", {"inputs": {"task": "triage the api"}})
    history = [{"role": "system", "content": "You are an SRE. Keep answers short and precise."}]
    step = 0
    while writer.seq < target - 11:
        agent = f"s{writer.seq}"
        writer.emit("span.started", {"name": "step", "kind": "agent", "parent": None}, span_id=agent)
        llm = f"s{writer.seq}"
        writer.emit("span.started", {"name": MODEL, "kind": "llm", "parent": agent}, span_id=llm)
        messages = history[:1] + [{"role": "user", "content": f"step {step}: alerts=['api: 5xx rate high'] "
                                   f"cpu=0.{step % 10} latency_p99={step % 900}ms"}]
        req = writer.emit("llm.request", {"key": f"{step:064x}", "model": MODEL, "messages": messages,
                                          "params": {"temperature": 0}, "tools": [],
                                          "response_format": None}, span_id=llm)
        writer.emit("llm.response", {"key": f"{step:064x}", "model": MODEL, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": f"check metric {step % 7}"},
                                     "usage": {"input_tokens": 60, "output_tokens": 4, "cached_tokens": 20,
                                               "cache_write_tokens": 0, "reasoning_tokens": 0, "cost_usd": None},
                                     "cost_source": "computed", "cache_hit": False},
                    span_id=llm, caused_by=req.seq, model=MODEL, input_tokens=60, output_tokens=4,
                    cached_tokens=20, cost_usd=0.0000129, duration_ms=412.5)
        writer.emit("span.ended", {"name": MODEL, "status": "ok", "error": None}, span_id=llm)
        tool = f"s{writer.seq}"
        writer.emit("span.started", {"name": "get_metric", "kind": "tool", "parent": agent}, span_id=tool)
        call = writer.emit("tool.call", {"key": f"{step:064x}", "name": "get_metric",
                                         "args": {"name": f"metric-{step % 7}"},
                                         "idempotency_key": f"bench:{writer.seq}"}, span_id=tool)
        result: Any = {"value": step % 100 / 100, "unit": "ratio"}
        if step % 500 == 0:
            result = f"<html>{'incident timeline line ' * 900}{step}</html>"  # ~20 KB: a blob
        writer.emit("tool.result", {"key": f"{step:064x}", "name": "get_metric", "result": result},
                    span_id=tool, caused_by=call.seq, duration_ms=35.0)
        writer.emit("span.ended", {"name": "get_metric", "status": "ok", "error": None}, span_id=tool)
        writer.emit("state.patch", {"ops": [{"op": "add", "path": f"/step{step % 50}", "value": step}]},
                    span_id=agent)
        writer.emit("note", {"text": f"step {step} done"}, span_id=agent)
        writer.emit("span.ended", {"name": "step", "status": "ok", "error": None}, span_id=agent)
        step += 1
    while writer.seq < target - 1:
        writer.emit("note", {"text": "padding"})
    writer.emit("run.finished", {"result": "done"})
    writer.close()
    return store.run("bench")


def timed(label: str, n: int, fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    log(f"{label}: {n:,} events in {dt:.2f} s = {n / dt:,.0f} events/s")
    return n / dt, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 events instead of 100,000")
    args = parser.parse_args()
    target = 10_000 if args.quick else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log(f"building a {target:,}-event run")
        run = build(Store(root / "src"), target)
        n = len(run)
        types: dict[str, int] = {}
        for e in run.iter_events():
            types[e.type] = types.get(e.type, 0) + 1
        log(f"built {n:,} events: {types}")

        jsonl = root / "run.jsonl"
        jsonl_export, _ = timed("jsonl export", n, lambda: export_jsonl(run, jsonl))
        jsonl_import, back = timed("jsonl import", n, lambda: import_jsonl(jsonl, Store(root / "j")))
        assert back.head == run.head and len(back) == n, "JSONL round trip changed the hashes"

        otlp = root / "run.otlp.json"
        otlp_export, spans = timed("otlp export", n, lambda: write_otlp(run, otlp))
        otlp_import, runs = timed("otlp import", n, lambda: import_otlp(otlp, Store(root / "o")))
        assert len(runs) == 1 and len(runs[0]) == n, f"OTLP round trip kept {len(runs[0])} of {n} events"

        result = {
            "bench": "interop", "quick": args.quick, "events": n, "spans": spans,
            "jsonl_export_events_per_s": round(jsonl_export), "jsonl_import_events_per_s": round(jsonl_import),
            "otlp_export_events_per_s": round(otlp_export), "otlp_import_events_per_s": round(otlp_import),
            "jsonl_bytes": jsonl.stat().st_size, "otlp_bytes": otlp.stat().st_size,
            "jsonl_round_trip_same_head": back.head == run.head,
            "otlp_round_trip_events": len(runs[0]),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
