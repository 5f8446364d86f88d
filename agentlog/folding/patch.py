"""RFC 6902 JSON Patch on persistent states: :func:`apply_patch` and the :class:`Patch` value.

All six operations (``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``) follow
the RFC, with JSON Pointer paths (RFC 6901, see :mod:`agentlog.folding.pointer`). The input is
never changed (it is persistent), so a failing patch leaves nothing half-applied: the error
is all you get. Untouched subtrees of the result are the same objects as in the input, and a
patch that changes nothing returns the input itself.

A :class:`Patch` is what :func:`~agentlog.folding.diff.diff_states` returns: a read-only
sequence of RFC 6902 op mappings, with the value each op overwrote kept beside it (a
:class:`Change` per op), not inside it. It prints as one line per op; the HTML table is a view
(``agentlog.widgets.html.patch_repr``), not part of the fold.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, overload

from ._transient import Slot, apply_ops
from .pointer import array_index, escape_token, format_pointer, parse_pointer
from .values import freeze, short, thaw

__all__ = ["NO_VALUE", "Change", "Patch", "apply_patch", "array_index", "escape_token",
           "format_pointer", "line", "parse_pointer", "parts"]

TEXT_LIMIT: Final = 60   # characters of a value in a text line
_MISSING: Any = object()


def apply_patch(doc: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    """Apply JSON Patch operations to a persistent document and return the result.

    Args:
        doc: a state or any frozen JSON value (a plain one is frozen first).
        ops: the operations, e.g. ``[{"op": "add", "path": "/a", "value": 1}]`` or a
            :class:`Patch`. Values are frozen as they enter; members RFC 6902 does not
            define are ignored, as it says.

    Returns:
        The patched document: ``doc`` itself if nothing changed, else a new value sharing
        every untouched subtree with ``doc``.

    Raises:
        PatchError: an op cannot be applied; ``index``, ``op``, ``path`` and ``problem`` say
            which and why. ``doc`` is unchanged.
        PatchTestError: a ``test`` op found another value.
        TypeError: ``ops`` is not a list of operations.

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


class _NoValue:
    """The type of :data:`NO_VALUE`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_VALUE"

    def __reduce__(self) -> str:
        return "NO_VALUE"


NO_VALUE: Final[Any] = _NoValue()
"""The ``old`` of a :class:`Change` whose op overwrote nothing (``add``, ``copy``, ``move``, ``test``)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One op of a :class:`Patch` and the value it overwrote, kept beside the op.

    ``op`` is exactly an RFC 6902 operation; ``old`` is the value at ``op["path"]`` before it
    was applied (``replace``, ``remove``), or :data:`NO_VALUE`.

    >>> Change({"op": "replace", "path": "/n", "value": 3}, old=2).old
    2
    """

    op: Mapping[str, Any]
    """The RFC 6902 operation."""
    old: Any = NO_VALUE
    """The value it overwrote, for display."""


class Patch(Sequence[Mapping[str, Any]]):
    """A read-only sequence of RFC 6902 operations, and the value each one overwrote.

    Iterating gives the ops, each a read-only mapping that is exactly an RFC 6902 operation
    (``{"op", "path", "value"?, "from"?}``), so a patch goes to ``apply_patch``, ``jsonpatch``
    or ``json.dumps(patch.to_json())`` as it is. :attr:`changes` pairs each op with the value
    it overwrote (:class:`Change`; ``diff_states`` fills it in), which the text display shows.
    A patch equals another patch with the same changes, or a list of op dicts with the same ops.

    Args:
        ops: the operations: op mappings, or :class:`Change` values.

    >>> p = Patch([Change({"op": "replace", "path": "/n", "value": 3}, old=2),
    ...            {"op": "add", "path": "/tags/-", "value": "<b>"}])
    >>> print(p)
    ~ /n: 2 → 3
    + /tags/- = "<b>"
    >>> p.paths, dict(p[0])
    (('/n', '/tags/-'), {'op': 'replace', 'path': '/n', 'value': 3})
    >>> [c.old for c in p.changes]
    [2, NO_VALUE]
    >>> Patch([]) == []
    True
    """

    __slots__ = ("_old", "_ops")

    def __init__(self, ops: Iterable[Mapping[str, Any] | Change] = ()) -> None:
        checked: list[Mapping[str, Any]] = []
        old: list[Any] = []
        for i, item in enumerate(ops):
            op, was = (item.op, item.old) if isinstance(item, Change) else (item, NO_VALUE)
            if not isinstance(op, Mapping) or not isinstance(op.get("op"), str):
                raise TypeError(f"op {i}: an operation is a mapping with an 'op' string, got {op!r}")
            checked.append(op if type(op) is MappingProxyType else MappingProxyType(dict(op)))
            old.append(was)
        self._ops: tuple[Mapping[str, Any], ...] = tuple(checked)
        self._old: tuple[Any, ...] = tuple(old)

    @classmethod
    def _trusted(cls, ops: list[dict[str, Any]], old: list[Any]) -> Patch:
        """Build from op dicts and old values this package made (no checks, no copies)."""
        patch = cls.__new__(cls)
        patch._ops = tuple(MappingProxyType(op) for op in ops)
        patch._old = tuple(old)
        return patch

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Patch: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Patch:
        if isinstance(index, slice):
            patch = Patch.__new__(Patch)
            patch._ops = self._ops[index]
            patch._old = self._old[index]
            return patch
        return self._ops[index]

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return iter(self._ops)

    @property
    def changes(self) -> tuple[Change, ...]:
        """Each op with the value it overwrote (:data:`NO_VALUE` where it overwrote nothing)."""
        return tuple(Change(op, old) for op, old in zip(self._ops, self._old, strict=True))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Patch):
            return self._ops == other._ops and self._old == other._old
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self._ops) and all(
                isinstance(b, Mapping) and dict(a) == dict(b) for a, b in zip(self._ops, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # ops hold unhashable values

    def __add__(self, other: Iterable[Mapping[str, Any] | Change]) -> Patch:
        more = other if isinstance(other, Patch) else Patch(other)
        patch = Patch.__new__(Patch)
        patch._ops = self._ops + more._ops
        patch._old = self._old + more._old
        return patch

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
        """The ops as plain dicts with plain values (RFC 6902), ready for ``json.dumps``."""
        return [{k: thaw(v) for k, v in op.items()} for op in self._ops]

    def __repr__(self) -> str:
        n = len(self._ops)
        paths = self.paths
        shown = ", ".join(paths[:3]) + (", …" if len(paths) > 3 else "")
        return f"<Patch {n:,} op{'s' if n != 1 else ''}{': ' + shown if shown else ''}>"

    def __str__(self) -> str:
        if not self._ops:
            return "(no changes)"
        return "\n".join(line(change, TEXT_LIMIT) for change in self.changes)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain-text display: the lines of :meth:`__str__` (the HTML table is drawn
        by ``agentlog.widgets.html.patch_repr``)."""
        printer.text(repr(self) if cycle else f"{self!r}\n{self}" if self._ops else repr(self))


def parts(change: Change, limit: int) -> tuple[str, str, str]:
    """``(sign, path, detail)`` of one change, for display; the text line is their join.

    >>> parts(Change({"op": "remove", "path": "/a"}, old=[1]), 60)
    ('-', '/a', '(was [1])')
    """
    op, old = change.op, change.old
    kind, path = op["op"], str(op.get("path", ""))
    value, source = op.get("value", _MISSING), op.get("from")
    shown = "" if value is _MISSING else short(value, limit)
    was = "" if old is NO_VALUE else short(old, limit)
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


def line(change: Change, limit: int) -> str:
    """One change as a line of text (``~ /n: 2 → 3``)."""
    sign, path, detail = parts(change, limit)
    if not detail:
        return f"{sign} {path}"
    sep = "" if detail.startswith(":") else " "
    return f"{sign} {path}{sep}{detail}"
