"""Plan a fork from an event: which edits an event allows, the edit it starts with, and the
edits a person prepared, kept per event while the selection moves.

This is the pure part of :class:`agentlog.widgets.ForkPanel` (the widget only binds it to
traits). The edit kinds are the ones :mod:`agentlog.edit` supports, plus a changed approval
decision:

=================  ============================  ==============================================
kind               the selected event            what the fork does
=================  ============================  ==============================================
``llm_response``   an ``llm.response``           cut before its call (:func:`quiet_cut`);
                                                 ``replace_response``
``tool_result``    a ``tool.result``             cut before its call (:func:`quiet_cut`);
                                                 ``replace_response``
``state_patch``    any event but the last        cut after it; ``patch_state(ops)`` on ``vars``
``input``          any (the fork starts at -1)   ``replace_input(value)``
``approval``       an ``approval.granted`` /     cut just before the decision, decide it the
                   ``denied`` (or its request)   other way (``al.approve`` / ``al.deny``) and
                   ``al.resume`` (needs an ``al.AgentProgram``)
=================  ============================  ==============================================

- :func:`applicability` says why an edit does not apply at an event (``None``: it does);
- :func:`default_kind` is the kind an event suggests, :func:`recorded_value` what the editor
  starts with (what the run recorded there);
- :func:`plan_fork` checks a value and returns a :class:`ForkPlan`; :func:`execute_plan`
  makes the fork;
- :class:`EditBook` keeps the edit prepared at each event, so that moving to another event
  and back finds it again, and discarding one is an explicit step.

Payloads are read through the event vocabulary (:mod:`agentlog.events`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

import numpy as np

from .._words import with_article
from ..events import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    APPROVAL_REQUESTED,
    LLM_RESPONSE,
    RUN_STARTED,
    STATE_PATCH,
    TOOL_RESULT,
    VERSION_KEY,
    ApprovalDenied,
    ApprovalGranted,
    Event,
    LLMResponse,
    RunStarted,
    StatePatch,
    ToolResult,
)
from ..folding import apply_patch, thaw
from .fork import Edit, fork, patch_state, replace_input, replace_response, unservable
from .runtime import approve, deny, resume

if TYPE_CHECKING:
    from ..store.run import Run

__all__ = ["KINDS", "NATURAL", "EditBook", "EditError", "ForkPlan", "KeptEdit", "applicability",
           "default_kind", "dumps", "execute_plan", "plan_fork", "quiet_cut", "recorded_value"]

#: The edit kinds, with the label the panel shows.
KINDS: Final[dict[str, str]] = {
    "llm_response": "replace the LLM response",
    "tool_result": "replace a tool result",
    "state_patch": "patch the state (vars)",
    "input": "change the input",
    "approval": "decide the approval otherwise",
}

#: The edit kind each type of event suggests.
NATURAL: Final = {LLM_RESPONSE: "llm_response", TOOL_RESULT: "tool_result",
                  STATE_PATCH: "state_patch", RUN_STARTED: "input",
                  APPROVAL_GRANTED: "approval", APPROVAL_DENIED: "approval",
                  APPROVAL_REQUESTED: "approval"}
_OPS: Final = ("add", "remove", "replace", "move", "copy", "test")
_DECISIONS: Final = ("approve", "deny")
# Bookkeeping fields of a recorded answer: the fork keeps the recorded ones (the key must stay,
# or the program's call would not find the edited answer).
_R, _T = LLMResponse.K, ToolResult.K
_ANSWER_META: Final = frozenset({_R.key, _R.usage, _R.cache_hit, _R.cost_source, _R.id, _R.model,
                                 _R.edited, _R.served_from_seq, _T.name, _T.type})


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


def dumps(value: Any) -> str:
    """``value`` as the editor shows it: indented JSON (blob references as their JSON form)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable)


def _decision_of(run: Run, seq: int) -> tuple[int, Any] | None:
    """The request seq and the decision event for an approval event at ``seq``."""
    return _decision_at(run, len(run), seq)


@functools.lru_cache(maxsize=64)  # validate() asks on every keystroke; a request scans the run
def _decision_at(run: Run, count: int, seq: int) -> tuple[int, Any] | None:
    event = run.event(seq)
    if event.type in (APPROVAL_GRANTED, APPROVAL_DENIED):
        return _request_of(event), event
    if event.type == APPROVAL_REQUESTED:
        for later in run.iter_events(start=seq + 1):
            if later.type in (APPROVAL_GRANTED, APPROVAL_DENIED) and _request_of(later) == seq:
                return seq, later
    return None


def _decision_body(event: Any) -> ApprovalGranted | ApprovalDenied:
    return ApprovalGranted.of(event) if event.type == APPROVAL_GRANTED else ApprovalDenied.of(event)


def _request_of(decision: Any) -> int:
    return int(_decision_body(decision).request)


def recorded_value(run: Run, seq: int, kind: str) -> Any:
    """The value the editor starts with: what the run recorded at ``seq`` for ``kind``.

    Returns ``None`` when the kind does not apply to that event.
    """
    event = run.event(seq)
    if kind in ("llm_response", "tool_result"):
        body = (LLMResponse if kind == "llm_response" else ToolResult)
        if event.type != body.TYPE:
            return None
        return {k: v for k, v in body.of(event).to_payload().items()
                if k not in _ANSWER_META and k != VERSION_KEY}
    if kind == "state_patch":
        if event.type == STATE_PATCH:
            return [dict(op) for op in StatePatch.of(event).ops]
        return [{"op": "add", "path": "/edited", "value": True}]
    if kind == "input":
        first = run.event(0) if len(run) else None
        return RunStarted.of(first).inputs if first is not None and first.type == RUN_STARTED else None
    if kind == "approval":
        found = _decision_of(run, seq)
        if found is None:
            return None
        decision = _decision_body(found[1])
        return {"decision": "approve" if found[1].type == APPROVAL_GRANTED else "deny",
                "by": decision.by or "", "note": decision.note or ""}
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
    key = (LLMResponse if kind == "llm_response" else ToolResult).of(event).key
    if _R.key in value and value[_R.key] != key:
        raise EditError("the \"key\" names the request this answers; leave it out")
    if kind == "tool_result" and not ({_T.result, _T.error} & set(value)):
        raise EditError("a tool result needs \"result\" (or \"error\")")
    return ForkPlan(kind=kind, seq=seq, at=quiet_cut(run, event), edits=[replace_response(seq, value)])


def quiet_cut(run: Run, answer: Event) -> int:
    """Where a fork that edits ``answer`` cuts: before the call and its span, at the latest
    event where no span is open that ran side by side with another (one of a fan-out's
    branches, tool calls run at once); ``-1``: keep nothing.

    Such branches are then forked with none of them begun in the prefix: each is re-run past
    the cut, its answers served by key, the edited one changed, whatever order the fork's
    branches start in. A cut among them (a branch's span opened, its call not) would have the
    fork tell the branches apart by the order they open, which another order breaks. Spans
    that ran alone (the run's, a step's, the graph's root span) stay in the prefix.

    >>> import agentlog as al, tempfile
    >>> run = al.examples.sample_store(copy_to=tempfile.mkdtemp() + "/s").run("sre-0001")
    >>> cpu = run.event(10)   # a tool.result, in its tool span s8 under the step's span s7
    >>> (cpu.type, cpu.span_id, quiet_cut(run, cpu))
    ('tool.result', 's8', 7)
    """
    asked = answer.caused_by if answer.caused_by is not None else answer.seq
    tree = _SpanTree(run)
    own = tree.index.get(answer.span_id or "")
    cut = asked - 1 if own is None else min(asked, int(tree.start[own])) - 1
    while cut >= 0:
        open_here = np.flatnonzero((tree.start <= cut) & (tree.end > cut))
        crowded = [int(s) for s in open_here if tree.side_by_side(int(s))]
        if not crowded:
            return cut
        cut = int(tree.start[crowded].min()) - 1
    return -1


class _SpanTree:
    """A run's spans as arrays: where each starts and ends (seq) and its place in the tree
    (``first``/``last``: a depth-first numbering, so a descendant's ``first`` is in its
    ancestor's ``[first, last)``)."""

    def __init__(self, run: Run) -> None:
        spans = run.spans()
        ids = [str(x) for x in spans["span_id"]]
        self.index = {span: i for i, span in enumerate(ids)}
        self.start = spans["start_seq"].to_numpy(dtype=np.int64)
        self.end = spans["end_seq"].fillna(len(run)).to_numpy(dtype=np.int64)
        children: dict[int, list[int]] = {}
        roots = []
        for i, parent in enumerate(spans["parent"]):
            above = self.index.get(parent) if isinstance(parent, str) else None
            if above is None or above == i:
                roots.append(i)
            else:
                children.setdefault(above, []).append(i)
        self.first = np.zeros(len(ids), dtype=np.int64)
        self.last = np.zeros(len(ids), dtype=np.int64)
        clock = 0
        for root in roots:
            stack = [(root, False)]
            while stack:
                node, done = stack.pop()
                if done:
                    self.last[node] = clock
                    continue
                self.first[node] = clock
                clock += 1
                stack.append((node, True))
                stack.extend((child, False) for child in children.get(node, ()))

    def side_by_side(self, i: int) -> bool:
        """Whether span ``i`` was open while a span neither above nor below it was."""
        overlapping = (self.start < self.end[i]) & (self.end > self.start[i])
        below = (self.first >= self.first[i]) & (self.first < self.last[i])
        above = (self.first[i] >= self.first) & (self.first[i] < self.last)
        return bool((overlapping & ~below & ~above).any())


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
            return f"{KINDS[kind]} needs {with_article(wanted)} event; seq {seq} is {with_article(event_type)}"
        return unservable(run, seq)
    elif kind == "state_patch" and seq >= len(run) - 1:
        return f"seq {seq} is the last event: a fork after it has nothing to re-run"
    elif kind == "approval":
        if _decision_of(run, seq) is None:
            return (f"seq {seq} is {with_article(event_type)}, not a decided approval "
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


def default_kind(run: Run, seq: int, current: str) -> str:
    """The edit kind to show at ``seq``: ``current`` if it applies there, else the kind the
    event's type suggests (an ``llm.response`` suggests ``llm_response``, ...) when that has a
    recorded value, else ``current``.

    >>> import agentlog as al, tempfile
    >>> run = al.examples.sample_store(copy_to=tempfile.mkdtemp() + "/s").run("refunds-0001")
    >>> default_kind(run, 80, "state_patch"), default_kind(run, 80, "llm_response")
    ('state_patch', 'approval')
    """
    natural = NATURAL.get(run.event(seq).type)
    if natural and recorded_value(run, seq, current) is None and recorded_value(run, seq, natural) is not None:
        return natural
    return current


@dataclass(frozen=True, slots=True)
class KeptEdit:
    """An edit a person prepared at one event: its kind and the editor's text."""

    kind: str
    text: str


class EditBook:
    """The edits prepared per event: moving the selection away and back finds the edit again.

    An edit is kept only when it differs from what the event starts with (its recorded
    value); :meth:`discard` is the only way one is dropped.

    >>> book = EditBook()
    >>> book.keep(80, "approval", '{"decision": "approve"}', recorded='{"decision": "deny"}')
    True
    >>> book.keep(12, "state_patch", "[]", recorded="[]")  # unchanged: nothing to keep
    False
    >>> book.get(80), 12 in book, len(book)
    (KeptEdit(kind='approval', text='{"decision": "approve"}'), False, 1)
    >>> book.discard(80).kind, book.get(80)
    ('approval', None)
    """

    def __init__(self) -> None:
        self._edits: dict[int, KeptEdit] = {}

    def keep(self, seq: int, kind: str, text: str, *, recorded: str) -> bool:
        """Keep ``text`` as the edit at ``seq`` if it differs from ``recorded``; returns whether
        it is kept (an edit made equal to the recorded value again is dropped)."""
        if text == recorded:
            self._edits.pop(seq, None)
            return False
        self._edits[seq] = KeptEdit(kind, text)
        return True

    def get(self, seq: int) -> KeptEdit | None:
        """The edit kept at ``seq``, or ``None``."""
        return self._edits.get(seq)

    def discard(self, seq: int) -> KeptEdit | None:
        """Drop the edit kept at ``seq``; returns it (``None`` if there was none)."""
        return self._edits.pop(seq, None)

    def __contains__(self, seq: object) -> bool:
        return seq in self._edits

    def __len__(self) -> int:
        return len(self._edits)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._edits))

    def __repr__(self) -> str:
        return f"<EditBook {len(self)} edit{'s' if len(self) != 1 else ''} at {sorted(self._edits)}>"
