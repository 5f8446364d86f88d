"""``RunWriter.append``: copy events with their seq and ts, and refuse a hash that differs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_programs import rows

import agentlog as al


def test_copying_every_event_gives_the_same_hashes(run: Any, store: Any) -> None:
    with store.create_run(run_id="copy", durability="none") as writer:  # the blobs are here
        for event in run.iter_events():
            stored = writer.append(event)
            assert stored.hash == event.hash and stored.ts == event.ts
    copy = store.run("copy")
    assert rows(copy) == rows(run)
    assert copy.verify().ok


def test_a_blob_the_store_lacks_is_refused(run: Any, other: Any) -> None:
    with other.create_run(run_id="copy", durability="none") as writer, \
            pytest.raises(al.errors.BlobNotFoundError):
        for event in run.iter_events():
            writer.append(event)


def test_an_event_without_a_hash_gets_one_and_keeps_its_ts(other: Any) -> None:
    with other.create_run(run_id="r", durability="none") as writer:
        first = writer.append(al.Event(seq=0, type="note", payload={"text": "hi"}, ts=1_000_000))
        second = writer.emit("note", {"text": "later"})
    assert first.ts == 1_000_000 and len(first.hash) == 64
    assert second.seq == 1
    assert other.run("r").verify().ok


def test_a_seq_out_of_place_is_refused(other: Any) -> None:
    with other.create_run(run_id="r", durability="none") as writer:
        with pytest.raises(ValueError, match="run 'r': cannot append seq 3; the next seq is 0"):
            writer.append(al.Event(seq=3, type="note", ts=1))
        assert writer.seq == 0


def test_a_different_hash_is_refused_and_nothing_is_written(run: Any, other: Any) -> None:
    events = list(run.iter_events())
    assert "$blob" not in str(rows(run)[:2])
    with other.create_run(run_id="r", durability="none") as writer:
        writer.append(events[0])
        changed = replace(events[1], payload={**events[1].payload, "name": "other"})
        with pytest.raises(ValueError, match=r"run 'r', seq 1: the event's hash .* differs from the chain hash"):
            writer.append(changed)
        assert writer.seq == 1
        writer.append(events[1])  # the real one still fits
    assert len(other.run("r")) == 2


def test_a_missing_ts_is_refused(other: Any) -> None:
    with other.create_run(run_id="r", durability="none") as writer, \
            pytest.raises(TypeError, match="seq 0: ts must be an int"):
        writer.append(al.Event(seq=0, type="note", ts=None))  # type: ignore[arg-type]
