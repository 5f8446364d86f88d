"""Events read back equal what emit returned, in every column; the files are what they claim."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from _store_helpers import FixedClock, make_run

from agentlog.chain import GENESIS, chain_hash, event_body
from agentlog.events import BlobRef
from agentlog.store import SCHEMA, Store
from agentlog.store.segments import SCHEMA_VERSION_KEY

EVENTS = [
    {"type": "x.started", "payload": {"input": "héllo ✓ 日本語 🙂"}},
    {"type": "x.response", "payload": {"content": "ok", "n": [0.1, 1e-300, 2**62, -(2**70)]},
     "actor": "agent-Ω", "caused_by": 0, "span_id": "span-1", "model": "gpt-x",
     "input_tokens": 2**62, "output_tokens": 0, "cached_tokens": -1, "cost_usd": 0.1,
     "duration_ms": 1234.5},
    {"type": "note", "payload": {}, "actor": None, "caused_by": None, "span_id": None,
     "model": None, "input_tokens": None, "output_tokens": None, "cached_tokens": None,
     "cost_usd": None, "duration_ms": None},
    {"type": "x.result", "payload": {"nested": {"deep": [{"x": None, "t": True, "f": False}]},
                                        "quote": "\"\\\n\t\u0001"},
     "cost_usd": 0.0, "duration_ms": 0.0},
    {"type": "x.custom", "payload": {"k": "v"}, "model": "m", "input_tokens": 1,
     "output_tokens": 2, "cached_tokens": 3, "cost_usd": 3, "duration_ms": 7},
]


def record(store: Store, run_id: str = "rt", **kwargs: object) -> list:
    w = store.create_run(run_id=run_id, clock=FixedClock(), **kwargs)  # type: ignore[arg-type]
    emitted = [w.emit(**e) for e in EVENTS]  # type: ignore[arg-type]
    w.close()
    return emitted


@pytest.mark.parametrize("segment_events", [2, 65536])
def test_events_read_back_equal_what_emit_returned(store: Store, segment_events: int) -> None:
    emitted = record(store, segment_events=segment_events)
    run = store.run("rt")
    assert list(run.iter_events()) == emitted
    assert [run.event(i) for i in range(len(emitted))] == emitted
    assert run.event(1).input_tokens == 2**62 and run.event(1).cost_usd == 0.1
    assert run.event(1).payload["n"] == [0.1, 1e-300, 2**62, -(2**70)]
    assert run.event(0).payload["input"] == "héllo ✓ 日本語 🙂"
    assert run.event(3).payload["quote"] == "\"\\\n\t\u0001"


def test_usage_fields_are_coerced_to_column_types(store: Store) -> None:
    emitted = record(store)
    e = emitted[4]
    assert (type(e.cost_usd), type(e.duration_ms), e.cost_usd) == (float, float, 3.0)
    assert type(e.input_tokens) is int


def test_every_nullable_column_holds_none(store: Store) -> None:
    record(store)
    row = store.run("rt").table().slice(2, 1).to_pylist()[0]
    nullable = [f.name for f in SCHEMA if f.nullable]
    assert nullable == ["actor", "caused_by", "span_id", "model", "input_tokens", "output_tokens",
                        "cached_tokens", "cost_usd", "duration_ms"]
    assert all(row[name] is None for name in nullable)


def test_segment_schema_metadata_and_compression(store: Store) -> None:
    record(store)
    path = store.runs_path / "run_id=rt" / "events-000000000000.parquet"
    table = pq.read_table(path)
    assert table.schema.equals(SCHEMA, check_metadata=False)
    assert [str(f.type) for f in table.schema] == [
        "int64", "dictionary<values=string, indices=int32, ordered=0>", "string", "int64",
        "string", "timestamp[us, tz=UTC]", "string", "string", "int64", "int64", "int64",
        "double", "double", "string"]
    assert [f.name for f in table.schema if not f.nullable] == ["seq", "type", "ts", "payload", "hash"]
    meta = pq.read_metadata(path)
    assert meta.metadata[SCHEMA_VERSION_KEY.encode()] == b"1"
    assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {"ZSTD"}
    assert "run_id" not in table.column_names
    assert json.loads((path.parent / "run.json").read_text())["schema_version"] == 1


def test_hashes_recompute_from_the_parquet_rows(store: Store) -> None:
    emitted = record(store, segment_events=2)
    files = sorted((store.runs_path / "run_id=rt").glob("events-*.parquet"))
    assert [f.name for f in files] == ["events-000000000000.parquet", "events-000000000002.parquet",
                                       "events-000000000004.parquet"]
    rows = pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()
    prev = GENESIS
    for row, event in zip(rows, emitted, strict=True):
        ts = int(row["ts"].timestamp() * 1_000_000)
        fields = {k: row[k] for k in ("actor", "caused_by", "span_id", "model", "input_tokens",
                                      "output_tokens", "cached_tokens", "cost_usd", "duration_ms")}
        body = event_body(seq=row["seq"], type=row["type"], payload_json=row["payload"], ts=ts, **fields)
        prev = chain_hash(prev, body)
        assert prev == row["hash"] == event.hash
    assert store.run("rt").head == prev == json.loads(
        (store.runs_path / "run_id=rt" / "run.json").read_text())["head"]


def test_payload_column_is_canonical_json_with_blob_refs(store: Store) -> None:
    w = store.create_run(run_id="b", blob_threshold=10)
    ref = w.put_blob(b"\x00\x01", "application/x-thing")
    e = w.emit("note", {"long": "x" * 11, "raw": b"abc", "deep": [{"r": ref}], "short": "x" * 10})
    w.close()
    text = store.run("b").table().column("payload")[0].as_py()
    obj = json.loads(text)
    assert text == json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert obj["short"] == "x" * 10
    assert obj["long"] == {"$blob": e.payload["long"].digest, "media_type": "text/plain; charset=utf-8",
                           "size": 11}
    assert obj["raw"]["media_type"] == "application/octet-stream"
    assert obj["deep"][0]["r"] == ref.to_json()


def test_nested_blobs_read_back_as_attached_blobrefs(store: Store) -> None:
    w = store.create_run(run_id="nb", blob_threshold=8)
    page = "<html>" + "p" * 100 + "</html>"
    e = w.emit("x.response", {"body": page, "parts": [{"img": b"\x89PNG"}, {"t": "é" * 5}]})
    w.close()
    back = store.run("nb").event(0)
    assert back == e
    body = back.payload["body"]
    assert isinstance(body, BlobRef) and body.text() == page
    assert back.payload["parts"][0]["img"].read_bytes() == b"\x89PNG"
    # "é" * 5 is 10 UTF-8 bytes: over the threshold of 8 though only 5 characters
    assert back.payload["parts"][1]["t"].text() == "é" * 5


def test_live_run_reads_segments_and_wal(store: Store) -> None:
    w = make_run(store, 10, segment_events=4, close=False)
    run = w.run
    assert len(run) == 10 and [e.seq for e in run.iter_events(3, 9)] == list(range(3, 9))
    assert run.table().num_rows == 10
    w.emit("note", {})
    assert len(run) == 10 and len(run.refresh()) == 11
    w.close()


def test_iter_events_ranges(store: Store) -> None:
    run = make_run(store, 20, segment_events=6)
    assert [e.seq for e in run.iter_events()] == list(range(20))
    assert [e.seq for e in run.iter_events(5, 13)] == list(range(5, 13))
    assert [e.seq for e in run.iter_events(18, 99)] == [18, 19]
    assert list(run.iter_events(7, 7)) == []
    with pytest.raises(ValueError):
        list(run.iter_events(-1))


def test_runs_folder_is_one_hive_dataset(store: Store) -> None:
    make_run(store, 5, run_id="alpha", segment_events=2)
    make_run(store, 3, run_id="beta")
    w = make_run(store, 4, run_id="gamma", segment_events=3, close=False)  # 3 sealed + 1 in WAL
    runs = store.runs_path
    # run.json and wal.jsonl sit beside the segments, so pyarrow must skip non-Parquet files.
    table = ds.dataset(runs, partitioning="hive", exclude_invalid_files=True).to_table()
    counts = {r["run_id"]: r["seq_count"]
              for r in table.group_by("run_id").aggregate([("seq", "count")]).to_pylist()}
    assert counts == {"alpha": 5, "beta": 3, "gamma": 3}
    assert store.dataset().to_table().num_rows == 11
    assert store.dataset().schema.field("run_id").type == pa.string()
    got = duckdb.sql(f"select run_id, count(*) from read_parquet('{runs}/*/events-*.parquet', "
                     "hive_partitioning=true) group by run_id order by run_id").fetchall()
    assert got == [("alpha", 5), ("beta", 3), ("gamma", 3)]
    w.close()


def test_table_to_pandas(store: Store) -> None:
    run = make_run(store, 3)
    df = run.table().to_pandas()
    assert list(df.columns) == list(SCHEMA.names)
    assert str(df["ts"].dtype) == "datetime64[us, UTC]"
    assert list(df["seq"]) == [0, 1, 2]


def test_byte_identical_rerecording(tmp_path: Path) -> None:
    def rec(root: Path) -> dict[str, bytes]:
        st = Store(root)
        w = st.create_run(run_id="same", name="twice", tags={"k": "v"}, clock=FixedClock(),
                          segment_events=3)
        for i in range(8):
            w.emit("note", {"i": i, "page": "x" * 20000, "raw": bytes([i])}, cost_usd=0.1 * i)
        w.close()
        return {p: b for p, b in _files(root).items()}

    first, second = rec(tmp_path / "a"), rec(tmp_path / "b")
    assert sorted(first) == sorted(second)
    assert "runs/run_id=same/wal.jsonl" not in first
    assert {p for p in first if p.endswith(".parquet")} == {
        f"runs/run_id=same/events-{n:012d}.parquet" for n in (0, 3, 6)}
    assert first == second


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_integers_beyond_64_bits_read_back_exactly(tmp_path: Path) -> None:
    big = 12345678901234567890123
    with Store(tmp_path).create_run(run_id="big", durability="none") as w:
        for i in range(3):
            w.emit("x.big", {"n": big + i, "small": i})
    run = Store(tmp_path).run("big")
    got = [e.payload["n"] for e in run.iter_events()]
    assert got == [big, big + 1, big + 2] and all(type(n) is int for n in got)
