"""Fork planning without a widget: which edits an event allows, the edit it starts with, the
plan, and the edits kept per event (agentlog.capture.forkplan)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.capture.forkplan import (
    EditBook,
    EditError,
    applicability,
    default_kind,
    dumps,
    plan_fork,
    recorded_value,
)
from agentlog.events import ApprovalDenied, LLMResponse, StatePatch, ToolResult


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return al.examples.sample_store(copy_to=tmp_path_factory.mktemp("plan") / "store")


def _first(run: Any, type_: str) -> Any:
    return next(e for e in run.iter_events() if e.type == type_)


def test_recorded_values_come_from_the_event(store: Any) -> None:
    run = store.run("refunds-0001")
    denial = _first(run, "approval.denied")
    body = ApprovalDenied.of(denial)
    assert recorded_value(run, denial.seq, "approval") == {"decision": "deny", "by": body.by, "note": body.note}
    answer = _first(run, "llm.response")
    value = recorded_value(run, answer.seq, "llm_response")
    assert value["message"] == dict(LLMResponse.of(answer).message)
    assert not {"key", "usage", "cost_source", "cache_hit", "model", "$v"} & set(value)  # bookkeeping stays
    result = _first(run, "tool.result")
    assert recorded_value(run, result.seq, "tool_result") == {"result": ToolResult.of(result).result}
    assert recorded_value(run, result.seq, "llm_response") is None  # not that kind of event


def test_state_patch_and_input(store: Any) -> None:
    run = store.run("sre-0001")
    patch = next((e for e in run.iter_events() if e.type == "state.patch"), None)
    if patch is not None:
        assert recorded_value(run, patch.seq, "state_patch") == [dict(op) for op in StatePatch.of(patch).ops]
    assert recorded_value(run, 3, "state_patch") == [{"op": "add", "path": "/edited", "value": True}]
    assert recorded_value(run, 3, "input") == run.event(0).payload["inputs"]
    last = len(run) - 1
    assert applicability(run, last, "state_patch") == (
        f"seq {last} is the last event: a fork after it has nothing to re-run")


def test_default_kind_follows_the_event(store: Any) -> None:
    run = store.run("refunds-0001")
    denial = _first(run, "approval.denied").seq
    answer = _first(run, "llm.response").seq
    assert default_kind(run, denial, "llm_response") == "approval"
    assert default_kind(run, answer, "approval") == "llm_response"
    assert default_kind(run, answer, "state_patch") == "state_patch"  # applies anywhere: kept


def test_plans_check_the_value(store: Any) -> None:
    run = store.run("refunds-0001")
    program = al.examples.program("refunds")
    denial = _first(run, "approval.denied")
    plan = plan_fork(run, denial.seq, "approval", {"decision": "approve", "by": "me"}, program)
    request = ApprovalDenied.of(denial).request
    assert (plan.at, plan.decision["request"]) == (denial.seq - 1, request)
    with pytest.raises(EditError, match='"by" names who decides'):
        plan_fork(run, denial.seq, "approval", {"decision": "approve", "by": ""}, program)
    with pytest.raises(EditError, match="must be an al.AgentProgram"):
        plan_fork(run, denial.seq, "approval", {"decision": "approve", "by": "me"}, None)
    answer = _first(run, "llm.response")
    with pytest.raises(EditError, match='leave it out'):
        plan_fork(run, answer.seq, "llm_response", {"key": "other", "message": {}}, program)


def test_edit_book_keeps_an_edit_per_event() -> None:
    book = EditBook()
    recorded = dumps({"decision": "deny", "by": "j"})
    approve = dumps({"decision": "approve", "by": "j"})
    assert book.keep(80, "approval", approve, recorded=recorded)
    assert not book.keep(79, "state_patch", "[1]", recorded="[1]")
    assert list(book) == [80] and book.get(80).text == approve
    assert book.keep(12, "input", "{}", recorded="null")
    assert list(book) == [12, 80]
    assert not book.keep(80, "approval", recorded, recorded=recorded)  # edited back: dropped
    assert 80 not in book and book.discard(80) is None
    assert book.discard(12).kind == "input" and len(book) == 0


def test_the_panel_keeps_an_edit_through_a_scrubber_round_trip(store: Any, tmp_path: Path) -> None:
    from agentlog.widgets import ForkPanel, Scrubber
    run = store.run("refunds-0001")
    denial = _first(run, "approval.denied").seq
    scrubber = Scrubber(run, start=denial - 1)
    panel = ForkPanel(run, al.examples.program("refunds"))
    panel.link_to(scrubber)
    approve = {"decision": "approve", "by": "j.keller", "note": "scan received"}
    panel.select(denial)
    assert panel.set_edit("approval", approve) == []
    slider = panel.linked  # the scrubber's slider
    for seq in (denial + 1, denial - 1, denial):  # ▶ ◀ ▶ as in the notebook
        slider.value = seq
    assert panel.seq == denial and panel.kind.value == "approval"
    assert panel.editor.value == dumps(approve)  # not the recorded "deny"
    assert list(panel.edits) == [denial] and str(denial) in panel.kept_label.value
    assert not panel.discard_edit()  # asks first
    assert panel.confirm.layout.display == "flex" and panel.editor.value == dumps(approve)
    assert panel.discard_edit(confirm=True)
    assert '"decision": "deny"' in panel.editor.value and len(panel.edits) == 0
