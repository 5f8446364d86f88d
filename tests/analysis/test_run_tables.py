"""Per-run tables: events, expanded payloads, model and tool calls, running totals, summary."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import agentlog as al


def test_events_is_the_table(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    ev = run.events
    table = run.table()
    assert list(ev["seq"]) == list(range(len(run)))
    assert list(ev["type"]) == table.column("type").cast(pa.string()).to_pylist()
    assert list(ev["hash"]) == table.column("hash").to_pylist()
    assert json.loads(ev.loc[8, "payload"])["message"]["content"] == "restart the api"
    assert ev.loc[8, "ts"] == pd.Timestamp(run.event(8).time)
    assert ev["input_tokens"].sum() == 1300 and ev["cost_usd"].notna().sum() == 1


def test_events_of_a_fork_include_the_parent_prefix(golden: tuple[Any, Any]) -> None:
    run, fork = golden
    ev = fork.events
    assert len(ev) == len(fork) == 16
    assert list(ev["hash"][:10]) == list(run.events["hash"][:10])
    assert ev.loc[10, "type"] == "fork.started"


def test_returned_frames_are_copies(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    first = run.spans()
    first.loc[0, "name"] = "changed"
    first["extra"] = 1
    again = run.spans()
    assert again.loc[0, "name"] == "triage" and "extra" not in again


def test_events_expanded(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    tools = run.events_expanded(["tool.call", "tool.result"])
    assert list(tools["seq"]) == [3, 4]
    assert tools.loc[0, "args.q"] == "cpu" and tools.loc[1, "result"] == "cpu=0.9"
    assert tools.loc[0, "name"] == "search" and str(tools["name"].dtype) == "string[pyarrow]"
    llm = run.events_expanded("llm.response")
    assert list(llm["model"]) == ["gpt-4o-mini", "house-model-x"]
    assert list(llm["usage.input_tokens"]) == [1200, 100]
    assert len(run.events_expanded()) == len(run)
    assert len(run.events_expanded("no.such.type")) == 0


def test_llm_calls(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    calls = run.llm_calls()
    assert list(calls["seq"]) == [8, 14] and list(calls["request_seq"]) == [7, 13]
    first = calls.iloc[0]
    assert (first["model"], first["input_tokens"], first["output_tokens"], first["cached_tokens"]) == (
        "gpt-4o-mini", 1200, 50, 1000)
    assert first["cost_usd"] == 0.00012 and first["cost_source"] == "computed"
    assert first["latency_ms"] == 500.0  # the scripted clock steps 0.5 s per event
    assert first["duration_ms"] == 850.0 and not first["cache_hit"] and first["source"] == "live"
    assert first["prompt_preview"] == "cpu=0.9, what now?" and first["response_preview"] == "restart the api"
    assert first["span_id"] == "s6" and first["finish_reason"] == "stop"
    assert calls.iloc[1]["cost_usd"] is pd.NA and calls.iloc[1]["cost_source"] == "unknown"


def test_llm_calls_of_a_recorded_run(agent_run: Any, agent_fork: Any) -> None:
    calls = agent_run.llm_calls()
    assert list(calls["model"]) == ["gpt-4o-mini", "house-model-x"]
    assert calls.iloc[0]["prompt_preview"] == "cpu=0.9"  # the last user message
    assert calls.iloc[0]["cached_tokens"] == 5 and calls.iloc[1]["cost_usd"] is pd.NA
    forked = agent_fork.llm_calls()
    # after the cut: the first model call is live again (its prompt changed), the second too
    assert list(forked["source"]) == ["live", "live"]
    assert forked.iloc[0]["prompt_preview"] == "cpu=0.2"


def test_previews_are_cut_and_folded(store: Any) -> None:
    long = "word " * 60 + "\n\n  end"
    def program(rec: Any) -> None:
        rec.llm({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": long}]},
                call=lambda req: {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
        rec.llm({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "look at"}, {"type": "image_url", "image_url": {"url": "x"}}]}]},
            call=lambda req: {"content": None, "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]})
    calls = al.record(program, store=store).llm_calls()
    first, second = calls.iloc[0], calls.iloc[1]
    assert len(first["prompt_preview"]) == 80 and first["prompt_preview"].endswith("…")
    assert "\n" not in first["prompt_preview"] and "  " not in first["prompt_preview"]
    assert second["prompt_preview"] == "look at"
    assert second["response_preview"] == "tool calls: search"


def test_failed_llm_call_is_a_row(store: Any) -> None:
    def program(rec: Any) -> None:
        try:
            rec.llm({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
                    call=lambda req: (_ for _ in ()).throw(ConnectionError("no route")))
        except al.LLMCallError:
            pass
    calls = al.record(program, store=store).llm_calls()
    assert len(calls) == 1 and "ConnectionError: no route" in calls.iloc[0]["error"]
    assert calls.iloc[0]["cost_source"] is pd.NA and calls.iloc[0]["response_preview"] is pd.NA


def test_tool_calls(golden: tuple[Any, Any], agent_run: Any, agent_fork: Any) -> None:
    run, _ = golden
    calls = run.tool_calls()
    assert calls.to_dict(orient="records")[0] | {"ts": None} == {
        "seq": 4, "call_seq": 3, "ts": None, "span_id": "s2", "actor": None, "name": "search",
        "args_preview": '{"q":"cpu"}', "result_preview": "cpu=0.9", "error": None,
        "duration_ms": 12.5, "latency_ms": 500.0, "source": "live", "served_from_seq": None}
    recorded = agent_run.tool_calls()
    assert list(recorded["name"]) == ["get_metric", "flaky", "restart"]
    assert "TimeoutError: upstream timed out" in recorded.iloc[1]["error"]
    assert recorded.iloc[1]["result_preview"] is pd.NA
    forked = agent_fork.tool_calls()
    assert list(forked["name"]) == ["get_metric", "flaky"]  # no restart after the edit
    assert list(forked["source"]) == ["edit", "log"]  # the edited result; flaky's served
    assert forked.iloc[0]["result_preview"] == "0.2"


def test_tokens_over_time(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    t = run.tokens_over_time()
    assert list(t["seq"]) == [4, 8, 14]
    assert list(t["cum_input_tokens"]) == [0, 1200, 1300]
    assert list(t["cum_output_tokens"]) == [0, 50, 60]
    assert list(t["cum_cost_usd"]) == [0.0, 0.00012, 0.00012]
    assert list(t["cum_cost_unknown_calls"]) == [0, 0, 1]
    assert t["ts"].is_monotonic_increasing


def test_summary(golden: tuple[Any, Any]) -> None:
    run, fork = golden
    s = run.summary().iloc[0].to_dict()
    assert s["run_id"] == "g1" and s["name"] == "triage" and s["status"] == "finished"
    assert (s["events"], s["own_events"], s["spans"], s["llm_calls"], s["tool_calls"]) == (18, 18, 4, 2, 1)
    assert (s["input_tokens"], s["output_tokens"], s["cached_tokens"]) == (1300, 60, 1000)
    assert s["cost_usd"] == 0.00012 and s["cost_unknown_calls"] == 1
    assert s["duration_ms"] == 17 * 500.0 and s["tags"] == '{"team":"sre"}'
    assert s["verified"] == "not checked" and pd.isna(s["parent"]) and pd.isna(s["fork_seq"])
    f = fork.summary().iloc[0].to_dict()
    assert (f["parent"], f["fork_seq"], f["events"], f["own_events"]) == ("g1", 9, 16, 6)
    assert f["cost_usd"] == 0.00012 and f["own_cost_usd"] == 0.0  # the parent paid for the prefix


def test_summary_verify(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    assert run.summary()["verified"][0] == "not checked"
    assert run.summary(verify=True)["verified"][0] == "ok"
    assert run.summary()["verified"][0] == "ok"  # the last verification, while it still holds


def test_totals_equal_the_sums_of_the_usage_columns(agent_run: Any, agent_fork: Any) -> None:
    for run in (agent_run, agent_fork):
        ev = run.events
        s = run.summary().iloc[0]
        for col in ("input_tokens", "output_tokens", "cached_tokens"):
            assert s[col] == ev[col].sum() == run.llm_calls()[col].sum()
            assert s[col] == run.tokens_over_time()[f"cum_{col}"].iloc[-1]
        assert s["cost_usd"] == pytest.approx(ev["cost_usd"].sum())
        state = run.state_at(len(run) - 1)["usage"]
        assert (state["input_tokens"], state["llm_calls"], state["tool_calls"]) == (
            s["input_tokens"], s["llm_calls"], s["tool_calls"])
        assert state["cost_usd"] == pytest.approx(s["cost_usd"])


def test_recompute_cost(golden: tuple[Any, Any], agent_run: Any) -> None:
    run, _ = golden
    t = run.recompute_cost(prices={"gpt-4o-mini": {"input": 1.0, "output": 2.0, "cached_input": 0.5}})
    first = t.iloc[0]
    # 200 uncached at $1/M + 1000 cached at $0.5/M + 50 out at $2/M
    assert first["recomputed_usd"] == pytest.approx((200 * 1 + 1000 * 0.5 + 50 * 2) / 1e6)
    assert first["recomputed_source"] == "computed" and "override" in first["detail"]
    assert first["delta_usd"] == pytest.approx(first["recomputed_usd"] - 0.00012)
    second = t.iloc[1]
    assert second["recomputed_usd"] is pd.NA and second["recomputed_source"] == "unknown"
    again = run.recompute_cost().iloc[0]
    assert again["recomputed_source"] == "computed" and "genai-prices" in again["detail"]
    recorded = agent_run.recompute_cost()
    assert recorded.iloc[0]["recomputed_usd"] == pytest.approx(recorded.iloc[0]["cost_usd"])
    assert len(run.events) == 18  # the log is not touched


def test_a_fork_made_later_does_not_count_the_pause_as_its_duration(tmp_path: Any) -> None:
    now = [0.0]
    store = al.Store(tmp_path / "s")
    with store.create_run(run_id="p", clock=lambda: now[0], durability="none") as w:
        for t in (100.0, 101.0, 103.0, 110.0):               # the parent: 10 s in all
            now[0] = t
            w.emit("note", {})
    with store.create_run(run_id="f", fork_of=("p", 2), clock=lambda: now[0],
                          durability="none") as w:
        for t in (1e6, 1e6 + 2.0):                             # forked 11 days later, runs 2 s
            now[0] = t
            w.emit("note", {})
    fork = store.run("f")
    assert fork.summary()["duration_ms"].iloc[0] == (103.0 - 100.0 + 2.0) * 1000
    assert store.runs().set_index("run_id").loc["f", "duration_ms"] == 5000.0
    assert al.diff(store.run("p"), fork).usage.loc["duration_ms", "b"] == 5000.0
    assert store.run("p").summary()["duration_ms"].iloc[0] == 10000.0
