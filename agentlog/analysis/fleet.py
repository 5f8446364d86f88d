"""The store's events on a Dask cluster: for more runs than one machine holds.

:func:`to_dask` reads the store's own Parquet segments as they are (one Dask partition per
group of segment files, read on the workers with the store's filesystem: local paths, or
``s3://…`` through fsspec with the workers' own AWS environment), plus the WAL tails of runs
still open (taken here, as :func:`~agentlog.analysis.storewide.scan` takes them).
:func:`cost` is ``store.cost(by=…, engine="dask")``: the same table as DuckDB's
(:func:`agentlog.analysis.queries.cost_sql`), unknown costs kept unknown, computed on the
cluster of the current ``dask.distributed`` client (or Dask's default scheduler).

Needs ``pip install 'agentlog[fleet]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import pandas as pd
import pyarrow as pa

from ..events import LLM_RESPONSE, TOOL_RESULT
from . import columns as C

if TYPE_CHECKING:
    import dask.dataframe as dd

    from ..store.store import Store

__all__ = ["DASK_COST_KEYS", "cost", "to_dask"]

#: The keys ``cost(by=…, engine="dask")`` groups by (``span`` and ``kind`` need the span
#: table's join: DuckDB only).
DASK_COST_KEYS: Final = ("run", "model", "actor", "type", "day")
_USAGE: Final = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd")
_LLM_CALLS: Final = ("seq", "ts", "type", "actor", "span_id", "model", "input_tokens", "output_tokens",
                     "cached_tokens", "cost_usd", "duration_ms")
_PARTITIONS: Final = 64  # at most this many partitions: enough to spread, few enough to schedule


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


def _read(files: list[tuple[str, str]], names: list[str], fs: Any) -> pd.DataFrame:
    """Read a group of segment files (on a worker): ``(run_id, path)`` pairs."""
    import pyarrow.parquet as pq

    schema = _schema(names)
    arrow = None
    if fs is not None:
        from pyarrow.fs import FSSpecHandler, PyFileSystem
        arrow = PyFileSystem(FSSpecHandler(fs))
    parts = []
    for run_id, path in files:
        with pq.ParquetFile(path, filesystem=arrow) as f:
            table = f.read(columns=names)
        table = table.add_column(0, "run_id", pa.array([run_id] * table.num_rows, pa.string()))
        parts.append(table.cast(schema))
    return _frame(pa.concat_tables(parts) if parts else schema.empty_table())


def to_dask(store: Store, what: str = "events", columns: Sequence[str] | None = None) -> dd.DataFrame:
    """The store's events (each run's own, as ``store.events()``), or its LLM calls, as a Dask
    DataFrame read from the segment files on the workers.

    Args:
        store: the store (local, or a URL the workers can reach).
        what: ``"events"``, or ``"llm_calls"``: the ``llm.response`` events with their usage
            columns (run_id, seq, ts, type, actor, span_id, model, tokens, cost_usd,
            duration_ms; not the message previews of ``run.llm_calls()``).
        columns: the event columns to read (``run_id`` always comes first); default all for
            events.

    Raises:
        ValueError: an unknown ``what`` or column.
    """
    import dask.dataframe as dd

    from ..store.fsys import RemoteFS
    from .storewide import scan

    if what not in ("events", "llm_calls"):
        raise ValueError(f"to_dask(what={what!r}): use 'events' or 'llm_calls'")
    known = [c.name for c in C.EVENTS]
    names = list(columns) if columns is not None else (list(_LLM_CALLS) if what == "llm_calls" else known)
    names = [n for n in names if n != "run_id"]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown event column(s) {', '.join(map(repr, unknown))}; "
                         f"the columns are run_id, {', '.join(known)}")
    read = list(dict.fromkeys([*names, "type"])) if what == "llm_calls" else names
    snap = scan(store)
    remote = isinstance(store.fs, RemoteFS)
    files = [(_run_of(f), f.split("://", 1)[1] if remote else f) for f in snap.files]
    fs = store.fs.fs if isinstance(store.fs, RemoteFS) else None
    size = max(1, -(-len(files) // _PARTITIONS))
    groups = [files[i:i + size] for i in range(0, len(files), size)]
    meta = _frame(_schema(read).empty_table())
    frame = (dd.from_map(_read, groups, names=read, fs=fs, meta=meta, enforce_metadata=False)
             if groups else dd.from_pandas(meta, npartitions=1))
    tails = snap.tail_table()
    if tails.num_rows:
        tail = _frame(tails.select(["run_id", *read]).cast(_schema(read)))
        frame = dd.concat([frame, dd.from_pandas(tail, npartitions=1)])
    if what == "llm_calls":
        frame = frame[frame["type"] == LLM_RESPONSE]
    return frame[["run_id", *names]]


def _run_of(path: str) -> str:
    folder = path.rsplit("/", 2)[-2]
    return folder.split("=", 1)[1]


def cost(store: Store, keys: Sequence[str]) -> pd.DataFrame:
    """``store.cost(by=keys, engine="dask")``: see the module docstring.

    Raises:
        ValueError: a key Dask does not group by (``span``, ``kind``).
    """
    bad = [k for k in keys if k not in DASK_COST_KEYS]
    if bad:
        raise ValueError(f"engine='dask' groups cost by {', '.join(DASK_COST_KEYS)}; not by "
                         f"{', '.join(map(repr, bad))} (use the default engine, DuckDB)")
    cols = ["type", *_USAGE, *(["model"] if "model" in keys else []), *(["actor"] if "actor" in keys else []),
            *(["ts"] if "day" in keys else [])]
    events = to_dask(store, columns=list(dict.fromkeys(cols)))
    usage = events[events["type"].isin([LLM_RESPONSE, TOOL_RESULT])
                   | ~events["input_tokens"].isna() | ~events["output_tokens"].isna()
                   | ~events["cached_tokens"].isna() | ~events["cost_usd"].isna()]
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
