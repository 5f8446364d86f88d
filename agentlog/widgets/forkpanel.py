"""Fork a run at an event from a notebook: pick the event, edit one thing, press *Fork*.

:class:`ForkPanel` binds ipywidgets to the pure planning of :mod:`agentlog.capture.forkplan`
(which edits an event allows, the edit it starts with, the plan, the edits kept per event) and
to :func:`agentlog.fork`.

The JSON editor is prefilled with the recorded value at the selected event and checked on
every change (JSON syntax, then the shape the edit needs, then whether it applies to that
event); while it is invalid the *Fork* button is disabled and the messages show in red in the
panel. Every failure (bad JSON, an edit that does not apply, the program raising) is shown in
the panel with the run id and the seq, never only in the log.

An edit is kept per event: moving the selection (or a linked scrubber) away and back puts the
prepared edit back in the editor, and the events with an edit are listed. Discarding one
(*discard edit*) asks first.
"""

from __future__ import annotations

import contextlib
import html
import json
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..capture.forkplan import (
    KINDS,
    EditBook,
    EditError,
    ForkPlan,
    applicability,
    default_kind,
    dumps,
    execute_plan,
    plan_fork,
    recorded_value,
)
from ..errors import ForkEditWarning
from ..events import APPROVAL_DENIED, APPROVAL_GRANTED
from ._kernel import as_widget

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["KINDS", "EditError", "ForkPanel", "ForkPlan", "applicability", "execute_plan", "plan_fork",
           "recorded_value"]

_dumps = dumps


def _find_slider(root: Any) -> widgets.IntSlider | None:
    """The first ``IntSlider`` in a widget tree (depth first)."""
    if isinstance(root, widgets.IntSlider):
        return root
    for child in getattr(root, "children", ()) or ():
        found = _find_slider(child)
        if found is not None:
            return found
    return None


def _error_html(messages: list[str]) -> str:
    if not messages:
        return ""
    items = "".join(f"<li>{html.escape(m)}</li>" for m in messages)
    return f'<ul style="color:#b00020;margin:4px 0;padding-left:1.2em">{items}</ul>'


def _event_line(run: Run, seq: int) -> str:
    event = run.event(seq)
    actor = f" by {event.actor}" if event.actor else ""
    return (f"<code>{html.escape(event.type)}</code>{html.escape(actor)}"
            f' <span style="color:#666">(seq {seq} of {len(run) - 1})</span>')


class ForkPanel(widgets.VBox):  # type: ignore[misc]
    """Fork ``run`` at an event with one thing changed, and compare the fork with it.

    Args:
        run: the parent :class:`~agentlog.Run`.
        program: the program to re-run (``al.examples.program("refunds")``, an
            ``al.AgentProgram``, or any program ``al.fork`` takes).
        seq: the event selected first (default: the first approval decision, else the last
            event).
        clock: passed to ``al.fork`` (a fixed clock makes forks repeatable).

    Attributes:
        new_run: the last fork made (``None`` before).
        diff_view: the :class:`~agentlog.widgets.DiffView` of ``run`` and ``new_run``.
        error: the messages shown in the panel's error area, joined (``None`` when clear).

    Example::

        panel = al.widgets.ForkPanel(run, al.examples.program("refunds"))
        panel.select(80)
        panel.set_edit("approval", {"decision": "approve", "by": "me", "note": "ok"})
        fork = panel.run_fork()          # the same code path as the Fork button
    """

    def __init__(self, run: Run, program: Any, *, seq: int | None = None,
                 clock: Callable[[], float] | None = None, **kwargs: Any) -> None:
        if len(run) == 0:
            raise ValueError(f"run {run.id}: no events to fork at")
        self.run, self.program, self.clock = run, program, clock
        self.new_run: Run | None = None
        self.diff_view: Any = None
        self.error: str | None = None
        self.plan: ForkPlan | None = None
        self._filling = False
        self.edits = EditBook()
        """The edits prepared per event (kept while the selection moves)."""
        self._shown = 0  # the seq whose edit the editor holds
        last = max(len(run) - 1, 0)
        self.seq_box = widgets.BoundedIntText(value=0, min=0, max=last, description="event",
                                              layout=widgets.Layout(width="11em"))
        self.slider = widgets.IntSlider(value=0, min=0, max=last, readout=False,
                                        layout=widgets.Layout(width="22em"))
        widgets.link((self.slider, "value"), (self.seq_box, "value"))
        self.event_label = widgets.HTML()
        self.kind = widgets.Dropdown(options=[(label, k) for k, label in KINDS.items()],
                                     description="edit", layout=widgets.Layout(width="28em"))
        self.editor = widgets.Textarea(layout=widgets.Layout(width="100%", height="12em"))
        self.editor.add_class("agentlog-fork-editor")
        self.errors = widgets.HTML()
        self.errors.add_class("agentlog-fork-error")
        self.plan_label = widgets.HTML()
        self.button = widgets.Button(description="Fork", button_style="warning", icon="code-fork")
        self.button.add_class("agentlog-fork-button")
        self.discard_button = widgets.Button(description="discard edit", icon="undo",
                                             tooltip="put back what the run recorded at this event")
        self.discard_button.add_class("agentlog-fork-discard")
        self.confirm_yes = widgets.Button(description="yes, discard", button_style="danger")
        self.confirm_no = widgets.Button(description="keep it")
        self.confirm_label = widgets.HTML()
        self.confirm = widgets.HBox([self.confirm_label, self.confirm_yes, self.confirm_no],
                                    layout=widgets.Layout(display="none"))
        self.confirm.add_class("agentlog-fork-confirm")
        self.kept_label = widgets.HTML()
        self.kept_label.add_class("agentlog-fork-kept")
        self.progress = widgets.IntProgress(value=0, min=0, max=3, bar_style="info",
                                            layout=widgets.Layout(width="12em", visibility="hidden"))
        self.status = widgets.Label()
        self.result = widgets.VBox()
        self.result.add_class("agentlog-fork-result")
        title = widgets.HTML(f"<b>Fork</b> <code>{html.escape(run.id)}</code> at an event")
        super().__init__([title, widgets.HBox([self.seq_box, self.slider, self.event_label]),
                          widgets.HBox([self.kind, self.discard_button]), self.confirm, self.editor,
                          self.kept_label, self.errors, self.plan_label,
                          widgets.HBox([self.button, self.progress, self.status]), self.result],
                         **kwargs)
        self.add_class("agentlog-forkpanel")
        self.seq_box.observe(self._on_seq, names="value")
        self.kind.observe(self._on_kind, names="value")
        self.editor.observe(self._on_text, names="value")
        self.button.on_click(self._on_click)
        self.discard_button.on_click(lambda _: self.discard_edit())
        self.confirm_yes.on_click(lambda _: self.discard_edit(confirm=True))
        self.confirm_no.on_click(lambda _: self._ask(False))
        first = self._first_seq() if seq is None else seq
        self.select(first)
        if first == 0:  # no change of value, so no refill yet
            self._show(0)

    def __repr__(self) -> str:
        return f"<ForkPanel {self.run.id} seq={self.seq} kind={self.kind.value}>"

    # --- selection and editing -----------------------------------------------------------------

    @property
    def seq(self) -> int:
        """The selected event."""
        return int(self.seq_box.value)

    def _first_seq(self) -> int:
        """The first approval decision, else the last event (from the type column: no payloads)."""
        from ..analysis.tables import event_table  # cached per run
        types = event_table(self.run).column("type").to_pylist()
        for seq, type_ in enumerate(types):
            if type_ in (APPROVAL_GRANTED, APPROVAL_DENIED):
                return seq
        return len(types) - 1

    def select(self, seq: int) -> None:
        """Select the event ``seq``.

        The edit in the editor is kept for the event it was made at; the editor then shows the
        edit kept at ``seq``, else what the run recorded there (with the kind the event suggests
        when the current one does not apply). Selecting the event already selected keeps the
        edit in progress.

        Raises:
            IndexError: ``seq`` is not in the run.
        """
        if not 0 <= seq < len(self.run):
            raise IndexError(f"run {self.run.id}: seq {seq} is outside 0..{len(self.run) - 1}")
        self.seq_box.value = seq  # a change refills the editor; the same seq keeps the edit

    def set_edit(self, kind: str, value: Any) -> list[str]:
        """Choose the edit kind and put ``value`` (JSON-able, or JSON text) in the editor.

        Returns:
            The validation messages (empty when the *Fork* button is enabled).
        """
        if kind not in KINDS:
            raise ValueError(f"unknown edit kind {kind!r}; the kinds are {', '.join(KINDS)}")
        self._set_kind(kind)
        self.editor.value = value if isinstance(value, str) else dumps(value)
        return self.validate()

    def discard_edit(self, *, confirm: bool = False) -> bool:
        """Put back what the run recorded at the selected event, dropping the edit kept there.

        Without ``confirm`` this only asks (the panel shows *yes, discard* / *keep it*, as the
        *discard edit* button does); ``confirm=True`` discards.

        Returns:
            Whether an edit was discarded.
        """
        seq = self.seq
        self._keep_current()
        if seq not in self.edits:
            self._ask(False)
            return False
        if not confirm:
            self._ask(True)
            return False
        self.edits.discard(seq)
        self._ask(False)
        self._show(seq)
        return True

    def _ask(self, on: bool) -> None:
        self.confirm_label.value = (f"discard the edit prepared at seq {self.seq}?" if on else "")
        self.confirm.layout.display = "flex" if on else "none"

    def link_to(self, scrubber: Any) -> None:
        """Follow a :class:`~agentlog.widgets.Scrubber`: moving its slider selects that event here
        (edits prepared at other events are kept).

        Raises:
            ValueError: ``scrubber`` has no ``IntSlider`` in its widget.
        """
        slider = _find_slider(as_widget(scrubber))
        if slider is None:
            raise ValueError(f"{scrubber!r} has no IntSlider to follow")
        slider.observe(lambda change: self.select(int(change["new"])), names="value")
        self.linked = slider
        if 0 <= int(slider.value) < len(self.run):
            self.select(int(slider.value))

    def _set_kind(self, kind: str) -> None:
        self._filling = True
        try:
            self.kind.value = kind
        finally:
            self._filling = False

    def _recorded_text(self, seq: int, kind: str) -> str:
        value = recorded_value(self.run, seq, kind)
        return "" if value is None else dumps(value)

    def _keep_current(self) -> None:
        """Keep the editor's text as the edit of the event it was made at."""
        seq, kind = self._shown, self.kind.value
        if 0 <= seq < len(self.run):
            self.edits.keep(seq, kind, self.editor.value, recorded=self._recorded_text(seq, kind))
        self._show_kept()

    def _on_seq(self, change: Mapping[str, Any]) -> None:
        self._keep_current()
        self._ask(False)
        self._show(int(change["new"]))

    def _show(self, seq: int) -> None:
        """Fill the editor for ``seq``: its kept edit, else the recorded value."""
        self.event_label.value = _event_line(self.run, seq)
        kept = self.edits.get(seq)
        self._shown = seq
        if kept is not None:
            self._set_kind(kept.kind)
            self.editor.value = kept.text
        else:
            self._set_kind(default_kind(self.run, seq, self.kind.value))
            self.editor.value = self._recorded_text(seq, self.kind.value)
        self._show_kept()
        self.validate()

    def _show_kept(self) -> None:
        seqs = list(self.edits)
        self.discard_button.disabled = self.seq not in self.edits and self.editor.value == \
            self._recorded_text(self.seq, self.kind.value)
        self.kept_label.value = ("" if not seqs else
                                 '<span style="color:#555">edits kept at seq '
                                 f"{html.escape(', '.join(map(str, seqs)))}</span>")

    def _on_kind(self, change: Mapping[str, Any]) -> None:
        if not self._filling:
            self.editor.value = self._recorded_text(self.seq, self.kind.value)
            self.validate()

    def _on_text(self, change: Mapping[str, Any]) -> None:
        self.validate()
        if self._shown == self.seq:
            self._keep_current()

    # --- validation --------------------------------------------------------------------------

    def _where(self) -> str:
        return f"run {self.run.id}, seq {self.seq}"

    def validate(self) -> list[str]:
        """Check the editor's JSON against the selected event and kind.

        Returns:
            The messages (each naming the run id and seq); empty when the fork can go. The
            messages are shown in the panel, and the *Fork* button is disabled while there are any.
        """
        self.plan = None
        text = self.editor.value
        messages: list[str] = []
        problem = applicability(self.run, self.seq, self.kind.value, self.program)
        if problem is not None:
            messages.append(f"{self._where()}: {problem}")
        else:
            self._check_text(text, messages)
        self._show_errors(messages)
        self.plan_label.value = (f'<span style="color:#555">{html.escape(self.plan.describe())}</span>'
                                 if self.plan else "")
        self.button.disabled = bool(messages)
        return messages

    def _check_text(self, text: str, messages: list[str]) -> None:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}"
            reason = "the editor is empty" if not text.strip() else f"not JSON: {exc.msg} ({where})"
            messages.append(f"{self._where()}: {reason}")
        else:
            try:
                self.plan = plan_fork(self.run, self.seq, self.kind.value, value, self.program)
            except EditError as exc:
                messages.append(f"{self._where()}: {exc}")

    def _show_errors(self, messages: list[str]) -> None:
        self.error = "\n".join(messages) or None
        self.errors.value = _error_html(messages)

    # --- forking -----------------------------------------------------------------------------

    def _step(self, value: int, text: str) -> None:
        self.progress.value = value
        self.progress.layout.visibility = "visible" if 0 < value < self.progress.max else "hidden"
        self.status.value = text

    def run_fork(self) -> Run:
        """Make the fork (the *Fork* button calls this), then show it and its DiffView.

        Returns:
            The new run (also :attr:`new_run`).

        Raises:
            ValueError: the edit is not valid (the messages are in the panel).
            Exception: whatever the fork raised; the panel shows it with the run id and seq.
        """
        messages = self.validate()
        if messages or self.plan is None:
            raise ValueError(messages[0] if messages else f"{self._where()}: nothing to fork")
        plan = self.plan
        self.button.disabled = True
        self._step(1, f"forking at seq {plan.at}…")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ForkEditWarning)
                new = execute_plan(self.run, plan, self.program, clock=self.clock)
            self._step(2, f"comparing {self.run.id} with {new.id}…")
            self._show_result(new, _fork_notes(caught))
        except Exception as exc:
            notes = "; ".join(getattr(exc, "__notes__", []))
            self._show_errors([f"{self._where()}: the fork failed: {type(exc).__name__}: {exc}"
                               + (f" ({notes})" if notes else "")])
            self._step(0, "fork failed")
            raise
        finally:
            self.button.disabled = self.error is not None
        self._step(3, f"forked: {new.id}")
        return new

    def _show_result(self, new: Run, notes: list[str]) -> None:
        """The new run's card and its DiffView against the parent, below the controls; above
        them, what the fork warned of (an edit it never served)."""
        from .diffview import DiffView  # imported late: it pulls in plotly
        view = DiffView(self.run, new)
        card = widgets.HTML(new._repr_html_() or html.escape(repr(new)))
        warned = "".join(f'<div style="color:#a15c00">⚠ {html.escape(note)}</div>' for note in notes)
        self.result.children = [widgets.HTML(f"<b>new run</b> <code>{html.escape(new.id)}</code> "
                                             f"({html.escape(str(new.status))}, {len(new)} events){warned}"),
                                card, as_widget(view)]
        self.new_run, self.diff_view = new, view

    def _on_click(self, _button: Any) -> None:
        # Whatever fails is already in the panel's error area, with the run id and seq.
        with contextlib.suppress(Exception):
            self.run_fork()


def _fork_notes(caught: list[warnings.WarningMessage]) -> list[str]:
    """The texts of the :class:`~agentlog.errors.ForkEditWarning` caught while forking, for the
    panel; any other warning is issued again as it came."""
    notes: list[str] = []
    for warning in caught:
        if issubclass(warning.category, ForkEditWarning):
            notes.append(str(warning.message))
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return notes
