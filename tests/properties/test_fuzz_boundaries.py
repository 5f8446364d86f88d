"""Fuzz every reader and importer: damaged store files and malformed foreign files give only
agentlog's documented exceptions, never hang, and lose nothing that was valid.

Store files (WAL, segments, ``run.json``, blobs) are mutated byte-wise (flips, truncations,
insertions, deletions, a duplicated or dropped WAL line); foreign files (JSONL exports, OTLP
JSON, ActiveGraph JSONL and SQLite, drangue SQLite) are mutated both structurally (a value
anywhere replaced by a JSON value of another shape) and byte-wise. Then everything a user
does is tried: list, open, read every event, verify, reopen a writer, repair, the store-wide
table, import. The checks:

- **only documented exceptions**: anything raised is an ``agentlog.errors.AgentlogError``;
  any warning is agentlog's (``TornWALWarning``, ``UnknownModelWarning``);
- **no hang**: each example runs under a SIGALRM deadline;
- **nothing valid lost**: every event hash that a file the mutation did not touch held (and
  every whole WAL line before the first damaged byte) is still in the run's files after all
  the operations, and an import that succeeds gives a run that verifies.

A bounded run is part of the normal suite; ``pytest -m slow`` runs many more examples.
``AGENTLOG_PROPERTY_SCALE=N`` multiplies both.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import shutil
import signal
import sqlite3
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlog as al
from agentlog.errors import AgentlogError, UnknownModelWarning
from agentlog.store import TornWALWarning

SCALE = int(os.environ.get("AGENTLOG_PROPERTY_SCALE", "1"))
FAST, SLOW = 8 * SCALE, 35 * SCALE
DEADLINE_S = 60
ALLOWED_WARNINGS = (TornWALWarning, UnknownModelWarning)
_HASH_IN_TEXT = re.compile(rb'"hash":"([0-9a-f]{64})"')


class Hang(BaseException):
    """An example ran past its deadline (BaseException: no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"no result after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class Outcomes:
    """Runs operations, keeping documented errors and failing on anything else."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def attempt(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except AgentlogError as exc:
            self.errors.append(f"{what}: {type(exc).__name__}")
            return None
        except Exception as exc:  # an undocumented exception: the boundary leaked
            raise AssertionError(f"{what} raised {type(exc).__name__}: {exc}") from exc


@contextlib.contextmanager
def only_agentlog_warnings() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    others = [f"{w.category.__name__}: {w.message}" for w in caught if not issubclass(w.category, ALLOWED_WARNINGS)]
    assert others == [], others


def examples(n: int) -> settings:
    return settings(max_examples=n, deadline=None, derandomize=n == FAST,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


# --- the store template -----------------------------------------------------------------------


def _clock(start: float) -> Callable[[], float]:
    now = [start]

    def tick() -> float:
        now[0] += 0.001
        return now[0]
    return tick


def build_store(root: Path) -> al.Store:
    """Four runs: ``open`` (3 segments and a WAL tail, its writer crashed, a blob), ``done``
    (closed), ``fork`` (a fork of ``done``), and ``zeros`` (a WAL of 3 lines and the zeros
    its ``durability="fsync"`` writer kept ahead of them, the writer killed)."""
    store = al.Store(root)
    w = store.create_run(run_id="open", segment_events=4, clock=_clock(1.8e9), durability="none")
    for i in range(14):
        w.emit("note", {"i": i, "page": "p" * 20_000 if i == 5 else f"event {i}"})
    w._wal.close()
    w._lock.release()  # crashed: events 12 and 13 stay in the WAL
    with store.create_run(run_id="done", segment_events=5, clock=_clock(1.8e9 + 10)) as w2:
        for i in range(8):
            w2.emit("llm.response", {"key": f"k{i}", "model": "gpt-4o-mini",
                                     "message": {"content": f"answer {i}"}},
                    model="gpt-4o-mini", input_tokens=10, output_tokens=2, cost_usd=0.0001)
    with store.create_run(run_id="fork", fork_of=("done", 4), clock=_clock(1.8e9 + 20)) as w3:
        w3.emit("note", {"forked": True})
    w4 = store.create_run(run_id="zeros", clock=_clock(1.8e9 + 30))  # fsync: its WAL ends in zeros
    for i in range(3):
        w4.emit("note", {"i": i})
    os.close(w4._wal._fd)  # killed: the zeros it wrote its lines over stay
    w4._wal._fd = -1
    w4._lock.release()
    return store


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz") / "store"
    build_store(root)
    return root


def store_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.name != ".lock")


def hashes_in(path: Path) -> set[str]:
    """Every event hash a run file holds (a readable segment's column, or WAL-like lines)."""
    if path.name.startswith("events-") and path.suffix == ".parquet":
        try:
            return set(pq.read_table(path, columns=["hash"]).column("hash").to_pylist()) - {None}
        except (pa.ArrowException, OSError):
            return set()
    if path.name.startswith("wal"):
        return {m.decode() for m in _HASH_IN_TEXT.findall(path.read_bytes())}
    return set()


def valid_wal_prefix(data: bytes, damaged_from: int) -> set[str]:
    """Hashes of the whole WAL lines that end before the first damaged byte."""
    end = data.rfind(b"\n", 0, damaged_from) + 1
    return {m.decode() for m in _HASH_IN_TEXT.findall(data[:end])}


@st.composite
def byte_mutations(draw: st.DrawFn, size: int) -> tuple[str, int, bytes, int]:
    """``(kind, offset, bytes, length)`` for a file of ``size`` bytes."""
    kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "replace", "empty"]))
    offset = draw(st.integers(0, max(size - 1, 0)))
    data = draw(st.binary(min_size=1, max_size=24))
    length = draw(st.integers(1, 64))
    return kind, offset, data, length


def mutate_bytes(data: bytes, kind: str, offset: int, insert: bytes, length: int) -> tuple[bytes, int]:
    """The mutated bytes and the first offset that differs."""
    if kind == "flip" and data:
        b = bytearray(data)
        b[offset] ^= insert[0] or 1
        return bytes(b), offset
    if kind == "truncate":
        return data[:offset], offset
    if kind == "insert":
        return data[:offset] + insert + data[offset:], offset
    if kind == "delete":
        return data[:offset] + data[offset + length:], offset
    if kind == "replace":
        return data[:offset] + insert + data[offset + len(insert):], offset
    return b"", 0


def exercise_store(root: Path) -> Outcomes:
    """Everything a user does with a store, documented errors kept."""
    out = Outcomes()
    store = al.Store(root)
    ids = out.attempt("list_runs", store.list_runs) or []
    out.attempt("store.verify", lambda: store.verify(progress=False))
    out.attempt("store.runs", store.runs)
    for rid in ids:
        for when in ("before", "after"):
            run = out.attempt(f"open {rid}", lambda rid=rid: store.run(rid, exact=True))
            if run is not None:
                out.attempt(f"len {rid}", lambda run=run: len(run))
                out.attempt(f"table {rid}", lambda run=run: run.table())
                out.attempt(f"events {rid}", lambda run=run: list(run.iter_events()))
                out.attempt(f"verify {rid}", lambda run=run: run.verify())
                out.attempt(f"state {rid}", lambda run=run: run.state_at(len(run) - 1) if len(run) else None)
            if when == "before":
                out.attempt(f"writer {rid}", lambda rid=rid: store.writer(rid, durability="none").close())
                out.attempt(f"repair {rid}", lambda rid=rid: store.repair(rid))
    return out


def check_store_mutation(template: Path, target: str, mutation: tuple[str, int, bytes, int],
                         drop_or_dup: str | None = None) -> list[str]:
    """Apply one mutation to a copy of ``template``, exercise it, check nothing valid is lost.

    Returns:
        The documented errors the operations met (``[]``: everything read cleanly).
    """
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        shutil.copytree(template, root)
        file = root / target
        data = file.read_bytes()
        if drop_or_dup is not None:  # a whole WAL line dropped or repeated
            lines = data.splitlines(keepends=True)
            i = mutation[1] % max(len(lines), 1)
            new = lines[:i] + ([lines[i]] * 2 if drop_or_dup == "dup" else []) + lines[i + 1:] if lines else []
            mutated, first = b"".join(new), sum(len(x) for x in lines[:i])
        else:
            mutated, first = mutate_bytes(data, *mutation)
        file.write_bytes(mutated)
        # what must survive: every hash held by an untouched file, and the whole WAL lines before
        # the damage
        keep: dict[Path, set[str]] = {}
        for run_dir in (root / "runs").iterdir():
            for f in run_dir.iterdir():
                if f != file:
                    keep.setdefault(run_dir, set()).update(hashes_in(f))
        if file.name == "wal.jsonl":
            keep.setdefault(file.parent, set()).update(valid_wal_prefix(data, first))
        with deadline(DEADLINE_S), only_agentlog_warnings():
            errors = exercise_store(root).errors
        for run_dir, wanted in keep.items():
            present: set[str] = set()
            for f in run_dir.iterdir():
                present |= hashes_in(f)
            lost = wanted - present
            assert not lost, f"{target} {mutation[0]}: {len(lost)} valid events lost from {run_dir.name}"
    return errors


def file_targets(template: Path) -> list[str]:
    return [f for f in store_files(template) if "runs/" in f or "blobs/" in f]


def store_case(template: Path, data: st.DataObject) -> None:
    target = data.draw(st.sampled_from(file_targets(template)), label="file")
    size = (template / target).stat().st_size
    mutation = data.draw(byte_mutations(size), label="mutation")
    lines = data.draw(st.sampled_from([None, None, None, "drop", "dup"]) if target.endswith("wal.jsonl")
                      else st.none(), label="wal lines")
    check_store_mutation(template, target, mutation, lines)


@given(data=st.data())
@examples(FAST)
def test_damaged_store_files_give_documented_errors_and_lose_nothing(template: Path, data: st.DataObject) -> None:
    store_case(template, data)


@pytest.mark.slow
@given(data=st.data())
@examples(SLOW)
def test_damaged_store_files_give_documented_errors_and_lose_nothing_long(template: Path,
                                                                         data: st.DataObject) -> None:
    store_case(template, data)


# --- foreign files ----------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**80, 2**80) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6) | st.sampled_from(["\udc80", "", "0" * 64, "2026-01-01T00:00:00Z", "sha256:00"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


def json_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from json_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from json_paths(v, (*path, i))


@st.composite
def json_mutation(draw: st.DrawFn, doc: Any) -> Any:
    """``doc`` with one value (or key) somewhere replaced by a value of another shape."""
    doc = copy.deepcopy(doc)
    paths = list(json_paths(doc))
    path = paths[draw(st.integers(0, len(paths) - 1))]
    new = draw(JSON_VALUES)
    if not path:
        return new
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return doc


def dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)  # ASCII: a lone surrogate is written as \udc80


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory, template: Path) -> dict[str, Any]:
    """Real files of each foreign format, made by the tools that write them."""
    import sys
    sys.path.insert(0, str(Path(__file__).parents[1] / "interop"))
    from _interop_sources import activegraph_export_trace, activegraph_quickstart, drangue_sre

    folder = tmp_path_factory.mktemp("sources")
    samples = al.examples.sample_store(copy_to=folder / "samples")
    st_ = al.Store(folder / "samples")
    buf = io.StringIO()
    al.interop.export_jsonl(st_.run("sre-0001-calm"), buf)
    with pytest.MonkeyPatch.context() as mp:
        ag_db = activegraph_quickstart(folder, mp)
    ag_jsonl = activegraph_export_trace(ag_db, folder / "ag.jsonl")
    drangue_sre(folder / "drangue.db")
    ag_db = _frozen(ag_db, folder / "ag-frozen.db")
    drangue_db = _frozen(folder / "drangue.db", folder / "drangue-frozen.db")
    assert samples
    return {"jsonl": buf.getvalue().splitlines(), "otlp": al.interop.export_otlp(st_.run("sre-0001")),
            "ag_jsonl": ag_jsonl.read_text().splitlines(), "ag_db": ag_db, "drangue": drangue_db}


def _frozen(db: Path, to: Path) -> Path:
    """A one-file copy of a SQLite database (no WAL beside it, its tool's connection may stay
    open), so every example starts from the same bytes."""
    with contextlib.closing(sqlite3.connect(db)) as src, contextlib.closing(sqlite3.connect(to)) as dst:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
    return to


def check_import(do: Callable[[al.Store], Any]) -> list[str]:
    """Import into a fresh store: a documented error, or a run (runs) that verify.

    Returns:
        The documented errors met (``[]``: imported, and every imported run verifies).
    """
    with tempfile.TemporaryDirectory() as tmp:
        store = al.Store(Path(tmp) / "out")
        out = Outcomes()
        with deadline(DEADLINE_S), only_agentlog_warnings():
            result = out.attempt("import", lambda: do(store))
            runs = result if isinstance(result, list) else [result] if result is not None else []
            for run in runs:
                report = run.verify()
                assert report.ok, str(report)
            exercise_store(store.path)  # whatever was left behind reads with documented errors
    return out.errors


def mutated_lines(data: st.DataObject, lines: list[str]) -> str:
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    try:
        doc = json.loads(lines[i])
    except ValueError:
        return "\n".join(lines)
    changed = [*lines[:i], dumps(data.draw(json_mutation(doc), label="value")), *lines[i + 1:]]
    return "\n".join(changed) + "\n"


def byte_mutated(data: st.DataObject, text: bytes) -> bytes:
    kind, offset, insert, length = data.draw(byte_mutations(len(text)), label="bytes")
    return mutate_bytes(text, kind, offset, insert, length)[0]


def foreign(data: st.DataObject, sources: dict[str, Any], tmp: Path) -> Callable[[al.Store], Any]:
    """One mutated foreign file, and the import that reads it."""
    kind = data.draw(st.sampled_from(["jsonl", "otlp", "ag_jsonl", "ag_db", "drangue"]), label="format")
    bytewise = data.draw(st.booleans(), label="bytewise")
    if kind in ("jsonl", "ag_jsonl"):
        text = mutated_lines(data, sources[kind]).encode()
        if bytewise:
            text = byte_mutated(data, text)
        path = tmp / f"{kind}.jsonl"
        path.write_bytes(text)
        if kind == "jsonl":
            return lambda store: al.interop.import_jsonl(path, store)
        return lambda store: al.interop.import_activegraph(path, store)
    if kind == "otlp":
        doc = data.draw(json_mutation(sources["otlp"]), label="otlp")
        text = dumps(doc).encode()
        if bytewise:
            text = byte_mutated(data, text)
        path = tmp / "trace.json"
        path.write_bytes(text)
        return lambda store: al.interop.import_otlp(path, store)
    db = tmp / f"{kind}.db"
    shutil.copy(sources[kind], db)
    if bytewise:
        db.write_bytes(byte_mutated(data, db.read_bytes()))
    else:
        value = data.draw(st.none() | st.integers(-2**63, 2**63 - 1) | st.floats() | st.text(max_size=8)
                          | st.binary(max_size=8) | JSON_VALUES.map(dumps), label="cell")
        with contextlib.closing(sqlite3.connect(db)) as conn:
            columns = [r[1] for r in conn.execute("PRAGMA table_info(events)")]
            column = data.draw(st.sampled_from(columns), label="column")
            row = data.draw(st.integers(1, 40), label="row")
            with contextlib.suppress(sqlite3.DatabaseError):  # a constraint the store keeps
                conn.execute(f"UPDATE events SET {column} = ? WHERE rowid = ?", (value, row))
                conn.commit()
    if kind == "ag_db":
        return lambda store: al.interop.import_activegraph(db, store)
    return lambda store: al.interop.import_drangue(db, store)


@given(data=st.data())
@examples(FAST * 2)
def test_malformed_foreign_files_give_documented_errors(sources: dict[str, Any], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_import(foreign(data, sources, Path(tmp)))


@pytest.mark.slow
@given(data=st.data())
@examples(SLOW * 2)
def test_malformed_foreign_files_give_documented_errors_long(sources: dict[str, Any], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_import(foreign(data, sources, Path(tmp)))
