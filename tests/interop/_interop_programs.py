"""A recorded agentlog program for the interop tests: spans, model and tool calls, a failing
tool, a state patch, a large (blob) value, and a fork of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import agentlog as al
from agentlog.testing.fakes import FakeLLM

MODEL = "gpt-4o-mini"  # in the genai-prices catalog: costs are computed, not unknown
PAGE = "<html>" + "incident timeline line\n" * 2000 + "</html>"  # > 16 KiB: stored as a blob


def answer(request: Mapping[str, Any]) -> str:
    text = request["messages"][-1]["content"]
    return "restart the api" if "cpu=0.9" in text else "wait and watch"


def flaky(service: str) -> str:
    raise TimeoutError(f"{service} did not answer")


def triage(rec: Any) -> str:
    """Look at the page and a metric, ask the model, patch the state, maybe act."""
    with rec.span("triage", kind="agent"):
        page = rec.tool("fetch_page", {"url": "https://status.example/api"}, lambda url: PAGE).text()
        cpu = rec.tool("get_metric", {"name": "cpu"}, lambda name: 0.9)
        try:
            rec.tool("flaky_probe", {"service": "api"}, flaky)
        except al.errors.ToolError:
            pass
        with rec.span("decide", kind="chain"):
            result = rec.llm({"model": MODEL, "temperature": 0, "messages": [
                {"role": "system", "content": "You are an SRE."},
                {"role": "user", "content": f"page has {len(page)} bytes, cpu={cpu}"}]},
                call=FakeLLM(answer, cached=4))
        rec.patch([{"op": "add", "path": "/decision", "value": result.content}])
        rec.emit("note", {"text": "decided"})
        if result.content.startswith("restart"):
            rec.tool("restart", {"service": "api"}, lambda service: f"restarted {service}")
        return str(result.content)


def record(store: Any) -> Any:
    """Record :func:`triage` into ``store``."""
    return al.record(triage, store=store, name="triage", inputs={"service": "api"})


def fork(run: Any) -> Any:
    """A fork of a recorded triage run, cut after the model's answer, with the decision patched."""
    at = next(e.seq for e in run.iter_events() if e.type == "llm.response")
    return al.fork(run, at, program=triage,
                   edit=al.edit.patch_state([{"op": "add", "path": "/forked", "value": True}]))


def rows(run: Any) -> list[tuple[Any, ...]]:
    """Every column of every event, payload as stored (blob refs as their JSON)."""
    from agentlog.canonical import canonical_json

    return [(e.seq, e.type, e.actor, e.caused_by, e.span_id, e.ts, canonical_json(e.payload), e.model,
             e.input_tokens, e.output_tokens, e.cached_tokens, e.cost_usd, e.duration_ms, e.hash)
            for e in run.iter_events()]
