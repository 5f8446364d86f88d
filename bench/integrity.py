"""Benchmark what tamper evidence and validation cost: verify with and without the payload
check, signing a run, inclusion and consistency proofs (time and bytes), checking a proof
without the store, and the temp-file sweep a process's first writer does.

    python bench/integrity.py [--events N]

Each timed call is the public call a user makes, on a run read cold from disk in a fresh
``Store`` (segments, WAL tail, a fork's parent prefix included):

- ``run.verify()`` as shipped (chain, blobs, every payload parsed: DuckDB's JSON check on
  large segments, Python on the rest) against the same call with the payload check switched
  off, in this process: the ratio is what the payload check costs;
- ``sign_head(run, key)`` (reads every hash, builds the Merkle root, signs);
- ``prove_inclusion(run, seq)`` and ``prove_consistency(run, old_head)``, and their JSON size;
- ``verify_proof(doc)``: what a verifier without the store pays;
- ``RunWriter.close()`` on a store with a signing key against one without: signing at close;
- the sweep (``agentlog.store.tmp.sweep_store``) of a store of 1,000 runs.

Medians of repeated trials; progress on stderr, one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import logger, median_time

import agentlog.store.verify as verify_module
from agentlog.proofs import verify_proof
from agentlog.store import Store, tmp
from agentlog.store.heads import generate_key, prove_consistency, prove_inclusion, sign_head

log = logger("integrity")


def record(store: Store, run_id: str, n: int, *, segment_events: int = 65536) -> None:
    w = store.create_run(run_id=run_id, durability="none", segment_events=segment_events)
    for i in range(n):
        w.emit("llm.response", {"i": i, "message": {"role": "assistant", "content": f"answer {i} " * 8},
                                "usage": {"input_tokens": 120, "output_tokens": 30}},
               model="gpt-4o-mini", input_tokens=120, output_tokens=30, cost_usd=0.00004)
    w.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    n = args.events
    out: dict[str, object] = {"bench": "integrity", "events": n}
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        key = base / "key.pem"
        generate_key(key)
        store = Store(base / "store")
        log(f"recording {n:,} events")
        record(store, "big", n)

        # verify: with the payload check (as shipped) and without, alternating, cold Store each time
        real = verify_module._payload_problems

        def verify(check: bool) -> None:
            verify_module._payload_problems = real if check else (lambda tables, tail: [])
            try:
                assert Store(base / "store").run("big").verify().ok
            finally:
                verify_module._payload_problems = real

        verify(True)  # DuckDB's first import is not the check's cost
        with_check = median_time(5, lambda: verify(True))
        without = median_time(5, lambda: verify(False))
        out["verify"] = {"with_payload_check_s": round(with_check, 3), "chain_only_s": round(without, 3),
                         "events_per_s": round(n / with_check), "payload_check_ratio": round(with_check / without, 3)}
        log(f"verify {out['verify']}")

        run = Store(base / "store").run("big")
        sign_s = median_time(5, lambda: sign_head(Store(base / "store").run("big"), key))
        head = sign_head(run, key)
        inc_s = median_time(5, lambda: prove_inclusion(Store(base / "store").run("big"), n // 3))
        inclusion = prove_inclusion(run, n // 3, head=head)
        check_inc_s = median_time(25, lambda: verify_proof(inclusion))
        old = sign_head(Store(base / "store").run("big"), key)
        w = store.writer("big", durability="none")
        for i in range(1000):
            w.emit("note", {"after": i})
        w.close()
        cons_s = median_time(5, lambda: prove_consistency(Store(base / "store").run("big"), old))
        consistency = prove_consistency(Store(base / "store").run("big"), old)
        check_cons_s = median_time(25, lambda: verify_proof(consistency))
        size = len(json.dumps(inclusion.to_json()))
        out["proofs"] = {
            "sign_head_s": round(sign_s, 3), "signed_head_bytes": len(json.dumps(head.to_json())),
            "prove_inclusion_s": round(inc_s, 3), "inclusion_path_hashes": len(inclusion.path),
            "inclusion_proof_bytes": size,
            "inclusion_proof_bytes_without_event_and_head": len(json.dumps(
                {**inclusion.to_json(), "event": None, "signed_head": None})),
            "verify_inclusion_ms": round(check_inc_s * 1000, 3),
            "prove_consistency_s": round(cons_s, 3), "consistency_path_hashes": len(consistency.path),
            "consistency_proof_bytes": len(json.dumps(consistency.to_json())),
            "verify_consistency_ms": round(check_cons_s * 1000, 3)}
        log(f"proofs {out['proofs']}")

        # signing at close: the same 20,000-event run closed by a store with and without a key
        def close_time(signed: bool, i: int) -> float:
            s = Store(base / f"close-{signed}-{i}", signing_key=key if signed else None)
            record(s, "r", 20_000)  # record() closes; time a second close after a reopen
            w = s.writer("r", durability="none")
            w.emit("note", {"last": True})
            t0 = time.perf_counter()
            w.close()
            return time.perf_counter() - t0

        plain = sorted(close_time(False, i) for i in range(3))[1]
        signed = sorted(close_time(True, i) for i in range(3))[1]
        out["close_20k"] = {"plain_s": round(plain, 4), "signed_s": round(signed, 4),
                            "signing_at_close_ratio": round(signed / plain, 2)}
        log(f"close {out['close_20k']}")

        # the sweep of a store of 1,000 small runs (once per process, at its first writer)
        many = Store(base / "many")
        for i in range(1000):
            with many.create_run(run_id=f"r{i}", durability="none") as w:
                w.emit("note", {"i": i})
        sweep_s = median_time(5, lambda: tmp.sweep_store(Store(base / "many")))
        out["sweep_1000_runs_s"] = round(sweep_s, 4)
        log(f"sweep of 1,000 runs: {sweep_s:.4f} s")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
