"""Many runs at once: DuckDB over the store's Parquet dataset, the WAL tails, and ``run.json``.

:func:`connect` takes a snapshot of the store and returns a DuckDB connection with these views:

``events``
    every event stored in the store, once, with its ``run_id``: the sealed segments, read by
    DuckDB's Parquet reader with Hive partitioning (``runs/run_id=<id>/events-*.parquet``; the
    files are listed, not globbed, since ``run.json`` and ``wal.jsonl`` sit beside them), plus
    the WAL tail of every run that has one (an open or crashed run), registered as an Arrow
    table. A fork's partition holds only its own events, so ``events`` counts what each run
    paid.
``run_events``
    every run as read: each fork's parent prefix stitched in front of its own events (through
    its lineage in ``run.json``), with ``stored_in``, the run whose files hold the event. Per
    run it equals ``run.events``.
``runs``
    one row per run, the columns of :data:`~agentlog.analysis.columns.RUNS` (``verified`` is
    ``not checked``; ``store.runs(verify=True)`` checks).
``spans``, ``llm_calls``, ``tool_calls``
    the per-run tables of every run, with ``run_id`` first: the same SQL as ``run.spans()``,
    ``run.llm_calls()`` and ``run.tool_calls()``, over ``run_events``.

The snapshot is consistent: for a run with a WAL, the segment list and the tail come from one
reader snapshot (:mod:`agentlog.store.snapshot`), so a seal in between cannot duplicate or hide
events. Events appended later are not seen; connect again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptSegmentError
from . import columns as C
from .cost import RUN_COST_KEYS, check_keys
from .queries import cost_sql, llm_calls_sql, runs_sql, spans_sql, tool_calls_sql
from .tables import meta_row, meta_table

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

    from ..store.store import Store

__all__ = ["StoreSnapshot", "connect", "cost", "duckdb", "events", "runs", "scan", "sql"]

_EVENT_COLUMNS: Final = tuple(c.name for c in C.EVENTS)
_SELECT: Final = ", ".join(["run_id", *(f'"{c}"' for c in _EVENT_COLUMNS)])
_NO_END: Final = 2**62  # "to the end of the run" in the lineage table


@dataclass(slots=True)
class StoreSnapshot:
    """What :func:`scan` found: segment files, WAL tails, and each run's ``run.json``."""

    files: list[str] = field(default_factory=list)
    """Sealed segment files, in run then seq order."""
    tails: list[pa.Table] = field(default_factory=list)
    """WAL tails with a ``run_id`` column."""
    metas: list[dict[str, Any]] = field(default_factory=list)
    """One row per run, in ``store.list_runs()`` order: run_id, name, status, created, tags,
    parent, fork_seq."""

    def tail_table(self) -> pa.Table:
        """The WAL tails as one table (``run_id`` first, ``type`` as plain text)."""
        schema = pa.schema([pa.field("run_id", pa.string()),
                            *(pa.field(c.name, c.arrow) for c in C.EVENTS)])
        if not self.tails:
            return schema.empty_table()
        return pa.concat_tables([t.select(schema.names).cast(schema) for t in self.tails])

    def lineage(self) -> pa.Table:
        """``(run_id, stored_in, lo, hi)``: run ``run_id`` holds ``stored_in``'s own events with
        ``lo <= seq <= hi``. A fork of a fork walks up to the root."""
        by_id = {m["run_id"]: m for m in self.metas}
        rows: list[tuple[str, str, int, int]] = []
        for meta in self.metas:
            hi = _NO_END
            cur: dict[str, Any] | None = meta
            seen: set[str] = set()
            while cur is not None and cur["run_id"] not in seen:
                seen.add(cur["run_id"])
                fork_seq = cur["fork_seq"]
                lo = 0 if fork_seq is None else fork_seq + 1
                if lo <= hi:
                    rows.append((meta["run_id"], cur["run_id"], lo, hi))
                if fork_seq is None:
                    break
                hi = min(hi, fork_seq)
                cur = by_id.get(cur["parent"])  # a parent missing from the store ends the walk
        cols: list[Sequence[Any]] = [list(c) for c in zip(*rows, strict=True)] if rows else [[], [], [], []]
        return pa.table({"run_id": pa.array(cols[0], pa.string()),
                         "stored_in": pa.array(cols[1], pa.string()),
                         "lo": pa.array(cols[2], pa.int64()), "hi": pa.array(cols[3], pa.int64())})

    def meta_table(self) -> pa.Table:
        """The ``run.json`` facts, one row per run, with ``ord`` (the listing order)."""
        return meta_table(self.metas)


def scan(store: Store) -> StoreSnapshot:
    """List the store's runs, segment files and WAL tails (see the module docstring)."""
    from ..chain import GENESIS
    from ..errors import RunDamagedError, StoreError
    from ..store.segments import parse_segment_name
    from ..store.snapshot import SegmentCache, load_snapshot

    if store.fs.remote:
        return _scan_remote(store)
    snap = StoreSnapshot()
    for run_id, run_dir, meta in store._listing():  # each run.json read once
        readable = not isinstance(meta, StoreError)
        if isinstance(meta, StoreError):
            # listed, never skipped: `agentlog verify` says what is wrong, `agentlog repair` mends it
            meta = {"status": "damaged" if isinstance(meta, RunDamagedError) else "unreadable"}
        snap.metas.append(meta_row(run_id, meta))
        if (run_dir / "wal.jsonl").exists():
            if readable:
                held = store.run(run_id, exact=True)._snapshot()
            else:  # its own files only, read leniently: its parent (if any) is unknown
                held = load_snapshot(run_dir, start=0, prev=GENESIS, cache=SegmentCache(), strict=False)
            snap.files.extend(str(seg.path) for seg in held.segments)
            if held.tail:
                tail = held.tail_table()
                ids = pa.array([run_id] * tail.num_rows, pa.string())
                snap.tails.append(tail.append_column("run_id", ids))
        else:
            names = sorted(n for n in os.listdir(run_dir) if parse_segment_name(n) is not None)
            snap.files.extend(str(run_dir / n) for n in names)
    return snap


def _scan_remote(store: Store) -> StoreSnapshot:
    """:func:`scan` for a remote store: one recursive listing and one concurrent batch of
    ``run.json`` reads. A pushed run holds sealed segments only (no WAL: pushes stop at the
    last sealed segment), and nothing is sealed under a reader, so the listing is the snapshot.
    A run folder without ``run.json`` is a push in progress and is left out, as
    ``store.list_runs()`` leaves it out."""
    from ..errors import RunDamagedError, StoreError
    from ..store.fsys import RemoteFS
    from ..store.meta import RUN_JSON, parse_meta, run_id_of
    from ..store.segments import parse_segment_name

    fs = store.fs
    assert isinstance(fs, RemoteFS)
    root = str(store.runs_path).lstrip("/")
    segments: dict[str, list[tuple[int, str]]] = {}
    listed: set[str] = set()  # runs with a run.json: a push writes it last
    for key in fs.find(store.runs_path):
        folder, _, name = key[len(root) + 1:].rpartition("/")
        run_id = run_id_of(folder)
        if run_id is None:
            continue
        first = parse_segment_name(name)
        runs = segments.setdefault(run_id, [])
        if first is not None:
            runs.append((first, fs.url(store.runs_path / folder / name)))
        elif name == RUN_JSON:
            listed.add(run_id)
    paths = {run_id: store.runs_path / f"run_id={run_id}" / RUN_JSON for run_id in sorted(listed)}
    texts = fs.read_many(list(paths.values()))
    found: list[tuple[str, str, dict[str, Any]]] = []
    for run_id, path in paths.items():
        text = texts.get(str(path).lstrip("/"))
        try:
            if not isinstance(text, bytes):
                raise RunDamagedError(run_id, fs.url(path), "there is no run.json")
            meta = parse_meta(text, path, run_id)
        except StoreError as exc:
            meta = {"status": "damaged" if isinstance(exc, RunDamagedError) else "unreadable"}
        found.append((str(meta.get("created") or ""), run_id, meta))
    snap = StoreSnapshot()
    for _, run_id, meta in sorted(found, key=lambda f: (f[0], f[1])):
        snap.metas.append(meta_row(run_id, meta))
        snap.files.extend(url for _, url in sorted(segments[run_id]))
    return snap


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect(store: Store, snapshot: StoreSnapshot | None = None) -> DuckDBPyConnection:
    """A new DuckDB connection with the views of the module docstring (UTC session).

    The caller owns it: close it when done (or use it as a context manager).
    """
    import duckdb

    snap = snapshot if snapshot is not None else scan(store)
    con = duckdb.connect(":memory:")
    try:
        _attach_fs(con, store)
        con.execute("SET TimeZone = 'UTC'")
        con.register("_agentlog_tails", snap.tail_table())
        con.register("_agentlog_lineage", snap.lineage())
        con.register("_agentlog_meta", snap.meta_table())
        parts = [f"SELECT {_SELECT} FROM _agentlog_tails"]
        if snap.files:
            files = ", ".join(_literal(f) for f in snap.files)
            parts.insert(0, f"SELECT {_SELECT} FROM read_parquet([{files}], hive_partitioning = true, "
                            "hive_types = {'run_id': 'VARCHAR'})")
        con.execute(f"CREATE VIEW events AS {' UNION ALL '.join(parts)}")
        con.execute("""CREATE VIEW run_events AS
            SELECT l.run_id, e.* EXCLUDE (run_id), e.run_id AS stored_in
            FROM _agentlog_lineage l JOIN events e
              ON e.run_id = l.stored_in AND e.seq BETWEEN l.lo AND l.hi""")
        con.execute(f"CREATE VIEW runs AS {runs_sql('run_events', '_agentlog_meta')}")
        con.execute(f"CREATE VIEW spans AS {spans_sql('run_events')}")
        con.execute(f"CREATE VIEW llm_calls AS {llm_calls_sql('run_events')}")
        con.execute(f"CREATE VIEW tool_calls AS {tool_calls_sql('run_events')}")
    except BaseException as exc:
        con.close()
        if (corrupt := _unreadable_segment(exc, store)) is not None:
            raise corrupt from exc
        raise
    return con


#: DuckDB threads for a remote store: its file reads overlap (measured against moto: 200 files
#: read in 1.8 s with 8 threads, 3.2 s with DuckDB's default of one per core on 2 cores).
_REMOTE_THREADS: Final = 8


def _attach_fs(con: DuckDBPyConnection, store: Store) -> None:
    """Let DuckDB read a remote store's files through the store's own fsspec filesystem (the
    same endpoint and credentials; no DuckDB extension to download)."""
    from ..store.fsys import RemoteFS
    if isinstance(store.fs, RemoteFS):
        con.register_filesystem(store.fs.fs)
        con.execute(f"SET threads = {_REMOTE_THREADS}")  # reads wait on the network, not the CPU


_FILE_IN_ERROR: Final = re.compile(r"file '([^']+\.parquet)'", re.IGNORECASE)


def _query_errors() -> tuple[type[BaseException], ...]:
    import duckdb
    return (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)


def _unreadable_segment(exc: BaseException, store: Store | None = None) -> CorruptSegmentError | None:
    """A DuckDB error about a Parquet file it cannot read, as a :class:`CorruptSegmentError`
    naming the file (not a DuckDB error in the middle of a SQL dump); else ``None``.

    Some damage (a broken Parquet footer) gives an error that names no file, or one whose
    message Python cannot even decode; then the store's segments are read one by one to find
    the damaged one. A mistake in a query (a parser, binder or catalog error) is never taken
    for damage.
    """
    import duckdb

    if isinstance(exc, UnicodeDecodeError):  # DuckDB quoted bytes of a damaged file in its message
        path = _damaged_segment(store) if store is not None else None
        return None if path is None else CorruptSegmentError(
            path, f"cannot be read ({exc.reason} in DuckDB's message about it); the store-wide "
                  "tables cannot read this segment")
    if not isinstance(exc, duckdb.Error) or isinstance(exc, _query_errors()):
        return None
    problem = str(exc).splitlines()[0]
    found = _FILE_IN_ERROR.search(str(exc))
    path = found.group(1) if found is not None else (_damaged_segment(store) if store is not None else None)
    if path is None:
        return None
    return CorruptSegmentError(path, f"{problem}; the store-wide tables cannot read this segment "
                                     "(`agentlog verify --all` checks the events of every run)")


def _damaged_segment(store: Store) -> str | None:
    """The first segment file of the store that pyarrow or DuckDB cannot read, or ``None``.

    DuckDB checks some Parquet metadata that pyarrow does not, so a segment whose events read
    (and verify) with pyarrow may still stop a store-wide query.
    """
    import duckdb

    from ..errors import SchemaVersionError
    from ..store.segments import read_segment
    from ..store.store import segment_files

    con = duckdb.connect(":memory:")
    fs = store.fs
    try:
        _attach_fs(con, store)
        for path in segment_files(store):
            url = fs.url(Path(path))
            try:
                read_segment(Path(path), fs)
                con.execute("SELECT * FROM read_parquet(?)", [url]).fetchall()
            except (CorruptSegmentError, SchemaVersionError, duckdb.Error, UnicodeDecodeError):
                return url
    finally:
        con.close()
    return None


def _arrow(con: DuckDBPyConnection, query: str, store: Store | None = None) -> pa.Table:
    """``query``'s result as a pyarrow Table (see :func:`_unreadable_segment` for errors)."""
    try:
        return con.sql(query).to_arrow_table()
    except Exception as exc:
        if (corrupt := _unreadable_segment(exc, store)) is not None:
            raise corrupt from exc
        raise


def sql(store: Store, query: str) -> pd.DataFrame:
    """Run a DuckDB query over the views ``events`` (stored events with ``run_id``),
    ``run_events`` (every run as read, fork prefixes stitched), ``runs``, ``spans``,
    ``llm_calls`` and ``tool_calls`` (see the module docstring) and return a DataFrame.

    >>> import tempfile, agentlog as al
    >>> al.Store(tempfile.mkdtemp()).sql("select count(*) as n from events")["n"].tolist()
    [0]
    """
    con = connect(store)
    try:
        return C.arrow_to_frame(_arrow(con, query, store))
    finally:
        con.close()


def duckdb(store: Store) -> DuckDBPyConnection:
    """A DuckDB connection with the views of :func:`sql`, over a snapshot of the store taken
    now. Close it when done (or use it in a ``with`` block)."""
    return connect(store)


def runs(store: Store, *, verify: bool = False) -> pd.DataFrame:
    """One row per run, in ``store.list_runs()`` order: id, name, status, created, tags,
    parent, fork_seq, events, own_events, spans, llm/tool calls, started, ended,
    duration_ms, tokens, cost_usd, cost_unknown_calls, own_cost_usd, verified (the columns of
    ``run.summary()``; see :data:`~agentlog.analysis.columns.RUNS`).

    Args:
        store: the store.
        verify: verify every run (reads and hashes everything); else ``verified`` is
            ``not checked``.
    """
    con = connect(store)
    try:
        frame = C.to_frame(_arrow(con, "SELECT * FROM runs", store), C.RUNS)
    finally:
        con.close()
    if verify:
        reports = store.verify(progress=False)
        frame["verified"] = pd.array([("ok" if reports[r].ok else "not ok") if r in reports
                                      else "not checked" for r in frame["run_id"]],
                                     dtype=C.RUNS[-1].dtype)
    return frame


def _event_spec(columns: Sequence[str] | None) -> list[C.Column]:
    run_col = C.Column("run_id", pa.string(), "the run")
    if columns is None:
        return [run_col, *C.EVENTS]
    known = {c.name: c for c in C.EVENTS}
    unknown = [c for c in columns if c != "run_id" and c not in known]
    if unknown:
        raise ValueError(f"unknown event column(s) {', '.join(map(repr, unknown))}; "
                         f"the columns are run_id, {', '.join(known)}")
    return [run_col, *(known[c] for c in columns if c != "run_id")]


def events(store: Store, where: str | pc.Expression | None = None,
           columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Every stored event (each run's own events, WAL tails included), ordered by run and seq.

    Args:
        store: the store.
        where: a filter pushed down to the Parquet scan: a DuckDB SQL condition
            (``"type = 'llm.response' AND run_id = 'abc'"``) or a pyarrow compute expression
            (``pc.field("type") == "llm.response"``). Conditions on ``run_id`` prune whole run
            folders; on ``seq``, ``ts`` or the usage columns, row groups.
        columns: the event columns to return (``run_id`` always comes first).

    Raises:
        ValueError: an unknown column.
        TypeError: ``where`` is neither a string nor an expression.
    """
    spec = _event_spec(columns)
    names = [c.name for c in spec]
    snap = scan(store)
    if where is None or isinstance(where, str):
        con = connect(store, snap)
        try:
            cols = ", ".join(f'"{n}"' for n in names)
            cond = f"WHERE {where}" if where else ""
            table = _arrow(con, f"SELECT {cols} FROM events {cond} ORDER BY run_id, seq", store)
        finally:
            con.close()
        return C.to_frame(table, spec)
    if not isinstance(where, pc.Expression):
        raise TypeError(f"where must be a DuckDB SQL condition (str) or a pyarrow.compute.Expression, "
                        f"got {type(where).__name__}")
    import pyarrow.dataset as ds

    parts = []
    if snap.files:
        part = ds.partitioning(pa.schema([("run_id", pa.string())]), flavor="hive")
        files = [f.split("://", 1)[1] for f in snap.files] if store.fs.remote else snap.files
        base = str(store.runs_path).lstrip("/") if store.fs.remote else str(Path(store.runs_path))
        dataset = ds.dataset(files, format="parquet", partitioning=part, partition_base_dir=base,
                             filesystem=store.fs.arrow)
        parts.append(_plain(dataset.to_table(filter=where)))
    parts.append(ds.dataset(snap.tail_table()).to_table(filter=where))
    table = pa.concat_tables([p.select(["run_id", *_EVENT_COLUMNS]) for p in parts])
    table = table.sort_by([("run_id", "ascending"), ("seq", "ascending")])
    return C.to_frame(table.select(names), spec)


def _plain(table: pa.Table) -> pa.Table:
    """Dictionary columns (``type`` in the segments) as plain text, so tables concatenate."""
    fields = [pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
              for f in table.schema]
    return table.cast(pa.schema(fields))


STORE_COST_KEYS: Final = ("run", *RUN_COST_KEYS)


def cost(store: Store, by: str | Sequence[str] = ("run", "model", "day"), *,
         engine: str = "duckdb") -> pd.DataFrame:
    """Usage of every run's own events summed by ``by`` (see
    :data:`~agentlog.analysis.columns.COST_KEYS` and ``COST_VALUES``).

    Each run counts only the events in its own files: a fork's prefix was paid by its parent,
    and an answer served from a log cost 0 as recorded. Unknown costs are counted in
    ``cost_unknown_calls``, never as 0. Computed by DuckDB over the Parquet files (only the
    columns needed are read); ``table.sum(numeric_only=True)`` is the total row.

    Args:
        store: the store.
        by: keys from ``run``, ``model``, ``actor``, ``span``, ``kind``, ``type``, ``day``.
        engine: ``"duckdb"`` (embedded, the default) or ``"dask"``: the same table computed on
            the current ``dask.distributed`` cluster from the same files
            (:mod:`agentlog.analysis.fleet`), by every key.

    Raises:
        ValueError: an unknown key or engine.
    """
    keys = check_keys(by, STORE_COST_KEYS)
    if engine == "dask":
        from .fleet import cost as dask_cost
        return dask_cost(store, keys)
    if engine != "duckdb":
        raise ValueError(f"engine={engine!r}: use 'duckdb' or 'dask'")
    con = connect(store)
    try:
        table = _arrow(con, cost_sql("events", "run_events", keys), store)
    finally:
        con.close()
    return C.to_frame(table, C.cost_spec(keys))
