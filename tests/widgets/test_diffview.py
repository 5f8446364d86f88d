"""DiffView on the sample forks: divergence, row statuses, states at aligned steps, summary,
the event window, the widget."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.folding import diff_states
from agentlog.widgets.diffview import DiffView
from agentlog.widgets.html import fmt_num, fmt_usd

PAIRS = [("refunds-0001", "refunds-0001-approve"), ("sre-0001", "sre-0001-calm")]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return al.examples.sample_store(copy_to=tmp_path_factory.mktemp("diffview") / "store")


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_the_divergence_is_the_fork_point_and_rows_before_it_are_same(store: Any, a: str, b: str) -> None:
    run_a, run_b = store.run(a), store.run(b)
    view = DiffView(run_a, run_b)
    d = al.diff(run_a, run_b)
    assert view.divergence_seq == d.divergence == run_b.fork_seq + 1
    step = view.divergence_step
    assert step == view.divergence_seq
    rows = list(view.rows)
    assert [r.step for r in rows] == list(range(len(rows)))
    assert all(r.status == "same" and r.seq_a == r.seq_b == r.step for r in rows[:step])
    assert rows[step].status != "same"
    # after the prefix the rows are RunDiff's, with matched shown as same and changed pairs
    # that only moved counters shown as shifted
    table = d.table()
    want = ["same" if s == "matched" else s for s in table["status"]]
    got = [r.status for r in rows[step:]]
    assert [("changed" if g == "shifted" else g) for g in got] == want
    assert len(rows) == step + len(table)
    # each run's events appear once, in order
    assert [r.seq_a for r in rows if r.seq_a is not None] == list(range(len(run_a)))
    assert [r.seq_b for r in rows if r.seq_b is not None] == list(range(len(run_b)))
    assert {r.status for r in rows} <= {"same", "shifted", "changed", "only_a", "only_b"}
    changed = [r for r in rows if r.status == "changed"]
    assert changed and all(r.change for r in changed)


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_states_at_each_aligned_step_and_their_differences(store: Any, a: str, b: str) -> None:
    run_a, run_b = store.run(a), store.run(b)
    view = DiffView(run_a, run_b)
    for row in view.rows:
        view.goto(row.step)
        seq_a, seq_b = view.seqs_at(row.step)
        if row.seq_a is not None:
            assert seq_a == row.seq_a
        if row.seq_b is not None:
            assert seq_b == row.seq_b
        assert view.state_a == run_a.state_at(seq_a)
        assert view.state_b == run_b.state_at(seq_b)
        assert view.highlighted == list(diff_states(run_a.state_at(seq_a), run_b.state_at(seq_b)).paths)
        if row.step < view.divergence_step:
            assert view.highlighted == []
    # at the end the two states differ, and the trees mark it
    view.goto(len(view.rows) - 1)
    assert view.highlighted
    assert view.highlighted == list(diff_states(run_a.state_at(len(run_a) - 1),
                                                run_b.state_at(len(run_b) - 1)).paths)
    assert "al-st-hl" in view.state_html
    assert view.state_html.count('<div class="al-st">') == 2


def test_a_step_after_the_divergence_highlights_the_approval_decision(store: Any) -> None:
    view = DiffView(store.run("refunds-0001"), store.run("refunds-0001-approve"))
    granted = next(r for r in view.rows if r.type == "approval.granted")
    view.goto(granted.step)
    decided = [p for p in view.highlighted if p.startswith("/approvals/decided")]
    assert decided
    assert re.search(r'class="al-st-(hl|path)" data-path="/approvals/decided', view.state_html)


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_the_summary_shows_the_usage_delta_of_run_diff(store: Any, a: str, b: str) -> None:
    view = DiffView(store.run(a), store.run(b))
    usage = al.diff(store.run(a), store.run(b)).usage
    text = view.summary_html
    for metric, label in (("input_tokens", "input tokens"), ("output_tokens", "output tokens"),
                          ("llm_calls", "model calls"), ("tool_calls", "tool calls")):
        delta = usage.loc[metric, "delta"]
        assert re.search(rf"<td>{label}</td>.*?<td class=\"al-num\">{re.escape(fmt_num(delta, sign=True))}</td>", text)
    cost = usage.loc["cost_usd", "delta"]
    assert cost != 0
    sign = "−" if cost < 0 else "+"
    assert re.search(rf"<td>total incl. inherited prefix \(USD\)</td>.*?<td class=\"al-num\">"
                     rf"{re.escape(sign + fmt_usd(abs(cost)))}</td>", text)
    assert "Graph changes" in text


def test_graph_changes_are_counted(tmp_path: Path) -> None:
    store = al.examples.sample_store(copy_to=tmp_path / "store")
    w = store.create_run(run_id="g", fork_of=("diligence-0001", 100), durability="none")
    w.emit("object.created", {"id": "extra-1", "kind": "note", "data": {"text": "<new>"}})
    w.close("finished")
    view = DiffView(store.run("diligence-0001"), store.run("g"))
    text = view.summary_html
    assert "objects added" in text or "objects removed" in text
    assert "extra-1" in text and "<new>" not in text


def test_the_list_opens_at_the_divergence_with_the_prefix_folded(store: Any) -> None:
    run_a, run_b = store.run("refunds-0001"), store.run("refunds-0001-approve")
    view = DiffView(run_a, run_b, window=10)
    div = view.divergence_step
    lo, hi = view.window_range
    assert (lo, hi) == (div, div + 21)
    text = view.events_html
    rows = re.findall(r'<tr class="([^"]+)"', text.split("<tbody>", 1)[1])
    # the first row is the folded prefix, then the divergence: no identical event is listed
    assert rows[:3] == ["al-dv-fold", "al-dv-divergence", f"al-dv-{view.rows[div].status} al-dv-current"]
    assert f"{div:,} identical events (seq 0..{div - 1}) ▸" in text
    assert f"… {len(view.rows) - hi:,} later steps" in text
    view.show_prefix()
    assert view.window_range[0] == div - 10 and "▾" in view.events_html
    view.show_prefix(False)
    view.show_more(before=100, after=5)
    assert view.window_range == (0, div + 26)
    view.goto(140)  # outside the window: it moves there
    lo, hi = view.window_range
    assert lo <= 140 < hi
    assert 'class="al-dv-only_b' in DiffView(store.run("refunds-0001"),
                                             store.run("refunds-0001-approve")).events_html


def test_identical_runs_and_errors(store: Any) -> None:
    run = store.run("sre-0001")
    view = DiffView(run, run)
    assert view.divergence_seq is None and view.divergence_step is None
    assert {r.status for r in view.rows} == {"same"}
    assert view.step == len(run) - 1 and view.highlighted == []
    with pytest.raises(IndexError, match="'sre-0001' ↔ 'sre-0001' have 78 aligned steps"):
        view.goto(78)


def test_shifted_counters_are_not_changes_and_changes_say_what(store: Any) -> None:
    view = DiffView(store.run("refunds-0001"), store.run("refunds-0001-approve"))
    shifted = [r for r in view.rows if r.status == "shifted"]
    assert shifted and all(r.type == "span.started" for r in shifted)
    assert all(r.change == "same content, moved: /attributes/step +1" for r in shifted)
    changed = [r for r in view.rows if r.status == "changed"]
    assert changed and all(r.change for r in changed)
    view.show_more(after=200)
    text = view.events_html
    for r in changed:  # what changed is written under the pair, not in a tooltip
        assert f'<tr class="al-dv-change al-dv-changed" data-step="{r.step}"><td></td><td colspan="7">' in text
    calm = DiffView(store.run("sre-0001"), store.run("sre-0001-calm"))
    assert "~ /result/value: 0.93 → 0.35" in calm.events_html


def test_the_static_repr_and_the_widget(store: Any) -> None:
    view = store.run("sre-0001").diff_view(store.run("sre-0001-calm"))
    assert isinstance(view, DiffView)
    page = view._repr_html_()
    assert page is not None
    assert "diverge at seq 27" in page and "al-dv-events" in page and "Usage (b - a)" in page
    assert view._repr_mimebundle_() is None
    box = view.widget
    parts = view._view
    assert parts["slider"].max == len(view.rows) - 1 and parts["slider"].value == view.step
    parts["slider"].value = 50
    assert view.step == 50 and view.state_html in parts["states"].value
    view.goto(10)
    assert parts["slider"].value == 10
    parts["to_divergence"].click()
    assert view.step == view.divergence_step
    assert box is view.widget
    # the controls are above the event list
    kids = list(box.children)
    slider_row = next(i for i, k in enumerate(kids) if parts["slider"] in getattr(k, "children", ()))
    assert slider_row < kids.index(parts["events"])
    assert parts["prefix"].description == f"▸ show the {view.diff.prefix} identical events"
    parts["prefix"].click()  # the whole (short) prefix is listed again
    assert view.prefix_shown and 'data-step="0"' in parts["events"].value
