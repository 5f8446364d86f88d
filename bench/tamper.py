"""The tamper matrix: each way someone who can write the store could change a run, and what
catches it: ``verify`` alone, or ``verify`` with a signed head kept outside the store.

    python bench/tamper.py

Builds a store in a temp dir (a closed run of 3 segments with blobs, an open run whose writer
crashed, a fork of the closed run), signs a head of each run and keeps it outside the store,
then for each case copies the pristine store, applies one change and checks. A case is
*caught* when the report is not ok (or the run cannot be opened, with a documented error);
*right seq* when the first bad seq named (by verify, else by the signed head) is the one the
change made bad (cases that concern the whole run have none). Prints one line per case on stderr and a JSON line with the table.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from _common import logger

from agentlog.chain import GENESIS, chain_hash, event_body
from agentlog.errors import AgentlogError
from agentlog.store import Store
from agentlog.store.heads import check_head, generate_key, sign_head
from agentlog.store.wal import encode_line

log = logger("tamper")


def clock(start: float) -> Callable[[], float]:
    now = [start]

    def tick() -> float:
        now[0] += 0.001
        return now[0]
    return tick


def build(root: Path) -> None:
    store = Store(root)
    with store.create_run(run_id="closed", segment_events=10, clock=clock(1.8e9)) as w:
        for i in range(30):
            w.emit("note", {"i": i, "page": f"page {i} " * 3000 if i % 7 == 3 else f"event {i}"})
    w = store.create_run(run_id="open", segment_events=10, clock=clock(1.8e9 + 100))
    for i in range(25):
        w.emit("note", {"i": i, "text": f"event {i}"})
    w._wal.close()
    w._lock.release()  # its writer crashed: 20 sealed, 5 in the WAL
    with store.create_run(run_id="fork", fork_of=("closed", 14), clock=clock(1.8e9 + 200)) as w:
        for i in range(6):
            w.emit("note", {"fork": i})


# --- helpers the cases use ----------------------------------------------------------------------


def seg(root: Path, run: str, first: int) -> Path:
    return root / "runs" / f"run_id={run}" / f"events-{first:012d}.parquet"


def meta_path(root: Path, run: str) -> Path:
    return root / "runs" / f"run_id={run}" / "run.json"


def rows_of(path: Path) -> tuple[list[dict[str, Any]], pa.Schema]:
    table = pq.read_table(path)
    return table.to_pylist(), table.schema


def write_rows(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")


def edit_segment(root: Path, run: str, first: int, change: Callable[[list[dict[str, Any]]], None]) -> None:
    rows, schema = rows_of(seg(root, run, first))
    change(rows)
    write_rows(seg(root, run, first), rows, schema)


def rechain(root: Path, run: str, change: Callable[[dict[str, Any]], None], *, start: int = 0) -> None:
    """Change events from ``start`` on and recompute every hash from there (a consistent
    forgery), then make run.json agree."""
    store = Store(root)
    prev = store.run(run).event(start - 1).hash if start else GENESIS
    firsts = sorted(int(p.name[7:19]) for p in (root / "runs" / f"run_id={run}").glob("events-*.parquet"))
    head, count = prev, 0
    for first in firsts:
        rows, schema = rows_of(seg(root, run, first))
        for row in rows:
            count = row["seq"] + 1
            if row["seq"] < start:
                continue
            change(row)
            body = event_body(seq=row["seq"], type=row["type"], payload_json=row["payload"],
                              actor=row["actor"], caused_by=row["caused_by"], span_id=row["span_id"],
                              ts=int(row["ts"].timestamp() * 1_000_000), model=row["model"],
                              input_tokens=row["input_tokens"], output_tokens=row["output_tokens"],
                              cached_tokens=row["cached_tokens"], cost_usd=row["cost_usd"],
                              duration_ms=row["duration_ms"])
            prev = row["hash"] = chain_hash(prev, body)
        write_rows(seg(root, run, first), rows, schema)
        head = prev
    set_meta(root, run, head=head, count=count)


def set_meta(root: Path, run: str, **fields: Any) -> None:
    meta = json.loads(meta_path(root, run).read_text())
    meta.update(fields)
    meta_path(root, run).write_text(json.dumps(meta))


def wal(root: Path) -> Path:
    return root / "runs" / "run_id=open" / "wal.jsonl"


def wal_lines(root: Path) -> list[bytes]:
    return wal(root).read_bytes().splitlines(keepends=True)


def swap_lines(lines: list[bytes]) -> list[bytes]:
    """The second and third lines swapped."""
    return [lines[0], lines[2], lines[1], *lines[3:]]


def blob_of(root: Path, seq: int) -> Path:
    ref = Store(root).run("closed").event(seq).payload["page"]
    return Store(root).blobs.path(ref.digest)


def cut_closed_tail(root: Path) -> None:
    """Delete the last segment of a closed run and make run.json agree: a consistent cut."""
    seg(root, "closed", 20).unlink()
    set_meta(root, "closed", count=20, head=Store(root).run("closed").event(19).hash)


def append_forged_wal_line(root: Path) -> None:
    run = Store(root).run("open")
    body = event_body(seq=25, type="note", payload_json='{"forged":true}', ts=1)
    with wal(root).open("ab") as f:
        f.write(encode_line(chain_hash(run.head, body), body))


def append_forged_segment(root: Path) -> None:
    """A new segment after a closed run's last, its event chained to the head."""
    run = Store(root).run("closed")
    rows, schema = rows_of(seg(root, "closed", 20))
    row = dict(rows[-1], seq=30, payload='{"forged":true}')
    body = event_body(seq=30, type=row["type"], payload_json=row["payload"],
                      ts=int(row["ts"].timestamp() * 1_000_000))
    row["hash"] = chain_hash(run.head, body)
    write_rows(seg(root, "closed", 30), [row], schema)


def rename_segments(root: Path) -> None:
    """Swap the names of two segments of the closed run."""
    a, b = seg(root, "closed", 0), seg(root, "closed", 10)
    tmp = a.with_name("x.parquet")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


# --- the cases: (name, run, change, expected first bad seq or None) ------------------------------

CASES: list[tuple[str, str, Callable[[Path], None], int | None]] = [
    ("one payload byte in a sealed segment", "closed",
     lambda r: edit_segment(r, "closed", 10, lambda rows: rows[2].update(payload=rows[2]["payload"].replace("event 12", "event 13"))), 12),
    ("one payload byte in a WAL line", "open",
     lambda r: wal(r).write_bytes(wal(r).read_bytes().replace(b"event 22", b"event 23")), 22),
    ("the type of an event", "closed", lambda r: edit_segment(r, "closed", 0, lambda rows: rows[5].update(type="tool.result")), 5),
    ("the actor of an event", "closed", lambda r: edit_segment(r, "closed", 0, lambda rows: rows[4].update(actor="admin")), 4),
    ("the time of an event", "closed",
     lambda r: edit_segment(r, "closed", 10, lambda rows: rows[0].update(ts=rows[1]["ts"])), 10),
    ("a usage column (cost)", "closed", lambda r: edit_segment(r, "closed", 20, lambda rows: rows[3].update(cost_usd=0.5)), 23),
    ("a stored hash", "closed", lambda r: edit_segment(r, "closed", 0, lambda rows: rows[6].update(hash="a" * 64)), 6),
    ("an event deleted from the middle", "closed", lambda r: edit_segment(r, "closed", 10, lambda rows: rows.pop(4)), 14),
    ("the last event deleted (closed run)", "closed", lambda r: edit_segment(r, "closed", 20, lambda rows: rows.pop()), 29),
    ("a middle segment deleted", "closed", lambda r: seg(r, "closed", 10).unlink(), 10),
    ("the last segment deleted (closed run)", "closed", lambda r: seg(r, "closed", 20).unlink(), 20),
    ("two events swapped", "closed",
     lambda r: edit_segment(r, "closed", 0, lambda rows: rows.__setitem__(slice(2, 4), [rows[3], rows[2]])), 2),
    ("an event duplicated", "closed", lambda r: edit_segment(r, "closed", 0, lambda rows: rows.insert(5, dict(rows[5]))), 5),
    ("two segment files swapped by name", "closed", rename_segments, 0),
    ("a forged event appended to the WAL of an open run, hash chained", "open", append_forged_wal_line, None),
    ("a forged event appended to a closed run, hash chained", "closed", append_forged_segment, 30),
    ("WAL lines swapped", "open",
     lambda r: wal(r).write_bytes(b"".join(swap_lines(wal_lines(r)))), 21),
    ("a garbage line in the middle of the WAL", "open",
     lambda r: wal(r).write_bytes(b"".join([*wal_lines(r)[:2], b"garbage\n", *wal_lines(r)[2:]])), 22),
    ("a blob's bytes altered", "closed", lambda r: blob_of(r, 3).write_bytes(blob_of(r, 3).read_bytes()[:-1] + b"!"), 3),
    ("a blob deleted", "closed", lambda r: blob_of(r, 10).unlink(), 10),
    ("run.json head altered", "closed", lambda r: set_meta(r, "closed", head="b" * 64), 29),
    ("run.json count altered", "closed", lambda r: set_meta(r, "closed", count=31), 30),
    ("run.json deleted", "closed", lambda r: meta_path(r, "closed").unlink(), None),
    ("run.json not JSON", "closed", lambda r: meta_path(r, "closed").write_text("{"), None),
    ("run.json parent of a fork changed", "fork",
     lambda r: set_meta(r, "fork", parent={"run_id": "closed", "seq": 14, "hash": "c" * 64}), 14),
    ("the parent's prefix of a fork altered", "fork",
     lambda r: edit_segment(r, "closed", 10, lambda rows: rows[1].update(payload='{"i":11,"text":"changed"}')), 11),
    ("a segment's schema version bumped", "closed",
     lambda r: pq.write_table(pq.read_table(seg(r, "closed", 0)).replace_schema_metadata({b"agentlog.schema_version": b"9"}),
                              seg(r, "closed", 0)), 0),
    ("a segment file truncated", "closed",
     lambda r: seg(r, "closed", 10).write_bytes(seg(r, "closed", 10).read_bytes()[:200]), 10),
    # what someone who can write the whole store can keep consistent
    ("the tail of an open run cut", "open",
     lambda r: wal(r).write_bytes(b"".join(wal_lines(r)[:2])), 22),
    ("the tail of a closed run cut, run.json made to agree", "closed", cut_closed_tail, 20),
    ("the whole log re-chained, run.json made to agree", "closed",
     lambda r: rechain(r, "closed", lambda row: row.update(payload=row["payload"].replace("event", "EVENT"))), None),
    ("the log re-chained from seq 17, run.json made to agree", "closed",
     lambda r: rechain(r, "closed", lambda row: row.update(actor="forger"), start=17), None),
]


def run_case(pristine: Path, heads: dict[str, Any], name: str, run: str, change: Callable[[Path], None],
             expected: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        shutil.copytree(pristine, root)
        change(root)
        store = Store(root)
        report = store.verify(progress=False).get(run)
        verify_caught = report is not None and not report.ok
        first = report.first_bad_seq if report is not None else None
        kinds = sorted({p.kind for p in report.problems}) if report is not None else []
        head_seq = None
        try:
            found = check_head(store.run(run, exact=True), heads[run])
            head_caught = bool(found) or verify_caught
            head_seq = min((p.seq for p in found if p.seq is not None), default=None)
        except AgentlogError as exc:  # the run cannot be opened: a documented error is a catch
            head_caught, kinds = True, kinds or [type(exc).__name__]
        if first is None and not verify_caught:
            first = head_seq
    return {"case": name, "run": run, "verify": verify_caught, "with_signed_head": head_caught,
            "first_bad_seq": first, "expected_seq": expected,
            "right_seq": None if expected is None else first == expected, "kinds": kinds}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        pristine = base / "pristine"
        build(pristine)
        key = base / "outside" / "key.pem"
        key.parent.mkdir()
        generate_key(key)
        store = Store(pristine)
        heads = {rid: sign_head(store.run(rid), key) for rid in ("closed", "open", "fork")}
        assert all(r.ok for r in store.verify(progress=False).values())
        rows = []
        for name, run, change, expected in CASES:
            row = run_case(pristine, heads, name, run, change, expected)
            rows.append(row)
            log(f"{'caught' if row['verify'] else 'MISSED':6} {'caught' if row['with_signed_head'] else 'MISSED':6} "
                f"seq {row['first_bad_seq']} (want {expected}) {name}: {', '.join(row['kinds'])}")
    verify_caught = sum(r["verify"] for r in rows)
    head_caught = sum(r["with_signed_head"] for r in rows)
    seqs = [r for r in rows if r["right_seq"] is not None and r["with_signed_head"]]
    print(json.dumps({"bench": "tamper", "cases": len(rows), "caught_by_verify": verify_caught,
                      "caught_with_signed_head": head_caught,
                      "right_first_bad_seq": sum(r["right_seq"] for r in seqs), "with_expected_seq": len(seqs),
                      "missed_by_verify": [r["case"] for r in rows if not r["verify"]],
                      "missed_with_signed_head": [r["case"] for r in rows if not r["with_signed_head"]],
                      "rows": rows}))


if __name__ == "__main__":
    os.environ.pop("AGENTLOG_SIGNING_KEY", None)
    main()
