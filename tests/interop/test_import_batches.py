"""Imports write in RunWriter.emit_many batches: the segments, hashes and errors are those of
appending one event at a time (a refused event: the ones before it written, its line named);
a file's strings are looked at for lone surrogates only when they may hold one."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_programs import rows
from hypothesis import given
from hypothesis import strategies as st

import agentlog as al
from agentlog.canonical import canonical_json
from agentlog.chain import GENESIS, chain_hash, event_body
from agentlog.interop import InteropFormatError, export_jsonl, import_jsonl, import_otlp
from agentlog.interop._common import BATCH, append_events, finite
from agentlog.interop.spanmap import json_value

_FIELDS = ("seq", "type", "actor", "caused_by", "span_id", "ts", "model", "input_tokens", "output_tokens",
           "cached_tokens", "cost_usd", "duration_ms")


def _segments(run: Any) -> list[tuple[str, int]]:
    import pyarrow.parquet as pq

    return [(p.name, pq.read_metadata(p).num_rows) for p in sorted(Path(run.path).glob("events-*.parquet"))]


def _long_run(store: Any, n: int, *, segment_events: int, blob: bool = True) -> Any:
    """``n`` events, sealed every ``segment_events``, with a blob (an inline line in the export)."""
    w = store.create_run(run_id="long", durability="none", segment_events=segment_events)
    for i in range(n):
        text = "x" * 20_000 if blob and i == n // 2 else f"event {i}"  # > 16 KiB: a blob
        w.emit("note", {"text": text, "i": i})
    w.close()
    return store.run("long")


def test_a_long_jsonl_import_keeps_the_segments_and_hashes(store: Any, other: Any, tmp_path: Path) -> None:
    n, every = 3 * BATCH + 100, BATCH - 100  # batches cut at seals, seals inside batches
    source = _long_run(store, n, segment_events=every)
    path = tmp_path / "long.jsonl"
    export_jsonl(source, path)
    assert sum('"agentlog":"blob"' in line for line in path.read_text().splitlines()) == 1
    back = import_jsonl(path, other)
    assert rows(back) == rows(source) and back.head == source.head and back.verify().ok
    assert _segments(back) == _segments(source)
    assert [rows for _, rows in _segments(back)] == [every] * (n // every) + [n % every]


def _rechained(lines: list[str], at: int, change: Any) -> list[str]:
    """Event line ``at`` changed by ``change``, and it and every later line hashed again (the
    chain of the changed file holds: only the writer can tell)."""
    header, events = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    change(events[at])
    prev = GENESIS if at == 0 else events[at - 1]["hash"]
    for event in events[at:]:
        body = event_body(payload_json=canonical_json(event["payload"]), **{f: event.get(f) for f in _FIELDS})
        prev = event["hash"] = chain_hash(prev, body)
    header["head"] = prev
    return [json.dumps(header), *(json.dumps(e) for e in events)]


def test_an_event_the_writer_refuses_names_its_line_and_leaves_the_ones_before(store: Any, other: Any,
                                                                               tmp_path: Path) -> None:
    source = _long_run(store, BATCH + 50, segment_events=65536, blob=False)
    path = tmp_path / "long.jsonl"
    export_jsonl(source, path)
    lines = path.read_text().splitlines()
    bad = BATCH + 7  # in the second batch; the writer redacts it, so its hash no longer holds
    path.write_text("\n".join(_rechained(lines, bad, lambda e: e["payload"].update(api_key="sk-live"))) + "\n")
    with pytest.raises(InteropFormatError) as info:
        import_jsonl(path, other)
    assert info.value.line == bad + 2  # the header is line 1, event 0 line 2
    assert str(info.value).startswith(f"{path}:{bad + 2}: seq {bad}: run 'long', seq {bad}: the event's hash ")
    run = other.run("long")
    assert run.meta["status"] == "failed" and len(run) == bad
    assert rows(run) == rows(source)[:bad]


def test_append_events_names_a_refused_item_after_writing_the_ones_before(other: Any) -> None:
    events = [al.Event(seq=i, type="note", payload={"i": i}, ts=1_000 + i) for i in range(BATCH + 30)]
    bad = BATCH + 3
    events[bad] = al.Event(seq=bad, type="note", payload={"v": float("nan")}, ts=5)
    w = other.create_run(run_id="r", durability="none")
    with pytest.raises(LookupError, match=f"item {bad}: .*payload.v: NaN is not JSON"):
        append_events(w, events, named=lambda i, exc: LookupError(f"item {i}: {exc}"))
    assert w.seq == bad
    w.close()
    assert [e.payload for e in other.run("r").iter_events()] == [{"i": i} for i in range(bad)]


def test_otlp_import_keeps_span_times_and_verifies(run: Any, other: Any, tmp_path: Path) -> None:
    from agentlog.interop import write_otlp

    path = tmp_path / "run.otlp.json"
    write_otlp(run, path)
    spans = [s for line in path.read_text().splitlines() for rs in json.loads(line)["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    [back] = import_otlp(path, other)
    assert back.verify().ok
    starts = {int(s["startTimeUnixNano"]) // 1000 for s in spans}
    ends = {int(s["endTimeUnixNano"]) // 1000 for s in spans}
    assert {e.ts for e in back.iter_events() if e.type == "span.started"} <= starts
    assert {e.ts for e in back.iter_events() if e.type == "span.ended"} <= ends


# --- lone surrogates ------------------------------------------------------------------------------


def _otlp_with_name(name_json: str) -> str:
    span = ('{"traceId": "' + "ab" * 16 + '", "spanId": "' + "cd" * 8 + '", "name": ' + name_json +
            ', "startTimeUnixNano": "1000", "endTimeUnixNano": "2000"}')
    return '{"resourceSpans": [{"scopeSpans": [{"spans": [' + span + ']}]}]}\n'


@pytest.mark.parametrize("name_json", ['"bad \\udc80 name"', '"bad \udc80 name"'], ids=["escaped", "raw"])
def test_a_lone_surrogate_in_an_otlp_file_is_refused(name_json: str, other: Any, tmp_path: Path) -> None:
    source: Any = io.StringIO(_otlp_with_name(name_json))
    if "\\u" in name_json:  # a file can only hold it escaped
        source = tmp_path / "trace.json"
        source.write_text(_otlp_with_name(name_json))
    with pytest.raises(InteropFormatError, match="holds text that is not valid Unicode"):
        import_otlp(source, other)
    assert other.list_runs() == []


def test_a_surrogate_pair_escape_is_one_character(other: Any, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(_otlp_with_name('"call \\ud83d\\ude00"'))
    [run] = import_otlp(path, other)
    assert run.event(0).payload["name"] == "call \U0001f600"


_PIECES = ["a", "é", "N", "u", "d", "8", "\\", '"', "\n", "NaN", "\udc80", "\ud83d", "\ude00", "\U0001f600"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=5).map("".join)  # lone and paired surrogates too
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8)


@given(_JSON, st.booleans())
def test_json_value_is_finite_of_the_parsed_text(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)  # NaN, Infinity; surrogates escaped or raw
    assert json_value(text) == finite(json.loads(text))
    assert canonical_json(json_value(text)) == canonical_json(finite(json.loads(text)))


class _Text(str):
    """A str subclass: check_event decides it field by field (no shortcut)."""


_INTS = [None, 0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, True, 1.0, "1"]
_REALS = [None, 0, 1.5, -2.0, float("nan"), float("inf"), -float("inf"), 10**400, True, "1"]
_TEXTS = [None, "note", "é", "\udc80", 7, b"x"]
_VALUES = {"type": ["note", "llm.response", "é.type", "\udc80", 7],
           "ts": [0, 1_767_225_600_000_000, 253_402_300_799_999_999, 253_402_300_800_000_000,
                  -62_135_596_800_000_000, -62_135_596_800_000_001, 1.0, True, None],
           "actor": _TEXTS, "span_id": _TEXTS, "model": _TEXTS, "caused_by": _INTS, "input_tokens": _INTS,
           "output_tokens": _INTS, "cached_tokens": _INTS, "cost_usd": _REALS, "duration_ms": _REALS}
_GOOD = {"type": "llm.response", "ts": 1_767_225_600_000_000, "actor": "agent", "span_id": "s1", "model": "m",
         "caused_by": 3, "input_tokens": 60, "output_tokens": 4, "cached_tokens": 20, "cost_usd": 0.5,
         "duration_ms": 12.0}


_CHANGES = [(f, v) for f in sorted(_VALUES) for v in _VALUES[f]]


@pytest.mark.parametrize(("field", "value"), _CHANGES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(_CHANGES)])
def test_check_event_decides_as_field_by_field(field: str, value: Any) -> None:
    """A field of a good event changed: the shortcut for plain fields decides as the checks of
    each field (where a str subclass for the type sends every event) decide."""
    from agentlog.interop._common import check_event

    def verdict(event: Any) -> str | None:
        try:
            check_event(event, "f")
        except InteropFormatError as exc:
            return exc.field
        return None

    assert verdict(al.Event(seq=0, **_GOOD)) is None
    fields = {**_GOOD, field: value}
    kind = fields["type"]
    slow = {**fields, "type": _Text(kind) if isinstance(kind, str) else kind}
    assert verdict(al.Event(seq=0, **fields)) == verdict(al.Event(seq=0, **slow))
