"""The check that a run can be replayed or forked, for :func:`~agentlog.replay` and
:func:`~agentlog.fork` (and anything else that serves a program from a run)."""

from __future__ import annotations

from typing import Any

from ..errors import NotReplayableError

__all__ = ["require_replayable"]


def require_replayable(run: Any) -> None:
    """Raise if ``run`` holds no program's recorded answers (an import, an OTLP trace).

    Raises:
        NotReplayableError: naming the run and :attr:`~agentlog.Run.replayable_reason`.
    """
    reason = getattr(run, "replayable_reason", None)
    if reason is not None:
        raise NotReplayableError(run.id, reason)
