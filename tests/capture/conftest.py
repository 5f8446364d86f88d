"""Fixtures for the recorder tests: a store, and one recorded triage run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _record_programs import Tools, decide, make_triage

import agentlog as al
from agentlog.testing.fakes import FakeLLM


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return al.Store(tmp_path / "store")


@pytest.fixture
def recorded(store: Any) -> tuple[Any, Tools, FakeLLM]:
    tools, model = Tools(), FakeLLM(decide)
    run = al.record(make_triage(tools, model), store=store, name="triage", inputs={"service": "api"})
    return run, tools, model
