"""The views in a real JupyterLab (issue 15): one notebook with the waterfall, the scrubber,
the cost views, the graph tab and a live waterfall, run once; each test checks one view as a
person would, in Chromium. Screenshots of each view go to docs/images/ (the README shows them)."""

from __future__ import annotations

import re
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import expect

import agentlog as al
from agentlog.numbers import USD_PATTERN

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"
KERNEL_IDLE = ("() => window.jupyterapp?.shell.currentWidget?.sessionContext"
               "?.session?.kernel?.status === 'idle'")
RUN_ALL = "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"

WRITER = '''
import pathlib, sys, time, agentlog as al
store = al.Store(sys.argv[1])
go = pathlib.Path(sys.argv[2])
with store.create_run(run_id="live-1", name="live example", durability="fsync") as w:
    for k in range(24):
        while k == 2 and not go.exists():  # two spans, then wait until the test watches
            time.sleep(0.05)
        sid = f"s{k}"
        w.emit("span.started", {"name": f"step {k}", "kind": "llm" if k % 2 else "tool", "parent": None},
               span_id=sid)
        time.sleep(0.25)
        w.emit("span.ended", {"name": f"step {k}", "status": "ok", "error": None}, span_id=sid)
'''

CELLS = [
    "import os, pathlib, subprocess, sys, time\nimport agentlog as al\nstore = al.Store()",
    'wf = al.widgets.Waterfall(store.run("sre-0001"))\nwf',
    'sc = al.widgets.Scrubber(store.run("sre-0001"), start=4)\nsc',
    'fork = store.run("sre-0001-calm")\ndisplay(fork)\nal.widgets.CostDashboard(fork)',
    'al.show(store.run("diligence-0001"), tab="Graph")',
    textwrap.dedent('''\
        child = subprocess.Popen([sys.executable, "live_writer.py", str(store.path), "live_go"])
        meta = store.path / "runs" / "run_id=live-1" / "run.json"
        while not meta.exists():
            time.sleep(0.05)
        live = al.widgets.Waterfall(store.run("live-1"), live=True)
        live'''),
]


@pytest.fixture(scope="module")
def views(lab: Callable[[str], str], nb_dir: Path, browser: Any) -> Iterator[Any]:
    """The views notebook, run once in JupyterLab; yields the page."""
    store = nb_dir / "agentlog-runs"  # the lab's $AGENTLOG_STORE
    if not store.exists():
        al.examples.sample_store(copy_to=store)
    (nb_dir / "live_writer.py").write_text(WRITER)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nb_dir / "views.ipynb")
    ctx = browser.new_context(viewport={"width": 1400, "height": 1500})  # views whole in the screenshots
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    expect.set_options(timeout=30_000)
    page.errors = []  # type: ignore[attr-defined]
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.goto(lab("views.ipynb"))
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)
    page.evaluate(RUN_ALL)
    expect(page.locator(".agentlog-live-badge")).to_be_visible(timeout=120_000)
    yield page
    ctx.close()


def _cell(page: Any, k: int) -> Any:
    return page.locator(".jp-Notebook .jp-CodeCell").nth(k)


def _shot(locator: Any, name: str) -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(IMAGES / name))


def test_the_sre_waterfall_bars_are_wide_and_each_click_opens_its_events(views: Any) -> None:
    view = _cell(views, 1).locator(".agentlog-waterfall")
    panel = view.locator(".agentlog-waterfall-events")
    expect(view.locator(".js-plotly-plot .gtitle")).to_contain_text("span waterfall", timeout=120_000)  # a loaded machine renders late
    expect(view.locator(".annotation-text", has_text="waiting for approval")).to_have_count(1)
    bars = view.locator(".barlayer .trace:not(:first-child) .point path")
    n = bars.count()
    assert n == 25  # one bar per span of sre-0001 (the first trace is the rows' click bands)
    widths = [bars.nth(i).bounding_box()["width"] for i in range(n)]
    assert min(widths) >= 6, widths
    plot = view.locator(".js-plotly-plot").first.bounding_box()
    cell = _cell(views, 1).locator(".jp-OutputArea-output").first.bounding_box()
    assert plot["width"] >= 0.9 * cell["width"]  # the chart fills the cell
    seen: set[str] = set()
    for i in range(n):
        bars.nth(i).scroll_into_view_if_needed()
        before = panel.locator(".al-id").text_content() if i else ""
        for _attempt in range(3):  # plotly picks the point on hover; a click then sends it
            box = bars.nth(i).bounding_box()
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            views.mouse.move(x - 3, y)
            views.mouse.move(x, y, steps=3)
            views.mouse.click(x, y)
            try:
                expect(panel.locator(".al-id")).not_to_have_text(before or "-", timeout=8_000)
                break
            except AssertionError:
                continue
        sid = panel.locator(".al-id").text_content()
        assert sid and sid not in seen, (i, sid)  # each bar opens its own span's events
        seen.add(sid)
        expect(panel.locator("tbody tr").first).to_be_visible()
        expect(view.locator(f'.agentlog-spantree .al-tr-selected[data-span="{sid}"]')).to_have_count(1)
    _shot(view, "waterfall.png")


def test_the_scrubber_shows_a_conversation_not_escaped_json(views: Any) -> None:
    view = _cell(views, 2).locator(".agentlog-scrubber")
    event = view.locator(".agentlog-scrubber-event")
    expect(event.locator(".al-chat-msg")).to_have_count(1, timeout=60_000)  # seq 4: the answer
    expect(event.locator(".al-chat-role")).to_have_text(["assistant"])
    expect(event.locator(".al-chat-call")).to_contain_text("get_alerts")
    text = event.inner_text()
    assert '\\"' not in text and "\\n" not in text
    expect(view.locator(".agentlog-scrubber-cause")).to_have_text("← caused by seq 3")
    view.locator(".agentlog-scrubber-cause").click()
    expect(view.locator(".widget-readout").first).to_have_text("3")
    expect(event.locator(".al-chat-role").first).to_have_text("system")  # the request's messages
    assert event.locator(".al-chat-msg").count() == 2
    chart = view.locator(".js-plotly-plot")
    assert view.bounding_box()["height"] < 1000  # the panes have a fixed height: the chart stays in view
    expect(chart).to_be_visible()
    _shot(view, "scrubber.png")


def test_no_amount_has_more_precision_than_chosen(views: Any) -> None:
    cell = _cell(views, 3)
    expect(cell.locator(".agentlog-costdash")).to_be_visible(timeout=60_000)
    expect(cell.locator(".al-grid").first).to_contain_text("total incl. inherited prefix")
    texts = [cell.inner_text(), *cell.locator(".js-plotly-plot text").all_text_contents()]
    amounts = [m for t in texts for m in re.findall(r"[+−-]?\$[\d,.]+", t)]
    assert amounts
    bad = [a for a in amounts if not re.fullmatch(USD_PATTERN, a.rstrip(".,"))]
    assert not bad, bad
    assert not re.search(r"\d\.\d{7,}", " ".join(texts))  # no float noise anywhere
    _shot(cell.locator(".jp-OutputArea").first, "cost.png")


def test_the_graph_tab_draws_nodes_and_shows_provenance(views: Any) -> None:
    view = _cell(views, 4).locator(".agentlog-graph")
    nodes = view.locator(".scatterlayer .trace .point")
    _cell(views, 4).scroll_into_view_if_needed()
    expect(nodes.first).to_be_visible(timeout=60_000)
    assert nodes.count() >= 42  # 42 objects (and the transparent relation midpoints)
    company = view.locator(".scatterlayer .trace").filter(has_text="Stellar Logisti").first
    point = company.locator(".point").first
    point.scroll_into_view_if_needed()
    provenance = view.locator(".agentlog-graph-provenance")
    for _attempt in range(3):  # plotly picks the point on hover; a click then sends it
        box = point.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        views.mouse.move(x - 3, y)
        views.mouse.move(x, y, steps=3)
        views.mouse.click(x, y)
        try:
            expect(provenance).to_contain_text("created by the first event below", timeout=8_000)
            break
        except AssertionError:
            continue
    expect(provenance).to_contain_text("created by the first event below")
    expect(provenance).to_contain_text("company:")
    expect(view.locator(".agentlog-graph-provenance ol li").first).to_contain_text("seq ")
    _shot(view, "graph.png")


def test_a_run_written_by_a_child_process_grows_in_a_live_waterfall(views: Any, nb_dir: Path) -> None:
    view = _cell(views, 5).locator(".agentlog-waterfall")
    view.scroll_into_view_if_needed()
    badge = view.locator(".agentlog-live-badge")
    bars = view.locator(".barlayer .trace:not(:first-child) .point path")
    expect(badge).to_contain_text("● live", timeout=60_000)
    expect(bars).to_have_count(2)  # the child wrote two spans and waits for us
    first = bars.count()
    (nb_dir / "live_go").write_text("go")
    deadline = time.monotonic() + 60
    while bars.count() <= first and time.monotonic() < deadline:
        time.sleep(0.5)
    grown = bars.count()
    assert grown > first, (first, grown)  # new spans appeared while we watched
    _shot(view, "live.png")
    expect(badge).to_contain_text("closed", timeout=90_000)
    expect(bars).to_have_count(24)


def test_no_console_errors(views: Any) -> None:
    views.wait_for_function(KERNEL_IDLE, timeout=60_000)
    assert views.errors == []  # type: ignore[attr-defined]
