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
