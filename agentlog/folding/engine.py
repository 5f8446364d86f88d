"""The fold: events in, state out; and the snapshot index that makes any state cheap to reach.

:func:`fold` runs each event's reducers in order. One thing makes long folds fast without
changing a single result, **the ``state.patch`` fast path**: When ``state.patch`` is handled by the standard
  reducer alone, consecutive patch events are applied to one transient overlay of
  ``vars`` (see :mod:`agentlog.folding._transient`) and committed only when a state must
  exist: at a snapshot, before another reducer runs, at the end. A patch event then costs
  its ops at ``dict`` speed, and the commit costs the keys changed since the last one. The
  code that applies the ops is the one ``apply_patch`` uses, so results and errors match the
  one-event-at-a-time path exactly (:func:`~agentlog.folding.determinism.check_determinism`
  compares the two).

The fold touches nothing outside its arguments and leaves nothing behind: no cache that
outlives a call (the parsed pointers of one fold are kept for that fold only). A fold of many
events pauses the cyclic garbage collector for the duration of that call and turns it back on
before it returns (:func:`_collector_paused`): a fold allocates many containers and frees
almost none in cycles, so the collector's passes, which walk every live container (the
states among them), cost up to a third of a long fold and find nothing. A collector that
was off when the call began stays off.

:class:`SnapshotIndex` keeps the state after every K-th event (K = ``every``; by default
1,000, more for runs over 256,000 events: see :func:`default_every`), built lazily by one bulk
fold, so ``at(n)`` folds at most K - 1 events from the nearest snapshot, and ``states()``
steps forward at O(1) per event.
Persistent states share structure, so the snapshots cost only what changed between them.

Pure: the index reads events through a callable the caller passes; it never opens a file.
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol, TypeAlias

from ..errors import FoldError, ReducerError
from ..events import STATE_PATCH, Event, StatePatch
from ._transient import PatchPayload, Slot, apply_ops
from .persistent import PMap
from .reducers import Reducer, Reducers, patch_vars, reducer_name
from .values import EMPTY_MAP, State, freeze

_OPS: Final = StatePatch.K.ops

__all__ = ["DEFAULT_EVERY", "KEEP", "MAX_SNAPSHOTS", "RECENT", "EventSource", "EventsFn", "PatchBatch",
           "PatchPayload", "SnapshotIndex", "StoredFn", "as_events_fn", "default_every", "fold"]

DEFAULT_EVERY: Final = 1_000
"""The least number of events between snapshots (see :func:`default_every`)."""

MAX_SNAPSHOTS: Final = 256
"""Above ``256 * DEFAULT_EVERY`` events, snapshots are spaced so that there are at most this many."""


def default_every(count: int) -> int:
    """Events between snapshots for a run of ``count`` events: 1,000, or more for long runs.

    ``at(n)`` folds fewer than K events from the nearest snapshot: about 2–4 ms per 1,000 on
    the ``state.patch`` fast path, and the same order for a store to read and decode them,
    so 1,000 keeps random access within a few milliseconds. Each snapshot costs the nodes its
    K events changed; past 256,000 events K grows in steps of 1,000 so that an index holds at
    most :data:`MAX_SNAPSHOTS` snapshots. On the 1M-event mixed workload of
    ``bench/fold.py`` that is K = 4,000: random access stays under 20 ms while all the
    snapshots together stay under 2x the final state (1,000 snapshots would cost 2.3x).

    >>> default_every(10_000), default_every(256_000), default_every(1_000_000)
    (1000, 1000, 4000)
    """
    return DEFAULT_EVERY * max(1, -(-count // (MAX_SNAPSHOTS * DEFAULT_EVERY)))


EventsFn: TypeAlias = Callable[[int, int], Iterable[Event]]
"""``events(start, stop)``: the events with ``start <= seq < stop``, in order."""

StoredFn: TypeAlias = Callable[[int], "tuple[int, State] | None"]
"""``stored(n)``: the nearest stored state at or before the state after event ``n``, as
``(seq, state)``, or ``None`` (a store's checkpoints, which the shell reads)."""

RECENT: Final = 64
"""With stored states, ``at(n)`` keeps the states after the last this many events it folded."""

KEEP: Final = 4
"""With stored states to fall back on, an index keeps at most this many snapshots in memory
(they cost memory, and a stored state is there to start from again). Where every stretch of
events rewrites most of the state (``bench/fold.py``'s *simple* workload), each snapshot costs
about a state of its own: 16 held 8x the final state after 50 random ``state_at`` on a 100k
run, 4 hold 3.4x (``bench/fresh.py``)."""

_PATCH_NAME: Final = reducer_name(patch_vars)


_BATCHED: Final = object()


@dataclass(frozen=True, slots=True)
class PatchBatch:
    """Consecutive ``state.patch`` events as their payloads alone, seqs ``first, first + 1, …``:
    what a store's columnar reader gives the fold's fast path (one object per batch, none per
    event). Only an index's ``fold_events`` yields them, and only the fast path folds them."""

    first: int
    """The seq of the first payload."""
    payloads: list[Any]
    """The payloads, in seq order: all dicts, or all :class:`PatchPayload` structs."""
    type: ClassVar[object] = _BATCHED
    """Not a field: read where an event's type is, so that the fold tells a batch from an event
    only off the patch fast path."""


def _flatten(events: Iterable[Any]) -> Iterator[Any]:
    """``events`` with each :class:`PatchBatch` spread out into one ``Event`` per payload."""
    for event in events:
        if type(event) is PatchBatch:
            for seq, payload in enumerate(event.payloads, event.first):
                yield Event(seq=seq, type=STATE_PATCH,
                            payload=payload.to_dict() if type(payload) is PatchPayload else payload)
        else:
            yield event


class EventSource(Protocol):
    """What ``check_determinism`` and ``SnapshotIndex.of`` accept besides a list: a run."""

    def iter_events(self, start: int = 0, stop: int | None = None) -> Iterable[Event]: ...

    def __len__(self) -> int: ...


def as_events_fn(source: EventSource | Sequence[Event] | Iterable[Event]) -> tuple[EventsFn, int]:
    """Turn a run-like object or a list of events into ``(events(start, stop), count)``.

    Args:
        source: anything with ``iter_events(start, stop)`` and ``len()`` (a ``Run``), a
            sequence of events, or any iterable of events (read into a list).

    Returns:
        The slice function and the number of events.
    """
    if hasattr(source, "iter_events"):
        run: Any = source
        return (lambda start, stop: run.iter_events(start=start, stop=stop)), len(run)
    events: Sequence[Event] = source if isinstance(source, Sequence) else list(source)
    return (lambda start, stop: events[start:stop]), len(events)


def _resolve(reducers: Reducers | Mapping[str, Any] | None) -> Reducers:
    if reducers is None:
        return Reducers.default()
    if isinstance(reducers, Reducers):
        return reducers
    if isinstance(reducers, Mapping):
        return Reducers(reducers)
    raise TypeError(f"reducers must be a Reducers set or a mapping of type -> reducer, "
                    f"got {type(reducers).__name__}")


def _start_state(reducers: Reducers, initial: Mapping[str, Any] | None) -> State:
    if initial is None:
        return reducers.initial_state()
    state = freeze(initial)
    if not isinstance(state, PMap):
        raise TypeError(f"the initial state is a mapping, got {type(initial).__name__}")
    return state


# --- the fold loop ----------------------------------------------------------------------------

def _call(fn: Reducer, state: State, event: Event) -> State:
    try:
        new = fn(state, event)
    except Exception as exc:
        raise ReducerError(event.seq, event.type, reducer_name(fn), exc) from exc
    if type(new) is not PMap:
        wrong = TypeError(f"returned {type(new).__name__}, not a state (a PMap)")
        raise ReducerError(event.seq, event.type, reducer_name(fn), wrong)
    return new


def _step(table: Mapping[str, tuple[Reducer, ...]], state: State, event: Event) -> State:
    """One event, one persistent state (no fast path: each state must stand alone)."""
    fns = table.get(event.type)
    if fns:
        for fn in fns:
            state = _call(fn, state, event)
    return state


def _commit(state: State, slot: Slot, before: Any) -> State:
    after = slot.commit()
    return state if after is before else state.set("vars", after)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the ``with`` block, then as it was before.

    Scoped to one fold call (nothing is paused between calls, or while a caller iterates
    :meth:`SnapshotIndex.states`). Reference counting frees everything a fold drops as it
    goes; only cycles wait for the collector, and a fold makes none of its own (a reducer
    that makes some has them collected at the next pass after the call).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextmanager
def _reading(events: Iterable[Any]) -> Iterator[Iterable[Any]]:
    """``events`` for the ``with`` block, closed when it ends however it ends: a store's reader
    may have a thread reading ahead, which a reducer's error must not leave waiting (the
    error's traceback would keep the half-read generator alive)."""
    try:
        yield events
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


def _drive(events: Iterable[Any], reducers: Reducers, state: State, *, every: int = 0,
           done: int = 0, on_boundary: Callable[[int, State], None] | None = None,
           ) -> tuple[State, int]:
    """Fold ``events`` into ``state``; return the state and how many events were folded.

    ``done`` is how many events of the run came before these; with ``every``, call
    ``on_boundary(k, state)`` whenever the first ``k`` events (a multiple of ``every``) are in.
    The collector is paused while it runs (:func:`_collector_paused`).
    """
    with _collector_paused():
        return _fold_loop(events, reducers, state, every, done, on_boundary)


def _fold_loop(events: Iterable[Any], reducers: Reducers, state: State, every: int, done: int,
               on_boundary: Callable[[int, State], None] | None) -> tuple[State, int]:
    table = reducers._table
    get = table.get
    fast = table.get(STATE_PATCH) == (patch_vars,)
    slot: Slot | None = None  # transient vars while consecutive patches are applied in place
    parsed: dict[str, tuple[str, ...]] = {}  # pointers this fold has parsed
    before: Any = None        # vars when the slot was opened
    position = done
    boundary = (done // every + 1) * every if every else -1
    for event in events:
        kind = event.type
        if fast and kind == STATE_PATCH:
            if slot is None:
                before = state.get("vars", EMPTY_MAP)
                slot = Slot(before)
            try:
                apply_ops(slot, event.payload[_OPS], parsed)
            except Exception as exc:
                raise ReducerError(event.seq, kind, _PATCH_NAME, exc) from exc
        elif kind is _BATCHED:
            if not fast:
                raise TypeError("a PatchBatch is folded only on the state.patch fast path")
            payloads, start, count = event.payloads, 0, len(event.payloads)
            while start < count:
                if slot is None:
                    before = state.get("vars", EMPTY_MAP)
                    slot = Slot(before)
                end = count if boundary < 0 else min(count, start + boundary - position)
                _apply_all(slot, payloads, start, end, parsed, event.first)
                position += end - start
                start = end
                if position == boundary:
                    state, slot = _commit(state, slot, before), None
                    on_boundary(position, state)  # type: ignore[misc]
                    boundary += every
            continue
        else:
            fns = get(kind)
            if fns:
                if slot is not None:
                    state, slot = _commit(state, slot, before), None
                for fn in fns:
                    state = _call(fn, state, event)
        position += 1
        if position == boundary:
            if slot is not None:
                state, slot = _commit(state, slot, before), None
            on_boundary(position, state)  # type: ignore[misc]
            boundary += every
    if slot is not None:
        state = _commit(state, slot, before)
    return state, position - done


def _apply_all(slot: Slot, payloads: list[Any], start: int, end: int, parsed: dict[str, tuple[str, ...]],
               first: int) -> None:
    """Apply ``payloads[start:end]`` (of a :class:`PatchBatch` starting at seq ``first``)."""
    i = start
    try:
        if type(payloads[start]) is PatchPayload:
            for i in range(start, end):
                apply_ops(slot, payloads[i].ops, parsed)
        else:
            for i in range(start, end):
                apply_ops(slot, payloads[i][_OPS], parsed)
    except Exception as exc:
        raise ReducerError(first + i, STATE_PATCH, _PATCH_NAME, exc) from exc


def fold(events: Iterable[Event], reducers: Reducers | Mapping[str, Any] | None = None,
         initial: Mapping[str, Any] | None = None) -> State:
    """Fold events into a state with pure reducers.

    Args:
        events: the events, in seq order.
        reducers: a :class:`~agentlog.folding.reducers.Reducers` set, or a mapping of type to
            reducer(s) (only those run, from an empty state); ``Reducers.default()`` when None.
        initial: the state to start from; the reducers' initial state when None.

    Returns:
        The state after the last event (``initial`` itself if no event changed it).

    Raises:
        ReducerError: a reducer raised (``seq``, ``type``, ``reducer`` and ``cause`` say
            which), or returned something that is not a state.

    >>> from agentlog.events import Event
    >>> state = fold([Event(seq=0, type="run.started"),
    ...               Event(seq=1, type="state.patch",
    ...                     payload={"ops": [{"op": "add", "path": "/plan", "value": ["look"]}]}),
    ...               Event(seq=2, type="my.unknown.type")])
    >>> state["status"], state["vars"]["plan"][0]
    ('running', 'look')
    """
    reducers = _resolve(reducers)
    state = _start_state(reducers, initial)
    state, _ = _drive(events, reducers, state)
    return state


class SnapshotIndex:
    """Random access to the states of a run: a snapshot every ``every`` events, built lazily.

    Without stored states, the first call that needs a state folds the whole run once (the
    fast bulk fold) and keeps the state after every ``every``-th event. ``at(n)`` then folds
    at most ``every - 1`` events from the nearest snapshot, and ``states()`` steps forward at
    O(1) per event. When the run grows, :meth:`extend` the count; the new part is folded on
    the next need.

    With ``stored`` (a store's checkpoints), nothing is folded up front: ``at(n)`` starts from
    the nearest of the stored state, a snapshot already made, or the last answer, and folds
    from there to ``n``, keeping the snapshots it passes (at most :data:`KEEP`, the least
    recently used dropped first: the stored states are there to start from again).

    Args:
        events: ``events(start, stop)`` returns the events with ``start <= seq < stop``
            (e.g. ``lambda a, b: run.iter_events(start=a, stop=b)``); the index never reads
            anything else.
        count: how many events the run has.
        reducers: the run's reducers; ``Reducers.default()`` at construction when None.
        initial: the state before event 0; the reducers' initial state when None.
        every: events between snapshots (>= 1); :func:`default_every` of ``count`` when None
            (it stays as chosen when the run grows).
        stored: ``stored(n)``, the nearest stored state at or before ``n`` (see
            :data:`StoredFn`); the index then folds only from there.
        fold_events: like ``events``, but may give runs of ``state.patch`` events as
            :class:`PatchBatch` objects (cheaper to make from a table: no object per event);
            used for folding when ``state.patch`` has only the standard reducer, never handed
            to callers.

    >>> from agentlog.events import Event
    >>> events = [Event(seq=i, type="state.patch",
    ...                 payload={"ops": [{"op": "add", "path": "/n", "value": i}]})
    ...           for i in range(10)]
    >>> index = SnapshotIndex.of(events, every=4)
    >>> index.at(6)["vars"]["n"], index.at(-1)["vars"]
    (6, pmap({}))
    >>> [state["vars"]["n"] for _, state in index.states(8)]
    [8, 9]
    """

    def __init__(self, events: EventsFn, count: int, reducers: Reducers | Mapping[str, Any] | None = None,
                 initial: Mapping[str, Any] | None = None, *, every: int | None = None,
                 stored: StoredFn | None = None, fold_events: EventsFn | None = None) -> None:
        if type(count) is not int or count < 0:
            raise ValueError(f"count must be a non-negative int, got {count!r}")
        every = default_every(count) if every is None else every
        if type(every) is not int or every < 1:
            raise ValueError(f"every must be a positive int, got {every!r}")
        self._events = events
        self._count = count
        self._reducers = _resolve(reducers)
        self._initial = _start_state(self._reducers, initial)
        self._every = every
        self._snapshots: list[State] = [self._initial]  # [j]: the state after j * every events
        self._folded = 0  # events the bulk fold has covered
        self._last: tuple[int, State] | None = None  # the latest at() answer, to step on from
        self._recent: dict[int, State] = {}  # with stored: the states after the last few events folded
        self._stored = stored
        # what the fold reads: may give, for state.patch, a lighter object with only seq,
        # type and payload (all the fast path reads), when that path is on
        fast = self._reducers._table.get(STATE_PATCH) == (patch_vars,)
        self._fold_events = fold_events if fold_events is not None and fast else events
        self._kept: OrderedDict[int, State] = OrderedDict()  # with stored: j -> state, LRU

    @classmethod
    def of(cls, source: EventSource | Sequence[Event] | Iterable[Event],
           reducers: Reducers | Mapping[str, Any] | None = None,
           initial: Mapping[str, Any] | None = None, *, every: int | None = None) -> SnapshotIndex:
        """An index over a run-like object (``iter_events`` and ``len``) or a list of events."""
        events, count = as_events_fn(source)
        return cls(events, count, reducers, initial, every=every)

    @property
    def every(self) -> int:
        """Events between snapshots."""
        return self._every

    @property
    def reducers(self) -> Reducers:
        """The reducers this index folds with."""
        return self._reducers

    @property
    def initial(self) -> State:
        """The state before event 0."""
        return self._initial

    @property
    def snapshot_count(self) -> int:
        """How many snapshots are held (the initial state included)."""
        return len(self._snapshots) + len(self._kept)

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return (f"<SnapshotIndex {self._count:,} events, every {self._every:,}, "
                f"{self.snapshot_count:,} snapshots>")

    def extend(self, count: int) -> None:
        """Take in events appended to the run: it now has ``count`` events.

        Raises:
            ValueError: ``count`` is smaller than before (a run only grows).
        """
        if type(count) is not int or count < self._count:
            raise ValueError(f"a run only grows: the index has {self._count:,} events, got {count!r}")
        self._count = count

    def build(self) -> SnapshotIndex:
        """Fold whatever is not folded yet and keep its snapshots; return the index."""
        if self._folded >= self._count:
            return self
        every, snapshots = self._every, self._snapshots
        start = (len(snapshots) - 1) * every

        def keep(k: int, state: State) -> None:
            if k == len(snapshots) * every:
                snapshots.append(state)

        with _reading(self._fold_events(start, self._count)) as events:
            _, n = _drive(events, self._reducers, snapshots[-1], every=every, done=start, on_boundary=keep)
        self._check_read(start, self._count, n)
        self._folded = self._count
        return self

    def _check_read(self, start: int, stop: int, n: int) -> None:
        if n != stop - start:
            raise FoldError(f"events({start}, {stop}) gave {n:,} events, expected {stop - start:,}; "
                            "the event source and the count disagree")

    def _check(self, n: int, low: int) -> None:
        if type(n) is not int or not low <= n < self._count:
            raise IndexError(f"the run has {self._count:,} events (seq 0..{self._count - 1}); "
                             f"no state after seq {n!r}")

    def at_or_before(self, n: int) -> tuple[int, State]:
        """The nearest snapshot at or before the state after event ``n``.

        Returns:
            ``(seq, state)``: the state after event ``seq`` (``-1``: the initial state),
            with ``n - seq < every``.
        """
        self._check(n, -1)
        if self._stored is not None:
            return self._base(n)
        self.build()
        j = (n + 1) // self._every
        return j * self._every - 1, self._snapshots[j]

    def _base(self, n: int) -> tuple[int, State]:
        """With stored states: the nearest of a kept snapshot, a stored state, the start."""
        every = self._every
        j = (n + 1) // every
        kept = self._kept
        if j in kept:
            kept.move_to_end(j)
            return j * every - 1, kept[j]
        best: tuple[int, State] = (-1, self._initial)
        below = [k for k in kept if k <= j]
        if below:
            k = max(below)
            kept.move_to_end(k)
            best = (k * every - 1, kept[k])
        found = self._stored(n) if self._stored is not None and best[0] < n else None
        if found is not None and found[0] > best[0]:
            best = found
        return best

    def _keep(self, k: int, state: State) -> None:
        """With stored states: keep the state after the first ``k`` events (a multiple of
        ``every``), dropping the least recently used past :data:`KEEP`."""
        j = k // self._every
        kept = self._kept
        kept[j] = state
        kept.move_to_end(j)
        while len(kept) > KEEP:
            kept.popitem(last=False)

    def at(self, n: int) -> State:
        """The state after event ``n`` (``-1``: the initial state).

        Raises:
            IndexError: ``n`` is outside ``-1 .. len - 1``.
            ReducerError: a reducer raised.
        """
        recent = self._recent.get(n)
        if recent is not None:
            return recent
        seq, state = self.at_or_before(n)
        if seq == n:
            return state
        last = self._last
        if last is not None and seq < last[0] <= n:  # stepping forward: go on from there
            seq, state = last
            if seq == n:
                return state
        if self._stored is not None:
            state, folded = self._fold_to(seq, state, n)
        else:
            with _reading(self._fold_events(seq + 1, n + 1)) as events:
                state, folded = _drive(events, self._reducers, state)
        self._check_read(seq + 1, n + 1, folded)
        self._last = (n, state)
        return state

    def _fold_to(self, seq: int, state: State, n: int) -> tuple[State, int]:
        """With stored states: fold from the state after ``seq`` to the state after ``n``,
        keeping the snapshots passed and the states after each of the last :data:`RECENT`
        events (a caller that asks for ``n`` often asks next for a state just before it: the
        start of the step ``n`` is in, say)."""
        tail = max(seq + 1, n + 1 - RECENT)
        folded = 0
        # Of the snapshots passed, only the last KEEP stay: fold straight up to the first of
        # them (each snapshot commits the transient state: 250 commits cost ~40% of a cold
        # fold of 1M events, of which 246 were dropped at once).
        every = self._every
        first = max(seq + 1, (tail // every - KEEP) * every)
        if first > seq + 1:
            with _reading(self._fold_events(seq + 1, first)) as events:
                state, folded = _drive(events, self._reducers, state)
        if tail > first:
            with _reading(self._fold_events(first, tail)) as events:
                state, more = _drive(events, self._reducers, state, every=every, done=first,
                                     on_boundary=self._keep)
            folded += more
        recent: dict[int, State] = {}
        table = self._reducers._table
        with _collector_paused(), _reading(self._fold_events(tail, n + 1)) as events:
            for event in _flatten(events):
                state = _step(table, state, event)
                recent[event.seq] = state
                folded += 1
                if (event.seq + 1) % self._every == 0:
                    self._keep(event.seq + 1, state)
        self._recent = recent
        return state, folded

    def states(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[Event, State]]:
        """Yield ``(event, state after it)`` for ``start <= seq < stop``, O(1) per step.

        Each state is a full persistent state that shares structure with the one before.

        Raises:
            IndexError: the range is outside the run.
        """
        stop = self._count if stop is None else stop
        if not 0 <= start <= stop <= self._count:
            raise IndexError(f"the run has {self._count:,} events; no range {start}..{stop}")
        state = self.at(start - 1)
        return self._walk(state, start, stop)

    def _walk(self, state: State, start: int, stop: int) -> Iterator[tuple[Event, State]]:
        table = self._reducers._table
        for event in self._events(start, stop):
            state = _step(table, state, event)
            yield event, state
