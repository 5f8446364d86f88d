"""Scrubber and DiffView in a real kernel (nbclient): they display as widget views with an HTML
fallback, and driving the controls from Python moves them."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def execute(cells: list[str], cwd: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code) for code in cells]
    client = NotebookClient(nb, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}}, store_widget_state=True)
    client.execute()
    return nb


def test_scrubber_and_diffview_display_as_widgets_in_a_kernel(tmp_path: Path) -> None:
    setup = ("import agentlog as al\n"
             f"store = al.examples.sample_store(copy_to={str(tmp_path / 'store')!r})\n"
             "s = store.run('sre-0001').scrub(start=4)\n"
             "s")
    drive = ("s._parts().slider.value = 10\n"
             "s._parts().forward.click()\n"
             "print(s.seq, s.figure.layout.shapes[0].x0, s._parts().seq_box.value)")
    nb = execute([setup, drive, "v = store.run('sre-0001').diff_view(store.run('sre-0001-calm'))\nv"],
                 tmp_path)
    shown = nb.cells[0].outputs[0]["data"]
    assert WIDGET_VIEW in shown and "text/html" in shown
    assert "agentlog.Scrubber" in shown["text/html"]
    assert nb.cells[1].outputs[0]["text"].split() == ["11", "11", "11"]
    diff_shown = nb.cells[2].outputs[0]["data"]
    assert WIDGET_VIEW in diff_shown and "diverge at seq 27" in diff_shown["text/html"]
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    names = {m["model_name"] for m in state.values()}
    assert {"IntSliderModel", "PlayModel", "BoundedIntTextModel", "DropdownModel", "ButtonModel",
            "HTMLModel", "VBoxModel", "TabModel", "OutputModel"} <= names
    # the chart is a plain figure in an Output: no anywidget model to start (see the Scrubber docs)
    assert "AnyModel" not in names
    assert shown[WIDGET_VIEW]["model_id"] in state
