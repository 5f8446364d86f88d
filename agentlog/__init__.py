"""agentlog: record, replay, fork and inspect AI-agent runs from an append-only event log.

>>> import agentlog as al
>>> al.canonical_json({"b": 1, "a": [True, None]})
'{"a":[true,null],"b":1}'

Names are imported on first use, so ``import agentlog`` stays fast and the pure core never
pulls in pyarrow, pandas or the widgets.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import TYPE_CHECKING, Any

from . import accessors as _accessors
from ._version import __version__

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
    "fold": "agentlog.folding:fold",
    "keys": "agentlog.keys",
    # record, replay, fork
    "Divergence": "agentlog.capture.divergence:Divergence",
    "LLMCallError": "agentlog.capture.recorder:LLMCallError",
    "LLMResult": "agentlog.capture.providers:LLMResult",
    "Recorder": "agentlog.capture.recorder:Recorder",
    "ReplayResult": "agentlog.capture.replay:ReplayResult",
    "afork": "agentlog.capture.fork:afork",
    "areplay": "agentlog.capture.replay:areplay",
    "arecord": "agentlog.capture.session:arecord",
    "edit": "agentlog.edit",
    "fork": "agentlog.capture.fork:fork",
    "instrument": "agentlog.otel:instrument",
    "interop": "agentlog.interop",
    "otel": "agentlog.otel",
    "pricing": "agentlog.pricing",
    "record": "agentlog.capture.session:record",
    "recording": "agentlog.capture.session:recording",
    "replay": "agentlog.capture.replay:replay",
    "span": "agentlog.capture.recorder:span",
    "testing": "agentlog.testing",
    "tool": "agentlog.capture.recorder:tool",
    "transport": "agentlog.capture.transport",
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
    # tamper evidence: signed heads and proofs
    "SignedHead": "agentlog.proofs:SignedHead",
    "sign_head": "agentlog.store.heads:sign_head",
    "verify_proof": "agentlog.proofs:verify_proof",
    # analysis and display
    "RunDiff": "agentlog.analysis.rundiff:RunDiff",
    "diff": "agentlog.analysis.rundiff:diff",
    "show": "agentlog.widgets.tabs:show",
    "widgets": "agentlog.widgets",
    # fold: events -> state
    "DeterminismReport": "agentlog.folding:DeterminismReport",
    "Patch": "agentlog.folding:Patch",
    "ReducerError": "agentlog.errors:ReducerError",
    "ReducerRegistrationWarning": "agentlog.folding:ReducerRegistrationWarning",
    "Reducers": "agentlog.folding:Reducers",
    "SnapshotIndex": "agentlog.folding:SnapshotIndex",
    "State": "agentlog.folding:State",
    "apply_patch": "agentlog.folding:apply_patch",
    "check_determinism": "agentlog.folding:check_determinism",
    "diff_states": "agentlog.folding:diff_states",
    "reducer": "agentlog.folding:reducer",
    # errors most users catch
    "AgentlogError": "agentlog.errors:AgentlogError",
    "CanonicalJSONError": "agentlog.errors:CanonicalJSONError",
    "DivergenceError": "agentlog.errors:DivergenceError",
    "NotReplayableError": "agentlog.errors:NotReplayableError",
    "PatchError": "agentlog.errors:PatchError",
    "RunLockedError": "agentlog.errors:RunLockedError",
    "RunNotFoundError": "agentlog.errors:RunNotFoundError",
    "StoreError": "agentlog.errors:StoreError",
    "UnknownModelWarning": "agentlog.errors:UnknownModelWarning",
}

# Reachable as al.<name>, but not exported by ``from agentlog import *``: ``open`` would shadow
# the builtin.
_NOT_STARRED: frozenset[str] = frozenset({"open"})
# Old name -> new name: still resolves, with a DeprecationWarning.
_RENAMED: dict[str, str] = {"http": "transport"}

# Every name of _EXPORTS but those of _NOT_STARRED, sorted (tests/test_public_api.py checks it
# against tests/public_api.txt).
__all__ = [  # noqa: RUF022 - plainly sorted, as tests/public_api.txt
    "AgentProgram", "AgentlogError", "ApprovalError", "BlobRef", "BlobStore", "Budget",
    "CallModel", "CallTool", "CanonicalJSONError", "DeterminismReport", "Divergence",
    "DivergenceError", "Durability", "Emit", "Event", "Fact", "Finish", "GCReport", "GENESIS",
    "LLMCallError", "LLMResult", "NotReplayableError", "Patch", "PatchError", "Problem",
    "Recorder", "ReducerError", "ReducerRegistrationWarning", "Reducers", "ReplayResult",
    "RequestApproval", "Run", "RunDiff", "RunLockedError", "RunNotFoundError", "RunWriter",
    "SignedHead", "SnapshotIndex", "State", "Store", "StoreError", "TornWALWarning",
    "UnknownModelWarning", "VerifyReport", "__version__", "afork", "apply_patch", "approve", "arecord",
    "areplay",
    "canonical_json", "chain_hash", "check_determinism", "deny", "diff", "diff_states", "edit",
    "errors", "examples", "fold", "fork", "instrument", "interop", "keys", "otel", "pricing",
    "record", "recording", "reducer", "replay", "resume", "run_agent", "show", "sign_head",
    "span", "testing", "tool", "transport", "verify_proof", "widgets",
]

# --- methods the layers above attach to the store's classes (see agentlog.accessors) ----------
# The store is a plain handle of storage and state and imports neither analysis nor widgets;
# this package, above every layer and always imported before any agentlog.* module, names
# the functions, and the classes import them on first use.
_ANALYSIS = "agentlog.analysis"
_WIDGETS = "agentlog.widgets"
_ACCESSORS: dict[str, dict[str, str]] = {
    "Run": {
        "events": f"{_ANALYSIS}.tables:events",
        "events_expanded": f"{_ANALYSIS}.tables:events_expanded",
        "spans": f"{_ANALYSIS}.spans:spans",
        "llm_calls": f"{_ANALYSIS}.tables:llm_calls",
        "tool_calls": f"{_ANALYSIS}.tables:tool_calls",
        "cost": f"{_ANALYSIS}.cost:cost",
        "tokens_over_time": f"{_ANALYSIS}.tables:tokens_over_time",
        "summary": f"{_ANALYSIS}.tables:summary",
        "recompute_cost": f"{_ANALYSIS}.cost:recompute_cost",
        "waterfall": f"{_WIDGETS}.accessors:waterfall",
        "scrub": f"{_WIDGETS}.accessors:scrub",
        "fork_panel": f"{_WIDGETS}.accessors:fork_panel",
        "diff_view": f"{_WIDGETS}.accessors:diff_view",
        "cost_dashboard": f"{_WIDGETS}.accessors:cost_dashboard",
        "show": f"{_WIDGETS}.accessors:show",
        "_repr_html_": f"{_WIDGETS}.html:run_repr",
    },
    "Store": {
        "runs": f"{_ANALYSIS}.storewide:runs",
        "events": f"{_ANALYSIS}.storewide:events",
        "cost": f"{_ANALYSIS}.storewide:cost",
        "sql": f"{_ANALYSIS}.storewide:sql",
        "duckdb": f"{_ANALYSIS}.storewide:duckdb",
        "to_dask": f"{_ANALYSIS}.fleet:to_dask",
        "cost_dashboard": f"{_WIDGETS}.accessors:cost_dashboard",
        "_repr_html_": f"{_WIDGETS}.html:store_repr",
    },
    "VerifyReport": {"_repr_html_": f"{_WIDGETS}.html:verify_repr"},
    "RunDiff": {"_repr_html_": f"{_WIDGETS}.html:diff_repr"},
}
_PROPERTIES: frozenset[tuple[str, str]] = frozenset({("Run", "events")})

for _owner, _names in _ACCESSORS.items():
    for _name, _target in _names.items():
        _accessors.register(_owner, _name, _target,
                            kind="property" if (_owner, _name) in _PROPERTIES else "method")
del _owner, _names, _name, _target

if TYPE_CHECKING:  # pragma: no cover
    from . import edit, errors, examples, interop, keys, otel, pricing, testing, widgets
    from .analysis.rundiff import RunDiff, diff
    from .canonical import canonical_json
    from .capture import transport
    from .capture.divergence import Divergence
    from .capture.fork import afork, fork
    from .capture.providers import LLMResult
    from .capture.recorder import LLMCallError, Recorder, span, tool
    from .capture.replay import ReplayResult, areplay, replay
    from .capture.runtime import (
        AgentProgram,
        Budget,
        CallModel,
        CallTool,
        Emit,
        Fact,
        Finish,
        RequestApproval,
        approve,
        deny,
        run_agent,
    )
    from .capture.runtime.resume import resume
    from .capture.session import arecord, record, recording
    from .chain import GENESIS, Problem, chain_hash
    from .errors import (
        AgentlogError,
        ApprovalError,
        CanonicalJSONError,
        DivergenceError,
        NotReplayableError,
        PatchError,
        ReducerError,
        RunLockedError,
        RunNotFoundError,
        StoreError,
        UnknownModelWarning,
    )
    from .events import BlobRef, Event
    from .folding import (
        DeterminismReport,
        Patch,
        ReducerRegistrationWarning,
        Reducers,
        SnapshotIndex,
        State,
        apply_patch,
        check_determinism,
        diff_states,
        fold,
        reducer,
    )
    from .otel import instrument
    from .proofs import SignedHead, verify_proof
    from .store import (
        BlobStore,
        Durability,
        GCReport,
        Run,
        RunWriter,
        Store,
        TornWALWarning,
        VerifyReport,
        open,
    )
    from .store.heads import sign_head
    from .widgets.tabs import show


def _patch_html(patch: Any) -> str | None:
    from .widgets.html import patch_repr
    return patch_repr(patch)


def _show_patches_as_html() -> None:
    """In IPython, draw a bare :class:`~agentlog.folding.Patch` with the views' HTML table: the
    fold itself renders no HTML, and nothing is imported until a patch is shown."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        formatter = shell.display_formatter.formatters["text/html"]
        formatter.for_type_by_name("agentlog.folding.patch", "Patch", _patch_html)


_show_patches_as_html()


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        new = _RENAMED[name]
        warnings.warn(f"al.{name} is now al.{new}", DeprecationWarning, stacklevel=2)
        return __getattr__(new)
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
