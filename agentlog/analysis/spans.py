"""The span tree of a run, computed from its ``span.started`` / ``span.ended`` events.

A span's events are those whose ``span_id`` is the span's id; its parent is the ``parent``
recorded in ``span.started``. The tree is computed in one DuckDB query
(:func:`agentlog.analysis.queries.spans_sql`): a recursive walk from every span up to its root
gives each span's depth and every ancestor it rolls up into, so the ``total_*`` columns are
the span's own usage plus that of all its descendants; ``self_ms`` subtracts the union of the
children's intervals. The same query is the store's ``spans`` view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from . import columns as C
from .queries import spans_sql
from .tables import _frame, run_query

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["spans"]


def spans(run: Run) -> pd.DataFrame:
    """One row per span, in start order (see :data:`~agentlog.analysis.columns.SPANS`)."""
    return _frame(run, "spans", lambda: run_query(run, spans_sql, C.SPANS))
