"""al.show(run): six tabs, only the overview built at once, the others when first selected."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import pytest

import agentlog as al
from agentlog.widgets.tabs import TABS, RunTabs, graph_html


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return al.examples.sample_store(copy_to=tmp_path_factory.mktemp("show") / "store")


def test_show_has_six_tabs_and_builds_only_the_overview(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    run = store.run("sre-0001")
    calls: list[str] = []
    for name in ("waterfall", "scrub", "cost_dashboard", "verify", "state_at"):
        original = getattr(run, name)
        monkeypatch.setattr(run, name, lambda *a, _n=name, _o=original, **k: (calls.append(_n), _o(*a, **k))[1])
    tabs = al.show(run)
    assert isinstance(tabs, RunTabs) and isinstance(tabs, widgets.Tab)
    assert tabs.titles == TABS == ("Overview", "Waterfall", "Scrub", "Cost", "Graph", "Verify")
    assert tabs.built == {"Overview"} and calls == []
    assert run.id in tabs.children[0].value
    assert all("loading" in c.value for c in tabs.children[1:])


def test_selecting_a_tab_builds_it_once(store: Any) -> None:
    run = store.run("sre-0001")
    tabs = run.show()
    tabs.selected_index = TABS.index("Waterfall")
    assert tabs.built == {"Overview", "Waterfall"}
    view = tabs.children[1]
    assert isinstance(view, widgets.VBox) and "agentlog-waterfall" in view._dom_classes
    tabs.selected_index = 0
    tabs.selected_index = 1
    assert tabs.children[1] is view  # not built again
    tabs.selected_index = TABS.index("Verify")
    assert "agentlog.VerifyReport" in tabs.children[5].value or "ok" in tabs.children[5].value
    tabs.selected_index = TABS.index("Scrub")
    assert any(isinstance(w, widgets.IntSlider) for w in _walk(tabs.children[2]))


def test_cost_tab(store: Any) -> None:
    tabs = al.show(store.run("refunds-0001"), tab="Cost")
    assert tabs.selected_index == 3 and "Cost" in tabs.built
    assert "Cost: " not in getattr(tabs.children[3], "value", "")  # no error placeholder


def test_graph_tab_lists_objects_by_kind_with_relations(store: Any) -> None:
    run = store.run("diligence-0001")
    tabs = al.show(run, tab="Graph")
    text = tabs.children[4].value
    state = run.state_at(len(run) - 1)
    kinds = {o["kind"] for o in state["objects"].values()}
    assert {"claim", "document", "contradiction", "memo"} <= kinds
    for kind in kinds:
        assert f"<summary>{kind} <span" in text
    assert f"{len(state['objects'])} objects, {len(state['relations'])} relations" in text
    assert "<b>contradicts</b>" in text and "claim:10" in text


def test_graph_html_escapes_payload_text() -> None:
    objs = {"x": {"id": "x<1>", "kind": "doc<script>", "data": {"title": "<img src=x onerror=alert(1)>"}},
            "y": {"id": "y", "kind": "claim", "data": {"text": "a & b"}}}
    rels = {"r": {"id": "r", "kind": "cites<b>", "source": "y", "target": "x", "provenance": {"event": 3}}}
    out = graph_html(objs, rels)
    assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out
    assert "<script>" not in out and "doc&lt;script&gt;" in out
    assert "cites&lt;b&gt;" in out and "a &amp; b" in out


def test_unknown_tab_is_refused(store: Any) -> None:
    with pytest.raises(ValueError, match="no tab 'Nope'"):
        al.show(store.run("sre-0001"), tab="Nope")


def _walk(w: Any) -> list[Any]:
    out = [w]
    for child in getattr(w, "children", ()) or ():
        out.extend(_walk(child))
    return out
