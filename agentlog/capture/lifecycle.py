"""One run lifecycle: start, finish, fail, interrupt, stop for a decision.

Every way a program runs into a new or reopened run (``al.record``, ``al.arecord``,
``al.recording``, ``al.run_agent`` / ``al.resume``, ``al.fork`` and permissive ``al.replay``)
goes through :func:`program_steps` (the events) and :func:`closing` (the run's status), so the
same cause ends a run the same way everywhere:

=============================  ==================================  =====================
how the program ended          last event                          ``run.status``
=============================  ==================================  =====================
returned                       ``run.finished`` (the result)        ``finished``
raised an exception            ``run.failed`` (the error); raised   ``failed``
                               again, with a note naming the run
raised :class:`Stopped`        none (it can be resumed)             the stop's status
                                                                    (``waiting``,
                                                                    ``budget_exceeded``)
Ctrl-C, task cancelled, exit   none; open spans end                 ``interrupted``
(any other ``BaseException``)  ``interrupted`` (resumable)
diverged from its recorded     none (still inside the recorded      ``failed``
run (a fork's prefix)          prefix, nothing of its own)
=============================  ==================================  =====================

The events are written as steps (:mod:`agentlog.capture.effects`): the program itself is the
one live call, made synchronously by :func:`drive` or awaited by :func:`adrive`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import DivergenceError
from ..events import RunFailed, RunFinished, RunStarted
from .effects import Live, Steps, arun, run
from .httpx_hook import install
from .recorder import Recorder, activate, error_text

__all__ = ["Stopped", "adrive", "closing", "drive", "program_steps", "start", "status_of"]

Program = Callable[[Recorder], Any]


class Stopped(Exception):
    """Raised by a program to stop without finishing: no ``run.finished``, and the run is closed
    with ``status`` (``waiting`` for a decision, ``budget_exceeded``), to be resumed later.

    ``record``, ``replay`` and ``fork`` treat it as a clean end, not a failure.
    """

    def __init__(self, status: str, reason: str = "") -> None:
        self.status, self.reason = status, reason
        super().__init__(f"stopped ({status})" + (f": {reason}" if reason else ""))


def status_of(exc: BaseException | None) -> str:
    """The status a run is closed with when its program ended with ``exc`` (``None``: returned).

    >>> status_of(None), status_of(ValueError()), status_of(KeyboardInterrupt())
    ('finished', 'failed', 'interrupted')
    >>> status_of(Stopped("waiting"))
    'waiting'
    """
    if exc is None:
        return "finished"
    if isinstance(exc, Stopped):
        return exc.status
    return "failed" if isinstance(exc, Exception) else "interrupted"


def start(rec: Recorder) -> None:
    """Begin a run: ``run.started`` with the recorder's inputs."""
    rec.emit(RunStarted(inputs=rec.inputs))


def program_steps(rec: Recorder, program: Program, *,
                  begin: Callable[[], None] | None = None) -> Steps[Any]:
    """The events of one session of ``program``: ``begin`` (default :func:`start`), the program
    (the one live call), then ``run.finished``, or ``run.failed`` if it raised an exception."""
    if rec.capture_http:
        install()  # once per process: every httpx request in the program goes through rec
    with activate(rec):
        (begin or (lambda: start(rec)))()
        try:
            result = yield Live(program, rec)
        except (DivergenceError, Stopped):
            raise
        except Exception as exc:
            rec.emit(RunFailed(error=error_text(exc), type=type(exc).__name__))
            raise
        rec.emit(RunFinished(result=result))
    return result


def drive(rec: Recorder, program: Program, *, begin: Callable[[], None] | None = None) -> Any:
    """Run ``program(rec)`` between ``run.started`` and ``run.finished`` / ``run.failed``."""
    return run(program_steps(rec, program, begin=begin))


async def adrive(rec: Recorder, program: Program, *, begin: Callable[[], None] | None = None) -> Any:
    """:func:`drive` for a coroutine function ``async def program(rec)``."""
    return await arun(program_steps(rec, program, begin=begin))


@contextlib.contextmanager
def closing(writer: Any, *, what: str = "recorded as run") -> Iterator[None]:
    """Close ``writer``'s run with the status of how the block ended (:func:`status_of`).

    A :class:`Stopped` ends the block cleanly (it is not raised again); anything else is
    raised again, an error with a note ``"agentlog: <what> <run id>"``.
    """
    try:
        yield
    except Stopped as stop:
        writer.close(status=stop.status)
        return
    except BaseException as exc:
        writer.close(status=status_of(exc))
        if isinstance(exc, Exception):
            exc.add_note(f"agentlog: {what} {writer.id}")
        raise
    writer.close(status="finished")
