"""A consistent view of a run's own events on disk: sealed segments plus the WAL tail.

A writer seals by renaming a segment into place and *then* replacing the WAL, so a reader
lists the segments, reads the WAL, and lists again: if the two listings agree, no seal
finished in between and the WAL it read is either the one that follows the segments, or the
old one whose events the newest segment also holds (a seal in progress, or a crash in the
middle of one). Those duplicates are recognised by seq and hash and dropped. If the listings
differ, it reads again. So a reader never sees a gap or a duplicate, without any lock.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from ..chain import Problem, ProblemKind
from ..errors import CorruptSegmentError, SchemaVersionError, StoreError
from .fsys import LOCAL, FileSystem
from .segments import (
    COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    parse_segment_name,
    read_footer,
    read_segment,
    rows_to_table,
)
from .wal import WAL_NAME, WalScan, last_row_checks, scan_wal, unpadded

__all__ = ["Segment", "SegmentCache", "Snapshot", "load_snapshot"]

_ATTEMPTS = 1000


class _Footer(NamedTuple):
    key: tuple[int, int, int]  # the file's identity when its footer was read
    meta: pq.FileMetaData
    starts: tuple[int, ...]    # the first row of each row group, then the row count


class SegmentCache:
    """What was read of sealed segments, kept: a segment never changes after its rename.

    A segment is opened by its footer (row count, row groups, schema version: checked once);
    its rows are read when asked for, by row group and column, and kept. Keyed by the file's
    identity (inode, size, mtime) as well as its name, so a file that was replaced (by a
    tool, or by someone tampering) is read again.
    """

    def __init__(self, fs: FileSystem = LOCAL) -> None:
        self.fs = fs
        """Where the segments are read from."""
        self._tables: dict[str, tuple[tuple[int, int, int], pa.Table]] = {}
        self._footers: dict[str, _Footer] = {}
        self._chunks: dict[tuple[str, int, str], pa.ChunkedArray] = {}

    def _key(self, path: Path) -> tuple[int, int, int]:
        try:
            return self.fs.identity(path)
        except FileNotFoundError:
            raise CorruptSegmentError(str(path), "the segment disappeared while reading") from None

    def footer(self, path: Path) -> _Footer:
        """The segment's footer, checked (schema version, columns).

        Raises:
            CorruptSegmentError, SchemaVersionError: see :func:`read_footer`.
        """
        key = self._key(path)
        hit = self._footers.get(path.name)
        if hit is not None and hit.key == key:
            return hit
        meta = read_footer(path, self.fs)
        starts = [0]
        for i in range(meta.num_row_groups):
            starts.append(starts[-1] + meta.row_group(i).num_rows)
        footer = _Footer(key, meta, tuple(starts))
        self._footers[path.name] = footer
        for old in [k for k in list(self._chunks) if k[0] == path.name]:  # list(): one step, as a read-ahead thread may add keys
            del self._chunks[old]
        return footer

    def read(self, path: Path) -> pa.Table:
        """The table of a segment file: put together from its row groups if every column of
        every group was read already (iterating over a run reads them all), else read whole.

        Raises:
            CorruptSegmentError, SchemaVersionError: see :func:`read_segment`.
        """
        key = self._key(path)
        hit = self._tables.get(path.name)
        if hit is not None and hit[0] == key:
            return hit[1]
        table = self._from_groups(path, key)
        if table is None:
            table = read_segment(path, self.fs)
        self._tables[path.name] = (key, table)
        return table

    def _from_groups(self, path: Path, key: tuple[int, int, int]) -> pa.Table | None:
        """The segment's table from the row groups already read (checked as they were read,
        as :func:`read_segment` checks a whole file), or ``None`` if one is missing."""
        footer = self._footers.get(path.name)
        if footer is None or footer.key != key:  # never read by group, or the file was replaced
            return None
        chunks = self._chunks
        groups = range(len(footer.starts) - 1)
        try:
            arrays = [pa.chunked_array([c for g in groups for c in chunks[(path.name, g, name)].chunks],
                                       type=SCHEMA.field(name).type) for name in COLUMNS]
        except KeyError:
            return None
        return pa.Table.from_arrays(arrays, schema=SCHEMA)

    def rows(self, path: Path, lo: int, hi: int, columns: tuple[str, ...] | None) -> pa.Table:
        """Rows ``lo <= i < hi`` of ``columns`` (all if None) of a segment: from its table if
        that was read whole, else from the row groups that hold them (each read once).

        Raises:
            CorruptSegmentError, SchemaVersionError: the file cannot be read, or changed.
        """
        names = COLUMNS if columns is None else columns
        hit = self._tables.get(path.name)
        if hit is not None and hit[0] == self._key(path):
            table = hit[1]
            return (table if columns is None else table.select(list(names))).slice(lo, hi - lo)
        footer = self.footer(path)
        starts = footer.starts
        first = max(0, bisect_right(starts, lo) - 1)
        last = min(len(starts) - 2, bisect_right(starts, max(lo, hi - 1)) - 1)
        groups = range(first, last + 1)
        chunks = self._chunks
        missing = [name for name in names if any((path.name, g, name) not in chunks for g in groups)]
        if missing:
            self._read_groups(path, footer, groups, missing)
        arrays = [pa.chunked_array([c for g in groups for c in chunks[(path.name, g, name)].chunks],
                                   type=SCHEMA.field(name).type) for name in names]
        table = pa.Table.from_arrays(arrays, schema=pa.schema([SCHEMA.field(n) for n in names]))
        return table.slice(lo - starts[first], hi - lo)

    def _read_groups(self, path: Path, footer: _Footer, groups: range, names: list[str]) -> None:
        try:
            arrow = self.fs.arrow
            with pq.ParquetFile(path if arrow is None else str(path), metadata=footer.meta,
                                filesystem=arrow) as f:
                table = f.read_row_groups(list(groups), columns=names, use_threads=False)
            table.validate(full=True)  # invalid UTF-8 in a string column, a broken offset
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptSegmentError(str(path), f"cannot read the Parquet file ({exc})") from None
        if self._key(path) != footer.key:
            raise CorruptSegmentError(str(path), "the segment changed while it was being read")
        for name in names:
            column = _as_schema(table.column(name), name, path)
            offset = 0
            for g in groups:
                n = footer.starts[g + 1] - footer.starts[g]
                self._chunks[(path.name, g, name)] = column.slice(offset, n)
                offset += n


def _as_schema(column: pa.ChunkedArray, name: str, path: Path) -> pa.ChunkedArray:
    field = SCHEMA.field(name)
    if not field.nullable and column.null_count:
        raise CorruptSegmentError(str(path), f"column {name} holds {column.null_count} null value(s); "
                                             f"schema version {SCHEMA_VERSION} allows none")
    want = field.type
    if column.type == want:
        return column
    try:  # a segment rewritten by another tool (a plain string ``type``): cast, as read_segment does
        return column.cast(want)
    except (pa.ArrowException, ValueError) as exc:
        raise CorruptSegmentError(str(path), f"column {name} does not fit schema version "
                                             f"{SCHEMA_VERSION} ({exc})") from None


class Segment:
    """A sealed segment: its first seq from its name, its row count from its footer; its
    events read from the file on first use (only the row groups and columns asked for)."""

    __slots__ = ("_cache", "first", "path", "rows")

    def __init__(self, first: int, path: Path, rows: int, cache: SegmentCache) -> None:
        self.first = first
        """Seq of its first event (from its name)."""
        self.path = path
        """Its file."""
        self.rows = rows
        """How many events it holds (from its footer)."""
        self._cache = cache

    @property
    def end(self) -> int:
        """One past the seq of its last event."""
        return self.first + self.rows

    @property
    def table(self) -> pa.Table:
        """Its events, all columns (read once, then kept).

        Raises:
            CorruptSegmentError, SchemaVersionError: see :func:`read_segment`.
        """
        return self._cache.read(self.path)

    def slice(self, lo: int, hi: int, columns: tuple[str, ...] | None = None) -> pa.Table:
        """Its rows ``lo <= i < hi`` (offsets in the segment) of ``columns`` (all if None),
        reading only the row groups that hold them."""
        return self._cache.rows(self.path, lo, hi, columns)

    def hash_at(self, i: int) -> str:
        """The stored hash of its ``i``-th event (read from the hash column alone)."""
        return str(self._cache.rows(self.path, i, i + 1, ("hash",)).column(0)[0].as_py())


@dataclass(slots=True)
class Snapshot:
    """The run's own events at one moment (without a fork's parent prefix)."""

    start: int
    """Seq of the run's first own event (``fork seq + 1`` for a fork, else 0)."""
    prev: str
    """The hash before ``start`` (the parent's hash at the fork seq, or GENESIS)."""
    segments: list[Segment]
    """Sealed segments in seq order."""
    tail: list[tuple[Any, ...]]
    """WAL rows after the segments, as row tuples."""
    wal_path: Path
    """The WAL file."""
    wal_data: bytes
    """The bytes of the WAL as read."""
    scan: WalScan
    """The parsed WAL."""
    keep_from: int
    """Index in ``scan.rows`` of the first row not already in a segment."""
    conflicts: list[tuple[Any, ...]] = field(default_factory=list)
    """WAL rows whose seq is in a segment but whose hash differs."""
    problems: list[Problem] = field(default_factory=list)
    """Lenient loads only: what could not be read."""
    _tail_table: pa.Table | None = None

    @property
    def end(self) -> int:
        """One past the last seq (the run's length, prefix included)."""
        if self.tail:
            return int(self.tail[-1][0]) + 1
        return self.segments[-1].end if self.segments else self.start

    @property
    def head(self) -> str:
        """The last stored hash."""
        if self.tail:
            return str(self.tail[-1][13])
        if self.segments:
            last = self.segments[-1]
            return last.hash_at(last.rows - 1)
        return self.prev

    @property
    def own_count(self) -> int:
        """Events held by this run's own files."""
        return sum(s.rows for s in self.segments) + len(self.tail)

    def tail_table(self) -> pa.Table:
        """The WAL tail as a table in the schema (built once)."""
        if self._tail_table is None:
            self._tail_table = rows_to_table(self.tail)
        return self._tail_table

    def hash_at(self, seq: int) -> str | None:
        """The stored hash of an own seq, or ``prev`` for ``start - 1``; ``None`` if unknown."""
        if seq == self.start - 1:
            return self.prev
        for seg in self.segments:
            if seg.first <= seq < seg.end:
                return seg.hash_at(seq - seg.first)
        for row in self.tail:
            if row[0] == seq:
                return str(row[13])
        return None


def list_segments(run_dir: Path, fs: FileSystem = LOCAL) -> list[tuple[int, str]]:
    """``(first seq, name)`` of the segment files, in seq order."""
    found = []
    for name in fs.listdir(run_dir):
        first = parse_segment_name(name)
        if first is not None:
            found.append((first, name))
    found.sort()
    return found


def load_snapshot(run_dir: Path, *, start: int, prev: str, cache: SegmentCache,
                  strict: bool = True) -> Snapshot:
    """Read a consistent view of the run's own files.

    Args:
        run_dir: the run's folder.
        start: seq of the run's first own event.
        prev: the hash before ``start``.
        cache: where sealed segment tables are kept.
        strict: raise on unreadable files; otherwise record them in ``problems`` (verify).

    Raises:
        CorruptSegmentError, SchemaVersionError, CorruptWALError: in strict mode.
    """
    wal_path = run_dir / WAL_NAME
    fs = cache.fs
    for _ in range(_ATTEMPTS):
        before = list_segments(run_dir, fs)
        try:
            data = unpadded(fs.read_bytes(wal_path))  # an open writer's zeros are not lines
        except FileNotFoundError:
            data = b""
        if fs.remote:  # pushed runs hold sealed segments only: nothing seals under a reader
            break
        if list_segments(run_dir, fs) == before:
            break
    else:  # pragma: no cover - a writer sealing faster than we can list
        raise StoreError(f"{run_dir}: the run kept changing while being read; try again")

    problems: list[Problem] = []
    segments: list[Segment] = []
    for first, name in before:
        path = run_dir / name
        try:
            if strict:  # the footer now (a damaged or newer file is refused here), rows on use
                rows = cache.footer(path).meta.num_rows
            else:  # verify: every file read now, and what cannot be read reported
                rows = cache.read(path).num_rows
            segments.append(Segment(first, path, rows, cache))
        except (CorruptSegmentError, SchemaVersionError) as exc:
            if strict:
                raise
            kind = (ProblemKind.SCHEMA_VERSION if isinstance(exc, SchemaVersionError)
                    else ProblemKind.UNREADABLE)
            problems.append(Problem(kind=kind, seq=first, message=str(exc)))

    scan = scan_wal(data, str(wal_path), strict=strict)
    snap = Snapshot(start, prev, segments, [], wal_path, data, scan, 0, [], problems)
    sealed_end = segments[-1].end if segments else start
    keep = 0
    for row in scan.rows:  # a crash (or a seal) between segment rename and WAL rotation
        if row[0] >= sealed_end:
            break
        if snap.hash_at(row[0]) != row[13]:
            snap.conflicts.append(row)
        keep += 1
    if not scan.torn and len(scan.rows) > keep and not last_row_checks(scan, snap.hash_at):
        scan = snap.scan = scan.drop_last()
    snap.keep_from = keep
    snap.tail = scan.rows[keep:]
    return snap
