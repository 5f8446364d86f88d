"""Follow a run that is still being written: read only what was added since the last read.

:func:`read_new` is what the live views poll (``Waterfall(run, live=True)``, ...). It re-reads
``run.json`` (the run's status: a run is live while it is ``open``), lists the segment files,
and reads the WAL from the byte where the run's snapshot stopped: the events already read are
not read again, so a tick costs what was written since the last one. The new rows join the
run's snapshot (a new snapshot object, so every table cached for the old one is rebuilt), and
``len(run)``, ``run.event(n)`` and the tables see them.

A seal (the writer moved its WAL into a Parquet segment, every ``segment_events`` events) or
anything unexpected (a gap, a rewritten WAL) falls back to ``run.refresh()``, which reads the
new segment and the new WAL; sealed segments already read stay cached.

Kept apart from :mod:`agentlog.store.run` on purpose: it is the one thing the live views add to
the read path.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from typing import TYPE_CHECKING

from .meta import read_meta
from .run import _decoder, _row_event
from .snapshot import list_segments
from .wal import scan_wal

if TYPE_CHECKING:
    from ..events import Event
    from .run import Run

__all__ = ["is_live", "read_new"]


def is_live(run: Run) -> bool:
    """True while the run is ``open`` (being written, or left open by a crash)."""
    return run.status == "open"


def read_new(run: Run) -> list[Event]:
    """The events written to ``run`` since it was last read (in seq order), now part of it.

    >>> import tempfile, agentlog as al
    >>> store = al.Store(tempfile.mkdtemp())
    >>> w = store.create_run(run_id="live", durability="none")
    >>> _ = w.emit("note", {"text": "one"})
    >>> run = store.run("live")
    >>> len(run)
    1
    >>> _ = w.emit("note", {"text": "two"})
    >>> [e.payload["text"] for e in read_new(run)], len(run), is_live(run)
    (['two'], 2, True)
    >>> w.close()
    >>> read_new(run), is_live(run)
    ([], False)
    """
    snap = run._snapshot()
    run.meta = read_meta(run.path)
    names = [name for _, name in list_segments(run.path)]
    if names != [s.path.name for s in snap.segments]:
        return _reread(run)
    try:
        with open(snap.wal_path, "rb") as f:
            if os.fstat(f.fileno()).st_size < len(snap.wal_data):
                return _reread(run)  # a new WAL (the old one was sealed)
            f.seek(len(snap.wal_data))
            data = f.read()
    except FileNotFoundError:
        return [] if not snap.wal_data else _reread(run)
    complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next tick
    if not complete:
        return []
    rows = scan_wal(complete, str(snap.wal_path)).rows
    gap = any(int(b[0]) != int(a[0]) + 1 for a, b in itertools.pairwise(rows))
    if not rows or int(rows[0][0]) != snap.end or gap:
        return _reread(run)
    run._snap = dataclasses.replace(snap, tail=[*snap.tail, *rows], wal_data=snap.wal_data + complete,
                                    _tail_table=None)
    decode = _decoder(run.store.blobs.read, snap.wal_path, run.id)
    return [_row_event(row, decode, run.id) for row in rows]


def _reread(run: Run) -> list[Event]:
    before = len(run)
    run.refresh()
    return list(run.iter_events(before))
