"""``check_determinism``: fold a run twice, differently, and name the reducer that disagrees.

The determinism contract says a reducer reads only ``(state, event)``: no clock, no
randomness, no I/O, no global mutable state. Such a reducer cannot tell *when* or *in which
order* it is called, so the check calls each reducer at different times and in a different
order, and compares:

1. one bulk fold from the start, keeping the state at every ``every``-th event (the
   boundaries) and at the end;
2. every stretch between two boundaries folded again, one event at a time, starting from
   pass 1's state at its start, **last stretch first**; each end state must equal pass 1's.

In the first stretch that differs, two one-event-at-a-time folds run side by side from its
start until their states part: that event's seq, type and reducers are reported, with the
differing paths (``diff_states``). Pass 1 takes the ``state.patch`` fast path and pass 2
does not, so the check also compares the two paths.

Pure: the caller hands over the run (anything with ``iter_events`` and ``len``) or a list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import Event
from .diff import diff_states
from .engine import (
    EventSource,
    _drive,
    _resolve,
    _start_state,
    _step,
    as_events_fn,
    default_every,
)
from .patch import Patch
from .reducers import Reducers
from .values import State

__all__ = ["DeterminismReport", "check_determinism"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeterminismReport:
    """What :func:`check_determinism` found.

    >>> DeterminismReport(ok=True, events=10, every=4, compared=3)
    <DeterminismReport ok: 10 events, 3 states compared>
    """

    ok: bool
    """Whether both folds agreed everywhere they were compared."""
    events: int
    """How many events were folded."""
    every: int
    """Events between compared states."""
    compared: int
    """How many state pairs were compared (boundaries and the end)."""
    seq: int | None = None
    """The first event after which the two folds differ."""
    type: str | None = None
    """That event's type."""
    reducers: tuple[str, ...] = ()
    """The reducers registered for that type (qualified names): one of them is to blame."""
    paths: tuple[str, ...] = ()
    """The state paths that differ after that event."""
    patch: Patch | None = None
    """The difference: the patch from one fold's state to the other's."""

    def __repr__(self) -> str:
        if self.ok:
            return f"<DeterminismReport ok: {self.events:,} events, {self.compared:,} states compared>"
        return f"<DeterminismReport NOT deterministic at seq {self.seq} ({self.type})>"

    def __str__(self) -> str:
        if self.ok:
            return (f"deterministic: {self.events:,} events folded twice, "
                    f"{self.compared:,} states compared")
        shown = ", ".join(self.paths[:5]) + (", …" if len(self.paths) > 5 else "")
        names = ", ".join(self.reducers) or "(none)"
        return (f"not deterministic: after seq {self.seq} ({self.type}) the two folds differ at "
                f"{shown}; reducers for {self.type!r}: {names}. A reducer must read only "
                "(state, event): no clock, randomness, I/O or global mutable state")


def check_determinism(source: EventSource | Sequence[Event] | Iterable[Event],
                      reducers: Reducers | Mapping[str, Any] | None = None, *,
                      every: int | None = None,
                      initial: Mapping[str, Any] | None = None) -> DeterminismReport:
    """Fold a run twice, at different times and in a different order, and compare.

    Args:
        source: a run (``iter_events(start, stop)`` and ``len``) or a list of events.
        reducers: the reducers to check; ``Reducers.default()`` when None.
        every: events between compared states; ``default_every(len(source))`` when None.
        initial: the state before event 0; the reducers' initial state when None.

    Returns:
        A :class:`DeterminismReport`; ``ok`` is False when a difference was found, and then
        ``seq``, ``type``, ``reducers`` and ``paths`` say where.

    Raises:
        ReducerError: a reducer raised.

    >>> from agentlog.events import Event
    >>> events = [Event(seq=i, type="tool.result", duration_ms=1.0) for i in range(5)]
    >>> check_determinism(events, every=2).ok
    True
    """
    rs = _resolve(reducers)
    events_fn, count = as_events_fn(source)
    every = default_every(count) if every is None else every
    if type(every) is not int or every < 1:
        raise ValueError(f"every must be a positive int, got {every!r}")
    start_state = _start_state(rs, initial)

    # pass 1: one bulk fold from scratch, keeping the boundaries
    bounds: list[State] = [start_state]
    end, _ = _drive(events_fn(0, count), rs, start_state, every=every,
                    on_boundary=lambda k, state: bounds.append(state))
    if count % every:
        bounds.append(end)
    stretches = len(bounds) - 1

    # pass 2: each stretch again from pass 1's state at its start, last stretch first
    differing: dict[int, State] = {}  # stretch -> pass 2's end state
    table = rs._table
    for j in reversed(range(stretches)):
        state = bounds[j]
        for event in events_fn(j * every, min(count, (j + 1) * every)):
            state = _step(table, state, event)
        if diff_states(bounds[j + 1], state):
            differing[j] = state
    if not differing:
        return DeterminismReport(ok=True, events=count, every=every, compared=stretches)

    # the first stretch that differs: two folds side by side find the event
    j = min(differing)
    stop = min(count, (j + 1) * every)
    one = two = bounds[j]
    for event in events_fn(j * every, stop):
        one, two = _step(table, one, event), _step(table, two, event)
        patch = diff_states(one, two)
        if patch:
            return _found(rs, count, every, stretches, event, patch)
    # the side-by-side folds agreed: blame the stretch's end against pass 1
    last = list(events_fn(stop - 1, stop))[-1]
    return _found(rs, count, every, stretches, last, diff_states(bounds[j + 1], differing[j]))


def _found(rs: Reducers, count: int, every: int, compared: int, event: Event,
           patch: Patch) -> DeterminismReport:
    return DeterminismReport(ok=False, events=count, every=every, compared=compared,
                             seq=event.seq, type=event.type, reducers=rs.names(event.type),
                             paths=patch.paths, patch=patch)
