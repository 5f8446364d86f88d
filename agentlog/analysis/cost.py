"""What a run cost: usage grouped by model, actor, span, kind, type or day; and costs recomputed.

``cost(by=...)`` is a pandas group-by over the run's usage events (model answers, tool
results, and any event with a usage value). Every value column adds up, so the total row is
``table.sum(numeric_only=True)``. A cost the log does not know is never counted as 0: it is
left out of ``cost_usd`` and counted in ``cost_unknown_calls``. The store-wide
``store.cost(by=...)`` computes the same table in DuckDB over every run's own events.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from . import columns as C
from .tables import _frame, events, run_query

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["RUN_COST_KEYS", "check_keys", "cost", "recompute_cost"]

#: The keys a single run's ``cost(by=...)`` accepts.
RUN_COST_KEYS = ("model", "actor", "span", "kind", "type", "day")


def check_keys(by: str | Sequence[str], allowed: Sequence[str]) -> tuple[str, ...]:
    """``by`` as a tuple of known keys.

    Raises:
        ValueError: an unknown or repeated key; the message lists the known ones.

    >>> check_keys("model", RUN_COST_KEYS)
    ('model',)
    >>> check_keys(("model", "colour"), RUN_COST_KEYS)
    Traceback (most recent call last):
    ...
    ValueError: cannot group cost by 'colour'; use any of: model, actor, span, kind, type, day
    """
    keys = (by,) if isinstance(by, str) else tuple(by)
    for key in keys:
        if key not in allowed:
            raise ValueError(f"cannot group cost by {key!r}; use any of: {', '.join(allowed)}")
    if len(set(keys)) != len(keys):
        raise ValueError(f"by={keys!r} names a key twice")
    return keys


def cost(run: Run, by: str | Sequence[str] = ("model",), *, own: bool = False) -> pd.DataFrame:
    """Usage summed by ``by``: one row per group, sorted by the keys (missing keys last).

    Columns: the key columns (:data:`~agentlog.analysis.columns.COST_KEYS`), then
    :data:`~agentlog.analysis.columns.COST_VALUES`.

    Args:
        run: the run.
        by: one key or several, from ``model``, ``actor``, ``span`` (the name of the event's
            span), ``kind`` (that span's kind), ``type`` (event type), ``day`` (UTC);
            ``()`` for one row of totals.
        own: count only the run's own events: for a fork, what it paid (its parent prefix was
            paid by the parent). ``store.cost`` counts this way.
    """
    keys = check_keys(by, RUN_COST_KEYS)
    ev = events(run)
    if own and run.fork_seq is not None:
        ev = ev[ev["seq"] > run.fork_seq]
    usage = ev[["input_tokens", "output_tokens", "cached_tokens", "cost_usd"]]
    llm = (ev["type"] == "llm.response").fillna(False)
    tool = (ev["type"] == "tool.result").fillna(False)
    rows = (llm | tool | usage.notna().any(axis=1)).to_numpy(dtype=bool)
    ev, llm, tool = ev[rows], llm[rows], tool[rows]
    data = pd.DataFrame({
        "calls": 1, "llm_calls": llm.astype("int64"), "tool_calls": tool.astype("int64"),
        "input_tokens": ev["input_tokens"].fillna(0), "output_tokens": ev["output_tokens"].fillna(0),
        "cached_tokens": ev["cached_tokens"].fillna(0), "cost_usd": ev["cost_usd"].fillna(0.0),
        "cost_unknown_calls": (llm & ev["cost_usd"].isna()).astype("int64"),
    }, index=ev.index)
    for key in keys:
        data[key] = _key_column(run, ev, key)
    values = [c.name for c in C.COST_VALUES]
    if keys:
        grouped = data.groupby(list(keys), dropna=False, sort=True, observed=True)[values].sum()
        table = grouped.reset_index()
    else:
        table = data[values].sum().to_frame().T
    return C.to_frame(pa.Table.from_pandas(table, preserve_index=False), C.cost_spec(keys))


def _key_column(run: Run, ev: pd.DataFrame, key: str) -> pd.Series:
    if key in ("model", "actor", "type"):
        return ev[key]
    if key == "day":
        days = ev["ts"].dt.tz_localize(None).to_numpy().astype("datetime64[D]")  # UTC days
        return pd.Series(pd.arrays.ArrowExtensionArray(pa.array(days, pa.date32())), index=ev.index)
    from .spans import spans
    names = spans(run).set_index("span_id")["name" if key == "span" else "kind"]
    return ev["span_id"].map(names).astype(C.COST_KEYS[key].dtype)


# --- recomputed cost ---------------------------------------------------------------------------


def _recompute_sql(src: str) -> str:
    return f"""
SELECT seq, ts, model, input_tokens, output_tokens, cached_tokens,
       TRY_CAST(json_extract_string(payload, '$.usage.cache_write_tokens') AS BIGINT) AS cache_write_tokens,
       TRY_CAST(json_extract_string(payload, '$.usage.reasoning_tokens') AS BIGINT) AS reasoning_tokens,
       coalesce(model, json_extract_string(payload, '$.model')) AS priced_model,
       cost_usd, json_extract_string(payload, '$.cost_source') AS cost_source,
       coalesce(json_extract_string(payload, '$.cache_hit') = 'true', false) AS cache_hit
FROM {src} WHERE type = 'llm.response' ORDER BY seq
"""


def recompute_cost(run: Run, prices: Mapping[str, Mapping[str, Any]] | None = None, *,
                   at: datetime | None = None) -> pd.DataFrame:
    """The run's model answers, the recorded cost beside one recomputed now from the recorded
    usage (see :data:`~agentlog.analysis.columns.RECOMPUTED_COST`). The log is not changed.

    Args:
        run: the run.
        prices: price overrides in the :func:`agentlog.pricing.load` format (USD per million
            tokens, ``{"model": {"input": .., "output": .., "cached_input": ..}}``), applied
            only for this computation; without them, the installed genai-prices catalog and
            any overrides set with ``al.pricing.set``.
        at: price every call as of this time; default: the time of each call (catalog prices
            change over time).

    Every call is priced from its recorded tokens, a provider-reported cost included (the
    recorded usage does not say what the provider would charge now). Answers served from a log
    (``cache_hit``) recorded 0; the recomputed value is what they would have cost live. A model
    with no price gets ``recomputed_usd`` <NA> and source ``unknown``.
    """
    from .. import pricing
    from ..errors import UnknownModelWarning
    from ..events import Usage

    def build() -> pd.DataFrame:
        return run_query(run, _recompute_sql, (*C.RECOMPUTED_COST, C.Column("priced_model", pa.string(), ""),
                                               C.Column("reasoning_tokens", pa.int64(), "")))
    base = _frame(run, "recompute_base", build)
    usd: list[float | None] = []
    source: list[str] = []
    detail: list[str] = []
    with pricing.overrides(prices), warnings.catch_warnings():
        # An unknown model is reported in the table (source "unknown"), not as a warning.
        warnings.simplefilter("ignore", UnknownModelWarning)
        for row in base.itertuples(index=False):  # one per model call, each priced by the catalog
            usage = Usage(input_tokens=_int(row.input_tokens), output_tokens=_int(row.output_tokens),
                          cached_tokens=_int(row.cached_tokens),
                          cache_write_tokens=_int(row.cache_write_tokens),
                          reasoning_tokens=_int(row.reasoning_tokens))
            when = at or (row.ts.to_pydatetime() if not pd.isna(row.ts) else datetime.now(UTC))
            model = None if pd.isna(row.priced_model) else str(row.priced_model)
            found = pricing.cost(model, usage, when=when)
            usd.append(found.usd)
            source.append(found.source)
            detail.append(found.detail)
    out = base.drop(columns=["priced_model", "reasoning_tokens"])
    out["recomputed_usd"] = pd.array(usd, dtype=C.Column("", pa.float64(), "").dtype)
    out["recomputed_source"] = pd.array(source, dtype=C.Column("", pa.string(), "").dtype)
    out["delta_usd"] = out["recomputed_usd"] - out["cost_usd"]
    out["detail"] = pd.array(detail, dtype=C.Column("", pa.string(), "").dtype)
    return out[[c.name for c in C.RECOMPUTED_COST]]


def _int(value: Any) -> int:
    return 0 if value is None or pd.isna(value) else int(value)
