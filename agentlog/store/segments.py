"""The Parquet schema of the event table (version 1) and sealed segment files.

A segment holds a contiguous range of a run's events, is named by its first seq
(``events-000000000000.parquet``), is zstd-compressed and never changes once renamed into
place. It has no ``run_id`` column: the run is the Hive partition ``run_id=<id>`` of the
folder, so the whole ``runs/`` folder reads as one dataset.

The schema version is written in the Parquet key-value metadata (``agentlog.schema_version``);
a newer version is refused with :class:`~agentlog.errors.SchemaVersionError`.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptSegmentError, SchemaVersionError
from ._fs import fsync_dir, temp_name
from .fsys import LOCAL, FileSystem

__all__ = [
    "COLUMNS",
    "ROW_GROUP",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SCHEMA_VERSION_KEY",
    "check_schema_version",
    "column_values",
    "empty_table",
    "parse_segment_name",
    "read_footer",
    "read_segment",
    "rows_to_table",
    "segment_name",
    "write_segment",
]

#: The version of the on-disk format this agentlog writes and the newest it reads.
SCHEMA_VERSION: Final = 1
#: The Parquet key-value metadata key holding the schema version.
SCHEMA_VERSION_KEY: Final = "agentlog.schema_version"

_TEXT = pa.string()
_DICT = pa.dictionary(pa.int32(), pa.string())
_TS = pa.timestamp("us", tz="UTC")

#: The event table, in column order. Only seq, type, ts, payload and hash are required.
SCHEMA: Final = pa.schema([
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("type", _DICT, nullable=False),
    pa.field("actor", _TEXT),
    pa.field("caused_by", pa.int64()),
    pa.field("span_id", _TEXT),
    pa.field("ts", _TS, nullable=False),
    pa.field("payload", _TEXT, nullable=False),
    pa.field("model", _TEXT),
    pa.field("input_tokens", pa.int64()),
    pa.field("output_tokens", pa.int64()),
    pa.field("cached_tokens", pa.int64()),
    pa.field("cost_usd", pa.float64()),
    pa.field("duration_ms", pa.float64()),
    pa.field("hash", _TEXT, nullable=False),
], metadata={SCHEMA_VERSION_KEY: str(SCHEMA_VERSION)})

#: Column names in schema order; a row tuple has its values in this order.
COLUMNS: Final = tuple(SCHEMA.names)

ROW_GROUP: Final = 8192
"""Rows per Parquet row group in a segment: a reader that wants a few thousand events (the
fold from a checkpoint, one event) reads and decodes the groups that hold them, not the
whole segment (65,536 events by default); smaller groups would cost compression."""

_NAME = re.compile(r"events-(\d{12})\.parquet")


def segment_name(first_seq: int) -> str:
    """The file name of the segment whose first event is ``first_seq``.

    >>> segment_name(65536)
    'events-000000065536.parquet'
    """
    return f"events-{first_seq:012d}.parquet"


def parse_segment_name(name: str) -> int | None:
    """The first seq of a segment file name, or ``None`` if ``name`` is not a segment.

    >>> parse_segment_name("events-000000000007.parquet"), parse_segment_name("run.json")
    (7, None)
    """
    m = _NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def check_schema_version(found: Any, path: str | os.PathLike[str]) -> None:
    """Refuse a schema version this agentlog cannot read.

    Raises:
        SchemaVersionError: ``found`` is not a known version (newer, or not a version at all).
    """
    try:
        version = int(found)
    except (TypeError, ValueError):
        raise SchemaVersionError(str(path), found, SCHEMA_VERSION) from None
    if version != SCHEMA_VERSION or isinstance(found, bool):
        raise SchemaVersionError(str(path), found, SCHEMA_VERSION)


def rows_to_table(rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    """Build a table in :data:`SCHEMA` from row tuples in :data:`COLUMNS` order.

    The columns are assembled from their buffers (:func:`_column`), not with ``pa.array``,
    whose first call imports pandas (0.3 s or more): a writer that seals, and so every
    recording, fork or resume that closes a run, would pay it. The values are the writer's,
    already checked (ints, floats, strings or None).
    """
    if not rows:
        return empty_table()
    columns = list(zip(*rows, strict=True))
    arrays = [_column(list(values), field.type) for values, field in zip(columns, SCHEMA, strict=True)]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def _validity(values: list[Any]) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap of ``values`` (None: null) and the null count."""
    nulls = values.count(None)
    if not nulls:
        return None, 0
    bits = bytearray((len(values) + 7) // 8)
    for i, value in enumerate(values):
        if value is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return pa.py_buffer(bytes(bits)), nulls


def _column(values: list[Any], type: pa.DataType) -> pa.Array:
    """One column of :func:`rows_to_table` from its buffers (see there why)."""
    n = len(values)
    if pa.types.is_dictionary(type):
        codes: dict[Any, int] = {}
        indices = [None if v is None else codes.setdefault(v, len(codes)) for v in values]
        return pa.DictionaryArray.from_arrays(_column(indices, type.index_type),
                                              _column(list(codes), type.value_type))
    valid, nulls = _validity(values)
    if pa.types.is_string(type):
        data = [b"" if v is None else v.encode("utf-8") for v in values]
        offsets = array("i", [0])
        offsets.extend(accumulate(map(len, data)))
        return pa.Array.from_buffers(type, n, [valid, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))],
                                     null_count=nulls)
    code = "d" if pa.types.is_floating(type) else "i" if type.bit_width == 32 else "q"
    zero = 0.0 if code == "d" else 0
    numbers = array(code, values if not nulls else [zero if v is None else v for v in values])
    return pa.Array.from_buffers(type, n, [valid, pa.py_buffer(numbers)], null_count=nulls)


def column_values(column: pa.Array) -> list[Any]:
    """A column's values as a Python list; a dictionary column (``type``) decoded through its
    indices, which costs a list lookup a value instead of the scalar ``to_pylist`` makes for
    each (about 3 µs: 30 ms per 10,000 events). No compute kernel: ``pyarrow.compute`` takes
    0.1-0.3 s to import.

    >>> column_values(pa.array(["a", "b", "a"]).dictionary_encode())
    ['a', 'b', 'a']
    """
    if isinstance(column, pa.DictionaryArray) and not column.null_count:
        names = column.dictionary.to_pylist()
        return [names[i] for i in column.indices.to_pylist()]
    return column.to_pylist()  # type: ignore[no-any-return]


def empty_table() -> pa.Table:
    """A table with no rows, in :data:`SCHEMA`."""
    return SCHEMA.empty_table()


def write_segment(directory: Path, table: pa.Table, *, durable: bool = True) -> Path:
    """Seal ``table`` as a segment in ``directory``: temp file → fsync → rename → fsync dir.

    The bytes depend only on the table (no time, no random), so a run recorded twice with a
    fixed clock gives byte-identical segments.

    Returns:
        The path of the segment, named by the table's first seq.
    """
    first = table.column("seq")[0].as_py()
    final = directory / segment_name(first)
    tmp = directory / temp_name(final.name)
    try:
        pq.write_table(table, tmp, compression="zstd", row_group_size=max(min(len(table), ROW_GROUP), 1),
                       use_dictionary=["type", "actor", "span_id", "model"])
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, final)
    if durable:
        fsync_dir(directory)
    return final


def read_footer(path: Path, fs: FileSystem = LOCAL) -> pq.FileMetaData:
    """Read a sealed segment's footer (row count, row groups), checking its schema version and
    columns, without reading its rows.

    Raises:
        SchemaVersionError: the segment was written by a newer agentlog.
        CorruptSegmentError: the file is not a readable segment (truncated, wrong columns).
    """
    try:
        meta = pq.read_metadata(path if fs.arrow is None else str(path), filesystem=fs.arrow)
        schema = meta.schema.to_arrow_schema()
    except (pa.ArrowException, OSError, ValueError) as exc:  # UnicodeDecodeError: a damaged name
        raise CorruptSegmentError(str(path), f"cannot read the Parquet file ({exc})") from None
    _check_schema(schema, path)
    return meta


def _check_schema(schema: pa.Schema, path: Path) -> None:
    found = (schema.metadata or {}).get(SCHEMA_VERSION_KEY.encode())
    if found is None:
        raise CorruptSegmentError(str(path), f"no {SCHEMA_VERSION_KEY} in the Parquet metadata; "
                                             "not an agentlog segment")
    check_schema_version(found.decode("utf-8", "replace"), path)
    # A segment rewritten by another tool may differ in small ways (a plain string ``type``,
    # nullability); accept it if it casts, since verify checks the content anyway.
    if schema.names != list(COLUMNS):
        raise CorruptSegmentError(str(path), f"columns {schema.names} are not {list(COLUMNS)}")


def read_segment(path: Path, fs: FileSystem = LOCAL) -> pa.Table:
    """Read a sealed segment, checking its schema version and columns.

    Raises:
        SchemaVersionError: the segment was written by a newer agentlog.
        CorruptSegmentError: the file is not a readable segment (truncated, wrong columns).
    """
    try:  # ParquetFile, not read_table: no dataset layer (which imports pandas) for one file
        with pq.ParquetFile(path if fs.arrow is None else str(path), filesystem=fs.arrow) as f:
            table = f.read()
        table.validate(full=True)  # invalid UTF-8 in a string column, a broken offset: ~1% of a read
    except (pa.ArrowException, OSError, ValueError) as exc:  # UnicodeDecodeError: a damaged footer
        raise CorruptSegmentError(str(path), f"cannot read the Parquet file ({exc})") from None
    _check_schema(table.schema, path)
    if table.schema.equals(SCHEMA, check_metadata=False):
        return table.replace_schema_metadata(SCHEMA.metadata)
    try:
        return table.cast(SCHEMA)
    except (pa.ArrowException, ValueError) as exc:
        raise CorruptSegmentError(str(path), f"columns do not fit schema version "
                                             f"{SCHEMA_VERSION} ({exc})") from None
