"""The HTTP transport: the real OpenAI SDK recorded through httpx, replayed offline, secrets redacted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pyarrow.parquet as pq
import pytest

import agentlog as al
from agentlog.events import HTTPRequest

SECRET = "sk-test-SECRET-5f3a9c"
BASE = "https://API.Example.test:443/v1"


def completion(content: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}}


class Remote:
    """The fake endpoint: counts requests and checks that the key arrived."""

    def __init__(self, forbidden: bool = False) -> None:
        self.requests: list[httpx.Request] = []
        self.forbidden = forbidden

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.forbidden:
            raise AssertionError("the network was touched during replay")
        self.requests.append(request)
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        body = json.loads(request.content)
        answer = "restart" if "cpu" in body["messages"][-1]["content"] else "ok"
        return httpx.Response(200, json=completion(answer), headers={"set-cookie": f"session={SECRET}",
                                                                     "x-request-id": "req-1"})


def make_program(remote: Remote) -> Any:
    def program(rec: Any) -> str:
        client = openai.OpenAI(api_key=SECRET, base_url=BASE, max_retries=0,
                               http_client=al.transport.client(rec, transport=httpx.MockTransport(remote)))
        reply = client.chat.completions.create(model="gpt-4o-mini",
                                               messages=[{"role": "user", "content": "cpu is high"}])
        return reply.choices[0].message.content
    return program


def blob_files(store: Any) -> list[Path]:
    """The blob files of a store."""
    return [p for p in (store.path / "blobs").rglob("*") if p.is_file()]


def store_bytes(root: Path) -> bytes:
    """Every byte of the store, with Parquet segments decoded (they are compressed on disk)."""
    chunks = []
    for path in root.rglob("*"):
        if path.is_file():
            chunks.append(path.read_bytes())
            if path.suffix == ".parquet":
                chunks.append(json.dumps(pq.read_table(path).to_pylist(), default=str).encode())
    return b"\n".join(chunks)


def test_openai_sdk_is_recorded_and_replayed_offline(store: Any) -> None:
    remote = Remote()
    run = al.record(make_program(remote), store=store, name="openai")
    assert len(remote.requests) == 1
    events = list(run.iter_events())
    request = next(e for e in events if e.type == "http.request")
    response = next(e for e in events if e.type == "http.response")
    assert request.payload["method"] == "POST"
    assert request.payload["url"] == "https://api.example.test/v1/chat/completions"
    assert request.payload["headers"]["authorization"] == "[REDACTED]"
    assert json.loads(HTTPRequest.of(request).content)["model"] == "gpt-4o-mini"
    assert isinstance(request.payload["body"], str)  # UTF-8 text stays in the event: no blob file
    assert response.payload["status"] == 200 and "set-cookie" not in response.payload["headers"]
    assert response.caused_by == request.seq
    # a chat completions endpoint: the exchange is a model call, in a span of kind llm
    span = next(e for e in events if e.type == "span.started" and e.payload["kind"] == "llm")
    assert span.payload["name"] == "gpt-4o-mini" and request.span_id == span.span_id
    assert [e.type for e in events if e.span_id == span.span_id] == [
        "span.started", "llm.request", "http.request", "http.response", "llm.response", "span.ended"]
    assert run.event(len(run) - 1).payload["result"] == "restart"

    replayed = al.replay(make_program(Remote(forbidden=True)), run)
    assert replayed.ok, str(replayed) and replayed.result == "restart"


def test_no_secret_reaches_the_disk(store: Any) -> None:
    al.record(make_program(Remote()), store=store, name="openai")
    everything = store_bytes(store.path)
    assert SECRET.encode() not in everything
    assert b"[REDACTED]" in everything  # the header was there, and was redacted


def test_key_ignores_secrets_in_the_url(store: Any) -> None:
    def fetch(rec: Any, key: str) -> Any:
        client = al.transport.client(rec, transport=httpx.MockTransport(lambda r: httpx.Response(200, text="hi")))
        return client.get(f"https://example.test/search?q=cpu&api_key={key}").text
    run = al.record(lambda rec: fetch(rec, "first-secret"), store=store)
    request = next(e for e in run.iter_events() if e.type == "http.request")
    assert "first-secret" not in request.payload["url"]
    # a rotated key still replays: the key was redacted before hashing
    assert al.replay(lambda rec: fetch(rec, "rotated-secret"), run).ok


def test_repeated_fetches_store_the_page_once(store: Any) -> None:
    page = "<html>" + "job posting " * 5000 + "</html>"

    def scan(rec: Any) -> int:
        client = al.transport.client(rec, transport=httpx.MockTransport(lambda r: httpx.Response(200, text=page)))
        return sum(len(client.get("https://jobs.example.test/careers").text) for _ in range(5))
    run = al.record(scan, store=store)
    bodies = {e.payload["body"].digest for e in run.iter_events() if e.type == "http.response"}
    assert len(bodies) == 1
    assert len(blob_files(store)) < 10


def test_user_named_header_is_redacted(store: Any) -> None:
    def program(rec: Any) -> int:
        client = al.transport.client(rec, transport=httpx.MockTransport(lambda r: httpx.Response(204)),
                                redact=["X-Session-Token"])
        return client.get("https://example.test/", headers={"X-Session-Token": "tok-123"}).status_code
    run = al.record(program, store=store)
    assert b"tok-123" not in store_bytes(store.path)
    assert run.event(len(run) - 1).payload["result"] == 204


def test_async_client_records_and_replays(store: Any) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"n": 1})

    async def program(rec: Any) -> Any:
        async with al.transport.async_client(rec, transport=httpx.MockTransport(handler)) as client:
            return (await client.get("https://example.test/n")).json()
    run = asyncio.run(al.arecord(program, store=store))
    assert run.event(len(run) - 1).payload["result"] == {"n": 1}
    assert [e.type for e in run.iter_events() if e.type.startswith("http.")] == ["http.request", "http.response"]


def test_without_a_recorder_the_transport_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match="needs a recorder"):
        httpx.Client(transport=al.transport.RecordingTransport()).get("https://example.test/")


@pytest.mark.usefixtures("no_background_write")  # fsyncs counted exactly
@pytest.mark.parametrize("model_call", [True, False])
def test_a_model_call_costs_one_fsync_and_other_http_two(store: Any, fsyncs: list[int], model_call: bool) -> None:
    """With the default durability a request's events reach the WAL before the request goes
    out (a reader sees them; a killed process keeps them). A model call's are fsynced with its
    answer, one fsync a call; any other request's before it goes out, as it may change
    something, so its record is on disk even if the machine dies while it is in flight."""
    synced = fsyncs
    seen: dict[str, Any] = {}

    def remote(request: httpx.Request) -> httpx.Response:
        seen["on disk"] = [e.type for e in store.run(seen["run"]).iter_events()][-3:]
        seen["fsyncs"] = synced.count(seen["fd"])
        return httpx.Response(200, json=completion("ok"))

    with al.recording(store=store, name="one call") as rec:
        seen["run"], seen["fd"] = rec.run_id, rec._sink.writer._wal._fd
        client = al.transport.client(rec, transport=httpx.MockTransport(remote))
        synced.clear()
        if model_call:
            client.post(f"{BASE}/chat/completions", json={"model": "gpt-4o-mini",
                                                         "messages": [{"role": "user", "content": "hi"}]})
        else:
            client.get(f"{BASE}/status")
        after = synced.count(seen["fd"])
    asked = ["span.started", "llm.request", "http.request"] if model_call else ["span.started", "http.request"]
    assert seen["on disk"][-len(asked):] == asked
    assert (seen["fsyncs"], after) == ((0, 1) if model_call else (1, 2))


@pytest.mark.parametrize("temperature", [0.2, 1e-05, 0.00002])
def test_a_model_calls_key_is_the_requests_llm_key(store: Any, temperature: float) -> None:
    """The transport keys the request it parsed from the body without copying or re-checking
    it when its numbers allow (``plain_numbers``); the key is ``llm_key`` of the request all
    the same, a float under 1e-4 (written differently by orjson) included."""
    from agentlog.keys import llm_key

    sent: list[bytes] = []

    def remote(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, json=completion("ok"))

    def program(rec: Any) -> None:
        client = openai.OpenAI(api_key=SECRET, base_url=BASE, max_retries=0,
                               http_client=al.transport.client(rec, transport=httpx.MockTransport(remote)))
        client.chat.completions.create(model="gpt-4o-mini", temperature=temperature,
                                       messages=[{"role": "user", "content": "cpu is high"}])
    run = al.record(program, store=store)
    [asked] = [e for e in run.iter_events() if e.type == "llm.request"]
    assert asked.payload["key"] == llm_key(json.loads(sent[0]))
    assert asked.payload["params"] == {"temperature": temperature}


def test_a_model_calls_long_body_stays_in_its_event_and_other_long_bodies_are_blobs(store: Any) -> None:
    """A model call's request body holds the whole conversation, unique to the call: it stays
    in its ``http.request`` past the run's blob threshold (a blob would cost a file and two
    fsyncs, and save nothing), while a long message in ``llm.request`` and a long page fetched
    by plain HTTP are blobs as before (stored once however often they come back)."""
    from agentlog.events import HTTPRequest, HTTPResponse

    page = "x" * 40_000
    conversation = [{"role": "user", "content": f"turn {i}: " + "cpu is high, " * 200} for i in range(12)]
    conversation[3]["content"] = "runbook: " + "restart the pool, drain the queue; " * 600  # 20 KB

    def remote(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/page"):
            return httpx.Response(200, text=page)
        return httpx.Response(200, json=completion("ok"))

    def program(rec: Any) -> None:
        http = al.transport.client(rec, transport=httpx.MockTransport(remote))
        client = openai.OpenAI(api_key=SECRET, base_url=BASE, max_retries=0, http_client=http)
        client.chat.completions.create(model="gpt-4o-mini", messages=conversation)
        http.get(f"{BASE}/page")

    run = al.record(program, store=store)
    requests = [e for e in run.iter_events() if e.type == "http.request"]
    sent = HTTPRequest.of(requests[0])
    assert isinstance(requests[0].payload["body"], str) and len(requests[0].payload["body"]) > 16 * 1024
    assert json.loads(sent.content)["messages"] == conversation
    [fetched] = [e for e in run.iter_events() if e.type == "http.response" and e.caused_by == requests[1].seq]
    assert not isinstance(fetched.payload["body"], str) and HTTPResponse.of(fetched).content == page.encode()
    [asked] = [e for e in run.iter_events() if e.type == "llm.request"]
    assert not isinstance(asked.payload["messages"][3]["content"], str)  # the long message: a blob
    assert len(blob_files(store)) == 2  # that message and the page
    assert al.replay(program, run).ok


def test_the_trace_context_a_tracer_adds_is_not_recorded_and_replay_passes(store: Any) -> None:
    """A tracer puts new ids in every request's ``traceparent`` (and B3's, Datadog's, ... headers)
    on every run: they are not recorded, so the replay of a traced program passes; the other
    headers are recorded as sent."""
    import os

    from agentlog.capture.headers import TRACE_HEADERS

    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(204)

    def program(rec: Any) -> int:
        client = al.transport.client(rec, transport=httpx.MockTransport(answer))
        ids = {"Traceparent": f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01", "X-B3-TraceId": os.urandom(8).hex(),
               "Sentry-Trace": os.urandom(16).hex()}
        return client.get("https://example.test/", headers={**ids, "X-Tenant": "acme"}).status_code

    run = al.record(program, store=store)
    [asked] = [e for e in run.iter_events() if e.type == "http.request"]
    headers = HTTPRequest.of(asked).headers
    assert headers["x-tenant"] == "acme" and "traceparent" in sent[0].headers  # sent, as the tracer wanted
    assert not set(headers) & TRACE_HEADERS and {"traceparent", "x-b3-traceid", "sentry-trace"} <= TRACE_HEADERS
    result = al.replay(program, run)
    assert result.ok, str(result.divergence)
    assert len(sent) == 1


def test_a_replay_on_another_os_or_sdk_version_passes_but_not_another_request(store: Any) -> None:
    """The headers in which a client describes itself (``User-Agent``, the Stainless SDKs'
    ``X-Stainless-*``: OpenAI's and Anthropic's version, OS, runtime) are recorded and not
    compared: a run recorded on a laptop replays in CI. A header of the request itself is."""
    machines = iter([("MacOS", "openai/1.50"), ("Linux", "openai/1.51"), ("Linux", "openai/1.51")])
    tenants = iter(["acme", "acme", "globex"])

    def program(rec: Any) -> int:
        os_name, agent = next(machines)
        client = al.transport.client(rec, transport=httpx.MockTransport(lambda request: httpx.Response(204)))
        return client.get("https://example.test/", headers={
            "User-Agent": agent, "X-Stainless-OS": os_name, "X-Tenant": next(tenants)}).status_code

    run = al.record(program, store=store)
    [asked] = [e for e in run.iter_events() if e.type == "http.request"]
    assert HTTPRequest.of(asked).headers["x-stainless-os"] == "MacOS"  # recorded as sent
    result = al.replay(program, run)
    assert result.ok, str(result.divergence)
    result = al.replay(program, run)
    assert not result.ok and result.divergence.seq == asked.seq
    assert "/headers/x-tenant" in str(result.divergence)
