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

from ..errors import RunDamagedError, SchemaVersionError
from ._fs import write_atomic
from .fsys import LOCAL, FileSystem
from .segments import SCHEMA_VERSION, check_schema_version

__all__ = ["CHECKPOINTS", "RUN_JSON", "RUN_PREFIX", "check_meta", "check_run_id", "iso_time", "new_run_id",
           "parse_meta", "read_meta", "run_dir_name", "run_id_of", "write_meta"]

RUN_JSON: Final = "run.json"
CHECKPOINTS: Final = "checkpoints"
"""The folder of a run's checkpoints, inside the run's folder (:mod:`.checkpoints`)."""
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


def read_meta(run_dir: Path, fs: FileSystem = LOCAL) -> dict[str, Any]:
    """Read and check a run's ``run.json`` (see :func:`check_meta`).

    Raises:
        RunDamagedError: there is no ``run.json``, or it is not JSON, or a field has the wrong
            type (the message names the field; ``agentlog repair`` rebuilds it).
        SchemaVersionError: it was written by a newer agentlog.
    """
    path = run_dir / RUN_JSON
    run_id = run_id_of(run_dir.name) or run_dir.name
    try:
        text = fs.read_bytes(path)
    except FileNotFoundError:
        raise RunDamagedError(run_id, str(path), "there is no run.json") from None
    except OSError as exc:
        raise RunDamagedError(run_id, str(path), f"cannot be read ({exc.strerror or exc})") from None
    return parse_meta(text, path, run_id)


def parse_meta(text: bytes, path: Path, run_id: str) -> dict[str, Any]:
    """Parse and check the bytes of a ``run.json`` (see :func:`read_meta`)."""
    try:
        meta = json.loads(text)
    except ValueError as exc:  # UnicodeDecodeError included
        raise RunDamagedError(run_id, str(path), f"not valid JSON ({exc})") from None
    check_meta(meta, path, run_id)
    return meta  # type: ignore[no-any-return]


_HEX64 = re.compile(r"[0-9a-f]{64}")


def check_meta(meta: Any, path: str | Path, run_id: str) -> None:
    """Check the shape of a parsed ``run.json``: every field agentlog reads has its type.

    Fields may be missing (older runs, a repaired run) but never of the wrong type, so no
    reader meets a ``TypeError`` later. Unknown fields are kept and ignored.

    Raises:
        RunDamagedError: naming the field and what is wrong with it.
        SchemaVersionError: ``schema_version`` is newer than this agentlog reads.

    >>> check_meta({"schema_version": 1, "parent": {"run_id": "a", "seq": "7", "hash": "0" * 64}},
    ...            "run.json", "r")
    Traceback (most recent call last):
    ...
    agentlog.errors.RunDamagedError: run 'r' is damaged: run.json: field parent.seq: must be an int >= -1, got '7'; agentlog repair r rebuilds its run.json from its events
    """
    def bad(field: str, problem: str, value: Any) -> RunDamagedError:
        return RunDamagedError(run_id, str(path), f"field {field}: {problem}, got {_short(value)}")

    if not isinstance(meta, dict):
        raise RunDamagedError(run_id, str(path), f"not a JSON object, got {type(meta).__name__}")
    try:
        check_schema_version(meta.get("schema_version"), path)
    except SchemaVersionError:
        if not _is_int(meta.get("schema_version")):
            raise bad("schema_version", "must be an int", meta.get("schema_version")) from None
        raise
    for field in ("id", "status"):
        if field in meta and not isinstance(meta[field], str):
            raise bad(field, "must be a string", meta[field])
    for field in ("name", "created", "closed"):
        if meta.get(field) is not None and not isinstance(meta[field], str):
            raise bad(field, "must be a string or null", meta[field])
    for field in ("created", "closed"):
        if meta.get(field) and not _is_iso(meta[field]):
            raise bad(field, "must be an ISO-8601 time", meta[field])
    if "head" in meta and not (isinstance(meta["head"], str) and _HEX64.fullmatch(meta["head"])):
        raise bad("head", "must be 64 lower-case hex digits", meta["head"])
    if "count" in meta and not (_is_int(meta["count"]) and meta["count"] >= 0):
        raise bad("count", "must be an int >= 0", meta["count"])
    parent = meta.get("parent")
    if parent is not None:
        if not isinstance(parent, dict):
            raise bad("parent", "must be an object or null", parent)
        if not (isinstance(parent.get("run_id"), str) and _RUN_ID.fullmatch(parent["run_id"])):
            raise bad("parent.run_id", "must be a run id", parent.get("run_id"))
        if not (_is_int(parent.get("seq")) and parent["seq"] >= -1):
            raise bad("parent.seq", "must be an int >= -1", parent.get("seq"))
        if not (isinstance(parent.get("hash"), str) and _HEX64.fullmatch(parent["hash"])):
            raise bad("parent.hash", "must be 64 lower-case hex digits", parent.get("hash"))
    writer = meta.get("writer")
    if writer is not None:
        if not isinstance(writer, dict):
            raise bad("writer", "must be an object or null", writer)
        for field in ("segment_events", "blob_threshold"):
            value = writer.get(field)
            if value is not None and not (_is_int(value) and value >= 1):
                raise bad(f"writer.{field}", "must be a positive int", value)
        redact = writer.get("redact")
        if redact is not None and not (isinstance(redact, list) and all(isinstance(r, str) for r in redact)):
            raise bad("writer.redact", "must be a list of strings", redact)


def _is_int(value: Any) -> bool:
    return type(value) is int


_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?")


def _is_iso(text: str) -> bool:
    """A full ISO-8601 date and time (what agentlog writes, and pandas reads), in range."""
    if not _ISO.fullmatch(text):
        return False
    try:
        datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return False
    return True


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
