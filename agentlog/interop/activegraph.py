"""ActiveGraph runs into agentlog: every event kept, graph events mapped to agentlog's.

Reads what ActiveGraph writes: its SQLite event store (``Runtime(persist_to=...)``, the
``events`` table, with compacted ``events_archive`` rows first), the JSONL of ``activegraph
export-trace --format jsonl`` (one ``Event.to_dict()`` per line), and the JSONL of its
``JSONLEventSink`` (``{"context": {"run_id", ...}, "event": {...}}`` per line).

======================================  ==========================================================
ActiveGraph                             agentlog
======================================  ==========================================================
``id``, ``caused_by``                   ``seq`` (file order), ``caused_by`` remapped to the seq
                                        of the event with that id; the ids stay in ``origin``
``actor``, ``timestamp``                ``actor``; ``ts`` (ISO → µs; an unreadable time takes
                                        the previous event's)
``object.created``                      ``object.created`` {id, kind: object.type, data:
                                        object.data}; provenance = {actor, event, caused_by};
                                        ActiveGraph's own provenance stays in ``origin``
``patch.applied`` (op update)           ``object.updated`` {id: target, data: value}
``relation.created``                    ``relation.created`` {id, kind: relation.type, source,
                                        target, data}
``llm.requested`` / ``llm.responded``   ``llm.request`` {key, model, messages (system +
                                        prompt.messages), params} / ``llm.response`` {key,
                                        message: raw_text, finish_reason}, usage columns:
                                        model, input/output tokens, cost (``cost_usd``, source
                                        ``provider``), duration (``latency_seconds``)
``tool.requested`` / ``tool.responded`` ``tool.call`` {key, name, args} / ``tool.result`` {key,
                                        name, result: output, error}, cost and duration columns
``behavior.started`` /                  ``span.started`` {name: behavior, kind: agent, parent} /
``relation_behavior.started``           (events until the end carry its ``span_id``)
``behavior.completed`` / ``.failed``    ``span.ended`` {status ok / error, error}
``approval.proposed`` / ``.granted``    ``approval.requested`` {action, reason} /
                                        ``approval.granted`` {request: seq, by}
``runtime.budget_exhausted``            ``budget.exceeded`` {limit: exhausted_by, value: used,
                                        max: the limit}
anything else                           ``activegraph.<type>`` (folds to nothing, stays in
                                        every table)
======================================  ==========================================================

Every event is a typed body of agentlog's vocabulary (:mod:`agentlog.events`), and
ActiveGraph's own event is kept whole under ``origin`` (:class:`~agentlog.events.Origin`:
system ``activegraph``, type, payload, id, ts, caused_by, detail {frame_id});
``agentlog.events.origin_of(event)`` reads it back. A file with several runs imports them
all (``run=`` picks one), each into the run whose id the ActiveGraph run determines, so an
import repeated adds nothing. What does not map cleanly: ``patch.applied`` with op ``replace`` becomes an
``object.updated`` that merges (keys the replacement drops stay in agentlog's state);
``object.removed``, ``relation.removed``, ``patch.proposed`` / ``rejected`` and frames have no
agentlog counterpart and fold to nothing; a re-created object id or a patch of an unknown
object is kept unmapped so the fold never fails; ActiveGraph forks import as runs of their
own (their parent is in the tags), not as agentlog forks.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._words import with_article
from ..events import (
    ApprovalGranted,
    ApprovalRequested,
    Body,
    BudgetExceeded,
    Event,
    LLMRequest,
    LLMResponse,
    ObjectCreated,
    ObjectUpdated,
    Origin,
    RelationCreated,
    SpanEnded,
    SpanStarted,
    ToolCall,
    ToolResult,
    Usage,
    with_origin,
)
from ._common import (
    SOURCE_TAG,
    SQLITE_ERRORS,
    chosen,
    finite,
    import_run_id,
    iso_to_us,
    json_values,
    loads,
    read_text,
    store_of,
    write_or_extend,
)
from .errors import InteropFormatError

if TYPE_CHECKING:
    from ..store import Run, Store

__all__ = ["SourceEvent", "SourceRun", "activegraph_runs", "import_activegraph", "map_run",
           "read_activegraph"]

_SQLITE: Final = b"SQLite format 3\x00"
_STARTS: Final = frozenset({"behavior.started", "relation_behavior.started"})
_ENDS: Final = frozenset({"behavior.completed", "behavior.failed"})


@dataclass(frozen=True, slots=True)
class SourceEvent:
    """One ActiveGraph event as stored."""

    id: str
    type: str
    payload: Mapping[str, Any]
    actor: str | None
    frame_id: str | None
    caused_by: str | None
    timestamp: str


@dataclass(frozen=True, slots=True)
class SourceRun:
    """One ActiveGraph run: its id, its ``runs`` row (SQLite) and its events in order."""

    run_id: str
    events: list[SourceEvent]
    info: Mapping[str, Any] = field(default_factory=dict)


# --- reading ------------------------------------------------------------------------------------


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(16) == _SQLITE


def _event(obj: Mapping[str, Any], where: str, line: int | None) -> SourceEvent:
    for key in ("id", "type"):
        if not isinstance(obj.get(key), str):
            raise InteropFormatError(where, line, "missing or not a string", field=key)
    payload = obj.get("payload")
    if isinstance(payload, str):
        try:
            payload = loads(payload)
        except ValueError as exc:
            raise InteropFormatError(where, line, f"payload is not JSON ({exc})", field="payload") from None
    if payload is None:
        payload = {}
    if not isinstance(payload, Mapping):
        raise InteropFormatError(where, line, "must be an object", field="payload")
    for key in ("actor", "frame_id", "caused_by", "timestamp"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise InteropFormatError(where, line, f"must be a string or null, got {type(obj[key]).__name__}"
                                                  f" (event {obj['id']})", field=key)
    return SourceEvent(id=obj["id"], type=obj["type"], payload=payload, actor=obj.get("actor"),
                       frame_id=obj.get("frame_id"), caused_by=obj.get("caused_by"),
                       timestamp=str(obj.get("timestamp") or ""))


def _sqlite_runs(path: Path) -> dict[str, SourceRun]:
    where = str(path)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "events" not in tables:
            raise InteropFormatError(where, None, "an SQLite file without an events table; not an "
                                                  "ActiveGraph store")
        version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() \
            if "meta" in tables else None
        if version is not None and str(version[0]) != "1":
            raise InteropFormatError(where, None, f"ActiveGraph store schema_version {version[0]!r}; "
                                                  "this reader knows version 1", field="schema_version")
        info = {r["run_id"]: dict(r) for r in conn.execute("SELECT * FROM runs")
                if isinstance(r["run_id"], str)} if "runs" in tables else {}
        union = "SELECT seq, id, type, actor, payload, frame_id, caused_by, timestamp, run_id FROM events"
        if "events_archive" in tables:
            union = ("SELECT seq, id, type, actor, payload, frame_id, caused_by, timestamp, run_id "
                     f"FROM events_archive UNION ALL {union}")
        runs: dict[str, list[SourceEvent]] = {}
        for row in conn.execute(f"SELECT * FROM ({union}) ORDER BY run_id, seq"):
            if not isinstance(row["run_id"], str):
                raise InteropFormatError(where, None, f"an event's run_id is {with_article(type(row['run_id']).__name__)}, "
                                                      f"not text (event {row['id']!r:.40})", field="run_id")
            runs.setdefault(row["run_id"], []).append(_event(dict(row), where, None))
    except SQLITE_ERRORS as exc:
        raise InteropFormatError(where, None, f"cannot read the SQLite store ({exc})") from None
    finally:
        conn.close()
    for run_id in info:
        runs.setdefault(run_id, [])
    return {rid: SourceRun(rid, events, info.get(rid, {})) for rid, events in runs.items()}


def _jsonl_runs(path: Path) -> dict[str, SourceRun]:
    where = str(path)
    runs: dict[str, list[SourceEvent]] = {}
    for line, obj in json_values(read_text(path), where):
        if not isinstance(obj, Mapping):
            raise InteropFormatError(where, line, "expected an ActiveGraph event object")
        if "event" in obj and "context" in obj:  # JSONLEventSink envelope
            context = obj.get("context") or {}
            if not isinstance(context, Mapping):
                raise InteropFormatError(where, line, "must be an object", field="context")
            run_id = str(context.get("run_id") or "run")
            event = obj["event"]
        else:  # export-trace: one event per line, one run per file
            run_id, event = path.stem, obj
        if not isinstance(event, Mapping):
            raise InteropFormatError(where, line, "expected an object", field="event")
        runs.setdefault(run_id, []).append(_event(event, where, line))
    return {rid: SourceRun(rid, events) for rid, events in runs.items()}


def read_activegraph(path: str | os.PathLike[str]) -> dict[str, SourceRun]:
    """The runs of an ActiveGraph SQLite store or JSONL trace, by run id.

    Raises:
        InteropFormatError: the file is neither (file and line).
        FileNotFoundError: there is no such file.
    """
    file = Path(path)
    return _sqlite_runs(file) if _is_sqlite(file) else _jsonl_runs(file)


def activegraph_runs(path: str | os.PathLike[str]) -> list[str]:
    """The run ids in an ActiveGraph file."""
    return sorted(read_activegraph(path))


# --- mapping ------------------------------------------------------------------------------------


def _cost(value: Any) -> float | None:
    try:
        cost = float(value)
    except (TypeError, ValueError):
        return None
    return cost if math.isfinite(cost) else None


def _obj(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``payload[key]`` when it is an object, else an empty one."""
    value = payload.get(key)
    return value if isinstance(value, Mapping) else {}


def _tokens(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class _Mapper:
    """Turns one run's events into agentlog events, in order, keeping what it has seen."""

    def __init__(self, run: SourceRun) -> None:
        self.run = run
        self.seq_of: dict[str, int] = {}
        self.objects: set[str] = set()
        self.spans: list[tuple[str, str, str]] = []  # (span id, behavior, triggering event id)
        self.keys: dict[int, str] = {}  # request seq -> key
        self.proposals: dict[str, int] = {}  # approval id -> seq
        self.ts = 0

    def map(self) -> list[Event]:
        return [self.one(seq, e) for seq, e in enumerate(self.run.events)]

    def one(self, seq: int, e: SourceEvent) -> Event:
        try:
            self.ts = iso_to_us(e.timestamp) if e.timestamp else self.ts
        except ValueError:
            pass  # keep the previous time; the text is in origin
        cause = self.seq_of.get(e.caused_by) if e.caused_by else None
        self.seq_of[e.id] = seq
        span = self.spans[-1][0] if self.spans else None
        handler = _HANDLERS.get(e.type)
        body: Body | None = handler(self, seq, e.payload, cause) if handler is not None else None
        if isinstance(body, SpanStarted):
            span = self.spans[-1][0]
        detail = {"frame_id": e.frame_id} if e.frame_id is not None else None
        origin = Origin(system="activegraph", type=e.type, payload=finite(e.payload), id=e.id,
                        ts=e.timestamp, caused_by=e.caused_by, detail=detail)
        return Event(seq=seq, type=body.TYPE if body is not None else f"activegraph.{e.type}",
                     payload=with_origin(body, origin), actor=e.actor, caused_by=cause, span_id=span,
                     ts=self.ts, **(body.columns() if body is not None else {}))

    # --- handlers: return the body, or None to keep the event unmapped ---

    def object_created(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        obj = p.get("object")
        if not isinstance(obj, Mapping) or not isinstance(obj.get("id"), str) or obj["id"] in self.objects:
            return None
        self.objects.add(obj["id"])
        return ObjectCreated(id=obj["id"], kind=str(obj.get("type") or "object"), data=finite(obj.get("data") or {}))

    def patch_applied(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        patch = _obj(p, "patch")
        target = p.get("target") or patch.get("target")
        value = patch.get("value")
        if not isinstance(target, str) or target not in self.objects or not isinstance(value, Mapping):
            return None
        return ObjectUpdated(id=str(target), data=finite(value))

    def relation_created(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        rel = p.get("relation")
        if not isinstance(rel, Mapping) or _str(rel.get("source")) is None or _str(rel.get("target")) is None:
            return None
        rel_id = p.get("id") or rel.get("id")
        return RelationCreated(id=_str(rel_id), kind=str(rel.get("type") or "relation"), source=rel["source"],
                               target=rel["target"], data=finite(rel.get("data") or {}))

    def llm_requested(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        from ..keys import canonical_request, llm_key

        prompt = _obj(p, "prompt")
        given = prompt.get("messages")
        messages: list[Any] = list(given) if isinstance(given, list) else []
        if prompt.get("system"):
            messages = [{"role": "system", "content": prompt["system"]}, *messages]
        params = {k: prompt[k] for k in ("max_tokens", "temperature", "top_p") if k in prompt}
        model = _str(p.get("model")) or _str(prompt.get("model"))
        request = {"model": model, "messages": finite(messages), "params": finite(params),
                   "response_format": finite(prompt.get("output_schema_json"))}
        try:
            key = llm_key(request)
            body = LLMRequest(key=key, **canonical_request(request))
        except ValueError:
            key = str(p.get("prompt_hash") or "")
            body = LLMRequest(key=key, **request)
        self.keys[seq] = key
        return body

    def llm_responded(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        message: dict[str, Any] = {"role": "assistant", "content": p.get("raw_text")}
        if p.get("tool_calls"):
            message["tool_calls"] = finite(p["tool_calls"])
        cost = _cost(p.get("cost_usd"))
        latency = _cost(p.get("latency_seconds"))
        return LLMResponse(key=self.keys.get(cause, "") if cause is not None else "", model=_str(p.get("model")),
                           message=message, usage=Usage(input_tokens=_tokens(p.get("input_tokens")),
                                                        output_tokens=_tokens(p.get("output_tokens"))),
                           cost_source="provider" if cost is not None else "unknown", cost_usd=cost,
                           duration_ms=None if latency is None else latency * 1000)

    def tool_requested(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        from ..keys import tool_key

        name = str(p.get("tool") or "")
        args = finite(p.get("args")) if isinstance(p.get("args"), Mapping) else {}
        key = tool_key(name, args)
        self.keys[seq] = key
        return ToolCall(key=key, name=name, args=args)

    def tool_responded(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        latency = _cost(p.get("latency_seconds"))
        key = self.keys.get(cause, "") if cause is not None else ""
        cost, duration = _cost(p.get("cost_usd")), None if latency is None else latency * 1000
        if p.get("error"):
            return ToolResult(key=key, name=str(p.get("tool") or ""), error=str(p["error"]),
                              type=_str(p.get("error_type")) or "Error", cost_usd=cost, duration_ms=duration)
        return ToolResult(key=key, name=str(p.get("tool") or ""), result=finite(p.get("output")),
                          cost_usd=cost, duration_ms=duration)

    def behavior_started(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        name = str(p.get("behavior") or "behavior")
        parent = self.spans[-1][0] if self.spans else None
        self.spans.append((f"s{seq}", name, str(p.get("event_id"))))
        return SpanStarted(name=name, kind="agent", parent=parent)

    def behavior_ended(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        if not self.spans or self.spans[-1][1:] != (str(p.get("behavior")), str(p.get("event_id"))):
            return None
        _, name, _ = self.spans.pop()
        failed = "exception_type" in p or "traceback" in p
        error = f"{p.get('exception_type') or 'Error'}: {p.get('message')}" if failed else None
        return SpanEnded(name=name, status="error" if failed else "ok", error=error)

    def approval_proposed(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        self.proposals[str(p.get("approval_id"))] = seq
        return ApprovalRequested(action=f"create {p.get('object_type')}", reason=str(p.get("reason") or ""))

    def approval_granted(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        request = self.proposals.pop(str(p.get("approval_id")), None)
        if request is None:
            return None
        return ApprovalGranted(request=request, by=_str(p.get("approved_by")), note=None)

    def budget_exhausted(self, seq: int, p: Mapping[str, Any], cause: int | None) -> Body | None:
        limit = _str(p.get("exhausted_by"))
        snapshot = _obj(p, "snapshot")
        most = _cost(_obj(snapshot, "limits").get(limit or ""))
        if limit is None or most is None:
            return None
        return BudgetExceeded(limit=limit, value=_cost(_obj(snapshot, "used").get(limit)), max=most)


_HANDLERS: Final = {
    "object.created": _Mapper.object_created, "patch.applied": _Mapper.patch_applied,
    "relation.created": _Mapper.relation_created, "llm.requested": _Mapper.llm_requested,
    "llm.responded": _Mapper.llm_responded, "tool.requested": _Mapper.tool_requested,
    "tool.responded": _Mapper.tool_responded, "behavior.started": _Mapper.behavior_started,
    "relation_behavior.started": _Mapper.behavior_started, "behavior.completed": _Mapper.behavior_ended,
    "behavior.failed": _Mapper.behavior_ended, "approval.proposed": _Mapper.approval_proposed,
    "approval.granted": _Mapper.approval_granted, "runtime.budget_exhausted": _Mapper.budget_exhausted,
}


def map_run(run: SourceRun) -> list[Event]:
    """The agentlog events of an ActiveGraph run (pure)."""
    return _Mapper(run).map()


def import_activegraph(path: str | os.PathLike[str], store: Store | str | os.PathLike[str], *,
                       run: str | None = None, run_id: str | None = None,
                       name: str | None = None) -> list[Run]:
    """Import the runs of an ActiveGraph file (or one of them), keeping every event.

    Idempotent: each ActiveGraph run goes to the run
    :func:`~agentlog.interop._common.import_run_id` names (the same ActiveGraph run always
    gets the same id), and importing it again adds only the events it did not have.

    Args:
        path: an ActiveGraph SQLite store, or a JSONL trace (``export-trace --format jsonl``,
            or a ``JSONLEventSink`` file).
        store: the agentlog store (or its path) to import into.
        run: the ActiveGraph run id; default: every run in the file.
        run_id: the new run's id (only when one run is imported); default: derived from the
            ActiveGraph run.
        name: the new runs' name; default: the ActiveGraph run's label or goal, else its id.

    Returns:
        The runs, in the order of the ActiveGraph run ids; their tags say where they came
        from (``source``, ``source_run``, ``source_file``, ``source_parent``). They cannot be
        replayed or forked (:attr:`~agentlog.Run.replayable`).

    Raises:
        InteropFormatError: not an ActiveGraph file; ``run`` not in it; ``run_id`` given for
            several runs.
        RunExistsError: ``run_id`` holds another run.
    """
    where = os.fspath(path)
    runs = read_activegraph(path)
    picked = chosen(runs, run, where, "ActiveGraph", run_id)
    out = []
    target = store_of(store)
    for source_id in picked:
        source = runs[source_id]
        info = source.info
        label = name or info.get("label") or info.get("goal") or source.run_id
        tags = {SOURCE_TAG: "activegraph", "source_run": source.run_id, "source_file": Path(where).name,
                "source_parent": info.get("parent_run_id")}
        first = source.events[0] if source.events else None
        identity = (first.id, first.type, first.timestamp) if first is not None else None
        out.append(write_or_extend(target, map_run(source), run_id=run_id or import_run_id(
            "activegraph", source.run_id, identity), name=str(label), tags=tags,
            where=f"{where} (ActiveGraph run {source.run_id})"))
    return out
