"""ActiveGraph logs in: the quickstart's SQLite store, its JSONL trace and a sink file."""

from __future__ import annotations

import collections
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_sources import (
    activegraph_export_trace,
    activegraph_quickstart,
    activegraph_rows,
    activegraph_sink_run,
)

from agentlog.events import BlobRef, origin_of
from agentlog.interop import InteropFormatError, activegraph_runs, import_activegraph

RUN = "quickstart_demo_run"


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return activegraph_quickstart(tmp_path_factory.mktemp("activegraph"), monkeypatch)


def _plain(value: Any) -> Any:
    if isinstance(value, BlobRef):
        return value.text()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _types(run: Any) -> collections.Counter[str]:
    return collections.Counter(e.type for e in run.iter_events())


def test_the_quickstart_imports_with_every_event(quickstart: Path, store: Any) -> None:
    source = activegraph_rows(quickstart, RUN)
    [run] = import_activegraph(quickstart, store)
    assert len(run) == len(source) == 671  # the paper's figure for the quickstart
    origins = [origin_of(e) for e in run.iter_events()]
    assert [o.type for o in origins] == [t for _, t, _ in source]
    assert [o.id for o in origins] == [i for i, _, _ in source]
    report = run.verify()
    assert report.ok, str(report)
    assert run.meta["tags"]["source_run"] == RUN and run.name == "Diligence: Pinecone Bio"


def test_each_source_payload_is_kept_whole(quickstart: Path, store: Any) -> None:
    import json

    [run] = import_activegraph(quickstart, store)
    with sqlite3.connect(quickstart) as conn:
        rows = conn.execute("SELECT id, payload FROM events WHERE run_id = ? ORDER BY seq", (RUN,)).fetchall()
    kept = [(o.id, _plain(o.payload)) for o in map(origin_of, run.iter_events())]
    assert kept == [(i, json.loads(p)) for i, p in rows]  # long texts were stored as blobs: read back


def test_importing_again_adds_nothing(quickstart: Path, store: Any) -> None:
    [first] = import_activegraph(quickstart, store)
    [again] = import_activegraph(quickstart, store)
    assert again.id == first.id and again.head == first.head and store.list_runs() == [first.id]


def test_the_graph_folds_from_the_imported_run(quickstart: Path, store: Any) -> None:
    [run] = import_activegraph(quickstart, store)
    state = run.state_at(len(run) - 1)
    assert len(state["objects"]) == 93 and len(state["relations"]) == 76
    kinds = collections.Counter(o["kind"] for o in state["objects"].values())
    assert kinds["company"] == 3 and kinds["memo"] == 3
    usage = state["usage"]
    assert (usage["llm_calls"], usage["tool_calls"]) == (103, 48)
    assert usage["input_tokens"] > 0 and usage["cost_usd"] > 0
    answered = [o for o in state["objects"].values() if o["kind"] == "question" and o["data"]["status"] == "answered"]
    assert len(answered) == 24  # one object.updated per patch.applied


def test_types_are_mapped_and_kept(quickstart: Path, store: Any) -> None:
    [run] = import_activegraph(quickstart, store)
    source = collections.Counter(t for _, t, _ in activegraph_rows(quickstart, RUN))
    types = _types(run)
    assert types["llm.request"] == source["llm.requested"] and types["llm.response"] == source["llm.responded"]
    assert types["tool.call"] == source["tool.requested"] and types["tool.result"] == source["tool.responded"]
    assert types["object.created"] == source["object.created"]
    assert types["relation.created"] == source["relation.created"]
    assert types["object.updated"] == source["patch.applied"]
    assert types["span.started"] == types["span.ended"] == source["behavior.started"]
    assert types["activegraph.goal.created"] == source["goal.created"] == 3


def test_causes_are_remapped_to_seqs(quickstart: Path, store: Any) -> None:
    [run] = import_activegraph(quickstart, store)
    seq_of = {origin_of(e).id: e.seq for e in run.iter_events()}
    for e in run.iter_events():
        cause = origin_of(e).caused_by
        assert e.caused_by == (seq_of[cause] if cause is not None else None)
    assert sum(e.caused_by is not None for e in run.iter_events()) > 600


def test_provenance_and_spans(quickstart: Path, store: Any) -> None:
    [run] = import_activegraph(quickstart, store)
    state = run.state_at(len(run) - 1)
    claim = next(o for o in state["objects"].values() if o["kind"] == "claim")
    created = run.event(claim["provenance"]["event"])
    assert created.type == "object.created" and created.actor == claim["provenance"]["actor"]
    assert origin_of(created).payload["object"]["provenance"]["created_by"] == created.actor  # ActiveGraph's own
    span = run.event(int(created.span_id[1:]))
    assert span.type == "span.started" and span.payload["name"] == created.actor
    response = next(e for e in run.iter_events() if e.type == "llm.response")
    request = run.event(response.caused_by)
    assert request.type == "llm.request" and response.payload["key"] == request.payload["key"]
    assert response.model == "claude-sonnet-4-5"
    assert response.cost_usd == float(origin_of(response).payload["cost_usd"])
    assert request.payload["messages"][0]["role"] == "system"


def test_export_trace_jsonl_gives_the_same_run(quickstart: Path, store: Any, tmp_path: Path) -> None:
    path = activegraph_export_trace(quickstart, tmp_path / "trace.jsonl")
    [from_jsonl] = import_activegraph(path, store)
    [from_sqlite] = import_activegraph(quickstart, store)
    assert from_jsonl.id != from_sqlite.id  # the trace file names its run after itself
    assert len(from_jsonl) == 671
    assert [e.hash for e in from_jsonl.iter_events()] == [e.hash for e in from_sqlite.iter_events()]


def test_a_sink_file(store: Any, tmp_path: Path) -> None:
    sink, db = activegraph_sink_run(tmp_path)
    lines = sink.read_text().splitlines()
    [run] = import_activegraph(sink, store)
    assert len(run) == len(lines) == len(activegraph_rows(db, "sink_run"))
    assert run.verify().ok
    assert len(run.state_at(len(run) - 1)["objects"]) > 0


def test_several_runs_in_one_file_import_together(quickstart: Path, store: Any, tmp_path: Path) -> None:
    sink, db = activegraph_sink_run(tmp_path, run_id="second_run")
    both = tmp_path / "both.db"
    both.write_bytes(quickstart.read_bytes())
    with sqlite3.connect(both) as dst, sqlite3.connect(db) as src:
        for row in src.execute("SELECT id, type, actor, payload, frame_id, caused_by, timestamp, run_id FROM events"):
            dst.execute("INSERT INTO events (id, type, actor, payload, frame_id, caused_by, timestamp, run_id) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    assert activegraph_runs(both) == [RUN, "second_run"]
    runs = import_activegraph(both, store)
    assert [r.meta["tags"]["source_run"] for r in runs] == [RUN, "second_run"]
    assert [len(r) for r in runs] == [len(activegraph_rows(both, RUN)), len(sink.read_text().splitlines())]
    assert [r.id for r in import_activegraph(both, store)] == [r.id for r in runs]  # again: nothing new
    assert len(store.list_runs()) == 2
    [run] = import_activegraph(both, store, run="second_run", run_id="picked")
    assert run.id == "picked" and len(run) == len(sink.read_text().splitlines())
    with pytest.raises(InteropFormatError, match="a new run id names one run, and the file has 2"):
        import_activegraph(both, store, run_id="two")
    with pytest.raises(InteropFormatError, match="no ActiveGraph run 'nope'"):
        import_activegraph(both, store, run="nope")


def test_not_an_activegraph_file(store: Any, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"id": "evt_001", "type": "x"}\n[1, 2]\n')
    with pytest.raises(InteropFormatError) as info:
        import_activegraph(path, store)
    assert str(info.value) == f"{path}:2: expected an ActiveGraph event object"
    path.write_text("not json at all\n")
    with pytest.raises(InteropFormatError, match=r"notes\.jsonl:1: not JSON"):
        import_activegraph(path, store)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(InteropFormatError, match="without an events table; not an ActiveGraph store"):
        import_activegraph(other, store)
