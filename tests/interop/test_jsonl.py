"""JSONL export and import: identical hashes, blobs both ways, forks, refusals with file and line."""

from __future__ import annotations

import gc
import io
import json
from pathlib import Path
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_programs import PAGE, rows

import agentlog as al
from agentlog.interop import InteropFormatError, InteropIntegrityError, export_jsonl, import_jsonl


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _blob_event(run: Any) -> Any:
    return next(e for e in run.iter_events() if e.type == "tool.result" and e.payload["name"] == "fetch_page")


def test_round_trip_keeps_every_column_and_hash(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    assert export_jsonl(run, path) == len(run)
    back = import_jsonl(path, other)
    assert back.id == run.id and back.name == "triage"
    assert rows(back) == rows(run)
    assert back.head == run.head
    report = back.verify()
    assert report.ok, str(report)
    assert back.meta["created"] == run.meta["created"] and back.meta["closed"] == run.meta["closed"]
    assert back.meta["status"] == run.meta["status"] == "finished"
    assert back.state_at(len(back) - 1) == run.state_at(len(run) - 1)


def test_the_file_is_a_header_then_events_with_their_hashes(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    lines = _lines(path)
    header, events = lines[0], [x for x in lines[1:] if "agentlog" not in x]
    assert header["agentlog"] == "run" and header["schema_version"] == 1
    assert header["id"] == run.id and header["count"] == len(run) and header["head"] == run.head
    assert [e["seq"] for e in events] == list(range(len(run)))
    first = run.event(0)
    assert events[0]["ts"] == first.ts and events[0]["hash"] == first.hash
    assert events[0]["payload"] == {"inputs": {"service": "api"}}  # an object, not a string


def test_inline_blobs_are_written_once_and_restored(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    blobs = [x for x in _lines(path) if x.get("agentlog") == "blob"]
    ref = _blob_event(run).payload["result"]
    assert [b["digest"] for b in blobs] == [ref.digest]
    assert blobs[0]["size"] == len(PAGE.encode()) and blobs[0]["media_type"] == ref.media_type
    back = import_jsonl(path, other)
    assert _blob_event(back).payload["result"].text() == PAGE
    assert back.verify().ok


def test_blobs_in_a_folder_are_copied_and_restored(run: Any, other: Any, tmp_path: Path) -> None:
    path, folder = tmp_path / "out" / "run.jsonl", tmp_path / "out" / "blobs"
    path.parent.mkdir()
    export_jsonl(run, path, blobs=folder)
    lines = _lines(path)
    assert lines[0]["blobs"] == {"mode": "dir", "path": "blobs"}
    assert not [x for x in lines if x.get("agentlog") == "blob"]
    digest = _blob_event(run).payload["result"].digest
    assert (folder / "sha256" / digest[7:9] / digest[9:]).read_text() == PAGE
    back = import_jsonl(path, other)  # finds the folder through the header
    assert _blob_event(back).payload["result"].text() == PAGE
    assert rows(back) == rows(run) and back.verify().ok


def test_a_missing_blob_folder_is_refused_before_writing(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path, blobs=tmp_path / "blobs")
    with pytest.raises(al.errors.BlobNotFoundError, match="run.jsonl:"):
        import_jsonl(path, other, blobs=tmp_path / "elsewhere")
    assert other.list_runs() == []


def test_an_altered_blob_line_is_refused(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"agentlog":"blob"' in line)
    blob = json.loads(lines[at])
    blob["base64"] = "dGFtcGVyZWQ="
    lines[at] = json.dumps(blob)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InteropIntegrityError) as info:
        import_jsonl(path, other)
    assert info.value.line == at + 1
    assert other.list_runs() == []


def test_streams_in_and_out(run: Any, other: Any) -> None:
    out = io.StringIO()
    export_jsonl(run, out)
    back = import_jsonl(io.StringIO(out.getvalue()), other, run_id="copy", name="copied")
    assert (back.id, back.name) == ("copy", "copied")
    assert [e.hash for e in back.iter_events()] == [e.hash for e in run.iter_events()]


def test_a_fork_exports_its_whole_history(forked: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "fork.jsonl"
    assert export_jsonl(forked, path) == len(forked) > forked.fork_seq + 1
    header = _lines(path)[0]
    assert header["parent"]["run_id"] == forked.parent.id
    back = import_jsonl(path, other)  # the parent is not in this store: a run of its own
    assert back.fork_seq is None
    assert rows(back) == rows(forked)
    assert back.verify().ok


def test_a_fork_whose_parent_is_in_the_store_is_imported_as_a_fork(forked: Any, store: Any,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "fork.jsonl"
    export_jsonl(forked, path)
    back = import_jsonl(path, store, run_id="fork-copy")
    assert back.parent.id == forked.parent.id and back.fork_seq == forked.fork_seq
    assert rows(back) == rows(forked)
    assert back.verify().ok
    unlinked = import_jsonl(path, store, run_id="fork-copy-2", link=False)
    assert unlinked.fork_seq is None and rows(unlinked) == rows(forked)


def test_a_tampered_event_line_is_refused_with_its_line(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"type":"state.patch"' in line)
    lines[at] = lines[at].replace("restart the api", "do nothing")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InteropIntegrityError) as info:
        import_jsonl(path, other)
    seq = json.loads(lines[at])["seq"]
    assert (info.value.path, info.value.line, info.value.seq) == (str(path), at + 1, seq)
    assert str(info.value).startswith(f"{path}:{at + 1}: seq {seq}: the event hashes to ")
    assert str(info.value).endswith("; the file was changed after it was exported")
    assert other.list_runs() == []
    assert gc.isenabled()  # paused for the import, and back on after the failure


def test_a_dropped_line_is_refused(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"type":"note"' in line)
    del lines[at]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InteropIntegrityError, match=f"run.jsonl:{at + 1}: seq .*: expected seq"):
        import_jsonl(path, other)


def test_a_truncated_file_is_refused(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    path.write_text("\n".join(path.read_text().splitlines()[:-3]) + "\n")
    with pytest.raises(InteropFormatError, match=f"the header says {len(run)} events"):
        import_jsonl(path, other)
    assert other.list_runs() == []


def test_not_json_names_the_file_and_line(tmp_path: Path, other: Any) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("this is not json\n")
    with pytest.raises(InteropFormatError) as info:
        import_jsonl(path, other)
    assert (info.value.path, info.value.line) == (str(path), 1)
    assert str(info.value).startswith(f"{path}:1: not JSON (")


def test_a_bad_event_line_names_its_line(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    lines = path.read_text().splitlines()
    lines[3] = lines[3][:40]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InteropFormatError, match=r"run\.jsonl:4: not JSON"):
        import_jsonl(path, other)


def test_a_wrong_header_is_refused(tmp_path: Path, other: Any) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"seq": 0, "type": "note"}\n')
    with pytest.raises(InteropFormatError) as info:
        import_jsonl(path, other)
    assert str(info.value) == (f'{path}:1: not an agentlog JSONL export: the first line must be '
                               '{"agentlog": "run", ...}')


def test_a_newer_schema_version_is_refused(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace('"schema_version":1', '"schema_version":2')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(al.errors.SchemaVersionError) as info:
        import_jsonl(path, other)
    assert str(info.value) == (f"{path}:1: schema version 2 is newer than this agentlog reads (1); "
                               "pip install -U agentlog")


def test_an_empty_file_is_refused(tmp_path: Path, other: Any) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(InteropFormatError, match="empty.jsonl:1: empty file"):
        import_jsonl(path, other)


def test_an_existing_run_id_is_refused(run: Any, store: Any, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    export_jsonl(run, path)
    with pytest.raises(al.errors.RunExistsError):
        import_jsonl(path, store)
