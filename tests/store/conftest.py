"""Fixtures for the store tests; helpers are in _store_helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from _store_helpers import FixedClock

from agentlog.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()
