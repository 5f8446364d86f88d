"""The span waterfall: every span of a run on a time axis, as a plotly figure and a notebook view.

:func:`waterfall_figure` draws ``run.spans()`` as horizontal bars: one row per span in start
order, the label indented by depth, the x axis in seconds since the run's first event, one
trace per kind group (``agent`` for agent/chain/step spans, ``llm``, ``tool``, ``http``,
``other``), failed spans outlined in red with a ✕ at their end, model calls labelled with the
model and tokens, a hover with name, kind, duration, tokens and cost. Up to 200 rows every row
has a y label; past that the names go beside the bars, where they show once zoomed in; past
1,000 bars there is no bar text at all (it is most of Chromium's drawing time: 5,000 bars
take about 5 s with text, 2 s without), only the hover. It is a plain
:class:`plotly.graph_objects.Figure`, so it also renders in static HTML exports.

Level of detail: a figure with more than ``max_bars`` bars stops being readable and slow to
draw, so past ``max_bars`` spans the shallow spans stay bars (every depth whose spans, with
those above it, fit in half the budget) and the deeper spans are aggregated: one lane per
(depth, kind group) under a separator, each lane cut into time buckets, one bar per non-empty
bucket from the first start to the last end of its spans inside the bucket, its opacity the
share of the bucket the spans keep busy, red-outlined when a span in it failed (failed spans
also keep their own ✕). The lanes cover the whole run, the title says how many spans are
drawn and how, and hovering a bucket gives its count, tokens and cost. To see the spans of a
stretch one by one, pass a filtered table: ``waterfall_figure(run, spans=sp[sp.start > t])``.
This keeps SVG bars (crisp, clickable, labelled) rather than a heatmap or WebGL segments,
and the number of drawn elements stays near ``max_bars`` whatever the size of the run.

:class:`Waterfall` wraps the figure for notebooks: in a kernel it shows a ``FigureWidget`` and
an events panel below it; clicking a bar selects that span and lists its events.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ._kernel import in_kernel, show_objects
from .html import _missing, cut, fmt_int, fmt_ms, fmt_usd, obj_repr, table

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["CUSTOM", "GROUP_COLORS", "KIND_GROUPS", "Waterfall", "figure_bundle", "span_events_html",
           "time_unit", "waterfall_figure"]

#: Span kinds drawn in one colour; any other kind is ``other``.
KIND_GROUPS: Final[dict[str, str]] = {"agent": "agent", "chain": "agent", "step": "agent",
                                      "workflow": "agent", "llm": "llm", "tool": "tool",
                                      "http": "http"}
#: The colour of each kind group, in legend order.
GROUP_COLORS: Final[dict[str, str]] = {"agent": "#4C78A8", "llm": "#B279A2", "tool": "#F58518",
                                       "http": "#54A24B", "other": "#9D9D9D"}
ERROR_COLOR: Final = "#D62728"
#: ``customdata`` columns of every span bar (tests and click handlers read them by position).
CUSTOM: Final = ("span_id", "name", "kind", "duration", "tokens", "cost", "status", "start")
LABEL_ROWS: Final = 200     # rows up to which every span row gets a y label
LABEL_CHARS: Final = 44     # characters of a y label
ROW_PX: Final = 22          # height of a labelled row (16 px past 40 rows)
LANE_PX: Final = 56         # height of an aggregated lane
TEXT_BARS: Final = 1000     # bars up to which bars carry text (model and tokens, or names)

_HOVER: Final = ("<b>%{customdata[1]}</b> · %{customdata[2]}<br>%{customdata[3]} from "
                 "%{customdata[7]}<br>tokens: %{customdata[4]}<br>cost: %{customdata[5]}<br>"
                 "status: %{customdata[6]}<br>span %{customdata[0]}<extra></extra>")


def _esc(values: Any) -> list[str]:
    """Plotly renders a little HTML in text: run data is escaped (plotly decodes entities)."""
    return [html.escape(str(v), quote=False) for v in values]


# --- the span table as arrays ----------------------------------------------------------------


def _arrays(spans: pd.DataFrame, t0: pd.Timestamp) -> dict[str, np.ndarray]:
    """The columns the figure needs, as numpy arrays, times in seconds since ``t0``."""
    def num(name: str, dtype: Any = np.float64, na: Any = 0) -> np.ndarray:
        return np.asarray(spans[name].to_numpy(dtype=dtype, na_value=na))

    def text(name: str) -> np.ndarray:
        return np.asarray(spans[name].to_numpy(dtype=object, na_value=""))

    kind = text("kind")
    return {
        "start": (spans["start"] - t0).dt.total_seconds().to_numpy(np.float64),
        "end": (spans["end"] - t0).dt.total_seconds().to_numpy(np.float64),
        "depth": num("depth", np.int64), "kind": kind,
        "group": pd.Series(kind).map(KIND_GROUPS).fillna("other").to_numpy(object),
        "error": (spans["status"] == "error").fillna(False).to_numpy(bool),
        "span_id": text("span_id"), "name": text("name"), "model": text("model"),
        "status": text("status"), "error_text": text("error"),
        "duration_ms": num("duration_ms", na=np.nan),
        "input": num("total_input_tokens", np.int64), "output": num("total_output_tokens", np.int64),
        "cost": num("total_cost_usd"), "unknown": num("total_cost_unknown_calls", np.int64),
        "start_ts": spans["start"].dt.strftime("%H:%M:%S.%f").str[:-3].to_numpy(object, na_value=""),
    }


def _cost_text(cost: float, unknown: int) -> str:
    if unknown:
        return f"{fmt_usd(cost)} + {unknown:,} call{'s' if unknown != 1 else ''} of unknown cost"
    return fmt_usd(cost)


def _custom(a: dict[str, np.ndarray], sel: np.ndarray) -> np.ndarray:
    """``customdata`` rows (see :data:`CUSTOM`) of the spans ``sel``: one Python pass over at
    most ``max_bars`` spans."""
    rows = []
    for i in sel:
        status = a["status"][i]
        if a["error"][i] and a["error_text"][i]:
            status = f"error: {cut(str(a['error_text'][i]), 120)}"
        tokens = (f"{a['input'][i]:,} in · {a['output'][i]:,} out"
                  if a["input"][i] or a["output"][i] else "–")
        rows.append((a["span_id"][i], a["name"][i], a["kind"][i], fmt_ms(a["duration_ms"][i]), tokens,
                     _cost_text(a["cost"][i], int(a["unknown"][i])), status,
                     f"+{a['start_s'][i]:.3f} s ({a['start_ts'][i]} UTC)"))
    out = np.empty((len(rows), len(CUSTOM)), dtype=object)
    if rows:
        out[:] = [_esc(r) for r in rows]
    return out


def _bar_labels(a: dict[str, np.ndarray], sel: np.ndarray, names: bool) -> list[str]:
    """``gpt-4o · 82 in / 121 out`` for model calls; the span's name for the other bars when
    ``names`` (the rows have no y labels), else nothing."""
    out = []
    for i in sel:
        if a["group"][i] == "llm":
            text = f"{a['model'][i] or a['name'][i]} · {a['input'][i]:,} in / {a['output'][i]:,} out"
        else:
            text = cut(str(a["name"][i]), LABEL_CHARS) if names else ""
        out.append(html.escape(text, quote=False))
    return out


def _row_labels(a: dict[str, np.ndarray], sel: np.ndarray) -> list[str]:
    """Names indented by depth, padded to one width: with a monospace font the right-aligned
    tick labels then read as a left-aligned tree."""
    raw = []
    for i in sel:
        d = int(a["depth"][i])
        prefix = "" if d == 0 else "  " * (d - 1) + "└ "
        raw.append(cut(prefix + str(a["name"][i]), LABEL_CHARS))
    width = max((len(s) for s in raw), default=0)
    return [html.escape(s.ljust(width), quote=False).replace(" ", "\u00a0") for s in raw]


# --- individual bars -------------------------------------------------------------------------


def _span_traces(a: dict[str, np.ndarray], sel: np.ndarray, y: np.ndarray, names: bool) -> list[Any]:
    """One bar trace per kind group for the spans ``sel`` at rows ``y``, and the ✕ markers of
    the failed ones; ``names`` puts the span names beside the bars. Past :data:`TEXT_BARS`
    bars there is no bar text (it is most of Chromium's drawing time); hover still tells."""
    texts = _bar_labels(a, sel, names) if len(sel) <= TEXT_BARS else [""] * len(sel)
    custom, labels = _custom(a, sel), np.array(texts, dtype=object)
    start, end, groups, err = a["start"][sel], a["end"][sel], a["group"][sel], a["error"][sel]
    traces: list[Any] = []
    for group, color in GROUP_COLORS.items():
        m = groups == group
        if not m.any():
            continue
        traces.append(go.Bar(
            orientation="h", base=start[m], x=end[m] - start[m], y=y[m], width=0.72,
            name=group, legendgroup=group, customdata=custom[m], hovertemplate=_HOVER,
            text=labels[m], textposition="outside", cliponaxis=False,
            textfont={"size": 11, "color": "#444"},
            marker={"color": color, "line": {"color": np.where(err[m], ERROR_COLOR, color),
                                             "width": np.where(err[m], 2.5, 0.0)}}))
    if err.any():
        traces.append(go.Scatter(
            x=end[err], y=y[err], mode="markers", name="error", legendgroup="error",
            marker={"symbol": "x", "size": 10, "color": ERROR_COLOR, "line": {"width": 1, "color": "white"}},
            customdata=custom[err], hovertemplate=_HOVER))
    return traces


# --- aggregated lanes ------------------------------------------------------------------------


def _detail_depth(depth: np.ndarray, budget: int) -> int:
    """The deepest depth whose spans, with every shallower one, fit in ``budget`` (-1: none)."""
    cum = np.cumsum(np.bincount(depth))
    fits = np.nonzero(cum <= budget)[0]
    return int(fits[-1]) if len(fits) else -1


def _bucket_rows(start: np.ndarray, end: np.ndarray, span_end: float, buckets: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each span once per bucket it overlaps: (span index, bucket, seconds inside the bucket)."""
    width = span_end / buckets
    b0 = np.clip((start / width).astype(np.int64), 0, buckets - 1)
    b1 = np.clip((end / width).astype(np.int64), 0, buckets - 1)
    reps = b1 - b0 + 1
    idx = np.repeat(np.arange(len(start)), reps)
    offsets = np.arange(len(idx)) - np.repeat(np.cumsum(reps) - reps, reps)
    bucket = b0[idx] + offsets
    inside = np.minimum(end[idx], (bucket + 1) * width) - np.maximum(start[idx], bucket * width)
    return idx, bucket, np.maximum(inside, 0.0)


def _lane_traces(a: dict[str, np.ndarray], sel: np.ndarray, span_end: float, budget: int,
                 y_first: float, lane_h: float, max_markers: int, unit: str, in_legend: set[str]
                 ) -> tuple[list[Any], list[float], list[str], int]:
    """Aggregated lanes for the spans ``sel``: traces, lane tick positions and labels, bars.

    Times are in ``unit``; a group already in ``in_legend`` gets no second legend entry."""
    depth, groups = a["depth"][sel], a["group"][sel]
    order = list(GROUP_COLORS)
    gcode = pd.Categorical(groups, categories=order).codes.astype(np.int64)
    lane_key = depth * len(order) + gcode
    keys, lane = np.unique(lane_key, return_inverse=True)
    n_lanes = len(keys)
    buckets = int(np.clip(budget // max(n_lanes, 1), 10, 400))
    start, end = a["start"][sel], a["end"][sel]
    idx, bucket, inside = _bucket_rows(start, end, span_end, buckets)
    cell = lane[idx] * buckets + bucket
    n_cells = n_lanes * buckets
    first = bucket == np.clip((start[idx] / (span_end / buckets)).astype(np.int64), 0, buckets - 1)
    width = span_end / buckets
    lo = np.full(n_cells, np.inf)
    hi = np.full(n_cells, -np.inf)
    np.minimum.at(lo, cell, np.maximum(start[idx], bucket * width))
    np.maximum.at(hi, cell, np.minimum(end[idx], (bucket + 1) * width))
    count = np.bincount(cell[first], minlength=n_cells)
    busy = np.bincount(cell, weights=inside, minlength=n_cells)
    def per_cell(values: np.ndarray) -> np.ndarray:
        return np.bincount(cell[first], weights=values[sel][idx[first]], minlength=n_cells)
    tokens_in, tokens_out = per_cell(a["input"]), per_cell(a["output"])
    cost, unknown = per_cell(a["cost"]), per_cell(a["unknown"].astype(np.float64))
    errors = np.bincount(cell, weights=a["error"][sel][idx].astype(np.float64), minlength=n_cells)
    live = np.nonzero(np.isfinite(lo))[0]
    lane_of, b_of = live // buckets, live % buckets
    y = y_first + lane_h * (lane_of + 0.5)
    lane_depth, lane_group = keys // len(order), [order[int(k % len(order))] for k in keys]
    lane_count = np.bincount(lane, minlength=n_lanes)
    labels = [html.escape(f"▤ {g} ×{c:,} (depth {d})", quote=False).replace(" ", "\u00a0")
              for g, c, d in zip(lane_group, lane_count, lane_depth, strict=True)]
    hover = [f"<b>{lane_group[lane_of[k]]} spans at depth {lane_depth[lane_of[k]]}</b><br>"
             f"{int(count[c]):,} started in {b_of[k] * width:.4g}–{(b_of[k] + 1) * width:.4g} {unit}"
             f" · busy {100 * busy[c] / width:.0f}%<br>tokens: {int(tokens_in[c]):,} in · "
             f"{int(tokens_out[c]):,} out<br>cost: {_cost_text(cost[c], int(unknown[c]))}"
             + (f"<br><b>{int(errors[c]):,} failed</b>" if errors[c] else "")
             for k, c in enumerate(live)]
    err = errors[live] > 0
    traces: list[Any] = []
    cell_group = np.array(lane_group, dtype=object)[lane_of]
    for g, color in GROUP_COLORS.items():
        m = cell_group == g
        if not m.any():
            continue
        traces.append(go.Bar(
            orientation="h", base=lo[live][m], x=(hi - lo)[live][m], y=y[m], width=lane_h * 0.8,
            name=g, legendgroup=g, showlegend=g not in in_legend, meta={"aggregated": True},
            hovertext=np.array(hover, dtype=object)[m],
            hovertemplate="%{hovertext}<extra></extra>", customdata=np.full((int(m.sum()), 1), ""),
            marker={"color": color, "opacity": np.clip(0.3 + 0.7 * busy[live][m] / width, 0.3, 1.0),
                    "line": {"color": np.where(err[m], ERROR_COLOR, color),
                             "width": np.where(err[m], 2.0, 0.0)}}))
    failed = np.nonzero(a["error"][sel])[0][:max_markers]
    if len(failed):
        fy = y_first + lane_h * (lane[failed] + 0.5)
        traces.append(go.Scatter(
            x=end[failed], y=fy, mode="markers", name="error", legendgroup="error",
            showlegend="error" not in in_legend,
            marker={"symbol": "x", "size": 9, "color": ERROR_COLOR, "line": {"width": 1, "color": "white"}},
            customdata=_custom(a, sel[failed]), hovertemplate=_HOVER))
    tick_y = [y_first + lane_h * (j + 0.5) for j in range(n_lanes)]
    return traces, tick_y, labels, len(live)


# --- the figure ------------------------------------------------------------------------------


def _fork_pause(run: Run, t0: pd.Timestamp) -> tuple[float, float] | None:
    """For a fork: (the cut, in seconds since ``t0``; the pause until the fork's first own
    event, in seconds). A fork is often made long after its parent ran: that time is left out
    of the axis, or the parent's part would be a sliver at the left."""
    at = run.fork_seq
    if at is None or at + 1 >= len(run):
        return None
    from ..analysis.tables import event_table  # cached per run

    ts = event_table(run).column("ts")
    cut, first = pd.Timestamp(ts[at].as_py()), pd.Timestamp(ts[at + 1].as_py())
    return (cut - t0).total_seconds(), max(0.0, (first - cut).total_seconds())


def _close_fork_pause(a: dict[str, np.ndarray], pause: tuple[float, float]) -> None:
    """Shift the fork's own times back by the pause (spans across the cut lose it too)."""
    cut, gap = pause
    across = (a["start"] <= cut) & (a["end"] > cut)
    a["duration_ms"] = np.where(across, a["duration_ms"] - gap * 1000.0, a["duration_ms"])
    for key in ("start", "end"):
        a[key] = np.where(a[key] > cut, a[key] - gap, a[key])


def _pause_text(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.0f} days"
    unit, scale = time_unit(seconds)
    return f"{seconds / scale:,.1f} {_UNIT_NAMES[unit]}"


def _run_start(run: Run, spans: pd.DataFrame) -> pd.Timestamp:
    started = run.summary()["started"].iloc[0]
    first = spans["start"].min()
    if pd.isna(started) or (not pd.isna(first) and first < started):
        return first
    return started


def time_unit(seconds: float) -> tuple[str, float]:
    """The x axis unit for a run this long: ``(name, seconds per unit)``.

    >>> time_unit(42.0), time_unit(1800.0), time_unit(40_000.0)
    (('s', 1.0), ('min', 60.0), ('h', 3600.0))
    """
    if seconds < 600:
        return "s", 1.0
    if seconds < 3 * 3600:
        return "min", 60.0
    return "h", 3600.0


_UNIT_NAMES: Final = {"s": "seconds", "min": "minutes", "h": "hours"}


def _meta(spans: int, bars: int, aggregated: bool, unit: str = "s", scale: float = 1.0) -> dict[str, Any]:
    return {"agentlog": {"spans": spans, "bars": bars, "aggregated": aggregated, "time_unit": unit,
                         "seconds_per_unit": scale}}


def _empty_figure(title: str) -> go.Figure:
    fig = go.Figure(layout={"title": {"text": html.escape(title, quote=False)}, "height": 260,
                                "template": "plotly_white", "xaxis": {"visible": False},
                                "yaxis": {"visible": False}, "meta": _meta(0, 0, False)})
    fig.add_annotation(text="no spans", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                       font={"size": 16, "color": "#777"}, name="no-spans")
    return fig


def _note(n: int, n_bars: int, n_single: int, detail: int, n_lane_bars: int) -> str:
    if detail < 0 or n_single == 0:
        shown = f"showing {n_lane_bars:,} aggregated bars"
    else:
        shown = (f"showing {n_single:,} span{'s' if n_single != 1 else ''} to depth {detail} as "
                 f"bars and the deeper {n - n_single:,} as {n_lane_bars:,} aggregated bars")
    return f"{n:,} spans; {shown} — zoom in / filter (spans=…) to see individual spans"


def waterfall_figure(run: Run, *, max_bars: int = 5000, spans: pd.DataFrame | None = None) -> go.Figure:
    """The span tree of ``run`` on a time axis, as a plotly figure.

    Args:
        run: the run.
        max_bars: the most spans drawn one bar each; past it the deep spans are aggregated
            into time buckets per (depth, kind) lane (see the module docstring), and the
            figure says so in its subtitle.
        spans: the span table to draw (default ``run.spans()``), e.g. a filtered one.

    The x axis is the time since the run's first event, in seconds (minutes or hours for
    long runs: see :func:`time_unit`). Each span bar's ``customdata`` holds :data:`CUSTOM`;
    ``fig.layout.meta["agentlog"]`` says how many spans and bars were drawn, whether the
    figure is aggregated, and the time unit.

    >>> import agentlog as al, tempfile, pathlib
    >>> store = al.examples.sample_store(copy_to=pathlib.Path(tempfile.mkdtemp()) / "s")
    >>> meta = waterfall_figure(store.run("sre-0001")).layout.meta["agentlog"]
    >>> meta["spans"], meta["bars"], meta["aggregated"], meta["time_unit"]
    (25, 25, False, 's')
    """
    if max_bars < 1:
        raise ValueError(f"max_bars must be >= 1; got {max_bars!r}")
    title = f"{run.name or run.id} — span waterfall"
    if spans is None:
        spans = run.spans()
    if len(spans) == 0:
        return _empty_figure(title)
    spans = spans.sort_values("start_seq", kind="stable").reset_index(drop=True)
    t0 = _run_start(run, spans)
    a = _arrays(spans, t0)
    pause = _fork_pause(run, t0)
    if pause is not None:
        _close_fork_pause(a, pause)
    unit, scale = time_unit(float(np.nanmax(a["end"])))
    a["start_s"] = a["start"]
    a["start"], a["end"] = a["start"] / scale, a["end"] / scale
    n = len(spans)
    span_end = max(float(np.nanmax(a["end"])), 1e-9)
    aggregated = n > max_bars
    detail = _detail_depth(a["depth"], max_bars // 2) if aggregated else int(a["depth"].max())
    single = np.nonzero(a["depth"] <= detail)[0]
    pooled = np.nonzero(a["depth"] > detail)[0]
    m = len(single)
    labelled = m <= LABEL_ROWS
    row_px = ROW_PX if m <= 40 else 16
    rows_px = row_px * m if labelled else int(np.clip(3 * m, 400, 900))
    unit_px = rows_px / m if m else LANE_PX
    traces = _span_traces(a, single, np.arange(m, dtype=np.float64), not labelled) if m else []
    tickvals: list[float] = list(range(m)) if labelled else []
    ticktext: list[str] = _row_labels(a, single) if labelled else []
    lanes_px, n_lane_bars, shapes = 0, 0, []
    y_max = m - 0.5
    if len(pooled):
        lane_h = LANE_PX / unit_px
        gap = 0.6 * lane_h if m else 0.0
        in_legend = {t.name for t in traces}
        lane_traces, lane_y, lane_text, n_lane_bars = _lane_traces(
            a, pooled, span_end, max(max_bars - m, 1), m - 0.5 + gap, lane_h, max_bars, unit, in_legend)
        traces += lane_traces
        tickvals += lane_y
        ticktext += lane_text
        lanes_px = int(LANE_PX * (len(lane_y) + (0.6 if m else 0)))
        y_max = lane_y[-1] + lane_h / 2
        if m:
            cut_y = m - 0.5 + gap / 2
            shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": cut_y, "y1": cut_y,
                           "line": {"color": "#bbb", "width": 1, "dash": "dot"}})
    annotations: list[dict[str, Any]] = []
    if pause is not None:  # where the fork starts, and how much later it was made
        x = pause[0] / scale
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": "#7c3aed", "width": 1, "dash": "dash"}})
        later = f", made {_pause_text(pause[1])} later" if pause[1] >= 1.0 else ""
        annotations.append({"x": x, "xref": "x", "y": 1.0, "yref": "paper", "yanchor": "bottom",
                            "showarrow": False, "font": {"size": 11, "color": "#7c3aed"},
                            "text": html.escape(f"fork after seq {run.fork_seq}{later}", quote=False)})
    n_bars = m + n_lane_bars
    title_dict: dict[str, Any] = {
        "text": (f"{html.escape(title, quote=False)} <span style='font-size:12px;color:#666'>"
                 f"({n:,} span{'s' if n != 1 else ''})</span>"),
        "x": 0.01, "xanchor": "left", "y": 0.995, "yanchor": "top", "yref": "container"}
    if aggregated:
        note = html.escape(_note(n, n_bars, m, detail, n_lane_bars), quote=False)
        title_dict["subtitle"] = {"text": note, "font": {"size": 12, "color": "#8a5a00"}}
    pad = 0.16 if m and (not labelled or (a["group"][single] == "llm").any()) else 0.02
    top = 110 if aggregated else 90
    fig = go.Figure(data=traces)
    # The y axis autoranges (reversed, row 0 on top), bounded to the rows: a free autorange
    # pads it with empty rows.
    fig.update_layout(
        template="plotly_white", barmode="overlay", bargap=0.2, shapes=shapes, title=title_dict,
        annotations=annotations,
        height=int(top + 70 + rows_px + lanes_px), margin={"l": 10, "r": 30, "t": top, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0.0},
        uniformtext={"minsize": 8, "mode": "hide"}, hoverlabel={"align": "left"},
        xaxis={"title": f"{_UNIT_NAMES[unit]} since run start", "ticksuffix": f" {unit}",
               "range": [-0.01 * span_end, span_end * (1 + pad)], "zeroline": False, "showgrid": True},
        yaxis={"autorange": "reversed", "autorangeoptions": {"minallowed": -0.5, "maxallowed": y_max},
               "tickmode": "array", "tickvals": tickvals, "ticktext": ticktext,
               "tickfont": {"family": "DejaVu Sans Mono, Menlo, Consolas, monospace",
                            "size": 11 if row_px > 16 else 10},
               "showgrid": False, "zeroline": False, "automargin": True},
        meta=_meta(n, n_bars, aggregated, unit, scale),
    )
    return fig


# --- the notebook view -----------------------------------------------------------------------


class Waterfall:
    """The span waterfall of a run, with a panel listing the events of the selected span.

    Args:
        run: the run.
        **options: passed to :func:`waterfall_figure` (``max_bars``, ``spans``).

    ``figure`` is the plain plotly figure; :meth:`select` picks a span (as a click on its bar
    does in a notebook) and fills ``events_html``. In a Jupyter kernel the object displays
    as a ``FigureWidget`` with the events panel below; elsewhere as the plain figure.

    >>> import agentlog as al, tempfile, pathlib
    >>> store = al.examples.sample_store(copy_to=pathlib.Path(tempfile.mkdtemp()) / "s")
    >>> w = Waterfall(store.run("sre-0001"))
    >>> w.select("s1").selected
    's1'
    """

    def __init__(self, run: Run, **options: Any) -> None:
        self.run = run
        self.options = options
        self.figure: go.Figure = waterfall_figure(run, **options)
        self.selected: str | None = None
        self.events_html: str = _panel_hint()
        self._widget: Any = None
        self._panel: Any = None
        self._fig_widget: Any = None

    def __repr__(self) -> str:
        meta = self.figure.layout.meta["agentlog"]
        agg = ", aggregated" if meta["aggregated"] else ""
        return f"<Waterfall {self.run.id}: {meta['spans']:,} spans, {meta['bars']:,} bars{agg}>"

    def select(self, span_id: str) -> Waterfall:
        """Select the span ``span_id``: ``selected`` and ``events_html`` (and the panel, once
        shown) now describe it. Returns ``self``.

        Raises:
            KeyError: the run has no such span.
        """
        spans = self.options.get("spans")
        spans = self.run.spans() if spans is None else spans
        row = spans[(spans["span_id"] == span_id).fillna(False)]
        if row.empty:
            raise KeyError(f"run {self.run.id!r} has no span {span_id!r}")
        ev = self.run.events
        ev = ev[(ev["span_id"] == span_id).fillna(False)]
        self.selected = span_id
        self.events_html = span_events_html(row.iloc[0].to_dict(), ev)
        if self._panel is not None:
            self._panel.value = self.events_html
            self._highlight(span_id)
        return self

    def widget(self) -> Any:
        """The ``ipywidgets`` view: a ``FigureWidget`` and the events panel (built once)."""
        if self._widget is None:
            import ipywidgets as widgets
            self._fig_widget = go.FigureWidget(self.figure)
            self._panel = widgets.HTML(value=self.events_html)
            self._panel.add_class("agentlog-waterfall-events")
            for trace in self._fig_widget.data:
                trace.on_click(self._on_click)
            self._widget = widgets.VBox([self._fig_widget, self._panel])
            self._widget.add_class("agentlog-waterfall")
        return self._widget

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
        fw = self._fig_widget
        if fw is None:
            return
        base = [s for s in self.figure.layout.shapes]
        for trace in fw.data:
            if trace.type != "bar" or trace.customdata is None:
                continue
            ids = [html.unescape(str(c[0])) for c in trace.customdata]
            if span_id in ids:
                k = ids.index(span_id)
                x0 = float(trace.base[k])
                base.append(go.layout.Shape(type="rect", x0=x0, x1=x0 + float(trace.x[k]),
                                            y0=float(trace.y[k]) - 0.5, y1=float(trace.y[k]) + 0.5,
                                            line={"color": "#222", "width": 2}, fillcolor="rgba(0,0,0,0)"))
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
    if not _missing(span.get("error")):
        facts.append(("error", str(span.get("error"))))
    body = grid(facts) + table(cols, rows, numeric=(True,))
    text = f"span {span.get('span_id')} {span.get('name')}: {len(rows)} events"
    return obj_repr(text, head, body)
