"""Forks of forks, and strict replay of forks: a fork's prefix was recorded by its ancestors,
and the fork.started that al.fork wrote at the cut is not the program's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import agentlog as al


@pytest.fixture
def samples(tmp_path: Any) -> Any:
    return al.examples.sample_store(copy_to=tmp_path / "s")


def test_strict_replay_of_a_fork_goes_through_its_cut(samples: Any) -> None:
    fork = samples.run("refunds-0001-approve")
    assert any(e.type == "fork.started" for e in fork.iter_events(start=fork.fork_seq + 1))
    result = al.replay(al.examples.program("refunds"), fork)
    assert result.ok, str(result)


def test_a_fork_whose_first_span_is_named_by_its_fork_started_replays(samples: Any) -> None:
    """Forks written before 2026-12-06 named the span opened first after the cut by the seq of
    their ``fork.started`` (read before al.fork wrote it); they replay as written."""
    fork = samples.run("refunds-0001-approve")
    cut = fork.fork_seq
    first = next(e for e in fork.iter_events(start=cut + 1) if e.type == "span.started")
    own, older = first.span_id, f"s{first.seq - 1}"
    assert own == f"s{first.seq}" and fork.event(first.seq - 1).type == "fork.started"

    def renamed(e: Any) -> Any:  # as the older fork, written as run "older"
        payload = dict(e.payload)
        if payload.get("parent") == own:
            payload["parent"] = older
        if "idempotency_key" in payload:
            payload["idempotency_key"] = payload["idempotency_key"].replace(f"{fork.id}:", "older:")
        return replace(e, span_id=older if e.span_id == own else e.span_id, payload=payload, hash="")

    writer = samples.create_run(name="older fork", run_id="older", fork_of=(fork.parent.id, cut),
                                durability="none")
    for e in fork.iter_events(start=cut + 1):
        writer.append(renamed(e))
    writer.close("finished")
    older_fork = samples.run(writer.id)
    assert older_fork.event(first.seq).span_id == older

    result = al.replay(al.examples.program("refunds"), older_fork)
    assert result.ok, str(result)


@pytest.mark.parametrize("at", [40, 90])  # inside the grandparent's part; past the parent's cut
def test_a_fork_of_a_fork(samples: Any, at: int) -> None:
    parent = samples.run("refunds-0001-approve")
    fork = al.fork(parent, at, program=al.examples.program("refunds"))
    assert fork.verify().ok
    assert [e.hash for e in fork.iter_events(stop=at + 1)] == \
        [e.hash for e in parent.iter_events(stop=at + 1)]
    keys = [e.payload["idempotency_key"] for e in fork.iter_events(stop=at + 1) if e.type == "tool.call"]
    owners = {k.split(":")[0] for k in keys}
    assert owners == ({"refunds-0001"} if at <= parent.fork_seq else {"refunds-0001", parent.id})


def test_recorded_by_names_the_run_that_holds_each_seq(samples: Any) -> None:
    from agentlog.capture.sinks import recorded_by
    fork = samples.run("refunds-0001-approve")
    owner = recorded_by(fork)
    assert owner(0) == owner(fork.fork_seq) == "refunds-0001"
    assert owner(fork.fork_seq + 1) == owner(len(fork) - 1) == fork.id


def test_every_span_of_a_fork_is_named_by_its_own_seq(samples: Any) -> None:
    """A span's id is the seq of its span.started, in a fork's own events too (the span opened
    first after the cut included), and so in a fork of a fork."""
    parent = samples.run("refunds-0001-approve")
    fork = al.fork(parent, 40, program=al.examples.program("refunds"))
    for run in (parent, fork):
        started = [e for e in run.iter_events(start=run.fork_seq + 1) if e.type == "span.started"]
        assert started and all(e.span_id == f"s{e.seq}" for e in started)
