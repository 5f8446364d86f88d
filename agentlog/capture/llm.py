"""What a model call returned, in one shape whatever the provider.

``call(request)`` in :meth:`Recorder.llm` may return an OpenAI Chat Completions or Responses
object, an Anthropic message, a plain mapping such as ``{"content": "...", "usage": {...}}``, or
just a string. :func:`response_fields` turns any of them into the payload fields that an
``llm.response`` event stores, and :class:`LLMResult` is what the program gets back, the same
when recording and when the answer is served from the log.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..events import BlobRef, Event
from .usage import Usage, normalize_usage

__all__ = ["LLMResult", "as_plain", "response_fields"]


def as_plain(obj: Any) -> Any:
    """A JSON-like copy of an SDK object (pydantic ``model_dump``), or the object itself."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return obj


def _text_of_blocks(blocks: list[Any]) -> str | None:
    texts = [b.get("text", "") for b in blocks
             if isinstance(b, Mapping) and b.get("type") in ("text", "output_text")]
    return "".join(texts) if texts else None


def _openai_chat(raw: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    choice = raw["choices"][0] if raw.get("choices") else {}
    message = dict(choice.get("message") or {"role": "assistant", "content": None})
    return message, choice.get("finish_reason")


def _openai_responses(raw: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    texts, calls = [], []
    for item in raw.get("output") or []:
        if item.get("type") == "message":
            texts.append(_text_of_blocks(item.get("content") or []) or "")
        elif item.get("type") == "function_call":
            calls.append({"id": item.get("call_id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments")}})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message, raw.get("status")


def _anthropic(raw: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    blocks = list(raw.get("content") or [])
    message: dict[str, Any] = {"role": "assistant", "content": _text_of_blocks(blocks)}
    calls = [{"id": b.get("id"), "type": "function",
              "function": {"name": b.get("name"), "arguments": b.get("input")}}
             for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    return message, raw.get("stop_reason")


def _shape(raw: Mapping[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
    """(message, finish_reason, provider) of a provider response mapping."""
    if "choices" in raw:
        return (*_openai_chat(raw), "openai")
    if "output" in raw and isinstance(raw.get("output"), list):
        return (*_openai_responses(raw), "openai")
    if isinstance(raw.get("content"), list):
        return (*_anthropic(raw), "anthropic")
    if isinstance(raw.get("message"), Mapping):
        return dict(raw["message"]), raw.get("finish_reason"), None
    message = {"role": "assistant", "content": raw.get("content")}
    if raw.get("tool_calls"):
        message["tool_calls"] = list(raw["tool_calls"])
    return message, raw.get("finish_reason"), None


def response_fields(raw: Any, *, provider: str | None = None) -> tuple[dict[str, Any], Usage]:
    """The ``llm.response`` payload fields of a provider response, and its normalised usage.

    Returns ``({"message", "finish_reason", "model", "id"}, usage)``; ``model`` and ``id`` are
    ``None`` when the response does not say.

    >>> fields, usage = response_fields({"content": "hi", "usage": {"prompt_tokens": 5,
    ...                                   "completion_tokens": 1}})
    >>> fields["message"], usage.input_tokens, usage.output_tokens
    ({'role': 'assistant', 'content': 'hi'}, 5, 1)
    """
    raw = as_plain(raw)
    if isinstance(raw, str):
        raw = {"content": raw}
    if not isinstance(raw, Mapping):
        raise TypeError(f"a model call returned {type(raw).__name__}; return a mapping, a string "
                        "or an SDK response object")
    message, finish, detected = _shape(raw)
    usage_raw = raw.get("usage") or raw.get("usageMetadata") or {}
    usage = normalize_usage(usage_raw, provider=provider or detected)
    fields = {"message": message, "finish_reason": finish, "model": raw.get("model"), "id": raw.get("id")}
    return fields, usage


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMResult:
    """A model's answer as the program sees it, recorded or served from the log.

    >>> r = LLMResult(message={"role": "assistant", "content": "ok"}, model="m", seq=3)
    >>> r.content, r.tool_calls
    ('ok', ())
    """

    message: Mapping[str, Any]
    """The assistant message: ``role``, ``content`` and maybe ``tool_calls``."""
    model: str | None = None
    """The model that answered."""
    seq: int = -1
    """The seq of the ``llm.response`` event."""
    key: str = ""
    """The request's cache key."""
    finish_reason: str | None = None
    """Why generation stopped, as the provider said."""
    input_tokens: int | None = None
    """Input tokens, cached ones included."""
    output_tokens: int | None = None
    """Output tokens."""
    cached_tokens: int | None = None
    """Input tokens read from the provider's cache."""
    cost_usd: float | None = None
    """What the call cost, ``None`` when unknown."""
    cost_source: str | None = None
    """``provider``, ``computed`` or ``unknown``."""
    cache_hit: bool = False
    """True when the answer was served from a recorded run instead of calling the model."""
    payload: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The whole ``llm.response`` payload."""

    @property
    def content(self) -> str | None:
        """The text of the answer (a blob is read back as text)."""
        content = self.message.get("content")
        return content.text() if isinstance(content, BlobRef) else content

    @property
    def tool_calls(self) -> tuple[Mapping[str, Any], ...]:
        """The tool calls the model asked for, if any."""
        return tuple(self.message.get("tool_calls") or ())

    @classmethod
    def from_event(cls, event: Event) -> LLMResult:
        """The result stored in an ``llm.response`` event."""
        p = event.payload
        return cls(message=p.get("message") or {"role": "assistant", "content": p.get("content")},
                   model=event.model or p.get("model"), seq=event.seq, key=p.get("key", ""),
                   finish_reason=p.get("finish_reason"), input_tokens=event.input_tokens,
                   output_tokens=event.output_tokens, cached_tokens=event.cached_tokens,
                   cost_usd=event.cost_usd, cost_source=p.get("cost_source"),
                   cache_hit=bool(p.get("cache_hit")), payload=p)
