"""A streamed model answer assembled into the one response it stands for.

A streamed call's chunks (server-sent events read from the raw body, or the SDK's chunk
objects) are put back together into the response the same call would have returned without
``stream``: the shape :func:`~agentlog.capture.providers.normalize` reads. Usage is what the
stream reported: an OpenAI chat stream reports it only when the caller asked
(``stream_options.include_usage``); without it the assembled response has no usage, and the
call's cost stays unknown.

>>> sse = (b'data: {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "he"}}]}\\n\\n'
...        b'data: {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "llo"}, "finish_reason": "stop"}]}\\n\\n'
...        b'data: [DONE]\\n\\n')
>>> whole = assemble("openai_chat", sse_events(sse))
>>> whole["choices"][0]["message"], whole["choices"][0]["finish_reason"], "usage" in whole
({'role': 'assistant', 'content': 'hello'}, 'stop', False)

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["assemble", "drain", "events_of", "is_stream", "ndjson_events", "sse_events", "stream_api"]


def sse_events(body: bytes) -> Iterator[Any]:
    """The JSON ``data`` of each server-sent event in ``body`` (``[DONE]`` and non-JSON skipped).

    >>> list(sse_events(b'event: x\\ndata: {"a": 1}\\n\\ndata: [DONE]\\n\\n'))
    [{'a': 1}]
    """
    text = body.decode("utf-8", errors="replace").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if not data or data == "[DONE]":
            continue
        try:
            yield json.loads(data)
        except ValueError:
            continue


def ndjson_events(body: bytes) -> Iterator[Any]:
    """Each JSON line of a newline-delimited JSON stream (Ollama's), blank and non-JSON lines
    skipped.

    >>> list(ndjson_events(b'{"a": 1}\\n\\n{"a": 2}\\n'))
    [{'a': 1}, {'a': 2}]
    """
    for line in body.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue


def events_of(api: str, body: bytes) -> Iterator[Any]:
    """The events of a streamed answer of ``api``'s raw body: server-sent events, or Ollama's
    JSON lines."""
    return ndjson_events(body) if api.startswith("ollama") else sse_events(body)


def _openai_chat(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    whole: dict[str, Any] = {}
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for chunk in chunks:
        for key in ("id", "model", "created", "system_fingerprint"):
            if chunk.get(key) is not None:
                whole[key] = chunk[key]
        if chunk.get("usage"):
            whole["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("role"):
                message["role"] = delta["role"]
            if delta.get("content") is not None:
                message["content"] = (message["content"] or "") + delta["content"]
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(call.get("index", 0)), {"id": None, "type": "function",
                                                                    "function": {"name": "", "arguments": ""}})
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    whole["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
    return whole


def _openai_responses(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    last: dict[str, Any] = {"output": []}
    for event in chunks:
        response = event.get("response")
        if isinstance(response, Mapping):
            last = dict(response)  # response.created ... response.completed: the last is whole
    return last


def _anthropic(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    whole: dict[str, Any] = {"content": []}
    blocks: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    for event in chunks:
        kind = event.get("type")
        if kind == "message_start":
            start = dict(event.get("message") or {})
            usage.update(start.pop("usage", None) or {})
            whole.update({k: v for k, v in start.items() if k != "content"})
        elif kind == "content_block_start":
            blocks[int(event.get("index", 0))] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            block, delta = blocks.setdefault(int(event.get("index", 0)), {"type": "text", "text": ""}), event.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                block["_json"] = block.get("_json", "") + delta.get("partial_json", "")
        elif kind == "message_delta":
            whole.update({k: v for k, v in (event.get("delta") or {}).items() if v is not None})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
    for i in sorted(blocks):
        block = blocks[i]
        partial = block.pop("_json", None)
        if partial is not None:
            block["input"] = json.loads(partial) if partial else {}
        whole["content"].append(block)
    if usage:
        whole["usage"] = usage
    return whole


def _gemini(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    parts: list[Any] = []
    whole: dict[str, Any] = {}
    candidate: dict[str, Any] = {}
    for chunk in chunks:
        for key, value in chunk.items():
            if key != "candidates":
                whole[key] = value  # usageMetadata, modelVersion, responseId: the last wins
        for c in chunk.get("candidates") or []:
            parts.extend((c.get("content") or {}).get("parts") or [])
            candidate.update({k: v for k, v in c.items() if k != "content"})
    whole["candidates"] = [{**candidate, "content": {"role": "model", "parts": parts}}]
    return whole


def _ollama(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    whole: dict[str, Any] = {}
    text: list[str] = []
    calls: list[Any] = []
    for chunk in chunks:
        message = chunk.get("message") or {}
        text.append(str(message.get("content") or ""))
        calls.extend(message.get("tool_calls") or [])
        whole.update({k: v for k, v in chunk.items() if k != "message"})  # the last: done, its counts
    whole["message"] = {"role": "assistant", "content": "".join(text), **({"tool_calls": calls} if calls else {})}
    return whole


def _ollama_generate(chunks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    whole: dict[str, Any] = {}
    text: list[str] = []
    for chunk in chunks:
        text.append(str(chunk.get("response") or ""))
        whole.update(chunk)  # the last: done, its counts
    whole["response"] = "".join(text)
    return whole


_ASSEMBLERS = {"openai_chat": _openai_chat, "openai_responses": _openai_responses,
               "anthropic": _anthropic, "gemini": _gemini, "ollama": _ollama,
               "ollama_generate": _ollama_generate}


def assemble(api: str, chunks: Iterable[Any]) -> dict[str, Any]:
    """The whole response that the stream of ``chunks`` of ``api`` stands for (see
    :data:`agentlog.capture.endpoints.API`); SDK chunk objects are read as their JSON."""
    from .providers import as_plain

    return _ASSEMBLERS[api](c for c in (as_plain(c) for c in chunks) if isinstance(c, Mapping))


def is_stream(obj: Any) -> bool:
    """True for a stream of chunks an SDK returns (OpenAI's ``Stream`` / ``AsyncStream``,
    Anthropic's): iterable, and not a response object, a mapping, a string or a list."""
    if isinstance(obj, (Mapping, str, bytes, list, tuple)) or callable(getattr(obj, "model_dump", None)):
        return False
    return hasattr(obj, "__iter__") or hasattr(obj, "__aiter__")


def drain(stream: Any) -> Any:
    """Every chunk of ``stream``: a list for a sync stream, an awaitable of one for an async one."""
    if hasattr(stream, "__iter__"):
        return list(stream)

    async def chunks() -> list[Any]:
        return [chunk async for chunk in stream]
    return chunks()


def stream_api(chunks: list[Any]) -> str:
    """Which API's stream the ``chunks`` are, by their shape.

    >>> stream_api([{"object": "chat.completion.chunk", "choices": []}])
    'openai_chat'
    >>> stream_api([{"type": "message_start", "message": {}}])
    'anthropic'
    """
    from .providers import as_plain

    for chunk in chunks:
        plain = as_plain(chunk)
        if not isinstance(plain, Mapping):
            continue
        kind = str(plain.get("type") or "")
        if "choices" in plain or plain.get("object") == "chat.completion.chunk":
            return "openai_chat"
        if kind.startswith("response."):
            return "openai_responses"
        if kind.startswith(("message_", "content_block_")):
            return "anthropic"
        if "candidates" in plain or "usageMetadata" in plain:
            return "gemini"
    raise TypeError("a model call returned a stream whose chunks are of no known API "
                    "(OpenAI chat or Responses, Anthropic, Gemini)")
