"""The typed event vocabulary: bodies, their JSON form, checks, versions and the writer's use of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentlog as al
from agentlog import events as ev
from agentlog.errors import EventSchemaError, EventVersionError, UsageError

V1_SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "v1_sample_runs"


def _v1_events() -> list[al.Event]:
    store = al.Store(V1_SAMPLES)
    runs = [p.name.split("=", 1)[1] for p in (V1_SAMPLES / "runs").iterdir()]
    return [e for rid in sorted(runs) for e in store.run(rid, exact=True).iter_events()]


def _columns(event: al.Event) -> dict[str, Any]:
    return {name: getattr(event, name) for name in ev.USAGE_FIELDS}


# --- every recorded event fits its body -------------------------------------------------------


def test_every_v1_sample_event_fits_its_body_and_round_trips() -> None:
    events = _v1_events()
    seen = set()
    for e in events:
        cls = ev.body_class(e.type)
        assert cls is not None, e.type  # the sample runs use standard types only
        body = cls.from_payload(e.payload, columns=_columns(e))  # checked
        assert body.to_payload() == ev.lift(e.type, e.payload), (e.type, e.seq)
        for name, value in body.columns().items():
            assert getattr(e, name) == value, (e.type, e.seq, name)
        assert cls.of(e) == body
        seen.add(e.type)
    # the fixture covers most of the vocabulary, so this test means something
    assert len(seen) >= 20, sorted(seen)


def test_standard_types_are_the_registry() -> None:
    # In a fresh process: a doctest or a test of this one may have registered a type of its own
    # (the ``optional`` doctest registers ``doc.example``), whichever order the suite runs in.
    code = "import agentlog.events as ev; print(sorted(set(ev.registry()) ^ ev.STANDARD_TYPES))"
    fresh = subprocess.run([sys.executable, "-c", code],
                           capture_output=True, text=True, check=True)
    assert fresh.stdout.strip() == "[]", f"registered but not standard, or standard but not registered: {fresh.stdout}"
    assert ev.STANDARD_TYPES <= set(ev.registry())
    for name, cls in ev.registry().items():
        assert cls.TYPE == name
        assert ev.body_class(name) is cls
    assert ev.body_class("my.own.type") is None
    assert ev.body_of(al.Event(seq=0, type="my.own.type")) is None


# --- checks when built ------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, field, expected", [
    ({"key": "k", "name": 7, "args": {}}, "name", "expected str"),
    ({"key": "k", "name": "t", "args": [1]}, "args", "expected an object"),
    ({"key": "k", "name": "t", "args": {1: 2}}, "args.1", "expected string keys"),
    ({"key": None, "name": "t", "args": {}}, "key", "expected str"),
])
def test_a_wrong_field_names_the_type_and_the_field(kwargs: dict[str, Any], field: str,
                                                    expected: str) -> None:
    with pytest.raises(EventSchemaError) as info:
        ev.ToolCall(**kwargs)
    assert info.value.type == "tool.call"
    assert info.value.field == field
    assert expected in str(info.value)


def test_a_missing_field_is_named() -> None:
    with pytest.raises(EventSchemaError, match=r"tool\.call name: missing; expected str"):
        ev.ToolCall.from_payload({"key": "k", "args": {}})


def test_booleans_are_not_numbers_and_numbers_are_finite() -> None:
    with pytest.raises(EventSchemaError, match="parent_seq"):
        ev.ForkStarted(parent_run="p", parent_seq=True, parent_hash="0" * 64, edits=[])
    with pytest.raises(EventSchemaError, match="finite"):
        ev.TimeNow(value=float("nan"))
    assert ev.TimeNow(value=3).value == 3  # an int is a number


def test_literals_are_checked() -> None:
    with pytest.raises(EventSchemaError, match="cost_source"):
        ev.LLMResponse(key="k", model="m", message={}, cost_source="guessed")  # type: ignore[arg-type]


def test_unknown_keys_are_refused_for_closed_types_and_kept_for_open_ones() -> None:
    with pytest.raises(EventSchemaError, match="one of the fields"):
        ev.StatePatch.from_payload({"ops": [], "opz": []})
    note = ev.Note.from_payload({"text": "hi", "level": 2})
    assert note.extra == {"text": "hi", "level": 2}
    assert note.to_payload() == {"text": "hi", "level": 2}
    asked = ev.ApprovalRequested(action={"tool": "refund"}, reason="big", extra={"reasoning": "r"})
    assert asked.to_payload() == {"action": {"tool": "refund"}, "reason": "big", "reasoning": "r"}


def test_reading_back_keeps_unknown_keys_without_checking() -> None:
    e = al.Event(seq=3, type="state.patch", payload={"ops": [], "later_field": 1})
    body = ev.StatePatch.of(e)
    assert body.extra == {"later_field": 1}
    assert body.to_payload() == e.payload


def test_an_imported_payload_is_checked_field_by_field_and_keeps_its_extra_keys() -> None:
    plain = {"key": "k", "name": "lookup", "result": {"rows": 2}}
    assert ev.check_payload("tool.result", plain, strict=False) == ev.ToolResult.from_payload(plain, check=False)
    extra = {**plain, "source_note": "from drangue"}
    body = ev.check_payload("tool.result", extra, strict=False)
    assert body is not None and body.extra == {"source_note": "from drangue"} and body.to_payload() == extra
    with pytest.raises(EventSchemaError, match="one of the fields"):
        ev.check_payload("tool.result", extra, strict=True)
    for payload in ({**plain, "name": 7}, {**plain, "name": 7, "source_note": "x"}):
        with pytest.raises(EventSchemaError, match="tool.result name: 7 .int.; expected str"):
            ev.check_payload("tool.result", payload, strict=False)


def test_of_refuses_another_type() -> None:
    with pytest.raises(EventSchemaError, match="an event of type tool.call"):
        ev.ToolCall.of(al.Event(seq=0, type="note"))


def test_optional_fields_stay_out_of_the_payload_at_their_default() -> None:
    result = ev.ToolResult(key="k", name="t", result={"ok": True})
    assert result.to_payload() == {"key": "k", "name": "t", "result": {"ok": True}}
    edited = ev.ToolResult(key="k", name="t", result=1, edited=True, served_from_seq=4)
    assert edited.to_payload() == {"key": "k", "name": "t", "result": 1, "edited": True,
                                   "served_from_seq": 4}


def test_usage_is_a_checked_value() -> None:
    with pytest.raises(UsageError, match="cached_tokens"):
        ev.LLMResponse.from_payload({"key": "k", "model": "m", "message": {},
                                     "usage": {"input_tokens": 1, "cached_tokens": 5}})
    body = ev.LLMResponse.from_payload({"key": "k", "model": "m", "message": {},
                                        "usage": {"input_tokens": 9, "cached_tokens": 5}})
    assert body.usage == ev.Usage(input_tokens=9, cached_tokens=5)


# --- names generated from the classes ---------------------------------------------------------


def test_keys_are_the_field_names_and_a_typo_fails() -> None:
    assert ev.StatePatch.K.ops == "ops"
    assert ev.LLMResponse.K.cost_usd == "cost_usd"
    with pytest.raises(AttributeError, match="no field 'opz'"):
        ev.StatePatch.K.opz  # noqa: B018


def test_json_paths_are_checked_against_the_classes() -> None:
    assert ev.json_path(ev.LLMResponse, "usage", "reasoning_tokens") == "$.usage.reasoning_tokens"
    assert ev.json_path(ev.ToolResult, "error") == "$.error"
    with pytest.raises(AttributeError):
        ev.json_path(ev.LLMResponse, "usage", "cost_usd")  # not a payload field since version 2
    with pytest.raises(AttributeError):
        ev.json_path(ev.LLMResponse, "duration_ms")  # a column, not a payload field


# --- versions ---------------------------------------------------------------------------------


def test_a_v1_response_is_lifted_without_its_misleading_cost() -> None:
    v1 = {"key": "k", "model": "m", "message": {"role": "assistant", "content": "x"},
          "usage": {"input_tokens": 3, "output_tokens": 1, "cached_tokens": 0,
                    "cache_write_tokens": 0, "reasoning_tokens": 0, "cost_usd": None},
          "cost_source": "computed", "cache_hit": False, "finish_reason": "stop", "id": "r1"}
    lifted = ev.lift("llm.response", v1)
    assert lifted is not v1 and "cost_usd" in v1["usage"]  # the input is not changed
    assert "cost_usd" not in lifted["usage"]
    assert lifted["$v"] == ev.LLMResponse.VERSION == 3
    assert ev.lift("llm.response", lifted) is lifted  # current: the same object


@pytest.mark.parametrize("streamed", [True, False])
def test_a_v2_response_says_streamed_instead_of_naming_the_stream_blob(streamed: bool) -> None:
    """Version 2 kept a streamed answer's raw stream as a blob (the http.response's body);
    version 3 says ``streamed`` and the raw stream is that body."""
    v2 = {"$v": 2, "key": "k", "model": "m", "message": {"role": "assistant", "content": "x"},
          "cost_source": "computed", "cache_hit": False}
    if streamed:
        v2["stream"] = {"$blob": "sha256:" + "a" * 64, "size": 9, "media_type": "text/event-stream"}
    lifted = ev.lift("llm.response", v2)
    assert "stream" not in lifted and lifted["$v"] == 3
    body = ev.LLMResponse.from_payload(v2, check=False)
    assert body.streamed is streamed and body.message == v2["message"]


def test_a_newer_payload_is_refused_by_name() -> None:
    with pytest.raises(EventVersionError, match=r"llm\.response \$v: 4 \(int\); expected version 3 "
                                                r"or older; upgrade agentlog"):
        ev.lift("llm.response", {"$v": 4})
    with pytest.raises(EventSchemaError, match="a version number"):
        ev.lift("llm.response", {"$v": "2"})


# --- the writer checks standard events and takes bodies -----------------------------------------


def test_the_writer_refuses_a_bad_standard_payload_and_writes_nothing(tmp_path: Path) -> None:
    store = al.Store(tmp_path)
    with store.create_run(run_id="r", durability="none") as w:
        w.emit("note", {"anything": 1})
        with pytest.raises(EventSchemaError) as info:
            w.emit("tool.call", {"key": "k", "name": "t", "args": "not a mapping"})
        assert (info.value.run_id, info.value.seq) == ("r", 1)
        assert "run r seq 1: tool.call args" in str(info.value)
        w.emit("my.type", {"args": "anything goes"})  # not a standard type
    assert [e.type for e in store.run("r").iter_events()] == ["note", "my.type"]


def test_a_body_gives_the_payload_and_the_columns(tmp_path: Path) -> None:
    body = ev.LLMResponse(key="k", model="m", message={"role": "assistant", "content": "hi"},
                          usage=ev.Usage(input_tokens=10, output_tokens=2, cached_tokens=4),
                          cost_usd=0.25, cost_source="computed", duration_ms=12.5)
    with al.Store(tmp_path).create_run(run_id="r", durability="none") as w:
        stored = w.emit(body, caused_by=None)
        with pytest.raises(TypeError, match="carries its payload"):
            w.emit(body, cost_usd=1.0)
    assert (stored.model, stored.input_tokens, stored.output_tokens, stored.cached_tokens,
            stored.cost_usd, stored.duration_ms) == ("m", 10, 2, 4, 0.25, 12.5)
    back = al.Store(tmp_path).run("r").event(0)
    assert ev.LLMResponse.of(back) == body


def test_a_newer_payload_in_a_log_is_refused_naming_run_and_seq(tmp_path: Path) -> None:
    with al.Store(tmp_path).create_run(run_id="r", durability="none") as w:
        w.emit("my.type", {})
    # A later agentlog wrote version 4; this one cannot know its shape. Forge it as an import would.
    with (al.Store(tmp_path).create_run(run_id="future", durability="none") as w,
          pytest.raises(EventVersionError, match="run future seq 0")):
        w.emit("llm.response", {"$v": 4, "key": "k"})


# --- property: any body built from valid values round-trips -------------------------------------

_text = st.text(max_size=20)
_json = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | _text,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                     max_leaves=10)
_usage = st.builds(lambda i, o, c, r: ev.Usage(input_tokens=i + c, output_tokens=o + r, cached_tokens=c,
                                               reasoning_tokens=r),
                   st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
_bodies = st.one_of(
    st.builds(ev.ToolCall, key=_text, name=_text, args=st.dictionaries(_text, _json, max_size=3),
              idempotency_key=st.none() | _text),
    st.builds(ev.ToolResult, key=_text, name=_text, result=_json, served_from_seq=st.none() | st.integers(0, 99)),
    st.builds(ev.LLMResponse, key=_text, model=st.none() | _text,
              message=st.fixed_dictionaries({"role": st.just("assistant"), "content": st.none() | _text}),
              usage=_usage, cost_source=st.sampled_from(["provider", "computed", "unknown", "cache"]),
              cost_usd=st.none() | st.floats(0, 10, allow_nan=False), cache_hit=st.booleans()),
    st.builds(ev.SpanStarted, name=_text, kind=_text, parent=st.none() | _text,
              attributes=st.none() | st.dictionaries(_text, _json, max_size=2)),
    st.builds(ev.StatePatch, ops=st.lists(st.fixed_dictionaries(
        {"op": st.just("add"), "path": _text.map(lambda t: "/" + t), "value": _json}), max_size=3)),
)


@given(_bodies)
def test_bodies_round_trip_through_their_json_form(body: ev.Body) -> None:
    again = type(body).from_payload(body.to_payload(), columns=body.columns())
    assert again == body
