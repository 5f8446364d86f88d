"""agentlog's OpenTelemetry ``SpanProcessor``: spans become span events of the recording that
is active where they start, while the agent runs.

When a span starts inside ``with al.recording(...)`` (or ``al.record``, ``al.arecord``,
``al.run_agent``) its ``span.started`` takes its seq at once; when it ends, the call it made
(``llm.request`` / ``llm.response``, ``tool.call`` / ``tool.result``), its span events and its
``span.ended`` follow, as one batch (:meth:`~agentlog.RunWriter.emit_many`).

**When the events reach the disk.** The events of spans under a root span (one with no span
of the same recording open above it) are held in memory and written, in seq order, in one WAL
write: when the root span ends, when the recorder writes an event of its own, when the
recording closes, and otherwise by the writer's thread at most
:data:`~agentlog.store.writer.HOLD_MS` (50 ms) after the first of them was held. So a reader
(the live tail, another process) sees a long-running agent's spans within ~50 ms, and a trace
of many spans costs one WAL write instead of two per span. Under ``durability="fsync"`` that
write makes no fsync of its own (``emit_many(..., sync=False)``): the next write that syncs
(the recorder's own next event, a model call's answer), a flush or the close fsyncs it, and
otherwise the writer's thread, at most 50 ms later. A span is what a framework saw, not an
effect the program was told of, so the processor does not make the agent wait for the disk:
an instrumented model call costs the one fsync of its answer, not two. Until they are
written, held events are not acknowledged: a crash loses them, and nothing written before; a
power loss can lose the last 50 ms of spans written to the OS, never an event the recorder
acknowledged. A span's attributes stay in its ``span.started`` up to 1 MiB (an
instrumentor's ``input.value`` holds the whole request or state, unique to the span): no blob
file, whose fsyncs would make the agent wait at the span's start. The attributes set or
changed after it started (a framework that sets them as the span ends, as LangChain's
instrumentor does: its input, output, kind) are its ``span.ended``'s, kept the same way;
for an ``llm`` span whose call the log holds already (the transport's), only the kind they
tell: the rest is that call's answer again. What each span becomes is
the OTLP import's mapping
(:mod:`agentlog.interop.spanmap`), with two differences that keep a recording replayable:
the OpenTelemetry ids (random on every run) are not in the payload, and ``duration_ms`` is
not taken from the span's clock (the events' ``ts`` say when each side happened) (a strict
replay does not compare a span's attributes either, which can hold a framework's own ids,
new on every run: :func:`agentlog.capture.sinks._seen_only`); and one
that comes from writing a span while it runs: what its attributes were when it started is
its ``span.started``'s, what they became its ``span.ended``'s (an import, which sees the
finished span, writes them all at the start).

Which recording: the one active in the context that starts the span (contextvars, so asyncio
tasks and copied contexts follow it), else the one the span's parent went to (a thread that
got the OpenTelemetry context but not agentlog's). A span outside any recording is ignored.
The span's parent in the log is its OpenTelemetry parent when that went to the same
recording, or the recorder's own open span, whichever opened last; a span with no
OpenTelemetry parent in the recording opens under the span a framework has open in its context
by its own bookkeeping (LangChain's runs: :data:`FRAMEWORK_SPANS`), if that opened later. The
recorder's own spans (the HTTP transport's model calls, ``@al.tool``) nest the same way
(:meth:`SpanProcessor.open_span_id`).

**One model call, one row.** An ``llm`` span whose ``llm`` child wrote the call (the OpenAI
Agents SDK's ``response`` span around the OpenAI client's span) writes no call of its own.
Nor does an ``llm`` span whose call the HTTP transport wrote and another span joined first,
when OpenTelemetry does not nest the two: LangChain's spans are opened from callbacks and
never become the current span, so with both the LangChain and the OpenAI instrumentors on,
the client's span of each call is a root of its own trace beside the framework's span (the
log nests it under LangChain's all the same: see above). The
call is the span's when it was asked in the flow (thread and asyncio task) the span started
in, or, for a span opened outside any task from a thread that asks no calls (LangChain's
callbacks run in a thread pool in an async run), by a task while the span was open
(:func:`_share_transport_call`).

**The hook for joining the HTTP transport's row.** Before an ``llm`` span writes its request
and answer, :attr:`SpanProcessor.join` (if set) is called with the recorder, the span and the
events about to be written, and returns the events to write instead: ``[]`` when the same
call is already in the log (the recorder's HTTP transport wrote it), or events that point at
it. The default, :meth:`SpanProcessor.join_transport`, does exactly that: a model call that
the HTTP transport (:mod:`agentlog.capture.transport`) wrote while the span was open is the
span's call, so the span writes none, and the call is one row, paid once. A call still in
flight when the span ends (an instrumentor that ends its span of a streamed call before the
stream ends, as the OpenAI one does under the Agents SDK's Responses streams) is the span's
when the span's flow (thread and asyncio task) asked it. Every span written is listed in
:meth:`SpanProcessor.written` (:class:`WrittenSpan`: its
OpenTelemetry ids, agentlog span id and the seqs of its events), so a joiner can find the
span of a call from either side.

**One tool call, one row.** A tool that the recorder records itself (``@al.tool``,
``rec.tool``) and that a framework traces too (an OpenInference ``TOOL`` span, a GenAI
``execute_tool`` span, the Agents SDK's function span) is one call: a ``tool`` span writes no
``tool.call`` / ``tool.result`` of its own when the recorder wrote a call of the same tool name
while the span was open (or the recorder's call was still open when the span started: a
framework's span inside the recorded tool). Calls are matched oldest first, each to one span.
The processor sees the recorder's calls as they are written (it observes the events of the
recordings it writes into), so a replay joins them exactly as the recording did.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.sdk.trace import SpanProcessor as _SDKSpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

from ..capture.recorder import Recorder, active_recorder
from ..capture.sinks import Sink
from ..capture.transport import TransportCall, flow, model_calls
from ..errors import DivergenceError, RunClosedError
from ..events import Body, Event, SpanStarted, ToolCall, ToolResult
from ..interop.otlp_read import OtelSpan, from_sdk_span
from ..interop.spanmap import LLM, Out, call_outs, ended_of, event_outs, span_kind, started_of
from ..store.writer import Emit

if TYPE_CHECKING:
    from opentelemetry.context import Context

__all__ = ["FRAMEWORK_SCOPES", "FRAMEWORK_SPANS", "CallJoin", "FrameworkSpan", "SpanProcessor", "WrittenSpan", "langchain_scope",
           "langchain_span"]

log = logging.getLogger("agentlog.otel")

CallJoin = Callable[[Recorder, OtelSpan, Sequence[Out]], Sequence[Out]]
"""``join(recorder, span, events) -> events to write``: see the module docstring."""

_CALLS = frozenset({LLM, "tool"})
#: How many written spans :meth:`SpanProcessor.written` keeps per run (the most recent).
WRITTEN_KEPT = 10_000
#: How many runs :meth:`SpanProcessor.written` keeps the spans of (the most recently begun): a
#: notebook kernel that records run after run does not keep every run's spans.
WRITTEN_RUNS_KEPT = 256
#: How many of the recorder's own tool calls are kept per recording to join a tool span to.
TOOL_CALLS_KEPT = 1_000


@dataclass(slots=True)
class WrittenSpan:
    """A span the processor wrote into a recording."""

    trace_id: str
    """The OpenTelemetry trace id (32 hex)."""
    otel_span_id: str
    """The OpenTelemetry span id (16 hex)."""
    span_id: str
    """The agentlog span id (``s<seq of span.started>``)."""
    kind: str
    """The agentlog span kind (``llm``, ``tool``, ``agent``, ...)."""
    started_seq: int
    """The seq of its ``span.started``."""
    call_seqs: list[int] = field(default_factory=list)
    """The seqs of the call it wrote (request, then answer); empty for no call."""
    ended_seq: int | None = None
    """The seq of its ``span.ended``, once it ended."""


@dataclass(slots=True)
class _Live:
    rec: Recorder
    written: WrittenSpan
    parent: int | None
    """The OpenTelemetry parent's span id (an int), if any."""
    covered: bool = False
    """An ``llm`` span below wrote the call: this span does not write one."""
    root: bool = False
    """No span of the same recording was open above it when it started: its end writes the
    events held since (:meth:`~agentlog.RunWriter.emit_many`)."""
    started: SpanStarted | None = None
    """Its ``span.started``: what its end adds is measured against it."""
    thread: int = 0
    """The thread it started in."""
    task: Any = None
    """The asyncio task it started in, if any (held, so that its ``id`` is no other's while
    the span is open)."""
    scope: tuple[object | None, ...] = ()
    """What the frameworks had open where it started (:data:`FRAMEWORK_SCOPES`)."""


@dataclass(slots=True)
class _ToolCall:
    """A tool call the recorder itself wrote (``@al.tool``, ``rec.tool``), as the processor saw it."""

    seq: int
    """The seq of its ``tool.call``."""
    name: str
    done: bool = False
    """Its ``tool.result`` was written."""
    joined: bool = False
    """A framework's tool span of the same call was joined to it."""


FrameworkSpan = Callable[[], "trace.Span | None"]
"""``() -> span``: the span a framework has open in the calling context by its own bookkeeping,
or ``None``."""


def langchain_span() -> trace.Span | None:
    """The span of the LangChain run open in the calling context, as OpenInference's LangChain
    instrumentor keeps it, or ``None`` (no run here, the instrumentor not loaded or off).

    That instrumentor opens its spans from LangChain's callbacks and never makes them the
    current OpenTelemetry span (an attached context might never be detached), so a model call
    or a tool the recorder writes inside one would not nest under it by the context alone; the
    run LangChain has open here is in its own context variable, which threads and asyncio tasks
    inherit as they do OpenTelemetry's."""
    module = sys.modules.get("openinference.instrumentation.langchain")
    if module is None or "langchain_core.runnables.config" not in sys.modules:
        return None  # LangChain not traced, or no run yet (nothing is imported for it here)
    try:
        if not module.LangChainInstrumentor().is_instrumented_by_opentelemetry:
            return None
        span: trace.Span | None = module.get_current_span()
    except Exception:  # its bookkeeping failing must not fail the recording
        log.debug("agentlog: LangChain's current span could not be read", exc_info=True)
        return None
    return span


#: Where frameworks keep the span open in the calling context when they never make it the
#: current OpenTelemetry span (:func:`langchain_span`): the recorder's spans and the spans of
#: other instrumentors nest under the innermost of those and the current span.
FRAMEWORK_SPANS: list[FrameworkSpan] = [langchain_span]


def langchain_scope() -> object | None:
    """The config LangChain gave the runnable running in the calling context, or ``None``.

    Each branch of a parallel run gets one of its own, and the callbacks LangChain runs for
    it in a thread pool (those of an awaited run) see the same one: of spans opened side by
    side, it tells which branch a call is in when neither thread nor task does."""
    module = sys.modules.get("langchain_core.runnables.config")
    if module is None:
        return None
    try:
        scope: object | None = module.var_child_runnable_config.get()
    except Exception:  # its bookkeeping failing must not fail the recording
        log.debug("agentlog: LangChain's current config could not be read", exc_info=True)
        return None
    return scope


#: What frameworks have open in the calling context by their own bookkeeping
#: (:func:`langchain_scope`), read when a span starts and when a call asks which of the spans
#: open side by side it is in.
FRAMEWORK_SCOPES: list[Callable[[], object | None]] = [langchain_scope]


def _scope() -> tuple[object | None, ...]:
    """What each framework has open in the calling context (:data:`FRAMEWORK_SCOPES`)."""
    return tuple(scope() for scope in FRAMEWORK_SCOPES)


def _same(one: tuple[object | None, ...], other: tuple[object | None, ...]) -> bool:
    """Whether a span's scope is ``other``: the very same objects (two branches' configs may
    be equal)."""
    return len(one) == len(other) and all(a is b for a, b in zip(one, other, strict=True))


class SpanProcessor(_SDKSpanProcessor):
    """Write OpenTelemetry spans into the recording active in their context, as they start
    and end. :func:`agentlog.instrument` installs one on the global tracer provider.

    Args:
        join: the hook called before an ``llm`` span writes its call (see the module
            docstring); default :meth:`join_transport`. ``None``: every ``llm`` span writes its
            call.

    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> import agentlog as al, tempfile
    >>> provider, store = TracerProvider(), al.Store(tempfile.mkdtemp())
    >>> provider.add_span_processor(al.otel.SpanProcessor())
    >>> with al.recording(store=store, name="traced") as rec:
    ...     with provider.get_tracer("demo").start_as_current_span("plan"):
    ...         pass
    >>> [e.type for e in store.run(rec.run_id).iter_events()]
    ['run.started', 'span.started', 'span.ended', 'run.finished']
    """

    def __init__(self, *, join: CallJoin | None | Literal["transport"] = "transport") -> None:
        self.join: CallJoin | None = self.join_transport if join == "transport" else join
        self.enabled = True
        self._live: dict[int, _Live] = {}
        self._written: dict[str, deque[WrittenSpan]] = {}
        self._lock = threading.RLock()
        self._tools: weakref.WeakKeyDictionary[Recorder, deque[_ToolCall]] = weakref.WeakKeyDictionary()
        self._local = threading.local()  # .writing: the events being observed are the processor's own

    # --- the SDK's interface ---------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Write ``span.started`` into the recording active here (called by the SDK)."""
        if not self.enabled:
            return
        try:
            self._start(span)
        except DivergenceError:
            raise  # a replay that left its log: the recorder's own calls end it the same way
        except Exception:
            log.exception("agentlog: could not record the start of span %r", span.name)

    def on_end(self, span: ReadableSpan) -> None:
        """Write the span's call, events and ``span.ended`` (called by the SDK)."""
        context = span.get_span_context()
        with self._lock:
            live = self._live.pop(context.span_id, None) if context is not None else None
        if live is None:
            return
        try:
            self._end(span, live)
        except DivergenceError:
            raise
        except RunClosedError:  # the recording ended before the span did: nothing to write into
            log.debug("agentlog: span %r ended after its recording %s closed", span.name, live.rec.run_id)
        except Exception:
            log.exception("agentlog: could not record the end of span %r", span.name)

    def shutdown(self) -> None:
        """Forget the spans still open."""
        with self._lock:
            self._live.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write the events held for the recordings this processor writes into now (they are
        written anyway at a root span's end, the recorder's next event, close, or within 50 ms:
        see the module docstring)."""
        with self._lock:
            recorders = list(self._tools)
        for rec in recorders:
            try:
                _sink(rec).flush()
            except OSError:
                log.exception("agentlog: could not write the held spans of run %s", rec.run_id)
                return False
        return True

    # --- what was written ------------------------------------------------------------------------

    def written(self, run_id: str) -> list[WrittenSpan]:
        """The spans written into run ``run_id`` so far, in start order (the last
        :data:`WRITTEN_KEPT` of them, for the last :data:`WRITTEN_RUNS_KEPT` runs: a
        long-lived process does not keep every span)."""
        with self._lock:
            return list(self._written.get(run_id, ()))

    def join_transport(self, rec: Recorder, span: OtelSpan, outs: Sequence[Out]) -> Sequence[Out]:
        """The default :attr:`join`: ``[]`` when the HTTP transport wrote a model call while
        this span was open (that call is the span's: one row, paid once), else ``outs``.

        Calls are matched oldest first, each to one span, so concurrent calls in one recording
        each join one span.
        """
        return [] if _take_transport_call(rec, self._started_seq(rec.run_id, span.span_id)) else outs

    def open_span_id(self, rec: Recorder) -> str | None:
        """The agentlog span id of the OpenTelemetry span current in this context, or of the
        span a framework has open here by its own bookkeeping (:data:`FRAMEWORK_SPANS`),
        whichever opened later, if this processor wrote it into ``rec``'s run (registered in
        :data:`agentlog.capture.recorder.SPAN_PARENTS` by :func:`agentlog.instrument`, so the
        spans the recorder opens nest under the framework's)."""
        if not self.enabled:
            return None
        if rec not in self._tools:  # the recorder opens a span (a tool's, maybe): see its calls from now on
            with self._lock:
                if rec not in self._tools:
                    self._watch(rec, _sink(rec))
        context = trace.get_current_span().get_span_context()
        live = self._live.get(context.span_id) if context is not None else None
        current = live.written.span_id if live is not None and live.rec is rec else None
        framework = self._framework_span(rec)
        order = _sink(rec).order
        return framework if framework is not None and order(framework) > order(current) else current

    def _framework_span(self, rec: Recorder) -> str | None:
        """The agentlog span id of the innermost span a framework has open here by its own
        bookkeeping (:data:`FRAMEWORK_SPANS`) that this processor wrote into ``rec``'s run, or
        of its open child, and so on down: LangChain's current run is the one that set a
        context for what it calls, and a chat model sets none, so its HTTP request runs in its
        parent's run while the model's own span is that parent's open child. Of two children
        open side by side, the one started in the calling thread and task (a parallel run's
        branch in a thread of its own), or, when that does not tell, neither: never a
        sibling's span."""
        found: str | None = None
        for current in FRAMEWORK_SPANS:
            span = current()
            if span is None:
                continue
            key = span.get_span_context().span_id
            with self._lock:
                live = self._live.get(key)
                if live is None or live.rec is not rec:
                    continue
                thread, task = flow()
                scope = _scope()
                while (child := self._open_child(key, rec, thread, task, scope)) is not None:
                    key, live = child
                if _sink(rec).order(live.written.span_id) > _sink(rec).order(found):
                    found = live.written.span_id
        return found

    def _open_child(self, key: int, rec: Recorder, thread: int, task: Any,
                    scope: tuple[object | None, ...]) -> tuple[int, _Live] | None:
        """The open span under OpenTelemetry span ``key`` in ``rec``'s run that the calling
        flow is in: its only one, or, of several side by side, the only one that started in
        this thread and asyncio task (a branch of a parallel run, in a thread of its own), else
        the only one that started in this framework scope (an awaited branch, whose span a
        callback opened in a thread pool); ``None`` when that is not known (called with the
        lock held)."""
        children = [(child_key, child) for child_key, child in self._live.items() if child.parent == key]
        if len(children) > 1:
            here = [(k, c) for k, c in children if c.thread == thread and c.task is task]
            if len(here) != 1 and any(part is not None for part in scope):
                here = [(k, c) for k, c in children if _same(c.scope, scope)]
            children = here
        return children[0] if len(children) == 1 and children[0][1].rec is rec else None

    def _started_seq(self, run_id: str, otel_span_id: str) -> int:
        for written in reversed(self._written.get(run_id, ())):
            if written.otel_span_id == otel_span_id:
                return written.started_seq
        return -1

    # --- writing -----------------------------------------------------------------------------------

    def _recorder(self, span: Span) -> tuple[Recorder | None, _Live | None]:
        parent_ctx = span.parent
        parent = self._live.get(parent_ctx.span_id) if parent_ctx is not None else None
        rec = active_recorder()
        if rec is None and parent is not None:
            rec = parent.rec
        return rec, parent if parent is not None and parent.rec is rec else None

    def _start(self, span: Span) -> None:
        context = span.get_span_context()
        if context is None:
            return
        above = span.parent
        if active_recorder() is None and (above is None or above.span_id not in self._live):
            return  # no recording here, none above: nothing to write (and no lock taken)
        with self._lock:
            rec, parent = self._recorder(span)
            if rec is None:
                return
            own = rec.current_span
            parent_id = own
            order = _sink(rec).order
            if parent is not None and (own is None or order(parent.written.span_id) > order(own)):
                parent_id = parent.written.span_id
            elif parent is None and FRAMEWORK_SPANS:  # outside its OpenTelemetry parent's run: a framework's span?
                framework = self._framework_span(rec)
                if framework is not None and order(framework) > order(parent_id):
                    parent_id = framework
            # the SDK span read once, straight into the body (no intermediate copy)
            attributes = span.attributes or _NO_ATTRIBUTES
            kind = span_kind(attributes) if attributes else "chain"
            scope = span.instrumentation_scope
            otel = {_OTEL_KIND: _KIND_NAMES.get(span.kind) or span.kind.name,
                    _OTEL_SCOPE: scope.name if scope is not None else None}
            body = started_of(span.name, attributes, otel, parent=parent_id, kind=kind)
            sink = _sink(rec)
            if rec not in self._tools:
                self._watch(rec, sink)
            # Its attributes (an instrumentor's input.value: the whole request, or state) are
            # what the span saw, unique to it: kept in the event, not as blob files and their
            # fsyncs, which would make the agent wait for the disk at every span's start. Its
            # id is the seq it gets, taken as it is written (another thread may write first).
            [event] = self._own(sink, [Emit(body, rec.actor, inline=True, span_item=0)], hold=True)
            written = WrittenSpan(trace_id=f"{context.trace_id:032x}", otel_span_id=f"{context.span_id:016x}",
                                  span_id=str(event.span_id), kind=kind, started_seq=event.seq)
            thread, task = flow()
            self._live[context.span_id] = _Live(rec, written, None if above is None else above.span_id,
                                                root=parent is None, started=body, thread=thread, task=task,
                                                scope=_scope())
            written_here = self._written.get(sink.run_id)
            if written_here is None:
                if len(self._written) >= WRITTEN_RUNS_KEPT:  # the run begun longest ago goes
                    del self._written[next(iter(self._written))]
                written_here = self._written[sink.run_id] = deque(maxlen=WRITTEN_KEPT)
            written_here.append(written)

    def _end(self, span: ReadableSpan, live: _Live) -> None:
        rec, written = live.rec, live.written
        attributes = span.attributes or _NO_ATTRIBUTES
        written.kind = kind = span_kind(attributes) if attributes else "chain"
        sink = _sink(rec)
        status = span.status
        code = _CODE_VALUES.get(status.status_code)
        if kind not in _CALLS and code is not None and not span.events:
            # the usual span: no call, no span events, only its span.ended
            last = ended_of(span.name, attributes, code, status.description or None, started=live.started, kind=kind)
            with self._lock:
                if last is not None:
                    [event] = self._own(sink, [Emit(last, rec.actor, written.started_seq, written.span_id,
                                                    inline=True)],
                                        hold=not live.root)
                    written.ended_seq = event.seq
                elif live.root:
                    sink.flush()
            return
        items: list[Emit | _Raw] = []
        calls = 0
        logged = False  # the span's call is in the log already (the transport's, or a span's below)
        with self._lock:
            if kind in _CALLS or span.events:
                covered = kind == LLM and live.covered
                # The default join, asked first: a call the transport wrote is the span's, so
                # the span's own call is not built only to be dropped.
                if kind == LLM:
                    self._let_go(rec, written.started_seq)
                joined = (kind == LLM and not covered and self.join == self.join_transport
                          and (_take_transport_call(rec, written.started_seq, _flow_of(live))
                               or _share_transport_call(rec, live)))
                logged = covered or joined
                if logged and not span.events:
                    plain = None  # nothing of the span is read further
                else:
                    plain = from_sdk_span(span, ids=(written.trace_id, written.otel_span_id))
                outs: Sequence[Out] = [] if covered or joined or plain is None else call_outs(
                    plain, timed=False, kind=kind)
                if kind == LLM and (outs or joined):
                    if outs and self.join is not None and plain is not None:
                        outs = self.join(rec, plain, outs)
                    self._cover(live)
                elif kind == "tool" and outs and self._recorded_tool(rec, written.started_seq, outs[0].body):
                    outs = []
                if outs:  # the request first: its seq is what the answer is caused by
                    [asked] = self._own(sink, [_item(outs[0], rec, written.span_id, None)], hold=True, rec=rec)
                    written.call_seqs.append(asked.seq)
                    items.extend(_item(out, rec, written.span_id, asked.seq) for out in outs[1:])
                calls = len(items)
                if plain is not None and plain.events:
                    for _, _, out in sorted(event_outs(plain), key=lambda item: item[:2]):
                        items.append(_item(out, rec, written.span_id, None))
            # The attributes an llm span gains at its end are its answer, which the log holds
            # already when its call is there: not written again (only the kind they tell).
            last = ended_of(span.name, attributes, status.status_code.value, status.description or None,
                            started=live.started, kind=kind, attributes=not logged)
            if last is not None:
                items.append(Emit(last, rec.actor, written.started_seq, written.span_id, inline=True))
            if items:
                events = self._own(sink, items, hold=not live.root, rec=rec)
                written.call_seqs.extend(e.seq for e in events[:calls])
                if last is not None:
                    written.ended_seq = events[-1].seq
            elif live.root:
                sink.flush()

    def _own(self, sink: Sink, items: Sequence[Emit | _Raw], *, hold: bool, rec: Recorder | None = None) -> list[Event]:
        """Write the processor's own events (not taken for the recorder's tool calls): typed
        bodies straight into the sink's batch, anything else through ``rec`` (:func:`_write`)."""
        local = self._local
        local.writing = True
        try:
            if rec is None:  # typed bodies only
                return sink.emit_many(items, hold=hold, sync=False)  # type: ignore[arg-type]
            return _write(rec, sink, items, hold=hold)
        finally:
            local.writing = False

    def _watch(self, rec: Recorder, sink: Sink) -> None:
        """See the tool calls the recorder writes into its run, to join a framework's tool span
        to the call the recorder made (the sink's observer is wrapped: every event still goes
        to the recorder first)."""
        calls: deque[_ToolCall] = deque(maxlen=TOOL_CALLS_KEPT)
        self._tools[rec] = calls
        inner = sink.observer
        local = self._local

        def observe(event: Event) -> None:
            if inner is not None:
                inner(event)
            if getattr(local, "writing", False):
                return
            if event.type == ToolCall.TYPE:
                calls.append(_ToolCall(event.seq, str(event.payload.get(ToolCall.K.name))))
            elif event.type == ToolResult.TYPE and event.caused_by is not None:
                for call in reversed(calls):
                    if call.seq == event.caused_by:
                        call.done = True
                        break

        sink.observer = observe

    def _recorded_tool(self, rec: Recorder, started: int, body: Body | None) -> bool:
        """True when the recorder wrote this tool span's call (``body``) itself (see the module
        docstring): the span writes none; the recorder's call is marked joined."""
        if not isinstance(body, ToolCall):
            return False
        place = _sink(rec).place
        for recorded in self._tools.get(rec, ()):
            if not recorded.joined and recorded.name == body.name and \
                    (place(recorded.seq) > place(started) or not recorded.done):
                recorded.joined = True
                return True
        return False

    def _let_go(self, rec: Recorder, started: int) -> None:
        """Let go of the transport's calls at the front of its list that no span can join any
        more: joined ones (kept for :func:`_share_transport_call`), and those asked before
        every span of ``rec``'s run still open (and this one, which started at ``started``)
        started: a model call no tracer saw (a client with no instrumentor), which would
        otherwise stay in the list, and be looked at by every span's end, until 1,000 more
        calls pushed it out."""
        calls = model_calls(rec)
        place = _sink(rec).place  # where the program met an event: its seq, but in a replay
        if not calls or calls[0].joined or place(calls[0].request_seq) > place(started):
            return  # the usual case: nothing to let go, or the join lets the joined go
        with self._lock:
            oldest = min((place(live.written.started_seq) for live in self._live.values() if live.rec is rec),
                         default=place(started))
        _drop_front(rec, calls, min(oldest, place(started)))

    def _cover(self, live: _Live) -> None:
        """Mark every open ancestor of a span that wrote a model call: it is the same call."""
        node = live.parent
        seen: set[int] = set()
        while node is not None and node not in seen:
            seen.add(node)
            above = self._live.get(node)
            if above is None:
                return
            above.covered = True
            node = above.parent


_NO_ATTRIBUTES: Mapping[str, Any] = {}
# An enum member's .name and .value are properties (a call each): read once here.
_KIND_NAMES: Mapping[SpanKind, str] = {kind: kind.name for kind in SpanKind}
_CODE_VALUES: Mapping[StatusCode, int] = {code: code.value for code in StatusCode}
_OTEL_KIND, _OTEL_SCOPE = "kind", "scope"  # the keys of SpanStarted.otel, as spanmap.started writes them


def _sink(rec: Recorder) -> Sink:
    """The sink the recorder writes to (the processor writes batches straight into it)."""
    sink: Sink = rec._sink  # the recorder (capture/recorder.py) has no public name for it yet
    return sink


class _Raw(NamedTuple):
    """An event with no typed body (an exported agentlog event of another type), written alone."""

    out: Out
    span_id: str
    caused_by: int | None


def _item(out: Out, rec: Recorder, span_id: str, caused_by: int | None) -> Emit | _Raw:
    """A typed event as the batch item it is; an exported event of another type as it came."""
    if out.body is not None:
        return Emit(out.body, rec.actor, caused_by, span_id)
    return _Raw(out, span_id, caused_by)


def _write(rec: Recorder, sink: Sink, items: Sequence[Emit | _Raw], *, hold: bool) -> list[Event]:
    """Write ``items`` into the recorder's run: runs of typed bodies in one batch each (held
    for a later write with ``hold``), anything else one event at a time."""
    emit_many = getattr(sink, "emit_many", None)
    events: list[Event] = []
    batch: list[Emit] = []
    for item in items:
        if isinstance(item, Emit) and emit_many is not None:
            batch.append(item)
            continue
        if batch:
            events.extend(emit_many(batch, hold=True, sync=False))  # type: ignore[misc]
            batch = []
        if isinstance(item, Emit):
            events.append(rec.emit(item.body, actor=item.actor, caused_by=item.caused_by, span_id=item.span_id))
        else:
            out = item.out
            events.append(rec.emit(out.type, out.payload, span_id=item.span_id, caused_by=item.caused_by,
                                   **dict(out.columns)))
    if batch:
        assert emit_many is not None
        events.extend(emit_many(batch, hold=hold, sync=False))
    elif not hold:
        flush = getattr(sink, "flush", None)
        if flush is not None:
            flush()
    return events


#: How many joined model calls are kept per recording after they leave the transport's list,
#: for :func:`_share_transport_call`.
JOINED_KEPT = 64
_joined: weakref.WeakKeyDictionary[Recorder, deque[TransportCall]] = weakref.WeakKeyDictionary()


def _drop_front(rec: Recorder, calls: deque[TransportCall], oldest: int) -> None:
    """Take off the front of ``calls`` the joined ones (the last :data:`JOINED_KEPT` kept for
    :func:`_share_transport_call`) and those asked before ``oldest`` (a :meth:`Sink.place`)."""
    joined = _joined.get(rec)
    place = _sink(rec).place
    while calls and (calls[0].joined or place(calls[0].request_seq) < oldest):
        call = calls.popleft()
        if call.joined:
            if joined is None:
                joined = _joined[rec] = deque(maxlen=JOINED_KEPT)
            joined.append(call)


def _take_transport_call(rec: Recorder, started: int, flow: tuple[int, int | None] | None = None) -> bool:
    """Join the oldest model call the HTTP transport wrote into ``rec``'s run after seq
    ``started`` (a span's start) and no span joined yet; ``False`` if there is none. A call
    still in flight (its answer not written yet: a tracer that ends its span before the
    stream it wraps ends) is taken only by a span of the ``flow`` that asked it (thread and
    ``id`` of the asyncio task, :func:`~agentlog.capture.transport.flow`): it ran inside that
    span. The calls joined at the front of the list leave it (none is joined twice), so a long
    instrumented run is not scanned from its first call at every span; the last
    :data:`JOINED_KEPT` of them are kept for :func:`_share_transport_call`."""
    calls = model_calls(rec)
    if calls and calls[0].joined:
        _drop_front(rec, calls, -1)
    place = _sink(rec).place
    started = place(started)
    for call in calls:
        if not call.joined and place(call.request_seq) > started and (
                call.answered or (call.thread, call.task) == flow):
            call.joined = True
            return True
    return False


def _flow_of(live: _Live) -> tuple[int, int | None]:
    """The flow a span started in, as :class:`~agentlog.capture.transport.TransportCall` keeps a call's."""
    return live.thread, None if live.task is None else id(live.task)


def _share_transport_call(rec: Recorder, live: _Live) -> bool:
    """True when the model call of ``live`` (an ``llm`` span that found no call of its own to
    join) is one the transport wrote while it was open and another span joined first: two
    instrumentors' spans of one call that OpenTelemetry does not nest (a framework's span
    opened from a callback, which never becomes the current span, and the client
    instrumentor's span of the same call, a root). The call is the span's when
    (oldest first):

    - it was asked in the flow the span started in (the same thread and asyncio task,
      :func:`~agentlog.capture.transport.flow`): one flow runs one step after another, so the
      call ran inside the span; or
    - the call was asked by an asyncio task, the span started outside any task, in a thread
      that asked no model call since (a framework running its callbacks in a thread pool, as
      LangChain does for an async run), and no other span took the call this way (each call
      counts for one such span).

    Calls asked from plain threads are shared only in their own thread: an ``llm`` span
    opened in one thread with no HTTP call of its own (a cached answer, a local model) is
    never taken for a call another thread made.
    """
    place = _sink(rec).place
    started, thread, task = place(live.written.started_seq), live.thread, live.task
    task_id = None if task is None else id(task)
    joined = [call for call in (*_joined.get(rec, ()), *model_calls(rec))
              if call.joined and place(call.request_seq) > started]
    for call in joined:
        if call.thread == thread and call.task == task_id:
            call.shared = True
            return True
    if task is not None or any(call.thread == thread for call in model_calls(rec) if place(call.request_seq) > started):
        return False
    for call in joined:
        if not call.shared and call.task is not None and call.thread != thread:
            call.shared = True
            return True
    return False
