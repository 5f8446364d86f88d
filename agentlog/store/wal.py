"""The write-ahead log: the run's unsealed tail, one JSON event per line.

A line is ``{"hash":"<64 hex>","event":<body>}`` followed by ``\\n``, where ``<body>`` is
exactly the text that was hashed (:func:`agentlog.chain.event_body`). So a line's hash is
checked without parsing it, and reading a line parses only the small fixed fields around the
payload, never the payload itself.

A torn last line (the process died in the middle of a write) has no newline, does not parse,
or does not hash to its stored hash; it is never silently dropped (the writer moves it aside
to ``wal.torn-<n>``). Garbage on any other line is corruption: :class:`CorruptWALError`.

While a writer with ``durability="fsync"`` or ``"batch"`` has the run open, its WAL ends in
zero bytes: the writer extends the file with zeros (and fsyncs its new size) ahead of its
lines, then writes each line over them, so a line's fsync is an ``fdatasync`` that commits no
file-system metadata (about half the cost of an fsync that grows the file). JSON text has no
NUL byte, so the first NUL is where the lines end: :func:`unpadded` cuts a trailing run of
zeros off. Bytes after the zeros are a torn tail, set aside like a torn last line: when the
zeros start where a line ended (a stray write over the zeros), or end on a page boundary (a
multiple of 4,096 bytes: the gap a power loss leaves when it keeps a page of unsynced lines
but not the one before it; the line the gap starts in is torn too). Any other NUL is garbage,
as before. The file is cut back to its lines when the writer closes (a closed run has no WAL)
or reopens it.
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..chain import chain_hash, event_body
from ..errors import CorruptWALError
from ._fs import fsync_dir, temp_name, write_atomic

__all__ = ["WAL_NAME", "Durability", "TornWALWarning", "WalAppender", "WalScan", "decode_line",
           "encode_line", "next_torn_path", "rewrite_wal", "scan_wal", "unpadded"]

WAL_NAME: Final = "wal.jsonl"
ZEROS: Final = 1 << 20
"""How far (bytes) a durable writer extends its WAL with zeros at a time, ahead of its lines."""
_TORN = re.compile(r"wal\.torn-(\d+)")
_HEAD = b'{"hash":"'
_MID = b'","event":'
_HEX = re.compile(rb"[0-9a-f]{64}")
_NOT_NUL = re.compile(rb"[^\x00]")
_PAGE = 4096
_HEAD_KEYS = ("actor", "cached_tokens", "caused_by", "cost_usd", "duration_ms", "input_tokens",
              "model", "output_tokens")
_TAIL_KEYS = ("seq", "span_id", "ts", "type")


class Durability(enum.StrEnum):
    """When an appended event is forced to disk.

    Accepts the plain string; a bad value lists the valid ones.

    >>> Durability("batch") is Durability.BATCH
    True
    >>> Durability("sometimes")
    Traceback (most recent call last):
    ...
    ValueError: durability 'sometimes' is not one of 'fsync', 'batch', 'none'
    """

    FSYNC = "fsync"
    """Each WAL line is written and fsynced before ``emit`` returns (the default); a batch
    written with ``emit_many(..., sync=False)`` (a model call's request, the live span
    processor's spans) is fsynced by the next write that syncs (the call's answer), and
    otherwise by the writer's thread at most ``HOLD_MS`` (50 ms) after it was written. The
    sync of lines is an ``fdatasync``: they are written over zeros whose file size is already
    on disk (see the module docstring)."""
    BATCH = "batch"
    """Group commit: fsync every N events or T ms, and on flush, seal and close."""
    NONE = "none"
    """Written to the OS, never fsynced: survives a process crash, not a power loss."""

    @classmethod
    def _missing_(cls, value: object) -> Durability:
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        valid = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"durability {value!r} is not one of {valid}")


class TornWALWarning(RuntimeWarning):
    """A WAL's last line was torn by a crash; it was set aside (writer) or ignored (reader)."""


# --- lines -----------------------------------------------------------------------------------


def encode_line(hash: str, body: str) -> bytes:
    """The WAL line of an event whose body is ``body`` and whose chain hash is ``hash``.

    >>> encode_line("0" * 64, "{}")[:20]
    b'{"hash":"00000000000'
    """
    return f'{{"hash":"{hash}","event":{body}}}\n'.encode()


def decode_line(line: bytes) -> tuple[Any, ...]:
    """The row tuple (in :data:`~agentlog.store.segments.COLUMNS` order) of a WAL line.

    The payload is cut out as text, not parsed; the fields around it are parsed and the body
    is rebuilt from them to make sure the line is exactly what the writer wrote.

    Args:
        line: one line without its newline.

    Raises:
        ValueError: the line is not a well-formed WAL line.
    """
    if not line.startswith(_HEAD) or line[73:83] != _MID or not line.endswith(b"}"):
        raise ValueError("not a WAL line")
    if not _HEX.fullmatch(line, 9, 73):
        raise ValueError("the hash is not 64 hex digits")
    body = line[83:-1].decode("utf-8")
    # Inside a JSON string every quote is escaped, so these two markers can only be the
    # structure of the body; the payload sits between them.
    i, j = body.find(',"payload":'), body.rfind(',"seq":')
    if i < 0 or j < i + 11:
        raise ValueError("the event has no payload")
    head, tail = json.loads(body[:i] + "}"), json.loads("{" + body[j + 1:])
    if tuple(head) != _HEAD_KEYS or tuple(tail) != _TAIL_KEYS:
        raise ValueError("the event's fields are not the schema's")
    _check_types(head, tail)
    payload = body[i + 11:j]
    if event_body(payload_json=payload, **head, **tail) != body:
        raise ValueError("the event is not in canonical form")
    return (tail["seq"], tail["type"], head["actor"], head["caused_by"], tail["span_id"],
            tail["ts"], payload, head["model"], head["input_tokens"], head["output_tokens"],
            head["cached_tokens"], head["cost_usd"], head["duration_ms"], line[9:73].decode())


_INT64 = 2**63
_TEXT_FIELDS = ("actor", "model", "span_id")
_INT_FIELDS = ("cached_tokens", "caused_by", "input_tokens", "output_tokens")


def _check_types(head: dict[str, Any], tail: dict[str, Any]) -> None:
    """Each field of a WAL line has its column's type, so the row fits the Arrow schema."""
    def is_int(v: Any) -> bool:
        return type(v) is int and -_INT64 <= v < _INT64

    if not (is_int(tail["seq"]) and tail["seq"] >= 0) or not is_int(tail["ts"]):
        raise ValueError("seq and ts must be int64 (seq >= 0)")
    if not isinstance(tail["type"], str):
        raise ValueError("type must be a string")  # noqa: TRY004 - a malformed line, as decode_line says
    for key in _TEXT_FIELDS:
        value = head.get(key, tail.get(key))
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{key} must be a string or null")
    for key in _INT_FIELDS:
        if head[key] is not None and not is_int(head[key]):
            raise ValueError(f"{key} must be an int64 or null")
    for key in ("cost_usd", "duration_ms"):
        value = head[key]
        if value is not None and (type(value) not in (int, float) or not _finite(value)):
            raise ValueError(f"{key} must be a finite number or null")


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond float range
        return False


def row_body(row: tuple[Any, ...]) -> str:
    """The hashed body of a row tuple."""
    (seq, type, actor, caused_by, span_id, ts, payload, model, input_tokens, output_tokens,
     cached_tokens, cost_usd, duration_ms, _hash) = row
    return event_body(seq=seq, type=type, payload_json=payload, actor=actor, caused_by=caused_by,
                      span_id=span_id, ts=ts, model=model, input_tokens=input_tokens,
                      output_tokens=output_tokens, cached_tokens=cached_tokens,
                      cost_usd=cost_usd, duration_ms=duration_ms)


# --- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WalScan:
    """What a WAL holds: its well-formed rows and, if the last line is torn, that line."""

    rows: list[tuple[Any, ...]]
    """Row tuples of every well-formed line, in file order."""
    ends: list[int]
    """The byte offset just past each row's line."""
    torn_at: int
    """Byte offset where the torn last line starts (where the lines end if none)."""
    torn_line: int
    """1-based line number of the torn last line (0 if none)."""
    torn_complete: bool = False
    """The torn line ends with a newline: damage rather than an interrupted write."""
    bad: list[tuple[int, str, int]] = field(default_factory=list)
    """Lenient scans only: ``(line, problem, rows before it)`` for garbage lines."""

    @property
    def torn(self) -> bool:
        """True if the last line is torn."""
        return self.torn_line > 0

    def drop_last(self) -> WalScan:
        """The same scan with the last row counted as torn (its hash did not check).

        Only for a scan whose last line is a row (not already torn).
        """
        start = self.ends[-2] if len(self.ends) > 1 else 0
        line = len(self.rows) + len(self.bad)
        return WalScan(self.rows[:-1], self.ends[:-1], start, line, True, self.bad)


def unpadded(data: bytes) -> bytes:
    """``data`` without the zero bytes a durable writer keeps ahead of its lines (see the
    module docstring); unchanged if anything but zeros follows the first NUL.

    >>> unpadded(b'{"a":1}\\n' + bytes(5)), unpadded(b'x' + bytes(2) + b'y')
    (b'{"a":1}\\n', b'x\\x00\\x00y')
    """
    end, torn = _lines_end(data)
    return data if torn else data[:end]


def _lines_end(data: bytes) -> tuple[int, bool]:
    """Where the lines of ``data`` end, and whether a torn tail follows them.

    The first run of zeros ends the lines when it runs to the end of the file (the zeros a
    writer had not written over yet), when it starts where a line ended (what follows it is
    no line of the writer's: the residue of a torn write, or damage to its zeros), or when it
    ends on a page boundary with bytes after it (the gap a power loss leaves when it keeps a
    later page but not the one before). In the last two cases the line the zeros start in,
    and all after it, is the torn tail. Any other NUL is garbage inside the lines.
    """
    nul = data.find(0)
    if nul < 0:
        return len(data), False
    after = _NOT_NUL.search(data, nul)
    if after is None:
        return nul, False
    start = data.rfind(b"\n", 0, nul) + 1
    if start == nul or after.start() % _PAGE == 0:
        return start, True
    return len(data), False


def scan_wal(data: bytes, path: str, *, strict: bool = True) -> WalScan:
    """Parse the lines of a WAL.

    Args:
        data: the file's bytes, read at once (a consistent snapshot); zeros at the end are a
            writer's, ahead of its lines (see the module docstring).
        path: the file's name, for messages.
        strict: raise on garbage in the middle; otherwise list it in ``bad`` (for verify).

    Raises:
        CorruptWALError: a line that is not the last one is not a well-formed WAL line (bytes
            after a durable writer's zeros are not garbage but a torn tail: see the module
            docstring).
    """
    rows: list[tuple[Any, ...]] = []
    ends: list[int] = []
    bad: list[tuple[int, str, int]] = []
    pos, line_no = 0, 0
    size, gap = _lines_end(data)
    while pos < size:
        line_no += 1
        nl = data.find(b"\n", pos)
        if nl < 0:  # no newline: the write was interrupted
            return WalScan(rows, ends, pos, line_no, False, bad)
        try:
            rows.append(decode_line(data[pos:nl]))
        except ValueError as exc:
            if nl + 1 == size:
                return WalScan(rows, ends, pos, line_no, True, bad)
            problem = f"not a well-formed WAL line ({exc})"
            if strict:
                raise CorruptWALError(path, line_no, problem) from None
            bad.append((line_no, problem, len(rows)))
        else:
            ends.append(nl + 1)
        pos = nl + 1
    if gap:
        return WalScan(rows, ends, size, line_no + 1, False, bad)
    return WalScan(rows, ends, size, 0, False, bad)


def last_row_checks(scan: WalScan, hash_before: Callable[[int], str | None]) -> bool:
    """True if the last row's hash follows from the event before it.

    Only the last line can be torn, so only it is hashed here; the rest is verify's job.

    Args:
        scan: a scan with at least one row.
        hash_before: the stored hash of a seq before the WAL (``None`` if unknown).
    """
    last = scan.rows[-1]
    seq = last[0]
    if len(scan.rows) > 1 and scan.rows[-2][0] == seq - 1:
        prev: str | None = scan.rows[-2][13]
    else:
        prev = hash_before(seq - 1)
    return prev is None or chain_hash(prev, row_body(last)) == last[13]


def next_torn_path(directory: Path) -> Path:
    """``wal.torn-<n>`` with ``n`` one more than any already there."""
    taken = [int(m.group(1)) for name in os.listdir(directory) if (m := _TORN.fullmatch(name))]
    return directory / f"wal.torn-{max(taken, default=0) + 1}"


def rewrite_wal(path: Path, data: bytes, start: int, end: int, *, durable: bool) -> Path | None:
    """Keep ``data[start:end]`` as the WAL; move any torn bytes past ``end`` aside first.

    The torn bytes are written to ``wal.torn-<n>`` before the WAL is replaced, so a crash in
    between leaves a copy, never a loss. The WAL is replaced by rename, so a reader that has
    it open keeps a consistent old file.

    Returns:
        The ``wal.torn-<n>`` path, or ``None`` if nothing was torn.
    """
    torn_path = None
    if torn := data[end:].strip(b"\0"):  # zeros are what the writer wrote ahead of its lines
        torn_path = next_torn_path(path.parent)
        write_atomic(torn_path, torn, durable=True)  # evidence: always durable
    write_atomic(path, data[start:end], durable=durable)
    return torn_path


# --- appending -------------------------------------------------------------------------------


def _datasync(fd: int) -> None:
    """``fdatasync``, or ``fsync`` where there is none (macOS)."""
    getattr(os, "fdatasync", os.fsync)(fd)



class WalAppender:
    """Appends lines to a WAL with the chosen durability.

    In ``batch`` mode a daemon thread commits (fsyncs) a group at most ``batch_ms`` after its
    first line, and a group of ``batch_events`` lines is committed at once.

    With ``fsync`` and ``batch`` the file is extended with zeros, :data:`ZEROS` bytes at a
    time, and fsynced before lines are written over them, so committing lines is an
    ``fdatasync`` of their pages alone, with no journal commit for a new file size (see the
    module docstring). ``none`` appends.
    """

    def __init__(self, path: Path, durability: Durability, *, batch_events: int = 1024,
                 batch_ms: float = 50.0) -> None:
        self.path, self.durability = path, durability
        self._padded = durability is not Durability.NONE
        created = not path.exists()
        self._fd = self._open(path, os.O_CREAT)
        if created and self._padded:
            fsync_dir(path.parent)  # fsyncing lines is no use if the file's name is lost
        self.size = self._zeroed = os.fstat(self._fd).st_size
        if self.size:
            self._cut_zeros()  # reopened (with any durability): the zeros its last writer left
        if self._padded:
            self._add_zeros(ZEROS)
        self._lock = threading.Lock()
        self._pending = 0
        self._batch_events, self._batch_s = batch_events, batch_ms / 1000
        self._error: BaseException | None = None
        self._wake, self._stop = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None
        if durability is Durability.BATCH:
            self._thread = threading.Thread(target=self._group_commits, daemon=True,
                                            name=f"agentlog-wal-{path.parent.name}")
            self._thread.start()

    def _cut_zeros(self) -> None:
        """Cut the file back to its lines if it ends in zeros (an appender with ``none`` would
        write after them, where a reader does not look)."""
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\0":
                return
            f.seek(0)
            self.size = self._zeroed = len(unpadded(f.read()))
        os.ftruncate(self._fd, self.size)

    def _open(self, path: Path, flags: int) -> int:
        # Lines are written at self.size over zeros (pwrite), or appended.
        return os.open(path, os.O_WRONLY | flags | (0 if self._padded else os.O_APPEND), 0o644)

    def append(self, data: bytes, *, sync: bool = True) -> None:
        """Write ``data`` (whole lines) at the end; fsync per the durability.

        ``sync=False`` (``fsync`` durability): write the lines to the OS now (a process crash
        keeps them) and leave their fsync to the next append that syncs, :meth:`commit` or
        :meth:`close`, whichever comes first (one fsync covers everything written before it).

        On failure the file is cut back to where it was, so a failed append leaves no torn
        line in front of later ones.
        """
        with self._lock:
            if self._error is not None:
                error, self._error = self._error, None
                raise OSError(f"{self.path}: a group commit failed") from error
            try:
                if self._padded:
                    self._write_over_zeros(data)
                else:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(self._fd, view):]
                if sync and self.durability is Durability.FSYNC:
                    _datasync(self._fd)  # the file's size was fsynced with its zeros
            except BaseException:
                os.ftruncate(self._fd, self.size)
                self._zeroed = self.size
                raise
            self.size += len(data)
            if self.durability is Durability.FSYNC:
                self._pending = 0 if sync else self._pending + 1
            elif self.durability is Durability.BATCH:
                self._pending += 1
                if self._pending >= self._batch_events:
                    self._commit_locked()
                elif self._pending == 1:
                    self._wake.set()

    def _add_zeros(self, count: int) -> None:
        """Extend the file with ``count`` zeros, and fsync it (its new size: a journal commit)."""
        os.pwrite(self._fd, bytes(count), self._zeroed)
        os.fsync(self._fd)
        self._zeroed += count

    def _write_over_zeros(self, data: bytes) -> None:
        end = self.size + len(data)
        if end > self._zeroed:
            self._add_zeros(max(ZEROS, end - self._zeroed))
        view, at = memoryview(data), self.size
        while view:
            written = os.pwrite(self._fd, view, at)
            view, at = view[written:], at + written

    def commit(self) -> None:
        """fsync what was written (``batch``: the group now; ``none``: nothing)."""
        with self._lock:
            self._commit_locked()

    def _commit_locked(self) -> None:
        if self._pending and self._fd >= 0:
            (_datasync if self._padded else os.fsync)(self._fd)
        self._pending = 0

    def _group_commits(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop.wait(self._batch_s):
                return  # close() commits what is left
            with self._lock:
                try:
                    self._commit_locked()
                except OSError as exc:  # surfaced by the next append
                    self._error = exc

    def rotate(self, *, durable: bool) -> None:
        """Start a new, empty WAL (after a seal): create it beside, rename it over, fsync dir.

        A reader that opened the old file keeps reading the old, complete file.
        """
        with self._lock:
            tmp = self.path.with_name(temp_name(self.path.name))
            fd = self._open(tmp, os.O_CREAT | os.O_EXCL)
            os.replace(tmp, self.path)
            if durable:
                fsync_dir(self.path.parent)
            os.close(self._fd)
            self._fd, self.size, self._zeroed, self._pending = fd, 0, 0, 0
            if self._padded:
                self._add_zeros(ZEROS)

    def close(self, *, remove: bool = False, durable: bool = True) -> None:
        """Commit, stop the group-commit thread and close; optionally remove the file."""
        if self._thread is not None:
            self._stop.set()
            self._wake.set()
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._fd < 0:
                return
            try:
                self._commit_locked()
                if self._zeroed > self.size and not remove:
                    os.ftruncate(self._fd, self.size)  # a WAL left behind is lines only
            finally:
                os.close(self._fd)
                self._fd = -1
            if remove:
                self.path.unlink(missing_ok=True)
                if durable:
                    fsync_dir(self.path.parent)
