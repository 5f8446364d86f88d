"""drangue logs in: an approval-gated SRE run from its SQLite store."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_sources import drangue_sre

import agentlog as al
from agentlog.interop import InteropFormatError, drangue_runs, import_drangue


@pytest.fixture
def sre(tmp_path: Path) -> tuple[Path, list[Any]]:
    db = tmp_path / "runs.db"
    return db, drangue_sre(db)


def test_every_event_is_kept_in_order(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, source = sre
    run = import_drangue(db, store)
    assert len(run) == len(source) == 10
    assert [e.payload["source_type"] for e in run.iter_events()] == [e.type for e in source]
    assert [e.type for e in run.iter_events()] == [
        "run.started", "llm.response", "tool.result", "llm.response", "approval.requested",
        "approval.granted", "drangue.step_started", "tool.result", "llm.response", "run.finished"]
    assert run.verify().ok and run.meta["tags"] == {"source": "drangue", "source_run": "sre-1",
                                                    "source_file": "runs.db"}


def test_usage_costs_and_times(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, source = sre
    run = import_drangue(db, store)
    decisions = [e for e in run.iter_events() if e.type == "llm.response"]
    # drangue counts cache reads apart from input_tokens (Anthropic's way): 120 + 40
    assert [(e.input_tokens, e.cached_tokens, e.output_tokens) for e in decisions] == \
        [(160, 40, 12), (160, 0, 10), (190, 0, 15)]
    assert all(e.model == "claude-sonnet-4-5" and e.cost_usd and e.cost_usd > 0 for e in decisions)
    assert all(e.payload["cost_source"] == "computed" for e in decisions)
    executed = [(round(s.ts * 1e6), s.duration_ms) for s in source if s.ts is not None]
    assert [(e.ts, e.duration_ms) for e in run.iter_events() if e.type in ("llm.response", "tool.result")] == executed
    assert [e.ts for e in run.iter_events()] == sorted(e.ts for e in run.iter_events())


def test_state_folds_with_the_approval_decided(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, _ = sre
    run = import_drangue(db, store)
    state = run.state_at(len(run) - 1)
    assert state["status"] == "finished"
    assert dict(state["approvals"]["pending"]) == {}
    decided = state["approvals"]["decided"]["4"]
    assert (decided["decision"], decided["action"], decided["decision_seq"]) == ("granted", "restart", 5)
    assert state["usage"]["llm_calls"] == 3 and state["usage"]["tool_calls"] == 2
    assert state["messages"][-1]["content"] == "Restarted checkout; 5xx was 14x baseline."
    waiting = run.state_at(4)
    assert waiting["status"] == "waiting" and "4" in waiting["approvals"]["pending"]


def test_causes_follow_the_call_ids(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, _ = sre
    run = import_drangue(db, store)
    causes = {e.seq: e.caused_by for e in run.iter_events()}
    assert causes == {0: None, 1: None, 2: 1, 3: None, 4: 3, 5: 4, 6: 3, 7: 3, 8: None, 9: None}
    result = run.event(7)
    assert result.payload["result"] == "restarted checkout" and result.payload["content"] == "restarted checkout"
    assert result.payload["key"] == al.keys.tool_key("restart", {"service": "checkout"})


def test_the_original_payload_is_kept(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, source = sre
    run = import_drangue(db, store)
    for original, event in zip(source, run.iter_events(), strict=True):
        added = set(event.payload["origin"]["added"]) | {"origin", "source_type", "$v"}  # $v: read in today's version
        kept = {k: v for k, v in event.payload.items() if k not in added}
        assert kept == original.payload
        assert event.payload["origin"]["seq"] == original.seq


def test_several_runs_need_a_choice(tmp_path: Path, store: Any) -> None:
    db = tmp_path / "runs.db"
    drangue_sre(db, "sre-1")
    drangue_sre(db, "sre-2")
    assert drangue_runs(db) == ["sre-1", "sre-2"]
    with pytest.raises(InteropFormatError, match=r"the file has 2 drangue runs \(sre-1, sre-2\); choose one"):
        import_drangue(db, store)
    assert len(import_drangue(db, store, run="sre-2")) == 10


def test_an_unknown_model_is_imported_with_an_unknown_cost(tmp_path: Path, store: Any) -> None:
    db = tmp_path / "runs.db"
    drangue_sre(db, model="drangue-test-model-7")
    with pytest.warns(al.UnknownModelWarning, match="drangue-test-model-7"):
        run = import_drangue(db, store)
    decision = next(e for e in run.iter_events() if e.type == "llm.response")
    assert decision.cost_usd is None and decision.payload["cost_source"] == "unknown"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run.state_at(len(run) - 1)["usage"]["cost_unknown_calls"] == 3


def test_not_a_drangue_file(tmp_path: Path, store: Any) -> None:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE events (id TEXT)")
    with pytest.raises(InteropFormatError) as info:
        import_drangue(db, store)
    assert str(info.value) == (f"{db}: no drangue events table (run_id, seq, type, payload, ts, "
                               "duration_ms); not a drangue SQLiteStore file")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(InteropFormatError, match="not a drangue SQLiteStore file|cannot read"):
        import_drangue(text, store)
