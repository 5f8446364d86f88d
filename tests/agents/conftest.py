"""Fixtures for the real-agent tests: a store and the loopback OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _server import LLMServer

import agentlog as al


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return al.Store(tmp_path / "store")


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as running:
        yield running


@pytest.fixture
def fresh_loop() -> Iterator[None]:
    """A new default event loop for ``Runner.run_sync`` (it keeps the thread's default loop)."""
    import asyncio

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        loop.close()


