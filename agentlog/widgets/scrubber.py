"""``Scrubber``: step through a run's events and see the state after each one.

The view holds the current seq, the state after it and the state before it. Stepping forward
folds one event onto the state it holds (``fold([event], initial=state)``) and diffs the two
states (``diff_states`` skips every shared subtree, so both cost what the event changed); a
jump reads the state before the target through the run's snapshot index
(``run.state_at(n - 1)``, at most K events folded) and folds the one event. Recent states are
kept, and a step back past them keeps the states of the 256 events before at once, so
stepping back costs about what stepping forward does. Nothing refolds the run.

For each step the view shows the event's facts (type, actor, span, cause, usage), then, in
tabs of a fixed height (so the chart below never moves): the event as a person reads it
(model calls as a conversation, tool calls as cards, JSON inside messages decoded:
:mod:`agentlog.widgets.chat`), the state as a tree (:mod:`agentlog.widgets.statetree`) with
the paths this event changed highlighted, what it changed (a table of ops with full paths and
before → after values), and the raw payload; below, the run's cumulative tokens and cost with
a marker at the current seq. Money and numbers go through :mod:`agentlog.numbers`.

The chart is a plain plotly figure shown in an ``Output`` (plotly's own renderer), not a
``FigureWidget``: an anywidget model per chart made JupyterLab's anywidget runtime miss its
2-second start-up limit when several notebooks were restored at once.

Tests and scripts drive it without a browser: :meth:`Scrubber.goto`, :meth:`Scrubber.step`,
:meth:`Scrubber.next_of_type`, :meth:`Scrubber.prev_of_type`, :meth:`Scrubber.follow_cause`,
and the attributes ``seq``, ``state``, ``patch``, ``highlighted``, ``event_html``,
``state_html``, ``patch_html``. The ipywidgets controls (slider, play, buttons, type
dropdown, seq box, cause button, plotly ``FigureWidget``) are built on first display, in a
live kernel; elsewhere ``_repr_html_`` shows a static snapshot of the current seq.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import EventNotFoundError
from ..events import Event
from ..folding import Patch, Reducers, State, diff_states, fold
from ..numbers import fmt_ms, fmt_usd, usd_axis
from ._kernel import KernelView
from .chat import event_view_html
from .html import esc as _e
from .html import fmt_int, grid, header, obj_repr, patch_table, section, sections
from .statetree import _is_blob, highlighted_paths, render_state

if TYPE_CHECKING:
    import numpy as np

    from ..store.run import Run

__all__ = ["Scrubber", "event_facts", "event_html", "payload_html", "tokens_figure"]

KEEP_STATES: Final = 512      # recent states kept for instant back-and-forth steps
BACK_BLOCK: Final = 256       # states kept at once when stepping back reaches an unkept one
PAYLOAD_LIMIT: Final = 20_000  # characters of pretty payload JSON shown


# --- the event panel (pure) ----------------------------------------------------------------------


def payload_html(payload: Mapping[str, Any], *, limit: int = PAYLOAD_LIMIT) -> str:
    """A payload as pretty, escaped JSON; each blob shown as a marker plus a folded preview.

    >>> print(payload_html({"text": "<script>x</script>"}))
    <pre class="al-sc-payload">{
      &quot;text&quot;: &quot;&lt;script&gt;x&lt;/script&gt;&quot;
    }</pre>
    """
    blobs: list[Any] = []

    def default(obj: Any) -> Any:
        if _is_blob(obj):
            blobs.append(obj)
            return f"<blob {obj.digest[:19]}… {int(obj.size):,} bytes {obj.media_type}>"
        if isinstance(obj, Mapping):
            return dict(obj)
        if isinstance(obj, (list, tuple)):
            return list(obj)
        if hasattr(obj, "tolist"):  # numpy scalars and arrays
            return obj.tolist()
        return repr(obj)

    try:
        text = json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True, default=default)
    except (TypeError, ValueError):  # keys of mixed types: shown as they come
        text = json.dumps(payload, indent=2, ensure_ascii=False, default=default)
    if len(text) > limit:
        text = f"{text[:limit]}\n… {len(text) - limit:,} more characters"
    out = [f'<pre class="al-sc-payload">{_e(text)}</pre>']
    if blobs:
        out.append(render_state({f"blob {i}": b for i, b in enumerate(blobs)}, label="blobs"))
    return "".join(out)


def event_facts(event: Event) -> list[tuple[str, str]]:
    """The facts of an event shown above its payload (plain text; escaped by ``grid``)."""
    facts = [("seq", fmt_int(event.seq)), ("type", event.type), ("actor", event.actor or "–"),
             ("span", event.span_id or "–"),
             ("caused by", "–" if event.caused_by is None else f"seq {event.caused_by:,}")]
    if event.ts:
        facts.append(("time", event.time.isoformat(sep=" ", timespec="milliseconds")))
    if event.model:
        facts.append(("model", event.model))
    if event.input_tokens is not None or event.output_tokens is not None:
        facts.append(("tokens", (f"{fmt_int(event.input_tokens)} in · {fmt_int(event.output_tokens)} out · "
                                 f"{fmt_int(event.cached_tokens)} cached")))
    if event.cost_usd is not None:
        facts.append(("cost", fmt_usd(event.cost_usd)))
    if event.duration_ms is not None:
        facts.append(("duration", fmt_ms(event.duration_ms)))
    return facts


def event_html(event: Event) -> str:
    """The event panel: its facts, then the event as a person reads it (escaped)."""
    return f'<div class="al-sc-event">{grid(event_facts(event))}{event_view_html(event)}</div>'


# --- the view ------------------------------------------------------------------------------------


class Scrubber(KernelView):
    """Step through a run: the event at a seq, the state after it, what it changed.

    Args:
        run: the run.
        reducers: the reducer set (default: the default projection), as for ``run.state_at``.
        start: the seq to show first (default 0).
        live: follow a run that is still being written: the slider's range grows as events are
            written, with a "● live" badge until the run closes.

    Raises:
        ValueError: the run has no events.
        EventNotFoundError: ``start`` is not a seq of the run.

    >>> import tempfile, agentlog as al
    >>> store = al.examples.sample_store(copy_to=tempfile.mkdtemp() + "/s")
    >>> s = Scrubber(store.run("sre-0001"))
    >>> s.goto(4).seq, s.event.type, s.event.caused_by
    (4, 'llm.response', 3)
    >>> s.highlighted[:2]
    ['/messages/-', '/usage/by_model/gpt-4o-mini']
    >>> s.follow_cause(), s.step(+1).seq
    (3, 4)
    """

    def __init__(self, run: Run, *, reducers: Any = None, start: int | None = None, live: bool = False) -> None:
        self.run = run
        self.follower: Any = None
        self.reducers = reducers
        self._fold_with: Any = Reducers.default() if reducers is None else reducers
        self._count = len(run)
        if self._count == 0:
            raise ValueError(f"run {run.id!r} has no events to step through")
        self._states: OrderedDict[int, State] = OrderedDict()
        self._types: np.ndarray | None = None
        self._by_type: dict[str, list[int]] = {}
        self._view: _View | None = None
        self._syncing = False
        self._note = ""  # a message shown until the next move
        self.seq: int = -1
        """The seq shown."""
        self.event: Event
        """The event at ``seq``."""
        self.state: State
        """The state after ``event``."""
        self.prev_state: State
        """The state before it."""
        self.patch: Patch
        """``diff_states(prev_state, state)``: what the event changed."""
        self.highlighted: list[str]
        """The paths of ``patch``, highlighted in the state tree."""
        self.event_html = self.state_html = self.patch_html = self.payload_text = ""
        self.goto(0 if start is None else start)
        if live:
            from .live import Follower
            self.follower = Follower(run, self._grow)

    def _grow(self, new: list[Any]) -> None:
        """New events arrived (live): the range grows; the event shown stays."""
        self._count = len(self.run)
        self._types, self._by_type = None, {}
        w = self._view
        if w is not None:
            w.kinds.options = self.types
            if w.figure is not None:
                w.figure = tokens_figure(self.run)
            self._sync()

    def __repr__(self) -> str:
        return f"<Scrubber {self.run.id} seq {self.seq:,} of {self._count:,}>"

    # --- moving ----------------------------------------------------------------------------

    def _check(self, seq: Any) -> int:
        if isinstance(seq, bool) or not isinstance(seq, int):
            try:
                import numpy as np
                if isinstance(seq, np.integer):
                    return self._check(int(seq))
            except ImportError:  # pragma: no cover
                pass
            raise TypeError(f"a seq is an int, got {type(seq).__name__} {seq!r}")
        if not 0 <= seq < self._count:
            raise EventNotFoundError(self.run.id, seq, self._count)
        return seq

    def _state(self, seq: int) -> State:
        """The state after ``seq`` (``-1``: before the first event), kept or from the index."""
        state = self._states.get(seq)
        if state is None:
            state = self.run.state_at(seq, reducers=self.reducers)
            self._keep(seq, state)
        else:
            self._states.move_to_end(seq)  # least recently used goes first
        return state

    def _keep(self, seq: int, state: State) -> None:
        states = self._states
        states[seq] = state
        states.move_to_end(seq)
        if len(states) > KEEP_STATES:
            states.popitem(last=False)

    def _keep_before(self, seq: int) -> None:
        """Stepping back: keep the states of the ``BACK_BLOCK`` events before ``seq`` at once
        (one read from the snapshot index, then one event each), so that the next steps back
        find their states kept instead of folding from a snapshot every time."""
        start = max(0, seq - BACK_BLOCK)
        for event, state in self.run.states(start, seq, reducers=self.reducers):
            self._keep(event.seq, state)

    def goto(self, seq: int) -> Scrubber:
        """Show the event at ``seq`` and the state after it.

        One step forward or back costs one event's fold and diff; a jump reads the state
        before ``seq`` from the snapshot index.

        Returns:
            This view (so calls chain).

        Raises:
            EventNotFoundError: ``seq`` is not in the run (the message names the run and seq).
            TypeError: ``seq`` is not an int.
        """
        seq = self._check(seq)
        event = self.run.event(seq)
        if seq == self.seq - 1 and seq - 1 not in self._states:
            self._keep_before(seq)
        prev = self._state(seq - 1)
        cur = self._states.get(seq)
        if cur is None:
            cur = fold([event], self._fold_with, initial=prev)
            self._keep(seq, cur)
        self.seq, self.event, self.prev_state, self.state = seq, event, prev, cur
        self.patch = diff_states(prev, cur)
        self.highlighted = highlighted_paths(self.patch)
        self.event_html = event_html(event)
        self.state_html = render_state(cur, self.patch, label=f"state after seq {seq:,}")
        self.patch_html = patch_table(self.patch, limit=None, empty="nothing: this event left the state as it was")
        self.payload_text = payload_html(event.payload)
        if self._view is not None:
            self._sync()
        return self

    def step(self, by: int = 1) -> Scrubber:
        """Move ``by`` events (``+1`` forward, ``-1`` back).

        Raises:
            EventNotFoundError: the step leaves the run.
        """
        return self.goto(self.seq + by)

    def _type_positions(self, type_: str) -> list[int]:
        found = self._by_type.get(type_)
        if found is None:
            import numpy as np
            types = self._event_types()
            if type_ not in set(self.types):
                raise ValueError(f"run {self.run.id!r} has no event of type {type_!r}; "
                                 f"its types are {', '.join(self.types)}")
            found = np.flatnonzero(types == type_).tolist()
            self._by_type[type_] = found
        return found

    def _event_types(self) -> np.ndarray:
        if self._types is None:
            import pyarrow as pa

            from ..analysis.tables import event_table
            column = event_table(self.run).column("type").cast(pa.string())
            self._types = column.to_numpy(zero_copy_only=False)
        return self._types

    @property
    def types(self) -> list[str]:
        """The event types of the run, sorted."""
        return sorted(set(self._event_types().tolist()))

    def next_of_type(self, type_: str) -> int | None:
        """Go to the next event of ``type_`` after the current seq.

        Returns:
            The seq moved to, or ``None`` if there is none (the view stays).

        Raises:
            ValueError: the run has no event of that type (the message lists its types).
        """
        where = self._type_positions(type_)
        k = bisect_right(where, self.seq)
        if k == len(where):
            return None
        self.goto(where[k])
        return self.seq

    def prev_of_type(self, type_: str) -> int | None:
        """Go to the previous event of ``type_`` before the current seq (see :meth:`next_of_type`)."""
        where = self._type_positions(type_)
        k = bisect_left(where, self.seq)
        if k == 0:
            return None
        self.goto(where[k - 1])
        return self.seq

    def follow_cause(self) -> int | None:
        """Go to the event that caused the current one (``caused_by``).

        Returns:
            The seq moved to, or ``None`` if the event names no cause.
        """
        cause = self.event.caused_by
        if cause is None:
            return None
        self.goto(cause)
        return self.seq

    # --- static display --------------------------------------------------------------------

    def text(self) -> str:
        """A plain-text snapshot: the event and what it changed."""
        e = self.event
        lines = [f"Scrubber {self.run.id}: seq {self.seq:,} of {self._count - 1:,}",
                 f"  {e.type} by {e.actor or '–'} (span {e.span_id or '–'}"
                 + (f", caused by seq {e.caused_by}" if e.caused_by is not None else "") + ")",
                 "  changed: " + (", ".join(self.highlighted) or "nothing")]
        return "\n".join(lines)

    def snapshot_html(self) -> str:
        """The static view of the current seq: event, state tree, patch."""
        head = header("Scrubber", self.run.name, self.run.id,
                      (f"seq {self.seq:,} / {self._count - 1:,}", "al-muted"))
        items = [section(f"Event {self.seq:,}: {self.event.type}", self.event_html, folded=False),
                 section("Changed by this event", self.patch_html, len(self.patch), folded=False),
                 section("State after it", self.state_html, folded=False)]
        return obj_repr(self.text(), head, sections(items))

    # --- the widget ------------------------------------------------------------------------

    @property
    def widget(self) -> Any:
        """The ipywidgets view (a ``VBox``, built on first use): controls, event, state,
        patch and chart."""
        return self._parts().box

    @property
    def figure(self) -> Any:
        """The cumulative tokens and cost chart (a plotly ``Figure``, its marker at the current
        seq), or ``None`` if it could not be made."""
        return self._parts().figure

    def _parts(self) -> _View:
        if self._view is None:
            self._view = _build(self)
            if self.follower is not None:
                self.follower.badge = self._view.badge
                self.follower.tick()
                self.follower.start()
            self._sync()
        return self._view

    def _sync(self) -> None:
        """Push the current seq into the controls and panels (no event loop back into goto);
        a message left by an earlier move is cleared."""
        w = self._view
        assert w is not None
        if self._syncing:
            return
        self._syncing = True
        try:
            w.slider.max = w.seq_box.max = self._count - 1
            w.slider.value = self.seq
            w.seq_box.value = self.seq
            w.message.value = self._note
            self._note = ""
            w.event.value = _panel(self.event_html)
            w.state.value = _panel(self.state_html)
            w.patch.value = _panel(self.patch_html)
            w.raw.value = _panel(self.payload_text)
            w.tabs.set_title(2, f"Changed ({len(self.patch):,})")
            cause = self.event.caused_by
            w.cause.disabled = cause is None
            w.cause.description = "no cause" if cause is None else f"← caused by seq {cause:,}"
            w.back.disabled = self.seq == 0
            w.forward.disabled = self.seq == self._count - 1
            _draw_chart(w, self.seq)
        finally:
            self._syncing = False

    def _on_control(self, seq: int) -> None:
        if self._syncing or seq == self.seq:
            return
        try:
            self.goto(seq)
        except (EventNotFoundError, TypeError) as exc:
            assert self._view is not None
            self._view.message.value = _panel(f'<span class="al-bad">{_e(exc)}</span>')


def _panel(body: str) -> str:
    return f'<div class="al-repr">{body}</div>'


def tokens_figure(run: Run) -> Any:
    """A plotly figure of the run's cumulative tokens (input, output) and cost by seq, with a
    vertical marker (``layout.shapes[0]``) to move to the current seq."""
    import plotly.graph_objects as go

    from ..analysis.tables import tokens_over_time
    frame = tokens_over_time(run)
    seqs = frame["seq"].tolist()
    fig = go.Figure()
    fig.add_scatter(x=seqs, y=frame["cum_input_tokens"].tolist(), name="input tokens",
                    mode="lines", line={"shape": "hv"})
    fig.add_scatter(x=seqs, y=frame["cum_output_tokens"].tolist(), name="output tokens",
                    mode="lines", line={"shape": "hv"})
    cost = frame["cum_cost_usd"].astype(float).tolist()
    fig.add_scatter(x=seqs, y=cost, name="cost (USD)", text=[fmt_usd(c) for c in cost],
                    hovertemplate="seq %{x}<br>%{text}<extra>cost</extra>",
                    mode="lines", line={"shape": "hv", "dash": "dot"}, yaxis="y2")
    fig.update_layout(height=220, margin={"l": 50, "r": 60, "t": 10, "b": 30},
                      xaxis={"title": "seq", "range": [0, max(len(run) - 1, 1)]},
                      yaxis={"title": "tokens"},
                      yaxis2={"title": "USD", "overlaying": "y", "side": "right", "showgrid": False,
                              **usd_axis(max(cost, default=0.0))},
                      legend={"orientation": "h", "y": 1.12}, template="plotly_white",
                      shapes=[{"type": "line", "xref": "x", "yref": "paper", "x0": 0, "x1": 0,
                               "y0": 0, "y1": 1, "line": {"color": "#b26a00", "width": 2}}])
    return fig


@dataclass(slots=True, kw_only=True)
class _View:
    """The widget tree (``box``) and handles to its parts."""

    box: Any
    slider: Any
    play: Any
    seq_box: Any
    back: Any
    forward: Any
    kinds: Any
    prev_kind: Any
    next_kind: Any
    cause: Any
    message: Any
    facts: Any
    tabs: Any
    event: Any
    state: Any
    patch: Any
    raw: Any
    chart: Any
    figure: Any
    badge: Any


PANE: Final = "26em"  # the height of the tabs' panes: the chart below stays where it is


def _draw_chart(w: _View, seq: int) -> None:
    """Draw the chart with its marker at ``seq`` (a plain figure: see the module docstring)."""
    if w.figure is None:
        return
    from IPython.display import display
    w.figure.layout.shapes[0].update(x0=seq, x1=seq)
    w.chart.clear_output(wait=True)
    with w.chart:
        display(w.figure)  # type: ignore[no-untyped-call]


def _build(s: Scrubber) -> _View:
    import ipywidgets as w

    from .html import _css
    last = s._count - 1
    slider = w.IntSlider(value=s.seq, min=0, max=last, description="seq",
                         continuous_update=False, layout=w.Layout(width="55%"))
    play = w.Play(value=s.seq, min=0, max=last, interval=600, description="play")
    w.jslink((play, "value"), (slider, "value"))
    seq_box = w.BoundedIntText(value=s.seq, min=0, max=last, layout=w.Layout(width="8em"))
    back = w.Button(description="◀", tooltip="previous event", layout=w.Layout(width="3em"))
    forward = w.Button(description="▶", tooltip="next event", layout=w.Layout(width="3em"))
    kinds = w.Dropdown(options=s.types, description="type", layout=w.Layout(width="18em"))
    prev_kind = w.Button(description="◀ previous", tooltip="previous event of this type")
    next_kind = w.Button(description="next ▶", tooltip="next event of this type")
    cause = w.Button(description="no cause", disabled=True, tooltip="go to the event that caused this one",
                     layout=w.Layout(width="auto"))
    cause.add_class("agentlog-scrubber-cause")
    message = w.HTML()
    message.add_class("agentlog-scrubber-message")
    pane = {"height": PANE, "overflow": "auto"}
    event = w.HTML(layout=w.Layout(**pane))
    event.add_class("agentlog-scrubber-event")
    state = w.HTML(layout=w.Layout(**pane))
    patch = w.HTML(layout=w.Layout(**pane))
    raw = w.HTML(layout=w.Layout(**pane))
    tabs = w.Tab(children=[event, state, patch, raw], titles=("Event", "State", "Changed", "JSON"))
    tabs.add_class("agentlog-scrubber-tabs")
    chart = w.Output(layout=w.Layout(height="240px"))
    try:
        figure = tokens_figure(s.run)
    except Exception as exc:  # noqa: BLE001 - no usage table: the rest still works
        figure = None
        message.value = _panel(f'<span class="al-muted">no chart: {_e(exc)}</span>')

    def moved(change: dict[str, Any]) -> None:
        s._on_control(int(change["new"]))

    def by_type(find: Any) -> Any:
        def click(_: Any) -> None:
            if kinds.value is not None and find(kinds.value) is None:
                s._note = _panel(f'<span class="al-muted">no {_e(kinds.value)} that way</span>')
                message.value = s._note
                s._note = ""
        return click

    def stepper(by: int) -> Any:
        def click(_: Any) -> None:
            s._on_control(s.seq + by)
        return click

    slider.observe(moved, names="value")
    seq_box.observe(moved, names="value")
    back.on_click(stepper(-1))
    forward.on_click(stepper(+1))
    next_kind.on_click(by_type(s.next_of_type))
    prev_kind.on_click(by_type(s.prev_of_type))
    cause.on_click(lambda _: s.follow_cause())
    style = w.HTML(f"<style>{_css()}</style>")
    controls = w.HBox([play, slider, seq_box, back, forward])
    finder = w.HBox([kinds, prev_kind, next_kind, cause])
    badge = w.HTML()
    badge.add_class("agentlog-live-badge")
    box = w.VBox([style, *([badge] if s.follower is not None else []), controls, finder, message, tabs, chart])
    box.add_class("agentlog-scrubber")
    return _View(box=box, slider=slider, play=play, seq_box=seq_box, back=back, forward=forward,
                 kinds=kinds, prev_kind=prev_kind, next_kind=next_kind, cause=cause,
                 message=message, facts=None, tabs=tabs, event=event, state=state, patch=patch, raw=raw,
                 chart=chart, figure=figure, badge=badge)
