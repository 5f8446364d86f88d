"""Which HTTP requests are model calls: recognised by path and body shape, never by host.

A request to an OpenAI-compatible server at any base URL (vLLM, Ollama, LiteLLM, a local
proxy) is a model call as much as one to ``api.openai.com``. :func:`model_call` reads an
HTTP request into the chat-style request that :meth:`~agentlog.Recorder.llm` records:

=============================  ==================================  =============================
API                            path ends with                      body has
=============================  ==================================  =============================
OpenAI Chat Completions        ``/chat/completions``               ``model``, ``messages``
OpenAI Responses               ``/responses``                      ``model``, ``input``
Anthropic Messages             ``/messages``                       ``model``, ``messages``,
                                                                   ``max_tokens``
Gemini generateContent         ``/models/<model>:generateContent`` ``contents``
                               (or ``:streamGenerateContent``)
Ollama chat                    ``/api/chat``                       ``model``, ``messages``
Ollama generate                ``/api/generate``                   ``model``, ``prompt``
=============================  ==================================  =============================

Ollama's own API streams unless the request says ``"stream": false``, as newline-delimited JSON
(the others stream server-sent events).

>>> call = model_call("POST", "/v1/chat/completions",
...                   b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true}')
>>> call.api, call.request["model"], call.streamed
('openai_chat', 'm', True)
>>> model_call("POST", "/v1/embeddings", b'{"model": "m", "input": "hi"}') is None
True

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["API", "ModelCall", "model_call"]

API = Literal["openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "ollama_generate"]

_GEMINI: Final = re.compile(r"/models/([^/:]+):(stream)?[gG]enerateContent$")


@dataclass(frozen=True, slots=True)
class ModelCall:
    """An HTTP request recognised as a model call."""

    api: API
    """Which API it speaks."""
    request: Mapping[str, Any]
    """The request as :meth:`~agentlog.Recorder.llm` takes it (model, messages, flat params)."""
    streamed: bool
    """True when the answer comes as a stream of server-sent events."""
    body: Any = None
    """The request's body, as parsed from its JSON (read once, for the redaction too)."""

    @property
    def provider(self) -> str | None:
        """The provider whose price list fits this API, when the API says (``None`` for OpenAI's
        shapes: any OpenAI-compatible server speaks them, so the model name decides)."""
        return {"anthropic": "anthropic", "gemini": "google"}.get(self.api)


def _json(body: bytes) -> Any:
    if not body or body[:1] not in (b"{", b" ", b"\n", b"\t", b"\r"):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _messages_of_input(value: Any) -> list[Any]:
    """The Responses API's ``input`` as a list of items (a string is one user message)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else [value]


def model_call(method: str, path: str, body: bytes) -> ModelCall | None:
    """The model call an HTTP request makes, or ``None`` when it is not one."""
    if method.upper() != "POST":
        return None
    gemini = _GEMINI.search(path)
    if gemini is None and not path.endswith(("/chat/completions", "/responses", "/messages", "/api/chat",
                                             "/api/generate")):
        return None
    data = _json(body)
    if not isinstance(data, dict):
        return None
    if gemini is not None:
        if not isinstance(data.get("contents"), list):
            return None
        rest = {k: v for k, v in data.items() if k != "contents"}
        return ModelCall("gemini", {"model": gemini.group(1), "messages": data["contents"], **rest},
                         streamed=gemini.group(2) is not None, body=data)
    if not isinstance(data.get("model"), str):
        return None
    streamed = data.get("stream") is True
    if path.endswith("/chat/completions") and isinstance(data.get("messages"), list):
        return ModelCall("openai_chat", data, streamed, data)
    if path.endswith("/responses") and "input" in data:
        rest = {k: v for k, v in data.items() if k != "input"}
        return ModelCall("openai_responses", {**rest, "messages": _messages_of_input(data["input"])}, streamed,
                         data)
    if path.endswith("/messages") and isinstance(data.get("messages"), list) and "max_tokens" in data:
        return ModelCall("anthropic", data, streamed, data)
    if path.endswith("/api/chat") and isinstance(data.get("messages"), list):
        return ModelCall("ollama", data, data.get("stream") is not False, data)  # it streams unless told not to
    if path.endswith("/api/generate") and isinstance(data.get("prompt"), str):
        said = [{"role": "system", "content": data["system"]}] if isinstance(data.get("system"), str) else []
        rest = {k: v for k, v in data.items() if k not in ("prompt", "system")}
        return ModelCall("ollama_generate", {**rest, "messages": [*said, {"role": "user", "content": data["prompt"]}]},
                         data.get("stream") is not False, data)
    return None
