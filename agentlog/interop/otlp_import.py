"""Spans from other tracers into agentlog runs: one run per trace, idempotently.

A trace maps to one run, ``otlp-<trace id>`` (:func:`run_id_of_trace`). Spans of a trace
whose run exists are appended only if the run does not hold them yet (a run knows its spans
by the span ids in ``span.started``'s ``otel``), so the same file imported twice, or the same
spans sent twice to ``agentlog serve --otlp``, leave the run as it is, and spans that arrive
later extend it. What each span becomes is :mod:`agentlog.interop.spanmap`'s mapping.

The events of the spans that arrive together are in time order (ties: parents start before
children and end after them), with ``ts`` from the span times (ns → µs). Spans that arrive
later are appended after them: a live trace's run is in arrival order, and each span keeps
its own times. A foreign span's agentlog span id is its OpenTelemetry span id (so a child
that arrives before its parent, as exporters send them, names its parent already); a span an
agentlog export wrote gets its old id back. ``caused_by`` links a response to its request
and an end to its start. What does not map: span links, resources (``service.name`` is kept
in the run's tags), an ``llm`` span that arrives after the ``llm`` span below it was written
(both count then), and the root span of an agentlog export whose run was already started.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..events import SpanStarted
from ..events.event import Event
from ..store.writer import Emit
from . import semconv as sc
from ._common import SOURCE_TAG, Clock, append_events, renumber_cause
from .otlp_read import OtelSpan
from .spanmap import (
    LLM,
    Out,
    call_outs,
    ended,
    event_outs,
    json_value,
    llm_below,
    renumbered,
    span_kind,
    started,
)

if TYPE_CHECKING:
    from ..store import Run, RunWriter, Store

__all__ = ["TraceIndex", "TraceRuns", "run_id_of_trace", "runs_from_spans"]

#: The ``source`` tag of a run made from OpenTelemetry spans.
SOURCE: Final = "otlp"


def run_id_of_trace(trace_id: str) -> str:
    """The id of the run that holds a trace.

    >>> run_id_of_trace("ab" * 16)
    'otlp-abababababababababababababababab'
    """
    return f"otlp-{trace_id}"


@dataclass(slots=True)
class TraceIndex:
    """What a trace's run holds already: its spans, by OpenTelemetry span id."""

    spans: dict[str, tuple[str, str | None, str]] = field(default_factory=dict)
    """OpenTelemetry span id → (agentlog span id, parent's OpenTelemetry span id, kind)."""
    started: bool = False
    """True once the run has events."""

    @classmethod
    def of_run(cls, run: Run) -> TraceIndex:
        """The index of a run on disk."""
        index = cls(started=len(run) > 0)
        for event in run.iter_events():
            if event.type == SpanStarted.TYPE and event.span_id is not None:
                body = SpanStarted.of(event)
                otel = body.otel or {}
                if isinstance(otel.get("span_id"), str):
                    index.spans[otel["span_id"]] = (event.span_id, otel.get("parent_span_id"), body.kind)
        return index


@dataclass(slots=True)
class _Item:
    order: tuple[Any, ...]
    out: Out
    ns: int
    span: str | None
    cause: _Item | None = None
    seq: int = -1


def _depths(spans: list[OtelSpan]) -> dict[str, int]:
    by_id = {s.span_id: s for s in spans}
    depth: dict[str, int] = {}

    def of(span_id: str) -> int:
        seen = []
        node: str | None = span_id
        while node is not None and node not in depth and node in by_id and node not in seen:
            seen.append(node)
            node = by_id[node].parent_id
        base = depth.get(node, -1) if node is not None else -1
        for n in reversed(seen):
            base += 1
            depth[n] = base
        return depth[span_id]

    for s in spans:
        of(s.span_id)
    return depth


def _own_id(span: OtelSpan) -> str:
    fixed = span.attributes.get(sc.AL_SPAN_ID)
    return fixed if isinstance(fixed, str) and fixed else span.span_id


def _span_items(span: OtelSpan, depth: int, index: int, parent: str | None, call: bool) -> list[_Item]:
    sid = _own_id(span)
    start, end = (span.start_ns, 1, depth, index), (span.end_ns, 3, -depth, index)
    first = _Item(start + (0,), Out.of(started(span, parent=parent)), span.start_ns, sid)
    items = [first]
    outs = call_outs(span) if call else []
    if outs:
        request = _Item(start + (1,), outs[0], span.start_ns, sid)
        items.append(request)
        items += [_Item(end + (0,), out, span.end_ns, sid, cause=request) for out in outs[1:]]
    items += [_Item((ns, 2, order, index), out, ns, sid) for ns, order, out in event_outs(span)]
    last = ended(span)
    if last is not None:
        items.append(_Item(end + (1,), Out.of(last), span.end_ns, sid, cause=first))
    return items


def _events(items: list[_Item], first_seq: int) -> list[Emit | Event]:
    """Number the items from ``first_seq``, link causes, and build the events: a typed body
    (checked when the mapping built it) as an :class:`Emit` at its time, an exported event of
    any type as an :class:`Event`, which the writer checks as an imported one."""
    old_to_new: dict[int, int] = {}
    for seq, item in enumerate(items, start=first_seq):
        item.seq = seq
        if item.out.old_seq is not None:
            old_to_new[item.out.old_seq] = seq
    events: list[Emit | Event] = []
    for item in items:
        out = item.out
        cause = item.cause.seq if item.cause is not None else renumber_cause(out.old_cause, old_to_new, item.seq)
        if out.body is not None:
            events.append(Emit(out.body, out.actor, cause, item.span, item.ns // 1000))
        else:
            events.append(Event(seq=item.seq, type=out.type, payload=renumbered(out, old_to_new), actor=out.actor,
                                caused_by=cause, span_id=item.span, ts=item.ns // 1000, **dict(out.columns)))
    return events


def trace_events(spans: list[OtelSpan], index: TraceIndex,
                 first_seq: int) -> tuple[list[Emit | Event], dict[str, Any]]:
    """The events of the spans of one trace that ``index`` does not hold yet (it is updated),
    from ``first_seq`` on, and what an agentlog export's root span says about the run (name,
    tags)."""
    new = [s for s in spans if s.span_id not in index.spans]
    roots = {s.span_id for s in new if s.attributes.get(sc.AL_ROOT) is True}
    run_info: dict[str, Any] = {}
    depth = _depths(new)
    ordered = sorted(new, key=lambda s: (s.start_ns, depth[s.span_id]))
    for s in ordered:
        if s.span_id not in roots:
            index.spans[s.span_id] = (_own_id(s), s.parent_id, span_kind(s.attributes))
    covered = llm_below((oid, parent, kind) for oid, (_, parent, kind) in index.spans.items())
    items: list[_Item] = []
    for i, span in enumerate(ordered):
        if span.span_id in roots:
            run_info = {"name": span.attributes.get(sc.AL_RUN_NAME),
                        "tags": json_value(span.attributes.get(sc.AL_RUN_TAGS))}
            if not index.started:  # the run's own events, kept in the root span
                items += [_Item((ns, 2, order, i), out, ns, None) for ns, order, out in event_outs(span)]
            continue
        known = index.spans.get(span.parent_id) if span.parent_id is not None else None
        parent = None if span.parent_id is None or span.parent_id in roots else (
            known[0] if known is not None else span.parent_id)
        call = not (span_kind(span.attributes) == LLM and span.span_id in covered)
        items += _span_items(span, depth[span.span_id], i, parent, call)
    items.sort(key=lambda item: item.order)
    index.started = index.started or bool(items)
    return _events(items, first_seq), run_info


# --- runs -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Open:
    writer: RunWriter | None
    """``None`` until a span the run does not hold arrives."""
    index: TraceIndex
    clock: Clock
    touched: float


def _tags(trace_id: str, spans: list[OtelSpan], info: Mapping[str, Any]) -> dict[str, Any]:
    service = next((s.resource.get(sc.SERVICE_NAME) for s in spans if s.resource.get(sc.SERVICE_NAME)), None)
    given = info.get("tags")
    tags: dict[str, Any] = dict(given) if isinstance(given, Mapping) else (
        {"labels": list(given)} if isinstance(given, list) else {})
    tags.update({SOURCE_TAG: SOURCE, "trace_id": trace_id})
    if service is not None:
        tags[sc.SERVICE_NAME] = service
    return tags


def _name(trace_id: str, spans: list[OtelSpan], info: Mapping[str, Any]) -> str:
    """The run's name: an agentlog export's, else the root span's; a live trace whose root has
    not arrived yet (exporters send it last) is named by its service and trace id."""
    if info.get("name"):
        return str(info["name"])
    root = next((s for s in sorted(spans, key=lambda s: s.start_ns) if s.parent_id is None), None)
    if root is not None:
        return root.name
    service = next((s.resource.get(sc.SERVICE_NAME) for s in spans if s.resource.get(sc.SERVICE_NAME)), None)
    return f"{service or 'trace'} {trace_id[:8]}"


class TraceRuns:
    """Writes spans into one run per trace, idempotently (the OTLP import and endpoint share it).

    Args:
        store: the store.
        name: the name of new runs (default: the trace's root span's name).
        keep_open: keep each run's writer open between calls of :meth:`add` (the endpoint,
            which closes runs idle for a while with :meth:`close_idle`); else each call closes
            what it opened.

    Thread-safe: calls are serialised.
    """

    def __init__(self, store: Store, *, name: str | None = None, keep_open: bool = False) -> None:
        self.store, self.name, self.keep_open = store, name, keep_open
        self._open: dict[str, _Open] = {}
        self._lock = threading.Lock()

    def add(self, spans: Iterable[OtelSpan]) -> list[Run]:
        """Write the spans the runs of their traces do not hold yet.

        Returns:
            The run of each trace the spans belong to (new, extended or unchanged), in the
            order of the traces' first span starts.
        """
        traces: dict[str, list[OtelSpan]] = {}
        for span in spans:
            traces.setdefault(span.trace_id, []).append(span)
        ordered = sorted(traces.items(), key=lambda kv: min(s.start_ns for s in kv[1]))
        with self._lock:
            ids = [self._add_trace(trace_id, members) for trace_id, members in ordered]
            if not self.keep_open:
                self._close_all()
        return [self.store.run(rid, exact=True) for rid in ids]

    def _add_trace(self, trace_id: str, spans: list[OtelSpan]) -> str:
        run_id = run_id_of_trace(trace_id)
        held = self._open.get(run_id)
        if held is None and run_id in self.store:
            run = self.store.run(run_id, exact=True)
            held = _Open(writer=None, index=TraceIndex.of_run(run), clock=Clock(0), touched=0.0)
            first = len(run)
        else:
            first = held.writer.seq if held is not None and held.writer is not None else 0
        index = held.index if held is not None else TraceIndex()
        events, info = trace_events(spans, index, first)
        if not events:
            return run_id
        if held is None:
            clock = Clock(min(s.start_ns for s in spans) // 1000)
            writer = self.store.create_run(run_id=run_id, name=self.name or _name(trace_id, spans, info),
                                           tags=_tags(trace_id, spans, info), clock=clock, durability="batch")
            held = self._open[run_id] = _Open(writer, index, clock, 0.0)
        held.clock.us = max(held.clock.us, max(e.ts or 0 for e in events))
        if held.writer is None:
            held.writer = self.store.writer(run_id, clock=held.clock, durability="batch")
            self._open[run_id] = held
        append_events(held.writer, events)
        held.writer.flush()
        held.touched = time.monotonic()
        return run_id

    def close_idle(self, idle: float) -> list[str]:
        """Close the runs no span reached for ``idle`` seconds; returns their ids."""
        with self._lock:
            now = time.monotonic()
            done = [rid for rid, held in self._open.items() if now - held.touched >= idle]
            for rid in done:
                self._close(rid)
            return done

    def close(self) -> None:
        """Close every run this object holds open."""
        with self._lock:
            self._close_all()

    def _close_all(self) -> None:
        for rid in list(self._open):
            self._close(rid)

    def _close(self, run_id: str) -> None:
        held = self._open.pop(run_id)
        if held.writer is not None:
            held.writer.close("closed")


def runs_from_spans(spans: Iterable[OtelSpan], store: Store, *, name: str | None = None) -> list[Run]:
    """One run per trace id, new or extended by the spans it does not hold yet, in the order
    of the traces' first span starts."""
    return TraceRuns(store, name=name).add(spans)
