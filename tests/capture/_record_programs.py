"""A small triage program over counting tools and a scripted model, shared by the recorder tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentlog.testing.fakes import CountingTool

MODEL = "gpt-4o-mini"  # in the genai-prices catalog, so costs are computed, not unknown


def decide(request: Mapping[str, Any]) -> str:
    """A scripted model that reacts to its context: restart when the CPU is high."""
    text = request["messages"][-1]["content"]
    return "restart the api" if "cpu=0.9" in text else "wait and watch"


class Tools:
    """Counting tools: alerts, a metric and a restart with a side-effect ledger."""

    def __init__(self, cpu: float = 0.9, forbidden: bool = False) -> None:
        self.alerts = CountingTool(lambda service: [f"{service}: 5xx rate high"], forbidden=forbidden,
                                   name="get_alerts")
        self.metric = CountingTool(lambda name: cpu, forbidden=forbidden, name="get_metric")
        self.restarts: list[str] = []

        def restart(service: str, idempotency_key: str) -> str:
            self.restarts.append(idempotency_key)
            return f"restarted {service}"
        self.restart = CountingTool(restart, forbidden=forbidden, name="restart")


def make_triage(tools: Tools, model: Callable[[Mapping[str, Any]], Any]) -> Callable[[Any], Any]:
    def triage(rec: Any) -> str:
        with rec.span("triage", kind="agent"):
            alerts = rec.tool("get_alerts", {"service": "api"}, tools.alerts)
            cpu = rec.tool("get_metric", {"name": "cpu"}, tools.metric)
            answer = rec.llm({"model": MODEL, "messages": [
                {"role": "system", "content": "You are an SRE."},
                {"role": "user", "content": f"alerts={alerts} cpu={cpu}"}]}, call=model)
            rec.patch([{"op": "add", "path": "/decision", "value": answer.content}])
            if answer.content.startswith("restart"):
                rec.tool("restart", {"service": "api"}, tools.restart)
            return answer.content
    return triage
