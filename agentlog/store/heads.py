"""Signed heads of stored runs: sign, prove, and check a run against a head kept elsewhere.

The chain (``verify``) detects any change to a run's events *unless* the change is a cut tail
of a run that was never closed, or the whole log re-chained with ``run.json`` rewritten to
match: someone who can write the store can do both. A signed head (:mod:`agentlog.proofs`)
kept outside the store closes that gap: it pins the run's size, Merkle root and chain head at
one moment, and its signature says which key vouched for them.

Keys are ed25519, in PEM files (``agentlog keygen KEY``, or ``openssl genpkey -algorithm
ed25519``). A store signs every run it closes when it has a key: ``Store(path,
signing_key=KEY)`` or ``$AGENTLOG_SIGNING_KEY``; the head goes to ``signed-head.json`` in the
run's folder, from where it is meant to be copied somewhere the store's writers cannot reach.

Needs ``cryptography`` (``pip install 'agentlog[sign]'``) to sign or check signatures.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._words import with_article
from ..chain import GENESIS, Problem, ProblemKind
from ..errors import ProofError, missing_dependency
from ..merkle import Tree, leaf_hashes, tree_root
from ..proofs import (
    ConsistencyProof,
    InclusionProof,
    SignedHead,
    head_message,
    path_text,
    public_key_bytes,
    verify_signature,
)
from ._fs import write_atomic
from .meta import iso_time
from .store import KEY_ENV
from .wal import row_body

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from .run import Run

__all__ = ["KEY_ENV", "SIGNED_HEAD_FILE", "check_head", "generate_key", "load_private_key",
           "prove_consistency", "prove_inclusion", "read_signed_head", "run_leaves", "sign_head",
           "write_signed_head"]

#: Where a store that has a key puts the signed head of a run it closes.
SIGNED_HEAD_FILE: Final = "signed-head.json"


def _need_cryptography() -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise missing_dependency("cryptography", "sign") from None


# --- keys ------------------------------------------------------------------------------------


def load_private_key(source: str | os.PathLike[str] | Ed25519PrivateKey) -> Ed25519PrivateKey:
    """An ed25519 private key from a PEM file (PKCS#8, unencrypted), or the key itself.

    Raises:
        ProofError: the file cannot be read or holds no ed25519 private key.
    """
    _need_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if isinstance(source, Ed25519PrivateKey):
        return source

    where = os.fspath(source)
    try:
        data = Path(where).expanduser().read_bytes()
    except OSError as exc:
        raise ProofError(where, f"cannot read the key ({exc.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ProofError(where, f"not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ProofError(where, f"{with_article(type(key).__name__)}; signed heads use ed25519 keys "
                                "(agentlog keygen KEY makes one)")
    return key


def public_key_raw(key: Ed25519PrivateKey) -> bytes:
    """The 32 raw bytes of a private key's public key."""
    from cryptography.hazmat.primitives import serialization
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def generate_key(path: str | os.PathLike[str]) -> str:
    """Write a new ed25519 private key to ``path`` (PEM, mode 0600) and return its public key
    (base64), which is what a verifier pins.

    Raises:
        FileExistsError: ``path`` exists (a key is never overwritten).
    """
    _need_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    return base64.b64encode(public_key_raw(key)).decode()


# --- the tree of a run ----------------------------------------------------------------------


def run_leaves(run: Run) -> list[bytes]:
    """The Merkle leaf hashes of a run's events, a fork's parent prefix included."""
    return leaf_hashes(_hashes(run))


def sign_head(run: Run, key: str | os.PathLike[str] | Ed25519PrivateKey, *,
              signed_at_us: int | None = None) -> SignedHead:
    """Sign the run as it is now: its size, Merkle root and chain head.

    Args:
        run: the run (read as it is on disk now).
        key: the private key or its PEM file.
        signed_at_us: the signing time in µs since the epoch (default: now).

    Raises:
        ProofError: the key cannot be loaded.
        MissingDependencyError: ``cryptography`` is not installed.
    """
    return _sign(run.id, _hashes(run), key, signed_at_us)


def _sign(run_id: str, hashes: list[str], key: str | os.PathLike[str] | Ed25519PrivateKey,
          signed_at_us: int | None = None) -> SignedHead:
    private = load_private_key(key)
    at = iso_time(time.time_ns() // 1000 if signed_at_us is None else signed_at_us)
    root = tree_root(leaf_hashes(hashes)).hex()
    head = hashes[-1] if hashes else GENESIS
    signature = private.sign(head_message(run_id, len(hashes), root, head, at))
    return SignedHead(run_id=run_id, size=len(hashes), root=root, head=head, signed_at=at,
                      public_key=base64.b64encode(public_key_raw(private)).decode(),
                      signature=base64.b64encode(signature).decode())


def _hashes(run: Run) -> list[str]:
    hashes: list[str] = run.table().column("hash").to_pylist()
    return hashes


def write_signed_head(run: Run, key: str | os.PathLike[str] | Ed25519PrivateKey) -> Path:
    """Sign ``run`` and write the head to ``signed-head.json`` in its folder; return the path."""
    head = sign_head(run, key)
    path = run.path / SIGNED_HEAD_FILE
    write_atomic(path, (json.dumps(head.to_json(), indent=2) + "\n").encode())
    return path


def read_signed_head(source: str | os.PathLike[str]) -> SignedHead:
    """A signed head from a file.

    Raises:
        ProofError: the file cannot be read, is not JSON, or is not a signed head.
    """
    where = os.fspath(source)
    try:
        obj = json.loads(Path(where).expanduser().read_bytes())
    except OSError as exc:
        raise ProofError(where, f"cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise ProofError(where, f"not JSON ({exc})") from None
    return SignedHead.from_json(obj, where)


# --- proofs ------------------------------------------------------------------------------------


def prove_inclusion(run: Run, seq: int, *, head: SignedHead | None = None) -> InclusionProof:
    """Prove event ``seq`` is in the run: in the tree of the whole run, or of ``head.size``
    events when a signed head is given (so the proof checks against that head).

    Raises:
        EventNotFoundError: ``seq`` is not in the run (or not under the head).
        ProofError: ``head`` covers more events than the run has.
    """
    from ..errors import EventNotFoundError

    table = run.table()
    size = table.num_rows if head is None else head.size
    if size > table.num_rows:
        raise ProofError(f"run {run.id}", f"the signed head covers {size} events, the run has "
                                          f"{table.num_rows}: its tail was cut")
    if not 0 <= seq < size:
        raise EventNotFoundError(run.id, seq, size)
    hashes = table.column("hash").to_pylist()[:size]
    tree = Tree(leaf_hashes(hashes))
    row = _row(table, seq)
    return InclusionProof(run_id=run.id, seq=seq, size=size, event_hash=hashes[seq],
                          root=tree.root.hex(), path=path_text(tree.inclusion(seq)),
                          prev=hashes[seq - 1] if seq else GENESIS, event=row_body(row),
                          signed_head=head)


def prove_consistency(run: Run, old: SignedHead, *,
                      key: str | os.PathLike[str] | Ed25519PrivateKey | None = None) -> ConsistencyProof:
    """Prove the run as it is now extends the run ``old`` signed; sign the new head with
    ``key`` if given.

    Raises:
        ProofError: the run has fewer events than ``old`` covers (a cut tail).
    """
    hashes = _hashes(run)
    if old.size > len(hashes):
        raise ProofError(f"run {run.id}", f"the old signed head covers {old.size} events, the run "
                                          f"has {len(hashes)}: its tail was cut")
    tree = Tree(leaf_hashes(hashes))
    return ConsistencyProof(run_id=run.id, old_size=old.size, old_root=old.root,
                            new_size=len(hashes), new_root=tree.root.hex(),
                            new_head=hashes[-1] if hashes else GENESIS,
                            path=path_text(tree.consistency(old.size)),
                            old_signed=old, new_signed=None if key is None else _sign(run.id, hashes, key))


def check_head(run: Run, head: SignedHead, *, public_key: str | bytes | None = None) -> list[Problem]:
    """What is wrong with ``run`` against a signed head kept elsewhere (``[]``: nothing).

    The run must hold at least the head's events, with the same Merkle root and chain head
    (a run that grew since is fine), and the head's signature must verify (by
    ``public_key``, if given).
    """
    pin = None if public_key is None else public_key_bytes(public_key)
    problems = [Problem(kind=ProblemKind.SIGNATURE, seq=None, message=f"the signed head: {p}")
                for p in verify_signature(head, pin)]
    if head.run_id != run.id:
        problems.append(Problem(kind=ProblemKind.HEAD_MISMATCH, seq=None,
                                message=f"the signed head is of run {head.run_id!r}, not {run.id!r}"))
    hashes = _hashes(run)
    if len(hashes) < head.size:
        problems.append(Problem(kind=ProblemKind.HEAD_MISMATCH, seq=len(hashes),
                                message=f"the run has {len(hashes):,} events, the head signed at "
                                        f"{head.signed_at} covers {head.size:,}: seqs {len(hashes)}–"
                                        f"{head.size - 1} were cut"))
        return problems
    root = tree_root(leaf_hashes(hashes[:head.size])).hex()
    at = hashes[head.size - 1] if head.size else GENESIS
    if root != head.root or at != head.head:
        problems.append(Problem(kind=ProblemKind.HEAD_MISMATCH, seq=None,
                                message=f"the first {head.size:,} events hash to root {root[:12]}… and "
                                        f"head {at[:12]}…; the head signed at {head.signed_at} says "
                                        f"{head.root[:12]}… and {head.head[:12]}…: they were changed"))
    return problems


def _row(table: Any, seq: int) -> tuple[Any, ...]:
    import pyarrow as pa

    row = table.slice(seq, 1)
    cols = [row.column(i) for i in range(row.num_columns)]
    cols[5] = cols[5].cast(pa.int64())
    cols[1] = cols[1].cast(pa.string())
    return tuple(c[0].as_py() for c in cols)
