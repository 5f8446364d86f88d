"""Chat messages between agentlog's shape and the two tracing conventions'.

agentlog keeps messages as the recorder got them, OpenAI-chat-like: ``{"role", "content",
"tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}],
"tool_call_id"}``. The OpenTelemetry GenAI conventions write ``gen_ai.input.messages`` as
``[{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", "id", "name",
"arguments"}, {"type": "tool_call_response", "id", "response"}]}]``; OpenInference flattens
``llm.input_messages.<i>.message.role`` / ``.content`` / ``.tool_calls.<j>.tool_call.function.name``
into span attributes. Text, tool calls and tool results map both ways; other content parts
(images, audio) are passed through as they are.

Pure: no I/O. A :class:`~agentlog.events.BlobRef` content is turned into text by its caller.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["from_openinference", "from_parts", "to_parts"]


def _arguments(value: Any) -> Any:
    """Tool-call arguments as an object when they are a JSON object text."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def to_parts(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """agentlog messages → GenAI ``parts`` messages.

    >>> to_parts([{"role": "user", "content": "hi"}])
    [{'role': 'user', 'parts': [{'type': 'text', 'content': 'hi'}]}]
    """
    out = []
    for message in messages:
        role = str(message.get("role") or "user")
        parts: list[dict[str, Any]] = []
        content = message.get("content")
        if role == "tool" and message.get("tool_call_id") is not None:
            parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"),
                          "response": content})
        elif isinstance(content, str):
            parts.append({"type": "text", "content": content})
        elif isinstance(content, list):
            for item in content:
                if isinstance(item, Mapping) and item.get("type") in ("text", "input_text", "output_text"):
                    parts.append({"type": "text", "content": item.get("text")})
                else:
                    parts.append(dict(item) if isinstance(item, Mapping) else {"type": "text", "content": item})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append({"type": "tool_call", "id": call.get("id"),
                          "name": function.get("name", call.get("name")),
                          "arguments": _arguments(function.get("arguments", call.get("arguments")))})
        entry: dict[str, Any] = {"role": role, "parts": parts}
        if message.get("name") is not None:
            entry["name"] = message["name"]
        out.append(entry)
    return out


def from_parts(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """GenAI ``parts`` messages → agentlog messages.

    >>> from_parts([{"role": "assistant", "parts": [{"type": "text", "content": "ok"},
    ...             {"type": "tool_call", "id": "c1", "name": "f", "arguments": {"x": 1}}]}])
    [{'role': 'assistant', 'content': 'ok', 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': {'x': 1}}}]}]
    """
    out = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        texts: list[Any] = []
        others: list[Any] = []
        calls: list[dict[str, Any]] = []
        entry: dict[str, Any] = {"role": message.get("role") or "user"}
        for part in message.get("parts") or ():
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                texts.append(part.get("content"))
            elif kind == "tool_call":
                calls.append({"id": part.get("id"), "type": "function",
                              "function": {"name": part.get("name"), "arguments": part.get("arguments")}})
            elif kind == "tool_call_response":
                entry["tool_call_id"] = part.get("id")
                texts.append(part.get("response"))
            else:
                others.append(part)
        if others:
            entry["content"] = [{"type": "text", "text": t} for t in texts] + others
        else:
            entry["content"] = texts[0] if len(texts) == 1 else ("".join(map(str, texts)) if texts else None)
        if calls:
            entry["tool_calls"] = calls
        if message.get("name") is not None:
            entry["name"] = message["name"]
        out.append(entry)
    return out


_INDEX = re.compile(r"(\d+)\.(.+)")


def _nested(flat: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``{"p.0.a": 1, "p.0.b.0.c": 2}`` → ``{0: {"a": 1, "b.0.c": 2}}`` for ``prefix="p"``."""
    items: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    for key, value in flat.items():
        if key.startswith(start):
            m = _INDEX.fullmatch(key[len(start):])
            if m:
                items.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return dict(sorted(items.items()))


def from_openinference(attributes: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenInference flattened messages (``llm.input_messages`` / ``llm.output_messages``) →
    agentlog messages.

    >>> from_openinference({"llm.input_messages.0.message.role": "user",
    ...                     "llm.input_messages.0.message.content": "hi"}, "llm.input_messages")
    [{'role': 'user', 'content': 'hi'}]
    """
    out = []
    for fields in _nested(attributes, prefix).values():
        message: dict[str, Any] = {"role": fields.get("message.role") or "user"}
        content = fields.get("message.content")
        if content is None:
            texts = [v.get("message_content.text") for v in _nested(fields, "message.contents").values()]
            content = "".join(t for t in texts if isinstance(t, str)) if texts else None
        message["content"] = content
        calls = []
        for call in _nested(fields, "message.tool_calls").values():
            calls.append({"id": call.get("tool_call.id"), "type": "function",
                          "function": {"name": call.get("tool_call.function.name"),
                                       "arguments": call.get("tool_call.function.arguments")}})
        if calls:
            message["tool_calls"] = calls
        if fields.get("message.tool_call_id") is not None:
            message["tool_call_id"] = fields["message.tool_call_id"]
        if fields.get("message.name") is not None:
            message["name"] = fields["message.name"]
        out.append(message)
    return out
