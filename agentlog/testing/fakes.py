"""Test doubles: a scripted model and counting tools, for tests with no network.

>>> llm = FakeLLM(lambda request: "pong")
>>> reply = llm({"model": "fake", "messages": [{"role": "user", "content": "ping"}]})
>>> reply["choices"][0]["message"]["content"]
'pong'
>>> llm.calls
1
>>> never = FakeLLM.forbidden()
>>> never({"model": "fake", "messages": []})
Traceback (most recent call last):
...
AssertionError: FakeLLM.forbidden was called: this path must be served from the log
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["CountingTool", "FakeLLM", "count_tokens"]

Responder = Callable[[Mapping[str, Any]], Any]


def count_tokens(text: Any) -> int:
    """A deterministic stand-in for a tokenizer: one token per whitespace-separated word."""
    if text is None:
        return 0
    if not isinstance(text, str):
        text = str(text)
    return len(text.split())


def _prompt_tokens(request: Mapping[str, Any]) -> int:
    return sum(count_tokens(m.get("content")) + 3 for m in request.get("messages") or [])


class FakeLLM:
    """A scripted model in the OpenAI Chat Completions shape, counting its calls.

    Args:
        respond: a function of the request returning the answer text (or a whole response
            mapping), a list of answers given in turn, or one fixed answer.
        model: the model name the responses report.
        latency: seconds to sleep per call (to measure what replay saves).
        cached: how many prompt tokens to report as read from the provider's cache.
    """

    def __init__(self, respond: Responder | Sequence[Any] | str = "ok", *, model: str = "fake-model",
                 latency: float = 0.0, cached: int = 0) -> None:
        self._respond = respond
        self._turn = 0
        self.model = model
        self.latency = latency
        self.cached = cached
        self.calls = 0
        self.requests: list[Mapping[str, Any]] = []

    @classmethod
    def forbidden(cls) -> FakeLLM:
        """A model that fails the test if it is ever called."""
        return _Forbidden()

    def _answer(self, request: Mapping[str, Any]) -> Any:
        if callable(self._respond):
            return self._respond(request)
        if isinstance(self._respond, str):
            return self._respond
        answer = self._respond[min(self._turn, len(self._respond) - 1)]
        self._turn += 1
        return answer

    def _response(self, request: Mapping[str, Any]) -> dict[str, Any]:
        self.calls += 1
        self.requests.append(request)
        answer = self._answer(request)
        if isinstance(answer, Mapping):
            return dict(answer)
        prompt = _prompt_tokens(request)
        return {"id": f"fake-{self.calls}", "model": request.get("model") or self.model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": count_tokens(answer),
                          "total_tokens": prompt + count_tokens(answer),
                          "prompt_tokens_details": {"cached_tokens": min(self.cached, prompt)}}}

    def __call__(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self.latency:
            time.sleep(self.latency)
        return self._response(request)

    async def acall(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The async form: awaits ``latency`` instead of sleeping."""
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._response(request)


class _Forbidden(FakeLLM):
    def _response(self, request: Mapping[str, Any]) -> dict[str, Any]:
        raise AssertionError("FakeLLM.forbidden was called: this path must be served from the log")


class CountingTool:
    """Wrap a tool function to count its calls; ``forbidden=True`` fails the test if called.

    >>> add = CountingTool(lambda a, b: a + b)
    >>> add(a=1, b=2), add.calls
    (3, 1)
    """

    def __init__(self, fn: Callable[..., Any] | None = None, *, forbidden: bool = False,
                 name: str = "tool") -> None:
        self.fn = fn
        self.forbidden = forbidden
        self.calls = 0
        self.idempotency_keys: list[str] = []
        self.__name__ = getattr(fn, "__name__", name)

    def __call__(self, **kwargs: Any) -> Any:
        if self.forbidden:
            raise AssertionError(f"tool {self.__name__} was called: this path must be served from the log")
        self.calls += 1
        key = kwargs.pop("idempotency_key", None)
        if key is not None:
            self.idempotency_keys.append(key)
            if self.fn is not None and _accepts(self.fn, "idempotency_key"):
                kwargs["idempotency_key"] = key
        return self.fn(**kwargs) if self.fn is not None else None


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
