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
from agentlog.events import Origin, origin_of
from agentlog.interop import InteropFormatError, drangue_runs, import_drangue


@pytest.fixture
def sre(tmp_path: Path) -> tuple[Path, list[Any]]:
    db = tmp_path / "runs.db"
    return db, drangue_sre(db)


def test_every_event_is_kept_in_order(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, source = sre
    [run] = import_drangue(db, store)
    assert len(run) == len(source) == 10
    assert [origin_of(e).type for e in run.iter_events()] == [e.type for e in source]
    assert [e.type for e in run.iter_events()] == [
        "run.started", "llm.response", "tool.result", "llm.response", "approval.requested",
        "approval.granted", "drangue.step_started", "tool.result", "llm.response", "run.finished"]
    assert run.verify().ok and run.meta["tags"] == {"source": "drangue", "source_run": "sre-1",
                                                    "source_file": "runs.db"}


def test_usage_costs_and_times(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, source = sre
    [run] = import_drangue(db, store)
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
    [run] = import_drangue(db, store)
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
    [run] = import_drangue(db, store)
    causes = {e.seq: e.caused_by for e in run.iter_events()}
    assert causes == {0: None, 1: None, 2: 1, 3: None, 4: 3, 5: 4, 6: 3, 7: 3, 8: None, 9: None}
    result = run.event(7)
    assert result.payload["result"] == "restarted checkout"
    assert origin_of(result).payload["content"] == "restarted checkout"
    assert result.payload["key"] == al.keys.tool_key("restart", {"service": "checkout"})


def test_the_original_payload_is_kept(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, source = sre
    [run] = import_drangue(db, store)
    for original, event in zip(source, run.iter_events(), strict=True):
        origin = origin_of(event)
        assert isinstance(origin, Origin) and origin.system == "drangue"
        assert (origin.type, origin.seq, origin.payload) == (original.type, original.seq, original.payload)


def test_the_vocabulary_keys_are_agentlogs_own(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, _ = sre
    [run] = import_drangue(db, store)
    decision = next(e for e in run.iter_events() if e.type == "llm.response")
    body = al.events.LLMResponse.of(decision)  # drangue's usage no longer stands in for agentlog's
    assert (body.usage.input_tokens, body.usage.cached_tokens, body.usage.output_tokens) == (160, 40, 12)
    assert origin_of(decision).payload["usage"] == {"input_tokens": 120, "output_tokens": 12,
                                                    "cache_read_input_tokens": 40}
    assert set(decision.payload) <= {*al.events.LLMResponse._names_, "$v", "origin"}


def test_importing_again_adds_nothing(sre: tuple[Path, list[Any]], store: Any) -> None:
    db, _ = sre
    [first] = import_drangue(db, store)
    [again] = import_drangue(db, store)
    assert (again.id, again.head, len(again)) == (first.id, first.head, len(first))
    assert store.list_runs() == [first.id] and first.meta["tags"]["source"] == "drangue"


def test_several_runs_import_together(tmp_path: Path, store: Any) -> None:
    db = tmp_path / "runs.db"
    drangue_sre(db, "sre-1")
    drangue_sre(db, "sre-2")
    assert drangue_runs(db) == ["sre-1", "sre-2"]
    runs = import_drangue(db, store)
    assert [(r.meta["tags"]["source_run"], len(r)) for r in runs] == [("sre-1", 10), ("sre-2", 10)]
    assert [r.id for r in import_drangue(db, store, run="sre-2")] == [runs[1].id]  # already there
    assert sorted(store.list_runs()) == sorted(r.id for r in runs)
    with pytest.raises(InteropFormatError, match="no drangue run 'sre-3'; the file has sre-1, sre-2"):
        import_drangue(db, store, run="sre-3")


def test_an_unknown_model_is_imported_with_an_unknown_cost(tmp_path: Path, store: Any) -> None:
    db = tmp_path / "runs.db"
    drangue_sre(db, model="drangue-test-model-7")
    with pytest.warns(al.UnknownModelWarning, match="drangue-test-model-7"):
        [run] = import_drangue(db, store)
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
