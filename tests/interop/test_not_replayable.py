"""Imported runs say that they cannot be replayed or forked, and why; a JSONL copy of a
recorded run still can."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_programs import triage
from _interop_sources import drangue_sre, traced_agent

import agentlog as al
from agentlog.errors import NotReplayableError, ReplayError
from agentlog.interop import export_jsonl, export_otlp, import_drangue, import_jsonl, import_otlp


def _imported(kind: str, store: Any, tmp_path: Path) -> Any:
    if kind == "otlp":
        text, _ = traced_agent("genai")
        [run] = import_otlp(io.StringIO(text), store)
        return run
    db = tmp_path / "runs.db"
    drangue_sre(db)
    [run] = import_drangue(db, store)
    return run


@pytest.mark.parametrize("kind", ["otlp", "drangue"])
def test_an_imported_run_cannot_be_replayed_or_forked(kind: str, store: Any, tmp_path: Path) -> None:
    run = _imported(kind, store, tmp_path)
    before = set(store.list_runs())
    assert run.replayable is False
    assert run.replayable_reason is not None and f"imported from {kind}" in run.replayable_reason
    with pytest.raises(NotReplayableError) as info:
        al.replay(triage, run)
    assert isinstance(info.value, ReplayError) and info.value.run_id == run.id
    assert str(info.value) == f"run {run.id} cannot be replayed or forked: {run.replayable_reason}"
    with pytest.raises(NotReplayableError, match=f"run {run.id} cannot be replayed or forked"):
        al.fork(run, 0, program=triage)
    assert set(store.list_runs()) == before  # the fork made no run


def test_the_fork_panel_says_why_it_is_disabled(store: Any, tmp_path: Path) -> None:
    from agentlog.widgets.forkpanel import ForkPanel

    run = _imported("otlp", store, tmp_path)
    panel = ForkPanel(run, triage)
    assert panel.button.disabled
    assert panel.error is not None and "this run cannot be forked: it was imported from otlp" in panel.error
    assert "imported from otlp" in panel.errors.value


def test_a_recorded_run_and_its_jsonl_copy_replay(run: Any, other: Any, tmp_path: Path) -> None:
    assert run.replayable and run.replayable_reason is None
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    copy = import_jsonl(path, other)
    assert copy.replayable and al.replay(triage, copy).ok


def test_an_otlp_round_trip_of_a_recorded_run_is_an_import(run: Any, other: Any) -> None:
    [back] = import_otlp(export_otlp(run), other)
    assert not back.replayable and back.meta["tags"]["source"] == "otlp"


def test_the_cli_says_why_it_will_not_replay(store: Any, tmp_path: Path) -> None:
    import subprocess
    import sys

    run = _imported("otlp", store, tmp_path)
    out = subprocess.run([sys.executable, "-m", "agentlog.cli", "--store", str(store.path), "replay", run.id,
                          "--program", "example:sre"], check=False, capture_output=True, text=True)
    assert out.returncode == 2  # bad input, not an unexpected error
    assert out.stderr.strip() == f"agentlog: error: run {run.id} cannot be replayed or forked: " + \
        " ".join(run.replayable_reason.split())
