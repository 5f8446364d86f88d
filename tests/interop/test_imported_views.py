"""Runs imported from ActiveGraph, drangue and OTLP work in every view: waterfall, scrubber,
cost dashboard, the tabbed show, the diff view and the HTML report."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_sources import activegraph_quickstart, drangue_sre, traced_agent

import agentlog as al
from agentlog.interop import import_activegraph, import_drangue, import_otlp
from agentlog.report import report_html
from agentlog.widgets import CostDashboard, DiffView, Scrubber, Waterfall, show


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return activegraph_quickstart(tmp_path_factory.mktemp("activegraph"), monkeypatch)


def _check_views(run: Any) -> None:
    spans = run.spans()
    assert len(Waterfall(run).figure.data) > 0 or spans.empty
    scrubber = Scrubber(run)
    last = len(run) - 1
    scrubber.goto(last)
    assert scrubber.state == run.state_at(last)
    assert scrubber.seq == last and scrubber.state_html
    dash = CostDashboard(run)
    assert dash.tables and dash.figures
    tabs = show(run)
    assert len(tabs.children) == 6
    page = report_html(run)
    assert "Plotly.newPlot" in page and run.id in page
    assert DiffView(run, run).divergence_seq is None


def test_an_activegraph_run_in_every_view(quickstart: Path, store: Any) -> None:
    [run] = import_activegraph(quickstart, store)
    assert len(run.spans()) > 0 and len(run.state_at(len(run) - 1)["objects"]) > 0
    _check_views(run)


def test_a_drangue_run_in_every_view(tmp_path: Path, store: Any) -> None:
    db = tmp_path / "runs.db"
    drangue_sre(db)
    [run] = import_drangue(db, store)
    _check_views(run)


def test_an_otlp_trace_in_every_view(store: Any) -> None:
    text, _ = traced_agent("genai")
    [run] = import_otlp(io.StringIO(text), store)
    assert isinstance(run, al.Run) and len(run.llm_calls()) == 1
    _check_views(run)
