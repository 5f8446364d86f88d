"""The span tree: every span of a run with its duration, tokens and cost, collapsible, as the
view people know from Phoenix and LangSmith.

:func:`tree_rows` turns a span table (``run.spans()``'s columns) into rows in tree order (each
span under its parent, children in start order) with the numbers already written for people
(durations by :func:`~agentlog.numbers.fmt_ms`, money by
:func:`~agentlog.numbers.fmt_usd`, roll-ups over the span's descendants).
:func:`tree_html` draws them as nested ``<details>`` (static HTML: the report, exports), and
:class:`SpanTree` as a small anywidget whose rows fold and unfold in the browser and whose
``selected`` trait follows a click, so the waterfall selects the same span.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..numbers import fmt_ms, fmt_usd, is_missing, unknown_text
from .html import esc as _e

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SpanTree", "tree_html", "tree_rows"]

ROW_LIMIT: Final = 2_000  # rows sent to the tree (a larger run is aggregated in the waterfall anyway)


def _int(value: Any) -> int:
    return 0 if is_missing(value) else int(value)


def tree_rows(spans: pd.DataFrame, *, limit: int = ROW_LIMIT) -> list[dict[str, Any]]:
    """The spans in tree order, each a dict: ``id``, ``parent``, ``depth``, ``name``, ``kind``,
    ``status``, ``duration``, ``tokens``, ``cost`` (the span and its descendants), ``kids``
    (how many children).

    >>> import pandas as pd
    >>> t = pd.DataFrame({"span_id": ["a", "b"], "parent": [None, "a"], "name": ["agent", "llm"],
    ...     "kind": ["agent", "llm"], "status": ["ok", "ok"], "duration_ms": [1500.0, 900.0],
    ...     "start_seq": [0, 1], "total_input_tokens": [10, 10], "total_output_tokens": [2, 2],
    ...     "total_cost_usd": [0.000593, 0.000593], "total_cost_unknown_calls": [0, 0]})
    >>> [(r["id"], r["depth"], r["duration"], r["cost"], r["kids"]) for r in tree_rows(t)]
    [('a', 0, '1.5 s', '$0.000593', 1), ('b', 1, '900 ms', '$0.000593', 0)]
    """
    records = spans.sort_values("start_seq", kind="stable").to_dict(orient="records")
    ids = {str(r["span_id"]) for r in records}
    kids: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        parent = None if is_missing(r.get("parent")) or str(r["parent"]) not in ids else str(r["parent"])
        kids[parent].append(r)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()

    def walk(parent: str | None, depth: int) -> None:
        for r in kids.get(parent, []):
            sid = str(r["span_id"])
            if sid in seen or len(out) >= limit:
                continue
            seen.add(sid)
            tokens_in, tokens_out = _int(r.get("total_input_tokens")), _int(r.get("total_output_tokens"))
            out.append({"id": sid, "parent": parent, "depth": depth, "name": str(r.get("name") or sid),
                        "kind": str(r.get("kind") or ""), "status": str(r.get("status") or ""),
                        "duration": fmt_ms(r.get("duration_ms")),
                        "tokens": f"{tokens_in + tokens_out:,}" if tokens_in or tokens_out else "",
                        "cost": (fmt_usd(r.get("total_cost_usd")) + unknown_text(r.get("total_cost_unknown_calls"))
                                 if r.get("total_cost_usd") or _int(r.get("total_cost_unknown_calls")) else ""),
                        "kids": len(kids.get(sid, []))})
            walk(sid, depth + 1)

    walk(None, 0)
    return out


def _line(r: dict[str, Any]) -> str:
    bad = " al-bad" if r["status"] == "error" else ""
    return (f'<span class="al-tr-name{bad}">{_e(r["name"])}</span>'
            f'<span class="al-tr-kind">{_e(r["kind"])}</span>'
            f'<span class="al-tr-num">{_e(r["duration"])}</span>'
            f'<span class="al-tr-num">{_e(r["tokens"])}</span>'
            f'<span class="al-tr-num">{_e(r["cost"])}</span>')


def tree_html(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`tree_rows` as nested ``<details>`` (every value escaped)."""
    head = ('<div class="al-tree"><div class="al-tr-head"><span class="al-tr-name">span</span>'
            '<span class="al-tr-kind">kind</span><span class="al-tr-num">duration</span>'
            '<span class="al-tr-num">tokens</span><span class="al-tr-num">cost</span></div>')
    out = [head]
    depth_stack: list[int] = []
    for r in rows:
        while depth_stack and depth_stack[-1] >= r["depth"]:
            depth_stack.pop()
            out.append("</details>")
        if r["kids"]:
            out.append(f'<details open data-span="{_e(r["id"])}"><summary>{_line(r)}</summary>')
            depth_stack.append(r["depth"])
        else:
            out.append(f'<div class="al-tr-leaf" data-span="{_e(r["id"])}">{_line(r)}</div>')
    out.extend("</details>" for _ in depth_stack)
    out.append("</div>")
    return "".join(out)


def _esm() -> str:
    return (Path(__file__).parent / "static" / "spantree.js").read_text(encoding="utf-8")


def _make_class() -> type:
    import anywidget
    import traitlets

    class SpanTree(anywidget.AnyWidget):
        """The span tree as a widget: ``rows`` (from :func:`tree_rows`), ``selected`` (the span
        id a click picked, or set from Python to highlight one), ``collapsed`` (folded ids)."""

        _esm = _esm()
        _css = (Path(__file__).parent / "static" / "spantree.css").read_text(encoding="utf-8")
        rows: Any = traitlets.List([]).tag(sync=True)
        selected = traitlets.Unicode("").tag(sync=True)
        collapsed: Any = traitlets.List([]).tag(sync=True)

    return SpanTree


_CLASS: type | None = None


def SpanTree(rows: list[dict[str, Any]], **kwargs: Any) -> Any:
    """A :class:`SpanTree` widget (anywidget is imported only when one is made)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _make_class()
    return _CLASS(rows=rows, **kwargs)
