"""Test helpers for agentlog and for code built on it.

- :func:`assert_replays` — a recorded run as a regression test in one line;
- :mod:`agentlog.testing.fakes`: ``FakeLLM`` (a scripted model that counts its calls, or fails
  the test if called) and ``CountingTool``;
- :mod:`agentlog.testing.strategies`: hypothesis strategies for JSON values, states, JSON
  Patch op lists and event runs (needs the ``test`` extra: ``pip install 'agentlog[test]'``).

Importing this package needs nothing beyond agentlog itself; each helper module imports what
it needs when it is imported.
"""

from __future__ import annotations

from typing import Any

from .fakes import CountingTool, FakeLLM

__all__ = ["CountingTool", "FakeLLM", "assert_replays"]


def assert_replays(run: Any, program: Any) -> Any:
    """Strict replay of ``run`` with ``program`` must pass: a run as a regression test.

    Returns the :class:`~agentlog.ReplayResult`.

    Raises:
        AssertionError: naming the seq where the program left the recorded run, with both
            events and their structural diff.
    """
    from ..capture.replay import assert_replays as check
    return check(run, program)
