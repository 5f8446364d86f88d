"""The cost dashboard: figures add up to run.cost() / store.cost(), unknown costs are never
drawn as $0, long tables fold into "other", tables are escaped HTML."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from _wf_synth import T0, StepClock, span_run

import agentlog as al
from agentlog.numbers import USD_PATTERN, fmt_usd, usd_sum
from agentlog.widgets.costdash import TOP, CostDashboard, cost_figures, cost_tables

SAMPLE_RUNS = ("sre-0001", "sre-0001-calm", "sre-0002", "refunds-0001", "refunds-0001-approve",
               "refunds-0002-tight", "diligence-0001", "jobhunt-0001")


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return al.examples.sample_store(copy_to=tmp_path_factory.mktemp("cost") / "store")


@pytest.fixture
def store(tmp_path: Any) -> Any:
    return al.Store(tmp_path / "store")


def role(fig: Any, name: str) -> Any:
    (trace,) = [t for t in fig.data if (t.meta or {}).get("role") == name]
    return trace


def drawn_tokens(fig: Any, kind: str) -> int:
    """Tokens of a kind drawn in a figure (a kind no group has gets no trace)."""
    traces = [t for t in fig.data if (t.meta or {}).get("role") == f"{kind}_tokens"]
    return int(np.sum(traces[0].x)) if traces else 0


def drawn_cost(fig: Any) -> float:
    return float(sum(x for x in role(fig, "cost").x if x is not None))


def mixed_run(store: Any) -> Any:
    """Two model calls of one model (one priced, one not) and one call of an unpriced model."""
    clock = StepClock()
    w = store.create_run(run_id="mixed", clock=clock, durability="none")
    for k, (model, cost) in enumerate([("m-known", 0.25), ("m-known", None), ("m-unknown", None)]):
        clock.advance(1)
        w.emit("llm.response", {"key": f"k{k}", "model": model}, span_id=f"s{k}", actor="bot",
               model=model, input_tokens=100, output_tokens=10, cost_usd=cost)
    w.close()
    return store.run("mixed")


@pytest.mark.parametrize("run_id", SAMPLE_RUNS)
def test_run_figures_add_up_to_run_cost(samples: Any, run_id: str) -> None:
    run = samples.run(run_id)
    own = run.events if run.fork_seq is None else run.events[run.events["seq"] > run.fork_seq]
    paid = float(usd_sum(own["cost_usd"]))  # what the run's own events cost
    figs = cost_figures(run)
    assert set(figs) == {"by_model", "by_span", "by_actor", "over_time"}
    for name in ("by_model", "by_span", "by_actor"):
        fig = figs[name]
        assert drawn_cost(fig) == pytest.approx(paid, rel=1e-12)
        assert fig.layout.meta["agentlog"]["total_cost_usd"] == paid  # summed exactly
        for kind in ("input", "output", "cached"):
            assert drawn_tokens(fig, kind) == int(own[f"{kind}_tokens"].fillna(0).sum())
    over = figs["over_time"]
    assert role(over, "cost").y[-1] == pytest.approx(paid, rel=1e-12)
    tokens = int(own["input_tokens"].fillna(0).sum() + own["output_tokens"].fillna(0).sum())
    assert role(over, "tokens").y[-1] == tokens


def test_store_figures_add_up_to_store_cost(samples: Any) -> None:
    total = float(samples.cost()["cost_usd"].sum())
    figs = cost_figures(samples)
    assert set(figs) == {"by_run", "by_day", "by_model"}
    for fig in figs.values():
        assert drawn_cost(fig) == pytest.approx(total, rel=1e-12)
        assert fig.layout.meta["agentlog"]["total_cost_usd"] == pytest.approx(total, rel=1e-12)
    runs = set(role(figs["by_run"], "cost").y)
    assert runs == set(samples.runs()["run_id"])


def test_unknown_cost_is_not_drawn_as_zero(store: Any) -> None:
    run = span_run(store, 31, run_id="unpriced", model="house-model-x", priced=False)
    figs = cost_figures(run)
    fig = figs["by_model"]
    bars = dict(zip(role(fig, "cost").y, role(fig, "cost").x, strict=True))
    assert bars["house-model-x"] is None  # no bar, not a bar of $0
    notes = [a.text for a in fig.layout.annotations if a.name == "unknown-cost"]
    assert notes == ["cost unknown (10 calls)"]
    assert "10 calls of unknown cost" in fig.layout.title.subtitle.text
    assert fig.layout.title.subtitle.text.startswith("paid (known) $0")
    over = figs["over_time"]
    assert not [t for t in over.data if (t.meta or {}).get("role") == "cost"]  # no $0 line
    assert len(role(over, "unknown").x) == 10
    assert "unknown" in over.layout.title.subtitle.text


def test_partly_unknown_cost_is_marked_beside_the_bar(store: Any) -> None:
    run = mixed_run(store)
    fig = cost_figures(run)["by_model"]
    trace = role(fig, "cost")
    by_label = {y: (x, text) for y, x, text in zip(trace.y, trace.x, trace.text, strict=True)}
    assert by_label["m-known"] == (0.25, "$0.25 + 1 unknown")
    assert by_label["m-unknown"] == (None, "")
    dash = CostDashboard(run)
    assert "unknown (1 call)" in dash.table_html("by_model")
    assert "$0.25 + 1 unknown" in dash.table_html("by_model")
    assert "paid</dt><dd>$0.25 + 2 unknown" in dash.summary_html()
    rows = dash.table_html("over_time")
    assert rows.count(">unknown<") == 2


def test_many_groups_fold_into_other_and_still_add_up(store: Any) -> None:
    for k in range(TOP + 5):
        span_run(store, 4, run_id=f"r{k:02d}", seed=k)
    fig = cost_figures(store)["by_run"]
    labels = list(role(fig, "cost").y)
    assert len(labels) == TOP
    assert labels[-1] == "… 6 other runs"
    assert drawn_cost(fig) == pytest.approx(float(usd_sum(store.cost()["cost_usd"])), rel=1e-12)
    assert len(CostDashboard(store).tables["by_run"]) == TOP + 5


def test_tables_are_what_the_run_paid_in_the_charts_order(samples: Any) -> None:
    from agentlog.analysis.cost import cost
    run = samples.run("refunds-0001-approve")  # a fork: the tables count its own events
    tables = cost_tables(run)
    for name, by in (("by_model", "model"), ("by_span", "span"), ("by_actor", "actor")):
        expected = cost(run, (by,), own=True)
        got = tables[name]
        assert len(got) == len(expected) and float(usd_sum(got["cost_usd"])) == float(usd_sum(expected["cost_usd"]))
        paid = got["cost_usd"].to_numpy(float)
        keyed = got[got.columns[0]].notna().to_numpy()
        assert list(keyed) == sorted(keyed, reverse=True)  # rows without a key (tool calls) last
        assert list(paid[keyed]) == sorted(paid[keyed], reverse=True)  # most paid first
    fig = cost_figures(run)["by_model"]
    drawn = list(role(fig, "cost").y)
    assert "–" not in drawn and "(no model)" not in drawn  # tool calls are not a model
    html_rows = CostDashboard(run).table_html("by_model")
    assert "(tool calls)" in html_rows and ">–<" not in html_rows
    positions = [html_rows.index(f"<td>{label}</td>") for label in drawn]
    assert positions == sorted(positions)  # the chart lists the table's rows in the table's order
    store_tables = CostDashboard(samples).tables
    # DuckDB sums floats in no fixed order: equal up to rounding
    by_day = samples.cost(by="day")
    assert float(usd_sum(store_tables["by_day"]["cost_usd"])) == float(usd_sum(by_day["cost_usd"]))


def test_summary_says_paid_and_a_forks_total(samples: Any) -> None:
    fork = samples.run("sre-0001-calm")
    html_text = CostDashboard(fork).summary_html()
    own = fork.events[fork.events["seq"] > fork.fork_seq]
    assert f"<dt>paid</dt><dd>{fmt_usd(usd_sum(own['cost_usd']))}</dd>" in html_text
    assert f"<dt>total incl. inherited prefix</dt><dd>{fmt_usd(usd_sum(fork.events['cost_usd']))}</dd>" in html_text
    axis = cost_figures(fork)["by_model"].layout.xaxis
    assert all(re.fullmatch(USD_PATTERN, t) for t in axis.ticktext)  # axes in the one format


def test_html_escapes_what_the_run_recorded(store: Any) -> None:
    clock = StepClock()
    w = store.create_run(run_id="xss", clock=clock, durability="none")
    evil = "<script>alert(1)</script>"
    w.emit("span.started", {"name": evil, "kind": "llm"}, span_id="s")
    w.emit("llm.response", {"key": "k", "model": evil}, span_id="s", actor=evil, model=evil,
           input_tokens=5, output_tokens=1, cost_usd=0.5)
    w.emit("span.ended", {"name": evil, "status": "ok"}, span_id="s")
    w.close()
    dash = CostDashboard(store.run("xss"))
    page = dash.html() + dash._repr_html_()
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for fig in dash.figures.values():
        assert "<script>alert" not in fig.to_json()


def test_widget_has_one_tab_per_table(samples: Any) -> None:
    import ipywidgets as widgets
    dash = samples.run("sre-0001").cost_dashboard()
    box = dash.widget()
    head, tab = box.children
    assert isinstance(tab, widgets.Tab)
    assert len(tab.children) == len(dash.tables) == 4
    assert tab.titles == ("by model", "by span", "by actor", "over time")
    assert "CostDashboard" in head.value
    store_dash = samples.cost_dashboard()
    assert set(store_dash.figures) == {"by_run", "by_day", "by_model"}


def test_a_run_without_usage(store: Any) -> None:
    w = store.create_run(run_id="quiet", durability="none", clock=lambda: T0)
    w.emit("note", {"text": "no calls"})
    w.close()
    dash = CostDashboard(store.run("quiet"))
    over = dash.figures["over_time"]
    assert [a.text for a in over.layout.annotations] == ["no usage"]
    assert math.isclose(dash.figures["by_model"].layout.meta["agentlog"]["total_cost_usd"], 0.0)
