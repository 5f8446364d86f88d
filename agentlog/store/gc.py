"""Garbage collection: blobs no run references, and temp files a crash left behind.

References are found in every run's segments (payload column only) and WAL files (torn ones
included, to be safe) by the blob-reference pattern, without parsing payloads. A fork's
prefix lives in its parent's files, which are scanned like any run's, so a blob referenced
only through a parent prefix is kept. ``gc`` deletes blobs and temp files, never runs.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptSegmentError
from ._fs import is_temp_name
from .segments import parse_segment_name
from .wal import WAL_NAME

if TYPE_CHECKING:
    from .store import Store

__all__ = ["GCReport", "collect_garbage"]

_REF_TEXT = re.compile(r'\{"\$blob":"(sha256:[0-9a-f]{64})"')
_REF_BYTES = re.compile(rb'\{"\$blob":"(sha256:[0-9a-f]{64})"')


@dataclass(frozen=True, slots=True, kw_only=True)
class GCReport:
    """What ``store.gc()`` found, and whether it deleted it.

    >>> print(GCReport(applied=False, blobs=2, bytes=2048, digests=(), referenced=5,
    ...                kept_recent=0, temp_files=1, temp_bytes=10))
    gc (dry run): 2 unreferenced blobs (2,048 bytes), 1 stale temp files (10 bytes); 5 blobs referenced
    """

    applied: bool
    """True if the files were deleted; False for a dry run."""
    blobs: int
    """Unreferenced blobs found (deleted if ``applied``)."""
    bytes: int
    """Their total size."""
    digests: tuple[str, ...]
    """Their digests, sorted."""
    referenced: int
    """Distinct blobs the runs reference."""
    kept_recent: int
    """Unreferenced blobs kept because they are younger than ``min_age``."""
    temp_files: int
    """Stale temp files (and temp run folders) found."""
    temp_bytes: int
    """Their total size."""

    def __str__(self) -> str:
        mode = "applied" if self.applied else "dry run"
        return (f"gc ({mode}): {self.blobs:,} unreferenced blobs ({self.bytes:,} bytes), "
                f"{self.temp_files:,} stale temp files ({self.temp_bytes:,} bytes); "
                f"{self.referenced:,} blobs referenced")


def referenced_blobs(store: Store) -> set[str]:
    """Every digest some run's files reference.

    Raises:
        CorruptSegmentError: a segment cannot be read, so what it references is unknown.
    """
    import pyarrow.compute as pc  # here, not at import: opening a store should not pay for it

    found: set[str] = set()
    for _, run_dir in store._run_dirs():
        for name in os.listdir(run_dir):
            path = run_dir / name
            if parse_segment_name(name) is not None:
                try:
                    payload = pq.read_table(path, columns=["payload"]).column("payload")
                    texts = payload.filter(pc.match_substring(payload, '"$blob"')).to_pylist()
                except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: not UTF-8
                    raise CorruptSegmentError(str(path), f"cannot read it to find its blob "
                                                         f"references ({exc})") from None
                for text in texts:
                    found.update(_REF_TEXT.findall(text))
            elif name == WAL_NAME or name.startswith("wal.torn-"):
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue  # sealed and removed meanwhile; its segment was listed or will be
                found.update(m.decode() for m in _REF_BYTES.findall(data))
    return found


def collect_garbage(store: Store, *, apply: bool, min_age: float) -> GCReport:
    """Find, and with ``apply`` delete, unreferenced blobs and stale temp files."""
    now = time.time()
    referenced = referenced_blobs(store)
    garbage: list[str] = []
    size = recent = 0
    for digest in store.blobs:
        if digest in referenced:
            continue
        path = store.blobs.path(digest)
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        if now - st.st_mtime < min_age:
            recent += 1
            continue
        garbage.append(digest)
        size += st.st_size
        if apply:
            path.unlink(missing_ok=True)

    temp_files = temp_bytes = 0
    for path in _temp_paths(store):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        if now - st.st_mtime < min_age:
            continue
        temp_files += 1
        temp_bytes += _size(path)
        if apply:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    return GCReport(applied=apply, blobs=len(garbage), bytes=size, digests=tuple(sorted(garbage)),
                    referenced=len(referenced), kept_recent=recent, temp_files=temp_files,
                    temp_bytes=temp_bytes)


def _temp_paths(store: Store) -> list[Path]:
    paths: list[Path] = []
    for folder in [store.runs_path, *(d for _, d in store._run_dirs())]:
        try:
            paths.extend(folder / n for n in os.listdir(folder) if is_temp_name(n))
        except FileNotFoundError:
            continue
    base = store.blobs.root / "sha256"
    try:
        prefixes = os.listdir(base)
    except FileNotFoundError:
        prefixes = []
    for prefix in prefixes:
        folder = base / prefix
        if folder.is_dir():
            paths.extend(folder / n for n in os.listdir(folder) if is_temp_name(n))
    return paths


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size
