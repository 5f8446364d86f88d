"""A small OpenAI-compatible server on 127.0.0.1, started by the tests: real sockets, real httpx.

``POST /v1/chat/completions`` answers with usage (cached tokens included); when tools are
offered and the conversation holds no tool result yet, it asks for the first tool, with the
arguments ``{"service": "api"}`` (or once per service, side by side: :data:`ASK_EVERY`); otherwise it answers text that quotes the last tool result
(so a fork that changes a tool result changes the next request and the answer). With
``"stream": true`` the answer comes as server-sent events, one chunk per word, usage in a last
chunk only when ``stream_options.include_usage`` asked for it (:meth:`LLMServer.hold_streams`
holds a stream after its first chunks until the test releases it). ``POST /v1/responses`` answers
in the Responses API's shape, ``POST /v1/messages`` in Anthropic's (streamed as its API streams, asked with ``stream``) and
``POST /api/chat`` and ``/api/generate`` in Ollama's own (JSON lines unless ``"stream": false``), ``POST /v1beta/models/<model>:generateContent`` in Gemini's (``:streamGenerateContent``: streamed as its API streams). A chat whose last message starts with
:data:`SLOW` is answered 0.3 s late, one with :data:`OVERLOADED` with HTTP 503. Every request is counted and kept (``server.requests``).

    with LLMServer() as server:
        openai.OpenAI(base_url=server.url, api_key="test")...
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

MODEL = "gpt-4o-mini"
#: A conversation that holds this asks for the first tool once per service of
#: :data:`EVERY_SERVICE`, side by side in one turn (else once, for ``api``); its answer then
#: quotes every result of that turn.
ASK_EVERY = "every service"
EVERY_SERVICE = ["api", "db", "queue"]
#: A chat message that starts with this is answered 0.3 s late: a test of calls made side by
#: side gets its answers in another order than it asked.
SLOW = "slow:"
#: A chat message that starts with this is answered 503 (overloaded).
OVERLOADED = "overloaded:"
ANSWERED_MODEL = "gpt-4o-mini-2024-07-18"
USAGE = {"prompt_tokens": 42, "completion_tokens": 4, "total_tokens": 46,
         "prompt_tokens_details": {"cached_tokens": 10}}


ANTHROPIC_USAGE = {"input_tokens": 30, "output_tokens": 4, "cache_read_input_tokens": 100,
                   "cache_creation_input_tokens": 20}
OLLAMA_USAGE = {"prompt_eval_count": 26, "eval_count": 4}
GEMINI_USAGE = {"promptTokenCount": 42, "candidatesTokenCount": 4, "totalTokenCount": 46,
                "cachedContentTokenCount": 10}


def _last_tool_result(messages: list[Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "tool":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return None


def _tool_results(messages: list[Any]) -> list[str]:
    """The tool results of the last turn (the tool messages at the end), in order."""
    found: list[str] = []
    for message in reversed(messages):
        if not (isinstance(message, dict) and message.get("role") == "tool"):
            break
        content = message.get("content")
        found.insert(0, content if isinstance(content, str) else json.dumps(content))
    return found


def chat_answer(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``(assistant message, finish reason)`` for a chat completions request."""
    messages = body.get("messages") or []
    result = _last_tool_result(messages)
    if body.get("tools") and result is None:
        tool = body["tools"][0]["function"]["name"]
        services = EVERY_SERVICE if any(ASK_EVERY in str(m.get("content")) for m in messages
                                        if isinstance(m, dict)) else ["api"]
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": tool, "arguments": json.dumps({"service": service})}}
            for i, service in enumerate(services, 1)]}, "tool_calls"
    if result is not None and len(_tool_results(messages)) > 1:
        text = "done: " + "; ".join(_tool_results(messages))
    else:
        text = f"done: {result}" if result is not None else "restart the api"
    return {"role": "assistant", "content": text}, "stop"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without this, Nagle's algorithm and the
        # client's delayed ACK hold each answer ~40 ms
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", f"req-{len(self.server.requests)}")
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        with self.server.lock:
            self.server.requests.append((self.path, body))
            n = len(self.server.requests)
        path = self.path.split("?")[0]  # Azure's ?api-version=, Gemini's ?alt=sse
        if path.endswith("/chat/completions"):
            self._chat(body, n)
        elif path.endswith("/responses"):
            self._responses(body, n)
        elif path.endswith("/messages"):
            message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": body["model"],
                       "content": [{"type": "text", "text": "restart the api"}],
                       "stop_reason": "end_turn", "stop_sequence": None, "usage": ANTHROPIC_USAGE}
            if body.get("stream"):
                self._anthropic_stream(message)
            else:
                self._json(200, message)
        elif path.endswith("/api/chat"):
            self._ollama(body)
        elif path.endswith("/api/generate"):
            self._ollama_generate(body)
        elif ":streamGenerateContent" in self.path:
            self._gemini_stream(self.path.split("/models/")[1].split(":")[0])
        elif ":generateContent" in self.path:
            self._json(200, {"candidates": [{"content": {"role": "model", "parts": [{"text": "restart the api"}]},
                                             "finishReason": "STOP", "index": 0}],
                             "usageMetadata": GEMINI_USAGE, "modelVersion": self.path.split("/models/")[1].split(":")[0]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def _chat(self, body: dict[str, Any], n: int) -> None:
        message, finish = chat_answer(body)
        last = (body.get("messages") or [{}])[-1]
        if isinstance(last, dict) and str(last.get("content") or "").startswith(SLOW):
            time.sleep(0.3)  # answered after the requests that came in after it
        if isinstance(last, dict) and str(last.get("content") or "").startswith(OVERLOADED):
            self._json(503, {"error": {"message": "overloaded", "type": "server_error"}})
            return
        if body.get("stream"):
            self._stream(body, message, finish, n)
            return
        self._json(200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1,
                         "model": ANSWERED_MODEL, "system_fingerprint": "fp",
                         "choices": [{"index": 0, "finish_reason": finish, "message": message,
                                      "logprobs": None}], "usage": USAGE})

    def _stream(self, body: dict[str, Any], message: dict[str, Any], finish: str, n: int) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": ANSWERED_MODEL}
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if message.get("tool_calls"):
            call = message["tool_calls"][0]
            deltas.append({"tool_calls": [{"index": 0, **call}]})
        else:
            words = str(message["content"]).split(" ")
            deltas += [{"content": w if i == 0 else " " + w} for i, w in enumerate(words)]
        chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": USAGE})
        for i, chunk in enumerate(chunks):
            if i == 2 and self.server.gate is not None:  # hold the rest until the client has the start
                self.server.gate_waited = self.server.gate.wait(timeout=10)
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _ollama(self, body: dict[str, Any]) -> None:
        """Ollama's own chat API: its message (tool calls with their arguments as objects, and
        no ids), the counts at the top level, and, unless ``"stream": false``, the answer as
        JSON lines, a word a line, the counts in the last."""
        message, _ = chat_answer(body)
        said: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            said["tool_calls"] = [{"function": {"name": c["function"]["name"],
                                                "arguments": json.loads(c["function"]["arguments"])}}
                                  for c in message["tool_calls"]]
        base = {"model": body["model"], "created_at": "2026-12-07T00:00:00Z"}
        last = {**base, "done": True, "done_reason": "stop", "total_duration": 1000, "load_duration": 10,
                **OLLAMA_USAGE}
        if body.get("stream") is False:
            self._json(200, {**last, "message": said})
            return
        self.send_response(200)
        self.send_header("content-type", "application/x-ndjson")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        words = str(said["content"]).split(" ") if said["content"] else []
        lines = [{**base, "message": {"role": "assistant", "content": w if i == 0 else " " + w}, "done": False}
                 for i, w in enumerate(words)]
        if said.get("tool_calls"):
            lines.append({**base, "message": {"role": "assistant", "content": "", "tool_calls": said["tool_calls"]},
                          "done": False})
        lines.append({**last, "message": {"role": "assistant", "content": ""}})
        for line in lines:
            self._chunk(json.dumps(line).encode() + b"\n")
        self._chunk(b"")

    def _ollama_generate(self, body: dict[str, Any]) -> None:
        """Ollama's own completion API: ``response`` text, the counts at the top level, JSON
        lines unless ``"stream": false``."""
        base = {"model": body["model"], "created_at": "2026-12-07T00:00:00Z"}
        last = {**base, "done": True, "done_reason": "stop", "context": [1, 2, 3], **OLLAMA_USAGE}
        text = "restart the api"
        if body.get("stream") is False:
            self._json(200, {**last, "response": text})
            return
        self.send_response(200)
        self.send_header("content-type", "application/x-ndjson")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        words = text.split(" ")
        for i, word in enumerate(words):
            self._chunk(json.dumps({**base, "response": word if i == 0 else " " + word, "done": False}).encode() + b"\n")
        self._chunk(json.dumps({**last, "response": ""}).encode() + b"\n")
        self._chunk(b"")

    def _anthropic_stream(self, message: dict[str, Any]) -> None:
        """``message`` as Anthropic's API streams it: named server-sent events, the input
        tokens in ``message_start``, the output tokens so far in ``message_delta``."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        usage = message["usage"]
        start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        words = str(message["content"][0]["text"]).split(" ")
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": w if i == 0 else " " + w}} for i, w in enumerate(words)),
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
             "usage": {"output_tokens": usage["output_tokens"]}},
            {"type": "message_stop"}]
        for event in events:
            self._chunk(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self._chunk(b"")

    def _gemini_stream(self, model: str) -> None:
        """The answer as Gemini's API streams it (``alt=sse``): a response a chunk, one word of
        text each, the finish reason and the usage in the last."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        words = ["restart", "the", "api"]
        for i, word in enumerate(words):
            last = i == len(words) - 1
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": word if i == 0 else " " + word}]},
                                         "index": 0}
            chunk: dict[str, Any] = {"candidates": [{**candidate, "finishReason": "STOP"} if last else candidate],
                                     "modelVersion": model}
            if last:
                chunk["usageMetadata"] = GEMINI_USAGE
            self._chunk(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _responses(self, body: dict[str, Any], n: int) -> None:
        text = "restart the api"
        response = {
            "id": f"resp_{n}", "object": "response", "created_at": 1, "status": "completed",
            "model": ANSWERED_MODEL, "output": [{"type": "message", "id": f"msg_{n}", "status": "completed",
                                                 "role": "assistant", "content": [
                                                     {"type": "output_text", "text": text, "annotations": []}]}],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 42, "output_tokens": 4, "total_tokens": 46,
                      "input_tokens_details": {"cached_tokens": 10},
                      "output_tokens_details": {"reasoning_tokens": 0}}}
        if body.get("stream"):
            self._responses_stream(response)
        else:
            self._json(200, response)

    def _responses_stream(self, response: dict[str, Any]) -> None:
        """``response`` as the Responses API streams it: named events, the text a word a delta,
        the whole response in ``response.completed``."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        [item] = response["output"]
        part = item["content"][0]
        where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        words = str(part["text"]).split(" ")
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
            {"type": "response.output_item.added", "output_index": 0,
             "item": {**item, "status": "in_progress", "content": []}},
            {"type": "response.content_part.added", **where, "part": {**part, "text": ""}},
            *({"type": "response.output_text.delta", **where, "delta": w if i == 0 else " " + w, "logprobs": []}
              for i, w in enumerate(words)),
            {"type": "response.output_text.done", **where, "text": part["text"], "logprobs": []},
            {"type": "response.content_part.done", **where, "part": part},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response}]
        for i, event in enumerate(events):
            self._chunk(f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': i})}\n\n".encode())
        self._chunk(b"")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, dict[str, Any]]]
    lock: threading.Lock
    gate: threading.Event | None = None
    gate_waited: bool | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed its kept-alive connection is no error (the default prints a
        traceback for each, into the output of the tests and benchmarks); anything else is."""
        if not isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            super().handle_error(request, client_address)


class LLMServer:
    """The server, on a free port of 127.0.0.1, in a thread; a context manager."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.requests, self._server.lock = [], threading.Lock()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The OpenAI base URL (``http://127.0.0.1:<port>/v1``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def hold_streams(self) -> threading.Event:
        """Make a stream stop after its first two chunks until the returned event is set (so
        a test can see a client get chunks before the server sent them all)."""
        self._server.gate = threading.Event()
        return self._server.gate

    @property
    def gate_waited(self) -> bool | None:
        """Whether the last held stream was released (``False``: it waited 10 s in vain)."""
        return self._server.gate_waited

    @property
    def requests(self) -> list[tuple[str, dict[str, Any]]]:
        """``(path, JSON body)`` of every request received, in order."""
        return self._server.requests

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def expected_cost(model: str = ANSWERED_MODEL) -> float:
    """genai-prices' own price of the usage this server sends (the oracle)."""
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=USAGE["prompt_tokens"], output_tokens=USAGE["completion_tokens"],
                  cache_read_tokens=USAGE["prompt_tokens_details"]["cached_tokens"])
    return float(calc_price(usage, model_ref=model, provider_id="openai").total_price)
