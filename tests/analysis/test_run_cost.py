"""run.cost(by=...): every key adds up to the total; unknown costs are counted, never 0."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from agentlog.analysis.cost import RUN_COST_KEYS

VALUES = ["calls", "llm_calls", "tool_calls", "input_tokens", "output_tokens", "cached_tokens",
          "cost_usd", "cost_unknown_calls"]


def test_cost_by_model_by_hand(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    t = run.cost()
    assert list(t.columns) == ["model", *VALUES]
    rows = {r["model"]: r for r in t.to_dict(orient="records")}
    assert list(t["model"].fillna("(none)")) == ["gpt-4o-mini", "house-model-x", "(none)"]  # NA last
    assert rows["gpt-4o-mini"] | {"model": None} == {
        "model": None, "calls": 1, "llm_calls": 1, "tool_calls": 0, "input_tokens": 1200,
        "output_tokens": 50, "cached_tokens": 1000, "cost_usd": 0.00012, "cost_unknown_calls": 0}
    unknown = rows["house-model-x"]
    assert t["cost_usd"][1] is pd.NA and unknown["cost_unknown_calls"] == 1  # unknown, never 0
    assert rows[None]["tool_calls"] == 1 and rows[None]["input_tokens"] == 0


@pytest.mark.parametrize("by", [(), *[(k,) for k in RUN_COST_KEYS], ("model", "span"),
                                ("kind", "type", "day"), RUN_COST_KEYS])
def test_every_grouping_sums_to_the_total(agent_run: Any, by: tuple[str, ...]) -> None:
    total = agent_run.cost(by=())
    assert len(total) == 1
    t = agent_run.cost(by=by)
    assert list(t.columns) == [*(("span" if k == "span" else k) for k in by), *VALUES]
    sums = t.sum(numeric_only=True)  # the documented total row
    for col in VALUES:
        assert sums[col] == pytest.approx(total[col][0])
    ev = agent_run.events
    assert total["input_tokens"][0] == ev["input_tokens"].sum()
    assert total["cost_usd"][0] == pytest.approx(ev["cost_usd"].sum())
    assert total["cost_unknown_calls"][0] == 1 and total["llm_calls"][0] == 2 and total["tool_calls"][0] == 3


def test_cost_by_span_and_kind(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    t = run.cost(by=("kind", "span"))
    assert [tuple(r) for r in t[["kind", "span", "calls"]].itertuples(index=False)] == [
        ("llm", "gpt-4o-mini", 1), ("llm", "house-model-x", 1), ("tool", "search", 1)]
    days = run.cost(by="day")
    assert str(days["day"][0]) == "2026-12-02" and str(days["day"].dtype) == "date32[day][pyarrow]"


def test_cost_of_a_fork_own_or_whole(golden: tuple[Any, Any], agent_run: Any, agent_fork: Any) -> None:
    _, fork = golden
    assert fork.cost(by=())["cost_usd"][0] == 0.00012  # the run as read: the prefix included
    own = fork.cost(by=(), own=True)
    assert own["calls"][0] == 0 and own["cost_usd"][0] == 0.0
    forked = agent_fork.cost(by=(), own=True)
    fork_events = agent_fork.events
    mine = fork_events[fork_events["seq"] > agent_fork.fork_seq]
    assert forked["input_tokens"][0] == mine["input_tokens"].sum()


def test_served_calls_cost_zero(agent_run: Any, store: Any) -> None:
    from _analysis_runs import Tools, make_agent

    import agentlog as al
    from agentlog.testing.fakes import FakeLLM
    # an unchanged fork at the start: every call after the cut is served from the parent's log
    fork = al.fork(agent_run, at=0, program=make_agent(Tools(), FakeLLM.forbidden(), FakeLLM.forbidden()))
    calls = fork.llm_calls()
    assert list(calls["source"]) == ["log", "log"] and calls["cache_hit"].all()
    assert calls.iloc[0]["cost_usd"] == 0.0 and calls.iloc[0]["cost_source"] == "cache"
    cost = fork.cost(by="model")
    assert cost["cost_usd"].sum() == 0.0


def test_unknown_key_is_refused(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    with pytest.raises(ValueError, match=r"cannot group cost by 'run'; use any of: model, actor, span, kind, type, day"):
        run.cost(by="run")
    with pytest.raises(ValueError, match="names a key twice"):
        run.cost(by=("model", "model"))


def test_cost_of_an_empty_run(store: Any) -> None:
    w = store.create_run(run_id="empty")
    w.close()
    t = store.run("empty").cost(by=("model", "day"))
    assert len(t) == 0 and list(t.columns) == ["model", "day", *VALUES]
    assert pd.api.types.is_integer_dtype(t["calls"])


def test_a_run_whose_costs_are_all_unknown_shows_na_everywhere(store: Any) -> None:
    """No table turns an unknown cost into 0: the cost, the summary, the running totals, the
    spans and the store's rows all say <NA>, with the calls counted."""
    w = store.create_run(run_id="dark", durability="none")
    w.emit("span.started", {"name": "house-model-x", "kind": "llm", "parent": None}, span_id="s")
    for i in range(2):
        w.emit("llm.response", {"key": f"k{i}", "model": "house-model-x",
                                "message": {"role": "assistant", "content": "ok"},
                                "usage": {"input_tokens": 10, "output_tokens": 1}},
               span_id="s", model="house-model-x", input_tokens=10, output_tokens=1, cost_usd=None)
    w.emit("tool.result", {"key": "t", "name": "lookup", "result": 1}, span_id="s")
    w.emit("span.ended", {"name": "house-model-x", "status": "ok", "error": None}, span_id="s")
    w.close("finished")
    run = store.run("dark")
    total = run.cost(by=())
    assert total["cost_usd"][0] is pd.NA and total["cost_unknown_calls"][0] == 2
    assert total["input_tokens"][0] == 20 and total["tool_calls"][0] == 1
    by_type = run.cost(by="type").set_index("type")
    assert by_type.loc["llm.response", "cost_usd"] is pd.NA
    assert by_type.loc["tool.result", "cost_usd"] == 0.0  # no model call, nothing unknown
    s = run.summary().iloc[0]
    assert s["cost_usd"] is pd.NA and s["own_cost_usd"] is pd.NA and s["cost_unknown_calls"] == 2
    assert s["own_cost_unknown_calls"] == 2
    over = run.tokens_over_time()
    assert over["cum_cost_usd"].isna().all() and list(over["cum_cost_unknown_calls"]) == [1, 2, 2]
    span = run.spans().iloc[0]
    assert span["cost_usd"] is pd.NA and span["total_cost_usd"] is pd.NA
    row = store.runs().set_index("run_id").loc["dark"]
    assert row["cost_usd"] is pd.NA and row["own_cost_usd"] is pd.NA
    assert store.cost(by="run")["cost_usd"][0] is pd.NA
