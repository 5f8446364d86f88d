"""What the transport writes for a recorded call: the same events as when it wrote them one
``emit`` at a time (the golden run, every hash), the request side on disk before the request is
sent, and with ``fsync`` every event of a call on disk before the call returns."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from _transport_golden import Remote, program, record, rows

import agentlog as al
from agentlog.capture.recorder import Recorder
from agentlog.capture.sinks import WriterSink
from agentlog.store.wal import WAL_NAME

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "transport_run.json"
GOLDEN_V1 = GOLDEN.with_name("transport_run_v1.json")  # HTTP bodies as blobs, before version 2
GOLDEN_V2 = GOLDEN.with_name("transport_run_v2.json")  # a stream as a blob, before llm.response v3


def golden(path: Path = GOLDEN) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(path.read_text())["events"]
    return events


def test_a_recorded_call_writes_the_events_one_emit_at_a_time_wrote(store: Any) -> None:
    recorded = rows(record(store))
    expected = golden()
    assert [e["type"] for e in recorded] == [e["type"] for e in expected]
    for mine, theirs in zip(recorded, expected, strict=True):  # seq by seq, so a failure names one
        assert mine == theirs, mine["seq"]
    assert store.run("golden").verify().ok


def test_version_2_changes_only_the_form_of_the_http_bodies() -> None:
    """The version 2 recording is the version 1 one (written one emit at a time) but for the
    HTTP bodies, which are the same bytes kept inline instead of as blobs."""
    for new, old in zip(golden(GOLDEN_V2), golden(GOLDEN_V1), strict=True):
        assert (new["seq"], new["type"]) == (old["seq"], old["type"])
        mine, theirs = json.loads(new["payload"]), json.loads(old["payload"])
        if new["type"].startswith("http."):
            assert mine.pop("$v") == 2
            body, blob = mine.pop("body"), theirs.pop("body")
            if isinstance(body, str):
                digest = "sha256:" + hashlib.sha256(body.encode()).hexdigest()
                assert blob["$blob"] == digest and blob["size"] == len(body.encode())
            else:
                assert body == blob  # none, or a stream's raw bytes: a blob in both
        assert mine == theirs, new["seq"]
        assert {k: v for k, v in new.items() if k not in ("payload", "hash")} == \
               {k: v for k, v in old.items() if k not in ("payload", "hash")}


def test_llm_response_version_3_changes_only_the_form_of_the_stream() -> None:
    """Today's recording is the version 2 one but for the streamed call: its raw stream is the
    http.response body kept inline (the same bytes as version 2's blob), its llm.response says
    ``streamed`` instead of naming the blob, and every llm.response says ``$v`` 3."""
    changed = set()
    for new, old in zip(golden(), golden(GOLDEN_V2), strict=True):
        assert (new["seq"], new["type"]) == (old["seq"], old["type"])
        mine, theirs = json.loads(new["payload"]), json.loads(old["payload"])
        if new["type"] == "llm.response":
            assert (mine.pop("$v"), theirs.pop("$v")) == (3, 2)
            if "stream" in theirs:
                theirs.pop("stream")
                assert mine.pop("streamed") is True
                changed.add(new["seq"])
        body = mine.get("body")
        if new["type"] == "http.response" and isinstance(theirs.get("body"), dict):
            blob = theirs.pop("body")
            assert blob["$blob"] == "sha256:" + hashlib.sha256(mine.pop("body").encode()).hexdigest()
            assert body.startswith("data: ")
            changed.add(new["seq"])
        assert mine == theirs, new["seq"]
        assert {k: v for k, v in new.items() if k not in ("payload", "hash")} == \
               {k: v for k, v in old.items() if k not in ("payload", "hash")}
    assert len(changed) == 2  # the streamed call's two answer events


@pytest.mark.parametrize("path", [GOLDEN, GOLDEN_V2, GOLDEN_V1], ids=["v3", "v2", "v1"])
def test_the_golden_events_replay_strictly(store: Any, path: Path) -> None:
    """Every recording replays with zero network requests: the blob bodies of the older ones are
    the bodies the program sends and gets (a stream's included), in another form."""
    for row in golden(GOLDEN):  # the blobs the older recordings name: today's inline bodies
        body = json.loads(row["payload"]).get("body")
        if isinstance(body, str):
            store.blobs.put(body.encode(), "application/json")
    writer = store.create_run(run_id="one-at-a-time", durability="none")
    for row in golden(path):
        writer.append(al.Event(seq=row["seq"], type=row["type"], payload=json.loads(row["payload"]),
                               actor=row["actor"], caused_by=row["caused_by"], span_id=row["span_id"],
                               ts=row["ts"], model=row["model"], input_tokens=row["input_tokens"],
                               output_tokens=row["output_tokens"], cached_tokens=row["cached_tokens"],
                               cost_usd=row["cost_usd"], duration_ms=row["duration_ms"], hash=row["hash"]))
    writer.close("finished")
    run = store.run("one-at-a-time")
    result = al.replay(program(Remote(forbidden=True)), run)
    assert result.ok, str(result.divergence)
    assert result.result == json.loads(golden(path)[-1]["payload"])["result"]


class Watching(Remote):
    """A server that, as each request reaches it, reads the run from a Store of its own."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.on_disk: list[list[tuple[int, str, str]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        run = al.Store(self.root).run("golden")
        self.on_disk.append([(e.seq, e.type, e.hash) for e in run.iter_events()])
        return super().__call__(request)


@pytest.mark.parametrize("durability", ["fsync", "none"])
def test_the_request_side_is_on_disk_before_the_request_is_sent(tmp_path: Path, durability: str) -> None:
    root = tmp_path / "store"
    remote = Watching(root)
    run = record(al.Store(root), remote, durability=durability)
    final = [(e.seq, e.type, e.hash) for e in run.iter_events()]
    requests = [i for i, e in enumerate(final) if e[1] == "http.request"]
    assert len(remote.on_disk) == len(requests) == 5
    for seen, at in zip(remote.on_disk, requests, strict=True):
        assert seen == final[:at + 1]  # everything up to this call's http.request, nothing after
        started = max(i for i, e in enumerate(final[:at]) if e[1] == "span.started")
        assert [e[1] for e in seen[started:]] in (["span.started", "llm.request", "http.request"],
                                                 ["span.started", "http.request"])


def test_with_fsync_every_event_of_a_call_is_on_disk_before_it_returns(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[tuple[str, int]] = []  # (file, its size) at each fsync
    fsync = os.fsync

    def spy(fd: int) -> None:
        fsync(fd)
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd).st_size))

    monkeypatch.setattr(os, "fsync", spy)
    store = al.Store(tmp_path / "store")
    writer = store.create_run(run_id="synced", durability="fsync")
    rec = Recorder(WriterSink(writer))
    client = al.transport.client(rec, transport=httpx.MockTransport(Remote()))
    wal = writer.path / WAL_NAME
    for text in ("one", "two"):
        client.post("https://api.openai.com/v1/chat/completions",
                    json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
        size = wal.stat().st_size
        assert size > 0 and (str(wal), size) in synced  # the WAL as it is now was fsynced
        seen = [e.type for e in al.Store(tmp_path / "store").run("synced").iter_events()]
        assert seen[-3:] == ["http.response", "llm.response", "span.ended"]
    writer.close()


@pytest.mark.parametrize("at", [1, 2])  # the cut after span.started, after llm.request
def test_a_fork_cut_inside_the_request_batch_links_the_request_to_its_model_call(store: Any, at: int) -> None:
    parent = record(store)
    fork = al.fork(parent, at, program=program(Remote()))
    events = list(fork.iter_events())
    assert events[at + 1].type == "fork.started"
    asked = next(e for e in events[2:] if e.type == "llm.request")  # the first call's: kept or re-made
    request = next(e for e in events[at + 1:] if e.type == "http.request")
    assert request.caused_by == asked.seq
    answer = next(e for e in events[at + 1:] if e.type == "llm.response")
    assert answer.caused_by == asked.seq and answer.span_id == request.span_id == events[1].span_id
    assert fork.verify().ok
