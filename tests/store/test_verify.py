"""verify() catches every kind of tampering, with the right kind and first bad seq."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _store_helpers import make_run, rechain, rewrite_segment

from agentlog.chain import ProblemKind
from agentlog.store import Store, VerifyReport


def seg(store: Store, run_id: str, first: int) -> Path:
    return store.runs_path / f"run_id={run_id}" / f"events-{first:012d}.parquet"


def kinds(report: VerifyReport) -> list[tuple[str, int | None]]:
    return [(p.kind, p.seq) for p in report.problems]


def test_intact_run(store: Store) -> None:
    report = make_run(store, 20, segment_events=6).verify()
    assert report.ok and report.events == 20 and report.first_bad_seq is None
    assert report.head == store.run("run-a").head and report.problems == ()
    assert str(report) == f"run run-a: ok, 20 events, head {report.head[:12]}…"


def test_one_byte_of_a_payload_in_a_sealed_segment(store: Store) -> None:
    make_run(store, 20, segment_events=6)

    def change(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[2]["payload"] = rows[2]["payload"].replace("event 8", "event 9")
        return rows

    rewrite_segment(seg(store, "run-a", 6), change)
    report = store.run("run-a").verify()
    assert kinds(report) == [(ProblemKind.CHAIN_BROKEN, 8)] and report.first_bad_seq == 8
    assert "run run-a: 1 problem, 20 events, first bad seq 8\n  seq 8: chain_broken: stored hash" in str(report)


def test_one_byte_of_a_wal_line(store: Store) -> None:
    w = make_run(store, 10, segment_events=6, close=False)  # 6 sealed, 4 in the WAL
    wal = store.runs_path / "run_id=run-a" / "wal.jsonl"
    data = wal.read_bytes()
    assert data.count(b'"event 7"') == 1
    wal.write_bytes(data.replace(b'"event 7"', b'"event 8"'))
    report = store.run("run-a").verify()
    assert kinds(report) == [(ProblemKind.CHAIN_BROKEN, 7)]
    w._wal.close()
    w._lock.release()


def test_one_byte_of_a_blob(store: Store) -> None:
    w = store.create_run(run_id="bl")
    for i in range(4):
        w.emit("note", {"i": i, "page": "p" * 20_000 if i >= 2 else "short"})
    w.close()
    ref = store.run("bl").event(2).payload["page"]
    path = store.blobs.path(ref.digest)
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))
    report = store.run("bl").verify()
    assert kinds(report) == [(ProblemKind.BLOB_ALTERED, 2)]  # each distinct blob once
    path.unlink()
    assert kinds(store.run("bl").verify()) == [(ProblemKind.BLOB_MISSING, 2)]


def test_deleted_event(store: Store) -> None:
    make_run(store, 12, segment_events=6)
    rewrite_segment(seg(store, "run-a", 0), lambda rows: rows[:3] + rows[4:])
    report = store.run("run-a").verify()
    assert (ProblemKind.SEQ_GAP, 3) in kinds(report) and (ProblemKind.CHAIN_BROKEN, 4) in kinds(report)
    assert report.first_bad_seq == 3
    assert report.events == 11  # rows read, not the seq after the last one


def test_deleted_middle_segment_names_the_missing_range(store: Store) -> None:
    make_run(store, 18, segment_events=6)
    seg(store, "run-a", 6).unlink()
    report = store.run("run-a").verify()
    assert report.first_bad_seq == 6
    gap = report.problems[0]
    assert (gap.kind, gap.seq) == (ProblemKind.SEQ_GAP, 6)
    assert gap.message == "seqs 6–11 are missing (6 events): found seq 12 after seq 5"


def test_deleted_last_event_is_a_head_mismatch(store: Store) -> None:
    make_run(store, 12, segment_events=6)
    rewrite_segment(seg(store, "run-a", 6), lambda rows: rows[:-1])
    report = store.run("run-a").verify()
    assert kinds(report) == [(ProblemKind.HEAD_MISMATCH, 11)]


def test_swapped_events(store: Store) -> None:
    make_run(store, 12, segment_events=6)

    def swap(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[2], rows[3] = rows[3], rows[2]
        return rows

    rewrite_segment(seg(store, "run-a", 0), swap)
    report = store.run("run-a").verify()
    assert report.first_bad_seq == 2
    assert {(ProblemKind.SEQ_GAP, 2), (ProblemKind.SEQ_DUPLICATE, 2),
            (ProblemKind.CHAIN_BROKEN, 2), (ProblemKind.CHAIN_BROKEN, 3)} <= set(kinds(report))


def test_rewritten_history_with_recomputed_hashes_differs_from_run_json(store: Store) -> None:
    make_run(store, 5)
    rewrite_segment(seg(store, "run-a", 0), rechain)
    assert kinds(store.run("run-a").verify()) == [(ProblemKind.HEAD_MISMATCH, 4)]


def test_head_in_run_json_altered(store: Store) -> None:
    make_run(store, 3)
    path = store.runs_path / "run_id=run-a" / "run.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps(dict(meta, head="f" * 64)))
    assert kinds(store.run("run-a").verify()) == [(ProblemKind.HEAD_MISMATCH, 2)]


def test_open_run_is_not_compared_with_run_json(store: Store) -> None:
    w = make_run(store, 3, close=False)
    assert store.run("run-a").verify().ok
    w.close()


def rechained(rows: list[dict[str, Any]], change: dict[int, str]) -> list[dict[str, Any]]:
    """Rows with some payloads replaced and every hash recomputed (a consistent forgery)."""
    from agentlog.chain import GENESIS, chain_hash, event_body

    prev = GENESIS
    for row in rows:
        row["payload"] = change.get(row["seq"], row["payload"])
        body = event_body(seq=row["seq"], type=row["type"], payload_json=row["payload"],
                          ts=int(row["ts"].timestamp() * 1e6))
        prev = row["hash"] = chain_hash(prev, body)
    return rows


BAD_PAYLOADS = ['{"a":', "[1,2]", '"text"', "null", '{"a":1,}', '{"a":[1, ]}', '{"x":{"$blob":"sha256:zz","size":1}}',
                '{"a":1} {"b":2}']


@pytest.mark.parametrize("n", [40, 5000])  # Python on a small segment, DuckDB first on a large one
def test_verify_reports_each_payload_that_is_not_a_json_object(store: Store, n: int) -> None:
    make_run(store, n, segment_events=100_000)
    bad = {7 + 3 * i: text for i, text in enumerate(BAD_PAYLOADS)}
    bad[n - 1] = '{"a":1,\n}'  # a trailing comma across a line break
    rewrite_segment(seg(store, "run-a", 0), lambda rows: rechained(rows, bad))
    meta_path = store.runs_path / "run_id=run-a" / "run.json"
    run = store.run("run-a")
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "head": run.head}))
    report = store.run("run-a").verify()
    assert kinds(report) == [(ProblemKind.BAD_PAYLOAD, seq) for seq in sorted(bad)], str(report)
    assert "not JSON" in report.problems[0].message
    # a reader meets the same payload as a documented error naming the file, run and seq
    from agentlog.errors import CorruptEventError
    with pytest.raises(CorruptEventError) as caught:
        store.run("run-a").event(7)
    assert caught.value.seq == 7 and caught.value.run_id == "run-a"
    assert str(caught.value).startswith(str(seg(store, "run-a", 0)))
    assert store.run("run-a").event(6).payload == {"i": 6, "text": "event 6"}  # the rest reads


def test_a_wal_payload_that_is_not_an_object_is_reported(store: Store) -> None:
    from agentlog.chain import chain_hash, event_body
    from agentlog.store.wal import encode_line

    w = make_run(store, 3, close=False)
    w._wal.close()
    w._lock.release()
    wal = store.runs_path / "run_id=run-a" / "wal.jsonl"
    body = event_body(seq=3, type="note", payload_json="[3]", ts=5)
    with wal.open("ab") as f:
        f.write(encode_line(chain_hash(store.run("run-a").head, body), body))
    report = store.run("run-a").verify()
    assert kinds(report) == [(ProblemKind.BAD_PAYLOAD, 3)]
    from agentlog.errors import CorruptEventError
    with pytest.raises(CorruptEventError, match=r"wal.jsonl: run 'run-a', seq 3: its payload is not a JSON object"):
        list(store.run("run-a").iter_events())


