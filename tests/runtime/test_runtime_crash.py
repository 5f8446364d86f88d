"""Crash recovery is resume: a process killed at any moment is resumed by another one, and no
step's side effect happens twice or goes missing; the resumed run replays strictly."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _runtime_helpers import (
    MODEL,
    Ledger,
    LedgerAgent,
    comparable,
    idempotency_keys,
    program,
    scripted,
    start_or_resume,
    tools_for,
)

import agentlog as al
from agentlog.store.wal import WAL_NAME
from agentlog.testing.fakes import FakeLLM


def reference(tmp_path: Path, steps: int) -> tuple[Any, dict[str, Any]]:
    """The same agent, uninterrupted."""
    ledger = Ledger(tmp_path / "ref-ledger")
    run = al.run_agent(LedgerAgent(), input={"steps": steps}, model=FakeLLM(scripted, model=MODEL),
                       tools=tools_for(ledger), store=tmp_path / "ref", durability="none")
    assert run.status == "finished"
    return run, comparable(run)


def child(ctx: Any, **kwargs: Any) -> int | None:
    p = ctx.Process(target=start_or_resume, kwargs=kwargs)
    p.start()
    p.join(120)
    assert not p.is_alive(), "a child hung"
    return p.exitcode


def check_recovered(run: Any, ledger: Ledger, expected: dict[str, Any], steps: int) -> None:
    assert run.status == "finished"
    assert comparable(run) == expected
    keys = idempotency_keys(run)
    assert len(keys) == steps, "one tool.call per step, never a second one for the same step"
    assert ledger.keys() == set(keys), "every step's side effect happened once, under its call's key"
    replayed = al.replay(program(), run)
    assert replayed.ok, str(replayed)
    assert run.verify().ok


def test_crash_after_every_event_then_resume(tmp_path: Path, children: Any) -> None:
    steps = 4
    ref, expected = reference(tmp_path, steps)
    kinds = {ref.event(seq).type for seq in range(len(ref))}
    assert {"llm.request", "tool.call", "state.patch", "span.ended", "run.finished"} <= kinds
    for seq in range(len(ref)):
        store, ledger = tmp_path / f"store-{seq}", Ledger(tmp_path / f"ledger-{seq}")
        assert child(children, store=str(store), run_id="r", steps=steps,
                     ledger_dir=str(ledger.root), crash_seq=seq) == 17
        crashed = al.Store(store).run("r")
        assert crashed.status == "open" and crashed.meta["count"] == 0  # never closed
        resumed = al.resume("r", LedgerAgent(), model=FakeLLM(scripted, model=MODEL),
                            tools=tools_for(ledger), store=store)
        check_recovered(resumed, ledger, expected, steps)
        events = list(resumed.iter_events())
        assert [e.seq for e in events[:seq + 1]] == list(range(seq + 1))
        assert all(a.hash == b.hash for a, b in zip(events[:seq + 1], crashed.refresh().iter_events()))


def test_crash_after_the_side_effect_reuses_the_idempotency_key(tmp_path: Path, children: Any) -> None:
    _, expected = reference(tmp_path, 3)
    ledger = Ledger(tmp_path / "ledger")
    assert child(children, store=str(tmp_path / "s"), run_id="r", steps=3, ledger_dir=str(ledger.root),
                 exit_after_effect=1) == 19
    run = al.resume("r", LedgerAgent(), model=FakeLLM(scripted, model=MODEL), tools=tools_for(ledger),
                    store=tmp_path / "s")
    check_recovered(run, ledger, expected, 3)
    key = idempotency_keys(run)[1]
    assert ledger.attempts().count(key) == 2  # tried again after the crash, with the same key
    resumed = [e for e in run.iter_events() if e.type == "span.started"
               and e.payload.get("attributes", {}).get("do") == "resume"]
    assert len(resumed) == 1 and resumed[0].payload["attributes"]["call"] == run.event(
        next(e.seq for e in run.iter_events() if e.type == "tool.call"
             and e.payload["idempotency_key"] == key)).seq
    closed = [e for e in run.iter_events() if e.type == "span.ended" and e.payload["status"] == "error"]
    assert [e.payload["error"] for e in closed] == ["interrupted", "interrupted"]


def wal_size(store: Path, run_id: str) -> int:
    try:
        return (store / "runs" / f"run_id={run_id}" / WAL_NAME).stat().st_size
    except FileNotFoundError:
        return -1


def kill_at_a_random_moment(p: Any, rng: random.Random, store: Path, run_id: str) -> bool:
    """SIGKILL the child at a random moment; True if it was killed.

    Most kills wait until the child has appended something (so every session makes progress)
    and then a random 0-25 ms more; one in five comes at a random moment from the start,
    often while the resume is still opening the run.
    """
    if rng.random() < 0.2:
        p.join(rng.uniform(0.0, 0.04))
    else:
        size = wal_size(store, run_id)
        while p.is_alive() and wal_size(store, run_id) <= size:
            time.sleep(0.0005)
        p.join(rng.uniform(0.0, 0.025))
    if not p.is_alive():
        return False
    p.kill()  # SIGKILL: no cleanup, no flush, no span.ended
    p.join()
    return True


def test_killed_at_random_moments_and_resumed_by_another_process(tmp_path: Path, children: Any) -> None:
    steps = 10
    _, expected = reference(tmp_path, steps)
    rng = random.Random(20261202)
    kills, runs, processes = 0, 0, 0
    seen: Counter[str] = Counter()
    while kills < 30 or runs < 2:
        runs += 1
        run_id, ledger = f"kill-{runs}", Ledger(tmp_path / f"ledger-{runs}", sleep=0.002)
        store = tmp_path / f"store-{runs}"
        while True:
            processes += 1
            assert processes < 400, f"no progress after {processes} processes ({kills} kills)"
            p = children.Process(target=start_or_resume, kwargs={
                "store": str(store), "run_id": run_id, "steps": steps, "ledger_dir": str(ledger.root),
                "sleep": 0.002})
            p.start()
            if kill_at_a_random_moment(p, rng, store, run_id):
                kills += 1
                continue
            if p.exitcode == 3:  # killed before run.started: that run never began; start another
                run_id = f"{run_id}x"
                continue
            assert p.exitcode == 0
            break
        run = al.Store(store).run(run_id)
        check_recovered(run, ledger, expected, steps)
        for e in run.iter_events():
            if e.type == "span.ended" and e.payload["error"] == "interrupted":
                seen["interrupted spans"] += 1
            elif e.type == "span.started" and e.payload.get("attributes", {}).get("do") == "resume":
                seen["calls finished on resume"] += 1
        seen["effects retried with their key"] += len(ledger.attempts()) - len(ledger.keys())
    assert kills >= 30
    # With this many kills, some must have landed inside a step (p(miss) < 1e-6).
    assert seen["interrupted spans"] and seen["calls finished on resume"], seen
    print(f"{kills} kills, {runs} runs, {processes} processes: {dict(seen)}")


def test_a_crash_right_after_a_resume_closed_a_cut_short_emit(tmp_path: Path, children: Any) -> None:
    steps = 3
    ref, expected = reference(tmp_path, steps)
    first_fact = next(e.seq for e in ref.iter_events() if e.type == "state.patch")
    store, ledger = tmp_path / "s", Ledger(tmp_path / "ledger")
    run = {"store": str(store), "run_id": "r", "steps": steps, "ledger_dir": str(ledger.root)}
    assert child(children, **run, crash_seq=first_fact) == 17  # one of the two facts written
    assert child(children, **run, crash_seq=first_fact + 1) == 17  # the resume closed the span, died
    closed = al.Store(store).run("r").refresh()
    assert closed.event(first_fact + 1).payload["error"] == "interrupted"
    resumed = al.resume("r", LedgerAgent(), model=FakeLLM(scripted, model=MODEL), tools=tools_for(ledger),
                        store=store)
    check_recovered(resumed, ledger, expected, steps)
    completion = resumed.event(first_fact + 2)
    assert completion.payload["attributes"] == {"step": 8, "do": "emit", "facts": 1, "completes":
                                                first_fact - 1, "from": 1}


def test_a_program_that_does_not_resume_diverges_where_the_run_was_interrupted(tmp_path: Path,
                                                                                 children: Any) -> None:
    ledger = Ledger(tmp_path / "ledger")
    assert child(children, store=str(tmp_path / "s"), run_id="r", steps=2, ledger_dir=str(ledger.root),
                 crash_seq=3) == 17
    run = al.resume("r", LedgerAgent(), model=FakeLLM(scripted, model=MODEL), tools=tools_for(ledger),
                    store=tmp_path / "s")

    def straight_through(rec: Any) -> None:  # the same calls, but no resume logic
        with rec.span("call_model gpt-4o-mini", kind="agent", actor="ledger-agent",
                      attributes={"step": 1, "do": "call_model"}):
            rec.llm({"model": MODEL, "messages": [
                {"role": "system", "content": "You are a careful payments agent."},
                {"role": "user", "content": "step 0"}]}, actor="ledger-agent")

    result = al.replay(straight_through, run)
    assert not result.ok and result.divergence.seq == 4
    assert "was interrupted here and resumed" in str(result.divergence)
