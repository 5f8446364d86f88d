"""Signed heads and Merkle proofs as small JSON documents, and the one function that checks
them without the store.

Three kinds, each a JSON object with ``"agentlog": <kind>`` and ``"version": 1``:

- ``signed-head``: a run's size, Merkle root (:mod:`agentlog.merkle`) and chain head at one
  moment, signed with ed25519 (RFC 6962's Signed Tree Head, for one run). About 400 bytes.
  Kept outside the store (a ticket, a CI artifact, an email), it detects what the chain alone
  cannot: a cut tail, and a history re-chained from the first event on.
- ``inclusion-proof``: one event (its canonical body, the hash before it) and the Merkle path
  from its hash to the root of a run of ``size`` events; with a signed head of that size, it
  proves the event is in the run the head's key signed.
- ``consistency-proof``: the Merkle path that shows a run of ``new_size`` events extends the
  run of ``old_size`` an earlier signed head names, so nothing in it was changed or removed.

:func:`verify_proof` checks any of them: hashes (pure), and signatures with ed25519 (pure
computation, from the ``cryptography`` package: ``pip install 'agentlog[sign]'``). A well
formed document that does not verify is a result, not an exception.

>>> head = {"agentlog": "signed-head", "version": 1, "run_id": "r", "size": 0,
...         "root": EMPTY_ROOT.hex(), "head": "0" * 64, "signed_at": "2026-01-01T00:00:00Z",
...         "public_key": "A" * 43 + "=", "signature": "A" * 86 + "=="}
>>> check = verify_proof(head)
>>> check.ok, check.problems[0][:37]
(False, 'the signature does not verify for key')
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .chain import chain_hash
from .errors import ProofError, missing_dependency
from .merkle import EMPTY_ROOT, leaf_hash, root_from_inclusion, verify_consistency

__all__ = ["CONSISTENCY_PROOF", "INCLUSION_PROOF", "SIGNED_HEAD", "ConsistencyProof",
           "InclusionProof", "ProofCheck", "SignedHead", "head_message", "key_id", "path_bytes",
           "path_text", "public_key_bytes", "read_document", "verify_proof", "verify_signature"]

SIGNED_HEAD: Final = "signed-head"
INCLUSION_PROOF: Final = "inclusion-proof"
CONSISTENCY_PROOF: Final = "consistency-proof"
VERSION: Final = 1
_HEX64 = re.compile(r"[0-9a-f]{64}")


def head_message(run_id: str, size: int, root: str, head: str, signed_at: str) -> bytes:
    """The bytes a signed head's signature covers: one fact per line, like a transparency-log
    checkpoint note.

    >>> print(head_message("r1", 3, "ab" * 32, "cd" * 32, "2026-01-01T00:00:00Z").decode())
    agentlog signed head v1
    run r1
    size 3
    root abababababababababababababababababababababababababababababababab
    head cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd
    signed 2026-01-01T00:00:00Z
    <BLANKLINE>
    """
    return (f"agentlog signed head v{VERSION}\nrun {run_id}\nsize {size}\nroot {root}\n"
            f"head {head}\nsigned {signed_at}\n").encode()


def key_id(public_key: bytes) -> str:
    """A short name for a public key: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def public_key_bytes(value: str | bytes, where: str = "public key") -> bytes:
    """The 32 raw bytes of an ed25519 public key given raw, as base64, as hex, or as PEM text.

    Raises:
        ProofError: ``value`` is none of those.
    """
    if isinstance(value, bytes) and len(value) == 32:
        return value
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    text = text.strip()
    if text.startswith("-----BEGIN PUBLIC KEY-----"):
        body = "".join(line for line in text.splitlines() if not line.startswith("-----"))
        raw = _b64(body, where)
        if len(raw) == 44 and raw.startswith(bytes.fromhex("302a300506032b6570032100")):
            return raw[12:]  # the SubjectPublicKeyInfo of an ed25519 key
        raise ProofError(where, "a PEM public key that is not an ed25519 key")
    if _HEX64.fullmatch(text.lower()):
        return bytes.fromhex(text)
    raw = _b64(text, where)
    if len(raw) != 32:
        raise ProofError(where, f"an ed25519 public key has 32 bytes, this has {len(raw)}")
    return raw


def _b64(text: str, where: str, field: str | None = None) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ProofError(where, "not base64", field=field) from None


# --- documents ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedHead:
    """A run's size, Merkle root and chain head, signed (see the module docstring)."""

    run_id: str
    """The run it was signed for."""
    size: int
    """How many events it covers (seq ``0..size-1``, a fork's prefix included)."""
    root: str
    """The Merkle root of their hashes (64 hex)."""
    head: str
    """The chain hash of event ``size - 1`` (64 hex)."""
    signed_at: str
    """When it was signed (ISO-8601, UTC)."""
    public_key: str
    """The signer's ed25519 public key, base64 of 32 bytes."""
    signature: str
    """The ed25519 signature of :meth:`message`, base64 of 64 bytes."""

    @property
    def key_id(self) -> str:
        """A short name of the signer's key."""
        return key_id(_b64(self.public_key, "signed head", "public_key"))

    def message(self) -> bytes:
        """The signed bytes (:func:`head_message`)."""
        return head_message(self.run_id, self.size, self.root, self.head, self.signed_at)

    def to_json(self) -> dict[str, Any]:
        """The document, as written to a file."""
        return {"agentlog": SIGNED_HEAD, "version": VERSION, "run_id": self.run_id,
                "size": self.size, "root": self.root, "head": self.head,
                "signed_at": self.signed_at, "public_key": self.public_key,
                "signature": self.signature}

    @classmethod
    def from_json(cls, obj: Any, where: str = "signed head") -> SignedHead:
        """Read a signed head, checking its shape.

        Raises:
            ProofError: naming the field that is missing or malformed.
        """
        _kind(obj, SIGNED_HEAD, where)
        return cls(run_id=_text(obj, "run_id", where), size=_count(obj, "size", where),
                   root=_hex(obj, "root", where), head=_hex(obj, "head", where),
                   signed_at=_text(obj, "signed_at", where),
                   public_key=_text(obj, "public_key", where),
                   signature=_text(obj, "signature", where))


@dataclass(frozen=True, slots=True, kw_only=True)
class InclusionProof:
    """Event ``seq`` is in the run of ``size`` events whose Merkle root is ``root``."""

    run_id: str
    seq: int
    size: int
    event_hash: str
    """The event's chain hash: the Merkle leaf."""
    root: str
    path: tuple[str, ...]
    """The Merkle path, leaf first: base64 of 32 bytes each (a third shorter than hex)."""
    prev: str | None = None
    """The chain hash before the event; with ``event`` it proves the event's content."""
    event: str | None = None
    """The event's canonical JSON body (the hashed text)."""
    signed_head: SignedHead | None = None
    """A signed head of ``size`` events, if one was given to ``prove``."""

    def to_json(self) -> dict[str, Any]:
        """The document, as written to a file."""
        return {"agentlog": INCLUSION_PROOF, "version": VERSION, "run_id": self.run_id,
                "seq": self.seq, "size": self.size, "event_hash": self.event_hash,
                "root": self.root, "path": list(self.path), "prev": self.prev, "event": self.event,
                "signed_head": None if self.signed_head is None else self.signed_head.to_json()}

    @classmethod
    def from_json(cls, obj: Any, where: str = "inclusion proof") -> InclusionProof:
        """Read an inclusion proof, checking its shape.

        Raises:
            ProofError: naming the field that is missing or malformed.
        """
        _kind(obj, INCLUSION_PROOF, where)
        event = obj.get("event")
        if event is not None and not isinstance(event, str):
            raise ProofError(where, "must be the event's JSON text or null", field="event")
        return cls(run_id=_text(obj, "run_id", where), seq=_count(obj, "seq", where),
                   size=_count(obj, "size", where), event_hash=_hex(obj, "event_hash", where),
                   root=_hex(obj, "root", where), path=_path(obj, where),
                   prev=_hex(obj, "prev", where) if obj.get("prev") is not None else None,
                   event=event, signed_head=_signed(obj, "signed_head", where))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsistencyProof:
    """The run of ``new_size`` events (root ``new_root``) extends the run of ``old_size``."""

    run_id: str
    old_size: int
    old_root: str
    new_size: int
    new_root: str
    new_head: str
    """The chain hash of event ``new_size - 1``."""
    path: tuple[str, ...]
    old_signed: SignedHead | None = None
    """The earlier signed head the proof starts from."""
    new_signed: SignedHead | None = None
    """A signed head of the new size, if a key was given to ``prove``."""

    def to_json(self) -> dict[str, Any]:
        """The document, as written to a file."""
        return {"agentlog": CONSISTENCY_PROOF, "version": VERSION, "run_id": self.run_id,
                "old_size": self.old_size, "old_root": self.old_root, "new_size": self.new_size,
                "new_root": self.new_root, "new_head": self.new_head, "path": list(self.path),
                "old_signed": None if self.old_signed is None else self.old_signed.to_json(),
                "new_signed": None if self.new_signed is None else self.new_signed.to_json()}

    @classmethod
    def from_json(cls, obj: Any, where: str = "consistency proof") -> ConsistencyProof:
        """Read a consistency proof, checking its shape.

        Raises:
            ProofError: naming the field that is missing or malformed.
        """
        _kind(obj, CONSISTENCY_PROOF, where)
        return cls(run_id=_text(obj, "run_id", where), old_size=_count(obj, "old_size", where),
                   old_root=_hex(obj, "old_root", where), new_size=_count(obj, "new_size", where),
                   new_root=_hex(obj, "new_root", where), new_head=_hex(obj, "new_head", where),
                   path=_path(obj, where), old_signed=_signed(obj, "old_signed", where),
                   new_signed=_signed(obj, "new_signed", where))


Document = SignedHead | InclusionProof | ConsistencyProof
_READERS: Final[dict[str, Callable[[Any, str], Document]]] = {
    SIGNED_HEAD: SignedHead.from_json, INCLUSION_PROOF: InclusionProof.from_json,
    CONSISTENCY_PROOF: ConsistencyProof.from_json}


def read_document(obj: Any, where: str = "document") -> Document:
    """A signed head or proof from its parsed JSON.

    Raises:
        ProofError: not one of the three kinds, or a field is missing or malformed.
    """
    kind = obj.get("agentlog") if isinstance(obj, Mapping) else None
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        raise ProofError(where, f"not a signed head or proof: \"agentlog\" must be one of "
                                f"{', '.join(_READERS)}, got {kind!r}", field="agentlog")
    return reader(obj, where)


def _kind(obj: Any, kind: str, where: str) -> None:
    if not isinstance(obj, Mapping):
        raise ProofError(where, f"expected a JSON object, got {type(obj).__name__}")
    if obj.get("agentlog") != kind:
        raise ProofError(where, f"expected {kind!r}, got {obj.get('agentlog')!r}", field="agentlog")
    if obj.get("version") != VERSION:
        raise ProofError(where, f"version {obj.get('version')!r}; this agentlog reads version {VERSION}",
                         field="version")


def _text(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ProofError(where, f"must be a string, got {value!r}", field=key)
    return value


def _count(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if type(value) is not int or value < 0:
        raise ProofError(where, f"must be an int >= 0, got {value!r}", field=key)
    return value


def _hex(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ProofError(where, f"must be 64 lower-case hex digits, got {value!r}", field=key)
    return value


def _path(obj: Mapping[str, Any], where: str) -> tuple[str, ...]:
    value = obj.get("path")
    if not isinstance(value, list) or not all(isinstance(p, str) and _B64_32.fullmatch(p) for p in value):
        raise ProofError(where, "must be a list of hashes, each base64 of 32 bytes", field="path")
    if len(value) > 128:
        raise ProofError(where, f"{len(value)} hashes; a proof of a run of fewer than 2**64 events has "
                                "at most 128", field="path")
    return tuple(value)


_B64_32 = re.compile(r"[A-Za-z0-9+/]{43}=")


def path_bytes(path: tuple[str, ...]) -> list[bytes]:
    """The 32-byte hashes of a proof's path."""
    return [base64.b64decode(p) for p in path]


def path_text(hashes: list[bytes]) -> tuple[str, ...]:
    """A proof's path as written: base64 of each hash."""
    return tuple(base64.b64encode(h).decode("ascii") for h in hashes)


def _signed(obj: Mapping[str, Any], key: str, where: str) -> SignedHead | None:
    value = obj.get(key)
    return None if value is None else SignedHead.from_json(value, f"{where}: {key}")


# --- checking ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProofCheck:
    """What :func:`verify_proof` found.

    >>> print(ProofCheck(ok=True, kind="signed-head", proves="run r has 3 events", signers=("ab12",)))
    ok: run r has 3 events (signed by key ab12)
    """

    ok: bool
    """True if every hash and signature checks (and every signer is the pinned key)."""
    kind: str
    """``signed-head``, ``inclusion-proof`` or ``consistency-proof``."""
    proves: str
    """What the document claims, in words (true only if ``ok``)."""
    signers: tuple[str, ...] = ()
    """Key ids of the signatures that verified."""
    problems: tuple[str, ...] = field(default=())
    """What does not check, in words."""
    pinned: bool = False
    """True if a public key was given and every signature is by it."""

    def __str__(self) -> str:
        by = f" (signed by key {', '.join(self.signers)}{', pinned' if self.pinned else ''})" \
            if self.signers else ""
        if self.ok:
            return f"ok: {self.proves}{by}"
        return f"NOT OK: {self.proves}\n" + "\n".join(f"  {p}" for p in self.problems)


def verify_signature(head: SignedHead, public_key: bytes | None = None) -> list[str]:
    """Problems with a signed head's signature (``[]`` if it verifies).

    Args:
        head: the signed head.
        public_key: if given, the head must be signed by this key (32 raw bytes).

    Raises:
        MissingDependencyError: ``cryptography`` is not installed.
    """
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        raise missing_dependency("cryptography", "sign") from None
    try:
        raw, sig = base64.b64decode(head.public_key, validate=True), base64.b64decode(head.signature, validate=True)
    except (binascii.Error, ValueError):
        return ["the public key or the signature is not base64"]
    if len(raw) != 32 or len(sig) != 64:
        return [f"an ed25519 key has 32 bytes and a signature 64; got {len(raw)} and {len(sig)}"]
    problems = []
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, head.message())
    except InvalidSignature:
        problems.append(f"the signature does not verify for key {key_id(raw)}: the head or its "
                        "signature was changed")
    if public_key is not None and raw != public_key:
        problems.append(f"signed by key {key_id(raw)}, not by the expected key {key_id(public_key)}")
    return problems


def verify_proof(doc: Document | Mapping[str, Any], *, public_key: str | bytes | None = None) -> ProofCheck:
    """Check a signed head or proof without the store: its hashes and its signatures.

    Args:
        doc: a document or its parsed JSON.
        public_key: require every signature to be by this ed25519 key (raw, base64, hex or
            PEM). Without it a signature only shows the document was not changed since some
            key signed it; pin the key to know whose.

    Returns:
        The result; ``ok`` is False if anything does not check.

    Raises:
        ProofError: the document or the key is malformed.
        MissingDependencyError: a signature is to be checked and ``cryptography`` is missing.
    """
    if not isinstance(doc, (SignedHead, InclusionProof, ConsistencyProof)):
        doc = read_document(doc)
    pin = None if public_key is None else public_key_bytes(public_key)
    problems: list[str] = []
    signers: list[str] = []

    def signed(head: SignedHead | None, size: int, root: str, what: str) -> None:
        if head is None:
            return
        found = verify_signature(head, pin)
        problems.extend(f"{what}: {p}" for p in found)
        if not found:
            signers.append(head.key_id)
        if (head.size, head.root) != (size, root):
            problems.append(f"{what} covers {head.size} events with root {head.root[:12]}…, "
                            f"the proof {size} with root {root[:12]}…")
        if head.run_id != doc.run_id:
            problems.append(f"{what} was signed for run {head.run_id!r}, the proof is for {doc.run_id!r}")

    if isinstance(doc, SignedHead):
        proves = f"run {doc.run_id} had {doc.size:,} events with root {doc.root[:12]}… at {doc.signed_at}"
        found = verify_signature(doc, pin)
        problems.extend(found)
        if not found:
            signers.append(doc.key_id)
        if doc.size == 0 and doc.root != EMPTY_ROOT.hex():
            problems.append("an empty run's root is the SHA-256 of nothing")
    elif isinstance(doc, InclusionProof):
        proves = (f"event seq {doc.seq} (hash {doc.event_hash[:12]}…) is in run {doc.run_id} "
                  f"of {doc.size:,} events with root {doc.root[:12]}…")
        problems.extend(_inclusion_problems(doc))
        signed(doc.signed_head, doc.size, doc.root, "the signed head")
    else:
        proves = (f"run {doc.run_id} of {doc.new_size:,} events (root {doc.new_root[:12]}…) extends "
                  f"its first {doc.old_size:,} (root {doc.old_root[:12]}…): nothing in them changed")
        if not verify_consistency(doc.old_size, doc.new_size, bytes.fromhex(doc.old_root),
                                  bytes.fromhex(doc.new_root), path_bytes(doc.path)):
            problems.append("the consistency path does not lead from the old root to the new root")
        signed(doc.old_signed, doc.old_size, doc.old_root, "the old signed head")
        signed(doc.new_signed, doc.new_size, doc.new_root, "the new signed head")
        if doc.new_signed is not None and doc.new_signed.head != doc.new_head:
            problems.append("the new signed head names another chain head")
    if pin is not None and not signers:
        problems.append(f"nothing in it is signed, so nothing shows key {key_id(pin)} vouches for it")
    return ProofCheck(ok=not problems, kind=_KIND_OF[type(doc)], proves=proves,
                      signers=tuple(dict.fromkeys(signers)),
                      problems=tuple(problems), pinned=pin is not None and not problems)


_KIND_OF: Final[dict[type, str]] = {SignedHead: SIGNED_HEAD, InclusionProof: INCLUSION_PROOF,
                                    ConsistencyProof: CONSISTENCY_PROOF}


def _inclusion_problems(doc: InclusionProof) -> list[str]:
    problems = []
    root = root_from_inclusion(doc.seq, doc.size, leaf_hash(bytes.fromhex(doc.event_hash)),
                               path_bytes(doc.path))
    if root is None:
        problems.append(f"a path of {len(doc.path)} hashes cannot place seq {doc.seq} in a tree of "
                        f"{doc.size} events")
    elif root.hex() != doc.root:
        problems.append("the path does not lead from the event's hash to the root")
    if doc.event is not None:
        if doc.prev is None:
            problems.append("the event's body is given without the hash before it")
        elif chain_hash(doc.prev, doc.event) != doc.event_hash:
            problems.append("the event's body does not hash to its event hash: the event was changed")
        problems.extend(_body_seq(doc.event, doc.seq))
    return problems


def _body_seq(body: str, seq: int) -> list[str]:
    try:
        found = json.loads(body).get("seq")
    except (ValueError, AttributeError):
        return ["the event's body is not a JSON object"]
    return [] if found == seq else [f"the event's body is seq {found!r}, not {seq}"]
