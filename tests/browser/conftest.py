"""Browser-test fixtures: JupyterLab on a copy of the notebooks, Debian's Chromium via Playwright.

Every test here is marked ``browser``. Screenshots go to ``$SHOTS_DIR`` (default
``build/shots``), which CI keeps as artifacts.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nbhelpers import CHROMIUM, CHROMIUM_ARGS, ROOT_FLAG, TOKEN, free_port, serve

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def nb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``notebooks/`` beside a copy of the sample runs: JupyterLab's autosave and the
    notebooks' forks must never write into the repo."""
    d = tmp_path_factory.mktemp("nbs")
    shutil.copytree(ROOT / "notebooks", d, dirs_exist_ok=True)
    return d


@pytest.fixture(scope="session")
def lab(nb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], str]]:
    """A JupyterLab server on ``nb_dir``; yields ``url(notebook_name)``."""
    cfg = tmp_path_factory.mktemp("lab")
    settings = {"notebook-extension/tracker": {"windowingMode": "none"},  # attach every cell
                "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}
    for name, value in settings.items():
        f = cfg / "settings/@jupyterlab" / f"{name}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(value))
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(cfg / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(cfg / "ws"), JUPYTER_RUNTIME_DIR=str(cfg / "rt"),
               AGENTLOG_STORE=str(nb_dir / "agentlog-runs"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={nb_dir}",
           "--LabApp.expose_app_in_browser=True", *ROOT_FLAG]
    with serve(cmd, f"{base}/api/status?token={TOKEN}", cfg / "server.log", env):
        yield lambda nb: f"{base}/lab/tree/{nb}?token={TOKEN}&reset"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless. Never ``playwright install``: it needs the open internet."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh 1280x1000 page; actions and ``expect`` wait up to 30 s (slow CI)."""
    from playwright.sync_api import expect
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    expect.set_options(timeout=30_000)
    yield pg
    ctx.close()


@pytest.fixture(scope="session")
def shots() -> Path:
    """Where screenshots go (kept by CI as artifacts)."""
    d = Path(os.environ.get("SHOTS_DIR", ROOT / "build/shots"))
    d.mkdir(parents=True, exist_ok=True)
    return d
