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


def test_graph_tab_draws_nodes_and_links_with_provenance(store: Any) -> None:
    from agentlog.folding import thaw
    from agentlog.widgets.graph import GraphView
    run = store.run("diligence-0001")
    tabs = al.show(run, tab="Graph")
    view = tabs.views["Graph"]
    assert isinstance(view, GraphView)
    state = thaw(run.state_at(len(run) - 1))
    objects, relations = state["objects"], state["relations"]
    fig = view.figure
    nodes = [t for t in fig.data if (t.meta or {}).get("role") == "nodes"]
    drawn = [i for t in nodes for i in t.customdata]
    assert sorted(drawn) == sorted(objects)  # one node per object
    assert {t.meta["kind"] for t in nodes} == {o["kind"] for o in objects.values()}  # a colour per kind
    assert len({t.marker.color for t in nodes}) == len(nodes)
    [edges] = [t for t in fig.data if (t.meta or {}).get("role") == "edges"]
    assert len(edges.x) == 3 * len(relations)  # one line per relation (x0, x1, gap)
    assert fig.layout.meta["agentlog"]["kinds"][0] == "company"  # columns in the order they were made
    # a click on a node shows its provenance: the creating event and its cause chain
    claim = objects["claim:10"]
    view.select("claim:10")
    seq = claim["provenance"]["event"]
    assert f"<code>seq {seq:,}</code> <b>{run.event(seq).type}</b>" in view.provenance_html
    cause = run.event(seq).caused_by
    assert cause is not None and f"<code>seq {cause:,}</code>" in view.provenance_html
    # the graph as of the scrubber's event
    tabs.selected_index = 2  # Scrub: the graph follows it from now on
    scrub = tabs.views["Scrub"]
    scrub._parts().slider.value = 10
    assert view.seq == 10 and len(view.nodes) < len(objects)


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
