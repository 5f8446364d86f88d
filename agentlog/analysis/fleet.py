"""The store's tables on a Dask cluster: for more runs than one machine holds.

:func:`to_dask` reads the store's own Parquet segments as they are, on the workers, with the
store's filesystem (local paths, or ``s3://…`` / ``gs://…`` through fsspec with the workers'
own environment), plus the WAL tails of runs still open (taken here, as
:func:`~agentlog.analysis.storewide.scan` takes them). A partition holds **whole runs**: each
run's own files, and for a fork the part of its ancestors' files it reads as its prefix (the
store's ``run_events``, by the lineage in ``run.json``). So what needs a run read whole is
done inside the partition, on the worker:

- ``to_dask("llm_calls")`` runs the DuckDB engine's own query
  (:func:`agentlog.analysis.queries.llm_calls_sql`) over each partition's runs, so its rows
  and columns are those of ``store.sql("select * from llm_calls")`` and ``run.llm_calls()``;
- :func:`cost` (``store.cost(by=…, engine="dask")``) finds each usage event's span (the first
  ``span.started`` with its ``span_id`` in the run as read) in the partition, then sums the
  groups with a Dask tree reduction: the same table as DuckDB's
  (:func:`agentlog.analysis.queries.cost_sql`), unknown costs kept unknown, computed on the
  cluster of the current ``dask.distributed`` client (or Dask's default scheduler).

Needs ``pip install 'agentlog[fleet]'``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..events import LLM_RESPONSE, SPAN_ENDED, SPAN_STARTED, TOOL_RESULT, SpanEnded, SpanStarted
from . import columns as C

if TYPE_CHECKING:
    import dask.dataframe as dd

    from ..store.store import Store
    from .storewide import StoreSnapshot

__all__ = ["cost", "to_dask"]

_USAGE: Final = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd")
_EVENT_NAMES: Final = tuple(c.name for c in C.EVENTS)
#: What ``llm_calls_sql`` reads of an event (all but the hash).
_CALL_INPUT: Final = tuple(n for n in _EVENT_NAMES if n != "hash")
_SPAN_INPUT: Final = ("seq", "type", "span_id", "payload")
_LLM_CALLS_SPEC: Final = (C.Column("run_id", pa.string(), "the run"), *C.LLM_CALLS)
_PARTITIONS: Final = 64  # at most this many partitions: enough to spread, few enough to schedule
_NO_END: Final = 2**62


@dataclass(frozen=True, slots=True)
class _Source:
    """The events of run ``stored_in`` with ``lo <= seq <= hi``: segment files and WAL tail."""

    stored_in: str
    lo: int
    hi: int
    files: tuple[str, ...]
    tail: pa.Table | None


@dataclass(frozen=True, slots=True)
class _RunPart:
    """One run as a partition reads it: its own events first, then its ancestors' prefix."""

    run_id: str
    sources: tuple[_Source, ...]


def _schema(columns: Sequence[str]) -> pa.Schema:
    from ..store.segments import SCHEMA
    fields = [pa.field("run_id", pa.string())]
    for name in columns:
        f = SCHEMA.field(name)
        fields.append(pa.field(name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type))
    return pa.schema(fields)


def _frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as a pandas frame with nullable columns (ints stay ints with <NA>)."""
    return table.to_pandas(types_mapper=pd.ArrowDtype)


# --- on the workers ------------------------------------------------------------------------------


def _read(source: _Source, run_id: str, names: Sequence[str], arrow: Any, *, bounded: bool) -> pa.Table:
    """``source``'s events (the columns ``names``) labelled ``run_id``; only ``lo..hi`` if
    ``bounded`` (``names`` then holds ``seq``)."""
    import pyarrow.parquet as pq

    schema = _schema(names)
    parts = []
    for path in source.files:
        with pq.ParquetFile(path, filesystem=arrow) as f:
            parts.append(_labelled(f.read(columns=list(names)), run_id, schema))
    if source.tail is not None and source.tail.num_rows:
        parts.append(_labelled(source.tail.select(list(names)), run_id, schema))
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    if bounded:
        seq = table.column("seq")
        table = table.filter(pc.and_(pc.greater_equal(seq, source.lo), pc.less_equal(seq, source.hi)))
    return table


def _labelled(table: pa.Table, run_id: str, schema: pa.Schema) -> pa.Table:
    ids = pa.array([run_id] * table.num_rows, pa.string())
    return table.add_column(0, "run_id", ids).cast(schema)


def _arrow_fs(fs: Any) -> Any:
    if fs is None:
        return None
    from pyarrow.fs import FSSpecHandler, PyFileSystem
    return PyFileSystem(FSSpecHandler(fs))


def _run_events(runs: Sequence[_RunPart], names: Sequence[str], arrow: Any) -> pa.Table:
    """Every run as read (a fork's prefix stitched in), as the store's ``run_events``."""
    tables = [_read(s, r.run_id, names, arrow, bounded=True) for r in runs for s in r.sources]
    return pa.concat_tables(tables) if tables else _schema(names).empty_table()


def _events_part(runs: Sequence[_RunPart], names: Sequence[str], fs: Any) -> pd.DataFrame:
    """The runs' own stored events (as ``store.events()``)."""
    arrow = _arrow_fs(fs)
    tables = [_read(r.sources[0], r.run_id, names, arrow, bounded=False) for r in runs]
    return _frame(pa.concat_tables(tables) if tables else _schema(names).empty_table())


def _llm_calls_part(runs: Sequence[_RunPart], fs: Any) -> pd.DataFrame:
    """The DuckDB engine's ``llm_calls`` table of the runs."""
    from ._duck import query
    from .queries import llm_calls_sql

    events = _run_events(runs, _CALL_INPUT, _arrow_fs(fs))
    return C.to_frame(query(llm_calls_sql("ev"), {"ev": events}), _LLM_CALLS_SPEC)


def _usage_part(runs: Sequence[_RunPart], names: Sequence[str], spans: bool, fs: Any) -> pd.DataFrame:
    """The runs' own usage events (``names`` of them), with ``span`` and ``kind`` (the name
    and kind of each event's span in the run as read) if ``spans``."""
    arrow = _arrow_fs(fs)
    own = [_read(r.sources[0], r.run_id, names, arrow, bounded=False) for r in runs]
    table = pa.concat_tables(own) if own else _schema(names).empty_table()
    table = table.filter(_usage_rows(table))
    frame = _frame(table)
    if spans:
        found = _first_spans(_run_events(runs, _SPAN_INPUT, arrow))
        frame = frame.merge(found, how="left", on=["run_id", "span_id"], sort=False)
    return frame


def _usage_rows(table: pa.Table) -> pa.Array:
    """The events whose usage ``cost`` counts (``queries.USAGE_ROWS``): model answers, tool
    results, and any event with a usage value."""
    rows = pc.is_in(table.column("type"), value_set=pa.array([LLM_RESPONSE, TOOL_RESULT]))
    for name in _USAGE:
        rows = pc.or_(rows, pc.is_valid(table.column(name)))
    return pc.fill_null(rows, False)


def _first_spans(events: pa.Table) -> pd.DataFrame:
    """``(run_id, span_id, span, kind)``: the name and kind of each span's first ``span.started``;
    the kind its first ``span.ended`` tells instead, when that tells one (``queries.spans_sql``)."""
    seen: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for key, body in _first_of_each_span(events, SPAN_STARTED):
        seen[key] = (_text(body.get(SpanStarted.K.name)), _text(body.get(SpanStarted.K.kind)))
    for key, body in _first_of_each_span(events, SPAN_ENDED):
        kind = body.get(SpanEnded.K.kind)
        if kind is not None and key in seen:
            seen[key] = (seen[key][0], _text(kind))
    rows = [(*key, *value) for key, value in seen.items()]
    return _frame(pa.table({n: pa.array([row[i] for row in rows], pa.string())
                            for i, n in enumerate(("run_id", "span_id", "span", "kind"))}))


def _first_of_each_span(events: pa.Table, type: str) -> Iterator[tuple[tuple[str, str], dict[str, Any]]]:
    """``((run_id, span_id), payload)`` of the first event of ``type`` of each span, in seq order."""
    found = events.filter(pc.and_(pc.equal(events.column("type"), type), pc.is_valid(events.column("span_id"))))
    found = found.sort_by([("run_id", "ascending"), ("seq", "ascending")])
    seen: set[tuple[str, str]] = set()
    ids = zip(found.column("run_id").to_pylist(), found.column("span_id").to_pylist(), strict=True)
    for key, payload in zip(ids, found.column("payload").to_pylist(), strict=True):
        if key not in seen:
            seen.add(key)
            yield key, orjson.loads(payload)


def _text(value: Any) -> str | None:
    """A JSON value as ``json_extract_string`` gives it: text as is, other values as JSON."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


# --- the plan (here) -----------------------------------------------------------------------------


def _runs(store: Store, snap: StoreSnapshot) -> list[_RunPart]:
    """Each run's sources, from the snapshot's files, tails and lineage."""
    from ..store.fsys import RemoteFS
    from ..store.segments import parse_segment_name

    remote = isinstance(store.fs, RemoteFS)
    files: dict[str, list[tuple[int, str]]] = {}
    for f in snap.files:
        folder, name = f.rsplit("/", 2)[-2:]
        first = parse_segment_name(name)
        files.setdefault(folder.split("=", 1)[1], []).append((first or 0, f.split("://", 1)[1] if remote else f))
    tails = {t.column("run_id")[0].as_py(): t for t in snap.tails if t.num_rows}
    lineage: dict[str, list[tuple[str, int, int]]] = {}
    for run_id, stored_in, lo, hi in zip(*(snap.lineage().column(i).to_pylist() for i in range(4)), strict=True):
        lineage.setdefault(run_id, []).append((stored_in, lo, hi))
    parts = []
    for meta in snap.metas:
        run_id = meta["run_id"]
        own = [r for r in lineage.get(run_id, []) if r[0] == run_id] or [(run_id, 0, _NO_END)]
        rows = own + [r for r in lineage.get(run_id, []) if r[0] != run_id]
        parts.append(_RunPart(run_id, tuple(
            _Source(stored_in, lo, hi,
                    tuple(p for first, p in sorted(files.get(stored_in, [])) if first <= hi or stored_in == run_id),
                    tails.get(stored_in)) for stored_in, lo, hi in rows)))
    return parts


def _groups(runs: list[_RunPart]) -> list[list[_RunPart]]:
    """Consecutive runs in at most :data:`_PARTITIONS` groups of about as many files."""
    weight = [sum(len(s.files) for s in r.sources) + 1 for r in runs]
    target = max(1, -(-sum(weight) // _PARTITIONS))
    groups: list[list[_RunPart]] = []
    size = target
    for run, w in zip(runs, weight, strict=True):
        if size >= target:
            groups.append([])
            size = 0
        groups[-1].append(run)
        size += w
    return groups


def _from_runs(store: Store, fn: Any, *args: Any) -> dd.DataFrame:
    """A Dask frame of ``fn(runs, *args, fs)`` over groups of the store's runs."""
    import dask.dataframe as dd

    from ..store.fsys import RemoteFS
    from .storewide import scan

    fs = store.fs.fs if isinstance(store.fs, RemoteFS) else None
    meta = fn([], *args, None)
    groups = _groups(_runs(store, scan(store)))
    if not groups:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(fn, groups, args=[*args, fs], meta=meta, enforce_metadata=False)


def to_dask(store: Store, what: str = "events", columns: Sequence[str] | None = None) -> dd.DataFrame:
    """The store's events (each run's own, as ``store.events()``), or its LLM calls (as
    ``store.sql("select * from llm_calls")``: every run as read, a fork's prefix included),
    as a Dask DataFrame read from the segment files on the workers.

    Args:
        store: the store (local, or a URL the workers can reach).
        what: ``"events"``, or ``"llm_calls"``: ``run_id`` and the columns of ``run.llm_calls()``
            (:data:`~agentlog.analysis.columns.LLM_CALLS`), computed by the DuckDB engine's
            query in each partition.
        columns: the columns to return (``run_id`` always comes first); default all.

    Raises:
        ValueError: an unknown ``what`` or column.
    """
    if what not in ("events", "llm_calls"):
        raise ValueError(f"to_dask(what={what!r}): use 'events' or 'llm_calls'")
    known = list(_EVENT_NAMES) if what == "events" else [c.name for c in C.LLM_CALLS]
    names = [n for n in (columns if columns is not None else known) if n != "run_id"]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown {what} column(s) {', '.join(map(repr, unknown))}; "
                         f"the columns are run_id, {', '.join(known)}")
    if what == "events":
        return _from_runs(store, _events_part, names)
    frame = _from_runs(store, _llm_calls_part)
    return frame if columns is None else frame[["run_id", *names]]


def cost(store: Store, keys: Sequence[str]) -> pd.DataFrame:
    """``store.cost(by=keys, engine="dask")``: see the module docstring."""
    spans = "span" in keys or "kind" in keys
    cols = ["type", *_USAGE, *(["span_id"] if spans else []), *(["model"] if "model" in keys else []),
            *(["actor"] if "actor" in keys else []), *(["ts"] if "day" in keys else [])]
    usage = _from_runs(store, _usage_part, list(dict.fromkeys(cols)), spans)
    llm = usage["type"] == LLM_RESPONSE
    parts = {"calls": (~usage["type"].isna()).astype("int64"),
             "llm_calls": llm.astype("int64"),
             "tool_calls": (usage["type"] == TOOL_RESULT).astype("int64"),
             **{c: usage[c].fillna(0).astype("int64") for c in ("input_tokens", "output_tokens", "cached_tokens")},
             "cost_sum": usage["cost_usd"].fillna(0.0).astype("float64"),
             "cost_known": (~usage["cost_usd"].isna()).astype("int64"),
             "cost_unknown_calls": (llm & usage["cost_usd"].isna()).astype("int64")}
    names = [("run_id" if k == "run" else k) for k in keys]
    key_cols = {("run_id" if k == "run" else k): _key(usage, k) for k in keys}
    table = usage.assign(**parts, **{f"_k_{n}": v for n, v in key_cols.items()})
    sums = list(parts)
    if names:
        # a cost table is small: a tree reduction into one partition, no shuffle
        grouped = table.groupby([f"_k_{n}" for n in names], dropna=False)[sums].sum(split_out=1).compute()
        out = grouped.reset_index().rename(columns={f"_k_{n}": n for n in names})
    else:
        out = table[sums].sum().compute().to_frame().T
    unknown_only = (out["cost_unknown_calls"] > 0) & (out["cost_known"] == 0)
    out["cost_usd"] = out["cost_sum"].astype("Float64").mask(unknown_only)
    out = out.drop(columns=["cost_sum", "cost_known"])
    if names:
        out = out.sort_values(names, na_position="last", kind="stable").reset_index(drop=True)
    return C.to_frame(pa.Table.from_pandas(out, preserve_index=False), C.cost_spec(keys))


def _key(frame: dd.DataFrame, key: str) -> dd.Series:
    if key == "run":
        return frame["run_id"]
    if key == "day":
        return frame["ts"].dt.floor("D")
    return frame[key]
