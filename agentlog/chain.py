"""The hash chain: every event's hash covers every event before it.

``hash[n] = sha256(hash[n-1] + "\\n" + body[n])`` with ``hash[-1] = GENESIS`` (64 zeros), where
``body[n]`` is the canonical JSON of event *n* without its hash. The genesis does not include
the run id, so a fork's prefix carries exactly its parent's hashes.

What the chain detects, exactly: a change to any stored event that leaves the later hashes as
they were (an edit, a deletion, a swap), and, against the head and count ``run.json`` records
when a run is closed, a change that re-chains the rest. What it cannot detect on its own is
what someone who can write the whole store can keep consistent: a cut tail (of a run not yet
closed, or of a closed one with ``run.json`` rewritten to match), or a log re-chained from the
start with ``run.json`` rewritten to match. A head kept
outside the store detects those: ``agentlog verify --expect-head``, and the signed Merkle heads
of :mod:`agentlog.merkle` and :mod:`agentlog.proofs`.

The body is built from the stored columns by string formatting, so checking the chain never
parses a payload: the payload column already holds canonical JSON (``verify`` parses each one
separately, to report a payload that is not a JSON object by its seq).

Pure: no I/O. The store feeds rows to :func:`check_chain`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from .canonical import dumps_str
from .events import Event

__all__ = ["GENESIS", "Problem", "ProblemKind", "body_text", "chain_hash", "check_chain", "event_body"]

GENESIS: Final = "0" * 64


class ProblemKind:
    """The kinds of :class:`Problem` that ``verify`` reports."""

    CHAIN_BROKEN: Final = "chain_broken"
    SEQ_GAP: Final = "seq_gap"
    SEQ_DUPLICATE: Final = "seq_duplicate"
    BLOB_MISSING: Final = "blob_missing"
    BLOB_ALTERED: Final = "blob_altered"
    HEAD_MISMATCH: Final = "head_mismatch"
    SCHEMA_VERSION: Final = "schema_version"
    FORK_PREFIX: Final = "fork_prefix"
    UNREADABLE: Final = "unreadable"
    BAD_PAYLOAD: Final = "bad_payload"
    SIGNATURE: Final = "signature"


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One finding of a verification: what is wrong and where.

    >>> Problem(kind="seq_gap", seq=7, message="expected seq 6, found 7")
    Problem(kind='seq_gap', seq=7, message='expected seq 6, found 7')
    """

    kind: str
    """One of the :class:`ProblemKind` names."""
    seq: int | None
    """The first seq concerned, or ``None`` for a problem of the whole run."""
    message: str
    """What is wrong, in words."""


def event_body(*, seq: int, type: str, payload_json: str, actor: str | None = None,
               caused_by: int | None = None, span_id: str | None = None, ts: int = 0,
               model: str | None = None, input_tokens: int | None = None,
               output_tokens: int | None = None, cached_tokens: int | None = None,
               cost_usd: float | None = None, duration_ms: float | None = None) -> str:
    """The canonical JSON of an event without its hash, keys in sorted order.

    Equal to ``canonical_json`` of the event as a mapping (with the payload parsed), but built
    without parsing ``payload_json``.

    >>> event_body(seq=0, type="note", payload_json='{"a":1}', ts=5)
    '{"actor":null,"cached_tokens":null,"caused_by":null,"cost_usd":null,"duration_ms":null,"input_tokens":null,"model":null,"output_tokens":null,"payload":{"a":1},"seq":0,"span_id":null,"ts":5,"type":"note"}'
    """
    return body_text(seq, type, payload_json, actor, caused_by, span_id, ts, model, input_tokens,
                     output_tokens, cached_tokens, cost_usd, duration_ms)


def body_text(seq: int, type: str, payload_json: str, actor: str | None, caused_by: int | None,
              span_id: str | None, ts: int, model: str | None, input_tokens: int | None,
              output_tokens: int | None, cached_tokens: int | None, cost_usd: float | None,
              duration_ms: float | None) -> str:
    """:func:`event_body` with every argument given in order (the writer's call per event:
    thirteen keywords cost more to pass than the text costs to build)."""
    # The helpers inlined for the None most columns are (an append builds one per event).
    null = "null"
    return (f'{{"actor":{null if actor is None else dumps_str(actor)},'
            f'"cached_tokens":{null if cached_tokens is None else int(cached_tokens)},'
            f'"caused_by":{null if caused_by is None else int(caused_by)},'
            f'"cost_usd":{null if cost_usd is None else repr(float(cost_usd))},'
            f'"duration_ms":{null if duration_ms is None else repr(float(duration_ms))},'
            f'"input_tokens":{null if input_tokens is None else int(input_tokens)},'
            f'"model":{null if model is None else dumps_str(model)},'
            f'"output_tokens":{null if output_tokens is None else int(output_tokens)},'
            f'"payload":{payload_json},"seq":{int(seq)},'
            f'"span_id":{null if span_id is None else dumps_str(span_id)},'
            f'"ts":{int(ts)},"type":{dumps_str(type)}}}')


def body_of(event: Event, payload_json: str) -> str:
    """:func:`event_body` for an :class:`Event` whose canonical payload is ``payload_json``."""
    return event_body(seq=event.seq, type=event.type, payload_json=payload_json,
                      actor=event.actor, caused_by=event.caused_by, span_id=event.span_id,
                      ts=event.ts, model=event.model, input_tokens=event.input_tokens,
                      output_tokens=event.output_tokens, cached_tokens=event.cached_tokens,
                      cost_usd=event.cost_usd, duration_ms=event.duration_ms)


def chain_hash(prev: str, body: str) -> str:
    """The chain hash of an event whose body is ``body`` after an event hashed ``prev``.

    >>> chain_hash(GENESIS, "{}")[:16]
    '5649d09ed68c1715'
    """
    return hashlib.sha256(f"{prev}\n{body}".encode()).hexdigest()


def _gap(first: int, found: int) -> Problem:
    """Seqs ``first..found-1`` are missing: reported at the first missing seq, with the range.

    >>> _gap(20000, 40000).message
    'seqs 20000–39999 are missing (20,000 events): found seq 40000 after seq 19999'
    """
    count = found - first
    what = f"seq {first} is missing" if count == 1 else f"seqs {first}–{found - 1} are missing"
    before = f"after seq {first - 1}" if first > 0 else "first"
    return Problem(kind=ProblemKind.SEQ_GAP, seq=first,
                   message=f"{what} ({count:,} event{'s' if count != 1 else ''}): found seq {found} {before}")


def check_chain(rows: Iterable[tuple[int, str, str]], *, prev: str = GENESIS,
                start: int = 0, limit: int = 100) -> tuple[list[Problem], str, int]:
    """Check ``(seq, body, stored_hash)`` rows against the chain.

    After a mismatch the check goes on from the stored hash, so a single altered event is
    reported once, at its own seq, and later independent damage is still found. A gap is
    reported at its first missing seq and names the missing range.

    Args:
        rows: the events in stored order.
        prev: the hash before the first row (``GENESIS``, or a fork's parent hash).
        start: the seq the first row must have.
        limit: stop collecting after this many problems.

    Returns:
        ``(problems, head, count)``: what is wrong, the last stored hash, and the rows seen.
    """
    problems: list[Problem] = []
    expected, count, head = start, 0, prev
    for seq, body, stored in rows:
        count += 1
        if seq > expected:
            problems.append(_gap(expected, seq))
        elif seq < expected:
            problems.append(Problem(kind=ProblemKind.SEQ_DUPLICATE, seq=seq,
                                    message=f"expected seq {expected}, found {seq} again"))
        actual = chain_hash(head, body)
        if actual != stored:
            after_gap = " (it cannot follow the event before the gap)" if seq > expected else ""
            problems.append(Problem(kind=ProblemKind.CHAIN_BROKEN, seq=seq,
                                    message=f"stored hash {stored[:12]}… but the event hashes to "
                                            f"{actual[:12]}…{after_gap}"))
        head, expected = stored, max(expected, seq) + 1
        if len(problems) >= limit:
            break
    return problems, head, count
