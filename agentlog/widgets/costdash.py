"""The cost dashboard: tokens and dollars of a run (by model, span, actor, over time) or of a
store (by run, day, model), as tables, plotly figures and a notebook view.

Every amount is what was *paid*: a run's own events (a fork's inherited prefix was paid by its
parent; the summary gives a fork's *total incl. inherited prefix* beside it), the same word
and number as the run card, ``agentlog ls`` and ``agentlog cost``. Every figure adds up to the
table it comes from (``cost(run, by, own=True)`` / ``store.cost()``); tables and charts list
the groups in the same order, most paid first; tool calls, which have no model, are a row of
their own ("(tool calls)"), never a model named "–". A cost the log does not know
(``cost_unknown_calls``) is never drawn as $0: a group whose calls all have an unknown cost
gets no cost bar but an "unknown" label, a group with some gets "+ N unknown" beside its bar,
and the figure carries a note with the count. Money is summed exactly and written by
:func:`~agentlog.numbers.fmt_usd`, on axes too.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..numbers import PAID, TOTAL, fmt_cost, fmt_usd, unknown_text, usd_axis, usd_sum
from ._kernel import figure_output, in_kernel, show_objects
from .html import fmt_int, grid, header, obj_repr, section, sections, table
from .options import OPTIONS

if TYPE_CHECKING:
    from ..store.run import Run
    from ..store.store import Store

__all__ = ["CostDashboard", "cost_figures", "cost_tables"]

TOP: Final = 25              # groups drawn one bar each; the rest are one "other" bar
ROW_PX: Final = 26           # height of a bar row
COST_COLOR: Final = "#4C78A8"
TOKEN_COLORS: Final = {"input": "#F58518", "output": "#54A24B", "cached": "#B279A2"}
UNKNOWN_COLOR: Final = "#b26a00"

#: The group tables of a run and of a store: name -> (``by`` key, column, label, title).
RUN_GROUPS: Final = {"by_model": ("model", "model", "(no model)", "Paid by model"),
                     "by_span": ("span", "span", "(no span)", "Paid by span"),
                     "by_actor": ("actor", "actor", "(no actor)", "Paid by actor")}
STORE_GROUPS: Final = {"by_run": ("run", "run_id", "(no run)", "Paid by run"),
                       "by_day": ("day", "day", "(no day)", "Paid by day"),
                       "by_model": ("model", "model", "(no model)", "Paid by model")}


def _is_run(source: Any) -> bool:
    from ..store.run import Run
    return isinstance(source, Run)


def _label(source: Any) -> str:
    if _is_run(source):
        return str(source.name or source.id)
    return str(source.path)


NO_MODEL: Final = "(no model)"
TOOL_CALLS: Final = "(tool calls)"


def cost_tables(run_or_store: Run | Store) -> dict[str, pd.DataFrame]:
    """The tables behind the dashboard, each sorted most paid first (missing keys last).

    For a run: ``by_model``, ``by_span``, ``by_actor`` (``cost(run, by, own=True)``: what the
    run paid) and ``over_time`` (the running totals of its own usage events); for a store:
    ``by_run``, ``by_day``, ``by_model`` (``store.cost(by=...)``, each run's own events).
    """
    from ..analysis.cost import cost
    from ..analysis.storewide import cost as store_cost
    source: Any = run_or_store
    run = _is_run(source)
    groups = RUN_GROUPS if run else STORE_GROUPS
    tables = {name: _sorted(cost(source, (by,), own=True) if run else store_cost(source, (by,)), column)
              for name, (by, column, *_) in groups.items()}
    if run:
        from ..analysis.tables import tokens_over_time
        frame = tokens_over_time(source)
        if source.fork_seq is not None:
            frame = _own_running_totals(frame, source.fork_seq)
        tables["over_time"] = frame
    return tables


def _sorted(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Most paid first, then most tokens; rows with no key (tool calls have no model) last."""
    missing = frame[column].isna().to_numpy(bool)
    order = np.lexsort((-frame["input_tokens"].to_numpy(np.float64, na_value=0.0),
                        -frame["cost_usd"].to_numpy(np.float64, na_value=0.0), missing))
    return frame.iloc[order].reset_index(drop=True)


def _own_running_totals(frame: pd.DataFrame, fork_seq: int) -> pd.DataFrame:
    """The running totals of a fork's own usage events (after the cut), from zero."""
    own = frame[frame["seq"] > fork_seq].reset_index(drop=True)
    for col in ("input_tokens", "output_tokens", "cached_tokens"):
        own[f"cum_{col}"] = own[col].fillna(0).cumsum().astype("int64[pyarrow]")
    own["cum_cost_usd"] = [float(v) for v in _exact_cumsum(own["cost_usd"])]
    unknown = ((own["type"] == "llm.response") & own["cost_usd"].isna()).fillna(False)
    own["cum_cost_unknown_calls"] = unknown.astype("int64").cumsum().astype("int64[pyarrow]")
    return own


def _exact_cumsum(values: Any) -> list[Any]:
    total, out = usd_sum(()), []
    for v in values:
        total += usd_sum((v,))
        out.append(total)
    return out


def _group_label(value: Any, llm_calls: Any, missing: str) -> str:
    if not pd.isna(value):
        return str(value)
    return TOOL_CALLS if missing == NO_MODEL and not llm_calls else missing


# --- figures ---------------------------------------------------------------------------------


def _unknown_note(unknown: int, where: str = "bars") -> str:
    return (f"{unknown:,} call{'s' if unknown != 1 else ''} of unknown cost: not in the cost "
            f"{where} (unknown, not $0)")


def _top(frame: pd.DataFrame, column: str, missing: str, what: str) -> pd.DataFrame:
    """``frame`` (already in the table's order) with text labels, without groups that have no
    tokens and no cost; past :data:`TOP` rows the rest summed into one ``… N other <what>``
    row (so the figure still adds up)."""
    values = ["calls", "input_tokens", "output_tokens", "cached_tokens", "cost_usd", "cost_unknown_calls"]
    llm = frame["llm_calls"].to_numpy(np.float64, na_value=0.0) if "llm_calls" in frame else np.zeros(len(frame))
    out = pd.DataFrame({
        "label": [_group_label(v, n, missing) for v, n in zip(frame[column].astype(object), llm, strict=True)],
        **{v: frame[v].to_numpy(np.float64, na_value=0.0) for v in values},
    })
    zero = (out[values[1:]] == 0).all(axis=1)  # nothing to draw (the table keeps them)
    out = out[~zero] if (~zero).any() else out
    if len(out) > TOP:
        rest = out.iloc[TOP - 1:]
        other = {"label": f"… {len(rest):,} other {what}", **{v: rest[v].sum() for v in values}}
        other["cost_usd"] = float(usd_sum(rest["cost_usd"]))
        out = pd.concat([out.iloc[:TOP - 1], pd.DataFrame([other])], ignore_index=True)
    return out.reset_index(drop=True)


def group_figure(frame: pd.DataFrame, column: str, *, missing: str, title: str, what: str) -> go.Figure:
    """What was paid (left) and tokens (right) per group of a ``cost(by=...)`` table, one row
    each, in the table's order.

    A group whose cost is wholly unknown has no cost bar (``None``) and an "unknown" label; a
    kind of token no group has (say, no cached tokens) gets no trace and no legend entry.
    """
    data = _top(frame, column, missing, what)
    labels = [html.escape(s, quote=False) for s in data["label"]]
    unknown = data["cost_unknown_calls"].to_numpy(np.int64)
    cost = data["cost_usd"].to_numpy(np.float64)
    only_unknown = (unknown > 0) & (cost == 0)
    cost_y = [None if u else float(c) for c, u in zip(cost, only_unknown, strict=True)]
    cost_text = ["" if u else fmt_usd(c) + unknown_text(k)
                 for c, u, k in zip(cost, only_unknown, unknown, strict=True)]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=(f"{PAID} (USD)", "tokens"))
    fig.add_trace(go.Bar(y=labels, x=cost_y, orientation="h", name=f"{PAID} (USD)", text=cost_text,
                         textposition="auto", marker_color=COST_COLOR, meta={"role": "cost"},
                         customdata=np.array([[t or "unknown", int(k)] for t, k in
                                              zip(cost_text, unknown, strict=True)], dtype=object),
                         cliponaxis=False,
                         hovertemplate="%{y}<br>" + PAID + " %{customdata[0]}<br>unknown-cost calls: "
                                       "%{customdata[1]}<extra></extra>"), row=1, col=1)
    for key, color in TOKEN_COLORS.items():
        values = data[f"{key}_tokens"].astype(np.int64)
        if not values.any():
            continue
        fig.add_trace(go.Bar(y=labels, x=values, orientation="h",
                             name=f"{key} tokens", marker_color=color, meta={"role": f"{key}_tokens"},
                             hovertemplate=f"%{{y}}<br>{key} tokens %{{x:,}}<extra></extra>"),
                      row=1, col=2)
    for label, u, k in zip(labels, only_unknown, unknown, strict=True):
        if u:
            fig.add_annotation(x=0, y=label, xref="x domain", yref="y", xanchor="left", showarrow=False,
                               text=f"cost unknown ({k:,} call{'s' if k != 1 else ''})",
                               font={"color": UNKNOWN_COLOR, "size": 11}, name="unknown-cost")
    total_unknown = int(unknown.sum())
    total = usd_sum(data["cost_usd"])
    sub = f"{PAID} {fmt_usd(total)}"
    if total_unknown:
        sub = f"{PAID} (known) {fmt_usd(total)} · {_unknown_note(total_unknown)}"
    fig.update_layout(
        template="plotly_white", barmode="group", height=180 + ROW_PX * max(len(data), 3),
        title={"text": html.escape(title, quote=False), "x": 0.01, "xanchor": "left",
               "subtitle": {"text": html.escape(sub, quote=False),
                            "font": {"color": UNKNOWN_COLOR if total_unknown else "#666", "size": 12}}},
        margin={"l": 10, "r": 20, "t": 90, "b": 70},
        legend={"orientation": "h", "yref": "container", "y": 0.0, "yanchor": "bottom", "x": 0.0},
        meta={"agentlog": {"total_cost_usd": float(total), "cost_unknown_calls": total_unknown}})
    fig.update_yaxes(autorange="reversed", automargin=True)
    # labels beside the bars: room for them past the longest bar
    fig.update_xaxes(**usd_axis(float(cost.max(initial=0.0)) * 1.45), row=1, col=1)
    return fig


def over_time_figure(frame: pd.DataFrame, title: str) -> go.Figure:
    """Running totals of tokens (left axis) and known cost (right axis) at each usage event;
    model answers of unknown cost are marked on the token line, never counted as $0 (with no
    known cost at all there is no cost line)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    if frame.empty:
        fig.add_annotation(text="no usage", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    else:
        ts = frame["ts"]
        tokens = (frame["cum_input_tokens"].to_numpy(np.int64) + frame["cum_output_tokens"].to_numpy(np.int64))
        cost = frame["cum_cost_usd"].to_numpy(np.float64, na_value=np.nan)  # unknown so far: a gap, not $0
        fig.add_trace(go.Scatter(x=ts, y=tokens, name="tokens (in + out)", line_shape="hv",
                                 mode="lines", line_color=TOKEN_COLORS["input"], meta={"role": "tokens"},
                                 hovertemplate="%{x}<br>%{y:,} tokens<extra></extra>"), secondary_y=False)
        unknown = ((frame["type"] == "llm.response") & frame["cost_usd"].isna()).fillna(False).to_numpy(bool)
        if not unknown.any() or (cost > 0).any():  # no line of $0 when no cost is known
            fig.add_trace(go.Scatter(x=ts, y=cost, name=f"{PAID} (USD)", line_shape="hv",
                                     mode="lines", line_color=COST_COLOR, meta={"role": "cost"},
                                     text=[fmt_usd(c) for c in cost],
                                     hovertemplate="%{x}<br>%{text}<extra></extra>"), secondary_y=True)
        if unknown.any():  # marked on the token line: they have tokens, not a cost
            fig.add_trace(go.Scatter(x=ts[unknown], y=tokens[unknown], mode="markers",
                                     name="model call of unknown cost",
                                     marker={"symbol": "circle-open", "size": 10, "color": UNKNOWN_COLOR,
                                             "line": {"width": 2}},
                                     meta={"role": "unknown"},
                                     hovertemplate="%{x}<br>a model call of unknown cost<extra></extra>"),
                          secondary_y=False)
    n_unknown = int(frame["cum_cost_unknown_calls"].max()) if len(frame) else 0
    total = fmt_usd(usd_sum(frame["cost_usd"])) if len(frame) else "$0"
    sub = (f"{PAID} (known) {total} · {_unknown_note(n_unknown, 'line')}" if n_unknown
           else f"{PAID} {total}")
    fig.update_layout(
        template="plotly_white", height=400,
        title={"text": html.escape(title, quote=False), "x": 0.01, "xanchor": "left",
               "subtitle": {"text": html.escape(sub, quote=False),
                            "font": {"color": UNKNOWN_COLOR if n_unknown else "#666", "size": 12}}},
        margin={"l": 10, "r": 10, "t": 90, "b": 90},
        legend={"orientation": "h", "yref": "container", "y": 0.0, "yanchor": "bottom", "x": 0.0},
        meta={"agentlog": {"cost_unknown_calls": n_unknown}})
    fig.update_yaxes(title_text="tokens", secondary_y=False, rangemode="tozero")
    known_top = frame["cum_cost_usd"].max() if len(frame) else None
    top = 0.0 if known_top is None or pd.isna(known_top) else float(known_top)
    fig.update_yaxes(title_text=f"{PAID} (USD)", secondary_y=True, showgrid=False, **usd_axis(top))
    return fig


def _figures(source: Any, tables: dict[str, pd.DataFrame]) -> dict[str, go.Figure]:
    run = _is_run(source)
    groups = RUN_GROUPS if run else STORE_GROUPS
    label = _label(source)
    what = {"by_model": "models", "by_span": "spans", "by_actor": "actors", "by_run": "runs",
            "by_day": "days"}
    figs = {name: group_figure(tables[name], column, missing=missing, title=f"{title} — {label}",
                               what=what[name])
            for name, (_by, column, missing, title) in groups.items()}
    if run:
        figs["over_time"] = over_time_figure(tables["over_time"], f"Tokens and cost over time — {label}")
    return figs


def cost_figures(run_or_store: Run | Store) -> dict[str, go.Figure]:
    """The dashboard's figures: for a run ``by_model``, ``by_span``, ``by_actor``,
    ``over_time``; for a store ``by_run``, ``by_day``, ``by_model``.

    >>> import agentlog as al, tempfile, pathlib
    >>> store = al.examples.sample_store(copy_to=pathlib.Path(tempfile.mkdtemp()) / "s")
    >>> sorted(cost_figures(store.run("sre-0001")))
    ['by_actor', 'by_model', 'by_span', 'over_time']
    >>> sorted(cost_figures(store))
    ['by_day', 'by_model', 'by_run']
    """
    return _figures(run_or_store, cost_tables(run_or_store))


# --- HTML tables and the notebook view -------------------------------------------------------


def cost_table_html(frame: pd.DataFrame, key: str) -> str:
    """A ``cost(by=...)`` table as escaped HTML, in its order: unknown costs written as such,
    never $0; tool calls (no model) as their own row."""
    cols = (key, "calls", "model calls", "tool calls", "input", "output", "cached", PAID)
    missing = NO_MODEL if key == "model" else "–"
    rows = []
    for r in frame.to_dict(orient="records"):
        unknown = 0 if pd.isna(r["cost_unknown_calls"]) else int(r["cost_unknown_calls"])
        cost = fmt_usd(r["cost_usd"]) + unknown_text(unknown)
        if unknown and not r["cost_usd"]:
            cost = f"unknown ({unknown:,} call{'s' if unknown != 1 else ''})"
        rows.append((_group_label(r[key], r["llm_calls"], missing), r["calls"], r["llm_calls"],
                     r["tool_calls"], r["input_tokens"], r["output_tokens"], r["cached_tokens"], cost))
    return table(cols, rows, numeric=(False, *[True] * 7))


def over_time_html(frame: pd.DataFrame) -> str:
    """The running totals as escaped HTML (cut after 200 rows)."""
    cols = ("seq", "ts", "type", "model", "in", "out", PAID, "Σ tokens", f"Σ {PAID}", "Σ unknown")
    rows = [(r["seq"], r["ts"], r["type"], r["model"], r["input_tokens"], r["output_tokens"],
             "unknown" if r["type"] == "llm.response" and pd.isna(r["cost_usd"]) else fmt_usd(r["cost_usd"]),
             r["cum_input_tokens"] + r["cum_output_tokens"], fmt_cost(r["cum_cost_usd"]),
             r["cum_cost_unknown_calls"])
            for r in frame.to_dict(orient="records")]
    return table(cols, rows, numeric=(True, False, False, False, True, True, True, True, True, True))


class CostDashboard:
    """Tokens and cost of a run or a store: tables, figures and, in a kernel, a tabbed view.

    Args:
        run_or_store: a :class:`~agentlog.Run` or a :class:`~agentlog.Store`.

    ``tables`` (DataFrames) and ``figures`` (plotly figures) share their keys (see
    :func:`cost_tables`); ``html()`` is every table as escaped HTML. Outside a kernel the
    dashboard shows as the HTML tables and the plain figures.

    >>> import agentlog as al, tempfile, pathlib
    >>> from agentlog.numbers import usd_sum
    >>> store = al.examples.sample_store(copy_to=pathlib.Path(tempfile.mkdtemp()) / "s")
    >>> dash = CostDashboard(store.run("sre-0001"))
    >>> dash.figures["by_model"].layout.meta["agentlog"]["total_cost_usd"] == float(
    ...     usd_sum(store.run("sre-0001").events["cost_usd"]))
    True
    """

    def __init__(self, run_or_store: Run | Store, *, live: bool = False) -> None:
        self.source = run_or_store
        self.tables: dict[str, pd.DataFrame] = cost_tables(run_or_store)
        self.figures: dict[str, go.Figure] = _figures(run_or_store, self.tables)
        self._widget: Any = None
        self.follower: Any = None
        if live:
            if not _is_run(run_or_store):
                raise ValueError("live=True follows one run; a store's dashboard is drawn once")
            from .live import Follower
            self.follower = Follower(run_or_store, self._grow)  # type: ignore[arg-type]

    def _grow(self, new: list[Any]) -> None:
        """New events arrived (live): the tables, figures and the view are made again."""
        self.tables = cost_tables(self.source)
        self.figures = _figures(self.source, self.tables)
        if self._widget is not None:
            self._fill(self._widget)

    def __repr__(self) -> str:
        kind = "run" if _is_run(self.source) else "store"
        return f"<CostDashboard {kind} {_label(self.source)}: {', '.join(self.tables)}>"

    def summary_html(self) -> str:
        """The totals: what was paid (calls of unknown cost apart; for a fork, the total incl.
        its inherited prefix too), tokens, calls."""
        first = self.tables["by_model"]
        t = first.sum(numeric_only=True)
        facts = [(PAID, fmt_usd(usd_sum(first["cost_usd"])) + unknown_text(t["cost_unknown_calls"]))]
        source: Any = self.source
        if _is_run(source) and source.fork_seq is not None:
            from ..analysis.tables import event_table
            whole = event_table(source).column("cost_usd").to_pylist()
            facts.append((TOTAL, fmt_usd(usd_sum(whole))))
        facts += [("tokens", (f"{fmt_int(t['input_tokens'])} in · {fmt_int(t['output_tokens'])} out · "
                              f"{fmt_int(t['cached_tokens'])} cached")),
                  ("model calls", fmt_int(t["llm_calls"])), ("tool calls", fmt_int(t["tool_calls"]))]
        kind = "Run" if _is_run(self.source) else "Store"
        text = "\n".join(f"{k}: {v}" for k, v in facts)
        return obj_repr(text, header(f"CostDashboard · {kind}", _label(self.source)), grid(facts))

    def table_html(self, name: str) -> str:
        """The table ``name`` as escaped HTML."""
        frame = self.tables[name]
        if name == "over_time":
            return over_time_html(frame)
        groups = RUN_GROUPS if _is_run(self.source) else STORE_GROUPS
        return cost_table_html(frame, groups[name][1])

    def html(self) -> str:
        """Totals and every table, as one escaped HTML fragment (no figures)."""
        items = [section(name.replace("_", " "), self.table_html(name), len(frame))
                 for name, frame in self.tables.items()]
        body = sections(items)
        return self.summary_html() + obj_repr("", "", body)

    def widget(self) -> Any:
        """The ``ipywidgets`` view: totals, then one tab per table (figure and table); the
        figures are plain plotly figures (no ``FigureWidget``: see ``_kernel.figure_output``)."""
        if self._widget is None:
            import ipywidgets as widgets
            self._widget = widgets.VBox()
            self._widget.add_class("agentlog-costdash")
            if self.follower is not None:
                self._badge = widgets.HTML()
                self._badge.add_class("agentlog-live-badge")
                self.follower.badge = self._badge
            self._fill(self._widget)
            if self.follower is not None:
                self.follower.tick()
                self.follower.start()
        return self._widget

    def _fill(self, box: Any) -> None:
        import ipywidgets as widgets
        tabs = []
        for name in self.tables:
            table_box = widgets.HTML(value=obj_repr("", "", self.table_html(name)))
            tabs.append(widgets.VBox([figure_output(self.figures[name]), table_box]))
        old = next((c for c in box.children if isinstance(c, widgets.Tab)), None)
        tab = widgets.Tab(children=tabs, titles=[n.replace("_", " ") for n in self.tables],
                          selected_index=old.selected_index if old is not None else 0)
        head = widgets.HTML(value=self.summary_html())
        box.children = ([self._badge] if self.follower is not None else []) + [head, tab]

    def _ipython_display_(self) -> None:
        if in_kernel():
            show_objects(self.widget())
            return
        show_objects(html_text=self.summary_html())
        for name, fig in self.figures.items():
            show_objects(fig, html_text=None)
            show_objects(html_text=obj_repr("", "", self.table_html(name)))

    def _repr_html_(self) -> str | None:
        return self.html() if OPTIONS["display"] == "html" else None
