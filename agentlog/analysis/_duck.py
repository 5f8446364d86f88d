"""One in-process DuckDB database for the per-run tables, used through cheap cursors.

DuckDB parses the payload JSON (``json_extract_string`` and friends) in C, over a whole
column at a time, so no table is built with a Python loop per event. Opening a database
costs ~10 ms and a cursor ~0.2 ms, so there is one database per process and a cursor per
query; a cursor's registered tables are its own, so queries in threads do not see each
other's. Every session runs in UTC.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

__all__ = ["cursor", "query"]

_lock = threading.Lock()
_db: duckdb.DuckDBPyConnection | None = None


def cursor() -> duckdb.DuckDBPyConnection:
    """A new cursor on the shared in-memory database, with ``TimeZone`` set to UTC."""
    global _db
    import duckdb

    with _lock:
        if _db is None:
            _db = duckdb.connect(":memory:")
        cur = _db.cursor()
    cur.execute("SET TimeZone = 'UTC'")
    return cur


def query(sql: str, tables: Mapping[str, pa.Table], params: Mapping[str, Any] | None = None) -> pa.Table:
    """Run ``sql`` over Arrow ``tables`` (registered under their keys) and return an Arrow table."""
    cur = cursor()
    try:
        for name, table in tables.items():
            cur.register(name, table)
        return cur.sql(sql, params=dict(params) if params else None).to_arrow_table()
    finally:
        cur.close()
