"""Agents, tools and child-process entry points shared by the runtime tests.

The child entry points run in processes forked from a ``forkserver`` that has agentlog
imported already, so a test can start (and SIGKILL) dozens of them cheaply.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import agentlog as al
from agentlog.folding import thaw
from agentlog.testing.fakes import FakeLLM

MODEL = "gpt-4o-mini"  # priced in genai-prices, so costs are known


def scripted(request: Mapping[str, Any]) -> str:
    """A model that reads its last user message: ``step k`` -> ``amount <10k+7>``."""
    text = str(request["messages"][-1]["content"])
    if text.startswith("step "):
        k = int(text.split()[1])
        return f"amount {10 * k + 7} for step {k}"
    if "refund" in text:
        return "The claim is large and the delivery was signed; a person should decide."
    return "ok"


def ask(k: int) -> al.CallModel:
    return al.CallModel({"model": MODEL, "messages": [
        {"role": "system", "content": "You are a careful payments agent."},
        {"role": "user", "content": f"step {k}"}]})


class LedgerAgent:
    """Per step: ask the model for an amount, pay it; every 3 payments, a 2-fact checkpoint."""

    name = "ledger-agent"

    def next_step(self, state: Any) -> al.CallModel | al.CallTool | al.Emit | al.Finish:
        n = state["input"]["steps"]
        tools = state["tools"]
        k = len(tools)
        checkpoint = state["vars"].get("checkpoint", 0)
        if k and k % 3 == 0 and checkpoint < k:
            total = sum(t["result"]["amount"] for t in tools)
            return al.Emit([
                al.Fact("state.patch", {"ops": [{"op": "add", "path": "/total", "value": total}]}),
                al.Fact("state.patch", {"ops": [{"op": "add", "path": "/checkpoint", "value": k}]})])
        if k == n:
            return al.Finish({"payments": k, "total": state["vars"].get("total")})
        if state["usage"]["llm_calls"] == k:
            return ask(k)
        amount = int(str(state["loop"]["answer"]["content"]).split()[1])
        return al.CallTool("pay", {"step": k, "amount": amount})


ORDERS = {"ORD-88412": 47.9, "ORD-91277": 840.0}


class RefundAgent:
    """Look the order up, ask the model, refund: above 100 only with a person's approval.

    A denial is read from ``state["approvals"]["decided"]``: the agent finishes without
    refunding and says who denied it and why.
    """

    name = "refund-agent"

    def next_step(self, state: Any) -> Any:
        order = state["input"]["order"]
        looked = [t for t in state["tools"] if t["name"] == "lookup"]
        if not looked:
            return al.CallTool("lookup", {"order": order})
        amount = looked[-1]["result"]["amount"]
        if state["usage"]["llm_calls"] == 0:
            return al.CallModel({"model": MODEL, "messages": [
                {"role": "system", "content": "You handle refunds."},
                {"role": "user", "content": f"Customer asks for a refund of {amount} on {order}."}]})
        refunds = [t for t in state["tools"] if t["name"] == "refund"]
        if refunds:
            return al.Finish({"refunded": refunds[-1]["result"]})
        for entry in state["approvals"]["decided"].values():
            if entry["action"]["tool"] == "refund" and entry["decision"] == "denied":
                return al.Finish({"refunded": None, "denied_by": entry["by"], "note": entry["note"]})
        return al.CallTool("refund", {"order": order, "amount": amount}, needs_approval=amount > 100,
                           reason=f"{amount} is above the 100 autonomous cap")


def refund_tools(refunds: list[str] | None = None) -> dict[str, Any]:
    done = refunds if refunds is not None else []

    def lookup(order: str) -> dict[str, Any]:
        return {"order": order, "amount": ORDERS[order]}

    def refund(order: str, amount: float, idempotency_key: str) -> dict[str, Any]:
        done.append(idempotency_key)
        return {"order": order, "amount": amount, "refund_id": f"re_{len(done)}"}

    return {"lookup": lookup, "refund": refund}


def refund_program(**kwargs: Any) -> al.AgentProgram:
    """The refund agent with the real tools and the scripted model (served on replay)."""
    return al.AgentProgram(RefundAgent(), model=FakeLLM(scripted, model=MODEL), tools=refund_tools(), **kwargs)


def seq_of(run: Any, type: str, **payload: Any) -> int:
    """The seq of the first event of ``type`` whose payload has these values."""
    return next(e.seq for e in run.iter_events()
                if e.type == type and all(e.payload.get(k) == v for k, v in payload.items()))


class Ledger:
    """A downstream payments API: one file per idempotency key, created once, never twice.

    ``attempts.log`` records every call (a retry after a crash is a second attempt with the
    same key); ``done/<key>`` is the side effect, created with O_EXCL.
    """

    def __init__(self, root: str | Path, *, exit_after_effect: int | None = None,
                 sleep: float = 0.0) -> None:
        self.root = Path(root)
        (self.root / "done").mkdir(parents=True, exist_ok=True)
        self.exit_after_effect = exit_after_effect
        self.sleep = sleep

    def pay(self, step: int, amount: int, idempotency_key: str) -> dict[str, Any]:
        with open(self.root / "attempts.log", "a") as f:
            f.write(idempotency_key + "\n")
        try:
            fd = os.open(self.root / "done" / idempotency_key, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pass  # done before: the repeat is recognised and nothing happens twice
        else:
            try:
                os.write(fd, json.dumps({"step": step, "amount": amount}).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            if self.sleep:
                time.sleep(self.sleep)  # widen the window between the effect and its record
            if self.exit_after_effect == step:
                os._exit(19)  # crash after the side effect, before its result is recorded
        return {"step": step, "amount": amount, "ok": True}

    def keys(self) -> set[str]:
        return {p.name for p in (self.root / "done").iterdir()}

    def attempts(self) -> list[str]:
        path = self.root / "attempts.log"
        return path.read_text().split() if path.exists() else []


def tools_for(ledger: Ledger) -> dict[str, Any]:
    return {"pay": ledger.pay}


def program(ledger: Ledger | None = None, *, model: Any = None) -> al.AgentProgram:
    """The agent as a program; with no ledger and model, everything must come from the log."""
    from agentlog.testing.fakes import CountingTool
    tools = tools_for(ledger) if ledger is not None else {"pay": CountingTool(forbidden=True, name="pay")}
    return al.AgentProgram(LedgerAgent(), model=model or FakeLLM.forbidden(), tools=tools)


def comparable(run: Any) -> dict[str, Any]:
    """The parts of a run's final state that do not depend on seqs, ids or timestamps."""
    state = run.state_at(len(run) - 1, reducers=program().reducers)
    usage = state["usage"]
    last = run.event(len(run) - 1)
    return {
        "status": state["status"],
        "result": last.payload.get("result") if last.type == "run.finished" else None,
        "vars": thaw(state["vars"]),
        "messages": thaw(state["messages"]),
        "tools": [(t["name"], thaw(t["args"]), thaw(t["result"]), t["error"]) for t in state["tools"]],
        "usage": {k: usage[k] for k in ("llm_calls", "tool_calls", "input_tokens", "output_tokens")},
    }


def idempotency_keys(run: Any) -> list[str]:
    return [e.payload["idempotency_key"] for e in run.iter_events() if e.type == "tool.call"]


# --- child processes -------------------------------------------------------------------------


def _quiet() -> None:
    warnings.simplefilter("ignore")  # a torn WAL line after a kill is expected here


def crash_after(seq: int) -> None:
    """Make this process die (os._exit) right after the event at ``seq`` is written (alone or
    in a batch: then after the batch)."""
    from agentlog.store.writer import RunWriter
    emit, emit_many = RunWriter.emit, RunWriter.emit_many

    def dying_emit(self: Any, *args: Any, **kwargs: Any) -> Any:
        event = emit(self, *args, **kwargs)
        if event.seq == seq:
            os._exit(17)
        return event

    def dying_emit_many(self: Any, *args: Any, **kwargs: Any) -> Any:
        events = emit_many(self, *args, **kwargs)
        if any(event.seq == seq for event in events):
            os._exit(17)
        return events

    RunWriter.emit = dying_emit  # type: ignore[method-assign]
    RunWriter.emit_many = dying_emit_many  # type: ignore[method-assign]


def start_or_resume(store: str, run_id: str, steps: int, ledger_dir: str, *,
                    crash_seq: int | None = None, exit_after_effect: int | None = None,
                    sleep: float = 0.0) -> None:
    """Child entry point: run the ledger agent, or resume it if the run exists.

    Exits with 3 when the run exists but is empty (killed before run.started).
    """
    _quiet()
    if crash_seq is not None:
        crash_after(crash_seq)
    st = al.Store(store)
    ledger = Ledger(ledger_dir, exit_after_effect=exit_after_effect, sleep=sleep)
    model = FakeLLM(scripted, model=MODEL)
    if run_id not in st:
        al.run_agent(LedgerAgent(), input={"steps": steps}, model=model, tools=tools_for(ledger),
                     store=st, run_id=run_id, durability="fsync")
        return
    try:
        al.resume(run_id, LedgerAgent(), model=model, tools=tools_for(ledger), store=st)
    except al.errors.AgentError as exc:
        if "has no events" in str(exc):
            os._exit(3)
        raise


def noop() -> None:
    """Child entry point that does nothing (starts the forkserver)."""


def decide(store: str, run_id: str, request_seq: int, verdict: str, by: str, note: str) -> None:
    """Child entry point: approve or deny from another process."""
    fn = al.approve if verdict == "approve" else al.deny
    fn(run_id, request_seq, by, note, store=store)


def warm_up() -> None:
    """Load what a first run loads lazily (price data, pandas for Arrow timestamps, Parquet),
    so that children forked from a server that ran this start in milliseconds.
    Imports only: a run here would start Arrow's thread pools in the server."""
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    from agentlog import pricing
    from agentlog.capture.providers import normalize_usage
    pricing.cost(MODEL, normalize_usage({"prompt_tokens": 1, "completion_tokens": 1}, provider="openai"))
    # The children inherit this heap (pandas, pyarrow, agentlog): frozen, a child's first full
    # collection does not walk it. Unfrozen, one lands (~170 ms on a loaded 2-core box) at a
    # point fixed by how many objects the imports above made, and where it fell between the WAL's
    # creation and run.started, every kill of the crash test came before run.started.
    import gc
    gc.freeze()

