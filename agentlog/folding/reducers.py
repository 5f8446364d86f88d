"""Reducers: the pure functions that fold events into state, and the default projection.

A reducer is ``reducer(state, event) -> state``: no clock, no randomness, no I/O, no global
mutable state (:func:`~agentlog.folding.determinism.check_determinism` catches the ones that
cheat). A :class:`Reducers` set maps event types to reducers. ``@reducer("my.type")`` adds to
the default set; a run can also carry its own set (``Reducers.standard().with_reducer(...)``),
so no result depends on what happened to be imported.

Registration rules:

- several reducers for one type run in registration order, each on the state the previous
  one returned;
- registering a function with the same qualified name (``module.qualname``) for the same
  type again replaces it in place, with a :class:`ReducerRegistrationWarning`: re-running a
  notebook cell that defines a reducer must not make it run twice;
- an event type with no reducer leaves the state unchanged (the same object).

**The default projection** (:meth:`Reducers.standard`) fills these root keys. The payload
shapes below are the contract between the recorder, which writes them, and the fold:

``vars``
    ``state.patch`` ``{"ops": [<RFC 6902 op>, ...]}``: the ops are applied to the ``vars``
    subtree, so ``/plan`` means ``state["vars"]["plan"]``.
``messages``
    ``llm.request`` ``{"key", "model", "messages": [{"role", "content", ...}], "params",
    "tools"}`` sets the conversation to ``messages``; when that list extends the current one,
    only the new tail is appended, so the vector is shared. ``llm.response`` ``{"key",
    "model", "message": {"role": "assistant", "content", "tool_calls"?}, "content",
    "usage", "cache_hit"}`` appends ``message`` (or ``{"role": "assistant", "content":
    content}`` when there is no ``message``).
``objects`` / ``relations``
    ``object.created`` ``{"id", "kind", "data": {...}}`` sets ``objects[id] = {"id", "kind",
    "data", "provenance": {"actor", "event": seq, "caused_by"}}`` (an id that exists is an
    error). ``object.updated`` ``{"id", "data": {...}}`` merges ``data`` into the object's
    (shallow: top-level keys replaced) and sets ``provenance`` to this event, keeping the
    first one as ``provenance.created``; an unknown id is an error. ``relation.created``
    ``{"id"?, "kind", "source", "target", "data"?}`` sets ``relations[id or f"r{seq}"] =
    {"id", "kind", "source", "target", "data", "provenance"}``.
``usage``
    running totals from the typed usage columns of the event (never the payload):
    ``llm.response`` adds ``input_tokens``, ``output_tokens``, ``cached_tokens``,
    ``cost_usd`` (a ``None`` cost adds nothing and counts in ``cost_unknown_calls``),
    ``llm_calls`` + 1, ``llm_duration_ms``, and the same per model under
    ``by_model[model] = {input_tokens, output_tokens, cached_tokens, cost_usd,
    cost_unknown_calls, calls}`` (model: the ``model`` column, else the payload's, else
    ``"unknown"``). ``tool.result`` adds ``tool_calls`` + 1, ``tool_duration_ms`` and a
    known ``cost_usd``.
``approvals``
    ``approval.requested`` ``{"action", "reason", ...}`` sets ``approvals.pending[str(seq)] =
    {...payload, "seq": seq}``. ``approval.granted`` / ``approval.denied`` ``{"request":
    <request seq>, "by", "note"}`` moves it to ``approvals.decided[str(request)]`` with
    ``decision`` (``"granted"`` / ``"denied"``), ``by``, ``note`` and ``decision_seq``; a
    request that is not pending is an error.
``status``
    ``""`` at first; ``run.started`` → ``"running"``, ``approval.requested`` →
    ``"waiting"``, a decision → ``"running"``, ``budget.exceeded`` → ``"budget_exceeded"``,
    ``run.finished`` → ``"finished"``, ``run.failed`` → ``"failed"``.

Every default reducer leaves the subtrees it does not change as the same objects.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, TypeAlias

from ..events import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    APPROVAL_REQUESTED,
    BUDGET_EXCEEDED,
    LLM_REQUEST,
    LLM_RESPONSE,
    OBJECT_CREATED,
    OBJECT_UPDATED,
    RELATION_CREATED,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    STATE_PATCH,
    TOOL_RESULT,
    ApprovalGranted,
    Event,
    LLMRequest,
    LLMResponse,
    ObjectCreated,
    RelationCreated,
    StatePatch,
)
from .patch import apply_patch
from .persistent import PMap, pmap
from .values import EMPTY_MAP, EMPTY_VECTOR, State, freeze, same_value

__all__ = ["Reducer", "ReducerRegistrationWarning", "Reducers", "reducer", "reducer_name"]

# The payload keys the hot reducers read, from the vocabulary (a typo fails at import).
_OPS, _MESSAGES = StatePatch.K.ops, LLMRequest.K.messages
_ANSWER, _MODEL = LLMResponse.K.message, LLMResponse.K.model
_ID, _KIND, _DATA = ObjectCreated.K.id, ObjectCreated.K.kind, ObjectCreated.K.data
_REL = RelationCreated.K
_REQUEST, _BY, _NOTE = ApprovalGranted.K.request, ApprovalGranted.K.by, ApprovalGranted.K.note

Reducer: TypeAlias = Callable[[State, Event], State]
"""``reducer(state, event) -> state``, pure."""


class ReducerRegistrationWarning(UserWarning):
    """A reducer with the same qualified name was registered again for a type; it replaces
    the earlier one."""


def reducer_name(fn: Callable[..., Any]) -> str:
    """The qualified name of a reducer, ``module.qualname``, as errors and reports show it.

    >>> reducer_name(patch_vars)
    'agentlog.folding.reducers.patch_vars'
    """
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', None) or repr(fn)}"


class Reducers(Mapping[str, tuple[Reducer, ...]]):
    """An immutable set of reducers by event type, and the initial state they fold from.

    Build one from a mapping, on top of another set, and grow it with :meth:`with_reducer`;
    every method returns a new set.

    Args:
        reducers: ``{type: reducer or [reducers]}``, added in order after ``base``'s.
        base: the set to start from (its reducers and initial state); none by default.
        initial: the initial state; ``base``'s, or an empty map, by default.

    >>> r = Reducers.standard()
    >>> r["state.patch"] == (patch_vars,)
    True
    >>> mine = r.with_reducer("note", lambda state, event: state.set("noted", True))
    >>> "note" in mine, "note" in r
    (True, False)
    >>> sorted(r.initial_state())
    ['approvals', 'messages', 'objects', 'relations', 'status', 'usage', 'vars']
    """

    __slots__ = ("_fp", "_initial", "_table")

    def __init__(self, reducers: Mapping[str, Reducer | Iterable[Reducer]] | None = None, *,
                 base: Reducers | None = None, initial: Mapping[str, Any] | None = None) -> None:
        self._table: dict[str, tuple[Reducer, ...]] = dict(base._table) if base is not None else {}
        self._fp: str | None = None
        if initial is not None:
            frozen = freeze(initial)
            if not isinstance(frozen, PMap):
                raise TypeError(f"the initial state is a mapping, got {type(initial).__name__}")
            self._initial: State = frozen
        else:
            self._initial = base._initial if base is not None else EMPTY_MAP
        for type_, fns in (reducers or {}).items():
            for fn in ([fns] if callable(fns) else fns):
                self._table[type_] = _added(self._table.get(type_, ()), type_, fn, stacklevel=3)

    @classmethod
    def standard(cls) -> Reducers:
        """The built-in projection only (see the module docstring), whatever was imported."""
        return _STANDARD

    @classmethod
    def default(cls) -> Reducers:
        """The default set: the standard projection plus everything ``@reducer`` registered
        so far. ``fold(events)`` uses it when given no reducers."""
        return _default

    def with_reducer(self, type: str, fn: Reducer) -> Reducers:
        """A new set with ``fn`` run after the type's current reducers (or replacing one
        with the same qualified name, with a :class:`ReducerRegistrationWarning`)."""
        return self._with(type, fn, stacklevel=4)

    def _with(self, type: str, fn: Reducer, stacklevel: int) -> Reducers:
        new = Reducers(base=self)
        new._table[type] = _added(self._table.get(type, ()), type, fn, stacklevel)
        return new

    def without(self, type: str, fn: Reducer | None = None) -> Reducers:
        """A new set without ``fn`` for ``type`` (without all of the type's reducers if
        ``fn`` is None).

        Raises:
            KeyError: ``type`` has no reducers, or not ``fn``; the message lists what it has.
        """
        current = self._table.get(type)
        if current is None:
            raise KeyError(f"no reducers for {type!r}; types with reducers: {', '.join(sorted(self))}")
        new = Reducers(base=self)
        if fn is None:
            del new._table[type]
            return new
        name = reducer_name(fn)
        kept = tuple(f for f in current if reducer_name(f) != name)
        if len(kept) == len(current):
            raise KeyError(f"{name} is not a reducer for {type!r}; it has "
                           f"{', '.join(reducer_name(f) for f in current)}")
        if kept:
            new._table[type] = kept
        else:
            del new._table[type]
        return new

    def with_initial(self, initial: Mapping[str, Any]) -> Reducers:
        """A new set with the same reducers and another initial state."""
        return Reducers(base=self, initial=initial)

    def initial_state(self) -> State:
        """The state before the first event."""
        return self._initial

    def fingerprint(self) -> str:
        """A hex digest of what this set computes: each type's reducers (qualified names and
        compiled code, constants and the values they close over) and the initial state.

        Checkpoints name it, so changing a reducer makes the checkpoints folded with it
        stale. It sees a reducer's own code, not the code of functions it calls: after
        changing such a helper, rebuild the checkpoints (``agentlog checkpoint --rebuild``).

        >>> Reducers.standard().fingerprint() == Reducers.standard().fingerprint()
        True
        >>> mine = Reducers.standard().with_reducer("note", lambda state, event: state)
        >>> mine.fingerprint() != Reducers.standard().fingerprint()
        True
        """
        if self._fp is not None:
            return self._fp
        from .encode import digest
        h = hashlib.sha256(f"agentlog reducers {FOLD_SEMANTICS}\n".encode())
        for type_ in sorted(self._table):
            h.update(f"type {type_}\n".encode())
            for fn in self._table[type_]:
                h.update(f"{reducer_name(fn)}\n".encode())
                _hash_code(h, fn)
        h.update(digest(self._initial))
        self._fp = h.hexdigest()
        return self._fp

    def names(self, type: str) -> tuple[str, ...]:
        """The qualified names of the reducers for ``type``, in the order they run."""
        return tuple(reducer_name(fn) for fn in self._table.get(type, ()))

    def __getitem__(self, type: str) -> tuple[Reducer, ...]:
        return self._table[type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        n = sum(len(fns) for fns in self._table.values())
        return f"<Reducers {n} reducers for {len(self._table)} event types>"


FOLD_SEMANTICS: Final = 1
"""Raise when the standard reducers or the patch code start computing something else: every
checkpoint folded before becomes stale (it is part of :meth:`Reducers.fingerprint`)."""


def _hash_code(h: Any, fn: Any, depth: int = 0) -> None:
    """Feed a callable's code into ``h``: bytecode, names, constants (nested code too) and the
    values its closure holds (their repr, or their type for anything without a stable one)."""
    if depth > 4:
        return
    target = getattr(fn, "__func__", fn)
    wrapped = getattr(target, "func", None)  # functools.partial
    if wrapped is not None and not hasattr(target, "__code__"):
        _hash_code(h, wrapped, depth + 1)
        h.update(repr((getattr(target, "args", ()), sorted(getattr(target, "keywords", {}).items()))).encode())
        return
    code = getattr(target, "__code__", None)
    if code is None:
        call = type(target).__dict__.get("__call__")  # a callable object: its class's method
        code = getattr(call, "__code__", None)
    if code is None:
        h.update(repr(target).encode())
        return
    _hash_codeobj(h, code)
    for cell in getattr(target, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(value):
            _hash_code(h, value, depth + 1)
        elif isinstance(value, (str, int, float, bool, type(None), tuple, frozenset)):
            h.update(repr(value).encode())
        else:
            h.update(type(value).__qualname__.encode())


def _hash_codeobj(h: Any, code: Any) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _hash_codeobj(h, const)
        else:
            h.update(repr(const).encode())


def _added(current: tuple[Reducer, ...], type: str, fn: Reducer,
           stacklevel: int) -> tuple[Reducer, ...]:
    if not callable(fn):
        raise TypeError(f"a reducer for {type!r} must be callable, got {fn!r}")
    name = reducer_name(fn)
    for i, old in enumerate(current):
        if reducer_name(old) == name:
            warnings.warn(f"reducer {name} is already registered for {type!r}; "
                          "the new definition replaces it (and keeps its place)",
                          ReducerRegistrationWarning, stacklevel=stacklevel)
            return current[:i] + (fn,) + current[i + 1:]
    return current + (fn,)


def reducer(*types: str) -> Callable[[Reducer], Reducer]:
    """Register the decorated function as a reducer for ``types`` in the default set.

    Only :meth:`Reducers.default` (and so ``fold`` without explicit reducers) sees it; a
    run that carries its own :class:`Reducers` is unaffected.

    Args:
        types: one or more event types.

    Returns:
        A decorator that registers the function and returns it unchanged.

    >>> @reducer("doc.example")
    ... def count_examples(state, event):
    ...     return state.set("examples", state.get("examples", 0) + 1)
    >>> Reducers.default().names("doc.example")
    ('agentlog.folding.reducers.count_examples',)
    >>> Reducers.standard().names("doc.example")
    ()
    """
    if not types or not all(isinstance(t, str) and t for t in types):
        raise TypeError("usage: @reducer('event.type', ...) with one or more event type names")

    def register(fn: Reducer) -> Reducer:
        global _default
        new = _default
        for type_ in types:
            new = new._with(type_, fn, stacklevel=4)
        _default = new
        return fn

    return register


# --- the default projection -------------------------------------------------------------------

_ZERO_USAGE: Final = pmap({
    "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cost_usd": 0.0,
    "cost_unknown_calls": 0, "llm_calls": 0, "tool_calls": 0, "llm_duration_ms": 0.0,
    "tool_duration_ms": 0.0, "by_model": EMPTY_MAP,
})
_ZERO_MODEL: Final = pmap({"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0,
                           "cost_usd": 0.0, "cost_unknown_calls": 0, "calls": 0})
_NO_APPROVALS: Final = pmap({"pending": EMPTY_MAP, "decided": EMPTY_MAP})

INITIAL: Final[State] = pmap({
    "vars": EMPTY_MAP, "messages": EMPTY_VECTOR, "objects": EMPTY_MAP, "relations": EMPTY_MAP,
    "usage": _ZERO_USAGE, "approvals": _NO_APPROVALS, "status": "",
})
"""The initial state of the standard projection."""


def patch_vars(state: State, event: Event) -> State:
    """``state.patch``: apply ``payload["ops"]`` to ``state["vars"]``."""
    before = state.get("vars", EMPTY_MAP)
    after = apply_patch(before, event.payload[_OPS])
    return state if after is before else state.set("vars", after)


def set_messages(state: State, event: Event) -> State:
    """``llm.request``: the conversation becomes the request's messages (tail appended when
    it extends the current one)."""
    new = event.payload.get(_MESSAGES)
    if new is None:
        return state
    current = state.get("messages", EMPTY_VECTOR)
    n = len(current)
    if len(new) >= n and all(same_value(a, b) for a, b in zip(current, new)):
        if len(new) == n:
            return state
        return state.set("messages", current.extend(freeze(m) for m in new[n:]))
    return state.set("messages", freeze(new))


def append_response(state: State, event: Event) -> State:
    """``llm.response``: append the assistant message."""
    message = event.payload.get(_ANSWER)
    if message is None:  # an imported answer that carries only its text, beside the fields
        message = {"role": "assistant", "content": LLMResponse.of(event).extra.get("content")}
    return state.set("messages", state.get("messages", EMPTY_VECTOR).append(freeze(message)))


def _provenance(event: Event) -> PMap[str, Any]:
    return pmap({"actor": event.actor, "event": event.seq, "caused_by": event.caused_by})


def _set_key(mapping: PMap[str, Any], key: str, value: Any) -> PMap[str, Any]:
    return mapping.set(key, value)


def _object_id(payload: Mapping[str, Any], what: str) -> str:
    key = payload[_ID]
    if type(key) is not str:
        raise TypeError(f"{what} id must be a string, got {type(key).__name__} {key!r}")
    return key


def create_object(state: State, event: Event) -> State:
    """``object.created``: add the object with its provenance."""
    payload = event.payload
    key = _object_id(payload, "an object")
    objects = state.get("objects", EMPTY_MAP)
    if key in objects:
        first = objects[key]["provenance"]
        first = first.get("created", first)
        raise ValueError(f"object {key!r} already exists (created at seq {first['event']}); "
                         "change it with object.updated")
    obj = pmap({"id": key, "kind": payload.get(_KIND), "data": freeze(payload.get(_DATA) or {}),
                "provenance": _provenance(event)})
    return state.set("objects", _set_key(objects, key, obj))


def update_object(state: State, event: Event) -> State:
    """``object.updated``: merge ``data`` into the object, provenance to this event."""
    payload = event.payload
    key = _object_id(payload, "an object")
    objects = state.get("objects", EMPTY_MAP)
    obj = objects.get(key)
    if obj is None:
        raise KeyError(f"object.updated names object {key!r}, which does not exist; "
                       "create it with object.created first")
    before = obj["provenance"]
    created = before.get("created", before)
    ev = obj.evolver()
    ev["data"] = obj["data"].update(freeze(payload.get(_DATA) or {}))
    ev["provenance"] = _provenance(event).set("created", created)
    return state.set("objects", _set_key(objects, key, ev.persistent()))


def create_relation(state: State, event: Event) -> State:
    """``relation.created``: add the relation (id ``r<seq>`` when it has none)."""
    payload = event.payload
    key = payload.get(_REL.id) or f"r{event.seq}"
    if type(key) is not str:
        raise TypeError(f"a relation id must be a string, got {type(key).__name__} {key!r}")
    rel = pmap({"id": key, "kind": payload.get(_REL.kind), "source": payload.get(_REL.source),
                "target": payload.get(_REL.target), "data": freeze(payload.get(_REL.data) or {}),
                "provenance": _provenance(event)})
    return state.set("relations", _set_key(state.get("relations", EMPTY_MAP), key, rel))


def count_llm_usage(state: State, event: Event) -> State:
    """``llm.response``: add the usage columns to the running totals."""
    usage = state.get("usage", _ZERO_USAGE)
    model = event.model or event.payload.get(_MODEL) or "unknown"
    by_model = usage.get("by_model", EMPTY_MAP)
    per = by_model.get(model, _ZERO_MODEL)
    total, mine = usage.evolver(), per.evolver()
    for name in ("input_tokens", "output_tokens", "cached_tokens"):
        value = getattr(event, name)
        if value:
            total[name] = usage.get(name, 0) + value
            mine[name] = per.get(name, 0) + value
    cost = event.cost_usd
    if cost is None:
        total["cost_unknown_calls"] = usage.get("cost_unknown_calls", 0) + 1
        mine["cost_unknown_calls"] = per.get("cost_unknown_calls", 0) + 1
    else:
        total["cost_usd"] = usage.get("cost_usd", 0.0) + cost
        mine["cost_usd"] = per.get("cost_usd", 0.0) + cost
    if event.duration_ms is not None:
        total["llm_duration_ms"] = usage.get("llm_duration_ms", 0.0) + event.duration_ms
    total["llm_calls"] = usage.get("llm_calls", 0) + 1
    mine["calls"] = per.get("calls", 0) + 1
    total["by_model"] = by_model.set(model, mine.persistent())
    return state.set("usage", total.persistent())


def count_tool_usage(state: State, event: Event) -> State:
    """``tool.result``: count the call, add its duration and a known cost."""
    usage = state.get("usage", _ZERO_USAGE)
    total = usage.evolver()
    total["tool_calls"] = usage.get("tool_calls", 0) + 1
    if event.duration_ms is not None:
        total["tool_duration_ms"] = usage.get("tool_duration_ms", 0.0) + event.duration_ms
    if event.cost_usd is not None:
        total["cost_usd"] = usage.get("cost_usd", 0.0) + event.cost_usd
    return state.set("usage", total.persistent())


def request_approval(state: State, event: Event) -> State:
    """``approval.requested``: add a pending request under ``str(seq)``."""
    approvals = state.get("approvals", _NO_APPROVALS)
    entry = freeze(dict(event.payload)).set("seq", event.seq)
    pending = approvals.get("pending", EMPTY_MAP).set(str(event.seq), entry)
    return state.set("approvals", approvals.set("pending", pending))


def decide_approval(state: State, event: Event) -> State:
    """``approval.granted`` / ``approval.denied``: move the request to ``decided``."""
    payload = event.payload
    request = payload[_REQUEST]
    key = str(request)
    approvals = state.get("approvals", _NO_APPROVALS)
    pending = approvals.get("pending", EMPTY_MAP)
    entry = pending.get(key)
    if entry is None:
        waiting = ", ".join(sorted(pending, key=_seq_order)) or "none"
        raise KeyError(f"{event.type} names request seq {request}, which is not pending "
                       f"(pending: {waiting})")
    decided = entry.update({
        "decision": "granted" if event.type == APPROVAL_GRANTED else "denied",
        "by": freeze(payload.get(_BY)), "note": freeze(payload.get(_NOTE)),
        "decision_seq": event.seq,
    })
    ev = approvals.evolver()
    ev["pending"] = pending.remove(key)
    ev["decided"] = approvals.get("decided", EMPTY_MAP).set(key, decided)
    return state.set("approvals", ev.persistent())


def _seq_order(key: str) -> tuple[int, str]:
    return (int(key), key) if key.isdigit() else (-1, key)


_STATUS: Final = {
    RUN_STARTED: "running", APPROVAL_REQUESTED: "waiting", APPROVAL_GRANTED: "running",
    APPROVAL_DENIED: "running", BUDGET_EXCEEDED: "budget_exceeded", RUN_FINISHED: "finished",
    RUN_FAILED: "failed",
}


def track_status(state: State, event: Event) -> State:
    """Run lifecycle events set ``status``."""
    status = _STATUS[event.type]
    return state if state.get("status") == status else state.set("status", status)


_STANDARD: Final = Reducers({
    STATE_PATCH: patch_vars,
    LLM_REQUEST: set_messages,
    LLM_RESPONSE: [append_response, count_llm_usage],
    TOOL_RESULT: count_tool_usage,
    OBJECT_CREATED: create_object,
    OBJECT_UPDATED: update_object,
    RELATION_CREATED: create_relation,
    APPROVAL_REQUESTED: [request_approval, track_status],
    APPROVAL_GRANTED: [decide_approval, track_status],
    APPROVAL_DENIED: [decide_approval, track_status],
    RUN_STARTED: track_status,
    RUN_FINISHED: track_status,
    RUN_FAILED: track_status,
    BUDGET_EXCEEDED: track_status,
}, initial=INITIAL)

_default: Reducers = _STANDARD
