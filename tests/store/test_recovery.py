"""What a crash or a damaged file leaves, and how readers and a reopening writer deal with it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _store_helpers import make_run, tree_bytes

from agentlog.errors import CorruptSegmentError, CorruptWALError, SchemaVersionError
from agentlog.store import Store, TornWALWarning
from agentlog.store.segments import SCHEMA_VERSION_KEY
from agentlog.store.wal import unpadded


def crashed(store: Store, n: int, *, run_id: str = "c", segment_events: int = 65536) -> Path:
    """A run of n events whose writer died: lock released, WAL left as it was."""
    w = make_run(store, n, run_id=run_id, segment_events=segment_events, close=False)
    w._wal.close()
    w._lock.release()
    return store.runs_path / f"run_id={run_id}"


def test_torn_last_line_is_moved_aside_by_the_writer(store: Store) -> None:
    run_dir = crashed(store, 5)
    wal = run_dir / "wal.jsonl"
    data = wal.read_bytes()
    torn = b'{"hash":"abc","event":{"actor":nu'
    wal.write_bytes(data + torn)
    with pytest.warns(TornWALWarning, match=r"wal\.jsonl: torn last line 6 \(33 bytes\) moved to .*wal\.torn-1"):
        w = store.writer("c")
    assert (run_dir / "wal.torn-1").read_bytes() == torn
    assert unpadded(wal.read_bytes()) == data  # the rest kept (and zeros ahead of the next line)
    assert w.seq == 5
    w.emit("note", {"after": True})
    w.close()
    run = store.run("c")
    assert len(run) == 6 and run.verify().ok


def test_a_second_torn_line_goes_to_torn_2(store: Store) -> None:
    run_dir = crashed(store, 2)
    (run_dir / "wal.torn-1").write_bytes(b"old")
    with open(run_dir / "wal.jsonl", "ab") as f:
        f.write(b"{partial")
    with pytest.warns(TornWALWarning):
        store.writer("c").close()
    assert (run_dir / "wal.torn-2").read_bytes() == b"{partial"
    assert (run_dir / "wal.torn-1").read_bytes() == b"old"


def test_a_complete_last_line_whose_hash_fails_is_torn(store: Store) -> None:
    run_dir = crashed(store, 3)
    wal = run_dir / "wal.jsonl"
    lines = wal.read_bytes().splitlines(keepends=True)
    bad = lines[-1].replace(b'"i":2', b'"i":7')
    wal.write_bytes(b"".join(lines[:-1]) + bad)
    with pytest.warns(TornWALWarning, match="line 3"):
        report = store.run("c").verify()
    # a whole line that does not check is damage, not an interrupted write: verify says so
    assert [(p.kind, p.seq) for p in report.problems] == [("chain_broken", 2)]
    with pytest.warns(TornWALWarning):
        w = store.writer("c")
    assert (run_dir / "wal.torn-1").read_bytes() == bad and w.seq == 2
    w.close()


def test_reader_ignores_a_torn_line_and_warns(store: Store) -> None:
    run_dir = crashed(store, 4)
    wal = run_dir / "wal.jsonl"
    with open(wal, "ab") as f:
        f.write(b'{"hash":"')
    before = tree_bytes(run_dir)
    run = store.run("c")
    with pytest.warns(TornWALWarning, match="line 5 is torn"):
        assert [e.seq for e in run.iter_events()] == [0, 1, 2, 3]
    with pytest.warns(TornWALWarning):
        assert run.refresh().verify().ok  # an interrupted write is not damage
    assert tree_bytes(run_dir) == before  # readers change nothing


def test_no_warning_while_a_writer_is_live(store: Store) -> None:
    w = make_run(store, 3, run_id="live", close=False)
    with open(store.runs_path / "run_id=live" / "wal.jsonl", "ab") as f:
        f.write(b'{"hash":"0')  # as if the writer were in the middle of a line
    assert len(store.run("live")) == 3  # filterwarnings=error: a warning would fail this
    w._wal.close()
    w._lock.release()


def test_garbage_in_the_middle_is_corruption_and_nothing_changes(store: Store) -> None:
    run_dir = crashed(store, 5)
    wal = run_dir / "wal.jsonl"
    lines = wal.read_bytes().splitlines(keepends=True)
    lines[2] = b"garbage\n"
    wal.write_bytes(b"".join(lines))
    before = tree_bytes(run_dir)
    with pytest.raises(CorruptWALError) as info:
        store.writer("c")
    assert (info.value.path, info.value.line) == (str(wal), 3)
    assert str(info.value).startswith(f"{wal}:3: not a well-formed WAL line")
    with pytest.raises(CorruptWALError):
        len(store.run("c"))
    assert tree_bytes(run_dir) == before
    report = store.run("c").verify()
    assert [(p.kind, p.seq) for p in report.problems][:1] == [("unreadable", 2)]
    assert not report.ok and report.first_bad_seq == 2


def test_empty_wal_is_fine(store: Store) -> None:
    run_dir = crashed(store, 4, segment_events=2)  # two segments, WAL rotated and empty
    assert (run_dir / "wal.jsonl").read_bytes() == b""
    assert len(store.run("c")) == 4
    w = store.writer("c")
    w.emit("note", {})
    w.close()
    assert store.run("c").verify().ok


def test_duplicates_left_by_a_crash_mid_seal_are_dropped(store: Store) -> None:
    w = make_run(store, 5, run_id="mid", close=False)
    run_dir = store.runs_path / "run_id=mid"
    wal_copy = (run_dir / "wal.jsonl").read_bytes()
    w.close()
    # the crash came after the segment's rename, before the WAL was removed
    (run_dir / "wal.jsonl").write_bytes(wal_copy)
    run = store.run("mid")
    assert [e.seq for e in run.iter_events()] == [0, 1, 2, 3, 4]
    assert run.table().num_rows == 5 and run.verify().ok
    w2 = store.writer("mid")
    assert w2.seq == 5 and unpadded((run_dir / "wal.jsonl").read_bytes()) == b""
    w2.emit("note", {"i": 5})
    w2.close()
    run = store.run("mid")
    assert [e.seq for e in run.iter_events()] == list(range(6)) and run.verify().ok


def test_a_wal_overlapping_a_segment_with_other_hashes_is_reported(store: Store, tmp_path: Path) -> None:
    w = make_run(store, 3, run_id="ov", close=False)
    run_dir = store.runs_path / "run_id=ov"
    w.close()
    other = Store(tmp_path / "other")
    ow = make_run(other, 3, run_id="ov", close=False, payload=lambda i: {"other": i})
    (run_dir / "wal.jsonl").write_bytes((other.runs_path / "run_id=ov" / "wal.jsonl").read_bytes())
    ow.close()
    run = store.run("ov")
    assert len(run) == 3  # the sealed events win
    report = run.verify()
    assert [(p.kind, p.seq) for p in report.problems] == [("seq_duplicate", 0), ("seq_duplicate", 1),
                                                          ("seq_duplicate", 2)]


def test_truncated_segment(store: Store) -> None:
    make_run(store, 10, run_id="t", segment_events=4)
    seg = store.runs_path / "run_id=t" / "events-000000000004.parquet"
    seg.write_bytes(seg.read_bytes()[:-100])
    with pytest.raises(CorruptSegmentError) as info:
        store.run("t").table()
    assert info.value.path == str(seg) and str(seg) in str(info.value)
    report = store.run("t").verify()
    assert report.problems[0].kind == "unreadable" and report.first_bad_seq == 4


def test_a_segment_whose_footer_names_a_column_in_bad_utf8_is_unreadable_not_a_crash(store: Store) -> None:
    """Found by ``bench/fuzz.py``: pyarrow reads such a footer with a UnicodeDecodeError, which
    the footer-only read (the store's open) let through."""
    make_run(store, 10, run_id="u", segment_events=4)
    seg = store.runs_path / "run_id=u" / "events-000000000004.parquet"
    data = seg.read_bytes()
    at = data.find(b"span_id")  # the column's name in the footer's schema
    seg.write_bytes(data[:at] + b"\xe3" + data[at + 1:])
    with pytest.raises(CorruptSegmentError, match="cannot read the Parquet file") as info:
        len(store.run("u"))
    assert info.value.path == str(seg)
    reports = store.verify(progress=False)  # the whole store's check, which raised before
    assert reports["u"].problems[0].kind == "unreadable" and reports["u"].first_bad_seq == 4


def _set_segment_version(path: Path, version: str) -> None:
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[SCHEMA_VERSION_KEY.encode()] = version.encode()
    pq.write_table(table.replace_schema_metadata(meta), path, compression="zstd")


def test_newer_segment_schema_version_is_refused(store: Store) -> None:
    make_run(store, 3, run_id="nv")
    seg = store.runs_path / "run_id=nv" / "events-000000000000.parquet"
    _set_segment_version(seg, "2")
    with pytest.raises(SchemaVersionError) as info:
        len(store.run("nv"))
    assert str(info.value) == (f"{seg}: schema version 2 is newer than this agentlog reads (1); "
                               "pip install -U agentlog")
    report = store.run("nv").verify()
    assert report.problems[0].kind == "schema_version" and report.first_bad_seq == 0


def test_newer_run_json_schema_version_is_refused(store: Store) -> None:
    make_run(store, 1, run_id="nj")
    path = store.runs_path / "run_id=nj" / "run.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps(dict(meta, schema_version=3)))
    with pytest.raises(SchemaVersionError) as info:
        store.run("nj")
    assert info.value.path == str(path) and info.value.found == 3
    with pytest.raises(SchemaVersionError):
        store.writer("nj")
    report = store.verify(progress=False)["nj"]
    assert [p.kind for p in report.problems] == ["schema_version"] and not report.ok


def test_segment_without_agentlog_metadata(store: Store) -> None:
    make_run(store, 2, run_id="nm")
    seg = store.runs_path / "run_id=nm" / "events-000000000000.parquet"
    pq.write_table(pq.read_table(seg).replace_schema_metadata(None), seg)
    with pytest.raises(CorruptSegmentError, match="not an agentlog segment"):
        store.run("nm").table()


def test_segment_with_plain_string_type_still_reads(store: Store) -> None:
    make_run(store, 2, run_id="ps")
    seg = store.runs_path / "run_id=ps" / "events-000000000000.parquet"
    table = pq.read_table(seg)
    i = table.schema.get_field_index("type")
    table = table.set_column(i, pa.field("type", pa.string()), table.column("type").cast(pa.string()))
    pq.write_table(table, seg)
    assert store.run("ps").verify().ok


def test_leftover_temp_files_are_ignored(store: Store) -> None:
    run_dir = crashed(store, 3)
    (run_dir / ".events-000000000000.parquet.tmp-1-ab").write_bytes(b"half a segment")
    (run_dir / ".wal.jsonl.tmp-1-cd").write_bytes(b"")
    shutil.copy(run_dir / "run.json", store.runs_path / ".run_id=x.tmp-1-ef")
    assert store.list_runs() == ["c"]
    assert len(store.run("c")) == 3
    w = store.writer("c")
    w.close()
    assert store.run("c").verify().ok
