"""The graph of a run: its objects and relations as a node-link diagram, with provenance.

:func:`graph_tables` reads the ``objects`` and ``relations`` of a fold state into two tables;
:func:`graph_figure` draws them with plotly (no widgets): one node per object, coloured by its
kind, the kinds in columns in the order the run first made them (a layered layout from
networkx, so a pipeline such as company → question → document → claim → evidence reads left
to right), one line per relation, its kind on hover. Each node's ``customdata`` is its id.

:class:`GraphView` wires the figure into a notebook: a slider picks the event the graph is
drawn *as of* (:meth:`GraphView.link_to` follows a scrubber instead), and clicking a node shows
its provenance: the event that created it and that event's cause chain (``caused_by``, as far
as it goes).

Why plotly and not a graph widget such as ipycytoscape: the figure is the same object in the
notebook, in static HTML exports and in the report, it needs no JupyterLab extension of its
own beyond plotly's, and clicks reach Python through plotly's ``FigureWidget``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import pandas as pd
import plotly.graph_objects as go

from ..folding import thaw
from .html import cut
from .html import esc as _e

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["GraphView", "graph_figure", "graph_tables", "provenance_html"]

#: Colours of the kinds, in the order kinds first appear.
PALETTE: Final = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#EECA3B",
                  "#FF9DA6", "#9D755D", "#BAB0AC")
LABEL_CHARS: Final = 16  # characters of a node's label beside it (the hover has the rest)
CHAIN: Final = 12  # events of a cause chain shown


def _label(obj: Mapping[str, Any]) -> str:
    data = obj.get("data") or {}
    if isinstance(data, Mapping):
        for key in ("name", "title", "text", "question", "summary", "topic", "url"):
            if data.get(key):
                return str(data[key])
    return str(obj.get("id", ""))


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1].rstrip() + "…"


def graph_tables(state: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(nodes, edges)`` of a fold state's graph projection.

    nodes: id, kind, label, event (the seq that created it), actor, caused_by; edges: id,
    kind, source, target, event — only relations whose two ends exist.
    """
    objects = thaw(state.get("objects") or {})
    relations = thaw(state.get("relations") or {})
    nodes = pd.DataFrame([{"id": str(o.get("id", k)), "kind": str(o.get("kind", "?")), "label": _label(o),
                           "event": (o.get("provenance") or {}).get("event"),
                           "actor": (o.get("provenance") or {}).get("actor"),
                           "caused_by": (o.get("provenance") or {}).get("caused_by")}
                          for k, o in objects.items()],
                         columns=["id", "kind", "label", "event", "actor", "caused_by"])
    ids = set(nodes["id"])
    edges = pd.DataFrame([{"id": str(r.get("id", k)), "kind": str(r.get("kind", "")),
                           "source": str(r.get("source")), "target": str(r.get("target")),
                           "event": (r.get("provenance") or {}).get("event")}
                          for k, r in relations.items()
                          if str(r.get("source")) in ids and str(r.get("target")) in ids],
                         columns=["id", "kind", "source", "target", "event"])
    return nodes, edges


def _kind_order(nodes: pd.DataFrame) -> list[str]:
    first = nodes.assign(e=pd.to_numeric(nodes["event"], errors="coerce").fillna(1e18))
    return list(first.groupby("kind")["e"].min().sort_values(kind="stable").index)


def _positions(nodes: pd.DataFrame, edges: pd.DataFrame, kinds: list[str]) -> dict[str, tuple[float, float]]:
    import networkx as nx
    g = nx.DiGraph()
    layer = {k: i for i, k in enumerate(kinds)}
    order = nodes.assign(e=pd.to_numeric(nodes["event"], errors="coerce").fillna(1e18)).sort_values(
        ["e", "id"], kind="stable")
    for row in order.itertuples(index=False):
        g.add_node(row.id, layer=layer[row.kind])
    g.add_edges_from(zip(edges["source"], edges["target"], strict=True))
    pos = nx.multipartite_layout(g, subset_key="layer", align="vertical")
    return {str(n): (float(x), float(y)) for n, (x, y) in pos.items()}


def graph_figure(nodes: pd.DataFrame, edges: pd.DataFrame, *, title: str = "graph") -> go.Figure:
    """The graph as a plotly figure (see the module docstring); every text escaped.

    ``fig.layout.meta["agentlog"]`` holds the counts and the kinds in column order.
    """
    kinds = _kind_order(nodes) if len(nodes) else []
    fig = go.Figure()
    if not len(nodes):
        fig.add_annotation(text="no objects yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                           font={"size": 15, "color": "#777"}, name="empty")
    pos = _positions(nodes, edges, kinds) if len(nodes) else {}
    if len(edges):
        xs: list[float | None] = []
        ys: list[float | None] = []
        mx, my, mtext = [], [], []
        for e in edges.itertuples(index=False):
            (x0, y0), (x1, y1) = pos[e.source], pos[e.target]
            xs += [x0, x1, None]
            ys += [y0, y1, None]
            mx.append((x0 + x1) / 2)
            my.append((y0 + y1) / 2)
            mtext.append(html.escape(f"{e.source} —{e.kind}→ {e.target}", quote=False))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#bbb", "width": 1},
                                 hoverinfo="skip", showlegend=False, name="relations", meta={"role": "edges"}))
        fig.add_trace(go.Scatter(x=mx, y=my, mode="markers", marker={"size": 6, "color": "rgba(0,0,0,0)"},
                                 text=mtext, hovertemplate="%{text}<extra>relation</extra>", showlegend=False,
                                 name="relation kinds", meta={"role": "edge-hover"}))
    for i, kind in enumerate(kinds):
        part = nodes[nodes["kind"] == kind]
        xy = [pos[n] for n in part["id"]]
        hover = [html.escape(f"{r.id} · {r.kind}\n{cut(str(r.label), 90)}\ncreated at seq {r.event} by "
                             f"{r.actor or '–'}", quote=False).replace("\n", "<br>")
                 for r in part.itertuples(index=False)]
        fig.add_trace(go.Scatter(
            x=[p[0] for p in xy], y=[p[1] for p in xy], mode="markers+text", name=html.escape(kind, quote=False),
            marker={"size": 16, "color": PALETTE[i % len(PALETTE)], "line": {"width": 1, "color": "white"}},
            text=[html.escape(_short(str(t)), quote=False) for t in part["label"]],
            textposition="middle right", textfont={"size": 10, "color": "#333"},
            customdata=list(part["id"]), hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
            meta={"role": "nodes", "kind": kind}, cliponaxis=False))
    n_rows = int(nodes.groupby("kind").size().max()) if len(nodes) else 1
    fig.update_layout(
        template="plotly_white", title={"text": html.escape(title, quote=False), "x": 0.01},
        height=int(min(1200, max(360, 40 * n_rows + 140))), hovermode="closest", clickmode="event",
        margin={"l": 10, "r": 150, "t": 60, "b": 20},
        xaxis={"visible": False}, yaxis={"visible": False},
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0.0},
        meta={"agentlog": {"nodes": len(nodes), "edges": len(edges), "kinds": kinds}})
    return fig


def provenance_html(run: Run, object_id: str, nodes: pd.DataFrame) -> str:
    """An object's provenance: the event that created it, then its cause chain (escaped)."""
    row = nodes[nodes["id"] == object_id]
    if row.empty:
        return f'<div class="al-repr"><p class="al-muted">no object {_e(object_id)}</p></div>'
    r = row.iloc[0]
    lines: list[str] = []
    seq = None if pd.isna(r["event"]) else int(r["event"])
    seen: set[int] = set()
    while seq is not None and len(lines) < CHAIN and seq not in seen and 0 <= seq < len(run):
        seen.add(seq)
        event = run.event(seq)
        lines.append(f"<li><code>seq {seq:,}</code> <b>{_e(event.type)}</b>"
                     f"{f' by {_e(event.actor)}' if event.actor else ''}</li>")
        seq = event.caused_by
    more = " (the chain ends here: no recorded cause)" if seq is None else " …"
    return (f'<div class="al-repr agentlog-provenance"><p><b>{_e(r["id"])}</b> · {_e(r["kind"])} — '
            f"{_e(cut(str(r['label']), 160))}</p><p class=\"al-muted\">created by the first event below; "
            f"each line is caused by the next{_e(more)}</p><ol>{''.join(lines)}</ol></div>")


class GraphView:
    """The graph of ``run`` as of an event, with each object's provenance on click.

    Args:
        run: the run.
        seq: the event the graph is drawn as of (default: the last).

    ``figure`` (plain plotly), ``nodes`` and ``edges`` (tables) describe the graph at ``seq``;
    :meth:`goto` moves it, :meth:`select` shows an object's provenance (as a click does).
    """

    def __init__(self, run: Run, *, seq: int | None = None) -> None:
        if len(run) == 0:
            raise ValueError(f"run {run.id!r} has no events")
        self.run = run
        self.seq = -1
        self.selected: str | None = None
        self.provenance_html = '<div class="al-repr"><p class="al-muted">Click a node for its provenance.</p></div>'
        self._fw: Any = None
        self._widget: Any = None
        self.goto(len(run) - 1 if seq is None else seq)

    def __repr__(self) -> str:
        return f"<GraphView {self.run.id} at seq {self.seq:,}: {len(self.nodes):,} objects, {len(self.edges):,} relations>"

    def goto(self, seq: int) -> GraphView:
        """Draw the graph as of the event ``seq``."""
        if not 0 <= seq < len(self.run):
            raise IndexError(f"run {self.run.id}: seq {seq} is outside 0..{len(self.run) - 1}")
        if seq == self.seq:
            return self
        self.seq = seq
        self.nodes, self.edges = graph_tables(self.run.state_at(seq))
        title = f"{self.run.name or self.run.id} — graph as of seq {seq:,}"
        self.figure = graph_figure(self.nodes, self.edges, title=title)
        if self._fw is not None:
            with self._fw.batch_update():
                self._fw.data = ()
                self._fw.add_traces(list(self.figure.data))
                self._fw.layout = self.figure.layout
            self._bind_clicks()
            self._slider.value = seq
        return self

    def select(self, object_id: str) -> GraphView:
        """Show ``object_id``'s provenance (the panel, once shown)."""
        self.selected = object_id
        self.provenance_html = provenance_html(self.run, object_id, self.nodes)
        if self._widget is not None:
            self._panel.value = self.provenance_html
        return self

    def link_to(self, scrubber: Any) -> None:
        """Follow a :class:`~agentlog.widgets.Scrubber`: the graph is drawn as of its event."""
        from ._kernel import as_widget
        from .forkpanel import _find_slider
        slider = _find_slider(as_widget(scrubber))
        if slider is None:
            raise ValueError(f"{scrubber!r} has no IntSlider to follow")
        slider.observe(lambda change: self.goto(int(change["new"])), names="value")
        self.goto(int(slider.value))

    def _bind_clicks(self) -> None:
        for trace in self._fw.data:
            if (trace.meta or {}).get("role") == "nodes":
                trace.on_click(self._on_click)

    def _on_click(self, trace: Any, points: Any, _state: Any) -> None:
        if points.point_inds and trace.customdata is not None:
            self.select(str(trace.customdata[points.point_inds[0]]))

    def widget(self) -> Any:
        """The ipywidgets view: a seq slider, the ``FigureWidget`` and the provenance panel."""
        if self._widget is None:
            import ipywidgets as w
            self._fw = go.FigureWidget(self.figure)
            self._bind_clicks()
            self._slider = w.IntSlider(value=self.seq, min=0, max=len(self.run) - 1, description="as of seq",
                                       continuous_update=False, layout=w.Layout(width="60%"))
            self._slider.observe(lambda c: self.goto(int(c["new"])), names="value")
            self._panel = w.HTML(self.provenance_html)
            self._panel.add_class("agentlog-graph-provenance")
            self._widget = w.VBox([self._slider, self._fw, self._panel], layout=w.Layout(width="100%"))
            self._widget.add_class("agentlog-graph")
        return self._widget

    def _ipython_display_(self) -> None:
        from ._kernel import in_kernel, show_objects
        show_objects(self.widget() if in_kernel() else self.figure)
