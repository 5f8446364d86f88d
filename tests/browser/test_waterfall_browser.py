"""The waterfall figure in Chromium: a sample run and a 100,000-span synthetic run, written to
self-contained HTML (plotly.js inlined, works offline) and opened via file://."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import agentlog as al
from agentlog.widgets.waterfall import waterfall_figure

HERE = Path(__file__).resolve().parent


def _synth() -> ModuleType:
    """tests/widgets/_wf_synth.py (the synthetic span runs), loaded by path."""
    name = "_wf_synth"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE.parent / "widgets" / "_wf_synth.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def open_figure(page: Any, fig: Any, path: Path) -> list[str]:
    """Write ``fig`` to ``path``, open it, wait for the plot; returns the page's JS errors."""
    from playwright.sync_api import expect
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    fig.write_html(path, include_plotlyjs=True)
    page.goto(path.as_uri())
    expect(page.locator(".main-svg").first).to_be_visible()
    return errors


def test_sample_run_waterfall_renders(page: Any, shots: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect
    store = al.examples.sample_store(copy_to=tmp_path / "store")
    run = store.run("jobhunt-0001")
    spans = run.spans()
    errors = open_figure(page, waterfall_figure(run), tmp_path / "sample.html")
    # one bar per span, and each row's transparent click band (the first trace)
    assert page.locator(".barlayer .trace:not(:first-child) .point").count() == len(spans) == 43
    expect(page.locator(".gtitle")).to_have_text("jobhunt example — span waterfall (43 spans)")
    ticks = page.locator(".ytick text")
    assert ticks.count() == len(spans)
    assert "fetch_board" in ticks.nth(1).text_content()
    assert page.locator(".textpoint", has_text="gpt-4o-mini · 334 in / 32 out").count() == 1
    assert page.locator(".legendtext").all_text_contents() == ["agent", "llm", "tool", "http"]
    page.screenshot(path=shots / "waterfall_sample.png", full_page=True)
    # the bar's path: the .point group also holds the label beside the bar
    box = page.locator(".barlayer .trace").nth(2).locator(".point path").first.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x - 3, y)
    page.mouse.move(x, y, steps=3)
    hover = page.locator(".hoverlayer .hovertext")
    expect(hover).to_contain_text("gpt-4o-mini · llm")
    expect(hover).to_contain_text("tokens: 334 in · 32 out")
    page.screenshot(path=shots / "waterfall_sample_hover.png", full_page=True)
    assert not errors


def test_100k_span_waterfall_is_aggregated_and_renders(page: Any, shots: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect
    store = al.Store(tmp_path / "store")
    run = _synth().span_run(store, 100_001, run_id="run-100k", error_every=997)
    fig = waterfall_figure(run)
    meta = fig.layout.meta["agentlog"]
    assert meta["spans"] == 100_000 and meta["aggregated"] and meta["bars"] <= 5000
    errors = open_figure(page, fig, tmp_path / "run100k.html")
    bars = page.locator(".barlayer .point")
    bands = sum(len(t.x) for t in fig.data if (t.meta or {}).get("role") == "rows")  # click bands
    assert bars.count() == meta["bars"] + bands and meta["bars"] > 0
    assert page.locator(".scatterlayer .point").count() == 33  # every failed span's cross
    note = page.locator(".gtitle-subtitle")
    expect(note).to_be_visible()
    expect(note).to_contain_text("100,000 spans; showing")
    expect(note).to_contain_text("zoom in / filter")
    lanes = page.locator(".ytick text").all_text_contents()
    assert [t.replace("\u00a0", " ") for t in lanes[1:]] == ["▤ agent ×33,333 (depth 1)",
                                                            "▤ llm ×33,333 (depth 2)",
                                                            "▤ tool ×33,333 (depth 2)"]
    page.screenshot(path=shots / "waterfall_100k.png", full_page=True)
    assert not errors


@pytest.mark.parametrize("name", ["by_model", "over_time"])
def test_cost_figures_render(page: Any, shots: Path, tmp_path: Path, name: str) -> None:
    from agentlog.widgets.costdash import cost_figures
    store = al.examples.sample_store(copy_to=tmp_path / "store")
    fig = cost_figures(store.run("refunds-0001"))[name]
    errors = open_figure(page, fig, tmp_path / f"{name}.html")
    assert page.locator(".trace").count() >= 1
    page.screenshot(path=shots / f"cost_{name}.png", full_page=True)
    assert not errors


KERNEL_IDLE = ("() => window.jupyterapp?.shell.currentWidget?.sessionContext"
               "?.session?.kernel?.status === 'idle'")
RUN_ALL = "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"


def test_clicking_a_bar_in_jupyterlab_lists_its_events(lab: Callable[[str], str], nb_dir: Path,
                                                      page: Any, shots: Path) -> None:
    """A real kernel: the FigureWidget's click reaches ``on_click`` and fills the panel."""
    import nbformat
    from playwright.sync_api import expect
    store = nb_dir / "agentlog-runs"  # the lab's $AGENTLOG_STORE
    if not store.exists():
        al.examples.sample_store(copy_to=store)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import agentlog as al\nw = al.Store().run('jobhunt-0001').waterfall()\nw")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, nb_dir / "wf_click.ipynb")
    page.goto(lab("wf_click.ipynb"))
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)  # else run-all opens "Select Kernel"
    page.evaluate(RUN_ALL)  # fire and forget
    view = page.locator(".agentlog-waterfall")
    panel = view.locator(".agentlog-waterfall-events")
    expect(view.locator(".js-plotly-plot .gtitle")).to_contain_text("span waterfall", timeout=60_000)
    expect(panel).to_contain_text("Click a bar")
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    bar = view.locator(".barlayer .trace").nth(2).locator(".point path").first  # the first llm span
    bar.scroll_into_view_if_needed()
    box = bar.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x - 3, y)
    page.mouse.move(x, y, steps=3)  # plotly picks the point on hover; the click then sends it
    page.mouse.click(x, y)
    expect(panel).to_contain_text("llm.response", timeout=30_000)
    expect(panel).to_contain_text("gpt-4o-mini")
    assert panel.locator("tbody tr").count() == 4  # started, request, response, ended
    view.scroll_into_view_if_needed()
    page.screenshot(path=shots / "waterfall_lab_click.png")
