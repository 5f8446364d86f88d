"""The fleet cost table on a real dask.distributed LocalCluster (2 worker processes) reading a
store on moto's S3 server: it equals DuckDB's, and a pandas oracle's, to the cent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import agentlog as al
from agentlog.testing.fleet import fleet_store


@pytest.fixture(scope="module")
def cluster(s3_vars: dict[str, str]) -> Iterator[Any]:
    """A 2-process LocalCluster whose workers see the S3 environment, with a client."""
    from dask.distributed import Client, LocalCluster

    with pytest.MonkeyPatch.context() as mp:
        for key, value in s3_vars.items():
            mp.setenv(key, value)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
                Client(c) as client:
            yield client


def _oracle(local: al.Store, by: list[str]) -> pd.DataFrame:
    """The cost table from the events, in plain pandas (what the columns mean, computed again)."""
    ev = local.events()
    usage = ev[ev["type"].isin(["llm.response", "tool.result"])
               | ev[["input_tokens", "output_tokens", "cached_tokens", "cost_usd"]].notna().any(axis=1)]
    usage = usage.assign(day=usage["ts"].dt.tz_convert("UTC").dt.date)
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


def test_dask_equals_duckdb_and_pandas_to_the_cent(tmp_path: Path, cluster: Any, bucket: str,
                                                   s3_env: dict[str, str]) -> None:
    local = fleet_store(tmp_path / "local", runs=16, calls=30, segment_events=40)
    url = f"{bucket}/fleet"
    local.push(url)
    remote = al.Store(url)
    for by in (["run", "model", "day"], ["model"]):
        duck = remote.cost(by)
        dask = remote.cost(by, engine="dask")
        pd.testing.assert_frame_equal(dask, duck, check_exact=False, rtol=1e-9)
        names = ["run_id" if k == "run" else k for k in by]
        oracle = _oracle(local, names)
        assert dask[names].astype(str).values.tolist() == oracle[names].astype(str).values.tolist()
        assert dask["llm_calls"].tolist() == oracle["llm_calls"].tolist()
        assert dask["input_tokens"].tolist() == oracle["input_tokens"].tolist()
        assert dask["cost_unknown_calls"].tolist() == oracle["cost_unknown_calls"].tolist()
        assert _cents(dask) == _cents(oracle) == _cents(duck)
    # unknown costs stay unknown: the unpriced model's rows have no cost, and count their calls
    by_model = dask.set_index("model")
    assert round(float(by_model["cost_usd"].sum()), 2) == round(float(local.events()["cost_usd"].sum()), 2)
    assert pd.isna(by_model.loc["local-llama", "cost_usd"]) and by_model.loc["local-llama", "cost_unknown_calls"] > 0


def test_to_dask_reads_events_and_llm_calls(tmp_path: Path, cluster: Any) -> None:
    local = fleet_store(tmp_path / "local", runs=6, calls=10, segment_events=7)
    events = local.to_dask().compute().sort_values(["run_id", "seq"]).reset_index(drop=True)
    want = local.events()
    assert events["seq"].tolist() == want["seq"].tolist() and events["run_id"].tolist() == want["run_id"].tolist()
    assert events["hash"].tolist() == want["hash"].tolist()
    calls = local.to_dask("llm_calls").compute()
    assert len(calls) == 60 and set(calls["type"]) == {"llm.response"}
    assert calls["cost_usd"].sum() == pytest.approx(want["cost_usd"].sum())
    pd.testing.assert_frame_equal(local.cost(["actor", "type"], engine="dask"), local.cost(["actor", "type"]))
    total = local.cost([], engine="dask")
    assert total["cost_usd"][0] == pytest.approx(want["cost_usd"].sum())
    with pytest.raises(ValueError, match="'span'"):
        local.cost("span", engine="dask")
    with pytest.raises(ValueError, match="spark"):
        local.cost("model", engine="spark")


def test_dask_includes_the_tail_of_an_open_run(tmp_path: Path, cluster: Any) -> None:
    local = fleet_store(tmp_path / "local", runs=2, calls=5)
    w = local.create_run(run_id="open", segment_events=4)
    from agentlog.events import LLMResponse, Usage
    for i in range(3):
        w.emit(LLMResponse(key=f"o{i}", model="gpt-4o", usage=Usage(input_tokens=10), cost_usd=0.25,
                           cost_source="computed"))
    try:
        pd.testing.assert_frame_equal(local.cost("run", engine="dask"), local.cost("run"))
        assert local.cost("run", engine="dask").set_index("run_id").loc["open", "cost_usd"] == 0.75
    finally:
        w.close()

