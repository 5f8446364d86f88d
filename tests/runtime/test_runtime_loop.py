"""The loop: a pure agent decides, the executor acts through the recorder, each step in a span."""

from __future__ import annotations

from typing import Any

import pytest
from _runtime_helpers import MODEL, Ledger, LedgerAgent, comparable, program, scripted, tools_for

import agentlog as al
from agentlog.testing.fakes import CountingTool, FakeLLM


def run_ledger(store: Any, tmp_path: Any, steps: int = 3, **kwargs: Any) -> Any:
    return al.run_agent(LedgerAgent(), input={"steps": steps}, model=FakeLLM(scripted, model=MODEL),
                        tools=tools_for(Ledger(tmp_path / "ledger")), store=store, **kwargs)


def test_each_step_is_an_agent_span_with_its_calls_inside(store: Any, tmp_path: Any) -> None:
    run = run_ledger(store, tmp_path, steps=3, run_id="loop-1", name="ledger")
    assert run.status == "finished" and run.name == "ledger"
    assert run.meta["tags"] == {"agent": "ledger-agent"}
    events = list(run.iter_events())
    spans = {e.span_id: e for e in events if e.type == "span.started"}
    steps = [e for e in spans.values() if e.payload["kind"] == "agent"]
    assert [s.payload["attributes"]["do"] for s in steps] == [
        "call_model", "call_tool", "call_model", "call_tool", "call_model", "call_tool", "emit"]
    assert [s.payload["attributes"]["step"] for s in steps] == list(range(1, 8))
    for e in spans.values():  # every llm / tool span is the child of a step
        if e.payload["kind"] in ("llm", "tool"):
            assert spans[e.payload["parent"]].payload["kind"] == "agent"
    for e in events:  # every call and answer sits in a span of its own kind
        if e.type in ("llm.request", "llm.response"):
            assert spans[e.span_id].payload["kind"] == "llm"
        if e.type in ("tool.call", "tool.result"):
            assert spans[e.span_id].payload["kind"] == "tool"
    assert events[-1].type == "run.finished" and events[-1].payload == {
        "result": {"payments": 3, "total": 7 + 17 + 27}}
    state = comparable(run)
    assert state["vars"] == {"total": 51, "checkpoint": 3}
    assert [t[2]["amount"] for t in state["tools"]] == [7, 17, 27]
    assert state["usage"]["llm_calls"] == 3 and state["usage"]["tool_calls"] == 3


def test_tool_calls_carry_idempotency_keys_run_id_and_seq(store: Any, tmp_path: Any) -> None:
    run = run_ledger(store, tmp_path, run_id="keys-1")
    for e in run.iter_events():
        if e.type == "tool.call":
            assert e.payload["idempotency_key"] == f"keys-1:{e.seq}"
    assert Ledger(tmp_path / "ledger").keys() == {e.payload["idempotency_key"] for e in run.iter_events()
                                                  if e.type == "tool.call"}


def test_an_agent_run_replays_strictly_with_nothing_called(store: Any, tmp_path: Any) -> None:
    run = run_ledger(store, tmp_path)
    result = al.replay(program(), run)
    assert result.ok, str(result)
    assert result.live == 0 and result.served == 6
    assert result.result == run.event(len(run) - 1).payload["result"]


def test_record_takes_an_agent_program_like_any_program(store: Any, tmp_path: Any) -> None:
    ledger = Ledger(tmp_path / "ledger")
    prog = al.AgentProgram(LedgerAgent(), model=FakeLLM(scripted, model=MODEL), tools=tools_for(ledger))
    run = al.record(prog, store=store, inputs={"steps": 2})
    assert run.status == "finished" and run.name == "ledger-agent"
    assert al.replay(program(), run).ok


def test_a_failing_tool_is_recorded_and_the_agent_sees_the_error(store: Any) -> None:
    class Retry:
        name = "retry"

        def next_step(self, state: Any) -> Any:
            tools = state["tools"]
            if not tools:
                return al.CallTool("flaky", {"n": 1})
            if tools[-1]["error"] and len(tools) < 2:
                return al.CallTool("flaky", {"n": 2})
            return al.Finish([t["error"] or t["result"] for t in tools])

    def flaky(n: int) -> str:
        if n == 1:
            raise TimeoutError("upstream took too long")
        return "ok"

    run = al.run_agent(Retry(), input=None, model=None, tools={"flaky": flaky}, store=store)
    assert run.event(len(run) - 1).payload["result"] == ["TimeoutError: upstream took too long", "ok"]
    assert al.replay(al.AgentProgram(Retry(), tools={"flaky": CountingTool(forbidden=True)}), run).ok


def test_an_unknown_tool_is_an_error_the_agent_sees(store: Any) -> None:
    class Typo:
        def next_step(self, state: Any) -> Any:
            if not state["tools"]:
                return al.CallTool("serch", {"q": "x"})
            return al.Finish(state["tools"][0]["error"])

    run = al.run_agent(Typo(), input=None, model=None, tools={"search": lambda q: q}, store=store)
    assert run.event(len(run) - 1).payload["result"] == "LookupError: no tool named 'serch'; this agent has search"


def test_a_bad_step_fails_the_run_and_a_failed_run_is_not_resumed(store: Any) -> None:
    class Broken:
        def next_step(self, state: Any) -> Any:
            return "call the model please"

    with pytest.raises(al.errors.AgentError, match="Broken.next_step returned str; return one of") as info:
        al.run_agent(Broken(), input=None, model=None, tools={}, store=store, run_id="broken")
    assert "agentlog: recorded as run broken" in info.value.__notes__
    run = store.run("broken")
    assert run.status == "failed" and run.event(len(run) - 1).type == "run.failed"
    with pytest.raises(al.errors.AgentError, match="run 'broken' failed .*a failed run is not resumed"):
        al.resume(run, Broken(), model=None, tools={})
    assert store.run("broken").status == "failed"


def test_a_fact_no_reducer_accepts_is_refused_before_it_is_written(store: Any) -> None:
    class Twice:
        def next_step(self, state: Any) -> Any:
            return al.Emit([al.Fact("object.created", {"id": "a", "kind": "k", "data": {}}),
                            al.Fact("object.created", {"id": "a", "kind": "k", "data": {}})])

    with pytest.raises(al.errors.AgentError, match="the fact object.created was refused before it was "
                                                   "written: object 'a' already exists"):
        al.run_agent(Twice(), input=None, model=None, tools={}, store=store, run_id="twice")
    created = [e for e in store.run("twice").iter_events() if e.type == "object.created"]
    assert len(created) == 1


def test_ctrl_c_leaves_a_resumable_run(store: Any, tmp_path: Any) -> None:
    ledger = Ledger(tmp_path / "ledger")
    calls = {"n": 0}

    def pay(step: int, amount: int, idempotency_key: str) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return ledger.pay(step, amount, idempotency_key)

    with pytest.raises(KeyboardInterrupt):
        al.run_agent(LedgerAgent(), input={"steps": 3}, model=FakeLLM(scripted, model=MODEL),
                     tools={"pay": pay}, store=store, run_id="ctrl-c")
    run = store.run("ctrl-c")
    assert run.status == "interrupted"
    closed = [e.payload["error"] for e in run.iter_events() if e.type == "span.ended" and e.payload["error"]]
    assert closed == ["interrupted", "interrupted"]
    run = al.resume(run, LedgerAgent(), model=FakeLLM(scripted, model=MODEL), tools={"pay": pay})
    assert run.status == "finished" and comparable(run)["vars"] == {"total": 51, "checkpoint": 3}
    assert len(ledger.keys()) == 3
    assert al.replay(program(), run).ok


def test_resume_of_a_finished_run_changes_nothing(store: Any, tmp_path: Any) -> None:
    run = run_ledger(store, tmp_path, run_id="done")
    again = al.resume("done", LedgerAgent(), model=FakeLLM.forbidden(), tools={}, store=store)
    assert again.status == "finished" and len(again) == len(run) and again.head == run.head


def test_ctrl_c_in_the_middle_of_an_emit_appends_the_rest_on_resume(store: Any) -> None:
    interrupts = {"left": 1}

    def flaky_note(state: Any, event: Any) -> Any:
        if interrupts["left"]:  # the first fold of this fact is where Ctrl-C lands
            interrupts["left"] -= 1
            raise KeyboardInterrupt
        return state.set("noted", True)

    class Notes:
        name = "notes"
        reducers = al.Reducers.standard().with_reducer("test.note", flaky_note)

        def next_step(self, state: Any) -> Any:
            if "b" in state["vars"]:
                return al.Finish(sorted(state["vars"]))
            return al.Emit([al.Fact("state.patch", {"ops": [{"op": "add", "path": "/a", "value": 1}]}),
                            al.Fact("test.note", {"text": "between"}),
                            al.Fact("state.patch", {"ops": [{"op": "add", "path": "/b", "value": 2}]})])

    with pytest.raises(KeyboardInterrupt):
        al.run_agent(Notes(), input=None, model=None, tools={}, store=store, run_id="notes")
    run = store.run("notes")
    assert run.status == "interrupted"
    assert [e.type for e in run.iter_events()][-3:] == ["span.started", "state.patch", "span.ended"]
    run = al.resume(run, Notes(), model=None, tools={})
    assert run.status == "finished" and run.event(len(run) - 1).payload == {"result": ["a", "b"]}
    assert [e.payload.get("text") for e in run.iter_events() if e.type == "test.note"] == ["between"]
    assert run.state_at(len(run) - 1, reducers=al.AgentProgram(Notes()).reducers)["noted"] is True
    assert al.replay(al.AgentProgram(Notes()), run).ok
