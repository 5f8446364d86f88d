"""An edited model answer put back on the wire: the HTTP body a fork serves it with.

A fork that edits the answer of a model call the HTTP transport recorded
(``al.edit.replace_response`` on its ``llm.response``) serves the program the response it would
have got with that answer: the recorded body with the assistant's text, tool calls and finish
reason replaced, in the API's own shape (:data:`~agentlog.capture.endpoints.API`), so that the
SDK reads the edited answer as it read the recorded one. Everything else the body held (ids,
usage, the model's reasoning items) stays as recorded. A streamed call's answer goes back as
a stream of server-sent events in the API's own event shapes, built from the whole edited
answer: its text a word a delta (:func:`pieces`), a tool call's arguments in pieces of
:data:`PIECE` characters where the API streams them (OpenAI chat and Responses, Anthropic), the
usage the recorded stream reported.

>>> body = b'{"id": "c1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}'
>>> json.loads(rewired("openai_chat", False, body, {"role": "assistant", "content": "bye"}, None))["choices"][0]["message"]
{'role': 'assistant', 'content': 'bye'}

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .endpoints import API
from .streams import assemble, events_of

__all__ = ["finish_for", "pieces", "rewired"]

Whole = dict[str, Any]


def rewired(api: API, streamed: bool, body: bytes, message: Mapping[str, Any], finish_reason: str | None) -> bytes:
    """The recorded response ``body`` of an ``api`` call with the answer made ``message`` (the
    ``llm.response``'s: ``content`` and ``tool_calls`` as OpenAI's chat API writes them) and,
    when given, ``finish_reason``; a stream of server-sent events for a ``streamed`` call.

    Raises:
        ValueError, TypeError: the body is not a response of that API (not JSON, not an object).
    """
    whole = assemble(api, events_of(api, body)) if streamed else json.loads(body)
    if not isinstance(whole, dict):
        raise TypeError(f"the recorded {api} response is not a JSON object")
    edited = _EDITS[api](whole, _text(message.get("content")), list(message.get("tool_calls") or []), finish_reason)
    if not streamed:
        return json.dumps(edited, ensure_ascii=False).encode()
    frame = _line if api.startswith("ollama") else _sse  # Ollama streams JSON lines, the others server-sent events
    return b"".join(frame(event, data) for event, data in _STREAMS[api](edited))


#: Per API: the finish reason of an answer that asks for tools, and of one that does not (the
#: Responses and Gemini APIs say the same either way).
_FINISH: dict[str, tuple[str, str]] = {"openai_chat": ("tool_calls", "stop"), "anthropic": ("tool_use", "end_turn")}


def finish_for(api: API, recorded: str | None, calls: bool) -> str | None:
    """The finish reason of an edited answer whose edit gave none: the recorded one, unless the
    edit made an answer that asks for tools out of one that did not, or the other way round
    (an agent loop reads the finish reason to know whether to run tools).

    >>> finish_for("openai_chat", "stop", True), finish_for("anthropic", "tool_use", False)
    ('tool_calls', 'end_turn')
    """
    tool, plain = _FINISH.get(api, (None, None))
    if calls and recorded != tool and tool is not None:
        return tool
    if not calls and recorded == tool and tool is not None:
        return plain
    return recorded


def _text(content: Any) -> str | None:
    """A message's text: a string, or the text of its parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content)


def _name(call: Mapping[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or call.get("name") or "")


def _arguments(call: Mapping[str, Any]) -> Any:
    """A tool call's arguments as the edit gives them (a JSON string or an object)."""
    function = call.get("function") or {}
    return function.get("arguments", call.get("arguments"))


def _args_text(call: Mapping[str, Any]) -> str:
    value = _arguments(call)
    return value if isinstance(value, str) else json.dumps(value if value is not None else {})


def _args_object(call: Mapping[str, Any]) -> Any:
    value = _arguments(call)
    return json.loads(value) if isinstance(value, str) and value else (value if value is not None else {})


def _first(items: Any, kind: str) -> Mapping[str, Any]:
    """The first item of ``items`` of type ``kind`` (a template for the edited one), or ``{}``."""
    return next((i for i in items or () if isinstance(i, Mapping) and i.get("type") == kind), {})


# --- the whole answer edited -------------------------------------------------------------------

def _openai_chat(whole: Whole, text: str | None, calls: list[Any], finish: str | None) -> Whole:
    choices = list(whole.get("choices") or [{"index": 0}])
    choice = dict(choices[0])
    message = {k: v for k, v in (choice.get("message") or {}).items() if k not in ("content", "tool_calls")}
    message.update(role="assistant", content=text)
    if calls:
        message["tool_calls"] = [{"id": c.get("id"), "type": "function",
                                  "function": {"name": _name(c), "arguments": _args_text(c)}} for c in calls]
    choice["message"] = message
    if finish is not None:
        choice["finish_reason"] = finish
    return {**whole, "choices": [choice, *choices[1:]]}


def _openai_responses(whole: Whole, text: str | None, calls: list[Any], finish: str | None) -> Whole:
    output = list(whole.get("output") or [])
    kept = [i for i in output if not (isinstance(i, Mapping) and i.get("type") in ("message", "function_call"))]
    said = _first(output, "message")
    items = list(kept)
    if text is not None:
        items.append({"type": "message", "id": said.get("id") or "msg_edited", "status": "completed",
                      "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]})
    for i, call in enumerate(calls):
        call_id = call.get("id") or f"call_{i}"
        items.append({"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": _name(call),
                      "arguments": _args_text(call), "status": "completed"})
    return {**whole, "output": items, **({"status": finish} if finish is not None else {})}


def _anthropic(whole: Whole, text: str | None, calls: list[Any], finish: str | None) -> Whole:
    thinking = [b for b in whole.get("content") or [] if isinstance(b, Mapping)
                and b.get("type") in ("thinking", "redacted_thinking")]
    blocks: list[Any] = [*thinking, *([{"type": "text", "text": text}] if text is not None else [])]
    blocks += [{"type": "tool_use", "id": c.get("id"), "name": _name(c), "input": _args_object(c)} for c in calls]
    return {**whole, "content": blocks, **({"stop_reason": finish} if finish is not None else {})}


def _gemini(whole: Whole, text: str | None, calls: list[Any], finish: str | None) -> Whole:
    candidates = list(whole.get("candidates") or [{}])
    candidate = dict(candidates[0])
    parts = [p for p in (candidate.get("content") or {}).get("parts") or [] if isinstance(p, Mapping) and p.get("thought")]
    if text is not None:
        parts.append({"text": text})
    parts += [{"functionCall": {"name": _name(c), "args": _args_object(c)}} for c in calls]
    candidate["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        candidate["finishReason"] = finish
    return {**whole, "candidates": [candidate, *candidates[1:]]}


def _ollama(whole: Whole, text: str | None, calls: list[Any], finish: str | None) -> Whole:
    message = {k: v for k, v in (whole.get("message") or {}).items() if k not in ("content", "tool_calls")}
    message.update(role="assistant", content=text or "")
    if calls:
        message["tool_calls"] = [{"function": {"name": _name(c), "arguments": _args_object(c)}} for c in calls]
    return {**whole, "message": message, **({"done_reason": finish} if finish is not None else {})}


def _ollama_generate(whole: Whole, text: str | None, calls: list[Any], finish: str | None) -> Whole:
    if calls:
        raise ValueError("Ollama's generate API answers text only: an answer with tool calls cannot be served")
    return {**whole, "response": text or "", **({"done_reason": finish} if finish is not None else {})}


_EDITS: dict[str, Callable[[Whole, str | None, list[Any], str | None], Whole]] = {
    "openai_chat": _openai_chat, "openai_responses": _openai_responses, "anthropic": _anthropic,
    "gemini": _gemini, "ollama": _ollama, "ollama_generate": _ollama_generate}


# --- the whole answer as a stream --------------------------------------------------------------

Streamed = Iterator[tuple[str | None, Any]]

#: The longest piece :func:`pieces` makes (a text with no spaces, Chinese say, is cut there).
PIECE = 24
_WORDS = re.compile(r"\s*\S+|\s+$")


def pieces(text: str) -> list[str]:
    """An edited answer's text as a stream sends it: a word a piece, with the spaces before it
    (as models stream tokens), none longer than :data:`PIECE` characters; joined, the text.

    >>> pieces("scale the db  instead ")
    ['scale', ' the', ' db', '  instead', ' ']
    """
    return [part for word in _WORDS.findall(text) for part in _cut(word)]


def _cut(text: str) -> list[str]:
    """A tool call's arguments (JSON text) in pieces of :data:`PIECE` characters, at least one."""
    return [text[i:i + PIECE] for i in range(0, len(text), PIECE)] or [""]


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"{head}data: {text}\n\n".encode()


def _openai_chat_stream(whole: Whole) -> Streamed:
    base: Whole = {k: whole[k] for k in ("id", "created", "model", "system_fingerprint") if k in whole}
    base["object"] = "chat.completion.chunk"
    choice = whole["choices"][0]
    message = choice.get("message") or {}

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> Whole:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    words = pieces(message.get("content") or "")
    yield None, chunk({"role": "assistant", **({"content": words[0]} if words else {})})
    for word in words[1:]:
        yield None, chunk({"content": word})
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        first, *rest = _cut(function.get("arguments") or "")
        yield None, chunk({"tool_calls": [{"index": i, **call, "function": {**function, "arguments": first}}]})
        for part in rest:
            yield None, chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
    yield None, chunk({}, choice.get("finish_reason"))
    if whole.get("usage"):
        yield None, {**base, "choices": [], "usage": whole["usage"]}
    yield None, "[DONE]"


def _openai_responses_stream(whole: Whole) -> Streamed:
    n = iter(range(1 << 30))
    started = {**whole, "status": "in_progress", "output": []}
    yield "response.created", {"type": "response.created", "sequence_number": next(n), "response": started}
    for index, item in enumerate(whole.get("output") or []):
        if item.get("type") == "message":
            yield from _responses_message(item, index, n)
        elif item.get("type") == "function_call":
            added = {**item, "arguments": "", "status": "in_progress"}
            yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(n),
                                                 "output_index": index, "item": added}
            for part in _cut(item.get("arguments", "")):
                yield "response.function_call_arguments.delta", {
                    "type": "response.function_call_arguments.delta", "sequence_number": next(n),
                    "item_id": item.get("id"), "output_index": index, "delta": part}
            yield "response.function_call_arguments.done", {
                "type": "response.function_call_arguments.done", "sequence_number": next(n), "item_id": item.get("id"),
                "output_index": index, "arguments": item.get("arguments", "")}
        else:
            yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(n),
                                                 "output_index": index, "item": item}
        yield "response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(n),
                                            "output_index": index, "item": item}
    yield "response.completed", {"type": "response.completed", "sequence_number": next(n), "response": whole}


def _responses_message(item: Mapping[str, Any], index: int, n: Iterator[int]) -> Streamed:
    added = {**item, "status": "in_progress", "content": []}
    where = {"item_id": item.get("id"), "output_index": index, "content_index": 0}
    yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(n),
                                         "output_index": index, "item": added}
    for part in item.get("content") or []:
        text = part.get("text", "")
        yield "response.content_part.added", {"type": "response.content_part.added", "sequence_number": next(n),
                                              **where, "part": {**part, "text": ""}}
        for word in pieces(text):
            yield "response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": next(n),
                                                 **where, "delta": word, "logprobs": []}
        yield "response.output_text.done", {"type": "response.output_text.done", "sequence_number": next(n),
                                            **where, "text": text, "logprobs": []}
        yield "response.content_part.done", {"type": "response.content_part.done", "sequence_number": next(n),
                                             **where, "part": part}


def _anthropic_stream(whole: Whole) -> Streamed:
    usage = dict(whole.get("usage") or {})
    start = {k: v for k, v in whole.items() if k not in ("content", "stop_reason", "stop_sequence", "usage")}
    yield "message_start", {"type": "message_start", "message": {
        **start, "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0}}}  # the count so far: the end tells the whole
    for index, block in enumerate(whole.get("content") or []):
        if block.get("type") == "tool_use":
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in _cut(json.dumps(block.get("input")))]
        elif block.get("type") == "text":
            opened = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": word} for word in pieces(block.get("text", ""))]
        else:
            opened, deltas = block, []
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opened}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta", "usage": usage,
                            "delta": {"stop_reason": whole.get("stop_reason"),
                                      "stop_sequence": whole.get("stop_sequence")}}
    yield "message_stop", {"type": "message_stop"}


def _gemini_stream(whole: Whole) -> Streamed:
    """The text's pieces but the last each in a chunk of its own; the last chunk is the whole
    answer with the last piece for its text (its other parts, finish reason and usage)."""
    candidates = whole.get("candidates") or [{}]
    candidate = candidates[0]
    content = candidate.get("content") or {}
    parts = content.get("parts") or []
    at = next((i for i, p in enumerate(parts) if isinstance(p, Mapping) and "text" in p and not p.get("thought")), None)
    words = pieces(str(parts[at]["text"])) if at is not None else []
    base = {k: v for k, v in whole.items() if k in ("modelVersion", "responseId", "createTime")}
    for word in words[:-1]:
        yield None, {**base, "candidates": [{"index": candidate.get("index", 0),
                                             "content": {"role": "model", "parts": [{"text": word}]}}]}
    if at is not None:
        parts = [*parts[:at], *([{**parts[at], "text": words[-1]}] if words else []), *parts[at + 1:]]
        whole = {**whole, "candidates": [{**candidate, "content": {**content, "parts": parts}}, *candidates[1:]]}
    yield None, whole


def _ollama_stream(whole: Whole) -> Streamed:
    base = {k: v for k, v in whole.items() if k in ("model", "created_at")}
    message = whole["message"]
    words = pieces(message.get("content") or "") or [""]
    for word in words[:-1]:
        yield None, {**base, "message": {"role": "assistant", "content": word}, "done": False}
    yield None, {**base, "message": {**message, "content": words[-1]}, "done": False}  # its tool calls, if any
    last = {k: v for k, v in whole.items() if k != "message"}
    yield None, {**last, "message": {"role": "assistant", "content": ""}, "done": True}


def _ollama_generate_stream(whole: Whole) -> Streamed:
    base = {k: v for k, v in whole.items() if k in ("model", "created_at")}
    for word in pieces(whole.get("response") or "") or [""]:
        yield None, {**base, "response": word, "done": False}
    yield None, {**whole, "response": "", "done": True}


def _line(event: str | None, data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode() + b"\n"


_STREAMS: dict[str, Callable[[Whole], Streamed]] = {
    "openai_chat": _openai_chat_stream, "openai_responses": _openai_responses_stream,
    "anthropic": _anthropic_stream, "gemini": _gemini_stream, "ollama": _ollama_stream,
    "ollama_generate": _ollama_generate_stream}
