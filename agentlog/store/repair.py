"""Rebuild a lost or damaged ``run.json`` from the run's own files (segments and WAL).

What the events say is recovered exactly: the event count, the head hash, where a fork
starts and (by the chain) which run it was forked from. What only ``run.json`` knew is
marked unknown in ``run.json["repaired"]["unknown"]``: the name and tags (unless the damaged
file still holds them), the writer's settings (redaction keys included) and, for a run that
was closed, how it ended. Times are inferred from the events and listed as such.

The damaged ``run.json``, if there is one, is kept beside the new one as
``run.json.damaged-<n>``: repair never deletes evidence. It takes the run's lock, so it
never races a live writer.

Limits, stated plainly: the head and count are read from the files, so a repaired run can
no longer tell a cut tail from a short run; only a head kept outside the store can (see
``agentlog sign`` and ``agentlog verify --expect-head``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from ..chain import GENESIS, chain_hash
from ..errors import RunDamagedError, SchemaVersionError, StoreError
from ..events import FORK_STARTED, RUN_FAILED, RUN_FINISHED
from ._fs import write_atomic
from .lock import RunLock
from .meta import RUN_JSON, check_meta, encode_meta, iso_time, read_meta
from .segments import SCHEMA_VERSION
from .snapshot import SegmentCache, Snapshot, load_snapshot
from .wal import row_body

if TYPE_CHECKING:
    from .store import Store

__all__ = ["RepairReport", "repair_run"]

#: Fields of ``run.json`` that only ``run.json`` knew.
_SALVAGE: Final = ("name", "tags", "writer")
_ENDINGS: Final = {RUN_FINISHED: "finished", RUN_FAILED: "failed"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RepairReport:
    """What :meth:`Store.repair` did.

    >>> print(RepairReport(run_id="r1", repaired=True, events=3, head="ab" * 32, status="open",
    ...                    parent=None, unknown=("name",), inferred=("created",), kept=None))
    run r1: run.json rebuilt from 3 events, head abababababab…, status open; unknown: name; inferred: created
    """

    run_id: str
    """The run."""
    repaired: bool
    """False if ``run.json`` was fine and nothing was written."""
    events: int
    """Events in the run's files (a fork's parent prefix included)."""
    head: str
    """The hash of the last event."""
    status: str
    """The status written: ``open`` if the run has a WAL, the ending its last event
    records, else ``unknown``."""
    parent: tuple[str, int] | None
    """``(parent run, fork seq)`` found through the chain, for a fork."""
    unknown: tuple[str, ...]
    """Fields that could not be recovered (written as null or defaults)."""
    inferred: tuple[str, ...]
    """Fields inferred from the events rather than recorded."""
    kept: str | None
    """Where the damaged ``run.json`` was kept, if there was one."""

    def __str__(self) -> str:
        if not self.repaired:
            return f"run {self.run_id}: run.json is fine; nothing to repair"
        lines = [(f"run {self.run_id}: run.json rebuilt from {self.events:,} events, "
                  f"head {self.head[:12]}…, status {self.status}")]
        if self.parent is not None:
            lines.append(f"fork of {self.parent[0]} at seq {self.parent[1]}")
        if self.unknown:
            lines.append(f"unknown: {', '.join(self.unknown)}")
        if self.inferred:
            lines.append(f"inferred: {', '.join(self.inferred)}")
        if self.kept:
            lines.append(f"the damaged run.json is kept as {self.kept}")
        return "; ".join(lines)


def repair_run(store: Store, run_id: str, *, now_us: int | None = None) -> RepairReport:
    """Rebuild the ``run.json`` of ``run_id`` if it is missing or damaged.

    Args:
        store: the store.
        run_id: the run's exact id (a damaged run is matched by its folder).
        now_us: the repair time (default: now), recorded in ``run.json``.

    Raises:
        RunNotFoundError: there is no such run folder.
        RunLockedError: a live writer holds the run.
        SchemaVersionError: the run was written by a newer agentlog (nothing is changed).
        StoreError: the run is a fork whose parent is not in the store, so the hash its
            first event follows cannot be found (nothing is changed).
    """
    run_id, run_dir = store._find(run_id, exact=True)
    lock = RunLock.acquire(run_dir, run_id)
    try:
        try:
            meta = read_meta(run_dir)
        except RunDamagedError:
            pass
        else:
            return RepairReport(run_id=run_id, repaired=False, events=int(meta.get("count") or 0),
                                head=str(meta.get("head") or ""), status=str(meta.get("status", "")),
                                parent=None, unknown=(), inferred=(), kept=None)
        old = _salvage(run_dir / RUN_JSON)
        meta, report = _rebuild(store, run_id, run_dir, old,
                                time.time_ns() // 1000 if now_us is None else now_us)
        check_meta(meta, run_dir / RUN_JSON, run_id)
        kept = _keep_damaged(run_dir)
        meta["repaired"]["kept"] = kept
        write_atomic(run_dir / RUN_JSON, encode_meta(meta))
        return replace(report, kept=kept)
    finally:
        lock.release()


def _own_files(run_dir: Path, start: int, prev: str) -> Snapshot:
    return load_snapshot(run_dir, start=start, prev=prev, cache=SegmentCache(), strict=False)


def _rebuild(store: Store, run_id: str, run_dir: Path, old: dict[str, Any],
             now_us: int) -> tuple[dict[str, Any], RepairReport]:
    """The new ``run.json`` and the report, from the files and what ``old`` still holds."""
    first, _ = _edge_rows(_own_files(run_dir, 0, GENESIS))
    start = 0 if first is None else int(first[0])
    parent, prev = None, GENESIS
    if first is not None and start > 0:
        parent, prev = _find_parent(store, run_id, start, first, old.get("parent"))
    snap = _own_files(run_dir, start, prev)
    first, last = _edge_rows(snap)
    inferred: list[str] = []
    created = old.get("created")
    if created is None and first is not None:
        created = iso_time(first[5])
        inferred.append("created")
    closed = None
    if (run_dir / "wal.jsonl").exists():
        status = "open"  # close() removes the WAL: a run that has one was never closed
    else:
        status = "unknown" if last is None else _ENDINGS.get(str(last[1]), "unknown")
        if last is not None:
            closed = iso_time(last[5])
            inferred.append("closed")
        if status != "unknown":
            inferred.append("status")
    unknown = [f for f in _SALVAGE if f not in old] + (["status"] if status == "unknown" else [])
    meta = {
        "schema_version": SCHEMA_VERSION, "id": run_id, "name": old.get("name"),
        "created": created, "tags": old.get("tags"), "parent": parent, "head": snap.head,
        "count": snap.end, "status": status, "closed": closed,
        "writer": old.get("writer") or {"segment_events": 65536, "blob_threshold": 16 * 1024,
                                         "redact": []},
        "repaired": {"at": iso_time(now_us), "from": "segments and WAL", "unknown": unknown,
                     "inferred": inferred, "salvaged": sorted(old)},
    }
    report = RepairReport(run_id=run_id, repaired=True, events=snap.end, head=snap.head,
                          status=status,
                          parent=None if parent is None else (parent["run_id"], parent["seq"]),
                          unknown=tuple(unknown), inferred=tuple(inferred), kept=None)
    return meta, report


def _edge_rows(snap: Snapshot) -> tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]:
    """The run's first and last own rows as row tuples (``ts`` in µs), or ``None``."""
    first = last = None
    if snap.segments:
        first = _table_row(snap.segments[0].table, 0)
        table = snap.segments[-1].table
        last = _table_row(table, table.num_rows - 1)
    if snap.tail:
        first = first or snap.tail[0]
        last = snap.tail[-1]
    return first, last


def _table_row(table: pa.Table, i: int) -> tuple[Any, ...]:
    row = table.slice(i, 1)
    cols = [row.column(c) for c in range(row.num_columns)]
    cols[5] = cols[5].cast(pa.int64())  # ts: microseconds, exactly
    return tuple(c[0].as_py() for c in cols)


def _find_parent(store: Store, run_id: str, start: int, first: tuple[Any, ...],
                 recorded: Any) -> tuple[dict[str, Any], str]:
    """The parent of a fork whose first own event is ``first`` (seq ``start``), by the chain.

    The first own event hashes from the parent's hash at ``start - 1``; a candidate is right
    only if that hash chains to the stored one. Candidates: the damaged ``run.json``'s parent,
    the ``fork.started`` event's parent, then every run of the store.
    """
    body, stored = row_body(first), str(first[13])
    names: list[str] = []
    if isinstance(recorded, dict) and isinstance(recorded.get("run_id"), str):
        names.append(recorded["run_id"])
    if str(first[1]) == FORK_STARTED:
        try:
            named = json.loads(first[6]).get("parent_run")
        except (ValueError, AttributeError):
            named = None
        if isinstance(named, str):
            names.append(named)
    names.extend(rid for rid in store.list_runs() if rid not in (run_id, *names))
    for name in names:
        try:
            candidate = store.run(name, exact=True)
            if len(candidate) < start:
                continue
            prev = candidate.event(start - 1).hash
        except (StoreError, ValueError):
            continue
        if chain_hash(prev, body) == stored:
            return {"run_id": candidate.id, "seq": start - 1, "hash": prev}, prev
    raise StoreError(f"run {run_id!r} starts at seq {start}, so it is a fork, but no run in the store "
                     f"has the event its first event follows; restore its parent run, then repair again")


def _salvage(path: Path) -> dict[str, Any]:
    """The fields of a damaged ``run.json`` that still have the right type."""
    try:
        meta = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(meta, dict):
        return {}
    kept: dict[str, Any] = {}
    for key in (*_SALVAGE, "created", "parent"):
        if key not in meta:
            continue
        trial = {"schema_version": SCHEMA_VERSION, key: meta[key]}
        try:
            check_meta(trial, path, "salvage")
        except (RunDamagedError, SchemaVersionError):
            continue
        kept[key] = meta[key]
    return kept


def _keep_damaged(run_dir: Path) -> str | None:
    """Move a damaged ``run.json`` aside as ``run.json.damaged-<n>``; its name, or ``None``."""
    path = run_dir / RUN_JSON
    if not path.exists():
        return None
    n = 1
    while (run_dir / f"{RUN_JSON}.damaged-{n}").exists():
        n += 1
    target = run_dir / f"{RUN_JSON}.damaged-{n}"
    os.link(path, target)  # a second name first: the damaged bytes are never without one
    return target.name
