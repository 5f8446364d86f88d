"""Refunds under a budget: small clean refunds go through, large ones wait for a senior.

Three support tickets come in. For each one the agent looks the order up, checks the fraud
signals, and decides on a refund. The policy boundary is in code, not in the prompt: a
refund of €100 or more is a gated tool call, so the run stops (``waiting``) until a person
decides. The whole run is under a :class:`~agentlog.Budget`, recorded in the log
(``budget.set``) and checked before every model or tool call.

The sample run ``refunds-0001`` tells the story: the duplicate charge (€47.90) is refunded at
once; the €840 "never arrived" claim (signed delivery, three fraud markers) waits, and
``j.keller`` denies it; the agent reads the denial in ``state["approvals"]["decided"]``,
answers the customer accordingly, and goes on to the broken kettle (€34.50)::

    run = al.examples.run_example("refunds", store=store)       # stops at the €840 claim
    request = next(e.seq for e in run.iter_events() if e.type == "approval.requested")
    al.deny(run, request, by="j.keller", note="signed delivery + 3 fraud markers")
    run = al.resume(run, **al.examples.parts("refunds"))

``refunds-0001-approve`` forks it just before the approval with the other decision: the
refund goes out, and the third ticket is served from the parent's log, not paid again.
``refunds-0002-tight`` runs the same queue with ``Budget(max_llm_calls=5)`` and stops cleanly
with ``budget_exceeded``.

The "model" reports ``claude-3-5-haiku-latest`` (priced as such) and is scripted; the orders
and the payment provider are fixtures (``agentlog/examples/data/refunds/``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..capture.runtime import Budget, Emit, Fact, Finish
from ..events import StatePatch
from ..folding import thaw
from ._data import read_json
from ._scripted import Answer, ChatAgent, SampleClock, ScriptedModel, tool_results

__all__ = ["BUDGET", "CAP_EUR", "INPUT", "MODEL", "RefundsAgent", "model", "tools"]

MODEL = "claude-3-5-haiku-latest"
CAP_EUR = 100.0
BUDGET = Budget(max_cost_usd=0.05, max_llm_calls=24)
INPUT = {"tickets": [
    {"id": "T-5101", "text": "I was charged twice for order ORD-88412. Please refund the extra charge."},
    {"id": "T-5102", "text": "My espresso machine for order ORD-91277 never arrived. I want the full "
                             "€840 back."},
    {"id": "T-5103", "text": "The kettle from ORD-90155 arrived broken, photo attached. Can I get my "
                             "money back?"},
]}

TOOLS_SPEC = tuple({"type": "function", "function": {"name": name, "description": text, "parameters": {
    "type": "object", "required": sorted(params), "properties": {p: {"type": t} for p, t in params.items()}}}}
    for name, text, params in (
        ("order_lookup", "An order: items, captures, delivery.", {"order_id": "string"}),
        ("fraud_signals", "Fraud markers on the order's customer.", {"order_id": "string"}),
        ("issue_refund", f"Refund money to the card. €{CAP_EUR:.0f} or more needs a senior's approval.",
         {"order_id": "string", "amount_eur": "number", "reason": "string"})))


class RefundsAgent(ChatAgent):
    """One conversation per ticket; refunds at or above the cap wait for a person."""

    name = "refunds-agent"
    model = MODEL
    system = ("You resolve refund tickets. Verify the order and the fraud signals before any "
              f"refund. Refunds of €{CAP_EUR:.0f} or more are decided by a senior: make the case, "
              "including the evidence against.")
    tools_spec = TOOLS_SPEC

    def _resolved(self, state: Any) -> list[Any]:
        return list(state["vars"].get("resolved", []))

    def continues(self, state: Any, answer: Any) -> bool:
        resolved = self._resolved(state)
        return not resolved or answer["seq"] > resolved[-1]["answer"]

    def opening(self, state: Any) -> list[dict[str, Any]]:
        ticket = state["input"]["tickets"][len(self._resolved(state))]
        return [{"role": "user", "content": f"Ticket {ticket['id']}: {ticket['text']}"}]

    def gate(self, name: str, args: Mapping[str, Any]) -> str | None:
        if name == "issue_refund" and float(args.get("amount_eur", 0)) >= CAP_EUR:
            return f"€{float(args['amount_eur']):.2f} is at or above the €{CAP_EUR:.0f} autonomous cap"
        return None

    def next_step(self, state: Any) -> Any:
        resolved = self._resolved(state)
        if len(resolved) == len(state["input"]["tickets"]):
            return Finish({"resolved": thaw(resolved)})
        return super().next_step(state)

    def finish(self, state: Any, answer: str) -> Any:
        """Record the ticket's outcome; the next step starts the next ticket."""
        resolved = self._resolved(state)
        since = resolved[-1]["answer"] if resolved else 0
        refunds = [t for t in state["tools"] if t["name"] == "issue_refund" and t["seq"] > since
                   and t["error"] is None]
        denied = [d for d in state["approvals"]["decided"].values()
                  if d["decision"] == "denied" and d["decision_seq"] > since]
        ticket = state["input"]["tickets"][len(resolved)]
        outcome = ("refunded" if refunds else "denied" if denied else "no refund")
        entry = {"ticket": ticket["id"], "outcome": outcome,
                 "amount_eur": refunds[-1]["result"]["amount_eur"] if refunds else 0.0,
                 "answer": state["loop"]["answer"]["seq"], "reply": answer}
        op = ({"op": "add", "path": "/resolved/-", "value": entry} if resolved
              else {"op": "add", "path": "/resolved", "value": [entry]})
        return Emit([Fact(StatePatch(ops=[op]), caused_by=state["loop"]["answer"]["seq"])])


# --- the scripted model --------------------------------------------------------------------


def _order_id(text: str) -> str:
    found = re.search(r"ORD-\d+", text)
    return found.group(0) if found else "?"


def rules(messages: list[dict[str, Any]]) -> Answer:
    """A careful support model: verify, check fraud, then make the case."""
    ticket = str(messages[1]["content"])
    order_id = _order_id(ticket)
    seen = tool_results(messages)
    if "issue_refund" in seen:
        done = seen["issue_refund"][-1]
        if done.get("denied"):
            return Answer(f"Refund denied per senior review ({done['by']}: {done['note']}). The "
                          "carrier has a signed delivery on file; we have opened a claim with the "
                          "carrier and our fraud team will contact you.")
        return Answer(f"Refunded €{done['amount_eur']:.2f} for {order_id} ({done['reason']}). It "
                      f"reaches card {done['card']} in 3-5 business days (refund {done['refund_id']}).")
    if "fraud_signals" in seen:
        order, fraud = seen["order_lookup"][-1], seen["fraud_signals"][-1]
        captures = order["captures"]
        if len(captures) > 1 and captures[0]["amount_eur"] == captures[1]["amount_eur"]:
            amount, reason = captures[1]["amount_eur"], "duplicate capture on payment retry"
            why = (f"Two captures of €{amount:.2f} eleven minutes apart on the same card: a retry "
                   "artifact. Clean account, under the cap: refunding the second capture.")
        elif order.get("attachments"):
            amount, reason = order["total_eur"], "arrived damaged (photo)"
            why = (f"Damaged on arrival with a photo, a {fraud['account_age_days']}-day-old account "
                   "and no flags: refunding in full.")
        else:
            amount, reason = order["total_eur"], "item not received (claimed)"
            why = (f"Item-not-received claim on a delivered order with a signed handoff "
                   f"({order['delivery']['events'][-1]['ts']}). Account is {fraud['account_age_days']} "
                   f"days old with {len(fraud['flags'])} fraud markers ({', '.join(fraud['flags'])}). "
                   f"€{amount:.2f} is above the cap: a senior decides. The evidence does not support "
                   "settlement; recommend approving only against a returned-goods scan.")
        return Answer(why, [("issue_refund", {"order_id": order_id, "amount_eur": amount, "reason": reason})])
    if "order_lookup" in seen:
        return Answer("Check the fraud signals before touching money.",
                      [("fraud_signals", {"order_id": order_id})])
    return Answer("Verify the order first.", [("order_lookup", {"order_id": order_id})])


def model(clock: SampleClock | None = None) -> ScriptedModel:
    """The scripted stand-in for ``claude-3-5-haiku-latest``."""
    return ScriptedModel(MODEL, rules, clock=clock, latency=0.7)


# --- the tools -----------------------------------------------------------------------------


def tools(clock: SampleClock | None = None) -> dict[str, Any]:
    """Order and fraud lookups over the fixtures, and a payment provider that refunds once per
    idempotency key (a repeat gets the first refund back)."""
    issued: dict[str, dict[str, Any]] = {}

    def wait(seconds: float) -> None:
        if clock is not None:
            clock.advance(seconds)

    def order_lookup(order_id: str) -> dict[str, Any]:
        wait(0.12)
        orders = read_json("refunds/orders.json")
        if order_id not in orders:
            raise KeyError(f"no order {order_id}")
        return {"order_id": order_id, **orders[order_id]}

    def fraud_signals(order_id: str) -> dict[str, Any]:
        wait(0.25)
        customer = read_json("refunds/orders.json")[order_id]["customer"]
        return {"order_id": order_id, "customer": customer, **read_json("refunds/customers.json")[customer]}

    def issue_refund(order_id: str, amount_eur: float, reason: str, idempotency_key: str) -> dict[str, Any]:
        wait(0.6)
        if idempotency_key not in issued:  # what a payment provider does with the key
            card = read_json("refunds/orders.json")[order_id]["captures"][-1]["card"]
            issued[idempotency_key] = {"order_id": order_id, "amount_eur": amount_eur, "reason": reason,
                                       "card": card, "refund_id": f"re_{order_id[4:]}",
                                       "idempotency_key": idempotency_key}
        return issued[idempotency_key]

    return {"order_lookup": order_lookup, "fraud_signals": fraud_signals, "issue_refund": issue_refund}
