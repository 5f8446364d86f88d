"""Benchmark the analysis layer: store-wide cost in DuckDB, spans of a long run, diffs of long runs.

    python bench/analysis.py [--quick]

Progress goes to stderr; one JSON line with the figures goes to stdout. Everything happens in
a temp dir. Times are medians of repeated trials, each on freshly opened runs (nothing cached).

- ``store.cost(by=("run", "model"))`` over a generated store of 2,000 runs x 1,000 events
  (2M events), against a plain pandas ``groupby`` over the same columns already in memory.
  The store is generated fast: a few template runs are written through the store's writer
  (``durability="none"``, one segment each) and their segment files copied under other run ids
  with a matching ``run.json``, so every run is a valid, verifiable run. Target: <= 3 s. The
  engine's query is also timed alone against plain sums (unknown costs read as 0), on one
  connection: the price of keeping unknown costs unknown.
- ``run.spans()`` on a 100,000-event run.
- ``run.cost(by="model")`` and ``run.cost(by=("kind", "span"))`` of the 100,000-event run, each on
  a freshly opened run (the call a user makes: loading the run's table included), computed by the
  one cost engine (DuckDB SQL over the run's Arrow table), against the pandas group-by that was
  the per-run engine before (reproduced here as the baseline, on the same fresh run); and
  ``run.summary()`` on a fresh run.
- ``al.diff`` of a 100,000-event run and a fork sharing its first 90,000 events, against a fork
  sharing only 10,000: the diff's work is in the events after the prefix, so the time must not
  grow with the prefix (the ratio 90k/10k stays <= 1). The state patch is computed on first
  use and timed apart (it folds the runs).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import logger, median_time

import agentlog as al
from agentlog.store.meta import read_meta, write_meta

MODELS = ("gpt-4o-mini", "gpt-4o", "claude-3-5-sonnet", "house-model-x")


log = logger("analysis")



# --- events of an agent-like run ------------------------------------------------------------------


def emit_steps(w: Any, n_events: int, rnd: random.Random, *, model: str, start_step: int = 0,
               variant: str = "") -> None:
    """Emit ``n_events`` events in 8-event steps: an llm span (request, response) and a tool span
    (call, result), under one agent span opened by the caller."""
    step = start_step
    emitted = 0
    while emitted < n_events:
        seq = w.seq
        block = [
            ("span.started", {"name": model, "kind": "llm", "parent": "root"}, {}),
            ("llm.request", {"key": f"k{step}", "model": model,
                             "messages": [{"role": "user", "content": f"step {step}{variant}"}]}, {}),
            ("llm.response", {"key": f"k{step}", "model": model, "cost_source": "computed",
                              "message": {"role": "assistant", "content": f"answer {step}{variant}"}},
             {"model": model, "input_tokens": rnd.randint(100, 4000), "output_tokens": rnd.randint(5, 400),
              "cached_tokens": rnd.randint(0, 100), "duration_ms": rnd.uniform(100, 2000),
              "cost_usd": None if model == "house-model-x" else rnd.uniform(1e-5, 1e-2)}),
            ("span.ended", {"name": model, "status": "ok", "error": None}, {}),
            ("span.started", {"name": "search", "kind": "tool", "parent": "root"}, {}),
            ("tool.call", {"key": f"t{step}", "name": "search", "args": {"q": f"q{step}"}}, {}),
            ("tool.result", {"key": f"t{step}", "name": "search", "result": f"r{step}{variant}"},
             {"duration_ms": rnd.uniform(1, 50)}),
            ("span.ended", {"name": "search", "status": "ok", "error": None}, {}),
        ]
        for k, (type_, payload, usage) in enumerate(block[: n_events - emitted]):
            span = f"s{seq}" if k < 4 else f"s{seq + 4}"  # the llm span, then the tool span
            w.emit(type_, payload, span_id=span, **usage)
        emitted += min(len(block), n_events - emitted)
        step += 1


def write_run(store: Any, run_id: str, n_events: int, seed: int, *, model: str) -> Any:
    w = store.create_run(run_id=run_id, durability="none", segment_events=max(n_events + 10, 1024))
    w.emit("span.started", {"name": "agent", "kind": "agent", "parent": None}, span_id="root")
    emit_steps(w, n_events - 2, random.Random(seed), model=model)
    w.emit("span.ended", {"name": "agent", "status": "ok", "error": None}, span_id="root")
    w.close("finished")
    return store.run(run_id)


# --- the store-wide cost --------------------------------------------------------------------------


def generate_store(root: Path, runs: int, events: int, templates: int = 20) -> float:
    store = al.Store(root)
    t0 = time.perf_counter()
    made = [write_run(store, f"tpl-{k:03d}", events, k, model=MODELS[k % len(MODELS)])
            for k in range(min(templates, runs))]
    for r in range(len(made), runs):
        tpl = made[r % len(made)]
        w = store.create_run(run_id=f"run-{r:05d}", durability="none")
        w.close()
        for seg in tpl.path.glob("events-*.parquet"):
            shutil.copyfile(seg, w.path / seg.name)
        done = read_meta(tpl.path)
        write_meta(w.path, dict(read_meta(w.path), head=done["head"], count=done["count"],
                                status="finished"), durable=False)
    return time.perf_counter() - t0


#: The store-wide cost query as it was before unknown costs stayed unknown: the same query with
#: plain sums (an unknown cost read as 0). The baseline of :func:`engine_over_plain_sums`.
PLAIN_SUMS = """
SELECT u.run_id AS run_id, u.model AS model, count(*) AS calls,
       count(*) FILTER (WHERE u.type = 'llm.response') AS llm_calls,
       count(*) FILTER (WHERE u.type = 'tool.result') AS tool_calls,
       CAST(coalesce(sum(u.input_tokens), 0) AS BIGINT) AS input_tokens,
       CAST(coalesce(sum(u.output_tokens), 0) AS BIGINT) AS output_tokens,
       CAST(coalesce(sum(u.cached_tokens), 0) AS BIGINT) AS cached_tokens,
       coalesce(sum(u.cost_usd), 0.0) AS cost_usd,
       count(*) FILTER (WHERE u.type = 'llm.response' AND u.cost_usd IS NULL) AS cost_unknown_calls
FROM (SELECT * FROM events WHERE (type IN ('llm.response', 'tool.result') OR input_tokens IS NOT NULL
      OR output_tokens IS NOT NULL OR cached_tokens IS NOT NULL OR cost_usd IS NOT NULL)) u
GROUP BY 1, 2 ORDER BY 1 NULLS LAST, 2 NULLS LAST
"""


def engine_over_plain_sums(store: Any, trials: int) -> dict[str, Any]:
    """The cost engine's query against plain sums, on one connection (scan and connect apart):
    what keeping unknown costs unknown costs."""
    from agentlog.analysis.queries import cost_sql
    from agentlog.analysis.storewide import connect

    con = connect(store)
    try:
        engine = cost_sql("events", "run_events", ("run", "model"))
        for query in (engine, PLAIN_SUMS):  # both warm: the files are read once before timing
            con.sql(query).to_arrow_table()
        mine_times, plain_times = [], []
        for _ in range(max(trials, 5)):  # interleaved, so both see the same machine
            mine_times.append(median_time(1, lambda: con.sql(engine).to_arrow_table()))
            plain_times.append(median_time(1, lambda: con.sql(PLAIN_SUMS).to_arrow_table()))
        mine, plain = statistics.median(mine_times), statistics.median(plain_times)
    finally:
        con.close()
    log(f"query alone: engine {mine:.3f} s, plain sums {plain:.3f} s")
    return {"cost_query_s": round(mine, 3), "cost_plain_sums_query_s": round(plain, 3),
            "cost_query_over_plain_sums": round(mine / plain, 2)}


def bench_cost(root: Path, runs: int, events: int, trials: int) -> dict[str, Any]:
    log(f"generating {runs:,} runs x {events:,} events")
    gen = generate_store(root, runs, events)
    store = al.Store(root)
    log(f"generated in {gen:.1f} s; store.cost(by=('run', 'model')) in DuckDB")
    cold = median_time(1, lambda: store.cost(by=("run", "model")))
    duck = median_time(trials, lambda: store.cost(by=("run", "model")))
    result = store.cost(by=("run", "model"))
    log("loading the same columns into pandas for the baseline")
    t0 = time.perf_counter()
    frame = store.events(columns=["type", "model", "input_tokens", "output_tokens", "cached_tokens",
                                  "cost_usd"])
    load = time.perf_counter() - t0
    values = ["input_tokens", "output_tokens", "cached_tokens", "cost_usd"]

    def pandas_cost() -> Any:
        return frame.groupby(["run_id", "model"], dropna=False, sort=True, observed=True)[values].sum()

    pandas = median_time(trials, pandas_cost)
    baseline = pandas_cost()
    sql_ratio = engine_over_plain_sums(store, trials)
    assert abs(float(baseline["input_tokens"].sum()) - float(result["input_tokens"].sum())) < 1
    total = len(frame)
    log(f"duckdb {duck:.3f} s (cold {cold:.3f} s), pandas groupby {pandas:.3f} s on {total:,} events")
    return {"cost_events": total, "cost_runs": runs, "cost_generate_s": round(gen, 2),
            "cost_duckdb_s": round(duck, 3), "cost_duckdb_cold_s": round(cold, 3),
            "cost_pandas_groupby_s": round(pandas, 3), "cost_pandas_load_s": round(load, 3),
            "cost_duckdb_over_pandas": round(duck / pandas, 2), **sql_ratio, "cost_target_s": 3.0,
            "cost_within_target": duck <= 3.0}


# --- spans and diffs of long runs ----------------------------------------------------------------


def fork_with_tail(store: Any, parent: Any, at: int, run_id: str) -> Any:
    """A fork sharing ``parent``'s events ``0..at`` whose own events follow the same steps, with
    one tool result in 50 changed and an extra event every 1,000 events."""
    w = store.create_run(run_id=run_id, fork_of=(parent.id, at), durability="none",
                         segment_events=len(parent) + 10)
    remaining = len(parent) - (at + 1) - 1
    rnd = random.Random(7)
    first_step = (at + 1 - 1) // 8
    chunk = 1000
    done = 0
    while done < remaining:
        n = min(chunk, remaining - done)
        emit_steps(w, n, rnd, model=MODELS[0], start_step=first_step + done // 8,
                   variant="" if (done // chunk) % 50 else "*")
        done += n
        if done < remaining:
            w.emit("note", {"text": "an extra event"})
            done += 1
    w.emit("span.ended", {"name": "agent", "status": "ok", "error": None}, span_id="root")
    w.close("finished")
    return store.run(run_id)


def pandas_run_cost(run: Any, keys: tuple[str, ...]) -> Any:
    """The per-run cost engine before DuckDB (pandas group-by over ``run.events``), kept here as
    the baseline: the same groups and sums, unknown costs counted apart."""
    import pandas as pd

    ev = run.events
    llm = (ev["type"] == "llm.response").fillna(False)
    tool = (ev["type"] == "tool.result").fillna(False)
    usage = ev[["input_tokens", "output_tokens", "cached_tokens", "cost_usd"]]
    rows = (llm | tool | usage.notna().any(axis=1)).to_numpy(dtype=bool)
    ev, llm, tool = ev[rows], llm[rows], tool[rows]
    data = pd.DataFrame({
        "calls": 1, "llm_calls": llm.astype("int64"), "tool_calls": tool.astype("int64"),
        "input_tokens": ev["input_tokens"].fillna(0), "output_tokens": ev["output_tokens"].fillna(0),
        "cached_tokens": ev["cached_tokens"].fillna(0), "cost_usd": ev["cost_usd"],
        "cost_unknown_calls": (llm & ev["cost_usd"].isna()).astype("int64")}, index=ev.index)
    if "span" in keys or "kind" in keys:
        names = run.spans().set_index("span_id")
        data["span"] = ev["span_id"].map(names["name"])
        data["kind"] = ev["span_id"].map(names["kind"])
    for key in keys:
        if key not in data:
            data[key] = ev[key]
    return data.groupby(list(keys), dropna=False, sort=True, observed=True).sum(min_count=1)


def bench_run_cost(store: Any, run_id: str, trials: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, keys in (("model", ("model",)), ("kind_span", ("kind", "span"))):
        sql = median_time(trials, lambda keys=keys: store.run(run_id).cost(by=keys))
        pandas = median_time(trials, lambda keys=keys: pandas_run_cost(store.run(run_id), keys))
        mine, base = store.run(run_id).cost(by=keys), pandas_run_cost(store.run(run_id), keys)
        assert len(mine) == len(base) and int(mine["input_tokens"].sum()) == int(base["input_tokens"].sum())
        log(f"run.cost(by={keys}): one engine (DuckDB) {sql:.3f} s, old pandas engine {pandas:.3f} s")
        out |= {f"run_cost_{label}_s": round(sql, 3), f"run_cost_{label}_pandas_s": round(pandas, 3),
                f"run_cost_{label}_over_pandas": round(sql / pandas, 2)}
    summary = median_time(trials, lambda: store.run(run_id).summary())
    log(f"run.summary(): {summary:.3f} s")
    return {**out, "run_summary_s": round(summary, 3)}


def bench_long_runs(root: Path, n: int, trials: int) -> dict[str, Any]:
    store = al.Store(root)
    log(f"writing a {n:,}-event run")
    base = write_run(store, "long", n, 1, model=MODELS[0])

    def spans_fresh() -> Any:
        return store.run("long").spans()

    spans_s = median_time(trials, spans_fresh)
    loaded = store.run("long")
    loaded.table()
    from agentlog.analysis import columns as C
    from agentlog.analysis.queries import spans_sql
    from agentlog.analysis.tables import run_query
    spans_compute = median_time(trials, lambda: run_query(loaded, spans_sql, C.SPANS))
    n_spans = len(spans_fresh())
    log(f"spans(): {spans_s:.3f} s ({n_spans:,} spans; {spans_compute:.3f} s with the table in memory)")

    run_cost = bench_run_cost(store, "long", trials)

    long_prefix, short_prefix = n * 9 // 10, n // 10
    log(f"writing forks sharing {long_prefix:,} and {short_prefix:,} events")
    f_long = fork_with_tail(store, base, long_prefix - 1, "fork-long-prefix")
    f_short = fork_with_tail(store, base, short_prefix - 1, "fork-short-prefix")

    def diff_of(fork_id: str) -> Any:
        return al.diff(store.run("long"), store.run(fork_id))

    d_long = diff_of(f_long.id)
    d_short = diff_of(f_short.id)
    assert d_long.prefix == long_prefix and d_short.prefix == short_prefix
    t_long = median_time(trials, lambda: diff_of(f_long.id))
    t_short = median_time(trials, lambda: diff_of(f_short.id))
    log(f"diff: {t_long:.3f} s sharing {long_prefix:,}, {t_short:.3f} s sharing {short_prefix:,}")
    p_long = median_time(1, lambda: diff_of(f_long.id).state_patch)
    p_short = median_time(1, lambda: diff_of(f_short.id).state_patch)
    log(f"diff + state patch: {p_long:.3f} s and {p_short:.3f} s")
    return {**run_cost, "spans_events": n, "spans_count": n_spans, "spans_s": round(spans_s, 3),
            "spans_in_memory_s": round(spans_compute, 3),
            "diff_events": n, "diff_prefix_long": long_prefix, "diff_prefix_short": short_prefix,
            "diff_long_prefix_s": round(t_long, 3), "diff_short_prefix_s": round(t_short, 3),
            "diff_ratio_long_over_short": round(t_long / t_short, 2),
            "diff_rows_long_prefix": len(d_long.table()), "diff_rows_short_prefix": len(d_short.table()),
            "diff_with_state_patch_long_prefix_s": round(p_long, 3),
            "diff_with_state_patch_short_prefix_s": round(p_short, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args()
    runs, events, long_n, trials = (200, 1000, 20_000, 2) if args.quick else (2000, 1000, 100_000, 3)
    tmp = Path(tempfile.mkdtemp(prefix="agentlog-bench-analysis-"))
    try:
        figures: dict[str, Any] = {"bench": "analysis", "quick": args.quick}
        figures.update(bench_cost(tmp / "many", runs, events, trials))
        figures.update(bench_long_runs(tmp / "long", long_n, trials))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
