"""One writer per run: an exclusive ``flock`` on ``runs/run_id=<id>/.lock``.

``flock`` locks belong to an open file description, so a second writer is refused whether it
is in another process or in this one, and the lock goes away when its holder dies.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Final

from ..errors import RunLockedError

__all__ = ["LOCK_NAME", "RunLock", "writer_is_live"]

LOCK_NAME: Final = ".lock"
# A reader probing the lock (writer_is_live) holds it for microseconds; a writer that meets
# such a probe tries again briefly instead of reporting a writer that is not there.
_RETRIES, _RETRY_S = 5, 0.002


class RunLock:
    """The held lock of one run; release it with :meth:`release`."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd, self.path = fd, path

    @classmethod
    def acquire(cls, run_dir: Path, run_id: str) -> RunLock:
        """Take the run's lock without waiting.

        Raises:
            RunLockedError: another writer (in any process) holds it.
        """
        path = run_dir / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        for attempt in range(_RETRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return cls(fd, path)
            except BlockingIOError:
                if attempt + 1 < _RETRIES:
                    time.sleep(_RETRY_S)
            except BaseException:
                os.close(fd)
                raise
        os.close(fd)
        raise RunLockedError(run_id, str(path))

    @property
    def held(self) -> bool:
        """True until released."""
        return self._fd >= 0

    def release(self) -> None:
        """Let the next writer in (idempotent)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def writer_is_live(run_dir: Path) -> bool:
    """True if some writer holds the run's lock right now.

    A shared, non-blocking probe; creates nothing (a run without ``.lock`` has no writer).
    """
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock if we took it
    return False
