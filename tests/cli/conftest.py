"""Fixtures for the CLI tests: a fresh copy of the sample runs, and the real console script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _cli_helpers import AGENTLOG, Cli

import agentlog as al


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    """A fresh copy of the bundled sample runs; returns the store folder."""
    path = tmp_path / "store"
    al.examples.sample_store(copy_to=path)
    return path


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``cli(*args, cwd=None)``: run the console script, capture its output (never raises)."""
    assert AGENTLOG.is_file(), f"{AGENTLOG} is missing: pip install -e . installs the console script"
    env = {k: v for k, v in os.environ.items() if k != "AGENTLOG_STORE"}
    env["COLUMNS"] = "200"

    def run(*args: str | os.PathLike[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AGENTLOG), *map(str, args)], capture_output=True, text=True,
                              cwd=cwd or tmp_path, env=env, timeout=120, check=False)

    return run
