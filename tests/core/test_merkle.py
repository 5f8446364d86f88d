"""The Merkle tree against RFC 6962's test vectors and an oracle written from the RFC's text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.merkle import (
    EMPTY_ROOT,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    tree_root,
    verify_consistency,
    verify_inclusion,
)

VECTORS = json.loads((Path(__file__).parents[1] / "golden" / "merkle" / "rfc6962_vectors.json").read_text())
LEAVES = [leaf_hash(bytes.fromhex(d)) for d in VECTORS["leaves"]]
ROOTS = [bytes.fromhex(r) for r in VECTORS["roots"]]
SOME_HASH = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")


def h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


# --- the oracle: RFC 9162 §2.1.1, §2.1.3.1 and §2.1.4.1, transcribed as recursion --------------


def k_of(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(d: list[bytes]) -> bytes:
    if not d:
        return h(b"")
    if len(d) == 1:
        return h(b"\x00" + d[0])
    k = k_of(len(d))
    return h(b"\x01" + mth(d[:k]) + mth(d[k:]))


def path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = k_of(len(d))
    return path(m, d[:k]) + [mth(d[k:])] if m < k else path(m - k, d[k:]) + [mth(d[:k])]


def subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    if m == len(d):
        return [] if b else [mth(d)]
    k = k_of(len(d))
    if m <= k:
        return subproof(m, d[:k], b) + [mth(d[k:])]
    return subproof(m - k, d[k:], False) + [mth(d[:k])]


def data(n: int) -> list[bytes]:
    return [f"event {i}".encode() for i in range(n)]


# --- RFC 6962 vectors ------------------------------------------------------------------------


def test_roots_of_the_rfc_vectors() -> None:
    assert tree_root([]) == EMPTY_ROOT == bytes.fromhex(VECTORS["empty_root"])
    for n in range(1, 9):
        assert tree_root(LEAVES[:n]) == ROOTS[n - 1], n


@pytest.mark.parametrize("case", VECTORS["inclusion"], ids=lambda c: f"{c['index']}of{c['size']}")
def test_inclusion_proofs_of_the_rfc_vectors(case: dict[str, Any]) -> None:
    index, size = case["index"], case["size"]
    want = [bytes.fromhex(p) for p in case["proof"]]
    assert inclusion_proof(LEAVES[:size], index) == want
    root = ROOTS[size - 1]
    assert verify_inclusion(index, size, LEAVES[index], want, root)
    for desc, probe in corrupt_inclusion(index, size, want, root, LEAVES[index]):
        assert not verify_inclusion(*probe), desc


@pytest.mark.parametrize("case", VECTORS["consistency"], ids=lambda c: f"{c['old']}to{c['new']}")
def test_consistency_proofs_of_the_rfc_vectors(case: dict[str, Any]) -> None:
    old, new = case["old"], case["new"]
    want = [bytes.fromhex(p) for p in case["proof"]]
    assert consistency_proof(LEAVES[:new], old) == want
    r1, r2 = ROOTS[old - 1], ROOTS[new - 1]
    assert verify_consistency(old, new, r1, r2, want)
    if want:
        for desc, probe in corrupt_consistency(old, new, r1, r2, want):
            assert not verify_consistency(*probe), desc


def test_edge_cases_of_consistency() -> None:
    r1, r2 = b"don't care 1".ljust(32, b"."), b"don't care 2".ljust(32, b".")
    assert verify_consistency(0, 0, r1, r1, [])
    assert verify_consistency(0, 1, r1, r2, [])
    assert not verify_consistency(0, 0, r1, r2, [])
    assert not verify_consistency(1, 0, r1, r2, [])
    assert not verify_consistency(1, 2, r1, r2, [])
    assert not verify_consistency(0, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])
    assert not verify_consistency(1, 1, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])


def test_edge_cases_of_inclusion() -> None:
    one = leaf_hash(b"data")
    assert verify_inclusion(0, 1, one, [], one)
    assert not verify_inclusion(0, 1, b"", [], one) and not verify_inclusion(0, 1, one, [], b"")
    for index, size in ((0, 0), (1, 0), (2, 1)):
        assert not verify_inclusion(index, size, SOME_HASH, [], EMPTY_ROOT)
    with pytest.raises(IndexError):
        inclusion_proof(LEAVES[:3], 3)
    with pytest.raises(ValueError):
        consistency_proof(LEAVES[:3], 4)


# --- the oracle, every (m, n) up to 40 ---------------------------------------------------------


def test_every_root_and_proof_equals_the_rfc_recursion() -> None:
    d = data(40)
    leaves = [leaf_hash(x) for x in d]
    for n in range(41):
        root = tree_root(leaves[:n])
        assert root == mth(d[:n]), n
        for m in range(n):
            proof = inclusion_proof(leaves[:n], m)
            assert proof == path(m, d[:n]), (m, n)
            assert verify_inclusion(m, n, leaves[m], proof, root)
        for m in range(1, n + 1):
            proof = consistency_proof(leaves[:n], m)
            assert proof == ([] if m == n else subproof(m, d[:n], True)), (m, n)
            assert verify_consistency(m, n, tree_root(leaves[:m]), root, proof)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1),
                                                       st.integers(1, n), st.integers(0, 255))))
def test_a_flipped_bit_in_any_proof_hash_fails(case: tuple[int, int, int, int]) -> None:
    n, index, old, bit = case
    leaves = [leaf_hash(x) for x in data(n)]
    root = tree_root(leaves)
    proof = inclusion_proof(leaves, index)
    assert verify_inclusion(index, n, leaves[index], proof, root)
    for i in range(len(proof)):
        assert not verify_inclusion(index, n, leaves[index], flip(proof, i, bit), root)
    cproof = consistency_proof(leaves, old)
    assert verify_consistency(old, n, tree_root(leaves[:old]), root, cproof)
    for i in range(len(cproof)):
        assert not verify_consistency(old, n, tree_root(leaves[:old]), root, flip(cproof, i, bit))
    if old < n:  # a log that was rewritten after the old head does not extend it
        other = [leaf_hash(b"changed")] + leaves[1:]
        assert not verify_consistency(old, n, tree_root(other[:old]), root, cproof)


def flip(proof: list[bytes], i: int, bit: int) -> list[bytes]:
    out = list(proof)
    b = bytearray(out[i])
    b[bit % 32] ^= 1 << (bit % 8)
    out[i] = bytes(b)
    return out


# --- the corruptions transparency-dev/merkle tries ------------------------------------------------

Probe = tuple[str, tuple[Any, ...]]


def corrupt_inclusion(index: int, size: int, proof: list[bytes], root: bytes, leaf: bytes) -> list[Probe]:
    probes: list[Probe] = [
        ("index - 1", (index - 1, size, leaf, proof, root)),
        ("index + 1", (index + 1, size, leaf, proof, root)),
        ("index ^ 2", (index ^ 2, size, leaf, proof, root)),
        ("size * 2", (index, size * 2, leaf, proof, root)),
        ("size // 2", (index, size // 2, leaf, proof, root)),
        ("wrong leaf", (index, size, b"WrongLeaf", proof, root)),
        ("empty root", (index, size, leaf, proof, EMPTY_ROOT)),
        ("random root", (index, size, leaf, proof, SOME_HASH)),
        ("trailing garbage", (index, size, leaf, [*proof, b""], root)),
        ("trailing root", (index, size, leaf, [*proof, root], root)),
        ("preceding garbage", (index, size, leaf, [b"", *proof], root)),
        ("preceding root", (index, size, leaf, [root, *proof], root)),
    ]
    probes += [(f"bit flip in {i}", (index, size, leaf, flip(proof, i, 3), root)) for i in range(len(proof))]
    if proof:
        probes.append(("removed component", (index, size, leaf, proof[:-1], root)))
    if len(proof) > 1:
        probes.append(("inserted component", (index, size, leaf, [proof[0], SOME_HASH, *proof[1:]], root)))
    return probes


def corrupt_consistency(old: int, new: int, r1: bytes, r2: bytes, proof: list[bytes]) -> list[Probe]:
    wrong = b"WrongRoot".ljust(32, b".")
    probes: list[Probe] = [
        ("old - 1", (old - 1, new, r1, r2, proof)),
        ("old + 1", (old + 1, new, r1, r2, proof)),
        ("old ^ 2", (old ^ 2, new, r1, r2, proof)),
        ("new * 2", (old, new * 2, r1, r2, proof)),
        ("new // 2", (old, new // 2, r1, r2, proof)),
        ("wrong old root", (old, new, wrong, r2, proof)),
        ("wrong new root", (old, new, r1, wrong, proof)),
        ("swapped roots", (old, new, r2, r1, proof)),
        ("empty proof", (old, new, r1, r2, [])),
        ("trailing garbage", (old, new, r1, r2, [*proof, b""])),
        ("trailing old root", (old, new, r1, r2, [*proof, r1])),
        ("trailing new root", (old, new, r1, r2, [*proof, r2])),
        ("preceding garbage", (old, new, r1, r2, [b"", *proof])),
        ("preceding old root", (old, new, r1, r2, [r1, *proof])),
        ("preceding new root", (old, new, r1, r2, [r2, *proof])),
        ("preceding proof[0]", (old, new, r1, r2, [proof[0], *proof])),
        ("truncated", (old, new, r1, r2, proof[:-1])),
    ]
    probes += [(f"bit flip in {i}", (old, new, r1, r2, flip(proof, i, 4))) for i in range(len(proof))]
    return probes


