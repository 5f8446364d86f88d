"""Logs written by agentlog 0.1.0 (event vocabulary version 1) keep opening.

``tests/fixtures/v1_sample_runs`` holds the bundled sample runs as 0.1.0 wrote them, byte for
byte. Today's code opens, verifies, folds and renders them without changing a byte: older
payloads are lifted when read, never rewritten, so every hash stays valid.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog import events as ev

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v1_sample_runs"


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    copy = tmp_path_factory.mktemp("v1") / "store"
    shutil.copytree(FIXTURE, copy)
    return al.Store(copy)


def _run_ids() -> list[str]:
    return sorted(p.name.split("=", 1)[1] for p in (FIXTURE / "runs").iterdir())


def test_the_fixture_is_the_0_1_0_format() -> None:
    # It holds version 1 llm.response payloads (read raw, not lifted): what this file is about.
    store = al.Store(FIXTURE)
    raw = store.run("sre-0001", exact=True).table().column("payload").to_pylist()
    types = store.run("sre-0001", exact=True).table().column("type").to_pylist()
    responses = [p for p, t in zip(raw, types, strict=True) if t == "llm.response"]
    assert responses and all('"$v"' not in p and '"cost_usd"' in p for p in responses)


@pytest.mark.parametrize("run_id", _run_ids())
def test_an_old_run_verifies_and_folds(store: Any, run_id: str) -> None:
    run = store.run(run_id, exact=True)
    report = run.verify()
    assert report.ok, report
    last = len(run) - 1
    state = run.state_at(last)
    assert state["status"] in ("finished", "waiting", "budget_exceeded", "running")
    # Every standard event reads back as today's body.
    for event in run.iter_events():
        body = ev.body_of(event)
        assert body is not None and body.TYPE == event.type
        if isinstance(body, ev.LLMResponse):
            assert event.payload["$v"] == ev.LLMResponse.VERSION and "cost_usd" not in event.payload["usage"]


def test_an_old_run_with_its_http_bodies_as_blobs_replays_strictly(store: Any) -> None:
    """0.1.0 kept every HTTP body as a blob; HTTP events version 2 keep a UTF-8 body in the
    event. The program sends and gets the same bytes, so the old run replays, serving every
    exchange from the log."""
    run = store.run("jobhunt-0001", exact=True)
    bodies = [e.payload["body"] for e in run.iter_events()
              if e.type in ("http.request", "http.response") and e.payload.get("body") is not None]
    assert len(bodies) > 9 and all(isinstance(b, al.BlobRef) for b in bodies)
    result = al.replay(al.examples.program("jobhunt"), run)
    assert result.ok, str(result)
    assert result.live == 0


def test_old_runs_render_in_the_views(store: Any) -> None:
    from agentlog.report import report_html
    from agentlog.widgets import CostDashboard, Scrubber, Waterfall

    run = store.run("sre-0001", exact=True)
    fork = store.run("sre-0001-calm", exact=True)
    assert len(Waterfall(run).figure.data) > 0
    scrubber = Scrubber(run)
    scrubber.goto(len(run) - 1)
    assert scrubber.state == run.state_at(len(run) - 1)
    assert CostDashboard(run).tables
    assert run._repr_html_()
    assert len(run.llm_calls()) > 0 and run.llm_calls()["cost_usd"].notna().all()
    page = report_html(run, vs=fork)
    assert run.id in page and fork.id in page
    assert al.diff(run, fork).divergence is not None


def test_nothing_on_disk_changed(store: Any) -> None:
    before = _digests(FIXTURE)
    after = _digests(Path(store.path))
    assert after == before
