"""Suite-wide ordering: the real-browser tests run last.

Playwright's sync API runs an asyncio loop in the main thread while a browser is open, so any
later test that calls ``asyncio.run`` would fail; and the fast tests report first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: "/tests/browser/" in str(item.fspath))


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The file descriptors the WAL fsyncs, in order, from now on (each fsync still made):
    ``os.fsync`` and ``os.fdatasync`` alike (a durable WAL commits its lines with the latter)."""
    from agentlog.store import wal as wal_module

    synced: list[int] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(wal_module.os, name)
        monkeypatch.setattr(wal_module.os, name, lambda fd, real=real: (synced.append(fd), real(fd))[1])
    return synced


@pytest.fixture
def no_background_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """No write or fsync by the writers' background thread (``HOLD_MS`` after lines were held
    or written unsynced): what a test counts or checks before then cannot be changed by it on
    a loaded machine. The tests of that thread do not use this."""
    from agentlog.store import writer

    monkeypatch.setattr(writer._FLUSHER, "due", lambda w: None)


@pytest.fixture
def instrumented() -> Iterator[Any]:
    """al.instrument() with the OpenAI and Agents SDK instrumentors, off after the test."""
    import agentlog as al

    handle = al.instrument(instrumentors=["openinference-instrumentation-openai",
                                          "openinference-instrumentation-openai-agents"])
    try:
        yield handle
    finally:
        handle.uninstrument()


@pytest.fixture
def fresh_loop() -> Iterator[None]:
    """A new default event loop for ``Runner.run_sync``: the Agents SDK keeps the thread's
    default loop between runs and shuts its async generators down after each, so a second
    run on the same loop warns (a ResourceWarning, an error here) about httpx's auth flow."""
    import asyncio

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        loop.close()
