"""Small file-system helpers: fsync a directory, write a file atomically, name temp files.

Every temp file the store makes starts with ``.`` and contains ``.tmp-``, so that readers of
the Hive dataset skip it (pyarrow ignores names starting with ``.``) and ``gc`` can find
the ones a crash left behind. A file whose bytes its name fixes (a blob) is written with no
temp name where Linux allows it (:func:`write_new`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
from pathlib import Path

__all__ = ["fsync_dir", "fsync_path", "is_temp_name", "open_temp", "temp_name", "write_atomic", "write_new"]

_TEMP_MARK = ".tmp-"


def temp_name(name: str) -> str:
    """A unique hidden temp name next to ``name`` (pid and random, so processes never clash).

    >>> n = temp_name("run.json"); n.startswith(".run.json.tmp-") and is_temp_name(n)
    True
    """
    return f".{name}{_TEMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"


def is_temp_name(name: str) -> bool:
    """True for names made by :func:`temp_name`."""
    return name.startswith(".") and _TEMP_MARK in name


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory, so that a rename or a new entry in it survives a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file by name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_temp(path: Path) -> tuple[int, Path]:
    """Create a temp file beside ``path``, held under an exclusive ``flock`` while open.

    The lock is how a sweep tells a live writer's temp file from a dead one's (a lock goes
    away with its holder): :func:`agentlog.store.tmp.remove_if_dead` removes only unlocked
    ones. A sweep could take the lock in the instant between our create and our lock; the
    name then no longer points at our file, and we take another name.

    Returns:
        ``(fd, temp path)``; close the fd after the rename.
    """
    while True:
        tmp = path.with_name(temp_name(path.name))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits only while a sweep holds it
            same = os.stat(tmp).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            return fd, tmp
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old or the new file, never half.

    Temp file in the same directory (locked, see :func:`open_temp`) → fsync → rename →
    fsync the directory.

    Args:
        path: the file to write.
        data: its new content.
        durable: fsync the file and the directory (skip only for ``durability="none"``).
    """
    fd, tmp = open_temp(path)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)  # after the rename: until then the lock says the temp file is live
    if durable:
        fsync_dir(path.parent)


_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
_unnamed = [_O_TMPFILE != 0]  # False once this system refused an unnamed file: write_atomic from then on
_NOT_HERE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)


def write_new(path: str, data: bytes, *, durable: bool = True) -> None:
    """Create the file ``path`` with ``data``, seen whole or not at all, for a file whose bytes
    its name fixes (a blob: every writer of that name writes the same bytes, and the first
    one's file stays).

    On Linux the bytes go into an unnamed file in the folder (``O_TMPFILE``), linked in under
    its name once complete: half the system calls of :func:`write_atomic`, and a crash leaves
    nothing behind. Where that is not supported, :func:`write_atomic`.

    Raises:
        FileNotFoundError: the folder does not exist.
    """
    if _unnamed[0]:
        folder = os.path.dirname(path)
        try:
            fd = os.open(folder, os.O_WRONLY | _O_TMPFILE, 0o644)
        except OSError as exc:
            if exc.errno not in _NOT_HERE:
                raise
            _unnamed[0] = False  # this file system, or kernel, has no unnamed files
        else:
            try:
                linked = _link_unnamed(fd, data, path, durable)
            finally:
                os.close(fd)
            if linked:
                if durable:
                    fsync_dir(folder)
                return
    write_atomic(Path(path), data, durable=durable)


def _link_unnamed(fd: int, data: bytes, path: str, durable: bool) -> bool:
    """Write ``data`` into the unnamed file ``fd`` and link it in as ``path``; ``False`` when
    the system cannot link it (no ``/proc``)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    if durable:
        os.fsync(fd)
    try:
        # linkat(AT_SYMLINK_FOLLOW) of the file's /proc entry (the path is absolute, so
        # src_dir_fd is not used: passing one is what makes os.link call linkat)
        os.link(f"/proc/self/fd/{fd}", path, src_dir_fd=fd)
    except FileExistsError:
        pass  # another writer stored the same bytes first
    except FileNotFoundError:
        if not os.path.isdir(os.path.dirname(path)):
            raise
        _unnamed[0] = False  # no /proc here
        return False
    return True
