"""The span waterfall: one bar per span at the right times, errors marked, LLM labels, the
events panel, aggregation past ``max_bars``, empty runs, escaping."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from _wf_synth import T0, StepClock, span_run
from plotly.callbacks import Points

import agentlog as al
from agentlog.numbers import fmt_ms
from agentlog.widgets.timeline import MIN_BAR, Break, axis_position
from agentlog.widgets.waterfall import (
    CUSTOM,
    ERROR_COLOR,
    KIND_GROUPS,
    Waterfall,
    in_kernel,
    waterfall_figure,
)

SAMPLE_RUNS = ("sre-0001", "sre-0001-calm", "sre-0002", "refunds-0001", "refunds-0001-approve",
               "refunds-0002-tight", "diligence-0001", "jobhunt-0001")


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return al.examples.sample_store(copy_to=tmp_path_factory.mktemp("wf") / "store")


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return al.Store(tmp_path_factory.mktemp("wf-synth") / "store")


def span_bars(fig: go.Figure) -> pd.DataFrame:
    """Every individual span bar of the figure: span_id, trace name, start, end, text, line."""
    labels = {}
    for trace in fig.data:
        if (trace.meta or {}).get("role") == "labels":
            labels.update({float(y): t.strip() for y, t in zip(trace.y, trace.text, strict=True)})
    rows = []
    for trace in fig.data:
        if trace.type != "bar" or (trace.meta or {}).get("aggregated") or (trace.meta or {}).get("role"):
            continue
        widths = np.broadcast_to(np.asarray(trace.marker.line.width, dtype=float), (len(trace.x),))
        for k, custom in enumerate(trace.customdata):
            rows.append({"span_id": custom[0], "trace": trace.name, "start": trace.base[k],
                         "end": trace.base[k] + trace.x[k], "y": trace.y[k],
                         "text": labels.get(float(trace.y[k]), ""),
                         "line_width": widths[k], "custom": dict(zip(CUSTOM, custom, strict=True))})
    return pd.DataFrame(rows)


def min_width(fig: go.Figure) -> float:
    lo, hi = fig.layout.xaxis.range
    return MIN_BAR * (hi - lo)


def seconds(fig: go.Figure) -> float:
    return float(fig.layout.meta["agentlog"]["seconds_per_unit"])


def expected_times(run: Any, spans: pd.DataFrame, fig: go.Figure) -> pd.DataFrame:
    """Each span's start and end in the figure's unit: a fork's own times come back by the
    pause between its cut and its first own event."""
    ts = run.events["ts"]
    t0, scale = ts.min(), seconds(fig)

    breaks = [Break(*b) for b in fig.layout.meta["agentlog"]["breaks"]]

    def axis(times: pd.Series) -> pd.Series:
        if run.fork_seq is not None:
            cut, first = ts.iloc[run.fork_seq], ts.iloc[run.fork_seq + 1]
            times = times.where(times <= cut, times - (first - cut))
        return pd.Series(axis_position((times - t0).dt.total_seconds(), breaks) / scale, index=times.index)

    return pd.DataFrame({"span_id": spans["span_id"].astype(str),
                         "start": axis(spans["start"]), "end": axis(spans["end"]),
                         "group": spans["kind"].astype(str).map(KIND_GROUPS).fillna("other")})


@pytest.mark.parametrize("run_id", SAMPLE_RUNS)
def test_one_bar_per_span_at_its_times_in_its_kind(samples: Any, run_id: str) -> None:
    run = samples.run(run_id)
    spans = run.spans()
    fig = waterfall_figure(run)
    bars = span_bars(fig)
    assert len(bars) == len(spans) > 0
    assert bars["span_id"].is_unique
    meta = fig.layout.meta["agentlog"]
    assert (meta["spans"], meta["bars"], meta["aggregated"]) == (len(spans), len(spans), False)
    assert (meta["time_unit"], meta["seconds_per_unit"]) in {("s", 1.0), ("min", 60.0)}
    want = expected_times(run, spans, fig).set_index("span_id")
    got = bars.set_index("span_id").loc[want.index]
    np.testing.assert_allclose(got["start"], want["start"], atol=1e-6)
    np.testing.assert_allclose(got["end"], np.maximum(want["end"], want["start"] + min_width(fig)), atol=1e-6)
    assert (got["trace"] == want["group"]).all()
    # one row per span, in start order: row k is the k-th span
    assert list(bars.sort_values("y")["span_id"]) == list(spans["span_id"])


def test_rows_are_indented_by_depth(samples: Any) -> None:
    run = samples.run("jobhunt-0001")
    fig = waterfall_figure(run)
    labels = [t.replace("\u00a0", " ").rstrip() for t in fig.layout.yaxis.ticktext]
    spans = run.spans()
    assert len(labels) == len(spans)
    for label, depth, name in zip(labels, spans["depth"], spans["name"], strict=True):
        assert str(name)[:30] in label
        lead = len(label) - len(label.lstrip())
        assert lead == (0 if depth == 0 else 2 * (depth - 1))
        assert label.lstrip().startswith("└ ") == (depth > 0)


def test_kinds_of_the_sample_runs_get_their_own_colours(samples: Any) -> None:
    fig = waterfall_figure(samples.run("jobhunt-0001"))
    bars = [t for t in fig.data if t.type == "bar" and not (t.meta or {}).get("role")]
    assert {t.name for t in bars} == {"agent", "llm", "tool", "http"}
    assert len({t.marker.color for t in bars}) == 4


def test_error_spans_are_outlined_and_crossed(synth: Any) -> None:
    run = span_run(synth, 31, run_id="errors", error_every=3)
    spans = run.spans()
    failed = set(spans.loc[spans["status"] == "error", "span_id"])
    assert len(failed) == 3
    fig = waterfall_figure(run)
    bars = span_bars(fig)
    outlined = set(bars.loc[bars["line_width"] > 0, "span_id"])
    assert outlined == failed
    crosses = [t for t in fig.data if t.name == "error"]
    assert len(crosses) == 1 and crosses[0].marker.color == ERROR_COLOR
    assert {c[0] for c in crosses[0].customdata} == failed
    status = {r["span_id"]: r["custom"]["status"] for r in bars.to_dict(orient="records")}
    assert all(status[s].startswith("error: TimeoutError") for s in failed)


def test_llm_bars_show_model_and_tokens(samples: Any) -> None:
    run = samples.run("sre-0001")
    spans = run.spans().set_index("span_id")
    bars = span_bars(waterfall_figure(run))
    llm = bars[bars["trace"] == "llm"]
    assert len(llm) == (spans["kind"] == "llm").sum() == 6
    for row in llm.to_dict(orient="records"):
        s = spans.loc[row["span_id"]]
        assert row["text"] == f"{s['model']} · {s['input_tokens']:,} in / {s['output_tokens']:,} out"
    assert (bars.loc[bars["trace"] != "llm", "text"] == "").all()


def test_a_frameworks_llm_span_around_a_call_does_not_say_the_call_again(tmp_path: Path) -> None:
    """LangChain's and the Agents SDK's ``llm`` spans wrap the span that holds the model call:
    the call's model and tokens label that span's bar only, not each wrapper's again."""
    from agentlog.testing.fakes import FakeLLM

    model = FakeLLM("restart the api", model="gpt-4o-mini")

    def program(rec: Any) -> None:
        with rec.span("ChatOpenAI", kind="llm"), rec.span("ChatCompletion", kind="llm"):
            rec.llm({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "cpu=0.9?"}]}, model)

    run = al.record(program, store=al.Store(tmp_path / "store"))
    spans = run.spans().set_index("span_id")
    bars = span_bars(waterfall_figure(run)).set_index("span_id")
    [holder] = spans.index[spans["model"].notna()]
    assert (spans["kind"] == "llm").sum() == 3 and spans.loc[holder, "parent"] in spans.index
    s = spans.loc[holder]
    assert bars.loc[holder, "text"] == f"{s['model']} · {s['input_tokens']:,} in / {s['output_tokens']:,} out"
    assert (bars.drop(index=holder)["text"] == "").all()
    assert (spans["total_input_tokens"] == s["input_tokens"]).all()  # each wrapper's total is the one call


def test_hover_carries_name_kind_duration_tokens_cost(samples: Any) -> None:
    run = samples.run("diligence-0001")
    spans = run.spans().set_index("span_id")
    bars = span_bars(waterfall_figure(run)).set_index("span_id")
    sid = spans.index[spans["kind"] == "llm"][0]
    custom = bars.loc[sid, "custom"]
    s = spans.loc[sid]
    assert custom["name"] == s["name"] and custom["kind"] == "llm"
    assert custom["tokens"] == f"{s['input_tokens']:,} in · {s['output_tokens']:,} out"
    assert custom["cost"].startswith("$0.00")
    assert custom["duration"].endswith(" s") or custom["duration"].endswith(" ms")


def event_seqs(panel: str) -> list[int]:
    body = panel.split("<tbody>", 1)[1]
    return [int(m.replace(",", "")) for m in re.findall(r'<tr><td class="al-num">([\d,]+)</td>', body)]


def test_select_lists_exactly_the_spans_events(samples: Any) -> None:
    run = samples.run("jobhunt-0001")
    w = Waterfall(run)
    ev = run.events
    for sid in ("s2", "s4", "s31"):
        assert w.select(sid) is w
        assert w.selected == sid
        want = list(ev.loc[(ev["span_id"] == sid).fillna(False), "seq"])
        assert want and event_seqs(w.events_html) == want
        assert len(want) == int(run.spans().set_index("span_id").loc[sid, "events"])


def test_select_an_unknown_span_raises(samples: Any) -> None:
    w = Waterfall(samples.run("sre-0001"))
    with pytest.raises(KeyError, match="has no span 'nope'"):
        w.select("nope")
    assert w.selected is None


def test_payloads_and_names_are_escaped(synth: Any) -> None:
    script = "<script>alert(1)</script>"
    run = span_run(synth, 4, run_id="xss", tool_payload=script)
    w = Waterfall(run).select("t0")
    assert "<script>alert" not in w.events_html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in w.events_html

    clock = StepClock()
    wr = synth.create_run(run_id="xss-name", clock=clock, durability="none")
    wr.emit("span.started", {"name": script, "kind": "tool", "parent": None}, span_id="x")
    clock.advance(1)
    wr.emit("span.ended", {"name": script, "status": "error", "error": script}, span_id="x")
    wr.close()
    fig = waterfall_figure(synth.run("xss-name"))
    html_text = fig.to_json()
    assert "<script>" not in html_text
    assert "&lt;script&gt;" in fig.layout.yaxis.ticktext[0]
    panel = Waterfall(synth.run("xss-name")).select("x").events_html
    assert "<script>" not in panel


def test_aggregates_above_max_bars_and_says_so(synth: Any) -> None:
    run = span_run(synth, 3001, run_id="big", error_every=50)
    spans = run.spans()
    assert len(spans) == 3001
    fig = waterfall_figure(run, max_bars=500)
    meta = fig.layout.meta["agentlog"]
    assert meta["aggregated"] and meta["spans"] == 3001
    drawn = sum(len(t.x) for t in fig.data if t.type == "bar" and (t.meta or {}).get("role") != "rows")
    assert drawn == meta["bars"] <= 500
    note = fig.layout.title.subtitle.text
    assert note.startswith("3,001 spans; showing") and "aggregated bars" in note and "zoom in" in note
    # the lanes count every span not drawn on its own
    single = len(span_bars(fig))
    lane_counts = [int(m.replace(",", "")) for t in fig.layout.yaxis.ticktext
                   for m in re.findall(r"×([\d,]+)", t)]
    assert single + sum(lane_counts) == 3001
    # the whole run is covered
    want = expected_times(run, spans, fig)
    bars = [t for t in fig.data if t.type == "bar" and (t.meta or {}).get("role") != "rows"]
    lo = min(float(np.min(t.base)) for t in bars)
    hi = max(float(np.max(np.asarray(t.base) + np.asarray(t.x))) for t in bars)
    assert lo == pytest.approx(want["start"].min(), abs=1e-9)
    assert hi == pytest.approx(want["end"].max(), rel=1e-3)
    assert fig.layout.xaxis.range[0] <= lo and fig.layout.xaxis.range[1] >= hi
    # every failed span keeps its cross
    crosses = [t for t in fig.data if t.name == "error" and t.type == "scatter"]
    assert sum(len(t.x) for t in crosses) == int((spans["status"] == "error").sum()) == 20


def test_no_aggregation_up_to_max_bars(synth: Any) -> None:
    run = span_run(synth, 301, run_id="mid")
    fig = waterfall_figure(run, max_bars=301)
    assert not fig.layout.meta["agentlog"]["aggregated"]
    assert len(span_bars(fig)) == 301
    assert not fig.layout.title.subtitle.text
    assert waterfall_figure(run, max_bars=300).layout.meta["agentlog"]["aggregated"]


def test_long_runs_use_minutes_or_hours(synth: Any) -> None:
    run = synth.run("big")  # about 22 minutes
    fig = waterfall_figure(run, max_bars=500)
    assert fig.layout.meta["agentlog"]["time_unit"] == "min"
    assert fig.layout.xaxis.title.text == "minutes since run start"


def test_a_filtered_span_table_draws_only_those_spans(samples: Any) -> None:
    run = samples.run("diligence-0001")
    spans = run.spans()
    llm = spans[spans["kind"] == "llm"]
    bars = span_bars(waterfall_figure(run, spans=llm))
    assert sorted(bars["span_id"]) == sorted(llm["span_id"])


def test_a_run_without_spans_says_so(synth: Any) -> None:
    w = synth.create_run(run_id="empty", durability="none", clock=lambda: T0)
    w.emit("note", {"text": "nothing happened"})
    w.close()
    run = synth.run("empty")
    fig = waterfall_figure(run)
    assert [a.text for a in fig.layout.annotations] == ["no spans"]
    assert fig.layout.meta["agentlog"]["spans"] == 0
    view = Waterfall(run)
    assert "0 spans" in repr(view)


def test_bad_max_bars(samples: Any) -> None:
    with pytest.raises(ValueError, match="max_bars must be >= 1"):
        waterfall_figure(samples.run("sre-0001"), max_bars=0)


def test_widget_click_selects_the_span(samples: Any) -> None:
    run = samples.run("sre-0001")
    w = Waterfall(run)
    box = w.widget()
    assert w.widget() is box
    fw, below = box.children
    tree, panel = below.children
    assert isinstance(fw, go.FigureWidget)
    assert "Click a bar" in panel.value
    trace = next(t for t in fw.data if t.name == "tool")
    sid = trace.customdata[1][0]
    w._on_click(trace, Points(point_inds=[1], xs=[0], ys=[0], trace_name="tool", trace_index=0), None)
    assert w.selected == sid
    assert panel.value == w.events_html
    assert event_seqs(panel.value)
    assert len([sh for sh in fw.layout.shapes if sh.name == "selected"]) == 1  # the clicked row
    assert tree.selected == sid  # the tree follows the figure
    tree.selected = "s1"  # ... and the figure the tree
    assert w.selected == "s1" and "call_model" in panel.value


def test_outside_a_kernel_it_shows_the_plain_figure(samples: Any) -> None:
    assert not in_kernel()
    bundle = Waterfall(samples.run("sre-0001"))._repr_mimebundle_()
    assert "application/vnd.plotly.v1+json" in bundle or "text/html" in bundle


def test_run_waterfall_method(samples: Any, tmp_path: Path) -> None:
    view = samples.run("sre-0002").waterfall(max_bars=10)
    assert isinstance(view, Waterfall)
    assert view.figure.layout.meta["agentlog"]["aggregated"]


def test_a_fork_made_later_is_drawn_without_the_pause(tmp_path: Any) -> None:
    now = [0.0]
    store = al.Store(tmp_path / "s")

    def span(w: Any, sid: str, t0: float, t1: float) -> None:
        now[0] = t0
        w.emit("span.started", {"name": sid, "kind": "tool", "parent": None}, span_id=sid)
        now[0] = t1
        w.emit("span.ended", {"name": sid, "status": "ok", "error": None}, span_id=sid)

    with store.create_run(run_id="p", clock=lambda: now[0], durability="none") as w:
        span(w, "a", 100.0, 102.0)
        span(w, "b", 103.0, 104.0)
    with store.create_run(run_id="f", fork_of=("p", 1), clock=lambda: now[0], durability="none") as w:
        span(w, "c", 1e7, 1e7 + 3.0)        # made ~116 days after the parent's cut
    fig = waterfall_figure(store.run("f"))
    ends = [x + base for t in fig.data if t.type == "bar" and (t.meta or {}).get("role") != "rows"
            for x, base in zip(t.x, t.base, strict=True)]
    # 2 s of the parent, then the fork's 3 s: no pause (the 1 s between a and b is kept as is)
    assert max(ends) == pytest.approx(5.0)
    assert fig.layout.xaxis.range[1] < 10
    [note] = [a.text for a in fig.layout.annotations]
    assert note == "fork after seq 1, made 116 days later"


def test_a_wait_for_approval_is_a_labelled_break(samples: Any) -> None:
    run = samples.run("sre-0001")
    fig = waterfall_figure(run)
    [brk] = fig.layout.meta["agentlog"]["breaks"]
    events = run.events
    request = events.loc[events["type"] == "approval.requested", "ts"].iloc[0]
    decision = events.loc[events["type"] == "approval.granted", "ts"].iloc[0]
    wait = (decision - request).total_seconds()
    start, end, _x, width, label = brk
    assert end - start >= wait - 1  # the whole wait (and the idle edges around it) is the break
    assert label == f"‖ {fmt_ms((end - start) * 1000)} waiting for approval"
    assert width < 0.1 * fig.layout.xaxis.range[1]  # compressed: the work keeps its scale
    assert [a.text for a in fig.layout.annotations if a.name == "break"] == [label]
    # every bar is at least MIN_BAR of the axis wide, and wider than 2% of the axis on average
    bars = span_bars(fig)
    widths = bars["end"] - bars["start"]
    assert widths.min() >= min_width(fig) - 1e-9
    lo, hi = fig.layout.xaxis.range
    assert widths.median() > 0.02 * (hi - lo)
    # ticks give the real time on both sides of the break
    assert fig.layout.xaxis.ticktext[0] == "0 s" and any(":" in t for t in fig.layout.xaxis.ticktext)


def test_every_row_is_a_click_target(samples: Any) -> None:
    fig = waterfall_figure(samples.run("jobhunt-0001"))
    [rows] = [t for t in fig.data if (t.meta or {}).get("role") == "rows"]
    assert fig.data[0] is rows  # under the bars
    bars = span_bars(fig).sort_values("y")
    assert [c[0] for c in rows.customdata] == list(bars["span_id"])
    lo, hi = fig.layout.xaxis.range
    assert all(b == lo and b + x == pytest.approx(hi) for b, x in zip(rows.base, rows.x, strict=True))


def test_labels_stay_inside_the_plot(samples: Any) -> None:
    fig = waterfall_figure(samples.run("sre-0001"))
    [labels] = [t for t in fig.data if (t.meta or {}).get("role") == "labels"]
    lo, hi = fig.layout.xaxis.range
    for x, pos in zip(labels.x, labels.textposition, strict=True):
        # text to the right starts left of 62 % of the axis; near the edge it goes left of the bar
        assert (pos == "middle right" and x <= lo + 0.62 * (hi - lo)) or pos == "middle left" or x < hi
