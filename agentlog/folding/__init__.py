"""The fold engine: the pure core that turns events into state.

- :mod:`~agentlog.folding.persistent`: ``PMap`` and ``PVector``, the persistent map and vector
  a state is made of (pyrsistent's API; one shape per content; nodes loaded on demand);
- :mod:`~agentlog.folding.values`: ``State``, ``freeze``/``thaw``, JSON equality;
- :mod:`~agentlog.folding.pointer` and :mod:`~agentlog.folding.patch`: RFC 6901 pointers, RFC 6902
  ``apply_patch`` on persistent states, the ``Patch`` value (RFC 6902 ops, each ``Change``
  keeping the value it overwrote beside the op);
- :mod:`~agentlog.folding.diff`: ``diff_states``;
- :mod:`~agentlog.folding.reducers`: ``Reducers``, ``@reducer`` and the default projection;
- :mod:`~agentlog.folding.engine`: ``fold`` and ``SnapshotIndex``;
- :mod:`~agentlog.folding.determinism`: ``check_determinism``.

Pure: no I/O, no clock, and no pyarrow, pandas or widgets (a test checks the imports).

>>> from agentlog.folding import apply_patch, diff_states, freeze
>>> a = freeze({"plan": []})
>>> b = apply_patch(a, [{"op": "add", "path": "/plan/-", "value": "look"}])
>>> print(diff_states(a, b))
+ /plan/- = "look"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_getattr
from .engine import DEFAULT_EVERY, EventsFn, EventSource, SnapshotIndex, default_every, fold
from .patch import NO_VALUE, Change, Patch, apply_patch
from .persistent import PMap, PVector, pmap, pvector
from .pointer import escape_token, format_pointer, parse_pointer
from .reducers import INITIAL, Reducer, ReducerRegistrationWarning, Reducers, reducer
from .values import State, freeze, json_equal, same_value, thaw

if TYPE_CHECKING:  # pragma: no cover
    from .determinism import DeterminismReport, check_determinism
    from .diff import diff_states

__all__ = [
    "DEFAULT_EVERY",
    "INITIAL",
    "NO_VALUE",
    "Change",
    "DeterminismReport",
    "EventSource",
    "EventsFn",
    "PMap",
    "PVector",
    "Patch",
    "Reducer",
    "ReducerRegistrationWarning",
    "Reducers",
    "SnapshotIndex",
    "State",
    "apply_patch",
    "check_determinism",
    "default_every",
    "diff_states",
    "escape_token",
    "fold",
    "format_pointer",
    "freeze",
    "json_equal",
    "parse_pointer",
    "pmap",
    "pvector",
    "reducer",
    "same_value",
    "thaw",
]

# Comparing states and checking determinism are imported when first named: folding a run (a
# resume, state_at) needs neither.
_LAZY: dict[str, str] = {"DeterminismReport": "determinism", "check_determinism": "determinism",
                         "diff_states": "diff"}

__getattr__ = lazy_getattr(__name__, _LAZY)
