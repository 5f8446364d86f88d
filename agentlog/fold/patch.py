"""RFC 6902 JSON Patch on persistent states: :func:`apply_patch` and the :class:`Patch` value.

All six operations (``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``) follow
the RFC, with JSON Pointer paths (RFC 6901, see :mod:`agentlog.fold.pointer`). The input is
never changed (it is persistent), so a failing patch leaves nothing half-applied: the error
is all you get. Untouched subtrees of the result are the same objects as in the input, and a
patch that changes nothing returns the input itself.

A :class:`Patch` is what :func:`~agentlog.fold.diff.diff_states` returns: a read-only
sequence of op mappings that may carry an ``"old"`` member (the value before, for display;
``apply_patch`` ignores it). It prints as one line per op and renders as escaped HTML.

Pure: no I/O.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, overload

from ._transient import Slot, apply_ops
from .pointer import array_index, escape_token, format_pointer, parse_pointer
from .values import freeze, short, thaw

__all__ = ["Patch", "apply_patch", "array_index", "escape_token", "format_pointer",
           "parse_pointer"]

_TEXT_LIMIT: Final = 60   # characters of a value in a text line
_HTML_LIMIT: Final = 120  # characters of a value in an HTML row
_HTML_ROWS: Final = 200   # rows shown before "… N more"
_MISSING: Any = object()


def apply_patch(doc: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    """Apply JSON Patch operations to a persistent document and return the result.

    Args:
        doc: a state or any frozen JSON value (a plain one is frozen first).
        ops: the operations, e.g. ``[{"op": "add", "path": "/a", "value": 1}]`` or a
            :class:`Patch`. Values are frozen as they enter; ``"old"`` members are ignored.

    Returns:
        The patched document: ``doc`` itself if nothing changed, else a new value sharing
        every untouched subtree with ``doc``.

    Raises:
        PatchError: an op cannot be applied; ``index``, ``op``, ``path`` and ``problem`` say
            which and why. ``doc`` is unchanged.
        PatchTestError: a ``test`` op found another value.
        TypeError: ``ops`` is not a list of operations.

    >>> from pyrsistent import pmap
    >>> a = freeze({"plan": ["look"], "notes": {"n": 1}})
    >>> b = apply_patch(a, [{"op": "add", "path": "/plan/-", "value": "act"},
    ...                     {"op": "test", "path": "/notes/n", "value": 1.0}])
    >>> thaw(b["plan"]), b["notes"] is a["notes"]
    (['look', 'act'], True)
    >>> apply_patch(a, [{"op": "test", "path": "/plan/0", "value": "look"}]) is a
    True
    >>> apply_patch(a, [{"op": "remove", "path": "/plan/3"}])
    Traceback (most recent call last):
    ...
    agentlog.errors.PatchError: op 0 (remove '/plan/3'): index 3 is out of range for the array at '/plan' (length 1)
    """
    slot = Slot(freeze(doc))
    apply_ops(slot, ops if isinstance(ops, (Sequence, Mapping)) else list(ops))
    return slot.commit()


class Patch(Sequence[Mapping[str, Any]]):
    """A read-only sequence of JSON Patch operations, with text and HTML displays.

    Each op is a read-only mapping (``{"op", "path", "value"?, "from"?, "old"?}``). A patch
    equals another patch or a list of op dicts with the same ops.

    Args:
        ops: the operations.

    >>> p = Patch([{"op": "replace", "path": "/n", "value": 3, "old": 2},
    ...            {"op": "add", "path": "/tags/-", "value": "<b>"}])
    >>> print(p)
    ~ /n: 2 → 3
    + /tags/- = "<b>"
    >>> p.paths
    ('/n', '/tags/-')
    >>> Patch([]) == []
    True
    """

    __slots__ = ("_ops",)

    def __init__(self, ops: Iterable[Mapping[str, Any]] = ()) -> None:
        checked = []
        for i, op in enumerate(ops):
            if not isinstance(op, Mapping) or not isinstance(op.get("op"), str):
                raise TypeError(f"op {i}: an operation is a mapping with an 'op' string, got {op!r}")
            checked.append(op if type(op) is MappingProxyType else MappingProxyType(dict(op)))
        self._ops: tuple[Mapping[str, Any], ...] = tuple(checked)

    @classmethod
    def _trusted(cls, ops: list[dict[str, Any]]) -> Patch:
        """Build from op dicts this package made (no checks, no copies)."""
        patch = cls.__new__(cls)
        patch._ops = tuple(MappingProxyType(op) for op in ops)
        return patch

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Patch: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Patch:
        if isinstance(index, slice):
            patch = Patch.__new__(Patch)
            patch._ops = self._ops[index]
            return patch
        return self._ops[index]

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return iter(self._ops)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Patch):
            return self._ops == other._ops
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self._ops) and all(
                isinstance(b, Mapping) and dict(a) == dict(b) for a, b in zip(self._ops, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # ops hold unhashable values

    def __add__(self, other: Iterable[Mapping[str, Any]]) -> Patch:
        return Patch([*self._ops, *other])

    @property
    def paths(self) -> tuple[str, ...]:
        """The pointers this patch changes, in order, each once (``test`` ops change nothing;
        a ``move`` changes its ``from`` too)."""
        seen: dict[str, None] = {}
        for op in self._ops:
            kind = op["op"]
            if kind == "test":
                continue
            if kind == "move" and isinstance(op.get("from"), str):
                seen[op["from"]] = None
            seen[str(op.get("path", ""))] = None
        return tuple(seen)

    def to_json(self) -> list[dict[str, Any]]:
        """The ops as plain dicts with plain values (``"old"`` kept), ready for ``json.dumps``."""
        return [{k: thaw(v) for k, v in op.items()} for op in self._ops]

    def __repr__(self) -> str:
        n = len(self._ops)
        paths = self.paths
        shown = ", ".join(paths[:3]) + (", …" if len(paths) > 3 else "")
        return f"<Patch {n:,} op{'s' if n != 1 else ''}{': ' + shown if shown else ''}>"

    def __str__(self) -> str:
        if not self._ops:
            return "(no changes)"
        return "\n".join(_line(op, _TEXT_LIMIT) for op in self._ops)

    def _repr_html_(self) -> str:
        n = len(self._ops)
        rows = []
        for op in self._ops[:_HTML_ROWS]:
            sign, path, detail = _parts(op, _HTML_LIMIT)
            rows.append(f'<tr class="al-{html.escape(str(op["op"]))}"><td>{html.escape(sign)}</td>'
                        f"<td><code>{html.escape(path)}</code></td>"
                        f"<td>{html.escape(detail)}</td></tr>")
        if n > _HTML_ROWS:
            rows.append(f'<tr><td colspan="3">… {n - _HTML_ROWS:,} more</td></tr>')
        body = "".join(rows) if rows else '<tr><td colspan="3">(no changes)</td></tr>'
        return (f'<div class="agentlog-patch"><div class="al-header">Patch · {n:,} '
                f'op{"s" if n != 1 else ""}</div><table>{body}</table>'
                f"<details><summary>text</summary><pre>{html.escape(str(self))}</pre></details>"
                "</div>")


def _parts(op: Mapping[str, Any], limit: int) -> tuple[str, str, str]:
    """(sign, path, detail) for one op; the text line is their join."""
    kind, path = op["op"], str(op.get("path", ""))
    value, old, source = op.get("value", _MISSING), op.get("old", _MISSING), op.get("from")
    shown = "" if value is _MISSING else short(value, limit)
    was = "" if old is _MISSING else short(old, limit)
    if kind == "add":
        return "+", path, f"= {shown}"
    if kind == "remove":
        return "-", path, f"(was {was})" if was else ""
    if kind == "replace":
        return "~", path, f": {was} → {shown}" if was else f"= {shown}"
    if kind == "move":
        return "→", path, f"(moved from {source})"
    if kind == "copy":
        return "+", path, f"(copied from {source})"
    if kind == "test":
        return "?", path, f"== {shown}"
    return "!", path, f"{kind} {shown}".strip()


def _line(op: Mapping[str, Any], limit: int) -> str:
    sign, path, detail = _parts(op, limit)
    if not detail:
        return f"{sign} {path}"
    sep = "" if detail.startswith(":") else " "
    return f"{sign} {path}{sep}{detail}"
