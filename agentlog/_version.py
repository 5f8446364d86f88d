"""agentlog's version, in the core so that any layer can name it without importing the package
above every layer (``agentlog/__init__.py``)."""

from __future__ import annotations

from typing import Final

__all__ = ["__version__"]

__version__: Final = "0.1.0"
