"""The fuzz table: how many damaged store files and malformed foreign files were tried, and how
many read or imported cleanly, were refused with a documented error, leaked another exception,
hung, or lost a valid event.

    python bench/fuzz.py [--cases N] [--seed S] [--only TEXT]

Uses the checks of ``tests/properties/test_fuzz_boundaries.py`` (the same mutations, drawn
here from a seeded ``random`` so each target gets N cases). Prints progress on stderr and a
JSON line with a row per target.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import random
import shutil
import sqlite3
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(Path(__file__).parent), str(ROOT / "tests" / "properties"), str(ROOT / "tests" / "interop")]
from _common import logger
from test_fuzz_boundaries import (
    Hang,
    build_store,
    check_import,
    check_store_mutation,
    dumps,
    file_targets,
    json_paths,
    mutate_bytes,
)

import agentlog as al

log = logger("fuzz")
KINDS = ("flip", "truncate", "insert", "delete", "replace", "empty")


def value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(10 if depth < 2 else 7)
    return [lambda: None, lambda: rng.random() < 0.5, lambda: rng.randint(-2**80, 2**80),
            lambda: rng.choice([float("nan"), float("inf"), 1e308, -0.0, 0.5]),
            lambda: rng.choice(["", "x", "\udc80", "0" * 64, "2026-01-01T00:00:00Z", "sha256:00"]),
            dict, list,
            lambda: [value(rng, depth + 1) for _ in range(rng.randrange(3))],
            lambda: {rng.choice("abk"): value(rng, depth + 1) for _ in range(rng.randrange(3))},
            lambda: {"$blob": rng.choice(["sha256:" + "0" * 64, "x"]), "size": rng.choice([1, -1, "2"])},
            ][pick]()


def mutate_json(rng: random.Random, doc: Any) -> Any:
    doc = copy.deepcopy(doc)
    paths = list(json_paths(doc))
    path = rng.choice(paths)
    if not path:
        return value(rng)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and rng.random() < 0.3:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value(rng)
    return doc


def byte_mutation(rng: random.Random, size: int) -> tuple[str, int, bytes, int]:
    return (rng.choice(KINDS), rng.randrange(max(size, 1)), bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))),
            rng.randint(1, 64))


class Tally:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def run(self, target: str, case: Callable[[], list[str]]) -> None:
        """``clean``: read or imported with no error; ``refused``: a documented error; ``leaked``:
        anything else; ``hung``: past the deadline; ``lost``: a valid event gone."""
        row = self.rows.setdefault(target, {"tried": 0, "clean": 0, "refused": 0, "leaked": 0, "hung": 0,
                                            "lost": 0, "failures": []})
        row["tried"] += 1
        try:
            errors = case()
        except Hang:
            row["hung"] += 1
        except AssertionError as exc:
            key = "lost" if "lost" in str(exc) else "leaked"
            row[key] += 1
            if len(row["failures"]) < 5:
                row["failures"].append(str(exc).splitlines()[0][:200])
        except Exception:  # noqa: BLE001 - the harness itself failed: a leak, its trace kept
            row["leaked"] += 1
            row["failures"].append(traceback.format_exc().splitlines()[-1][:200])
        else:
            row["refused" if errors else "clean"] += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=100, help="cases per target")
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--only", metavar="TEXT", default="",
                        help="run only the targets whose name contains TEXT (e.g. segments, import)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tally = Tally()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        template = base / "template"
        build_store(template)
        targets = file_targets(template)
        groups = {"store: WAL": [t for t in targets if t.endswith("wal.jsonl")],
                  "store: segments": [t for t in targets if t.endswith(".parquet")],
                  "store: run.json": [t for t in targets if t.endswith("run.json")],
                  "store: blobs": [t for t in targets if t.startswith("blobs/")]}
        for group, files in groups.items():
            if args.only not in group:
                continue
            for i in range(args.cases):
                target = rng.choice(files)
                mutation = byte_mutation(rng, (template / target).stat().st_size)
                lines = rng.choice([None, None, "drop", "dup"]) if target.endswith("wal.jsonl") else None
                tally.run(group, lambda target=target, mutation=mutation, lines=lines:
                          check_store_mutation(template, target, mutation, lines))
            log(f"{group}: {tally.rows[group]}")
        formats = [f for f in ("jsonl", "otlp", "activegraph jsonl", "activegraph sqlite", "drangue sqlite")
                   if args.only in f"import: {f}"]
        sources = make_sources(base) if formats else {}
        for fmt in formats:
            for i in range(args.cases):
                path = base / f"case-{i}"
                shutil.rmtree(path, ignore_errors=True)
                path.mkdir()
                do = foreign(rng, fmt, sources, path, bytewise=i % 2 == 1)
                tally.run(f"import: {fmt}", lambda do=do: check_import(do))
            log(f"import {fmt}: {tally.rows['import: ' + fmt]}")
    print(json.dumps({"bench": "fuzz", "cases_per_target": args.cases, "seed": args.seed, "targets": tally.rows}))


def make_sources(base: Path) -> dict[str, Any]:
    import pytest
    from _interop_sources import activegraph_export_trace, activegraph_quickstart, drangue_sre

    al.examples.sample_store(copy_to=base / "samples")
    store = al.Store(base / "samples")
    buf = io.StringIO()
    al.interop.export_jsonl(store.run("sre-0001-calm"), buf)
    with pytest.MonkeyPatch.context() as mp:
        ag_db = activegraph_quickstart(base, mp)
    ag_jsonl = activegraph_export_trace(ag_db, base / "ag.jsonl")
    drangue_sre(base / "drangue.db")
    return {"jsonl": buf.getvalue().splitlines(), "otlp": al.interop.export_otlp(store.run("sre-0001")),
            "activegraph jsonl": ag_jsonl.read_text().splitlines(), "activegraph sqlite": ag_db,
            "drangue sqlite": base / "drangue.db"}


def foreign(rng: random.Random, fmt: str, sources: dict[str, Any], tmp: Path, *,
            bytewise: bool) -> Callable[[al.Store], Any]:
    if fmt in ("jsonl", "activegraph jsonl"):
        lines = list(sources[fmt])
        i = rng.randrange(len(lines))
        lines[i] = dumps(mutate_json(rng, json.loads(lines[i])))
        data = ("\n".join(lines) + "\n").encode()
        if bytewise:
            data = mutate_bytes(data, *byte_mutation(rng, len(data)))[0]
        path = tmp / "file.jsonl"
        path.write_bytes(data)
        if fmt == "jsonl":
            return lambda store: al.interop.import_jsonl(path, store)
        return lambda store: al.interop.import_activegraph(path, store)
    if fmt == "otlp":
        data = dumps(mutate_json(rng, sources["otlp"])).encode()
        if bytewise:
            data = mutate_bytes(data, *byte_mutation(rng, len(data)))[0]
        path = tmp / "trace.json"
        path.write_bytes(data)
        return lambda store: al.interop.import_otlp(path, store)
    db = tmp / "source.db"
    shutil.copy(sources[fmt], db)
    if bytewise:
        db.write_bytes(mutate_bytes(db.read_bytes(), *byte_mutation(rng, db.stat().st_size))[0])
    else:
        cell = rng.choice([None, 2**62, -1, 1.5, float("nan"), "x", b"\x00\xff", "{}", "[]", dumps(value(rng))])
        with contextlib.closing(sqlite3.connect(db)) as conn:
            columns = [r[1] for r in conn.execute("PRAGMA table_info(events)")]
            with contextlib.suppress(sqlite3.DatabaseError):
                conn.execute(f"UPDATE events SET {rng.choice(columns)} = ? WHERE rowid = ?",
                             (cell, rng.randint(1, 40)))
                conn.commit()
    if fmt == "activegraph sqlite":
        return lambda store: al.interop.import_activegraph(db, store)
    return lambda store: al.interop.import_drangue(db, store)


if __name__ == "__main__":
    main()
