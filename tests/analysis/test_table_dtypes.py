"""Every table has exactly its documented columns and dtypes, whatever the data (empty included)."""

from __future__ import annotations

from typing import Any

import pytest

import agentlog as al
from agentlog.analysis import columns as C

S, I, F, B, T = "string[pyarrow]", "int64[pyarrow]", "double[pyarrow]", "bool[pyarrow]", "datetime64[us, UTC]"

PINNED: dict[str, dict[str, str]] = {
    "events": {"seq": I, "type": S, "actor": S, "caused_by": I, "span_id": S, "ts": T, "model": S,
               "input_tokens": I, "output_tokens": I, "cached_tokens": I, "cost_usd": F,
               "duration_ms": F, "hash": S, "payload": S},
    "spans": {"span_id": S, "parent": S, "name": S, "kind": S, "depth": I, "start": T, "end": T,
              "duration_ms": F, "self_ms": F, "status": S, "error": S, "events": I, "start_seq": I,
              "end_seq": I, "model": S, "input_tokens": I, "output_tokens": I, "cached_tokens": I,
              "cost_usd": F, "cost_unknown_calls": I, "total_input_tokens": I,
              "total_output_tokens": I, "total_cached_tokens": I, "total_cost_usd": F,
              "total_cost_unknown_calls": I},
    "llm_calls": {"seq": I, "request_seq": I, "ts": T, "span_id": S, "actor": S, "model": S,
                  "input_tokens": I, "output_tokens": I, "cached_tokens": I, "cost_usd": F,
                  "cost_source": S, "latency_ms": F, "duration_ms": F, "cache_hit": B, "source": S,
                  "served_from_seq": I, "finish_reason": S, "error": S, "prompt_preview": S,
                  "response_preview": S},
    "tool_calls": {"seq": I, "call_seq": I, "ts": T, "span_id": S, "actor": S, "name": S,
                   "args_preview": S, "result_preview": S, "error": S, "duration_ms": F,
                   "latency_ms": F, "source": S, "served_from_seq": I},
    "cost": {"model": S, "actor": S, "span": S, "kind": S, "type": S, "day": "date32[day][pyarrow]",
             "calls": I, "llm_calls": I, "tool_calls": I, "input_tokens": I, "output_tokens": I,
             "cached_tokens": I, "cost_usd": F, "cost_unknown_calls": I},
    "tokens_over_time": {"seq": I, "ts": T, "type": S, "model": S, "input_tokens": I,
                         "output_tokens": I, "cached_tokens": I, "cost_usd": F, "cum_input_tokens": I,
                         "cum_output_tokens": I, "cum_cached_tokens": I, "cum_cost_usd": F,
                         "cum_cost_unknown_calls": I},
    "summary": {"run_id": S, "name": S, "status": S, "created": T, "tags": S, "parent": S,
                "fork_seq": I, "events": I, "own_events": I, "spans": I, "llm_calls": I,
                "tool_calls": I, "started": T, "ended": T, "duration_ms": F, "input_tokens": I,
                "output_tokens": I, "cached_tokens": I, "cost_usd": F, "cost_unknown_calls": I,
                "own_cost_usd": F, "own_cost_unknown_calls": I, "verified": S},
    "recompute_cost": {"seq": I, "ts": T, "model": S, "input_tokens": I, "output_tokens": I,
                       "cached_tokens": I, "cache_write_tokens": I, "cost_usd": F, "cost_source": S,
                       "cache_hit": B, "recomputed_usd": F, "recomputed_source": S, "delta_usd": F,
                       "detail": S},
    "diff": {"status": S, "seq_a": I, "seq_b": I, "type": S, "actor": S, "name": S, "summary": S},
}

SPECS = {"events": C.EVENTS, "spans": C.SPANS, "llm_calls": C.LLM_CALLS, "tool_calls": C.TOOL_CALLS,
         "cost": C.cost_spec(["model", "actor", "span", "kind", "type", "day"]),
         "tokens_over_time": C.TOKENS_OVER_TIME, "summary": C.RUNS,
         "recompute_cost": C.RECOMPUTED_COST, "diff": C.DIFF}


def tables(run: Any, other: Any) -> dict[str, Any]:
    return {"events": run.events, "spans": run.spans(), "llm_calls": run.llm_calls(),
            "tool_calls": run.tool_calls(),
            "cost": run.cost(by=("model", "actor", "span", "kind", "type", "day")),
            "tokens_over_time": run.tokens_over_time(), "summary": run.summary(),
            "recompute_cost": run.recompute_cost(), "diff": al.diff(other, run).table()}


def dtypes(frame: Any) -> dict[str, str]:
    return {name: str(dtype) for name, dtype in frame.dtypes.items()}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_specs_are_pinned(name: str) -> None:
    assert {c.name: str(c.dtype) for c in SPECS[name]} == PINNED[name]


def test_dtypes_of_a_recorded_run(agent_run: Any, agent_fork: Any) -> None:
    for name, frame in tables(agent_fork, agent_run).items():
        assert dtypes(frame) == PINNED[name], name
        assert len(frame) > 0, name


def test_dtypes_of_an_empty_run(store: Any) -> None:
    store.create_run(run_id="empty").close()
    empty = store.run("empty")
    for name, frame in tables(empty, empty).items():
        assert dtypes(frame) == PINNED[name], name


def test_store_tables_have_the_same_dtypes(store: Any, agent_run: Any) -> None:
    assert dtypes(store.runs()) == PINNED["summary"]
    assert dtypes(store.events()) == {"run_id": S, **PINNED["events"]}
    cost = store.cost(by=("run", "model", "day"))
    assert dtypes(cost) == {"run_id": S, "model": S, "day": "date32[day][pyarrow]",
                            **{k: v for k, v in PINNED["cost"].items() if k in [c.name for c in C.COST_VALUES]}}


def test_describe_lists_every_column() -> None:
    text = C.describe(C.SPANS)
    assert len(text.splitlines()) == len(C.SPANS) and "self_ms" in text
