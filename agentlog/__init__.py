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
    "BlobRef": "agentlog.events:BlobRef",
    "Event": "agentlog.events:Event",
    "GENESIS": "agentlog.chain:GENESIS",
    "Problem": "agentlog.chain:Problem",
    "canonical_json": "agentlog.canonical:canonical_json",
    "chain_hash": "agentlog.chain:chain_hash",
    "errors": "agentlog.errors",
    "fold": "agentlog.fold",
    "keys": "agentlog.keys",
    # record, replay, fork
    "Divergence": "agentlog.capture.divergence:Divergence",
    "LLMCallError": "agentlog.capture.recorder:LLMCallError",
    "LLMResult": "agentlog.capture.llm:LLMResult",
    "Recorder": "agentlog.capture.recorder:Recorder",
    "ReplayResult": "agentlog.capture.replay:ReplayResult",
    "arecord": "agentlog.capture.session:arecord",
    "edit": "agentlog.edit",
    "fork": "agentlog.capture.fork:fork",
    "http": "agentlog.capture.transport",
    "interop": "agentlog.interop",
    "pricing": "agentlog.pricing",
    "record": "agentlog.capture.session:record",
    "recording": "agentlog.capture.session:recording",
    "replay": "agentlog.capture.replay:replay",
    "span": "agentlog.capture.recorder:span",
    "testing": "agentlog.testing",
    "tool": "agentlog.capture.recorder:tool",
    # the loop runtime and its example agents
    "AgentProgram": "agentlog.capture.runtime:AgentProgram",
    "ApprovalError": "agentlog.errors:ApprovalError",
    "Budget": "agentlog.capture.runtime:Budget",
    "CallModel": "agentlog.capture.runtime:CallModel",
    "CallTool": "agentlog.capture.runtime:CallTool",
    "Emit": "agentlog.capture.runtime:Emit",
    "Fact": "agentlog.capture.runtime:Fact",
    "Finish": "agentlog.capture.runtime:Finish",
    "RequestApproval": "agentlog.capture.runtime:RequestApproval",
    "approve": "agentlog.capture.runtime:approve",
    "deny": "agentlog.capture.runtime:deny",
    "examples": "agentlog.examples",
    "resume": "agentlog.capture.runtime:resume",
    "run_agent": "agentlog.capture.runtime:run_agent",
    # store
    "BlobStore": "agentlog.store:BlobStore",
    "Durability": "agentlog.store:Durability",
    "GCReport": "agentlog.store:GCReport",
    "Run": "agentlog.store:Run",
    "RunWriter": "agentlog.store:RunWriter",
    "Store": "agentlog.store:Store",
    "TornWALWarning": "agentlog.store:TornWALWarning",
    "VerifyReport": "agentlog.store:VerifyReport",
    "open": "agentlog.store:open",
    # analysis and display
    "RunDiff": "agentlog.analysis.rundiff:RunDiff",
    "diff": "agentlog.analysis.rundiff:diff",
    "show": "agentlog.widgets.tabs:show",
    "widgets": "agentlog.widgets",
    # fold: events -> state
    "DeterminismReport": "agentlog.fold:DeterminismReport",
    "Patch": "agentlog.fold:Patch",
    "ReducerError": "agentlog.errors:ReducerError",
    "ReducerRegistrationWarning": "agentlog.fold:ReducerRegistrationWarning",
    "Reducers": "agentlog.fold:Reducers",
    "SnapshotIndex": "agentlog.fold:SnapshotIndex",
    "State": "agentlog.fold:State",
    "apply_patch": "agentlog.fold:apply_patch",
    "check_determinism": "agentlog.fold:check_determinism",
    "diff_states": "agentlog.fold:diff_states",
    "reducer": "agentlog.fold:reducer",
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
    from . import errors, fold, keys
    from .canonical import canonical_json
    from .chain import GENESIS, Problem, chain_hash
    from .errors import (AgentlogError, CanonicalJSONError, PatchError, RunLockedError,
                         RunNotFoundError, StoreError, UnknownModelWarning)
    from .events import BlobRef, Event
    from .errors import ReducerError
    from .fold import (DeterminismReport, Patch, ReducerRegistrationWarning, Reducers,
                       SnapshotIndex, State, apply_patch, check_determinism, diff_states, reducer)
    from . import edit, interop, testing
    from . import pricing
    from .capture import transport as http
    from .capture.divergence import Divergence
    from .capture.fork import fork
    from .capture.llm import LLMResult
    from .capture.recorder import LLMCallError, Recorder, span, tool
    from .capture.replay import ReplayResult, replay
    from .capture.session import arecord, record, recording
    from . import examples
    from .capture.runtime import (AgentProgram, Budget, CallModel, CallTool, Emit, Fact, Finish,
                                  RequestApproval, approve, deny, resume, run_agent)
    from .errors import ApprovalError
    from .store import (BlobStore, Durability, GCReport, Run, RunWriter, Store, TornWALWarning,
                        VerifyReport, open)
    from . import widgets
    from .analysis.rundiff import RunDiff, diff
    from .widgets.tabs import show


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
