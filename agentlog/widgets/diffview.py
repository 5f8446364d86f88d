"""``DiffView``: two runs side by side, from where they part.

Built on :func:`agentlog.diff` (:class:`~agentlog.analysis.rundiff.RunDiff`): the shared
prefix, the first divergence and the alignment of the events after it (a sequence alignment
over event types and keys) come from there. The view lays them out as *aligned steps*: one per
shared event (status ``same``), then one per aligned pair or lone event after the divergence
(``same`` for a matched pair, ``moved`` for the same event elsewhere in b: calls made side
by side that a fork finished in another order, ``shifted``, ``changed``, ``only_a``,
``only_b``).

A pair whose only differences are counters that moved by the same amount in every pair after
the divergence (``attributes.step`` 15 → 16, 16 → 17, …: the fork added a step) is
``shifted``, not ``changed``: the same event, later (:func:`shifted_pairs`).

- **Events**: both runs' events in two halves of one table, opening at the first divergence:
  the shared prefix is one folded line ("77 identical events ▸", :meth:`DiffView.show_prefix`
  unfolds it), rows coloured by status, each changed pair followed by what changed ("~
  /result/value: 0.93 → 0.35"). Long runs show a window of ``window`` rows that
  :meth:`DiffView.show_more` widens, never every row. The controls are above the table.
- **States**: a shared slider over the aligned steps; at each step, the state of each run
  after its last event at or before that step, as trees (:mod:`agentlog.widgets.statetree`)
  with the paths where the two states differ (``diff_states(state_a, state_b)``)
  highlighted. Run b's states after the prefix are folded from run a's state at the end of
  the prefix (a snapshot index over b's own events), so the two share structure and the
  diff costs what differs.
- **Summary**: the usage delta (events, calls, tokens, cost, duration) and the graph
  changes (objects and relations added, removed, changed) that ``RunDiff`` computes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, overload

from ..folding import Patch, SnapshotIndex, State, diff_states
from ..folding.values import short
from ._kernel import KernelView
from .html import esc as _e
from .html import grid, header, obj_repr, section, sections, table
from .statetree import render_state

if TYPE_CHECKING:
    import pyarrow as pa

    from ..analysis.rundiff import RunDiff
    from ..store.run import Run

__all__ = ["DiffRow", "DiffView"]

WINDOW: Final = 50          # rows shown either side of the divergence
PAYLOAD_CHARS: Final = 70   # characters of a payload in a row
GRAPH_ROWS: Final = 50      # graph changes listed
STATUSES: Final = ("same", "moved", "shifted", "changed", "only_a", "only_b")
SHIFT_PAIRS: Final = 5_000  # changed pairs examined for shifted counters


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One aligned step of two runs."""

    step: int
    """Position in the aligned list (the slider's value)."""
    status: str
    """``same``, ``moved``, ``shifted``, ``changed``, ``only_a`` or ``only_b``."""
    seq_a: int | None
    """The event's seq in run a (``None``: only in b)."""
    seq_b: int | None
    """The event's seq in run b (``None``: only in a)."""
    type: str
    """The event type."""
    actor: str | None
    """The event's actor."""
    change: str
    """What changed (``changed`` rows), as ``RunDiff`` summarises it; for ``shifted`` rows which
    counters moved; else ``""``."""


class _Rows(Sequence[DiffRow]):
    """The aligned rows: the shared prefix (made on demand) then RunDiff's rows."""

    def __init__(self, prefix: int, tail: dict[str, list[Any]], table_a: pa.Table,
                 summary: Callable[[int], str], shifted: dict[int, str]) -> None:
        self._prefix = prefix
        self._tail = tail
        self._table_a = table_a
        self._summary = summary
        self._shifted = shifted

    def __len__(self) -> int:
        return self._prefix + len(self._tail["status"])

    @overload
    def __getitem__(self, index: int) -> DiffRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[DiffRow]: ...

    def __getitem__(self, index: int | slice) -> DiffRow | list[DiffRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"no aligned step {index}; there are {n:,}")
        if index < self._prefix:
            t = self._table_a
            return DiffRow(index, "same", index, index, str(t.column("type")[index].as_py()),
                           t.column("actor")[index].as_py(), "")
        t, k = self._tail, index - self._prefix
        status = t["status"][k]
        if k in self._shifted:
            return DiffRow(index, "shifted", t["seq_a"][k], t["seq_b"][k], t["type"][k], t["actor"][k],
                           self._shifted[k])
        return DiffRow(index, "same" if status == "matched" else status, t["seq_a"][k], t["seq_b"][k],
                       t["type"][k], t["actor"][k], self._summary(k) if status == "changed" else "")

    def __iter__(self) -> Iterator[DiffRow]:
        return (self[i] for i in range(len(self)))


def _int_moves(a: Any, b: Any) -> dict[str, int] | None:
    """The integer fields that moved between two payloads, ``{path: new - old}``; ``None`` if
    anything else differs."""
    from ..analysis.rundiff import IGNORED
    from ..folding import freeze
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    a = {k: v for k, v in a.items() if k not in IGNORED}
    b = {k: v for k, v in b.items() if k not in IGNORED}
    moves: dict[str, int] = {}
    for change in diff_states(freeze(a), freeze(b)).changes:
        op, old, new = change.op, change.old, change.op.get("value")
        if (op.get("op") != "replace" or not isinstance(old, int) or not isinstance(new, int)
                or isinstance(old, bool) or isinstance(new, bool)):
            return None
        moves[str(op["path"])] = new - old
    return moves or None


def shifted_pairs(pairs: Sequence[tuple[Any, Any]]) -> dict[int, str]:
    """Which changed pairs differ only by counters that moved by one same amount in every pair
    where they differ (a fork that adds a step moves every later step number by one).

    Args:
        pairs: the payloads ``(a, b)`` of the changed pairs, in order.

    Returns:
        ``{index in pairs: "positions moved: /attributes/step +1"}``.

    >>> pairs = [({"step": 15}, {"step": 16}), ({"step": 16}, {"step": 17}), ({"x": 1}, {"x": 2})]
    >>> shifted_pairs(pairs)
    {0: 'same content, moved: /step +1', 1: 'same content, moved: /step +1'}
    """
    moves = [_int_moves(a, b) for a, b in pairs]
    seen: dict[str, set[int]] = {}
    count: dict[str, int] = {}
    for m in moves:
        for path, delta in (m or {}).items():
            seen.setdefault(path, set()).add(delta)
            count[path] = count.get(path, 0) + 1
    steady = {p for p, deltas in seen.items() if len(deltas) == 1 and count[p] >= 2}
    out = {}
    for i, m in enumerate(moves):
        if m and set(m) <= steady:
            out[i] = "same content, moved: " + ", ".join(f"{p} {d:+d}" for p, d in sorted(m.items()))
    return out


def _forward_fill(values: list[int | None], start: int) -> list[int]:
    """Each position's greatest value so far (``start`` before the first; missing values
    skipped): the seqs of a run's side, which rise but at a moved event (the same event
    elsewhere in b), which must not take b's state back."""
    out, last = [], start
    for v in values:
        if v is not None and v > last:
            last = v
        out.append(last)
    return out


class DiffView(KernelView):
    """Two runs side by side: aligned events, the divergence, states at each aligned step.

    Args:
        run_a: the first run (e.g. the parent).
        run_b: the second (e.g. a fork of it).
        reducers: the reducer set for the states (default: the default projection).
        window: rows of the event list shown either side of the divergence.

    Attributes:
        diff: the :class:`~agentlog.analysis.rundiff.RunDiff` the view is built on.
        divergence_seq: the first seq where the runs differ (``RunDiff.divergence``), or
            ``None`` if they hold the same events.
        divergence_step: the aligned step of the divergence (the first row that is not
            ``same``), or ``None``.
        rows: the aligned rows (:class:`DiffRow`), shared prefix included; made on access.
        step: the aligned step shown; ``state_a``, ``state_b``, ``patch`` (a → b at that
            step), ``highlighted`` (its paths), ``state_html``.

    >>> import tempfile, agentlog as al
    >>> store = al.examples.sample_store(copy_to=tempfile.mkdtemp() + "/s")
    >>> view = DiffView(store.run("refunds-0001"), store.run("refunds-0001-approve"))
    >>> view.divergence_seq, view.rows[view.divergence_step].status
    (77, 'only_b')
    >>> {row.status for row in view.rows[:77]}
    {'same'}
    """

    def __init__(self, run_a: Run, run_b: Run, *, reducers: Any = None, window: int = WINDOW) -> None:
        from ..analysis.rundiff import diff
        from ..analysis.tables import event_table
        self.a, self.b = run_a, run_b
        self.reducers = reducers
        self.window = max(1, int(window))
        self.diff: RunDiff = diff(run_a, run_b, reducers=reducers)
        self._table_a, self._table_b = event_table(run_a), event_table(run_b)
        prefix = self.diff.prefix
        tail = self.diff.columns("status", "seq_a", "seq_b", "type", "actor")
        self.rows: Sequence[DiffRow] = _Rows(prefix, tail, self._table_a, self.diff.summary,
                                             self._shifted(tail))
        self._last_a = _forward_fill(tail["seq_a"], prefix - 1)
        self._last_b = _forward_fill(tail["seq_b"], prefix - 1)
        self.divergence_seq: int | None = self.diff.divergence
        self.divergence_step: int | None = None if self.diff.same else prefix
        self._tail_index: SnapshotIndex | None = None
        self.prefix_shown = False
        """Whether the shared prefix is unfolded in the event list (:meth:`show_prefix`)."""
        start = self.divergence_step if self.divergence_step is not None else max(len(self.rows) - 1, 0)
        self._lo, self._hi = start, min(len(self.rows), start + 2 * self.window + 1)
        self._view: Any = None
        self._syncing = False
        self.step = -1
        self.seq_a: int = -1
        self.seq_b: int = -1
        self.state_a: State
        self.state_b: State
        self.patch: Patch = Patch()
        self.highlighted: list[str] = []
        self.state_html = ""
        if len(self.rows):
            self.goto(self.divergence_step if self.divergence_step is not None else len(self.rows) - 1)

    def _shifted(self, tail: dict[str, list[Any]]) -> dict[int, str]:
        changed = [k for k, st in enumerate(tail["status"]) if st == "changed"][:SHIFT_PAIRS]
        pay_a, pay_b = self._table_a.column("payload"), self._table_b.column("payload")
        pairs = [(json.loads(pay_a[tail["seq_a"][k]].as_py()), json.loads(pay_b[tail["seq_b"][k]].as_py()))
                 for k in changed]
        return {changed[i]: text for i, text in shifted_pairs(pairs).items()}

    def __repr__(self) -> str:
        where = "the same events" if self.divergence_seq is None else f"diverge at seq {self.divergence_seq}"
        return f"<DiffView {self.a.id} ↔ {self.b.id}: {where}, {len(self.rows):,} aligned steps>"

    # --- states ------------------------------------------------------------------------------

    def _state_a(self, seq: int) -> State:
        state: State = self.a.state_at(seq, reducers=self.reducers)
        return state

    def _state_b(self, seq: int) -> State:
        prefix = self.diff.prefix
        if seq < prefix:  # the shared prefix: a's states are b's (the same objects)
            return self._state_a(seq)
        if self._tail_index is None:
            b, start = self.b, prefix
            base = self._state_a(prefix - 1)
            self._tail_index = SnapshotIndex(lambda lo, hi: b.iter_events(start + lo, start + hi),
                                             len(b) - start, self.reducers, base)
        state: State = self._tail_index.at(seq - prefix)
        return state

    def seqs_at(self, step: int) -> tuple[int, int]:
        """``(seq in a, seq in b)`` of each run's last event at or before aligned ``step``
        (``-1``: none yet)."""
        prefix = self.diff.prefix
        if step < prefix:
            return step, step
        return self._last_a[step - prefix], self._last_b[step - prefix]

    def goto(self, step: int) -> DiffView:
        """Show the two states at aligned ``step`` with their differences highlighted.

        Raises:
            IndexError: ``step`` is not an aligned step (the message names both runs).
        """
        n = len(self.rows)
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < n:
            raise IndexError(f"{self.a.id!r} ↔ {self.b.id!r} have {n:,} aligned steps "
                             f"(0..{n - 1}); no step {step!r}")
        seq_a, seq_b = self.seqs_at(step)
        sa, sb = self._state_a(seq_a), self._state_b(seq_b)
        self.step, self.seq_a, self.seq_b, self.state_a, self.state_b = step, seq_a, seq_b, sa, sb
        self.patch = diff_states(sa, sb)
        self.highlighted = list(self.patch.paths)
        if not self._lo <= step < self._hi:
            self._lo, self._hi = self._around(step)
        self.state_html = self._states_html()
        if self._view is not None:
            self._sync()
        return self

    def _states_html(self) -> str:
        on_a = [op for op in self.patch if op["op"] != "add"]      # adds exist only in b
        on_b = [op for op in self.patch if op["op"] != "remove"]   # removes only in a
        n = len(self.patch)
        note = (f'<div class="al-muted">{n:,} difference{"s" if n != 1 else ""} between the states '
                f"at aligned step {self.step:,}</div>")
        left = render_state(self.state_a, on_a, label=f"{self.a.id} after seq {self.seq_a:,}")
        right = render_state(self.state_b, on_b, label=f"{self.b.id} after seq {self.seq_b:,}")
        return f'{note}<div class="al-dv-cols"><div>{left}</div><div>{right}</div></div>'

    # --- the event list ----------------------------------------------------------------------

    def _around(self, step: int) -> tuple[int, int]:
        return max(0, step - self.window), min(len(self.rows), step + self.window + 1)

    def show_more(self, *, before: int = 0, after: int = 0) -> DiffView:
        """Widen the event list's window by ``before`` earlier and ``after`` later rows."""
        self._lo = max(0, self._lo - max(0, before))
        self._hi = min(len(self.rows), self._hi + max(0, after))
        if self._view is not None:
            self._sync()
        return self

    def show_prefix(self, shown: bool = True) -> DiffView:
        """Unfold (or fold again) the shared prefix in the event list (its last ``window``
        events; :meth:`show_more` reaches further back)."""
        self.prefix_shown = shown
        start = self.divergence_step if self.divergence_step is not None else self._lo
        self._lo = max(0, start - self.window) if shown else start
        if self._view is not None:
            self._sync()
        return self

    @property
    def window_range(self) -> tuple[int, int]:
        """The aligned steps ``(first, stop)`` the event list shows."""
        return self._lo, self._hi

    def _payload(self, table: pa.Table, seq: int | None) -> str:
        if seq is None:
            return ""
        text = table.column("payload")[seq].as_py()
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            return str(text)[:PAYLOAD_CHARS]
        if isinstance(value, dict):
            value.pop("key", None)  # a request hash says nothing to a reader
        return short(value, PAYLOAD_CHARS)

    def _side(self, table: pa.Table, seq: int | None, row: DiffRow) -> str:
        if seq is None:
            return '<td class="al-num"></td><td></td><td></td><td></td>'
        return (f'<td class="al-num">{seq:,}</td><td class="al-nowrap">{_e(row.type)}</td>'
                f'<td class="al-nowrap">{_e(row.actor or "")}</td><td>{_e(self._payload(table, seq))}</td>')

    @property
    def events_html(self) -> str:
        """The aligned events in the window: run a on the left, run b on the right; the shared
        prefix folded into one line; each changed pair followed by what changed."""
        lo, hi = self._lo, self._hi
        head = (f'<tr><th colspan="4">a: {_e(self.a.id)}</th>'
                f'<th class="al-dv-sep" colspan="4">b: {_e(self.b.id)}</th></tr>'
                "<tr><th>seq</th><th>type</th><th>actor</th><th>payload</th>"
                '<th class="al-dv-sep">seq</th><th>type</th><th>actor</th><th>payload</th></tr>')
        body = []
        prefix = self.diff.prefix
        folded = min(lo, prefix)
        if folded > 0:
            what = "identical event" + ("s" if folded != 1 else "")
            seqs = f"seq 0..{folded - 1}" if folded > 1 else "seq 0"
            body.append(f'<tr class="al-dv-fold"><td colspan="8">{folded:,} {what} ({seqs}) '
                        f'{"▸" if not self.prefix_shown else "▾"}</td></tr>')
        if lo > prefix:
            body.append(f'<tr class="al-more"><td colspan="8">… {lo - prefix:,} earlier steps after the '
                        "divergence</td></tr>")
        for row in self.rows[lo:hi]:
            if row.step == self.divergence_step:
                body.append(f'<tr class="al-dv-divergence"><td colspan="8">runs diverge here: '
                            f"seq {self.divergence_seq:,}</td></tr>")
            classes = f"al-dv-{row.status}" + (" al-dv-current" if row.step == self.step else "")
            left = self._side(self._table_a, row.seq_a, row)
            right = self._side(self._table_b, row.seq_b, row).replace("<td", '<td class="al-dv-sep"', 1)
            body.append(f'<tr class="{classes}" data-step="{row.step}" data-status="{row.status}">'
                        f"{left}{right}</tr>")
            if row.change:
                body.append(f'<tr class="al-dv-change al-dv-{row.status}" data-step="{row.step}">'
                            f'<td></td><td colspan="7">{_e(row.change)}</td></tr>')
        if hi < len(self.rows):
            body.append(f'<tr class="al-more"><td colspan="8">… {len(self.rows) - hi:,} later steps</td></tr>')
        return (f'<table class="al-table al-dv-events"><thead>{head}</thead>'
                f'<tbody>{"".join(body)}</tbody></table>')

    # --- the summary -------------------------------------------------------------------------

    def _share_final_states(self) -> None:
        """Hand the diff the final states this view folds anyway (b's through the tail index
        from a's state at the prefix, exactly as ``RunDiff`` folds them), so the graph changes
        do not fold b's events a second time. ``RunDiff._final_states`` is a
        ``functools.cached_property``: its cache is the instance ``__dict__``."""
        if "_final_states" not in vars(self.diff):
            final = (self._state_a(len(self.a) - 1), self._state_b(len(self.b) - 1))
            vars(self.diff)["_final_states"] = final

    @property
    def summary_html(self) -> str:
        """The usage delta (b - a) and the graph changes between the final states."""
        self._share_final_states()
        from .html import usage_rows
        rows = usage_rows(self.diff.usage)
        parts = [section("Usage (b - a)", table(("metric", "a", "b", "delta"), rows,
                                                numeric=(False, True, True, True)), folded=False)]
        graph = self.diff.graph
        if len(graph):
            counts = graph.groupby(["what", "change"], observed=True).size()
            facts = [(f"{what}s {change}", f"{int(n):,}") for (what, change), n in counts.items()]
            body = grid(facts) + table(("what", "id", "change", "detail"),
                                       [tuple(r) for r in graph[["what", "id", "change", "detail"]]
                                        .itertuples(index=False)],
                                       row_classes=[f"{c}" for c in graph["change"]], limit=GRAPH_ROWS)
            parts.append(section("Graph changes", body, len(graph)))
        else:
            parts.append(section("Graph changes", '<div class="al-muted">no objects or relations '
                                 "added, removed or changed</div>", 0, folded=False))
        return sections(parts)

    # --- display -----------------------------------------------------------------------------

    def text(self) -> str:
        """A plain-text summary (the ``RunDiff``'s)."""
        return str(self.diff)

    def snapshot_html(self) -> str:
        """The static view: facts, events around the divergence, states at the current step,
        usage and graph summary."""
        d = self.diff
        badge = ("same events", "al-ok") if d.same else (f"diverge at seq {d.divergence:,}", "al-warn")
        head = header("DiffView", f"{self.a.name or self.a.id} ↔ {self.b.name or self.b.id}", None, badge)
        c = d.counts
        facts = [("run a", f"{self.a.id}, {len(self.a):,} events"),
                 ("run b", f"{self.b.id}, {len(self.b):,} events"),
                 ("shared prefix", f"{d.prefix:,} events"),
                 ("after it", (f"{c['matched']:,} same, " + (f"{c['moved']:,} moved, " if c["moved"] else "")
                               + f"{c['changed'] - self.n_shifted:,} changed, "
                               f"{self.n_shifted:,} shifted, {c['only_a']:,} only in a, "
                               f"{c['only_b']:,} only in b"))]
        items = [section("Events", self.events_html, folded=False),
                 section(f"States at aligned step {self.step:,}", self.state_html, folded=False),
                 self.summary_html]
        return obj_repr(self.text(), head, grid(facts) + sections(items[:2]) + items[2])

    @property
    def n_shifted(self) -> int:
        """How many changed pairs are only shifted (see :func:`shifted_pairs`)."""
        rows = self.rows
        return len(rows._shifted) if isinstance(rows, _Rows) else 0

    @property
    def widget(self) -> Any:
        """The ipywidgets view (a ``VBox``, built on first use): the controls on top, then the
        events, the states at the selected step, and the usage and graph summary."""
        if self._view is None:
            self._view = _build(self)
            self._sync()
        return self._view["box"]

    def _sync(self) -> None:
        v = self._view
        if self._syncing:
            return
        self._syncing = True
        try:
            v["slider"].value = self.step
            v["events"].value = f'<div class="al-repr">{self.events_html}</div>'
            v["states"].value = f'<div class="al-repr">{self.state_html}</div>'
            v["earlier"].disabled = self._lo == 0
            v["later"].disabled = self._hi >= len(self.rows)
            prefix = self.diff.prefix
            v["prefix"].description = (f"{'▾ fold' if self.prefix_shown else '▸ show'} the {prefix:,} "
                                       f"identical event{'s' if prefix != 1 else ''}")
            v["prefix"].disabled = prefix == 0
        finally:
            self._syncing = False


def _build(view: DiffView) -> dict[str, Any]:
    import ipywidgets as w

    from .html import _css
    last = max(len(view.rows) - 1, 0)
    slider = w.IntSlider(value=max(view.step, 0), min=0, max=last, description="step",
                         continuous_update=False, layout=w.Layout(width="70%"))
    to_divergence = w.Button(description="go to the divergence", disabled=view.divergence_step is None,
                             layout=w.Layout(width="auto"))
    earlier = w.Button(description=f"▲ {view.window} earlier")
    later = w.Button(description=f"▼ {view.window} later")
    prefix = w.Button(description="", layout=w.Layout(width="auto"))
    prefix.add_class("agentlog-diff-prefix")
    events = w.HTML()
    events.add_class("agentlog-diff-events")
    states = w.HTML()
    summary = w.HTML(f'<div class="al-repr">{view.summary_html}</div>')

    def moved(change: dict[str, Any]) -> None:
        if not view._syncing and change["new"] != view.step:
            view.goto(int(change["new"]))

    slider.observe(moved, names="value")
    to_divergence.on_click(lambda _: view.goto(view.divergence_step) if view.divergence_step is not None
                           else None)
    earlier.on_click(lambda _: view.show_more(before=view.window))
    later.on_click(lambda _: view.show_more(after=view.window))
    prefix.on_click(lambda _: view.show_prefix(not view.prefix_shown))
    controls = w.HBox([slider, to_divergence])
    controls.add_class("agentlog-diff-controls")
    box = w.VBox([w.HTML(f"<style>{_css()}</style>"), controls, w.HBox([prefix, earlier, later]), events,
                  states, summary])
    box.add_class("agentlog-diffview")
    return {"box": box, "slider": slider, "events": events, "states": states, "summary": summary,
            "earlier": earlier, "later": later, "to_divergence": to_divergence, "prefix": prefix}
