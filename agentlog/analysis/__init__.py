"""Analysis: a run's events, spans, model and tool calls, cost and tokens as pandas tables;
run diffs; and many runs at once in DuckDB.

- :mod:`~agentlog.analysis.columns` — the column specs and dtypes of every table;
- :mod:`~agentlog.analysis.tables` — ``run.events``, ``llm_calls()``, ``tool_calls()``,
  ``tokens_over_time()``, ``summary()``;
- :mod:`~agentlog.analysis.spans` — ``run.spans()``;
- :mod:`~agentlog.analysis.cost` — ``run.cost(by=...)``, ``run.recompute_cost()``;
- :mod:`~agentlog.analysis.queries` — the SQL shared by the per-run tables and the store views
  (one cost engine for a run and for the store);
- :mod:`~agentlog.analysis.storewide` — ``store.runs()``, ``events()``, ``cost()``, ``sql()``,
  ``duckdb()``;
- :mod:`~agentlog.analysis.align` and :mod:`~agentlog.analysis.rundiff` — ``al.diff`` and
  :class:`RunDiff`.

The store does not import this layer: ``agentlog/__init__.py`` attaches these functions to
``Run`` and ``Store`` as methods (:mod:`agentlog.accessors`), imported on first use, so
``import agentlog`` never loads pandas.
"""

from __future__ import annotations

from .rundiff import RunDiff, diff

__all__ = ["RunDiff", "diff"]
