"""Fixtures for the interop tests: stores, a recorded run with a blob, and its fork.

Imported by each test module (not a conftest.py: with --doctest-modules, conftest.py files of
sibling test folders collide on the module name `conftest`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _interop_programs import fork, record

import agentlog as al

__all__ = ["forked", "other", "run", "store"]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return al.Store(tmp_path / "store")


@pytest.fixture
def other(tmp_path: Path) -> Any:
    """A second, empty store to import into."""
    return al.Store(tmp_path / "other")


@pytest.fixture
def run(store: Any) -> Any:
    return record(store)


@pytest.fixture
def forked(run: Any) -> Any:
    return fork(run)

