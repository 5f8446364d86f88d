"""Calls out of the program: model requests and answers, tool calls and results, HTTP exchanges.

Each call is a request event and an answer event (``caused_by`` the request), with a cache
``key`` (a hash of the request, :mod:`agentlog.keys`) by which replay and forks serve the
recorded answer. A failed call is answered by an ``error`` event
(:class:`~agentlog.events.CallFailed`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .base import Body, Text, column, event_type, optional, upcaster
from .event import BlobRef
from .usage import Usage

__all__ = ["CostSource", "HTTPRequest", "HTTPResponse", "LLMRequest", "LLMResponse", "ToolCall",
           "ToolResult"]

CostSource = Literal["provider", "computed", "unknown", "cache"]
"""Where a call's cost came from: the provider's report, a price, nowhere, or a served answer
(paid by the run that recorded it, so 0 here)."""


@event_type("llm.request")
@dataclass(frozen=True, slots=True, kw_only=True)
class LLMRequest(Body):
    """A model was asked: the request in the one shape its key is computed from
    (:func:`agentlog.keys.canonical_request`)."""

    key: str
    """The request's cache key."""
    model: str | None
    """The model asked for."""
    messages: Sequence[Mapping[str, Any]]
    """The conversation sent: ``{"role", "content", ...}`` each."""
    tools: Sequence[Any] = ()
    """The tool definitions offered."""
    params: Mapping[str, Any] | None = None
    """Everything else that may change the answer (``temperature``, ``max_tokens``, ...)."""
    response_format: Any = None
    """A structured-output schema, if one was asked for."""
    provider: str | None = optional()
    """Who serves the model (``openai``, ``anthropic``, ``google``, ...), when known."""


@event_type("llm.response", version=3)
@dataclass(frozen=True, slots=True, kw_only=True)
class LLMResponse(Body):
    """A model answered (or an answer was served from a log).

    The usage columns come from the body: ``model``, ``input_tokens``, ``output_tokens`` and
    ``cached_tokens`` from :attr:`usage`, ``cost_usd`` and ``duration_ms`` from their fields.

    >>> r = LLMResponse(key="k", model="m", message={"role": "assistant", "content": "hi"},
    ...                 usage=Usage(input_tokens=5, output_tokens=1), cost_usd=0.001,
    ...                 cost_source="computed")
    >>> r.columns()["input_tokens"], r.to_payload()["usage"]["output_tokens"], r.content
    (5, 1, 'hi')
    """

    key: str
    """The request's cache key."""
    model: str | None = None
    """The model that answered (else the one asked for)."""
    message: Mapping[str, Any] = field(default_factory=lambda: {"role": "assistant", "content": None})
    """The assistant message: ``role``, ``content`` and maybe ``tool_calls``."""
    finish_reason: str | None = None
    """Why generation stopped, as the provider said."""
    id: str | None = None
    """The provider's response id."""
    usage: Usage | None = Usage()
    """Token counts; ``None`` when the answer reported none (a stream asked without usage): the
    tokens are unknown, and so is the cost (the token columns are ``None``, never 0)."""
    cost_source: CostSource = "unknown"
    """Where :attr:`cost_usd` came from."""
    cache_hit: bool = False
    """True when the answer was served from a recorded run instead of calling the model."""
    served_from_seq: int | None = optional()
    """For a served answer: the seq it was recorded at in the run it came from."""
    edited: bool = optional(False)
    """True when a fork's edit replaced the recorded answer."""
    provider: str | None = optional()
    """Who serves the model, when known."""
    streamed: bool = optional(False)
    """The answer came as a stream. Recorded through HTTP, the raw stream as it arrived is the
    body of the exchange's ``http.response`` (replayed chunk by chunk from it)."""
    cost_usd: float | None = column()
    """What the call cost in USD, ``None`` when unknown (0 for a served answer)."""
    duration_ms: float | None = column()
    """How long the call took."""

    @property
    def content(self) -> str | None:
        """The text of the answer (a blob is read back as text)."""
        content = self.message.get("content")
        return content.text() if isinstance(content, BlobRef) else content

    @property
    def tool_calls(self) -> tuple[Mapping[str, Any], ...]:
        """The tool calls the model asked for, if any."""
        return tuple(self.message.get("tool_calls") or ())

    def columns(self) -> dict[str, Any]:
        """``model``, the token counts, ``cost_usd`` and ``duration_ms``."""
        u = self.usage
        return {"model": self.model, "input_tokens": None if u is None else u.input_tokens,
                "output_tokens": None if u is None else u.output_tokens,
                "cached_tokens": None if u is None else u.cached_tokens, "cost_usd": self.cost_usd,
                "duration_ms": self.duration_ms}


@upcaster("llm.response", 1)
def _response_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """Version 1 kept the provider-reported cost in ``usage.cost_usd`` (``null`` when the
    provider said nothing, even when agentlog computed one): the cost lives in the
    ``cost_usd`` column only, with ``cost_source``."""
    usage = payload.get("usage")
    if isinstance(usage, Mapping) and "cost_usd" in usage:
        payload["usage"] = {k: v for k, v in usage.items() if k != "cost_usd"}
    return payload


@upcaster("llm.response", 2)
def _response_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """Version 2 kept a streamed answer's raw stream as a blob under ``stream`` (the same blob
    as the ``http.response`` body): version 3 says ``streamed``, and the raw stream is that
    body."""
    if payload.pop("stream", None) is not None:
        payload["streamed"] = True
    return payload


@event_type("tool.call")
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall(Body):
    """A tool was called."""

    key: str
    """The call's cache key (name + canonical args)."""
    name: str
    """The tool's name."""
    args: Mapping[str, Any]
    """Its keyword arguments."""
    idempotency_key: str | None = None
    """``"<run id>:<seq>"`` of this call, passed to tools that take one (a repeat is recognised)."""


@event_type("tool.result")
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult(Body):
    """A tool returned (``result``) or raised (``error`` and ``type``)."""

    key: str
    """The call's cache key."""
    name: str
    """The tool's name."""
    result: Any = optional()
    """What it returned (any JSON value; bytes and long text are blobs)."""
    error: Text | None = optional()
    """``"<exception type>: <message>"`` when it raised."""
    type: str | None = optional()
    """The exception's class name when it raised."""
    served_from_seq: int | None = optional()
    """For a served result: the seq it was recorded at in the run it came from."""
    edited: bool = optional(False)
    """True when a fork's edit replaced the recorded result."""
    cost_usd: float | None = column()
    """What the call cost, when the tool reports it."""
    duration_ms: float | None = column()
    """How long the call took."""

    @property
    def failed(self) -> bool:
        """True when the tool raised."""
        return self.error is not None


class _WithBody:
    """What the HTTP events share: a body kept as text or as a blob, read back as bytes."""

    __slots__ = ()
    body: Text | None

    @property
    def content(self) -> bytes:
        """The body's bytes (``b""`` for none)."""
        body = self.body
        if body is None:
            return b""
        return body.encode("utf-8") if isinstance(body, str) else body.read_bytes()


@event_type("http.request", version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPRequest(Body, _WithBody):
    """An HTTP request went out (secrets in headers and query already redacted).

    >>> HTTPRequest(key="k", method="POST", url="https://x.test/", headers={}, body='{"a":1}').content
    b'{"a":1}'
    """

    key: str
    """The exchange's cache key (method, normalised URL, body)."""
    method: str
    """``GET``, ``POST``, ..."""
    url: Text
    """The URL."""
    headers: Mapping[str, Text]
    """The request headers, names lower-cased."""
    body: Text | None = None
    """The body: its text when it is UTF-8 (kept in the event; the store moves long text to a
    blob), else a blob of its bytes. :attr:`content` reads either as bytes."""


@event_type("http.response", version=2)
@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPResponse(Body, _WithBody):
    """An HTTP response came back (or was served from a log)."""

    key: str
    """The exchange's cache key."""
    status: int
    """The status code."""
    headers: Mapping[str, Text]
    """The response headers that are kept (an allow-list), names lower-cased."""
    body: Text | None = None
    """The body: its text when it is UTF-8 (kept in the event; the store moves long text to a
    blob), else a blob of its bytes; a stream's raw bytes likewise (version 2 made them a blob
    always). :attr:`content` reads either as bytes."""
    served_from_seq: int | None = optional()
    """For a served response: the seq it was recorded at in the run it came from."""
    edited: bool = optional(False)
    """True when a fork's edit replaced the recorded response."""
    duration_ms: float | None = column()
    """How long the exchange took."""


@upcaster("http.request", 1)
@upcaster("http.response", 1)
def _http_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """Version 1 kept every body as a blob, which version 2 reads as it is."""
    return payload
