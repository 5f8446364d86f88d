"""What a run cost: usage grouped by model, actor, span, kind, type or day; and costs recomputed.

``cost(by=...)`` is :func:`agentlog.analysis.queries.cost_sql` run by DuckDB over the run's
Arrow table: the same SQL as ``store.cost(by=...)`` over every run, so there is one cost
engine. It sums the usage events (model answers, tool results, and any event with a usage
value). Every value column adds up, so the total row is ``table.sum(numeric_only=True)``. A
cost the log does not know is never counted as 0: ``cost_usd`` is the sum of the known costs
(<NA> for a group whose costs are all unknown) and ``cost_unknown_calls`` counts the rest.

``recompute_cost()`` prices the recorded usage again with :mod:`agentlog.pricing`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from . import columns as C
from ._duck import query
from .queries import cost_sql, recompute_sql
from .tables import _frame, event_source, run_query

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
    """Tokens, calls and cost summed by ``by``: one row per group, sorted by the keys (missing
    keys last).

    Columns: the keys (:data:`~agentlog.analysis.columns.COST_KEYS`), then calls, llm_calls,
    tool_calls, input_tokens, output_tokens, cached_tokens, cost_usd (the sum of the known
    costs; <NA> when every cost in the group is unknown, never 0), cost_unknown_calls (the
    model answers left out of cost_usd) (:data:`~agentlog.analysis.columns.COST_VALUES`). The
    total row is ``run.cost(...).sum(numeric_only=True)``.

    Args:
        run: the run.
        by: one key or several, from ``model``, ``actor``, ``span`` (the name of the event's
            span), ``kind`` (that span's kind), ``type`` (event type), ``day`` (UTC);
            ``()`` for one row of totals.
        own: count only the run's own events: for a fork, what it paid (its parent prefix was
            paid by the parent). ``store.cost`` counts this way.

    Raises:
        ValueError: an unknown or repeated key.
    """
    keys = check_keys(by, RUN_COST_KEYS)
    fork_seq = run.fork_seq if own else None

    def build() -> pd.DataFrame:
        usage = "ev" if fork_seq is None else f"(SELECT * FROM ev WHERE seq > {int(fork_seq)})"
        table = query(cost_sql(usage, "ev", keys), {"ev": event_source(run)})
        return C.to_frame(table, C.cost_spec(keys))

    return _frame(run, f"cost:{','.join(keys)}:{fork_seq}", build)


# --- recomputed cost ---------------------------------------------------------------------------


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
        return run_query(run, recompute_sql, (*C.RECOMPUTED_COST, C.Column("priced_model", pa.string(), ""),
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
