"""drangue runs into agentlog: every event kept, its types mapped to agentlog's where they mean
the same.

Reads drangue's durable log: the SQLite file of ``SQLiteStore(path)`` (table ``events(run_id,
seq, type, payload, ts, duration_ms)``; one file holds many runs). drangue's in-memory store
leaves nothing on disk; ``model_delta`` events are never stored, so they are never seen.

====================================  =============================================================
drangue                               agentlog
====================================  =============================================================
``seq``                               ``seq`` (drangue's seqs are dense from 0; the original is in
                                      ``origin``)
``ts`` (float seconds or null)        ``ts`` in µs; a null ``ts`` (drangue stamps only executed
                                      steps) takes the previous event's time
``duration_ms``                       the ``duration_ms`` column of model and tool steps
``run_started``                       ``run.started`` {input, config}
``model_decision``                    ``llm.response`` {message: {role assistant, content: text,
                                      tool_calls}, finish_reason: stop_reason}; columns: model,
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

Every payload keeps drangue's keys as they were (``usage`` stays drangue's own; the normalised
counts are in the columns), plus the added keys, ``source_type`` and ``origin`` {system, seq,
ts, duration_ms, added}. What does not map cleanly: drangue has no actor, no ``caused_by`` and
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
from typing import TYPE_CHECKING, Any, Final

from ..canonical import canonical_json
from ..events import (
    APPROVAL_DENIED,
    APPROVAL_GRANTED,
    APPROVAL_REQUESTED,
    LLM_RESPONSE,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    TOOL_RESULT,
    Event,
)
from ._common import finite, loads, merged, pick, store_of, write_run
from .errors import InteropFormatError

if TYPE_CHECKING:
    from ..store import Run, Store

__all__ = ["SourceEvent", "drangue_runs", "import_drangue", "map_events", "read_drangue"]

_SIMPLE: Final = {"run_started": RUN_STARTED, "run_finished": RUN_FINISHED, "run_failed": RUN_FAILED}


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
    except sqlite3.DatabaseError as exc:
        raise InteropFormatError(where, None, f"not an SQLite file ({exc})") from None
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
        wanted = {"run_id", "seq", "type", "payload", "ts", "duration_ms"}
        if not wanted <= columns:
            raise InteropFormatError(where, None, "no drangue events table (run_id, seq, type, payload, "
                                                  "ts, duration_ms); not a drangue SQLiteStore file")
        rows = conn.execute("SELECT run_id, seq, type, payload, ts, duration_ms FROM events "
                            "ORDER BY run_id, seq").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InteropFormatError(where, None, f"cannot read the SQLite file ({exc})") from None
    finally:
        conn.close()
    runs: dict[str, list[SourceEvent]] = {}
    for run_id, seq, type_, payload, ts, duration in rows:
        try:
            data = loads(payload) if payload else {}
        except ValueError as exc:
            raise InteropFormatError(where, None, f"run {run_id} seq {seq}: payload is not JSON ({exc})",
                                     field="payload") from None
        if not isinstance(data, Mapping):
            raise InteropFormatError(where, None, f"run {run_id} seq {seq}: payload is not an object",
                                     field="payload")
        runs.setdefault(str(run_id), []).append(SourceEvent(int(seq), str(type_), data, ts, duration))
    return runs


def drangue_runs(path: str | os.PathLike[str]) -> list[str]:
    """The run ids in a drangue SQLite store."""
    return sorted(read_drangue(path))


def _us(ts: Any) -> int | None:
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts):
        return round(ts * 1_000_000)
    return None


def _message(p: Mapping[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": p.get("text")}
    calls = [{"id": c.get("id"), "type": "function",
              "function": {"name": c.get("name"), "arguments": finite(c.get("arguments"))}}
             for c in p.get("tool_calls") or () if isinstance(c, Mapping)]
    if calls:
        message["tool_calls"] = calls
    return message


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
        kind = _SIMPLE.get(e.type, f"drangue.{e.type}")
        added: dict[str, Any] = {}
        usage: dict[str, Any] = {}
        if e.type == "run_finished":
            added = {"result": p.get("output")}
        elif e.type == "model_decision":
            kind, added, usage = self._decision(seq, e, ts)
        elif e.type == "tool_result":
            from ..keys import tool_key

            name = str(p.get("name") or "")
            args = self.args_of.get(call or "")
            added = {"result": finite(p.get("content")),
                     "key": tool_key(name, args if isinstance(args, Mapping) else {})}
            kind, usage = TOOL_RESULT, {"duration_ms": e.duration_ms}
        elif e.type == "approval_requested" and call is not None:
            kind = APPROVAL_REQUESTED
            added = {"action": p.get("tool"), "reason": p.get("reasoning") or p.get("text")}
            self.requests[call] = seq
        elif e.type in ("approval_granted", "approval_denied") and call in self.requests:
            request = self.requests.pop(call)
            kind = APPROVAL_GRANTED if e.type == "approval_granted" else APPROVAL_DENIED
            added, cause = {"request": request, "note": p.get("reason")}, request
        origin = {"system": "drangue", "seq": e.seq, "ts": e.ts, "duration_ms": e.duration_ms}
        return Event(seq=seq, type=kind, payload=merged(p, added, source_type=e.type, origin=origin),
                     caused_by=cause if cause is not None and cause < seq else None, ts=ts, **usage)

    def _decision(self, seq: int, e: SourceEvent, ts: int) -> tuple[str, dict[str, Any], dict[str, Any]]:
        from .. import pricing
        from ..capture.usage import normalize_usage

        p = e.payload
        for c in p.get("tool_calls") or ():
            if isinstance(c, Mapping) and c.get("id") is not None:
                self.decision_of[str(c["id"])] = seq
                self.args_of[str(c["id"])] = finite(c.get("arguments"))
        model = p.get("model") if isinstance(p.get("model"), str) else None
        usage = normalize_usage(p["usage"], provider="anthropic") if p.get("usage") else None
        cost = None
        if usage is not None and model:
            cost = pricing.cost(model, usage, provider=None, when=datetime.fromtimestamp(ts / 1e6, tz=UTC))
        # drangue records no request: the key names this decision (stable for a re-import).
        key = hashlib.sha256(canonical_json(finite(p)).encode()).hexdigest()
        added = {"key": key, "model": model, "message": _message(p), "finish_reason": p.get("stop_reason"),
                 "cost_source": cost.source if cost is not None else "unknown", "cache_hit": False}
        columns = {"model": model, "duration_ms": e.duration_ms,
                   "input_tokens": usage.input_tokens if usage else None,
                   "output_tokens": usage.output_tokens if usage else None,
                   "cached_tokens": usage.cached_tokens if usage else None,
                   "cost_usd": cost.usd if cost is not None else None}
        return LLM_RESPONSE, added, columns


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


def import_drangue(path: str | os.PathLike[str], store: Store | str | os.PathLike[str], *,
                   run: str | None = None, run_id: str | None = None, name: str | None = None) -> Run:
    """Import one drangue run from its SQLite store, keeping every event.

    Args:
        path: the drangue ``SQLiteStore`` file.
        store: the agentlog store (or its path) to import into.
        run: the drangue run id; needed when the file holds several runs.
        run_id: the new run's id; default: a fresh one.
        name: the new run's name; default: ``drangue <run>: <input>`` (input cut to 60
            characters).

    Returns:
        The new run; its tags say where it came from (``source``, ``source_run``).

    Raises:
        InteropFormatError: not a drangue store; ``run`` missing or ambiguous.
        UsageError: a step's usage cannot be normalised.
    """
    where = os.fspath(path)
    runs = read_drangue(path)
    chosen = pick(runs, run, where, "drangue")
    events = map_events(runs[chosen])
    first = runs[chosen][0].payload.get("input") if runs[chosen] else None
    label = name or (f"drangue {chosen[:12]}: {json.dumps(first)[1:-1][:60]}" if isinstance(first, str)
                     else f"drangue {chosen}")
    tags = {"source": "drangue", "source_run": chosen, "source_file": Path(where).name}
    return write_run(store_of(store), events, run_id=run_id, name=label, tags=tags)
