"""Many runs at once: store.runs, store.events (where, columns, WAL tails), store.cost, store.sql."""

from __future__ import annotations

from typing import Any

import genai_prices
import pandas as pd
import pyarrow.compute as pc
import pytest
from _analysis_runs import record_agent

import agentlog as al
from agentlog.analysis import columns as C


@pytest.fixture
def full(store: Any, golden: tuple[Any, Any], agent_run: Any, agent_fork: Any, timed: Any) -> Any:
    """A store with five runs: g1 and its fork g2, a recorded run and its fork, the timed run."""
    return store


def same_frames(left: pd.DataFrame, right: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(left.reset_index(drop=True), right.reset_index(drop=True),
                                  check_exact=False, rtol=1e-12)


def test_runs_match_each_run_summary(full: Any) -> None:
    runs = full.runs()
    assert list(runs["run_id"]) == full.list_runs()
    assert list(runs.columns) == [c.name for c in C.RUNS]
    for run_id in full.list_runs():
        row = runs[runs["run_id"] == run_id]
        same_frames(row, full.run(run_id).summary())


def test_runs_verify(full: Any) -> None:
    assert set(full.runs()["verified"]) == {"not checked"}
    assert set(full.runs(verify=True)["verified"]) == {"ok"}


def _expected_cost(runs: list[Any], key: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Each run's own usage events summed by ``key(run, event)``, in plain Python from the events
    as written: the inputs, not another engine."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for run in runs:
        start = 0 if run.fork_seq is None else run.fork_seq + 1
        for e in run.iter_events(start):
            usage = (e.input_tokens, e.output_tokens, e.cached_tokens, e.cost_usd)
            if e.type not in ("llm.response", "tool.result") and all(v is None for v in usage):
                continue
            row = out.setdefault(key(run, e), {"calls": 0, "llm_calls": 0, "tool_calls": 0, "input_tokens": 0,
                                               "output_tokens": 0, "cached_tokens": 0, "known": [],
                                               "cost_unknown_calls": 0})
            row["calls"] += 1
            row["llm_calls"] += e.type == "llm.response"
            row["tool_calls"] += e.type == "tool.result"
            for name in ("input_tokens", "output_tokens", "cached_tokens"):
                row[name] += getattr(e, name) or 0
            if e.cost_usd is not None:
                row["known"].append(e.cost_usd)
            elif e.type == "llm.response":
                row["cost_unknown_calls"] += 1
    return out


def _check_cost_table(table: pd.DataFrame, expected: dict[tuple[Any, ...], dict[str, Any]],
                      keys: list[str]) -> None:
    got = {tuple(None if pd.isna(v) else v for v in r[:len(keys)]): r
           for r in table.itertuples(index=False, name=None)}
    assert set(got) == set(expected)
    cols = list(table.columns)
    for group, want in expected.items():
        row = dict(zip(cols, got[group], strict=True))
        for name in ("calls", "llm_calls", "tool_calls", "input_tokens", "output_tokens", "cached_tokens",
                     "cost_unknown_calls"):
            assert row[name] == want[name], (group, name)
        if want["known"] or not want["cost_unknown_calls"]:
            assert row["cost_usd"] == pytest.approx(sum(want["known"])), group
        else:  # no cost known in the group: unknown, never 0
            assert row["cost_usd"] is pd.NA, group


def test_store_and_run_cost_sum_the_recorded_usage(full: Any) -> None:
    """One engine for a run and for the store, checked against the events as written."""
    runs = [full.run(r) for r in full.list_runs()]
    by_run_model = _expected_cost(runs, lambda run, e: (run.id, e.model))
    assert any(v["cost_unknown_calls"] and not v["known"] for v in by_run_model.values())  # the case
    _check_cost_table(full.cost(by=("run", "model")), by_run_model, ["run_id", "model"])
    for run in runs:
        mine = {k[1:]: v for k, v in by_run_model.items() if k[0] == run.id}
        _check_cost_table(run.cost(by="model", own=True), mine, ["model"])
    by_day = _expected_cost(runs, lambda run, e: (run.id, e.type, pd.Timestamp(e.ts, unit="us", tz="UTC").date()))
    _check_cost_table(full.cost(by=("run", "type", "day")), by_day, ["run_id", "type", "day"])
    total = _expected_cost(runs, lambda run, e: ())
    _check_cost_table(full.cost(by=()), total, [])


def test_recorded_costs_are_genai_prices_for_the_recorded_usage(agent_run: Any) -> None:
    """The dollars in the tables come from genai-prices at each call's time, for its usage."""
    calls = agent_run.llm_calls()
    priced = calls[calls["model"] == "gpt-4o-mini"]
    assert len(priced) and (priced["cost_source"] == "computed").all()
    for row in priced.itertuples(index=False):
        usage = genai_prices.Usage(input_tokens=row.input_tokens, cache_read_tokens=row.cached_tokens,
                                   output_tokens=row.output_tokens)
        want = genai_prices.calc_price(usage, "gpt-4o-mini", genai_request_timestamp=row.ts.to_pydatetime())
        assert row.cost_usd == pytest.approx(float(want.total_price), rel=1e-12)
    by_model = agent_run.cost(by="model").set_index("model")
    assert by_model.loc["gpt-4o-mini", "cost_usd"] == pytest.approx(priced["cost_usd"].sum())
    assert by_model.loc["house-model-x", "cost_usd"] is pd.NA  # genai-prices has no price for it
    assert by_model.loc["house-model-x", "cost_unknown_calls"] == 1


def test_store_cost_counts_own_events(full: Any, golden: tuple[Any, Any]) -> None:
    t = full.cost(by="run").set_index("run_id")
    assert t.loc["g1", "cost_usd"] == 0.00012 and "g2" not in t.index  # g2 made no calls of its own
    assert full.cost(by=()).loc[0, "cost_usd"] == pytest.approx(full.runs()["own_cost_usd"].sum())
    with pytest.raises(ValueError, match="cannot group cost by 'colour'"):
        full.cost(by="colour")


def test_sql_views_agree_with_the_per_run_tables(full: Any) -> None:
    for view, method, spec in [("spans", "spans", C.SPANS), ("llm_calls", "llm_calls", C.LLM_CALLS),
                               ("tool_calls", "tool_calls", C.TOOL_CALLS)]:
        everything = full.sql(f"select * from {view}")
        for run_id in full.list_runs():
            mine = everything[everything["run_id"] == run_id].drop(columns="run_id")
            same_frames(C.to_frame(mine.reset_index(drop=True).pipe(_to_arrow), spec),
                        getattr(full.run(run_id), method)())


def _to_arrow(frame: pd.DataFrame) -> Any:
    import pyarrow as pa
    return pa.Table.from_pandas(frame, preserve_index=False)


def test_sql_events_and_run_events(full: Any, golden: tuple[Any, Any]) -> None:
    counts = full.sql("select run_id, count(*) as n from events group by run_id order by run_id")
    own = dict(zip(counts["run_id"], counts["n"], strict=True))
    assert own["g1"] == 18 and own["g2"] == 6  # a fork stores only its own events
    read = full.sql("select run_id, count(*) as n, count(*) filter (where stored_in = run_id) as own "
                    "from run_events group by run_id order by run_id")
    assert {r: n for r, n in zip(read["run_id"], read["n"], strict=True)} == {
        rid: len(full.run(rid)) for rid in full.list_runs()}
    fork_events = full.sql("select * exclude (run_id, stored_in) from run_events where run_id = 'g2' order by seq")
    same_frames(C.to_frame(_to_arrow(fork_events), C.EVENTS), full.run("g2").events)


def test_sql_returns_arrow_backed_frames(full: Any) -> None:
    t = full.sql("select run_id, ts, input_tokens from events where input_tokens is not null")
    assert str(t["run_id"].dtype) == "string[pyarrow]" and str(t["input_tokens"].dtype) == "int64[pyarrow]"
    assert str(t["ts"].dtype) == "datetime64[us, UTC]"


def test_duckdb_connection(full: Any) -> None:
    con = full.duckdb()
    try:
        assert con.sql("select count(*) from runs").fetchall() == [(len(full.list_runs()),)]
        assert con.sql("select count(*) from spans where status = 'open'").fetchall() == [(1,)]
    finally:
        con.close()


def test_events_where_sql_and_expression_agree(full: Any) -> None:
    by_sql = full.events(where="type = 'llm.response' and input_tokens > 50")
    by_expr = full.events(where=(pc.field("type") == "llm.response") & (pc.field("input_tokens") > 50))
    same_frames(by_sql, by_expr)
    assert set(by_sql["type"]) == {"llm.response"} and (by_sql["input_tokens"] > 50).all()
    assert list(by_sql.columns) == ["run_id", *(c.name for c in C.EVENTS)]
    one = full.events(where="run_id = 'g1'", columns=["seq", "type"])
    assert list(one.columns) == ["run_id", "seq", "type"] and list(one["seq"]) == list(range(18))
    assert len(full.events()) == sum(full.runs()["own_events"])


def test_events_bad_arguments(full: Any) -> None:
    with pytest.raises(ValueError, match="unknown event column"):
        full.events(columns=["seq", "colour"])
    with pytest.raises(TypeError, match="where must be"):
        full.events(where=42)  # type: ignore[arg-type]


def test_wal_tails_of_open_runs_are_included(store: Any) -> None:
    w = store.create_run(run_id="live", segment_events=5, durability="none")
    for i in range(12):
        w.emit("llm.response", {"key": f"k{i}"}, model="gpt-4o-mini", input_tokens=10, output_tokens=1,
               cost_usd=0.001)
    try:
        assert len(list(store.run("live").path.glob("events-*.parquet"))) == 2  # 10 sealed, 2 in the WAL
        for where in (None, "run_id = 'live'", pc.field("run_id") == "live"):
            ev = store.events(where=where)
            assert list(ev["seq"]) == list(range(12)), where
        assert store.cost(by="run").loc[0, "llm_calls"] == 12
        runs = store.runs()
        assert runs.loc[0, "status"] == "open" and runs.loc[0, "events"] == 12
        same_frames(runs.drop(columns="verified"), store.run("live").summary().drop(columns="verified"))
    finally:
        w.close()


def test_empty_store(tmp_path: Any) -> None:
    empty = al.Store(tmp_path / "nothing")
    assert len(empty.runs()) == 0 and list(empty.runs().columns) == [c.name for c in C.RUNS]
    assert len(empty.events()) == 0 and len(empty.events(where=pc.field("seq") > 0)) == 0
    assert len(empty.cost()) == 0
    assert empty.sql("select count(*) as n from spans")["n"].tolist() == [0]
    page = empty._repr_html_()
    assert page is not None and "0 runs" in page
    assert not (tmp_path / "nothing").exists()  # reading creates nothing


def test_many_runs(store: Any) -> None:
    for i in range(3):
        record_agent(store, name=f"agent-{i}", cpu=0.9 if i % 2 else 0.2)
    runs = store.runs()
    assert len(runs) == 3 and (runs["llm_calls"] == 2).all()
    by_run = store.cost(by=("run", "model"))
    assert len(by_run) == 3 * 3  # two models and the tools' <NA> per run
    assert by_run["cost_unknown_calls"].sum() == 3


def test_a_damaged_segment_is_named_not_a_duckdb_dump(tmp_path: Any) -> None:
    from agentlog.errors import CorruptSegmentError
    store = al.examples.sample_store(copy_to=tmp_path / "s")
    segment = min((tmp_path / "s/runs/run_id=sre-0001").glob("*.parquet"))
    segment.write_bytes(segment.read_bytes()[:100])
    for call in (store.runs, lambda: store.cost(by="run"), lambda: store.sql("select count(*) from events")):
        with pytest.raises(CorruptSegmentError) as caught:
            call()
        assert caught.value.path == str(segment) and "verify --all" in str(caught.value)
    with pytest.raises(Exception) as caught:  # a mistake in the user's SQL stays DuckDB's error
        al.examples.sample_store(copy_to=tmp_path / "t").sql("select nonsense from events")
    assert not isinstance(caught.value, CorruptSegmentError)


def test_a_segment_only_duckdb_cannot_read_is_named(tmp_path: Any) -> None:
    """A footer flaw pyarrow tolerates but DuckDB does not (a thrift field changed): the DuckDB
    error names no file, so the segments are probed to name it."""
    import pyarrow.parquet as pq

    from agentlog.errors import CorruptSegmentError
    store = al.examples.sample_store(copy_to=tmp_path / "s")
    segment = min((tmp_path / "s/runs/run_id=sre-0001").glob("*.parquet"))
    data = bytearray(segment.read_bytes())
    footer_len = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_len
    for i in range(start, len(data) - 8):  # the first footer byte whose change only DuckDB notices
        trial = bytearray(data)
        trial[i] ^= 0x40
        segment.write_bytes(bytes(trial))
        if not _pyarrow_reads(pq, segment):
            continue  # pyarrow sees this one; try the next byte
        try:
            store.sql("select count(*) as n from events")
        except CorruptSegmentError as exc:
            assert exc.path == str(segment)
            return
    pytest.fail("no footer byte only DuckDB notices")  # pragma: no cover


def _pyarrow_reads(pq: Any, path: Any) -> bool:
    try:
        pq.read_table(path).validate(full=True)
    except Exception:  # noqa: BLE001 - any failure means pyarrow noticed
        return False
    return True


def test_a_segment_whose_footer_duckdb_quotes_undecodably_is_named(tmp_path: Any) -> None:
    """Found by bench/fuzz.py: DuckDB quotes a damaged column name in its message, which Python
    cannot decode, so the error was a UnicodeDecodeError from store.runs()."""
    from agentlog.errors import CorruptSegmentError
    store = al.examples.sample_store(copy_to=tmp_path / "s")
    segment = min((tmp_path / "s/runs/run_id=sre-0001").glob("*.parquet"))
    data = bytearray(segment.read_bytes())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    name = data.index(b"caused_by", footer)  # the column's name in the Parquet schema
    data[name + 1] = 0xDA  # a UTF-8 lead byte without its continuation
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptSegmentError) as caught:
        store.runs()
    assert caught.value.path == str(segment)
