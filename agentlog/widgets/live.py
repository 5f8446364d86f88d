"""Live views: follow a run that another process (or this kernel, or the OTLP endpoint) is still
writing.

A :class:`Follower` polls :func:`agentlog.store.tail.read_new` (only what was added is read),
hands the new events to its view, and keeps a badge: "● live · N events" while the run is
``open``, "closed (finished) · N events" once it is not, and then stops. In a kernel it runs as
a task on the kernel's event loop (the cell returns at once; the view updates between cells and
while the kernel is idle); :meth:`Follower.tick` does one poll by hand (tests, scripts).

``Waterfall(run, live=True)``, ``Scrubber(run, live=True)`` and ``CostDashboard(run,
live=True)`` use it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ..store.tail import is_live, read_new
from .html import esc as _e

if TYPE_CHECKING:
    from ..events import Event
    from ..store.run import Run

__all__ = ["INTERVAL", "Follower", "badge_html"]

#: Seconds between two polls.
INTERVAL: Final = 1.0


def badge_html(run: Run) -> str:
    """The live badge of a run: live while ``open``, else how it was closed."""
    if is_live(run):
        return (f'<span class="al-badge al-live" style="color:#c62828">● live</span> '
                f'<span class="al-muted">{len(run):,} events so far</span>')
    return (f'<span class="al-badge al-muted">{_e(run.status)}</span> '
            f'<span class="al-muted">{len(run):,} events</span>')


class Follower:
    """Poll a run for new events and pass them to ``on_new``; keep ``badge`` (an ipywidgets
    ``HTML``, optional) up to date; stop once the run is closed.

    Args:
        run: the run to follow.
        on_new: called with the new events of a poll (never with an empty list).
        badge: a widget whose ``value`` shows :func:`badge_html`.
        interval: seconds between polls.
    """

    def __init__(self, run: Run, on_new: Callable[[list[Event]], None], *, badge: Any = None,
                 interval: float = INTERVAL) -> None:
        self.run = run
        self.on_new = on_new
        self.badge = badge
        self.interval = interval
        self.polls = 0
        self.seen = len(run)
        """Events this view has been given (several views may follow one run object)."""
        self._task: asyncio.Task[None] | None = None
        self._show()

    @property
    def live(self) -> bool:
        """True while the run is open."""
        return is_live(self.run)

    def tick(self) -> int:
        """One poll: read what was added, hand it on, update the badge. Returns how many events."""
        self.polls += 1
        read_new(self.run)
        n = len(self.run)
        new = list(self.run.iter_events(self.seen)) if n > self.seen else []
        self.seen = n
        if new:
            self.on_new(new)
        self._show()
        return len(new)

    def _show(self) -> None:
        if self.badge is not None:
            self.badge.value = badge_html(self.run)

    def start(self) -> None:
        """Poll every ``interval`` seconds on the running event loop (a kernel's), until the run
        closes or :meth:`stop`. Without a running loop nothing is scheduled (call :meth:`tick`)."""
        if self._task is not None or not self.live:
            return
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            return
        self._task = loop.create_task(self._loop())

    def stop(self) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _loop(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(self.interval)
                try:
                    self.tick()
                except Exception as exc:  # noqa: BLE001 - shown in the badge; the view stays
                    if self.badge is not None:
                        self.badge.value = f'<span class="al-bad">live updates stopped: {_e(exc)}</span>'
                    return
                if not self.live:
                    return
