"""The store: a folder of runs (one Hive-partitioned Parquet dataset) and shared blobs.

``Store(path)`` touches nothing on disk until the first write, so opening a store that does
not exist, to read it, leaves no folder behind. Runs are created in a hidden temp folder and
renamed into ``runs/run_id=<id>`` once their ``run.json`` and lock are in place, so a
reader never meets half a run.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from ..accessors import Extensible
from ..canonical import canonical_json
from ..chain import GENESIS
from ..errors import (
    AmbiguousRunError,
    EventNotFoundError,
    ReadOnlyStoreError,
    RunExistsError,
    RunNotFoundError,
    StoreError,
    StorePathError,
)
from ._fs import fsync_dir, temp_name
from .blobs import BlobStore
from .checkpoints import NodeReader
from .fsys import LOCAL, FileSystem, RemoteFS, is_url, open_url
from .lock import RunLock
from .meta import (
    RUN_JSON,
    check_run_id,
    initial_meta,
    new_run_id,
    parse_meta,
    read_meta,
    run_dir_name,
    run_id_of,
    write_meta,
)
from .run import Run
from .snapshot import SegmentCache, load_snapshot
from .tmp import clean_run_dir, sweep_once
from .wal import Durability, TornWALWarning, rewrite_wal
from .writer import Clock, RunWriter

if TYPE_CHECKING:
    from collections.abc import Sequence

    import dask.dataframe as dd
    import duckdb
    import pandas as pd
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from .gc import GCReport
    from .push import PushReport
    from .repair import RepairReport
    from .verify import VerifyReport

__all__ = ["DEFAULT_STORE", "KEY_ENV", "Store", "open"]

#: Where runs go when neither a path nor ``$AGENTLOG_STORE`` is given.
DEFAULT_STORE: Final = "./agentlog-runs"
#: The environment variable naming the private key file a store signs closed runs with
#: (:mod:`.heads`, imported only when a key is configured: opening a store does not load it).
KEY_ENV: Final = "AGENTLOG_SIGNING_KEY"


class Store(Extensible):
    """A folder of runs and blobs.

    Its tables across runs (``store.runs()``, ``store.cost()``, ``store.sql()``, ...) come from
    :mod:`agentlog.analysis.storewide`, attached from above (:mod:`agentlog.accessors`).

    A store may also be a URL (``s3://bucket/prefix``, ``gs://…``, ``memory://…``; ``file://``
    is a local folder): runs, tables, blobs, checkpoints, views and verify then read from there
    through fsspec, only what each call needs (segment footers, the row groups and columns
    asked for, blobs on demand). A remote store is read-only for recording: record locally and
    ``store.push(url)``.

    Args:
        path: the store folder or URL; default ``$AGENTLOG_STORE``, else ``./agentlog-runs``.
        signing_key: an ed25519 private key (or its PEM file) to sign every run this store
            closes, into ``signed-head.json`` in the run's folder; default
            ``$AGENTLOG_SIGNING_KEY`` if set (see ``agentlog.store.heads``).
        storage_options: for a URL, passed to fsspec (``{"endpoint_url": …, "key": …}``);
            by default the endpoint and credentials come from the standard environment
            (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, …).

    Raises:
        StorePathError: ``path`` exists and is a file.
        ValueError: a URL whose scheme fsspec does not know (or whose package is missing).
    """

    _accessor_owner = "Store"

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 signing_key: str | os.PathLike[str] | Any | None = None,
                 storage_options: dict[str, Any] | None = None) -> None:
        if path is None:
            path = os.environ.get("AGENTLOG_STORE") or DEFAULT_STORE
        text = os.fspath(path)
        self.fs: FileSystem = LOCAL
        """Where the store's files are read from (:mod:`agentlog.store.fsys`)."""
        if is_url(text):
            fs, root = open_url(text, storage_options)
            self.fs = fs
            # a remote path is pure (no I/O methods): every read goes through self.fs
            self.path = cast(Path, root)
        else:
            self.path = Path(os.path.abspath(os.path.expanduser(text)))
            if self.path.exists() and not self.path.is_dir():
                raise StorePathError(str(self.path))
        self.runs_path = self.path / "runs"
        self.blobs = BlobStore(self.path / "blobs", self.fs)
        self._checkpoint_reader: NodeReader | None = None
        self._key_source = signing_key if signing_key is not None else (os.environ.get(KEY_ENV) or None)
        self._key: Any = None

    @property
    def checkpoint_reader(self) -> NodeReader:
        """Reads this store's fold checkpoints (one per store object: its caches)."""
        if self._checkpoint_reader is None:
            self._checkpoint_reader = NodeReader(self.path, self.blobs.read, self.fs)
        return self._checkpoint_reader

    @property
    def url(self) -> str:
        """The store's location: its folder, or its URL for a remote store."""
        return self.fs.url(self.path)

    def __repr__(self) -> str:
        return f"<Store {self.url}>"

    def _writable(self, action: str) -> None:
        if self.fs.remote:
            raise ReadOnlyStoreError(self.url, action)

    # --- runs -------------------------------------------------------------------------------

    def list_runs(self) -> list[str]:
        """The ids of the runs, ordered by creation time, then id.

        A run folder whose ``run.json`` is missing or damaged is listed too (first, since its
        creation time is unknown): ``verify`` reports it and ``repair`` rebuilds it.
        """
        if isinstance(self.fs, RemoteFS):
            return self._remote_runs()
        return [run_id for run_id, _, _ in self._listing()]

    def _listing(self) -> list[tuple[str, Path, dict[str, Any] | StoreError]]:
        """The local runs in :meth:`list_runs` order, each as ``(run_id, folder, meta)``:
        ``meta`` is its checked ``run.json``, or the :class:`~agentlog.errors.StoreError`
        reading it raised (a damaged run is listed, never skipped). For callers that need
        every ``run.json`` (the store-wide tables): each is read once."""
        found = []
        for run_id, run_dir in self._run_dirs():
            meta: dict[str, Any] | StoreError
            try:
                meta = read_meta(run_dir, self.fs)
                created = str(meta.get("created") or "")
            except StoreError as exc:
                meta, created = exc, ""  # still listed: verify reports what is wrong with it
            found.append((created, run_id, run_dir, meta))
        found.sort(key=lambda one: (one[0], one[1]))
        return [(run_id, run_dir, meta) for _, run_id, run_dir, meta in found]

    def _remote_runs(self) -> list[str]:
        """:meth:`list_runs` of a remote store: one recursive listing, the ``run.json`` files read
        in one concurrent batch. A folder without ``run.json`` is a push in progress (a push
        writes it last) and is not listed."""
        fs = self.fs
        assert isinstance(fs, RemoteFS)
        root = str(self.runs_path).lstrip("/")
        folders = sorted({key[len(root) + 1:].split("/", 1)[0] for key in fs.find(self.runs_path)
                          if key.endswith("/" + RUN_JSON)})
        paths = {rid: self.runs_path / name / RUN_JSON for name in folders
                 if (rid := run_id_of(name)) is not None}
        texts = fs.read_many(list(paths.values()))
        found = []
        for run_id, path in paths.items():
            text = texts.get(str(path).lstrip("/"))
            try:
                if not isinstance(text, bytes):
                    raise StoreError(f"{fs.url(path)} cannot be read")
                created = str(parse_meta(text, path, run_id).get("created") or "")
            except StoreError:
                created = ""
            found.append((created, run_id))
        return [run_id for _, run_id in sorted(found)]

    def _run_dirs(self) -> Iterable[tuple[str, Path]]:
        if self.fs.remote:
            try:
                names = self.fs.listdir(self.runs_path)
            except FileNotFoundError:
                return
            for name in names:
                run_id = run_id_of(name)
                if run_id is not None:
                    yield run_id, self.runs_path / name
            return
        try:
            entries = os.scandir(self.runs_path)
        except FileNotFoundError:
            return
        with entries:
            for entry in entries:
                run_id = run_id_of(entry.name)
                if run_id is not None and entry.is_dir():
                    yield run_id, Path(entry.path)

    def run(self, run_id: str, *, exact: bool = False) -> Run:
        """The run with this id, or the one run whose id starts with it.

        An exact id always wins over a prefix, even when that run is damaged; a prefix that
        matches several runs, or only a damaged one, is an error, never another run.

        Raises:
            RunNotFoundError: no run matches.
            AmbiguousRunError: the prefix matches several runs.
            RunDamagedError: the run's ``run.json`` is missing or invalid.
            SchemaVersionError: the run was written by a newer agentlog.
        """
        run_id, run_dir = self._find(run_id, exact=exact)
        return Run(self, run_id, run_dir, read_meta(run_dir, self.fs))

    def _find(self, run_id: str, *, exact: bool = False) -> tuple[str, Path]:
        """The id and folder of the run :meth:`run` would open, without reading it.

        Raises:
            RunNotFoundError, AmbiguousRunError: as for :meth:`run`.
        """
        run_dir = self._dir(run_id)
        if run_dir is not None and self.fs.isdir(run_dir):
            return run_id, run_dir
        if not exact and isinstance(run_id, str) and run_id:
            matches = sorted((rid, d) for rid, d in self._run_dirs() if rid.startswith(run_id))
            if len(matches) == 1:
                return matches[0]
            if matches:
                raise AmbiguousRunError(run_id, [rid for rid, _ in matches])
        raise RunNotFoundError(str(run_id), self.url)

    def _dir(self, run_id: str) -> Path | None:
        try:
            return self.runs_path / run_dir_name(check_run_id(run_id))
        except ValueError:
            return None

    def __contains__(self, run_id: object) -> bool:
        run_dir = self._dir(run_id) if isinstance(run_id, str) else None
        return run_dir is not None and self.fs.isfile(run_dir / RUN_JSON)

    # --- writing ----------------------------------------------------------------------------

    def create_run(self, *, name: str | None = None, tags: Iterable[str] | Mapping[str, Any] | None = None,
                   durability: Durability | str = "fsync", segment_events: int = 65536,
                   clock: Clock | None = None, run_id: str | None = None,
                   blob_threshold: int = 16 * 1024, redact: Iterable[str] = (),
                   fork_of: tuple[str, int] | None = None) -> RunWriter:
        """Create a run and return its writer (which holds the run's lock).

        Args:
            name: a label for people.
            tags: a list of strings or a mapping, stored as given.
            durability: ``fsync`` (default), ``batch`` or ``none``; see :class:`Durability`.
            segment_events: seal the WAL into a Parquet segment every this many events.
            clock: returns seconds since the epoch (like ``time.time``); stamps ``ts``,
                ``created`` and ``closed``. Inject a fixed one for reproducible runs.
            run_id: the id; default ``<UTC date>-<time>-<8 random hex>``.
            blob_threshold: strings longer than this many UTF-8 bytes become blobs.
            redact: more keys (case-insensitive) whose values are replaced by
                ``"[REDACTED]"`` before hashing, besides the standard secret headers.
            fork_of: ``(parent run id, seq)``: the new run shares the parent's events
                ``0..seq`` (referenced, not copied) and goes on from there; ``seq = -1``
                shares nothing but records the parent.

        Raises:
            ValueError: a bad id, durability or size.
            RunExistsError: a run with this id exists.
            RunNotFoundError, EventNotFoundError: the fork's parent or seq does not exist.
        """
        self._writable("record a run")
        durability = Durability(durability)
        _check_positive(segment_events=segment_events, blob_threshold=blob_threshold)
        self._signing_key()  # a key that cannot be used is refused before anything is written
        redact = tuple(sorted({str(r).lower() for r in redact}))
        now = _now_us(clock)
        if run_id is None:
            run_id = new_run_id(now, secrets.token_hex(4))
        check_run_id(run_id)
        tag_value: Any = [] if tags is None else (dict(tags) if isinstance(tags, Mapping) else list(tags))
        canonical_json(tag_value, path="tags")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        parent, seq, head = None, 0, GENESIS
        if fork_of is not None:
            parent_id, at = fork_of
            base = self.run(parent_id)
            # at = -1 keeps none of the parent's events (a re-run with other inputs) but still
            # records the lineage.
            if not isinstance(at, int) or not -1 <= at < len(base):
                raise EventNotFoundError(base.id, at, len(base))
            head = base.event(at).hash if at >= 0 else GENESIS
            parent = {"run_id": base.id, "seq": at, "hash": head}
            seq = at + 1
        if run_id in self:
            raise RunExistsError(run_id)
        settings = {"segment_events": segment_events, "blob_threshold": blob_threshold,
                    "redact": list(redact)}
        meta = initial_meta(run_id=run_id, name=name, created_us=now, tags=tag_value,
                            parent=parent, head=head, count=seq, settings=settings)
        durable = durability is not Durability.NONE
        if not self.runs_path.is_dir():
            self.runs_path.mkdir(parents=True, exist_ok=True)
            if durable:
                fsync_dir(self.path)
                fsync_dir(self.path.parent)
        tmp = self.runs_path / temp_name(run_dir_name(run_id))
        tmp.mkdir()
        lock = None
        try:
            lock = RunLock.acquire(tmp, run_id)
            write_meta(tmp, meta, durable=durable)
            final = self.runs_path / run_dir_name(run_id)
            try:
                # A directory rename does not replace a non-empty directory: this is what
                # makes two processes creating the same id safe.
                os.rename(tmp, final)
            except OSError:
                raise RunExistsError(run_id) from None
            if durable:
                fsync_dir(self.runs_path)
        except BaseException:
            if lock is not None:
                lock.release()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _sweep(self, final)
        return RunWriter(store=self, run_id=run_id, path=final, meta=meta, lock=lock,
                         durability=durability, clock=clock, segment_events=segment_events,
                         blob_threshold=blob_threshold, redact=redact, seq=seq, head=head, rows=[])

    def writer(self, run_id: str, *, durability: Durability | str = "fsync",
               clock: Clock | None = None, segment_events: int | None = None,
               blob_threshold: int | None = None, redact: Iterable[str] = ()) -> RunWriter:
        """Reopen a run to append more events (resume, approvals, crash recovery).

        Recovers what a crash left: a torn last WAL line is moved to ``wal.torn-<n>`` with a
        :class:`TornWALWarning`; WAL events a crash left beside the segment that sealed them
        are dropped; temp files a dead writer left are deleted (see ``agentlog.store.tmp``). The settings the run was created with (segment size, blob threshold,
        redaction) apply unless given here; ``redact`` adds to them.

        Raises:
            RunNotFoundError, AmbiguousRunError: see :meth:`run`.
            RunLockedError: another writer holds the run.
            CorruptWALError, CorruptSegmentError, SchemaVersionError: damage that needs a
                person; nothing is changed.
        """
        self._writable("append to a run")
        durability = Durability(durability)
        self._signing_key()
        run_id, run_dir = self._find(run_id)
        lock = RunLock.acquire(run_dir, run_id)
        try:
            clean_run_dir(run_dir)  # we hold the lock: any temp file here is a dead writer's
            meta = read_meta(run_dir)
            settings = dict(meta.get("writer") or {})
            segment_events = segment_events or int(settings.get("segment_events", 65536))
            blob_threshold = blob_threshold or int(settings.get("blob_threshold", 16 * 1024))
            _check_positive(segment_events=segment_events, blob_threshold=blob_threshold)
            all_redact = tuple(sorted(set(settings.get("redact", [])) | {r.lower() for r in redact}))
            parent = meta.get("parent")
            start, prev = (0, GENESIS) if parent is None else (int(parent["seq"]) + 1, str(parent["hash"]))
            segments = SegmentCache(self.fs)
            snap = load_snapshot(run_dir, start=start, prev=prev, cache=segments)
            durable = durability is not Durability.NONE
            scan = snap.scan
            if scan.torn or snap.keep_from:
                start_byte = scan.ends[snap.keep_from - 1] if snap.keep_from else 0
                torn_path = rewrite_wal(snap.wal_path, snap.wal_data, start_byte, scan.torn_at,
                                        durable=durable)
                if torn_path is not None:
                    warnings.warn(f"{snap.wal_path}: torn last line {scan.torn_line} "
                                  f"({len(snap.wal_data) - scan.torn_at} bytes) moved to {torn_path}",
                                  TornWALWarning, stacklevel=2)
            meta = dict(meta, status="open", closed=None)
            if all_redact != tuple(settings.get("redact", [])):
                meta["writer"] = dict(settings, redact=list(all_redact))
            write_meta(run_dir, meta, durable=durable)
        except BaseException:
            lock.release()
            raise
        _sweep(self, run_dir)
        return RunWriter(store=self, run_id=run_id, path=run_dir, meta=meta, lock=lock,
                         durability=durability, clock=clock, segment_events=segment_events,
                         blob_threshold=blob_threshold, redact=all_redact, seq=snap.end,
                         head=snap.head, rows=list(snap.tail), segments=segments)

    def _signing_key(self) -> Any:
        """The key runs are signed with at close (loaded once), or ``None``.

        Raises:
            ProofError: the configured key cannot be loaded.
        """
        if self._key is None and self._key_source is not None:
            from .heads import load_private_key
            self._key = load_private_key(self._key_source)
        return self._key

    def _closed(self, run_id: str) -> None:
        """Called by a writer once it closed a run: sign it, if the store has a key."""
        key = self._signing_key()
        if key is not None:
            from .heads import write_signed_head
            write_signed_head(self.run(run_id, exact=True), key)

    # --- whole store ------------------------------------------------------------------------

    def verify(self, *, progress: bool | None = None, jobs: int | None = None) -> dict[str, VerifyReport]:
        """Verify every run, ``jobs`` runs at a time.

        Args:
            progress: show a progress bar; ``None``: only when stderr is a terminal.
            jobs: runs verified at once (threads: a remote store's reads overlap, and hashing
                releases the GIL); default 8 for a remote store, 1 for a local one.

        Returns:
            A report per run id, in :meth:`list_runs` order.
        """
        from concurrent.futures import ThreadPoolExecutor

        from tqdm.auto import tqdm

        show = sys.stderr.isatty() if progress is None else progress
        ids = self.list_runs()
        jobs = (8 if self.fs.remote else 1) if jobs is None else max(1, int(jobs))
        with tqdm(total=len(ids), desc="verify", unit="run", disable=not show) as bar:
            if jobs == 1 or len(ids) < 2:
                found = [self._verify_one(run_id, bar) for run_id in ids]
            else:
                with ThreadPoolExecutor(min(jobs, len(ids))) as pool:
                    found = list(pool.map(lambda run_id: self._verify_one(run_id, bar), ids))
        return dict(zip(ids, found, strict=True))

    def _verify_one(self, run_id: str, bar: Any) -> VerifyReport:
        try:
            report = self.run(run_id, exact=True).verify()
        except StoreError as exc:
            from .verify import unreadable_report
            report = unreadable_report(run_id, exc)
        bar.update(1)
        return report

    def repair(self, run_id: str) -> RepairReport:
        """Rebuild a run's lost or damaged ``run.json`` from its segments and WAL.

        The count, head, fork parent (found through the chain) and times are recovered from
        the events; the name, tags and writer settings are kept if the damaged file still has
        them, else marked unknown in ``run.json["repaired"]``. The damaged file is kept as
        ``run.json.damaged-<n>``. A run whose ``run.json`` is fine is left alone.

        Args:
            run_id: the run's exact id.

        Raises:
            RunNotFoundError: no such run folder.
            RunLockedError: a live writer holds the run.
            StoreError: a fork whose parent is not in the store (nothing is changed).
        """
        self._writable("repair a run")
        from .repair import repair_run
        return repair_run(self, run_id)

    def gc(self, *, apply: bool = False, min_age: float = 60.0) -> GCReport:
        """Find (and with ``apply=True`` delete) blobs no run references, and stale temp files.

        A blob referenced only by a parent's prefix is referenced by the parent, so it is
        kept; ``gc`` never deletes runs.

        Args:
            apply: delete; the default is a dry run that only reports.
            min_age: keep files modified less than this many seconds ago, since a live
                writer may be about to reference a blob it just stored.
        """
        self._writable("collect garbage (gc runs on the machine that holds the store)")
        from .gc import collect_garbage
        return collect_garbage(self, apply=apply, min_age=min_age)

    def push(self, url: str, runs: Iterable[str] | None = None, *,
             storage_options: dict[str, Any] | None = None, progress: bool | None = None) -> PushReport:
        """Copy runs (default: all) to a team store: sealed segments, referenced blobs, fold
        checkpoints, then ``run.json``. Idempotent, resumable and safe from many machines at
        once; a file the target holds is skipped (see :mod:`agentlog.store.push`).

        >>> import tempfile, agentlog as al
        >>> local = al.Store(tempfile.mkdtemp())
        >>> with local.create_run(run_id="r1") as w:
        ...     _ = w.emit("note", {"text": "hi"})
        >>> print(local.push("memory://doc-push/team"))
        1 run: sent 2 files (...), skipped 0 already there (0 B)
        >>> print(local.push("memory://doc-push/team"))
        1 run: sent 0 files (0 B), skipped 2 already there (...)
        >>> al.Store("memory://doc-push/team").run("r1").event(0).payload
        {'text': 'hi'}

        Args:
            url: the target (``s3://bucket/prefix``, ``gs://…``, ``memory://…``, a folder).
            runs: run ids or unique prefixes (a fork's ancestors come along).
            storage_options: for fsspec; default: the standard environment
                (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, …).
            progress: a progress bar (``None``: when stderr is a terminal).

        Raises:
            RunIdClashError: the target holds another run under one of these ids.
        """
        from .push import push
        return push(self, url, runs, storage_options=storage_options, progress=progress)

    def pull(self, url: str, run_id: str, *, storage_options: dict[str, Any] | None = None) -> PushReport:
        """Bring one run (with a fork's ancestors) from a team store into this one, whole.

        Raises:
            RunNotFoundError: no such run at ``url``.
            RunIdClashError: this store holds another run under that id.
        """
        from .push import pull
        return pull(self, url, run_id, storage_options=storage_options)

    def dataset(self) -> ds.Dataset:
        """The sealed events of all runs as one pyarrow dataset with a ``run_id`` column.

        Builds the dataset from the segment files (so ``run.json`` and WALs beside them do
        not get in the way) with ``run_id`` read as a string.
        """
        import pyarrow as pa
        import pyarrow.dataset as ds

        files = segment_files(self)
        part = ds.partitioning(pa.schema([("run_id", pa.string())]), flavor="hive")
        return ds.dataset(files, format="parquet", partitioning=part,
                          partition_base_dir=str(self.runs_path), filesystem=self.fs.arrow)

    # --- tables and views: attached from the layers above (agentlog.accessors) -----------------
    # agentlog/__init__.py registers store.runs(), events(), cost(), sql(), duckdb(), to_dask()
    # (agentlog.analysis.storewide) and cost_dashboard(), _repr_html_() (agentlog.widgets).
    # The stubs below are what type checkers see; tests/test_layers.py checks that they match
    # the registered functions.

    if TYPE_CHECKING:  # pragma: no cover
        def runs(self, *, verify: bool = False) -> pd.DataFrame: ...
        def events(self, where: str | pc.Expression | None = None,
                   columns: Sequence[str] | None = None) -> pd.DataFrame: ...
        def cost(self, by: str | Sequence[str] = ("run", "model", "day"), *,
                 engine: str = "duckdb") -> pd.DataFrame: ...
        def sql(self, query: str) -> pd.DataFrame: ...
        def duckdb(self) -> duckdb.DuckDBPyConnection: ...
        def to_dask(self, what: str = "events", columns: Sequence[str] | None = None) -> dd.DataFrame: ...
        def cost_dashboard(self, **options: Any) -> Any: ...
        def _repr_html_(self) -> str | None: ...


def open(path_or_id: str | os.PathLike[str], run_id: str | None = None, *,
         store: str | os.PathLike[str] | None = None) -> Run:
    """Open a run for reading.

    Args:
        path_or_id: a run folder (``…/runs/run_id=X``); or a store folder, with ``run_id``;
            or a run id (or unique prefix) in ``store`` (default: the default store). Folders
            may be URLs (``s3://bucket/prefix/runs/run_id=X``).
        run_id: the run, when ``path_or_id`` is a store folder.
        store: the store to look ``path_or_id`` up in when it is an id.

    Raises:
        RunNotFoundError: no such run.
        RunDamagedError: the run's ``run.json`` is missing or invalid.
        ValueError: a store folder was given without a run id, and it has several runs.
    """
    text = os.fspath(path_or_id)
    if is_url(text):  # a remote run folder, or a remote store with run_id
        head, sep, tail = text.rstrip("/").rpartition("/runs/")
        rid = run_id_of(tail) if sep else None
        if rid is not None and run_id is None:
            return Store(head).run(rid, exact=True)
        return _one_run(Store(text), text, run_id)
    path = Path(text).expanduser()
    rid = run_id_of(path.name)
    if rid is not None and path.is_dir() and run_id is None:
        return Store(path.parent.parent).run(rid, exact=True)
    if path.is_dir() and (path / "runs").is_dir():
        return _one_run(Store(path), str(path), run_id)
    return Store(store).run(os.fspath(path_or_id))


def _one_run(store: Store, where: str, run_id: str | None) -> Run:
    """``run_id`` in ``store``, or its only run."""
    if run_id is None:
        ids = store.list_runs()
        if len(ids) != 1:
            raise ValueError(f"{where} holds {len(ids)} runs; say which: al.open({where!r}, run_id)")
        run_id = ids[0]
    return store.run(run_id)


def segment_files(store: Store) -> list[str]:
    """The paths of every sealed segment in the store, sorted (one listing per run folder
    locally; one recursive listing remotely)."""
    if isinstance(store.fs, RemoteFS):
        found = store.fs.find(store.runs_path)
        return sorted(k for k in found if _segment_key(k))
    return sorted(str(p) for p in store.runs_path.glob("run_id=*/events-*.parquet"))


def _segment_key(key: str) -> bool:
    parts = key.rsplit("/", 2)
    return (len(parts) == 3 and parts[1].startswith("run_id=") and parts[2].startswith("events-")
            and parts[2].endswith(".parquet"))


def _sweep(store: Store, own: Path) -> None:
    """Clean what dead writers left elsewhere in the store, once per process (see ``tmp``)."""
    try:
        sweep_once(store, skip=own)
    except OSError:  # housekeeping: a folder we may not write to is no reason to refuse a run
        pass


def _now_us(clock: Clock | None) -> int:
    return time.time_ns() // 1000 if clock is None else round(clock() * 1_000_000)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")

