"""The edits a fork can apply at its cut (``al.fork(run, at, program=..., edit=...)``).

- :func:`replace_response` — serve the answer recorded at ``seq`` changed;
- :func:`patch_state` — RFC 6902 ops on ``state["vars"]`` at the cut;
- :func:`replace_input` — re-run the program on other inputs (``at=-1``).

>>> import agentlog as al
>>> al.edit.patch_state([{"op": "add", "path": "/mode", "value": "careful"}]).describe()
{'edit': 'patch_state', 'ops': [{'op': 'add', 'path': '/mode', 'value': 'careful'}]}
"""

from __future__ import annotations

from .capture.fork import (
    Edit,
    PatchState,
    ReplaceInput,
    ReplaceResponse,
    patch_state,
    replace_input,
    replace_response,
)

__all__ = ["Edit", "PatchState", "ReplaceInput", "ReplaceResponse", "patch_state", "replace_input",
           "replace_response"]
