"""agentlog.analysis reads payloads through the event vocabulary only: no JSON path, payload key
or dotted type name is spelled by hand (docstrings aside), so a renamed field fails loudly."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import agentlog.analysis
from agentlog.events import STANDARD_TYPES

ANALYSIS = Path(agentlog.analysis.__file__).parent
#: A JSON path step written out: ``$.name`` or ``$[*].text`` with the key in the literal.
HAND_PATH = re.compile(r"\$(\[\*\])?\.[A-Za-z_]")


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        # attribute docstrings: a string expression after an assignment
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            ids.add(id(node.value))
    return ids


def offences(source: str, name: str) -> list[str]:
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
            if HAND_PATH.search(text):
                found.append(f"{name}:{node.lineno}: JSON path spelled by hand: {text.strip()[:60]!r}")
            if "." in text and text in STANDARD_TYPES:
                found.append(f"{name}:{node.lineno}: type name spelled by hand: {text!r}")
            for standard in STANDARD_TYPES:
                if "." in standard and f"'{standard}'" in text:
                    found.append(f"{name}:{node.lineno}: type name spelled by hand in SQL: {standard!r}")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            target = node.value
            if (isinstance(target, ast.Attribute) and target.attr == "payload") or \
                    (isinstance(target, ast.Name) and target.id == "payload"):
                found.append(f"{name}:{node.lineno}: payload key spelled by hand: {node.slice.value!r}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            owner = node.func.value
            if isinstance(owner, ast.Attribute) and owner.attr == "payload" and node.args and \
                    isinstance(node.args[0], ast.Constant):
                found.append(f"{name}:{node.lineno}: payload key spelled by hand: {node.args[0].value!r}")
    return found


def test_no_payload_key_or_type_is_spelled_by_hand_in_analysis() -> None:
    found = []
    for path in sorted(ANALYSIS.glob("*.py")):
        found += offences(path.read_text(encoding="utf-8"), path.name)
    assert not found, "\n".join(found)


def test_the_check_catches_what_it_claims() -> None:
    bad = '''
def f(event):
    sql = "SELECT json_extract_string(payload, '$.usage.cached_tokens') FROM t WHERE type = 'llm.response'"
    return event.payload["model"], event.payload.get("usage"), "tool.result"
'''
    kinds = sorted(o.split(": ", 1)[1].split(":")[0] for o in offences(bad, "x.py"))
    assert kinds == sorted(["JSON path spelled by hand", "type name spelled by hand in SQL",
                            "payload key spelled by hand", "payload key spelled by hand",
                            "type name spelled by hand"])
