"""The default projection, reducer registration and reducer errors."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from agentlog.errors import PatchError, ReducerError
from agentlog.events import Event
from agentlog.folding import INITIAL, ReducerRegistrationWarning, Reducers, State, fold, freeze, reducer, thaw
from agentlog.folding import reducers as reducers_module

STANDARD = Reducers.standard()
ROOT_KEYS = ("vars", "messages", "objects", "relations", "usage", "approvals", "status")


@pytest.fixture(autouse=True)
def restore_default_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """@reducer changes the process-wide default set: undo it after each test."""
    monkeypatch.setattr(reducers_module, "_default", reducers_module._default)


def ev(seq: int, type: str, payload: dict[str, Any] | None = None, **columns: Any) -> Event:
    return Event(seq=seq, type=type, payload=payload or {}, **columns)


def step(state: State, event: Event) -> State:
    return fold([event], STANDARD, initial=state)


def unchanged_except(before: State, after: State, *keys: str) -> None:
    for key in ROOT_KEYS:
        if key not in keys:
            assert after[key] is before[key], key


# --- the default projection ----------------------------------------------------------------

def test_initial_state() -> None:
    assert thaw(STANDARD.initial_state()) == {
        "vars": {}, "messages": [], "objects": {}, "relations": {}, "status": "",
        "usage": {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cost_usd": 0.0,
                  "cost_unknown_calls": 0, "llm_calls": 0, "tool_calls": 0,
                  "llm_duration_ms": 0.0, "tool_duration_ms": 0.0, "by_model": {}},
        "approvals": {"pending": {}, "decided": {}},
    }
    assert STANDARD.initial_state() is INITIAL


def test_unknown_types_leave_the_state_unchanged() -> None:
    assert step(INITIAL, ev(0, "my.custom.type", {"x": 1})) is INITIAL
    assert step(INITIAL, ev(0, "span.started")) is INITIAL


def test_state_patch_paths_are_relative_to_vars() -> None:
    s = step(INITIAL, ev(0, "state.patch", {"ops": [{"op": "add", "path": "/plan", "value": ["a"]}]}))
    assert thaw(s["vars"]) == {"plan": ["a"]}
    unchanged_except(INITIAL, s, "vars")
    s2 = step(s, ev(1, "state.patch", {"ops": [{"op": "test", "path": "/plan/0", "value": "a"}]}))
    assert s2 is s


def test_state_patch_without_vars_in_the_initial_state() -> None:
    s = fold([ev(0, "state.patch", {"ops": [{"op": "add", "path": "/x", "value": 1}]})],
             STANDARD, initial={"other": 1})
    assert thaw(s) == {"other": 1, "vars": {"x": 1}}
    same = fold([ev(0, "state.patch", {"ops": []})], STANDARD, initial={"other": 1})
    assert "vars" not in same


def test_failing_patch_is_a_reducer_error() -> None:
    with pytest.raises(ReducerError) as info:
        fold([ev(0, "state.patch", {"ops": []}),
              ev(1, "state.patch", {"ops": [{"op": "remove", "path": "/missing"}]})], STANDARD)
    err = info.value
    assert (err.seq, err.type, err.reducer) == (1, "state.patch", "agentlog.folding.reducers.patch_vars")
    assert isinstance(err.cause, PatchError)
    assert str(err) == ("seq 1 (state.patch): reducer agentlog.folding.reducers.patch_vars raised "
                        "PatchError: op 0 (remove '/missing'): no member 'missing' in the object "
                        "at the root")


MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_llm_request_sets_messages_and_shares_the_prefix() -> None:
    s1 = step(INITIAL, ev(0, "llm.request", {"key": "k", "model": "m", "messages": MSGS}))
    assert thaw(s1["messages"]) == MSGS
    unchanged_except(INITIAL, s1, "messages")
    s2 = step(s1, ev(1, "llm.response", {"message": {"role": "assistant", "content": "hello"}}))
    longer = [*MSGS, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"}]
    s3 = step(s2, ev(2, "llm.request", {"messages": longer}))
    assert thaw(s3["messages"]) == longer
    assert all(s3["messages"][i] is s2["messages"][i] for i in range(3))
    # the same conversation again: nothing changes
    assert step(s3, ev(3, "llm.request", {"messages": longer})) is s3
    # a rewritten conversation replaces the list
    s4 = step(s3, ev(4, "llm.request", {"messages": [{"role": "user", "content": "fresh"}]}))
    assert thaw(s4["messages"]) == [{"role": "user", "content": "fresh"}]


def test_llm_response_appends_the_message_or_the_content() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "search"}]}
    s1 = step(INITIAL, ev(0, "llm.response", {"message": call, "content": None}))
    s2 = step(s1, ev(1, "llm.response", {"content": "plain"}))
    assert thaw(s2["messages"]) == [call, {"role": "assistant", "content": "plain"}]
    assert s2["messages"][0] is s1["messages"][0]


def test_usage_totals() -> None:
    s = fold([
        ev(0, "llm.response", {"content": "a"}, model="m1", input_tokens=100, output_tokens=10,
           cached_tokens=40, cost_usd=0.5, duration_ms=20.0),
        ev(1, "llm.response", {"content": "b", "model": "m2"}, input_tokens=5, output_tokens=1,
           cost_usd=None),
        ev(2, "tool.result", {"result": 1}, duration_ms=3.0),
        ev(3, "tool.result", {"result": 2}, cost_usd=0.25),
        ev(4, "llm.response", {"content": "c"}, model="m1", input_tokens=1, cost_usd=0.25),
    ], STANDARD)
    assert thaw(s["usage"]) == {
        "input_tokens": 106, "output_tokens": 11, "cached_tokens": 40, "cost_usd": 1.0,
        "cost_unknown_calls": 1, "llm_calls": 3, "tool_calls": 2, "llm_duration_ms": 20.0,
        "tool_duration_ms": 3.0,
        "by_model": {
            "m1": {"input_tokens": 101, "output_tokens": 10, "cached_tokens": 40, "cost_usd": 0.75,
                   "cost_unknown_calls": 0, "calls": 2},
            "m2": {"input_tokens": 5, "output_tokens": 1, "cached_tokens": 0, "cost_usd": 0.0,
                   "cost_unknown_calls": 1, "calls": 1},
        },
    }


def test_objects_and_relations_with_provenance() -> None:
    s1 = step(INITIAL, ev(0, "object.created", {"id": "doc1", "kind": "page", "data": {"url": "u", "n": 1}},
                          actor="crawler", caused_by=None))
    assert thaw(s1["objects"]["doc1"]) == {
        "id": "doc1", "kind": "page", "data": {"url": "u", "n": 1},
        "provenance": {"actor": "crawler", "event": 0, "caused_by": None}}
    unchanged_except(INITIAL, s1, "objects")
    s2 = step(s1, ev(5, "object.updated", {"id": "doc1", "data": {"n": 2, "title": "T"}},
                     actor="summarizer", caused_by=3))
    assert thaw(s2["objects"]["doc1"]) == {
        "id": "doc1", "kind": "page", "data": {"url": "u", "n": 2, "title": "T"},
        "provenance": {"actor": "summarizer", "event": 5, "caused_by": 3,
                       "created": {"actor": "crawler", "event": 0, "caused_by": None}}}
    assert s2["objects"]["doc1"]["data"]["url"] is s1["objects"]["doc1"]["data"]["url"]
    s3 = step(s2, ev(6, "object.updated", {"id": "doc1", "data": {}}, actor="x"))
    assert thaw(s3["objects"]["doc1"]["provenance"]["created"]) == {
        "actor": "crawler", "event": 0, "caused_by": None}
    s4 = step(s3, ev(7, "relation.created", {"kind": "cites", "source": "doc1", "target": "doc2"}))
    s5 = step(s4, ev(8, "relation.created", {"id": "R", "kind": "k", "source": "a", "target": "b",
                                             "data": {"w": 1}}, actor="linker", caused_by=7))
    assert thaw(s5["relations"]) == {
        "r7": {"id": "r7", "kind": "cites", "source": "doc1", "target": "doc2", "data": {},
               "provenance": {"actor": None, "event": 7, "caused_by": None}},
        "R": {"id": "R", "kind": "k", "source": "a", "target": "b", "data": {"w": 1},
              "provenance": {"actor": "linker", "event": 8, "caused_by": 7}},
    }
    assert s5["objects"] is s3["objects"]


def test_updating_an_unknown_object_is_a_reducer_error() -> None:
    with pytest.raises(ReducerError) as info:
        step(INITIAL, ev(4, "object.updated", {"id": "ghost", "data": {}}))
    assert str(info.value) == (
        "seq 4 (object.updated): reducer agentlog.folding.reducers.update_object raised KeyError: "
        "\"object.updated names object 'ghost', which does not exist; create it with "
        "object.created first\"")


def test_creating_an_existing_object_is_a_reducer_error() -> None:
    s = step(INITIAL, ev(0, "object.created", {"id": "a", "kind": "k", "data": {}}))
    with pytest.raises(ReducerError, match=r"object 'a' already exists \(created at seq 0\)"):
        step(s, ev(1, "object.created", {"id": "a", "kind": "k", "data": {}}))


def test_approvals_and_status() -> None:
    events = [
        ev(0, "run.started", {"inputs": "go"}),
        ev(1, "approval.requested", {"action": "send email", "reason": "external"}),
        ev(2, "approval.requested", {"action": "pay", "reason": "money"}),
        ev(3, "approval.granted", {"request": 1, "by": "ana", "note": "ok"}),
        ev(4, "approval.denied", {"request": 2, "by": "bo", "note": None}),
        ev(5, "budget.exceeded", {"limit": 1}),
    ]
    states = [INITIAL]
    for e in events:
        states.append(step(states[-1], e))
    assert [s["status"] for s in states] == ["", "running", "waiting", "waiting", "running",
                                             "running", "budget_exceeded"]
    assert thaw(states[3]["approvals"]["pending"]) == {
        "1": {"action": "send email", "reason": "external", "seq": 1},
        "2": {"action": "pay", "reason": "money", "seq": 2}}
    final = states[-2]
    assert thaw(final["approvals"]) == {"pending": {}, "decided": {
        "1": {"action": "send email", "reason": "external", "seq": 1, "decision": "granted",
              "by": "ana", "note": "ok", "decision_seq": 3},
        "2": {"action": "pay", "reason": "money", "seq": 2, "decision": "denied", "by": "bo",
              "note": None, "decision_seq": 4}}}
    assert step(final, ev(9, "run.finished"))["status"] == "finished"
    assert step(final, ev(9, "run.failed", {"error": "x"}))["status"] == "failed"
    unchanged_except(states[1], states[2], "approvals", "status")


def test_deciding_a_request_that_is_not_pending_is_a_reducer_error() -> None:
    s = step(INITIAL, ev(1, "approval.requested", {"action": "a"}))
    with pytest.raises(ReducerError, match=r"names request seq 7, which is not pending \(pending: 1\)"):
        step(s, ev(2, "approval.granted", {"request": 7, "by": "x"}))


def test_status_does_not_change_when_it_is_the_same() -> None:
    s = step(INITIAL, ev(0, "run.started"))
    assert step(s, ev(1, "run.started")) is s


# --- registration --------------------------------------------------------------------------

def tag(name: str) -> Any:
    def fn(state: State, event: Event) -> State:
        return state.set("trace", state.get("trace", "") + name)
    fn.__qualname__ = f"tag_{name}"
    return fn


def test_reducers_run_in_registration_order() -> None:
    rs = Reducers({"t": [tag("a"), tag("b")]}).with_reducer("t", tag("c"))
    assert fold([ev(0, "t")], rs)["trace"] == "abc"
    assert rs.names("t") == (f"{__name__}.tag_a", f"{__name__}.tag_b", f"{__name__}.tag_c")


def test_same_qualified_name_replaces_in_place_with_a_warning() -> None:
    rs = Reducers({"t": [tag("a"), tag("b")]})
    again = tag("a")  # a new function object with the same qualified name (a re-run cell)
    again_calls = []

    def counting(state: State, event: Event) -> State:
        again_calls.append(event.seq)
        return again(state, event)
    counting.__qualname__ = "tag_a"
    with pytest.warns(ReducerRegistrationWarning) as record:
        rs2 = rs.with_reducer("t", counting)
    assert str(record[0].message) == (
        f"reducer {__name__}.tag_a is already registered for 't'; the new "
        "definition replaces it (and keeps its place)")
    assert record[0].filename == __file__
    assert rs2["t"] == (counting, rs["t"][1])
    assert fold([ev(0, "t")], rs2)["trace"] == "ab"
    assert again_calls == [0]
    assert rs["t"][0] is not counting  # the original set is unchanged


def test_decorator_registers_into_the_default_set_only() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @reducer("test.decorated", "test.other")
        def decorated(state: State, event: Event) -> State:
            return state.set("decorated", event.seq)

    name = f"{__name__}.test_decorator_registers_into_the_default_set_only.<locals>.decorated"
    assert Reducers.default().names("test.decorated") == (name,)
    assert Reducers.default().names("test.other") == (name,)
    assert "test.decorated" not in Reducers.standard()
    assert fold([ev(3, "test.decorated")])["decorated"] == 3           # default set
    assert "decorated" not in fold([ev(3, "test.decorated")], STANDARD)  # a run's own set
    with pytest.warns(ReducerRegistrationWarning):
        @reducer("test.decorated")
        def decorated(state: State, event: Event) -> State:
            return state.set("decorated", -event.seq)
    assert fold([ev(3, "test.decorated")])["decorated"] == -3
    assert len(Reducers.default()["test.decorated"]) == 1


def test_decorator_needs_a_type() -> None:
    with pytest.raises(TypeError, match="usage: @reducer"):
        reducer()


def test_plain_mapping_of_reducers() -> None:
    s = fold([ev(0, "t"), ev(1, "state.patch", {"ops": []})], {"t": tag("x")})
    assert thaw(s) == {"trace": "x"}  # no standard reducers, empty initial state


def test_sets_built_on_a_base() -> None:
    rs = Reducers({"t": tag("x")}, base=STANDARD)
    assert rs.initial_state() is INITIAL
    assert rs.names("state.patch") == STANDARD.names("state.patch")
    assert len(rs) == len(STANDARD) + 1
    assert rs.without("t") == STANDARD
    llm = rs.without("llm.response", reducers_module.count_llm_usage)
    assert llm.names("llm.response") == ("agentlog.folding.reducers.append_response",)
    with pytest.raises(KeyError, match="no reducers for 'nope'"):
        rs.without("nope")
    with pytest.raises(KeyError, match="is not a reducer for 't'"):
        rs.without("t", tag("y"))
    mine = rs.with_initial({"counter": 0})
    assert thaw(mine.initial_state()) == {"counter": 0}
    assert repr(STANDARD) == "<Reducers 18 reducers for 14 event types>"
    with pytest.raises(TypeError, match="must be callable"):
        Reducers({"t": [42]})  # type: ignore[list-item]


def test_reducer_that_raises_is_named() -> None:
    def explode(state: State, event: Event) -> State:
        raise ValueError("boom")

    with pytest.raises(ReducerError) as info:
        fold([ev(0, "t"), ev(1, "x")], {"x": explode})
    err = info.value
    assert (err.seq, err.type) == (1, "x")
    assert err.reducer == f"{__name__}.test_reducer_that_raises_is_named.<locals>.explode"
    assert isinstance(err.cause, ValueError) and err.__cause__ is err.cause
    assert str(err).endswith("raised ValueError: boom")


def test_reducer_that_returns_no_state_is_named() -> None:
    def forgot_return(state: State, event: Event) -> State:
        state.set("x", 1)
        return None  # type: ignore[return-value]

    with pytest.raises(ReducerError, match=r"seq 0 \(t\): reducer .*forgot_return raised "
                                           r"TypeError: returned NoneType, not a state"):
        fold([ev(0, "t")], {"t": forgot_return})


def test_initial_state_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="the initial state is a mapping"):
        fold([], STANDARD, initial=[1])  # type: ignore[arg-type]
    assert fold([], STANDARD, initial={"a": [1]}) == freeze({"a": [1]})
