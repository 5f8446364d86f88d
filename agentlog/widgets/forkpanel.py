"""Fork a run at an event from a notebook: pick the event, edit one thing, press *Fork*.

:class:`ForkPanel` binds ipywidgets to :func:`agentlog.fork`. The edit kinds are the ones
:mod:`agentlog.edit` supports, plus a changed approval decision:

=================  ============================  ==============================================
kind               the selected event            what the fork does
=================  ============================  ==============================================
``llm_response``   an ``llm.response``           cut before its request; ``replace_response``
``tool_result``    a ``tool.result``             cut before its call; ``replace_response``
``state_patch``    any event but the last        cut after it; ``patch_state(ops)`` on ``vars``
``input``          any (the fork starts at -1)   ``replace_input(value)``
``approval``       an ``approval.granted`` /     cut just before the decision, decide it the
                   ``denied`` (or its request)   other way (``al.approve`` / ``al.deny``) and
                                                 ``al.resume`` (needs an ``al.AgentProgram``)
=================  ============================  ==============================================

The JSON editor is prefilled with the recorded value at the selected event and checked on
every change (JSON syntax, then the shape the edit needs, then whether it applies to that
event); while it is invalid the *Fork* button is disabled and the messages show in red in the
panel. Every failure (bad JSON, an edit that does not apply, the program raising) is shown in
the panel with the run id and the seq, never only in the log.

The planning is pure (:func:`plan_fork`); the widget only binds it to traits.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

import ipywidgets as widgets

from ..capture.fork import Edit, fork, patch_state, replace_input, replace_response
from ..capture.runtime import approve, deny, resume
from ..events import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    APPROVAL_REQUESTED,
    LLM_RESPONSE,
    RUN_STARTED,
    STATE_PATCH,
    TOOL_RESULT,
)
from ..fold import apply_patch, thaw
from ._kernel import as_widget

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["KINDS", "EditError", "ForkPanel", "ForkPlan", "applicability", "execute_plan", "plan_fork",
           "recorded_value"]

#: The edit kinds, with the label the panel shows.
KINDS: Final[dict[str, str]] = {
    "llm_response": "replace the LLM response",
    "tool_result": "replace a tool result",
    "state_patch": "patch the state (vars)",
    "input": "change the input",
    "approval": "decide the approval otherwise",
}

_NATURAL: Final = {LLM_RESPONSE: "llm_response", TOOL_RESULT: "tool_result",
                   STATE_PATCH: "state_patch", RUN_STARTED: "input",
                   APPROVAL_GRANTED: "approval", APPROVAL_DENIED: "approval",
                   APPROVAL_REQUESTED: "approval"}
_OPS: Final = ("add", "remove", "replace", "move", "copy", "test")
_DECISIONS: Final = ("approve", "deny")
# Bookkeeping fields of a recorded answer: the fork keeps the recorded ones (the key must stay,
# or the program's call would not find the edited answer).
_ANSWER_META: Final = ("key", "usage", "cache_hit", "cost_source", "id", "model", "name", "edited")


class EditError(ValueError):
    """An edit that cannot be applied at the selected event (the message says why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkPlan:
    """What a fork will do: where it cuts, the edit, and an approval decision to make."""

    kind: str
    """One of :data:`KINDS`."""
    seq: int
    """The selected event."""
    at: int
    """The last parent event the fork keeps (``-1``: none)."""
    edits: list[Edit] = field(default_factory=list)
    """The :mod:`agentlog.edit` edits passed to :func:`agentlog.fork`."""
    decision: dict[str, Any] | None = None
    """For ``approval``: ``{"request", "decision", "by", "note"}``."""

    def describe(self) -> str:
        """One line for the panel: where the fork cuts and what changes."""
        keep = "keeps no parent event" if self.at < 0 else f"keeps events 0..{self.at}"
        what = {"llm_response": f"the answer recorded at seq {self.seq} is replaced",
                "tool_result": f"the result recorded at seq {self.seq} is replaced",
                "state_patch": "the ops are applied to state['vars'] at the cut",
                "input": "the program runs on the new input",
                "approval": (f"request {self.decision['request']} is decided "
                             f"'{self.decision['decision']}', then the run resumes"
                             if self.decision else "")}[self.kind]
        return f"fork at seq {self.at} ({keep}); {what}"


# --- pure planning ---------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    to_json = getattr(value, "to_json", None)
    if to_json is not None:
        return to_json()
    return thaw(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable)


def _decision_of(run: Run, seq: int) -> tuple[int, Any] | None:
    """The request seq and the decision event for an approval event at ``seq``."""
    return _decision_at(run, len(run), seq)


@functools.lru_cache(maxsize=64)  # validate() asks on every keystroke; a request scans the run
def _decision_at(run: Run, count: int, seq: int) -> tuple[int, Any] | None:
    event = run.event(seq)
    if event.type in (APPROVAL_GRANTED, APPROVAL_DENIED):
        request = event.payload.get("request", event.caused_by)
        return None if request is None else (int(request), event)
    if event.type == APPROVAL_REQUESTED:
        for later in run.iter_events(start=seq + 1):
            if later.type in (APPROVAL_GRANTED, APPROVAL_DENIED) and later.payload.get("request") == seq:
                return seq, later
    return None


def recorded_value(run: Run, seq: int, kind: str) -> Any:
    """The value the editor starts with: what the run recorded at ``seq`` for ``kind``.

    Returns ``None`` when the kind does not apply to that event.
    """
    event = run.event(seq)
    payload = event.payload
    if kind in ("llm_response", "tool_result"):
        wanted = LLM_RESPONSE if kind == "llm_response" else TOOL_RESULT
        if event.type != wanted:
            return None
        return {k: v for k, v in payload.items() if k not in _ANSWER_META}
    if kind == "state_patch":
        if event.type == STATE_PATCH:
            return payload.get("ops", [])
        return [{"op": "add", "path": "/edited", "value": True}]
    if kind == "input":
        return run.event(0).payload.get("inputs") if len(run) else None
    if kind == "approval":
        found = _decision_of(run, seq)
        if found is None:
            return None
        decision = found[1]
        return {"decision": "approve" if decision.type == APPROVAL_GRANTED else "deny",
                "by": decision.payload.get("by", ""), "note": decision.payload.get("note", "")}
    raise EditError(f"unknown edit kind {kind!r}; the kinds are {', '.join(KINDS)}")


def _check_ops(value: Any) -> None:
    if not isinstance(value, list) or not value:
        raise EditError("a state patch is a non-empty JSON list of RFC 6902 operations")
    for i, op in enumerate(value):
        if not isinstance(op, dict) or op.get("op") not in _OPS:
            raise EditError(f"operation {i}: needs \"op\", one of {', '.join(_OPS)}")
        if not isinstance(op.get("path"), str) or not (op["path"] == "" or op["path"].startswith("/")):
            raise EditError(f"operation {i}: needs a \"path\" JSON pointer such as \"/key\"")
        if op["op"] in ("add", "replace", "test") and "value" not in op:
            raise EditError(f"operation {i}: {op['op']} needs a \"value\"")
        if op["op"] in ("move", "copy") and not isinstance(op.get("from"), str):
            raise EditError(f"operation {i}: {op['op']} needs a \"from\" pointer")


# The _plan_* helpers run after applicability() said the kind applies at seq.


def _plan_response(run: Run, seq: int, kind: str, value: Any) -> ForkPlan:
    event = run.event(seq)
    if not isinstance(value, dict) or not value:
        raise EditError(f"{KINDS[kind]}: the value is a JSON object merged over the recorded answer")
    if "key" in value and value["key"] != event.payload.get("key"):
        raise EditError("the \"key\" names the request this answers; leave it out")
    if kind == "tool_result" and not ({"result", "error"} & set(value)):
        raise EditError("a tool result needs \"result\" (or \"error\")")
    at = (event.caused_by if event.caused_by is not None else seq) - 1
    return ForkPlan(kind=kind, seq=seq, at=at, edits=[replace_response(seq, value)])


def _plan_patch(run: Run, seq: int, value: Any) -> ForkPlan:
    _check_ops(value)
    try:
        apply_patch(run.state_at(seq)["vars"], value)
    except Exception as exc:
        raise EditError(f"the ops do not apply to state['vars'] at seq {seq}: {exc}") from exc
    return ForkPlan(kind="state_patch", seq=seq, at=seq, edits=[patch_state(value)])


def _plan_approval(run: Run, seq: int, value: Any, program: Any) -> ForkPlan:
    found = _decision_of(run, seq)
    assert found is not None
    if not isinstance(value, dict) or value.get("decision") not in _DECISIONS:
        raise EditError("an approval is {\"decision\": \"approve\" or \"deny\", \"by\": ..., \"note\": ...}")
    if not isinstance(value.get("by"), str) or not value["by"]:
        raise EditError("\"by\" names who decides (a non-empty string)")
    if not isinstance(value.get("note", ""), str):
        raise EditError("\"note\" is a string")
    request, decided = found
    return ForkPlan(kind="approval", seq=seq, at=decided.seq - 1,
                    decision={"request": request, "decision": value["decision"],
                              "by": value["by"], "note": value.get("note", "")})


def applicability(run: Run, seq: int, kind: str, program: Any = None) -> str | None:
    """Why an edit of ``kind`` does not apply at the event ``seq`` (``None``: it applies)."""
    if run.replayable_reason is not None:  # an import: the panel shows why Fork is disabled
        return f"this run cannot be forked: {run.replayable_reason}"
    if kind not in KINDS:
        return f"unknown edit kind {kind!r}; the kinds are {', '.join(KINDS)}"
    if not 0 <= seq < len(run):
        return f"seq {seq} is outside the run (0..{len(run) - 1})"
    event_type = run.event(seq).type
    if kind in ("llm_response", "tool_result"):
        wanted = LLM_RESPONSE if kind == "llm_response" else TOOL_RESULT
        if event_type != wanted:
            return f"{KINDS[kind]} needs a {wanted} event; seq {seq} is a {event_type}"
    elif kind == "state_patch" and seq >= len(run) - 1:
        return f"seq {seq} is the last event: a fork after it has nothing to re-run"
    elif kind == "approval":
        if _decision_of(run, seq) is None:
            return (f"seq {seq} is a {event_type}, not a decided approval "
                    "(select an approval.granted / approval.denied event)")
        if not all(hasattr(program, name) for name in ("agent", "model", "tools")):
            return ("changing an approval resumes the run: the program must be an "
                    "al.AgentProgram (for the examples: al.examples.program(name))")
    return None


def plan_fork(run: Run, seq: int, kind: str, value: Any, program: Any = None) -> ForkPlan:
    """Plan a fork of ``run`` at the event ``seq`` with an edit of ``kind`` to ``value``.

    >>> import agentlog as al, tempfile
    >>> run = al.examples.sample_store(copy_to=tempfile.mkdtemp() + "/s").run("refunds-0001")
    >>> plan = plan_fork(run, 80, "approval", {"decision": "approve", "by": "me"},
    ...                  al.examples.program("refunds"))
    >>> plan.describe()
    "fork at seq 79 (keeps events 0..79); request 78 is decided 'approve', then the run resumes"

    Raises:
        EditError: the value has the wrong shape, or the edit does not apply at ``seq``.
    """
    problem = applicability(run, seq, kind, program)
    if problem is not None:
        raise EditError(problem)
    if kind in ("llm_response", "tool_result"):
        return _plan_response(run, seq, kind, value)
    if kind == "state_patch":
        return _plan_patch(run, seq, value)
    if kind == "input":
        return ForkPlan(kind="input", seq=seq, at=-1, edits=[replace_input(value)])
    return _plan_approval(run, seq, value, program)


def execute_plan(run: Run, plan: ForkPlan, program: Any, *, clock: Callable[[], float] | None = None,
                 name: str | None = None) -> Run:
    """Make the fork a plan describes (the approval kind: fork, decide, resume)."""
    parent = run.meta.get("name") or run.id
    # The tag keeps the kind of edit in run.json: an approval fork stops before its cut is
    # written (no fork.started), and its change is the decision appended after it.
    new: Run = fork(run, plan.at, program=program, edit=plan.edits, clock=clock,
                    name=name or f"{parent} fork@{plan.at} ({plan.kind})",
                    tags={"edit": plan.kind, "edit_seq": plan.seq})
    decision = plan.decision
    if decision is None:
        return new
    if new.status != "waiting":
        raise RuntimeError(f"fork {new.id} did not stop for approval request {decision['request']} "
                           f"(status {new.status})")
    decide = approve if decision["decision"] == "approve" else deny
    decide(new, decision["request"], decision["by"], decision["note"], clock=clock)
    return cast("Run", resume(new, program.agent, model=program.model, tools=program.tools, clock=clock))


# --- the widget ------------------------------------------------------------------------------


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
        self.progress = widgets.IntProgress(value=0, min=0, max=3, bar_style="info",
                                            layout=widgets.Layout(width="12em", visibility="hidden"))
        self.status = widgets.Label()
        self.result = widgets.VBox()
        self.result.add_class("agentlog-fork-result")
        title = widgets.HTML(f"<b>Fork</b> <code>{html.escape(run.id)}</code> at an event")
        super().__init__([title, widgets.HBox([self.seq_box, self.slider, self.event_label]),
                          self.kind, self.editor, self.errors, self.plan_label,
                          widgets.HBox([self.button, self.progress, self.status]), self.result],
                         **kwargs)
        self.add_class("agentlog-forkpanel")
        self.seq_box.observe(self._on_seq, names="value")
        self.kind.observe(self._on_kind, names="value")
        self.editor.observe(self._on_text, names="value")
        self.button.on_click(self._on_click)
        first = self._first_seq() if seq is None else seq
        self.select(first)
        if first == 0:  # no change of value, so no refill yet
            self._on_seq({"new": 0})

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
        """Select the event ``seq``: the editor is refilled with what was recorded there
        (selecting the event already selected keeps the edit in progress).

        If the current edit kind does not apply to that event and one does (an
        ``llm.response``, ``tool.result``, ``state.patch`` or approval event), the kind follows.

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
        self._filling = True
        try:
            self.kind.value = kind
        finally:
            self._filling = False
        self.editor.value = value if isinstance(value, str) else _dumps(value)
        return self.validate()

    def link_to(self, scrubber: Any) -> None:
        """Follow a :class:`~agentlog.widgets.Scrubber`: moving its slider selects that event here.

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

    def _on_seq(self, change: Mapping[str, Any]) -> None:
        seq = int(change["new"])
        self.event_label.value = _event_line(self.run, seq)
        natural = _NATURAL.get(self.run.event(seq).type)
        if natural and recorded_value(self.run, seq, self.kind.value) is None \
                and recorded_value(self.run, seq, natural) is not None:
            self._filling = True
            try:
                self.kind.value = natural
            finally:
                self._filling = False
        self._refill()

    def _on_kind(self, change: Mapping[str, Any]) -> None:
        if not self._filling:
            self._refill()

    def _on_text(self, change: Mapping[str, Any]) -> None:
        self.validate()

    def _refill(self) -> None:
        value = recorded_value(self.run, self.seq, self.kind.value)
        self.editor.value = "" if value is None else _dumps(value)
        self.validate()

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
            new = execute_plan(self.run, plan, self.program, clock=self.clock)
            self._step(2, f"comparing {self.run.id} with {new.id}…")
            self._show_result(new)
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

    def _show_result(self, new: Run) -> None:
        """The new run's card and its DiffView against the parent, below the controls."""
        from .diffview import DiffView  # imported late: it pulls in plotly
        view = DiffView(self.run, new)
        card = widgets.HTML(new._repr_html_() or html.escape(repr(new)))
        self.result.children = [widgets.HTML(f"<b>new run</b> <code>{html.escape(new.id)}</code> "
                                             f"({html.escape(str(new.status))}, {len(new)} events)"),
                                card, as_widget(view)]
        self.new_run, self.diff_view = new, view

    def _on_click(self, _button: Any) -> None:
        # Whatever fails is already in the panel's error area, with the run id and seq.
        with contextlib.suppress(Exception):
            self.run_fork()
