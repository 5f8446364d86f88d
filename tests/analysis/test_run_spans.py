"""run.spans(): the span tree, checked against a run with scripted times, and on recorded runs."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

MS = 1000.0


def by_id(run: Any) -> dict[str, dict[str, Any]]:
    return {r["span_id"]: r for r in run.spans().to_dict(orient="records")}


def test_spans_by_hand(timed: Any) -> None:
    s = by_id(timed)
    assert list(timed.spans()["span_id"]) == ["A", "B", "C", "D", "E", "F"]  # start order
    assert {k: (v["parent"], v["depth"]) for k, v in s.items()} == {
        "A": (None, 0), "B": ("A", 1), "C": ("A", 1), "D": ("A", 1), "E": ("D", 2),
        "F": ("nope", 0)}  # an unknown parent is recorded, but the span is a root
    assert {k: v["duration_ms"] for k, v in s.items()} == {
        "A": 10 * MS, "B": 3 * MS, "C": 3 * MS, "D": 6 * MS, "E": 1.5 * MS, "F": 0.5 * MS}
    # A's children cover [1,6] (B and C overlap over [3,4]) and [7,10] (D, cut at A's end): 8 s
    assert s["A"]["self_ms"] == 2 * MS
    assert s["B"]["self_ms"] == 3 * MS and s["C"]["self_ms"] == 3 * MS
    assert s["D"]["self_ms"] == 6 * MS - 1.5 * MS


def test_span_status_error_and_open(timed: Any) -> None:
    s = by_id(timed)
    assert {k: v["status"] for k, v in s.items()} == {
        "A": "ok", "B": "ok", "C": "error", "D": "open", "E": "ok", "F": "ok"}
    assert s["C"]["error"] == "RuntimeError: boom" and s["A"]["error"] is None
    # an open span ends with the run's last event
    assert s["D"]["end_seq"] is None and s["D"]["end"] == timed.events["ts"].max()
    assert (s["A"]["start_seq"], s["A"]["end_seq"]) == (0, 10)


def test_span_usage_and_rollups(timed: Any) -> None:
    s = by_id(timed)
    assert (s["C"]["input_tokens"], s["C"]["output_tokens"], s["C"]["cost_usd"], s["C"]["model"]) == (10, 2, 0.5, "m1")
    # E's only call has no price: its cost is unknown, never 0
    assert (s["E"]["cost_usd"], s["E"]["cost_unknown_calls"], s["E"]["model"]) == (None, 1, "m2")
    assert s["A"]["input_tokens"] == 0 and s["A"]["model"] is None
    assert (s["A"]["total_input_tokens"], s["A"]["total_output_tokens"]) == (15, 3)
    assert (s["A"]["total_cost_usd"], s["A"]["total_cost_unknown_calls"]) == (0.5, 1)
    assert (s["D"]["total_input_tokens"], s["D"]["total_cost_unknown_calls"]) == (5, 1)
    assert {k: v["events"] for k, v in s.items()} == {"A": 2, "B": 2, "C": 3, "D": 1, "E": 3, "F": 2}


def check_tree(spans: pd.DataFrame) -> None:
    """Every parent exists, depth = parent's + 1, children lie within their parent's time,
    and each roll-up is own + the sum of the children's roll-ups."""
    rows = spans.set_index("span_id")
    for span_id, row in rows.iterrows():
        if row["depth"] > 0:
            parent = rows.loc[row["parent"]]
            assert row["depth"] == parent["depth"] + 1
            assert parent["start"] <= row["start"] and row["end"] <= parent["end"]
        else:
            assert pd.isna(row["parent"])
        kids = rows[(rows["parent"] == span_id).fillna(False)]
        for col in ("input_tokens", "output_tokens", "cached_tokens", "cost_unknown_calls"):
            assert row[f"total_{col}"] == row[col] + kids[f"total_{col}"].sum()
        known = [v for v in (row["cost_usd"], *kids["total_cost_usd"]) if not pd.isna(v)]
        if known or not row["total_cost_unknown_calls"]:
            assert row["total_cost_usd"] == pytest.approx(sum(known))
        else:  # every cost below it is unknown: so is the total
            assert pd.isna(row["total_cost_usd"])
        if pd.isna(row["cost_usd"]):
            assert row["cost_unknown_calls"] > 0
        assert row["self_ms"] <= row["duration_ms"] and row["self_ms"] >= 0


def test_recorded_spans_nest(agent_run: Any) -> None:
    spans = agent_run.spans()
    check_tree(spans)
    assert list(spans["name"]) == ["triage", "get_metric", "think", "gpt-4o-mini", "flaky",
                                   "house-model-x", "restart"]
    assert list(spans["kind"]) == ["agent", "tool", "chain", "llm", "tool", "llm", "tool"]
    assert list(spans["depth"]) == [0, 1, 1, 2, 1, 1, 1]
    flaky = spans[spans["name"] == "flaky"].iloc[0]
    assert flaky["status"] == "error" and "TimeoutError" in flaky["error"]
    root = spans.iloc[0]
    ev = agent_run.events
    assert root["total_input_tokens"] == ev["input_tokens"].sum()
    assert root["total_cost_usd"] == pytest.approx(ev["cost_usd"].sum())
    assert root["total_cost_unknown_calls"] == 1


def test_fork_spans_nest_across_the_cut(agent_fork: Any) -> None:
    spans = agent_fork.spans()
    check_tree(spans)  # the root span started in the parent's prefix and ended in the fork
    assert spans.iloc[0]["name"] == "triage" and spans.iloc[0]["status"] == "ok"
    assert spans.iloc[0]["start_seq"] <= agent_fork.fork_seq < spans.iloc[0]["end_seq"]


def test_spans_of_a_run_with_none(store: Any) -> None:
    with store.create_run(run_id="plain") as w:
        w.emit("note", {"text": "hi"})
    spans = store.run("plain").spans()
    assert len(spans) == 0 and list(spans.columns)[:3] == ["span_id", "parent", "name"]
