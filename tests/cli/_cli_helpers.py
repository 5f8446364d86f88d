"""Shared by the CLI tests: the console script's path and the type of the ``cli`` fixture."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

#: The ``agentlog`` console script of this venv (installed by ``pip install -e .``).
AGENTLOG = Path(sys.executable).parent / "agentlog"

Cli = Callable[..., subprocess.CompletedProcess[str]]
