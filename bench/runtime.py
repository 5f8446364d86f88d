"""Benchmark the loop runtime: overhead per step, flat cost as runs grow, drangue side by side,
and resuming a long run.

Run ``python bench/runtime.py [--quick]``. Progress goes to stderr; the last line on stdout is
one JSON object with the figures.

The workload is an agent that alternates a model call and a tool call (one *step* each),
with a bounded context (the system prompt and the current request), a 0 ms model (a function
that returns a Chat Completions response with usage, priced as ``gpt-4o-mini``) and a 0 ms
tool. Figures:

``overhead``
    1,000 steps recorded with ``durability="fsync"`` (every event on disk before the loop goes
    on) and with ``"none"``, against the limit: the same agent, model and tool in a plain
    Python loop that keeps its state in dicts and records nothing.
``scaling``
    1,000, 10,000 and 100,000 steps with ``durability="none"`` (fsync of 600,000 events is
    the disk's speed, not the runtime's): µs per step at each size, and 100k / 1k.
``drangue``
    drangue 0.2.0 (PyPI) runs the same loop shape (one model call and one tool call per turn,
    its in-memory store, its ``FakeModel``) in this process at sizes it finishes in reasonable
    time; agentlog at the same sizes. drangue re-folds the whole log before every step, so its
    time grows with the square of the run: the 10,000-step figure is measured only with
    ``--drangue-10k`` and otherwise extrapolated from the measured sizes (and labelled so).
``resume``
    a 100,000-step run (600,004 events) that stopped for an approval: ``al.approve`` here,
    then ``al.resume`` (open, read the state, finish the last step, close) **in a new Python
    process**, the call timed after the imports (their time reported beside; CPU time of the
    call too, steadier than wall time on a shared machine). The recording
    checkpointed its state as it went and at close; the same run with its checkpoints
    deleted (the path before checkpoints: fold from event 0) is resumed the same way, as the
    baseline. Beside it, as a breakdown, the same call in a process that imported the
    modules it loads on first use (the capture runtime, its HTTP transport, the checkpoint
    reader) before the clock started.
``fork``
    a 166,667-step run (1,000,004 events): ``al.fork`` at its middle event with an
    ``al.AgentProgram`` (fold + continue) and an edit after which the agent finishes, so the
    time is the fork's to its first new events and its close, in a new process (call timed
    after the imports); beside it the same fork through the replay path (the program wrapped
    in a plain function, so the prefix is re-run, served from the log), also in a new
    process: its time per prefix event is what forking a plain program costs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import agentlog as al

MODEL = "gpt-4o-mini"


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


# --- the workload ------------------------------------------------------------------------------


def request(i: int) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "system", "content": "You are a benchmark agent."},
                                         {"role": "user", "content": f"step {i}: what next?"}]}


def model(req: Mapping[str, Any]) -> dict[str, Any]:
    """A 0 ms model in the Chat Completions shape."""
    return {"model": MODEL, "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": "call the tool"}}],
            "usage": {"prompt_tokens": 18, "completion_tokens": 3, "total_tokens": 21}}


def work(i: int) -> dict[str, int]:
    """A 0 ms tool."""
    return {"i": i, "square": i * i}


class BenchAgent:
    """Model, tool, model, tool ... for ``steps`` steps; then finish (or wait for approval).
    A fork that sets ``/forked`` finishes at once."""

    name = "bench-agent"

    def next_step(self, state: Any) -> Any:
        if state.get("vars", {}).get("forked"):
            return al.Finish({"forked": True})
        usage = state["usage"]
        done = usage["llm_calls"] + usage["tool_calls"]
        if done >= state["input"]["steps"]:
            if state["input"].get("ask") and not state["approvals"]["decided"]:
                return al.RequestApproval({"ship": state["input"]["steps"]}, reason="benchmark")
            return al.Finish({"steps": done})
        if usage["llm_calls"] == usage["tool_calls"]:
            return al.CallModel(request(usage["llm_calls"]))
        return al.CallTool("work", {"i": usage["tool_calls"]})


def recorded(steps: int, store: Path, durability: str, *, ask: bool = False, run_id: str | None = None) -> tuple[float, Any]:
    gc.collect()
    started = time.perf_counter()
    run = al.run_agent(BenchAgent(), input={"steps": steps, "ask": ask}, model=model, tools={"work": work},
                       store=store, durability=durability, run_id=run_id)
    return time.perf_counter() - started, run


def baseline(steps: int) -> float:
    """The limit: the same decisions, model and tool calls, state in plain dicts, no record."""
    gc.collect()
    agent = BenchAgent()

    class Plain(dict):  # what next_step reads, kept by hand
        pass

    state = Plain(input={"steps": steps}, usage={"llm_calls": 0, "tool_calls": 0}, approvals={"decided": {}})
    results: list[Any] = []
    started = time.perf_counter()
    while True:
        step = agent.next_step(state)
        if isinstance(step, al.Finish):
            break
        if isinstance(step, al.CallModel):
            results.append(model(step.request)["choices"][0]["message"])
            state["usage"]["llm_calls"] += 1
        else:
            results.append(work(**step.args))
            state["usage"]["tool_calls"] += 1
    return time.perf_counter() - started


def drangue_loop(steps: int) -> float:
    from drangue import Agent, tool
    from drangue.models import ModelResponse, ToolCall
    from drangue.testing import FakeModel

    @tool
    def work_d(i: int) -> str:
        """A 0 ms tool."""
        return json.dumps(work(i))

    turns = steps // 2
    script = [ModelResponse(text="call the tool", tool_calls=[ToolCall(id=f"c{i}", name="work_d", arguments={"i": i})])
              for i in range(turns)] + [ModelResponse(text="done")]
    agent = Agent(model=FakeModel(script), tools=[work_d], max_steps=turns + 1)
    gc.collect()
    started = time.perf_counter()
    result = asyncio.run(agent.run("go"))
    elapsed = time.perf_counter() - started
    assert result.output == "done", result.output
    return elapsed


# --- the figures -------------------------------------------------------------------------------


def overhead(root: Path, steps: int) -> dict[str, Any]:
    out: dict[str, Any] = {"steps": steps}
    for durability in ("fsync", "none"):
        wall, run = recorded(steps, root / f"overhead-{durability}", durability)
        assert run.status == "finished"
        out[f"recorded_{durability}_ms_per_step"] = round(wall / steps * 1000, 4)
        out["events_per_step"] = round(len(run) / steps, 2)
        log(f"overhead: {steps:,} steps recorded ({durability}) in {wall:.2f} s")
    base = min(baseline(steps) for _ in range(3))
    out["baseline_ms_per_step"] = round(base / steps * 1000, 5)
    out["overhead_fsync_ms_per_step"] = round(out["recorded_fsync_ms_per_step"] - out["baseline_ms_per_step"], 4)
    out["overhead_none_ms_per_step"] = round(out["recorded_none_ms_per_step"] - out["baseline_ms_per_step"], 4)
    return out


def scaling(root: Path, sizes: list[int]) -> tuple[dict[str, Any], Path]:
    out: dict[str, Any] = {"durability": "none", "us_per_step": {}}
    last = root
    for n in sizes:
        wall, run = recorded(n, root / f"scale-{n}", "none")
        assert run.status == "finished"
        out["us_per_step"][str(n)] = round(wall / n * 1e6, 1)
        log(f"scaling: {n:,} steps ({len(run):,} events) in {wall:.2f} s = {wall / n * 1e6:.0f} µs/step")
        last = root / f"scale-{n}"
        if n != sizes[-1]:
            shutil.rmtree(last, ignore_errors=True)
    per = out["us_per_step"]
    out[f"ratio_{sizes[-1] // 1000}k_over_{sizes[0] // 1000}k"] = round(per[str(sizes[-1])] / per[str(sizes[0])], 3)
    return out, last


def side_by_side(root: Path, sizes: list[int], big: int, measure_big: bool,
                 agentlog_big_us: float) -> dict[str, Any]:
    out: dict[str, Any] = {"drangue_version": _version("drangue"), "store": "drangue InMemoryStore; agentlog "
                                                                              "durability='none'",
                           "measured": {}}
    for n in sizes:
        d = drangue_loop(n)
        a, _ = recorded(n, root / f"side-{n}", "none")
        shutil.rmtree(root / f"side-{n}", ignore_errors=True)
        out["measured"][str(n)] = {"drangue_s": round(d, 3), "agentlog_s": round(a, 3), "ratio": round(d / a, 2)}
        log(f"side by side: {n:,} steps: drangue {d:.2f} s, agentlog {a:.2f} s ({d / a:.1f}x)")
    # drangue's time ~ c * n^k: fit k on the two largest measured sizes.
    n1, n2 = sizes[-2], sizes[-1]
    t1, t2 = out["measured"][str(n1)]["drangue_s"], out["measured"][str(n2)]["drangue_s"]
    k = math.log(t2 / t1) / math.log(n2 / n1)
    out["drangue_growth_exponent"] = round(k, 2)
    agentlog_big = agentlog_big_us * big / 1e6
    if measure_big:
        d = drangue_loop(big)
        out[str(big)] = {"drangue_s": round(d, 2), "agentlog_s": round(agentlog_big, 2), "ratio": round(d / agentlog_big, 1),
                         "drangue": "measured"}
    else:
        d = t2 * (big / n2) ** k
        out[str(big)] = {"drangue_s_extrapolated": round(d, 1), "agentlog_s": round(agentlog_big, 2),
                         "ratio_extrapolated": round(d / agentlog_big, 1),
                         "drangue": f"extrapolated from {n1:,} and {n2:,} steps (n^{k:.2f}); not measured"}
    log(f"side by side: {big:,} steps: {out[str(big)]}")
    return out


RESUME = r"""
import json, sys, time
t = time.perf_counter()
sys.path.insert(0, sys.argv[2])
import runtime as rb
import agentlog as al
if len(sys.argv) > 3:  # the breakdown: what the call costs once the modules it loads are in
    import agentlog.capture.runtime, agentlog.capture.transport, agentlog.store.checkpoints, httpx
c, cc = time.perf_counter(), time.process_time()
done = al.resume("long", rb.BenchAgent(), model=rb.model, tools={"work": rb.work}, store=sys.argv[1],
                 durability="fsync")
e, ec = time.perf_counter(), time.process_time()
assert done.status == "finished", done.status
print(json.dumps({"call_ms": (e - c) * 1000, "imports_ms": (c - t) * 1000, "call_cpu_ms": (ec - cc) * 1000}))
"""

FORK = r"""
import json, sys, time
t = time.perf_counter()
sys.path.insert(0, sys.argv[2])
import runtime as rb
import agentlog as al
store, at, how = sys.argv[1], int(sys.argv[3]), sys.argv[4]
program = al.AgentProgram(rb.BenchAgent(), model=rb.model, tools={"work": rb.work})
if how == "replay":  # the same loop as a plain program: forked by re-running the prefix
    agent = program
    def program(rec):
        return agent(rec)
    program.reducers = agent.reducers
edit = al.edit.patch_state([{"op": "add", "path": "/forked", "value": True}])
c, cc = time.perf_counter(), time.process_time()
fork = al.fork(al.Store(store).run("long"), at, program=program, edit=edit)
e, ec = time.perf_counter(), time.process_time()
assert fork.status == "finished" and len(fork) - at <= 12, (fork.status, len(fork) - at)
print(json.dumps({"call_ms": (e - c) * 1000, "imports_ms": (c - t) * 1000, "call_cpu_ms": (ec - cc) * 1000}))
"""


def _fresh(script: str, *args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-P", "-c", script, *args], capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def _resume(store: Path, *, preimported: bool = False) -> dict[str, float]:
    """``al.resume`` in a new process on a copy of the approved run (a resume finishes it);
    ``preimported``: with the modules the call imports on first use loaded before the clock
    starts (a breakdown, not the user's figure)."""
    copy = store.with_name(store.name + "-copy")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store, copy)
    os.sync()  # the copy's 60 MB reach the disk now, not during the resume's own fsyncs
    try:
        return _fresh(RESUME, str(copy), str(Path(__file__).parent), *(["pre"] if preimported else []))
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def resume_long(root: Path, steps: int) -> dict[str, Any]:
    wall, run = recorded(steps, root / "resume", "none", ask=True, run_id="long")
    assert run.status == "waiting", run.status
    log(f"resume: {steps:,}-step run ({len(run):,} events) recorded in {wall:.1f} s")
    request = len(run) - 2  # span.started, approval.requested, span.ended
    al.approve("long", request, "bench", store=root / "resume")
    shutil.copytree(root / "resume", root / "resume-before")
    for folder in (root / "resume-before" / "runs").glob("*/checkpoints"):
        shutil.rmtree(folder)
    after = [_resume(root / "resume") for _ in range(3)]
    warm = [_resume(root / "resume", preimported=True) for _ in range(3)]
    before = [_resume(root / "resume-before") for _ in range(3)]
    med = (lambda xs, k: statistics.median(x[k] for x in xs))
    log(f"resume in a new process: {med(after, 'call_ms'):.0f} ms (imports {med(after, 'imports_ms'):.0f} ms); "
        f"without checkpoints {med(before, 'call_ms'):.0f} ms")
    return {"steps": steps, "events": len(run), "resume_ms": round(med(after, "call_ms"), 1),
            "resume_cpu_ms": round(med(after, "call_cpu_ms"), 1),
            "resume_modules_preloaded_ms": round(med(warm, "call_ms"), 1),
            "resume_modules_preloaded_cpu_ms": round(med(warm, "call_cpu_ms"), 1),
            "imports_ms": round(med(after, "imports_ms"), 1),
            "without_checkpoints_resume_ms": round(med(before, "call_ms"), 1),
            "resume_ratio_after_over_before": round(med(after, "call_ms") / med(before, "call_ms"), 4)}


def fork_middle(root: Path, steps: int) -> dict[str, Any]:
    """Fork a long run at its middle, in new processes: by fold (AgentProgram) and by replay."""
    wall, run = recorded(steps, root / "fork", "none", run_id="long")
    log(f"fork: {steps:,}-step run ({len(run):,} events) recorded in {wall:.1f} s")
    at = len(run) // 2
    bench_dir = str(Path(__file__).parent)
    by_fold = [_fresh(FORK, str(root / "fork"), bench_dir, str(at), "fold") for _ in range(3)]
    by_replay = _fresh(FORK, str(root / "fork"), bench_dir, str(at), "replay")
    fold_ms = statistics.median(x["call_ms"] for x in by_fold)
    replay_s = by_replay["call_ms"] / 1000
    log(f"fork at {at:,}: by fold {fold_ms:.0f} ms, by replay {replay_s:.2f} s")
    return {"steps": steps, "events": len(run), "at": at, "by_fold_ms": round(fold_ms, 1),
            "by_fold_cpu_ms": round(statistics.median(x["call_cpu_ms"] for x in by_fold), 1),
            "imports_ms": round(statistics.median(x["imports_ms"] for x in by_fold), 1),
            "by_replay_s": round(replay_s, 3),
            "replay_us_per_prefix_event": round(replay_s / (at + 1) * 1e6, 1),
            "fold_over_replay": round(fold_ms / 1000 / replay_s, 4)}


def _targets(figures: dict[str, Any]) -> dict[str, bool]:
    """Issue 13's targets (at its sizes: 100,000 steps to resume, 1,000,000 events to fork)."""
    return {"resume_100k_steps_le_500ms": figures["resume"]["steps"] >= 100_000
            and figures["resume"]["resume_ms"] <= 500,
            "fork_middle_of_1m_events_le_1s": figures["fork"]["events"] >= 1_000_000
            and figures["fork"]["by_fold_ms"] <= 1000}


def _version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--drangue-10k", action="store_true", help="also run drangue at 10,000 steps (~20 min)")
    parser.add_argument("--only-resume", action="store_true", help="only the resume and fork figures")
    parser.add_argument("--no-fork", action="store_true", help="with --only-resume: the resume figure alone")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="agentlog-bench-runtime-"))
    try:
        figures: dict[str, Any] = {"bench": "runtime", "quick": args.quick, "python": sys.version.split()[0],
                                   "loadavg_at_start": round(os.getloadavg()[0], 2)}
        if args.only_resume:
            figures["resume"] = resume_long(root, 10_000 if args.quick else 100_000)
            if not args.no_fork:
                figures["fork"] = fork_middle(root, 10_000 if args.quick else 166_667)
                figures["targets"] = _targets(figures)
            figures["loadavg_at_end"] = round(os.getloadavg()[0], 2)
            print(json.dumps(figures))
            return
        figures["overhead"] = overhead(root, 200 if args.quick else 1_000)
        sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
        figures["scaling"], _ = scaling(root, sizes)
        big_us = figures["scaling"]["us_per_step"]["10000"]
        figures["drangue"] = side_by_side(root, [200, 400] if args.quick else [500, 1_000, 2_000, 4_000],
                                          10_000, args.drangue_10k, big_us)
        figures["resume"] = resume_long(root, 10_000 if args.quick else 100_000)
        figures["fork"] = fork_middle(root, 10_000 if args.quick else 166_667)
        figures["targets"] = _targets(figures)
        figures["loadavg_at_end"] = round(os.getloadavg()[0], 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
