"""No payload key of an agentlog event is spelled by hand anywhere in the package.

Events are built from the body classes of :mod:`agentlog.events` and read through
``X.of(event)`` or ``X.K.<field>``; this test walks the modules' syntax trees and fails on
``payload["key"]``, ``payload.get("key")`` (also through a name bound to a ``.payload``) and on
dict literals handed to ``emit`` or ``Fact`` or bound to a name ``payload``. Every module is
walked but the vocabulary itself and the few listed in ``EXEMPT``, each with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentlog

ROOT = Path(agentlog.__file__).parent
#: Modules whose ``payload`` is not an agentlog event's payload, or that build raw events on purpose.
EXEMPT = {
    "interop/drangue.py": "reads drangue's own events, whose payload keys are drangue's format",
    "store/payload.py": "'$blob' is the storage encoding of a blob reference, below the vocabulary",
    "testing/strategies.py": "generates raw events for property tests, some in the old and partial "
                             "shapes that logs of older versions and imports hold",
}
MODULES = sorted(p for p in ROOT.rglob("*.py")
                 if p.relative_to(ROOT).parts[0] != "events" and str(p.relative_to(ROOT)) not in EXEMPT)
BUILDERS = {"emit", "Fact"}


def _is_payload(node: ast.AST, aliases: set[str]) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "payload":
        return True
    return isinstance(node, ast.Name) and (node.id == "payload" or node.id in aliases)


def _text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _aliases(tree: ast.AST) -> set[str]:
    """Names bound to some ``<x>.payload`` (``p = event.payload``)."""
    return {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute) and node.value.attr == "payload"
            for target in node.targets if isinstance(target, ast.Name)}


def spelled_keys(source: str) -> Iterator[tuple[int, str]]:
    """``(line, what)`` for every payload key spelled as a string literal."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_payload(node.value, aliases) and _text(node.slice):
            yield node.lineno, f"payload[{ast.unparse(node.slice)}]"
        elif (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict)
              and any(isinstance(t, ast.Name) and t.id == "payload"
                      for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
              and any(k is not None and _text(k) for k in node.value.keys)):
            yield node.lineno, "a dict literal bound to payload"
        elif isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr == "get" and _is_payload(func.value, aliases)
                    and node.args and _text(node.args[0])):
                yield node.lineno, f"payload.get({ast.unparse(node.args[0])})"
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in BUILDERS:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if isinstance(arg, ast.Dict) and any(k is not None and _text(k) for k in arg.keys):
                        yield node.lineno, f"a dict literal given to {name}()"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_payload_key_is_spelled_by_hand(path: Path) -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in spelled_keys(path.read_text())]
    assert found == []


def test_the_scan_finds_what_it_looks_for() -> None:
    source = '''
p = event.payload
a = event.payload["key"]
b = p.get("name")
c = payload.get(ToolCall.K.name)
rec.emit("note", {"text": "hi"})
Fact("state.patch", {"ops": []})
rec.emit(StatePatch(ops=[]))
payload: dict = {"key": k}
'''
    assert sorted(line for line, _ in spelled_keys(source)) == [3, 4, 6, 7, 9]
    assert len(MODULES) > 100 and ROOT / "capture" / "runtime" / "loop.py" in MODULES
    assert all((ROOT / name).is_file() for name in EXEMPT)
