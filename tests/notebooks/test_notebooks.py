"""The tour notebooks run top to bottom (nbclient, kernel ``python3`` on this venv's Python),
each on a fresh copy of the sample runs, and show widgets and plotly figures where expected."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

import agentlog as al

NB_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = ("01_postmortem.ipynb", "02_step_through_state.ipynb", "03_fork_and_compare.ipynb",
             "04_cost_and_tokens.ipynb")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PLOTLY = "application/vnd.plotly.v1+json"
PROBE = "import sys; print('KERNEL-PYTHON', sys.executable)"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``python3`` kernelspec for this interpreter, first on ``JUPYTER_PATH`` (a user-level
    ``python3`` kernelspec would otherwise win and might run another Python)."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (agentlog tests)", "language": "python"}))
    return root


@pytest.fixture(scope="module")
def executed(kernels: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every notebook executed once, with a probe cell appended that prints the kernel's Python."""
    results: dict[str, Any] = {}
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(kernels), old) if p)
    try:
        for name in NOTEBOOKS:
            store = tmp_path_factory.mktemp(name[:2]) / "agentlog-runs"
            al.examples.sample_store(copy_to=store)
            nb = nbformat.read(NB_DIR / name, as_version=4)
            nb.cells.append(nbformat.v4.new_code_cell(PROBE))
            client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                             resources={"metadata": {"path": str(store.parent)}},
                                             store_widget_state=True)
            env = dict(os.environ, AGENTLOG_STORE=str(store), PYDEVD_DISABLE_FILE_VALIDATION="1")
            client.execute(env=env)
            results[name] = (nb, store)
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    return results


def _outputs(nb: Any) -> list[Any]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def _cell_outputs(nb: Any, needle: str) -> list[Any]:
    cells = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    assert cells, f"no cell with {needle!r}"
    return cells[0].outputs


def _text(outputs: list[Any]) -> str:
    parts = []
    for o in outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif "data" in o:
            parts.append(o.data.get("text/plain", ""))
            parts.append(o.data.get("text/html", ""))
    return "\n".join(parts)


def _views(outputs: list[Any]) -> list[str]:
    return [o.data[WIDGET_VIEW]["model_id"] for o in outputs if "data" in o and WIDGET_VIEW in o.data]


def _models(nb: Any) -> dict[str, Any]:
    return nb.metadata["widgets"][WIDGET_STATE]["state"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_this_python_without_errors(executed: dict[str, Any], name: str) -> None:
    nb, store = executed[name]
    assert not [o for o in _outputs(nb) if o.output_type == "error"]
    assert f"KERNEL-PYTHON {sys.executable}" in _text(nb.cells[-1].outputs)
    assert "agentlog.Store" in _text(nb.cells[1].outputs) or str(store) in _text(nb.cells[1].outputs)


def test_postmortem(executed: dict[str, Any]) -> None:
    nb, _ = executed["01_postmortem.ipynb"]
    assert "agentlog.Run" in _text(_cell_outputs(nb, 'store.run("sre-0001")'))
    views = _views(_cell_outputs(nb, "al.widgets.Waterfall(run)"))
    assert len(views) == 1 and views[0] in _models(nb)
    assert "AnyModel" in {m["model_name"] for m in _models(nb).values()}  # the FigureWidget
    chain = _text(_cell_outputs(nb, "def model_output_behind"))
    assert "approval.requested" in chain and "llm.response" in chain and "llm.request" in chain
    assert "restart" in chain.lower()
    assert "approval.granted" in _text(_cell_outputs(nb, "decision = next("))
    assert "ok" in _text(_cell_outputs(nb, "run.verify()"))


def test_step_through_state(executed: dict[str, Any]) -> None:
    nb, _ = executed["02_step_through_state.ipynb"]
    assert len(_views(_cell_outputs(nb, "al.widgets.Scrubber(run, start=194)"))) == 1
    tabs = _views(_cell_outputs(nb, 'al.show(run, tab="Graph")'))
    assert len(tabs) == 1 and _models(nb)[tabs[0]]["model_name"] == "TabModel"
    graph = [m["state"].get("value", "") for m in _models(nb).values() if m["model_name"] == "HTMLModel"]
    assert any("claim:10" in v and "contradiction" in v for v in graph)
    assert "'object.created'" in _text(_cell_outputs(nb, "chain, seq = [], "))
    assert "read at seq" in _text(_cell_outputs(nb, "read = next("))
    assert _text(_cell_outputs(nb, "quote in text")).strip() == "True"


def test_fork_and_compare(executed: dict[str, Any]) -> None:
    nb, store = executed["03_fork_and_compare.ipynb"]
    views = _views(_cell_outputs(nb, "panel = al.widgets.ForkPanel(run, program)"))
    assert len(views) == 2  # the scrubber and the fork panel
    panel = _models(nb)[views[1]]
    assert "agentlog-forkpanel" in panel["state"]["_dom_classes"]
    assert _text(_cell_outputs(nb, "same = (")).strip() == "True"
    assert _text(_cell_outputs(nb, "view.divergence_seq")).strip() == "80"
    assert len(_views(_cell_outputs(nb, "view = al.widgets.DiffView(run, fork)"))) == 1
    assert "cost" in _text(_cell_outputs(nb, "d.usage"))
    forks = [r for r in al.Store(store).list_runs() if r not in {
        "sre-0001", "sre-0001-calm", "sre-0002", "refunds-0001", "refunds-0001-approve",
        "refunds-0002-tight", "diligence-0001", "jobhunt-0001"}]
    assert len(forks) == 1  # the fork was written into the notebook's store copy


def test_cost_and_tokens(executed: dict[str, Any]) -> None:
    nb, _ = executed["04_cost_and_tokens.ipynb"]
    assert len(_views(_cell_outputs(nb, "al.widgets.CostDashboard(run)"))) == 1
    assert len(_views(_cell_outputs(nb, "al.widgets.CostDashboard(store)"))) == 1
    plotly = [o.data[PLOTLY] for o in _cell_outputs(nb, "figures[\"by_run\"].show()") if "data" in o and PLOTLY in o.data]
    assert plotly and plotly[0]["data"]
    sql = _text(_cell_outputs(nb, "where type = 'llm.response'"))
    assert "diligence-0001" in sql and "gpt-4o" in sql
