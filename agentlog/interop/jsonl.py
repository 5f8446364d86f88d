"""JSONL: a run as one text file, lossless, that imports back with identical hashes.

The file::

    {"agentlog": "run", "schema_version": 1, "id": ..., "name": ..., "tags": ..., "created": ...,
     "closed": ..., "status": ..., "parent": ..., "head": ..., "count": ..., "writer": {...},
     "blobs": {"mode": "inline"} | {"mode": "dir", "path": "blobs"}}
    {"agentlog": "blob", "digest": "sha256:…", "size": 12, "media_type": "text/plain", "base64": "…"}
    {"actor": null, ..., "payload": {...}, "seq": 0, "span_id": null, "ts": 1767225600000000,
     "type": "run.started", "hash": "…"}
    …

- **Header** (line 1): the run's ``run.json`` facts. ``head`` and ``count`` are those of the
  exported events, which a reader checks the file against (a truncated file is refused).
- **Events**, in seq order, one per line: exactly the text the chain hash covers (every
  column, ``ts`` in microseconds since the epoch, the payload as an object in canonical JSON),
  with ``"hash"`` appended. A fork is written with its whole stitched history, the parent's
  prefix included; the genesis does not include the run id, so the hashes are the same.
- **Blobs**: ``blobs="inline"`` writes each referenced blob once, base64, on a line before the
  first event that references it; ``blobs=Path`` copies the blob files into that folder
  (``sha256/ab/cdef…``, the store's own layout) and the header names the folder.

What maps cleanly: everything. The event lines, the hashes and the blobs are the run; the
header keeps name, tags, times, status and lineage. What does not: the folder layout
(segments, WAL) is not kept, and an imported fork becomes a run of its own unless its parent
is in the target store with the same hash at the fork seq, in which case it is imported as a
fork of it (the prefix is referenced, not copied).

Reading checks every line's chain hash, seq and blob digest before it writes anything, and
names the file and the line of the first problem.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from ..canonical import canonical_json
from ..chain import GENESIS, chain_hash, event_body
from ..errors import BlobNotFoundError, SchemaVersionError
from ..events import Event
from ..events.event import blob_digest
from ._common import BATCH, Clock, Source, append_events, check_event, loads, no_gc, source_name, store_of
from .errors import InteropFormatError, InteropIntegrityError

if TYPE_CHECKING:
    import pyarrow as pa

    from ..store import Run, RunWriter, Store

__all__ = ["export_jsonl", "import_jsonl"]

#: The schema version of the event lines; the same as the store's.
SCHEMA_VERSION: Final = 1
_BLOB_REF = re.compile(r'\{"\$blob":"(sha256:[0-9a-f]{64})","media_type":("(?:[^"\\]|\\.)*"),"size":(\d+)\}')
_FIELDS: Final = ("seq", "type", "actor", "caused_by", "span_id", "ts", "model", "input_tokens",
                  "output_tokens", "cached_tokens", "cost_usd", "duration_ms")
_CANONICAL: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                     allow_nan=False)
_HEADER_KEYS: Final = ("id", "name", "tags", "created", "closed", "status", "parent", "writer")


# --- export ------------------------------------------------------------------------------------


def export_jsonl(run: Run, dest: Source, *, blobs: str | os.PathLike[str] = "inline") -> int:
    """Write a run as JSONL: a header line, then one line per event (and per blob, inline).

    Args:
        run: the run (a fork is written with its parent's prefix).
        dest: a file path or an open text stream.
        blobs: ``"inline"`` (base64 lines in the file) or a folder to copy the blob files to
            (created if needed; the header records it relative to ``dest``'s folder when it
            can).

    Returns:
        The number of events written.

    Raises:
        BlobNotFoundError, BlobIntegrityError: a referenced blob is missing or altered.
    """
    table = run.table()
    count = int(table.num_rows)
    head = table.column("hash")[count - 1].as_py() if count else run.head
    blob_dir = None if isinstance(blobs, str) and blobs == "inline" else Path(blobs)
    header = _header(run, count, head, blob_dir, dest)
    if isinstance(dest, (str, os.PathLike)):
        with open(dest, "w", encoding="utf-8", newline="\n") as out:
            _write(run, table, header, out, blob_dir)
    else:
        _write(run, table, header, dest, blob_dir)
    return count


def _header(run: Run, count: int, head: str, blob_dir: Path | None, dest: Source) -> dict[str, Any]:
    meta = run.meta
    header: dict[str, Any] = {"agentlog": "run", "schema_version": SCHEMA_VERSION}
    header.update({key: meta.get(key) for key in _HEADER_KEYS})
    header.update(head=head, count=count)
    if blob_dir is None:
        header["blobs"] = {"mode": "inline"}
    else:
        header["blobs"] = {"mode": "dir", "path": _relative(blob_dir, dest)}
    return header


def _relative(folder: Path, dest: Source) -> str:
    if isinstance(dest, (str, os.PathLike)):
        base = Path(dest).resolve().parent
        try:
            return os.path.relpath(folder.resolve(), base)
        except ValueError:  # another drive (Windows)
            pass
    return str(folder.resolve())


def _write(run: Run, table: pa.Table, header: dict[str, Any], out: IO[str], blob_dir: Path | None) -> None:
    import pyarrow as pa

    from ..store.segments import column_values

    out.write(canonical_json(header) + "\n")
    seen: set[str] = set()
    blobs = run.store.blobs
    for batch in table.to_batches(max_chunksize=4096):
        cols = {name: batch.column(name) for name in batch.schema.names}
        # ints, not datetimes: the same 64 bits viewed as int64 (a cast would import
        # pyarrow.compute, 0.1-0.3 s the first time in a process)
        cols["ts"] = cols["ts"].view(pa.int64())
        values = {name: column_values(col) for name, col in cols.items()}
        lines = []
        for i in range(batch.num_rows):
            payload = values["payload"][i]
            if '"$blob"' in payload:
                for digest, media, size in _BLOB_REF.findall(payload):
                    if digest not in seen:
                        seen.add(digest)
                        lines.append(_blob_line(blobs, digest, loads(media), int(size), blob_dir))
            body = event_body(payload_json=payload, **{f: values[f][i] for f in _FIELDS})
            lines.append(f'{body[:-1]},"hash":"{values["hash"][i]}"}}\n')
        out.write("".join(lines))


def _blob_line(blobs: Any, digest: str, media: str, size: int, blob_dir: Path | None) -> str:
    raw = blobs.read(digest)  # checked against its digest
    if blob_dir is None:
        return canonical_json({"agentlog": "blob", "digest": digest, "size": size, "media_type": media,
                               "base64": base64.b64encode(raw).decode("ascii")}) + "\n"
    target = blob_dir / "sha256" / digest[7:9] / digest[9:]
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(blobs.path(digest), target)
    return ""


# --- import ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Line:
    """One parsed line after the header."""

    number: int
    event: Event | None = None
    payload_json: str = ""
    blob: tuple[str, bytes] | None = None
    refs: tuple[str, ...] = ()


def import_jsonl(src: Source, store: Store | str | os.PathLike[str], *, run_id: str | None = None,
                 name: str | None = None, blobs: str | os.PathLike[str] | None = None,
                 link: bool = True) -> Run:
    """Recreate a run from a JSONL export, with identical hashes.

    Every line is checked (seq, chain hash, blob digests, the header's count and head) before
    anything is written; then the blobs go into the store and the events are appended.

    Args:
        src: the file, or an open text stream.
        store: the store (or its path) to import into.
        run_id: the new run's id; default: the exported run's id.
        name: the new run's name; default: the exported name.
        blobs: the folder of an export made with ``blobs=DIR``; default: the folder the
            header names, relative to the file.
        link: import a fork as a fork of its parent when the parent is in ``store`` with the
            same hash at the fork seq (its prefix is then shared, not copied).

    Returns:
        The new run.

    Raises:
        InteropFormatError: not an agentlog JSONL export, or a malformed line (file and line).
        SchemaVersionError: the export is of a newer schema version (file and line).
        InteropIntegrityError: a line does not hash to its hash, a seq is out of place, or a
            blob does not match its digest (file and line); nothing is written.
        BlobNotFoundError: a referenced blob is in neither the file, its folder nor the store.
        RunExistsError: ``run_id`` (or the exported id) is taken.
    """
    target = store_of(store)
    where = source_name(src)
    spooled = _Spool(src)
    with contextlib.closing(spooled), no_gc():
        header = _read_header(spooled(), where)
        blob_dir = _blob_dir(header, src, blobs)
        at_cut = _check(spooled(), header, where, target, blob_dir)
        fork_of = _fork_of(header, target, at_cut) if link else None
        return _load(spooled(), header, where, target, blob_dir, run_id=run_id, name=name,
                     fork_of=fork_of)


class _Spool:
    """Read a source more than once: a path is reopened, a stream is kept in memory."""

    def __init__(self, src: Source) -> None:
        self._path = Path(src) if isinstance(src, (str, os.PathLike)) else None
        self._text = None if self._path is not None else src.read()  # type: ignore[union-attr]
        self._open: list[IO[bytes]] = []

    def __call__(self) -> Iterator[str]:
        if self._path is None:
            return iter(io.StringIO(self._text))
        f = open(self._path, "rb")  # noqa: SIM115 - closed by close()
        self._open.append(f)
        return _decoded(f, str(self._path))

    def close(self) -> None:
        for f in self._open:
            f.close()


def _decoded(lines: Iterable[bytes], where: str) -> Iterator[str]:
    """The lines of a binary file as text, refusing bytes that are not UTF-8 by line."""
    for number, raw in enumerate(lines, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InteropFormatError(where, number, f"not UTF-8 text ({exc.reason} at byte {exc.start} "
                                                    "of the line)") from None


def _read_header(lines: Iterator[str], where: str) -> dict[str, Any]:
    first = next(lines, None)
    if first is None or not first.strip():
        raise InteropFormatError(where, 1, "empty file; expected an agentlog JSONL export")
    try:
        header = loads(first)
    except ValueError as exc:
        raise InteropFormatError(where, 1, f"not JSON ({exc})") from None
    if not isinstance(header, dict) or header.get("agentlog") != "run":
        raise InteropFormatError(where, 1, 'not an agentlog JSONL export: the first line must be '
                                           '{"agentlog": "run", ...}')
    version = header.get("schema_version")
    if type(version) is not int:
        raise InteropFormatError(where, 1, f"schema_version must be an integer, got {version!r}",
                                 field="schema_version")
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(f"{where}:1", version, SCHEMA_VERSION)
    for key, kind, named in (("id", str, "a string"), ("count", int, "an integer"), ("head", str, "a string")):
        if type(header.get(key)) is not kind:
            raise InteropFormatError(where, 1, f"must be {named}, got {header.get(key)!r}", field=key)
    _check_header(header, where)
    return header


def _check_header(header: Mapping[str, Any], where: str) -> None:
    """The header fields the import uses have their types (the run.json schema's)."""
    from ..errors import RunDamagedError
    from ..store.meta import check_meta

    def bad(field: str, problem: str) -> InteropFormatError:
        return InteropFormatError(where, 1, problem, field=field)

    try:
        check_meta({**{k: header[k] for k in ("name", "created", "closed", "parent", "writer", "status")
                       if k in header}, "schema_version": SCHEMA_VERSION}, where, str(header.get("id")))
    except RunDamagedError as exc:
        raise bad("header", exc.problem) from None
    if header.get("tags") is not None and not isinstance(header["tags"], (list, dict)):
        raise bad("tags", f"must be a list, an object or null, got {type(header['tags']).__name__}")
    blobs = header.get("blobs")
    if blobs is not None and not (isinstance(blobs, dict) and isinstance(blobs.get("path", ""), str)):
        raise bad("blobs", 'must be {"mode": "inline"} or {"mode": "dir", "path": "..."}')


def _blob_dir(header: Mapping[str, Any], src: Source, blobs: str | os.PathLike[str] | None) -> Path | None:
    if blobs is not None:
        return Path(blobs)
    spec = header.get("blobs") or {}
    if spec.get("mode") != "dir":
        return None
    folder = Path(str(spec.get("path")))
    if not folder.is_absolute() and isinstance(src, (str, os.PathLike)):
        folder = Path(src).resolve().parent / folder
    return folder


def _parse(lines: Iterator[str], where: str, *, canonical: bool = True) -> Iterator[_Line]:
    """Parse the lines after the header into events and blobs (checks shape, not the chain).

    ``canonical=False`` (the second pass, whose payloads the writer encodes itself) leaves
    :attr:`_Line.payload_json` empty and finds blob references only in a line that has any.
    """
    for number, text in enumerate(lines, start=2):
        if not text.strip():
            continue
        try:
            obj = loads(text)
        except ValueError as exc:
            raise InteropFormatError(where, number, f"not JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise InteropFormatError(where, number, f"expected an object, got {type(obj).__name__}")
        if obj.get("agentlog") == "blob":
            yield _Line(number, blob=_blob(obj, where, number))
        elif "agentlog" in obj:
            raise InteropFormatError(where, number, f"unknown line kind {obj['agentlog']!r}", field="agentlog")
        else:
            yield _event_line(obj, where, number, canonical=canonical or '"$blob"' in text)


def _blob(obj: Mapping[str, Any], where: str, number: int) -> tuple[str, bytes]:
    digest, size = obj.get("digest"), obj.get("size")
    try:
        raw = base64.b64decode(str(obj.get("base64")), validate=True)
    except ValueError:
        raise InteropFormatError(where, number, "not base64", field="base64") from None
    actual = blob_digest(raw)
    if actual != digest or len(raw) != size:
        raise InteropIntegrityError(where, number, None, f"blob {str(digest)[:19]}… does not match its "
                                                         f"bytes ({actual[:19]}…, {len(raw)} bytes)")
    return actual, raw


def _event_line(obj: Mapping[str, Any], where: str, number: int, *, canonical: bool = True) -> _Line:
    for key in ("seq", "type", "ts", "payload", "hash"):
        if key not in obj:
            raise InteropFormatError(where, number, "missing", field=key)
    payload = obj["payload"]
    if not isinstance(payload, dict):
        raise InteropFormatError(where, number, "must be an object", field="payload")
    if not isinstance(obj["hash"], str):
        raise InteropFormatError(where, number, "must be a string", field="hash")
    try:
        get = obj.get
        event = Event(seq=obj["seq"], type=obj["type"], payload=payload, actor=get("actor"),
                      caused_by=get("caused_by"), span_id=get("span_id"), ts=obj["ts"], model=get("model"),
                      input_tokens=get("input_tokens"), output_tokens=get("output_tokens"),
                      cached_tokens=get("cached_tokens"), cost_usd=get("cost_usd"),
                      duration_ms=get("duration_ms"), hash=obj["hash"])
        check_event(event, where)
    except TypeError as exc:
        raise InteropFormatError(where, number, str(exc)) from None
    except InteropFormatError as exc:
        raise InteropFormatError(where, number, exc.problem, field=exc.field) from None
    if type(event.seq) is not int or event.seq < 0:
        raise InteropFormatError(where, number, f"must be an int >= 0, got {event.seq!r}", field="seq")
    if not canonical:
        return _Line(number, event=event)
    try:
        # Parsed JSON has string keys and (with loads) no NaN: the encoder alone gives the
        # canonical text; the writer's full check still runs on append.
        text = _CANONICAL.encode(payload)
        text.encode("utf-8")
    except ValueError as exc:  # UnicodeEncodeError included: a lone surrogate
        raise InteropFormatError(where, number, f"not canonical JSON ({exc})", field="payload") from None
    refs = tuple(sorted({m[0] for m in _BLOB_REF.findall(text)})) if '"$blob"' in text else ()
    return _Line(number, event=event, payload_json=text, refs=refs)


def _body(line: _Line, where: str) -> str:
    event = line.event
    assert event is not None
    try:
        return event_body(seq=event.seq, type=event.type, payload_json=line.payload_json, actor=event.actor,
                          caused_by=event.caused_by, span_id=event.span_id, ts=event.ts, model=event.model,
                          input_tokens=event.input_tokens, output_tokens=event.output_tokens,
                          cached_tokens=event.cached_tokens, cost_usd=event.cost_usd,
                          duration_ms=event.duration_ms)
    except (TypeError, ValueError) as exc:
        raise InteropFormatError(where, line.number, str(exc)) from None


def _check(lines: Iterator[str], header: Mapping[str, Any], where: str, store: Store,
           blob_dir: Path | None) -> str | None:
    """The first pass: the whole chain, the blobs and the header, with nothing written.

    Returns:
        The file's hash at the parent's fork seq (``None`` if the run is not a fork).
    """
    next(lines)  # the header
    prev, seq, known = GENESIS, 0, set()
    parent = header.get("parent")
    cut = parent.get("seq") if isinstance(parent, dict) else None
    at_cut = None
    for line in _parse(lines, where):
        if line.blob is not None:
            known.add(line.blob[0])
            continue
        event = line.event
        assert event is not None
        if event.seq != seq:
            raise InteropIntegrityError(where, line.number, event.seq, f"expected seq {seq}")
        digest = chain_hash(prev, _body(line, where))
        if digest != event.hash:
            raise InteropIntegrityError(where, line.number, seq, f"the event hashes to {digest[:12]}…, "
                                                                 f"not its recorded {event.hash[:12]}…")
        for ref in line.refs:
            if ref not in known:
                _check_blob(ref, store, blob_dir, where, line.number)
                known.add(ref)
        if seq == cut:
            at_cut = digest
        prev, seq = digest, seq + 1
    if seq != header["count"] or (seq and prev != header["head"]):
        raise InteropFormatError(where, None, f"the header says {header['count']} events ending in "
                                              f"{str(header['head'])[:12]}…, the file has {seq} ending in "
                                              f"{prev[:12]}… (a truncated or spliced file)")
    return at_cut


def _check_blob(digest: str, store: Store, blob_dir: Path | None, where: str, number: int) -> None:
    if store.blobs.exists(digest):
        return
    file = None if blob_dir is None else blob_dir / "sha256" / digest[7:9] / digest[9:]
    if file is None or not file.is_file():
        raise BlobNotFoundError(digest, f"referenced at {where}:{number}; not inline, "
                                        f"not in {file or 'a blob folder'}, not in the store")
    actual = blob_digest(file.read_bytes())
    if actual != digest:
        raise InteropIntegrityError(where, number, None, f"blob file {file} hashes to {actual[:19]}…, "
                                                         f"not {digest[:19]}…")


def _load(lines: Iterator[str], header: Mapping[str, Any], where: str, store: Store,
          blob_dir: Path | None, *, run_id: str | None, name: str | None,
          fork_of: tuple[str, int] | None) -> Run:
    """The second pass: blobs into the store, then the events through ``RunWriter.append``."""
    next(lines)
    settings = dict(header.get("writer") or {})
    skip = -1 if fork_of is None else fork_of[1]
    created = _us(header.get("created"))
    clock = Clock(created if created is not None else 0)
    try:
        writer = store.create_run(
            run_id=run_id or str(header["id"]), name=name if name is not None else header.get("name"),
            tags=header.get("tags"), clock=clock, durability="batch", fork_of=fork_of,
            segment_events=int(settings.get("segment_events") or 65536),
            blob_threshold=int(settings.get("blob_threshold") or 16 * 1024),
            redact=list(settings.get("redact") or ()))
    except (TypeError, ValueError, OverflowError) as exc:  # a header value a run cannot hold
        raise InteropFormatError(where, 1, f"the header cannot make a run: {exc}") from None
    batch: list[_Line] = []
    try:
        for line in _parse(lines, where, canonical=False):
            if line.blob is not None:
                _append(writer, batch, store, blob_dir, where)  # the events before it first
                store.blobs.write(line.blob[0], line.blob[1], durable=True)
                continue
            event = line.event
            assert event is not None
            if event.seq <= skip:
                continue
            batch.append(line)
            if len(batch) >= min(BATCH, writer.segment_room):
                _append(writer, batch, store, blob_dir, where)
        _append(writer, batch, store, blob_dir, where)
    except BaseException:
        writer.close("failed")
        raise
    closed = _us(header.get("closed"))
    if closed is not None:
        clock.us = closed
    status = header.get("status")
    writer.close(status if isinstance(status, str) and status and status != "open" else "closed")
    return store.run(writer.id, exact=True)


def _append(writer: RunWriter, batch: list[_Line], store: Store, blob_dir: Path | None, where: str) -> None:
    """Append the events of ``batch`` (then empty it), their blobs from the folder first."""
    if not batch:
        return
    for line in batch:
        for ref in line.refs:
            if not store.blobs.exists(ref) and blob_dir is not None:
                file = blob_dir / "sha256" / ref[7:9] / ref[9:]
                store.blobs.write(ref, file.read_bytes(), durable=True)

    def named(i: int, exc: Exception) -> Exception:  # CanonicalJSONError, a blob ref: named by line
        return InteropFormatError(where, batch[i].number, f"seq {events[i].seq}: {exc}")

    events = [line.event for line in batch if line.event is not None]
    append_events(writer, events, named=named)
    batch.clear()


def _fork_of(header: Mapping[str, Any], store: Store, at_cut: str | None) -> tuple[str, int] | None:
    """``(parent id, fork seq)`` when the parent is in the store with the file's prefix."""
    parent = header.get("parent")
    if at_cut is None or not isinstance(parent, dict) or parent.get("run_id") not in store:
        return None
    seq = parent["seq"]
    base = store.run(str(parent["run_id"]), exact=True)
    # The chain hash at the cut covers the whole prefix: equal hashes, equal prefixes.
    if seq >= len(base) or base.event(seq).hash != at_cut:
        return None
    return base.id, seq


def _us(iso: Any) -> int | None:
    if not isinstance(iso, str) or not iso:
        return None
    from ._common import iso_to_us
    try:
        return iso_to_us(iso)
    except ValueError:
        return None
