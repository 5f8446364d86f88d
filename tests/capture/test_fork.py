"""Forks: the prefix is the parent's (same hashes, zero calls); the edit changes what follows."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import pytest
from _record_programs import Tools, decide, make_triage

import agentlog as al
from agentlog.testing.fakes import FakeLLM


def seq_of(run: Any, type: str, **payload: Any) -> int:
    return next(e.seq for e in run.iter_events()
                if e.type == type and all(e.payload.get(k) == v for k, v in payload.items()))


def test_fork_with_replaced_tool_result_changes_what_follows(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    metric = seq_of(run, "tool.result", name="get_metric")
    call = run.event(metric).caused_by
    tools = Tools(forbidden=True)  # nothing before or at the cut may be called
    model = FakeLLM(decide)
    fork = al.fork(run, at=call - 1, program=make_triage(tools, model),
                   edit=al.edit.replace_response(metric, {"result": 0.2}))
    # the prefix is the parent's, byte for byte
    assert fork.parent.id == run.id and fork.meta["parent"]["seq"] == call - 1
    for seq in range(call):
        assert fork.event(seq).hash == run.event(seq).hash
    started = fork.event(call)
    assert started.type == "fork.started" and started.payload["parent_hash"] == run.event(call - 1).hash
    assert started.payload["edits"] == [{"edit": "replace_response", "seq": metric, "payload": {"result": 0.2}}]
    # downstream behaves differently: the model (live, the prompt changed) says wait; no restart
    assert fork.event(len(fork) - 1).payload == {"result": "wait and watch"}
    assert model.calls == 1 and tools.restart.calls == 0
    edited = next(e for e in fork.iter_events() if e.type == "tool.result" and e.seq > call)
    assert edited.payload["result"] == 0.2 and edited.payload["edited"] is True
    assert fork.verify().ok


def test_fork_prefix_is_referenced_not_copied(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    fork = al.fork(run, at=5, program=make_triage(Tools(), FakeLLM(decide)))
    own = fork.table()
    assert len(fork) == len(run) + 1  # fork.started; everything else served from the parent's log
    files = list(fork.path.glob("events-*.parquet"))
    import pyarrow.parquet as pq
    assert sum(pq.read_metadata(f).num_rows for f in files) == len(fork) - 6
    assert own.num_rows == len(fork)


def test_fork_unchanged_program_is_served_from_the_parent_after_the_cut(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    fork = al.fork(run, at=3, program=make_triage(Tools(forbidden=True), FakeLLM.forbidden()))
    after = [e for e in fork.iter_events() if e.seq > 4 and e.type in ("tool.result", "llm.response")]
    assert after and all(e.payload.get("served_from_seq") is not None for e in after)


def test_fork_with_state_patch(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    fork = al.fork(run, at=2, program=make_triage(Tools(), FakeLLM(decide)),
                   edit=al.edit.patch_state([{"op": "add", "path": "/note", "value": "forked"}]))
    assert [fork.event(3).type, fork.event(4).type] == ["fork.started", "state.patch"]
    assert fork.state_at(len(fork) - 1)["vars"]["note"] == "forked"


def test_fork_with_other_inputs(store: Any) -> None:
    def program(rec: Any) -> str:
        return rec.tool("greet", {"who": rec.inputs["who"]}, lambda who: f"hello {who}")
    run = al.record(program, store=store, inputs={"who": "ada"})
    fork = al.fork(run, at=-1, program=program, edit=al.edit.replace_input({"who": "bob"}))
    assert fork.event(len(fork) - 1).payload == {"result": "hello bob"}
    assert fork.meta["parent"]["seq"] == -1 and fork.verify().ok


def test_fork_arguments_are_checked(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    program = make_triage(Tools(), FakeLLM(decide))
    with pytest.raises(ValueError, match="at=99 must be between -1 and"):
        al.fork(run, at=99, program=program)
    with pytest.raises(ValueError, match="replace_input needs at=-1"):
        al.fork(run, at=3, program=program, edit=al.edit.replace_input({}))
    with pytest.raises(ValueError, match="is a span.started, not one of"):
        al.fork(run, at=0, program=program, edit=al.edit.replace_response(1, {}))


def test_fork_prefix_divergence_is_reported(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    with pytest.raises(al.errors.DivergenceError, match="diverged at seq 1"):
        al.fork(run, at=8, program=lambda rec: rec.emit("note", {}))


def test_a_divergence_the_program_catches_still_fails_the_fork(store: Any) -> None:
    """An SDK that turns its tools' errors into messages catches a divergence too, and may
    then go on to the cut: the fork fails with that divergence, not a fork of something else."""
    def recorded(rec: Any) -> None:
        rec.emit("note", {"text": "a"})
        rec.emit("note", {"text": "b"})

    def catching(rec: Any) -> None:
        with contextlib.suppress(al.errors.DivergenceError):  # as the Agents SDK does with a tool's error
            rec.emit("note", {"text": "something else"})
        rec.emit("note", {"text": "a"})  # the prefix, to the cut
        rec.emit("note", {"text": "c"})  # past it

    run = al.record(recorded, store=store, name="notes")
    with pytest.raises(al.errors.DivergenceError, match="diverged at seq 1") as caught:
        al.fork(run, at=1, program=catching)
    assert "something else" in str(caught.value)


def test_an_edit_the_fork_never_served_is_warned_of(store: Any) -> None:
    """A fork whose program no longer makes the edited call (an earlier edit took it down
    another path) runs without that edit: it says so, naming the fork and the seq, instead of
    leaving a fork that looks edited and is not."""
    def program(rec: Any) -> str:
        go = rec.tool("check", {}, lambda: "go")
        return rec.tool("act", {}, lambda: "acted") if go == "go" else "stopped"

    run = al.record(program, store=store, name="two tools")
    check, act = [e for e in run.iter_events() if e.type == "tool.result"]
    with pytest.warns(al.errors.ForkEditWarning) as caught:
        fork = al.fork(run, at=0, program=program,
                       edit=[al.edit.replace_response(check.seq, {"result": "stop"}),
                             al.edit.replace_response(act.seq, {"result": "acted twice"})])
    assert fork.event(len(fork) - 1).payload["result"] == "stopped"
    [warning] = caught
    assert f"fork {fork.id}" in str(warning.message) and f"seq {act.seq}" in str(warning.message)
    assert f"seq {check.seq}" not in str(warning.message)  # that edit was served

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every edit served: nothing to say
        al.fork(run, at=0, program=program, edit=al.edit.replace_response(act.seq, {"result": "x"}))
