"""The SQL of the derived tables, written once over any relation of events with a ``run_id``.

Each function takes ``src``, a relation with the event columns plus ``run_id`` (one run's
table, or the store's ``run_events`` view), and returns a query. The per-run methods run these
queries over one run's Arrow table; the store's DuckDB views are the same queries over every
run, so ``run.spans()`` and ``store.sql("select * from spans")`` cannot disagree.

The payload is canonical JSON text; DuckDB's JSON functions read the few fields a table needs
in C, a column at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["LLM_RESPONSE_ROWS", "USAGE_ROWS", "cost_sql", "llm_calls_sql", "spans_sql",
           "tool_calls_sql"]

PREVIEW: Final = 80  # characters of a preview

#: The events that carry usage: model answers, tool results, and any event with a usage value.
USAGE_ROWS: Final = ("(type IN ('llm.response', 'tool.result') OR input_tokens IS NOT NULL "
                     "OR output_tokens IS NOT NULL OR cached_tokens IS NOT NULL "
                     "OR cost_usd IS NOT NULL)")
#: A model answer whose cost is unknown (never counted as 0).
UNKNOWN_COST: Final = "(type = 'llm.response' AND cost_usd IS NULL)"
LLM_RESPONSE_ROWS: Final = "(type = 'llm.response')"


def _cut(expr: str, n: int = PREVIEW) -> str:
    """Whitespace folded to single spaces, cut to ``n`` characters with a trailing ``…``."""
    folded = f"regexp_replace(trim({expr}), '\\s+', ' ', 'g')"
    return f"(CASE WHEN length({folded}) > {n} THEN left({folded}, {n - 1}) || '…' ELSE {folded} END)"


def _text_of(v: str) -> str:
    """Readable text of a JSON value: a string as is, text blocks joined, a blob as a note."""
    blob = f"json_extract_string({v}, '$.\"$blob\"')"
    return (f"(CASE json_type({v}) WHEN 'VARCHAR' THEN json_extract_string({v}, '$') "
            f"WHEN 'NULL' THEN NULL "
            f"WHEN 'ARRAY' THEN coalesce(nullif(array_to_string(json_extract_string({v}, '$[*].text'), ' '), ''), "
            f"CAST({v} AS VARCHAR)) "
            f"WHEN 'OBJECT' THEN CASE WHEN {blob} IS NOT NULL THEN '[blob ' || {blob} || ', ' || "
            f"coalesce(json_extract_string({v}, '$.size'), '?') || ' bytes]' ELSE CAST({v} AS VARCHAR) END "
            f"ELSE CAST({v} AS VARCHAR) END)")


def _source(payload: str) -> str:
    """``edit`` / ``log`` / ``live``: how an answer came about."""
    return (f"(CASE WHEN json_extract_string({payload}, '$.edited') = 'true' THEN 'edit' "
            f"WHEN json_extract_string({payload}, '$.served_from_seq') IS NOT NULL THEN 'log' "
            f"ELSE 'live' END)")


def _ms(later: str, earlier: str) -> str:
    return f"((epoch_us({later}) - epoch_us({earlier})) / 1000.0)"


def spans_sql(src: str) -> str:
    """The span tree (columns of :data:`~agentlog.analysis.columns.SPANS`, plus ``run_id``).

    - A span is a ``span.started`` (its ``span_id``, payload ``name``, ``kind``, ``parent``)
      and the first ``span.ended`` with the same ``span_id`` (``status``, ``error``).
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
    SELECT run_id, span_id, seq AS start_seq, ts AS start_ts,
           json_extract_string(payload, '$.name') AS name,
           json_extract_string(payload, '$.kind') AS kind,
           json_extract_string(payload, '$.parent') AS parent
    FROM {src} WHERE type = 'span.started' AND span_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY run_id, span_id ORDER BY seq) = 1
),
en AS (
    SELECT run_id, span_id, seq AS end_seq, ts AS end_ts,
           json_extract_string(payload, '$.status') AS status,
           json_extract_string(payload, '$.error') AS error
    FROM {src} WHERE type = 'span.ended' AND span_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY run_id, span_id ORDER BY seq) = 1
),
own AS (
    SELECT run_id, span_id, count(*) AS events,
           CAST(coalesce(sum(input_tokens), 0) AS BIGINT) AS input_tokens,
           CAST(coalesce(sum(output_tokens), 0) AS BIGINT) AS output_tokens,
           CAST(coalesce(sum(cached_tokens), 0) AS BIGINT) AS cached_tokens,
           coalesce(sum(cost_usd), 0.0) AS cost_usd,
           count(*) FILTER (WHERE {UNKNOWN_COST}) AS cost_unknown_calls,
           arg_min(model, seq) FILTER (WHERE type = 'llm.response' AND model IS NOT NULL) AS model
    FROM {src} WHERE span_id IS NOT NULL GROUP BY run_id, span_id
),
last_ts AS (SELECT run_id, max(ts) AS last_ts FROM {src} GROUP BY run_id),
s AS (
    SELECT st.run_id, st.span_id, st.parent, st.name, st.kind, st.start_ts, st.start_seq,
           en.end_seq, coalesce(en.end_ts, l.last_ts) AS end_ts,
           CASE WHEN en.end_seq IS NULL THEN 'open' ELSE coalesce(en.status, 'ok') END AS status,
           en.error, coalesce(o.events, 0) AS events, o.model,
           coalesce(o.input_tokens, 0) AS input_tokens, coalesce(o.output_tokens, 0) AS output_tokens,
           coalesce(o.cached_tokens, 0) AS cached_tokens, coalesce(o.cost_usd, 0.0) AS cost_usd,
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
           sum(d.cost_usd) AS total_cost_usd,
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
    messages = "json_extract(q.payload, '$.messages[*]')"
    last_user = f"list_filter({messages}, lambda m: json_extract_string(m, '$.role') = 'user')[-1]"
    prompt = f"json_extract(coalesce({last_user}, {messages}[-1]), '$.content')"
    content = _text_of("json_extract(r.payload, '$.message.content')")
    calls = "array_to_string(json_extract_string(r.payload, '$.message.tool_calls[*].function.name'), ', ')"
    plain = _text_of("json_extract(r.payload, '$.content')")
    response = (f"CASE WHEN r.type = 'error' THEN NULL ELSE coalesce({content}, "
                f"'tool calls: ' || nullif({calls}, ''), {plain}) END")
    return f"""
WITH
r AS (
    SELECT * FROM {src}
    WHERE type = 'llm.response'
       OR (type = 'error' AND json_extract_string(payload, '$.kind') = 'llm.response')
),
q AS (SELECT run_id, seq, ts, payload FROM {src} WHERE type = 'llm.request')
SELECT r.run_id, r.seq, r.caused_by AS request_seq, r.ts, r.span_id, r.actor,
       coalesce(r.model, json_extract_string(r.payload, '$.model'),
                json_extract_string(q.payload, '$.model')) AS model,
       r.input_tokens, r.output_tokens, r.cached_tokens, r.cost_usd,
       CASE WHEN r.type = 'error' THEN NULL
            ELSE json_extract_string(r.payload, '$.cost_source') END AS cost_source,
       {_ms('r.ts', 'q.ts')} AS latency_ms, r.duration_ms,
       coalesce(json_extract_string(r.payload, '$.cache_hit') = 'true', false) AS cache_hit,
       {_source('r.payload')} AS source,
       TRY_CAST(json_extract_string(r.payload, '$.served_from_seq') AS BIGINT) AS served_from_seq,
       json_extract_string(r.payload, '$.finish_reason') AS finish_reason,
       CASE WHEN r.type = 'error' THEN json_extract_string(r.payload, '$.error') END AS error,
       {_cut(_text_of(prompt))} AS prompt_preview,
       {_cut(response)} AS response_preview
FROM r LEFT JOIN q ON q.run_id = r.run_id AND q.seq = r.caused_by
ORDER BY r.run_id, r.seq
"""


def tool_calls_sql(src: str) -> str:
    """One row per ``tool.result``, joined to its ``tool.call`` by ``caused_by``; columns of
    :data:`~agentlog.analysis.columns.TOOL_CALLS` plus ``run_id``."""
    return f"""
WITH
r AS (SELECT * FROM {src} WHERE type = 'tool.result'),
c AS (SELECT run_id, seq, ts, payload FROM {src} WHERE type = 'tool.call')
SELECT r.run_id, r.seq, r.caused_by AS call_seq, r.ts, r.span_id, r.actor,
       coalesce(json_extract_string(r.payload, '$.name'), json_extract_string(c.payload, '$.name')) AS name,
       {_cut("CAST(json_extract(c.payload, '$.args') AS VARCHAR)")} AS args_preview,
       {_cut(_text_of("json_extract(r.payload, '$.result')"))} AS result_preview,
       json_extract_string(r.payload, '$.error') AS error,
       r.duration_ms, {_ms('r.ts', 'c.ts')} AS latency_ms,
       {_source('r.payload')} AS source,
       TRY_CAST(json_extract_string(r.payload, '$.served_from_seq') AS BIGINT) AS served_from_seq
FROM r LEFT JOIN c ON c.run_id = r.run_id AND c.seq = r.caused_by
ORDER BY r.run_id, r.seq
"""


#: SQL of each ``cost(by=...)`` key over a usage row ``u`` and its span ``sp``.
KEY_SQL: Final = {
    "run": "u.run_id", "model": "u.model", "actor": "u.actor", "type": "u.type",
    "day": "CAST(u.ts AS DATE)", "span": "sp.name", "kind": "sp.kind",
}


def cost_sql(usage_src: str, span_src: str, keys: Sequence[str]) -> str:
    """Usage summed by ``keys`` (see :data:`~agentlog.analysis.columns.COST_KEYS`).

    ``usage_src`` holds the events whose usage is counted; ``span_src`` the events where their
    spans' ``span.started`` are found (for a fork, its parent prefix too).
    """
    exprs = [f"{KEY_SQL[k]} AS {'run_id' if k == 'run' else k}" for k in keys]
    join = ""
    if "span" in keys or "kind" in keys:
        join = f"""LEFT JOIN (
    SELECT run_id, span_id, json_extract_string(payload, '$.name') AS name,
           json_extract_string(payload, '$.kind') AS kind
    FROM {span_src} WHERE type = 'span.started' AND span_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY run_id, span_id ORDER BY seq) = 1
) sp ON sp.run_id = u.run_id AND sp.span_id = u.span_id"""
    group = f"GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}" if keys else ""
    order = f"ORDER BY {', '.join(f'{i + 1} NULLS LAST' for i in range(len(keys)))}" if keys else ""
    select = ", ".join([*exprs, "count(*) AS calls",
                        "count(*) FILTER (WHERE u.type = 'llm.response') AS llm_calls",
                        "count(*) FILTER (WHERE u.type = 'tool.result') AS tool_calls",
                        "CAST(coalesce(sum(u.input_tokens), 0) AS BIGINT) AS input_tokens",
                        "CAST(coalesce(sum(u.output_tokens), 0) AS BIGINT) AS output_tokens",
                        "CAST(coalesce(sum(u.cached_tokens), 0) AS BIGINT) AS cached_tokens",
                        "coalesce(sum(u.cost_usd), 0.0) AS cost_usd",
                        ("count(*) FILTER (WHERE u.type = 'llm.response' AND u.cost_usd IS NULL) "
                         "AS cost_unknown_calls")])
    return f"""
SELECT {select}
FROM (SELECT * FROM {usage_src} WHERE {USAGE_ROWS}) u
{join}
{group}
{order}
"""
