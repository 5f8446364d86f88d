"""Fixtures for the runtime tests: a store, and a forkserver with agentlog imported."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import noop

import agentlog as al


@pytest.fixture
def store(tmp_path: Path) -> Any:
    return al.Store(tmp_path / "store")


@pytest.fixture(scope="session")
def children() -> Any:
    """A multiprocessing context whose children fork from a server that imported agentlog and
    loaded what a first run loads lazily: starting one costs milliseconds, so tests can start
    (and SIGKILL) dozens."""
    if sys.platform == "win32":  # pragma: no cover - no fork, no SIGKILL
        pytest.fail("the crash tests need a POSIX system")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["agentlog", "agentlog.capture.runtime", "agentlog.store",
                                "agentlog.folding", "agentlog.testing.fakes", "_runtime_helpers",
                                "_forkserver_warm"])
    # The server imports the preload list with the environment's sys.path, not this process's
    # (and skips what it cannot import): give it this folder while it starts.
    here = str(Path(__file__).parent)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = here + (os.pathsep + saved if saved else "")
    try:
        p = ctx.Process(target=noop)
        p.start()
        p.join()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    return ctx
