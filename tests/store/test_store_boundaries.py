"""Readers validate what they read: a WAL line or a segment row with a field of the wrong type
is a documented error naming the file (the leaks of issue 14, item 4, stay fixed)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _store_helpers import make_run

from agentlog.errors import CorruptSegmentError, CorruptWALError
from agentlog.store import Store
from agentlog.store.wal import decode_line

_LINE = ('{"hash":"' + "0" * 64 + '","event":{"actor":%(actor)s,"cached_tokens":null,"caused_by":null,'
         '"cost_usd":%(cost)s,"duration_ms":null,"input_tokens":null,"model":null,"output_tokens":null,'
         '"payload":{},"seq":%(seq)s,"span_id":null,"ts":%(ts)s,"type":%(type)s}}')
OK = {"actor": "null", "cost": "null", "seq": "1", "ts": "0", "type": '"x"'}


@pytest.mark.parametrize(("field", "value"), [
    ("seq", "[1]"), ("seq", "-1"), ("seq", "true"), ("seq", "99999999999999999999999"),
    ("actor", "5"), ("type", "7"), ("cost", "[1]"), ("cost", "1e400"), ("cost", "NaN"),
    ("cost", "9" * 400), ("ts", "1e400"), ("ts", '"0"'),
])
def test_a_wal_line_with_a_field_of_the_wrong_type_is_not_a_wal_line(field: str, value: str) -> None:
    line = (_LINE % {**OK, field: value}).encode()
    with pytest.raises(ValueError):
        decode_line(line)
    assert decode_line((_LINE % OK).encode())[0] == 1  # the same line, well typed, reads


def test_such_a_line_in_the_middle_of_a_wal_is_a_corrupt_wal(store: Store) -> None:
    w = make_run(store, 4, close=False)
    w._wal.close()
    w._lock.release()
    wal = store.runs_path / "run_id=run-a" / "wal.jsonl"
    lines = wal.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"actor":null', b'"actor":5')
    wal.write_bytes(b"".join(lines))
    with pytest.raises(CorruptWALError, match=r"wal.jsonl:2: not a well-formed WAL line \(actor must be"):
        len(store.run("run-a"))
    assert store.run("run-a").verify().problems[0].seq == 1


def test_a_segment_with_a_null_seq_or_hash_is_a_corrupt_segment(store: Store) -> None:
    make_run(store, 5)
    path = store.runs_path / "run_id=run-a" / "events-000000000000.parquet"
    table = pq.read_table(path)
    loose = pa.schema([f.with_nullable(True) for f in table.schema], metadata=table.schema.metadata)
    rows = table.to_pylist()
    rows[2]["hash"] = None
    pq.write_table(pa.Table.from_pylist(rows, schema=loose), path)
    with pytest.raises(CorruptSegmentError, match="column hash holds 1 null value"):
        list(store.run("run-a").iter_events())  # a length needs only the footer: reading events finds it
    report = store.run("run-a").verify()
    assert not report.ok and "with null values" in report.problems[0].message
