"""The filesystem seam of the read path: a local folder, or any fsspec URL (``s3://``, ``gs://``,
``memory://``, ...).

The store reads through one small interface (:class:`FileSystem`): list a folder, read a file,
open it for ranged reads, tell a file's identity, and hand pyarrow a filesystem. The local one
calls ``os`` directly (the local path pays nothing for the seam); :class:`RemoteFS` wraps an
fsspec filesystem, whose endpoint and credentials come from the standard environment
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...) or ``storage_options``.

A remote store is read-only for recording: paths in it are pure (``PurePosixPath``, no
I/O methods), so a read that does not go through the seam fails loudly instead of looking at
the local disk.

>>> fs, root = open_url("memory://fsys-doc/store")
>>> fs.remote, str(root), fs.url(root / "runs")
(True, '/fsys-doc/store', 'memory://fsys-doc/store/runs')
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Final, cast

from .._words import with_article

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["LOCAL", "FileSystem", "RemoteFS", "is_url", "open_url"]

_LOCAL_SCHEMES: Final = ("file://", "local://")


def is_url(text: str) -> bool:
    """True for ``scheme://...`` (a ``file://`` URL included).

    >>> is_url("s3://b/p"), is_url("./runs"), is_url("file://runs")
    (True, False, True)
    """
    head, sep, _ = text.partition("://")
    return bool(sep) and head.isidentifier()


class FileSystem:
    """The local filesystem: what the store's read path needs, through ``os`` calls."""

    remote: bool = False
    """True for a store reached over a network (read-only for recording)."""

    def url(self, path: PurePath) -> str:
        """The path as its owner names it (a local path, or ``scheme://...``)."""
        return str(path)

    @property
    def arrow(self) -> pafs.FileSystem | None:
        """The pyarrow filesystem to read paths with (``None``: local paths)."""
        return None

    def read_bytes(self, path: PurePath) -> bytes:
        """The whole file.

        Raises:
            FileNotFoundError: no such file.
        """
        with open(cast(Path, path), "rb") as f:
            return f.read()

    def open(self, path: PurePath) -> IO[bytes]:
        """The file opened for (ranged) binary reads."""
        return open(cast(Path, path), "rb")

    def listdir(self, path: PurePath) -> list[str]:
        """The names in a folder.

        Raises:
            FileNotFoundError: no such folder.
        """
        return os.listdir(path)

    def isdir(self, path: PurePath) -> bool:
        """True if ``path`` is a folder."""
        return os.path.isdir(path)

    def isfile(self, path: PurePath) -> bool:
        """True if ``path`` is a file."""
        return os.path.isfile(path)

    def identity(self, path: PurePath) -> tuple[int, int, int]:
        """What changes when a file is replaced: ``(inode, size, mtime)`` here.

        Raises:
            FileNotFoundError: no such file.
        """
        st = os.stat(path)
        return (st.st_ino, st.st_size, st.st_mtime_ns)


LOCAL: Final = FileSystem()
"""The local filesystem."""


class RemoteFS(FileSystem):
    """A store on any fsspec filesystem (S3, GCS, memory, ...).

    Objects are immutable once written (segments, blobs and packs are never rewritten; a
    ``run.json`` is replaced whole), so a file's identity is its size and ETag (or mtime) as
    the last listing saw them, and a listing costs one request per folder.
    """

    remote = True

    def __init__(self, fs: Any, protocol: str) -> None:
        self.fs = fs
        """The fsspec filesystem."""
        self.protocol = protocol
        """The URL scheme (``s3``, ``memory``, ...)."""
        self._arrow: pafs.FileSystem | None = None
        self._seen: dict[str, tuple[int, int, int]] = {}

    def __repr__(self) -> str:
        return f"<RemoteFS {self.protocol}>"

    def url(self, path: PurePath) -> str:
        return f"{self.protocol}://{str(path).lstrip('/')}"

    @property
    def arrow(self) -> pafs.FileSystem:
        if self._arrow is None:
            from pyarrow.fs import FSSpecHandler, PyFileSystem
            self._arrow = PyFileSystem(FSSpecHandler(self.fs))
        return self._arrow

    def read_bytes(self, path: PurePath) -> bytes:
        return bytes(self.fs.cat_file(str(path)))

    def read_many(self, paths: list[PurePath]) -> dict[str, bytes | Exception]:
        """Several whole files in one concurrent batch (S3: parallel GETs), keyed by path."""
        if not paths:
            return {}
        found = self.fs.cat([str(p) for p in paths], on_error="return")
        if not isinstance(found, dict):  # one path: fsspec returns its bytes
            found = {str(paths[0]): found}
        return {_key(k): v for k, v in found.items()}

    def open(self, path: PurePath) -> IO[bytes]:
        return cast(IO[bytes], self.fs.open(str(path), "rb"))

    def listdir(self, path: PurePath) -> list[str]:
        try:
            entries = self.fs.ls(str(path), detail=True, refresh=True)
        except FileNotFoundError:
            raise
        except NotADirectoryError:
            raise FileNotFoundError(str(path)) from None
        names = []
        for entry in entries:
            name = _key(str(entry["name"]))
            if name.rstrip("/") == str(path).strip("/"):
                continue  # some filesystems list the folder itself
            base = name.rstrip("/").rsplit("/", 1)[-1]
            names.append(base)
            if entry.get("type") == "file":
                self._seen[name] = _ident(entry)
        if not names and not self.fs.isdir(str(path)):
            raise FileNotFoundError(str(path))
        return names

    def find(self, path: PurePath) -> dict[str, dict[str, Any]]:
        """Every file under ``path`` (one recursive listing), keyed by path, with its info."""
        found: dict[str, dict[str, Any]] = {}
        self._forget(path)  # another machine may have pushed since
        try:
            listed = self.fs.find(str(path), detail=True)
        except FileNotFoundError:
            return found
        for name, entry in listed.items():
            if entry.get("type", "file") == "file":
                key = _key(name)
                found[key] = entry
                self._seen[key] = _ident(entry)
        return found

    def isdir(self, path: PurePath) -> bool:
        return bool(self.fs.isdir(str(path)))

    def isfile(self, path: PurePath) -> bool:
        if self.fs.isfile(str(path)):
            return True  # objects here are never removed, so a yes stays true
        self._forget(path.parent)  # a no may come from an old listing of the folder: ask again
        return bool(self.fs.isfile(str(path)))

    def _forget(self, path: PurePath) -> None:
        """Drop fsspec's listings of ``path``, its parents and every folder under it.

        ``invalidate_cache`` drops a folder and its parents only, and a recursive listing does
        not replace the listings it already holds of the folders below; so a folder listed once
        (``blobs/sha256/ab``) would hide what another machine put there since."""
        self.fs.invalidate_cache(str(path))
        cache = getattr(self.fs, "dircache", None)
        if cache is not None:
            root = _key(str(path)).rstrip("/")
            for key in [k for k in list(cache) if _key(k).startswith(root + "/")]:
                cache.pop(key, None)

    def identity(self, path: PurePath) -> tuple[int, int, int]:
        key = _key(str(path))
        hit = self._seen.get(key)
        if hit is None:
            hit = self._seen[key] = _ident(self.fs.info(key))
        return hit


def _key(name: str) -> str:
    """A path as fsspec names it, without the leading ``/`` some filesystems add."""
    return name.lstrip("/")


def _ident(entry: dict[str, Any]) -> tuple[int, int, int]:
    tag = entry.get("ETag") or entry.get("etag") or entry.get("mtime") or entry.get("LastModified") or ""
    return (0, int(entry.get("size") or 0), hash(str(tag)))


def open_url(url: str, storage_options: dict[str, Any] | None = None) -> tuple[FileSystem, PurePath]:
    """The filesystem and root path of a store URL.

    A path, and ``file://`` URLs, are the local filesystem; any other scheme goes through
    fsspec (``s3://`` needs ``pip install 'agentlog[s3]'``).

    Raises:
        ValueError: the scheme is unknown to fsspec or its package is not installed.
    """
    if not is_url(url):
        return LOCAL, Path(os.path.abspath(os.path.expanduser(url)))
    for scheme in _LOCAL_SCHEMES:
        if url.startswith(scheme):
            return LOCAL, Path(os.path.abspath(os.path.expanduser(url[len(scheme):])))
    try:
        import fsspec
    except ImportError:  # pragma: no cover - fsspec comes with the s3/fleet extras
        raise ValueError(f"{url}: remote stores need fsspec: pip install 'agentlog[s3]'") from None
    protocol = url.split("://", 1)[0]
    try:
        fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise ValueError(f"{url}: cannot open {with_article(protocol + '://')} store ({exc}); for S3: "
                         "pip install 'agentlog[s3]'") from None
    root = str(root).rstrip("/")
    path = PurePosixPath(root if root.startswith("/") or protocol != "memory" else "/" + root)
    return RemoteFS(fs, protocol), path
