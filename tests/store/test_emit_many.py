"""RunWriter.emit_many: several typed events under one lock and one WAL write, chained exactly as
the same events appended one by one; all or nothing; lines held (``hold=True``) are written
later, in seq order, by the next write, flush, seal, close or the background thread."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from _store_helpers import PYTHON, FixedClock, child_env

from agentlog.errors import CanonicalJSONError
from agentlog.events import Event, LLMRequest, LLMResponse, Note, SpanEnded, SpanStarted, Usage
from agentlog.store import Store
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
