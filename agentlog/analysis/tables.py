"""Per-run tables: events, model calls, tool calls, running token totals and the one-row summary.

Every function takes a :class:`~agentlog.Run` and returns a DataFrame whose columns are
specified in :mod:`agentlog.analysis.columns`. Tables are built from ``run.table()`` (the
whole run as read: a fork's parent prefix, the sealed segments and the WAL tail) with Arrow,
pandas and DuckDB working on whole columns, and are cached per snapshot of the run (a
``run.refresh()`` starts over). Each call returns a new DataFrame, so changing one does not
change the next.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import columns as C
from ._duck import query
from .queries import llm_calls_sql, runs_sql, source_sql, tokens_over_time_sql, tool_calls_sql

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["event_source", "events", "events_expanded", "llm_calls", "run_query", "summary",
           "tokens_over_time", "tool_calls"]

_lock = threading.Lock()
_cache: weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, Any]]] = weakref.WeakKeyDictionary()


def cached(run: Run, name: str, build: Callable[[], Any]) -> Any:
    """``build()`` once per snapshot of ``run`` (a refresh, or new events read, start over)."""
    snap = run._snapshot()
    with _lock:
        held = _cache.get(run)
        if held is None or held[0] is not snap:
            held = (snap, {})
            _cache[run] = held
        values = held[1]
        if name in values:
            return values[name]
    value = build()
    with _lock:
        values[name] = value
    return value


def _frame(run: Run, name: str, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    # A shallow copy: with copy-on-write, changes to it never reach the cached frame.
    frame: pd.DataFrame = cached(run, name, build)
    return frame.copy(deep=False)


def event_table(run: Run) -> pa.Table:
    """``run.table()``, cached per snapshot."""
    table: pa.Table = cached(run, "table", run.table)
    return table


def event_source(run: Run) -> pa.Table:
    """The run's events with a constant ``run_id`` column: the shape the SQL of
    :mod:`agentlog.analysis.queries` reads."""
    def build() -> pa.Table:
        table = event_table(run)
        ids = pa.DictionaryArray.from_arrays(pa.array(np.zeros(table.num_rows, np.int32)),
                                             pa.array([run.id], pa.string()))
        return table.append_column("run_id", ids)
    source: pa.Table = cached(run, "source", build)
    return source


def run_query(run: Run, sql: Callable[[str], str], spec: tuple[C.Column, ...]) -> pd.DataFrame:
    """Run a query of :mod:`~agentlog.analysis.queries` over one run and shape it to ``spec``."""
    return C.to_frame(query(sql("ev"), {"ev": event_source(run)}), spec)


# --- the tables --------------------------------------------------------------------------------


def events(run: Run) -> pd.DataFrame:
    """One row per event, in seq order (see :data:`~agentlog.analysis.columns.EVENTS`)."""
    return _frame(run, "events", lambda: C.to_frame(event_table(run), C.EVENTS))


_BASE = ("seq", "type", "actor", "caused_by", "span_id", "ts")


def events_expanded(run: Run, types: str | Iterable[str] | None = None) -> pd.DataFrame:
    """The events of ``types`` (all if ``None``) with their payload fields as columns.

    The base columns ``seq, type, actor, caused_by, span_id, ts`` come first, then one column
    per payload field, nested fields as dotted paths (``args.service``), as
    :func:`pandas.json_normalize` flattens them, converted to Arrow-backed dtypes. A field
    whose name is a base column is prefixed ``payload.``. Lists stay Python lists.
    """
    table = event_table(run)
    if types is not None:
        wanted = [types] if isinstance(types, str) else list(types)
        table = table.filter(pc.is_in(table.column("type").cast(pa.string()),
                                      value_set=pa.array(wanted, pa.string())))
    base = C.to_frame(table, [c for c in C.EVENTS if c.name in _BASE])
    # One json.loads per selected row: the fields are only known once the payloads are read.
    records = [json.loads(p) for p in table.column("payload").to_pylist()]
    fields = pd.json_normalize(records) if records else pd.DataFrame(index=range(0))
    fields = fields.rename(columns={c: f"payload.{c}" for c in fields.columns if c in _BASE})
    if len(fields.columns):
        fields = fields.convert_dtypes(dtype_backend="pyarrow")
    fields.index = base.index
    return pd.concat([base, fields], axis=1)


def llm_calls(run: Run) -> pd.DataFrame:
    """One row per model answer or failed model call (see
    :data:`~agentlog.analysis.columns.LLM_CALLS`)."""
    return _frame(run, "llm_calls", lambda: run_query(run, llm_calls_sql, C.LLM_CALLS))


def served_answers(run: Run) -> int:
    """How many of the run's own model answers were served from a recorded run (``source``
    ``log`` in :func:`llm_calls`: a replay's, a fork's), which is why they paid nothing; one
    count over the event table, not the table of calls."""
    from ..events import LLMResponse

    start = -1 if run.fork_seq is None else run.fork_seq
    sql = (f"SELECT count(*) AS n FROM ev WHERE type = '{LLMResponse.TYPE}' AND seq > {int(start)} "
           f"AND {source_sql(LLMResponse, 'payload')} = 'log'")
    return int(query(sql, {"ev": event_table(run)}).column("n")[0].as_py())


def tool_calls(run: Run) -> pd.DataFrame:
    """One row per tool result (see :data:`~agentlog.analysis.columns.TOOL_CALLS`)."""
    return _frame(run, "tool_calls", lambda: run_query(run, tool_calls_sql, C.TOOL_CALLS))


def tokens_over_time(run: Run) -> pd.DataFrame:
    """Running totals of tokens and cost at each usage event (see
    :data:`~agentlog.analysis.columns.TOKENS_OVER_TIME`)."""
    return _frame(run, "tokens", lambda: run_query(run, tokens_over_time_sql, C.TOKENS_OVER_TIME))


# --- summary -----------------------------------------------------------------------------------


def verified_state(run: Run) -> str:
    """``ok`` / ``not ok`` from the last ``run.verify()`` if it still describes the run, else
    ``not checked``."""
    report = getattr(run, "_last_verify", None)
    if report is None or report.events != len(run) or report.head != run.head:
        return "not checked"
    return "ok" if report.ok else "not ok"


def tags_text(meta: Mapping[str, Any]) -> str:
    """A run's tags as compact JSON text (the ``tags`` column)."""
    return json.dumps(meta.get("tags"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def summary(run: Run, *, verify: bool = False) -> pd.DataFrame:
    """One row describing the run (see :data:`~agentlog.analysis.columns.RUNS`).

    Args:
        run: the run.
        verify: run ``run.verify()`` (reads and hashes every event); by default the
            ``verified`` column reports the last verification, or ``not checked``.
    """
    if verify:
        run.verify()
    row = dict(cached(run, "summary", lambda: _summary_row(run)))
    row["verified"] = verified_state(run)
    return C.to_frame({k: [v] for k, v in row.items()}, C.RUNS)


def meta_row(run_id: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The ``run.json`` facts of a run's row in ``run.summary()`` and ``store.runs()``."""
    parent = meta.get("parent") or {}
    return {"run_id": run_id, "name": meta.get("name"), "status": str(meta.get("status", "open")),
            "created": pd.Timestamp(meta["created"]) if meta.get("created") else None,
            "tags": tags_text(meta), "parent": parent.get("run_id"),
            "fork_seq": None if not parent else int(parent["seq"])}


def meta_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """:func:`meta_row` rows as the table :func:`~agentlog.analysis.queries.runs_sql` joins,
    with ``ord``, the listing order."""
    names = ("run_id", "name", "status", "created", "tags", "parent", "fork_seq")
    types = (pa.string(), pa.string(), pa.string(), pa.timestamp("us", tz="UTC"), pa.string(),
             pa.string(), pa.int64())
    data = {n: pa.array([m[n] for m in rows], t) for n, t in zip(names, types, strict=True)}
    data["ord"] = pa.array(range(len(rows)), pa.int64())
    return pa.table(data)


def _summary_row(run: Run) -> dict[str, Any]:
    """The run's row of :func:`~agentlog.analysis.queries.runs_sql`: the SQL of ``store.runs()``
    over this run's events, a fork's prefix marked as stored in its parent."""
    source = event_source(run)
    own = run.run_id
    fork_seq = run.fork_seq
    if fork_seq is None:
        stored_in = pa.array([own] * source.num_rows, pa.string())
    else:
        parent = str((run.meta.get("parent") or {}).get("run_id"))
        mine = pc.greater(source.column("seq"), fork_seq)
        stored_in = pc.if_else(mine, pa.scalar(own), pa.scalar(parent))
    events = source.append_column("stored_in", stored_in)
    meta = meta_table([meta_row(own, run.meta)])
    table = query(runs_sql("ev", "meta"), {"ev": events, "meta": meta})
    row: dict[str, Any] = table.to_pylist()[0]
    return row
