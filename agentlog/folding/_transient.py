"""Applying JSON Patch operations to a persistent tree through mutable overlays.

An op never copies the path it walks. The first write below a persistent map or vector wraps
it in a *transient* node: a map overlay (a ``dict`` of changed keys over the untouched
``PMap``) or a vector evolver over the ``PVector``. Later writes to
the same subtree, by the same op or by the next thousand, hit the overlay at ``dict`` speed.
:meth:`Slot.commit` turns the overlays back into persistent values, touching only what
changed, so untouched subtrees stay the same objects and a patch that changes nothing returns
its input.

The same code serves ``apply_patch`` (one patch, committed at once) and the fold's fast path
(many ``state.patch`` events, committed at each snapshot or before another reducer runs), so
both give the same results and the same errors.

Transient nodes never escape: a value read for ``copy``, ``move`` or ``test`` is committed
first, and everything handed out is persistent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from ..errors import PatchError, PatchTestError
from .persistent import _ABSENT, DELETED, PMap, PVector, update_map
from .pointer import END, _json_type, array_index, format_pointer, parse_pointer
from .values import freeze, json_equal, short

__all__ = ["PatchOp", "PatchPayload", "Slot", "apply_ops"]

_DELETED: Any = DELETED  # removed in an overlay
_SCALARS = frozenset({str, int, float, bool, type(None)})
_PARSED_MAX: Final = 65_536  # pointers one fold remembers parsed (a bound for ever-new paths)
PVECTOR = PVector
OPS: Final = ("add", "remove", "replace", "move", "copy", "test")


class PatchOp(msgspec.Struct, gc=False):
    """One JSON Patch operation as a store's bulk reader decodes it (msgspec makes these
    faster than it or orjson makes dicts, and frees them faster): :func:`apply_ops` takes
    them beside dicts, with the same results and errors. A member the operation lacks reads
    as the ``_ABSENT`` sentinel; members it does not know are dropped, as RFC 6902 ignores
    them. Untracked by the cyclic collector: decoded JSON holds no cycles."""

    op: str
    path: str
    value: Any = _ABSENT
    from_: str = msgspec.field(name="from", default=_ABSENT)

    def get(self, name: str, default: Any = None) -> Any:
        """A member by its JSON name, as ``dict.get`` reads one (the rare ops' path)."""
        attribute = _MEMBERS.get(name)
        value = _ABSENT if attribute is None else getattr(self, attribute)
        return default if value is _ABSENT else value

    def to_dict(self) -> dict[str, Any]:
        """The operation as the JSON object it was decoded from (less unknown members)."""
        return {name: value for name, attribute in _MEMBERS.items()
                if (value := getattr(self, attribute)) is not _ABSENT}


_MEMBERS: Final = {"op": "op", "path": "path", "value": "value", "from": "from_"}
"""A :class:`PatchOp`'s members: JSON name -> attribute."""


class PatchPayload(msgspec.Struct, gc=False):
    """A ``state.patch`` payload as a store's bulk reader decodes it: its operations alone (the
    fold reads nothing else of it)."""

    ops: list[PatchOp]

    def to_dict(self) -> dict[str, Any]:
        """The payload as a dict of JSON values, as an ``Event`` carries it."""
        return {"ops": [op.to_dict() for op in self.ops]}


class _TMap:
    """A ``PMap`` with pending changes: ``changes[key]`` is the new value or ``_DELETED``."""

    __slots__ = ("base", "changes")

    def __init__(self, base: PMap[Any, Any]) -> None:
        self.base = base
        self.changes: dict[Any, Any] = {}

    def commit(self) -> PMap[Any, Any]:
        changes = self.changes
        if not changes:
            return self.base
        base = self.base
        for key, value in changes.items():
            t = type(value)
            if t is _TMap or t is _TVec:
                changes[key] = value.commit()
        new = update_map(base, changes)
        self.base = new
        self.changes = {}
        return new


class _TVec:
    """A ``PVector`` being changed through its evolver; ``kids`` are transient elements."""

    __slots__ = ("base", "ev", "kids")

    def __init__(self, base: PVector[Any]) -> None:
        self.base = base
        self.ev = base.evolver()
        self.kids: dict[int, Any] = {}

    def flush(self) -> None:
        """Commit transient elements into the evolver (before indices shift)."""
        ev = self.ev
        for i, kid in self.kids.items():
            value = kid.commit()
            if value is not ev[i]:
                ev[i] = value
        self.kids = {}

    def insert(self, i: int, value: Any) -> None:
        ev = self.ev
        n = len(ev)
        if i == n:
            ev.append(value)
            return
        if self.kids:
            self.flush()
        ev.insert(i, value)  # O(n), as an insert into an array is

    def delete(self, i: int) -> None:
        if self.kids:
            if i == len(self.ev) - 1:
                self.kids.pop(i, None)
            else:
                self.flush()
        del self.ev[i]

    def commit(self) -> PVector[Any]:
        if self.kids:
            self.flush()
        ev = self.ev
        if not ev.is_dirty():
            return self.base
        new = ev.persistent()
        self.base = new
        self.ev = new.evolver()
        return new


class Slot:
    """Holds the document being patched: a persistent value or a transient node."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def commit(self) -> Any:
        """Return the document as a persistent value (the same object if nothing changed)."""
        value = self.value
        t = type(value)
        if t is _TMap or t is _TVec:
            return value.commit()
        return value


def _wrap(value: Any) -> Any:
    t = type(value)
    if t is PMap:
        return _TMap(value)
    if t is PVECTOR:
        return _TVec(value)
    if t is _TMap or t is _TVec:
        return value
    return None


class _Fail(Exception):
    """Raised inside the walk with the problem text; ``apply_ops`` adds index, op and path."""

    def __init__(self, problem: str, test: bool = False) -> None:
        self.problem, self.test = problem, test


def _where(tokens: tuple[str, ...], depth: int) -> str:
    return "the root" if depth == 0 else repr(format_pointer(tokens[:depth]))


def _what(value: Any) -> str:
    t = type(value)
    if t is _TMap or t is _TVec:
        value = value.base
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "an array"
    return _json_type(value)


def _index(node: Any, size: int, token: str, tokens: tuple[str, ...], depth: int,
           end_ok: bool = False) -> int:
    try:
        return array_index(token, size, end_ok=end_ok)
    except IndexError:
        where = _where(tokens, depth)
        if token == END:
            raise _Fail(f"'-' names the end of the array at {where}, past its last element") from None
        raise _Fail(f"index {token} is out of range for the array at {where} (length {size})") from None
    except ValueError:
        raise _Fail(f"{token!r} is not an array index for the array at {_where(tokens, depth)} "
                    "(use digits without leading zeros, or '-' to append)") from None


def _missing(token: str, tokens: tuple[str, ...], depth: int) -> _Fail:
    return _Fail(f"no member {token!r} in the object at {_where(tokens, depth)}")


def _container(slot: Slot, tokens: tuple[str, ...]) -> Any:
    """The transient container that ``tokens[-1]`` is looked up in, made writable on the way."""
    node = slot.value
    t = type(node)
    if t is not _TMap and t is not _TVec:
        node = _wrap(node)
        if node is None:
            raise _Fail(f"cannot go into {_what(slot.value)} at the root")
        slot.value = node
    for depth in range(len(tokens) - 1):
        token = tokens[depth]
        if type(node) is _TMap:
            changes = node.changes
            value = changes.get(token, _ABSENT)
            if value is _ABSENT:
                value = node.base._find(token)
                if value is _ABSENT:
                    raise _missing(token, tokens, depth)
            elif value is _DELETED:
                raise _missing(token, tokens, depth)
            t = type(value)
            if t is _TMap or t is _TVec:
                node = value
                continue
            child = _wrap(value)
            if child is None:
                raise _Fail(f"cannot go into {_what(value)} at {_where(tokens, depth + 1)}")
            changes[token] = node = child
        else:
            i = _index(node, len(node.ev), token, tokens, depth)
            child = node.kids.get(i)
            if child is None:
                value = node.ev[i]
                child = _wrap(value)
                if child is None:
                    raise _Fail(f"cannot go into {_what(value)} at {_where(tokens, depth + 1)}")
                node.kids[i] = child
            node = child
    return node


def _read(slot: Slot, tokens: tuple[str, ...]) -> Any:
    """The persistent value at ``tokens``, without making anything writable."""
    node = slot.value
    for depth, token in enumerate(tokens):
        t = type(node)
        if t is _TMap:
            value = node.changes.get(token, _ABSENT)
            if value is _ABSENT:
                value = node.base._find(token)
            elif value is _DELETED:
                value = _ABSENT
            if value is _ABSENT:
                raise _missing(token, tokens, depth)
        elif t is _TVec:
            i = _index(node, len(node.ev), token, tokens, depth)
            value = node.kids.get(i, _ABSENT)
            if value is _ABSENT:
                value = node.ev[i]
        elif t is PMap or (isinstance(node, Mapping)):
            value = node.get(token, _ABSENT)
            if value is _ABSENT:
                raise _missing(token, tokens, depth)
        elif t is PVECTOR or (isinstance(node, Sequence) and not isinstance(node, str)):
            value = node[_index(node, len(node), token, tokens, depth)]
        else:
            raise _Fail(f"cannot go into {_what(node)} at {_where(tokens, depth)}")
        node = value
    t = type(node)
    if t is _TMap or t is _TVec:
        node = node.commit()  # in place: the overlay stays valid over the committed value
    return node


def _add(slot: Slot, tokens: tuple[str, ...], value: Any) -> None:
    if not tokens:
        slot.value = value
        return
    node = _container(slot, tokens)
    last = tokens[-1]
    if type(node) is _TMap:
        node.changes[last] = value
    elif last == END:
        node.ev.append(value)
    else:
        node.insert(_index(node, len(node.ev), last, tokens, len(tokens) - 1, end_ok=True), value)


def _remove(slot: Slot, tokens: tuple[str, ...]) -> None:
    if not tokens:
        raise _Fail("cannot remove the whole document")
    node = _container(slot, tokens)
    last = tokens[-1]
    if type(node) is _TMap:
        changes = node.changes
        old = changes.get(last, _ABSENT)
        if old is _DELETED or (old is _ABSENT and node.base._find(last) is _ABSENT):
            raise _missing(last, tokens, len(tokens) - 1)
        changes[last] = _DELETED
    else:
        node.delete(_index(node, len(node.ev), last, tokens, len(tokens) - 1))


def _member(op: Any, name: str) -> Any:
    value = op.get(name, _ABSENT)
    if value is _ABSENT:
        raise _Fail(f"the operation has no {name!r} member")
    return value


def _pointer(op: Any, name: str) -> tuple[str, ...]:
    pointer = _member(op, name)
    tokens = None
    if tokens is None:
        if type(pointer) is not str:
            raise _Fail(f"{name!r} must be a JSON Pointer string, got {_json_type(pointer)}")
        try:
            tokens = parse_pointer(pointer)
        except ValueError as exc:
            raise _Fail(f"{name!r}: {exc}") from None
    return tokens


def _parsed(path: str, parsed: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The tokens of an op's ``path`` not found in ``parsed``: a plain path (e.g. a fresh key)
    is split and remembered, with no need for the full parser."""
    if path[:1] == "/" and "~" not in path:
        tokens = tuple(path[1:].split("/"))
        if len(parsed) < _PARSED_MAX:
            parsed[path] = tokens
        return tokens
    try:
        return parse_pointer(path)
    except ValueError as exc:
        raise _Fail(f"'path': {exc}") from None


def _tokens(op: Any, path: Any) -> tuple[str, ...]:
    """Check an op's shape and parse its path (the slow path: the parse is cached)."""
    if type(op) is not dict and not isinstance(op, Mapping):
        raise _Fail(f"an operation is an object with 'op' and 'path', got {_json_type(op)}")
    if "op" not in op:
        raise _Fail("the operation has no 'op' member")
    return _pointer(op, "path")


def apply_ops(slot: Slot, ops: Any, parsed: dict[str, tuple[str, ...]] | None = None) -> None:
    """Apply JSON Patch operations to the document held by ``slot``, in order.

    On an error the slot is left part-way: callers discard it (``apply_patch`` by not
    committing, the fold by raising).

    Args:
        slot: the document.
        ops: the operations.
        parsed: parsed pointers to reuse and add to (a fold passes one for all its events:
            a run's patches name the same paths over and over); ``None``: parse each.

    Raises:
        PatchError: naming the op index, the op and its pointer.
        PatchTestError: a ``test`` op found another value.
        TypeError: ``ops`` is not a list of operations.
    """
    if type(ops) is not list and (isinstance(ops, (str, bytes, Mapping))
                                  or not isinstance(ops, Sequence)):
        raise TypeError(f"a JSON Patch is a list of operations, got {type(ops).__name__}")
    if parsed is None:
        parsed = {}
    scalars = _SCALARS
    for index, op in enumerate(ops):
        kind: Any = "?"
        path: Any = _ABSENT
        try:
            if type(op) is dict:
                kind = op.get("op", "?")
                path = op.get("path", _ABSENT)
                tokens = parsed.get(path) if type(path) is str else None
                if tokens is None:
                    tokens = _parsed(path, parsed) if type(path) is str and "op" in op else _tokens(op, path)
                value = op.get("value", _ABSENT)
            elif type(op) is PatchOp:
                kind, path, value = op.op, op.path, op.value
                tokens = parsed.get(path)
                if tokens is None:
                    tokens = _parsed(path, parsed)
            else:
                tokens = _tokens(op, None)
                kind, path, value = op.get("op", "?"), op.get("path", _ABSENT), op.get("value", _ABSENT)
            if kind == "add" or kind == "replace":
                if type(value) not in scalars:
                    if value is _ABSENT:
                        raise _Fail("the operation has no 'value' member")
                    value = freeze(value)
                if not tokens:
                    slot.value = value
                    continue
                node = slot.value
                depth = len(tokens)
                if type(node) is not _TMap or depth > 2:
                    node = _container(slot, tokens)
                elif depth == 2:  # the common "/map/key": one level down, inline
                    node = node.changes.get(tokens[0])
                    if type(node) is not _TMap and type(node) is not _TVec:
                        node = _container(slot, tokens)
                last = tokens[-1]
                if type(node) is _TMap:
                    changes = node.changes
                    if kind == "replace":
                        old = changes.get(last, _ABSENT)
                        if old is _DELETED or (old is _ABSENT and node.base._find(last) is _ABSENT):
                            raise _missing(last, tokens, len(tokens) - 1)
                    changes[last] = value
                elif kind == "add":
                    if last == END:
                        node.ev.append(value)
                    else:
                        node.insert(_index(node, len(node.ev), last, tokens, len(tokens) - 1,
                                           end_ok=True), value)
                else:
                    i = _index(node, len(node.ev), last, tokens, len(tokens) - 1)
                    node.kids.pop(i, None)
                    node.ev[i] = value
            elif kind == "remove":
                _remove(slot, tokens)
            elif kind == "test":
                if value is _ABSENT:
                    raise _Fail("the operation has no 'value' member")
                expected = value
                actual = _read(slot, tokens)
                if not json_equal(actual, expected):
                    raise _Fail(f"the value is {short(actual)}, expected {short(expected)}", test=True)
            elif kind == "move" or kind == "copy":
                source = _pointer(op, "from")
                try:
                    value = _read(slot, source)
                except _Fail as exc:
                    raise _Fail(f"'from' {format_pointer(source)!r}: {exc.problem}") from None
                if kind == "move":
                    if source == tokens:
                        continue
                    if tokens[:len(source)] == source:
                        raise _Fail(f"cannot move {format_pointer(source)!r} into its own child")
                    _remove(slot, source)
                _add(slot, tokens, value)
            else:
                raise _Fail(f"unknown op {kind!r}; use one of {', '.join(OPS)}")
        except _Fail as exc:
            cls = PatchTestError if exc.test else PatchError
            shown = path if type(path) is str else "" if path is _ABSENT else _json_type(path)
            raise cls(index, str(kind), shown, exc.problem) from None
