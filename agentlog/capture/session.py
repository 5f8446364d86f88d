"""Recording a program: ``al.record(program)``, ``await al.arecord(program)`` and
``with al.recording() as rec:``.

A recorded program's run starts with ``run.started`` (its inputs) and ends with
``run.finished`` (its result) or ``run.failed`` (the error, which is raised again with a note
naming the run); Ctrl-C leaves it ``interrupted``, and a program that raises
:class:`~agentlog.capture.lifecycle.Stopped` leaves it with the stop's status, to be resumed
later. Replay, forks and the loop runtime drive programs through the same lifecycle
(:mod:`agentlog.capture.lifecycle`), so the events they compare line up.

>>> import agentlog as al, tempfile
>>> store = al.Store(tempfile.mkdtemp())
>>> with al.recording(store=store, name="notes") as rec:
...     note = rec.emit("note", {"text": "hello"})
...     doubled = rec.tool("lookup", {"id": 7, "api_key": "sk-live-1"}, fn=lambda id, api_key: id * 2)
>>> run = store.run(rec.run_id)
>>> [e.type for e in run.iter_events()][-4:], run.status
(['tool.call', 'tool.result', 'span.ended', 'run.finished'], 'finished')
>>> run.event(3).payload["args"]
{'api_key': '[REDACTED]', 'id': 7}
"""

from __future__ import annotations

import contextlib
import inspect
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .lifecycle import Stopped, adrive, closing, drive, program_steps
from .recorder import Recorder
from .sinks import WriterSink

__all__ = ["Program", "Stopped", "arecord", "drive", "program_name", "program_reducers", "record",
           "recording", "resolve_store"]

Program = Callable[[Recorder], Any]
Tags = Sequence[str] | Mapping[str, Any] | None


def program_reducers(program: Any, reducers: Any = None) -> Any:
    """The reducer set to fold a program's state with: the one given, else the program's own
    ``reducers`` attribute (an agent program carries its own), else ``None`` (the default)."""
    return reducers if reducers is not None else getattr(program, "reducers", None)


def resolve_store(store: Any = None) -> Any:
    """A :class:`~agentlog.Store` from ``None`` (the default store), a path, or a store."""
    from ..store import Store
    if store is None or isinstance(store, (str, os.PathLike)):
        return Store(store)
    return store


def program_name(program: Any) -> str:
    """A readable name for a program: ``module:qualname``."""
    name = getattr(program, "__qualname__", None) or type(program).__qualname__
    return f"{getattr(program, '__module__', '?')}:{name}"


def _begin(store: Any, name: str | None, program: Any, tags: Tags, clock: Callable[[], float] | None,
           run_id: str | None, inputs: Any, reducers: Any, redact: Iterable[str],
           durability: str, capture_http: bool) -> tuple[Any, Recorder]:
    writer = resolve_store(store).create_run(name=name or getattr(program, "__name__", None) or "run",
                                             tags=tags, clock=clock, run_id=run_id, redact=redact,
                                             durability=durability)
    rec = Recorder(WriterSink(writer), inputs=inputs, reducers=program_reducers(program, reducers),
                   clock=clock or time.time, capture_http=capture_http)
    return writer, rec


def record(program: Program, *, store: Any = None, name: str | None = None, inputs: Any = None,
           tags: Tags = None, clock: Callable[[], float] | None = None, run_id: str | None = None,
           reducers: Any = None, redact: Iterable[str] = (), durability: str = "fsync",
           capture_http: bool = True) -> Any:
    """Run ``program(rec)`` and record everything it does through the recorder.

    Args:
        program: a callable taking a :class:`Recorder`.
        store: a :class:`~agentlog.Store`, a path, or ``None`` for the default store.
        name: the run's name (default: the program's name).
        inputs: the program's inputs, recorded in ``run.started`` and available as ``rec.inputs``.
        tags: labels kept in ``run.json``.
        clock: a fixed clock makes a recording byte-identical when repeated.
        run_id: the run's id (default: generated).
        reducers: the reducer set for ``rec.state`` (default: the program's ``reducers``
            attribute if it has one, else the default projection).
        redact: more names whose values never reach the disk (:mod:`agentlog.redact`): in
            tool arguments, model requests, HTTP headers and URLs, and any payload. Kept in
            ``run.json``, so replays, forks and resumes redact the same.
        durability: ``fsync`` (default: each event is on disk before the program goes on;
            a model call's request, written to the file before it is sent, is fsynced with
            its answer: one fsync a call), ``batch`` or ``none`` (:class:`~agentlog.Durability`).
        capture_http: record every httpx request the program sends, by any client (the
            OpenAI, Anthropic and Gemini SDKs, LangChain, the Agents SDK...), created before or
            inside the program: a model endpoint's as an LLM call with tokens and cost
            (:mod:`agentlog.capture.transport`). ``False`` leaves them unrecorded.

    Returns:
        The recorded :class:`~agentlog.Run`, with the status of how the program ended
        (:mod:`agentlog.capture.lifecycle`).

    Raises:
        Whatever the program raised, after ``run.failed`` was recorded (the error carries a note
        naming the run).
    """
    if inspect.iscoroutinefunction(program):
        raise TypeError("program is a coroutine function; use `await al.arecord(program, ...)`")
    writer, rec = _begin(store, name, program, tags, clock, run_id, inputs, reducers, redact, durability,
                         capture_http)
    with closing(writer):
        drive(rec, program)
    return writer.run


async def arecord(program: Callable[[Recorder], Any], *, store: Any = None, name: str | None = None,
                  inputs: Any = None, tags: Tags = None, clock: Callable[[], float] | None = None,
                  run_id: str | None = None, reducers: Any = None, redact: Iterable[str] = (),
                  durability: str = "fsync", capture_http: bool = True) -> Any:
    """:func:`record` for a coroutine function ``async def program(rec)``."""
    writer, rec = _begin(store, name, program, tags, clock, run_id, inputs, reducers, redact, durability,
                         capture_http)
    with closing(writer):
        await adrive(rec, program)
    return writer.run


@contextlib.contextmanager
def recording(*, store: Any = None, name: str = "run", inputs: Any = None, tags: Tags = None,
              clock: Callable[[], float] | None = None, run_id: str | None = None,
              reducers: Any = None, redact: Iterable[str] = (), durability: str = "fsync",
              capture_http: bool = True) -> Iterator[Recorder]:
    """Record the code inside a ``with`` block; the recorder is the ``as`` target.

    The block is the program: it ends the run as a program's return, error, Ctrl-C or
    :class:`Stopped` would. After the block, ``store.run(rec.run_id)`` opens the run.
    Arguments as for :func:`record`.
    """
    writer, rec = _begin(store, name, None, tags, clock, run_id, inputs, reducers, redact, durability,
                         capture_http)
    with closing(writer):
        steps = program_steps(rec, _the_block)
        next(steps)  # run.started; the block stands for the program
        try:
            yield rec
        except BaseException as exc:
            steps.throw(exc)  # run.failed for an error, then raised again
            raise
        with contextlib.suppress(StopIteration):
            steps.send(None)  # run.finished


def _the_block(rec: Recorder) -> Any:  # pragma: no cover - never called: the with block runs
    raise AssertionError("the recording's with block is its program")
