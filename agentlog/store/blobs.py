"""Content-addressed blobs: ``<store>/blobs/sha256/<2 hex>/<62 hex>``, raw bytes.

A blob is written once under the SHA-256 of its bytes and shared by every event and run
that references it, so twenty references to one page cost one copy. Writing goes through a
temp file in the same folder, fsync and ``os.replace``, so several processes may write the
same blob at once and readers never see half a blob. Reading checks the hash.

The 256 ``<2 hex>`` folders are made together, the first time a blob is written into a store
that lacks one of them: one ``mkdir`` per folder as blobs came made most of the first few
hundred blobs of a new store pay one (130–800 µs of CPU each on the machine of
``docs/benchmarks.md``). A :class:`BlobStore` lists ``sha256/`` once, then checks no folder
per blob; a folder removed later (by hand) is made again when a blob needs it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ..errors import BlobIntegrityError, BlobNotFoundError, ReadOnlyStoreError
from ..events import BlobRef
from ._fs import fsync_dir, is_temp_name, write_new
from .fsys import LOCAL, FileSystem, RemoteFS

__all__ = ["BYTES_MEDIA_TYPE", "TEXT_MEDIA_TYPE", "BlobStore"]

#: The media type of ``bytes`` stored without one.
BYTES_MEDIA_TYPE: Final = "application/octet-stream"
#: The media type of ``str`` stored without one.
TEXT_MEDIA_TYPE: Final = "text/plain; charset=utf-8"
_CHUNK = 1 << 20
_HEXDIGITS = frozenset("0123456789abcdef")
_PREFIXES: Final = tuple(f"{i:02x}" for i in range(256))


class BlobStore:
    """The blob folder of a store.

    Args:
        root: the ``blobs`` folder (created on the first ``put``).

    >>> import tempfile, pathlib
    >>> blobs = BlobStore(pathlib.Path(tempfile.mkdtemp()) / "blobs")
    >>> ref = blobs.put("hello")
    >>> ref.digest[:15], ref.size, ref.media_type, ref.text()
    ('sha256:2cf24dba', 5, 'text/plain; charset=utf-8', 'hello')
    """

    def __init__(self, root: Path, fs: FileSystem = LOCAL) -> None:
        self.root = root if fs.remote else Path(root)
        self.fs = fs
        """Where the blobs are read from (see :mod:`.fsys`)."""
        self._base = f"{self.root}/sha256/"  # + <2 hex>/<62 hex>: a blob's file name
        self._fanout = False  # True once this process saw (or made) all 256 <2 hex> folders
        self._parents_synced = False  # sha256/, blobs/ and the store's names fsynced by this process

    def __repr__(self) -> str:
        return f"<BlobStore {self.root}>"

    def path(self, digest: str) -> Path:
        """The file of a digest (which may not exist).

        Raises:
            InvalidBlobRefError: ``digest`` is not ``sha256:`` + 64 lower-case hex, so no
                name outside the blob folder (``sha256:../../x``) can ever be formed.
        """
        return self._file(BlobRef(digest, 0).hex)  # validates

    def _file(self, hex: str) -> Path:
        """The file of 64 hex digits already checked (a digest computed here, a BlobRef's)."""
        return self.root / "sha256" / hex[:2] / hex[2:]

    def exists(self, digest: str) -> bool:
        """True if the blob is stored."""
        return self.fs.isfile(self.path(digest))

    def put(self, data: bytes | str, media_type: str | None = None, *,
            durable: bool = True) -> BlobRef:
        """Store bytes (or text, as UTF-8) and return their reference.

        Idempotent: a blob already stored is not written again (its mtime is refreshed, so
        a concurrent ``gc`` with a grace period keeps it).

        Args:
            data: the content.
            media_type: what it is; defaults to ``text/plain; charset=utf-8`` for ``str``
                and ``application/octet-stream`` for ``bytes``.
            durable: fsync the file and its folder before returning.
        """
        if isinstance(data, str):
            raw = data.encode("utf-8")
            media_type = media_type or TEXT_MEDIA_TYPE
        else:
            raw = bytes(data)
            media_type = media_type or BYTES_MEDIA_TYPE
        ref = BlobRef.of(raw, media_type, self.read)
        self._write(ref.hex, raw, durable)
        return ref

    def write(self, digest: str, raw: bytes, *, durable: bool = True) -> None:
        """Store ``raw`` under ``digest``, which the caller has computed from ``raw``."""
        self._write(BlobRef(digest, 0).hex, raw, durable)

    def _write(self, hex: str, raw: bytes, durable: bool) -> None:
        if self.fs.remote:
            raise ReadOnlyStoreError(str(self.root), "store a blob")
        final = f"{self._base}{hex[:2]}/{hex[2:]}"
        try:
            os.utime(final)
            return  # already stored
        except FileNotFoundError:
            pass
        if not self._fanout:
            self._make_folders(durable)
        try:
            # Several writers of one blob all write the same bytes; the first file stays.
            write_new(final, raw, durable=durable)
        except FileNotFoundError:  # its folder was removed since this process made or saw it
            self._make_folders(durable)
            write_new(final, raw, durable=durable)

    def _make_folders(self, durable: bool) -> None:
        """Make the ``sha256/<2 hex>`` folders that are not there (all 256, in a new store).

        With ``durable``, the new names are fsynced: ``sha256/`` once for all the folders made
        (and, the first time this process makes any, ``blobs/`` and the store's folder too,
        which may be new as well)."""
        base = self.root / "sha256"
        try:
            present = set(os.listdir(base))
        except FileNotFoundError:  # a new store, or its blob folder was removed
            base.mkdir(parents=True, exist_ok=True)
            present = set()
            self._parents_synced = False  # sha256/ (maybe blobs/) is a new name again
        made = False
        for prefix in _PREFIXES:
            if prefix not in present:
                try:
                    os.mkdir(base / prefix)
                    made = True
                except FileExistsError:  # another process made it just now
                    pass
        if made and durable:  # the new folders' names must survive too
            for parent in (base,) if self._parents_synced else (base, self.root, self.root.parent):
                fsync_dir(parent)
            self._parents_synced = True
        self._fanout = True

    def read(self, digest: str) -> bytes:
        """The bytes of a blob, checked against its digest.

        Raises:
            BlobNotFoundError: the blob is not stored.
            BlobIntegrityError: the bytes do not hash to the digest.
            InvalidBlobRefError: ``digest`` is malformed.
        """
        path = self.path(digest)
        try:
            data = self.fs.read_bytes(path)
        except FileNotFoundError:
            raise BlobNotFoundError(digest, str(path)) from None
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest[7:]:
            raise BlobIntegrityError(digest, actual, str(path))
        return data

    def hash_file(self, digest: str) -> str:
        """The SHA-256 (hex) of a stored blob's bytes, read in chunks.

        Raises:
            BlobNotFoundError: the blob is not stored.
        """
        path = self.path(digest)
        h = hashlib.sha256()
        try:
            with self.fs.open(path) as f:
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
        except FileNotFoundError:
            raise BlobNotFoundError(digest, str(path)) from None
        return h.hexdigest()

    def __iter__(self) -> Iterator[str]:
        """The digests of the stored blobs (in no particular order)."""
        base = self.root / "sha256"
        if self.fs.remote:
            yield from self._remote_digests(base)
            return
        try:
            prefixes = os.scandir(base)
        except FileNotFoundError:
            return
        with prefixes:
            for prefix in prefixes:
                if len(prefix.name) != 2 or not prefix.is_dir():
                    continue
                with os.scandir(prefix.path) as entries:
                    for entry in entries:
                        name = entry.name
                        if len(name) == 62 and _HEXDIGITS.issuperset(name) and not is_temp_name(name):
                            yield f"sha256:{prefix.name}{name}"

    def _remote_digests(self, base: Path) -> Iterator[str]:
        fs = self.fs
        assert isinstance(fs, RemoteFS)
        for name in fs.find(base):
            prefix, _, rest = name.rpartition("/")
            prefix = prefix.rsplit("/", 1)[-1]
            if len(prefix) == 2 and len(rest) == 62 and _HEXDIGITS.issuperset(rest):
                yield f"sha256:{prefix}{rest}"
