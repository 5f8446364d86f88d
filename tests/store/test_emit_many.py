"""RunWriter.emit_many: several typed events under one lock and one WAL write, chained exactly as
the same events appended one by one; all or nothing; lines held (``hold=True``) are written
later, in seq order, by the next write, flush, seal, close or the background thread."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from _store_helpers import PYTHON, FixedClock, child_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.errors import CanonicalJSONError
from agentlog.events import Event, LLMRequest, LLMResponse, Note, SpanEnded, SpanStarted, ToolResult, Usage
from agentlog.store import Store
from agentlog.store.wal import WAL_NAME
from agentlog.store.writer import Emit


def _note(text: str) -> Note:
    return Note(extra={"text": text})


def _events(i: int) -> list[Emit]:
    """A span with a model call inside: four typed events, one with a long (blob) text."""
    base = 4 * i
    sid = f"s{base}"
    return [
        Emit(SpanStarted(name=f"step {i}", kind="llm", attributes={"n": i, "tags": ["a", "b"]},
                         otel={"kind": "INTERNAL", "scope": "t"}), span_id=sid),
        Emit(LLMRequest(key=f"k{i}", model="m", messages=[{"role": "user", "content": "hi"}], params={}),
             actor="agent", span_id=sid),
        Emit(LLMResponse(key=f"k{i}", model="m", message={"role": "assistant", "content": "x" * (70000 * (i % 2))},
                         usage=Usage(input_tokens=3, output_tokens=2), cost_usd=0.25, duration_ms=1.5),
             actor="agent", caused_by=base + 1, span_id=sid),
        Emit(SpanEnded(name=f"step {i}", status="error" if i % 3 else "ok", error="boom" if i % 3 else None),
             caused_by=base, span_id=sid),
    ]


def _rows(store: Store, run_id: str) -> list[tuple[Any, ...]]:
    return [(e.seq, e.type, e.ts, e.hash, e.caused_by, e.span_id, e.cost_usd) for e in store.run(run_id).iter_events()]


def test_a_batch_chains_exactly_as_one_at_a_time(tmp_path: Path) -> None:
    one, many = Store(tmp_path / "one"), Store(tmp_path / "many")
    w1 = one.create_run(run_id="r", durability="none", clock=FixedClock(), segment_events=7)
    for i in range(6):
        for item in _events(i):
            w1.emit(item.body, actor=item.actor, caused_by=item.caused_by, span_id=item.span_id)
    w1.close()
    w2 = many.create_run(run_id="r", durability="none", clock=FixedClock(), segment_events=7)
    for i in range(6):  # whole batches, held ones, and single events, across seals (7 events each)
        items = _events(i)
        if i % 3 == 0:
            w2.emit_many(items)
        elif i % 3 == 1:
            w2.emit_many(items[:3], hold=True)
            w2.emit_many(items[3:], hold=True)
        else:
            for item in items:
                w2.emit_many([item])
    w2.close()
    assert _rows(many, "r") == _rows(one, "r")
    assert many.run("r").head == one.run("r").head and many.run("r").verify().ok
    [blob] = {e.payload["message"]["content"].digest for e in many.run("r").iter_events()
              if e.type == "llm.response" and not isinstance(e.payload["message"]["content"], str)}
    assert many.blobs.path(blob).exists()


def test_a_refused_event_writes_nothing_of_its_batch(store: Store) -> None:
    w = store.create_run(run_id="r", durability="none")
    w.emit(_note("before"))
    bad = SpanStarted(name="x", kind="chain", attributes={"v": object()})  # no JSON form
    with pytest.raises(CanonicalJSONError, match=r"run 'r', seq 3"):
        w.emit_many([Emit(_note("a")), Emit(_note("b")), Emit(bad)])
    assert w.seq == 1 and len(w.run) == 1
    with pytest.raises(TypeError, match="typed bodies"):
        w.emit_many([Emit("note")])  # type: ignore[arg-type]
    assert [e.seq for e in w.emit_many([Emit(_note("after"))])] == [1]
    w.close()
    assert [e.payload["text"] for e in store.run("r").iter_events()] == ["before", "after"]


@pytest.mark.usefixtures("no_background_write")  # its own test is below
def test_held_lines_are_written_in_order_by_the_next_write(store: Store) -> None:
    w = store.create_run(run_id="r", durability="fsync")
    held = w.emit_many([Emit(_note("held 1")), Emit(_note("held 2"))], hold=True)
    assert [e.seq for e in held] == [0, 1] and w.seq == 2
    assert len(Store(store.path).run("r")) == 0  # not on disk yet: not acknowledged
    w.emit(_note("written"))  # writes what was held first, then its own line
    events = list(Store(store.path).run("r").iter_events())
    assert [e.payload["text"] for e in events] == ["held 1", "held 2", "written"]
    w.emit_many([Emit(_note("held 3"))], hold=True)
    w.flush()
    assert len(Store(store.path).run("r")) == 4
    w.emit_many([Emit(_note("held at close"))], hold=True)
    w.close()
    run = store.run("r")
    assert len(run) == 5 and run.verify().ok


def test_held_lines_reach_the_disk_without_another_write(store: Store) -> None:
    w = store.create_run(run_id="r", durability="none")
    w.emit_many([Emit(_note("held"))], hold=True)
    reader = Store(store.path)
    deadline = time.monotonic() + 30  # the background thread writes them (HOLD_MS after)
    while len(reader.run("r")) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [e.payload["text"] for e in reader.run("r").iter_events()] == ["held"]
    w.close()


_CHILD = r"""
import os, sys
from agentlog.events import Note
from agentlog.store import Store
def _note(text): return Note(extra={"text": text})
from agentlog.store.writer import Emit
w = Store(sys.argv[1]).create_run(run_id="r", durability="fsync")
w.emit_many([Emit(_note("held, then written")), Emit(_note("and this"))], hold=True)
print(w.emit(_note("acknowledged")).seq, flush=True)
w.emit_many([Emit(_note("held when the process died"))], hold=True)
os._exit(0)
"""


def test_a_crash_loses_only_lines_still_held(tmp_path: Path) -> None:
    path = tmp_path / "store"
    out = subprocess.run([PYTHON, "-c", _CHILD, str(path)], capture_output=True, text=True,
                         env=child_env(), check=True, timeout=120)
    assert out.stdout.split() == ["2"]
    store = Store(path)
    w = store.writer("r")  # recovers the run the process left
    assert w.seq == 3
    w.close()
    run = store.run("r")
    assert [e.payload["text"] for e in run.iter_events()] == ["held, then written", "and this", "acknowledged"]
    assert run.verify().ok


# --- events copied in (imports) -------------------------------------------------------------------


def _source(store: Store) -> list[Any]:
    """The events of a run written one at a time: typed bodies, a long (blob) text, notes."""
    w = store.create_run(run_id="src", durability="none", clock=FixedClock(), segment_events=7)
    for i in range(4):
        for item in _events(i):
            w.emit(item.body, actor=item.actor, caused_by=item.caused_by, span_id=item.span_id)
        w.emit("note", {"text": f"after step {i}", "extra": [i]})
    w.close()
    return list(store.run("src").iter_events())


def test_events_copied_in_a_batch_chain_as_appended_one_at_a_time(store: Store) -> None:
    events = _source(store)
    one = store.create_run(run_id="one", durability="none")
    for event in events:
        one.append(event)
    one.close()
    many = store.create_run(run_id="many", durability="none")
    stored = many.emit_many(events[:9]) + many.emit_many(events[9:])
    many.close()
    assert [e.hash for e in stored] == [e.hash for e in events] and [e.ts for e in stored] == [e.ts for e in events]
    assert _rows(store, "many") == _rows(store, "one") == _rows(store, "src")
    assert store.run("many").verify().ok


def test_a_copied_event_whose_hash_differs_writes_nothing_of_its_batch(store: Store) -> None:
    events = _source(store)
    w = store.create_run(run_id="r", durability="none")
    w.emit_many(events[:2])
    changed = [events[2], events[3], Event(**{**_fields(events[4]), "payload": {"text": "other"}})]
    with pytest.raises(ValueError, match=r"run 'r', seq 4: the event's hash .* differs from the chain hash"):
        w.emit_many(changed)
    assert w.seq == 2 and len(w.run) == 2
    with pytest.raises(ValueError, match="run 'r': cannot append seq 5; the next seq is 2"):
        w.emit_many([events[5]])
    assert [e.seq for e in w.emit_many(events[2:5])] == [2, 3, 4]
    w.close()
    assert _rows(store, "r") == _rows(store, "src")[:5]


def test_an_emit_at_its_own_time_keeps_it(store: Store) -> None:
    body = SpanStarted(name="imported", kind="tool", attributes={"n": 1}, otel={"kind": "CLIENT", "scope": None})
    clock = FixedClock()
    w = store.create_run(run_id="r", durability="none", clock=clock)
    next_tick = round(clock.now * 1_000_000)  # the clock is read once, for the event without a ts
    [at, now] = w.emit_many([Emit(body, span_id="s0", ts=1_234_567), Emit(_note("now"))])
    w.close()
    assert at.ts == 1_234_567 and now.ts == next_tick
    copy = store.create_run(run_id="copy", durability="none")  # the same event, copied in with its ts
    assert copy.append(Event(seq=0, type=body.TYPE, payload=body.to_payload(), span_id="s0", ts=1_234_567)).hash == at.hash
    copy.close()


def test_segment_room_counts_down_to_the_seal(store: Store) -> None:
    w = store.create_run(run_id="r", durability="none", segment_events=5)
    assert w.segment_room == 5
    w.emit_many([Emit(_note("a")), Emit(_note("b")), Emit(_note("c"))])
    assert w.segment_room == 2
    w.emit_many([Emit(_note("d")), Emit(_note("e"))])  # fills the segment: sealed
    assert w.segment_room == 5
    w.close()
    assert [p.name for p in sorted(store.run("r").path.glob("events-*.parquet"))] == ["events-000000000000.parquet"]


def _fields(event: Event) -> dict[str, Any]:
    return {f: getattr(event, f) for f in ("seq", "type", "payload", "actor", "caused_by", "span_id", "ts", "model",
                                           "input_tokens", "output_tokens", "cached_tokens", "cost_usd",
                                           "duration_ms", "hash")}


def test_an_item_names_its_cause_by_its_place_in_the_batch(store: Store) -> None:
    w = store.create_run(run_id="r", durability="none")
    w.emit(_note("before"))
    events = w.emit_many([Emit(_note("a")), Emit(_note("b"), caused_by_item=0), Emit(_note("c"), caused_by=0),
                          Emit(_note("d"), caused_by_item=1)], hold=True)
    assert [e.caused_by for e in events] == [None, 1, 0, 2]
    for bad in (1, 5, -1, "0"):  # not an earlier item of the batch: nothing written
        with pytest.raises(ValueError, match="caused_by_item"):
            w.emit_many([Emit(_note("x")), Emit(_note("y"), caused_by_item=bad)])  # type: ignore[arg-type]
    w.close()
    assert [e.caused_by for e in store.run("r").iter_events()] == [None, None, 1, 0, 2]


# --- the typed staging against the path of a type and a payload --------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_LONG = st.text(alphabet="xyé", min_size=40, max_size=90)  # around the 64-byte threshold: inline or a blob
_SCALAR = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e-05, 3e-9, -0.0, 2.5])
           | _TEXT | _LONG | st.sampled_from(["https://u:hunter2@h.test/x?key=K3Y-SECRET&q=1", "http://h.test/?token=T0K3N-SECRET"]))
_VALUE = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(_TEXT | st.sampled_from(["api_key", "Authorization", "session_id",
                                                                 "properties"]), inner, max_size=3),
                      max_leaves=8)
_ATTRIBUTES = st.dictionaries(_TEXT | st.sampled_from(["api_key", "x-api-key", "url"]), _VALUE, max_size=4)


@st.composite
def _bodies(draw: st.DrawFn) -> list[tuple[Any, str | None, int | None, str | None]]:
    """Typed bodies of the kinds the span processor and the transport write, with secrets, long
    (blob) texts, URLs with credentials and floats orjson writes its own way, each with an
    actor, a cause (an earlier seq) and a span id."""
    out: list[tuple[Any, str | None, int | None, str | None]] = []
    for seq in range(draw(st.integers(min_value=1, max_value=8))):
        which = draw(st.sampled_from(["started", "ended", "llm", "tool"]))
        if which == "started":
            body: Any = SpanStarted(name=draw(_TEXT), kind=draw(st.sampled_from(["chain", "llm", "tool"])),
                                    parent=draw(st.none() | st.just("s0")), attributes=draw(_ATTRIBUTES),
                                    otel={"kind": "INTERNAL", "scope": draw(st.none() | _TEXT)})
        elif which == "ended":
            failed = draw(st.booleans())
            body = SpanEnded(name=draw(_TEXT), status="error" if failed else "ok",
                             error=draw(_TEXT | _LONG) if failed else None)
        elif which == "llm":
            body = LLMResponse(key=draw(_TEXT), model=draw(st.none() | _TEXT),
                               message={"role": "assistant", "content": draw(_TEXT | _LONG)},
                               usage=Usage(input_tokens=draw(st.integers(0, 10**6)), output_tokens=draw(st.integers(0, 999))),
                               cost_usd=draw(st.none() | st.floats(0, 5) | st.integers(0, 3) | st.just(1e-05)),
                               duration_ms=draw(st.none() | st.floats(0, 1e4)))
        else:
            body = ToolResult(key=draw(_TEXT), name=draw(_TEXT), result=draw(_VALUE),
                              duration_ms=draw(st.none() | st.floats(0, 1e4)))
        cause = draw(st.none() | st.integers(0, seq - 1)) if seq else None
        out.append((body, draw(st.none() | st.sampled_from(["agent", "tool"])), cause, draw(st.none() | _TEXT)))
    return out


def _written(store: Store, run_id: str, writer: Any) -> tuple[bytes, list[tuple[Any, ...]]]:
    """The WAL's bytes (held lines written first), then, after close, the stored events."""
    writer.flush()
    wal = (writer.path / WAL_NAME).read_bytes()
    writer.close()
    return wal, [(*_fields(e).values(),) for e in store.run(run_id).iter_events()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=_bodies(), cuts=st.lists(st.tuples(st.integers(1, 4), st.booleans()), min_size=8, max_size=8))
def test_typed_bodies_give_the_bytes_of_their_type_and_payload(tmp_path: Path, bodies: Any, cuts: Any) -> None:
    """The same bodies appended by emit(body) one at a time, by emit_many in batches (some held),
    and as a type, a payload and usage columns (the checked path every other event takes): the
    same WAL bytes, the same events, hashes and segment, the same blobs."""
    root = tmp_path / str(uuid.uuid4())
    stores = {name: Store(root / name) for name in ("body", "batch", "payload")}
    writers = {name: s.create_run(run_id="r", durability="none", clock=FixedClock(), blob_threshold=64, redact=["session_id"])
               for name, s in stores.items()}
    for body, actor, cause, span in bodies:
        writers["body"].emit(body, actor=actor, caused_by=cause, span_id=span)
        writers["payload"].emit(body.TYPE, body.to_payload(), actor=actor, caused_by=cause, span_id=span,
                                **body.columns())
    items, at = [Emit(body, actor, cause, span) for body, actor, cause, span in bodies], 0
    for size, hold in cuts:
        if at < len(items):
            writers["batch"].emit_many(items[at:at + size], hold=hold)
            at += size
    writers["batch"].emit_many(items[at:])
    written = {name: _written(stores[name], "r", w) for name, w in writers.items()}
    assert written["body"] == written["batch"] == written["payload"]
    segments = {name: [p.read_bytes() for p in sorted(s.run("r").path.glob("events-*.parquet"))] for name, s in stores.items()}
    assert segments["body"] == segments["batch"] == segments["payload"]
    blobs = {name: sorted(p.name for p in (root / name).rglob("*") if p.is_file() and "blobs" in p.parts)
             for name in stores}
    assert blobs["body"] == blobs["batch"] == blobs["payload"]
    events = list(stores["batch"].run("r").iter_events())
    for event in events:  # what the policy hides is hidden
        text = json.dumps(event.payload, default=str)
        assert "SECRET" not in text and "hunter2" not in text
        if event.type == SpanStarted.TYPE:
            attributes = event.payload["attributes"]
            assert all(attributes[k] == "[REDACTED]" for k in ("api_key", "x-api-key") if k in attributes)
    assert stores["batch"].run("r").verify().ok
