"""The columns of every analysis table, with their dtypes and meanings, in one place.

Every table agentlog returns is a pandas ``DataFrame`` with a ``RangeIndex`` and exactly the
columns listed here, in this order, with these dtypes:

- text, integers, floats and booleans are Arrow-backed (``pd.ArrowDtype``): missing values are
  ``pd.NA`` and an integer column stays an integer column when a value is missing;
- timestamps are pandas' own ``datetime64[us, UTC]``, so ``.dt`` and resampling work as usual;
- a ``day`` is an Arrow ``date32``.

A table is built from an Arrow table by :func:`to_frame`, which casts each column to its
spec, so the dtypes do not depend on the data (an empty table has the same dtypes). Tests pin
them. ``describe(SPANS)`` prints a spec as text.

>>> print(describe(TOKENS_OVER_TIME[:2]))
seq  int64[pyarrow]           the event's position in the run
ts   datetime64[us, UTC]      when it was appended
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pandas as pd
import pyarrow as pa

__all__ = [
    "COST_KEYS",
    "COST_VALUES",
    "DIFF",
    "EVENTS",
    "LLM_CALLS",
    "RECOMPUTED_COST",
    "RUNS",
    "SPANS",
    "TOKENS_OVER_TIME",
    "TOOL_CALLS",
    "Column",
    "arrow_to_frame",
    "cost_spec",
    "describe",
    "to_frame",
]


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table: its name, Arrow type, pandas dtype and meaning."""

    name: str
    """The column name."""
    arrow: pa.DataType
    """The Arrow type it is cast to before conversion."""
    doc: str
    """What it holds."""

    @property
    def dtype(self) -> Any:
        """The pandas dtype of the column (``datetime64[us, UTC]`` for timestamps, else Arrow)."""
        if pa.types.is_timestamp(self.arrow):
            return pd.DatetimeTZDtype("us", "UTC")
        return pd.ArrowDtype(self.arrow)


_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
_TS = pa.timestamp("us", tz="UTC")


def _cols(*rows: tuple[str, pa.DataType, str]) -> tuple[Column, ...]:
    return tuple(Column(name, arrow, doc) for name, arrow, doc in rows)


_USAGE = (
    ("model", _S, "the model that answered (``llm.response``)"),
    ("input_tokens", _I, "input tokens, cached ones included"),
    ("output_tokens", _I, "output tokens, reasoning included"),
    ("cached_tokens", _I, "input tokens read from the provider's cache"),
    ("cost_usd", _F, "cost in USD as recorded; <NA> when unknown, 0 when served from a log"),
    ("duration_ms", _F, "how long the call took, as recorded"),
)

#: ``run.events``: one row per event, in seq order (a fork's parent prefix included).
EVENTS: Final = _cols(
    ("seq", _I, "the event's position in the run"),
    ("type", _S, "dotted event type, e.g. ``llm.response``"),
    ("actor", _S, "the component that produced it"),
    ("caused_by", _I, "seq of the event that triggered it"),
    ("span_id", _S, "the span it belongs to"),
    ("ts", _TS, "when it was appended"),
    *_USAGE,
    ("hash", _S, "the chain hash (64 hex)"),
    ("payload", _S, "the payload as canonical JSON text"),
)

_TOKENS_COST = (
    ("input_tokens", _I, "input tokens of the span's own events"),
    ("output_tokens", _I, "output tokens of the span's own events"),
    ("cached_tokens", _I, "cached input tokens of the span's own events"),
    ("cost_usd", _F, ("known cost of the span's own events (see cost_unknown_calls); <NA> when "
                      "all of them are unknown")),
    ("cost_unknown_calls", _I, "own ``llm.response`` events whose cost is unknown"),
)

#: ``run.spans()``: one row per span, in start order.
SPANS: Final = _cols(
    ("span_id", _S, "the span's id (the ``span_id`` of its events)"),
    ("parent", _S, "the enclosing span's id as recorded; <NA> for a root"),
    ("name", _S, "the span's name"),
    ("kind", _S, "``agent``, ``llm``, ``tool``, ``chain``, ``http``, …"),
    ("depth", _I, "0 for a root, else the parent's depth + 1"),
    ("start", _TS, "ts of ``span.started``"),
    ("end", _TS, "ts of ``span.ended``; for an open span, the ts of the run's last event"),
    ("duration_ms", _F, "end - start"),
    ("self_ms", _F, "duration minus the time covered by its children (overlaps counted once)"),
    ("status", _S, "``ok``, ``error``, or ``open`` for a span that never ended"),
    ("error", _S, "the error text of a failed span"),
    ("events", _I, "events whose span_id is this span (its start and end included)"),
    ("start_seq", _I, "seq of ``span.started``"),
    ("end_seq", _I, "seq of ``span.ended``; <NA> when open"),
    ("model", _S, "the model of the ``llm.response`` in the span (llm spans)"),
    *_TOKENS_COST,
    ("total_input_tokens", _I, "input tokens of the span and all its descendants"),
    ("total_output_tokens", _I, "output tokens of the span and all its descendants"),
    ("total_cached_tokens", _I, "cached input tokens of the span and all its descendants"),
    ("total_cost_usd", _F, "known cost of the span and all its descendants; <NA> when all unknown"),
    ("total_cost_unknown_calls", _I, "calls of unknown cost in the span and its descendants"),
)

#: ``run.llm_calls()``: one row per model answer (``llm.response``) or failed call (``error``).
LLM_CALLS: Final = _cols(
    ("seq", _I, "seq of the ``llm.response`` (or of the ``error`` of a failed call)"),
    ("request_seq", _I, "seq of the ``llm.request`` it answers"),
    ("ts", _TS, "when the answer was appended"),
    ("span_id", _S, "the call's span"),
    ("actor", _S, "who made the call"),
    ("model", _S, "the model that answered (else the one asked)"),
    ("input_tokens", _I, "input tokens, cached ones included"),
    ("output_tokens", _I, "output tokens"),
    ("cached_tokens", _I, "input tokens read from the provider's cache"),
    ("cost_usd", _F, "cost as recorded; <NA> when unknown, 0 when served from a log"),
    ("cost_source", _S, "``provider``, ``computed``, ``unknown`` or ``cache``"),
    ("latency_ms", _F, "ts of the answer - ts of the request: what this run waited"),
    ("duration_ms", _F, "the provider call's duration as recorded"),
    ("cache_hit", _B, "true when the answer was served from a recorded run"),
    ("source", _S, "``live``, ``log`` (served from a recorded run) or ``edit`` (a fork's edit)"),
    ("served_from_seq", _I, "seq of the recorded answer that was served"),
    ("finish_reason", _S, "why generation stopped"),
    ("error", _S, "the error of a failed call"),
    ("prompt_preview", _S, "the last user message, whitespace folded, cut at 80 characters"),
    ("response_preview", _S, "the answer's text (or its tool calls), cut at 80 characters"),
)

#: ``run.tool_calls()``: one row per ``tool.result``.
TOOL_CALLS: Final = _cols(
    ("seq", _I, "seq of the ``tool.result``"),
    ("call_seq", _I, "seq of the ``tool.call`` it answers"),
    ("ts", _TS, "when the result was appended"),
    ("span_id", _S, "the call's span"),
    ("actor", _S, "who made the call"),
    ("name", _S, "the tool's name"),
    ("args_preview", _S, "the arguments as JSON, cut at 80 characters"),
    ("result_preview", _S, "the result (text as is, else JSON), cut at 80 characters"),
    ("error", _S, "the error of a failed call"),
    ("duration_ms", _F, "the tool's duration as recorded"),
    ("latency_ms", _F, "ts of the result - ts of the call: what this run waited"),
    ("source", _S, "``live``, ``log`` (served from a recorded run) or ``edit`` (a fork's edit)"),
    ("served_from_seq", _I, "seq of the recorded result that was served"),
)

#: The group keys ``cost(by=...)`` accepts, with the column each becomes.
COST_KEYS: Final[Mapping[str, Column]] = {
    "run": Column("run_id", _S, "the run (``store.cost`` only)"),
    "model": Column("model", _S, "the model (<NA> for tool calls)"),
    "actor": Column("actor", _S, "the event's actor"),
    "span": Column("span", _S, "the name of the event's span (for a recorded model call, "
                               "its llm span, named after the model)"),
    "kind": Column("kind", _S, "the kind of the event's span (``llm``, ``tool``, …)"),
    "type": Column("type", _S, "the event type"),
    "day": Column("day", pa.date32(), "the UTC day of the event"),
}

#: The value columns of ``cost(by=...)``, after the key columns. Every one adds up, so
#: ``table.sum(numeric_only=True)`` is the total row.
COST_VALUES: Final = _cols(
    ("calls", _I, "usage events: ``llm.response``, ``tool.result`` and any event with usage"),
    ("llm_calls", _I, "``llm.response`` events"),
    ("tool_calls", _I, "``tool.result`` events"),
    ("input_tokens", _I, "input tokens, cached ones included"),
    ("output_tokens", _I, "output tokens"),
    ("cached_tokens", _I, "cached input tokens"),
    ("cost_usd", _F, ("the sum of the known costs (served-from-log answers cost 0); <NA> when "
                      "every cost in the group is unknown, never 0")),
    ("cost_unknown_calls", _I, "``llm.response`` events whose cost is unknown: never counted as 0"),
)

#: ``run.tokens_over_time()``: one row per usage event, with running totals.
TOKENS_OVER_TIME: Final = _cols(
    ("seq", _I, "the event's position in the run"),
    ("ts", _TS, "when it was appended"),
    ("type", _S, "the event type"),
    ("model", _S, "the model that answered"),
    ("input_tokens", _I, "this event's input tokens"),
    ("output_tokens", _I, "this event's output tokens"),
    ("cached_tokens", _I, "this event's cached input tokens"),
    ("cost_usd", _F, "this event's cost (<NA> when unknown)"),
    ("cum_input_tokens", _I, "input tokens up to and including this event"),
    ("cum_output_tokens", _I, "output tokens up to and including this event"),
    ("cum_cached_tokens", _I, "cached input tokens up to and including this event"),
    ("cum_cost_usd", _F, "known cost up to and including this event; <NA> while all are unknown"),
    ("cum_cost_unknown_calls", _I, "calls of unknown cost up to and including this event"),
)

#: ``run.summary()`` (one row) and ``store.runs()`` (one row per run).
RUNS: Final = _cols(
    ("run_id", _S, "the run's id"),
    ("name", _S, "its name"),
    ("status", _S, "``open``, ``finished``, ``failed``, ``closed``, …"),
    ("created", _TS, "when it was created (``run.json``)"),
    ("tags", _S, "its tags as JSON text"),
    ("parent", _S, "the run it was forked from"),
    ("fork_seq", _I, "the parent's last seq it shares"),
    ("events", _I, "events as read (a fork's parent prefix included)"),
    ("own_events", _I, "events stored in this run's own files"),
    ("spans", _I, "``span.started`` events"),
    ("llm_calls", _I, "``llm.response`` events"),
    ("tool_calls", _I, "``tool.result`` events"),
    ("started", _TS, "ts of the first event"),
    ("ended", _TS, "ts of the last event"),
    ("duration_ms", _F, "ended - started"),
    ("input_tokens", _I, "input tokens, cached ones included"),
    ("output_tokens", _I, "output tokens"),
    ("cached_tokens", _I, "cached input tokens"),
    ("cost_usd", _F, "known cost of the run as read; <NA> when every cost is unknown (never 0)"),
    ("cost_unknown_calls", _I, "``llm.response`` events whose cost is unknown"),
    ("own_cost_usd", _F, ("known cost of the run's own events: what it paid (a fork's prefix "
                          "was paid by its parent)")),
    ("own_cost_unknown_calls", _I, "its own ``llm.response`` events whose cost is unknown"),
    ("verified", _S, "``ok``, ``not ok`` or ``not checked``"),
)

#: ``run.recompute_cost()``: the model calls, recorded cost beside a recomputed one.
RECOMPUTED_COST: Final = _cols(
    ("seq", _I, "seq of the ``llm.response``"),
    ("ts", _TS, "when the answer was appended"),
    ("model", _S, "the model that answered"),
    ("input_tokens", _I, "input tokens, cached ones included"),
    ("output_tokens", _I, "output tokens"),
    ("cached_tokens", _I, "cache reads"),
    ("cache_write_tokens", _I, "cache writes (from the payload's usage)"),
    ("cost_usd", _F, "the cost as recorded"),
    ("cost_source", _S, "how the recorded cost was found"),
    ("cache_hit", _B, "served from a recorded run (recorded cost 0)"),
    ("recomputed_usd", _F, "the cost of the recorded usage at today's catalog or the overrides"),
    ("recomputed_source", _S, "``provider``, ``computed`` or ``unknown``"),
    ("delta_usd", _F, "recomputed_usd - cost_usd"),
    ("detail", _S, "where the recomputed price came from"),
)

#: ``RunDiff.table()``: one row per aligned pair of events after the shared prefix.
DIFF: Final = _cols(
    ("status", _S, "``matched``, ``moved`` (the same event elsewhere in b), ``changed``, ``only_a`` or ``only_b``"),
    ("seq_a", _I, "the event's seq in run a (<NA> for only_b)"),
    ("seq_b", _I, "the event's seq in run b (<NA> for only_a)"),
    ("type", _S, "the event type"),
    ("actor", _S, "the event's actor"),
    ("name", _S, ("the payload's ``name``, else its ``key``, else its ``id`` (the signature's "
                  "third part)")),
    ("summary", _S, "what changed (changed), or what the event is (only_a / only_b)"),
)


def cost_spec(keys: Sequence[str]) -> tuple[Column, ...]:
    """The columns of ``cost(by=keys)``: the key columns, then :data:`COST_VALUES`."""
    return (*(COST_KEYS[k] for k in keys), *COST_VALUES)


def describe(spec: Sequence[Column]) -> str:
    """A spec as aligned text: name, dtype, meaning."""
    names = max((len(c.name) for c in spec), default=0)
    return "\n".join(f"{c.name:<{names}}  {c.dtype!s:<23}  {c.doc}".rstrip() for c in spec)


def to_frame(table: pa.Table | Mapping[str, Any], spec: Sequence[Column]) -> pd.DataFrame:
    """Build the DataFrame of ``spec`` from an Arrow table (or a mapping of columns).

    Columns are taken by name and cast to their spec; a column the table lacks is all
    missing. Extra columns are dropped.
    """
    if not isinstance(table, pa.Table):
        table = pa.table(dict(table)) if table else pa.table({})
    n = table.num_rows
    data: dict[str, Any] = {}
    for col in spec:
        if col.name in table.column_names:
            arr = table.column(col.name)
            if arr.type != col.arrow:
                arr = arr.cast(col.arrow)
        else:
            arr = pa.chunked_array([pa.nulls(n, col.arrow)])
        if pa.types.is_timestamp(col.arrow):
            data[col.name] = arr.to_pandas().astype(col.dtype)
        else:
            data[col.name] = pd.Series(pd.arrays.ArrowExtensionArray(arr), copy=False)
    frame = pd.DataFrame(data, index=pd.RangeIndex(n), copy=False)
    return frame


def arrow_to_frame(table: pa.Table) -> pd.DataFrame:
    """Any Arrow table as a DataFrame with this module's conventions: Arrow-backed dtypes, and
    timestamps as ``datetime64[us, <tz>]`` (what ``store.sql`` returns)."""
    spec = []
    for field in table.schema:
        arrow = field.type
        if pa.types.is_dictionary(arrow):
            arrow = arrow.value_type
        spec.append(Column(field.name, arrow, ""))
    data: dict[str, Any] = {}
    for col, name in zip(spec, table.column_names, strict=True):
        arr = table.column(name)
        if arr.type != col.arrow:
            arr = arr.cast(col.arrow)
        if pa.types.is_timestamp(col.arrow):
            unit = col.arrow.tz
            series = arr.to_pandas()
            data[name] = series.astype(pd.DatetimeTZDtype("us", unit) if unit else "datetime64[us]")
        else:
            data[name] = pd.Series(pd.arrays.ArrowExtensionArray(arr), copy=False)
    return pd.DataFrame(data, index=pd.RangeIndex(table.num_rows), copy=False)
