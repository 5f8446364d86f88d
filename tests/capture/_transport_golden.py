"""A recorded program of HTTP exchanges whose events are byte-for-byte reproducible: the kinds of
exchange the transport writes (a model call, a plain request, a streamed model call, a model
call the server refuses, a connection that fails), through ``al.transport.client`` over an
``httpx.MockTransport``, with a ticking clock and a ticking call timer.

``tests/golden/transport_run.json`` holds the events this program's recording had when the
transport wrote its events one ``emit`` at a time (made by ``tests/golden/make_transport_run.py``
from that tree): the batched transport must write the very same events.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pyarrow as pa

import agentlog as al
from agentlog import pricing
from agentlog.capture.lifecycle import drive
from agentlog.capture.recorder import Recorder
from agentlog.capture.sinks import WriterSink

T0 = 1_796_241_648.0
SECRET = "sk-golden-5f3a9c"
BASE = "https://api.openai.com/v1"
USAGE = {"prompt_tokens": 42, "completion_tokens": 4, "total_tokens": 46}
PRICES = {model: {"input": 0.15, "output": 0.6, "cached_input": 0.075}  # USD per million tokens
          for model in ("gpt-4o-mini", "gpt-4o-mini-2024-07-18")}
COLUMNS = ("seq", "type", "actor", "caused_by", "span_id", "ts", "payload", "model", "input_tokens",
           "output_tokens", "cached_tokens", "cost_usd", "duration_ms", "hash")


class Ticker:
    """A clock that moves ``step`` each time it is read."""

    def __init__(self, start: float, step: float) -> None:
        self.now, self.step = start, step

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value


def completion(content: str) -> dict[str, Any]:
    return {"id": "chatcmpl-g", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": USAGE}


def sse(content: str) -> bytes:
    """A chat completion streamed as server-sent events, usage in the last chunk."""
    chunks: list[dict[str, Any]] = [
        {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024-07-18",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": word}, "finish_reason": None}]}
        for word in content.split(" ")]
    chunks.append({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1,
                   "model": "gpt-4o-mini-2024-07-18",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": USAGE})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


class Remote:
    """The fake server; ``forbidden`` fails any request (a replay must send none)."""

    def __init__(self, forbidden: bool = False) -> None:
        self.forbidden = forbidden
        self.seen: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.forbidden:
            raise AssertionError(f"the network was touched: {request.url}")
        self.seen.append(f"{request.method} {request.url.path}")
        if request.url.host == "down.test":
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path.endswith("/chat/completions"):
            body = json.loads(request.content)
            text = body["messages"][-1]["content"]
            if text == "fail":
                return httpx.Response(500, json={"error": {"message": "overloaded"}})
            if body.get("stream"):
                return httpx.Response(200, content=sse(f"stream for {text}"),
                                      headers={"content-type": "text/event-stream"})
            return httpx.Response(200, json=completion(f"answer to {text}"), headers={"x-request-id": "r-1"})
        return httpx.Response(200, json={"up": True, "path": request.url.path})


def program(remote: Remote) -> Any:
    """The recorded program: five exchanges through one recording client."""
    def run(rec: Any) -> list[Any]:
        client = al.transport.client(rec, transport=httpx.MockTransport(remote))
        auth = {"Authorization": f"Bearer {SECRET}"}
        out: list[Any] = []
        answer = client.post(f"{BASE}/chat/completions", headers=auth,
                             json={"model": "gpt-4o-mini", "temperature": 0,
                                   "messages": [{"role": "user", "content": "cpu is high"}]})
        out.append(answer.json()["choices"][0]["message"]["content"])
        out.append(client.get(f"https://status.test/health?api_key={SECRET}").json())
        with client.stream("POST", f"{BASE}/chat/completions", headers=auth,
                           json={"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
                                 "messages": [{"role": "user", "content": "disk"}]}) as streamed:
            out.append(b"".join(streamed.iter_bytes()).count(b"data: "))
        out.append(client.post(f"{BASE}/chat/completions", headers=auth,
                               json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "fail"}]}
                               ).status_code)
        try:
            client.get("https://down.test/")
        except httpx.ConnectError as exc:
            out.append(str(exc))
        return out
    return run


def record(store: Any, remote: Remote | None = None, *, durability: str = "none") -> Any:
    """Record :func:`program` with a ticking clock and timer: the same events every time."""
    writer = store.create_run(run_id="golden", name="golden", clock=Ticker(T0, 0.001), durability=durability)
    rec = Recorder(WriterSink(writer), clock=Ticker(T0, 0.5), timer=Ticker(100.0, 0.25), capture_http=False)
    with pricing.overrides(PRICES):  # the costs, and so the hashes, do not move with genai-prices' catalog
        drive(rec, program(remote or Remote()))
    writer.close("finished")
    return store.run("golden")


def rows(run: Any) -> list[dict[str, Any]]:
    """The run's events as stored: every column (``ts`` in microseconds), the payload as its
    canonical JSON."""
    table = run.table()
    table = table.set_column(table.schema.get_field_index("ts"), "ts", table.column("ts").cast(pa.int64()))
    return [{c: row[c] for c in COLUMNS} for row in table.to_pylist()]
