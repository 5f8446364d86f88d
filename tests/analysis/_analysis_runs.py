"""Runs for the analysis tests: hand-built ones with known times and usage, and recorded ones.

- :func:`timed_run` — spans with scripted times (overlapping children, an error, an open span,
  an unknown parent), so every span column can be computed by hand;
- :func:`golden_runs` — a run and a fork of it, byte-for-byte reproducible (fixed ids and
  clock), for the golden HTML files;
- :func:`record_agent` — a program recorded through ``al.record`` with ``FakeLLM``: nested
  spans, two models (one with no price), a failing tool, cached tokens.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import agentlog as al
from agentlog.errors import ToolError, UnknownModelWarning
from agentlog.testing.fakes import CountingTool, FakeLLM

T0 = 1_796_241_600.0  # 2026-12-02 20:00:00 UTC
PRICED = "gpt-4o-mini"  # in the genai-prices catalog
UNPRICED = "house-model-x"  # not in it: its cost is unknown


class ScriptedClock:
    """A clock that returns the given times (seconds after T0) in turn, then keeps counting."""

    def __init__(self, times: list[float] | None = None, step: float = 0.5) -> None:
        self._times: Iterator[float] = iter(times or [])
        self._last = -step
        self._step = step

    def __call__(self) -> float:
        nxt = next(self._times, None)
        self._last = self._last + self._step if nxt is None else nxt
        return T0 + self._last


def timed_run(store: Any) -> Any:
    """The span-timing run (times in seconds after T0; see tests/analysis/test_run_spans.py)."""
    times = [-1, 0, 1, 3, 3.5, 4, 6, 7, 7.5, 8, 9, 10, 12, 12.5, 13, 20]
    w = store.create_run(run_id="timed", name="timed", clock=ScriptedClock(times), durability="none")
    w.emit("span.started", {"name": "A", "kind": "agent", "parent": None}, span_id="A")
    w.emit("span.started", {"name": "B", "kind": "tool", "parent": "A"}, span_id="B")
    w.emit("span.started", {"name": "C", "kind": "llm", "parent": "A"}, span_id="C")
    w.emit("llm.response", {"key": "k1", "model": "m1", "message": {"role": "assistant", "content": "hi"}},
           span_id="C", model="m1", input_tokens=10, output_tokens=2, cached_tokens=0, cost_usd=0.5,
           duration_ms=400.0)
    w.emit("span.ended", {"name": "B", "status": "ok", "error": None}, span_id="B")
    w.emit("span.ended", {"name": "C", "status": "error", "error": "RuntimeError: boom"}, span_id="C")
    w.emit("span.started", {"name": "D", "kind": "chain", "parent": "A"}, span_id="D")
    w.emit("span.started", {"name": "E", "kind": "llm", "parent": "D"}, span_id="E")
    w.emit("llm.response", {"key": "k2", "model": "m2", "message": {"role": "assistant", "content": "yo"}},
           span_id="E", model="m2", input_tokens=5, output_tokens=1, cached_tokens=0, cost_usd=None,
           duration_ms=100.0)
    w.emit("span.ended", {"name": "E", "status": "ok", "error": None}, span_id="E")
    w.emit("span.ended", {"name": "A", "status": "ok", "error": None}, span_id="A")
    w.emit("note", {"text": "outside every span"})
    w.emit("span.started", {"name": "F", "kind": "chain", "parent": "nope"}, span_id="F")
    w.emit("span.ended", {"name": "F", "status": "ok", "error": None}, span_id="F")
    w.close("finished")
    return store.run("timed")


def golden_runs(store: Any) -> tuple[Any, Any]:
    """A small run ``g1`` and its fork ``g2``, the same bytes every time."""
    clock = ScriptedClock()
    w = store.create_run(run_id="g1", name="triage", clock=clock, durability="none",
                         tags={"team": "sre"})
    w.emit("run.started", {"inputs": {"service": "api"}})
    w.emit("span.started", {"name": "triage", "kind": "agent", "parent": None}, span_id="s1")
    w.emit("span.started", {"name": "search", "kind": "tool", "parent": "s1"}, span_id="s2")
    w.emit("tool.call", {"key": "k-search", "name": "search", "args": {"q": "cpu"},
                         "idempotency_key": "g1:3"}, span_id="s2")
    w.emit("tool.result", {"key": "k-search", "name": "search", "result": "cpu=0.9"}, span_id="s2",
           caused_by=3, duration_ms=12.5)
    w.emit("span.ended", {"name": "search", "status": "ok", "error": None}, span_id="s2", caused_by=2)
    w.emit("span.started", {"name": PRICED, "kind": "llm", "parent": "s1"}, span_id="s6")
    w.emit("llm.request", {"key": "k-llm1", "model": PRICED, "params": {}, "tools": [],
                           "response_format": None,
                           "messages": [{"role": "user", "content": "cpu=0.9, what now?"}]}, span_id="s6")
    w.emit("llm.response", {"key": "k-llm1", "model": PRICED, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "restart the api"},
                            "usage": {"input_tokens": 1200, "output_tokens": 50, "cached_tokens": 1000},
                            "cost_source": "computed", "cache_hit": False},
           span_id="s6", caused_by=7, model=PRICED, input_tokens=1200, output_tokens=50,
           cached_tokens=1000, cost_usd=0.00012, duration_ms=850.0)
    w.emit("span.ended", {"name": PRICED, "status": "ok", "error": None}, span_id="s6", caused_by=6)
    w.emit("state.patch", {"ops": [{"op": "add", "path": "/decision", "value": "restart"}]}, span_id="s1")
    w.emit("object.created", {"id": "svc-api", "kind": "service", "data": {"state": "degraded"}},
           span_id="s1", actor="triage")
    w.emit("span.started", {"name": UNPRICED, "kind": "llm", "parent": "s1"}, span_id="s12")
    w.emit("llm.request", {"key": "k-llm2", "model": UNPRICED, "params": {}, "tools": [],
                           "response_format": None,
                           "messages": [{"role": "user", "content": "second opinion?"}]}, span_id="s12")
    w.emit("llm.response", {"key": "k-llm2", "model": UNPRICED, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "agree"},
                            "usage": {"input_tokens": 100, "output_tokens": 10},
                            "cost_source": "unknown", "cache_hit": False},
           span_id="s12", caused_by=13, model=UNPRICED, input_tokens=100, output_tokens=10,
           cached_tokens=0, cost_usd=None, duration_ms=300.0)
    w.emit("span.ended", {"name": UNPRICED, "status": "ok", "error": None}, span_id="s12", caused_by=12)
    w.emit("span.ended", {"name": "triage", "status": "ok", "error": None}, span_id="s1", caused_by=1)
    w.emit("run.finished", {"result": "restart"})
    w.close("finished")

    f = store.create_run(run_id="g2", name="triage fork@9", clock=clock, durability="none",
                         fork_of=("g1", 9), tags={"fork_of": "g1", "fork_seq": 9})
    f.emit("fork.started", {"parent_run": "g1", "parent_seq": 9, "parent_hash": f.head, "edits": []},
           actor="fork")
    f.emit("state.patch", {"ops": [{"op": "add", "path": "/decision", "value": "wait"}]}, span_id="s1")
    f.emit("object.created", {"id": "svc-api", "kind": "service", "data": {"state": "ok"}},
           span_id="s1", actor="triage")
    f.emit("relation.created", {"id": "r1", "kind": "watches", "source": "svc-api", "target": "svc-db"},
           span_id="s1", actor="triage")
    f.emit("span.ended", {"name": "triage", "status": "ok", "error": None}, span_id="s1", caused_by=1)
    f.emit("run.finished", {"result": "wait"})
    f.close("finished")
    return store.run("g1"), store.run("g2")


# --- a recorded program ------------------------------------------------------------------------


def answer(request: Mapping[str, Any]) -> str:
    """The scripted model: restart when the CPU is high."""
    text = request["messages"][-1]["content"]
    return "restart the api" if "cpu=0.9" in text else "wait and watch"


class Tools:
    """A metric tool, a flaky tool that fails, and a restart tool."""

    def __init__(self, cpu: float = 0.9, tool_name: str = "get_metric") -> None:
        self.metric = CountingTool(lambda name: cpu, name=tool_name)
        self.tool_name = tool_name

        def flaky() -> str:
            raise TimeoutError("upstream timed out")
        self.flaky = CountingTool(flaky, name="flaky")
        self.restart = CountingTool(lambda service: f"restarted {service}", name="restart")


def make_agent(tools: Tools, model: Any, second: Any, *, model_name: str = PRICED,
               second_name: str = UNPRICED) -> Any:
    """triage (agent) > [metric (tool), think (chain) > [model (llm)], flaky (tool, fails),
    second opinion (llm, unpriced), restart (tool) when the model says so]."""
    def agent(rec: Any) -> str:
        with rec.span("triage", kind="agent"):
            cpu = rec.tool(tools.tool_name, {"name": "cpu"}, tools.metric)
            with rec.span("think", kind="chain"):
                first = rec.llm({"model": model_name, "messages": [
                    {"role": "system", "content": "You are an SRE."},
                    {"role": "user", "content": f"cpu={cpu}"}]}, call=model)
            try:
                rec.tool("flaky", {}, tools.flaky)
            except ToolError:
                pass
            rec.llm({"model": second_name, "messages": [
                {"role": "user", "content": f"second opinion on: {first.content}"}]}, call=second)
            rec.patch([{"op": "add", "path": "/decision", "value": first.content}])
            rec.emit("object.created", {"id": "svc-api", "kind": "service",
                                        "data": {"decision": first.content}})
            if first.content.startswith("restart"):
                rec.tool("restart", {"service": "api"}, tools.restart)
            return str(first.content)
    return agent


def record_agent(store: Any, *, cpu: float = 0.9, name: str = "agent", **kwargs: Any) -> Any:
    """Record :func:`make_agent` (the unpriced model's warning is expected and silenced)."""
    model = FakeLLM(answer, cached=5)
    second = FakeLLM("agreed")
    program = make_agent(Tools(cpu, kwargs.pop("tool_name", "get_metric")), model, second, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownModelWarning)
        return al.record(program, store=store, name=name, inputs={"service": "api"})


def seq_of(run: Any, type_: str, **payload: Any) -> int:
    """The seq of the first event of ``type_`` whose payload has these values."""
    return next(e.seq for e in run.iter_events()
                if e.type == type_ and all(e.payload.get(k) == v for k, v in payload.items()))


# --- golden HTML ---------------------------------------------------------------------------------


def golden_reprs(store: Any) -> dict[str, str]:
    """The HTML reprs compared with ``tests/golden/html/*.html`` (the store's path, which
    changes from run to run, is written ``STORE``)."""
    from agentlog.chain import Problem
    from agentlog.store.verify import VerifyReport
    from agentlog.widgets.html import patch_html

    run, fork = golden_runs(store)
    fork.verify()  # the fork's card then says verified
    diff = al.diff(run, fork)
    bad = VerifyReport(run_id="g9", ok=False, events=12, head="ab" * 32, first_bad_seq=7, problems=(
        Problem(kind="chain_broken", seq=7, message="hash does not follow from seq 6"),
        Problem(kind="head_mismatch", seq=11, message="run.json says 13 events")))
    reprs = {
        "run": run._repr_html_(),
        "fork": fork._repr_html_(),
        "store": store._repr_html_().replace(str(store.path), "STORE"),
        "diff": diff._repr_html_(),
        "patch": patch_html(diff.state_patch),
        "verify_ok": run.verify()._repr_html_(),
        "verify_bad": bad._repr_html_(),
    }
    from agentlog.widgets.html import _css
    # The stylesheet is the same in every repr: the files hold a marker instead.
    css = f"<style>{_css()}</style>"
    return {name: html.replace(css, "<style>/* agentlog.css */</style>")
            for name, html in reprs.items() if html is not None}
