"""Where a recorder's events go, and where recorded answers come from.

A :class:`~agentlog.capture.recorder.Recorder` does not know whether it records, replays or
forks: it asks its sink to serve a recorded answer to each call (:meth:`Sink.serve`) and hands
it every event (:meth:`Sink.emit`).

- :class:`WriterSink` appends to a run; with a :class:`ResponseCache` it serves calls whose key
  was recorded before (permissive replay, and forks after the cut), and a fork's edits.
- :class:`ReplaySink` compares the first ``prefix`` events with a recorded run and serves the
  recorded answers in place (strict replay, and a fork's prefix); past the prefix it hands over
  to a writer, or reports that the program emitted more than was recorded.

A run that was stopped and resumed (the loop runtime, :mod:`agentlog.capture.runtime`) holds
two kinds of events its program did not emit itself: spans that a resume closed as
``interrupted`` after a crash, and facts appended from outside while it was stopped
(:data:`EXTERNAL_TYPES`: approval decisions, budget changes). On replay, :class:`ReplaySink`
raises :class:`Interrupted` where the recorded process died, so the program can go on the way
the resume did, and :meth:`ReplaySink.external` hands the outside facts to the program at the
point where it stopped.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from functools import partial
from typing import Any, Final, NoReturn, Protocol, TypeVar

from ..canonical import canonical_json
from ..chain import GENESIS, chain_hash
from ..chain import body_of as chain_body
from ..errors import CanonicalJSONError, DivergenceError
from ..events import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    BUDGET_SET,
    ERROR,
    FORK_STARTED,
    HTTP_REQUEST,
    HTTP_RESPONSE,
    LLM_REQUEST,
    LLM_RESPONSE,
    RANDOM_VALUE,
    TIME_NOW,
    TOOL_CALL,
    TOOL_RESULT,
    UUID_NEW,
    BlobRef,
    Body,
    CallFailed,
    Event,
    HTTPRequest,
    HTTPResponse,
    LLMResponse,
    SpanEnded,
    SpanEvent,
    SpanStarted,
    ToolResult,
    body_of,
)
from ..redact import DEFAULT, Redactor
from ..store.writer import Emit, item_body
from .divergence import Divergence, as_recorded, differing_fields, payload_diff
from .headers import TRACE_HEADERS, describes_the_client

__all__ = ["EXTERNAL_TYPES", "RESPONSE_TYPES", "Interrupted", "ReplaySink", "ResponseCache", "Sink",
           "WriterSink", "answer_kind", "cached", "is_interruption", "item_span", "recorded_by", "run_redactor"]

#: Event types that answer a call, and so can be served from a log. ``error`` answers a call
#: that failed: replay fails it the same way.
RESPONSE_TYPES: Final = frozenset({LLM_RESPONSE, TOOL_RESULT, HTTP_RESPONSE, ERROR, TIME_NOW, UUID_NEW,
                                   RANDOM_VALUE})

#: Event types appended to a run from outside its program while it was stopped: a person's
#: decision (``al.approve`` / ``al.deny``) and a new budget. Replay hands them to the program
#: (:meth:`ReplaySink.external`) instead of expecting the program to emit them.
EXTERNAL_TYPES: Final = frozenset({APPROVAL_GRANTED, APPROVAL_DENIED, BUDGET_SET})

Observer = Callable[[Event], None]

_KEY: Final = LLMResponse.K.key
_KIND: Final = CallFailed.K.kind

#: How many recorded events past the next one strict replay reads to find the one a program
#: emits when its calls, made side by side, came in another order than recorded.
LOOKAHEAD: Final = 10_000
#: How many recorded events past the next one strict replay looks at for a tracer's span with
#: the same attributes, when spans alike were opened side by side (see ReplaySink._batch).
ALIKE_AHEAD: Final = 64


class Interrupted(BaseException):
    """Replay reached the point where the recorded run's process stopped (killed, crashed).

    Raised by :class:`ReplaySink` where the recorded run holds a ``span.ended`` with error
    ``interrupted`` that the program did not write. The recorder's spans close as
    ``interrupted`` while it unwinds, exactly as the resume closed them, and a program that
    resumes (the loop runtime) catches it and goes on. A ``BaseException``, like
    ``KeyboardInterrupt``, so that ``except Exception`` in a program does not swallow it.
    """

    def __init__(self, seq: int) -> None:
        self.seq = seq
        super().__init__(f"the recorded run was interrupted at seq {seq}")


def is_interruption(event: Event | None) -> bool:
    """True for the ``span.ended`` a resume writes for a span that a crash left open.

    >>> is_interruption(Event(seq=3, type="span.ended", payload={"status": "error", "error": "interrupted"}))
    True
    """
    return event is not None and event.type == SpanEnded.TYPE and SpanEnded.of(event).interrupted


#: The fields of a ``span.ended`` that tell what a tracer saw at the span's end, not what the
#: program did: a replay does not compare them (:func:`_seen_only`).
_SEEN: Final = frozenset({SpanEnded.K.attributes, SpanEnded.K.kind})


def _seen_only(expected: Event, actual: Event, *, traced: bool = False) -> bool:
    """True when two events differ only in what a tracer or the client saw, not in what the
    program did: the headers in which an HTTP client describes itself (an SDK's version, the
    OS: :mod:`agentlog.capture.headers`); the
    ``attributes`` of a tracer's span (an OpenTelemetry span's: ``otel`` is set), which can hold
    values new on every run (LangChain's message ids, PydanticAI's conversation and call ids),
    as its ``span.started`` or its ``span.ended`` has them, and the ``kind`` a ``span.ended``
    tells (absent from a run recorded before ``span.ended`` carried it); a ``span.started``
    recorded at the root that now opens under a framework's span (a run recorded before the
    spans of LangChain's runs were found as parents:
    :data:`agentlog.otel.processor.FRAMEWORK_SPANS`). What the program asked and was answered
    is in the call's own events, compared in full. In a tracer's span (``traced``: its
    ``span.started`` has ``otel``): of an exception it recorded (an ``error`` that answers no
    call) only the type is compared, not its message or traceback (LangGraph's interrupt holds
    an id new on every run; a traceback's paths and line numbers move with any edit of the
    code); of a span event only its name, not its attributes; of its end its status, not the
    error text the tracer took from the exception."""
    if expected.type != actual.type:
        return False
    if expected.type == HTTPRequest.TYPE:
        return _what_was_asked(expected.payload) == _what_was_asked(actual.payload)
    if expected.type == SpanEnded.TYPE:
        seen = _SEEN | {SpanEnded.K.error} if traced else _SEEN
        return _without(expected.payload, seen) == _without(actual.payload, seen)
    if expected.type == ERROR:
        return traced and _answers_no_call(expected) and _answers_no_call(actual) and \
            expected.payload.get(CallFailed.K.type) == actual.payload.get(CallFailed.K.type)
    if expected.type == SpanEvent.TYPE:
        return traced and expected.payload.get(SpanEvent.K.name) == actual.payload.get(SpanEvent.K.name)
    if expected.type != SpanStarted.TYPE:
        return False
    ignored: set[str] = set()
    if expected.payload.get(_OTEL) is not None:
        ignored.add(_ATTRIBUTES)
    if expected.payload.get(_PARENT) is None:
        ignored.add(_PARENT)
    return bool(ignored) and _without(expected.payload, ignored) == _without(actual.payload, ignored)


def _answers_no_call(error: Event) -> bool:
    """Whether an ``error`` is an exception a tracer's span recorded: it answers no call (no
    kind, no key), as :func:`agentlog.interop.spanmap.event_out` writes it."""
    payload = error.payload
    return payload.get(CallFailed.K.kind) is None and payload.get(CallFailed.K.key) is None


_PARENT: Final = SpanStarted.K.parent
_REQUESTS: Final = frozenset({LLM_REQUEST, TOOL_CALL, HTTP_REQUEST})
_OTEL: Final = SpanStarted.K.otel
_ATTRIBUTES: Final = SpanStarted.K.attributes


def _what_was_asked(payload: Mapping[str, Any]) -> dict[str, Any]:
    """An ``http.request``'s payload without the headers in which the client describes itself
    (its version, OS, runtime) or a tracer put its trace context (in runs recorded before it
    was left out): :mod:`agentlog.capture.headers`."""
    headers = payload.get(_HEADERS)
    if not isinstance(headers, Mapping):
        return dict(payload)
    return {**payload, _HEADERS: {name: value for name, value in headers.items()
                                  if not (describes_the_client(name) or name in TRACE_HEADERS)}}


_HEADERS: Final = HTTPRequest.K.headers


def _without(payload: Mapping[str, Any], keys: AbstractSet[str]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in keys}


def item_span(item: Emit, events: Sequence[Event], seq: int) -> str | None:
    """The span id of a batch's item emitted one at a time: its ``span_id``, or the span its
    ``span_item`` names (``events``: the batch's items emitted so far; ``seq``: the next seq,
    this item's)."""
    if item.span_item is None:
        return item.span_id
    return f"s{seq if item.span_item == len(events) else events[item.span_item].seq}"


def _in_span(event: Event, span_id: str) -> bool:
    """Whether ``event`` is in span ``span_id``, or opens a span under it."""
    return event.span_id == span_id or (event.type == SpanStarted.TYPE and event.payload.get(_PARENT) == span_id)


def _apart(batch: Sequence[Event], skipped: Sequence[Event]) -> bool:
    """Whether none of the ``skipped`` events is in a span of ``batch`` (but those it opens:
    a span re-bound opens where another's did, after its own events may be) or its cause."""
    opened = {e.span_id for e in batch if e.type == SpanStarted.TYPE}
    spans, causes = {e.span_id for e in batch} - opened, {e.caused_by for e in batch}
    return not any(e.span_id in spans or e.seq in causes for e in skipped)


def _after_part(item: Emit, part: Sequence[Event]) -> Emit:
    """An item of a batch past the fork's cut, its span and cause named by the events of the
    batch's ``part`` before the cut where it points into it, its indexes moved past them."""
    n = len(part)
    span_id, span_item, caused_by, caused_by_item = item.span_id, item.span_item, item.caused_by, item.caused_by_item
    if span_item is not None:
        span_id, span_item = (f"s{part[span_item].seq}", None) if span_item < n else (span_id, span_item - n)
    if caused_by_item is not None:
        caused_by, caused_by_item = (part[caused_by_item].seq, None) if caused_by_item < n \
            else (caused_by, caused_by_item - n)
    return item._replace(span_id=span_id, span_item=span_item, caused_by=caused_by, caused_by_item=caused_by_item)


T = TypeVar("T")

_UNSEEN: Final = 1 << 62
"""The first seq naming a program span that took a start matched for another (a seq no event has)."""


def _parent_of(started: Event) -> str | None:
    """The span a span.started opened its span under."""
    parent = started.payload.get(_PARENT)
    return parent if isinstance(parent, str) else None


def _seq_of(span_id: str) -> int:
    """The seq a span id ``s<seq>`` names (-1 for another id)."""
    return int(span_id[1:]) if span_id[:1] == "s" and span_id[1:].isdigit() else -1


def _alike(one: Event, other: Event) -> bool:
    """Whether two span.started events open spans alike: the same but for their parent and, for
    a tracer's spans, the values of their attributes (the same attributes: values a strict
    replay does not compare, :func:`_seen_only`, which may be new on every run, as PydanticAI's
    conversation ids are)."""
    if one.actor != other.actor:
        return False
    if one.payload.get(_OTEL) is None:
        return _without(one.payload, {_PARENT}) == _without(other.payload, {_PARENT})
    seen = {_PARENT, _ATTRIBUTES}
    return _without(one.payload, seen) == _without(other.payload, seen) and _names(one) == _names(other)


def _after_alike(started: Event, skipped: Sequence[Event]) -> bool:
    """Whether a recorded span.started comes after one alike under the same parent among
    ``skipped`` (not matched yet): a span that opened both opened that one first, so a
    program span re-bound to the parent takes that one first (a branch taking another's chat
    does not skip its first call's span for its second)."""
    parent = _parent_of(started)
    return any(e.type == SpanStarted.TYPE and _parent_of(e) == parent and _alike(e, started) for e in skipped)


def _names(started: Event) -> set[str]:
    """The names of a span.started's attributes."""
    attributes = started.payload.get(_ATTRIBUTES)
    return set(attributes) if isinstance(attributes, Mapping) else set()


def _traced_start(item: Emit) -> bool:
    """Whether ``item`` opens a span a tracer opened (an OpenTelemetry span's)."""
    return item.span_item == 0 and isinstance(item.body, SpanStarted) and item.body.otel is not None


def _opened_in(item: Emit) -> str | None:
    """The span a batch's first item is written in: for a ``span.started`` that opens its own
    span, the span it opens under."""
    if item.span_item == 0 and isinstance(item.body, SpanStarted):
        return item.body.parent
    return item.span_id


def answer_kind(event: Event) -> tuple[str, str]:
    """``(kind, key)`` of an answer event: an ``error`` answers the kind of call that failed.

    >>> answer_kind(Event(seq=4, type="error", payload={"kind": "tool.result", "key": "k", "error": "x"}))
    ('tool.result', 'k')
    """
    payload = event.payload
    kind = str(payload.get(_KIND) or event.type) if event.type == ERROR else event.type
    return kind, str(payload.get(_KEY, ""))


def run_redactor(run: Any) -> Redactor:
    """The redaction policy a run was written with (its writer's names in ``run.json``)."""
    settings = run.meta.get("writer") or {}
    names = settings.get("redact") or () if isinstance(settings, Mapping) else ()
    return Redactor(names) if names else DEFAULT


class Sink(Protocol):
    """What a recorder writes to and serves recorded answers from."""

    observer: Observer | None

    @property
    def run_id(self) -> str: ...

    @property
    def next_seq(self) -> int: ...

    @property
    def redactor(self) -> Redactor: ...

    def emit(self, body: Body | str, payload: Mapping[str, Any] | None = None, *, actor: str | None,
             caused_by: int | None, span_id: str | None, **usage: Any) -> Event: ...

    def serve(self, kind: str, key: str, *, actor: str | None, caused_by: int | None,
              span_id: str | None) -> Event | None: ...

    def emit_many(self, items: Sequence[Emit], *, hold: bool = False, sync: bool = True) -> list[Event]: ...

    def flush(self) -> None: ...

    def put_blob(self, data: bytes | str, media_type: str | None = None) -> BlobRef: ...

    def external(self) -> list[Event] | None: ...

    def close(self, status: str) -> None: ...

    def place(self, seq: int) -> int:
        """Where the event ``seq`` came among the events the program emitted or was served
        (higher: later): its seq when recording; in a replay, whose calls side by side may
        match recorded events out of the log's order, the order the program met them in."""
        ...

    def order(self, span_id: str | None) -> int:
        """:meth:`place` of the span.started that opened span ``span_id`` (-1 for ``None``)."""
        ...


def recorded_by(run: Any) -> Callable[[int], str]:
    """``seq -> the id of the run whose own events hold it``: a fork's prefix was recorded by its
    parent (and that parent's prefix by its own parent)."""
    owners: list[tuple[int, str]] = []  # (first own seq, run id), the run itself first
    while run is not None:
        owners.append((0 if run.fork_seq is None else run.fork_seq + 1, run.id))
        run = run.parent
    return lambda seq: next((rid for start, rid in owners if seq >= start), owners[-1][1])


class ResponseCache:
    """Recorded answers by ``(kind, key)``; the n-th identical call gets the n-th answer.

    Calls are matched by key (the request hash), so the same request asked twice is answered
    as it was the first and the second time. Values such as ``rec.now()`` have no key and are
    served in recorded order. The events are read as lookups need them, in order, and only as
    far as the answer asked for: a fork whose calls are the ones its parent made next reads
    its parent's tail a batch at a time, not the whole tail at its first call (a call the
    parent never made reads to the end, once).
    """

    def __init__(self, events: Iterable[Event]) -> None:
        self._events: Iterator[Event] | None = iter(events)
        self._answers: dict[tuple[str, str], deque[Event]] = defaultdict(deque)
        self._opened: dict[str, Event] = {}  # span -> its span.started
        self._named: defaultdict[str, list[Event]] = defaultdict(list)  # the span.started events by name
        self._asked_under: dict[str, str | None] = {}  # a call's key -> the span its own span opened under
        # calls answered at once from several threads (a parallel run's branches) read the
        # events one at a time: the iterator cannot be advanced from two threads
        self._lock = threading.RLock()

    def _read(self, until: tuple[str, str] | None = None) -> None:
        """Index the events not read yet, up to the first answer for ``until`` (all if None)."""
        events = self._events
        if events is None:
            return
        answers, opened, named, asked = self._answers, self._opened, self._named, self._asked_under
        for event in events:
            if event.type in RESPONSE_TYPES:
                found = answer_kind(event)
                answers[found].append(event)
                if found == until:
                    return
            elif event.type == SpanStarted.TYPE:
                opened[f"s{event.seq}"] = event
                named[str(event.payload.get(SpanStarted.K.name))].append(event)
            elif event.type in _REQUESTS and event.span_id in opened:
                asked.setdefault(str(event.payload.get(_KEY)), _parent_of(opened[event.span_id]))
        self._events = None

    def _index(self) -> dict[tuple[str, str], deque[Event]]:
        self._read()
        return self._answers

    def holds(self, key: str) -> bool:
        """Whether an answer to a call with this key, of any kind, is still here (reads the
        events to the end, once)."""
        with self._lock:
            return any(queue for (_, held), queue in self._index().items() if held == key)

    def asked_under(self, key: str) -> str | None:
        """The span under which the span of the first call with this key was opened (reads
        the events to the end, once)."""
        with self._lock:
            self._read()
            return self._asked_under.get(key)

    def opened(self, span_id: str) -> Event | None:
        """The span.started of span ``span_id`` among the events read (``None``: not there)."""
        with self._lock:
            return self._opened.get(span_id)

    def starts(self, name: str) -> list[Event]:
        """The span.started events opening a span of this name (reads the events to the end,
        once)."""
        with self._lock:
            self._read()
            return list(self._named.get(name, ()))

    def take(self, kind: str, key: str) -> Event | None:
        """Pop the next recorded answer for this call, or ``None`` when there is none."""
        with self._lock:
            queue = self._answers.get((kind, key))
            if not queue:
                self._read(until=(kind, key))
                queue = self._answers.get((kind, key))
            return queue.popleft() if queue else None

    def keys(self, kind: str) -> list[str]:
        """The recorded keys of one kind that still have answers."""
        with self._lock:
            return [k for (t, k), q in self._index().items() if t == kind and q]

    def __len__(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._index().values())


def cached(event: Event) -> Body:
    """A recorded answer to serve again in a new run: no tokens paid, so no cost.

    The answer names the seq it was recorded at (``served_from_seq``); a model's answer is a
    ``cache_hit`` costing 0 (or unknown, if its cost and model were).
    """
    body = body_of(event)
    if body is None:
        raise TypeError(f"{event.type} at seq {event.seq} is not an answer that can be served")
    if isinstance(body, LLMResponse):
        known = event.cost_usd is not None or event.model is not None
        return replace(body, cache_hit=True, cost_source="cache", served_from_seq=event.seq,
                       cost_usd=0.0 if known else None)
    if isinstance(body, (ToolResult, HTTPResponse)):
        return replace(body, served_from_seq=event.seq)
    return body  # a failure or a recorded value: served as it was


class WriterSink:
    """Append to a run; serve calls from a cache of recorded answers and from a fork's edits.

    Args:
        writer: the run's :class:`~agentlog.RunWriter`.
        cache: recorded answers to serve by key.
        edits: ``key -> answer body`` served in place of the call's recorded answer (once).
    """

    atomic_batches = True
    """:meth:`emit_many` writes all of a batch or none of it."""

    def __init__(self, writer: Any, cache: ResponseCache | None = None,
                 edits: Mapping[str, Body] | None = None) -> None:
        self.writer = writer
        self.run_id: str = writer.id
        self.cache = cache
        self.edits = dict(edits or {})
        self.observer: Observer | None = None
        self._checkpoints: Any = None
        self._state: Callable[[], Any] | None = None
        self._due: int | None = None
        self._next: int | None = None  # the seq at which the next periodic checkpoint is due

    def checkpoint_from(self, state: Callable[[], Any], reducers: Any) -> None:
        """Checkpoint ``state()`` (the recorder's folded state) where the writer seals a
        segment, every :data:`~agentlog.store.checkpoints.EVERY` events, and at close for runs
        of :data:`~agentlog.store.checkpoints.CLOSE_MIN` events or more (smaller runs fold in
        milliseconds). A checkpoint that cannot be written warns
        (:class:`~agentlog.errors.CheckpointWarning`); the recording goes on."""
        from ..folding.engine import _resolve
        from ..store.checkpoints import EVERY, CheckpointWriter
        writer = self.writer
        if not hasattr(writer, "on_seal"):
            return
        self._checkpoints = CheckpointWriter(writer._store, writer.id, writer.path, _resolve(reducers),
                                             durable=writer.durability.value != "none")
        self._state = state
        self._next = (writer.seq // EVERY + 1) * EVERY - 1
        writer.on_seal = self._sealed

    def _sealed(self, end: int, closing: bool) -> None:
        from ..store.checkpoints import CLOSE_MIN
        if closing:
            if end >= CLOSE_MIN:
                self._checkpoint(end - 1, self.writer.head)
        else:
            self._due = end - 1  # the event being written: checkpoint once the recorder saw it

    def _checkpoint(self, seq: int, head: str) -> None:
        assert self._state is not None and self._checkpoints is not None
        try:
            self._checkpoints.write(seq, head, self._state())
        except (OSError, TypeError, ValueError) as exc:
            import warnings

            from ..errors import CheckpointWarning
            warnings.warn(f"run {self.run_id!r}: no checkpoint at seq {seq} ({type(exc).__name__}: "
                          f"{exc}); the run is recorded all the same", CheckpointWarning, stacklevel=4)
            self._checkpoints = None
            self._next = None
            self.writer.on_seal = None

    @property
    def next_seq(self) -> int:
        return int(self.writer.seq)

    @property
    def redactor(self) -> Redactor:
        found: Redactor = self.writer.redactor
        return found

    def emit(self, body: Body | str, payload: Mapping[str, Any] | None = None, *, actor: str | None,
             caused_by: int | None, span_id: str | None, **usage: Any) -> Event:
        event: Event = self.writer.emit(body, payload, actor=actor, caused_by=caused_by,
                                        span_id=span_id, **usage)
        if self.observer is not None:
            self.observer(event)
            self.observed(event)
        return event

    def emit_many(self, items: Sequence[Emit], *, hold: bool = False, sync: bool = True) -> list[Event]:
        """Append several events in one batch (:meth:`~agentlog.RunWriter.emit_many`: one
        WAL write, or held for a later one with ``hold``; fsynced by a later write with
        ``sync=False``); each is observed, in order."""
        events: list[Event] = self.writer.emit_many(items, hold=hold, sync=sync)
        if self.observer is not None:
            for event in events:
                self.observer(event)
                self.observed(event)
        return events

    def place(self, seq: int) -> int:
        """The seq: events are written in the order they come."""
        return seq

    def order(self, span_id: str | None) -> int:
        """The span's seq."""
        return _seq_of(span_id) if span_id is not None else -1

    def flush(self) -> None:
        """Write the events held by :meth:`emit_many` now."""
        self.writer.flush()

    def observed(self, event: Event) -> None:
        """The recorder has folded ``event``: write a checkpoint a seal or the cadence made due."""
        if (self._due is not None and event.seq >= self._due) or (
                self._next is not None and event.seq >= self._next):
            from ..store.checkpoints import EVERY
            self._due = None
            self._next = ((event.seq + 1) // EVERY + 1) * EVERY - 1  # the last seq of the next stretch
            if self._checkpoints is not None:
                self._checkpoint(event.seq, event.hash)

    def serve(self, kind: str, key: str, *, actor: str | None, caused_by: int | None,
              span_id: str | None) -> Event | None:
        answer = self.edits.pop(key, None) if key else None
        if answer is None and self.cache is not None:
            recorded = self.cache.take(kind, key)
            answer = None if recorded is None else cached(recorded)
        if answer is None:
            return None
        return self.emit(answer, actor=actor, caused_by=caused_by, span_id=span_id)

    def put_blob(self, data: bytes | str, media_type: str | None = None) -> BlobRef:
        ref: BlobRef = self.writer.put_blob(data, media_type=media_type)
        return ref

    def external(self) -> list[Event] | None:
        """Nothing: while this sink's writer holds the run, no one else appends to it."""
        return None

    def close(self, status: str) -> None:
        self.writer.close(status=status)


class ReplaySink:
    """Compare the first ``prefix`` events with a recorded run; then write, or diverge.

    Args:
        recorded: the recorded events, in seq order (a list or a run's ``iter_events()``).
        run_id: the recorded run's id.
        prefix: how many events are compared and served from the log.
        after: the sink that takes over past the prefix (``None``: strict replay, where an
            extra event is a divergence).
        on_cut: called once, just before the first event past the prefix is emitted (a fork
            writes ``fork.started`` and its edits there).
        recorded_by: ``seq -> the id of the run that recorded it`` (:func:`recorded_by`): the
            idempotency keys of a fork's prefix were made by its ancestors.
        start: the seq of the first recorded event given (``recorded`` starts there): a fork
            of a loop run replays only the step the cut falls in.
        redactor: the recorded run's redaction policy (:func:`run_redactor`), so that keys
            are computed as they were.

    A recorded ``fork.started`` inside the prefix is taken as recorded, not compared, when the
    program emits its next event: ``al.fork`` wrote it there, not the program (so a fork, and a
    fork of a fork, replays through the cut).

    Calls made side by side (threads, tasks) may come in another order than recorded: an
    event, a batch or an answer that is not the next recorded one is looked for further on in
    the prefix (:data:`LOOKAHEAD` events), in its own span, and taken there when none of the
    events before it not yet matched is in that span; in a fork, a span whose recorded events
    go on past the cut goes past it while other flows are still replayed. A tracer's spans
    alike when they open, opened side by side, are bound to the recorded ones in the order they
    open and re-bound when the first thing done in one says it is another's (:meth:`_rebound`),
    never so as to part a span from the recorded one it is, attributes and all
    (:meth:`_same_as`). In a fork, spans written past the cut are re-bound the same way; a call
    going past the cut re-binds its spans to those the parent asked it under
    (:meth:`_bind_as_past`), and when those are past the cut too, its spans matched in the
    prefix move there (:meth:`_move_past`), their starts left to the next spans alike
    (:meth:`_adopt`; a start no span takes fails the fork when the program ends,
    :meth:`left_behind`). Threads compare in turn (:attr:`lock`).
    """

    def __init__(self, recorded: Iterable[Event], *, run_id: str, prefix: int,
                 after: WriterSink | None = None,
                 on_cut: Callable[[], None] | None = None,
                 recorded_by: Callable[[int], str] | None = None, start: int = 0,
                 redactor: Redactor = DEFAULT) -> None:
        self._recorded = self._reading(iter(recorded))
        self._ahead: deque[Event] = deque()  # recorded events read, from seq pos on
        self._early: set[int] = set()  # seqs past pos matched already (calls made side by side)
        self._ended: set[str] = set()  # spans whose recorded span.ended was matched
        self._past: set[str] = set()  # spans gone past a fork's cut while others are still replayed
        # Spans alike re-bound (_rebound): the recorded span each program span is, where they
        # differ (a program span is named by the seq its span.started matched), and back.
        self._as: dict[str, str] = {}
        self._of: dict[str, str] = {}
        self._starts: dict[int, Event] = {}  # the recorded span.started events read, by seq, until their span ends
        self._new_starts: dict[int, Event] = {}  # a fork's span.started written past its cut while in its prefix
        self._orphans: dict[str, Event] = {}  # span.started matched whose program span then went past the cut
        self._adopted: set[int] = set()  # the seqs naming program spans that took an orphan's start
        self._bodies: dict[str, SpanStarted] = {}  # a fork's program spans opened in its prefix, as opened
        self._firm: set[str] = set()  # program spans with events of their own (not re-bound)
        self._kids: defaultdict[str, list[str]] = defaultdict(list)  # program spans opened under one
        self._place: dict[int, int] = {}  # where the program met each event (place)
        self._last = -1
        self._went_past: Event | None = None  # the first call sent past a fork's cut before its prefix ended
        self._cutting = False
        self.lock = threading.RLock()
        """Held while an event or a batch is compared: threads of one program replay in turn."""
        self.prefix = prefix
        self.after = after
        self.on_cut = on_cut
        self.recorded_run_id = run_id
        self.recorded_by = recorded_by
        self.observer: Observer | None = None
        self.pos = start  # the seq the program's next event has (a loop fork starts mid-run)
        self.served = 0
        self._redactor = redactor
        self._prev: str | None = GENESIS if start == 0 else None  # the recorded hash before pos
        self.first_divergence: Divergence | None = None
        """The first divergence raised, even if the program caught it (an SDK that retries
        and wraps every error of its transport does): a replay reports this one."""

    @property
    def run_id(self) -> str:
        """Inside the prefix, the id of the run that recorded the next event (so idempotency keys
        match); then the new run's."""
        if self.in_prefix or self.after is None:
            return self._run_at(self.pos) if self.in_prefix else self.recorded_run_id
        return self.after.run_id

    def _run_at(self, seq: int) -> str:
        """The id of the run that recorded ``seq`` (a fork's prefix: an ancestor)."""
        return self.recorded_by(seq) if self.recorded_by is not None else self.recorded_run_id

    @property
    def next_seq(self) -> int:
        if self.pos < self.prefix or self.after is None:
            return self.pos
        return self.after.next_seq

    @property
    def redactor(self) -> Redactor:
        return self._redactor

    @property
    def _cache(self) -> ResponseCache | None:
        """A fork's parent's tail (its answers past the cut), or ``None`` (a strict replay)."""
        return self.after.cache if self.after is not None else None

    @property
    def in_prefix(self) -> bool:
        """True while events are still compared with the recorded run."""
        return self.pos < self.prefix

    # --- spans alike, re-bound ------------------------------------------------------------------
    # A tracer's spans alike under one parent (LangGraph's node spans of a Send fan-out,
    # LangChain's tool spans of parallel tool calls: no attributes until they end) opened side
    # by side are bound to the recorded ones in the order they open, which may not be the
    # recorded order. When a call inside one is not where its span says, the spans alike that
    # have done nothing else yet are swapped (_rebound): each program span keeps its id (the seq
    # its span.started matched) and the sink reads it as the recorded span it is (_as); the
    # span.started at that seq is compared with the recorded one of that span (_content).

    def _reading(self, events: Iterator[Event]) -> Iterator[Event]:
        """The recorded events, their span.started kept by seq as they are read."""
        starts = self._starts
        for event in events:
            if event.type == SpanStarted.TYPE:
                starts[event.seq] = event
            yield event

    def _rec(self, span_id: str | None) -> str | None:
        """The recorded span the program's span ``span_id`` is."""
        return self._as.get(span_id, span_id) if span_id is not None else None

    def _rec_seq(self, seq: int | None) -> int | None:
        """The recorded seq of the program's event ``seq`` (a span.started re-bound: its span's)."""
        if seq is None or not self._as:
            return seq
        span = self._as.get(f"s{seq}")
        return seq if span is None else int(span[1:])

    def _rec_body(self, body: Body) -> Body:
        """A span.started's body with its parent the recorded span."""
        if self._as and isinstance(body, SpanStarted) and body.parent in self._as:
            return replace(body, parent=self._rec(body.parent))
        return body

    def _rec_item(self, item: Emit) -> Emit:
        """``item`` with the recorded spans (for the new run past a fork's cut)."""
        if not self._as:
            return item
        return item._replace(body=self._rec_body(item.body), span_id=self._rec(item.span_id), caused_by=self._rec_seq(item.caused_by))

    def _content(self, event: Event) -> Event:
        """The recorded event the program's event at ``event``'s seq is compared with: ``event``,
        or for a span.started re-bound, its span's own."""
        if not self._as or event.type != SpanStarted.TYPE:
            return event
        span = self._as.get(str(event.span_id))
        return event if span is None else self._start_of(span) or event

    def _start_of(self, span_id: str) -> Event | None:
        """The span.started of span ``span_id`` as the sink names spans: a recorded one inside
        the prefix, else one a fork wrote past its cut (a flow gone past it while others are
        still replayed), its seq the new run's."""
        seq = _seq_of(span_id)
        return (self._starts if seq < self.prefix else self._new_starts).get(seq)

    def _note(self, type_: str, span_id: str | None, parent: str | None, event: Event) -> None:
        """What the program's event (matched at ``event``) tells of its spans: a span.started
        opens a span under ``parent``; any other event makes its span firm (never moved past a
        fork's cut: its start, kept for that, is let go)."""
        if type_ == SpanStarted.TYPE:
            if parent is not None:
                self._kids[parent].append(f"s{event.seq}")
        elif span_id is not None:
            self._firm.add(span_id)
            self._bodies.pop(span_id, None)

    def _note_batch(self, items: Sequence[Emit], events: Sequence[Event]) -> None:
        for item, event in zip(items, events, strict=True):
            body = item.body
            span_id = item.span_id if item.span_item is None else f"s{events[item.span_item].seq}"
            self._note(body.TYPE, span_id, body.parent if isinstance(body, SpanStarted) else None, event)
            if isinstance(body, SpanStarted) and self.after is not None and self.in_prefix:
                self._bodies[f"s{event.seq}"] = body  # what a move past the cut writes (_write_past)

    def _apart(self, batch: Sequence[Event], skipped: Sequence[Event]) -> bool:
        """:func:`_apart` of ``batch`` as the spans it is."""
        return _apart([self._content(e) for e in batch] if self._as else batch, skipped)

    def _opened(self, span_id: str) -> bool:
        """Whether the program opened span ``span_id`` (its span.started is matched, or
        written past a fork's cut)."""
        seq = int(span_id[1:])
        return seq < self.pos or seq in self._early or seq in self._new_starts or seq in self._adopted

    def _free(self, span_id: str, below: str | None) -> bool:
        """Whether the program's span ``span_id`` has done nothing yet but open ``below``."""
        if not self._opened(span_id):
            return True
        return span_id not in self._firm and all(kid == below for kid in self._kids.get(span_id, ()))

    def _swaps(self, have: str, want: str,
               below: tuple[str | None, str | None] = (None, None)) -> list[tuple[str | None, str]] | None:
        """The program spans to re-bind (each to the recorded span paired with it) so that the
        program span bound to recorded ``have`` is ``want``: up their parents until one is
        shared, each pair alike and neither span having done anything yet but open the one
        below; ``None`` when they cannot be. A span whose start no program span has (an
        orphan, :meth:`_move_past`) is taken, and the span left becomes one (paired with
        ``None``)."""
        swaps: list[tuple[str | None, str]] = []
        while have != want:
            if have in self._orphans:
                return None
            one, other = self._start_of(have), self._start_of(want)
            if one is None or other is None or not _alike(one, other):
                return None
            mine = self._of.get(have, have)
            theirs = None if want in self._orphans else self._of.get(want, want)
            if not (self._opened(mine) and self._free(mine, below[0])
                    and (theirs is None or self._free(theirs, below[1]))):
                return None
            if self._same_as(mine, want) + self._same_as(theirs, have) < \
                    self._same_as(mine, have) + self._same_as(theirs, want):
                return None  # it would part spans from the recorded ones they are, attributes and all
            swaps += [(mine, want), (theirs, have)]
            below = (mine, theirs)
            up, across = one.payload.get(_PARENT), other.payload.get(_PARENT)
            if not (isinstance(up, str) and isinstance(across, str)):
                return None if up != across else swaps
            have, want = up, across
        return swaps

    def _same_as(self, program: str | None, recorded: str) -> bool:
        """Whether the program's span ``program`` opened with the attributes recorded span
        ``recorded`` has (known for a fork's spans opened in its prefix and spans written past
        its cut): a tracer's attributes that tell branches apart (a question, a topic) keep
        each span with its own, where values new on every run match none."""
        if program is None:
            return False
        body = self._bodies.get(program)
        if body is not None:
            mine = body.to_payload().get(_ATTRIBUTES)
        elif _seq_of(program) >= self.prefix and (written := self._start_of(program)) is not None:
            mine = written.payload.get(_ATTRIBUTES)
        else:
            return False
        start = self._start_of(recorded)
        return mine is not None and start is not None and start.payload.get(_ATTRIBUTES) == mine

    def _bind(self, swaps: Iterable[tuple[str | None, str]]) -> None:
        """Bind each program span to the recorded span paired with it (``None``: the recorded
        span's start is left to a span alike, :meth:`_adopt`)."""
        for program, recorded in swaps:
            if program is None:
                start = self._start_of(recorded)
                assert start is not None
                self._of.pop(recorded, None)
                self._orphans[recorded] = start
                continue
            self._orphans.pop(recorded, None)
            if _seq_of(recorded) < self.prefix:  # another flow's now: whether it went past is judged again
                self._past.discard(recorded)
            if program == recorded:
                self._as.pop(program, None)
                self._of.pop(recorded, None)
            else:
                self._as[program], self._of[recorded] = recorded, program

    def _rebound(self, items: Sequence[Emit], *, exact: bool = False, across: bool = False) -> list[Event] | None:
        """The recorded events a batch opening a span is once spans alike are re-bound (see
        above): a later span.started like its first item's under a parent alike to its own,
        followed by the rest (``exact``: a tracer's attributes too; ``across``: only where a
        fork's cut falls in the batch, the part before it); ``None`` when there is none."""
        body = items[0].body
        if not (items[0].span_item == 0 and isinstance(body, SpanStarted) and body.parent is not None):
            return None
        have = self._rec(body.parent)
        assert have is not None
        if not exact and all(isinstance(item.body, SpanStarted) for item in items) and self._gone_past(have):
            return None  # a span opened under a flow gone past the cut: no sign yet that it is another's
        # (with exact, a recorded span it is the same as, attributes and all, is that sign)
        for event, skipped, part in self._places(items, first=True, across=across):
            want = event.payload.get(_PARENT)
            if want is None or want == have or event.span_id in self._as or (not exact and _after_alike(event, skipped)):
                continue
            swaps = self._swaps(have, str(want))
            told = None if swaps is None else self._bound_if(swaps, partial(self._fits, part, event.seq, skipped, exact))
            if told:
                return told
        return None

    def _fits(self, part: Sequence[Emit], seq: int, skipped: list[Event], exact: bool) -> list[Event] | None:
        """The recorded events from ``seq`` that ``part`` is (``exact``: a tracer's attributes
        too), apart from the events ``skipped``; else ``None``."""
        found = self._batch_at(part, seq, None)
        if found is None or not (found[1] or not exact) or not self._apart(found[0], skipped):
            return None
        return found[0]

    def _bound_if(self, swaps: list[tuple[str | None, str]], check: Callable[[], T]) -> T:
        """Bind ``swaps`` and return what ``check`` finds then; when it finds nothing (a false
        value), every binding is as it was before."""
        kept = dict(self._as), dict(self._of), dict(self._orphans), set(self._past)
        self._bind(swaps)
        found = check()
        if not found:
            self._as, self._of, self._orphans, self._past = kept
        return found

    def _peek(self) -> Event | None:
        ahead = self._ahead
        while ahead and ahead[0].seq < self.pos:
            ahead.popleft()
        if not ahead:
            event = next(self._recorded, None)
            while event is not None and event.seq < self.pos:
                event = next(self._recorded, None)
            if event is None:
                return None
            ahead.append(event)
        return ahead[0]

    def _later(self) -> Iterator[tuple[Event, list[Event]]]:
        """The recorded events after the next one, inside the prefix and not yet matched, each
        with the events before it not yet matched, as the spans they are (:meth:`_content`;
        read from the log as they are asked for, at most :data:`LOOKAHEAD`)."""
        if self._peek() is None:
            return
        ahead, skipped = self._ahead, [self._content(self._ahead[0])]
        for i in range(1, LOOKAHEAD):
            if i == len(ahead):
                event = next(self._recorded, None)
                if event is None:
                    return
                ahead.append(event)
            event = ahead[i]
            if event.seq >= self.prefix:
                return
            if event.seq not in self._early:
                yield event, skipped
                skipped.append(self._content(event))

    def _skip_fork_start(self) -> None:
        if self.in_prefix and (ahead := self._peek()) is not None and ahead.type == FORK_STARTED:
            self._accept(ahead)  # al.fork wrote it just before the program's next event

    def emit(self, body: Body | str, payload: Mapping[str, Any] | None = None, *, actor: str | None,
             caused_by: int | None, span_id: str | None, **usage: Any) -> Event:
        with self.lock:
            self._skip_fork_start()

            def after() -> Event:
                return self._emit_after(body, payload, actor=actor, caused_by=caused_by, span_id=span_id, **usage)

            if isinstance(body, Body):
                type_, compared, columns = body.TYPE, body.to_payload(), body.columns()
            else:
                type_, compared, columns = body, dict(payload or {}), usage
            parent = compared.get(_PARENT) if type_ == SpanStarted.TYPE else None
            if not self.in_prefix or self._cutting:
                event = after()
            else:
                if self._as:  # spans re-bound: compared as the recorded spans they are
                    compared = {**compared, _PARENT: self._rec(parent)} if parent in self._as else compared
                actual = Event(seq=self.pos, type=type_, payload=compared, actor=actor,
                               caused_by=self._rec_seq(caused_by), span_id=self._rec(span_id),
                               **{k: v for k, v in columns.items() if v is not None})
                event = self._compare(actual, after)
            self._note(type_, span_id, parent, event)
            self._met((event,))
            return event

    atomic_batches = False
    """:meth:`emit_many` takes a batch's events one by one: it may stop between two."""

    compares_batches = True
    """:meth:`emit_many` compares a batch as a whole first (the recorder hands it its batches)."""

    def emit_many(self, items: Sequence[Emit], *, hold: bool = False, sync: bool = True,
                  taken: list[Event] | None = None) -> list[Event]:
        """Compare a batch with the log: as a whole, at the next seq or, for calls made side
        by side that came in another order than recorded, at a later one (a batch was written
        in one piece, so its events are together in the log); else :meth:`emit` for each item
        in turn, which says where it differs. ``taken``: a list the events are appended to as
        they are matched (what :meth:`Recorder.emit_many` gives)."""
        with self.lock:
            named, run_id = self.next_seq, self.run_id  # read before a recorded fork.started is passed
            events = self._batch(items) if items else None
            if events is None and self._orphans and len(items) == 1 and (adopted := self._adopt(items[0])) is not None:
                if taken is not None:
                    taken.append(adopted)
                return [adopted]
            part = self._cut_in(items) if events is None and items and self.after is not None and self.in_prefix \
                else None
            if part is not None and part[0].seq != self.pos:  # at the next seq: one by one, as ever
                events = self._across(items, part, hold=hold, sync=sync)
            elif events is None and items and self.after is not None and part is None and \
                    (not self.in_prefix or self._gone_past(self._rec(_opened_in(items[0])))
                     or self._elsewhere(items)):
                if self.in_prefix:
                    self._bind_as_past(items)
                self._cut()  # past the prefix: the batch goes to the new run whole, ids taken there
                written = self.after.emit_many([self._rec_item(item) for item in items], hold=hold, sync=sync)
                events = [self._observed(event) for event in written]
                self._note_batch(items, events)
                if self.in_prefix:  # a flow gone past the cut: so are the spans it opens
                    self._past.update(str(e.span_id) for e in events if e.type == SpanStarted.TYPE)
            elif events is not None:
                for event in events:
                    self._accept(event)
                self._note_batch(items, events)
            if events is not None:
                self._met(events)
                if taken is not None:
                    taken.extend(events)
                return events
            # One by one, each compared where it is, or past the prefix written: a batch across
            # a fork's cut, a divergence, or a fork written before 2026-12-06, which named the
            # span opened first after its cut by the seq of its fork.started (read before
            # al.fork wrote it) and a tool call's key by the seq the batch began at.
            events = []
            for i, item in enumerate(items):
                caused_by = item.caused_by if item.caused_by_item is None else events[item.caused_by_item].seq
                events.append(self.emit(item_body(item, run_id, named + i), actor=item.actor, caused_by=caused_by,
                                        span_id=item_span(item, events, self.next_seq if events else named)))
                if taken is not None:
                    taken.append(events[-1])
            return events

    def _batch(self, items: Sequence[Emit]) -> list[Event] | None:
        """The recorded events a batch is, all inside the prefix: at the next seq, else at
        the first later seq where they follow one another, none matched yet, in spans (and
        caused by events) that none of the events before them not yet matched is in; else
        once spans alike are re-bound (:meth:`_rebound`); a tracer's span told apart by its
        attributes where they are the same every run (see below)."""
        self._skip_fork_start()
        first = self._peek()
        if first is None or first.seq + len(items) > self.prefix:
            return None  # past the prefix, or across its end: one by one, each where it goes
        found = self._batch_at(items, first.seq, self._prev) or self._later_batch(items)
        if found is not None and (found[1] or not _traced_start(items[0])):
            return found[0]
        if found is None and not _traced_start(items[0]):
            return self._rebound(items)
        # A tracer's span, not with the attributes recorded where it fits, or fitting nowhere as
        # the spans are bound: spans like it opened side by side (one per thread or task) are
        # told apart by them when they are the same every run; else it goes where the parent
        # opened it past a fork's cut (emit_many); else it is the one it fits, or one alike
        # re-bound.
        told = (self._same_attributes(items) if found is not None else None) or self._rebound(items, exact=True)
        if told is None and self._opened_past(items):
            return None
        return told or (found[0] if found is not None else self._rebound(items))

    def _opened_past(self, items: Sequence[Emit]) -> bool:
        """Whether a tracer's span opening that the prefix has only with other attributes is one
        the parent opened past a fork's cut with the same attributes: under a span of the
        prefix that the program's parent span is, or is re-bound to, and that has nothing left
        in the prefix (which then takes it as gone past the cut); or under spans alike to the
        program's parent spans that the parent opened past the cut too, where those program
        spans, having done nothing else, are moved (:meth:`_move_past`)."""
        cache = self._cache if self.in_prefix else None
        body = items[0].body
        if cache is None or not isinstance(body, SpanStarted) or body.parent is None:
            return False
        have = self._rec(body.parent)
        assert have is not None
        opened = _without(body.to_payload(), {_PARENT})
        for started in cache.starts(body.name):
            under = _parent_of(started)
            if under is None or started.actor != items[0].actor or _without(started.payload, {_PARENT}) != opened:
                continue
            if _seq_of(under) >= self.prefix:
                if self._move_past(have, under, cache, room=True):
                    return True
                continue
            swaps = [] if under == have else self._swaps(have, under)
            if swaps is not None and self._bound_if(swaps, partial(self._gone_past, under)):
                return True
        return False

    def _elsewhere(self, items: Sequence[Emit]) -> bool:
        """Whether a batch that opens a span for a call and is nowhere in the rest of a fork's
        prefix is a call the parent made past the cut (its answer is there), from a flow
        going past the cut while the flows whose recorded events are still ahead in the
        prefix replay them (calls made side by side, the cut among them; a batch the cut falls
        in is :meth:`_cut_in`'s). A program that then emits none of those events fails the
        fork (:meth:`left_behind`); a call the parent did not make is a divergence, at once."""
        cache = self._cache
        if cache is None or not (items[0].span_item == 0 and isinstance(items[0].body, SpanStarted)):
            return False
        if not any(isinstance(key := getattr(item.body, "key", None), str) and cache.holds(key) for item in items):
            return False
        first = self._peek()
        if first is None:
            return False
        if self._went_past is None:
            body = items[0].body
            self._went_past = Event(seq=first.seq, type=body.TYPE, payload=body.to_payload(), actor=items[0].actor)
        return True

    def _cut_in(self, items: Sequence[Emit]) -> list[Event] | None:
        """The recorded events of a batch's part before a fork's cut when the cut falls in the
        batch: the last events of the prefix not yet matched, as they are or once spans alike
        are re-bound (the swaps kept); else ``None``."""
        for event, skipped, part in self._places(items, first=True, across=True):
            found = self._batch_at(part, event.seq, self._prev if event.seq == self.pos else None)
            if found is not None and self._apart(found[0], skipped):
                return found[0]
        return self._rebound(items, across=True)

    def _across(self, items: Sequence[Emit], part: list[Event], *, hold: bool, sync: bool) -> list[Event]:
        """A batch the fork's cut falls in: ``part``, its events before the cut, taken from the
        log; the rest written past the cut, naming the spans and causes ``part`` has."""
        for event in part:
            self._accept(event)
        n = len(part)
        self._note_batch(items[:n], part)
        rest = [_after_part(item, part) for item in items[n:]]
        self._cut()
        assert self.after is not None
        written = [self._observed(e) for e in
                   self.after.emit_many([self._rec_item(item) for item in rest], hold=hold, sync=sync)]
        self._note_batch(rest, written)
        self._past.update(str(self._rec(f"s{e.seq}")) for e in part if e.type == SpanStarted.TYPE)
        return [*part, *written]

    def _bind_as_past(self, items: Sequence[Emit]) -> None:
        """Before a call goes past the cut: re-bind the spans it opens under to the ones the
        parent asked it under, when those are spans alike that have done nothing else yet."""
        body = items[0].body
        asked = self._asked_under(items)
        have = self._rec(body.parent) if isinstance(body, SpanStarted) else None
        cache = self._cache
        if asked is None or have is None or cache is None:
            return
        for want in self._written_as(asked, cache):
            swaps = None if want == have else self._swaps(have, want)
            if swaps is not None:
                self._bind(swaps)
                return
        self._move_past(have, asked, cache)

    def _move_past(self, have: str, asked: str, cache: ResponseCache, *, room: bool = False) -> bool:
        """Before a call goes past the cut from span ``have`` of the prefix, which the parent
        asked it under a span alike that it opened past the cut (``asked``, and its parents
        alike up to a span of the prefix): the program spans bound to ``have`` and its parents
        as far, having done nothing else, are written past the cut under that span (re-bound
        to it if need be), and the starts they had matched are left to the next spans alike
        opened where they were (:meth:`_adopt`). ``room``: only when the parent opened more
        spans like the top one past the cut there than the fork has so far (so that one is still
        to come for the start left), or the fork wrote one there that has done nothing yet
        (it trades places with the top one: :meth:`_take_past`). Whether they were moved."""
        theirs = self._tail_chain(asked, cache)
        under = _parent_of(theirs[-1]) if theirs else None
        if theirs is None or under is None:
            return False
        mine: list[tuple[str, Event]] = []  # the prefix's spans bound to the program's, from have up
        span: str | None = have
        below: str | None = None
        for alike in theirs:
            if span is None or _seq_of(span) >= self.prefix or span in self._orphans:
                return False
            start, program = self._start_of(span), self._of.get(span, span)
            if start is None or not _alike(start, alike) or not (self._opened(program) and self._free(program, below)):
                return False
            mine.append((span, start))
            span, below = _parent_of(start), program
        swaps = [] if span == under else None if span is None else self._swaps(span, under, below=(below, None))
        if swaps is None or (room and not self._room(theirs[-1], cache) and self._past_alike(mine[-1][1], under) is None):
            return False  # no room, and no span the fork wrote there to take the start left
        self._bind(swaps)
        self._cut()
        for span, start in reversed(mine):
            under = self._take_past(span, start, under) or self._write_past(span, start, under)
        return True

    def _room(self, top: Event, cache: ResponseCache) -> bool:
        """Whether the parent opened more spans like ``top`` (one it opened past the cut) under
        its parent past the cut than the fork has written there so far."""
        under = _parent_of(top)
        theirs = sum(1 for e in cache.starts(str(top.payload.get(SpanStarted.K.name))) if _parent_of(e) == under and _alike(e, top))
        mine = sum(1 for e in self._new_starts.values() if _parent_of(e) == under and _alike(e, top))
        return theirs > mine

    def _take_past(self, span: str, start: Event, under: str) -> str | None:
        """Swap the program span bound to span ``span`` of the prefix with one opened alike past
        the cut under ``under`` that has done nothing yet (its flow's start: the one the prefix
        has); the span taken, or ``None`` when there is none."""
        found = self._past_alike(start, under)
        if found is None:
            return None
        taken, other = found
        self._bind([(self._of.get(span, span), taken), (other, span)])
        return taken

    def _past_alike(self, start: Event, under: str) -> tuple[str, str] | None:
        """A span the fork wrote past its cut under ``under``, alike to ``start``, whose program
        span has done nothing yet, and that program span; ``None`` when there is none."""
        for opened in self._new_starts.values():
            taken = f"s{opened.seq}"
            other = self._of.get(taken, taken)
            if _parent_of(opened) == under and _alike(opened, start) and self._rec(other) == taken \
                    and self._free(other, None):
                return taken, other
        return None

    def _write_past(self, span: str, start: Event, under: str) -> str:
        """Write span ``span``'s start (matched in the prefix) past the cut, under ``under``,
        as the span of the program span bound to it; ``span``'s start is left (an orphan)."""
        program = self._of.get(span, span)
        body = self._bodies.get(program) or body_of(start)  # the program's own (its tracer's attributes)
        assert isinstance(body, SpanStarted) and self.after is not None
        [written] = self.after.emit_many([Emit(replace(body, parent=under), start.actor, inline=True, span_item=0)],
                                         hold=True, sync=False)
        self._observed(written)
        moved = str(written.span_id)
        self._of.pop(span, None)
        self._orphans[span] = start
        self._bind([(program, moved)])
        self._past.add(moved)
        return moved

    def _tail_chain(self, span_id: str, cache: ResponseCache) -> list[Event] | None:
        """The parent's span.started events from its span ``span_id`` up while they are past
        the cut (empty for a span of the prefix; ``None`` when one is not in its tail)."""
        chain: list[Event] = []
        up: str | None = span_id
        while up is not None and _seq_of(up) >= self.prefix:
            started = cache.opened(up)
            if started is None:
                return None
            chain.append(started)
            up = _parent_of(started)
        return chain

    def _adopt(self, item: Emit) -> Event | None:
        """A span opening alike to an orphan's (:meth:`_move_past`) under the same span: it takes
        that start, matched already, as its own; it is named by a seq no event has."""
        body = item.body
        if not (item.span_item == 0 and isinstance(body, SpanStarted) and body.parent is not None):
            return None
        under = self._rec(body.parent)
        opened = Event(seq=0, type=SpanStarted.TYPE, payload=body.to_payload(), actor=item.actor)
        for have, start in self._orphans.items():
            if _parent_of(start) == under and _alike(start, opened):
                del self._orphans[have]
                seq = _UNSEEN + len(self._adopted)
                self._adopted.add(seq)
                self._bind([(f"s{seq}", have)])
                self._last += 1
                self._place[seq] = self._last
                event = replace(start, seq=seq, span_id=f"s{seq}")
                self._note(SpanStarted.TYPE, None, body.parent, event)
                self._bodies[f"s{seq}"] = body
                return event
        return None

    def _written_as(self, span_id: str, cache: ResponseCache) -> list[str]:
        """The spans of the fork that the parent's span ``span_id`` may be: itself when it is
        a span of the prefix; for one the parent opened past the cut, the spans alike to it
        (and to its parents up to the prefix) that the fork wrote past its cut."""
        chain = self._tail_chain(span_id, cache)
        if not chain:
            return [span_id] if chain is not None and _seq_of(span_id) in self._starts else []
        found: list[str | None] = [_parent_of(chain[-1])]  # down the chain: the fork's spans alike, each under one found above
        for theirs in reversed(chain):
            found = [f"s{e.seq}" for e in self._new_starts.values()
                     if _parent_of(e) in found and _alike(e, theirs)]
        return [span for span in found if span is not None]

    def left_behind(self) -> Divergence | None:
        """When the program has finished: the first recorded event before a fork's cut it did
        not emit (its flows went past the cut without it), as a divergence; else ``None``."""
        left = self.remaining()
        if left is not None:
            return Divergence(run_id=self.recorded_run_id, seq=left.seq, expected=left, actual=self._went_past,
                              note=self._what_to_try("the program went past the cut without emitting this "
                                                     "recorded event"))
        if self._orphans:  # a start matched, its program span gone past the cut, and no span alike took it
            left = min(self._orphans.values(), key=lambda event: event.seq)
            return Divergence(run_id=self.recorded_run_id, seq=left.seq, expected=left, actual=self._went_past,
                              note=self._what_to_try("the program opened no span like this recorded one here "
                                                     "before the cut"))
        return None

    def _what_to_try(self, note: str) -> str:
        """``note``, and for a fork whose calls made side by side came in another order than
        recorded (spans re-bound, flows gone past the cut, events met out of order), what to
        try: a fork that cannot tell such spans apart fails, where another may not."""
        if self.after is None or not (self._as or self._past or self._early or self._new_starts or self._orphans):
            return note
        hint = ("if the program did not change before the cut: its calls made side by side came in another "
                "order than recorded, and this fork could not tell their spans apart (about 2 forks in 1,000 "
                "of such programs); forking again, or at another event, usually goes through, and a cut "
                "before the branches began went through in all 720 of our tries (agentlog.capture.forkplan."
                "quiet_cut gives one for an answer to edit)")
        return f"{note}; {hint}" if note else hint

    def _later_batch(self, items: Sequence[Emit]) -> tuple[list[Event], bool] | None:
        """:meth:`_batch_at` at the first later seq where the batch is, apart from the events
        before it not yet matched."""
        for event, skipped, _ in self._places(items, first=False, across=False):
            found = self._batch_at(items, event.seq, None)
            if found is not None and self._apart(found[0], skipped):
                return found
        return None

    def _places(self, items: Sequence[Emit], *, first: bool,
                across: bool) -> Iterator[tuple[Event, list[Event], Sequence[Emit]]]:
        """Where among the prefix's events not yet matched the batch ``items`` could be: each
        recorded event of its first item's type (the next one too when ``first``), the events
        before it not yet matched, and the items that would lie before a fork's cut from there:
        all of them, or with ``across`` only a part (the cut falls in the batch), unless the
        parent made this call past the cut under another span that the fork can open it under
        too (:meth:`_asked_under`, :meth:`_move_past`)."""
        head = self._peek()
        if head is None:
            return
        type_ = items[0].body.TYPE
        asked = self._asked_within(items) if across else None
        for event, skipped in itertools.chain([(head, [])] if first else [], self._later()):
            cut = self.prefix - event.seq
            if event.type == type_ and (cut < len(items)) == across and (asked is None or asked == _parent_of(event)):
                yield event, skipped, items[:cut] if across else items

    def _asked_under(self, items: Sequence[Emit]) -> str | None:
        """The span the parent opened the span of the call in ``items`` under, when it made
        that call past the cut (from its tail), else ``None``."""
        cache = self._cache
        key = next((key for item in items if isinstance(key := getattr(item.body, "key", None), str)), None)
        return None if cache is None or key is None else cache.asked_under(key)

    def _asked_within(self, items: Sequence[Emit]) -> str | None:
        """:meth:`_asked_under`, when the fork can open the call there too: a span of the
        prefix, or one the parent opened past the cut right under a span of the prefix."""
        asked = self._asked_under(items)
        if asked is None or _seq_of(asked) < self.prefix:
            return asked
        cache = self._cache
        started = cache.opened(asked) if cache is not None else None
        up = None if started is None else _parent_of(started)
        return asked if up is not None and _seq_of(up) < self.prefix else None

    def _same_attributes(self, items: Sequence[Emit]) -> list[Event] | None:
        """The recorded span opening, among the next :data:`ALIKE_AHEAD` events, that the
        traced span ``items`` opens is with its attributes too (none: ``None``)."""
        for event, skipped in itertools.islice(self._later(), ALIKE_AHEAD):
            if event.type != SpanStarted.TYPE:
                continue
            found = self._batch_at(items, event.seq, None)
            if found is not None and found[1] and self._apart(found[0], skipped):
                return found[0]
        return None

    def _batch_at(self, items: Sequence[Emit], seq: int, prev: str | None) -> tuple[list[Event], bool] | None:
        """The recorded events from ``seq`` on when ``items``, emitted from there, are they
        (``prev``: the recorded hash before ``seq``, for the one-hash comparison), and whether
        they are exactly (a tracer's attributes are not compared: :func:`_seen_only`)."""
        ahead = self._ahead
        start = next(i for i, e in enumerate(ahead) if e.seq == seq)
        while len(ahead) < start + len(items):
            event = next(self._recorded, None)
            if event is None:
                return None
            ahead.append(event)
        found: list[Event] = []
        exact = True
        for i, item in enumerate(items):
            at = ahead[start + i]
            if at.seq in self._early:
                return None
            body = item.body
            if not isinstance(body, Body):
                return None
            if item.keyed:
                body = item_body(item, self._run_at(at.seq), at.seq)
            body = self._rec_body(body)
            type_, payload, usage = body.TYPE, body.to_payload(), body.columns()
            caused_by = item.caused_by if item.caused_by_item is None else seq + item.caused_by_item
            span_id = item.span_id if item.span_item is None else f"s{seq + item.span_item}"
            expected = self._content(at)
            actual = Event(seq=expected.seq, type=type_, payload=payload, actor=item.actor,
                           caused_by=self._rec_seq(caused_by), span_id=self._rec(span_id),
                           **{k: v for k, v in usage.items() if v is not None})
            if not self._same(expected, actual, prev if expected is at else None):
                differs, compared = self._differs(expected, actual)
                if differs:
                    return None
                exact = exact and compared.payload == expected.payload
            found.append(at)
            prev = at.hash or None
        return found, exact

    def place(self, seq: int) -> int:
        """Where the program met event ``seq`` (not its seq: calls side by side match recorded
        events out of the log's order, and spans re-bound keep the seq they opened at)."""
        return self._place.get(seq, seq)

    def order(self, span_id: str | None) -> int:
        """:meth:`place` of the span.started that opened span ``span_id`` (-1 for ``None``)."""
        return self.place(_seq_of(span_id)) if span_id is not None else -1

    def _met(self, events: Iterable[Event]) -> None:
        """Note ``events`` as met by the program now."""
        for event in events:
            self._last = last = max(self._last + 1, event.seq)
            if last != event.seq:  # met out of the log's order (else its place is its seq)
                self._place[event.seq] = last

    def flush(self) -> None:
        """Past the prefix, the new run's held events are written; a replay holds none."""
        if self.after is not None:
            self.after.flush()

    def _compare(self, actual: Event, past: Callable[[], Event] | None = None) -> Event:
        """The recorded event ``actual`` is, accepted; or, for an event of a flow gone past a
        fork's cut (:meth:`_gone_past`), what ``past`` writes; else a divergence."""
        at = self._peek()
        if at is not None and self._same(at, actual, self._prev):
            self._accept(at)  # the usual case: one hash, no field by field comparison
            return at
        if at is None:
            self._diverge(None, actual, note="the recorded run ends here; the program emitted more")
        assert at is not None
        expected = self._content(at)
        differs, compared = self._differs(expected, actual)
        if differs:
            if is_interruption(expected):
                self._interrupt(expected, compared)
            later = self._side_by_side(actual, lambda event: not self._differs(event, actual)[0])
            if later is None and past is not None and self._gone_past(actual.span_id):
                return past()
            at = later or self._diverge(expected, compared, differs)
        self._accept(at)
        return at

    def _differs(self, expected: Event, actual: Event) -> tuple[tuple[str, ...], Event]:
        """The fields in which ``actual`` differs from the recorded ``expected``, compared as
        the writer stores it (redacted, long text and bytes as blobs), and ``actual`` so."""
        payload = as_recorded(expected.payload, self._redactor.value(actual.payload))
        actual = replace(actual, ts=expected.ts, payload=payload)
        differs = differing_fields(expected, actual)
        if differs == ("payload",) and _seen_only(expected, actual, traced=self._traced(expected.span_id)):
            differs = ()
        return differs, actual

    def _traced(self, span_id: str | None) -> bool:
        """Whether the recorded span ``span_id`` is a tracer's (its span.started, read, has ``otel``)."""
        started = self._starts.get(_seq_of(span_id)) if span_id is not None else None
        return started is not None and started.payload.get(_OTEL) is not None

    def _side_by_side(self, actual: Event, matches: Callable[[Event], bool]) -> Event | None:
        """The recorded event, later than the next one, that ``actual`` is when the program
        made its calls side by side (threads, tasks) and they came in another order than
        recorded: the first that ``matches``, in a span none of the events before it not yet
        matched is in, and caused by none of them (the events of one span come from one flow,
        in order). ``None`` when there is none: a divergence."""
        for event, skipped in self._later():
            content = self._content(event)
            if content.span_id is None or content.type != actual.type:
                continue
            opens = content.type == SpanStarted.TYPE  # a span's own events may be before its start re-bound
            if any((e.span_id == content.span_id and not opens) or e.seq == content.caused_by for e in skipped):
                continue
            if matches(content):
                return event
        return None

    def _same(self, expected: Event, actual: Event, prev: str | None) -> bool:
        """Whether the event the program emits is the recorded one: the chain hash of its body
        (with the recorded ``ts``, after ``prev``, the recorded hash before it) is the recorded hash.
        ``False`` sends it to the field by field comparison, which says how it differs (or
        that it does not, for a payload the writer changed: redacted, or a long string made a
        blob)."""
        if prev is None or not expected.hash:
            return False
        try:
            payload_json = canonical_json(actual.payload)
        except CanonicalJSONError:
            return False
        return chain_hash(prev, chain_body(replace(actual, ts=expected.ts), payload_json)) == expected.hash

    def _accept(self, expected: Event) -> None:
        if expected.seq == self.pos:
            self._prev = expected.hash or None
            self.pos += 1
            while self.pos in self._early:  # matched already, out of order: passed
                self._early.discard(self.pos)
                passed = self._peek()
                assert passed is not None and passed.seq == self.pos
                self._prev = passed.hash or None
                self.pos += 1
        else:
            self._early.add(expected.seq)
        if expected.type == SpanEnded.TYPE and expected.span_id is not None:
            self._ended.add(expected.span_id)
            self._starts.pop(_seq_of(expected.span_id), None)  # an ended span is never re-bound
        if self.observer is not None:
            self.observer(expected)

    def _interrupt(self, expected: Event, actual: Event | None) -> None:
        # The recorded process died here, and a resume closed its spans. If the program is
        # closing the very span the resume closed, that close is the recorded one.
        if actual is not None and actual.type == SpanEnded.TYPE and actual.span_id == expected.span_id:
            self._accept(expected)
        raise Interrupted(expected.seq)

    def _emit_after(self, body: Body | str, payload: Mapping[str, Any] | None, *, actor: str | None,
                    caused_by: int | None, span_id: str | None, **usage: Any) -> Event:
        if self.after is None:
            type_ = body.TYPE if isinstance(body, Body) else body
            actual = Event(seq=self.pos, type=type_,
                           payload=body.to_payload() if isinstance(body, Body) else dict(payload or {}))
            self._diverge(None, actual, note="the recorded run ends here; the program emitted more")
        assert self.after is not None
        self._cut()
        if isinstance(body, Body):
            body = self._rec_body(body)
        elif payload is not None and payload.get(_PARENT) in self._as:
            payload = {**payload, _PARENT: self._rec(payload[_PARENT])}
        return self._observed(self.after.emit(body, payload, actor=actor, caused_by=self._rec_seq(caused_by),
                                              span_id=self._rec(span_id), **usage))

    def _cut(self) -> None:
        """Past the prefix: the fork writes what it changed (once), before its first event."""
        if self.on_cut is not None:
            on_cut, self.on_cut = self.on_cut, None
            self._cutting = True  # what it writes goes past the cut, though other flows may be before it
            try:
                on_cut()
            finally:
                self._cutting = False

    def _observed(self, event: Event) -> Event:
        assert self.after is not None
        if event.type == SpanStarted.TYPE and self.in_prefix:  # a flow gone past the cut: re-bound yet, maybe
            self._new_starts[event.seq] = event
        if self.observer is not None and self.after.observer is None:
            self.observer(event)  # the recorder's state goes on past the cut
            self.after.observed(event)
        return event

    def checkpoint_from(self, state: Callable[[], Any], reducers: Any) -> None:
        """Past the prefix, the new run is checkpointed as :class:`WriterSink` does."""
        if self.after is not None:
            self.after.checkpoint_from(state, reducers)

    def put_blob(self, data: bytes | str, media_type: str | None = None) -> BlobRef:
        if self.after is not None:
            return self.after.put_blob(data, media_type)
        # Strict replay writes nothing: the blob of a recorded run is already stored.
        raw = data.encode() if isinstance(data, str) else data
        return BlobRef.of(raw, media_type or "application/octet-stream")

    def serve(self, kind: str, key: str, *, actor: str | None, caused_by: int | None,
              span_id: str | None) -> Event | None:
        with self.lock:
            if span_id is not None:
                self._firm.add(span_id)
            served = self._serve(kind, key, actor=actor, caused_by=self._rec_seq(caused_by), span_id=self._rec(span_id))
            if served is not None:
                self._met((served,))
            return served

    def _serve(self, kind: str, key: str, *, actor: str | None, caused_by: int | None,
               span_id: str | None) -> Event | None:
        self._skip_fork_start()
        if not self.in_prefix:
            if self.after is None:
                return None
            self._cut()
            served = self.after.serve(kind, key, actor=actor, caused_by=caused_by, span_id=span_id)
            return None if served is None else self._observed(served)
        # Inside the prefix nothing may go out live: a call the log does not answer right here
        # is a divergence, never a reason to call the model.
        expected = self._peek()
        if expected is not None and is_interruption(expected):
            self._interrupt(expected, None)  # the recorded process died waiting for this answer
        if expected is None or expected.type not in RESPONSE_TYPES or answer_kind(expected) != (kind, key):
            later = None if expected is None else self._later_answer(kind, key, caused_by, span_id)
            if later is None and self.after is not None and self._gone_past(span_id):
                self._cut()
                served = self.after.serve(kind, key, actor=actor, caused_by=caused_by, span_id=span_id)
                return None if served is None else self._observed(served)
            if later is None:
                self._diverge(expected, None, note=f"the recorded run has no {kind} for key "
                                                   f"{key[:16]}… at this seq")
            expected = later
        assert expected is not None
        self.served += 1
        if (expected.actor, expected.caused_by, expected.span_id) != (actor, caused_by, span_id):
            self._compare(replace(expected, actor=actor, caused_by=caused_by, span_id=span_id))
        self._accept(expected)
        return expected

    def _later_answer(self, kind: str, key: str, caused_by: int | None, span_id: str | None) -> Event | None:
        """The recorded answer to serve out of the log's order (:meth:`_side_by_side`): the
        answer of this call, to this request, in this span."""
        for event, skipped in self._later():
            if event.type not in RESPONSE_TYPES or event.span_id is None or event.span_id != span_id \
                    or event.caused_by != caused_by or answer_kind(event) != (kind, key):
                continue
            if not any(e.span_id == span_id or e.seq == caused_by for e in skipped):
                return event
        return None

    def _gone_past(self, span_id: str | None) -> bool:
        """Whether span ``span_id``'s flow has gone past a fork's cut while other flows are
        still replayed (calls made side by side, the cut among their answers): the span was
        opened in the prefix, has not ended there, and none of the prefix's events not yet
        matched is in it or opens a span under it, so what it does now comes after the cut.
        Only within :data:`LOOKAHEAD` events of the cut."""
        if span_id is None or self.after is None:
            return False
        if span_id in self._past:
            return True
        opened = span_id[1:]
        if not opened.isdigit() or span_id in self._ended or self.prefix - self.pos > LOOKAHEAD:
            return False
        if not self._opened(self._of.get(span_id, span_id)):
            return False  # not opened yet: its span.started is still to come
        first = self._peek()
        if first is None or any(_in_span(self._content(e), span_id) for e in (first, *(e for e, _ in self._later()))):
            return False
        self._past.add(span_id)
        return True

    def external(self) -> list[Event] | None:
        """The recorded events appended from outside at this point (:data:`EXTERNAL_TYPES`).

        They are taken as recorded (observed, not compared). Returns ``None`` past the prefix
        when there is no writer after it or its writer has nothing (the program runs live), and
        an empty list when the recorded run goes on with something else here.
        """
        if not self.in_prefix:
            return self.after.external() if self.after is not None else None
        taken: list[Event] = []
        with self.lock:
            while self.in_prefix:
                expected = self._peek()
                if expected is None or expected.type not in EXTERNAL_TYPES:
                    break
                self._accept(expected)
                taken.append(expected)
        return taken

    def remaining(self) -> Event | None:
        """The first recorded event of the prefix that the program did not emit, if any."""
        return self._peek() if self.in_prefix else None

    def _diverge(self, expected: Event | None, actual: Event | None,
                 fields: tuple[str, ...] = (), note: str = "") -> NoReturn:
        diff = payload_diff(expected, actual) if expected is not None and actual is not None else None
        divergence = Divergence(run_id=self.recorded_run_id, seq=self.pos, expected=expected, actual=actual,
                                fields=fields, diff=diff, note=self._what_to_try(note))
        if self.first_divergence is None:
            self.first_divergence = divergence
        raise DivergenceError(divergence)

    def close(self, status: str) -> None:
        if self.after is not None:
            self.after.close(status)
