"""What the readers and writers of every format share: sources, JSON with line numbers, times,
and writing a list of already-built events as a new run.

Shell code: it opens files and writes runs.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import math
import os
import re
import sqlite3
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import AgentlogError
from ..events import Event
from ..events.origin import SOURCE_TAG
from .errors import InteropFormatError

if TYPE_CHECKING:
    from ..store import Run, RunWriter, Store
    from ..store.writer import Emit

__all__ = ["SOURCE_TAG", "SQLITE_ERRORS", "Clock", "Source", "append_events", "check_event", "chosen", "finite", "import_run_id", "iso_to_us", "json_values",
           "loads", "may_hold_surrogate", "no_gc", "read_text", "renumber_cause", "source_name", "store_of", "write_or_extend",
           "write_run"]

#: What reading a damaged SQLite file raises: SQLite's own errors, and ``UnicodeDecodeError``
#: when its error message quotes a name of the damaged schema (an index's name whose bytes
#: are no longer UTF-8: Python cannot decode the message).
SQLITE_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)

#: A file given by path, or an open text stream (``sys.stdin``, ``io.StringIO``).
Source = str | os.PathLike[str] | IO[str]


def source_name(src: Any) -> str:
    """The name of a source for messages: its path, or the stream's ``name``, or ``<stream>``."""
    if isinstance(src, (str, os.PathLike)):
        return os.fspath(src)
    return str(getattr(src, "name", None) or "<stream>")


def read_text(src: Source) -> str:
    """The whole text of a path or stream (UTF-8).

    Raises:
        InteropFormatError: the file is not UTF-8 text.
    """
    if isinstance(src, (str, os.PathLike)):
        data = Path(src).read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InteropFormatError(source_name(src), None, f"not UTF-8 text ({exc.reason} at byte "
                                                            f"{exc.start})") from None
    return src.read()


def _constant(name: str) -> str:
    # NaN and Infinity parse in Python but have no canonical JSON form: keep them as text.
    return name


_DECODER = json.JSONDecoder(parse_constant=_constant)


def loads(text: str) -> Any:
    """``json.loads`` that reads ``NaN``/``Infinity`` as the strings ``"NaN"``/``"Infinity"``.

    >>> loads('{"a": NaN}')
    {'a': 'NaN'}
    """
    if text.startswith("\ufeff"):  # json.loads names a byte-order mark; the decoder would not
        return json.loads(text, parse_constant=_constant)
    return _DECODER.decode(text)  # one decoder for every line, not one made per call


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def may_hold_surrogate(text: str) -> bool:
    """Whether parsing JSON text may give a string holding a lone surrogate: the text holds
    a surrogate itself or a ``\\uD800``-``\\uDFFF`` escape (a false alarm, such as a pair
    that makes one character, only costs the caller's full check).

    >>> may_hold_surrogate('{"a": "\\\\udc80"}'), may_hold_surrogate('{"a": "é"}')
    (True, False)
    """
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None


def finite(value: Any) -> Any:
    """``value`` with what canonical JSON cannot hold made text: non-finite floats, bytes
    (as hex), lone surrogates (backslash-escaped), non-string keys.

    >>> finite({"x": [float("nan"), 1.5], 1: b"\\x00"})
    {'x': ['nan', 1.5], '1': '00'}
    """
    if value is None or type(value) is int or type(value) is bool:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if type(value) is dict or isinstance(value, Mapping):
        return {finite(k) if isinstance(k, str) else str(finite(k)): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


_SPACE = " \t\r\n\ufeff"


def json_values(text: str, name: str) -> Iterator[tuple[int, Any]]:
    """The JSON values of a text, with the line each starts on.

    Reads one value, JSON lines, and concatenated pretty-printed values (what the OpenTelemetry
    SDK's ``ConsoleSpanExporter`` writes) alike.

    Raises:
        InteropFormatError: naming the line where the value that is not JSON starts (and
            where the parser stopped).

    >>> [v for _, v in json_values('{"a": 1}\\n{"a": 2}', "x")]
    [{'a': 1}, {'a': 2}]
    """
    pos, line, size = 0, 1, len(text)
    while True:
        start = pos
        while pos < size and text[pos] in _SPACE:
            pos += 1
        line += text.count("\n", start, pos)
        if pos >= size:
            return
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}" if exc.lineno != line else f"column {exc.colno}"
            raise InteropFormatError(name, line, f"not JSON ({exc.msg} at {where})") from None
        yield line, value
        line += text.count("\n", pos, end)
        pos = end


def iso_to_us(text: str) -> int:
    """Microseconds since the epoch of an ISO-8601 time (``Z`` or an offset; naive = UTC).

    >>> iso_to_us("2026-01-01T00:00:00Z")
    1767225600000000
    >>> iso_to_us("2026-01-01T00:00:00.000123+00:00")
    1767225600000123
    """
    when = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class Clock:
    """A clock that says what it is told: the writer stamps ``created``/``closed`` from it.

    >>> c = Clock(1_500_000); c()
    1.5
    """

    def __init__(self, us: int) -> None:
        self.us = us

    def __call__(self) -> float:
        return self.us / 1_000_000


def store_of(store: Store | str | os.PathLike[str]) -> Store:
    """A :class:`~agentlog.store.Store` from a store or a path."""
    from ..store import Store as StoreClass
    return store if isinstance(store, StoreClass) else StoreClass(store)


def write_run(store: Store, events: Sequence[Event], *, run_id: str | None, name: str | None,
              tags: Mapping[str, Any] | Iterable[str] | None, created_us: int | None = None,
              status: str = "closed", where: str = "") -> Run:
    """Write events that already carry their seq, ts, cause and usage as a new run.

    ``created`` is the first event's time (or ``created_us``), ``closed`` the last one's, so
    an import of the same file gives the same ``run.json`` apart from the id. The events'
    fields are checked before the run is created.

    Raises:
        RunExistsError: ``run_id`` is taken.
        InteropFormatError: an event field of the wrong type or range (nothing is written), or
            a payload the writer refuses (the run is closed as failed); naming ``where`` (the
            source file) and the seq.
    """
    for event in events:
        check_event(event, where)
    first = events[0].ts if events else 0
    clock = Clock(first if created_us is None else created_us)
    writer = store.create_run(run_id=run_id, name=name, tags=finite(tags), clock=clock,
                              durability="batch")

    def named(i: int, exc: Exception) -> Exception:  # CanonicalJSONError and blob refs included
        if isinstance(exc, InteropFormatError):
            return exc
        return InteropFormatError(where or "<source>", None, f"seq {events[i].seq}: {exc}")

    try:
        append_events(writer, events, named=named)
    except BaseException:
        writer.close("failed")
        raise
    if events:
        clock.us = max(e.ts for e in events)
    writer.close(status)
    return store.run(writer.id, exact=True)


#: Events per :meth:`~agentlog.RunWriter.emit_many` call of an import: one lock and one WAL
#: write for each.
BATCH = 512


def append_events(writer: RunWriter, items: Sequence[Emit | Event], *,
                  named: Callable[[int, Exception], Exception] | None = None) -> None:
    """Append imported events (and typed bodies) in :meth:`~agentlog.RunWriter.emit_many`
    batches of at most :data:`BATCH`, cut where the writer seals a segment (so the segments
    are those of appending one at a time).

    The writer checks every item as it would one at a time. If it refuses one, nothing of
    that batch is written, and the batch is appended again one item at a time: the items
    before the refused one are written, and its error is raised as appending each item as it
    came would raise it.

    Args:
        named: turns the ``TypeError`` / ``ValueError`` refusing item ``i`` into the error
            to raise (one naming the source file and line); default: raised as it is.
    """
    start = 0
    while start < len(items):
        batch = items[start:start + min(BATCH, writer.segment_room)]
        try:
            writer.emit_many(batch)
        except (AgentlogError, TypeError, ValueError, OSError):  # nothing of it written: one at a time
            for i, item in enumerate(batch, start=start):
                try:
                    writer.emit_many([item])
                except (TypeError, ValueError) as exc:
                    if named is None:
                        raise
                    raise named(i, exc) from None
        start += len(batch)


_INT64 = 2**63
#: The range of ``ts`` a run can hold: years 1 to 9999 (what a datetime can show).
TS_MIN, TS_MAX = -62_135_596_800_000_000, 253_402_300_799_999_999


def check_event(event: Event, where: str) -> None:
    """Refuse an event whose fields do not fit the event table, before anything is written.

    Raises:
        InteropFormatError: naming ``where``, the seq and the field.
    """
    if _plainly_fits(event):
        return
    def bad(field: str, problem: str) -> InteropFormatError:
        return InteropFormatError(where or "<source>", None, f"seq {event.seq}: {problem}", field=field)

    for name in ("type", "actor", "span_id", "model"):
        value = getattr(event, name)
        if value is None and name != "type":
            continue
        if not isinstance(value, str):
            raise bad(name, f"must be a string, got {type(value).__name__}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise bad(name, "is not valid UTF-8 text") from None
    for name in ("caused_by", "input_tokens", "output_tokens", "cached_tokens"):
        value = getattr(event, name)
        if value is not None and (type(value) is not int or not -_INT64 <= value < _INT64):
            raise bad(name, f"must be an int64, got {value!r:.40}")
    for name in ("cost_usd", "duration_ms"):
        value = getattr(event, name)
        if value is not None and (type(value) not in (int, float) or not _finite(value)):
            raise bad(name, f"must be a finite number, got {value!r:.40}")
    if type(event.ts) is not int or not TS_MIN <= event.ts <= TS_MAX:
        raise bad("ts", f"must be a time in years 1..9999 (µs since the epoch), got {event.ts!r:.40}")


def _plainly_fits(e: Event) -> bool:
    """The common case of :func:`check_event`, decided in one expression: ASCII text, plain
    ints and finite floats, or ``None`` (anything else is decided field by field there)."""
    t, ts, a, s, m = e.type, e.ts, e.actor, e.span_id, e.model
    c, i, o, k, u, d = e.caused_by, e.input_tokens, e.output_tokens, e.cached_tokens, e.cost_usd, e.duration_ms
    return (type(t) is str and t.isascii() and type(ts) is int and TS_MIN <= ts <= TS_MAX
            and (a is None or (type(a) is str and a.isascii()))
            and (s is None or (type(s) is str and s.isascii()))
            and (m is None or (type(m) is str and m.isascii()))
            and (c is None or (type(c) is int and -_INT64 <= c < _INT64))
            and (i is None or (type(i) is int and -_INT64 <= i < _INT64))
            and (o is None or (type(o) is int and -_INT64 <= o < _INT64))
            and (k is None or (type(k) is int and -_INT64 <= k < _INT64))
            and (u is None or (type(u) is float and -_BIG < u < _BIG))
            and (d is None or (type(d) is float and -_BIG < d < _BIG)))


#: Finite floats are the ones strictly between these (a NaN compares false with both).
_BIG = float("inf")


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def renumber_cause(old: int | None, old_to_new: Mapping[int, int], seq: int) -> int | None:
    """An exported event's cause, renumbered to the new seqs (``None`` if not earlier).

    >>> renumber_cause(3, {3: 7}, 9), renumber_cause(3, {3: 7}, 5), renumber_cause(None, {}, 1)
    (7, None, None)
    """
    cause = old_to_new.get(old) if old is not None else None
    return cause if cause is not None and cause < seq else None


def import_run_id(system: str, source_run: str, first: Any) -> str:
    """The id of the run an imported source run goes to: the same source run (the same id and
    the same first event) always gets the same id, so importing it again finds it.

    >>> import_run_id("drangue", "sre-1", {"type": "run_started"})
    'drangue-8f90a276db30a6a0'
    """
    from ..canonical import canonical_json

    digest = hashlib.sha256(canonical_json([system, source_run, finite(first)]).encode()).hexdigest()
    return f"{system}-{digest[:16]}"


def _same_prefix(run: Run, events: Sequence[Event]) -> bool:
    count = len(run)
    if count > len(events):
        return False
    fields = ("type", "ts", "actor", "caused_by", "span_id")
    return all(tuple(getattr(a, f) for f in fields) == tuple(getattr(b, f) for f in fields)
               for a, b in zip(run.iter_events(), events[:count], strict=True))


def write_or_extend(store: Store, events: Sequence[Event], *, run_id: str, name: str | None,
                    tags: Mapping[str, Any], created_us: int | None = None, where: str = "") -> Run:
    """Write events as run ``run_id``; if it exists with the same first events, append the
    ones it does not have yet (nothing, for a run imported before).

    Raises:
        RunExistsError: ``run_id`` holds other events.
    """
    from ..errors import RunExistsError

    if run_id not in store:
        return write_run(store, events, run_id=run_id, name=name, tags=tags, created_us=created_us,
                         where=where)
    for event in events:
        check_event(event, where)
    run = store.run(run_id, exact=True)
    if not _same_prefix(run, events):
        raise RunExistsError(run_id)
    rest = events[len(run):]
    if not rest:
        return run
    clock = Clock(max(e.ts for e in events))
    writer = store.writer(run_id, clock=clock, durability="batch")
    try:
        append_events(writer, rest)
    except BaseException:
        writer.close("failed")
        raise
    writer.close("closed")
    return store.run(run_id, exact=True)


def chosen(runs: Mapping[str, Any], run: str | None, where: str, system: str,
           run_id: str | None = None) -> list[str]:
    """The run ids to import: ``[run]``, or every run of the file.

    Raises:
        InteropFormatError: ``run`` is not in the file (the message lists the file's runs), or
            a new ``run_id`` is given for several runs.
    """
    if run is not None:
        if run not in runs:
            raise InteropFormatError(where, None, f"no {system} run {run!r}; the file has "
                                                  f"{', '.join(sorted(map(str, runs))) or 'none'}")
        return [run]
    if run_id is not None and len(runs) != 1:
        raise InteropFormatError(where, None, f"a new run id names one run, and the file has "
                                              f"{len(runs)}; choose one with run= (--run)")
    return sorted(runs)


@contextlib.contextmanager
def no_gc() -> Generator[None, None, None]:
    """Pause the cyclic garbage collector for a bulk conversion, then restore it.

    Converting 100,000 events builds millions of small dicts and lists and no cycles; the
    collector's full passes over that growing heap cost more than the conversion itself
    (5.2 s → 1.9 s for an OTLP export of 100,000 events). Reference counting still frees
    everything.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
