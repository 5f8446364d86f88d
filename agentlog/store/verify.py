"""Verify a run: chain, seqs, blobs, head, fork prefix, readable files.

The shell here gathers rows and files; :func:`agentlog.chain.check_chain` judges the chain.
The chain body is built from the stored columns (the payload column is already canonical
JSON), and blob references are found in the payload text by a pattern that can only match
JSON structure (inside a JSON string every quote is escaped). Each payload is also parsed
once, so one that is not a JSON object is reported at its seq rather than met by a reader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..accessors import Extensible
from ..chain import GENESIS, Problem, ProblemKind, check_chain, event_body
from ..errors import BlobNotFoundError, InvalidBlobRefError, SchemaVersionError, StoreError
from ..events import BlobRef
from .segments import column_values
from .wal import decode_line

if TYPE_CHECKING:
    from .run import Run

__all__ = ["VerifyReport", "payload_problem", "unreadable_report", "verify_run", "with_problems"]

_BLOB_REF = re.compile(r'\{"\$blob":"(sha256:[0-9a-f]{64})"')
_BATCH = 8192
_LIMIT = 100  # chain problems collected before the check stops


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport(Extensible):
    """What :meth:`Run.verify` found.

    >>> print(VerifyReport(run_id="r1", ok=True, events=3, head="ab" * 32, first_bad_seq=None,
    ...                    problems=()))
    run r1: ok, 3 events, head abababababab…
    """

    run_id: str
    """The run checked."""
    ok: bool
    """True if nothing is wrong."""
    events: int
    """How many events the files hold (a fork's parent prefix included)."""
    head: str
    """The hash of the last event read."""
    first_bad_seq: int | None
    """The lowest seq with a problem, or ``None``."""
    problems: tuple[Problem, ...]
    """Everything found, lowest seq first."""

    _accessor_owner = "VerifyReport"

    def __str__(self) -> str:
        if self.ok:
            return f"run {self.run_id}: ok, {self.events:,} events, head {self.head[:12]}…"
        plural = "s" if len(self.problems) != 1 else ""
        lines = [(f"run {self.run_id}: {len(self.problems)} problem{plural}, "
                  f"{self.events:,} events, first bad seq {self.first_bad_seq}")]
        for p in self.problems:
            where = "run" if p.seq is None else f"seq {p.seq}"
            lines.append(f"  {where}: {p.kind}: {p.message}")
        return "\n".join(lines)

    if TYPE_CHECKING:  # pragma: no cover - registered from above (agentlog.widgets.html)
        def _repr_html_(self) -> str | None: ...


def _report(run_id: str, events: int, head: str, problems: list[Problem]) -> VerifyReport:
    problems.sort(key=lambda p: (p.seq is None, p.seq or 0))
    seqs = [p.seq for p in problems if p.seq is not None]
    return VerifyReport(run_id=run_id, ok=not problems, events=events, head=head,
                        first_bad_seq=min(seqs) if seqs else None, problems=tuple(problems))


def with_problems(report: VerifyReport, extra: Iterable[Problem]) -> VerifyReport:
    """``report`` with more problems (e.g. from a signed head kept elsewhere)."""
    more = list(extra)
    if not more:
        return report
    return _report(report.run_id, report.events, report.head, [*report.problems, *more])


def unreadable_report(run_id: str, exc: BaseException) -> VerifyReport:
    """The report of a run whose ``run.json`` cannot be read."""
    kind = ProblemKind.SCHEMA_VERSION if isinstance(exc, SchemaVersionError) else ProblemKind.UNREADABLE
    return _report(run_id, 0, "", [Problem(kind=kind, seq=None, message=str(exc))])


def verify_run(run: Run) -> VerifyReport:
    """Check everything about one run that can be checked; see :class:`VerifyReport`."""
    problems: list[Problem] = []
    snap = run._load(strict=False)
    problems.extend(snap.problems)
    parts: list[Iterable[tuple[Any, ...]]] = []
    prev, start = snap.prev, snap.start

    at = run.fork_seq
    prefix = None
    if at is not None:
        prefix = _parent_prefix(run, at, snap.prev, problems)
        if prefix is not None:
            parts.append(_table_rows(prefix))
            prev, start = GENESIS, 0

    parts.extend(_table_rows(seg.table) for seg in snap.segments)
    parts.append(snap.tail)
    tables = [*([] if prefix is None else [prefix]), *(seg.table for seg in snap.segments)]

    scan = snap.scan
    sealed_end = snap.segments[-1].end if snap.segments else snap.start
    for line, problem, before in scan.bad:
        seq = scan.rows[before - 1][0] + 1 if before else sealed_end
        problems.append(Problem(kind=ProblemKind.UNREADABLE, seq=seq,
                                message=f"{snap.wal_path}:{line}: {problem}"))
    for row in snap.conflicts:
        problems.append(Problem(kind=ProblemKind.SEQ_DUPLICATE, seq=row[0],
                                message=f"{snap.wal_path} holds seq {row[0]} with a hash that "
                                        "differs from the sealed segment's"))
    if scan.torn and scan.torn_complete:
        problems.append(_torn_problem(snap.wal_data[scan.torn_at:], scan.torn_line, snap.end,
                                      str(snap.wal_path)))

    refs: dict[str, int] = {}
    chain_problems, _, count = check_chain(_bodies(parts, refs), prev=prev, start=start,
                                           limit=_LIMIT)
    problems.extend(_payload_problems(tables, snap.tail))
    problems.extend(chain_problems)
    _check_blobs(run, refs, problems)

    if run.status != "open":
        want_head, want_count = run.meta.get("head"), run.meta.get("count")
        if want_head != snap.head or want_count != snap.end:
            if isinstance(want_count, int) and want_count != snap.end:
                seq = min(want_count, snap.end)
            else:
                seq = max(snap.end - 1, 0)
            problems.append(Problem(
                kind=ProblemKind.HEAD_MISMATCH, seq=seq,
                message=f"run.json says {want_count} events ending in {str(want_head)[:12]}…, "
                        f"the files hold {snap.end} ending in {snap.head[:12]}…"))
    if len(chain_problems) >= _LIMIT:  # the check stopped early; count what is there
        count = (at + 1 if at is not None else 0) + snap.own_count
    return _report(run.id, count, snap.head, problems)


def _parent_prefix(run: Run, at: int, recorded: str, problems: list[Problem]) -> pa.Table | None:
    """The parent's events ``0..at``, after checking the parent still has them unchanged."""
    try:
        parent = run.parent
        assert parent is not None
        table = parent.table()
    except StoreError as exc:
        problems.append(Problem(kind=ProblemKind.FORK_PREFIX, seq=0,
                                message=f"the parent cannot be read: {exc}"))
        return None
    if table.num_rows <= at:
        problems.append(Problem(kind=ProblemKind.FORK_PREFIX, seq=table.num_rows,
                                message=f"the parent {parent.id} has {table.num_rows} events; "
                                        f"the fork needs 0..{at}"))
        return None
    found = table.column("hash")[at].as_py() if at >= 0 else GENESIS
    if found != recorded:
        problems.append(Problem(kind=ProblemKind.FORK_PREFIX, seq=at,
                                message=f"the parent {parent.id} has hash {found[:12]}… at seq {at}; "
                                        f"the fork was made from {recorded[:12]}…"))
    return table.slice(0, at + 1)


def _table_rows(table: pa.Table) -> Iterator[tuple[Any, ...]]:
    for batch in table.to_batches(max_chunksize=_BATCH):
        cols = [batch.column(i) for i in range(batch.num_columns)]
        cols[5] = cols[5].cast(pa.int64())
        yield from zip(*(column_values(c) for c in cols), strict=True)


def _bodies(parts: Iterable[Iterable[tuple[Any, ...]]],
            refs: dict[str, int]) -> Iterator[tuple[int, str, str]]:
    """``(seq, body, hash)`` for check_chain; notes each blob's first referencing seq."""
    for part in parts:
        for (seq, type, actor, caused_by, span_id, ts, payload, model, input_tokens,
             output_tokens, cached_tokens, cost_usd, duration_ms, hash) in part:
            if '"$blob"' in payload:
                for digest in _BLOB_REF.findall(payload):
                    refs.setdefault(digest, seq)
            yield seq, event_body(
                seq=seq, type=type, payload_json=payload, actor=actor, caused_by=caused_by,
                span_id=span_id, ts=ts, model=model, input_tokens=input_tokens,
                output_tokens=output_tokens, cached_tokens=cached_tokens, cost_usd=cost_usd,
                duration_ms=duration_ms), hash


def _payload_problems(tables: list[pa.Table], tail: list[tuple[Any, ...]]) -> list[Problem]:
    """A problem for each payload that is not a JSON object (see :func:`payload_problem`)."""
    found: list[tuple[int, str]] = []
    for table in tables:
        found.extend(_suspects(table))
    found.extend((row[0], row[6]) for row in tail)
    problems = []
    for seq, text in found:
        problem = payload_problem(text)
        if problem is not None:
            problems.append(Problem(kind=ProblemKind.BAD_PAYLOAD, seq=seq, message=problem))
            if len(problems) >= _LIMIT:
                break
    return problems


def _suspects(table: pa.Table) -> list[tuple[int, str]]:
    """``(seq, payload)`` of the rows whose payload may not be a JSON object.

    A small table is all suspects (Python parses each). In a large one DuckDB's vectorised
    JSON parser (about 3x faster) leaves out the payloads it reads as a JSON object with no
    trailing comma and no blob reference: DuckDB accepts trailing commas, which Python's
    ``json`` does not, so those are left to Python too, and so are blob references, whose
    shape Python checks. Python has the last word on every suspect.
    """
    if table.num_rows < _VECTOR_MIN:
        return list(zip(table.column("seq").to_pylist(), table.column("payload").to_pylist(), strict=True))
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.register("t", table.select(["seq", "payload"]))
        return [(int(seq), str(text)) for seq, text in con.execute(_SUSPECTS).fetchall()]
    finally:
        con.close()


_VECTOR_MIN = 4096
_SUSPECTS = r"""SELECT seq, payload FROM t WHERE CASE WHEN json_valid(payload)
    THEN json_type(payload) <> 'OBJECT' OR regexp_matches(payload, ',[ 	
]*[\]}]')
         OR contains(payload, '"$blob"')
    ELSE true END ORDER BY seq"""


def payload_problem(text: str) -> str | None:
    """What is wrong with a stored payload, or ``None``: it must be a JSON object, and every
    ``{"$blob": ...}`` in it a well-formed blob reference.

    >>> payload_problem('{"a":1}') is None, payload_problem('[1]'), payload_problem('{"a":')[:12]
    (True, 'the payload is a JSON list, not an object', 'the payload ')
    """
    bad: list[str] = []

    def hook(obj: dict[str, Any]) -> dict[str, Any]:
        if "$blob" in obj and not bad:
            try:
                BlobRef.from_json(obj)
            except InvalidBlobRefError as exc:
                bad.append(f"a malformed blob reference: {exc}")
        return obj

    try:
        value = json.loads(text, object_hook=hook) if '"$blob"' in text else json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return f"the payload is not JSON ({exc})"
    if type(value) is not dict:
        return f"the payload is a JSON {_JSON_TYPES.get(type(value), type(value).__name__)}, not an object"
    return bad[0] if bad else None


_JSON_TYPES: dict[type, str] = {list: "list", str: "string", int: "number", float: "number",
                                bool: "boolean", type(None): "null"}


def _check_blobs(run: Run, refs: dict[str, int], problems: list[Problem]) -> None:
    """Re-hash each distinct referenced blob once."""
    blobs = run.store.blobs
    for digest, seq in refs.items():
        try:
            actual = blobs.hash_file(digest)
        except BlobNotFoundError:
            problems.append(Problem(kind=ProblemKind.BLOB_MISSING, seq=seq,
                                    message=f"blob {digest} is missing ({blobs.path(digest)})"))
            continue
        if actual != digest[7:]:
            problems.append(Problem(kind=ProblemKind.BLOB_ALTERED, seq=seq,
                                    message=f"blob {digest} was altered: its bytes hash to "
                                            f"sha256:{actual}"))


def _torn_problem(data: bytes, line: int, expected: int, path: str) -> Problem:
    """A complete last line that does not check: damage, not an interrupted write."""
    try:
        seq = int(decode_line(data.rstrip(b"\n"))[0])
    except ValueError:
        return Problem(kind=ProblemKind.UNREADABLE, seq=expected,
                       message=f"{path}:{line}: the last line is not a WAL line")
    return Problem(kind=ProblemKind.CHAIN_BROKEN, seq=seq,
                   message=f"{path}:{line}: the last line's hash does not follow from the event before")
