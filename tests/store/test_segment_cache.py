"""A run's whole table after iterating over it is put together from the row groups read then,
not read from the file again; a file replaced since is read again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _store_helpers import make_run

from agentlog.errors import CorruptSegmentError
from agentlog.store import Store
from agentlog.store.segments import ROW_GROUP, read_segment


def _one_segment(store: Store) -> tuple[object, Path]:
    run = make_run(store, ROW_GROUP + 1000, segment_events=ROW_GROUP + 1000,  # two row groups, one segment
                   durability="none")
    [segment] = sorted(run.path.glob("events-*.parquet"))
    return run, segment


def _spoil_in_place(path: Path) -> None:
    """Overwrite the file's bytes, keeping its identity (inode, size, mtime)."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.write(b"\0" * st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_the_table_after_iterating_comes_from_the_groups_read(store: Store) -> None:
    run, segment = _one_segment(store)
    expected = read_segment(segment)
    fresh = store.run(run.id)
    assert sum(1 for _ in fresh.iter_events()) == expected.num_rows  # reads every group, every column
    _spoil_in_place(segment)  # a read of the file now would fail
    table = fresh.table()
    assert table.schema.equals(expected.schema, check_metadata=True)
    assert table.equals(expected)


def test_a_table_with_groups_not_read_is_read_from_the_file(store: Store) -> None:
    run, segment = _one_segment(store)
    fresh = store.run(run.id)
    assert [e.seq for e in fresh.iter_events(0, 3)] == [0, 1, 2]  # the first group only
    _spoil_in_place(segment)
    with pytest.raises(CorruptSegmentError):
        fresh.table()


def test_a_file_replaced_after_iterating_is_read_again(store: Store) -> None:
    run, segment = _one_segment(store)
    fresh = store.run(run.id)
    for _ in fresh.iter_events():
        pass
    spoiled = segment.with_name("spoiled")
    spoiled.write_bytes(b"\0" * segment.stat().st_size)
    os.replace(spoiled, segment)  # another inode
    with pytest.raises(CorruptSegmentError):
        fresh.table()


def test_column_values_are_to_pylist_for_every_column_and_slice(store: Store) -> None:
    import pyarrow as pa

    from agentlog.store.segments import column_values

    run = make_run(store, 50, payload=lambda i: {"i": i}, durability="none")
    for batch in run.table().to_batches(max_chunksize=7):  # slices at offsets
        for column in batch.columns:
            assert column_values(column) == column.to_pylist()
    types = pa.array(["note", None, "tool.call", "note"]).dictionary_encode()
    assert column_values(types) == ["note", None, "tool.call", "note"]
    assert column_values(types.slice(2)) == ["tool.call", "note"]
