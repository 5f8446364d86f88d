"""Live views: a run still being written grows in the waterfall, the scrubber and the cost
dashboard, with a live badge until it closes (polled by hand here; in a kernel, on its loop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import agentlog as al
from agentlog.widgets import CostDashboard, Scrubber, Waterfall


def _span(w: Any, sid: str, cost: float) -> None:
    w.emit("span.started", {"name": f"call {sid}", "kind": "llm", "parent": None}, span_id=sid)
    w.emit("llm.response", {"key": f"k{sid}", "model": "m"}, span_id=sid, model="m", input_tokens=10,
           output_tokens=2, cost_usd=cost)
    w.emit("span.ended", {"name": f"call {sid}", "status": "ok", "error": None}, span_id=sid)


def _bars(fig: Any) -> int:
    return sum(len(t.x) for t in fig.data if t.type == "bar" and not (t.meta or {}).get("role"))


def test_views_grow_while_the_run_is_written(tmp_path: Path) -> None:
    store = al.Store(tmp_path / "s")
    w = store.create_run(run_id="live", durability="none")
    _span(w, "a", 0.001)
    run = store.run("live")
    wf, sc, dash = Waterfall(run, live=True), Scrubber(run, live=True), CostDashboard(run, live=True)
    box, parts = wf.widget(), sc._parts()
    dash_box = dash.widget()
    assert _bars(wf.figure) == 1 and parts.slider.max == 2
    assert "● live" in wf._badge.value and "3 events so far" in wf._badge.value
    _span(w, "b", 0.002)
    _span(w, "c", 0.004)
    assert wf.follower.tick() == 6  # one poll reads the six new events
    assert _bars(wf.figure) == 3 and len(wf.tree) == 3
    assert {t.name for t in box.children[1].data} >= {"llm"} and _bars(box.children[1]) == 3
    assert sc.follower.tick() == 6 and parts.slider.max == 8 and sc.seq == 0  # the view stays put
    assert dash.follower.tick() == 6
    assert dash.tables["by_model"]["llm_calls"].sum() == 3
    assert "$0.007" in dash_box.children[1].value  # the totals were made again
    w.close()
    assert wf.follower.tick() == 0 and not wf.follower.live
    assert "● live" not in wf._badge.value and "closed" in wf._badge.value


def test_not_live_by_default(tmp_path: Path) -> None:
    store = al.examples.sample_store(copy_to=tmp_path / "s")
    view = Waterfall(store.run("sre-0001"))
    assert view.follower is None and len(view.widget().children) == 2
