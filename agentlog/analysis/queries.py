"""The SQL of the derived tables, written once over any relation of events with a ``run_id``.

Each function takes ``src``, a relation with the event columns plus ``run_id`` (one run's
table, or the store's ``run_events`` view), and returns a query. The per-run methods run these
queries over one run's Arrow table in DuckDB; the store's views are the same queries over
every run, so ``run.spans()`` and ``store.sql("select * from spans")`` cannot disagree, and
``run.cost()`` and ``store.cost()`` are one engine.

The payload is canonical JSON text; DuckDB's JSON functions read the few fields a table needs
in C, a column at a time. Every JSON path comes from the event vocabulary
(:func:`agentlog.events.json_path`) and every type name from its constants, so a renamed field
fails here, loudly, instead of reading ``NULL``.

**Unknown stays unknown.** A model answer with no cost (no price, no provider report) has a
``NULL`` ``cost_usd``; it is counted in ``cost_unknown_calls`` and never added as 0. A sum of
costs (:func:`known_cost`) is the sum of the known ones, and ``NULL`` when the rows it adds
hold an unknown cost and no known one. Rows without any cost (tool results) add nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..events import (
    ERROR,
    LLM_REQUEST,
    LLM_RESPONSE,
    SPAN_ENDED,
    SPAN_STARTED,
    TOOL_CALL,
    TOOL_RESULT,
    Body,
    CallFailed,
    Keys,
    LLMRequest,
    LLMResponse,
    SpanEnded,
    SpanStarted,
    ToolCall,
    ToolResult,
    Usage,
    json_path,
)

__all__ = ["KEY_SQL", "UNKNOWN_COST", "USAGE_ROWS", "cost_sql", "field", "known_cost", "llm_calls_sql",
           "recompute_sql", "runs_sql", "spans_sql", "tokens_over_time_sql", "tool_calls_sql"]

PREVIEW: Final = 80  # characters of a preview

#: The keys inside a chat message (``LLMRequest.messages[*]``, ``LLMResponse.message``), which
#: keeps the provider's shape: ``{"role", "content", "tool_calls": [{"function": {"name"}}]}``,
#: with content either text or a list of ``{"text": ...}`` blocks.
MESSAGE: Final = Keys(["role", "content", "tool_calls", "function", "name", "text"])
#: The fields of a usage value (``LLMResponse.usage``).
_USAGE: Final = Keys(Usage.FIELDS)
#: The marker of a blob reference in a payload (``BlobRef.to_json()``) and its size field.
_BLOB: Final = "$blob"
_SIZE: Final = "size"


def field(cls: type[Body], *names: str, src: str = "payload", text: bool = True) -> str:
    """SQL for a payload field of ``cls`` in the JSON column ``src``: as text (``NULL`` when
    absent), or as JSON with ``text=False``.

    >>> field(LLMResponse, "usage", "cache_write_tokens")
    "json_extract_string(payload, '$.usage.cache_write_tokens')"
    """
    return f"json_extract{'_string' if text else ''}({src}, '{json_path(cls, *names)}')"


def _is(*types: str) -> str:
    quoted = ", ".join(f"'{t}'" for t in types)
    return f"type IN ({quoted})" if len(types) > 1 else f"type = {quoted}"


#: The events that carry usage: model answers, tool results, and any event with a usage value.
USAGE_ROWS: Final = (f"({_is(LLM_RESPONSE, TOOL_RESULT)} OR input_tokens IS NOT NULL "
                     "OR output_tokens IS NOT NULL OR cached_tokens IS NOT NULL "
                     "OR cost_usd IS NOT NULL)")
#: A model answer whose cost is unknown (never counted as 0).
UNKNOWN_COST: Final = f"({_is(LLM_RESPONSE)} AND cost_usd IS NULL)"


def known_cost(cost: str = "cost_usd", unknown: str = f"count(*) FILTER (WHERE {UNKNOWN_COST})",
               *, where: str = "", over: str = "") -> str:
    """The aggregate of a cost column: the sum of its known values; ``NULL`` when the rows hold
    an unknown cost (``unknown`` > 0) and no known one, never 0.

    Args:
        cost: the cost expression.
        unknown: how many of the rows have an unknown cost (an aggregate).
        where: only the rows that meet this condition.
        over: a window (``OVER (...)``) for running sums; empty for a group.

    >>> print(known_cost("c", "n"))
    (CASE WHEN n > 0 THEN sum(c) ELSE coalesce(sum(c), 0.0) END)

    (``sum`` of no known value is ``NULL``: kept as such only when some cost is unknown.)
    """
    part = f" FILTER (WHERE {where})" if where else ""
    part += f" {over}" if over else ""
    return f"(CASE WHEN {unknown} > 0 THEN sum({cost}){part} ELSE coalesce(sum({cost}){part}, 0.0) END)"


def _cut(expr: str, n: int = PREVIEW) -> str:
    """Whitespace folded to single spaces, cut to ``n`` characters with a trailing ``…``."""
    folded = f"regexp_replace(trim({expr}), '\\s+', ' ', 'g')"
    return f"(CASE WHEN length({folded}) > {n} THEN left({folded}, {n - 1}) || '…' ELSE {folded} END)"


def _text_of(v: str) -> str:
    """Readable text of a JSON value: a string as is, text blocks joined, a blob as a note."""
    blob = f"json_extract_string({v}, '$.\"{_BLOB}\"')"
    return (f"(CASE json_type({v}) WHEN 'VARCHAR' THEN json_extract_string({v}, '$') "
            f"WHEN 'NULL' THEN NULL "
            f"WHEN 'ARRAY' THEN coalesce(nullif(array_to_string("
            f"json_extract_string({v}, '$[*].{MESSAGE.text}'), ' '), ''), CAST({v} AS VARCHAR)) "
            f"WHEN 'OBJECT' THEN CASE WHEN {blob} IS NOT NULL THEN '[blob ' || {blob} || ', ' || "
            f"coalesce(json_extract_string({v}, '$.{_SIZE}'), '?') || ' bytes]' ELSE CAST({v} AS VARCHAR) END "
            f"ELSE CAST({v} AS VARCHAR) END)")


def source_sql(cls: type[LLMResponse | ToolResult], payload: str) -> str:
    """``edit`` / ``log`` / ``live``: how an answer came about."""
    return (f"(CASE WHEN {field(cls, cls.K.edited, src=payload)} = 'true' THEN 'edit' "
            f"WHEN {field(cls, cls.K.served_from_seq, src=payload)} IS NOT NULL THEN 'log' "
            f"ELSE 'live' END)")


def _ms(later: str, earlier: str) -> str:
    return f"((epoch_us({later}) - epoch_us({earlier})) / 1000.0)"


def _first_of_each_span(src: str, type: str, cls: type[Body], names: Sequence[str]) -> str:
    """The first event of ``type`` of each span: run_id, span_id, seq, ts, and the payload
    fields ``names`` of ``cls``."""
    fields = ", ".join(f"{field(cls, name)} AS {name}" for name in names)
    return f"""
    SELECT run_id, span_id, seq, ts, {fields}
    FROM {src} WHERE {_is(type)} AND span_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY run_id, span_id ORDER BY seq) = 1"""


def _first_span_started(src: str, *, ended_kind: bool = True) -> str:
    """The first ``span.started`` of each span: run_id, span_id, seq, ts, name, kind, parent.
    ``kind`` is its first ``span.ended``'s when that tells one (a span whose kind was known
    only at its end), unless ``ended_kind`` is false (the caller joins the end itself)."""
    K = SpanStarted.K
    started = _first_of_each_span(src, SPAN_STARTED, SpanStarted, (K.name, K.kind, K.parent))
    if not ended_kind:
        return started
    return f"""
    SELECT s.run_id, s.span_id, s.seq, s.ts, s.name, coalesce(e.kind, s.kind) AS kind, s.parent
    FROM ({started}) s LEFT JOIN ({_first_span_ended(src)}) e ON e.run_id = s.run_id AND e.span_id = s.span_id"""


def _first_span_ended(src: str) -> str:
    """The first ``span.ended`` of each span: run_id, span_id, seq, ts, status, error, kind."""
    K = SpanEnded.K
    return _first_of_each_span(src, SPAN_ENDED, SpanEnded, (K.status, K.error, K.kind))


def spans_sql(src: str) -> str:
    """The span tree (columns of :data:`~agentlog.analysis.columns.SPANS`, plus ``run_id``).

    - A span is a ``span.started`` (its ``span_id``, payload ``name``, ``kind``, ``parent``)
      and the first ``span.ended`` with the same ``span_id`` (``status``, ``error``, and the
      ``kind`` when the end tells one).
    - A span's parent is the recorded ``parent`` if that span exists and started before it
      (so a damaged log cannot make a cycle); otherwise the span is a root.
    - ``depth`` and the ``total_*`` roll-ups come from one recursive walk from every span up to
      its root: a span's totals are the sums over every span that has it on its walk.
    - ``self_ms``: the children's intervals, clipped to the parent's, are merged in start order
      (a running maximum of the ends), so overlapping children count once.
    """
    return f"""
WITH RECURSIVE
st AS (
    SELECT run_id, span_id, seq AS start_seq, ts AS start_ts, name, kind, parent
    FROM ({_first_span_started(src, ended_kind=False)})
),
en AS (
    SELECT run_id, span_id, seq AS end_seq, ts AS end_ts, status, error, kind
    FROM ({_first_span_ended(src)})
),
own AS (
    SELECT run_id, span_id, count(*) AS events,
           CAST(coalesce(sum(input_tokens), 0) AS BIGINT) AS input_tokens,
           CAST(coalesce(sum(output_tokens), 0) AS BIGINT) AS output_tokens,
           CAST(coalesce(sum(cached_tokens), 0) AS BIGINT) AS cached_tokens,
           {known_cost()} AS cost_usd,
           count(*) FILTER (WHERE {UNKNOWN_COST}) AS cost_unknown_calls,
           arg_min(model, seq) FILTER (WHERE {_is(LLM_RESPONSE)} AND model IS NOT NULL) AS model
    FROM {src} WHERE span_id IS NOT NULL GROUP BY run_id, span_id
),
last_ts AS (SELECT run_id, max(ts) AS last_ts FROM {src} GROUP BY run_id),
s AS (
    SELECT st.run_id, st.span_id, st.parent, st.name, coalesce(en.kind, st.kind) AS kind, st.start_ts, st.start_seq,
           en.end_seq, coalesce(en.end_ts, l.last_ts) AS end_ts,
           CASE WHEN en.end_seq IS NULL THEN 'open' ELSE coalesce(en.status, 'ok') END AS status,
           en.error, coalesce(o.events, 0) AS events, o.model,
           coalesce(o.input_tokens, 0) AS input_tokens, coalesce(o.output_tokens, 0) AS output_tokens,
           coalesce(o.cached_tokens, 0) AS cached_tokens,
           CASE WHEN o.span_id IS NULL THEN 0.0 ELSE o.cost_usd END AS cost_usd,
           coalesce(o.cost_unknown_calls, 0) AS cost_unknown_calls
    FROM st
    LEFT JOIN en ON en.run_id = st.run_id AND en.span_id = st.span_id
    LEFT JOIN own o ON o.run_id = st.run_id AND o.span_id = st.span_id
    JOIN last_ts l ON l.run_id = st.run_id
),
p AS (
    SELECT c.run_id, c.span_id, c.parent AS pid
    FROM s c JOIN s pp ON pp.run_id = c.run_id AND pp.span_id = c.parent AND pp.start_seq < c.start_seq
),
walk(run_id, span_id, anc, dist) AS (
    SELECT run_id, span_id, span_id, 0 FROM s
    UNION ALL
    SELECT w.run_id, w.span_id, p.pid, w.dist + 1
    FROM walk w JOIN p ON p.run_id = w.run_id AND p.span_id = w.anc
),
depth AS (SELECT run_id, span_id, max(dist) AS depth FROM walk GROUP BY run_id, span_id),
totals AS (
    SELECT w.run_id, w.anc AS span_id,
           CAST(sum(d.input_tokens) AS BIGINT) AS total_input_tokens,
           CAST(sum(d.output_tokens) AS BIGINT) AS total_output_tokens,
           CAST(sum(d.cached_tokens) AS BIGINT) AS total_cached_tokens,
           {known_cost("d.cost_usd", "sum(d.cost_unknown_calls)")} AS total_cost_usd,
           CAST(sum(d.cost_unknown_calls) AS BIGINT) AS total_cost_unknown_calls
    FROM walk w JOIN s d ON d.run_id = w.run_id AND d.span_id = w.span_id
    GROUP BY w.run_id, w.anc
),
kids AS (
    SELECT p.run_id, p.pid AS span_id,
           greatest(epoch_us(c.start_ts), epoch_us(pp.start_ts)) AS cs,
           least(epoch_us(c.end_ts), epoch_us(pp.end_ts)) AS ce
    FROM p JOIN s c ON c.run_id = p.run_id AND c.span_id = p.span_id
           JOIN s pp ON pp.run_id = p.run_id AND pp.span_id = p.pid
),
merged AS (
    SELECT run_id, span_id, cs, ce,
           max(ce) OVER (PARTITION BY run_id, span_id ORDER BY cs, ce
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM kids
),
covered AS (
    SELECT run_id, span_id, sum(greatest(0, ce - greatest(cs, coalesce(prev_end, cs)))) / 1000.0 AS covered_ms
    FROM merged GROUP BY run_id, span_id
)
SELECT s.run_id, s.span_id, s.parent, s.name, s.kind, d.depth,
       s.start_ts AS start, s.end_ts AS "end",
       {_ms('s.end_ts', 's.start_ts')} AS duration_ms,
       {_ms('s.end_ts', 's.start_ts')} - coalesce(cv.covered_ms, 0.0) AS self_ms,
       s.status, s.error, s.events, s.start_seq, s.end_seq, s.model,
       s.input_tokens, s.output_tokens, s.cached_tokens, s.cost_usd, s.cost_unknown_calls,
       t.total_input_tokens, t.total_output_tokens, t.total_cached_tokens, t.total_cost_usd,
       t.total_cost_unknown_calls
FROM s
JOIN depth d ON d.run_id = s.run_id AND d.span_id = s.span_id
JOIN totals t ON t.run_id = s.run_id AND t.span_id = s.span_id
LEFT JOIN covered cv ON cv.run_id = s.run_id AND cv.span_id = s.span_id
ORDER BY s.run_id, s.start_seq
"""


def llm_calls_sql(src: str) -> str:
    """One row per ``llm.response`` or failed model call (an ``error`` of kind ``llm.response``),
    joined to its ``llm.request`` by ``caused_by``; columns of
    :data:`~agentlog.analysis.columns.LLM_CALLS` plus ``run_id``."""
    R, Q, M = LLMResponse, LLMRequest, MESSAGE
    messages = f"json_extract(q.payload, '{json_path(Q, Q.K.messages)}[*]')"
    last_user = f"list_filter({messages}, lambda m: json_extract_string(m, '$.{M.role}') = 'user')[-1]"
    prompt = f"json_extract(coalesce({last_user}, {messages}[-1]), '$.{M.content}')"
    message = json_path(R, R.K.message)
    content = _text_of(f"json_extract(r.payload, '{message}.{M.content}')")
    calls = (f"array_to_string(json_extract_string(r.payload, "
             f"'{message}.{M.tool_calls}[*].{M.function}.{M.name}'), ', ')")
    response = f"CASE WHEN r.type = '{ERROR}' THEN NULL ELSE coalesce({content}, 'tool calls: ' || nullif({calls}, '')) END"
    return f"""
WITH
r AS (
    SELECT * FROM {src}
    WHERE {_is(LLM_RESPONSE)} OR ({_is(ERROR)} AND {field(CallFailed, CallFailed.K.kind)} = '{LLM_RESPONSE}')
),
q AS (SELECT run_id, seq, ts, payload FROM {src} WHERE {_is(LLM_REQUEST)})
SELECT r.run_id, r.seq, r.caused_by AS request_seq, r.ts, r.span_id, r.actor,
       coalesce(r.model, {field(R, R.K.model, src='r.payload')},
                {field(Q, Q.K.model, src='q.payload')}) AS model,
       r.input_tokens, r.output_tokens, r.cached_tokens, r.cost_usd,
       CASE WHEN r.type = '{ERROR}' THEN NULL ELSE {field(R, R.K.cost_source, src='r.payload')} END AS cost_source,
       {_ms('r.ts', 'q.ts')} AS latency_ms, r.duration_ms,
       coalesce({field(R, R.K.cache_hit, src='r.payload')} = 'true', false) AS cache_hit,
       {source_sql(R, 'r.payload')} AS source,
       TRY_CAST({field(R, R.K.served_from_seq, src='r.payload')} AS BIGINT) AS served_from_seq,
       {field(R, R.K.finish_reason, src='r.payload')} AS finish_reason,
       CASE WHEN r.type = '{ERROR}' THEN {field(CallFailed, CallFailed.K.error, src='r.payload')} END AS error,
       {_cut(_text_of(prompt))} AS prompt_preview,
       {_cut(response)} AS response_preview
FROM r LEFT JOIN q ON q.run_id = r.run_id AND q.seq = r.caused_by
ORDER BY r.run_id, r.seq
"""


def tool_calls_sql(src: str) -> str:
    """One row per ``tool.result``, joined to its ``tool.call`` by ``caused_by``; columns of
    :data:`~agentlog.analysis.columns.TOOL_CALLS` plus ``run_id``."""
    T, C = ToolResult, ToolCall
    args = f"CAST({field(C, C.K.args, src='c.payload', text=False)} AS VARCHAR)"
    result = _text_of(field(T, T.K.result, src="r.payload", text=False))
    return f"""
WITH
r AS (SELECT * FROM {src} WHERE {_is(TOOL_RESULT)}),
c AS (SELECT run_id, seq, ts, payload FROM {src} WHERE {_is(TOOL_CALL)})
SELECT r.run_id, r.seq, r.caused_by AS call_seq, r.ts, r.span_id, r.actor,
       coalesce({field(T, T.K.name, src='r.payload')}, {field(C, C.K.name, src='c.payload')}) AS name,
       {_cut(args)} AS args_preview,
       {_cut(result)} AS result_preview,
       {field(T, T.K.error, src='r.payload')} AS error,
       r.duration_ms, {_ms('r.ts', 'c.ts')} AS latency_ms,
       {source_sql(T, 'r.payload')} AS source,
       TRY_CAST({field(T, T.K.served_from_seq, src='r.payload')} AS BIGINT) AS served_from_seq
FROM r LEFT JOIN c ON c.run_id = r.run_id AND c.seq = r.caused_by
ORDER BY r.run_id, r.seq
"""


#: SQL of each ``cost(by=...)`` key over a usage row ``u`` and its span ``sp``.
KEY_SQL: Final = {
    "run": "u.run_id", "model": "u.model", "actor": "u.actor", "type": "u.type",
    "day": "CAST(u.ts AS DATE)", "span": "sp.name", "kind": "sp.kind",
}


def cost_sql(usage_src: str, span_src: str, keys: Sequence[str]) -> str:
    """Usage summed by ``keys`` (see :data:`~agentlog.analysis.columns.COST_KEYS`), one row per
    group, sorted by the keys with missing values last.

    ``usage_src`` holds the events whose usage is counted; ``span_src`` the events where their
    spans' ``span.started`` are found (for a fork, its parent prefix too). ``cost_usd`` is
    :func:`known_cost`: <NA> for a group whose costs are all unknown, never 0.
    """
    exprs = [f"{KEY_SQL[k]} AS {'run_id' if k == 'run' else k}" for k in keys]
    join = ""
    if "span" in keys or "kind" in keys:
        join = f"LEFT JOIN ({_first_span_started(span_src)}\n) sp ON sp.run_id = u.run_id AND sp.span_id = u.span_id"
    group = f"GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}" if keys else ""
    order = f"ORDER BY {', '.join(f'{i + 1} NULLS LAST' for i in range(len(keys)))}" if keys else ""
    unknown = f"count(*) FILTER (WHERE u.{_is(LLM_RESPONSE)} AND u.cost_usd IS NULL)"
    select = ", ".join([*exprs, "count(*) AS calls",
                        f"count(*) FILTER (WHERE u.{_is(LLM_RESPONSE)}) AS llm_calls",
                        f"count(*) FILTER (WHERE u.{_is(TOOL_RESULT)}) AS tool_calls",
                        "CAST(coalesce(sum(u.input_tokens), 0) AS BIGINT) AS input_tokens",
                        "CAST(coalesce(sum(u.output_tokens), 0) AS BIGINT) AS output_tokens",
                        "CAST(coalesce(sum(u.cached_tokens), 0) AS BIGINT) AS cached_tokens",
                        f"{known_cost('u.cost_usd', unknown)} AS cost_usd",
                        f"{unknown} AS cost_unknown_calls"])
    return f"""
SELECT {select}
FROM (SELECT * FROM {usage_src} WHERE {USAGE_ROWS}) u
{join}
{group}
{order}
"""


def tokens_over_time_sql(src: str) -> str:
    """Running totals at each usage event (see
    :data:`~agentlog.analysis.columns.TOKENS_OVER_TIME`); ``cum_cost_usd`` is the known cost so
    far, <NA> while every cost so far is unknown."""
    window = "OVER (PARTITION BY run_id ORDER BY seq ROWS UNBOUNDED PRECEDING)"
    unknown = f"sum(CASE WHEN {UNKNOWN_COST} THEN 1 ELSE 0 END) {window}"
    return f"""
SELECT run_id, seq, ts, type, model, input_tokens, output_tokens, cached_tokens, cost_usd,
       CAST(sum(coalesce(input_tokens, 0)) {window} AS BIGINT) AS cum_input_tokens,
       CAST(sum(coalesce(output_tokens, 0)) {window} AS BIGINT) AS cum_output_tokens,
       CAST(sum(coalesce(cached_tokens, 0)) {window} AS BIGINT) AS cum_cached_tokens,
       {known_cost('cost_usd', unknown, over=window)} AS cum_cost_usd,
       CAST({unknown} AS BIGINT) AS cum_cost_unknown_calls
FROM {src} WHERE {USAGE_ROWS}
ORDER BY run_id, seq
"""


def runs_sql(src: str, meta: str) -> str:
    """One row per run of ``meta`` (columns of :data:`~agentlog.analysis.columns.RUNS`, with
    ``verified`` as ``not checked``), in ``meta``'s ``ord`` order.

    ``src`` holds every run as read with ``stored_in``, the run whose files hold each event (the
    store's ``run_events``); ``meta`` the ``run.json`` facts: run_id, name, status, created,
    tags, parent, fork_seq, ord. ``cost_usd`` is the run as read, ``own_cost_usd`` its own
    events (what it paid), each :func:`known_cost`.
    """
    own = "stored_in = e.run_id"
    unknown = f"count(*) FILTER (WHERE {UNKNOWN_COST})"
    own_unknown = f"count(*) FILTER (WHERE {UNKNOWN_COST} AND {own})"
    return f"""
WITH agg AS (
    SELECT e.run_id, count(*) AS events,
           count(*) FILTER (WHERE {own}) AS own_events,
           count(*) FILTER (WHERE {_is(SPAN_STARTED)}) AS spans,
           count(*) FILTER (WHERE {_is(LLM_RESPONSE)}) AS llm_calls,
           count(*) FILTER (WHERE {_is(TOOL_RESULT)}) AS tool_calls,
           min(ts) AS started, max(ts) AS ended,
           -- first to last event, less the pause between a fork's cut and its first own event
           (epoch_us(max(ts)) - epoch_us(min(ts))
            - coalesce(greatest(0, epoch_us(max(ts) FILTER (WHERE seq = m.fork_seq + 1))
                                   - epoch_us(max(ts) FILTER (WHERE seq = m.fork_seq))), 0)
           ) / 1000.0 AS duration_ms,
           CAST(coalesce(sum(input_tokens), 0) AS BIGINT) AS input_tokens,
           CAST(coalesce(sum(output_tokens), 0) AS BIGINT) AS output_tokens,
           CAST(coalesce(sum(cached_tokens), 0) AS BIGINT) AS cached_tokens,
           {known_cost('cost_usd', unknown)} AS cost_usd,
           {unknown} AS cost_unknown_calls,
           {known_cost('cost_usd', own_unknown, where=own)} AS own_cost_usd,
           {own_unknown} AS own_cost_unknown_calls
    FROM {src} e JOIN {meta} m ON m.run_id = e.run_id GROUP BY e.run_id
)
SELECT m.run_id, m.name, m.status, m.created, m.tags, m.parent, m.fork_seq,
       coalesce(a.events, 0) AS events, coalesce(a.own_events, 0) AS own_events,
       coalesce(a.spans, 0) AS spans, coalesce(a.llm_calls, 0) AS llm_calls,
       coalesce(a.tool_calls, 0) AS tool_calls, a.started, a.ended, a.duration_ms,
       coalesce(a.input_tokens, 0) AS input_tokens, coalesce(a.output_tokens, 0) AS output_tokens,
       coalesce(a.cached_tokens, 0) AS cached_tokens,
       CASE WHEN a.run_id IS NULL THEN 0.0 ELSE a.cost_usd END AS cost_usd,
       coalesce(a.cost_unknown_calls, 0) AS cost_unknown_calls,
       CASE WHEN a.run_id IS NULL THEN 0.0 ELSE a.own_cost_usd END AS own_cost_usd,
       coalesce(a.own_cost_unknown_calls, 0) AS own_cost_unknown_calls,
       'not checked' AS verified
FROM {meta} m LEFT JOIN agg a ON a.run_id = m.run_id
ORDER BY m.ord
"""


def recompute_sql(src: str) -> str:
    """The recorded usage of every model answer, for pricing again (see
    :data:`~agentlog.analysis.columns.RECOMPUTED_COST`), plus ``priced_model`` and
    ``reasoning_tokens``."""
    R, U = LLMResponse, _USAGE
    usage = R.K.usage
    return f"""
SELECT seq, ts, model, input_tokens, output_tokens, cached_tokens,
       TRY_CAST({field(R, usage, U.cache_write_tokens)} AS BIGINT) AS cache_write_tokens,
       TRY_CAST({field(R, usage, U.reasoning_tokens)} AS BIGINT) AS reasoning_tokens,
       coalesce(model, {field(R, R.K.model)}) AS priced_model,
       cost_usd, {field(R, R.K.cost_source)} AS cost_source,
       coalesce({field(R, R.K.cache_hit)} = 'true', false) AS cache_hit
FROM {src} WHERE {_is(LLM_RESPONSE)} ORDER BY seq
"""
