"""``run.json``: what a run is (id, name, tags, parent, schema version) and how it ended.

Written atomically (temp → fsync → rename → fsync dir) and deterministically (sorted keys,
fixed indentation, times from the writer's clock), so a run recorded twice with a fixed clock
is byte-identical. Also here: run ids, their folder names, and ISO times.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from ..errors import StoreError
from ._fs import write_atomic
from .segments import SCHEMA_VERSION, check_schema_version

__all__ = ["RUN_JSON", "RUN_PREFIX", "check_run_id", "iso_time", "new_run_id", "read_meta",
           "run_dir_name", "run_id_of", "write_meta"]

RUN_JSON: Final = "run.json"
#: Hive partition prefix of a run folder.
RUN_PREFIX: Final = "run_id="
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_run_id(run_id: object) -> str:
    """Return ``run_id`` if it is a valid run id.

    Raises:
        ValueError: it does not match ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``.

    >>> check_run_id("triage-7")
    'triage-7'
    >>> check_run_id("../x")
    Traceback (most recent call last):
    ...
    ValueError: run id '../x' must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}
    """
    if type(run_id) is not str or not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} must match {_RUN_ID.pattern}")
    return run_id


def new_run_id(ts_us: int, token: str) -> str:
    """A run id from the creation time and a random token.

    >>> new_run_id(1_796_241_648_000_000, "3f2a9c1b")
    '20261202-200048-3f2a9c1b'
    """
    return f"{datetime.fromtimestamp(ts_us / 1e6, tz=UTC):%Y%m%d-%H%M%S}-{token}"


def iso_time(ts_us: int) -> str:
    """Microseconds since the epoch as ISO-8601 UTC.

    >>> iso_time(1_796_241_648_000_123)
    '2026-12-02T20:00:48.000123Z'
    """
    return datetime.fromtimestamp(ts_us // 1_000_000, tz=UTC).replace(
        microsecond=ts_us % 1_000_000).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def run_dir_name(run_id: str) -> str:
    """The folder name of a run (a Hive partition)."""
    return f"{RUN_PREFIX}{run_id}"


def run_id_of(dir_name: str) -> str | None:
    """The run id of a run folder name, or ``None`` if it is not one."""
    if not dir_name.startswith(RUN_PREFIX):
        return None
    run_id = dir_name[len(RUN_PREFIX):]
    return run_id if _RUN_ID.fullmatch(run_id) else None


def read_meta(run_dir: Path) -> dict[str, Any]:
    """Read and check a run's ``run.json``.

    Raises:
        FileNotFoundError: there is no ``run.json``.
        SchemaVersionError: it was written by a newer agentlog.
        StoreError: it is not a JSON object.
    """
    path = run_dir / RUN_JSON
    text = path.read_bytes()
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise StoreError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise StoreError(f"{path}: not a JSON object")
    check_schema_version(meta.get("schema_version"), path)
    return meta


def encode_meta(meta: dict[str, Any]) -> bytes:
    """The bytes of ``run.json`` (sorted keys, two-space indent, newline at the end)."""
    return (json.dumps(meta, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
            + "\n").encode()


def write_meta(run_dir: Path, meta: dict[str, Any], *, durable: bool = True) -> None:
    """Replace ``run.json`` atomically."""
    write_atomic(run_dir / RUN_JSON, encode_meta(meta), durable=durable)


def initial_meta(*, run_id: str, name: str | None, created_us: int, tags: Any,
                 parent: dict[str, Any] | None, head: str, count: int,
                 settings: dict[str, Any]) -> dict[str, Any]:
    """The ``run.json`` of a new run."""
    return {
        "schema_version": SCHEMA_VERSION, "id": run_id, "name": name,
        "created": iso_time(created_us), "tags": tags, "parent": parent, "head": head,
        "count": count, "status": "open", "closed": None, "writer": settings,
    }
