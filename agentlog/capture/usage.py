"""Token usage in one shape, whatever the provider reported.

agentlog counts tokens the OpenTelemetry GenAI way: ``input_tokens`` is every input token,
cache reads and cache writes included; ``cached_tokens`` (cache reads) and
``cache_write_tokens`` are the parts of it that were billed differently; ``output_tokens``
includes reasoning tokens, and ``reasoning_tokens`` is the part of it that was thinking.
:func:`normalize_usage` reads each provider's shape into a :class:`Usage`:

================================  ==========================================================
shape                             how it is read
================================  ==========================================================
OpenAI Chat Completions           ``prompt_tokens`` (includes cached) →  input;
(also OpenRouter, DeepSeek, ...)  ``prompt_tokens_details.cached_tokens`` → cached
                                  (DeepSeek: ``prompt_cache_hit_tokens``);
                                  ``prompt_tokens_details.cache_write_tokens`` → cache write;
                                  ``completion_tokens`` → output;
                                  ``completion_tokens_details.reasoning_tokens`` → reasoning
OpenAI Responses                  ``input_tokens`` (includes cached) → input;
                                  ``input_tokens_details.cached_tokens`` → cached;
                                  ``output_tokens``, ``output_tokens_details.reasoning_tokens``
Anthropic Messages                ``input_tokens`` EXCLUDES the cache, so input =
                                  ``input_tokens + cache_read_input_tokens +
                                  cache_creation_input_tokens``; cached = cache reads;
                                  cache write = cache creation
Google Gemini                     ``promptTokenCount`` (includes cached) +
                                  ``toolUsePromptTokenCount`` → input;
                                  ``cachedContentTokenCount`` → cached; output =
                                  ``candidatesTokenCount + thoughtsTokenCount`` (Gemini counts
                                  thoughts apart); reasoning = ``thoughtsTokenCount``;
                                  snake_case spellings of the SDK too
agentlog                          the fields of :class:`Usage` (``Usage.to_dict()``, or
                                  ``dataclasses.asdict``), read as they are; genai-prices and
                                  pydantic-ai spell cache reads ``cache_read_tokens``
================================  ==========================================================

A top-level ``cost`` (OpenRouter's usage accounting, in USD) or ``cost_usd`` becomes
``Usage.cost_usd``, the provider-reported cost.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..errors import UsageError

__all__ = ["Shape", "Usage", "detect_shape", "normalize_usage"]

Shape = Literal["agentlog", "openai_chat", "openai_responses", "anthropic", "gemini", "plain"]

_TOKEN_FIELDS: Final = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens",
                        "reasoning_tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of one model call, in the OpenTelemetry GenAI convention.

    ``cached_tokens + cache_write_tokens <= input_tokens`` and
    ``reasoning_tokens <= output_tokens`` always hold; a :class:`~agentlog.errors.UsageError`
    says which count broke them.

    >>> u = Usage(input_tokens=1200, cached_tokens=1000, output_tokens=50)
    >>> u.uncached_input_tokens, u.total_tokens
    (200, 1250)
    >>> Usage(input_tokens=10, cached_tokens=20)
    Traceback (most recent call last):
    ...
    agentlog.errors.UsageError: usage cached_tokens=20: cache reads and writes (20) exceed input_tokens (10)
    """

    input_tokens: int = 0
    """All input tokens: uncached, cache reads and cache writes."""
    output_tokens: int = 0
    """All output tokens, reasoning included."""
    cached_tokens: int = 0
    """Input tokens read from the provider's prompt cache (a part of ``input_tokens``)."""
    cache_write_tokens: int = 0
    """Input tokens written to the provider's prompt cache (a part of ``input_tokens``)."""
    reasoning_tokens: int = 0
    """Output tokens spent thinking (a part of ``output_tokens``), for display."""
    cost_usd: float | None = None
    """The cost the provider reported, in USD; ``None`` when it did not say."""

    def __post_init__(self) -> None:
        for name in _TOKEN_FIELDS:
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise UsageError(name, value, "token counts are non-negative integers")
        if self.cached_tokens + self.cache_write_tokens > self.input_tokens:
            which = "cached_tokens" if self.cached_tokens > self.input_tokens else "cache_write_tokens"
            raise UsageError(which, getattr(self, which),
                             f"cache reads and writes ({self.cached_tokens + self.cache_write_tokens}) "
                             f"exceed input_tokens ({self.input_tokens})")
        if self.reasoning_tokens > self.output_tokens:
            raise UsageError("reasoning_tokens", self.reasoning_tokens,
                             f"exceeds output_tokens ({self.output_tokens})")
        if self.cost_usd is not None:
            cost = self.cost_usd
            if type(cost) not in (int, float) or not math.isfinite(cost) or cost < 0:
                raise UsageError("cost_usd", cost, "a cost is a finite, non-negative number of USD")
            if type(cost) is int:
                object.__setattr__(self, "cost_usd", float(cost))

    @property
    def uncached_input_tokens(self) -> int:
        """Input tokens billed at the plain input price: neither read from nor written to a cache."""
        return self.input_tokens - self.cached_tokens - self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        """The agentlog shape: every field, ``cost_usd`` as ``None`` when not reported.

        ``normalize_usage(u.to_dict()) == u``.

        >>> Usage(input_tokens=3, output_tokens=1).to_dict()["cached_tokens"]
        0
        """
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cached_tokens": self.cached_tokens, "cache_write_tokens": self.cache_write_tokens,
                "reasoning_tokens": self.reasoning_tokens, "cost_usd": self.cost_usd}


# --- reading raw shapes ----------------------------------------------------------------------

# Fields that only agentlog's own shape (and genai-prices' / pydantic-ai's, which says
# ``cache_read_tokens`` for cache reads) has at the top level.
_AGENTLOG_MARKERS: Final = ("cached_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
                            "cost_usd")
_GEMINI_MARKERS: Final = ("promptTokenCount", "candidatesTokenCount", "totalTokenCount",
                          "cachedContentTokenCount", "prompt_token_count", "candidates_token_count",
                          "total_token_count")
_ANTHROPIC_MARKERS: Final = ("cache_read_input_tokens", "cache_creation_input_tokens", "cache_creation")
# Where a response carries its usage, for when a whole response is passed.
_USAGE_HOLDERS: Final = ("usage", "usageMetadata", "usage_metadata")

_ANTHROPIC_PROVIDERS: Final = ("anthropic", "claude")
_OPENAI_PROVIDERS: Final = ("openai", "azure", "openrouter")


def _as_mapping(raw: Any) -> Any:
    """A mapping for SDK objects that can dump themselves; other objects are read by attribute."""
    dump = getattr(raw, "model_dump", None)
    if callable(dump) and not isinstance(raw, type):
        return dump()
    to_dict = getattr(raw, "to_dict", None)
    if callable(to_dict) and not isinstance(raw, (type, Mapping)):
        return to_dict()
    return raw


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _has(obj: Any, key: str) -> bool:
    return _get(obj, key) is not None


def _count(obj: Any, *path: str) -> int:
    """The integer at ``path`` (missing or ``None`` is 0), refusing anything that is not a count."""
    value = obj
    for key in path:
        value = _get(value, key)
        if value is None:
            return 0
    if type(value) is float and value.is_integer():  # some gateways send 12.0
        value = int(value)
    if type(value) is not int or value < 0:
        raise UsageError(".".join(path), value, "token counts are non-negative integers")
    return value


def _cost(obj: Any, key: str) -> float | None:
    value = _get(obj, key)
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise UsageError(key, value, "a cost is a finite, non-negative number of USD")
    return float(value)


def _family(provider: str | None) -> str | None:
    if not provider:
        return None
    p = provider.lower()
    if any(name in p for name in _ANTHROPIC_PROVIDERS):
        return "anthropic"
    if any(name in p for name in _OPENAI_PROVIDERS):
        return "openai"
    return None


def detect_shape(raw: Any, *, provider: str | None = None) -> Shape:
    """Which provider's shape a usage report has (see :func:`normalize_usage` for the rules).

    >>> detect_shape({"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 1})
    'anthropic'
    >>> detect_shape({"input_tokens": 5, "output_tokens": 1}, provider="anthropic")
    'anthropic'
    >>> detect_shape({"input_tokens": 5, "output_tokens": 1})
    'plain'
    """
    raw = _as_mapping(raw)
    if any(_has(raw, k) for k in _AGENTLOG_MARKERS):
        return "agentlog"
    if any(_has(raw, k) for k in _GEMINI_MARKERS):
        return "gemini"
    if _has(raw, "prompt_tokens") or _has(raw, "completion_tokens"):
        return "openai_chat"
    if not (_has(raw, "input_tokens") or _has(raw, "output_tokens")):
        raise UsageError("*", _describe(raw), "no token counts found; expected an OpenAI, Anthropic, "
                         "Gemini or agentlog usage shape")
    # OpenAI Responses and Anthropic both say input_tokens, with opposite meanings for the cache.
    family = _family(provider)
    if family == "anthropic":
        return "anthropic"
    if family == "openai":
        return "openai_responses"
    anthropic = any(_has(raw, k) for k in _ANTHROPIC_MARKERS)
    openai = _has(raw, "input_tokens_details")
    if anthropic and openai:
        raise UsageError("input_tokens", _get(raw, "input_tokens"),
                         "the report has both Anthropic cache fields and OpenAI input_tokens_details; "
                         "pass provider='anthropic' or provider='openai'")
    if anthropic:
        return "anthropic"
    if openai:
        return "openai_responses"
    return "plain"  # no cache fields: both readings give the same numbers


def _describe(raw: Any) -> Any:
    if isinstance(raw, Mapping):
        return sorted(str(k) for k in raw)
    return type(raw).__name__


def normalize_usage(raw: Mapping[str, Any] | Any, *, provider: str | None = None) -> Usage:
    """Read a provider's usage report (a mapping or an SDK object) into a :class:`Usage`.

    The shape is found from the field names: agentlog's own fields (``cached_tokens``,
    ``cost_usd``, ...), Gemini's ``*TokenCount``, OpenAI Chat's ``prompt_tokens``. Where OpenAI
    Responses and Anthropic collide on ``input_tokens``, ``provider`` decides when given
    (a name containing ``anthropic`` or ``claude`` means Anthropic; ``openai``, ``azure`` or
    ``openrouter`` means OpenAI); otherwise Anthropic's cache fields (``cache_read_input_tokens``,
    ``cache_creation_input_tokens``, ``cache_creation``) mean Anthropic and
    ``input_tokens_details`` means OpenAI. With neither, both readings agree.

    A whole response (``{"usage": {...}}``, Gemini's ``usageMetadata``) is unwrapped, a
    :class:`Usage` is returned as it is, and ``None`` or an empty mapping (nothing reported)
    gives ``Usage()``.

    Raises:
        UsageError: a count is not a non-negative integer, the parts exceed the whole, the
            shape is ambiguous, or no token counts are found.

    >>> normalize_usage({"prompt_tokens": 1200, "completion_tokens": 80,
    ...                  "prompt_tokens_details": {"cached_tokens": 1024}})
    Usage(input_tokens=1200, output_tokens=80, cached_tokens=1024, cache_write_tokens=0, reasoning_tokens=0, cost_usd=None)
    >>> u = normalize_usage({"input_tokens": 50, "cache_read_input_tokens": 1000,
    ...                      "cache_creation_input_tokens": 200, "output_tokens": 30})
    >>> u.input_tokens, u.cached_tokens, u.cache_write_tokens
    (1250, 1000, 200)
    """
    if isinstance(raw, Usage):
        return raw
    raw = _as_mapping(raw)
    if raw is None or (isinstance(raw, Mapping) and not raw):
        return Usage()
    for holder in _USAGE_HOLDERS:
        inner = _get(raw, holder)
        if inner is not None and not isinstance(inner, (int, float, str)):
            return normalize_usage(inner, provider=provider)
    shape = detect_shape(raw, provider=provider)
    return _READERS[shape](raw)


def _agentlog(raw: Any) -> Usage:
    return Usage(input_tokens=_count(raw, "input_tokens"), output_tokens=_count(raw, "output_tokens"),
                 cached_tokens=_count(raw, "cached_tokens") or _count(raw, "cache_read_tokens"),
                 cache_write_tokens=_count(raw, "cache_write_tokens"),
                 reasoning_tokens=_count(raw, "reasoning_tokens"), cost_usd=_cost(raw, "cost_usd"))


def _openai_chat(raw: Any) -> Usage:
    cached = _count(raw, "prompt_tokens_details", "cached_tokens") or _count(raw, "prompt_cache_hit_tokens")
    return Usage(input_tokens=_count(raw, "prompt_tokens"), output_tokens=_count(raw, "completion_tokens"),
                 cached_tokens=cached,
                 cache_write_tokens=_count(raw, "prompt_tokens_details", "cache_write_tokens"),
                 reasoning_tokens=_count(raw, "completion_tokens_details", "reasoning_tokens"),
                 cost_usd=_cost(raw, "cost"))


def _openai_responses(raw: Any) -> Usage:
    return Usage(input_tokens=_count(raw, "input_tokens"), output_tokens=_count(raw, "output_tokens"),
                 cached_tokens=_count(raw, "input_tokens_details", "cached_tokens"),
                 cache_write_tokens=_count(raw, "input_tokens_details", "cache_write_tokens"),
                 reasoning_tokens=_count(raw, "output_tokens_details", "reasoning_tokens"),
                 cost_usd=_cost(raw, "cost"))


def _anthropic(raw: Any) -> Usage:
    read = _count(raw, "cache_read_input_tokens")
    if _has(raw, "cache_creation_input_tokens"):
        write = _count(raw, "cache_creation_input_tokens")
    else:  # only the per-TTL split was sent
        write = (_count(raw, "cache_creation", "ephemeral_5m_input_tokens")
                 + _count(raw, "cache_creation", "ephemeral_1h_input_tokens"))
    return Usage(input_tokens=_count(raw, "input_tokens") + read + write,
                 output_tokens=_count(raw, "output_tokens"), cached_tokens=read, cache_write_tokens=write,
                 reasoning_tokens=_count(raw, "output_tokens_details", "thinking_tokens"),
                 cost_usd=_cost(raw, "cost"))


def _gemini(raw: Any) -> Usage:
    def n(camel: str, snake: str) -> int:
        return _count(raw, camel) if _has(raw, camel) else _count(raw, snake)

    thoughts = n("thoughtsTokenCount", "thoughts_token_count")
    return Usage(input_tokens=n("promptTokenCount", "prompt_token_count")
                 + n("toolUsePromptTokenCount", "tool_use_prompt_token_count"),
                 output_tokens=n("candidatesTokenCount", "candidates_token_count") + thoughts,
                 cached_tokens=n("cachedContentTokenCount", "cached_content_token_count"),
                 reasoning_tokens=thoughts, cost_usd=_cost(raw, "cost"))


_READERS: Final = {
    "agentlog": _agentlog, "openai_chat": _openai_chat, "openai_responses": _openai_responses,
    "anthropic": _anthropic, "gemini": _gemini, "plain": _openai_responses,
}
