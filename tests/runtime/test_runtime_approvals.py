"""Approvals: a gated step stops the run (waiting); a person decides from another process;
resume runs a granted action once and never runs a denied one."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from _runtime_helpers import MODEL, RefundAgent, refund_program, refund_tools, scripted, seq_of

import agentlog as al
from agentlog.testing.fakes import CountingTool, FakeLLM


def decide_elsewhere(store: Any, run_id: str, seq: int, verdict: str, by: str, note: str) -> None:
    """Approve or deny in a fresh Python process, as a person's tool would."""
    code = (f"import agentlog as al; al.{verdict}({run_id!r}, {seq}, {by!r}, {note!r}, "
            f"store={str(store.path)!r})")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)


def start(store: Any, order: str, run_id: str, refunds: list[str]) -> Any:
    return al.run_agent(RefundAgent(), input={"order": order}, model=FakeLLM(scripted, model=MODEL),
                        tools=refund_tools(refunds), store=store, run_id=run_id)


def test_a_gated_call_waits_and_the_request_carries_the_reasoning(store: Any) -> None:
    refunds: list[str] = []
    run = start(store, "ORD-91277", "big", refunds)
    assert run.status == "waiting" and refunds == []
    last = run.event(len(run) - 1)
    assert last.type == "span.ended"  # the step ended cleanly; nothing after it
    request = run.event(seq_of(run, "approval.requested"))
    answer = run.event(seq_of(run, "llm.response"))
    assert request.payload == {
        "action": {"tool": "refund", "args": {"order": "ORD-91277", "amount": 840.0}},
        "reason": "840.0 is above the 100 autonomous cap",
        "reasoning": answer.payload["message"]["content"]}
    assert request.payload["reasoning"].startswith("The claim is large")
    state = run.state_at(len(run) - 1)
    assert state["status"] == "waiting" and list(state["approvals"]["pending"]) == [str(request.seq)]


def test_approve_from_another_process_then_resume_runs_the_call_once(store: Any) -> None:
    refunds: list[str] = []
    run = start(store, "ORD-91277", "approve-me", refunds)
    request = seq_of(run, "approval.requested")
    decide_elsewhere(store, "approve-me", request, "approve", "j.keller", "signed delivery checked")
    decided = store.run("approve-me")
    assert decided.status == "ready"
    granted = decided.event(len(decided) - 1)
    assert granted.type == "approval.granted" and granted.caused_by == request
    assert granted.payload == {"request": request, "by": "j.keller", "note": "signed delivery checked"}
    run = al.resume("approve-me", RefundAgent(), model=FakeLLM.forbidden(), tools=refund_tools(refunds),
                    store=store)
    assert run.status == "finished"
    assert len(refunds) == 1 and refunds[0] == f"approve-me:{seq_of(run, 'tool.call', name='refund')}"
    assert run.event(len(run) - 1).payload["result"]["refunded"]["refund_id"] == "re_1"
    replayed = al.replay(al.AgentProgram(RefundAgent(), model=FakeLLM.forbidden(),
                                         tools={"lookup": CountingTool(forbidden=True),
                                                "refund": CountingTool(forbidden=True)}), run)
    assert replayed.ok, str(replayed)
    with pytest.raises(al.ApprovalError) as info:
        al.approve(run, request, "someone-else", store=store)
    assert str(info.value) == (f"run 'approve-me': cannot decide approval request seq {request}: it was "
                               f"already granted by j.keller (seq {granted.seq})")
    assert store.run("approve-me").status == "finished"  # a refused decision changes nothing


def test_deny_from_another_process_the_call_never_runs_and_the_agent_sees_why(store: Any) -> None:
    refunds: list[str] = []
    run = start(store, "ORD-91277", "deny-me", refunds)
    request = seq_of(run, "approval.requested")
    decide_elsewhere(store, "deny-me", request, "deny", "j.keller", "3 fraud markers")
    run = al.resume("deny-me", RefundAgent(), model=FakeLLM.forbidden(), tools=refund_tools(refunds),
                    store=store)
    assert run.status == "finished" and refunds == []
    assert not any(e.type == "tool.call" and e.payload["name"] == "refund" for e in run.iter_events())
    assert run.event(len(run) - 1).payload["result"] == {
        "refunded": None, "denied_by": "j.keller", "note": "3 fraud markers"}
    decided = run.state_at(len(run) - 1)["approvals"]["decided"][str(request)]
    assert decided["decision"] == "denied"
    assert al.replay(refund_program(), run).ok


def test_resume_before_the_decision_waits_again_and_writes_nothing(store: Any) -> None:
    run = start(store, "ORD-91277", "early", [])
    again = al.resume(run, RefundAgent(), model=FakeLLM.forbidden(), tools=refund_tools())
    assert again.status == "waiting" and len(again) == len(run) and again.head == run.head


def test_a_small_refund_needs_no_approval(store: Any) -> None:
    refunds: list[str] = []
    run = start(store, "ORD-88412", "small", refunds)
    assert run.status == "finished" and len(refunds) == 1
    assert not any(e.type.startswith("approval.") for e in run.iter_events())


def test_a_decision_on_something_that_is_not_waiting_is_refused(store: Any) -> None:
    run = start(store, "ORD-91277", "nothing-there", [])
    request = seq_of(run, "approval.requested")
    with pytest.raises(al.ApprovalError) as info:
        al.deny(run, 2, "j.keller")
    assert str(info.value) == ("run 'nothing-there': cannot decide approval request seq 2: no approval "
                               f"request waits at that seq (waiting: {request})")
    assert isinstance(info.value, LookupError) and info.value.request == 2
    with pytest.raises(TypeError, match="by must name who decides"):
        al.approve(run, request, "")
    assert store.run("nothing-there").status == "waiting"


def test_request_approval_step_for_any_action(store: Any) -> None:
    class Publish:
        name = "publisher"

        def next_step(self, state: Any) -> Any:
            decided = state["approvals"]["decided"]
            if decided:
                return al.Finish(next(iter(decided.values()))["decision"])
            return al.RequestApproval({"publish": "memo-1"}, reason="goes to the board")

    run = al.run_agent(Publish(), input=None, model=None, tools={}, store=store, run_id="pub")
    assert run.status == "waiting"
    al.approve("pub", seq_of(run, "approval.requested"), "cfo", store=store)
    run = al.resume("pub", Publish(), model=None, tools={}, store=store)
    assert run.event(len(run) - 1).payload == {"result": "granted"}
    assert al.replay(al.AgentProgram(Publish()), run).ok
