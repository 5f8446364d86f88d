"""Loading what ``replay`` and ``fork`` need from the command line: a program and an edit file.

A program is named ``MODULE:ATTR`` (``ATTR`` may be dotted), or ``example:NAME`` for one of the
bundled example agents. The attribute is used as the program if it takes a recorder; a class,
or a function that takes no argument, is called first and its result is the program (a
factory, such as one that builds an ``al.AgentProgram``).

An edit file is JSON: one edit or a list of them, each an object with a ``kind``::

    {"kind": "tool_result", "seq": 28, "result": {"value": 0.35}}     # or "payload": {...}
    {"kind": "llm_response", "seq": 34, "content": "new answer text"} # or "payload": {...}
    {"kind": "state_patch", "ops": [{"op": "add", "path": "/mode", "value": "careful"}]}
    {"kind": "input", "inputs": {"incident": "..."}}                   # with --at -1
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._words import with_article
from ._util import ExitCode, fail

if TYPE_CHECKING:
    from ..capture.fork import Edit
    from ..store.run import Run

__all__ = ["EDIT_HELP", "load_edits", "load_program"]

EDIT_HELP = """\b
The edit file is JSON: one edit, or a list of them.
  {"kind": "tool_result", "seq": 28, "result": {...}}
      the tool result recorded at seq 28 is served with this result
      ("payload": {...} merges keys over the whole recorded payload)
  {"kind": "llm_response", "seq": 34, "content": "text"}
      the model answer at seq 34 is served with this message text
      ("payload": {...} merges keys over the whole recorded payload)
  {"kind": "state_patch", "ops": [{"op": "add", "path": "/mode", "value": "x"}]}
      RFC 6902 ops on state["vars"] right after the cut
  {"kind": "input", "inputs": {...}}
      re-run the program on other inputs (needs --at -1)
The seq of a replaced answer must come after --at. Python's names for the
kinds (al.edit's replace_response, patch_state, replace_input) work too."""

_KINDS = ("tool_result", "llm_response", "state_patch", "input")
_TYPE_OF = {"tool_result": "tool.result", "llm_response": "llm.response"}
#: ``al.edit``'s names for the kinds (``replace_response``: a tool result or a model answer, by the seq's event).
_PYTHON_NAMES = {"replace_response": None, "patch_state": "state_patch", "replace_input": "input"}


def load_program(spec: str) -> Any:
    """The program named by ``MODULE:ATTR`` or ``example:NAME``; exit 2 with the reason if not."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        fail(ExitCode.BAD_INPUT, f"--program {spec!r}: expected MODULE:CALLABLE or example:NAME")
    if module_name == "example":
        from ..examples import EXAMPLES, program
        if attr not in EXAMPLES:
            fail(ExitCode.BAD_INPUT, f"--program {spec!r}: no example {attr!r}; the examples are "
                                     f"{', '.join(EXAMPLES)}")
        return program(attr)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like python -m: modules beside you import
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's module
        fail(ExitCode.BAD_INPUT, f"--program {spec!r}: cannot import {module_name}: "
                                 f"{type(exc).__name__}: {exc}")
    for part in attr.split("."):
        if not hasattr(target, part):
            fail(ExitCode.BAD_INPUT, f"--program {spec!r}: {module_name} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        fail(ExitCode.BAD_INPUT, f"--program {spec!r}: {attr} is not callable")
    if inspect.isclass(target) or _takes_nothing(target):
        try:
            target = target()
        except Exception as exc:  # noqa: BLE001
            fail(ExitCode.BAD_INPUT, f"--program {spec!r}: calling {attr}() to build the program "
                                     f"raised {type(exc).__name__}: {exc}")
        if not callable(target):
            fail(ExitCode.BAD_INPUT, f"--program {spec!r}: {attr}() returned {type(target).__name__}, "
                                     "not a program")
    return target


def _takes_nothing(fn: Any) -> bool:
    """True for a callable that can be called without arguments (a factory, not a program)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return not any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                   for p in params) and not any(p.kind is p.VAR_POSITIONAL for p in params)


def load_edits(path: str, run: Run, at: int) -> list[Edit]:
    """The edits in a JSON edit file (see :data:`EDIT_HELP`), checked against ``run``.

    Every problem exits 2 naming the file, the edit's index and the field.
    """
    file = Path(path).expanduser()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        fail(ExitCode.BAD_INPUT, f"--edit {path}: no such file")
    except (OSError, UnicodeDecodeError) as exc:
        fail(ExitCode.BAD_INPUT, f"--edit {path}: cannot read it ({exc})")
    except json.JSONDecodeError as exc:
        fail(ExitCode.BAD_INPUT, f"--edit {path}:{exc.lineno}: not JSON ({exc.msg})")
    if data == []:
        fail(ExitCode.BAD_INPUT, f"--edit {path}: no edits (an empty list); give one edit or a list "
                                 "of them, or leave --edit out")
    items = data if isinstance(data, list) else [data]
    return [_edit(item, f"--edit {path}" + (f" [{i}]" if isinstance(data, list) else ""), run, at)
            for i, item in enumerate(items)]


def _edit(item: Any, where: str, run: Run, at: int) -> Edit:
    from ..capture.fork import patch_state, replace_input, replace_response

    if not isinstance(item, Mapping):
        fail(ExitCode.BAD_INPUT, f"{where}: an edit is an object with a \"kind\", got "
                                 f"{type(item).__name__}")
    kind = item.get("kind")
    if isinstance(kind, str) and kind in _PYTHON_NAMES:
        kind = _PYTHON_NAMES[kind] or _answer_kind(item, run)
    if kind not in _KINDS:
        fail(ExitCode.BAD_INPUT, f"{where}: kind {item.get('kind')!r} is not one of {', '.join(_KINDS)} "
                                 f"(or {', '.join(_PYTHON_NAMES)})")
    if kind == "state_patch":
        ops = item.get("ops")
        if not isinstance(ops, list) or not all(isinstance(op, Mapping) and "op" in op and "path" in op
                                                for op in ops):
            fail(ExitCode.BAD_INPUT, f"{where}: field ops: a list of RFC 6902 operations "
                                     "({\"op\", \"path\", ...})")
        return patch_state(ops)
    if kind == "input":
        if "inputs" not in item:
            fail(ExitCode.BAD_INPUT, f"{where}: field inputs is missing")
        if at != -1:
            fail(ExitCode.BAD_INPUT, f"{where}: an input edit needs --at -1 (the inputs are "
                                     f"recorded at seq 0, which a fork at {at} keeps)")
        return replace_input(item["inputs"])
    seq = item.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        fail(ExitCode.BAD_INPUT, f"{where}: field seq: the seq of the {_TYPE_OF[kind]} to replace "
                                 f"(an integer), got {seq!r}")
    if not 0 <= seq < len(run):
        fail(ExitCode.NOT_FOUND, f"{where}: no such seq {seq} in run {run.id} (seq 0..{len(run) - 1})")
    if seq <= at:
        fail(ExitCode.BAD_INPUT, f"{where}: seq {seq} must be after the cut (--at {at}) and in "
                                 f"run {run.id} (seq {at + 1}..{len(run) - 1})")
    event = run.event(seq)
    if event.type != _TYPE_OF[kind]:
        fail(ExitCode.BAD_INPUT, f"{where}: run {run.id} seq {seq} is {with_article(event.type)}, not "
                                 f"{with_article(_TYPE_OF[kind])}")
    return replace_response(seq, _payload(item, kind, where, event.payload))


def _answer_kind(item: Mapping[str, Any], run: Run) -> str:
    """The kind a ``replace_response`` edit is: ``llm_response`` for a model answer at its seq,
    else ``tool_result`` (whose checks then say what is wrong with the seq)."""
    seq = item.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < len(run):
        return "tool_result"
    return "llm_response" if run.event(seq).type == "llm.response" else "tool_result"


def _payload(item: Mapping[str, Any], kind: str, where: str, recorded: Mapping[str, Any]) -> dict[str, Any]:
    if "payload" in item:
        if not isinstance(item["payload"], Mapping):
            fail(ExitCode.BAD_INPUT, f"{where}: field payload must be an object")
        return dict(item["payload"])
    if kind == "tool_result":
        if "result" not in item:
            fail(ExitCode.BAD_INPUT, f"{where}: give \"result\" (the new tool result) or \"payload\"")
        return {"result": item["result"]}
    content = item.get("content")
    if not isinstance(content, str):
        fail(ExitCode.BAD_INPUT, f"{where}: give \"content\" (the new answer text) or \"payload\"")
    message = recorded.get("message")
    base = dict(message) if isinstance(message, Mapping) else {"role": "assistant"}
    return {"message": {**base, "content": content}}
