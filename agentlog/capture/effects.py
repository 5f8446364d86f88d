"""One implementation of a recorded call, driven synchronously or asynchronously.

A call that goes out (a model, a tool, an HTTP exchange) is written once, as a generator of
*steps*: it emits its request, looks for a recorded answer, and when it must go out live it
``yield``\\ s a :class:`Live` call and gets the result (or the exception) back at the
``yield``. :func:`run` makes the live call in the caller's thread; :func:`arun` awaits it
when it returns an awaitable. Everything else (the span, the events, the cost) is the same
code for ``rec.llm`` and ``await rec.allm``.

>>> def double(x):
...     result = yield Live(lambda: x * 2)
...     return result + 1
>>> run(double(20))
41
>>> import asyncio
>>> async def five():
...     return 5
>>> def ask():
...     return (yield Live(five))
>>> asyncio.run(arun(ask()))
5

Pure: no I/O of its own.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable, Generator
from typing import Any, TypeVar

__all__ = ["Live", "Opaque", "Steps", "arun", "inside_recorded_call", "run"]

T = TypeVar("T")


class Live:
    """A call to make live: ``fn(*args, **kwargs)``."""

    __slots__ = ("args", "fn", "kwargs")

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs


class Opaque(Live):
    """A live call whose answer is recorded, so what it does inside is not: an HTTP request a
    model call or a tool sends is not recorded again (on replay the answer is served and the
    call is not made, so its inside would be missing)."""

    __slots__ = ()


_opaque: contextvars.ContextVar[bool] = contextvars.ContextVar("agentlog_opaque", default=False)


def inside_recorded_call() -> bool:
    """True while an :class:`Opaque` call runs in this context (sync, or awaited in this task)."""
    return _opaque.get()


Steps = Generator[Live, Any, T]
"""A call's steps: yields :class:`Live` calls, gets their results, returns the call's value."""


def run(steps: Steps[T]) -> T:
    """Drive ``steps``, making each live call synchronously.

    A live call that returns an awaitable (a coroutine function given to a sync method) is
    refused with a :class:`TypeError` at the ``yield``, where the call's steps record it.
    """
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            live = steps.send(result) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result, error = None, None
        token = _opaque.set(True) if isinstance(live, Opaque) else None
        try:
            result = live.fn(*live.args, **live.kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the steps: a span closes, a failure is recorded
            error = exc
            continue
        finally:
            if token is not None:
                _opaque.reset(token)
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if callable(close):
                close()  # never awaited: say so here, not in a RuntimeWarning later
            result, error = None, TypeError(
                f"{getattr(live.fn, '__qualname__', live.fn)!r} returned an awaitable; "
                "use the async method (await rec.allm / rec.atool)")


async def arun(steps: Steps[T]) -> T:
    """Drive ``steps``, awaiting each live call that returns an awaitable."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            live = steps.send(result) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result, error = None, None
        token = _opaque.set(True) if isinstance(live, Opaque) else None
        try:
            result = live.fn(*live.args, **live.kwargs)
            if inspect.isawaitable(result):
                result = await result
        except BaseException as exc:  # noqa: BLE001 - as in run()
            error = exc
        finally:
            if token is not None:
                _opaque.reset(token)
