"""Incident triage: an on-call agent that investigates, and asks before it restarts anything.

The orders service's 5xx rate is spiking. The agent reads what is firing, checks the
service's and its database's metrics, looks at recent deploys and the runbooks, and concludes
that the morning's orders deploy lost an index; the runbook's fix is a restart. Restarts are
gated: the run stops with status ``waiting`` and an ``approval.requested`` event that carries
the model's reasoning, for the person on call::

    import agentlog as al
    store = al.Store("runs")
    run = al.examples.run_example("sre", store=store)          # stops: waiting
    request = next(e.seq for e in run.iter_events() if e.type == "approval.requested")
    al.approve(run, request, by="dana@oncall", note="matches the runbook")   # any process, any time
    run = al.resume(run, **al.examples.parts("sre"))            # restarts orders, writes the summary

Fork it at the database CPU reading with a calmer number and the agent does not restart:
``al.fork(run, at=..., program=al.examples.program("sre"), edit=al.edit.replace_response(seq,
{"result": {"service": "orders-db", "metric": "cpu", "value": 0.35}}))``.

Everything is offline: the "model" is :class:`~agentlog.examples._scripted.ScriptedModel`
reporting ``gpt-4o-mini`` (so the cost table is priced like the real one), and the tools read
the fixtures in ``agentlog/examples/data/sre/``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..capture.runtime import Finish
from ._data import read_json, read_lines, read_text, texts
from ._scripted import Answer, ChatAgent, SampleClock, ScriptedModel, tool_results

__all__ = ["INPUT", "MODEL", "SREAgent", "model", "tools"]

MODEL = "gpt-4o-mini"
INPUT = {"service": "orders",
         "incident": "PagerDuty: orders 5xx rate is spiking and checkout latency is up since 08:11."}


def _function(name: str, description: str, **params: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": sorted(params),
                       "properties": {k: {"type": "string", "description": v} for k, v in params.items()}}}}


TOOLS_SPEC = (
    _function("get_alerts", "Alerts firing for a service.", service="service name"),
    _function("query_metric", "The current value of one metric.", service="service name",
              metric="error_rate, latency_p99_ms, cpu, connections, ..."),
    _function("deploy_history", "Recent deploys of a service.", service="service name"),
    _function("runbook_search", "Search the runbooks.", query="keywords"),
    _function("restart_service", "Restart a service (needs the on-call's approval).", service="service name"),
)


class SREAgent(ChatAgent):
    """Investigate with read-only tools; a restart waits for a person's approval."""

    name = "sre-agent"
    model = MODEL
    system = ("You are the on-call SRE agent. Investigate before acting, cite what you saw, and "
              "never restart a database or payments. Restarts need the on-call's approval.")
    tools_spec = TOOLS_SPEC

    def opening(self, state: Any) -> list[dict[str, Any]]:
        incident = state["input"]
        return [{"role": "user", "content": f"{incident['incident']} Service: {incident['service']}."}]

    def gate(self, name: str, args: Mapping[str, Any]) -> str | None:
        if name == "restart_service":
            return f"restart {args.get('service')}: restarts need the on-call's approval"
        return None

    def finish(self, state: Any, answer: str) -> Any:
        restarted = [t["result"]["service"] for t in state["tools"]
                     if t["name"] == "restart_service" and t["error"] is None]
        return Finish({"summary": answer, "restarted": list(restarted)})


# --- the scripted model --------------------------------------------------------------------


def _metric(results: dict[str, list[Any]], service: str, metric: str) -> float | None:
    for r in results.get("query_metric", []):
        if isinstance(r, Mapping) and r.get("service") == service and r.get("metric") == metric:
            return float(r["value"])
    return None


def rules(messages: list[dict[str, Any]]) -> Answer:
    """What the on-call model says at each point of the investigation."""
    seen = tool_results(messages)
    if "restart_service" in seen:
        done = seen["restart_service"][-1]
        if done.get("denied"):
            return Answer(f"Restart not approved ({done['by']}: {done['note']}). Escalating to the "
                          "orders team with the diagnosis: the v2026.07.02.1 deploy bypasses the "
                          "order-lookup index; orders-db is saturated by table scans.")
        return Answer("Resolved. Root cause: the 08:05 orders deploy (v2026.07.02.1) bypassed the "
                      "order-lookup index, so point reads became table scans and orders-db hit 93% "
                      "CPU. Fix: approved restart of orders, whose schema check rebuilt the index "
                      "(runbook orders-error-spike). Watch the 5xx rate for 15 minutes; ask a.chen "
                      "to fix the query path before the next release.")
    if "runbook_search" in seen:
        return Answer("Diagnosis: the orders deploy at 08:05 changed the order-lookup query path; six "
                      "minutes later slow queries went from 4 to 312 a minute and orders-db CPU is "
                      "93%. The runbook orders-error-spike documents this: a restart of orders "
                      "rebuilds the index, reversible and safe to repeat. Requesting approval to "
                      "restart orders (not orders-db).", [("restart_service", {"service": "orders"})])
    if "deploy_history" in seen:
        return Answer("orders v2026.07.02.1 shipped at 08:05, six minutes before the first alert. "
                      "Looking for a known failure mode.",
                      [("runbook_search", {"query": "orders error spike deploy index"})])
    if "query_metric" in seen:
        cpu = _metric(seen, "orders-db", "cpu")
        if cpu is not None and cpu >= 0.8:
            return Answer(f"orders error rate is {_metric(seen, 'orders', 'error_rate'):.1%} and "
                          f"orders-db CPU is {cpu:.0%}: the database is saturated. Checking what "
                          "changed.", [("deploy_history", {"service": "orders"})])
        return Answer(f"orders errors are up ({_metric(seen, 'orders', 'error_rate'):.1%}) but orders-db "
                      f"is healthy (CPU {cpu:.0%}), so this is not the lost-index failure and a restart "
                      "would not help. No action taken: paging the orders team with the alerts and "
                      "metrics, and watching the error rate.")
    if "get_alerts" in seen:
        return Answer("Three alerts: orders 5xx, checkout latency and orders-db slow queries since "
                      "08:09. Checking the service and its database.",
                      [("query_metric", {"service": "orders", "metric": "error_rate"}),
                       ("query_metric", {"service": "orders-db", "metric": "cpu"})])
    return Answer("Start with what is firing for orders.", [("get_alerts", {"service": "orders"})])


def model(clock: SampleClock | None = None) -> ScriptedModel:
    """The scripted stand-in for ``gpt-4o-mini``."""
    return ScriptedModel(MODEL, rules, clock=clock, latency=0.9)


# --- the tools (fixtures) ------------------------------------------------------------------


def tools(clock: SampleClock | None = None) -> dict[str, Any]:
    """The investigation tools over the fixtures, and a simulated restart."""

    def wait(seconds: float) -> None:
        if clock is not None:
            clock.advance(seconds)

    def get_alerts(service: str) -> list[dict[str, Any]]:
        wait(0.2)
        return list(read_json("sre/alerts.json").get(service, []))

    def query_metric(service: str, metric: str) -> dict[str, Any]:
        wait(0.3)
        values = read_json("sre/metrics.json").get(service)
        if values is None or metric not in values:
            raise KeyError(f"no metric {metric!r} for service {service!r}")
        return {"service": service, "metric": metric, "value": values[metric]}

    def deploy_history(service: str) -> dict[str, Any]:
        wait(0.15)
        deploys = [json.loads(line) for line in read_lines("sre/deploys.jsonl")]
        mine = [d for d in deploys if d["service"] == service]
        return {"service": service, "deploys": mine, "latest": mine[-1] if mine else None}

    def runbook_search(query: str) -> dict[str, Any]:
        wait(0.1)
        terms = query.lower().split()
        scored = sorted(((sum(t in text.lower() for t in terms), name) for name, text in texts("sre/runbooks")),
                        reverse=True)
        best = scored[0][1]
        return {"query": query, "matches": [name for score, name in scored if score],
                "best": {"runbook": best, "text": read_text(f"sre/runbooks/{best}")}}

    def restart_service(service: str, idempotency_key: str) -> dict[str, Any]:
        wait(4.0)
        if service in ("orders-db", "payments"):
            raise PermissionError(f"{service} is never restarted by the agent (runbook)")
        return {"service": service, "restarted": True, "idempotency_key": idempotency_key,
                "note": "simulated restart: schema check recreated index orders_by_customer_email"}

    return {"get_alerts": get_alerts, "query_metric": query_metric, "deploy_history": deploy_history,
            "runbook_search": runbook_search, "restart_service": restart_service}
