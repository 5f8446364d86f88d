"""The fleet tables on a real dask.distributed LocalCluster (2 worker processes) reading a store
on moto's S3 server: the cost table by every key equals DuckDB's, and a pandas oracle's, to the
cent; the LLM-calls frame equals DuckDB's table and the per-run tables row for row."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import agentlog as al
from agentlog.analysis import columns as C
from agentlog.testing.fleet import fleet_store


@pytest.fixture(scope="module")
def cluster(s3_vars: dict[str, str]) -> Iterator[Any]:
    """A 2-process LocalCluster whose workers see the S3 environment, with a client. Its
    dashboard takes a free port (the default, 8787, may be held by another cluster on the
    machine: dask then warns, and warnings fail the suite)."""
    from dask.distributed import Client, LocalCluster

    with pytest.MonkeyPatch.context() as mp:
        for key, value in s3_vars.items():
            mp.setenv(key, value)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
                Client(c) as client:
            yield client


def _team(path: Path) -> al.Store:
    """A fleet of span-shaped runs (failed calls among them), a fork whose first own answer
    sits in a span that started in its parent's prefix, and a run whose span's end tells its
    kind (a framework's span written live)."""
    local = fleet_store(path, runs=8, calls=12, segment_events=40, spans=True)
    ev = local.run("fleet-00003").events
    cut = int(ev[(ev["type"] == "llm.request") & (ev["span_id"] == "llm-5")]["seq"].iloc[0])
    from agentlog.events import LLMResponse, SpanEnded, Usage
    with local.create_run(run_id="fork-of-3", fork_of=("fleet-00003", cut), durability="none") as w:
        w.emit(LLMResponse(key="edited", model="gpt-4o", usage=Usage(input_tokens=7, output_tokens=3),
                           cost_usd=0.125, cost_source="computed",
                           message={"role": "assistant", "content": "  an   edited\nanswer "}),
               span_id="llm-5", actor="agent", caused_by=cut)
        w.emit(SpanEnded(name="gpt-4o"), span_id="llm-5", actor="agent")
    from agentlog.events import SpanStarted
    with local.create_run(run_id="late-kind", durability="none") as w:  # a span whose end tells its kind
        w.emit(SpanStarted(name="ChatOpenAI", kind="chain"), span_id="lc", actor="agent")
        w.emit(LLMResponse(key="late", model="gpt-4o", usage=Usage(input_tokens=5, output_tokens=2), cost_usd=0.5,
                           cost_source="computed", message={"role": "assistant", "content": "ok"}),
               span_id="lc", actor="agent")
        w.emit(SpanEnded(name="ChatOpenAI", kind="llm"), span_id="lc", actor="agent")
    return local


def _spans_of(local: al.Store) -> pd.DataFrame:
    """(run_id, span_id, span, kind) from each run as read (its fork prefix included): the first
    span.started of each span, its payload as pandas flattens it."""
    frames = []
    for run_id in local.list_runs():
        started = local.run(run_id).events_expanded("span.started").sort_values("seq")
        started = started.drop_duplicates("span_id", keep="first")
        kinds = dict(zip(started["span_id"], started["kind"], strict=True))
        ended = local.run(run_id).events_expanded("span.ended").sort_values("seq").drop_duplicates("span_id")
        if "kind" in ended:  # the end's kind, when it tells one, is the span's
            kinds.update({s: k for s, k in zip(ended["span_id"], ended["kind"], strict=True) if isinstance(k, str)})
        frames.append(pd.DataFrame({"run_id": run_id, "span_id": started["span_id"].astype(object),
                                    "span": started["name"].astype(object),
                                    "kind": started["span_id"].map(kinds).astype(object)}))
    return pd.concat(frames, ignore_index=True)


def _oracle(local: al.Store, by: list[str]) -> pd.DataFrame:
    """The cost table from the events, in plain pandas (what the columns mean, computed again)."""
    ev = local.events()
    usage = ev[ev["type"].isin(["llm.response", "tool.result"])
               | ev[["input_tokens", "output_tokens", "cached_tokens", "cost_usd"]].notna().any(axis=1)]
    usage = usage.assign(day=usage["ts"].dt.tz_convert("UTC").dt.date, run_id=usage["run_id"].astype(object),
                         span_id=usage["span_id"].astype(object))
    usage = usage.merge(_spans_of(local), how="left", on=["run_id", "span_id"])
    rows = []
    for key, g in usage.groupby(by, dropna=False, sort=True):
        llm = g["type"] == "llm.response"
        unknown = int((llm & g["cost_usd"].isna()).sum())
        known = g["cost_usd"].dropna()
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                     "llm_calls": int(llm.sum()), "input_tokens": int(g["input_tokens"].fillna(0).sum()),
                     "cost_usd": None if unknown and known.empty else float(known.sum()),
                     "cost_unknown_calls": unknown})
    return pd.DataFrame(rows)


def _cents(frame: pd.DataFrame) -> list[Any]:
    return [None if pd.isna(v) else round(float(v), 2) for v in frame["cost_usd"]]


def _keys(frame: pd.DataFrame, names: list[str]) -> list[list[str]]:
    return [["<NA>" if pd.isna(v) else str(v) for v in row] for row in frame[names].itertuples(index=False)]


#: Every key the DuckDB engine takes, alone, and the groupings a dashboard asks for.
BY = [[k] for k in ("run", "model", "actor", "span", "kind", "type", "day")] + [
    ["run", "model", "day"], ["run", "span", "kind"]]


def test_dask_equals_duckdb_and_pandas_to_the_cent(tmp_path: Path, cluster: Any, bucket: str,
                                                   s3_env: dict[str, str]) -> None:
    local = _team(tmp_path / "local")
    url = f"{bucket}/fleet"
    local.push(url)
    remote = al.Store(url)
    assert {BY[i][0] for i in range(7)} == set(C.COST_KEYS)  # every key of the one cost engine
    tables: dict[tuple[str, ...], pd.DataFrame] = {}
    for by in BY:
        duck = remote.cost(by)
        dask = tables[tuple(by)] = remote.cost(by, engine="dask")
        pd.testing.assert_frame_equal(dask, duck, check_exact=False, rtol=1e-9)
        names = ["run_id" if k == "run" else k for k in by]
        oracle = _oracle(local, names)
        assert _keys(dask, names) == _keys(oracle, names), by
        assert dask["llm_calls"].tolist() == oracle["llm_calls"].tolist()
        assert dask["input_tokens"].tolist() == oracle["input_tokens"].tolist()
        assert dask["cost_unknown_calls"].tolist() == oracle["cost_unknown_calls"].tolist()
        assert _cents(dask) == _cents(oracle) == _cents(duck)
    # the fork's own answer is in a span that started in its parent's prefix: found by name
    started = local.run("fleet-00003").events_expanded("span.started")
    name = started[started["span_id"] == "llm-5"]["name"].iloc[0]
    fork = tables["run", "span", "kind"]
    fork = fork[fork["run_id"] == "fork-of-3"]
    assert fork[["span", "kind", "cost_usd"]].values.tolist() == [[name, "llm", 0.125]]
    late = tables["run", "span", "kind"]
    assert late[late["run_id"] == "late-kind"][["span", "kind", "cost_usd"]].values.tolist() == [["ChatOpenAI", "llm", 0.5]]
    # unknown costs stay unknown: the unpriced model's span has no cost, and counts its calls
    by_span = tables["span",].set_index("span")
    assert pd.isna(by_span.loc["local-llama", "cost_usd"]) and by_span.loc["local-llama", "cost_unknown_calls"] > 0
    assert round(float(by_span["cost_usd"].sum()), 2) == round(float(local.events()["cost_usd"].sum()), 2)


def _llm_calls_duckdb(store: al.Store) -> pd.DataFrame:
    spec = [C.Column("run_id", pa.string(), ""), *C.LLM_CALLS]
    return C.to_frame(pa.Table.from_pandas(store.sql("select * from llm_calls"), preserve_index=False), spec)


def _llm_calls_per_run(store: al.Store) -> pd.DataFrame:
    """Each run's own ``run.llm_calls()`` (the per-run pandas path), with its id."""
    frames = [store.run(r).llm_calls().assign(run_id=r) for r in store.list_runs()]
    table = pd.concat(frames, ignore_index=True)
    return table[["run_id", *[c.name for c in C.LLM_CALLS]]]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["run_id", "seq"]).reset_index(drop=True)


def test_to_dask_llm_calls_is_the_llm_calls_table(tmp_path: Path, cluster: Any, bucket: str,
                                                  s3_env: dict[str, str]) -> None:
    local = _team(tmp_path / "local")
    url = f"{bucket}/calls"
    local.push(url)
    for store in (local, al.Store(url)):
        calls = _sorted(store.to_dask("llm_calls").compute())
        assert list(calls.columns) == ["run_id", *[c.name for c in C.LLM_CALLS]]
        duck = _sorted(_llm_calls_duckdb(store))
        pd.testing.assert_frame_equal(calls, duck)
        pd.testing.assert_frame_equal(calls, _sorted(_llm_calls_per_run(local)), check_dtype=False)
    # what the rows hold, from the inputs: 9 runs as read (the fork's prefix included), failed
    # calls as rows with their error, the fork's edited answer folded into its preview
    assert set(calls["run_id"]) == set(local.list_runs())
    assert (calls["error"].notna() == calls["cost_source"].isna()).all()
    assert calls["error"].notna().sum() == sum(int((local.run(r).events["type"] == "error").sum())
                                               for r in local.list_runs())
    edited = calls[calls["run_id"] == "fork-of-3"].iloc[-1]
    assert edited["response_preview"] == "an edited answer" and edited["prompt_preview"] == "question 5 of run 3"
    some = store.to_dask("llm_calls", columns=["model", "cost_usd"]).compute()
    assert list(some.columns) == ["run_id", "model", "cost_usd"] and len(some) == len(calls)
    with pytest.raises(ValueError, match="'payload'"):
        store.to_dask("llm_calls", columns=["payload"])


def test_to_dask_reads_events_and_llm_calls(tmp_path: Path, cluster: Any) -> None:
    local = fleet_store(tmp_path / "local", runs=6, calls=10, segment_events=7)
    events = local.to_dask().compute().sort_values(["run_id", "seq"]).reset_index(drop=True)
    want = local.events()
    assert events["seq"].tolist() == want["seq"].tolist() and events["run_id"].tolist() == want["run_id"].tolist()
    assert events["hash"].tolist() == want["hash"].tolist()
    calls = local.to_dask("llm_calls").compute()
    assert len(calls) == 60 and set(calls["source"]) == {"live"}
    assert calls["cost_usd"].sum() == pytest.approx(want["cost_usd"].sum())
    pd.testing.assert_frame_equal(local.cost(["actor", "type"], engine="dask"), local.cost(["actor", "type"]))
    total = local.cost([], engine="dask")
    assert total["cost_usd"][0] == pytest.approx(want["cost_usd"].sum())
    # no spans recorded: every usage row's span is unknown, in both engines
    pd.testing.assert_frame_equal(local.cost(["span", "kind"], engine="dask"), local.cost(["span", "kind"]))
    assert local.cost("span", engine="dask")["span"].isna().all()
    with pytest.raises(ValueError, match="spark"):
        local.cost("model", engine="spark")
    with pytest.raises(ValueError, match="'where'"):
        local.cost("where", engine="dask")


def test_dask_includes_the_tail_of_an_open_run(tmp_path: Path, cluster: Any) -> None:
    from agentlog.events import LLMRequest, LLMResponse, SpanStarted, Usage
    local = fleet_store(tmp_path / "local", runs=2, calls=5)
    w = local.create_run(run_id="open", segment_events=4)
    w.emit(SpanStarted(name="planner", kind="agent"), span_id="p")
    for i in range(5):  # one sealed segment of 4 events, 7 in the WAL
        ask = w.emit(LLMRequest(key=f"o{i}", model="gpt-4o", messages=[{"role": "user", "content": f"q{i}"}]),
                     span_id="p")
        w.emit(LLMResponse(key=f"o{i}", model="gpt-4o", usage=Usage(input_tokens=10), cost_usd=0.25,
                           cost_source="computed"), span_id="p", caused_by=ask.seq)
    # a fork of the open run, cut inside its WAL tail, answering in the tail's span
    fork = local.create_run(run_id="fork-of-open", fork_of=("open", 8))
    fork.emit(LLMResponse(key="f", model="gpt-4o", usage=Usage(input_tokens=1), cost_usd=0.5,
                          cost_source="computed"), span_id="p")
    try:
        assert w.seq == 11 and len(local.run("open")._snapshot().tail) > 0  # 11 events, some in the WAL
        for by in ("run", ["run", "span", "kind"]):
            pd.testing.assert_frame_equal(local.cost(by, engine="dask"), local.cost(by))
        assert local.cost("run", engine="dask").set_index("run_id").loc["open", "cost_usd"] == 1.25
        spans = local.cost(["run", "span"], engine="dask")
        assert spans[spans["run_id"] == "fork-of-open"][["span", "cost_usd"]].values.tolist() == [["planner", 0.5]]
        calls = _sorted(local.to_dask("llm_calls").compute())
        pd.testing.assert_frame_equal(calls, _sorted(_llm_calls_duckdb(local)))
        assert calls[calls["run_id"] == "fork-of-open"]["seq"].tolist() == [2, 4, 6, 8, 9]
    finally:
        fork.close()
        w.close()
