"""al.diff: shared prefix, divergence, aligned events, state patch, graph changes, usage delta."""

from __future__ import annotations

import random
import warnings
from typing import Any

import pandas as pd
import pytest
from _analysis_runs import ScriptedClock, Tools, answer, make_agent, seq_of

import agentlog as al
from agentlog.analysis.align import align
from agentlog.errors import UnknownModelWarning
from agentlog.testing.fakes import FakeLLM


def rows(d: Any) -> list[tuple[Any, ...]]:
    t = d.table()
    return [tuple(None if pd.isna(v) else v for v in r)
            for r in t[["status", "seq_a", "seq_b", "type", "name"]].itertuples(index=False)]


def test_diff_of_a_fork_and_its_parent(golden: tuple[Any, Any]) -> None:
    run, fork = golden
    d = al.diff(run, fork)
    assert (d.prefix, d.divergence, d.prefix_from) == (10, 10, "lineage")
    assert rows(d) == [
        ("only_b", None, 10, "fork.started", None),
        ("changed", 10, 11, "state.patch", None),
        ("changed", 11, 12, "object.created", "svc-api"),
        ("only_a", 12, None, "span.started", "house-model-x"),
        ("only_a", 13, None, "llm.request", "k-llm2"),
        ("only_a", 14, None, "llm.response", "k-llm2"),
        ("only_a", 15, None, "span.ended", "house-model-x"),
        ("only_b", None, 13, "relation.created", "r1"),
        ("matched", 16, 14, "span.ended", "triage"),
        ("changed", 17, 15, "run.finished", None),
    ]
    summaries = dict(zip(d.table()["seq_a"].fillna(-1), d.table()["summary"], strict=True))
    assert summaries[10] == '~ /ops/0/value: "restart" → "wait"'
    assert summaries[11] == '~ /data/state: "degraded" → "ok"'
    assert d.counts == {"matched": 1, "moved": 0, "changed": 3, "only_a": 4, "only_b": 2}


def test_diff_state_patch_and_graph(golden: tuple[Any, Any]) -> None:
    run, fork = golden
    d = al.diff(run, fork)
    patch = d.state_patch
    assert "/vars/decision" in patch.paths and "/relations/r1" in patch.paths
    assert al.apply_patch(run.state_at(len(run) - 1), patch)["vars"] == fork.state_at(len(fork) - 1)["vars"]
    graph = d.graph
    assert [tuple(r) for r in graph[["what", "id", "change"]].itertuples(index=False)] == [
        ("object", "svc-api", "changed"), ("relation", "r1", "added")]
    assert graph.iloc[0]["detail"] == '~ /data/state: "degraded" → "ok"'


def test_diff_usage_delta(golden: tuple[Any, Any]) -> None:
    run, fork = golden
    u = al.diff(run, fork).usage
    assert u.loc["events", "a"] == 18 and u.loc["events", "b"] == 16 and u.loc["events", "delta"] == -2
    assert u.loc["llm_calls", "delta"] == -1 and u.loc["input_tokens", "delta"] == -100
    assert u.loc["cost_unknown_calls", "delta"] == -1 and u.loc["cost_usd", "delta"] == 0.0
    assert list(u.columns) == ["a", "b", "delta"]


def test_diff_of_a_recorded_fork_names_the_edit(agent_run: Any, agent_fork: Any) -> None:
    d = al.diff(agent_run, agent_fork)
    cut = agent_fork.fork_seq
    assert d.prefix == cut + 1 == d.divergence and d.prefix_from == "lineage"
    t = d.table()
    assert t.iloc[0]["status"] == "only_b" and t.iloc[0]["type"] == "fork.started"
    edited = t[(t["type"] == "tool.result") & (t["status"] == "changed")].iloc[0]
    assert edited["seq_a"] == seq_of(agent_run, "tool.result", name="get_metric")
    assert "~ /result: 0.9 → 0.2" in edited["summary"]
    request = t[t["type"] == "llm.request"].iloc[0]
    assert request["status"] == "changed" and "cpu=0.9" in request["summary"] and "cpu=0.2" in request["summary"]
    only_a = t[t["status"] == "only_a"]
    assert "restart" in set(only_a["name"])  # the fork never restarts
    # the flaky tool was served from the parent's log and says the same: matched, not changed
    flaky = t[(t["name"] == "flaky") & (t["type"] == "tool.result")].iloc[0]
    assert flaky["status"] == "matched"
    assert "/vars/decision" in d.state_patch.paths


def test_diff_of_two_forks_of_one_parent(agent_run: Any) -> None:
    metric = seq_of(agent_run, "tool.result", name="get_metric")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownModelWarning)
        f1 = al.fork(agent_run, at=metric - 1, program=make_agent(Tools(0.2), FakeLLM(answer), FakeLLM("x")),
                     edit=al.edit.replace_response(metric, {"result": 0.2}))
        f2 = al.fork(agent_run, at=metric - 3, program=make_agent(Tools(0.3), FakeLLM(answer), FakeLLM("x")),
                     edit=al.edit.replace_response(metric, {"result": 0.3}))
    d = al.diff(f1, f2)
    assert d.prefix_from == "lineage" and d.prefix == metric - 2 and d.divergence == metric - 2
    assert rows(d)[0][0] in ("changed", "only_a", "only_b")


def test_diff_of_a_run_with_itself_and_of_unrelated_runs(golden: tuple[Any, Any], store: Any) -> None:
    run, _ = golden
    same = al.diff(run, run)
    assert same.same and same.divergence is None and same.prefix == len(run) and len(same.table()) == 0
    assert len(same.state_patch) == 0 and "the same 18 events" in repr(same)
    # two runs written with the same clock are the same bytes: equal by hash, not by lineage
    from _analysis_runs import golden_runs
    other = al.Store(store.path.parent / "other")
    twin, _ = golden_runs(other)
    d = al.diff(run, twin)
    assert d.same and d.prefix_from == "hash" and d.prefix == len(run)


def test_diff_of_unrelated_runs_compares_hashes(store: Any) -> None:
    def write(run_id: str, texts: list[str]) -> Any:
        with store.create_run(run_id=run_id, clock=ScriptedClock(), durability="none") as w:
            for text in texts:
                w.emit("note", {"name": text})
        return store.run(run_id)
    a = write("u1", ["a", "b", "c", "d"])
    b = write("u2", ["a", "b", "x", "c", "d"])
    d = al.diff(a, b)
    assert (d.prefix, d.prefix_from, d.divergence) == (2, "hash", 2)
    assert rows(d) == [("only_b", None, 2, "note", "x"), ("matched", 2, 3, "note", "c"),
                       ("matched", 3, 4, "note", "d")]


def test_diff_of_a_fork_of_a_fork(golden: tuple[Any, Any], store: Any) -> None:
    run, fork = golden
    w = store.create_run(run_id="g3", fork_of=("g2", 12), clock=ScriptedClock([100.0]), durability="none")
    w.emit("note", {"text": "grandchild"})
    w.close()
    grandchild = store.run("g3")
    d = al.diff(run, grandchild)  # the shared part is g1's 0..9, found through g2
    assert d.prefix_from == "lineage" and d.prefix == 10
    assert al.diff(fork, grandchild).prefix == 13


# --- the alignment --------------------------------------------------------------------------------


def sig(*names: str) -> list[tuple[str, None, str]]:
    return [("t", None, n) for n in names]


def test_align_insert_delete_change() -> None:
    steps = align(sig("a", "b", "c", "d"), sig("a", "c", "x", "d"))
    assert steps == [("same", 0, 0), ("only_a", 1, None), ("same", 2, 1), ("only_b", None, 2),
                     ("same", 3, 3)]
    changed = align([("t", None, "a"), ("u", None, "k1")], [("t", None, "a"), ("u", None, "k2")])
    assert changed == [("same", 0, 0), ("changed", 1, 1)]  # same (type, actor), other key


@pytest.mark.parametrize("seed", range(20))
def test_greedy_alignment_is_a_valid_alignment(seed: int) -> None:
    """Both methods cover every index once (in order, but for moved pairs, which stand where
    their a event does), and pair only events of the same kind; a moved pair's events are the
    same step."""
    rnd = random.Random(seed)
    base = [("t", None, rnd.choice("abcdefg")) for _ in range(rnd.randint(0, 60))]
    other = list(base)
    for _ in range(rnd.randint(0, 8)):
        op = rnd.random()
        k = rnd.randint(0, len(other))
        if op < 0.4:
            other.insert(k, ("t", None, rnd.choice("xyz")))
        elif op < 0.7 and other:
            other.pop(min(k, len(other) - 1))
        elif other:
            other[min(k, len(other) - 1)] = ("u", None, "changed")
    for limit in (0, 10_000):
        steps = align(base, other, limit=limit)
        seen_a = [i for _, i, _ in steps if i is not None]
        seen_b = [j for s, _, j in steps if j is not None and s != "moved"]
        moved_b = [j for s, _, j in steps if s == "moved"]
        assert seen_a == list(range(len(base))) and sorted(seen_b + moved_b) == list(range(len(other)))
        assert seen_b == sorted(seen_b)
        for status, i, j in steps:
            if status in ("same", "moved"):
                assert base[i] == other[j]
            elif status == "changed":
                assert base[i][:2] == other[j][:2]
        if base == other:
            assert all(s == "same" for s, _, _ in steps)


@pytest.mark.parametrize("limit", [0, 10_000])
def test_events_in_another_order_are_moved_not_only_in_one_run(limit: int) -> None:
    """Steps made side by side that finish in another order: each event is one step in both
    runs, matched where the order agrees and moved where it does not; an event with no name
    is not paired across the run."""
    calls = [("llm.request", None, k) for k in ("k1", "k2", "k3")]
    a = [("span.started", None, "graph"), *calls, ("note", None, None)]
    b = [("span.started", None, "graph"), calls[2], calls[0], calls[1], ("note", None, None)]
    steps = align(a, b, limit=limit)
    assert sorted(s for s, _, _ in steps) == ["moved", "same", "same", "same", "same"]
    for status, i, j in steps:
        assert status in ("same", "moved") and a[i] == b[j]
    unnamed = align([("note", None, None), ("x", None, "n")], [("x", None, "n"), ("note", None, None)], limit=limit)
    assert ("moved", 1, 0) in unnamed or ("same", 1, 0) in unnamed
    assert not any(s == "moved" and i == 0 for s, i, _ in unnamed)


def test_span_ends_in_another_order_are_moved_not_changed_into_each_other() -> None:
    """Spans' ends in another order (found by a random search where the pairing of a replaced
    block made one span's end another's, changed): each end pairs with the other run's end of
    the same span, matched or moved."""
    a = [("mid", None, "m"), ("end", None, "y"), ("end", None, "z"), ("end", None, "x"), ("end", None, "z"),
         ("end", None, "x")]
    b = [("end", None, "y"), ("end", None, "x"), ("end", None, "x"), ("end", None, "z"), ("mid", None, "m"),
         ("end", None, "z")]
    steps = align(a, b)
    assert {s for s, _, _ in steps} == {"same", "moved"}
    assert all(a[i] == b[j] for _, i, j in steps)
    assert sorted(i for _, i, _ in steps) == list(range(len(a))) and sorted(j for _, _, j in steps) == list(range(len(b)))


def test_greedy_alignment_of_long_tails_with_an_insertion() -> None:
    a = [("t", None, f"e{i % 50}") for i in range(5000)]
    b = a[:1000] + [("ins", None, "new")] + a[1000:]
    steps = align(a, b, limit=100)
    assert [s for s in steps if s[0] != "same"] == [("only_b", None, 1000)]


def test_change_summaries_are_written_on_demand_and_agree(golden: tuple[Any, Any]) -> None:
    run, fork = golden
    lazy = al.diff(run, fork)
    statuses = lazy.columns("status")["status"]
    changed = [i for i, s in enumerate(statuses) if s == "changed"]
    assert changed and len(lazy._pending) == len(changed)  # nothing written yet
    first = lazy.summary(changed[-1])
    assert len(lazy._pending) == len(changed) - 1
    eager = al.diff(run, fork).table()["summary"].tolist()
    assert first and first == eager[changed[-1]]
    assert [lazy.summary(i) if s == "changed" else "" for i, s in enumerate(statuses)] == \
        [e if s == "changed" else "" for e, s in zip(eager, statuses, strict=True)]
    assert lazy.table()["summary"].tolist() == eager  # table() writes the rest


def _steps_run(store: Any, run_id: str, steps: list[int]) -> Any:
    """A run of spans "step", one after the other, each with its counter as an attribute."""
    from agentlog.events import SpanEnded, SpanStarted
    from agentlog.store.writer import Emit

    w = store.create_run(run_id=run_id, durability="none")
    for k in steps:
        [start] = w.emit_many([Emit(SpanStarted(name="step", kind="chain", attributes={"step": k}), span_item=0)])
        w.emit_many([Emit(SpanEnded(name="step"), span_id=start.span_id, caused_by=start.seq)])
    w.close("finished")
    return store.run(run_id)


def test_a_step_inserted_before_a_loops_steps_leaves_them_paired_in_order(tmp_path: Any) -> None:
    """Steps that differ only by a counter, one inserted before them: each is paired with the
    other run's step at its place (the same step, shifted: DiffView's ``shifted``), not with
    the step of the same counter, although that one is just like it."""
    store = al.Store(tmp_path / "store")
    a, b = _steps_run(store, "a", [1, 2, 3, 4, 5, 6]), _steps_run(store, "b", [1, 2, 99, 3, 4, 5, 6])
    rows = al.diff(a, b).table()
    assert "moved" not in set(rows["status"])
    paired = rows.dropna(subset=["seq_a", "seq_b"])
    assert list(paired["seq_a"]) == sorted(paired["seq_a"]) and list(paired["seq_b"]) == sorted(paired["seq_b"])
