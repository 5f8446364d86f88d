"""Names a package exports but imports only when first named (module ``__getattr__``, PEP 562)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: the name ``name`` is imported from
    ``package.<modules[name]>`` the first time it is looked up, then kept in the package's
    namespace (later lookups skip this function).

    >>> import agentlog.store
    >>> agentlog.store.VerifyReport.__module__
    'agentlog.store.verify'
    """
    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value
    return __getattr__
