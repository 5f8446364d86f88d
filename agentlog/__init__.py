"""agentlog: record, replay, fork and inspect AI-agent runs from an append-only event log.

>>> import agentlog as al
>>> al.canonical_json({"b": 1, "a": [True, None]})
'{"a":[true,null],"b":1}'

Names are imported on first use, so ``import agentlog`` stays fast and the pure core never
pulls in pyarrow, pandas or the widgets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> "module" (a submodule) or "module:attribute"
_EXPORTS: dict[str, str] = {
    # core
    "BlobRef": "agentlog.event:BlobRef",
    "Event": "agentlog.event:Event",
    "GENESIS": "agentlog.chain:GENESIS",
    "Problem": "agentlog.chain:Problem",
    "canonical_json": "agentlog.canonical:canonical_json",
    "chain_hash": "agentlog.chain:chain_hash",
    "errors": "agentlog.errors",
    "keys": "agentlog.keys",
    # record
    "pricing": "agentlog.record.pricing",
    # errors most users catch
    "AgentlogError": "agentlog.errors:AgentlogError",
    "CanonicalJSONError": "agentlog.errors:CanonicalJSONError",
    "PatchError": "agentlog.errors:PatchError",
    "RunLockedError": "agentlog.errors:RunLockedError",
    "RunNotFoundError": "agentlog.errors:RunNotFoundError",
    "StoreError": "agentlog.errors:StoreError",
    "UnknownModelWarning": "agentlog.errors:UnknownModelWarning",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from . import errors, keys
    from .canonical import canonical_json
    from .chain import GENESIS, Problem, chain_hash
    from .errors import (AgentlogError, CanonicalJSONError, PatchError, RunLockedError,
                         RunNotFoundError, StoreError, UnknownModelWarning)
    from .event import BlobRef, Event
    from .record import pricing


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'agentlog' has no attribute {name!r}")
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attr) if attr else module
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
