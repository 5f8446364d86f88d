"""Hypothesis strategies for states, JSON Patch op lists and runs of events.

Use them to test your own reducers the way agentlog tests its own: for example, that a
reducer is deterministic, or that ``SnapshotIndex.at(n)`` equals a fold from scratch.

>>> from hypothesis import given, settings
>>> from agentlog.folding import check_determinism
>>> @settings(max_examples=25, deadline=None)
... @given(event_runs(max_events=10))
... def test_default_reducers_are_deterministic(events):
...     assert check_determinism(events, every=3).ok
>>> test_default_reducers_are_deterministic()

Needs hypothesis (``pip install 'agentlog[test]'``); ``import agentlog.testing`` alone does not.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import missing_dependency

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - the test extra is missing
    raise missing_dependency("hypothesis", "test") from exc

from ..events import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    APPROVAL_REQUESTED,
    BUDGET_EXCEEDED,
    LLM_REQUEST,
    LLM_RESPONSE,
    NOTE,
    OBJECT_CREATED,
    OBJECT_UPDATED,
    RELATION_CREATED,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    STATE_PATCH,
    TOOL_RESULT,
    Event,
)
from ..folding.pointer import format_pointer
from ..folding.values import freeze

__all__ = ["apply_plain", "docs_and_patches", "event_runs", "json_keys", "json_objects",
           "json_scalars", "json_values", "patch_ops", "states"]


def _text(max_size: int) -> st.SearchStrategy[str]:
    # no lone surrogates: they are not UTF-8, so no JSON text can hold them
    return st.text(st.characters(exclude_categories=["Cs"]), max_size=max_size)


def json_keys() -> st.SearchStrategy[str]:
    """Object keys, including the awkward ones: ``""``, ``"/"``, ``"~"``, ``"0"``, ``"-"``."""
    return st.one_of(st.sampled_from(["", "/", "~", "~1", "a/b", "0", "01", "-", "a", "b"]),
                     _text(6))


def json_scalars() -> st.SearchStrategy[Any]:
    """``None``, booleans, integers, finite floats and strings."""
    return st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                     st.floats(allow_nan=False, allow_infinity=False, width=64),
                     _text(8))


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Plain JSON values: scalars, lists and dicts nested a few levels."""
    return st.recursive(
        json_scalars(),
        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                st.dictionaries(json_keys(), inner, max_size=4)),
        max_leaves=max_leaves,
    )


def json_objects(max_leaves: int = 12) -> st.SearchStrategy[dict[str, Any]]:
    """Plain JSON objects (the root of a state is always an object)."""
    return st.dictionaries(json_keys(), json_values(max_leaves), max_size=5)


def states(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Frozen JSON objects: what a state or a ``vars`` subtree looks like."""
    return json_objects(max_leaves).map(freeze)


# --- JSON Patch -------------------------------------------------------------------------------

def _nodes(doc: Any, tokens: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = [(tokens, doc)]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found.extend(_nodes(value, (*tokens, key)))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found.extend(_nodes(value, (*tokens, str(i))))
    return found


def _get(doc: Any, tokens: tuple[str, ...]) -> Any:
    for token in tokens:
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


def apply_plain(doc: Any, op: dict[str, Any]) -> Any:
    """Apply one valid op to a plain document (a copy; the input is not changed).

    A small reference for generating valid op sequences; it trusts the op to be valid.
    """
    doc = copy.deepcopy(doc)
    from ..folding.pointer import parse_pointer

    def put(root: Any, tokens: tuple[str, ...], value: Any) -> Any:
        if not tokens:
            return value
        parent = _get(root, tokens[:-1])
        last = tokens[-1]
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), value)
        else:
            parent[last] = value
        return root

    def take(root: Any, tokens: tuple[str, ...]) -> Any:
        parent = _get(root, tokens[:-1])
        last = tokens[-1]
        if isinstance(parent, list):
            parent.pop(int(last))
        else:
            del parent[last]
        return root

    kind, path = op["op"], parse_pointer(op["path"])
    if kind == "add":
        return put(doc, path, copy.deepcopy(op["value"]))
    if kind == "remove":
        return take(doc, path)
    if kind == "replace":
        if not path:
            return copy.deepcopy(op["value"])
        parent = _get(doc, path[:-1])
        last = path[-1]
        parent[int(last) if isinstance(parent, list) else last] = copy.deepcopy(op["value"])
        return doc
    if kind == "test":
        return doc
    source = parse_pointer(op["from"])
    value = copy.deepcopy(_get(doc, source))
    if kind == "move":
        if source == path:
            return doc
        doc = take(doc, source)
    return put(doc, path, value)


@st.composite
def _one_op(draw: st.DrawFn, doc: Any) -> dict[str, Any]:
    nodes = _nodes(doc)
    inner = [n for n in nodes if n[0]]
    containers = [n for n in nodes if isinstance(n[1], (dict, list))]
    kinds = ["replace", "test", "copy"]
    if containers:
        kinds += ["add", "add"]
    if inner:
        kinds += ["remove", "move"]
    kind = draw(st.sampled_from(kinds))
    value = json_values(max_leaves=4)

    def target(root: Any) -> tuple[str, ...] | None:
        """A place to add at in ``root``: (parent tokens + key/index/-)."""
        places = [n for n in _nodes(root) if isinstance(n[1], (dict, list))]
        if not places:
            return None
        tokens, parent = draw(st.sampled_from(places))
        if isinstance(parent, list):
            i = draw(st.integers(0, len(parent)))
            token = "-" if i == len(parent) and draw(st.booleans()) else str(i)
        elif parent and draw(st.booleans()):
            token = draw(st.sampled_from(sorted(parent)))
        else:
            token = draw(json_keys())
        return (*tokens, token)

    if kind == "add":
        where = target(doc)
        assert where is not None
        return {"op": "add", "path": format_pointer(where), "value": draw(value)}
    if kind == "remove":
        tokens, _ = draw(st.sampled_from(inner))
        return {"op": "remove", "path": format_pointer(tokens)}
    if kind == "replace":
        # the root now and then; mostly something inside
        root_too = not inner or draw(st.integers(0, 9)) == 0
        tokens = nodes[0][0] if root_too else draw(st.sampled_from(inner))[0]
        return {"op": "replace", "path": format_pointer(tokens), "value": draw(value)}
    if kind == "test":
        root_too = not inner or draw(st.integers(0, 4)) == 0
        tokens, actual = nodes[0] if root_too else draw(st.sampled_from(inner))
        return {"op": "test", "path": format_pointer(tokens), "value": copy.deepcopy(actual)}
    if kind == "copy":
        source, _ = draw(st.sampled_from(nodes))
        where = target(doc)
        if where is None:
            return {"op": "test", "path": "", "value": copy.deepcopy(doc)}
        return {"op": "copy", "from": format_pointer(source), "path": format_pointer(where)}
    # move: the target is chosen in the document as it is after the removal
    source, _ = draw(st.sampled_from(inner))
    removed = apply_plain(doc, {"op": "remove", "path": format_pointer(source)})
    where = target(removed)
    if where is None or where[:len(source)] == source:
        return {"op": "move", "from": format_pointer(source), "path": format_pointer(source)}
    return {"op": "move", "from": format_pointer(source), "path": format_pointer(where)}


@st.composite
def patch_ops(draw: st.DrawFn, doc: Any, max_ops: int = 6) -> list[dict[str, Any]]:
    """A list of JSON Patch ops, each valid on ``doc`` (plain) as the ops before left it."""
    ops = []
    for _ in range(draw(st.integers(0, max_ops))):
        op = draw(_one_op(doc))
        ops.append(op)
        doc = apply_plain(doc, op)
    return ops


@st.composite
def docs_and_patches(draw: st.DrawFn, max_ops: int = 6) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A plain JSON object and a valid op list for it."""
    doc = draw(json_objects())
    return doc, draw(patch_ops(doc, max_ops=max_ops))


# --- runs of events ---------------------------------------------------------------------------

_TYPES = [STATE_PATCH, STATE_PATCH, STATE_PATCH, LLM_REQUEST, LLM_RESPONSE, TOOL_RESULT,
          OBJECT_CREATED, OBJECT_UPDATED, RELATION_CREATED, APPROVAL_REQUESTED, APPROVAL_GRANTED,
          APPROVAL_DENIED, RUN_STARTED, RUN_FINISHED, RUN_FAILED, BUDGET_EXCEEDED, NOTE,
          "custom.unknown"]


@st.composite
def event_runs(draw: st.DrawFn, max_events: int = 30) -> list[Event]:
    """A run of events of the standard types (and unknown ones), with valid payloads.

    Seqs are dense from 0. ``state.patch`` ops are valid on ``vars`` as the run leaves it,
    updates name existing objects and decisions name pending requests, so the standard
    reducers fold the whole run without error.
    """
    n = draw(st.integers(0, max_events))
    events: list[Event] = []
    vars_doc: dict[str, Any] = {}
    conversation: list[dict[str, Any]] = []
    objects: list[str] = []
    pending: list[int] = []
    for seq in range(n):
        kind = draw(st.sampled_from(_TYPES))
        common: dict[str, Any] = {
            "seq": seq, "actor": draw(st.sampled_from([None, "agent", "tool:search"])),
            "caused_by": draw(st.none() | st.integers(0, seq - 1)) if seq else None,
        }
        if kind == OBJECT_UPDATED and not objects:
            kind = OBJECT_CREATED
        if kind in (APPROVAL_GRANTED, APPROVAL_DENIED) and not pending:
            kind = APPROVAL_REQUESTED
        payload: dict[str, Any] = {}
        if kind == STATE_PATCH:
            ops = draw(patch_ops(vars_doc, max_ops=3))
            for op in ops:
                vars_doc = apply_plain(vars_doc, op)
            if not isinstance(vars_doc, dict):  # a root replace: keep vars an object
                ops.append({"op": "replace", "path": "", "value": {}})
                vars_doc = {}
            payload = {"ops": ops}
        elif kind == LLM_REQUEST:
            if conversation and draw(st.integers(0, 4)) == 0:
                conversation = conversation[:draw(st.integers(0, len(conversation) - 1))]
            conversation = [*conversation, {"role": "user", "content": draw(_text(5))}]
            payload = {"key": f"k{seq}", "model": "m", "messages": copy.deepcopy(conversation),
                       "params": {}, "tools": []}
        elif kind == LLM_RESPONSE:
            content = draw(_text(5))
            if draw(st.booleans()):
                message: dict[str, Any] = {"role": "assistant", "content": content}
                payload = {"message": message, "content": content}
            else:
                message = {"role": "assistant", "content": content}
                payload = {"content": content}
            conversation = [*conversation, message]
            common.update(model=draw(st.sampled_from(["m1", "m2", None])),
                          input_tokens=draw(st.none() | st.integers(0, 1000)),
                          output_tokens=draw(st.none() | st.integers(0, 1000)),
                          cached_tokens=draw(st.none() | st.integers(0, 100)),
                          cost_usd=draw(st.none() | st.sampled_from([0.0, 0.25, 1.5])),
                          duration_ms=draw(st.none() | st.sampled_from([1.0, 2.5])))
        elif kind == TOOL_RESULT:
            payload = {"key": f"t{seq}", "name": "search", "result": draw(json_scalars())}
            common.update(duration_ms=draw(st.none() | st.sampled_from([1.0, 4.0])),
                          cost_usd=draw(st.none() | st.just(0.5)))
        elif kind == OBJECT_CREATED:
            key = f"o{len(objects)}"
            objects.append(key)
            payload = {"id": key, "kind": "doc", "data": draw(json_objects(max_leaves=4))}
        elif kind == OBJECT_UPDATED:
            payload = {"id": draw(st.sampled_from(objects)), "data": draw(json_objects(max_leaves=4))}
        elif kind == RELATION_CREATED:
            payload = {"kind": "cites", "source": "a", "target": "b"}
            if draw(st.booleans()):
                payload["id"] = f"rel{seq}"
        elif kind == APPROVAL_REQUESTED:
            pending.append(seq)
            payload = {"action": "send", "reason": draw(_text(5))}
        elif kind in (APPROVAL_GRANTED, APPROVAL_DENIED):
            request = draw(st.sampled_from(pending))
            pending.remove(request)
            payload = {"request": request, "by": "me", "note": None}
        else:
            payload = {"text": draw(_text(5))}
        events.append(Event(type=kind, payload=payload, **common))
    return events
