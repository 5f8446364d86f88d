"""ForkPanel: forks from the panel keep the parent's prefix, mark the right divergence, and show
every failure (bad JSON, an edit that does not apply, a program that raises) in the panel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as widgets
import pytest

import agentlog as al
from agentlog.widgets.forkpanel import ForkPanel, plan_fork

APPROVE = {"decision": "approve", "by": "j.keller", "note": "returned-goods scan received"}


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return al.examples.sample_store(copy_to=tmp_path / "store")


@pytest.fixture
def refunds(store: Any) -> Any:
    return store.run("refunds-0001")


def _seq(run: Any, type_: str) -> int:
    return next(e.seq for e in run.iter_events() if e.type == type_)


def _hashes(run: Any) -> list[str]:
    return run.table().column("hash").to_pylist()


def test_panel_starts_on_the_recorded_decision(refunds: Any) -> None:
    panel = ForkPanel(refunds, al.examples.program("refunds"))
    denial = _seq(refunds, "approval.denied")
    assert panel.seq == denial and panel.kind.value == "approval"
    assert '"decision": "deny"' in panel.editor.value and '"by": "j.keller"' in panel.editor.value
    assert panel.validate() == [] and not panel.button.disabled
    assert isinstance(panel, widgets.VBox) and "agentlog-forkpanel" in panel._dom_classes


def test_approval_fork_keeps_the_prefix_and_diverges_at_the_decision(refunds: Any) -> None:
    panel = ForkPanel(refunds, al.examples.program("refunds"))
    denial = _seq(refunds, "approval.denied")
    assert panel.set_edit("approval", APPROVE) == []
    new = panel.run_fork()
    assert panel.new_run is new and new.parent.id == refunds.id and new.fork_seq == denial - 1
    assert new.status == "finished"
    assert _hashes(new)[:denial] == _hashes(refunds)[:denial]
    assert _hashes(new)[denial] != _hashes(refunds)[denial]
    assert new.event(denial).type == "approval.granted"
    assert panel.diff_view.divergence_seq == denial
    assert panel.error is None and panel.result.children  # the new run and its diff are shown
    refunded = [e for e in new.iter_events(start=denial) if e.type == "tool.result"
                and e.payload["name"] == "issue_refund" and e.payload["result"]["amount_eur"] == 840.0]
    assert refunded, "the approved refund ran in the fork"


def test_tool_result_fork_cuts_before_the_call_and_its_span(store: Any) -> None:
    run = store.run("sre-0001")
    cpu = next(e for e in run.iter_events() if e.type == "tool.result"
               and isinstance(e.payload.get("result"), dict) and e.payload["result"].get("metric") == "cpu")
    panel = ForkPanel(run, al.examples.program("sre"))
    panel.select(cpu.seq)
    assert panel.kind.value == "tool_result"  # the kind follows the selected event
    errors = panel.set_edit("tool_result", {"result": {"service": "orders-db", "metric": "cpu", "value": 0.35}})
    assert errors == []
    new = panel.run_fork()
    at = cpu.caused_by - 2  # before the tool's span (under the step's span, kept): see quiet_cut
    assert run.event(at + 1).type == "span.started" and run.event(at + 1).span_id == cpu.span_id
    assert new.fork_seq == at
    assert _hashes(new)[: at + 1] == _hashes(run)[: at + 1]
    assert new.event(at + 1).type == "fork.started"
    assert panel.diff_view.divergence_seq == at + 1
    served = next(e for e in new.iter_events(start=at + 1) if e.type == "tool.result")
    assert served.payload["result"]["value"] == 0.35 and served.payload["edited"] is True


def test_a_fork_that_never_served_its_edit_says_so_in_the_panel(tmp_path: Path) -> None:
    """A changed program that no longer makes the edited call (it asks the same tool with
    other arguments) runs without the edit: the panel shows the warning above the new run,
    naming the seq."""
    store = al.Store(tmp_path / "own")

    def recorded(rec: Any) -> str:
        go = rec.tool("check", {}, lambda: "go")
        return str(rec.tool("act", {"go": go}, lambda go: f"acted on {go}"))

    def changed(rec: Any) -> str:
        rec.tool("check", {}, lambda: "go")
        return str(rec.tool("act", {"go": "later"}, lambda go: f"acted on {go}"))

    run = store.run(al.record(recorded, store=store, name="two tools").id)
    act = [e for e in run.iter_events() if e.type == "tool.result"][-1]
    panel = ForkPanel(run, changed)
    panel.select(act.seq)
    assert panel.set_edit("tool_result", {"result": "acted twice"}) == []
    new = panel.run_fork()
    assert new.event(len(new) - 1).payload["result"] == "acted on later"  # run live, not the edit
    header = panel.result.children[0].value
    assert "never served" in header and f"seq {act.seq}" in header and new.id in header


def test_invalid_json_disables_fork_and_shows_the_error(refunds: Any) -> None:
    panel = ForkPanel(refunds, al.examples.program("refunds"))
    panel.editor.value = '{"decision": "approve", '  # as if typed in the editor
    assert panel.button.disabled
    assert panel.error is not None and "not JSON" in panel.error
    assert f"run {refunds.id}, seq {panel.seq}" in panel.error
    assert "not JSON" in panel.errors.value and "color:#b00020" in panel.errors.value
    with pytest.raises(ValueError, match="not JSON"):
        panel.run_fork()
    assert panel.new_run is None
    panel.editor.value = '{"decision": "approve", "by": "me"}'
    assert not panel.button.disabled and panel.error is None and panel.errors.value == ""


def test_bad_shape_and_inapplicable_edits_are_reported(refunds: Any) -> None:
    panel = ForkPanel(refunds, al.examples.program("refunds"))
    assert "decision" in panel.set_edit("approval", {"decision": "maybe", "by": "me"})[0]
    call = _seq(refunds, "tool.call")
    panel.select(call)
    errors = panel.set_edit("llm_response", {"message": {"content": "hi"}})
    expected = (f"run {refunds.id}, seq {call}: replace the LLM response needs an llm.response "
                f"event; seq {call} is a tool.call")
    assert errors == [expected]
    assert panel.button.disabled
    errors = panel.set_edit("state_patch", [{"op": "replace", "path": "/missing/x", "value": 1}])
    assert len(errors) == 1 and "do not apply to state['vars']" in errors[0]
    assert panel.set_edit("state_patch", [{"op": "add", "path": "/mode", "value": "careful"}]) == []


def test_a_program_that_raises_is_shown_with_run_id_and_seq(refunds: Any) -> None:
    def broken(rec: Any) -> None:
        raise RuntimeError("the model endpoint is down")

    panel = ForkPanel(refunds, broken)
    patch = _seq(refunds, "state.patch")
    panel.select(patch)
    assert panel.set_edit("state_patch", [{"op": "add", "path": "/mode", "value": "careful"}]) == []
    panel._on_click(panel.button)  # the button's handler: nothing escapes to the log
    assert panel.new_run is None and panel.error is not None
    assert f"run {refunds.id}, seq {patch}" in panel.error
    assert "the model endpoint is down" in panel.error and "the fork failed" in panel.error
    assert "the model endpoint is down" in panel.errors.value
    assert panel.status.value == "fork failed"


def test_approval_edit_needs_an_agent_program(refunds: Any) -> None:
    panel = ForkPanel(refunds, lambda rec: None)
    errors = panel.validate()
    assert len(errors) == 1 and "al.AgentProgram" in errors[0] and panel.button.disabled


def test_link_to_a_scrubber_follows_its_slider(refunds: Any) -> None:
    scrubber = al.widgets.Scrubber(refunds, start=10)
    panel = ForkPanel(refunds, al.examples.program("refunds"))
    panel.link_to(scrubber)
    assert panel.seq == 10
    scrubber.goto(29)  # moves the scrubber's slider, which the panel follows
    assert panel.seq == 29 and panel.kind.value == "llm_response"
    assert '"message"' in panel.editor.value


def test_plan_fork_for_input_cuts_before_everything(refunds: Any) -> None:
    plan = plan_fork(refunds, 5, "input", {"tickets": []})
    assert plan.at == -1 and plan.edits[0].describe() == {"edit": "replace_input", "inputs": {"tickets": []}}
