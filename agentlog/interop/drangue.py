"""drangue runs into agentlog: every event kept, its types mapped to agentlog's where they mean
the same.

Reads drangue's durable log: the SQLite file of ``SQLiteStore(path)`` (table ``events(run_id,
seq, type, payload, ts, duration_ms)``; one file holds many runs). drangue's in-memory store
leaves nothing on disk; ``model_delta`` events are never stored, so they are never seen.

====================================  =============================================================
drangue                               agentlog
====================================  =============================================================
``seq``                               ``seq`` (drangue's seqs are dense from 0; the original is in
                                      ``origin.seq``)
``ts`` (float seconds or null)        ``ts`` in µs; a null ``ts`` (drangue stamps only executed
                                      steps) takes the previous event's time
``duration_ms``                       the ``duration_ms`` column of model and tool steps
``run_started``                       ``run.started`` {inputs: input}
``model_decision``                    ``llm.response`` {message: {role assistant, content: text,
                                      tool_calls}, finish_reason: stop_reason, usage}; columns: model,
                                      tokens (drangue's usage is Anthropic-shaped: cache reads and
                                      writes are added to ``input_tokens``), cost priced from the
                                      catalog (drangue records none)
``tool_result``                       ``tool.result`` {name, result: content, key}; ``caused_by``
                                      = the ``model_decision`` that asked for the call
``approval_requested``                ``approval.requested`` {action: tool, reason: reasoning}
``approval_granted`` / ``_denied``    ``approval.granted`` / ``approval.denied`` {request: seq of
                                      the request for that call, note: reason}
``run_finished`` / ``run_failed``     ``run.finished`` {result: output} / ``run.failed`` {error}
``user_message``, ``step_started``,   ``drangue.<type>`` (fold to nothing, stay in every table)
``memory_recalled``,
``schema_feedback``, others
====================================  =============================================================

Every event is a typed body of agentlog's vocabulary (:mod:`agentlog.events`), and drangue's
own event is kept whole under ``origin`` (:class:`~agentlog.events.Origin`: system
``drangue``, type, payload, seq, ts, detail {duration_ms}); ``agentlog.events.origin_of(event)``
reads it back. A file with several runs imports them all (``run=`` picks one), each into the
run whose id the drangue run determines, so an import repeated adds nothing. What does not map
cleanly: drangue has no actor, no ``caused_by`` and
no model request event, so ``actor`` is empty, causes are rebuilt from the ``call_id`` links,
and there is no ``llm.request`` (the conversation in agentlog's state holds the assistant
turns only); drangue's ``run_failed`` is retried on resume, while agentlog's ``run.failed``
reads as final until a later ``run.finished``; a decision with no pending request stays
unmapped.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..canonical import canonical_json
from ..events import (
    TOKEN_FIELDS,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    Body,
    Event,
    LLMResponse,
    Origin,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolResult,
    Usage,
    with_origin,
)
from ._common import (
    SOURCE_TAG,
    SQLITE_ERRORS,
    TS_MAX,
    TS_MIN,
    chosen,
    finite,
    import_run_id,
    loads,
    store_of,
    write_or_extend,
)
from .errors import InteropFormatError

if TYPE_CHECKING:
    from ..store import Run, Store

__all__ = ["SourceEvent", "drangue_runs", "import_drangue", "map_events", "read_drangue"]


class SourceEvent:
    """One drangue event as stored: ``seq``, ``type``, ``payload``, ``ts``, ``duration_ms``."""

    __slots__ = ("duration_ms", "payload", "seq", "ts", "type")

    def __init__(self, seq: int, type: str, payload: Mapping[str, Any], ts: float | None,
                 duration_ms: float | None) -> None:
        self.seq, self.type, self.payload, self.ts, self.duration_ms = seq, type, payload, ts, duration_ms

    def __repr__(self) -> str:
        return f"SourceEvent({self.seq}, {self.type!r})"


def read_drangue(path: str | os.PathLike[str]) -> dict[str, list[SourceEvent]]:
    """The runs of a drangue SQLite store: run id → events in seq order.

    Raises:
        InteropFormatError: not a drangue store, or a payload that is not JSON (names the run
            and seq).
    """
    where = os.fspath(path)
    if not Path(path).is_file():
        raise FileNotFoundError(where)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except SQLITE_ERRORS as exc:
        raise InteropFormatError(where, None, f"not an SQLite file ({exc})") from None
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
        wanted = {"run_id", "seq", "type", "payload", "ts", "duration_ms"}
        if not wanted <= columns:
            raise InteropFormatError(where, None, "no drangue events table (run_id, seq, type, payload, "
                                                  "ts, duration_ms); not a drangue SQLiteStore file")
        rows = conn.execute("SELECT run_id, seq, type, payload, ts, duration_ms FROM events "
                            "ORDER BY run_id, seq").fetchall()
    except SQLITE_ERRORS as exc:
        raise InteropFormatError(where, None, f"cannot read the SQLite file ({exc})") from None
    finally:
        conn.close()
    runs: dict[str, list[SourceEvent]] = {}
    for run_id, seq, type_, payload, ts, duration in rows:
        at = f"run {run_id!r:.40} seq {seq!r:.20}"
        if type(seq) is not int or not isinstance(type_, str) or not isinstance(run_id, str):
            raise InteropFormatError(where, None, f"{at}: run_id and type must be text, seq an integer")
        if not isinstance(payload, (str, type(None))):
            raise InteropFormatError(where, None, f"{at}: payload must be JSON text, got "
                                                  f"{type(payload).__name__}", field="payload")
        for name, value in (("ts", ts), ("duration_ms", duration)):
            if value is not None and (type(value) not in (int, float) or not math.isfinite(value)):
                raise InteropFormatError(where, None, f"{at}: {name} must be a number or null, got "
                                                      f"{value!r:.40}", field=name)
        try:
            data = loads(payload) if payload else {}
        except ValueError as exc:
            raise InteropFormatError(where, None, f"run {run_id} seq {seq}: payload is not JSON ({exc})",
                                     field="payload") from None
        if not isinstance(data, Mapping):
            raise InteropFormatError(where, None, f"run {run_id} seq {seq}: payload is not an object",
                                     field="payload")
        runs.setdefault(run_id, []).append(SourceEvent(seq, type_, data, ts, duration))
    return runs


def drangue_runs(path: str | os.PathLike[str]) -> list[str]:
    """The run ids in a drangue SQLite store."""
    return sorted(read_drangue(path))


def _us(ts: Any) -> int | None:
    """Seconds since the epoch as µs; ``None`` if not a time a run can hold (years 1..9999)."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts):
        us = round(ts * 1_000_000)
        return us if TS_MIN <= us <= TS_MAX else None
    return None


def _message(p: Mapping[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": p.get("text")}
    calls = [{"id": c.get("id"), "type": "function",
              "function": {"name": c.get("name"), "arguments": finite(c.get("arguments"))}}
             for c in _calls(p)]
    if calls:
        message["tool_calls"] = calls
    return message


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _calls(p: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A decision's tool calls that are objects (drangue writes a list of them)."""
    calls = p.get("tool_calls")
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


class _Mapper:
    """Maps one run's events in order, keeping the links drangue makes through ``call_id``."""

    def __init__(self) -> None:
        self.decision_of: dict[str, int] = {}  # call_id -> seq of the model_decision that asked
        self.args_of: dict[str, Any] = {}  # call_id -> arguments
        self.requests: dict[str, int] = {}  # call_id -> seq of a pending approval request

    def one(self, seq: int, e: SourceEvent, ts: int) -> Event:
        p = e.payload
        call = str(p.get("call_id")) if p.get("call_id") is not None else None
        cause = self.decision_of.get(call) if call is not None else None
        body: Body | None = None
        if e.type == "run_started":
            body = RunStarted(inputs=finite(p.get("input")))
        elif e.type == "run_finished":
            body = RunFinished(result=finite(p.get("output")))
        elif e.type == "run_failed":
            body = RunFailed(error=str(p.get("error") or "error"))
        elif e.type == "model_decision":
            body = self._decision(seq, e, ts)
        elif e.type == "tool_result":
            body = self._result(p, call, e.duration_ms)
        elif e.type == "approval_requested" and call is not None:
            body = ApprovalRequested(action=p.get("tool"), reason=str(p.get("reasoning") or p.get("text") or ""))
            self.requests[call] = seq
        elif e.type in ("approval_granted", "approval_denied") and call in self.requests:
            request = self.requests.pop(call)
            decided = ApprovalGranted if e.type == "approval_granted" else ApprovalDenied
            body, cause = decided(request=request, note=_text(p.get("reason"))), request
        detail = {"duration_ms": e.duration_ms} if e.duration_ms is not None else None
        origin = Origin(system="drangue", type=e.type, payload=finite(p), seq=e.seq, ts=e.ts, detail=detail)
        kind = body.TYPE if body is not None else f"drangue.{e.type}"
        return Event(seq=seq, type=kind, payload=with_origin(body, origin),
                     caused_by=cause if cause is not None and cause < seq else None, ts=ts,
                     **(body.columns() if body is not None else {}))

    def _result(self, p: Mapping[str, Any], call: str | None, duration: float | None) -> ToolResult:
        from ..keys import tool_key

        name = str(p.get("name") or "")
        args = self.args_of.get(call or "")
        return ToolResult(key=tool_key(name, args if isinstance(args, Mapping) else {}), name=name,
                          result=finite(p.get("content")), duration_ms=duration)

    def _decision(self, seq: int, e: SourceEvent, ts: int) -> LLMResponse:
        from .. import pricing
        from ..capture.providers import normalize_usage

        p = e.payload
        for c in _calls(p):
            if isinstance(c.get("id"), (str, int)):
                self.decision_of[str(c["id"])] = seq
                self.args_of[str(c["id"])] = finite(c.get("arguments"))
        model = p.get("model") if isinstance(p.get("model"), str) else None
        raw = p.get("usage")
        found = normalize_usage(raw, provider="anthropic") if isinstance(raw, Mapping) and raw else None
        cost = None
        if found is not None and model:
            cost = pricing.cost(model, found, provider=None, when=datetime.fromtimestamp(ts / 1e6, tz=UTC))
        usage = Usage(**{name: getattr(found, name) for name in TOKEN_FIELDS}) if found is not None else Usage()
        # drangue records no request: the key names this decision (stable for a re-import).
        key = hashlib.sha256(canonical_json(finite(p)).encode()).hexdigest()
        return LLMResponse(key=key, model=model, message=_message(p), finish_reason=_text(p.get("stop_reason")),
                           usage=usage, cost_source=cost.source if cost is not None else "unknown",
                           cost_usd=cost.usd if cost is not None else None, duration_ms=e.duration_ms)


def map_events(events: list[SourceEvent]) -> list[Event]:
    """The agentlog events of a drangue run (pure but for the price catalog)."""
    known = [t for t in (_us(e.ts) for e in events) if t is not None]
    ts = known[0] if known else 0
    mapper = _Mapper()
    out = []
    for seq, e in enumerate(events):
        ts = _us(e.ts) or ts
        out.append(mapper.one(seq, e, ts))
    return out


def _label(run: str, events: list[SourceEvent]) -> str:
    first = events[0].payload.get("input") if events else None
    if isinstance(first, str):
        return f"drangue {run[:12]}: {json.dumps(first)[1:-1][:60]}"
    return f"drangue {run}"


def import_drangue(path: str | os.PathLike[str], store: Store | str | os.PathLike[str], *,
                   run: str | None = None, run_id: str | None = None, name: str | None = None) -> list[Run]:
    """Import the runs of a drangue SQLite store (or one of them), keeping every event.

    Idempotent: each drangue run goes to the run :func:`~agentlog.interop._common.import_run_id`
    names (the same drangue run always gets the same id), and importing it again adds only
    the events it did not have (none, for a run that did not go on since).

    Args:
        path: the drangue ``SQLiteStore`` file.
        store: the agentlog store (or its path) to import into.
        run: the drangue run id; default: every run in the file.
        run_id: the new run's id (only when one run is imported); default: derived from the
            drangue run.
        name: the new runs' name; default: ``drangue <run>: <input>`` (input cut to 60
            characters).

    Returns:
        The runs, in the order of the drangue run ids; their tags say where they came from
        (``source``, ``source_run``, ``source_file``). They cannot be replayed or forked
        (:attr:`~agentlog.Run.replayable`).

    Raises:
        InteropFormatError: not a drangue store; ``run`` not in it; ``run_id`` given for
            several runs.
        RunExistsError: ``run_id`` holds another run.
        UsageError: a step's usage cannot be normalised.
    """
    where = os.fspath(path)
    runs = read_drangue(path)
    picked = chosen(runs, run, where, "drangue", run_id)
    out = []
    target = store_of(store)
    for source in picked:
        events = runs[source]
        first = (events[0].type, events[0].payload, events[0].ts) if events else None
        tags = {SOURCE_TAG: "drangue", "source_run": source, "source_file": Path(where).name}
        out.append(write_or_extend(target, map_events(events), run_id=run_id or import_run_id("drangue", source, first),
                                   name=name or _label(source, events), tags=tags,
                                   where=f"{where} (drangue run {source})"))
    return out
