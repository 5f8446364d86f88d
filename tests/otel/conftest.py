"""Fixtures for the live OpenTelemetry tests: a store, and al.instrument() turned on for one
test and off after it (the instrumentors are process-wide)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentlog as al


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return al.Store(tmp_path / "store")




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
