"""Clean the temp files a dead writer left, never one a live writer holds.

A writer killed in the middle of a write leaves a temp file (``.<name>.tmp-<pid>-<hex>``):
a half-written segment, a new WAL not yet renamed, a blob, a ``run.json``, or a whole run
folder being created. Locks tell the dead from the live, since a lock dies with its holder:

- **in a run folder**, only the holder of the run's lock writes, so whoever holds that lock
  (a writer opening the run, or a sweep that takes it for a moment) may delete every temp
  file there;
- **in the shared blob folders**, each temp file is itself ``flock``-ed by its writer from
  creation to rename (:func:`agentlog.store._fs.open_temp`), so a file whose lock can be
  taken has no live writer;
- **a run folder being created** holds its run's lock inside it; one whose lock is free and
  that is older than :data:`CREATING_GRACE_S` (creation takes milliseconds) was abandoned.

Opening a writer cleans its run folder. The first writer a process opens on a store also
sweeps the rest of the store (other runs' folders whose lock is free, creation folders,
blob temp files), once per process and store: a store opened only to read is never
written to. ``store.gc()`` still removes stale temp files by age.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..errors import RunLockedError
from ._fs import is_temp_name
from .lock import LOCK_NAME, RunLock
from .meta import CHECKPOINTS, run_id_of

if TYPE_CHECKING:
    from .store import Store

__all__ = ["CREATING_GRACE_S", "clean_run_dir", "remove_if_dead", "sweep_once", "sweep_store"]

#: A run folder being created is left alone this long even if its lock is free: its creator
#: makes the folder an instant before it takes the lock inside it.
CREATING_GRACE_S: Final = 10.0

_swept: set[str] = set()
_swept_lock = threading.Lock()


def clean_run_dir(run_dir: Path) -> list[Path]:
    """Delete every temp file in a run folder. The caller holds the run's lock.

    Its ``checkpoints/`` folder is cleaned too, of dead writers' files only: checkpoints are
    also built without the run's lock (``agentlog checkpoint``), so there a temp file goes
    only when no live writer holds its ``flock``.

    Returns:
        The paths deleted.
    """
    removed = _dead_checkpoint_temps(run_dir)
    for path in _temp_entries(run_dir):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def remove_if_dead(path: Path) -> bool:
    """Delete a temp file if no live writer holds its ``flock``; True if it was deleted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its writer is alive
        try:
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                return False  # renamed into place meanwhile; the name is someone else's
        except FileNotFoundError:
            return False
        path.unlink()
        return True
    finally:
        os.close(fd)


def sweep_store(store: Store, *, skip: Path | None = None) -> list[Path]:
    """Delete the temp files dead writers left anywhere in the store.

    Args:
        store: the store.
        skip: a run folder not to touch (the caller's own, already cleaned under its lock).

    Returns:
        The paths deleted.
    """
    removed: list[Path] = []
    for name in _names(store.runs_path):
        path = store.runs_path / name
        if is_temp_name(name):
            if _abandoned_creation(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
            continue
        run_id = run_id_of(name)
        if run_id is None or path == skip:
            continue
        removed.extend(_dead_checkpoint_temps(path))
        if not any(is_temp_name(n) for n in _names(path)):
            continue
        try:
            lock = RunLock.acquire(path, run_id)
        except (RunLockedError, OSError):
            continue  # a live writer: its temp files are its own
        try:
            removed.extend(clean_run_dir(path))
        finally:
            lock.release()
    base = store.blobs.root / "sha256"
    for prefix in _names(base):
        folder = base / prefix
        removed.extend(p for p in _temp_entries(folder) if remove_if_dead(p))
    return removed


def sweep_once(store: Store, *, skip: Path | None = None) -> list[Path]:
    """:func:`sweep_store`, the first time this process writes to this store; else nothing."""
    key = str(store.path)
    with _swept_lock:
        if key in _swept:
            return []
        _swept.add(key)
    return sweep_store(store, skip=skip)


def _abandoned_creation(folder: Path) -> bool:
    try:
        if time.time() - folder.stat().st_mtime < CREATING_GRACE_S:
            return False
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False  # no lock yet: its creator may be about to take it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _dead_checkpoint_temps(run_dir: Path) -> list[Path]:
    """Remove the temp files in a run's ``checkpoints/`` whose writer is dead."""
    return [p for p in _temp_entries(run_dir / CHECKPOINTS) if remove_if_dead(p)]


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _temp_entries(folder: Path) -> list[Path]:
    return [folder / n for n in _names(folder) if is_temp_name(n)]
