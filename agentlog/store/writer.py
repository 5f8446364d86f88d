"""Appending to a run: stamp seq, ts and hash, write the WAL line, seal segments.

An emit prepares the payload (redaction, blobs), encodes it canonically, coerces the usage
fields to their column types, hashes the event into the chain, stores the new blobs, and
writes one WAL line with the run's durability. Anything refused before the WAL write leaves
the run as it was: no seq is used up. Every ``segment_events`` events, and on close, the WAL
is sealed into a Parquet segment and a new WAL begins.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Self

from .._words import with_article
from ..chain import body_text, chain_hash, event_body
from ..errors import (
    BlobNotFoundError,
    CanonicalJSONError,
    EventSchemaError,
    InvalidBlobRefError,
    RunClosedError,
)
from ..events import BlobRef, Body, Event, check_payload, lift
from ..events.event import stamped
from ..redact import Redactor
from .lock import RunLock
from .meta import iso_time, write_meta
from .payload import PayloadPreparer
from .segments import rows_to_table, write_segment
from .wal import WAL_NAME, Durability, WalAppender, encode_line

if TYPE_CHECKING:
    from .run import Run
    from .snapshot import SegmentCache
    from .store import Store

__all__ = ["HOLD_MS", "INLINE_MAX", "Emit", "RunWriter"]

#: Test seam for the crash tests: called with the name of each step of a seal as it is
#: reached ("segment-written", "segment-renamed", "wal-rotated"). ``None`` in normal use.
seal_hook: Callable[[str], None] | None = None

Clock = Callable[[], float]

#: At most this many milliseconds pass between :meth:`RunWriter.emit_many` holding a WAL line
#: and a background thread writing it (if nothing else wrote it before).
HOLD_MS: Final = 50.0
#: An :class:`Emit` with ``inline=True`` keeps strings up to this many bytes in its event (a
#: longer one is a blob, as any string over the run's threshold).
INLINE_MAX: Final = 1 << 20


class Emit(NamedTuple):
    """One event for :meth:`RunWriter.emit_many`: a typed body and where it comes from."""

    body: Body
    """The event's typed body (checked when it was built)."""
    actor: str | None = None
    caused_by: int | None = None
    span_id: str | None = None
    ts: int | None = None
    """The event's time in microseconds since the epoch, for an event taken from another
    system (a span's start or end); ``None``: read from the writer's clock."""
    caused_by_item: int | None = None
    """Instead of ``caused_by``: the index, in the same batch, of the earlier item this event
    is caused by (whose seq is not known until the batch is written)."""
    inline: bool = False
    """Keep the event's strings in it up to :data:`INLINE_MAX` bytes whatever the run's blob
    threshold: for a value unique to its event (a model call's HTTP body holds the whole
    conversation; a live span's attributes, what it saw), which a blob would store once all
    the same, at the cost of a file and two fsyncs."""
    span_item: int | None = None
    """Instead of ``span_id``: the index, in the same batch, of the item whose seq names the
    span (``s<seq>``: the ``span.started`` that opens it; its own index for that item). The id
    is taken where the seq is, under the writer's lock, so spans opened at once from several
    threads never share one."""
    keyed: bool = False
    """Set the body's ``idempotency_key`` (a :class:`~agentlog.events.ToolCall`'s) to
    ``"<run id>:<seq>"`` of this item, where the seq is taken, under the writer's lock: tool
    calls made at once from several threads never share one."""


def item_body(item: Emit, run_id: str, seq: int) -> Body:
    """The body of ``item`` written as ``seq`` of run ``run_id`` (:attr:`Emit.keyed`)."""
    if not item.keyed:
        return item.body
    return dataclasses.replace(item.body, idempotency_key=f"{run_id}:{seq}")  # type: ignore[call-arg]


class _Staged(NamedTuple):
    """An event checked, encoded and chained, not yet written."""

    event: Event
    row: tuple[Any, ...]
    line: bytes
    new_blobs: list[tuple[BlobRef, bytes]]


class _Flusher:
    """One daemon thread that writes the lines writers hold, at most :data:`HOLD_MS` after the
    first of them was held, and (``durability="fsync"``) fsyncs the lines written with
    ``sync=False`` that no later write fsynced, at most :data:`HOLD_MS` after the first of them
    (it sleeps while no writer has any)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._writers: weakref.WeakSet[RunWriter] = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def due(self, writer: RunWriter) -> None:
        """``writer`` just held a line, or wrote one unsynced, after having none: write (and
        fsync) it within :data:`HOLD_MS`."""
        with self._cond:
            writer._flushing = True
            if writer in self._writers:
                return  # the next round writes it
            self._writers.add(writer)
            if len(self._writers) == 1:  # the thread waits for a first writer
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, daemon=True, name="agentlog-held-lines")
                    self._thread.start()
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._writers:
                    self._cond.wait()
            time.sleep(HOLD_MS / 1000)
            with self._cond:
                writers = list(self._writers)
                self._writers.clear()
            for writer in writers:
                # Cleared before the writer's lock is taken: a line held from now on either
                # registers the writer again or is written by this _write_due.
                writer._flushing = False
                try:
                    writer._write_due()
                except OSError:  # the lines stay held: the next append or close writes them, or raises
                    pass


_FLUSHER = _Flusher()


class RunWriter:
    """The one writer of a run. Get one with ``store.create_run()`` or ``store.writer(id)``.

    Use it as a context manager: it closes on exit, with status ``failed`` if the block
    raised.
    """

    def __init__(self, *, store: Store, run_id: str, path: Path, meta: dict[str, Any],
                 lock: RunLock, durability: Durability, clock: Clock | None,
                 segment_events: int, blob_threshold: int, redact: tuple[str, ...],
                 seq: int, head: str, rows: list[tuple[Any, ...]],
                 segments: SegmentCache | None = None) -> None:
        self._store, self.id, self.path = store, run_id, path
        self._segments = segments  # the footers read when the run was reopened (see run)
        self._meta, self._lock = meta, lock
        self.durability = durability
        self._clock = clock
        self._segment_events = segment_events
        self._seq, self._head = seq, head
        self._rows = rows  # the events in the WAL (or held for it), not yet sealed
        self._held: list[bytes] = []  # WAL lines taken by emit_many(hold=True), not written yet
        self._flushing = False  # the flusher thread has this writer's held lines on its list
        self._mutex = threading.RLock()
        self._closed = False
        self._durable = durability is not Durability.NONE
        self._stored: dict[str, int] = {}  # digest -> size of the blobs this writer just stored
        self._prep = PayloadPreparer(redact=redact, threshold=blob_threshold,
                                     reader=store.blobs.read)
        self._prep_inline = self._prep.with_threshold(max(blob_threshold, INLINE_MAX))  # Emit(inline=True)
        self._wal = WalAppender(path / WAL_NAME, durability)
        self.on_seal: Callable[[int, bool], None] | None = None
        """Called after each seal with the seq the segment ends before and whether the writer
        is closing (the recorder checkpoints its state there: :mod:`.checkpoints`)."""

    # --- state ------------------------------------------------------------------------------

    @property
    def seq(self) -> int:
        """The seq the next event will get."""
        return self._seq

    @property
    def head(self) -> str:
        """The hash of the last event (the chain's start before the first)."""
        return self._head

    @property
    def segment_room(self) -> int:
        """How many more events the open segment takes: the append that brings it to 0 seals
        it. A bulk copy that cuts its :meth:`emit_many` batches here gets the segments that
        appending one event at a time gives."""
        return max(self._segment_events - len(self._rows), 1)

    @property
    def redactor(self) -> Redactor:
        """The run's redaction policy (:mod:`agentlog.redact`): the built-in names and the run's."""
        return self._prep.redactor

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def run(self) -> Run:
        """A reader of this run, as it is on disk now (held lines written first)."""
        self.write_held()
        run = self._store.run(self.id, exact=True)
        if self._segments is not None:
            # A reopened run's segments were opened by their footers to find its end: the
            # reader reuses them (a segment never changes; a replaced file is read again)
            # instead of reading every footer a second time (11 of them at 600,000 events).
            run._cache = self._segments
        return run

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"next seq {self._seq:,}"
        return f"<RunWriter {self.id} {state} {self.durability.value}>"

    # --- appending --------------------------------------------------------------------------

    def emit(self, type: str | Body, payload: Mapping[str, Any] | None = None, *,
             actor: str | None = None, caused_by: int | None = None,
             span_id: str | None = None, model: str | None = None,
             input_tokens: int | None = None, output_tokens: int | None = None,
             cached_tokens: int | None = None, cost_usd: float | None = None,
             duration_ms: float | None = None) -> Event:
        """Append an event and return it as stored.

        A standard event type (:mod:`agentlog.events`) is checked against its body class
        before anything is written; other types are stored as they are.

        Args:
            type: the dotted event type, e.g. ``llm.response``; or a typed body
                (``LLMResponse(...)``), which gives the payload and the usage columns.
            payload: a mapping of JSON values; ``bytes`` and long strings become blobs,
                redacted keys become ``"[REDACTED]"``. Not given with a body.
            actor, caused_by, span_id: where the event comes from.
            model, input_tokens, output_tokens, cached_tokens, cost_usd, duration_ms: usage,
                coerced to int (tokens) and float (cost, duration). Not given with a body.

        Returns:
            The stored event: seq, ts and hash stamped, payload as stored (blob references as
            :class:`~agentlog.events.BlobRef` objects).

        Raises:
            RunClosedError: the writer is closed.
            TypeError: the payload is not a mapping, or a field has the wrong type.
            EventSchemaError: the payload of a standard type does not fit its body class.
            CanonicalJSONError: a value has no canonical JSON form (path ``payload.…``).
            InvalidBlobRefError: a blob reference in the payload is malformed.
            BlobNotFoundError: a blob reference in the payload names a blob not stored.
        """
        if isinstance(type, Body):
            given = (payload, model, input_tokens, output_tokens, cached_tokens, cost_usd, duration_ms)
            if any(v is not None for v in given):
                raise TypeError(f"run {self.id!r}: {with_article(type.TYPE)} body carries its payload and usage "
                                "columns; pass only actor, caused_by and span_id with it")
            with self._mutex:
                staged = self._stage_body(type, self._seq, self._head, actor, caused_by, span_id, None)
                self._commit([staged], hold=False)
                return staged.event
        return self._write(type, payload, actor=actor, caused_by=caused_by, span_id=span_id,
                           model=model, input_tokens=input_tokens, output_tokens=output_tokens,
                           cached_tokens=cached_tokens, cost_usd=cost_usd,
                           duration_ms=duration_ms)

    def append(self, event: Event) -> Event:
        """Append an event that already has its seq and ``ts`` (an imported or copied event).

        The payload is prepared as :meth:`emit` prepares it (redaction, blobs) and the chain
        hash is computed here. ``ts`` is kept as given instead of read from the clock. When
        ``event.hash`` is set it must equal the computed hash, so a copied run keeps exactly
        its hashes or nothing is written.

        Args:
            event: the event; ``seq`` must be the writer's next seq, ``ts`` is microseconds
                since the epoch, ``hash`` is ``""`` (compute it) or the hash to check.

        Returns:
            The stored event, as :meth:`emit` returns it.

        Raises:
            ValueError: ``event.seq`` is not the next seq, or ``event.hash`` differs from the
                chain hash (nothing is written); both name the seq.
            RunClosedError, TypeError, CanonicalJSONError, InvalidBlobRefError,
                BlobNotFoundError: as for :meth:`emit`.

        >>> import tempfile, agentlog as al
        >>> w = al.Store(tempfile.mkdtemp()).create_run(run_id="copy", durability="none")
        >>> w.append(al.Event(seq=0, type="note", payload={"text": "hi"}, ts=5)).ts
        5
        >>> w.append(al.Event(seq=1, type="note", ts=6, hash="0" * 64))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: run 'copy', seq 1: the event's hash 000000000000… differs from the chain hash ... (the event or an earlier one was changed)
        >>> w.close()
        """
        return self._write(event.type, event.payload, actor=event.actor,
                           caused_by=event.caused_by, span_id=event.span_id, model=event.model,
                           input_tokens=event.input_tokens, output_tokens=event.output_tokens,
                           cached_tokens=event.cached_tokens, cost_usd=event.cost_usd,
                           duration_ms=event.duration_ms, at=(event.seq, event.ts),
                           expect=event.hash or None)

    def emit_many(self, items: Iterable[Emit | Event], *, hold: bool = False,
                  sync: bool = True) -> list[Event]:
        """Append several events under one lock, with one WAL write.

        The events get consecutive seqs and are chained exactly as the same items appended one
        by one would be: an :class:`Emit` as :meth:`emit` appends its body (its ``ts`` read
        from the clock as it is staged, unless it gives one), an :class:`Event` as
        :meth:`append` appends it (its seq must be the next, its ``ts`` is kept, its payload
        is checked as an imported one and its hash, when set, must be the chain hash). All or
        nothing: if one is refused (a bad field, a value with no canonical form, a hash that
        differs) none is written and no seq is used up.

        Args:
            items: :class:`Emit` tuples (a checked body and where it comes from) and events
                copied in; a ``caused_by`` may name an earlier event of the same batch, by its
                seq or (an :class:`Emit`'s ``caused_by_item``) by its index in ``items``.
            hold: keep the WAL lines in memory instead of writing them now: they are written
                with the next append that does not hold, by :meth:`flush`, before a seal, at
                :meth:`close`, and by a background thread at most :data:`HOLD_MS` ms after the
                first of them was held. Until then a reader does not see them and a crash
                loses them (they are not acknowledged); the seqs are taken at once, so events
                appended later come after them on disk too. The live span processor holds the
                events of spans inside a root span and writes them when the root span ends.
            sync: with ``durability="fsync"``, ``False`` writes the lines to the OS now (a
                reader sees them, a process crash keeps them) and leaves their fsync to the
                next write that syncs, :meth:`flush` or :meth:`close`: one fsync then covers
                both; if none comes, a background thread fsyncs them at most
                :data:`HOLD_MS` ms after they were written. The transport writes a model
                call's request this way, so the call costs one fsync, made when its answer
                is written; the live span processor writes its spans this way.

        Returns:
            The stored events, in order.

        Raises:
            RunClosedError, TypeError, CanonicalJSONError, InvalidBlobRefError,
                BlobNotFoundError: as for :meth:`emit`, naming the seq of the refused event.
            ValueError: an event's seq is not its place in the batch, or its hash differs
                from the chain hash (as for :meth:`append`).
            OSError: the WAL write failed (nothing of this batch is written; lines held
                before stay held).

        >>> import tempfile, agentlog as al
        >>> from agentlog.events import SpanStarted, SpanEnded
        >>> w = al.Store(tempfile.mkdtemp()).create_run(run_id="many", durability="none")
        >>> [e.seq for e in w.emit_many([Emit(SpanStarted(name="plan", kind="chain"), span_id="s0"),
        ...                              Emit(SpanEnded(name="plan"), span_id="s0", caused_by=0)])]
        [0, 1]
        >>> w.close()
        """
        with self._mutex:
            staged: list[_Staged] = []
            seq, head = self._seq, self._head
            for item in items:
                if isinstance(item, Event):  # copied in: checked as append() checks it
                    one = self._stage(item.type, item.payload, seq=seq, head=head, actor=item.actor,
                                      caused_by=item.caused_by, span_id=item.span_id, model=item.model,
                                      input_tokens=item.input_tokens, output_tokens=item.output_tokens,
                                      cached_tokens=item.cached_tokens, cost_usd=item.cost_usd,
                                      duration_ms=item.duration_ms, at=(item.seq, item.ts),
                                      expect=item.hash or None)
                else:
                    body = item.body
                    if not isinstance(body, Body):
                        raise TypeError(f"run {self.id!r}, seq {seq}: emit_many takes typed bodies "
                                        f"and events, got {_tname(body)}")
                    caused_by = item.caused_by
                    if item.caused_by_item is not None:
                        caused_by = _item_seq(staged, item.caused_by_item, self.id, seq)
                    span_id = item.span_id
                    if item.span_item is not None:
                        span_id = f"s{seq if item.span_item == len(staged) else _item_seq(staged, item.span_item, self.id, seq)}"
                    if item.keyed:
                        body = item_body(item, self.id, seq)
                    one = self._stage_body(body, seq, head, item.actor, caused_by, span_id, item.ts,
                                           item.inline)
                staged.append(one)
                seq, head = seq + 1, one.event.hash
            if staged:
                self._commit(staged, hold=hold, sync=sync)
            return [one.event for one in staged]

    def _write(self, type: str, payload: Mapping[str, Any] | None, *, actor: str | None,
               caused_by: int | None, span_id: str | None, model: str | None,
               input_tokens: int | None, output_tokens: int | None, cached_tokens: int | None,
               cost_usd: float | None, duration_ms: float | None,
               at: tuple[int, int] | None = None, expect: str | None = None) -> Event:
        """The append path of a type and payload: ``at`` = (seq, ts) of an event copied in,
        ``expect`` its hash (a typed body takes :meth:`_stage_body`)."""
        with self._mutex:
            staged = self._stage(type, payload, seq=self._seq, head=self._head, actor=actor,
                                 caused_by=caused_by, span_id=span_id, model=model,
                                 input_tokens=input_tokens, output_tokens=output_tokens,
                                 cached_tokens=cached_tokens, cost_usd=cost_usd,
                                 duration_ms=duration_ms, at=at, expect=expect)
            self._commit([staged], hold=False)
            return staged.event

    def _stage(self, type: str, payload: Mapping[str, Any] | None, *, seq: int, head: str,
               actor: str | None, caused_by: int | None, span_id: str | None, model: str | None,
               input_tokens: int | None, output_tokens: int | None, cached_tokens: int | None,
               cost_usd: float | None, duration_ms: float | None,
               at: tuple[int, int] | None = None, expect: str | None = None) -> _Staged:
        """Check, encode and chain one event as seq ``seq`` after hash ``head``; nothing is
        written and the writer's state is not changed."""
        if self._closed:
            raise RunClosedError(self.id)
        where = self._where(seq)
        if at is not None and at[0] != seq:
            raise ValueError(f"run {self.id!r}: cannot append seq {at[0]!r}; the next seq is {seq}")
        if payload is None:
            payload = {}
        elif not isinstance(payload, Mapping):
            raise TypeError(f"{where}: payload must be a mapping, got {_tname(payload)}")
        if not isinstance(type, str) or not type:
            raise TypeError(f"{where}: type must be a non-empty str, got {type!r}")
        if at is None:
            payload = _current(type, payload, self.id, seq)  # a new event is written as today's
        try:
            prepared, payload_json = self._prep.encode(payload)
        except InvalidBlobRefError as exc:
            raise InvalidBlobRefError(exc.ref, f"{exc.where} ({where})") from None
        except CanonicalJSONError as exc:
            raise CanonicalJSONError(exc.path, f"{exc.problem} ({where})") from None
        # a program's own event is strict; an imported one keeps extra keys
        _check_body(type, prepared.value, self.id, seq, strict=at is None)
        for ref, path in prepared.refs:
            self._check_ref(ref, path, where)
        # Coerced to the column types; a None (most columns of most events) needs no call.
        if actor is not None:
            actor = _text(actor, "actor", where)
        if span_id is not None:
            span_id = _text(span_id, "span_id", where)
        if model is not None:
            model = _text(model, "model", where)
        if not type.isascii():
            _text(type, "type", where)
        if caused_by is not None:
            caused_by = _int(caused_by, "caused_by", where)
        if input_tokens is not None:
            input_tokens = _int(input_tokens, "input_tokens", where)
        if output_tokens is not None:
            output_tokens = _int(output_tokens, "output_tokens", where)
        if cached_tokens is not None:
            cached_tokens = _int(cached_tokens, "cached_tokens", where)
        if cost_usd is not None:
            cost_usd = _real(cost_usd, "cost_usd", where)
        if duration_ms is not None:
            duration_ms = _real(duration_ms, "duration_ms", where)
        if caused_by is not None and not 0 <= caused_by < seq:
            raise ValueError(f"{where}: caused_by {caused_by} is not an earlier seq")
        ts = self._now() if at is None else _int(at[1], "ts", where)
        if ts is None:
            raise TypeError(f"{where}: ts must be an int (microseconds since the epoch), got None")
        body = event_body(seq=seq, type=type, payload_json=payload_json, actor=actor,
                          caused_by=caused_by, span_id=span_id, ts=ts, model=model,
                          input_tokens=input_tokens, output_tokens=output_tokens,
                          cached_tokens=cached_tokens, cost_usd=cost_usd,
                          duration_ms=duration_ms)
        digest = chain_hash(head, body)
        if expect is not None and digest != expect:
            raise ValueError(f"{where}: the event's hash {str(expect)[:12]}… differs from the "
                             f"chain hash {digest[:12]}… (the event or an earlier one was changed)")
        row = (seq, type, actor, caused_by, span_id, ts, payload_json, model, input_tokens,
               output_tokens, cached_tokens, cost_usd, duration_ms, digest)
        event = Event(seq=seq, type=type, payload=prepared.value, actor=actor,
                      caused_by=caused_by, span_id=span_id, ts=ts, model=model,
                      input_tokens=input_tokens, output_tokens=output_tokens,
                      cached_tokens=cached_tokens, cost_usd=cost_usd,
                      duration_ms=duration_ms, hash=digest)
        return _Staged(event, row, encode_line(digest, body), prepared.new_blobs)

    def _stage_body(self, body: Body, seq: int, head: str, actor: str | None, caused_by: int | None,
                    span_id: str | None, ts: int | None, inline: bool = False) -> _Staged:
        """:meth:`_stage` for a typed body (checked when it was built, so not again): the
        same checks of what the body does not check, in the same order, the same bytes, hash
        and event, with the payload walked and encoded in one pass and the usage columns read
        only for a type that has them. ``ts``: the event's own time, else the clock's;
        ``inline``: as :attr:`Emit.inline`."""
        if self._closed:
            raise RunClosedError(self.id)
        type_ = body.TYPE
        try:
            prepared, payload_json = (self._prep_inline if inline else self._prep).encode(body.to_payload())
        except InvalidBlobRefError as exc:
            raise InvalidBlobRefError(exc.ref, f"{exc.where} ({self._where(seq)})") from None
        except CanonicalJSONError as exc:
            raise CanonicalJSONError(exc.path, f"{exc.problem} ({self._where(seq)})") from None
        for ref, path in prepared.refs:
            self._check_ref(ref, path, self._where(seq))
        # The column checks of _stage in its order, each made only for a value that is not
        # already what it returns (an ASCII str, an int), so the usual event makes none.
        if actor is not None and (type(actor) is not str or not actor.isascii()):
            actor = _text(actor, "actor", self._where(seq))
        if span_id is not None and (type(span_id) is not str or not span_id.isascii()):
            span_id = _text(span_id, "span_id", self._where(seq))
        cls = type(body)
        has_columns = _COLUMNS.get(cls)
        if has_columns is None:  # a type's column fields are fixed; an override may vary: read it
            has_columns = _COLUMNS[cls] = cls.columns is not Body.columns or bool(body.columns())
        columns = body.columns() if has_columns else _NO_COLUMNS
        model = columns.get("model")
        if model is not None:
            model = _text(model, "model", self._where(seq))
        if not type_.isascii():
            _text(type_, "type", self._where(seq))
        checked = caused_by is None or (type(caused_by) is int and 0 <= caused_by < seq)
        if not checked:
            caused_by = _int(caused_by, "caused_by", self._where(seq))
        input_tokens = output_tokens = cached_tokens = cost_usd = duration_ms = None
        if has_columns:
            where = self._where(seq)
            input_tokens = _int(columns.get("input_tokens"), "input_tokens", where)
            output_tokens = _int(columns.get("output_tokens"), "output_tokens", where)
            cached_tokens = _int(columns.get("cached_tokens"), "cached_tokens", where)
            cost_usd = _real(columns.get("cost_usd"), "cost_usd", where)
            duration_ms = _real(columns.get("duration_ms"), "duration_ms", where)
        if not checked and caused_by is not None and not 0 <= caused_by < seq:
            raise ValueError(f"{self._where(seq)}: caused_by {caused_by} is not an earlier seq")
        if ts is None:
            ts = self._now()
        elif type(ts) is not int:
            ts = _int(ts, "ts", self._where(seq))
            if ts is None:
                raise TypeError(f"{self._where(seq)}: ts must be an int (microseconds since the epoch), got None")
        body_json = body_text(seq, type_, payload_json, actor, caused_by, span_id, ts, model, input_tokens,
                              output_tokens, cached_tokens, cost_usd, duration_ms)
        digest = chain_hash(head, body_json)
        row = (seq, type_, actor, caused_by, span_id, ts, payload_json, model, input_tokens,
               output_tokens, cached_tokens, cost_usd, duration_ms, digest)
        event = stamped(seq, type_, prepared.value, actor, caused_by, span_id, ts, model, input_tokens,
                        output_tokens, cached_tokens, cost_usd, duration_ms, digest)
        return _Staged(event, row, encode_line(digest, body_json), prepared.new_blobs)

    def _where(self, seq: int) -> str:
        """How an error names the event: the run and the seq."""
        return f"run {self.id!r}, seq {seq}"

    def _commit(self, staged: list[_Staged], *, hold: bool, sync: bool = True) -> None:
        """Store the blobs, write (or hold) the WAL lines of ``staged`` (after any lines held
        before), then take their seqs; seal when the segment is full."""
        # Blobs first: an event on disk never names a blob that is not.
        for one in staged:
            for ref, raw in one.new_blobs:
                self._store.blobs.write(ref.digest, raw, durable=self._durable)
                self._stored_blob(ref)
        lines = staged[0].line if len(staged) == 1 else b"".join([one.line for one in staged])
        if hold:
            if not self._held and not self._flushing:
                _FLUSHER.due(self)
            self._held.append(lines)
        else:
            self._wal.append(b"".join(self._held) + lines if self._held else lines, sync=sync)
            self._held = []
            if not sync and not self._flushing and self._wal.durability is Durability.FSYNC:
                _FLUSHER.due(self)  # fsynced by the next write that syncs, or within HOLD_MS
        if len(staged) == 1:
            self._rows.append(staged[0].row)
        else:
            self._rows.extend([one.row for one in staged])
        last = staged[-1].event
        self._seq, self._head = last.seq + 1, last.hash
        if len(self._rows) >= self._segment_events:
            try:
                self._seal()
                self._sealed(closing=False)
            except OSError as exc:
                # The event is safe in the WAL; raising would invite a retry, and so a
                # duplicate. The next emit tries the seal again, and close() raises.
                warnings.warn(f"run {self.id!r}: sealing a segment failed ({exc}); the "
                              "events stay in the WAL and the seal is retried",
                              RuntimeWarning, stacklevel=3)

    def write_held(self) -> None:
        """Write the WAL lines held by :meth:`emit_many` (``hold=True``), if any, with the
        run's durability."""
        with self._mutex:
            if self._held and not self._closed:
                self._wal.append(b"".join(self._held))
                self._held = []

    def _write_due(self) -> None:
        """The background thread's round (:data:`HOLD_MS` after this writer was due): write
        the held lines; with ``durability="fsync"``, fsync the lines written with
        ``sync=False`` that no write has fsynced since (one fsync covers both)."""
        with self._mutex:
            if self._closed:
                return
            if self._held:
                self.write_held()
            elif self._wal.durability is Durability.FSYNC:
                self._wal.commit()

    def put_blob(self, data: bytes | str, media_type: str | None = None) -> BlobRef:
        """Store bytes or text as a blob of this store and return its :class:`BlobRef`.

        Raises:
            RunClosedError: the writer is closed.
        """
        if self._closed:
            raise RunClosedError(self.id)
        ref = self._store.blobs.put(data, media_type, durable=self._durable)
        self._stored_blob(ref)
        return ref

    def flush(self) -> None:
        """Write the lines :meth:`emit_many` held, and commit the WAL now (``batch``: the
        pending group; ``fsync``: already done)."""
        with self._mutex:
            self.write_held()
            if not self._closed and self._durable:
                self._wal.commit()

    def close(self, status: str = "closed") -> None:
        """Seal what is left, record the head, count and status in ``run.json``, unlock.

        Idempotent. After it the WAL is gone and the run is all Parquet.
        """
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            try:
                self._seal(rotate=False)
                self._sealed(closing=True)
                self._wal.close(remove=True, durable=self._durable)
                meta = dict(self._meta, head=self._head, count=self._seq, status=str(status),
                            closed=iso_time(self._now()))
                write_meta(self.path, meta, durable=self._durable)
                self._meta = meta
            finally:
                self._wal.close()
                self._lock.release()
            self._store._closed(self.id)  # signs the run if the store has a key

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close("failed" if exc_type is not None else "closed")

    # --- internals --------------------------------------------------------------------------

    def _now(self) -> int:
        if self._clock is None:
            return time.time_ns() // 1000
        return round(self._clock() * 1_000_000)

    def _stored_blob(self, ref: BlobRef) -> None:
        """Remember a blob this writer stored, so the event naming it next need not look for
        it on disk again (the last few hundred: an event names what was just stored)."""
        if len(self._stored) >= _STORED_KEPT:
            self._stored.clear()
        self._stored[ref.digest] = ref.size

    def _check_ref(self, ref: Any, path: str, where: str) -> None:
        if self._stored.get(ref.digest) == ref.size:
            return
        file = self._store.blobs.path(ref.digest)
        try:
            size = file.stat().st_size
        except FileNotFoundError:
            raise BlobNotFoundError(ref.digest, str(file)) from None
        if size != ref.size:
            raise InvalidBlobRefError(ref.to_json(), f"{path} ({where}): the blob has {size} bytes")

    def _sealed(self, *, closing: bool) -> None:
        if self.on_seal is not None:
            self.on_seal(self._seq, closing)

    def _seal(self, *, rotate: bool = True) -> None:
        """WAL → segment: commit the WAL, write the segment, then start a new WAL."""
        if self._held:
            self._wal.append(b"".join(self._held))
            self._held = []
        if self._rows:
            if self._durable:
                self._wal.commit()  # the WAL is the truth until the segment is in place
            table = rows_to_table(self._rows)
            _step("segment-written")
            write_segment(self.path, table, durable=self._durable)
            _step("segment-renamed")
            self._rows = []
            if rotate:
                self._wal.rotate(durable=self._durable)
                _step("wal-rotated")


def _step(name: str) -> None:
    if seal_hook is not None:
        seal_hook(name)


#: How many blobs a writer remembers having stored (see :meth:`RunWriter._stored_blob`).
_STORED_KEPT = 512


def _tname(value: object) -> str:
    return type(value).__name__


def _text(value: Any, name: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{where}: {name} must be a str, got {_tname(value)}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise CanonicalJSONError(name, f"string is not valid UTF-8 ({exc.reason}) ({where})") from None
    return str(value)


_INT64 = 2**63


def _int(value: Any, name: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalJSONError(name, f"{value} is not JSON; use None ({where})")
        if not value.is_integer():
            raise TypeError(f"{where}: {name} must be a whole number, got {value!r}")
        number = int(value)
    else:
        try:
            number = operator.index(value)
        except TypeError:
            raise TypeError(f"{where}: {name} must be an int, got {_tname(value)}") from None
    if not -_INT64 <= number < _INT64:
        raise ValueError(f"{where}: {name} {number} does not fit in int64")
    return number


def _real(value: Any, name: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        raise TypeError(f"{where}: {name} must be a number, got {_tname(value)}")
    number = float(value)
    if not math.isfinite(number):
        what = "NaN" if math.isnan(number) else "infinity"
        raise CanonicalJSONError(name, f"{what} is not JSON; use None ({where})")
    return number


def _item_seq(staged: list[_Staged], index: Any, run_id: str, seq: int) -> int:
    """The seq of the ``index``-th event of a batch, staged before the one at ``seq``."""
    if type(index) is not int or not 0 <= index < len(staged):
        raise ValueError(f"run {run_id!r}, seq {seq}: caused_by_item {index!r} is not an earlier item "
                         f"of the batch")
    return staged[index].event.seq


#: Whether each body class fills usage columns (most types fill none), found on first use.
_COLUMNS: dict[type[Body], bool] = {}
_NO_COLUMNS: Mapping[str, Any] = {}


def _current(type: str, payload: Mapping[str, Any], run_id: str, seq: int) -> Mapping[str, Any]:
    """A standard payload of an older version, lifted to the version this code writes."""
    try:
        return lift(type, payload)
    except EventSchemaError as exc:
        raise exc.at(run_id, seq) from None


def _check_body(type: str, payload: Mapping[str, Any], run_id: str, seq: int, *, strict: bool) -> None:
    """Check a standard event's payload against its body class, naming the run and the seq."""
    try:
        check_payload(type, payload, strict=strict)
    except EventSchemaError as exc:
        raise exc.at(run_id, seq) from None
