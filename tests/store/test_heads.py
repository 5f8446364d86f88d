"""Signed heads kept outside the store catch what the chain alone cannot: a cut tail and a
re-chained history; inclusion and consistency proofs check without the store."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _store_helpers import FixedClock, make_run, rechain, rewrite_segment

from agentlog.chain import GENESIS, ProblemKind, chain_hash, event_body
from agentlog.errors import MissingDependencyError, ProofError
from agentlog.proofs import SignedHead, read_document, verify_proof
from agentlog.store import Store
from agentlog.store.heads import (
    SIGNED_HEAD_FILE,
    check_head,
    generate_key,
    load_private_key,
    prove_consistency,
    prove_inclusion,
    sign_head,
)


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "key.pem"
    generate_key(path)
    return path


def public(key: Path) -> str:
    import base64

    from agentlog.store.heads import public_key_raw
    return base64.b64encode(public_key_raw(load_private_key(key))).decode()


def roundtrip(doc: Any) -> Any:
    """As a verifier elsewhere gets it: through a JSON file."""
    return read_document(json.loads(json.dumps(doc.to_json())))


def test_a_signed_head_verifies_and_any_change_to_it_does_not(store: Store, key: Path) -> None:
    run = make_run(store, 9)
    head = sign_head(run, key, signed_at_us=1_800_000_000_000_000)
    assert (head.size, head.head, head.signed_at) == (9, run.head, "2027-01-15T08:00:00.000000Z")
    check = verify_proof(roundtrip(head), public_key=public(key))
    assert check.ok and check.pinned and check.signers == (head.key_id,)
    assert len(json.dumps(head.to_json())) < 500
    for field, value in (("size", 8), ("root", "0" * 64), ("head", "1" * 64), ("run_id", "other"),
                         ("signed_at", "2030-01-01T00:00:00.000000Z")):
        assert not verify_proof(replace(head, **{field: value})).ok, field


def test_a_key_that_is_not_pinned_is_reported(store: Store, key: Path, tmp_path: Path) -> None:
    head = sign_head(make_run(store, 3), key)
    other = tmp_path / "other.pem"
    generate_key(other)
    check = verify_proof(head, public_key=public(other))
    assert not check.ok and "not by the expected key" in check.problems[0]


def test_verify_alone_misses_a_cut_tail_of_an_open_run_a_head_kept_elsewhere_does_not(
        store: Store, key: Path) -> None:
    w = make_run(store, 10, close=False, segment_events=100)  # all 10 in the WAL
    head = sign_head(store.run("run-a"), key)
    w._wal.close()
    w._lock.release()  # the writer crashed
    wal = store.runs_path / "run_id=run-a" / "wal.jsonl"
    lines = wal.read_bytes().splitlines(keepends=True)
    wal.write_bytes(b"".join(lines[:7]))  # someone cut the last 3 events
    run = store.run("run-a")
    assert run.verify().ok  # the chain cannot tell
    problems = check_head(run, head)
    assert [(p.kind, p.seq) for p in problems] == [(ProblemKind.HEAD_MISMATCH, 7)]
    assert "seqs 7–9 were cut" in problems[0].message


def test_verify_alone_misses_a_rechained_history_a_head_kept_elsewhere_does_not(
        store: Store, key: Path) -> None:
    make_run(store, 6)
    head = sign_head(store.run("run-a"), key)
    seg = store.runs_path / "run_id=run-a" / "events-000000000000.parquet"

    rewrite_segment(seg, rechain)
    meta_path = store.runs_path / "run_id=run-a" / "run.json"
    run = store.run("run-a")
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "head": run.head}))  # run.json rewritten to match
    run = store.run("run-a")
    assert run.verify().ok
    problems = check_head(run, head)
    assert [p.kind for p in problems] == [ProblemKind.HEAD_MISMATCH]
    assert "they were changed" in problems[0].message


def test_a_run_that_grew_since_its_head_still_matches_it(store: Store, key: Path) -> None:
    make_run(store, 4)
    head = sign_head(store.run("run-a"), key)
    w = store.writer("run-a", clock=FixedClock(start=1_800_000_000))
    w.emit("note", {"later": True})
    w.close()
    assert check_head(store.run("run-a"), head) == []
    forged = replace(head, size=3)
    assert [p.kind for p in check_head(store.run("run-a"), forged)] == [ProblemKind.SIGNATURE,
                                                                        ProblemKind.HEAD_MISMATCH]


def test_every_event_of_a_fork_has_an_inclusion_proof(store: Store, key: Path) -> None:
    make_run(store, 7, run_id="parent")
    w = store.create_run(run_id="fork", fork_of=("parent", 4), clock=FixedClock(start=1_800_000_000))
    for i in range(3):
        w.emit("note", {"fork": i})
    w.close()
    fork = store.run("fork")
    head = sign_head(fork, key)
    for seq in range(len(fork)):
        proof = roundtrip(prove_inclusion(fork, seq, head=head))
        assert proof.event_hash == fork.event(seq).hash
        assert verify_proof(proof, public_key=public(key)).ok, seq
    proof = prove_inclusion(fork, 2)
    assert json.loads(proof.event or "")["payload"] == {"i": 2, "text": "event 2"}
    changed = roundtrip(proof).to_json()
    changed["event"] = changed["event"].replace("event 2", "event 3")
    check = verify_proof(changed)
    assert not check.ok and "does not hash to its event hash" in check.problems[0]


def test_an_inclusion_proof_under_an_older_head_checks_against_that_head(store: Store, key: Path) -> None:
    make_run(store, 5)
    old = sign_head(store.run("run-a"), key)
    w = store.writer("run-a", clock=FixedClock(start=1_800_000_000))
    for i in range(20):
        w.emit("note", {"more": i})
    w.close()
    proof = prove_inclusion(store.run("run-a"), 3, head=old)
    assert proof.size == 5 and verify_proof(roundtrip(proof)).ok


def test_consistency_proofs_show_growth_and_catch_rewrites(store: Store, key: Path) -> None:
    make_run(store, 5, segment_events=5)
    old = sign_head(store.run("run-a"), key)
    w = store.writer("run-a", clock=FixedClock(start=1_800_000_000))
    for i in range(12):
        w.emit("note", {"more": i})
    w.close()
    proof = prove_consistency(store.run("run-a"), old, key=key)
    assert (proof.old_size, proof.new_size) == (5, 17)
    check = verify_proof(roundtrip(proof), public_key=public(key))
    assert check.ok and check.kind == "consistency-proof"
    assert len(proof.path) <= 2 * (17 - 1).bit_length()  # O(log n) hashes

    # rewrite event 2 (and re-chain everything after it): the log no longer extends the head
    seg = store.runs_path / "run_id=run-a" / "events-000000000000.parquet"

    def rechain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prev = GENESIS
        for row in rows:
            if row["seq"] == 2:
                row["payload"] = row["payload"].replace("event 2", "EVENT 2")
            body = event_body(seq=row["seq"], type=row["type"], payload_json=row["payload"],
                              ts=int(row["ts"].timestamp() * 1e6))
            prev = row["hash"] = chain_hash(prev, body)
        return rows

    rewrite_segment(seg, rechain)
    bad = prove_consistency(store.run("run-a"), old)
    assert not verify_proof(bad).ok


def test_a_cut_tail_cannot_be_proven_consistent(store: Store, key: Path) -> None:
    make_run(store, 6)
    head = sign_head(store.run("run-a"), key)
    make_run(store, 4, run_id="short")
    with pytest.raises(ProofError, match="its tail was cut"):
        prove_consistency(store.run("short"), replace(head, run_id="short"))


def test_a_store_with_a_key_signs_each_run_it_closes(tmp_path: Path, key: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOG_SIGNING_KEY", str(key))
    store = Store(tmp_path / "signed")
    run = make_run(store, 8, segment_events=3)
    head = SignedHead.from_json(json.loads((run.path / SIGNED_HEAD_FILE).read_text()))
    assert (head.size, head.head) == (8, run.head) and check_head(run, head, public_key=public(key)) == []
    monkeypatch.delenv("AGENTLOG_SIGNING_KEY")
    assert not (make_run(Store(tmp_path / "plain"), 2).path / SIGNED_HEAD_FILE).exists()


def test_a_key_that_cannot_be_loaded_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    store = Store(tmp_path / "s", signing_key=bad)
    with pytest.raises(ProofError, match="not an unencrypted PEM private key"):
        store.create_run(run_id="r")
    assert not (tmp_path / "s").exists()


def test_a_missing_cryptography_names_the_extra(store: Store, monkeypatch: pytest.MonkeyPatch,
                                                key: Path) -> None:
    head = sign_head(make_run(store, 2), key)
    for name in [m for m in sys.modules if m == "cryptography" or m.startswith("cryptography.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'agentlog\[sign\]'"):
        verify_proof(head)
