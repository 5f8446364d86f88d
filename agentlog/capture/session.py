"""Recording a program: ``al.record(program)`` and ``with al.recording() as rec:``.

A recorded program's run starts with ``run.started`` (its inputs) and ends with
``run.finished`` (its result) or ``run.failed`` (the error, which is raised again with a note
naming the run). Replay and forks drive a program the same way (:func:`drive`), so the events
they compare line up. A program may also stop without finishing, by raising :class:`Stopped`
(the loop runtime does, to wait for a person's decision): the run is closed with the stop's
status and can be resumed later.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import DivergenceError
from ..events import RUN_FAILED, RUN_FINISHED, RUN_STARTED
from .recorder import Recorder, activate
from .sinks import WriterSink

__all__ = ["Stopped", "arecord", "drive", "program_reducers", "record", "recording", "resolve_store"]

Program = Callable[[Recorder], Any]


class Stopped(Exception):
    """Raised by a program to stop without finishing: no ``run.finished``, and the run is closed
    with ``status`` (``waiting`` for a decision, ``budget_exceeded``), to be resumed later.

    ``record``, ``replay`` and ``fork`` treat it as a clean end, not a failure.
    """

    def __init__(self, status: str, reason: str = "") -> None:
        self.status, self.reason = status, reason
        super().__init__(f"stopped ({status})" + (f": {reason}" if reason else ""))


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


def _failed(rec: Recorder, exc: BaseException) -> None:
    rec.emit(RUN_FAILED, {"error": f"{type(exc).__name__}: {exc}", "type": type(exc).__name__})


def drive(rec: Recorder, program: Program) -> Any:
    """Run ``program(rec)`` between ``run.started`` and ``run.finished`` / ``run.failed``."""
    with activate(rec):
        rec.emit(RUN_STARTED, {"inputs": rec.inputs})
        try:
            result = program(rec)
        except (DivergenceError, Stopped):
            raise
        except Exception as exc:
            _failed(rec, exc)
            raise
        rec.emit(RUN_FINISHED, {"result": result})
    return result


async def adrive(rec: Recorder, program: Callable[[Recorder], Any]) -> Any:
    """:func:`drive` for a coroutine function."""
    with activate(rec):
        rec.emit(RUN_STARTED, {"inputs": rec.inputs})
        try:
            result = await program(rec)
        except (DivergenceError, Stopped):
            raise
        except Exception as exc:
            _failed(rec, exc)
            raise
        rec.emit(RUN_FINISHED, {"result": result})
    return result


def _writer(store: Any, name: str | None, program: Any, tags: Sequence[str] | Mapping[str, Any] | None,
            clock: Callable[[], float] | None, run_id: str | None) -> Any:
    return resolve_store(store).create_run(name=name or getattr(program, "__name__", "run"),
                                           tags=tags, clock=clock, run_id=run_id)


def _close(writer: Any, exc: BaseException | None) -> None:
    if exc is not None:
        exc.add_note(f"agentlog: recorded as run {writer.id}")
    writer.close(status="failed" if exc is not None else "finished")


@contextlib.contextmanager
def _closing(writer: Any) -> Iterator[None]:
    """Close the run the way its program ended: stopped (a pause, not an error), failed (the
    error goes on, with a note naming the run) or finished."""
    try:
        yield
    except Stopped as stop:
        writer.close(status=stop.status)
        return
    except BaseException as exc:
        _close(writer, exc)
        raise
    _close(writer, None)


def _recorder(writer: Any, program: Any, inputs: Any, reducers: Any,
              clock: Callable[[], float] | None) -> Recorder:
    return Recorder(WriterSink(writer), inputs=inputs, reducers=program_reducers(program, reducers),
                    clock=clock or _time())


def record(program: Program, *, store: Any = None, name: str | None = None, inputs: Any = None,
           tags: Sequence[str] | Mapping[str, Any] | None = None,
           clock: Callable[[], float] | None = None, run_id: str | None = None,
           reducers: Any = None) -> Any:
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

    Returns:
        The recorded :class:`~agentlog.Run` (closed with the status of a :class:`Stopped`, or
        ``finished``).

    Raises:
        Whatever the program raised, after ``run.failed`` was recorded (the error carries a note
        naming the run).
    """
    if inspect.iscoroutinefunction(program):
        raise TypeError("program is a coroutine function; use `await al.arecord(program, ...)`")
    writer = _writer(store, name, program, tags, clock, run_id)
    with _closing(writer):
        drive(_recorder(writer, program, inputs, reducers, clock), program)
    return writer.run


async def arecord(program: Callable[[Recorder], Any], *, store: Any = None, name: str | None = None,
                  inputs: Any = None, tags: Sequence[str] | Mapping[str, Any] | None = None,
                  clock: Callable[[], float] | None = None, run_id: str | None = None,
                  reducers: Any = None) -> Any:
    """:func:`record` for a coroutine function ``async def program(rec)``."""
    writer = _writer(store, name, program, tags, clock, run_id)
    with _closing(writer):
        await adrive(_recorder(writer, program, inputs, reducers, clock), program)
    return writer.run


@contextlib.contextmanager
def recording(*, store: Any = None, name: str = "run", inputs: Any = None,
              tags: Sequence[str] | Mapping[str, Any] | None = None,
              clock: Callable[[], float] | None = None, run_id: str | None = None,
              reducers: Any = None) -> Iterator[Recorder]:
    """Record the code inside a ``with`` block; the recorder is the ``as`` target.

    ``rec.run`` is not needed: after the block, ``store.run(rec.run_id)`` opens the run.

    >>> import agentlog as al, tempfile
    >>> with al.recording(store=tempfile.mkdtemp(), name="notes") as rec:  # doctest: +SKIP
    ...     rec.emit("note", {"text": "hello"})
    """
    writer = _writer(store, name, None, tags, clock, run_id)
    rec = Recorder(WriterSink(writer), inputs=inputs, reducers=reducers, clock=clock or _time())
    with activate(rec):
        rec.emit(RUN_STARTED, {"inputs": inputs})
        try:
            yield rec
        except BaseException as exc:
            _failed(rec, exc)
            _close(writer, exc)
            raise
        rec.emit(RUN_FINISHED, {"result": None})
    _close(writer, None)


def _time() -> Callable[[], float]:
    import time
    return time.time
