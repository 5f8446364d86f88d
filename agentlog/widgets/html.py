"""HTML reprs: pure builders from summary values to strings, and the ``_repr_html_`` entry points.

The shape follows xarray's ``formatting_html``: every repr is a ``div`` holding the stylesheet
(package data, read once), an escaped ``<pre>`` text fallback that only shows where the CSS
does not load (a viewer that strips ``<style>``), and the HTML itself: a header, a grid of
facts, and ``<details>`` sections that start folded past ``fold_rows`` rows. Long tables are
cut with a count ("… 1,180 more"). Everything that came from a run (names, payload text, tool
and model names, error messages) goes through :func:`html.escape`: agent output is untrusted
HTML. ``agentlog.widgets.set_options(display="text")`` makes the entry points return ``None``,
so notebooks show the plain ``repr``.

The builders (``*_card``) take plain values (mappings and lists) and do no I/O; the entry
points (``*_repr``) gather those values from a run, store, diff or report.

>>> print(fmt_usd(0.0000042), fmt_usd(0.25), fmt_usd(1234.5), fmt_ms(850), fmt_ms(61_500))
$0.0000042 $0.25 $1,234.50 850 ms 1 min 1.5 s
>>> cut("x" * 100, 10)
'xxxxxxxxx… 91 more'
"""

from __future__ import annotations

import datetime
import functools
import html
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

from ..numbers import (
    INCL_PREFIX,
    PAID,
    TOTAL,
    fmt_cost,
    fmt_ms,
    fmt_scalar,
    fmt_usd,
    is_missing,
    usd_sum_known,
)
from .options import OPTIONS

if TYPE_CHECKING:
    from ..analysis.rundiff import RunDiff
    from ..folding.patch import Patch
    from ..store.run import Run
    from ..store.store import Store
    from ..store.verify import VerifyReport

__all__ = ["cut", "diff_card", "diff_facts", "diff_repr", "esc", "fmt_cost", "fmt_int", "fmt_ms", "fmt_num", "fmt_usd",
           "obj_repr", "own_figures", "patch_html", "patch_repr", "patch_table", "run_card", "run_card_of", "run_repr",
           "run_text", "section", "store_card",
           "store_repr", "table",
           "verify_card", "verify_repr"]

CELL_LIMIT: Final = 120   # characters of a table cell
ROW_LIMIT: Final = 200    # rows of a table before "… N more"
STORE_ROWS: Final = 50    # runs listed in a store's repr


@functools.cache
def _css() -> str:
    """The stylesheet, read from package data once per process."""
    return resources.files("agentlog.widgets").joinpath("static/agentlog.css").read_text(encoding="utf-8")


def esc(value: Any) -> str:
    """``value`` as text, escaped for HTML (quotes too, so it is safe in attributes).

    >>> esc('<a href="x">')
    '&lt;a href=&quot;x&quot;&gt;'
    """
    return html.escape(str(value), quote=True)


_e = esc


_missing = is_missing


# --- formatting (pure) -------------------------------------------------------------------------


def fmt_int(value: Any) -> str:
    """``1,204``; ``–`` when missing."""
    return "–" if _missing(value) else f"{int(value):,}"


def fmt_num(value: Any, *, sign: bool = False) -> str:
    """A number with up to 6 decimals and no trailing zeros (``+`` first with ``sign``); ``–`` when
    missing.

    >>> fmt_num(2874.0), fmt_num(0.000864), fmt_num(-3.0, sign=True), fmt_num(-0.0, sign=True)
    ('2,874', '0.000864', '-3', '0')
    """
    if _missing(value):
        return "–"
    x = float(value)
    text = (f"{x:+,.6f}" if sign else f"{x:,.6f}").rstrip("0").rstrip(".")
    return "0" if text in ("+0", "-0") else text


def _fmt_time(value: Any) -> str:
    if _missing(value):
        return "–"
    if isinstance(value, datetime.datetime):  # pandas Timestamps are datetimes
        return value.isoformat(sep=" ", timespec="seconds").replace("+00:00", " UTC")
    iso = getattr(value, "isoformat", None)  # a date, a time
    return str(iso()) if callable(iso) else str(value)


def _fmt(value: Any) -> str:
    if _missing(value):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.6g}" if math.isfinite(value) else str(value)
    if hasattr(value, "isoformat"):
        return _fmt_time(value)
    return str(value)


def cut(text: str, limit: int = CELL_LIMIT) -> str:
    """``text`` cut to ``limit - 1`` characters and ``… N more``."""
    return text if len(text) <= limit else f"{text[:limit - 1]}… {len(text) - limit + 1:,} more"


# --- building blocks (pure) --------------------------------------------------------------------


def obj_repr(text: str, header: str, body: str) -> str:
    """The outer frame: stylesheet, escaped text fallback, then the HTML (hidden without CSS)."""
    return (f'<div class="al-repr"><style>{_css()}</style>'
            f'<pre class="al-text">{_e(text)}</pre>'
            f'<div class="al-wrap" style="display:none">{header}{body}</div></div>')


def header(kind: str, title: str | None, ident: str | None = None,
           badge: tuple[str, str] | None = None) -> str:
    """``agentlog.Run  <title>  <id>  [badge]``; ``badge`` is ``(text, css class)``."""
    parts = [f'<span class="al-obj">agentlog.{_e(kind)}</span>']
    if title:
        parts.append(f'<span class="al-title">{_e(title)}</span>')
    if ident:
        parts.append(f'<span class="al-id">{_e(ident)}</span>')
    if badge is not None:
        parts.append(f'<span class="al-badge {_e(badge[1])}">{_e(badge[0])}</span>')
    return f'<div class="al-header">{"".join(parts)}</div>'


def grid(pairs: Sequence[tuple[str, str]]) -> str:
    """A two-column list of facts; labels and values are plain text (escaped here)."""
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in pairs)
    return f'<dl class="al-grid">{items}</dl>'


def section(title: str, body_html: str, n: int | None = None, *, folded: bool | None = None) -> str:
    """A ``<details>`` section; folded when it has more than ``fold_rows`` items."""
    if folded is None:
        folded = n is not None and n > int(OPTIONS["fold_rows"])
    count = f' <span class="al-count">({n:,})</span>' if n is not None else ""
    state = "" if folded else " open"
    return (f'<li class="al-section"><details{state}><summary>{_e(title)}{count}</summary>'
            f"{body_html}</details></li>")


def sections(items: Sequence[str]) -> str:
    """The list that holds the sections."""
    return f'<ul class="al-sections">{"".join(items)}</ul>' if items else ""


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, numeric: Sequence[bool] = (),
          row_classes: Sequence[str] = (), limit: int = ROW_LIMIT) -> str:
    """An HTML table of formatted, escaped cells, cut after ``limit`` rows with a count."""
    nums = list(numeric) + [False] * (len(columns) - len(numeric))
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = []
    for k, row in enumerate(rows[:limit]):
        cls = f' class="al-{_e(row_classes[k])}"' if k < len(row_classes) else ""
        cells = "".join(f'<td class="al-num">{_e(cut(_fmt(v)))}</td>' if nums[i]
                        else f"<td>{_e(cut(_fmt(v)))}</td>" for i, v in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    if len(rows) > limit:
        body.append(f'<tr class="al-more"><td colspan="{len(columns)}">… {len(rows) - limit:,} more</td></tr>')
    return f'<table class="al-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


# --- Run ---------------------------------------------------------------------------------------

_VERIFIED: Final = {"ok": ("verified", "al-ok"), "not ok": ("verify failed", "al-bad"),
                    "not checked": ("not verified", "al-muted")}


def _status_badge(status: str) -> tuple[str, str]:
    cls = {"finished": "al-ok", "closed": "al-ok", "failed": "al-bad", "open": "al-warn"}
    return status, cls.get(status, "al-muted")


def _money_facts(s: Mapping[str, Any], own: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """``paid`` (the run's own events) and, for a fork, the total with its inherited prefix;
    calls of unknown cost are counted beside, never as $0; with ``own`` (:func:`own_figures`),
    how many answers were served from a recorded run, at no cost."""
    total = fmt_cost(s.get("cost_usd"), s.get("cost_unknown_calls"))
    served = int((own or {}).get("served_answers") or 0)
    note = f" ({fmt_int(served)} answer{'s' if served != 1 else ''} served from a recorded run, at no cost)" \
        if served else ""
    if _missing(s.get("fork_seq")):
        return [(PAID, total + note)]
    return [(PAID, fmt_cost(s.get("own_cost_usd"), s.get("own_cost_unknown_calls")) + note), (TOTAL, total)]


def _tokens(s: Mapping[str, Any]) -> str:
    return (f"{fmt_int(s.get('input_tokens'))} in · {fmt_int(s.get('output_tokens'))} out · "
            f"{fmt_int(s.get('cached_tokens'))} cached")


def _usage_facts(s: Mapping[str, Any], own: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Events, spans, calls, duration and tokens. A fork given ``own`` (its own events' calls and
    tokens) labels each figure as its own or ``incl. inherited prefix``, as paid and total are;
    without ``own``, a fork's figures include the prefix and only the events say how many are its own."""
    if _missing(s.get("fork_seq")) or own is None:
        events = fmt_int(s.get("events"))
        if not _missing(s.get("fork_seq")):
            events += f" ({fmt_int(s.get('own_events'))} own)"
        return [("events", events), ("spans", fmt_int(s.get("spans"))),
                ("model calls", fmt_int(s.get("llm_calls"))), ("tool calls", fmt_int(s.get("tool_calls"))),
                ("duration", fmt_ms(s.get("duration_ms"))), ("tokens", _tokens(s))]

    def both(mine: Any, every: Any) -> str:
        return f"{fmt_int(mine)} own · {fmt_int(every)} {INCL_PREFIX}"

    return [("events", both(s.get("own_events"), s.get("events"))),
            ("spans", f"{fmt_int(s.get('spans'))} {INCL_PREFIX}"),
            ("model calls", both(own.get("llm_calls"), s.get("llm_calls"))),
            ("tool calls", both(own.get("tool_calls"), s.get("tool_calls"))),
            ("duration", f"{fmt_ms(s.get('duration_ms'))} {INCL_PREFIX}"),
            ("tokens (own)", _tokens(own)), (f"tokens {INCL_PREFIX}", _tokens(s))]


def _run_facts(s: Mapping[str, Any], own: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    facts = [
        ("status", str(s.get("status"))),
        *_usage_facts(s, own),
        *_money_facts(s, own),
        ("verified", str(s.get("verified"))),
        ("created", _fmt_time(s.get("created"))),
    ]
    if not _missing(s.get("parent")):
        facts.append(("forked from", f"{s['parent']} at seq {fmt_int(s.get('fork_seq'))}"))
    tags = _tags(s.get("tags"))
    if tags:
        facts.append(("tags", tags))
    return facts


def _tags(value: Any) -> str:
    """Tags as ``key=value`` pairs (the ``tags`` column is JSON text)."""
    import json
    if _missing(value) or value in ("[]", "{}", "null"):
        return ""
    try:
        tags = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return str(value)
    if isinstance(tags, Mapping):
        return ", ".join(f"{k}={v}" for k, v in tags.items())
    return str(tags)


def run_text(s: Mapping[str, Any], own: Mapping[str, Any] | None = None) -> str:
    """The plain-text summary of a run (the HTML's fallback, and ``agentlog show``).

    Args:
        s: the row of ``run.summary()`` as a mapping.
        own: the figures of its own events (:func:`own_figures`): for a fork, its calls and
            tokens (``llm_calls``, ``tool_calls``, ``input_tokens``, ``output_tokens``,
            ``cached_tokens``: the totals of ``run.cost(by="model", own=True)``), each figure
            then saying whether it is the run's own or includes its inherited prefix; for any
            run, ``served_answers``, said beside what it paid.
    """
    name = "" if _missing(s.get("name")) else f" {s['name']!r}"
    lines = [f"Run {s.get('run_id')}{name}"]
    lines.extend(f"  {k}: {v}" for k, v in _run_facts(s, own))
    return "\n".join(lines)


def run_card(summary: Mapping[str, Any], by_model: Sequence[Mapping[str, Any]] = (),
             own: Mapping[str, Any] | None = None) -> str:
    """A run's summary card.

    Args:
        summary: the row of ``run.summary()`` as a mapping.
        by_model: the rows of ``run.cost(by="model", own=True)`` (what the run paid per model).
        own: :func:`own_figures`: for a fork, the sums of those rows (its own calls and
            tokens), shown beside the summary's, which include its inherited prefix; for any
            run, how many answers were served from a recorded run.
    """
    s = summary
    name = None if _missing(s.get("name")) else str(s["name"])
    head = header("Run", name, str(s.get("run_id")), _VERIFIED.get(str(s.get("verified"))))
    items = []
    if by_model:
        cols = ("model", "calls", "input", "output", "cached", PAID)
        rows = [(r.get("model"), r.get("llm_calls") or r.get("calls"), r.get("input_tokens"),
                 r.get("output_tokens"), r.get("cached_tokens"),
                 fmt_cost(r.get("cost_usd"), r.get("cost_unknown_calls"))) for r in by_model]
        title = "Paid by model" + ("" if _missing(s.get("fork_seq")) else " (own events)")
        items.append(section(title, table(cols, rows, numeric=(False, *[True] * 5)), len(rows)))
    return obj_repr(run_text(s, own), head, grid(_run_facts(s, own)) + sections(items))


def _records(frame: Any) -> list[dict[str, Any]]:
    return [{k: (None if _missing(v) else v) for k, v in row.items()}
            for row in frame.to_dict(orient="records")]


def run_repr(run: Run) -> str | None:
    """``Run._repr_html_``: reads ``run.json`` and the run's table; never runs a full verify."""
    if OPTIONS["display"] != "html":
        return None
    return run_card_of(run)


def run_card_of(run: Run) -> str:
    """``run``'s summary card (:func:`run_card`): what it paid by model, and for a fork its own
    calls and tokens beside those incl. its inherited prefix."""
    from ..analysis.cost import cost
    from ..analysis.tables import summary
    own = cost(run, ("model",), own=True)
    rows = sorted((r for r in _records(own) if r.get("llm_calls")), key=lambda r: -float(r.get("cost_usd") or 0))
    return run_card(_records(summary(run))[0], rows, own_figures(run, own))


def own_figures(run: Run, own_cost: Any) -> dict[str, Any]:
    """The run's own calls and tokens (the sums of ``cost(run, "model", own=True)``: for a fork,
    shown beside the summary's, which include its inherited prefix), and ``served_answers``:
    how many of its own model answers were served from a recorded run (a replay's, a fork's),
    which is why they paid nothing."""
    from ..analysis.tables import served_answers
    figures = dict(own_cost.sum(numeric_only=True).to_dict())
    figures["served_answers"] = served_answers(run)
    return figures


# --- Store -------------------------------------------------------------------------------------


def store_text(path: str, runs: Sequence[Mapping[str, Any]]) -> str:
    """The plain-text summary of a store."""
    lines = [f"Store {path}: {len(runs):,} run{'s' if len(runs) != 1 else ''}"]
    for r in runs[:STORE_ROWS]:
        name = "" if _missing(r.get("name")) else f" {r['name']!r}"
        lines.append(f"  {r.get('run_id')}{name} {r.get('status')} {fmt_int(r.get('events'))} events "
                     f"{PAID} {fmt_cost(r.get('own_cost_usd'), r.get('own_cost_unknown_calls'))}")
    if len(runs) > STORE_ROWS:
        lines.append(f"  … {len(runs) - STORE_ROWS:,} more")
    return "\n".join(lines)


def store_card(path: str, runs: Sequence[Mapping[str, Any]]) -> str:
    """A store's card: its runs as a table (the rows of ``store.runs()``)."""
    n = len(runs)
    head = header("Store", path, None, (f"{n:,} run{'s' if n != 1 else ''}", "al-muted"))
    runs_unknown = sum(int(r.get("own_cost_unknown_calls") or 0) for r in runs)
    total = usd_sum_known(r.get("own_cost_usd") for r in runs)
    tokens = sum(int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0) for r in runs)
    facts = [("runs", fmt_int(n)), (PAID, fmt_cost(total, runs_unknown if total is not None else 0)),
             ("tokens", fmt_int(tokens))]
    cols = ("run", "name", "status", "events", "model calls", "tokens", PAID, TOTAL, "created",
            "forked from")
    rows = [(r.get("run_id"), r.get("name"), r.get("status"), r.get("events"), r.get("llm_calls"),
             int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0),
             fmt_cost(r.get("own_cost_usd"), r.get("own_cost_unknown_calls")),
             "" if _missing(r.get("parent")) else fmt_cost(r.get("cost_usd"), r.get("cost_unknown_calls")),
             _fmt_time(r.get("created")),
             None if _missing(r.get("parent")) else f"{r['parent']} @ {fmt_int(r.get('fork_seq'))}")
            for r in runs]
    numeric = (False, False, False, True, True, True, True, True, False, False)
    body = grid(facts) + sections([section("Runs", table(cols, rows, numeric=numeric, limit=STORE_ROWS), n)])
    return obj_repr(store_text(path, runs), head, body)


def store_repr(store: Store) -> str | None:
    """``Store._repr_html_``: the runs table (one DuckDB query over the store)."""
    if OPTIONS["display"] != "html":
        return None
    from ..analysis.storewide import runs
    return store_card(store.url, _records(runs(store)))


# --- Patch -------------------------------------------------------------------------------------

PATCH_CELL: Final = 160   # characters of a value in a patch row


def patch_table(patch: Patch, *, limit: int | None = ROW_LIMIT, empty: str = "no changes") -> str:
    """A :class:`~agentlog.folding.Patch` as an escaped table, one row per op: the op, the whole
    path, and what changed (``before → after``, numbers at a readable precision, money by
    :func:`~agentlog.numbers.fmt_usd`); cut after ``limit`` rows with a count. The one patch
    table of every view (the scrubber, a bare patch, a diff, the report).

    >>> from agentlog.folding import Change, Patch
    >>> page = patch_table(Patch([Change({"op": "replace", "path": "/cost_usd", "value": 0.5}, old=0.25)]))
    >>> "$0.25 → $0.5" in page
    True
    """
    if not len(patch):
        return f'<div class="al-muted">{_e(empty)}</div>'
    changes = patch.changes if limit is None else patch.changes[:limit]
    rows = [f'<tr class="al-{_e(kind)}"><td>{_e(kind)}</td><td class="al-patch-path">{_e(path)}</td>'
            f"<td>{_e(text)}</td></tr>" for kind, path, text in map(_change_cells, changes)]
    if len(changes) < len(patch):
        rows.append(f'<tr><td colspan="3">… {len(patch) - len(changes):,} more</td></tr>')
    return (f'<table class="al-table al-patch"><thead><tr><th>op</th><th>path</th><th>change</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _change_cells(change: Any) -> tuple[str, str, str]:
    from ..folding.patch import NO_VALUE

    op = change.op
    kind, path = str(op.get("op", "")), str(op.get("path", ""))
    if kind in ("move", "copy"):
        return kind, path, f"from {op.get('from')}"
    old = "" if change.old is NO_VALUE else _value_text(change.old, path)
    new = "" if "value" not in op else _value_text(op["value"], path)
    if kind == "test":
        return kind, path, f"== {new}"
    return kind, path, f"{old} → {new}" if old and new else (new or (f"was {old}" if old else ""))


def _value_text(value: Any, path: str) -> str:
    if isinstance(value, (dict, list)) or hasattr(value, "items") or (
            hasattr(value, "__len__") and not isinstance(value, str)):
        from ..folding.values import short
        return short(value, PATCH_CELL)
    return fmt_scalar(value, path.rsplit("/", 1)[-1])


def patch_html(patch: Patch) -> str:
    """A :class:`~agentlog.folding.Patch` as HTML: a header with its op count, the
    :func:`patch_table`, and the text lines in a folded ``<details>``.

    >>> from agentlog.folding import Change, Patch
    >>> page = patch_html(Patch([Change({"op": "replace", "path": "/a", "value": "<b>"}, old=1)]))
    >>> "&lt;b&gt;" in page and "<b>" not in page and "Patch · 1 op" in page
    True
    """
    n = len(patch)
    return (f'<div class="agentlog-patch"><div class="al-header">Patch · {n:,} '
            f'op{"s" if n != 1 else ""}</div>{patch_table(patch)}'
            f"<details><summary>text</summary><pre>{_e(str(patch))}</pre></details></div>")


def patch_repr(patch: Patch) -> str | None:
    """How a bare :class:`~agentlog.folding.Patch` shows in a notebook (``None``: as text)."""
    if OPTIONS["display"] != "html":
        return None
    return patch_html(patch)


# --- RunDiff -----------------------------------------------------------------------------------


def diff_card(facts: Sequence[tuple[str, str]], *, title: str, rows: Sequence[Mapping[str, Any]],
              usage: Sequence[tuple[str, Any, Any, Any]], patch_html: str, patch_ops: int,
              graph: Sequence[Mapping[str, Any]], text: str, same: bool) -> str:
    """A diff's card: facts, the aligned events, the usage delta, the state patch, graph changes.

    Args:
        facts: label/value pairs for the grid.
        title: ``a → b``.
        rows: the rows of ``RunDiff.table()``.
        usage: ``(metric, a, b, delta)``.
        patch_html: the state patch's own HTML repr (already escaped by it).
        patch_ops: how many ops the patch has.
        graph: the rows of ``RunDiff.graph``.
        text: the plain-text fallback.
        same: the runs are the same.
    """
    badge = ("same", "al-ok") if same else ("differ", "al-warn")
    head = header("RunDiff", title, None, badge)
    items = []
    if rows:
        cols = ("status", "seq a", "seq b", "type", "name", "summary")
        body = table(cols, [(r.get("status"), r.get("seq_a"), r.get("seq_b"), r.get("type"),
                             r.get("name"), r.get("summary")) for r in rows],
                     numeric=(False, True, True), row_classes=[str(r.get("status")) for r in rows])
        items.append(section("Events after the divergence", body, len(rows)))
    items.append(section("Usage (b - a)", table(("metric", "a", "b", "delta"), usage,
                                                numeric=(False, True, True, True)), len(usage),
                         folded=False))
    items.append(section("State patch", patch_html, patch_ops))
    if graph:
        body = table(("what", "id", "change", "detail"),
                     [(g.get("what"), g.get("id"), g.get("change"), g.get("detail")) for g in graph])
        items.append(section("Graph changes", body, len(graph)))
    return obj_repr(text, head, grid(facts) + sections(items))


_USAGE_LABELS: Final = {"llm_calls": "model calls", "cost_unknown_calls": "calls of unknown cost"}


def usage_rows(usage: Any) -> list[tuple[str, str, str, str]]:
    """The rows of ``RunDiff.usage`` (metric → a, b, delta) for people: money by ``fmt_usd`` (b − a
    signed), durations in readable units, counts with separators. The cost rows are the runs as
    read: a fork's counts its inherited prefix (the total, not what it paid)."""
    rows = []
    for metric, v in usage.iterrows():
        name = str(metric)
        if name == "cost_usd":
            rows.append((f"{TOTAL} (USD)", fmt_cost(v["a"]), fmt_cost(v["b"]), fmt_cost(v["delta"], sign=True)))
        elif name == "duration_ms":
            delta = float(v["delta"])
            rows.append(("duration", fmt_ms(v["a"]), fmt_ms(v["b"]),
                         ("−" if delta < 0 else "+" if delta > 0 else "") + fmt_ms(abs(delta))))
        else:
            label = _USAGE_LABELS.get(name, name.replace("_", " "))
            rows.append((label, fmt_num(v["a"]), fmt_num(v["b"]), fmt_num(v["delta"], sign=True)))
    return rows


def diff_facts(d: RunDiff) -> list[tuple[str, str]]:
    """The facts at the top of a diff (the card and the report): the two runs, the shared
    prefix, the first divergence and what came after it."""
    facts = [(f"run {k}", f"{r.id}" + (f" ({r.name})" if r.name else "") + f", {len(r):,} events")
             for k, r in (("a", d.a), ("b", d.b))]
    facts.append(("shared prefix", f"{d.prefix:,} events (by {d.prefix_from})"))
    if not d.same:
        facts.append(("first divergence", f"seq {d.divergence}"))
        facts.append(("after it", d.after_text()))
    return facts


def diff_repr(d: RunDiff) -> str | None:
    """``RunDiff._repr_html_`` (computes the state patch if it was not yet)."""
    if OPTIONS["display"] != "html":
        return None
    facts = diff_facts(d)
    usage = usage_rows(d.usage)
    patch = d.state_patch
    return diff_card(facts, title=f"{d.a.name or d.a.id} → {d.b.name or d.b.id}",
                     rows=_records(d.table()), usage=usage, patch_html=patch_html(patch),
                     patch_ops=len(patch), graph=_records(d.graph), text=str(d), same=d.same)


# --- VerifyReport ------------------------------------------------------------------------------


def verify_card(*, run_id: str, ok: bool, events: int, head: str, first_bad_seq: int | None,
                problems: Sequence[tuple[int | None, str, str]], text: str) -> str:
    """A verify report's card: ok, or the problems (seq, kind, message)."""
    badge = ("ok", "al-ok") if ok else (f"{len(problems):,} problem{'s' if len(problems) != 1 else ''}",
                                        "al-bad")
    facts = [("events", fmt_int(events)), ("head", f"{head[:16]}…" if head else "–")]
    if not ok:
        facts.append(("first bad seq", "–" if first_bad_seq is None else f"{first_bad_seq:,}"))
    items = []
    if problems:
        rows = [("run" if seq is None else seq, kind, message) for seq, kind, message in problems]
        items.append(section("Problems", table(("seq", "kind", "message"), rows, numeric=(True,)),
                             len(rows), folded=False))
    return obj_repr(text, header("VerifyReport", None, run_id, badge), grid(facts) + sections(items))


def verify_repr(report: VerifyReport) -> str | None:
    """``VerifyReport._repr_html_``."""
    if OPTIONS["display"] != "html":
        return None
    return verify_card(run_id=report.run_id, ok=report.ok, events=report.events, head=report.head,
                       first_bad_seq=report.first_bad_seq,
                       problems=[(p.seq, p.kind, p.message) for p in report.problems], text=str(report))
