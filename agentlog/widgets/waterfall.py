"""The span waterfall of a run, as a notebook view: the figure, a span tree beside it, the
events of the selected span below.

:func:`waterfall_figure` gathers a run's tables (spans, when it started, what it waited for, a
fork's cut) and draws them with :func:`agentlog.widgets.timeline.timeline_figure`.
:class:`Waterfall` wires that figure into a ``FigureWidget``: clicking a bar or its row (or a
row of the span tree) selects the span, highlights it and lists its events.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
import pyarrow as pa

from ..analysis.spans import spans as span_table
from ..analysis.tables import event_table, events, summary
from ..events import APPROVAL_DENIED, APPROVAL_GRANTED, ApprovalDenied, ApprovalGranted
from ..numbers import fmt_ms, is_missing
from ._kernel import in_kernel, show_objects
from .html import fmt_int, obj_repr, table
from .spantree import tree_rows
from .timeline import CUSTOM, ERROR_COLOR, GROUP_COLORS, KIND_GROUPS, Wait, time_unit, timeline_figure

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["CUSTOM", "ERROR_COLOR", "GROUP_COLORS", "KIND_GROUPS", "Waterfall", "figure_bundle", "run_waits",
           "span_events_html", "time_unit", "waterfall_figure"]

def _fork_pause(run: Run, t0: pd.Timestamp) -> tuple[float, float] | None:
    """For a fork: (the cut, in seconds since ``t0``; the pause until the fork's first own
    event, in seconds). A fork is often made long after its parent ran: that time is left out
    of the axis, or the parent's part would be a sliver at the left."""
    at = run.fork_seq
    if at is None or at + 1 >= len(run):
        return None
    ts = event_table(run).column("ts")
    cut, first = pd.Timestamp(ts[at].as_py()), pd.Timestamp(ts[at + 1].as_py())
    return (cut - t0).total_seconds(), max(0.0, (first - cut).total_seconds())


def _run_start(run: Run, spans: pd.DataFrame) -> pd.Timestamp:
    started = summary(run)["started"].iloc[0]
    first = spans["start"].min()
    if pd.isna(started) or (not pd.isna(first) and first < started):
        return first
    return started


def run_waits(run: Run, t0: pd.Timestamp) -> list[Wait]:
    """What the run waited for: each approval request until its decision (seconds since ``t0``)."""
    table = event_table(run)
    types = table.column("type").cast(pa.string()).to_pylist()
    decided = [seq for seq, t in enumerate(types) if t in (APPROVAL_GRANTED, APPROVAL_DENIED)]
    if not decided:
        return []
    ts = table.column("ts")
    waits = []
    for seq in decided:
        event = run.event(seq)
        body = ApprovalGranted.of(event) if event.type == APPROVAL_GRANTED else ApprovalDenied.of(event)
        request = int(body.request)
        if 0 <= request < seq:
            start = (pd.Timestamp(ts[request].as_py()) - t0).total_seconds()
            end = (pd.Timestamp(ts[seq].as_py()) - t0).total_seconds()
            waits.append(Wait(start, end, "waiting for approval"))
    return waits


def waterfall_figure(run: Run, *, max_bars: int = 5000, spans: pd.DataFrame | None = None) -> go.Figure:
    """The span tree of ``run`` on a time axis, as a plotly figure
    (:func:`agentlog.widgets.timeline.timeline_figure` on the run's tables).

    Args:
        run: the run.
        max_bars: the most spans drawn one bar each; past it the deep spans are aggregated
            into time buckets per (depth, kind) lane, and the figure says so in its subtitle.
        spans: the span table to draw (default: the run's), e.g. a filtered one.

    Waits for an approval and long stretches with no open span are drawn as labelled breaks
    (compressed); a fork's pause before its first own event is left out and its cut marked.

    >>> import agentlog as al, tempfile, pathlib
    >>> store = al.examples.sample_store(copy_to=pathlib.Path(tempfile.mkdtemp()) / "s")
    >>> meta = waterfall_figure(store.run("sre-0001")).layout.meta["agentlog"]
    >>> meta["spans"], meta["bars"], meta["aggregated"], [b[4] for b in meta["breaks"]]
    (25, 25, False, ['‖ 7.6 min waiting for approval'])
    """
    title = f"{run.name or run.id} — span waterfall"
    if spans is None:
        spans = span_table(run)
    if len(spans) == 0:
        return timeline_figure(spans, t0=pd.Timestamp(0, tz="UTC"), title=title, max_bars=max_bars)
    t0 = _run_start(run, spans)
    return timeline_figure(spans, t0=t0, title=title, max_bars=max_bars, waits=run_waits(run, t0),
                           fork_cut=_fork_pause(run, t0), fork_seq=run.fork_seq)


# --- the notebook view -----------------------------------------------------------------------


class Waterfall:
    """The span waterfall of a run, with the span tree and the events of the selected span.

    Args:
        run: the run.
        live: follow a run that is still being written: new spans appear as they are written,
            with a "● live" badge until the run closes (:mod:`agentlog.widgets.live`).
        **options: passed to :func:`waterfall_figure` (``max_bars``, ``spans``).

    ``figure`` is the plain plotly figure and ``tree`` the span tree's rows
    (:func:`~agentlog.widgets.spantree.tree_rows`); :meth:`select` picks a span (as a click on
    its bar, its row or its line in the tree does in a notebook) and fills ``events_html``. In
    a Jupyter kernel the object displays as a ``FigureWidget`` filling the cell's width, with
    the span tree and the events panel below; elsewhere as the plain figure.

    >>> import agentlog as al, tempfile, pathlib
    >>> store = al.examples.sample_store(copy_to=pathlib.Path(tempfile.mkdtemp()) / "s")
    >>> w = Waterfall(store.run("sre-0001"))
    >>> w.select("s1").selected, w.tree[0]["name"]
    ('s1', 'call_model gpt-4o-mini')
    """

    def __init__(self, run: Run, *, live: bool = False, **options: Any) -> None:
        self.run = run
        self.options = options
        self.figure: go.Figure = waterfall_figure(run, **options)
        self.tree = tree_rows(self._spans())
        self.follower: Any = None
        self._badge: Any = None
        if live:
            from .live import Follower
            self.follower = Follower(run, self._grow)
        self.selected: str | None = None
        self.events_html: str = _panel_hint()
        self._widget: Any = None
        self._panel: Any = None
        self._fig_widget: Any = None
        self._tree_widget: Any = None

    def __repr__(self) -> str:
        meta = self.figure.layout.meta["agentlog"]
        agg = ", aggregated" if meta["aggregated"] else ""
        return f"<Waterfall {self.run.id}: {meta['spans']:,} spans, {meta['bars']:,} bars{agg}>"

    def _spans(self) -> pd.DataFrame:
        spans = self.options.get("spans")
        return span_table(self.run) if spans is None else spans

    def select(self, span_id: str) -> Waterfall:
        """Select the span ``span_id``: ``selected`` and ``events_html`` (and, once shown, the
        panel, the highlighted row and the tree) now describe it. Returns ``self``.

        Raises:
            KeyError: the run has no such span.
        """
        spans = self._spans()
        row = spans[(spans["span_id"] == span_id).fillna(False)]
        if row.empty:
            raise KeyError(f"run {self.run.id!r} has no span {span_id!r}")
        ev = events(self.run)
        ev = ev[(ev["span_id"] == span_id).fillna(False)]
        self.selected = span_id
        self.events_html = span_events_html(row.iloc[0].to_dict(), ev)
        if self._panel is not None:
            self._panel.value = self.events_html
            self._highlight(span_id)
        if self._tree_widget is not None and self._tree_widget.selected != span_id:
            self._tree_widget.selected = span_id
        return self

    def widget(self) -> Any:
        """The ``ipywidgets`` view (built once): the ``FigureWidget`` across the cell, then the
        span tree and the events panel side by side."""
        if self._widget is None:
            import ipywidgets as widgets

            from .spantree import SpanTree
            self._fig_widget = go.FigureWidget(self.figure)
            self._panel = widgets.HTML(value=self.events_html,
                                       layout=widgets.Layout(flex="1 1 50%", min_width="0"))
            self._panel.add_class("agentlog-waterfall-events")
            for trace in self._fig_widget.data:
                trace.on_click(self._on_click)
            self._tree_widget = SpanTree(self.tree)
            self._tree_widget.layout = widgets.Layout(flex="1 1 50%", min_width="0")
            self._tree_widget.observe(self._on_tree, names="selected")
            below = widgets.HBox([self._tree_widget, self._panel],
                                 layout=widgets.Layout(width="100%", align_items="flex-start"))
            parts = [self._fig_widget, below]
            if self.follower is not None:
                self._badge = widgets.HTML()
                self._badge.add_class("agentlog-live-badge")
                self.follower.badge = self._badge
                self.follower.tick()
                self.follower.start()
                parts.insert(0, self._badge)
            self._widget = widgets.VBox(parts, layout=widgets.Layout(width="100%"))
            self._widget.add_class("agentlog-waterfall")
        return self._widget

    def _grow(self, new: Sequence[Any]) -> None:
        """New events arrived (live): redraw the figure and the tree; the selection stays."""
        self.figure = waterfall_figure(self.run, **self.options)
        self.tree = tree_rows(self._spans())
        fw = self._fig_widget
        if fw is not None:
            with fw.batch_update():
                fw.data = ()
                fw.add_traces(list(self.figure.data))
                fw.layout = self.figure.layout
            for trace in fw.data:
                trace.on_click(self._on_click)
            if self.selected is not None:
                self._highlight(self.selected)
        if self._tree_widget is not None:
            self._tree_widget.rows = self.tree

    def _on_tree(self, change: Mapping[str, Any]) -> None:
        span_id = str(change["new"] or "")
        if span_id and span_id != self.selected:
            self.select(span_id)

    def _on_click(self, trace: Any, points: Any, _state: Any) -> None:
        if not points.point_inds or trace.customdata is None:
            return
        i = points.point_inds[0]
        span_id = str(trace.customdata[i][0])
        if span_id:
            self.select(html.unescape(span_id))
        elif self._panel is not None and trace.hovertext is not None:
            text = str(trace.hovertext[i])
            self._panel.value = (f"<div class='al-repr'><p>{text}</p><p>An aggregated bucket: "
                                 "filter the spans (<code>spans=…</code>) to see them one by one."
                                 "</p></div>")

    def _highlight(self, span_id: str) -> None:
        """A band across the selected span's row (the figure's own shapes kept)."""
        fw = self._fig_widget
        if fw is None:
            return
        base = list(self.figure.layout.shapes)
        for trace in fw.data:
            if trace.type != "bar" or trace.customdata is None:
                continue
            ids = [html.unescape(str(c[0])) for c in trace.customdata]
            if span_id in ids:
                y = float(trace.y[ids.index(span_id)])
                base.append(go.layout.Shape(type="rect", xref="paper", x0=0, x1=1, y0=y - 0.5, y1=y + 0.5,
                                            line={"width": 0}, fillcolor="rgba(255,193,7,0.28)",
                                            layer="below", name="selected"))
                break
        fw.layout.shapes = base

    def _ipython_display_(self) -> None:
        show_objects(self.widget() if in_kernel() else self.figure)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The plain figure: plotly's own bundle where a renderer is set, else the plotly JSON."""
        return figure_bundle(self.figure, repr(self), include, exclude)

def figure_bundle(fig: go.Figure, text: str, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """A figure's MIME bundle: plotly's (which depends on the renderer), or the plotly JSON and
    ``text`` when no renderer gives one (a plain Python or IPython terminal)."""
    bundle = dict(fig._repr_mimebundle_(include, exclude) or {})
    if not bundle:
        bundle = {"application/vnd.plotly.v1+json": {**json.loads(fig.to_json()), "config": {}}}
    bundle.setdefault("text/plain", text)
    return bundle


def _panel_hint() -> str:
    return ("<div class='al-repr'><p class='al-muted'>Click a bar to list the events of its span."
            "</p></div>")


def span_events_html(span: dict[str, Any], events: pd.DataFrame) -> str:
    """The events panel: one span's facts and its events (seq, type, actor, short payload),
    every value escaped."""
    from .html import grid, header
    cols: Sequence[str] = ("seq", "type", "actor", "payload")
    rows = list(events[list(cols)].itertuples(index=False, name=None))
    head = header("Span", str(span.get("name")), str(span.get("span_id")),
                  ("error", "al-bad") if span.get("status") == "error" else None)
    facts = [("kind", str(span.get("kind"))), ("status", str(span.get("status"))),
             ("duration", fmt_ms(span.get("duration_ms"))), ("events", fmt_int(len(rows)))]
    if not is_missing(span.get("error")):
        facts.append(("error", str(span.get("error"))))
    body = grid(facts) + table(cols, rows, numeric=(True,))
    text = f"span {span.get('span_id')} {span.get('name')}: {len(rows)} events"
    return obj_repr(text, head, body)
