"""Helpers shared by the store tests (fixtures live in conftest.py)."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from agentlog.store import Store

#: 2026-12-02T20:00:48Z, a fixed creation time for reproducible runs.
T0 = 1_796_241_648.0


class FixedClock:
    """A clock that ticks 1 ms per call: deterministic ``ts`` values."""

    def __init__(self, start: float = T0, step: float = 0.001) -> None:
        self.now, self.step = start, step

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value


def make_run(store: Store, n: int, *, run_id: str = "run-a", segment_events: int = 65536,
             close: bool = True, payload: Callable[[int], dict[str, Any]] | None = None,
             **kwargs: Any) -> Any:
    """A run of ``n`` notes; returns the closed Run, or the open writer if ``close=False``."""
    w = store.create_run(run_id=run_id, segment_events=segment_events,
                         clock=kwargs.pop("clock", FixedClock()), **kwargs)
    for i in range(n):
        w.emit("note", payload(i) if payload else {"i": i, "text": f"event {i}"})
    if not close:
        return w
    w.close()
    return store.run(run_id)


def rewrite_segment(path: Path, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    """Rewrite a sealed segment with pyarrow, rows changed by ``change`` (metadata kept)."""
    table = pq.read_table(path)
    rows = change(table.to_pylist())
    new = pa.Table.from_pylist(rows, schema=table.schema)
    pq.write_table(new, path, compression="zstd")


def rechain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A forger's rewrite for :func:`rewrite_segment`: every payload's "event" made "EVENT", and
    every hash recomputed, so the chain is valid again (only a head kept elsewhere catches it)."""
    from agentlog.chain import GENESIS, chain_hash, event_body

    prev = GENESIS
    for row in rows:
        row["payload"] = row["payload"].replace("event", "EVENT")
        body = event_body(seq=row["seq"], type=row["type"], payload_json=row["payload"],
                          ts=int(row["ts"].timestamp() * 1e6))
        prev = row["hash"] = chain_hash(prev, body)
    return rows


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def du(root: Path) -> int:
    """Bytes of all files under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def child_env() -> dict[str, str]:
    """Environment for child pythons: the package importable, warnings visible."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    return env


PYTHON = sys.executable
