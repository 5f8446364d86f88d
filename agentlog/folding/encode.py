"""A state as content-addressed nodes: the canonical encoding of each node, and its digest.

Every :class:`~agentlog.folding.persistent.PMap` and :class:`~agentlog.folding.persistent.PVector`
node has exactly one encoding, compact JSON in UTF-8 (as orjson writes it), and its *digest*
is the SHA-256 of that encoding. Because a map's shape depends only on its keys and a vector's only on its length,
two equal states have equal digests in every process, and two states that share a subtree
share its digest: checkpoints store each node once under its digest (as git stores trees), and
``diff_states`` skips subtrees whose digests agree.

The encodings (``h`` height, ``n`` size):

- map leaf ``["m", [keys], [values]]``; inner map node ``["M", h, [last keys], [sizes],
  [levels], [children]]``;
- vector leaf ``["v", [values]]``; inner vector node ``["V", h, [sizes], [children]]``;
- a value is a JSON scalar, a blob reference object (``{"$blob": ...}``), or a container: its
  own encoding written in place when that is at most :data:`INLINE` bytes, else a reference:
  ``["#m", digest, h, n, last key, level]`` or ``["#v", digest, h, n]`` (a child of an inner
  node: ``["#", digest]``, its shape being in the parent's lists).

Where a referenced node is stored is not part of any encoding (so digests are facts about
content): the caller's :class:`Sink` returns a location for each stored node, and the
locations of a node's references travel beside its encoding, in the order they appear.

Pure: no I/O. The sink stores; :func:`decode` makes shells whose loader the caller gives.

>>> from agentlog.folding import freeze
>>> a, b = freeze({"x": [1, 2], "y": "z"}), freeze({"y": "z", "x": [1, 2]})
>>> digest(a) == digest(b) and len(digest(a)) == 32
True
>>> encoding(a)
b'["m",["x","y"],[["v",[1,2]],"z"]]'
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from typing import Any, Final, Protocol

import orjson

from .._words import with_article
from ..canonical import long_int
from ..events import BlobRef
from .persistent import (
    PMap,
    PVector,
    _node,
    _vnode,
    fill_map,
    fill_vector,
    shell_map,
    shell_vector,
)

__all__ = ["INLINE", "Sink", "decode", "digest", "encode", "encoding", "fill", "make_shell", "referenced",
           "root_code"]

INLINE: Final = 256
"""A container whose encoding is at most this many bytes is written inside its parent."""

_SCALARS = frozenset({str, int, float, bool, type(None)})
_json = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _dumps(code: Any) -> bytes:
    """Compact JSON in UTF-8: orjson's (non-finite floats were refused before), or the
    standard library's for what orjson does not take (integers past 64 bits)."""
    try:
        return orjson.dumps(code)
    except TypeError:
        return _json(code).encode("utf-8", "surrogatepass")


class Sink(Protocol):
    """Where :func:`encode` puts the nodes it stores (the store's checkpoint writer).

    A location must have a ``size`` attribute: the length of the node's encoding.
    """

    def stored(self, node: Any) -> Any | None:
        """The location of ``node`` if this sink holds it and it is referenced, not inline
        (see :func:`referenced`), else None."""

    def put(self, digest: bytes, data: bytes, locations: list[Any]) -> Any:
        """Store a node's encoding with its references' locations; return its location."""


def referenced(node: Any) -> Any | None:
    """The location of a node that is stored and must be referenced (its encoding is over
    :data:`INLINE` bytes, as its location says), else None. A small node is always written
    inline, even if it was stored once as a checkpoint's root: one encoding per content."""
    at = node._at
    if at is not None and node._d is not None and getattr(at, "size", 0) > INLINE:
        return at
    return None


class _Memo:
    """Digest-only encoding: nothing stored; stored subtrees are not descended into."""

    def stored(self, node: Any) -> Any | None:
        return referenced(node)

    def put(self, digest: bytes, data: bytes, locations: list[Any]) -> Any:
        return None


def _where(path: tuple[Any, ...]) -> str:
    return "".join(f"/{p}" for p in path) or "the root"


def _value(value: Any, sink: Sink, locs: list[Any], path: tuple[Any, ...]) -> Any:
    """The code of one value: a scalar as it is; a container inline or as a reference."""
    t = type(value)
    if t in _SCALARS:
        if t is float and not math.isfinite(value):
            raise ValueError(f"cannot encode {value!r} at {_where(path)}: not JSON")
        return value
    if t is PMap or t is PVector:
        return _child(value, sink, locs, path, typed=True)
    if isinstance(value, BlobRef):
        return value.to_json()
    raise TypeError(f"cannot encode {with_article(t.__name__)} at {_where(path)} in a checkpoint: a state "
                    "holds JSON values (and blob references)")


def _child(node: Any, sink: Sink, locs: list[Any], path: tuple[Any, ...], *, typed: bool) -> Any:
    at = sink.stored(node)
    if at is None:
        code, inner = _code(node, sink, path)
        data = _dumps(code)
        if len(data) <= INLINE:
            locs.extend(inner)
            if node._d is None:
                node._d = hashlib.sha256(data).digest()
            return code
        node._d = hashlib.sha256(data).digest()
        at = sink.put(node._d, data, inner)
        if at is not None:
            node._at = at
    locs.append(at)
    hexd = node._d.hex()
    if not typed:
        return ["#", hexd]
    if type(node) is PMap:
        return ["#m", hexd, node._h, node._n, node._lk, node._lv]
    return ["#v", hexd, node._h, node._n]


def _code(node: Any, sink: Sink, path: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
    """A node's encoding as a JSON-ready list, and its references' locations in order."""
    locs: list[Any] = []
    if type(node) is PMap:
        keys, vals = node._kv()
        if node._h == 0:
            return ["m", list(keys), [_value(v, sink, locs, path + (k,)) for k, v in zip(keys, vals)]], locs
        kids = [_child(kid, sink, locs, path, typed=False) for kid in vals]
        return ["M", node._h, list(keys), [kid._n for kid in vals], [kid._lv for kid in vals], kids], locs
    items = node._items()
    if node._h == 0:
        return ["v", [_value(v, sink, locs, path + (i,)) for i, v in enumerate(items)]], locs
    kids = [_child(kid, sink, locs, path, typed=False) for kid in items]
    return ["V", node._h, [kid._n for kid in items], kids], locs


def encode(state: Any, sink: Sink) -> tuple[list[Any], Any]:
    """Store every node of ``state`` that ``sink`` does not hold yet; return the root's
    reference code and location.

    Subtrees the sink already holds are not descended into, so encoding a state that shares
    most of its nodes with one stored before costs what changed. The root is always stored.

    Raises:
        TypeError, ValueError: the state holds something that is not JSON (named by path).
    """
    at = sink.stored(state)
    if at is None:
        code, locs = _code(state, sink, ())
        data = _dumps(code)
        state._d = hashlib.sha256(data).digest()
        at = sink.put(state._d, data, locs)
        if at is not None and len(data) > INLINE:
            state._at = at
    return root_code(state), at


def root_code(node: Any) -> list[Any]:
    """The reference code of a node that has a digest (as a checkpoint's manifest names it)."""
    hexd = node._d.hex()
    if type(node) is PMap:
        return ["#m", hexd, node._h, node._n, node._lk, node._lv]
    return ["#v", hexd, node._h, node._n]


def encoding(node: Any) -> bytes:
    """The canonical encoding of a map or vector node (children referenced or inline)."""
    code, _ = _code(node, _Memo(), ())
    return _dumps(code)


def digest(node: Any) -> bytes:
    """The SHA-256 of a node's encoding (computed once per node, then kept on it).

    Raises:
        TypeError, ValueError: the value holds something that is not JSON.
    """
    d = node._d
    if d is None:
        d = node._d = hashlib.sha256(encoding(node)).digest()
    return d  # type: ignore[no-any-return]


# --- decoding ----------------------------------------------------------------------------------

#: ``shell(code, location) -> node``: a node not yet filled, for a reference code.
ShellFactory = Callable[[list[Any], Any], Any]


def decode(data: bytes, locations: list[Any], shell: Callable[[str, Any, Any, Any], Any],
           blob: Callable[[dict[str, Any]], Any]) -> tuple[str, int, tuple[Any, ...], tuple[Any, ...] | None]:
    """Read a node's encoding: ``(kind, height, keys or items, values)``.

    Args:
        data: the encoding.
        locations: where its references are stored, in the order they appear.
        shell: ``shell(kind, digest, shape, location)`` makes a node to be filled later:
            ``kind`` is ``"m"``/``"v"``, ``shape`` is ``(h, n, last key, level)`` or ``(h, n)``.
        blob: makes a value of a blob reference object.

    Returns:
        For a map node ``("m", h, keys, values)``; for a vector node ``("v", h, items, None)``.
    """
    if not long_int(data):
        code = orjson.loads(data)
    else:  # maybe an integer past 64 bits, which orjson would read as a float
        code = json.loads(data)
    it = iter(locations)
    return _decode_node(code, it, shell, blob)


def _decode_node(code: list[Any], it: Iterator[Any], shell: Any, blob: Any
                 ) -> tuple[str, int, tuple[Any, ...], tuple[Any, ...] | None]:
    tag = code[0]
    if tag == "m":
        return "m", 0, tuple(code[1]), tuple(_decode_value(v, it, shell, blob) for v in code[2])
    if tag == "v":
        return "v", 0, tuple(_decode_value(v, it, shell, blob) for v in code[1]), None
    if tag == "M":
        _, h, last, sizes, levels, kids = code
        children = tuple(_decode_kid("m", kid, (h - 1, n, lk, lv), it, shell, blob)
                         for kid, n, lk, lv in zip(kids, sizes, last, levels, strict=True))
        return "m", h, tuple(last), children
    if tag == "V":
        _, h, sizes, kids = code
        return "v", h, tuple(_decode_kid("v", kid, (h - 1, n), it, shell, blob)
                             for kid, n in zip(kids, sizes, strict=True)), None
    raise ValueError(f"not a node encoding: tag {tag!r}")


def _decode_kid(kind: str, code: list[Any], shape: tuple[Any, ...], it: Iterator[Any], shell: Any,
                blob: Any) -> Any:
    if code[0] == "#":
        return shell(kind, bytes.fromhex(code[1]), shape, next(it))
    return _inline(code, it, shell, blob)


def _decode_value(value: Any, it: Iterator[Any], shell: Any, blob: Any) -> Any:
    t = type(value)
    if t is list:
        tag = value[0]
        if tag == "#m":
            return shell("m", bytes.fromhex(value[1]), tuple(value[2:6]), next(it))
        if tag == "#v":
            return shell("v", bytes.fromhex(value[1]), tuple(value[2:4]), next(it))
        return _inline(value, it, shell, blob)
    if t is dict:
        return blob(value)
    return value


def _inline(code: list[Any], it: Iterator[Any], shell: Any, blob: Any) -> Any:
    kind, h, first, second = _decode_node(code, it, shell, blob)
    if kind == "m":
        assert second is not None
        return _node(first, second, h, 0, 0) if not first else _map_node(first, second, h)
    return _vec_node(first, h)


def _map_node(keys: tuple[Any, ...], values: tuple[Any, ...], h: int) -> Any:
    from .persistent import _level
    if h == 0:
        return _node(keys, values, 0, _level(keys[-1]), len(keys))
    return _node(keys, values, h, values[-1]._lv, sum(kid._n for kid in values))


def _vec_node(items: tuple[Any, ...], h: int) -> Any:
    if h == 0:
        return _vnode(items, 0, len(items))
    return _vnode(items, h, sum(kid._n for kid in items))


def fill(node: Any, data: bytes, locations: list[Any], shell: Callable[[str, Any, Any, Any], Any],
         blob: Callable[[dict[str, Any]], Any]) -> None:
    """Fill a shell with its decoded encoding (the caller checked ``data`` against its digest).

    Raises:
        ValueError: the encoding is not the node's kind or height.
    """
    kind, h, first, second = decode(data, locations, shell, blob)
    if h != node._h or (kind == "m") != (type(node) is PMap):
        raise ValueError(f"the stored node is {with_article(kind)} node of height {h}, expected "
                         f"{'m' if type(node) is PMap else 'v'} of height {node._h}")
    if kind == "m":
        assert second is not None
        fill_map(node, first, second)
    else:
        fill_vector(node, first)


def make_shell(kind: str, digest: bytes, shape: tuple[Any, ...], at: Any) -> Any:
    """A shell for a reference (``shape`` as :func:`decode` gives it); ``at`` fills it."""
    if kind == "m":
        h, n, last, level = shape
        return shell_map(h, n, last, level, digest, at)
    h, n = shape
    return shell_vector(h, n, digest, at)
