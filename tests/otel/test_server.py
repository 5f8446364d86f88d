"""The OTLP/HTTP endpoint: a real exporter in a child process writes into the store while it
runs; JSON and protobuf, spans sent twice, bad requests; ``agentlog serve --otlp``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import agentlog as al
from agentlog.events import SpanStarted

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "interop"))
from _interop_sources import otlp_json, traced_agent


@pytest.fixture
def server(store: Any) -> Iterator[Any]:
    with al.otel.serve(store, port=0, idle=60) as running:
        yield running


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


def _only_run(store: Any) -> Any:
    [run_id] = store.list_runs()
    return store.run(run_id)


def test_a_child_process_agent_appears_while_it_runs(server: Any, store: Any) -> None:
    with subprocess.Popen([sys.executable, str(HERE / "_child_agent.py"), server.traces_url],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env()) as child:
        sizes = _watch(child, store)
    _check_child_run(_only_run(store), sizes)


def _watch(child: Any, store: Any) -> list[int]:
    """Step the child through its steps; the size of its run after each."""
    sizes = []
    try:
        for step in range(2):
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline().strip() == f"step {step}"
            assert child.poll() is None  # still running
            run = _only_run(store)
            sizes.append(len(run))
            assert len(run.llm_calls()) == step + 1 and run.status == "open"
            child.stdin.write("\n")
            child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
    return sizes


def _check_child_run(run: Any, sizes: list[int]) -> None:
    assert sizes[0] < sizes[1] < len(run)  # it grew step by step, then the agent span came
    assert run.id.startswith("otlp-") and run.meta["tags"]["service.name"] == "child-agent"
    assert run.name == f"child-agent {run.meta['tags']['trace_id'][:8]}"  # named before its root arrived
    names = {e.span_id: SpanStarted.of(e) for e in run.iter_events() if e.type == "span.started"}
    agent = next(sid for sid, s in names.items() if s.name == "invoke_agent sre")
    steps = [sid for sid, s in names.items() if s.name.startswith("step ")]
    assert names[agent].kind == "agent" and all(names[s].parent == agent for s in steps)
    assert [names[s.parent].name for s in names.values() if s.kind == "llm"] == ["step 0", "step 1"]
    assert run.verify().ok and not run.replayable


def test_json_and_protobuf_and_repeats_write_each_span_once(server: Any, store: Any) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    _, spans = traced_agent("genai")
    first = httpx.post(server.traces_url, json=otlp_json(spans[:1]))
    assert first.status_code == 200 and first.json() == {}
    size = len(_only_run(store))
    assert httpx.post(server.traces_url, json=otlp_json(spans[:1])).status_code == 200
    assert len(_only_run(store)) == size  # the same span again: nothing new
    body = encode_spans(spans).SerializePartialToString()
    reply = httpx.post(server.traces_url, content=body, headers={"Content-Type": "application/x-protobuf"})
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/x-protobuf"
    run = _only_run(store)
    assert [e.type for e in run.iter_events()].count("span.started") == len(spans) == 3
    assert len(run.llm_calls()) == 1 and server.spans_received == 5
    again = httpx.post(server.traces_url, content=body, headers={"Content-Type": "application/x-protobuf"})
    assert again.status_code == 200 and len(_only_run(store)) == len(run)


def test_bad_requests_say_what_is_wrong(server: Any, store: Any) -> None:
    assert httpx.post(server.url + "/v1/logs", json={}).status_code == 404
    bad = httpx.post(server.traces_url, content=b"{not json", headers={"Content-Type": "application/json"})
    assert bad.status_code == 400 and "Expecting property name" in bad.json()["message"]
    span = {"traceId": "ab" * 16, "spanId": "xyz", "name": "s"}
    wrong = httpx.post(server.traces_url, json={"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    assert wrong.status_code == 400 and "spanId 'xyz' is neither 16 hex digits" in wrong.json()["message"]
    garbage = httpx.post(server.traces_url, content=b"\xff\x00garbage",
                         headers={"Content-Type": "application/x-protobuf"})
    assert garbage.status_code == 400
    assert httpx.get(server.traces_url).status_code == 405
    assert store.list_runs() == []


def test_the_cli_serves_until_interrupted(tmp_path: Path) -> None:
    _, spans = traced_agent("openinference")
    store = tmp_path / "served"
    with subprocess.Popen([sys.executable, "-m", "agentlog.cli", "--store", str(store), "serve", "--otlp", "0"],
                          stderr=subprocess.PIPE, text=True) as proc:
        _serve_one_trace(proc, store, spans)
    run = _only_run(al.Store(store))
    assert run.status == "closed" and len(run.llm_calls()) == 1


def _serve_one_trace(proc: Any, store: Path, spans: list[Any]) -> None:
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("agentlog: OTLP/HTTP traces to http://127.0.0.1:") and str(store) in line
        url = re.search(r"http://\S+", line).group(0)  # type: ignore[union-attr]
        assert httpx.post(url, json=otlp_json(spans)).status_code == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "stopped after 3 spans" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
