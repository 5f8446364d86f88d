"""An event as a person reads it: model calls as a conversation, tool calls as cards.

:func:`event_view_html` renders one event:

- an ``llm.request`` as the conversation sent (each message with its role; the assistant's
  tool calls as cards; tool results as cards under the call they answer) and the tools
  offered, by name;
- an ``llm.response`` as the assistant's message, its tool calls as cards, and why it stopped;
- a ``tool.call`` / ``tool.result`` as a card with the tool's name and its arguments or result;
- anything else as its payload (without the vocabulary's version marker ``"$v"``, which the
  raw payload panel shows).

JSON that arrives as a string inside a message (tool-call arguments, a tool result serialised
by the program) is decoded and pretty-printed; long text is cut into a collapsible block.
Payloads are read through the event vocabulary (``LLMRequest.of(event).messages``, ...).
Everything that came from the run is escaped. Pure: an event in, HTML out (a blob is read
back as text only when it is small).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..events import (
    LLM_REQUEST,
    LLM_RESPONSE,
    TOOL_CALL,
    TOOL_RESULT,
    VERSION_KEY,
    BlobRef,
    Event,
    LLMRequest,
    LLMResponse,
    ToolCall,
    ToolResult,
)
from .html import esc as _e

__all__ = ["decode_json", "event_view_html", "message_html", "pretty", "text_block"]

LONG: Final = 700        # characters of text shown before the rest folds away
BLOB_TEXT: Final = 65_536  # a blob up to this size is read back as text


def decode_json(text: str) -> Any:
    """``text`` decoded if it is a JSON object or array, else ``text`` unchanged.

    >>> decode_json('{"service": "orders"}'), decode_json("restart it"), decode_json("42")
    ({'service': 'orders'}, 'restart it', '42')
    """
    t = text.strip()
    if t[:1] in ("{", "[") and t[-1:] in ("}", "]"):
        try:
            return json.loads(t)
        except ValueError:
            return text
    return text


def _plain(value: Any) -> Any:
    if isinstance(value, BlobRef):
        return _blob_text(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        decoded = decode_json(value)
        return value if decoded is value else _plain(decoded)
    return value


def _blob_text(ref: BlobRef) -> str:
    media = str(getattr(ref, "media_type", "") or "")
    if int(ref.size) <= BLOB_TEXT and (media.startswith("text/") or "json" in media):
        try:
            return ref.text()
        except Exception as exc:  # noqa: BLE001 - a missing store or blob: say so, keep the view
            return f"<blob {ref.digest[:19]}… not readable: {type(exc).__name__}>"
    return f"<blob {ref.digest[:19]}… {int(ref.size):,} bytes {media}>"


def pretty(value: Any) -> str:
    """A value as indented JSON, with JSON strings inside it decoded (escaped HTML)."""
    plain = _plain(value)
    if isinstance(plain, str):
        return text_block(plain)
    text = json.dumps(plain, indent=2, ensure_ascii=False, default=str)
    return text_block(text, code=True)


def text_block(text: str, *, code: bool = False, limit: int = LONG) -> str:
    """Text as a block that keeps its line breaks; past ``limit`` characters the rest is folded
    into a ``<details>`` ("… 1,234 more characters")."""
    cls = "al-chat-code" if code else "al-chat-text"
    if len(text) <= limit:
        return f'<div class="{cls}">{_e(text)}</div>'
    head, rest = text[:limit], text[limit:]
    return (f'<div class="{cls}">{_e(head)}<details class="al-chat-more"><summary>… {len(rest):,} more '
            f"characters</summary>{_e(rest)}</details></div>")


def _content(content: Any) -> str:
    if content is None or content == "":
        return ""
    if isinstance(content, BlobRef):
        content = _blob_text(content)
    if isinstance(content, str):
        decoded = decode_json(content)
        return text_block(content) if decoded is content else pretty(decoded)
    if isinstance(content, Sequence):  # content parts: text, images, ...
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(_content(part.get("text")))
            else:
                parts.append(pretty(part))
        return "".join(parts)
    return pretty(content)


def _tool_call_card(call: Mapping[str, Any]) -> str:
    fn = call.get("function") if isinstance(call.get("function"), Mapping) else call
    name = fn.get("name", "?") if isinstance(fn, Mapping) else "?"
    args = fn.get("arguments", fn.get("args")) if isinstance(fn, Mapping) else None
    ident = call.get("id")
    return (f'<div class="al-chat-card al-chat-call"><div class="al-chat-card-head">→ call '
            f"<b>{_e(name)}</b>{f' <span class=al-muted>{_e(ident)}</span>' if ident else ''}</div>"
            f"{pretty(args) if args not in (None, '') else ''}</div>")


def message_html(message: Mapping[str, Any]) -> str:
    """One chat message: its role, its text (decoded where it is JSON), its tool calls as cards;
    a ``tool`` message as a result card."""
    role = str(message.get("role", "?"))
    if role == "tool":
        ident = message.get("tool_call_id") or message.get("name") or ""
        return (f'<div class="al-chat-card al-chat-result"><div class="al-chat-card-head">← result'
                f"{f' of <span class=al-muted>{_e(ident)}</span>' if ident else ''}</div>"
                f"{_content(message.get('content'))}</div>")
    calls = message.get("tool_calls") or ()
    body = _content(message.get("content")) + "".join(
        _tool_call_card(c) for c in calls if isinstance(c, Mapping))
    return (f'<div class="al-chat-msg al-chat-{_e(role)}"><div class="al-chat-role">{_e(role)}</div>'
            f'<div class="al-chat-body">{body or "<span class=al-muted>(empty)</span>"}</div></div>')


def _tools_offered(tools: Sequence[Any]) -> str:
    names = []
    for t in tools:
        fn = t.get("function") if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping) else t
        names.append(str(fn.get("name")) if isinstance(fn, Mapping) else str(fn))
    return (f'<div class="al-chat-tools">tools offered: {_e(", ".join(names))}</div>' if names else "")


def event_view_html(event: Event) -> str:
    """One event as a person reads it (see the module docstring)."""
    if event.type == LLM_REQUEST:
        req = LLMRequest.of(event)
        msgs = "".join(message_html(m) for m in req.messages if isinstance(m, Mapping))
        return (f'<div class="al-chat"><div class="al-chat-title">request to {_e(req.model or "?")} · '
                f"{len(req.messages):,} message{'s' if len(req.messages) != 1 else ''}</div>{msgs}"
                f"{_tools_offered(req.tools)}</div>")
    if event.type == LLM_RESPONSE:
        res = LLMResponse.of(event)
        why = f" · finished: {_e(res.finish_reason)}" if res.finish_reason else ""
        served = " · served from the log" if res.cache_hit else ""
        return (f'<div class="al-chat"><div class="al-chat-title">answer from {_e(res.model or "?")}'
                f"{why}{served}</div>{message_html(res.message)}</div>")
    if event.type == TOOL_CALL:
        call = ToolCall.of(event)
        return (f'<div class="al-chat"><div class="al-chat-card al-chat-call"><div class="al-chat-card-head">'
                f"→ tool <b>{_e(call.name)}</b></div>{pretty(call.args)}</div></div>")
    if event.type == TOOL_RESULT:
        result = ToolResult.of(event)
        body = (f'<div class="al-bad">{_e(result.error)}</div>' if result.error else pretty(result.result))
        return (f'<div class="al-chat"><div class="al-chat-card al-chat-result"><div class="al-chat-card-head">'
                f"← tool <b>{_e(result.name)}</b></div>{body}</div></div>")
    payload = {k: v for k, v in event.payload.items() if k != VERSION_KEY}
    return f'<div class="al-chat">{pretty(payload)}</div>'
