"""Importers check the shape of what they read: each leak issue 14 found is now an
InteropFormatError naming the file (and line, run or seq), and nothing half-imported is left."""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_sources import drangue_sre

import agentlog as al
from agentlog.interop import (
    InteropFormatError,
    export_jsonl,
    export_otlp,
    import_activegraph,
    import_drangue,
    import_jsonl,
    import_otlp,
)


def test_a_jsonl_export_with_bytes_that_are_not_utf8_names_the_line(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"seq"', b'"s\xffq"', 1)
    path.write_bytes(b"".join(lines))
    with pytest.raises(InteropFormatError, match=r"run.jsonl:3: not UTF-8 text \(invalid start byte"):
        import_jsonl(path, other)
    assert other.list_runs() == []


def test_a_jsonl_event_with_a_lone_surrogate_or_wrong_types_names_the_line(run: Any, other: Any) -> None:
    buf = io.StringIO()
    export_jsonl(run, buf)
    lines = buf.getvalue().splitlines()
    for change, field in ((lambda e: e["payload"].update(x="\udc80"), "payload"),
                          (lambda e: e.update(actor={"a": 1}), "actor"),
                          (lambda e: e.update(input_tokens=10**30), "input_tokens"),
                          (lambda e: e.update(ts=10**30), "ts")):
        event = json.loads(lines[2])
        change(event)
        text = "\n".join([*lines[:2], json.dumps(event), *lines[3:]])
        with pytest.raises(InteropFormatError, match=f"<stream>:3: field {field}:"):
            import_jsonl(io.StringIO(text), other)
    assert other.list_runs() == []


def test_a_jsonl_header_with_wrong_types_names_the_field(run: Any, other: Any) -> None:
    buf = io.StringIO()
    export_jsonl(run, buf)
    header, rest = buf.getvalue().split("\n", 1)
    for change in ({"writer": {"segment_events": "x"}}, {"parent": 7}, {"blobs": 3}, {"tags": 5}):
        text = json.dumps({**json.loads(header), **change}) + "\n" + rest
        with pytest.raises(InteropFormatError, match="<stream>:1: field"):
            import_jsonl(io.StringIO(text), other)


@pytest.mark.parametrize(("path", "value", "field"), [
    (("resourceSpans",), 5, "resourceSpans"),
    (("resourceSpans", 0, "scopeSpans", 0), True, "scopeSpans"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 0, "status"), 3, "status"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 0, "events"), {"a": 1}, "events"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 0, "status", "code"), [1], "code"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 0, "startTimeUnixNano"), "x", "startTimeUnixNano"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 0, "endTimeUnixNano"), str(10**30), "endTimeUnixNano"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 0, "attributes"), 4, "attributes"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 0, "attributes", 0, "value"), {"intValue": {"x": 1}}, "intValue"),
    (("resourceSpans", 0, "scopeSpans", 0, "spans", 0, "attributes", 0, "value"), {"arrayValue": 7}, "arrayValue"),
])
def test_an_otlp_field_of_the_wrong_type_names_the_field(run: Any, other: Any, tmp_path: Path,
                                                        path: tuple[Any, ...], value: Any, field: str) -> None:
    doc = export_otlp(run)
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    file = tmp_path / "trace.json"
    file.write_text(json.dumps(doc))
    with pytest.raises(InteropFormatError, match=f"trace.json:1: field {re.escape(field)}:"):
        import_otlp(file, other)
    assert other.list_runs() == []


def test_an_otlp_attribute_of_the_wrong_type_for_its_column_reads_as_text(run: Any, other: Any) -> None:
    """A model name given as an object is kept as its text: the model column holds strings only,
    and a trace with one odd attribute still imports."""
    doc = export_otlp(run)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    llm = next(s for s in spans if any(a["key"] == "gen_ai.response.model" for a in s.get("attributes", [])))
    for a in llm["attributes"]:
        if a["key"] == "gen_ai.response.model":
            a["value"] = {"kvlistValue": {"values": [{"key": "x", "value": {"intValue": "1"}}]}}
    [imported] = import_otlp(doc, other)
    models = imported.llm_calls()["model"].dropna().tolist()
    assert models and all(isinstance(m, str) for m in models)
    assert imported.verify().ok


def test_an_activegraph_store_whose_run_id_is_a_blob_names_the_field(tmp_path: Path, other: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from _interop_sources import activegraph_quickstart

    db = activegraph_quickstart(tmp_path, monkeypatch)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET run_id = ? WHERE rowid = (SELECT min(rowid) FROM events)", (b"\x00\xff",))
    with pytest.raises(InteropFormatError, match="field run_id: an event's run_id is a bytes, not text"):
        import_activegraph(db, other)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET run_id = 'quickstart_demo_run', actor = ? "
                     "WHERE rowid = (SELECT min(rowid) FROM events)", (b"\x01",))
    with pytest.raises(InteropFormatError, match="field actor: must be a string or null, got bytes"):
        import_activegraph(db, other)
    assert other.list_runs() == []


@pytest.mark.parametrize(("column", "value", "message"), [
    ("duration_ms", "slow", "duration_ms must be a number or null"),
    ("seq", None, "seq an integer"),
    ("payload", b"{}", "payload must be JSON text, got bytes"),
    ("payload", '{"tool_calls": 5, "usage": "many"}', None),  # tolerated: no calls, unknown usage
])
def test_a_drangue_row_of_the_wrong_type_names_the_run_and_seq(tmp_path: Path, other: Any, column: str,
                                                               value: Any, message: str | None) -> None:
    db = tmp_path / "drangue.db"
    drangue_sre(db)
    broken = tmp_path / "broken.db"
    shutil.copy(db, broken)
    with sqlite3.connect(broken) as conn:
        conn.execute(f"UPDATE events SET {column} = ? WHERE seq = 1", (value,))
    if message is None:
        [imported] = import_drangue(broken, other)
        assert imported.verify().ok
        return
    with pytest.raises(InteropFormatError, match=f"run 'sre-1' seq .*{message}"):
        import_drangue(broken, other)
    assert other.list_runs() == []


def test_the_cli_reports_a_bad_import_as_bad_input(run: Any, tmp_path: Path) -> None:
    from agentlog.cli import main

    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    path.write_bytes(path.read_bytes().replace(b'"seq"', b'"s\xffq"', 1))
    assert main(["import", str(path), "--format", "jsonl", "--store", str(tmp_path / "s")]) == 2
    assert al.Store(tmp_path / "s").list_runs() == []


def test_a_drangue_time_beyond_year_9999_takes_the_previous_time(tmp_path: Path, other: Any) -> None:
    """Found by bench/fuzz.py: datetime.fromtimestamp raised OSError (EOVERFLOW) on it."""
    db = tmp_path / "drangue.db"
    drangue_sre(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET ts = 1e300 WHERE seq = 2")
        before = conn.execute("SELECT ts FROM events WHERE seq = 1").fetchone()[0]
    [run] = import_drangue(db, other)
    assert run.verify().ok and run.event(2).ts == run.event(1).ts == round(before * 1_000_000)


def _schema_not_utf8(db: Path) -> Path:
    """``db`` with one byte of an index's name in its schema made a byte that is not UTF-8:
    the damage a flipped byte of the schema page leaves. SQLite's error then quotes the
    name, and Python cannot decode the message."""
    data = bytearray(db.read_bytes())
    at = data.find(b"sqlite_autoindex_events_1")
    assert at > 0, db
    data[at + 1] = 0xBD
    broken = db.with_name(f"schema-{db.name}")
    broken.write_bytes(bytes(data))
    return broken


def test_an_sqlite_schema_that_is_not_utf8_names_the_file(tmp_path: Path, other: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from _interop_sources import activegraph_quickstart

    drangue_sre(tmp_path / "drangue.db")
    broken = _schema_not_utf8(tmp_path / "drangue.db")
    with pytest.raises(InteropFormatError, match=f"{re.escape(str(broken))}: cannot read the SQLite file"):
        import_drangue(broken, other)
    broken = _schema_not_utf8(activegraph_quickstart(tmp_path / "ag", monkeypatch))
    with pytest.raises(InteropFormatError, match=f"{re.escape(str(broken))}: cannot read the SQLite store"):
        import_activegraph(broken, other)
    assert other.list_runs() == []
