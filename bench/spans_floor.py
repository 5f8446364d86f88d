"""Benchmark spans_floor: agentlog's live span processor beside the least a span processor can
do to append a span honestly, so that the distance to the 20,000 spans/s target is read on the
machine at hand, not against figures of another day.

    python bench/spans_floor.py [--quick]

Three rows, plain spans (each a root: ``span.started`` when it starts, ``span.ended`` and one
WAL write when it ends), taken in turns, trial by trial, in one process; medians of this
process's CPU time (``time.process_time``), and wall time beside it:

- ``bare``: the OpenTelemetry SDK with no processor;
- ``floor``: a processor that, per event, makes the payload dict, encodes it with orjson
  (sorted keys), builds the event's body text, chains it with SHA-256, keeps an
  :class:`~agentlog.Event` (as the recorder keeps every event it folds later) and writes the
  span's two lines with one ``os.write`` at its end. No recording lookup, no redaction, no
  blob threshold, no checks of any kind, no bookkeeping for joins, no segments: what is left
  when everything agentlog adds for safety is taken out;
- ``agentlog``: :class:`agentlog.otel.SpanProcessor` into a run with ``durability="none"``
  (a ``WriterSink`` under a ``Recorder``, as ``bench/capture.py``'s ``none`` row; the run's
  close, which seals its segment, is timed too).

The figure to read is ``agentlog_over_floor_us``: what agentlog costs per span beyond the
floor, in CPU time. With ``--ceiling``, a fourth row, ``free_bodies``: the ``agentlog`` row
with its two typed bodies taken ready-made (``started_of`` and ``ended_of`` return the plain
span's) and each payload's walk and encoding looked up by its ``repr`` instead of made: what
the rest of the path (recording lookup, bookkeeping, batch, chain hash, events, WAL) costs
when building and encoding the bodies cost nothing, so the most that faster bodies and a
faster walk could give in Python. A probe, not a mode: it patches agentlog in the process. With ``--pieces``, the steps of a plain span's two events in this tree are
also timed alone (``pieces_us``: the two bodies built, their payloads, the walk and encode, the
whole staging, the batch, one WAL write); it needs a tree with ``RunWriter._stage_body``.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import logger

log = logger("spans_floor")
_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("floor_active", default=True)


def _floor_processor(fd: int) -> Any:
    import dataclasses

    from opentelemetry.sdk.trace import SpanProcessor

    from agentlog.events import Event

    # The event made as cheaply as Python allows (its slots set in order), by the bench itself,
    # so that the floor is the same code whichever agentlog tree is imported.
    setters = [getattr(Event, f.name).__set__ for f in dataclasses.fields(Event)]

    def stamped(*values: Any) -> Any:
        event = object.__new__(Event)
        for setter, value in zip(setters, values, strict=True):
            setter(event, value)
        return event

    class Floor(SpanProcessor):  # type: ignore[misc]
        def __init__(self) -> None:
            self.head, self.seq, self.held, self.live, self.events = "0" * 64, 0, [], {}, []

        def _emit(self, type_: str, payload: dict[str, Any], span_id: str, caused_by: str) -> Any:
            text = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()
            body = (f'{{"actor":null,"caused_by":{caused_by},"payload":{text},"seq":{self.seq},'
                    f'"span_id":"{span_id}","ts":{time.time_ns() // 1000},"type":"{type_}"}}')
            digest = hashlib.sha256(f"{self.head}\n{body}".encode()).hexdigest()
            event = stamped(self.seq, type_, payload, None, None, span_id, 0, None, None, None, None, None,
                            None, digest)
            self.events.append(event)
            self.held.append(f'{{"hash":"{digest}","event":{body}}}\n'.encode())
            self.seq, self.head = self.seq + 1, digest
            return event

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            if not _ACTIVE.get():
                return
            started = self._emit("span.started", {"name": span.name, "kind": "chain", "parent": None,
                                                  "attributes": dict(span.attributes or {}),
                                                  "otel": {"kind": "INTERNAL", "scope": "bench"}},
                                 f"s{self.seq}", "null")
            self.live[span.context.span_id] = started

        def on_end(self, span: Any) -> None:
            started = self.live.pop(span.context.span_id)
            self._emit("span.ended", {"name": span.name, "status": "ok", "error": None}, started.span_id,
                       str(started.seq))
            os.write(fd, b"".join(self.held))
            self.held = []

    return Floor()


def _spans(tracer: Any, count: int) -> None:
    for _ in range(count):
        with tracer.start_as_current_span("step"):
            pass


@contextlib.contextmanager
def _free_bodies() -> Iterator[None]:
    """The ``free_bodies`` probe: agentlog's bodies ready-made and its payload encodings looked
    up (see the module docstring), for the ``with`` block."""
    from agentlog.interop.spanmap import ended_of, started_of
    from agentlog.otel import processor
    from agentlog.store.payload import PayloadPreparer

    started = started_of("step", {}, {"kind": "INTERNAL", "scope": "bench"}, parent=None, kind="chain")
    ended = ended_of("step", {}, 1, None, started=started, kind="chain")
    encode = PayloadPreparer.encode
    done: dict[str, Any] = {}

    def looked_up(self: PayloadPreparer, payload: Any) -> Any:
        key = repr(payload)
        found = done.get(key)
        if found is None:
            found = done[key] = encode(self, payload)
        return found

    processor.started_of, processor.ended_of = (lambda *a, **k: started), (lambda *a, **k: ended)  # type: ignore[assignment]
    PayloadPreparer.encode = looked_up  # type: ignore[method-assign]
    try:
        yield
    finally:
        processor.started_of, processor.ended_of = started_of, ended_of
        PayloadPreparer.encode = encode  # type: ignore[method-assign]


def floor(*, quick: bool = False, ceiling: bool = False) -> dict[str, Any]:
    """The three rows (see the module docstring), and the ``free_bodies`` probe with
    ``ceiling``, as a dict."""
    from opentelemetry.sdk.trace import TracerProvider

    import agentlog as al
    from agentlog.capture.recorder import Recorder, activate
    from agentlog.capture.sinks import WriterSink

    count, trials = (500, 3) if quick else (2000, 7)
    with tempfile.TemporaryDirectory() as tmp:
        fd = os.open(Path(tmp) / "floor.wal", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        bare = TracerProvider().get_tracer("bench")
        floored = TracerProvider()
        floored.add_span_processor(_floor_processor(fd))
        ours = TracerProvider()
        ours.add_span_processor(al.otel.SpanProcessor())
        store = al.Store(Path(tmp) / "store")

        def agentlog_row() -> None:
            writer = store.create_run(name="bench", durability="none")
            with activate(Recorder(WriterSink(writer))):
                _spans(ours.get_tracer("bench"), count)
            writer.close("finished")

        rows: dict[str, Callable[[], None]] = {
            "bare": lambda: _spans(bare, count),
            "floor": lambda: _spans(floored.get_tracer("bench"), count),
            "agentlog": agentlog_row,
        }
        if ceiling:
            def free_bodies_row() -> None:
                with _free_bodies():
                    agentlog_row()
            rows["free_bodies"] = free_bodies_row
        for run in rows.values():  # warm
            run()
        cpu: dict[str, list[float]] = {name: [] for name in rows}
        wall: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(trials):  # the rows in turns: a load that comes and goes falls on each
            for name, run in rows.items():
                t0, c0 = time.perf_counter(), time.process_time()
                run()
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        os.close(fd)
    us = {name: statistics.median(v) / count * 1e6 for name, v in cpu.items()}
    out: dict[str, Any] = {"spans_per_trial": count, "trials": trials}
    for name in rows:
        out[f"{name}_cpu_us_per_span"] = round(us[name], 1)
        out[f"{name}_cpu_spans_per_s"] = round(1e6 / us[name])
        out[f"{name}_spans_per_s"] = round(count / statistics.median(wall[name]))
        log(f"{name}: {1e6 / us[name]:,.0f} spans/s CPU ({us[name]:.1f} µs per span)")
    out["floor_over_bare_us"] = round(us["floor"] - us["bare"], 1)
    out["agentlog_over_bare_us"] = round(us["agentlog"] - us["bare"], 1)
    out["agentlog_over_floor_us"] = round(us["agentlog"] - us["floor"], 1)
    out["agentlog_over_floor_ratio"] = round((us["agentlog"] - us["bare"]) / max(us["floor"] - us["bare"], 1e-9), 2)
    if ceiling:
        out["free_bodies_over_bare_us"] = round(us["free_bodies"] - us["bare"], 1)
    out["target_spans_per_s>=20000"] = out["agentlog_cpu_spans_per_s"] >= 20000
    out["load_average_1min"] = round(os.getloadavg()[0], 2)
    return out


def pieces() -> dict[str, float]:
    """What the steps of a plain span's two events cost alone (``timeit``, min of 7), µs."""
    import timeit

    import agentlog as al
    from agentlog.events import SpanEnded
    from agentlog.interop.spanmap import ended_of, started_of
    from agentlog.store.writer import Emit

    otel = {"kind": "INTERNAL", "scope": "bench"}
    started, ended = started_of("step", {}, otel, parent=None, kind="chain"), SpanEnded(name="step")
    with tempfile.TemporaryDirectory() as tmp:
        writer = al.Store(tmp).create_run(name="pieces", durability="none")
        prep = writer._prep  # the run's payload walk (redaction, blobs) and encoder
        payloads = started.to_payload(), ended.to_payload()
        fd = os.open(Path(tmp) / "lines", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        line = b"x" * 700
        steps: dict[str, Callable[[], Any]] = {
            "started_of": lambda: started_of("step", {}, otel, parent=None, kind="chain"),
            "ended_of": lambda: ended_of("step", {}, 0, None),
            "to_payload_both": lambda: (started.to_payload(), ended.to_payload()),
            "walk_and_encode_both": lambda: (prep.encode(payloads[0]), prep.encode(payloads[1])),
            "stage_both": lambda: (writer._stage_body(started, 5, "0" * 64, None, None, "s5", None),
                                   writer._stage_body(ended, 6, "0" * 64, None, 5, "s5", None)),
            "emit_many_both": lambda: (writer.emit_many([Emit(started, None, None, "s1")], hold=True),
                                       writer.emit_many([Emit(ended, None, 0, "s1")], hold=True)),
            "wal_write": lambda: os.write(fd, line),
        }
        out = {}
        for name, step in steps.items():
            n = 2000 if name == "emit_many_both" else 10000
            out[name] = round(min(timeit.repeat(step, number=n, repeat=7)) / n * 1e6, 1)
        writer.close()
        os.close(fd)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer spans and trials")
    parser.add_argument("--pieces", action="store_true", help="also time the steps of a span alone")
    parser.add_argument("--ceiling", action="store_true",
                        help="also the free_bodies probe: agentlog with its bodies and encodings costing nothing")
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "spans_floor", "quick": args.quick,
                           **floor(quick=args.quick, ceiling=args.ceiling)}
    if args.pieces:
        out["pieces_us"] = pieces()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
