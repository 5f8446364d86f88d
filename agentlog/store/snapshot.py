"""A consistent view of a run's own events on disk: sealed segments plus the WAL tail.

A writer seals by renaming a segment into place and *then* replacing the WAL, so a reader
lists the segments, reads the WAL, and lists again: if the two listings agree, no seal
finished in between and the WAL it read is either the one that follows the segments, or the
old one whose events the newest segment also holds (a seal in progress, or a crash in the
middle of one). Those duplicates are recognised by seq and hash and dropped. If the listings
differ, it reads again. So a reader never sees a gap or a duplicate, without any lock.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..chain import Problem, ProblemKind
from ..errors import CorruptSegmentError, SchemaVersionError, StoreError
from .segments import parse_segment_name, read_segment, rows_to_table
from .wal import WAL_NAME, WalScan, last_row_checks, scan_wal

__all__ = ["Segment", "SegmentCache", "Snapshot", "load_snapshot"]

_ATTEMPTS = 1000


@dataclass(frozen=True, slots=True)
class Segment:
    """A sealed segment and its (immutable) table."""

    first: int
    """Seq of its first event (from its name)."""
    path: Path
    """Its file."""
    table: pa.Table
    """Its events."""

    @property
    def end(self) -> int:
        """One past the seq of its last event."""
        return self.first + int(self.table.num_rows)


class SegmentCache:
    """Tables of sealed segments, read once: a segment never changes after its rename.

    Keyed by the file's identity (inode, size, mtime) as well as its name, so a file that
    was replaced (by a tool, or by someone tampering) is read again.
    """

    def __init__(self) -> None:
        self._tables: dict[str, tuple[tuple[int, int, int], pa.Table]] = {}

    def read(self, path: Path) -> pa.Table:
        """The table of a segment file.

        Raises:
            CorruptSegmentError, SchemaVersionError: see :func:`read_segment`.
        """
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise CorruptSegmentError(str(path), "the segment disappeared while reading") from None
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        hit = self._tables.get(path.name)
        if hit is not None and hit[0] == key:
            return hit[1]
        table = read_segment(path)
        self._tables[path.name] = (key, table)
        return table


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
            return str(self.segments[-1].table.column("hash")[-1].as_py())
        return self.prev

    @property
    def own_count(self) -> int:
        """Events held by this run's own files."""
        return sum(int(s.table.num_rows) for s in self.segments) + len(self.tail)

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
                return str(seg.table.column("hash")[seq - seg.first].as_py())
        for row in self.tail:
            if row[0] == seq:
                return str(row[13])
        return None


def list_segments(run_dir: Path) -> list[tuple[int, str]]:
    """``(first seq, name)`` of the segment files, in seq order."""
    found = []
    for name in os.listdir(run_dir):
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
    for _ in range(_ATTEMPTS):
        before = list_segments(run_dir)
        try:
            with open(wal_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if list_segments(run_dir) == before:
            break
    else:  # pragma: no cover - a writer sealing faster than we can list
        raise StoreError(f"{run_dir}: the run kept changing while being read; try again")

    problems: list[Problem] = []
    segments: list[Segment] = []
    for first, name in before:
        try:
            segments.append(Segment(first, run_dir / name, cache.read(run_dir / name)))
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
