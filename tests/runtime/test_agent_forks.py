"""Forking an agent run is fold + continue: the prefix is the parent's (same hashes), and the
fork behaves differently downstream of the change."""

from __future__ import annotations

from typing import Any

from _runtime_helpers import (
    MODEL,
    Ledger,
    LedgerAgent,
    RefundAgent,
    comparable,
    refund_program,
    refund_tools,
    scripted,
    seq_of,
    start_or_resume,
    tools_for,
)

import agentlog as al
from agentlog.testing.fakes import FakeLLM


def same_prefix(fork: Any, parent: Any, at: int) -> None:
    assert fork.parent.id == parent.id and fork.fork_seq == at
    for seq in range(at + 1):
        assert fork.event(seq).hash == parent.event(seq).hash
    assert fork.verify().ok


def denied_refund(store: Any) -> Any:
    run = al.run_agent(RefundAgent(), input={"order": "ORD-91277"}, model=FakeLLM(scripted, model=MODEL),
                       tools=refund_tools(), store=store, run_id="refund-1")
    al.deny(run, seq_of(run, "approval.requested"), "j.keller", "3 fraud markers")
    return al.resume(run, RefundAgent(), model=FakeLLM.forbidden(), tools=refund_tools())


def test_fork_at_the_approval_with_the_other_decision(store: Any) -> None:
    parent = denied_refund(store)
    assert parent.event(len(parent) - 1).payload["result"]["refunded"] is None
    request = seq_of(parent, "approval.requested")
    at = request - 2
    assert parent.event(at + 1).type == "span.started"  # the approval step starts after the cut
    refunds: list[str] = []
    fork = al.fork(parent, at=at, program=refund_program(), name="refund-1 approved")
    assert fork.status == "waiting"  # the fork asks again, and waits for its own decision
    same_prefix(fork, parent, at)
    asked = seq_of(fork, "approval.requested")
    assert fork.event(asked - 2).type == "fork.started"
    al.approve(fork, asked, "j.keller", "returned-goods scan received")
    fork = al.resume(fork, RefundAgent(), model=FakeLLM.forbidden(), tools=refund_tools(refunds))
    assert fork.status == "finished"
    assert fork.event(len(fork) - 1).payload["result"]["refunded"]["amount"] == 840.0
    assert len(refunds) == 1 and refunds[0].startswith(f"{fork.id}:")
    assert parent.event(len(parent) - 1).payload["result"]["denied_by"] == "j.keller"  # unchanged
    assert fork.parent.status == "finished"


def test_fork_at_a_tool_result_with_an_edited_value(store: Any) -> None:
    parent = denied_refund(store)
    lookup = seq_of(parent, "tool.result", name="lookup")
    call = parent.event(lookup).caused_by
    fork = al.fork(parent, at=call - 1, program=refund_program(),
                   edit=al.edit.replace_response(lookup, {"result": {"order": "ORD-91277", "amount": 40.0}}))
    same_prefix(fork, parent, call - 1)
    # a small amount: no approval, the refund runs at once, and the model is asked about 40.0
    assert fork.status == "finished"
    assert not any(e.type.startswith("approval.") for e in fork.iter_events(call))
    assert fork.event(len(fork) - 1).payload["result"]["refunded"]["amount"] == 40.0
    request = fork.event(seq_of(fork, "llm.request"))
    assert "refund of 40.0" in request.payload["messages"][-1]["content"]


def test_fork_of_a_run_that_was_crashed_and_resumed(tmp_path: Any, children: Any) -> None:
    ledger = Ledger(tmp_path / "ledger")
    p = children.Process(target=start_or_resume, kwargs={
        "store": str(tmp_path / "s"), "run_id": "r", "steps": 4, "ledger_dir": str(ledger.root), "crash_seq": 9})
    p.start()
    p.join()
    assert p.exitcode == 17
    parent = al.resume("r", LedgerAgent(), model=FakeLLM(scripted, model=MODEL), tools=tools_for(ledger),
                       store=tmp_path / "s")
    interrupted = [e.seq for e in parent.iter_events() if e.type == "span.ended"
                   and e.payload["error"] == "interrupted"]
    assert interrupted
    at = interrupted[-1] + 3  # past the interruption: the fork's prefix replays through it
    fork = al.fork(parent, at=at, program=al.AgentProgram(LedgerAgent(), model=FakeLLM.forbidden(),
                                                         tools={"pay": ledger.pay}))
    same_prefix(fork, parent, at)
    assert comparable(fork) == comparable(parent)  # nothing changed: all served from the parent


def test_a_loop_fork_folds_to_the_cut_instead_of_replaying(store: Any, monkeypatch: Any) -> None:
    """Fork by fold + continue: no model call and no replay comparison for the prefix."""
    from agentlog.capture import sinks

    parent = denied_refund(store)
    compared: list[int] = []
    real = sinks.differing_fields

    def counting(expected: Any, actual: Any) -> Any:
        compared.append(expected.seq)
        return real(expected, actual)

    monkeypatch.setattr(sinks, "differing_fields", counting)
    at = seq_of(parent, "approval.requested") - 2  # between two steps
    fork = al.fork(parent, at=at, program=al.AgentProgram(RefundAgent(), model=FakeLLM.forbidden(),
                                                          tools=refund_tools()))
    same_prefix(fork, parent, at)
    assert compared == [] and fork.status == "waiting"
    # a cut inside a step replays that step's events only, never the prefix before it
    inside = seq_of(parent, "tool.result", name="lookup")
    fork = al.fork(parent, at=inside, program=al.AgentProgram(RefundAgent(), model=FakeLLM.forbidden(),
                                                              tools=refund_tools()))
    same_prefix(fork, parent, inside)
    step = max(e.seq for e in parent.iter_events(stop=inside + 1)
               if e.type == "span.started" and e.payload.get("kind") == "agent")
    assert compared and min(compared) == step and max(compared) <= inside
