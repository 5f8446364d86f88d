"""Fixtures for the live OpenTelemetry tests: a store, and al.instrument() turned on for one
test and off after it (the instrumentors are process-wide)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentlog as al


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return al.Store(tmp_path / "store")
