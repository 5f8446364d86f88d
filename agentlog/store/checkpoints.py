"""Fold checkpoints: a run's states stored as content-addressed nodes, shared between checkpoints.

A *checkpoint* is the state after event ``seq`` folded with one reducer set, written so that a
fresh process can start from it instead of from event 0. It is derived data: it names the seq,
the run's chain hash at that seq and the reducers' fingerprint, is checked against all three
before use, is ignored when any differs, and deleting every checkpoint loses nothing.

On disk, in ``runs/run_id=<id>/checkpoints/``::

    nodes-<seq>-<fingerprint[:16]>.pack   the nodes this checkpoint added, zstd blocks
    ckpt-<seq>-<fingerprint[:16]>.json    the manifest: seq, hash, reducers, root, packs

Each node of the state (:mod:`agentlog.folding.encode`) is stored once, under its SHA-256: a
checkpoint writes only the nodes no earlier checkpoint of the run (or of its parent) holds, so
consecutive checkpoints share every unchanged node on disk and one costs what changed. A pack
is written (temp file, fsync, rename) before the manifest that names it, so a crash leaves at
most an unreferenced pack, never a manifest that points at half a file. Every node is checked
against its digest (SHA-256) when it is read; the digests are what detects a changed byte. A
manifest records the SHA-256 of the pack it wrote, and the size of every other pack its nodes
are in (format 1 repeated every pack's SHA-256 in every manifest: quadratic in the number of
checkpoints, 7 % of the checkpoint bytes of a 1M-event run); a pack's hash, used only to say
why a node failed, is in the manifest that wrote it.

A checkpoint is read lazily: the root first, and each node when the fold or the user looks
inside it, so the first ``state_at(n)`` in a new process costs the events between the nearest
checkpoint and ``n``, plus the nodes those events touch.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, NoReturn

from ..errors import CheckpointError, CheckpointWarning
from ..events import BlobRef
from ..folding.encode import INLINE, encode, fill, make_shell, referenced
from ..folding.persistent import PMap
from ._fs import fsync_dir, open_temp, write_atomic
from .fsys import LOCAL, FileSystem
from .meta import CHECKPOINTS

if TYPE_CHECKING:
    from ..folding import Reducers
    from .run import Run

__all__ = ["CHECKPOINTS", "CLOSE_MIN", "EVERY", "FORMAT", "Checkpoint", "CheckpointWriter", "Named", "NodeReader",
           "build_checkpoints", "list_checkpoints", "load_checkpoint", "named_checkpoints", "nearest_checkpoint"]

FORMAT: Final = 2
"""The checkpoint format this agentlog writes and reads. Checkpoints of another format are
derived data like any other: ignored (folded from the log) and replaced when built again."""
BLOCK: Final = 64 * 1024
"""Node records are compressed in blocks of about this many bytes."""
LEVEL: Final = 16
"""The zstd level of a pack's blocks. Most of a checkpoint is new content (leaves of JSON text),
where zstd's optimal parsers (levels 13 and up) pay: on the 1M-event *mixed* workload of
``bench/fold.py`` level 16 makes packs 15.7 % smaller than level 1, for 140-175 ms of
compression per checkpoint (700 KB of node records) instead of 2 ms; levels 2-12 were no
smaller than 1 and 17-19 no smaller than 16. Any level reads back the same: readers need no
format change, and a higher level decompresses faster."""
CACHE_BYTES: Final = 2**20
"""Decompressed blocks a reader keeps (least recently used first out). A node is decoded once
and then lives in the state that holds it; the cache only saves decompressing a block again
for the next few nodes the fold reads from it, so sixteen blocks do. A large cache holds the
checkpoints' bytes beside the nodes made of them: 4 MiB of blocks was most of what a run held
after 50 random ``state_at`` on the 1M-event *simple* run of ``bench/fresh.py`` (2.2x its final
state; 1 MiB: 1.35x, no slower), and 64 MiB before that."""
EVERY: Final = 12_288
"""Events between the checkpoints a recording writes (besides one at each seal), and the
default of ``agentlog checkpoint``: the first ``state_at(n)`` in a new process folds at most
this many events. Chosen by cost: the 1M-event *mixed* workload of ``bench/fold.py`` folds
a cold tail at ~20 µs an event (CPU) and a checkpoint costs ~30 KB besides what changed, so
12,288 keeps its checkpoints at 14.4 % of the segments' bytes and a fresh ``state_at`` at
136 / 269 ms CPU median / p99 (16,384: 13.5 %, and a third more tail to fold; 10,240: an
estimated 15.2 %). ``bench/fresh.py`` measures both; ``docs/benchmarks.md`` has the figures."""
CLOSE_MIN: Final = 10_000
"""A recorded run is checkpointed when it closes only if it has this many events (smaller
runs fold in milliseconds); it is checkpointed at every seal whatever its size."""

_MAGIC = b"AGENTLOG-NODES 1\n"
_TAIL = b"ALNP"
_NAME = re.compile(r"ckpt-(\d{12})-([0-9a-f]{16})\.json")


def _rel(store_path: Path, path: Path) -> str:
    return path.relative_to(store_path).as_posix()


class Loc:
    """Where a node's record is: a pack (path relative to the store), a block, a slice of it."""

    __slots__ = ("block", "length", "offset", "pack", "reader", "size")

    def __init__(self, reader: NodeReader, pack: str, block: int, offset: int, length: int,
                 size: int) -> None:
        self.reader, self.pack, self.block = reader, pack, block
        self.offset, self.length, self.size = offset, length, size

    def load(self, node: Any) -> None:
        """Fill ``node`` from this record (checked against the node's digest)."""
        self.reader.fill(self, node)

    def code(self, packs: dict[str, int]) -> list[int]:
        """``[pack index, block, offset, length, size]``, the pack numbered in ``packs``."""
        index = packs.setdefault(self.pack, len(packs))
        return [index, self.block, self.offset, self.length, self.size]


class NodeReader:
    """Reads the checkpoint nodes of one store: verified packs, a cache of blocks, one node
    object per digest alive (so two checkpoints loaded in one process share their nodes in
    memory as they do on disk).

    Args:
        root: the store's folder.
        blobs: reads a blob by digest (for blob references inside a state).
    """

    def __init__(self, root: Path, blobs: Callable[[str], bytes] | None, fs: FileSystem = LOCAL) -> None:
        self.root = root
        self.fs = fs
        self._blobs = blobs
        self._lock = threading.RLock()
        self._packs: dict[str, tuple[str | None, int]] = {}  # named by a manifest: path -> (sha256, size)
        self._bad: dict[str, str] = {}                  # path -> why it failed
        self._tables: dict[str, list[tuple[int, int, int]]] = {}  # opened: path -> block table
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._cached = 0
        self._nodes: weakref.WeakValueDictionary[bytes, Any] = weakref.WeakValueDictionary()
        self._deps: dict[str, set[str]] = {}  # pack -> the packs its nodes may reference

    # -- packs ----------------------------------------------------------------------------

    def expect_pack(self, pack: str, sha256: str | None, size: int) -> None:
        """Note the size (and, from the manifest that wrote it, the hash) a manifest recorded
        for a pack. Nothing is read now: the pack's
        size and block table are checked when a node is first read from it, and every node
        against its digest (SHA-256) before it is used; a node that fails makes the whole pack
        be hashed, to say why (:meth:`verify_pack`). So opening a checkpoint reads the packs
        its state touches, not every pack it names.

        Raises:
            CheckpointError: the pack failed before, or two manifests record it differently
                and its bytes match neither.
        """
        with self._lock:
            if pack in self._bad:
                raise CheckpointError(str(self.root / pack), self._bad[pack])
            known = self._packs.get(pack)
            if known is None:
                self._packs[pack] = (sha256, size)
            elif known[1] != size or (sha256 is not None and known[0] not in (None, sha256)):
                self.verify_pack(pack, sha256, size)  # two manifests disagree: the bytes decide
            elif known[0] is None and sha256 is not None:
                self._packs[pack] = (sha256, size)

    def verify_pack(self, pack: str, sha256: str | None, size: int) -> None:
        """Check a whole pack file against the size a manifest recorded and the hash the
        manifest that wrote it recorded (read from there when ``sha256`` is None; when that
        manifest is gone, the size alone is checked).

        Raises:
            CheckpointError: the file is missing, of another size, or hashes otherwise.
        """
        with self._lock:
            if pack in self._bad:
                raise CheckpointError(str(self.root / pack), self._bad[pack])
            path = self.root / pack
            if sha256 is None:
                sha256 = self._writer_hash(pack)
            try:
                data = self.fs.read_bytes(path)
            except OSError as exc:
                self._fail(pack, f"cannot read the pack ({exc.strerror or exc})")
            if len(data) != size or (sha256 is not None and hashlib.sha256(data).hexdigest() != sha256):
                self._fail(pack, "the pack's bytes differ from what its manifest recorded")
            self._tables[pack] = _block_table(data, str(path))
            self._packs[pack] = (sha256, size)

    def _writer_hash(self, pack: str) -> str | None:
        """The SHA-256 the manifest that wrote ``pack`` recorded for it (``nodes-<tag>.pack``
        is written by ``ckpt-<tag>.json``), or None if that manifest does not say."""
        path = self.root / pack
        name = path.name
        if not (name.startswith("nodes-") and name.endswith(".pack")):
            return None
        try:
            own = read_manifest(path.with_name(f"ckpt-{name[6:-5]}.json"), self.fs).pack
        except CheckpointError:
            return None
        return own[1] if own is not None and own[0] == pack else None

    def _open(self, pack: str) -> list[tuple[int, int, int]]:
        """A pack's block table, read from its end (its size checked against the manifest's)."""
        table = self._tables.get(pack)
        if table is not None:
            return table
        if pack in self._bad:
            raise CheckpointError(str(self.root / pack), self._bad[pack])
        known = self._packs.get(pack)
        if known is None:
            raise CheckpointError(str(self.root / pack), "no manifest read names the pack")
        size = known[1]
        where = str(self.root / pack)
        try:
            with self.fs.open(self.root / pack) as f:
                if _size(f) != size:
                    self._fail(pack, "the pack's bytes differ from what its manifest recorded")
                head = f.read(len(_MAGIC))
                f.seek(max(size - 12, 0))
                end = f.read(12)
                n = int.from_bytes(end[:8], "little")
                if len(end) == 12 and n <= size - 12 - len(_MAGIC):
                    f.seek(size - 12 - n)
                    end = f.read(n + 12)
        except OSError as exc:
            self._fail(pack, f"cannot read the pack ({exc.strerror or exc})")
        try:
            table = _block_table(head + end, where)
        except CheckpointError as exc:
            self.explain(pack, exc.problem)
        self._tables[pack] = table
        return table

    def explain(self, pack: str, why: str) -> NoReturn:
        """A node or block of ``pack`` failed a check: hash the whole pack to say whether its
        bytes changed, and stop using it.

        Raises:
            CheckpointError: always.
        """
        with self._lock:
            known = self._packs.get(pack)
            if known is not None and pack not in self._bad:
                self._tables.pop(pack, None)
                self.verify_pack(pack, *known)  # raises if the bytes changed
            self._fail(pack, self._bad.get(pack, why))

    def _fail(self, pack: str, why: str) -> NoReturn:
        self._bad[pack] = why
        raise CheckpointError(str(self.root / pack), why)

    def known_pack(self, pack: str, sha256: str | None, size: int, table: list[tuple[int, int, int]]) -> None:
        """Register a pack this process just wrote (no need to read it back)."""
        with self._lock:
            self._packs[pack] = (sha256, size)
            self._tables[pack] = table

    def pack_info(self, pack: str) -> tuple[str | None, int]:
        """``(sha256, size)`` of a pack named by a manifest read or written (the hash may be
        unknown: only the manifest that wrote a pack records it)."""
        return self._packs[pack]

    def depend(self, packs: set[str]) -> None:
        """Note that the nodes in ``packs`` may reference nodes in any of them (one manifest's
        packs), so a checkpoint that references one of them names them all."""
        with self._lock:
            for pack in packs:
                self._deps.setdefault(pack, set()).update(packs)

    def closure(self, packs: set[str]) -> set[str]:
        """``packs`` and every pack their nodes may reference."""
        out = set(packs)
        todo = list(packs)
        while todo:
            for dep in self._deps.get(todo.pop(), ()):
                if dep not in out:
                    out.add(dep)
                    todo.append(dep)
        return out

    def _block(self, pack: str, block: int) -> bytes:
        key = (pack, block)
        with self._lock:
            data = self._blocks.get(key)
            if data is not None:
                self._blocks.move_to_end(key)
                return data
            table = self._open(pack)
            try:
                offset, clen, ulen = table[block]
                with self.fs.open(self.root / pack) as f:
                    f.seek(offset)
                    raw = f.read(clen)
                data = _decompress(raw, ulen)
            except (IndexError, OSError, ValueError) as exc:
                self.explain(pack, f"block {block} does not read ({type(exc).__name__}: {exc})")
            self._blocks[key] = data
            self._cached += len(data)
            while self._cached > CACHE_BYTES and len(self._blocks) > 1:
                _, old = self._blocks.popitem(last=False)
                self._cached -= len(old)
            return data

    # -- nodes ----------------------------------------------------------------------------

    def fill(self, loc: Loc, node: Any) -> None:
        """Read a node's record, check its digest, and fill the node.

        Raises:
            CheckpointError: the record does not hash to the node's digest, or does not parse.
        """
        record = self._block(loc.pack, loc.block)[loc.offset:loc.offset + loc.length]
        data, _, tail = record.partition(b"\n")
        if hashlib.sha256(data).digest() != node._d:
            self.explain(loc.pack, f"node {node._d.hex()[:16]}… does not match its digest (changed on disk)")
        try:
            table = json.loads(tail)
            packs = table["p"]
            locations = [Loc(self, packs[i], b, o, n, z) for i, b, o, n, z in table["l"]]
            with self._lock:
                fill(node, data, locations, self.shell, self.blob)
        except CheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - a record that hashes right but does not parse
            self.explain(loc.pack, f"node {node._d.hex()[:16]}… does not decode ({type(exc).__name__}: {exc})")

    def shell(self, kind: str, digest: bytes, shape: Any, at: Any) -> Any:
        """The node for a reference: the one already in memory with this digest, else a shell."""
        node = self._nodes.get(digest)
        if node is not None and node._h == shape[0] and (kind == "m") == (type(node) is PMap):
            return node
        node = make_shell(kind, digest, tuple(shape), at)
        self._nodes[digest] = node
        return node

    def node_at(self, digest: bytes) -> Any:
        """A live node with this digest that is stored in this store, if there is one."""
        node = self._nodes.get(digest)
        if node is not None and isinstance(node._at, Loc) and node._at.reader.root == self.root:
            return node
        return None

    def remember(self, node: Any) -> None:
        """Keep a node this process wrote, so later checkpoints reference it by digest."""
        self._nodes[node._d] = node

    def blob(self, obj: dict[str, Any]) -> BlobRef:
        """A blob reference inside a state, attached to the store's blobs."""
        return BlobRef.from_json(obj, self._blobs)


def _compress(raw: bytes) -> bytes:
    import pyarrow as pa  # zstd; pyarrow is imported by the store already
    return bytes(pa.Codec("zstd", compression_level=LEVEL).compress(raw, asbytes=True))


def _decompress(raw: bytes, size: int) -> bytes:
    import pyarrow as pa  # zstd; pyarrow is imported by the store already
    return bytes(pa.decompress(raw, decompressed_size=size, codec="zstd", asbytes=True))


def _block_table(data: bytes, where: str) -> list[tuple[int, int, int]]:
    if not data.startswith(_MAGIC) or not data.endswith(_TAIL) or len(data) < len(_MAGIC) + 12:
        raise CheckpointError(where, "not an agentlog node pack")
    n = int.from_bytes(data[-12:-4], "little")
    try:
        blocks = json.loads(data[-12 - n:-12])["blocks"]
        return [(int(o), int(c), int(u)) for o, c, u in blocks]
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(where, f"the pack's block table does not parse ({exc})") from None


class _PackSink:
    """The sink :func:`agentlog.folding.encode.encode` writes a checkpoint's new nodes into."""

    def __init__(self, reader: NodeReader, path: Path, rel: str) -> None:
        self.reader, self.path, self.rel = reader, path, rel
        # flock-ed while open: a sweep (agentlog.store.tmp) removes a dead writer's pack, never ours
        fd, self.tmp = open_temp(path)
        self.file = os.fdopen(fd, "wb")  # closed in finish()/abort()
        self.file.write(_MAGIC)
        self.offset = len(_MAGIC)
        self.blocks: list[tuple[int, int, int]] = []
        self.buffer = bytearray()
        self.used: set[str] = set()  # packs the new nodes reference
        self.written = 0
        self.hash = hashlib.sha256(_MAGIC)

    def stored(self, node: Any) -> Any | None:
        at = referenced(node)
        if isinstance(at, Loc) and at.reader.root == self.reader.root:
            self.used.add(at.pack)
            return at
        if node._d is not None and node._at is None:
            twin = self.reader.node_at(node._d)
            if twin is not None and twin._at.size > INLINE:
                self.used.add(twin._at.pack)
                return twin._at
        return None

    def put(self, digest: bytes, data: bytes, locations: list[Any]) -> Loc:
        twin = self.reader.node_at(digest)
        if twin is not None and twin._at.size > INLINE:  # the same content, already stored
            self.used.add(twin._at.pack)
            return twin._at  # type: ignore[no-any-return]
        packs: dict[str, int] = {}
        codes = [loc.code(packs) for loc in locations]
        self.used.update(packs)
        record = data + b"\n" + json.dumps({"p": list(packs), "l": codes}, separators=(",", ":")).encode()
        if self.buffer and len(self.buffer) + len(record) > BLOCK:
            self._flush()
        loc = Loc(self.reader, self.rel, len(self.blocks), len(self.buffer), len(record), len(data))
        self.buffer += record
        self.written += 1
        return loc

    def _flush(self) -> None:
        raw = bytes(self.buffer)
        packed = _compress(raw)
        self.file.write(packed)
        self.hash.update(packed)
        self.blocks.append((self.offset, len(packed), len(raw)))
        self.offset += len(packed)
        self.buffer = bytearray()

    def finish(self, durable: bool) -> tuple[str, int]:
        if self.buffer:
            self._flush()
        table = json.dumps({"blocks": self.blocks}, separators=(",", ":")).encode()
        tail = table + len(table).to_bytes(8, "little") + _TAIL
        self.file.write(tail)
        self.hash.update(tail)
        size = self.offset + len(tail)
        self.file.flush()
        if durable:
            os.fsync(self.file.fileno())
        os.replace(self.tmp, self.path)
        self.file.close()  # after the rename: until then the lock says the temp file is live
        sha = self.hash.hexdigest()
        self.reader.known_pack(self.rel, sha, size, self.blocks)
        return sha, size

    def abort(self) -> None:
        self.tmp.unlink(missing_ok=True)
        self.file.close()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint's manifest, as found on disk (not yet checked against the run)."""

    path: Path
    """The manifest file."""
    seq: int
    """The state is the one after this event."""
    hash: str
    """The run's chain hash at ``seq`` when it was written."""
    reducers: str
    """The fingerprint of the reducers it was folded with."""
    root: list[Any]
    """The root node's reference code."""
    root_at: list[Any]
    """Where the root node is: ``[pack, block, offset, length, size]`` (pack by path)."""
    packs: tuple[tuple[str, str | None, int], ...]
    """Every pack its nodes are in: ``(path, sha256, size)``, the hash known only for
    :attr:`pack`."""
    pack: tuple[str, str, int] | None = None
    """The pack this checkpoint wrote, ``(path, sha256, size)``; None if it added no node."""


def _size(f: Any) -> int:
    """The size of an open file (local: fstat; remote: its recorded size)."""
    try:
        return os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        return int(f.size)


def checkpoint_dir(run_dir: Path) -> Path:
    """The checkpoints folder of a run."""
    return run_dir / CHECKPOINTS


class Named(NamedTuple):
    """A checkpoint as its manifest's file name tells it (nothing read)."""

    seq: int
    """The state is the one after this event."""
    tag: str
    """The first 16 hex digits of the reducers' fingerprint."""
    path: Path
    """The manifest file."""


def named_checkpoints(run_dir: Path, fs: FileSystem = LOCAL) -> list[Named]:
    """The manifests in a run's checkpoints folder by their names, in seq order (one directory
    listing: a reader picks one by seq and reducers and reads that manifest alone)."""
    folder = checkpoint_dir(run_dir)
    try:
        names = fs.listdir(folder)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        m = _NAME.fullmatch(name)
        if m is not None:
            found.append(Named(int(m.group(1)), m.group(2), folder / name))
    found.sort(key=lambda c: (c.seq, c.path.name))
    return found


def list_checkpoints(run_dir: Path, fs: FileSystem = LOCAL) -> list[Checkpoint]:
    """The manifests in a run's checkpoints folder that parse, by seq (unreadable ones are
    skipped: they are derived data, and ``state_at`` folds from the log without them)."""
    found = []
    for named in named_checkpoints(run_dir, fs):
        try:
            found.append(read_manifest(named.path, fs))
        except CheckpointError:
            continue
    return found


def read_manifest(path: Path, fs: FileSystem = LOCAL) -> Checkpoint:
    """Parse a manifest.

    Raises:
        CheckpointError: it does not parse, or is of a format this agentlog does not read.
    """
    try:
        doc = json.loads(fs.read_bytes(path))
        if doc.get("agentlog_checkpoint") != FORMAT:
            raise CheckpointError(str(path), f"checkpoint format {doc.get('agentlog_checkpoint')!r} is "
                                             f"not {FORMAT}")
        own = doc["pack"]
        pack = None if own is None else (str(own["path"]), str(own["sha256"]), int(own["size"]))
        packs = tuple((f"{folder}/nodes-{tag}.pack", pack[1] if pack is not None and
                       pack[0] == f"{folder}/nodes-{tag}.pack" else None, int(size))
                      for folder, named in doc["packs"].items() for tag, size in named.items())
        root_at = list(doc["root_at"])
        return Checkpoint(path=path, seq=int(doc["seq"]), hash=str(doc["hash"]),
                          reducers=str(doc["reducers"]), root=list(doc["root"]), root_at=root_at,
                          packs=packs, pack=pack)
    except CheckpointError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(str(path), f"the manifest does not parse ({exc})") from None


def load_checkpoint(reader: NodeReader, ckpt: Checkpoint) -> Any:
    """The checkpoint's state as a shell (nothing but the root read), its packs verified.

    Raises:
        CheckpointError: a pack is missing or changed, or the root does not check out.
    """
    for pack, sha, size in ckpt.packs:
        reader.expect_pack(pack, sha, size)
    reader.depend({pack for pack, _, _ in ckpt.packs})
    pack, block, offset, length, size = ckpt.root_at
    code = ckpt.root
    kind = "m" if code[0] == "#m" else "v"
    state = reader.shell(kind, bytes.fromhex(code[1]), tuple(code[2:]), Loc(reader, pack, block, offset,
                                                                               length, size))
    if state._v is None:
        state._at.load(state)  # the root is read now: a damaged checkpoint fails here, not later
    return state


class CheckpointWriter:
    """Writes checkpoints of one run folded with one reducer set; each shares the nodes the
    ones before it wrote (in this process, or loaded from disk).

    Args:
        store: the run's store.
        run_id: the run.
        run_dir: its folder.
        reducers: the reducer set the states are folded with.
        durable: fsync what is written (as the run's durability says).
    """

    def __init__(self, store: Any, run_id: str, run_dir: Path, reducers: Reducers, *,
                 durable: bool = True) -> None:
        self.store, self.run_id, self.run_dir = store, run_id, run_dir
        self.reducers = reducers
        self.fingerprint = reducers.fingerprint()
        self.durable = durable
        self.reader: NodeReader = store.checkpoint_reader

    def write(self, seq: int, chain_hash: str, state: Any) -> Path:
        """Write the checkpoint of ``state``, the state after event ``seq`` whose chain hash is
        ``chain_hash``; return its manifest's path.

        Raises:
            TypeError, ValueError: the state holds something that is not JSON.
            OSError: the disk refused.
        """
        folder = checkpoint_dir(self.run_dir)
        folder.mkdir(exist_ok=True)
        tag = f"{seq:012d}-{self.fingerprint[:16]}"
        path = folder / f"nodes-{tag}.pack"
        sink = _PackSink(self.reader, path, _rel(self.reader.root, path))
        try:
            code, at = encode(state, sink)
            sink.finish(self.durable)
        except BaseException:
            sink.abort()
            raise
        used = self.reader.closure(set(sink.used))
        if sink.written:
            used.add(sink.rel)
        else:  # nothing new: the pack holds nothing, the manifest needs it not
            path.unlink(missing_ok=True)
            if isinstance(at, Loc):
                used |= self.reader.closure({at.pack})
        self.reader.depend(used)
        packs: dict[str, dict[str, int]] = {}  # folder -> tag -> size: a manifest names every pack
        for pack in sorted(used):
            where, _, name = pack.rpartition("/")
            if not (name.startswith("nodes-") and name.endswith(".pack")):  # pragma: no cover
                raise CheckpointError(str(self.reader.root / pack), "not a pack's name")
            packs.setdefault(where, {})[name[6:-5]] = self.reader.pack_info(pack)[1]
        own = None
        if sink.written:
            sha, size = self.reader.pack_info(sink.rel)
            own = {"path": sink.rel, "sha256": sha, "size": size}
        self.reader.remember(state)
        root_at = at.code({}) if isinstance(at, Loc) else None
        if root_at is None:  # pragma: no cover - encode always stores the root
            raise CheckpointError(str(path), "the root was not stored")
        root_at[0] = at.pack
        manifest = {"agentlog_checkpoint": FORMAT, "run_id": self.run_id, "seq": seq, "hash": chain_hash,
                    "reducers": self.fingerprint, "root": code, "root_at": root_at, "pack": own,
                    "packs": packs, "nodes_written": sink.written}
        target = folder / f"ckpt-{tag}.json"
        write_atomic(target, json.dumps(manifest, separators=(",", ":")).encode(), durable=self.durable)
        if self.durable:
            fsync_dir(folder)
        return target


def nearest_checkpoint(run: Run, n: int, reducers: Reducers) -> tuple[int, Any] | None:
    """The state of the newest usable checkpoint at or before ``n``: folded with these reducers,
    made when the run's hash at its seq was the one it names, its packs intact. Checkpoints
    that fail are skipped with a :class:`~agentlog.errors.CheckpointWarning`.

    Returns:
        ``(seq, state)``, or ``None`` when there is none (then fold from the log).
    """
    return StoredStates(run, reducers)(n)


def run_checkpoints(run: Run) -> list[Named]:
    """The checkpoints of a run by name and, for a fork, those of its parents at or before
    the cut."""
    found = named_checkpoints(run.path, run.store.fs)
    at = run.fork_seq
    if at is not None and run.parent is not None:
        found = [c for c in run_checkpoints(run.parent) if c.seq <= at] + found
    return found


def build_checkpoints(run: Run, reducers: Reducers, *, every: int | None = None,
                      rebuild: bool = False, progress: Callable[[int], None] | None = None) -> list[Path]:
    """Fold a run and write a checkpoint every ``every`` events and at its last event.

    Starts from the newest usable checkpoint (unless ``rebuild``), so building again after the
    run grew costs the new events.

    Args:
        run: the run (a fork's prefix is its parent's: its checkpoints serve it).
        reducers: the reducer set.
        every: events between checkpoints; default :data:`EVERY`.
        rebuild: ignore (and replace) the checkpoints there are, for this reducer set.
        progress: called with the seq reached after each checkpoint.

    Returns:
        The manifests written.
    """
    from ..folding.engine import _drive

    every = every or EVERY
    count = len(run)
    if count == 0:
        return []
    base: tuple[int, Any] | None = None if rebuild else nearest_checkpoint(run, count - 1, reducers)
    seq, state = base if base is not None else (-1, reducers.initial_state())
    writer = CheckpointWriter(run.store, run.id, run.path, reducers)
    written: list[Path] = []
    start = seq + 1
    if start >= count:
        return written
    hashes = _hashes(run)

    def keep(k: int, folded: Any) -> None:
        last = k - 1
        if last >= start:
            written.append(writer.write(last, hashes(last), folded))
            if progress is not None:
                progress(last)

    state, _ = _drive(run.iter_events(start), reducers, state, every=every, done=start,
                      on_boundary=keep)
    if not written or not written[-1].name.startswith(f"ckpt-{count - 1:012d}"):
        written.append(writer.write(count - 1, hashes(count - 1), state))
        if progress is not None:
            progress(count - 1)
    return written


def _hashes(run: Run) -> Callable[[int], str]:
    def at(seq: int) -> str:
        found = run._hash_at(seq)
        if found is None:  # pragma: no cover - seq is one of the run's
            raise LookupError(f"run {run.id!r} has no event {seq}")
        return found
    return at


def iter_packs(run_dir: Path, fs: FileSystem = LOCAL) -> Iterator[Path]:
    """The pack files in a run's checkpoints folder."""
    folder = checkpoint_dir(run_dir)
    try:
        names = fs.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    yield from sorted(folder / n for n in names if n.startswith("nodes-") and n.endswith(".pack"))




class StoredStates:
    """``stored(n)`` for a run's :class:`~agentlog.folding.SnapshotIndex`: the nearest usable
    checkpoint at or before ``n`` for one reducer set (see :data:`agentlog.folding.engine.StoredFn`).

    Lists the checkpoints by file name and reads the manifest of the one it picks (not every
    manifest), checks its chain hash against the run's hash column, and keeps the last root it
    loaded (:attr:`ROOTS`); a checkpoint that fails a check is dropped for the life of this object.
    """

    ROOTS: Final = 1
    """Roots kept: the last one loaded (a root holds the nodes read from it, which the states
    folded from it no longer share once a stretch of events rewrote them; another root is a
    manifest and a node away)."""

    def __init__(self, run: Run, reducers: Reducers) -> None:
        self.run, self.reducers = run, reducers
        self.fingerprint = reducers.fingerprint()
        self._found: list[Named] | None = None
        self._manifests: dict[Path, Checkpoint | None] = {}  # None: stale, other reducers, unreadable
        self._roots: OrderedDict[int, Any] = OrderedDict()
        self.dropped: set[Path] = set()

    def _list(self, n: int) -> list[Named]:
        found = self._found
        if found is None or (not found or found[-1].seq < n):
            tag = self.fingerprint[:16]
            found = self._found = [c for c in run_checkpoints(self.run) if c.tag == tag]
        return found

    def __call__(self, n: int) -> tuple[int, Any] | None:
        for named in reversed(self._list(n)):
            if named.seq > n or named.path in self.dropped:
                continue
            root = self._roots.get(named.seq)
            if root is not None:
                self._roots.move_to_end(named.seq)
                return named.seq, root
            ckpt = self._manifest(named)
            if ckpt is None:
                continue
            try:
                root = load_checkpoint(self.run.store.checkpoint_reader, ckpt)
            except CheckpointError as exc:
                self.drop(named.path, exc)
                continue
            self._roots[named.seq] = root
            while len(self._roots) > self.ROOTS:
                self._roots.popitem(last=False)
            return named.seq, root
        return None

    def _manifest(self, named: Named) -> Checkpoint | None:
        """The manifest, if it parses, names these reducers and the run's hash at its seq."""
        if named.path in self._manifests:
            return self._manifests[named.path]
        try:
            ckpt: Checkpoint | None = read_manifest(named.path, self.run.store.fs)
        except CheckpointError:
            ckpt = None  # derived data that does not parse: the log is there
        if ckpt is not None and (ckpt.reducers != self.fingerprint or ckpt.seq != named.seq
                                 or self.run._hash_at(ckpt.seq) != ckpt.hash):
            ckpt = None  # other reducers, or stale: made from another version of the log
        self._manifests[named.path] = ckpt
        return ckpt

    def drop(self, path: Path, exc: CheckpointError | None = None) -> None:
        """Stop using a checkpoint (it failed a check), with a warning that says why."""
        self.dropped.add(path)
        self._roots.clear()
        why = f": {exc.problem} ({exc.path})" if exc is not None else ""
        warnings.warn(f"run {self.run.id!r}: checkpoint {path.name} not used{why}; folding from "
                      "the log instead", CheckpointWarning, stacklevel=4)

    def drop_all(self, exc: CheckpointError) -> None:
        """Stop using every checkpoint whose nodes are in the pack that failed (those not read
        yet fail when they are: the pack is marked bad)."""
        for path, ckpt in self._manifests.items():
            if ckpt is not None and any(str(self.run.store.path / pack) == exc.path
                                        for pack, _, _ in ckpt.packs):
                self.dropped.add(path)
        self._roots.clear()
        warnings.warn(f"run {self.run.id!r}: checkpoints not used: {exc.problem} ({exc.path}); "
                      "folding from the log instead", CheckpointWarning, stacklevel=4)
