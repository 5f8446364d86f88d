"""The example agents' fixtures: small files under ``agentlog/examples/data/``, read as package
data (so they work from a wheel as well as from a checkout)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

__all__ = ["read_json", "read_lines", "read_text", "texts"]


def _file(path: str) -> Any:
    return resources.files("agentlog.examples").joinpath("data", *path.split("/"))


@functools.cache
def read_text(path: str) -> str:
    """A fixture file's text, e.g. ``read_text("sre/runbooks/orders-error-spike.md")``."""
    return str(_file(path).read_text(encoding="utf-8"))


def read_json(path: str) -> Any:
    """A fixture file parsed as JSON (a fresh copy each time)."""
    return json.loads(read_text(path))


def read_lines(path: str) -> list[str]:
    """The non-empty lines of a fixture file."""
    return [line for line in read_text(path).splitlines() if line.strip()]


def texts(folder: str) -> list[tuple[str, str]]:
    """``(name, text)`` of every file in a fixture folder, by name."""
    names = sorted(entry.name for entry in _file(folder).iterdir() if entry.is_file())
    return [(name, read_text(f"{folder}/{name}")) for name in names]
