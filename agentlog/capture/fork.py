"""Fork a run at any event with one thing changed.

The fork's events ``0..at`` are its parent's, referenced rather than copied (same hashes).

- A plain program is re-run to rebuild its Python stack: up to the cut every event is compared
  with the parent's and every answer is served from the log, so nothing before the cut is
  paid for again, but the prefix costs its replay, about what a strict replay of it costs
  (``docs/benchmarks.md``: tens of microseconds per event).
- A loop run (``program`` an :class:`~agentlog.AgentProgram`) is forked by fold + continue
  (:mod:`agentlog.capture.loopfork`): the state at the cut is read from the run's
  checkpoints and the loop goes on from it; only the part of a step the cut falls in is
  replayed. Its cost does not grow with the prefix. At the cut ``fork.started``
records what changed, the edit is applied, and the program runs on; calls whose key the parent
recorded after the cut are served from its log too, new ones go out live.

Edits (:mod:`agentlog.edit`):

- ``replace_response(seq, payload)`` — the answer recorded at ``seq`` (> ``at``) is served
  changed when the program asks that call again (checked against the answer's type before
  the fork is made; like any served answer it costs nothing: an edited model answer has no
  usage unless the edit gives one). The edited answer of a model call the HTTP transport
  recorded reaches the SDK in the HTTP response it is served (:mod:`.rewire`). An answer a
  traced span reported is refused
  (:func:`unservable`: the program was never served it); an edit the program never asked for
  after the cut is warned of (:class:`~agentlog.errors.ForkEditWarning`);
- ``patch_state(ops)`` — a ``state.patch`` right after the cut;
- ``replace_input(inputs)`` — the program sees other inputs (the fork starts before
  ``run.started``, so ``at`` must be ``-1``);
- or simply a different ``program``.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from .._words import with_article
from ..errors import DivergenceError, ForkEditWarning
from ..events import (
    HTTP_REQUEST,
    HTTP_RESPONSE,
    LLM_REQUEST,
    LLM_RESPONSE,
    SPAN_ENDED,
    SPAN_STARTED,
    TOOL_RESULT,
    Body,
    Event,
    ForkStarted,
    HTTPRequest,
    HTTPResponse,
    LLMResponse,
    SpanStarted,
    StatePatch,
    Usage,
    body_class,
)
from .effects import Steps, arun
from .effects import run as run_steps
from .endpoints import ModelCall, model_call
from .lifecycle import closing, program_steps
from .recorder import Recorder
from .replay import recorded_inputs, run_coroutine
from .replayable import require_replayable
from .rewire import finish_for, rewired
from .session import Program, program_reducers, resolve_store
from .sinks import ReplaySink, ResponseCache, WriterSink, answer_kind, recorded_by, run_redactor

__all__ = ["Edit", "PatchState", "ReplaceInput", "ReplaceResponse", "afork", "fork", "patch_state",
           "replace_input", "replace_response", "unservable"]

_REPLACEABLE = (LLM_RESPONSE, TOOL_RESULT, HTTP_RESPONSE)


@dataclass(frozen=True, slots=True)
class ReplaceResponse:
    """Serve the answer recorded at ``seq`` with ``payload`` merged over it."""

    seq: int
    payload: Mapping[str, Any]

    def describe(self) -> dict[str, Any]:
        """The edit as recorded in ``fork.started``."""
        return {"edit": "replace_response", "seq": self.seq, "payload": dict(self.payload)}


@dataclass(frozen=True, slots=True)
class PatchState:
    """Apply RFC 6902 ``ops`` to ``state["vars"]`` right after the cut."""

    ops: Sequence[Mapping[str, Any]]

    def describe(self) -> dict[str, Any]:
        """The edit as recorded in ``fork.started``."""
        return {"edit": "patch_state", "ops": [dict(op) for op in self.ops]}


@dataclass(frozen=True, slots=True)
class ReplaceInput:
    """Run the program on other inputs."""

    inputs: Any

    def describe(self) -> dict[str, Any]:
        """The edit as recorded in ``fork.started``."""
        return {"edit": "replace_input", "inputs": self.inputs}


Edit = ReplaceResponse | PatchState | ReplaceInput


def replace_response(seq: int, payload: Mapping[str, Any]) -> ReplaceResponse:
    """Edit: the recorded answer at ``seq`` is served with ``payload`` merged over it.

    >>> replace_response(12, {"result": {"cpu": 0.2}}).describe()["seq"]
    12
    """
    return ReplaceResponse(seq, dict(payload))


def patch_state(ops: Sequence[Mapping[str, Any]]) -> PatchState:
    """Edit: apply RFC 6902 ops to ``state["vars"]`` at the cut."""
    return PatchState([dict(op) for op in ops])


def replace_input(inputs: Any) -> ReplaceInput:
    """Edit: re-run the program on ``inputs`` (fork with ``at=-1``)."""
    return ReplaceInput(inputs)


def _edits(edit: Edit | Iterable[Edit] | None) -> list[Edit]:
    if edit is None:
        return []
    if isinstance(edit, (ReplaceResponse, PatchState, ReplaceInput)):
        return [edit]
    return list(edit)


def _check(run: Any, at: int, edits: list[Edit]) -> None:
    if not -1 <= at < len(run) - 1:
        raise ValueError(f"run {run.id}: at={at} must be between -1 and {len(run) - 2} "
                         "(the last parent event kept; something must remain to re-run)")
    for e in edits:
        if isinstance(e, ReplaceInput) and at != -1:
            raise ValueError(f"run {run.id}: replace_input needs at=-1 (the inputs are recorded "
                             f"at seq 0, which a fork at {at} keeps)")
        if isinstance(e, ReplaceResponse):
            if not at < e.seq < len(run):
                raise ValueError(f"run {run.id}: replace_response(seq={e.seq}) must name an event "
                                 f"after the cut at {at}")
            if run.event(e.seq).type not in _REPLACEABLE:
                raise ValueError(f"run {run.id}: seq {e.seq} is {with_article(run.event(e.seq).type)}, not one of "
                                 f"{', '.join(_REPLACEABLE)}")
            why = unservable(run, e.seq)
            if why is not None:
                raise ValueError(f"run {run.id}: replace_response(seq={e.seq}) cannot be served: {why}")


def unservable(run: Any, seq: int) -> str | None:
    """Why a fork could not serve the answer at ``seq`` changed (``None``: it can).

    An answer that a traced span reported (a framework's call, written from its OpenTelemetry
    span: the Agents SDK's handoff, a tool a framework runs in its own code) was what the
    framework saw, not an answer the program was served from the log: a fork would run the
    framework's own code again and never ask for it.
    """
    event = run.event(seq)
    span_id = event.span_id or ""
    if not (span_id[:1] == "s" and span_id[1:].isdigit()) or not 0 <= int(span_id[1:]) < len(run):
        return None
    opened = run.event(int(span_id[1:]))
    if opened.type != SPAN_STARTED or not opened.payload.get(SpanStarted.K.otel):
        return None
    name = opened.payload.get(SpanStarted.K.name)
    return (f"seq {seq} is the {event.type} that the traced span {span_id} ({name!r}) reported: the "
            "framework made that call in its own code, and the program was not served it from the log, "
            "so a fork would never ask for it. Edit an answer the recorder served (a model call's "
            "llm.response, a tool.result of @al.tool or rec.tool) or patch the state")


def warn_unserved(run: Any, edits: list[Edit], sink: ReplaySink, fork_id: str) -> None:
    """Warn (:class:`~agentlog.errors.ForkEditWarning`) of the edited answers the fork never served."""
    left = sink.after.edits if sink.after is not None else {}
    seqs = [e.seq for e in edits if isinstance(e, ReplaceResponse) and answer_kind(run.event(e.seq))[1] in left]
    if seqs:
        warnings.warn(ForkEditWarning(fork_id, seqs), stacklevel=3)


def _replacements(run: Any, edits: list[Edit]) -> tuple[dict[str, Body], set[int]]:
    """``key -> the edited answer``, each checked against its type (before anything is written),
    and the seqs of the parent's answers they stand for, which the fork's cache leaves out.

    The answer of a model call the HTTP transport recorded is served twice over: the HTTP
    response the SDK reads, then the ``llm.response``. An edited ``llm.response`` serves the
    program the recorded HTTP body with the edited answer put in it (:mod:`.rewire`), so the
    program sees the edit; an edited ``http.response`` has its ``llm.response`` read from the
    edited bytes, so the log says what the program saw."""
    served: dict[str, Body] = {}
    skip: set[int] = set()
    for e in edits:
        if not isinstance(e, ReplaceResponse):
            continue
        original = run.event(e.seq)
        cls = body_class(original.type)
        assert cls is not None  # _check allowed only answer types
        payload = {**original.payload, **e.payload, cls.K.edited: True}
        if cls is LLMResponse:  # served, so nothing paid: no usage unless the edit gives one
            if LLMResponse.K.usage not in e.payload:
                payload[LLMResponse.K.usage] = Usage().to_json()
            payload[LLMResponse.K.cost_source] = "cache"
        columns = {"cost_usd": 0.0 if cls is LLMResponse else None, "duration_ms": None}
        body = cls.from_payload(payload, columns=columns)
        served[answer_kind(original)[1]] = body
        skip.add(e.seq)
        exchange = _exchange(run, original)
        if exchange is None:
            continue
        request, other = exchange  # the other answer of the call: served from the edit, not the log
        skip.add(other.seq)
        if isinstance(body, LLMResponse):
            http = HTTPResponse.of(other)
            call = _model_call(run, e.seq, request, http)
            if LLMResponse.K.finish_reason not in e.payload:  # asking for a tool, or no longer: say so
                body = replace(body, finish_reason=finish_for(call.api, body.finish_reason,
                                                              bool(body.message.get("tool_calls"))))
                served[answer_kind(original)[1]] = body
            served[http.key] = replace(http, body=_rewired(run, e.seq, call, http, body), edited=True,
                                       duration_ms=None, served_from_seq=None)
    return served, skip


def _exchange(run: Any, answer: Event) -> tuple[Event, Event] | None:
    """For the ``llm.response`` or the ``http.response`` of a model call the HTTP transport
    recorded: its ``http.request`` and the other answer (the ``http.response``, or the
    ``llm.response``, or the ``error`` a failed call has instead); ``None`` for any other
    answer."""
    if answer.type == LLM_RESPONSE:
        asked, start, stop = answer.caused_by, (answer.caused_by or 0) + 1, answer.seq
    elif answer.type == HTTP_RESPONSE and answer.caused_by is not None:
        asked, start, stop = run.event(answer.caused_by).caused_by, answer.seq + 1, None
    else:
        return None
    if asked is None or run.event(asked).type != LLM_REQUEST:
        return None
    request: Event | None = None
    for event in run.iter_events(start=start, stop=stop):
        if event.span_id != answer.span_id:
            continue
        if event.type == HTTP_REQUEST and event.caused_by == asked:
            request = event
        elif answer.type == LLM_RESPONSE and event.type == HTTP_RESPONSE and request is not None \
                and event.caused_by == request.seq:
            return request, event
        elif answer.type == HTTP_RESPONSE and answer_kind(event)[0] == LLM_RESPONSE and event.caused_by == asked:
            return run.event(answer.caused_by), event  # its answer, or the error it was
        elif event.type == SPAN_ENDED:
            return None
    return None


def _model_call(run: Any, seq: int, request: Event, http: HTTPResponse) -> ModelCall:
    """The model call whose recorded exchange (``request``, answered ``http``) the edited answer
    at ``seq`` is put back into."""
    asked = HTTPRequest.of(request)
    call = model_call(asked.method, urlsplit(str(asked.url)).path, asked.content)
    if call is None or not 200 <= http.status < 300:
        raise ValueError(f"run {run.id}: replace_response(seq={seq}): the recorded HTTP exchange at seq "
                         f"{request.seq} is not a model call's answer to put the edited one in")
    return call


def _rewired(run: Any, seq: int, call: ModelCall, http: HTTPResponse, answer: LLMResponse) -> str:
    """The recorded HTTP body of a model call with the edited ``answer`` put in it."""
    try:
        return rewired(call.api, call.streamed, http.content, answer.message, answer.finish_reason).decode()
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"run {run.id}: replace_response(seq={seq}): the edited answer cannot be put in the "
                         f"recorded {call.api} response ({type(exc).__name__}: {exc}); edit its http.response "
                         "instead") from exc


def fork(run: Any, at: int, *, program: Program, edit: Edit | Iterable[Edit] | None = None,
         name: str | None = None, store: Any = None, reducers: Any = None, run_id: str | None = None,
         tags: Mapping[str, Any] | None = None, clock: Callable[[], float] | None = None,
         capture_http: bool = True) -> Any:
    """Make a new run whose events ``0..at`` are ``run``'s, apply ``edit``, and run ``program`` on.

    What it costs before the first new event: for a plain program, a replay of the prefix
    (every answer from the log, every event compared: about what ``al.replay`` costs per
    event, tens of microseconds); for an :class:`~agentlog.AgentProgram`, reading the state
    at the cut from the run's checkpoints (at most 12,288 events folded) and replaying at most
    the one step the cut falls in, whatever the length of the prefix.

    Args:
        run: the parent :class:`~agentlog.Run`.
        at: the last parent event kept (``-1``: keep nothing, e.g. to change the inputs).
        program: the program to re-run (the recorded one, or a changed one).
        edit: one edit or a list of them (see :mod:`agentlog.edit`).
        name: the fork's name (default: ``"<parent name> fork@<at>"``).
        run_id, tags: the fork's id (default: generated) and more labels (``fork_of`` and
            ``fork_seq`` are always set).
        clock: a fixed clock makes the fork byte-identical when repeated (it also times calls).
        capture_http: serve the program's httpx requests from the log up to the cut (and the
            parent's later answers by key), and record new ones (``False`` for a run recorded
            with ``capture_http=False``).

    An ``async def`` program is run on an event loop of its own (:func:`afork` awaits it in
    yours; inside a running loop, a notebook cell, ``await al.afork(...)`` it).

    Returns:
        The fork, a :class:`~agentlog.Run` whose ``parent`` is ``run``.

    Raises:
        DivergenceError: the program did something else than the parent before the cut.
        NotReplayableError: the run holds no program's recorded answers (an import).
        RuntimeError: an ``async def`` program, called inside a running event loop.
    """
    if inspect.iscoroutinefunction(program):
        return run_coroutine(afork(run, at, program=program, edit=edit, name=name, store=store,
                                   reducers=reducers, run_id=run_id, tags=tags, clock=clock,
                                   capture_http=capture_http), "al.afork")
    require_replayable(run)
    edits = _edits(edit)
    _check(run, at, edits)
    from .runtime import AgentProgram
    if isinstance(program, AgentProgram):  # a loop run: fold to the cut and go on, no replay
        from .loopfork import fork_loop
        forked = fork_loop(run, at, program=program, edits=edits, name=name, store=store,
                           run_id=run_id, tags=tags, clock=clock)
        if forked is not None:
            return forked
    writer, sink, rec = _prepare(run, at, program, edits, name, store, reducers, run_id, tags, clock,
                                 capture_http)
    forked = run_steps(_forked(writer, sink, program_steps(rec, program)))
    warn_unserved(run, edits, sink, forked.id)
    return forked


def _prepare(run: Any, at: int, program: Program, edits: list[Edit], name: str | None, store: Any,
             reducers: Any, run_id: str | None, tags: Mapping[str, Any] | None,
             clock: Callable[[], float] | None, capture_http: bool) -> tuple[Any, ReplaySink, Recorder]:
    """The fork's writer, its sink, and the recorder that replays the prefix and records past
    the cut."""
    writer, sink, bind = fork_sink(run, at, edits, name=name, store=store, run_id=run_id, tags=tags, clock=clock)
    inputs = next((e.inputs for e in edits if isinstance(e, ReplaceInput)), recorded_inputs(run))
    rec = Recorder(sink, inputs=inputs, reducers=program_reducers(program, reducers),
                   clock=clock or time.time, timer=clock or time.perf_counter, capture_http=capture_http)
    bind(rec)
    return writer, sink, rec


def fork_sink(run: Any, at: int, edits: list[Edit], *, name: str | None, store: Any, run_id: str | None,
              tags: Mapping[str, Any] | None, clock: Callable[[], float] | None,
              start: int = 0) -> tuple[Any, ReplaySink, Callable[[Recorder], None]]:
    """A fork's new run (its writer) and the sink that replays the parent's events ``start..at``
    and writes past the cut, where ``fork.started`` and the edits go first. The sink needs the
    recorder built on it to write them: pass that recorder to the returned function."""
    redactor = run_redactor(run)
    target = resolve_store(store if store is not None else run.store)
    parent_name = run.meta.get("name") or run.id
    replacements, skip = _replacements(run, edits)  # checked before the fork is made
    writer = target.create_run(name=name or f"{parent_name} fork@{at}", fork_of=(run.id, at),
                               tags={**(tags or {}), "fork_of": run.id, "fork_seq": at},
                               run_id=run_id, clock=clock, redact=redactor.names)
    cache = ResponseCache(e for e in run.iter_events(start=at + 1) if e.seq not in skip)
    after = WriterSink(writer, cache=cache, edits=replacements)
    holder: dict[str, Recorder] = {}

    def at_cut() -> None:
        rec = holder["rec"]
        started = rec.emit(ForkStarted(parent_run=run.id, parent_seq=at,
                                       parent_hash=writer_parent_hash(writer),
                                       edits=[e.describe() for e in edits]), actor="fork")
        for e in edits:
            if isinstance(e, PatchState):
                rec.emit(StatePatch(ops=[dict(op) for op in e.ops]), actor="fork", caused_by=started.seq)

    sink = ReplaySink(run.iter_events(start=start, stop=at + 1), run_id=run.id, prefix=at + 1, after=after,
                      recorded_by=recorded_by(run), on_cut=at_cut, start=start, redactor=redactor)
    return writer, sink, lambda rec: holder.__setitem__("rec", rec)


def _forked(writer: Any, sink: ReplaySink, steps: Steps[Any]) -> Steps[Any]:
    with closing(writer, what="fork recorded as run"):  # a Stopped fork waits: resume it later
        try:
            yield from steps
        except Exception as exc:
            first = sink.first_divergence  # what made the program fail (threads may raise later ones)
            if first is not None and not (isinstance(exc, DivergenceError) and exc.divergence is first):
                raise DivergenceError(first) from exc
            raise
        if sink.first_divergence is not None:  # the program went on: an SDK caught it (a tool's error)
            raise DivergenceError(sink.first_divergence)
        left = sink.left_behind()
        if left is not None:
            raise DivergenceError(left)
    return writer.run


async def afork(run: Any, at: int, *, program: Program, edit: Edit | Iterable[Edit] | None = None,
                name: str | None = None, store: Any = None, reducers: Any = None, run_id: str | None = None,
                tags: Mapping[str, Any] | None = None, clock: Callable[[], float] | None = None,
                capture_http: bool = True) -> Any:
    """:func:`fork` for an ``async def program(rec)``, awaited in the running event loop."""
    require_replayable(run)
    edits = _edits(edit)
    _check(run, at, edits)
    writer, sink, rec = _prepare(run, at, program, edits, name, store, reducers, run_id, tags, clock,
                                 capture_http)
    forked = await arun(_forked(writer, sink, program_steps(rec, program)))
    warn_unserved(run, edits, sink, forked.id)
    return forked


def writer_parent_hash(writer: Any) -> str:
    """The parent's hash at the fork seq, as the store recorded it."""
    parent = writer.run.meta.get("parent") or {}
    return str(parent.get("hash", ""))
