"""Fixtures for the analysis tests: a store, hand-built runs, a recorded run and its fork."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from _analysis_runs import Tools, answer, golden_runs, make_agent, record_agent, seq_of, timed_run

import agentlog as al
from agentlog.errors import UnknownModelWarning
from agentlog.testing.fakes import FakeLLM


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return al.Store(tmp_path / "store")


@pytest.fixture
def timed(store: Any) -> Any:
    return timed_run(store)


@pytest.fixture
def golden(store: Any) -> tuple[Any, Any]:
    return golden_runs(store)


@pytest.fixture
def agent_run(store: Any) -> Any:
    return record_agent(store)


@pytest.fixture
def agent_fork(agent_run: Any) -> Any:
    """A fork just before the metric's result, with the metric replaced: the model then says
    wait, so no restart."""
    metric = seq_of(agent_run, "tool.result", name="get_metric")
    program = make_agent(Tools(cpu=0.2), FakeLLM(answer, cached=5), FakeLLM("agreed"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownModelWarning)
        return al.fork(agent_run, at=metric - 1, program=program,
                       edit=al.edit.replace_response(metric, {"result": 0.2}))
