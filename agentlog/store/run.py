"""A recorded run, for reading: its events as :class:`Event` objects or one Arrow table.

A run is read as a snapshot (sealed segments + WAL tail, see :mod:`.snapshot`) taken on first
use and kept until :meth:`Run.refresh`. A fork stitches its parent's events ``0..fork_seq``
in front of its own, recursively, so a fork of a fork reads as one run.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..accessors import Extensible
from ..chain import GENESIS
from ..errors import EventNotFoundError, EventSchemaError
from ..events import BlobRef, Event, lift, registry
from .lock import writer_is_live
from .meta import read_meta
from .segments import empty_table
from .snapshot import SegmentCache, Snapshot, load_snapshot
from .wal import TornWALWarning

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from datetime import datetime

    import pandas as pd

    from .store import Store
    from .verify import VerifyReport

__all__ = ["Run"]

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
        self._cache = SegmentCache()
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
        if snap.scan.torn and not writer_is_live(self.path):
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
        self.meta = read_meta(self.path)
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

        Seeks to the segments that hold them and converts a batch of rows at a time.

        Raises:
            ValueError: ``start`` is negative.
        """
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
            yield from parent.iter_events(start, min(stop, at + 1))
            start = at + 1
        decode = _decoder(self.store.blobs.read)
        for seg in snap.segments:
            if seg.end <= start or seg.first >= stop:
                continue
            lo = max(start, seg.first) - seg.first
            hi = min(stop, seg.end) - seg.first
            yield from _table_events(seg.table.slice(lo, hi - lo), decode, self.id)
        for row in snap.tail:
            if start <= row[0] < stop:
                yield _row_event(row, decode, self.id)

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

    # --- state: a fold over the log (the shell feeds events; agentlog.fold folds) ------------

    def _index(self, reducers: Any) -> Any:
        """The snapshot index for a reducer set, built once and extended as the run grows."""
        from ..fold import SnapshotIndex
        key = id(reducers)
        held = self._indexes.get(key)
        if held is not None and held[0] is reducers:
            index = held[1]
            if len(index) != len(self):
                index.extend(len(self))
            return index
        index = SnapshotIndex(lambda start, stop: self.iter_events(start, stop), len(self), reducers)
        self._indexes[key] = (reducers, index)
        return index

    def state_at(self, n: int, *, reducers: Any = None) -> Any:
        """The state after event ``n`` (``-1``: the initial state), through a snapshot index.

        The first call builds the index with one bulk fold; later calls fold at most K events
        from the nearest snapshot.

        Args:
            n: a seq of this run, or ``-1`` for the state before the first event.
            reducers: a :class:`~agentlog.fold.Reducers` set (default: the default projection).
        """
        return self._index(reducers).at(n)

    def states(self, start: int = 0, stop: int | None = None, *,
               reducers: Any = None) -> Iterator[tuple[Event, Any]]:
        """Yield ``(event, state after it)`` for ``start <= seq < stop``, O(1) per step."""
        steps: Iterator[tuple[Event, Any]] = self._index(reducers).states(start, stop)
        return steps

    def check_determinism(self, reducers: Any = None) -> Any:
        """Fold twice (in one pass and through snapshots) and report the first difference."""
        from ..fold import check_determinism
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


def _decoder(reader: Callable[[str], bytes]) -> Callable[[str], Any]:
    def hook(obj: dict[str, Any]) -> Any:
        return BlobRef.from_json(obj, reader) if "$blob" in obj else obj

    def decode(text: str) -> Any:
        # The hook costs a call per object; only payloads that hold a blob ref pay for it.
        return json.loads(text, object_hook=hook) if '"$blob"' in text else json.loads(text)

    return decode


def _table_events(table: pa.Table, decode: Callable[[str], Any], run_id: str) -> Iterator[Event]:
    for batch in table.to_batches(max_chunksize=_BATCH):
        cols = [batch.column(i) for i in range(batch.num_columns)]
        cols[5] = cols[5].cast(pa.int64())  # ts: ints, not datetimes
        values = [c.to_pylist() for c in cols]
        for row in zip(*values, strict=True):
            yield _row_event(row, decode, run_id)


def _row_event(row: tuple[Any, ...], decode: Callable[[str], Any], run_id: str = "") -> Event:
    (seq, type, actor, caused_by, span_id, ts, payload, model, input_tokens, output_tokens,
     cached_tokens, cost_usd, duration_ms, hash) = row
    data = decode(payload)
    if type in _LIFTED:
        try:
            data = lift(type, data)  # an older payload, read in today's shape (never rewritten)
        except EventSchemaError as exc:
            raise exc.at(run_id, seq) from None
    return Event(seq=seq, type=type, payload=data, actor=actor, caused_by=caused_by,
                 span_id=span_id, ts=ts, model=model, input_tokens=input_tokens,
                 output_tokens=output_tokens, cached_tokens=cached_tokens, cost_usd=cost_usd,
                 duration_ms=duration_ms, hash=hash)
