"""Push runs to a team store (``s3://…``, ``gs://…``, any fsspec URL or folder), pull them back.

Recording stays local; a push copies what is final: sealed segments (immutable once renamed
into place), the blobs their events reference (content-addressed), fold checkpoints, and last
``run.json``. So a push is

* **idempotent and resumable**: a file already there with the same size is skipped (one
  listing of the target finds them; nothing is read back), and an interrupted push leaves
  only whole objects (an object store's PUT is atomic; a folder target is written through a
  temp name and a rename), so pushing again finishes the job;
* **safe from many machines at once**: the files two pushes share have the same bytes (a
  segment's content is fixed by its run's hash chain, a blob's by its digest), so the last
  PUT writes what the first did; ``run.json`` goes last, so a reader that sees a run sees its
  files, and it never replaces a remote ``run.json`` that is further along (closed, or more
  events). Before any file of a run is copied, the push claims its id with a conditional
  write (S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``; a hard link in a folder) of
  ``.identity.json`` (run id, creation time, parent): a *different* run under the same id, even
  one pushed at the same moment from another machine, is refused with
  :class:`~agentlog.errors.RunIdClashError` before it writes anything;
* **one crossing per blob**: blobs the target holds are skipped and counted in
  :attr:`PushReport.bytes_skipped`.

Files go in phases, each finished before the next starts: blobs, then segments and checkpoint
packs, then checkpoint manifests, then ``run.json``. So whatever a reader (or a resumed push)
finds in the target has what it references: a segment's blobs, a manifest's packs.

An open run is pushed up to its last sealed segment (its WAL stays local); ``follow`` keeps
pushing as it seals. A fork's ancestors are pushed with it (a fork reads its parent's prefix).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import RunIdClashError, StoreError
from ._fs import fsync_dir, temp_name, write_atomic
from .checkpoints import CHECKPOINTS
from .fsys import FileSystem, RemoteFS, open_url
from .meta import RUN_JSON, parse_meta, run_dir_name
from .segments import parse_segment_name

if TYPE_CHECKING:
    from .run import Run
    from .store import Store

__all__ = ["PushReport", "pull", "push"]

_REF: Final = re.compile(rb'\{"\$blob":"sha256:([0-9a-f]{64})"')
#: In a pushed run's folder: who claimed the id (run id, created, parent); hidden from Parquet readers.
IDENTITY: Final = ".identity.json"
_THREADS: Final = 8


@dataclass(slots=True)
class PushReport:
    """What a push or pull did.

    >>> r = PushReport(runs=["a"], files_sent=3, bytes_sent=2048, files_skipped=1, bytes_skipped=100)
    >>> print(r)
    1 run: sent 3 files (2.0 KiB), skipped 1 already there (100 B)
    """

    runs: list[str] = field(default_factory=list)
    """The runs pushed (ancestors of forks included)."""
    files_sent: int = 0
    """Files copied."""
    bytes_sent: int = 0
    """Bytes copied."""
    files_skipped: int = 0
    """Files the target already held (same name and size)."""
    bytes_skipped: int = 0
    """Bytes not copied because the target held them."""
    blobs_sent: int = 0
    """Blobs among the files sent."""
    blobs_skipped: int = 0
    """Blobs among the files skipped."""
    seconds: float = 0.0
    """Wall time."""

    def __str__(self) -> str:
        n = len(self.runs)
        return (f"{n} run{'s' if n != 1 else ''}: sent {self.files_sent} files ({_size(self.bytes_sent)}), "
                f"skipped {self.files_skipped} already there ({_size(self.bytes_skipped)})")

    def add(self, other: PushReport) -> None:
        """Add another report's counts to this one (``--follow`` sums its rounds)."""
        for name in ("files_sent", "bytes_sent", "files_skipped", "bytes_skipped", "blobs_sent",
                     "blobs_skipped"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.runs.extend(r for r in other.runs if r not in self.runs)
        self.seconds += other.seconds


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


@dataclass(slots=True)
class _File:
    rel: str            # path relative to the store root
    size: int
    local: Path
    blob: bool = False


class _Target:
    """A store URL to copy files into: a listing of what it holds, and whole-file writes."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None) -> None:
        fs, root = open_url(url, storage_options)
        self.url = url
        self.local = not isinstance(fs, RemoteFS)
        self.fs = fs
        self.root = root
        self.held: dict[str, int] = {}
        self.fetched: dict[str, bytes | None] = {}
        self.md5s: dict[str, str] = {}

    def path(self, rel: str) -> PurePath:
        return self.root / rel

    def index(self, rel: str) -> None:
        """Note every file under ``rel`` with its size (one recursive listing)."""
        if isinstance(self.fs, RemoteFS):
            root = str(self.root).lstrip("/")
            for key, info in self.fs.find(self.root / rel).items():
                name = key[len(root) + 1:]
                self.held[name] = int(info.get("size") or 0)
                self.md5s[name] = _md5_of(info)
            return
        for name, size in _listing(self.fs, self.root / rel):
            if not PurePath(name).name.startswith("."):
                self.held[str(PurePath(rel) / name)] = size

    def read(self, rel: str) -> bytes | None:
        if rel in self.fetched:
            return self.fetched[rel]
        try:
            return self.fs.read_bytes(self.path(rel))
        except FileNotFoundError:
            return None

    def same(self, rel: str, data: bytes) -> bool:
        """Whether the target's file is known, without reading it, to hold ``data``: the MD5 its
        listing gave (:func:`_md5_of`) says so."""
        md5 = self.md5s.get(rel, "")
        return len(md5) == 32 and md5 == hashlib.md5(data, usedforsecurity=False).hexdigest()

    def fetch(self, rels: list[str]) -> None:
        """Read these files (those the listing found) in one concurrent batch, for :meth:`read`."""
        rels = [r for r in rels if r in self.held]
        if isinstance(self.fs, RemoteFS):
            found = self.fs.read_many([self.path(r) for r in rels])
            for rel in rels:
                value = found.get(str(self.path(rel)).lstrip("/"))
                self.fetched[rel] = value if isinstance(value, bytes) else None
        else:
            for rel in rels:
                self.fetched[rel] = self.read(rel)

    def claim(self, rel: str, data: bytes) -> bytes | None:
        """Write ``data`` at ``rel`` only if nothing is there (fsspec's ``mode="create"``: S3 a
        conditional PUT, ``If-None-Match: *``; GCS an upload with ``ifGenerationMatch=0``, whose
        412 gcsfs raises as ``FileExistsError``; a folder: a hard link, which fails if the name
        exists). Returns ``None`` if written, else the bytes already there."""
        if isinstance(self.fs, RemoteFS):
            try:
                self.fs.fs.pipe_file(str(self.path(rel)), data, mode="create")
                return None
            except (FileExistsError, OSError) as exc:
                theirs = self.read(rel)
                if theirs is None:  # not a clash: the store refused the write
                    raise StoreError(f"{self.url}: cannot write {rel} ({exc})") from exc
                return theirs
        target = Path(self.path(rel))
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(temp_name(target.name))
        tmp.write_bytes(data)
        try:
            os.link(tmp, target)
            return None
        except FileExistsError:
            return target.read_bytes()
        finally:
            tmp.unlink()

    def put(self, file: _File) -> _File:
        if isinstance(self.fs, RemoteFS):
            self.fs.fs.put_file(str(file.local), str(self.path(file.rel)))  # one atomic PUT
        else:
            target = Path(self.path(file.rel))
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, file.local.read_bytes())
        return file

    def write(self, rel: str, data: bytes) -> None:
        if isinstance(self.fs, RemoteFS):
            self.fs.fs.pipe_file(str(self.path(rel)), data)
        else:
            target = Path(self.path(rel))
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, data)


def push(store: Store, url: str, runs: Iterable[str] | None = None, *,
         storage_options: dict[str, Any] | None = None, progress: bool | None = None) -> PushReport:
    """Copy runs (default: all) to the store at ``url``; see the module docstring.

    Args:
        store: the local store.
        url: the target store (``s3://bucket/prefix``, ``memory://…``, a folder).
        runs: run ids (or unique prefixes); default every run.
        storage_options: passed to fsspec; default: the standard environment.
        progress: show a progress bar (``None``: when stderr is a terminal).

    Raises:
        RunIdClashError: the target holds another run under one of these ids.
        ReadOnlyStoreError: ``store`` is itself remote.
    """
    store._writable("push from it (push from the local store that recorded the runs)")
    started = time.perf_counter()
    target = _Target(url, storage_options)
    ids = _with_ancestors(store, store.list_runs() if runs is None else [store.run(r).id for r in runs])
    report = PushReport(runs=ids)
    target.index("runs")
    target.index("blobs")
    plans = [_plan(store, run_id, target) for run_id in ids]
    # the target's run.json and id claims that may differ from ours: read in one batch
    target.fetch([rel for run_id, (_, meta, _) in zip(ids, plans, strict=True)
                  for rel, data in ((f"runs/{run_dir_name(run_id)}/{RUN_JSON}", meta),
                                    (f"runs/{run_dir_name(run_id)}/{IDENTITY}", _identity(meta)))
                  if rel in target.held and not target.same(rel, data)])
    for run_id, (_, meta, _) in zip(ids, plans, strict=True):
        _check_clash(target, run_id, meta)
    with ThreadPoolExecutor(_THREADS) as pool:  # one small conditional write per new run
        list(pool.map(lambda plan: _claim(target, plan[0], plan[1][1]), zip(ids, plans, strict=True)))
    blobs: dict[str, _File] = {}
    for _, _, refs in plans:
        for digest in refs:
            if digest not in blobs:
                path = store.blobs.path("sha256:" + digest)
                rel = f"blobs/sha256/{digest[:2]}/{digest[2:]}"
                try:
                    blobs[digest] = _File(rel, path.stat().st_size, path, blob=True)
                except FileNotFoundError:
                    continue  # verify reports a missing blob; the run's own files still go
    files = [f for files, _, _ in plans for f in files]
    manifests = [f for f in files if f.rel.endswith(".json")]
    # in phases, each done before the next starts: a segment is in the target only once its
    # blobs are, a checkpoint manifest once its packs are, and run.json comes last
    for phase in (list(blobs.values()), [f for f in files if not f.rel.endswith(".json")], manifests):
        _copy(phase, target, report, progress)
    for run_id, (_, meta, _) in zip(ids, plans, strict=True):
        _put_meta(target, run_id, meta, report)
    report.seconds = time.perf_counter() - started
    return report


def _with_ancestors(store: Store, ids: Sequence[str]) -> list[str]:
    out: list[str] = []
    for run_id in ids:
        chain = []
        run: Run | None = store.run(run_id, exact=True)
        while run is not None and run.id not in out and run.id not in chain:
            chain.append(run.id)
            run = run.parent
        out.extend(reversed(chain))
    return list(dict.fromkeys(out))


def _plan(store: Store, run_id: str, target: _Target) -> tuple[list[_File], bytes, set[str]]:
    """A run's files to copy (sealed segments, checkpoints), its ``run.json`` bytes, and the
    digests its segments reference. Segments are taken from a reader snapshot, so a seal in
    progress is either in or out, never half."""
    run = store.run(run_id, exact=True)
    folder = run_dir_name(run_id)
    meta_bytes = (run.path / RUN_JSON).read_bytes()
    snap = run._load(strict=True)
    files: list[_File] = []
    refs: set[str] = set()
    for seg in snap.segments:
        rel = f"runs/{folder}/{seg.path.name}"
        size = seg.path.stat().st_size
        held = target.held.get(rel)
        if held is not None and held != size:
            raise RunIdClashError(run_id, target.url, f"its segment {seg.path.name} there has "
                                                      f"{held} bytes, here {size}")
        files.append(_File(rel, size, seg.path))
        refs |= _refs(seg.slice(0, seg.rows, ("payload",)).column(0))
    ckpt = run.path / CHECKPOINTS
    if ckpt.is_dir():
        names = sorted(n for n in os.listdir(ckpt) if not n.startswith("."))
        # packs before manifests: a manifest seen remotely finds its packs there
        for name in sorted(names, key=lambda n: (not n.startswith("nodes-"), n)):
            p = ckpt / name
            files.append(_File(f"runs/{folder}/{CHECKPOINTS}/{name}", p.stat().st_size, p))
    return files, meta_bytes, refs


def _md5_of(info: dict[str, Any]) -> str:
    """An object's MD5 (hex) as a listing gives it, or ``""``: GCS's ``md5Hash`` (base64; its
    ETag is not an MD5), else S3's ETag (the MD5 of an object written in one PUT, as every
    small file here is; a multipart ETag is not 32 hex digits and never matches)."""
    md5 = info.get("md5Hash")
    if md5:
        try:
            return base64.b64decode(str(md5), validate=True).hex()
        except ValueError:
            return ""
    return str(info.get("ETag") or info.get("etag") or "").strip('"')


def _identity(meta_bytes: bytes) -> bytes:
    meta = orjson.loads(meta_bytes)
    return orjson.dumps({"run_id": meta.get("run_id"), "created": meta.get("created"),
                         "parent": meta.get("parent")}, option=orjson.OPT_SORT_KEYS)


def _claim(target: _Target, run_id: str, meta_bytes: bytes) -> None:
    """Claim the run's id in the target before any of its files go there: an object written
    only if absent (atomic), naming the run's creation. Two machines pushing *different* runs
    under one id at once: one claim wins, the other push stops here, before writing anything."""
    rel = f"runs/{run_dir_name(run_id)}/{IDENTITY}"
    mine = _identity(meta_bytes)
    if rel in target.held:
        if target.same(rel, mine):
            return
        theirs = target.read(rel)
    else:
        theirs = target.claim(rel, mine)
    if theirs is not None and theirs != mine:
        other = _meta_or_none(theirs) or {}
        raise RunIdClashError(run_id, target.url, f"the run there was created {other.get('created')}, "
                                                  f"this one {orjson.loads(mine).get('created')}")


def _check_clash(target: _Target, run_id: str, meta_bytes: bytes) -> None:
    rel = f"runs/{run_dir_name(run_id)}/{RUN_JSON}"
    if rel not in target.held or target.same(rel, meta_bytes):
        return
    theirs = target.read(rel)
    if theirs is None:
        return
    mine = orjson.loads(meta_bytes)
    other = _meta_or_none(theirs)
    if other is not None and (other.get("created"), other.get("parent")) != (mine.get("created"),
                                                                            mine.get("parent")):
        raise RunIdClashError(run_id, target.url, f"the run there was created {other.get('created')}, "
                                                  f"this one {mine.get('created')}")


def _meta_or_none(data: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _copy(files: list[_File], target: _Target, report: PushReport, progress: bool | None) -> None:
    import sys

    from tqdm.auto import tqdm

    todo = []
    for f in files:
        if target.held.get(f.rel) == f.size:
            report.files_skipped += 1
            report.bytes_skipped += f.size
            report.blobs_skipped += f.blob
        else:
            todo.append(f)
    show = sys.stderr.isatty() if progress is None else progress
    with tqdm(total=sum(f.size for f in todo), unit="B", unit_scale=True, desc="push",
              disable=not show) as bar, ThreadPoolExecutor(_THREADS) as pool:
        for f in pool.map(target.put, todo):
            target.held[f.rel] = f.size
            report.files_sent += 1
            report.bytes_sent += f.size
            report.blobs_sent += f.blob
            bar.update(f.size)


def _put_meta(target: _Target, run_id: str, meta_bytes: bytes, report: PushReport) -> None:
    """Write ``run.json`` last, unless the target's is the same or further along."""
    rel = f"runs/{run_dir_name(run_id)}/{RUN_JSON}"
    theirs = None
    if rel in target.held:
        theirs = meta_bytes if target.same(rel, meta_bytes) else target.read(rel)
    if theirs == meta_bytes or (theirs is not None and _ahead(theirs, meta_bytes)):
        report.files_skipped += 1
        report.bytes_skipped += len(meta_bytes)
        return
    target.write(rel, meta_bytes)
    report.files_sent += 1
    report.bytes_sent += len(meta_bytes)


def _ahead(theirs: bytes, mine: bytes) -> bool:
    """Whether the target's ``run.json`` describes more of the run than ours."""
    a, b = _meta_or_none(theirs), _meta_or_none(mine)
    if a is None or b is None:
        return False
    if a.get("status", "open") != "open" and b.get("status", "open") == "open":
        return True
    return int(a.get("count") or 0) > int(b.get("count") or 0)


def follow(store: Store, url: str, runs: Iterable[str] | None = None, *, interval: float = 2.0,
           rounds: int | None = None, storage_options: dict[str, Any] | None = None,
           on_round: Callable[[PushReport], None] | None = None) -> PushReport:
    """Push again every ``interval`` seconds (what a seal adds), until interrupted or after
    ``rounds`` rounds; return the sum of the rounds."""
    total = PushReport()
    done = 0
    while rounds is None or done < rounds:
        one = push(store, url, runs, storage_options=storage_options, progress=False)
        total.add(one)
        if on_round is not None:
            on_round(one)
        done += 1
        if rounds is None or done < rounds:
            time.sleep(interval)
    return total


def pull(store: Store, url: str, run_id: str, *, storage_options: dict[str, Any] | None = None) -> PushReport:
    """Bring one run (its ancestors too, if a fork) from the store at ``url`` into ``store``,
    whole: segments, checkpoints, referenced blobs, ``run.json``. Resumable and idempotent
    like :func:`push`.

    Raises:
        RunNotFoundError, AmbiguousRunError: no such run at ``url``.
        RunIdClashError: ``store`` holds another run under that id.
    """
    from .store import Store

    store._writable("pull into it")
    remote = Store(url, storage_options=storage_options)
    started = time.perf_counter()
    ids = _with_ancestors(remote, [remote.run(run_id).id])
    report = PushReport(runs=ids)
    for rid in ids:
        _pull_one(remote, store, rid, report)
    report.seconds = time.perf_counter() - started
    return report


def _listing(fs: FileSystem, root: PurePath) -> list[tuple[str, int]]:
    """Every file under ``root`` (a store's, on ``fs``): its path relative to ``root`` and its
    size, sorted."""
    if isinstance(fs, RemoteFS):
        base = str(root).lstrip("/")
        return sorted((key[len(base) + 1:], int(info.get("size") or 0)) for key, info in fs.find(root).items())
    found: list[tuple[str, int]] = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            found.append((path.relative_to(root).as_posix(), path.stat().st_size))
    return sorted(found)


def _pull_one(remote: Store, store: Store, run_id: str, report: PushReport) -> None:
    fs = remote.fs
    run = remote.run(run_id, exact=True)
    meta_bytes = fs.read_bytes(run.path / RUN_JSON)
    meta = parse_meta(meta_bytes, run.path / RUN_JSON, run_id)
    final = store.runs_path / run_dir_name(run_id)
    if (final / RUN_JSON).is_file():
        mine = parse_meta((final / RUN_JSON).read_bytes(), final / RUN_JSON, run_id)
        if (mine.get("created"), mine.get("parent")) != (meta.get("created"), meta.get("parent")):
            raise RunIdClashError(run_id, str(store.path), f"the run here was created {mine.get('created')}, "
                                                           f"the one at {remote.url} {meta.get('created')}")
    store.runs_path.mkdir(parents=True, exist_ok=True)
    work = final if final.is_dir() else store.runs_path / temp_name(run_dir_name(run_id))
    refs: set[str] = set()
    for rel, size in _listing(fs, run.path):
        if rel == RUN_JSON or rel.startswith("."):
            continue
        local = work / rel
        if local.is_file() and local.stat().st_size == size:
            report.files_skipped += 1
            report.bytes_skipped += size
        else:
            local.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(local, fs.read_bytes(run.path / rel))
            report.files_sent += 1
            report.bytes_sent += size
        if parse_segment_name(rel) is not None:
            refs |= _segment_refs(local)
    for digest in sorted(refs):
        d = "sha256:" + digest
        if store.blobs.exists(d):
            report.blobs_skipped += 1
            report.files_skipped += 1
            report.bytes_skipped += store.blobs.path(d).stat().st_size
            continue
        try:
            data = remote.blobs.read(d)
        except StoreError:
            continue  # missing remotely: verify reports it
        store.blobs.write(d, data)
        report.blobs_sent += 1
        report.files_sent += 1
        report.bytes_sent += len(data)
    here = work / RUN_JSON
    if here.is_file() and here.read_bytes() == meta_bytes:
        report.files_skipped += 1
        report.bytes_skipped += len(meta_bytes)
    else:
        write_atomic(here, meta_bytes)
        report.files_sent += 1
        report.bytes_sent += len(meta_bytes)
    if work != final:
        try:
            os.rename(work, final)
        except OSError:
            raise RunIdClashError(run_id, str(store.path), "a run with this id appeared while pulling") from None
        fsync_dir(store.runs_path)


def _segment_refs(path: Path) -> set[str]:
    """The blob digests (hex) a local segment file's payloads reference."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as f:
        column = f.read(columns=["payload"]).column(0)
    return _refs(column)


def _refs(column: Any) -> set[str]:
    found: set[str] = set()
    for chunk in column.chunks:
        data = chunk.buffers()[2]
        if data is not None:
            found.update(m.decode() for m in _REF.findall(memoryview(data)))
    return found
