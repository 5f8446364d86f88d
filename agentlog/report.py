"""The static HTML report: one self-contained file that opens offline, in any browser.

``write_report(run, "report.html")`` writes a run's summary card, verify result, span
waterfall, cost tables and charts, and its event list with every payload (in ``<details>``);
``vs=other`` adds the side-by-side diff of the two runs (where they part, the aligned events
after it coloured by status, the usage delta, the state patch and graph changes).

- **Offline and small:** the stylesheet (``agentlog/widgets/static/agentlog.css`` and the page's
  own rules) is inlined; every figure is a ``div`` and a ``Plotly.newPlot`` call with its JSON.
  plotly.js (4.7 MB, most of a report's size) is by default one shared copy next to the
  reports, ``plotly-<version>.min.js``, written once and loaded by a relative ``<script src>``
  (a report of 150 events is then about 200 KB instead of 5 MB); ``plotly="inline"`` puts it
  in the page instead, for one self-contained file. Nothing is fetched from the network: no
  CDN, no MathJax, no fonts.
- **Escaped:** every string that came from a run (names, payloads, tool and model names,
  errors) goes through :func:`html.escape`; plotly's JSON escapes ``<``, ``>`` and ``/``.
- **Bounded:** a long run lists its first :data:`EVENT_LIMIT` events, with a note saying how
  many more there are and how to get them all (``agentlog export``); a payload longer than
  :data:`PAYLOAD_LIMIT` characters is cut with a count, and the diff lists at most
  :data:`DIFF_ROWS` aligned rows.

The charts come from :func:`agentlog.widgets.waterfall.waterfall_figure` and
:func:`agentlog.widgets.costdash.cost_figures`; the cards from :mod:`agentlog.widgets.html`.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from .analysis.rundiff import RunDiff
    from .store.run import Run
    from .store.verify import VerifyReport

__all__ = ["DIFF_ROWS", "EVENT_LIMIT", "PAYLOAD_LIMIT", "plotly_js_name", "report_html", "write_plotly_js",
           "write_report"]

#: Events listed in a report; the rest are counted and ``agentlog export`` gives them all.
EVENT_LIMIT: Final = 2_000
#: Characters of one payload shown (pretty-printed JSON); the rest are counted.
PAYLOAD_LIMIT: Final = 20_000
#: Aligned rows of the side-by-side diff.
DIFF_ROWS: Final = 1_000
#: Shared events shown before the first divergence, for context.
CONTEXT_ROWS: Final = 3

Progress = Callable[[str], None]

_CSS: Final = """
body.al-report { margin: 0; background: #fafafa; color: #1f2328;
  font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; font-size: 14px; }
.al-report header.al-top { background: #1f2937; color: #f9fafb; padding: 14px 28px 10px; }
.al-report header.al-top h1 { margin: 0; font-size: 20px; font-weight: 600; }
.al-report header.al-top .al-sub { color: #cbd5e1; font-size: 12px; margin-top: 4px; }
.al-report nav { position: sticky; top: 0; z-index: 10; background: #fff; border-bottom: 1px solid #e5e7eb;
  padding: 6px 28px; display: flex; gap: 18px; flex-wrap: wrap; }
.al-report nav a { color: #2563eb; text-decoration: none; font-weight: 500; }
.al-report nav a:hover { text-decoration: underline; }
.al-report main { padding: 8px 28px 40px; max-width: 1400px; }
.al-report section.al-part { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px;
  padding: 10px 18px 14px; margin: 14px 0; }
.al-report section.al-part > h2 { font-size: 17px; margin: 4px 0 10px; }
.al-report h3 { font-size: 14px; margin: 12px 0 4px; color: #374151; }
.al-report .al-cols { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 18px; }
.al-report .al-fig { min-height: 120px; margin: 4px 0 10px; }
.al-report .al-tables { display: flex; flex-wrap: wrap; gap: 0 28px; align-items: flex-start; }
.al-report .al-tables > div { min-width: 0; }
.al-report .al-note { color: #6b7280; font-size: 12px; margin: 6px 0; }
.al-report .al-repr { max-width: none; }
.al-report code, .al-report pre { font-family: "SFMono-Regular", Menlo, Consolas, "Liberation Mono", monospace; }
/* event list */
.al-report .al-filter { margin: 4px 0 8px; }
.al-report .al-filter input { width: 320px; padding: 3px 6px; font-size: 13px; }
.al-report .al-events details { border-bottom: 1px solid #f0f0f0; }
.al-report .al-events summary { cursor: pointer; padding: 2px 0; font-size: 12.5px; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
.al-report .al-events summary .al-seq { display: inline-block; min-width: 4.5em; text-align: right;
  color: #6b7280; font-variant-numeric: tabular-nums; margin-right: 0.6em; }
.al-report .al-events summary .al-type { display: inline-block; min-width: 11em; font-weight: 600; }
.al-report .al-events summary .al-who { color: #4b5563; margin-right: 0.6em; }
.al-report .al-events summary .al-usage { color: #7c3aed; margin-right: 0.6em; }
.al-report .al-events summary .al-preview { color: #6b7280; font-family: Menlo, Consolas, monospace; font-size: 12px; }
.al-report .al-events pre { background: #f6f8fa; border: 1px solid #eaeef2; border-radius: 4px; padding: 6px 10px;
  margin: 2px 0 8px 5.5em; max-height: 480px; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; }
.al-report .al-events .al-facts { margin-left: 5.5em; color: #6b7280; font-size: 11.5px; }
.al-report .t-llm { color: #1d4ed8; } .al-report .t-tool { color: #047857; }
.al-report .t-span { color: #6b7280; } .al-report .t-run { color: #111827; }
.al-report .t-approval, .al-report .t-fork { color: #b45309; } .al-report .t-error { color: #b91c1c; }
/* side-by-side diff */
.al-report table.al-sbs { border-collapse: collapse; width: 100%; font-size: 12.5px; table-layout: fixed; }
.al-report table.al-sbs th { text-align: left; color: #4b5563; border-bottom: 2px solid #e5e7eb; padding: 3px 6px; }
.al-report table.al-sbs td { padding: 2px 6px; vertical-align: top; border-bottom: 1px solid #f3f4f6;
  overflow-wrap: anywhere; }
.al-report table.al-sbs td.al-s { width: 4.5em; text-align: right; color: #6b7280; font-variant-numeric: tabular-nums; }
.al-report table.al-sbs col.al-st { width: 6.5em; }
.al-report table.al-sbs td.al-status { font-weight: 600; }
.al-report table.al-sbs .al-ev-type { font-weight: 600; }
.al-report table.al-sbs .al-ev-text { color: #4b5563; font-family: Menlo, Consolas, monospace; font-size: 11.5px; }
.al-report table.al-sbs .al-change { color: #92400e; font-family: Menlo, Consolas, monospace; font-size: 11.5px; }
.al-report tr.sbs-shared td { color: #9ca3af; }
.al-report tr.sbs-matched td { color: #6b7280; }
.al-report tr.sbs-moved td { color: #6b7280; font-style: italic; }
.al-report tr.sbs-changed td { background: #fffbeb; } .al-report tr.sbs-changed td.al-status { color: #b45309; }
.al-report tr.sbs-only_a td.al-a { background: #fef2f2; } .al-report tr.sbs-only_a td.al-status { color: #b91c1c; }
.al-report tr.sbs-only_b td.al-b { background: #f0fdf4; } .al-report tr.sbs-only_b td.al-status { color: #15803d; }
.al-report tr.sbs-cut td { background: #eef2ff; color: #3730a3; font-weight: 600; text-align: center; }
.al-report .al-legend span { display: inline-block; padding: 0 6px; margin-right: 6px; border-radius: 3px; font-size: 12px; }
"""

_FILTER_JS: Final = """
document.querySelectorAll('input.al-filter-input').forEach(function (box) {
  box.addEventListener('input', function () {
    var q = box.value.toLowerCase();
    var list = document.getElementById(box.dataset.target);
    list.querySelectorAll('details').forEach(function (d) {
      var s = d.querySelector('summary').textContent.toLowerCase();
      d.style.display = (!q || s.indexOf(q) >= 0) ? '' : 'none';
    });
  });
});
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _noop(_: str) -> None:
    return None


# --- figures ---------------------------------------------------------------------------------------


class _Figures:
    """Renders figures as ``div`` + script; plotly.js itself goes in the page head, once."""

    def __init__(self) -> None:
        self.count = 0

    def html(self, fig: go.Figure, caption: str | None = None) -> str:
        self.count += 1
        body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"al-fig-{self.count}",
                           config={"displaylogo": False, "responsive": True})
        cap = f"<h3>{_e(caption)}</h3>" if caption else ""
        return f'<div class="al-fig">{cap}{body}</div>'


def plotly_js_name() -> str:
    """The file name of the shared plotly.js copy: ``plotly-<version>.min.js`` (the version of
    plotly.js that the installed plotly package ships)."""
    import plotly
    from plotly.offline import get_plotlyjs_version
    version = get_plotlyjs_version() or getattr(plotly, "__version__", "x")
    return f"plotly-{version}.min.js"


def _plotly_js(src: str | None) -> str:
    """plotly.js: inline (``src`` None) or a ``<script src>`` to the shared copy."""
    head = "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
    if src is not None:
        return head + f'<script type="text/javascript" src="{_e(src)}"></script>'
    from plotly.offline import get_plotlyjs
    return head + f'<script type="text/javascript">{get_plotlyjs()}</script>'


def write_plotly_js(folder: str | os.PathLike[str]) -> Path:
    """Write the shared plotly.js copy into ``folder`` unless it is there (same version, same
    size); returns its path."""
    from plotly.offline import get_plotlyjs
    path = Path(folder) / plotly_js_name()
    text = get_plotlyjs()
    data = text.encode("utf-8")
    if not (path.is_file() and path.stat().st_size == len(data)):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return path


# --- parts -------------------------------------------------------------------------------------------


def _summary_card(run: Run) -> str:
    from .widgets.html import run_card_of
    return run_card_of(run)


def _verify_card(report: VerifyReport) -> str:
    from .widgets.html import verify_card
    return verify_card(run_id=report.run_id, ok=report.ok, events=report.events, head=report.head,
                       first_bad_seq=report.first_bad_seq,
                       problems=[(p.seq, str(p.kind), p.message) for p in report.problems],
                       text=str(report))


def _cost_tables(run: Run) -> str:
    """The dashboard's tables (what the run paid by model, span, actor): unknown costs shown as
    such, never $0."""
    from .widgets.costdash import RUN_GROUPS, cost_table_html, cost_tables
    tables = cost_tables(run)
    return "".join(f"<div><h3>{_e(title)}</h3>{cost_table_html(tables[name], column)}</div>"
                   for name, (_, column, _, title) in RUN_GROUPS.items())


def _event_class(type_: str) -> str:
    head = type_.split(".", 1)[0]
    return f"t-{head}" if head in ("llm", "tool", "span", "run", "approval", "fork", "error") else ""


def _pretty(payload: str) -> str:
    try:
        text = json.dumps(json.loads(payload), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        text = payload
    if len(text) > PAYLOAD_LIMIT:
        text = f"{text[:PAYLOAD_LIMIT]}\n… {len(text) - PAYLOAD_LIMIT:,} more characters"
    return text


def _usage_text(model: Any, tin: Any, tout: Any, cost: Any, dur: Any) -> str:
    from .numbers import fmt_ms, fmt_usd
    bits = []
    if model:
        bits.append(str(model))
    if tin is not None or tout is not None:
        bits.append(f"{tin or 0:,}→{tout or 0:,} tok")
    if cost is not None:
        bits.append(fmt_usd(cost))
    if dur is not None:
        bits.append(fmt_ms(dur))
    return " · ".join(bits)


def _preview(payload: str) -> str:
    """The payload on one line without its request ``key`` (64 hex digits that say little)."""
    if '"key":' not in payload:
        return payload
    try:
        value = json.loads(payload)
    except ValueError:
        return payload
    if isinstance(value, dict):
        value.pop("key", None)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _events_list(run: Run, list_id: str, start: int = 0) -> str:
    """:data:`EVENT_LIMIT` events from ``start``, each a ``<details>`` with its payload."""
    from .analysis.tables import event_table
    from .widgets.html import cut
    table = event_table(run)
    n = table.num_rows
    shown = table.slice(start, EVENT_LIMIT)
    names = ("seq", "type", "actor", "caused_by", "span_id", "ts", "payload", "model", "input_tokens",
             "output_tokens", "cost_usd", "duration_ms", "hash")
    cols = {name: shown.column(name).to_pylist() for name in names}
    items = []
    for i in range(shown.num_rows):
        seq, type_, actor = cols["seq"][i], str(cols["type"][i]), cols["actor"][i]
        payload = cols["payload"][i]
        who = " · ".join(str(x) for x in (actor, cols["span_id"][i]) if x)
        usage = _usage_text(cols["model"][i], cols["input_tokens"][i], cols["output_tokens"][i],
                            cols["cost_usd"][i], cols["duration_ms"][i])
        ts = cols["ts"][i]
        when = ts.isoformat(sep=" ", timespec="milliseconds").replace("+00:00", " UTC") if ts else "–"
        caused = "" if cols["caused_by"][i] is None else f" · caused by seq {cols['caused_by'][i]}"
        items.append(
            f'<details id="{_e(list_id)}-{seq}"><summary><span class="al-seq">{seq}</span>'
            f'<span class="al-type {_event_class(type_)}">{_e(type_)}</span>'
            + (f'<span class="al-who">{_e(who)}</span>' if who else "")
            + (f'<span class="al-usage">{_e(usage)}</span>' if usage else "")
            + f'<span class="al-preview">{_e(cut(_preview(payload), 160))}</span></summary>'
            f'<div class="al-facts">{_e(when)}{_e(caused)} · hash {_e(cols["hash"][i][:16])}…</div>'
            f"<pre>{_e(_pretty(payload))}</pre></details>")
    note = ""
    if n - start > EVENT_LIMIT:
        note = (f'<p class="al-note">Showing seq {start:,} to {start + EVENT_LIMIT - 1:,} of {n:,} events; '
                f"{n - start - EVENT_LIMIT:,} more. <code>agentlog export {_e(run.id)} --format jsonl</code> "
                "writes them all.</p>")
    what = f"{n:,} events" if not start else (f"{n:,} events; seq 0..{start - 1} are the same as the "
                                               f"other run's, listed from seq {start}")
    box = (f'<div class="al-filter"><input class="al-filter-input" data-target="{_e(list_id)}" '
           f'placeholder="filter by seq, type, actor, text…" aria-label="filter events"></div>')
    return (f'<p class="al-note">{_e(what)}; click one to see its payload.</p>{box}{note}'
            f'<div class="al-events" id="{_e(list_id)}">{"".join(items)}</div>{note}')


# --- the diff ------------------------------------------------------------------------------------


def _event_cell(table: Any, seq: int | None, name: Any) -> str:
    from .widgets.html import cut
    if seq is None:
        return ""
    type_ = str(table.column("type")[seq].as_py())
    payload = table.column("payload")[seq].as_py()
    label = f"{type_} {name}" if name else type_
    return (f'<div class="al-ev-type {_event_class(type_)}">{_e(label)}</div>'
            f'<div class="al-ev-text">{_e(cut(_preview(payload), 140))}</div>')


def _sbs_row(css: str, status: str, sa: Any, sb: Any, cell_a: str, cell_b: str) -> str:
    return (f'<tr class="sbs-{_e(css)}"><td class="al-s">{_e("" if sa is None else sa)}</td>'
            f'<td class="al-a">{cell_a}</td><td class="al-status">{_e(status)}</td>'
            f'<td class="al-s">{_e("" if sb is None else sb)}</td><td class="al-b">{cell_b}</td></tr>')


def _side_by_side(d: RunDiff) -> str:
    """Run a and run b in two columns, aligned, coloured by status, from the shared prefix's
    last events to :data:`DIFF_ROWS` rows after the divergence."""
    from .analysis.tables import event_table
    from .widgets.html import _missing
    ta, tb = event_table(d.a), event_table(d.b)
    rows = []
    for seq in range(max(0, d.prefix - CONTEXT_ROWS), d.prefix):
        cell = _event_cell(ta, seq, None)
        rows.append(_sbs_row("shared", "shared", seq, seq, cell, cell))
    if d.same:
        rows.append('<tr class="sbs-cut"><td colspan="5">the runs hold the same events</td></tr>')
    else:
        rows.append(f'<tr class="sbs-cut"><td colspan="5">▼ first divergence at seq {d.divergence} '
                    f'(seqs 0..{d.prefix - 1} shared, by {_e(d.prefix_from)})</td></tr>')
    frame = d.table()
    records = frame.head(DIFF_ROWS).to_dict(orient="records")
    for r in records:
        sa = None if _missing(r["seq_a"]) else int(r["seq_a"])
        sb = None if _missing(r["seq_b"]) else int(r["seq_b"])
        name = None if _missing(r["name"]) else r["name"]
        shown_name = name if name and len(str(name)) < 40 else None  # keys (64 hex) are noise
        cell_a, cell_b = _event_cell(ta, sa, shown_name), _event_cell(tb, sb, shown_name)
        if r["status"] == "changed" and not _missing(r["summary"]):
            cell_b += f'<div class="al-change">{_e(r["summary"])}</div>'
        label = {"only_a": "only in a", "only_b": "only in b"}.get(r["status"], r["status"])
        rows.append(_sbs_row(r["status"], label, sa, sb, cell_a, cell_b))
    if len(frame) > DIFF_ROWS:
        rows.append(f'<tr class="sbs-cut"><td colspan="5">… {len(frame) - DIFF_ROWS:,} more aligned rows '
                    f"(agentlog diff {_e(d.a.id)} {_e(d.b.id)} --json lists them all)</td></tr>")
    head = (f'<colgroup><col style="width:4.5em"><col><col class="al-st"><col style="width:4.5em"><col>'
            f"</colgroup><thead><tr><th>seq</th><th>a: {_e(d.a.id)}</th><th>status</th><th>seq</th>"
            f"<th>b: {_e(d.b.id)}</th></tr></thead>")
    return f'<table class="al-sbs">{head}<tbody>{"".join(rows)}</tbody></table>'


def _diff_section(d: RunDiff) -> str:
    from .widgets.html import _records, diff_facts, grid, patch_html, table, usage_rows
    facts = diff_facts(d)
    usage = usage_rows(d.usage)
    legend = ('<div class="al-legend al-note"><span style="background:#fffbeb">changed</span>'
              '<span style="background:#fef2f2">only in a</span><span style="background:#f0fdf4">only in b</span>'
              "<span>matched (grey): same step, same content</span>"
              "<span><i>moved</i> (grey): the same step elsewhere in b</span></div>")
    patch = d.state_patch
    parts = [f'<div class="al-repr">{grid(facts)}</div>',
             "<h3>Usage (b − a)</h3>",
             f'<div class="al-repr">{table(("metric", "a", "b", "b − a"), usage, numeric=(False, True, True, True))}</div>',
             "<h3>Events, side by side</h3>", legend, _side_by_side(d),
             f"<h3>State patch (final state of a → b, {len(patch):,} ops)</h3>",
             f'<div class="al-repr">{patch_html(patch)}</div>']
    graph = _records(d.graph)
    if graph:
        parts.append("<h3>Graph changes</h3>")
        parts.append('<div class="al-repr">' + table(("what", "id", "change", "detail"),
                                                     [(g.get("what"), g.get("id"), g.get("change"),
                                                       g.get("detail")) for g in graph]) + "</div>")
    return "".join(parts)


# --- the page ----------------------------------------------------------------------------------------


def _section(ident: str, title: str, body: str) -> str:
    return f'<section class="al-part" id="{_e(ident)}"><h2>{_e(title)}</h2>{body}</section>'


def _both(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else f'<div class="al-cols">{"".join(f"<div>{p}</div>" for p in parts)}</div>'


def _label(run: Run) -> str:
    return f"{run.name} ({run.id})" if run.name else run.id


def report_html(run: Run, *, vs: Run | None = None, progress: Progress | None = None,
                plotly_src: str | None = None) -> str:
    """The report of ``run`` (and its diff with ``vs``) as one HTML page.

    Args:
        run: the run.
        vs: another run to compare with (e.g. a fork of ``run``): adds the side-by-side diff,
            and shows both runs' summaries, verify results, waterfalls and costs.
        progress: called with the name of each step as it starts (for a progress bar).
        plotly_src: where the page loads plotly.js from (a relative path such as
            :func:`plotly_js_name`); ``None`` inlines it (a self-contained page).

    Returns:
        The page: open it from disk, no network needed.
    """
    from .widgets.costdash import cost_figures
    from .widgets.waterfall import waterfall_figure

    step = progress or _noop
    runs = [run] if vs is None else [run, vs]
    figs = _Figures()
    sections: list[tuple[str, str, str]] = []
    shared = 0  # events the two runs share: listed once

    step("verify")
    reports = [r.verify() for r in runs]  # first: the summary cards then say "verified"
    step("summary")
    sections.append(("summary", "Summary", _both([_summary_card(r) for r in runs])))
    sections.append(("verify", "Verify", _both([_verify_card(rep) for rep in reports])))
    if vs is not None:
        step("diff")
        from .analysis.rundiff import diff
        d = diff(run, vs)
        shared = d.prefix
        sections.append(("diff", f"Diff: {run.id} → {vs.id}", _diff_section(d)))
    step("waterfall")
    sections.append(("waterfall", "Waterfall",
                     "".join(figs.html(waterfall_figure(r), r.id if vs is not None else None) for r in runs)))
    step("cost")
    cost_parts = []
    for r in runs:
        charts = "".join(figs.html(fig) for fig in cost_figures(r).values())
        head = f"<h3>{_e(_label(r))}</h3>" if vs is not None else ""
        cost_parts.append(f'{head}<div class="al-repr al-tables">{_cost_tables(r)}</div>{charts}')
    sections.append(("cost", "Cost", _both(cost_parts)))
    step("events")
    sections.append(("events", "Events" if vs is None else f"Events of {run.id}",
                     _events_list(run, "events-list")))
    if vs is not None:
        sections.append(("events-b", f"Events of {vs.id}", _events_list(vs, "events-b-list", shared)))

    title = f"agentlog report: {_label(run)}" + (f" vs {_label(vs)}" if vs is not None else "")
    return _page(title, sections, scripts=_plotly_js(plotly_src) if figs.count else "")


def _page(title: str, sections: Iterable[tuple[str, str, str]], *, scripts: str) -> str:
    from ._version import __version__
    from .widgets.html import _css
    parts = list(sections)
    nav = "".join(f'<a href="#{_e(ident)}">{_e(name.split(":")[0])}</a>' for ident, name, _ in parts)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(_section(ident, name, content) for ident, name, content in parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_css()}{_CSS}</style>{scripts}</head>"
            f'<body class="al-report"><header class="al-top"><h1>{_e(title)}</h1>'
            f'<div class="al-sub">generated {now} by agentlog {_e(__version__)} · works offline'
            "</div></header>"
            f"<nav>{nav}</nav><main>{body}</main><script>{_FILTER_JS}</script></body></html>\n")


def write_report(run: Run | str, path: str | os.PathLike[str], *, vs: Run | str | None = None,
                 store: Any = None, progress: Progress | None = None, plotly: str = "shared") -> Path:
    """Write :func:`report_html` to ``path``.

    Args:
        run: a :class:`~agentlog.Run`, or a run id (or unique prefix) in ``store``.
        path: the HTML file to write (its folder must exist).
        vs: another run (or id) to compare with.
        store: where ids are looked up (a :class:`~agentlog.Store` or a path; default: the
            default store).
        progress: called with the name of each step (see :func:`report_html`).
        plotly: ``shared`` (default): plotly.js is one copy next to the report
            (:func:`write_plotly_js`, written once for every report in that folder);
            ``inline``: in the page, which is then self-contained (about 5 MB).

    Returns:
        The path written.

    >>> import agentlog as al, pathlib, tempfile
    >>> store = al.examples.sample_store()
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "report.html"
    >>> page = write_report(store.run("sre-0001"), out, vs=store.run("sre-0001-calm")).read_text()
    >>> f'src="{plotly_js_name()}"' in page, (out.parent / plotly_js_name()).is_file()
    (True, True)
    >>> "first divergence at seq 27" in page, len(page) < 1_000_000
    (True, True)
    """
    if plotly not in ("shared", "inline"):
        raise ValueError(f"plotly={plotly!r}: use 'shared' or 'inline'")
    from .capture.session import resolve_store
    if isinstance(run, str) or isinstance(vs, str):
        st = resolve_store(store)
        run = st.run(run) if isinstance(run, str) else run
        vs = st.run(vs) if isinstance(vs, str) else vs
    assert not isinstance(run, str) and not isinstance(vs, str)
    out = Path(path)
    src = None
    if plotly == "shared":
        src = write_plotly_js(out.parent).name
    text = report_html(run, vs=vs, progress=progress, plotly_src=src)
    out.write_text(text, encoding="utf-8")
    return out
