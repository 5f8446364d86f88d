"""The span waterfall as a plotly figure, built from tables (no run, no widgets).

:func:`timeline_figure` draws a span table (``run.spans()``'s columns) as horizontal bars: one
row per span in start order, the label indented by depth, the x axis the time since the run's
first event, one trace per kind group (``agent`` for agent/chain/step spans, ``llm``,
``tool``, ``http``, ``other``), failed spans outlined in red with a ✕ at their end, model calls
labelled with the model and tokens, a hover with name, kind, duration, tokens and cost.

**Waits are drawn, and compressed.** A stretch where no span is open, or where the run waited
for a person's decision on an approval, that is long beside the rest (:func:`find_breaks`)
becomes a narrow grey band labelled with what happened (``‖ 7.5 min waiting for approval``),
so the work around it keeps its scale: a 6 ms tool call beside a 7.5-minute wait is still a
bar, not a hairline. The axis ticks give the real time since the run started on both sides
of a break (``fig.layout.meta["agentlog"]["breaks"]`` and :func:`axis_position` map real times
to the axis).

**Every span can be clicked.** Each row has a transparent band the width of the plot under its
bar (a click anywhere on the row selects the span), and every bar is at least
:data:`MIN_BAR` of the axis wide (hover gives its real duration). Bar labels sit right of the
bar, or left of it near the right edge, so they are never cut. Up to 200 rows every row has a
y label; past that the names go beside the bars; past 1,000 bars there is no bar text at all
(it is most of Chromium's drawing time), only the hover.

**Level of detail**: past ``max_bars`` spans the shallow spans stay bars (every depth whose
spans, with those above it, fit in half the budget) and the deeper spans are aggregated: one
lane per (depth, kind group) under a separator, each lane cut into time buckets, one bar per
non-empty bucket, its opacity the share of the bucket the spans keep busy, red-outlined when a
span in it failed. The title says how many spans are drawn and how. To see the spans of a
stretch one by one, pass a filtered table.

It is a plain :class:`plotly.graph_objects.Figure`, so it also renders in static HTML exports
and the report. :mod:`agentlog.widgets.waterfall` gathers the tables from a run and wires the
figure into a notebook view.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..numbers import fmt_ms, fmt_usd, unknown_text
from .html import cut

__all__ = ["CUSTOM", "ERROR_COLOR", "GROUP_COLORS", "KIND_GROUPS", "MIN_BAR", "Break", "Wait", "axis_position",
           "find_breaks", "time_unit", "timeline_figure"]

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
MIN_BAR: Final = 0.015      # the narrowest bar drawn, as a share of the axis (7 px on a 470-px plot)
TEXT_AT: Final = 0.62       # a bar ending past this share of the axis gets its label on its left
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
    return fmt_usd(cost) + unknown_text(unknown)


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
    """``gpt-4o · 82 in / 121 out`` for model calls (the span that holds the answer: a
    framework's ``llm`` span around it, LangChain's or the Agents SDK's, would say the same
    call again); the span's name for the other bars when ``names`` (the rows have no y
    labels), else nothing."""
    out = []
    for i in sel:
        if a["group"][i] == "llm" and a["model"][i]:
            text = f"{a['model'][i]} · {a['input'][i]:,} in / {a['output'][i]:,} out"
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


def _span_traces(a: dict[str, np.ndarray], sel: np.ndarray, y: np.ndarray, names: bool,
                 x_range: tuple[float, float]) -> list[Any]:
    """The traces of the spans ``sel`` at rows ``y``: one clickable row band per span (under
    the bars, so a click anywhere on a row selects its span), one bar trace per kind group
    (every bar at least :data:`MIN_BAR` of the axis wide), the bar labels as text that never
    leaves the plot, and the ✕ markers of failed spans. Past :data:`TEXT_BARS` bars there is
    no text (it is most of Chromium's drawing time); hover still tells."""
    texts = _bar_labels(a, sel, names) if len(sel) <= TEXT_BARS else [""] * len(sel)
    custom, labels = _custom(a, sel), np.array(texts, dtype=object)
    start, end, groups, err = a["start"][sel], a["end"][sel], a["group"][sel], a["error"][sel]
    lo, hi = x_range
    width = np.maximum(end - start, MIN_BAR * (hi - lo))
    traces: list[Any] = []
    if len(sel) <= LABEL_ROWS:  # the row bands: a click target the size of the row
        traces.append(go.Bar(
            orientation="h", base=np.full(len(sel), lo), x=np.full(len(sel), hi - lo), y=y, width=1.0,
            name="rows", showlegend=False, customdata=custom, hoverinfo="none",
            marker={"color": "rgba(0,0,0,0)", "line": {"width": 0}}, meta={"role": "rows"}))
    for group, color in GROUP_COLORS.items():
        m = groups == group
        if not m.any():
            continue
        traces.append(go.Bar(
            orientation="h", base=start[m], x=width[m], y=y[m], width=0.72,
            name=group, legendgroup=group, customdata=custom[m], hovertemplate=_HOVER,
            marker={"color": color, "line": {"color": np.where(err[m], ERROR_COLOR, color),
                                             "width": np.where(err[m], 2.5, 0.0)}}))
    shown = labels != ""
    if shown.any():
        traces.append(_label_trace(start[shown], (start + width)[shown], y[shown], labels[shown], x_range))
    if err.any():
        traces.append(go.Scatter(
            x=(start + width)[err], y=y[err], mode="markers", name="error", legendgroup="error",
            marker={"symbol": "x", "size": 10, "color": ERROR_COLOR, "line": {"width": 1, "color": "white"}},
            customdata=custom[err], hovertemplate=_HOVER))
    return traces


def _label_trace(start: np.ndarray, end: np.ndarray, y: np.ndarray, text: np.ndarray,
                 x_range: tuple[float, float]) -> Any:
    """Bar labels placed where they fit: right of a bar that ends early, else left of a bar that
    starts late, else inside it from its start; never past the plot's edge."""
    lo, hi = x_range
    span = hi - lo
    right = end <= lo + TEXT_AT * span
    left = ~right & (start >= lo + (1 - TEXT_AT) * span)
    x = np.where(right, end, start)
    position = np.where(right, "middle right", np.where(left, "middle left", "middle right"))
    return go.Scatter(x=x, y=y, mode="text", text=[f" {t} " for t in text], textposition=position,
                      textfont={"size": 11, "color": "#333"}, hoverinfo="skip", showlegend=False,
                      name="labels", meta={"role": "labels"}, cliponaxis=False)


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




# --- waits and breaks --------------------------------------------------------------------------

#: The sign before a break's label (U+2016: in the fonts Chromium has everywhere; ⏸ is not).
PAUSE: Final = "‖"
#: A break is at most this share of the compressed axis wide.
BREAK_SHARE: Final = 0.05
#: A stretch with no open span is compressed when it is this long (seconds) ...
MIN_BREAK_S: Final = 2.0
#: ... and at least this share of the run's time.
MIN_BREAK_SHARE: Final = 0.2


@dataclass(frozen=True, slots=True)
class Wait:
    """A stretch of a run spent waiting, with what for (``waiting for approval``)."""

    start: float
    """Seconds since the run started."""
    end: float
    """Seconds since the run started."""
    what: str
    """What the run waited for, as the label says it."""


@dataclass(frozen=True, slots=True)
class Break:
    """A compressed stretch of the time axis."""

    start: float
    """Real seconds since the run started."""
    end: float
    """Real seconds since the run started."""
    x: float
    """Where the break starts on the axis (seconds of the compressed axis)."""
    width: float
    """How wide it is on the axis."""
    label: str
    """``‖ 7.5 min waiting for approval``."""


def _idle(start: np.ndarray, end: np.ndarray, until: float) -> list[tuple[float, float]]:
    """The stretches of ``[0, until]`` that no ``[start, end]`` interval covers."""
    order = np.argsort(start, kind="stable")
    gaps, covered = [], 0.0
    for s, e in zip(start[order], end[order], strict=True):
        if s > covered:
            gaps.append((covered, float(s)))
        covered = max(covered, float(e))
    if until > covered:
        gaps.append((covered, until))
    return gaps


def find_breaks(start: np.ndarray, end: np.ndarray, waits: Sequence[Wait] = (), *,
                until: float | None = None) -> list[Break]:
    """The stretches of a run to compress: waits (approvals) and stretches with no open span
    that are at least :data:`MIN_BREAK_S` long and :data:`MIN_BREAK_SHARE` of the run.

    Args:
        start, end: each span's start and end, in seconds since the run started.
        waits: what the run is known to have waited for; a break inside a wait is named by it.
        until: the run's end (default: the last span's end).

    >>> [b.label for b in find_breaks(np.array([0.0, 460.0]), np.array([8.0, 470.0]),
    ...                               [Wait(8.0, 460.0, "waiting for approval")])]
    ['‖ 7.5 min waiting for approval']
    """
    if not len(start):
        return []
    total = float(np.nanmax(end)) if until is None else until
    stretches = [(s, e) for s, e in _idle(start, end, total)]
    stretches += [(w.start, w.end) for w in waits]
    stretches.sort()
    merged: list[tuple[float, float]] = []
    for s, e in stretches:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    long = [(s, e) for s, e in merged if e - s >= max(MIN_BREAK_S, MIN_BREAK_SHARE * total)]
    if not long:
        return []
    active = total - sum(e - s for s, e in long)
    width = max(active, 1e-3) * BREAK_SHARE
    out, shift = [], 0.0
    for s, e in long:
        what = next((w.what for w in waits if w.start <= s + 1e-6 and w.end >= e - 1e-6), None)
        what = what or next((w.what for w in waits if w.start < e and w.end > s), "idle")
        label = f"{PAUSE} {fmt_ms((e - s) * 1000)} {what}"
        out.append(Break(start=s, end=e, x=s - shift, width=width, label=label))
        shift += (e - s) - width
    return out


def axis_position(seconds: Any, breaks: Sequence[Break]) -> np.ndarray:
    """Real seconds since the run started → positions on the compressed axis (seconds).

    >>> b = [Break(start=10.0, end=110.0, x=10.0, width=1.0, label="")]
    >>> axis_position([5.0, 60.0, 120.0], b).tolist()
    [5.0, 10.5, 21.0]
    """
    t = np.asarray(seconds, dtype=np.float64)
    x = t.copy()
    for b in breaks:
        inside = (t > b.start) & (t < b.end)
        x = np.where(inside, b.x + (t - b.start) / (b.end - b.start) * b.width, x)
        x = np.where(t >= b.end, x - (b.end - b.start) + b.width, x)
    return x


def _elapsed(seconds: float) -> str:
    """A tick label: ``8 s``, ``7:44``, ``1:02:05``."""
    s = round(seconds)
    if abs(seconds - round(seconds)) > 1e-6 and seconds < 10:
        return f"{seconds:g} s"
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}"
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _ticks(total: float, breaks: Sequence[Break], scale: float) -> tuple[list[float], list[str]]:
    """Tick positions (axis units) and labels (real time since the start) at round steps on
    each stretch between breaks."""
    axis_len = float(axis_position([total], breaks)[0]) if total > 0 else 1.0
    raw = max(axis_len / 8, 1e-3)
    mag = 10 ** np.floor(np.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    if step >= 60:
        step = next((m for m in (60, 120, 300, 600, 900, 1800, 3600, 7200, 21600) if m >= step), step)
    bounds = [0.0, *[v for b in breaks for v in (b.start, b.end)], total]
    vals: list[float] = []
    for k in range(0, len(bounds), 2):
        lo, hi = bounds[k], bounds[k + 1]
        first = np.ceil(lo / step - 1e-9) * step
        t = first
        while t <= hi + 1e-9:
            vals.append(float(t))
            t += step
        if k and lo not in vals:
            vals.append(float(lo))  # where the work resumes after a break
    vals = sorted(set(vals))
    pos = axis_position(vals, breaks) / scale
    keep, last = [], -np.inf
    min_gap = axis_len / scale * 0.045
    for v, p in zip(vals, pos, strict=True):
        if p - last >= min_gap:
            keep.append((float(p), _elapsed(v)))
            last = p
    return [p for p, _ in keep], [t for _, t in keep]


def _break_shapes(breaks: Sequence[Break], scale: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    shapes, notes = [], []
    for b in breaks:
        x0, x1 = b.x / scale, (b.x + b.width) / scale
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                       "fillcolor": "rgba(120,120,120,0.13)", "line": {"width": 1, "color": "#999",
                                                                        "dash": "dot"},
                       "layer": "below", "name": "break"})
        notes.append({"x": (x0 + x1) / 2, "xref": "x", "y": 0.5, "yref": "paper", "textangle": -90,
                      "showarrow": False, "font": {"size": 12, "color": "#555"}, "name": "break",
                      "text": html.escape(b.label, quote=False), "bgcolor": "rgba(255,255,255,0.7)"})
    return shapes, notes


# --- the figure ---------------------------------------------------------------------------------


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


def _meta(spans: int, bars: int, aggregated: bool, unit: str = "s", scale: float = 1.0,
          breaks: Sequence[Break] = ()) -> dict[str, Any]:
    return {"agentlog": {"spans": spans, "bars": bars, "aggregated": aggregated, "time_unit": unit,
                         "seconds_per_unit": scale,
                         "breaks": [[b.start, b.end, b.x, b.width, b.label] for b in breaks]}}


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


def timeline_figure(spans: pd.DataFrame, *, t0: pd.Timestamp, title: str, max_bars: int = 5000,
                    waits: Sequence[Wait] = (), fork_cut: tuple[float, float] | None = None,
                    fork_seq: int | None = None) -> go.Figure:
    """A span table on a time axis, as a plotly figure.

    Args:
        spans: the span table (``run.spans()``'s columns), any order.
        t0: when the run started (the axis' zero).
        title: the figure's title (escaped here).
        max_bars: the most spans drawn one bar each; past it the deep spans are aggregated.
        waits: what the run waited for (see :func:`find_breaks`).
        fork_cut: for a fork, ``(the cut, the pause before its first own event)`` in seconds
            since ``t0``: the pause is left out of the axis and the cut is marked.
        fork_seq: the fork's cut seq, for the mark's text.

    Each span bar's ``customdata`` holds :data:`CUSTOM`; ``fig.layout.meta["agentlog"]`` says
    how many spans and bars were drawn, whether the figure is aggregated, the time unit and
    the breaks (``[real start, real end, axis x, axis width, label]``, seconds).
    """
    if max_bars < 1:
        raise ValueError(f"max_bars must be >= 1; got {max_bars!r}")
    if len(spans) == 0:
        return _empty_figure(title)
    spans = spans.sort_values("start_seq", kind="stable").reset_index(drop=True)
    a = _arrays(spans, t0)
    if fork_cut is not None:
        _close_fork_pause(a, fork_cut)
        waits = [_shift_wait(w, fork_cut) for w in waits]
    a["start_s"] = a["start"]
    total = float(np.nanmax(a["end"]))
    breaks = find_breaks(a["start"], a["end"], waits, until=total)
    a["start"], a["end"] = axis_position(a["start"], breaks), axis_position(a["end"], breaks)
    axis_total = float(np.nanmax(a["end"]))
    unit, scale = time_unit(total)
    a["start"], a["end"] = a["start"] / scale, a["end"] / scale
    n = len(spans)
    span_end = max(axis_total / scale, 1e-9)
    aggregated = n > max_bars
    detail = _detail_depth(a["depth"], max_bars // 2) if aggregated else int(a["depth"].max())
    single = np.nonzero(a["depth"] <= detail)[0]
    pooled = np.nonzero(a["depth"] > detail)[0]
    m = len(single)
    labelled = m <= LABEL_ROWS
    row_px = ROW_PX if m <= 40 else 16
    rows_px = row_px * m if labelled else int(np.clip(3 * m, 400, 900))
    unit_px = rows_px / m if m else LANE_PX
    x_range = (-0.01 * span_end, span_end * 1.02)
    traces = (_span_traces(a, single, np.arange(m, dtype=np.float64), not labelled, x_range)
              if m else [])
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
    break_shapes, annotations = _break_shapes(breaks, scale)
    shapes = break_shapes + shapes
    if fork_cut is not None:  # where the fork starts, and how much later it was made
        x = float(axis_position([fork_cut[0]], breaks)[0]) / scale
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": "#7c3aed", "width": 1, "dash": "dash"}})
        later = f", made {_pause_text(fork_cut[1])} later" if fork_cut[1] >= 1.0 else ""
        annotations.append({"x": x, "xref": "x", "y": 1.0, "yref": "paper", "yanchor": "bottom",
                            "showarrow": False, "font": {"size": 11, "color": "#7c3aed"},
                            "text": html.escape(f"fork after seq {fork_seq}{later}", quote=False)})
    n_bars = m + n_lane_bars
    title_dict: dict[str, Any] = {
        "text": (f"{html.escape(title, quote=False)} <span style='font-size:12px;color:#666'>"
                 f"({n:,} span{'s' if n != 1 else ''})</span>"),
        "x": 0.01, "xanchor": "left", "y": 0.995, "yanchor": "top", "yref": "container"}
    if aggregated:
        note = html.escape(_note(n, n_bars, m, detail, n_lane_bars), quote=False)
        title_dict["subtitle"] = {"text": note, "font": {"size": 12, "color": "#8a5a00"}}
    top = 110 if aggregated else 90
    tick_at, tick_text = _ticks(total, breaks, scale)
    fig = go.Figure(data=traces)
    # The y axis autoranges (reversed, row 0 on top), bounded to the rows: a free autorange
    # pads it with empty rows.
    axis_title = f"{_UNIT_NAMES[unit]} since run start" + (" (waits compressed)" if breaks else "")
    fig.update_layout(
        template="plotly_white", barmode="overlay", bargap=0.2, shapes=shapes, title=title_dict,
        annotations=annotations, autosize=True, hovermode="closest", clickmode="event",
        height=int(top + 70 + rows_px + lanes_px), margin={"l": 10, "r": 20, "t": top, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0.0},
        uniformtext={"minsize": 8, "mode": "hide"}, hoverlabel={"align": "left"},
        xaxis={"title": axis_title, "range": list(x_range), "zeroline": False, "showgrid": True,
               "tickmode": "array", "tickvals": tick_at, "ticktext": tick_text},
        yaxis={"autorange": "reversed", "autorangeoptions": {"minallowed": -0.5, "maxallowed": y_max},
               "tickmode": "array", "tickvals": tickvals, "ticktext": ticktext,
               "tickfont": {"family": "DejaVu Sans Mono, Menlo, Consolas, monospace",
                            "size": 11 if row_px > 16 else 10},
               "showgrid": False, "zeroline": False, "automargin": True},
        meta=_meta(n, n_bars, aggregated, unit, scale, breaks),
    )
    return fig


def _shift_wait(w: Wait, fork_cut: tuple[float, float]) -> Wait:
    cut, gap = fork_cut
    def move(t: float) -> float:
        return t - gap if t > cut else t
    return Wait(move(w.start), move(w.end), w.what)


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
    return fmt_ms(seconds * 1000)
