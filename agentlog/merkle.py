"""A Merkle tree over a run's event hashes, shaped as RFC 6962 / RFC 9162 define it.

The hash chain (:mod:`agentlog.chain`) makes every event depend on all before it, so one kept
head pins the whole history. The tree adds what transparency logs add: a proof that one
event is in a run of ``n`` events (an *inclusion proof*, about ``log2(n)`` hashes) and a proof
that a run of ``n`` events extends an earlier run of ``m`` (a *consistency proof*), each
checked with a few hundred bytes and without the store.

Definitions (RFC 9162 §2.1), with SHA-256:

- a leaf is the 32 bytes of an event's chain hash; ``leaf_hash(d) = H(0x00 || d)``;
- ``MTH({}) = H()``; ``MTH({d}) = leaf_hash(d)``;
- ``MTH(D[n]) = H(0x01 || MTH(D[0:k]) || MTH(D[k:n]))`` with ``k`` the largest power of two
  smaller than ``n``.

Proof generation follows §2.1.3.1 and §2.1.4.1 (``PATH`` and ``PROOF``), verification
§2.1.3.2 and §2.1.4.2. Pure: no I/O. Functions take *leaf hashes* (:func:`leaf_hashes`), so
a caller hashes each event once, and a :class:`Tree` built once gives the root and any
number of proofs without hashing again (``2n`` hashes in all for ``n`` events).

>>> leaves = [leaf_hash(bytes([i]) * 32) for i in range(5)]
>>> root = tree_root(leaves)
>>> verify_inclusion(3, 5, leaves[3], inclusion_proof(leaves, 3), root)
True
>>> verify_consistency(2, 5, tree_root(leaves[:2]), root, consistency_proof(leaves, 2))
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

__all__ = ["EMPTY_ROOT", "Tree", "consistency_proof", "inclusion_proof", "leaf_hash", "leaf_hashes", "node_hash",
           "root_from_inclusion", "tree_root", "verify_consistency", "verify_inclusion"]

#: The root of the empty tree: SHA-256 of nothing.
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
_SIZE: Final = 32


def leaf_hashes(hashes_hex: Sequence[str]) -> list[bytes]:
    """The leaf hashes of events whose chain hashes (hex) are ``hashes_hex``, in one pass."""
    sha256, fromhex = hashlib.sha256, bytes.fromhex
    return [sha256(b"\x00" + fromhex(h)).digest() for h in hashes_hex]


def leaf_hash(data: bytes) -> bytes:
    """``H(0x00 || data)``: the hash of a leaf (for agentlog, ``data`` is an event's hash).

    >>> leaf_hash(b"").hex()[:16]  # RFC 6962's empty leaf
    '6e340b9cffb37a98'
    """
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``H(0x01 || left || right)``: the hash of an inner node."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


class Tree:
    """The tree of some leaf hashes, built once (``n - 1`` node hashes); its root and proofs
    are then read from it without hashing again.

    Every level is kept: pairing neighbours level by level and carrying a lone last node up
    unchanged builds exactly the left-balanced tree of RFC 6962, and the node at level ``j``,
    index ``i`` is ``MTH(D[i * 2**j : min((i + 1) * 2**j, n)])``.

    >>> t = Tree([leaf_hash(bytes([i])) for i in range(3)])
    >>> t.root == tree_root(t.levels[0]), len(t.inclusion(2)), len(t.consistency(2))
    (True, 1, 1)
    """

    def __init__(self, leaves: Sequence[bytes]) -> None:
        levels = [list(leaves)]
        while len(levels[-1]) > 1:
            level = levels[-1]
            up = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                up.append(level[-1])
            levels.append(up)
        self.levels = levels

    @property
    def size(self) -> int:
        """How many leaves."""
        return len(self.levels[0])

    @property
    def root(self) -> bytes:
        """``MTH`` of all the leaves."""
        return self.levels[-1][0] if self.size else EMPTY_ROOT

    def subroot(self, a: int, b: int) -> bytes:
        """``MTH(D[a:b])`` of a subtree the RFC's recursion uses (aligned; full, or reaching
        the end); any other range is hashed from its leaves."""
        j = (b - a - 1).bit_length()  # the smallest 2**j >= b - a
        if a % (1 << j) == 0 and (b - a == 1 << j or b == self.size):
            return self.levels[j][a >> j]
        return tree_root(self.levels[0][a:b])  # pragma: no cover - not reached by PATH or PROOF

    def inclusion(self, index: int) -> list[bytes]:
        """``PATH(index, D[n])``: the sibling hashes from leaf ``index`` up to the root.

        Raises:
            IndexError: ``index`` is not a leaf of the tree.
        """
        if not 0 <= index < self.size:
            raise IndexError(f"leaf {index} is not in a tree of {self.size} leaves")
        siblings: list[bytes] = []
        lo, hi = 0, self.size
        while hi - lo > 1:  # walk down, noting the subtree on the other side at each split
            k = _split(hi - lo)
            if index < lo + k:
                siblings.append(self.subroot(lo + k, hi))
                hi = lo + k
            else:
                siblings.append(self.subroot(lo, lo + k))
                lo += k
        return siblings[::-1]  # the path is given leaf first

    def consistency(self, old_size: int) -> list[bytes]:
        """``PROOF(old_size, D[n])``: what shows the first ``old_size`` leaves are a prefix.

        Raises:
            ValueError: ``old_size`` is not in ``0..n``.
        """
        n = self.size
        if not 0 <= old_size <= n:
            raise ValueError(f"old size {old_size} is not in 0..{n}")
        if old_size in (0, n):
            return []
        proof: list[bytes] = []
        m, lo, hi, whole = old_size, 0, n, True
        while m != hi - lo:  # SUBPROOF(m, D[lo:hi], whole)
            k = _split(hi - lo)
            if m <= k:
                proof.append(self.subroot(lo + k, hi))
                hi = lo + k
            else:
                proof.append(self.subroot(lo, lo + k))
                m, lo, whole = m - k, lo + k, False
        if not whole:
            proof.append(self.subroot(lo, hi))
        return proof[::-1]


def tree_root(leaves: Sequence[bytes]) -> bytes:
    """``MTH`` of the leaf hashes: ``n - 1`` node hashes, level by level (see :class:`Tree`)."""
    if not leaves:
        return EMPTY_ROOT
    level = list(leaves)
    while len(level) > 1:
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """``PATH(index, D[n])`` (see :meth:`Tree.inclusion`).

    Raises:
        IndexError: ``index`` is not a leaf of the tree.
    """
    return Tree(leaves).inclusion(index)


def consistency_proof(leaves: Sequence[bytes], old_size: int) -> list[bytes]:
    """``PROOF(old_size, D[n])`` (see :meth:`Tree.consistency`).

    Raises:
        ValueError: ``old_size`` is not in ``0..len(leaves)``.
    """
    return Tree(leaves).consistency(old_size)


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes | None:
    """The root that ``proof`` gives for leaf hash ``leaf`` at ``index`` in a tree of ``size``,
    or ``None`` if the proof has the wrong length or shape (RFC 9162 §2.1.3.2)."""
    if not 0 <= index < size or len(leaf) != _SIZE or any(len(p) != _SIZE for p in proof):
        return None
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    """True if ``proof`` shows leaf hash ``leaf`` at ``index`` in the tree of ``size`` with ``root``."""
    return root_from_inclusion(index, size, leaf, proof) == root


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """True if ``proof`` shows the tree of ``new_size`` (``new_root``) extends the tree of
    ``old_size`` (``old_root``) (RFC 9162 §2.1.4.2)."""
    if not 0 <= old_size <= new_size or any(len(p) != _SIZE for p in proof):
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if old_size == 0:
        return not proof  # the empty tree is a prefix of every tree
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is a node of the new tree
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == old_root and sr == new_root
