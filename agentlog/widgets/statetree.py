"""A fold state as a collapsible HTML tree, with the paths a patch changed highlighted.

:func:`render_state` turns a state (``PMap`` / ``PVector`` / scalars / blob references) into
nested ``<details>`` elements. The paths a :class:`~agentlog.folding.Patch` changed (RFC 6901
pointers, as :func:`~agentlog.folding.diff_states` writes them) are marked: the changed node
gets the class ``al-st-hl``, and every node above it is open and gets ``al-st-path``.
Everything else starts folded below the root.

The HTML stays small whatever the state holds, because a step of a long run must render in
milliseconds:

- a map or list shows its first ``max_children`` children (maps in sorted key order), then
  "… and K more"; children on a highlighted path are always shown, wherever they are;
- below the last open node, only ``depth`` more levels are written out (folded); deeper
  containers, and every container once ``budget`` nodes are written, show a one-line
  preview that is built without reading the whole subtree;
- long strings and blobs show a preview in the summary and a cut text when unfolded.

Every key and value goes through :func:`html.escape`. Pure: state and patch in, HTML out
(a blob preview reads the blob through its reference, and only when it is small).

>>> from agentlog.folding import apply_patch, diff_states, freeze
>>> a = freeze({"vars": {"a/b": 1, "n": [1, 2]}, "status": "<ok>"})
>>> b = apply_patch(a, [{"op": "replace", "path": "/vars/a~1b", "value": 2}])
>>> patch = diff_states(a, b)
>>> highlighted_paths(patch)
['/vars/a~1b']
>>> html_text = render_state(b, patch)
>>> 'data-path="/vars/a~1b"' in html_text, "&lt;ok&gt;" in html_text
(True, True)
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..folding.pointer import escape_token, parse_pointer
from ..numbers import fmt_scalar
from .html import esc as _e

__all__ = ["MAX_CHILDREN", "highlighted_paths", "marked_paths", "render_state"]

MAX_CHILDREN: Final = 50   # children of one node before "… and K more"
DEPTH: Final = 2           # folded levels written out below the last open node
BUDGET: Final = 1_500      # nodes written in one tree before containers become previews
VALUE_LIMIT: Final = 100   # characters of a value on its line
TEXT_LIMIT: Final = 4_000  # characters of a long string or blob shown when unfolded
BLOB_PREVIEW_MAX: Final = 262_144  # blobs larger than this are not read for a preview
MAX_MARKS: Final = 300     # highlighted paths opened in one tree (the first ones, in patch order)

_TEXT = (str, bytes, bytearray)
_MISSING: Any = object()
_blob_previews: dict[str, str] = {}  # digest -> preview text (content-addressed, so never stale)


def _is_blob(value: Any) -> bool:
    return hasattr(value, "digest") and hasattr(value, "size") and hasattr(value, "to_json")


def _is_map(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_seq(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, _TEXT)


# --- which paths ---------------------------------------------------------------------------------


def highlighted_paths(patch: Iterable[Any] | None) -> list[str]:
    """The pointers a patch changes, in order, each once: what the tree highlights.

    Args:
        patch: a :class:`~agentlog.folding.Patch` (or a list of op mappings), a list of pointer
            strings, or ``None``.

    Returns:
        The paths (``test`` ops change nothing; a ``move`` changes its ``from`` too).

    >>> highlighted_paths([{"op": "add", "path": "/a/-", "value": 1}, {"op": "test", "path": "/b"}])
    ['/a/-']
    >>> highlighted_paths(["/x", "/x", "/y"])
    ['/x', '/y']
    """
    if patch is None:
        return []
    paths = getattr(patch, "paths", None)
    if paths is not None:
        return list(paths)
    seen: dict[str, None] = {}
    for item in patch:
        if isinstance(item, str):
            seen[item] = None
            continue
        kind = item.get("op")
        if kind == "test":
            continue
        if kind == "move" and isinstance(item.get("from"), str):
            seen[item["from"]] = None
        seen[str(item.get("path", ""))] = None
    return list(seen)


def _child(value: Any, token: str) -> tuple[str, Any]:
    """``(token as the tree names it, child)`` or ``(token, _MISSING)``."""
    if _is_map(value):
        return token, value.get(token, _MISSING)
    if _is_seq(value):
        n = len(value)
        if token == "-":  # an append: the element now last
            return (str(n - 1), value[n - 1]) if n else (token, _MISSING)
        if token.isdigit() and int(token) < n:
            return str(int(token)), value[int(token)]
    return token, _MISSING


def _resolve(state: Any, pointer: str) -> tuple[list[str], bool]:
    """The tokens of ``pointer`` that exist in ``state`` (``-`` made an index), and whether all do."""
    try:
        tokens = parse_pointer(pointer)
    except (TypeError, ValueError):
        return [], False
    found: list[str] = []
    value = state
    for token in tokens:
        name, value = _child(value, token)
        if value is _MISSING:
            return found, False
        found.append(name)
    return found, True


class _Trie:
    __slots__ = ("children", "hit")

    def __init__(self) -> None:
        self.hit = False
        self.children: dict[str, _Trie] = {}


def _trie(state: Any, paths: Iterable[str]) -> _Trie | None:
    root: _Trie | None = None
    for pointer in paths:
        tokens, whole = _resolve(state, pointer)
        if root is None:
            root = _Trie()
        node = root
        for token in tokens:
            node = node.children.setdefault(token, _Trie())
        if whole:
            node.hit = True
    return root


def marked_paths(state: Any, patch: Iterable[Any] | None) -> list[str]:
    """The nodes of ``state`` the tree marks as changed, as pointers (``-`` made an index).

    Paths that no longer exist (a removed key) mark nothing themselves; their parent is
    open and marked as on a path.

    >>> from agentlog.folding import freeze
    >>> marked_paths(freeze({"log": [1, 2], "x~y": 1}), ["/log/-", "/x~0y", "/gone"])
    ['/log/1', '/x~0y']
    """
    out: list[str] = []
    for pointer in highlighted_paths(patch):
        tokens, whole = _resolve(state, pointer)
        if whole:
            text = "".join("/" + escape_token(t) for t in tokens)
            if text not in out:
                out.append(text)
    return out


# --- previews ------------------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _preview(value: Any, limit: int = VALUE_LIMIT) -> str:
    """One line of JSON-like text, built piece by piece and stopped at ``limit`` characters
    (a big subtree is never read past what is shown)."""
    parts: list[str] = []
    size = 0

    def put(text: str) -> bool:
        nonlocal size
        parts.append(text)
        size += len(text)
        return size < limit

    def walk(v: Any) -> bool:
        if _is_blob(v):
            return put(f"<blob {v.size:,} bytes>")
        if _is_map(v):
            if not put("{"):
                return False
            keys = _first_keys(v, 8)
            for i, k in enumerate(keys):
                if (i and not put(", ")) or not put(_scalar(str(k)) + ": ") or not walk(v[k]):
                    return False
            if len(v) > len(keys) and not put(", …"):
                return False
            return put("}")
        if _is_seq(v):
            if not put("["):
                return False
            for i in range(min(len(v), 8)):
                if (i and not put(", ")) or not walk(v[i]):
                    return False
            if len(v) > 8 and not put(", …"):
                return False
            return put("]")
        if isinstance(v, str) and len(v) > limit:
            return put(_scalar(v[:limit]))
        return put(_scalar(v))

    walk(value)
    text = "".join(parts)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _sort_key(key: Any) -> tuple[int, Any]:
    return (0, key) if isinstance(key, str) else (1, repr(key))


def _first_keys(value: Mapping[Any, Any], n: int) -> list[Any]:
    """The ``n`` smallest keys in sorted order (a PMap's own order depends on the hash seed)."""
    try:  # string keys (JSON): compared in C
        return sorted(value)[:n] if len(value) <= n * 4 else heapq.nsmallest(n, value)
    except TypeError:  # keys of mixed types
        return heapq.nsmallest(n, value, key=_sort_key)


def _blob_preview(ref: Any) -> str:
    """A short text preview of a small textual blob; a note otherwise. Cached by digest."""
    digest = str(ref.digest)
    cached = _blob_previews.get(digest)
    if cached is not None:
        return cached
    media = str(getattr(ref, "media_type", "") or "")
    textual = media.startswith("text/") or "json" in media or "xml" in media
    if not textual:
        text = f"({media or 'binary'}; read it with .read_bytes())"
    elif int(ref.size) > BLOB_PREVIEW_MAX:
        text = f"(not previewed: {int(ref.size):,} bytes; read it with .text())"
    else:
        try:
            data = ref.read_bytes()
            text = data[: TEXT_LIMIT * 4].decode("utf-8", errors="replace")[:TEXT_LIMIT]
            if len(data) > len(text):
                text += f"… ({len(data):,} bytes)"
        except Exception as exc:  # noqa: BLE001 - a missing store or blob: say so, keep the view
            text = f"(not readable: {type(exc).__name__}: {exc})"
    if len(_blob_previews) > 1_024:
        _blob_previews.clear()
    _blob_previews[digest] = text
    return text


# --- the tree ------------------------------------------------------------------------------------


class _Render:
    def __init__(self, max_children: int, depth: int, budget: int) -> None:
        self.max_children = max_children
        self.depth = depth
        self.budget = budget
        self.out: list[str] = []

    def node(self, label: str, value: Any, pointer: str, trie: _Trie | None, below: int,
             force_open: bool = False) -> None:
        """Write one ``<li>``; ``below``: levels under the last open node."""
        self.budget -= 1
        hit = trie is not None and trie.hit
        classes = "al-st-hl" if hit else ("al-st-path" if trie is not None else "")
        attrs = f' class="{classes}" data-path="{_e(pointer)}"' if classes else ""
        key = f'<span class="al-st-key">{_e(label)}</span>' if label else ""
        if _is_blob(value):
            self._blob(key, value, attrs)
        elif _is_map(value) or _is_seq(value):
            self._container(key, value, pointer, trie, below, attrs, force_open)
        elif isinstance(value, str) and len(value) > VALUE_LIMIT:
            self.out.append(f'<li{attrs}><details class="al-st-long"><summary>{key}'
                            f'<span class="al-st-val">{_e(_preview(value))}</span> '
                            f'<span class="al-st-meta">{len(value):,} chars</span></summary>'
                            f'<pre>{_e(value[:TEXT_LIMIT])}'
                            f'{_e(f"… {len(value) - TEXT_LIMIT:,} more") if len(value) > TEXT_LIMIT else ""}'
                            f"</pre></details></li>")
        else:
            self.out.append(f'<li{attrs}>{key}<span class="al-st-val">{_e(fmt_scalar(value, label))}</span></li>')

    def _blob(self, key: str, ref: Any, attrs: str) -> None:
        media = _e(getattr(ref, "media_type", "") or "")
        digest = str(ref.digest)
        self.out.append(f'<li{attrs}><details class="al-st-blob"><summary>{key}'
                        f'<span class="al-st-val">blob {_e(digest[:19])}…</span> '
                        f'<span class="al-st-meta">{int(ref.size):,} bytes · {media}</span></summary>'
                        f"<pre>{_e(_blob_preview(ref))}</pre></details></li>")

    def _container(self, key: str, value: Any, pointer: str, trie: _Trie | None, below: int,
                   attrs: str, force_open: bool) -> None:
        is_map = _is_map(value)
        n = len(value)
        meta = (f"{{{n:,} key{'s' if n != 1 else ''}}}" if is_map
                else f"[{n:,} item{'s' if n != 1 else ''}]")
        open_ = n > 0 and (force_open or trie is not None)  # on a path, or the parent of a removed key
        write_kids = n > 0 and (open_ or (below < self.depth and self.budget > 0))
        if not write_kids:
            preview = f' <span class="al-st-val">{_e(_preview(value))}</span>' if n else ""
            self.out.append(f'<li{attrs}>{key}<span class="al-st-meta">{meta}</span>{preview}</li>')
            return
        self.out.append(f'<li{attrs}><details{" open" if open_ else ""}><summary>{key}'
                        f'<span class="al-st-meta">{meta}</span></summary><ul class="al-st-kids">')
        kids = trie.children if trie is not None else {}
        next_below = 0 if open_ else below + 1
        if is_map:
            self._map_children(value, pointer, kids, next_below)
        else:
            self._seq_children(value, pointer, kids, next_below)
        self.out.append("</ul></details></li>")

    def _more(self, k: int) -> None:
        self.out.append(f'<li class="al-st-more">… and {k:,} more</li>')

    def _map_children(self, value: Mapping[Any, Any], pointer: str, kids: dict[str, _Trie],
                      below: int) -> None:
        shown = _first_keys(value, self.max_children)
        in_shown = set(shown)
        extra = [k for k in kids if k in value and k not in in_shown][: self.max_children]
        for k in shown:
            self.node(str(k), value[k], f"{pointer}/{escape_token(str(k))}", kids.get(str(k)), below)
        hidden = len(value) - len(shown)
        if extra:
            for k in sorted(extra, key=_sort_key):
                self.node(str(k), value[k], f"{pointer}/{escape_token(k)}", kids[k], below)
            hidden -= len(extra)
        if hidden > 0:
            self._more(hidden)

    def _seq_children(self, value: Sequence[Any], pointer: str, kids: dict[str, _Trie],
                      below: int) -> None:
        n = len(value)
        head = min(n, self.max_children)
        wanted = sorted({int(k) for k in kids if k.isdigit() and head <= int(k) < n})[: self.max_children]
        last = head
        for i in range(head):
            self.node(str(i), value[i], f"{pointer}/{i}", kids.get(str(i)), below)
        for i in wanted:
            if i > last:
                self._more(i - last)
            self.node(str(i), value[i], f"{pointer}/{i}", kids[str(i)], below)
            last = i + 1
        if n > last:
            self._more(n - last)


def render_state(state: Any, patch: Iterable[Any] | None = None, *, label: str = "state",
                 max_children: int = MAX_CHILDREN, depth: int = DEPTH, budget: int = BUDGET) -> str:
    """Render a state as a tree of ``<details>``, highlighting the paths ``patch`` changed.

    Args:
        state: a fold state, or any frozen (or plain) JSON value.
        patch: what to highlight: a :class:`~agentlog.folding.Patch`, op mappings, pointer
            strings, or ``None``.
        label: the root's label.
        max_children: children shown per node before "… and K more" (highlighted ones are
            always shown).
        depth: folded levels written out below the last open node.
        budget: nodes written before the remaining containers become one-line previews.

    Returns:
        An HTML fragment (``<div class="al-st">``), every key and value escaped.
    """
    r = _Render(max(1, max_children), max(0, depth), budget)
    paths = highlighted_paths(patch)
    trie = _trie(state, paths[:MAX_MARKS])
    r.out.append('<div class="al-st">')
    if len(paths) > MAX_MARKS:
        r.out.append(f'<div class="al-st-more">{len(paths):,} changed paths; the first {MAX_MARKS:,} '
                     "are marked</div>")
    r.out.append('<ul class="al-st-root">')
    r.node(label, state, "", trie, 0, force_open=True)  # the root is always open
    r.out.append("</ul></div>")
    return "".join(r.out)
