"""The hash chain: bodies equal canonical JSON, and check_chain localises damage."""

from __future__ import annotations

import pytest

from agentlog.canonical import canonical_json
from agentlog.chain import GENESIS, ProblemKind, body_of, chain_hash, check_chain, event_body
from agentlog.events import Event


def make_rows(n: int) -> list[tuple[int, str, str]]:
    rows, prev = [], GENESIS
    for seq in range(n):
        body = event_body(seq=seq, type="note", payload_json=canonical_json({"i": seq}), ts=seq)
        prev = chain_hash(prev, body)
        rows.append((seq, body, prev))
    return rows


def test_body_equals_canonical_json_of_the_event() -> None:
    event = Event(seq=4, type="llm.response", payload={"content": "ok", "n": [1.5]}, actor="a\"b",
                  caused_by=3, span_id="s1", ts=17, model="gpt-x", input_tokens=10,
                  output_tokens=2, cached_tokens=0, cost_usd=0.001, duration_ms=12.5)
    fields = {name: getattr(event, name) for name in event.__dataclass_fields__ if name != "hash"}
    assert body_of(event, canonical_json(event.payload)) == canonical_json(fields)


def test_usage_values_are_coerced_to_column_types() -> None:
    as_int = event_body(seq=0, type="x", payload_json="{}", cost_usd=1, duration_ms=2)
    as_float = event_body(seq=0, type="x", payload_json="{}", cost_usd=1.0, duration_ms=2.0)
    assert as_int == as_float


def test_intact_chain_has_no_problems() -> None:
    rows = make_rows(5)
    problems, head, count = check_chain(rows)
    assert (problems, head, count) == ([], rows[-1][2], 5)


def test_altered_event_is_reported_once_at_its_seq() -> None:
    rows = make_rows(6)
    seq, body, stored = rows[2]
    rows[2] = (seq, body.replace('"i":2', '"i":9'), stored)
    problems, _, _ = check_chain(rows)
    assert [(p.kind, p.seq) for p in problems] == [(ProblemKind.CHAIN_BROKEN, 2)]


def test_deleted_event_is_a_gap_and_a_break() -> None:
    rows = make_rows(5)
    del rows[1]
    problems, _, _ = check_chain(rows)
    # the gap is named at its first missing seq; seq 2 cannot chain to seq 0
    assert [(p.kind, p.seq) for p in problems] == [(ProblemKind.SEQ_GAP, 1), (ProblemKind.CHAIN_BROKEN, 2)]
    assert problems[0].message == "seq 1 is missing (1 event): found seq 2 after seq 0"


def test_a_gap_names_its_missing_range() -> None:
    rows = make_rows(10)
    del rows[3:7]
    problems, _, count = check_chain(rows)
    assert count == 6 and problems[0].kind == ProblemKind.SEQ_GAP and problems[0].seq == 3
    assert problems[0].message == "seqs 3–6 are missing (4 events): found seq 7 after seq 2"
    missing_first = check_chain(rows[1:])[0][0]
    assert (missing_first.seq, missing_first.message) == (0, "seq 0 is missing (1 event): found seq 1 first")


def test_swapped_events_are_caught_at_the_first_swapped_seq() -> None:
    rows = make_rows(5)
    rows[1], rows[2] = rows[2], rows[1]
    problems, _, _ = check_chain(rows)
    assert problems[0].seq == 1 and problems[0].kind == ProblemKind.SEQ_GAP
    assert {p.kind for p in problems} >= {ProblemKind.CHAIN_BROKEN, ProblemKind.SEQ_DUPLICATE}


def test_fork_prefix_chains_from_the_parent_hash() -> None:
    rows = make_rows(4)
    problems, head, count = check_chain(rows[2:], prev=rows[1][2], start=2)
    assert problems == [] and head == rows[3][2] and count == 2
    problems, _, _ = check_chain(rows[2:], prev=GENESIS, start=2)
    assert problems[0].kind == ProblemKind.CHAIN_BROKEN


@pytest.mark.parametrize("limit", [1, 2])
def test_limit_stops_collecting(limit: int) -> None:
    rows = [(seq, body + " ", stored) for seq, body, stored in make_rows(5)]
    problems, _, _ = check_chain(rows, limit=limit)
    assert len(problems) == limit
