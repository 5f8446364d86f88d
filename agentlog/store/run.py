"""A recorded run, for reading: its events as :class:`Event` objects or one Arrow table.

A run is read as a snapshot (sealed segments + WAL tail, see :mod:`.snapshot`) taken on first
use and kept until :meth:`Run.refresh`. A fork stitches its parent's events ``0..fork_seq``
in front of its own, recursively, so a fork of a fork reads as one run.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import orjson
import pyarrow as pa

from ..accessors import Extensible
from ..canonical import long_int
from ..chain import GENESIS
from ..errors import CorruptEventError, EventNotFoundError, EventSchemaError
from ..events import STATE_PATCH, BlobRef, Event, lift, registry
from ..events.origin import SOURCE_TAG
from ..folding.engine import PatchBatch, PatchPayload
from .lock import writer_is_live
from .meta import read_meta
from .segments import SCHEMA, column_values, empty_table
from .snapshot import Segment, SegmentCache, Snapshot, load_snapshot
from .wal import TornWALWarning

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from datetime import datetime

    import pandas as pd

    from .store import Store
    from .verify import VerifyReport

__all__ = ["Run"]

_T = TypeVar("_T")

_BATCH = 4096
#: The standard types: their payloads are lifted to the version this code reads.
_LIFTED = frozenset(registry())


class Run(Extensible):
    """A run in a store, for reading. Get one with ``store.run(id)`` or ``al.open(path)``.

    Reading takes a snapshot on first use; a run that is still being written shows the
    events written so far, and :meth:`refresh` takes a new snapshot.

    Its tables (``run.events``, ``run.cost()``, ...) come from :mod:`agentlog.analysis` and its
    views (``run.waterfall()``, ...) from :mod:`agentlog.widgets`, attached from above
    (:mod:`agentlog.accessors`): ``dir(run)`` lists them and ``help(run.cost)`` documents them.
    """

    _accessor_owner = "Run"

    def __init__(self, store: Store, run_id: str, path: Path, meta: dict[str, Any]) -> None:
        self.store = store
        self.run_id = run_id
        """The run's id (the ``run_id`` column of every table)."""
        self.path = path
        self.meta = meta
        self._cache = SegmentCache(store.fs)
        self._snap: Snapshot | None = None
        self._parent: Run | None = None
        self._indexes: dict[int, tuple[Any, Any]] = {}
        self._last_verify: VerifyReport | None = None  # shown by summary() and the notebook card

    # --- what it is -------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The run's id: an alias of :attr:`run_id`."""
        return self.run_id

    @property
    def name(self) -> str | None:
        """The run's name from ``run.json``."""
        name = self.meta.get("name")
        return None if name is None else str(name)

    @property
    def status(self) -> str:
        """``open`` while written (or after a crash), else how it was closed."""
        return str(self.meta.get("status", "open"))

    @property
    def replayable(self) -> bool:
        """True when the run holds a program's recorded answers, so that ``al.replay`` and
        ``al.fork`` can serve them; :attr:`replayable_reason` says why not."""
        return self.replayable_reason is None

    @property
    def replayable_reason(self) -> str | None:
        """Why the run cannot be replayed or forked (``None`` when it can).

        A run imported from another system (an OTLP trace, a drangue or ActiveGraph run: its
        ``source`` tag names the system) holds what that system saw, not the answers a program
        got through agentlog's recorder, so there is nothing to serve a program from.
        """
        tags = self.meta.get("tags")
        source = tags.get(SOURCE_TAG) if isinstance(tags, Mapping) else None
        if isinstance(source, str) and source:
            return (f"it was imported from {source} and holds what {source} recorded, not the answers "
                    "of a program recorded by agentlog (al.record, al.recording, al.run_agent); "
                    "open it to look, diff and compare it instead")
        return None

    @property
    def fork_seq(self) -> int | None:
        """The parent's last seq this fork shares, or ``None`` if the run is not a fork."""
        parent = self.meta.get("parent")
        return None if parent is None else int(parent["seq"])

    @property
    def parent(self) -> Run | None:
        """The run this one was forked from, or ``None``.

        Raises:
            RunNotFoundError: the parent is no longer in the store.
        """
        info = self.meta.get("parent")
        if info is None:
            return None
        if self._parent is None:
            self._parent = self.store.run(str(info["run_id"]), exact=True)
        return self._parent

    def __repr__(self) -> str:
        if self._snap is not None:
            count = f"{self._snap.end:,} events"
        elif self.status != "open" and isinstance(self.meta.get("count"), int):
            count = f"{self.meta['count']:,} events"
        else:
            count = "not read yet"
        name = f" {self.name!r}" if self.name is not None else ""
        return f"<Run {self.id}{name} {count} {self.status}>"

    # --- snapshot ---------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        if self._snap is None:
            self._snap = self._load(strict=True)
        return self._snap

    def _load(self, *, strict: bool) -> Snapshot:
        start, prev = self._start()
        snap = load_snapshot(self.path, start=start, prev=prev, cache=self._cache, strict=strict)
        if snap.scan.torn and not self.store.fs.remote and not writer_is_live(self.path):
            # The writer may have finished the line (or closed) since we read: only a torn
            # line that is still there after the lock was seen free was left by a crash.
            again = load_snapshot(self.path, start=start, prev=prev, cache=self._cache,
                                  strict=strict)
            if again.scan.torn and again.wal_data == snap.wal_data:
                size = len(snap.wal_data) - snap.scan.torn_at
                warnings.warn(f"{snap.wal_path}: line {snap.scan.torn_line} is torn ({size} bytes); "
                              f"ignored. store.writer({self.id!r}) moves it aside to wal.torn-<n>",
                              TornWALWarning, stacklevel=4)
            snap = again
        return snap

    def _start(self) -> tuple[int, str]:
        parent = self.meta.get("parent")
        if parent is None:
            return 0, GENESIS
        return int(parent["seq"]) + 1, str(parent["hash"])

    def refresh(self) -> Run:
        """Re-read ``run.json`` and take a new snapshot (sealed segments stay cached).

        Returns:
            This run.
        """
        self.meta = read_meta(self.path, self.store.fs)
        self._snap = None
        if self._parent is not None:
            self._parent.refresh()
        return self

    # --- events -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._snapshot().end

    @property
    def head(self) -> str:
        """The hash of the last event (the parent's at the fork seq for an empty fork)."""
        return self._snapshot().head

    def event(self, seq: int) -> Event:
        """The event at ``seq``, payload decoded, blob references as :class:`BlobRef`.

        Raises:
            EventNotFoundError: ``seq`` is not in the run.
            CorruptEventError: its stored payload cannot be read (names the file and seq).
        """
        n = len(self)
        if not 0 <= seq < n:
            raise EventNotFoundError(self.id, seq, n)
        for event in self.iter_events(seq, seq + 1):
            if event.seq == seq:
                return event
        raise EventNotFoundError(self.id, seq, n)  # pragma: no cover - a damaged run

    def iter_events(self, start: int = 0, stop: int | None = None) -> Iterator[Event]:
        """The events with ``start <= seq < stop``, in order.

        Seeks to the segments that hold them and converts a batch of 4,096 rows at a time
        (columns to lists once, payloads decoded by one orjson call per batch).

        Raises:
            ValueError: ``start`` is negative.
            CorruptEventError: a stored payload cannot be read (names the file and seq); the
                events before it were yielded.
        """
        return self._iter_events(start, stop, light=False)

    def _iter_events(self, start: int, stop: int | None, *, light: bool) -> Iterator[Any]:
        """:meth:`iter_events`; ``light``: runs of ``state.patch`` rows of a segment as
        :class:`~agentlog.folding.engine.PatchBatch` objects (the fold's fast path reads only
        their payloads)."""
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        snap = self._snapshot()
        stop = snap.end if stop is None else min(stop, snap.end)
        if start >= stop:
            return
        at = self.fork_seq
        if at is not None and start <= at:
            parent = self.parent
            assert parent is not None
            yield from parent._iter_events(start, min(stop, at + 1), light=light)
            start = at + 1
        read = self.store.blobs.read
        spans = [(seg, max(start, seg.first) - seg.first, min(stop, seg.end) - seg.first)
                 for seg in snap.segments if seg.end > start and seg.first < stop]
        if light:
            for (seg, lo, _), table in zip(spans, _tables(spans), strict=True):
                yield from _light_events(seg, lo, table, _decoder(read, seg.path, self.id), self.id)
        else:
            for seg, lo, hi in spans:
                yield from _table_events(seg.slice(lo, hi), _decoder(read, seg.path, self.id), self.id)
        decode = _decoder(read, snap.wal_path, self.id)
        for row in snap.tail:
            if start <= row[0] < stop:
                yield _row_event(row, decode, self.id)

    def _columns(self, names: tuple[str, ...], start: int = 0, stop: int | None = None) -> pa.Table:
        """Columns ``names`` of the events with ``start <= seq < stop`` (a fork's parent prefix
        included), reading only those columns of the row groups that hold them."""
        snap = self._snapshot()
        stop = snap.end if stop is None else min(stop, snap.end)
        schema = pa.schema([SCHEMA.field(name) for name in names])
        parts: list[pa.Table] = []
        at = self.fork_seq
        if at is not None and start <= at and start < stop:
            parent = self.parent
            assert parent is not None
            parts.append(parent._columns(names, start, min(stop, at + 1)))
            start = at + 1
        for seg in snap.segments:
            if seg.first < stop and seg.end > start:
                lo, hi = max(start, seg.first) - seg.first, min(stop, seg.end) - seg.first
                parts.append(seg.slice(lo, hi, names))
        if snap.tail and start < stop:
            tail = snap.tail_table().select(list(names))
            first = int(snap.tail[0][0])
            lo = max(start - first, 0)
            parts.append(tail.slice(lo, max(stop - first - lo, 0)))
        if not parts:
            return schema.empty_table()
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def _hash_at(self, seq: int) -> str | None:
        """The stored hash of event ``seq`` (the parent's for a fork's prefix), read from the
        hash column alone; ``None`` if the run has no such event."""
        at = self.fork_seq
        if at is not None and 0 <= seq <= at:
            parent = self.parent
            assert parent is not None
            return parent._hash_at(seq)
        snap = self._snapshot()
        if not snap.start <= seq < snap.end:
            return None
        return snap.hash_at(seq)

    def table(self) -> pa.Table:
        """All events (parent prefix, segments, WAL tail) as one table in the event schema."""
        snap = self._snapshot()
        parts: list[pa.Table] = []
        at = self.fork_seq
        if at is not None:
            parent = self.parent
            assert parent is not None
            parts.append(parent.table().slice(0, at + 1))
        parts.extend(seg.table for seg in snap.segments)
        if snap.tail:
            parts.append(snap.tail_table())
        if not parts:
            return empty_table()
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def verify(self) -> VerifyReport:
        """Check the chain, the seqs, the blobs, the head and the fork prefix.

        Returns:
            A report; problems are data, not exceptions.
        """
        from .verify import verify_run
        self._last_verify = verify_run(self)
        return self._last_verify

    # --- state: a fold over the log (the shell feeds events; agentlog.folding folds) ------------

    def _index(self, reducers: Any) -> Any:
        """The snapshot index for a reducer set, made once and extended as the run grows; it
        starts from the run's checkpoints for that set (:mod:`.checkpoints`)."""
        from ..folding import SnapshotIndex
        from ..folding.engine import _resolve
        from .checkpoints import StoredStates
        key = id(reducers)
        held = self._indexes.get(key)
        if held is not None and held[0] is reducers:
            index = held[1]
            if len(index) != len(self):
                index.extend(len(self))
            return index
        resolved = _resolve(reducers)
        index = SnapshotIndex(lambda start, stop: self.iter_events(start, stop), len(self), resolved,
                              stored=StoredStates(self, resolved),
                              fold_events=lambda start, stop: self._iter_events(start, stop, light=True))
        self._indexes[key] = (reducers, index)
        return index

    def state_at(self, n: int, *, reducers: Any = None) -> Any:
        """The state after event ``n`` (``-1``: the initial state).

        Starts from the nearest of: the run's newest checkpoint at or before ``n`` for these
        reducers (read lazily: only the nodes the fold touches), a snapshot this run object
        made before, or the last state asked for; then folds the events from there to ``n``.
        So the first call costs the events between ``n`` and the checkpoint before it, not
        the whole run, and stepping forward costs one event. A checkpoint that fails a check
        is not used (:class:`~agentlog.errors.CheckpointWarning`) and the state is folded from
        the log.

        Args:
            n: a seq of this run, or ``-1`` for the state before the first event.
            reducers: a :class:`~agentlog.folding.Reducers` set (default: the default projection).
        """
        from ..errors import CheckpointError, ReducerError
        for _ in range(8):
            index = self._index(reducers)
            try:
                return index.at(n)
            except (CheckpointError, ReducerError) as exc:
                cause = exc if isinstance(exc, CheckpointError) else exc.__cause__
                if not isinstance(cause, CheckpointError):
                    raise
                index._stored.drop_all(cause)  # a pack changed under us: start again without it
                self._indexes.pop(id(reducers), None)
                stored = index._stored
                fresh = self._index(reducers)
                fresh._stored.dropped |= stored.dropped
        return self._index(reducers).at(n)

    def states(self, start: int = 0, stop: int | None = None, *,
               reducers: Any = None) -> Iterator[tuple[Event, Any]]:
        """Yield ``(event, state after it)`` for ``start <= seq < stop``, O(1) per step."""
        steps: Iterator[tuple[Event, Any]] = self._index(reducers).states(start, stop)
        return steps

    def check_determinism(self, reducers: Any = None) -> Any:
        """Fold twice (in one pass and through snapshots) and report the first difference."""
        from ..folding import check_determinism
        return check_determinism(self, reducers)

    # --- tables and views: attached from the layers above (agentlog.accessors) -----------------
    # agentlog/__init__.py registers run.events, spans(), llm_calls(), tool_calls(), cost(),
    # tokens_over_time(), summary(), recompute_cost(), events_expanded() (agentlog.analysis)
    # and waterfall(), scrub(), fork_panel(), diff_view(), cost_dashboard(), show(),
    # _repr_html_() (agentlog.widgets); Extensible.__getattr__ imports them on first use.
    # The stubs below are what type checkers see; tests/test_layers.py checks that they match
    # the registered functions.

    if TYPE_CHECKING:  # pragma: no cover
        @property
        def events(self) -> pd.DataFrame: ...
        def events_expanded(self, types: str | Iterable[str] | None = None) -> pd.DataFrame: ...
        def spans(self) -> pd.DataFrame: ...
        def llm_calls(self) -> pd.DataFrame: ...
        def tool_calls(self) -> pd.DataFrame: ...
        def cost(self, by: str | Sequence[str] = ("model",), *, own: bool = False) -> pd.DataFrame: ...
        def tokens_over_time(self) -> pd.DataFrame: ...
        def summary(self, *, verify: bool = False) -> pd.DataFrame: ...
        def recompute_cost(self, prices: Mapping[str, Mapping[str, Any]] | None = None, *,
                           at: datetime | None = None) -> pd.DataFrame: ...
        def waterfall(self, **options: Any) -> Any: ...
        def scrub(self, **options: Any) -> Any: ...
        def fork_panel(self, program: Any, **options: Any) -> Any: ...
        def diff_view(self, other: Run, **options: Any) -> Any: ...
        def cost_dashboard(self, **options: Any) -> Any: ...
        def show(self, **options: Any) -> Any: ...
        def _repr_html_(self) -> str | None: ...


# --- rows to events ----------------------------------------------------------------------------


def _decoder(reader: Callable[[str], bytes], path: Path, run_id: str) -> Callable[[str, int], Any]:
    def hook(obj: dict[str, Any]) -> Any:
        return BlobRef.from_json(obj, reader) if "$blob" in obj else obj

    def decode(text: str, seq: int) -> Any:
        # The hook costs a call per object; only payloads that hold a blob ref pay for it.
        try:
            if '"$blob"' in text:
                value = json.loads(text, object_hook=hook)
            else:
                value = json.loads(text) if long_int(text.encode()) else orjson.loads(text)
        except (ValueError, RecursionError) as exc:  # JSON errors and malformed blob refs
            raise CorruptEventError(str(path), run_id, seq, f"its payload cannot be read ({exc})") from None
        if type(value) is not dict:
            raise CorruptEventError(str(path), run_id, seq, "its payload is not a JSON object")
        return value

    return decode


def _payloads(texts: list[str], seqs: Sequence[int], decode: Callable[[str, int], Any]) -> list[Any]:
    """Decode a batch of payloads (:func:`_decoded`)."""
    return _decoded(_joined(texts), texts, seqs, decode)


def _joined(texts: list[str]) -> bytes:
    """Payload texts (canonical JSON objects) as one JSON array, in UTF-8 (orjson reads bytes
    faster than a str)."""
    return ("[" + ",".join(texts) + "]").encode()


def _decoded(joined: bytes, texts: list[str], seqs: Sequence[int], decode: Callable[[str, int], Any]) -> list[Any]:
    """Decode a batch of payloads, ``joined`` (:func:`_joined`), with one orjson call. Those
    with a blob reference (or a long integer) go through ``decode`` again, to turn the
    references into :class:`BlobRef` objects (or read the integer exactly). A batch that does
    not decode, or holds something that is not an object, is decoded row by row, so the
    error names the first bad seq."""
    try:
        values: list[Any] = orjson.loads(joined)
    except (ValueError, RecursionError):
        values = []
    if len(values) != len(texts) or set(map(type, values)) != _DICT:
        return [decode(text, seq) for text, seq in zip(texts, seqs, strict=True)]
    if b'"$blob"' in joined or long_int(joined):
        for i, text in enumerate(texts):
            if '"$blob"' in text or long_int(text.encode()):
                values[i] = decode(text, seqs[i])
    return values


_DICT = {dict}
_BULK = registry()[STATE_PATCH].VERSION == 1
"""The bulk path hands payloads to the fold without lifting them: right while ``state.patch``
is at version 1 (a payload without ``"$v"`` is then current; one with it leaves the path)."""
_LIGHT = ("type", "payload")
_LIGHT_BATCH = 16_384
_AHEAD = 4 * _LIGHT_BATCH
"""Read ahead in a thread only for this many rows or more (a short read, from a checkpoint,
has nothing to overlap)."""


def _tables(spans: list[tuple[Segment, int, int]]) -> Iterator[pa.Table]:
    """The type and payload columns of each ``(segment, lo, hi)``, in order; a long read
    reads the next segment in a thread while the caller folds this one (pyarrow releases
    the GIL while it reads and checks a file: :func:`_read_ahead`)."""
    jobs = [partial(seg.slice, lo, hi, _LIGHT) for seg, lo, hi in spans]
    if sum(hi - lo for _, lo, hi in spans) < _AHEAD or len(spans) < 2:
        return (job() for job in jobs)
    return _read_ahead(jobs)


def _read_ahead(jobs: Sequence[Callable[[], _T]]) -> Iterator[_T]:
    """The results of ``jobs``, in order, each job run in a thread while the caller works on
    the result before it. A job's error is raised when its result is reached (everything
    before it was yielded)."""
    with ThreadPoolExecutor(1, thread_name_prefix="agentlog-read-ahead") as pool:
        ahead = pool.submit(jobs[0])
        for job in jobs[1:]:
            done, ahead = ahead, pool.submit(job)
            yield done.result()
        yield ahead.result()


def _light_events(seg: Segment, lo: int, table: pa.Table, decode: Callable[[str, int], Any],
                  run_id: str) -> Iterator[Any]:
    """The events of ``table``, the type and payload columns of a segment's rows from
    ``lo``: each stretch of ``state.patch`` rows as one :class:`PatchBatch` (a row's seq is the
    segment's first seq plus its offset, as everywhere rows are located), other stretches as
    events read with all their columns (:func:`_table_events`)."""
    at = lo
    for batch in table.to_batches(max_chunksize=_LIGHT_BATCH):
        n = batch.num_rows
        types = batch.column(0)
        if _BULK and types.null_count == 0 and _only(types, STATE_PATCH):
            texts = batch.column(1).to_pylist()
            joined = _joined(texts)
            versioned, blobs = (b'"$v"' in joined, b'"$blob"' in joined) if b"$" in joined else (False, False)
            if not versioned:  # a versioned patch is lifted (or refused, if newer) below
                first = seg.first + at
                payloads = None if blobs else _patches(joined, n)
                if payloads is None:
                    payloads = _decoded(joined, texts, range(first, first + n), decode)
                yield PatchBatch(first, payloads)
                at += n
                continue
        yield from _table_events(seg.slice(at, at + n), decode, run_id)
        at += n


def _patches(joined: bytes, n: int) -> list[PatchPayload] | None:
    """A batch of ``n`` ``state.patch`` payloads, ``joined`` (:func:`_joined`) and holding no
    ``"$"`` marker (no blob reference, no version), as :class:`PatchPayload` structs; None if
    it is not ``n`` payloads of that shape (:func:`_decoded` then reads it the general way
    and names what is wrong). msgspec reads an integer past 64 bits exactly: no scan for
    them."""
    try:
        payloads = _PATCHES.decode(joined)
    except (msgspec.DecodeError, RecursionError):  # its ValidationError is a DecodeError
        return None
    return payloads if len(payloads) == n else None


_PATCHES = msgspec.json.Decoder(list[PatchPayload])


def _only(types: pa.DictionaryArray, name: str) -> bool:
    """Whether every value of a dictionary column is ``name``."""
    dictionary = types.dictionary
    if len(dictionary) == 1:
        return bool(dictionary[0].as_py() == name)
    codes = {i for i, value in enumerate(dictionary.to_pylist()) if value == name}
    if len(codes) != 1:
        return False
    return bool((types.indices.to_numpy() == codes.pop()).all())  # numpy: pyarrow's own import


def _table_events(table: pa.Table, decode: Callable[[str, int], Any], run_id: str) -> Iterator[Any]:
    """Events from a table, a batch of 4,096 rows at a time: columns turned into Python
    lists once, payloads decoded in bulk (:func:`_payloads`)."""
    for batch in table.to_batches(max_chunksize=_BATCH):
        cols = [batch.column(i) for i in range(batch.num_columns)]
        cols[5] = cols[5].view(pa.int64())  # ts: ints, not datetimes (a view: no compute kernel)
        values = [column_values(c) for c in cols]
        values[6] = _payloads(values[6], values[0], decode)
        for row in zip(*values, strict=True):
            yield Event(seq=row[0], type=row[1], payload=_current(row[1], row[6], run_id, row[0]),
                        actor=row[2], caused_by=row[3],
                        span_id=row[4], ts=row[5], model=row[7], input_tokens=row[8],
                        output_tokens=row[9], cached_tokens=row[10], cost_usd=row[11],
                        duration_ms=row[12], hash=row[13])


def _current(type: str, payload: Any, run_id: str, seq: int) -> Any:
    """A standard payload in the version this code reads: an older one is lifted (the log is
    never rewritten, so its hashes stay valid); a newer one is refused naming run and seq."""
    if type not in _LIFTED:
        return payload
    try:
        return lift(type, payload)
    except EventSchemaError as exc:
        raise exc.at(run_id, seq) from None


def _row_event(row: tuple[Any, ...], decode: Callable[[str, int], Any], run_id: str) -> Event:
    (seq, type, actor, caused_by, span_id, ts, payload, model, input_tokens, output_tokens,
     cached_tokens, cost_usd, duration_ms, hash) = row
    return Event(seq=seq, type=type, payload=_current(type, decode(payload, seq), run_id, seq),
                 actor=actor, caused_by=caused_by,
                 span_id=span_id, ts=ts, model=model, input_tokens=input_tokens,
                 output_tokens=output_tokens, cached_tokens=cached_tokens, cost_usd=cost_usd,
                 duration_ms=duration_ms, hash=hash)
