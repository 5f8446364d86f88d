"""Token usage of one model call, in the OpenTelemetry GenAI convention.

``input_tokens`` is every input token, cache reads and cache writes included;
``cached_tokens`` (cache reads) and ``cache_write_tokens`` are the parts of it that were billed
differently; ``output_tokens`` includes reasoning tokens, and ``reasoning_tokens`` is the part
of it spent thinking. Reading each provider's own usage shape into a :class:`Usage` is the
capture layer's job (:func:`agentlog.capture.providers.normalize_usage`).

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from ..errors import UsageError
from .base import Value

__all__ = ["TOKEN_FIELDS", "Usage"]

#: The token counts of a usage, in the order payloads and tables list them.
TOKEN_FIELDS: Final = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens",
                       "reasoning_tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage(Value):
    """Token counts of one model call.

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

    FIELDS: ClassVar[tuple[str, ...]] = TOKEN_FIELDS

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
    """The cost the provider reported, in USD; ``None`` when it did not say. Not part of the
    payload: an ``llm.response`` keeps its cost in the ``cost_usd`` column, with
    ``cost_source`` saying where it came from."""

    def __post_init__(self) -> None:
        for name in TOKEN_FIELDS:
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
        """Every field, ``cost_usd`` as ``None`` when not reported.

        >>> Usage(input_tokens=3, output_tokens=1).to_dict()["cached_tokens"]
        0
        """
        return {**self.to_json(), "cost_usd": self.cost_usd}

    def to_json(self) -> dict[str, Any]:
        """The token counts, as an ``llm.response`` payload holds them."""
        return {name: getattr(self, name) for name in TOKEN_FIELDS}

    @classmethod
    def from_json(cls, data: Any, *, where: str = "usage") -> Usage:
        """A usage from its payload form (the token counts; a missing count is 0).

        Raises:
            UsageError: a count is not a non-negative integer, or the parts exceed the whole.
        """
        if not isinstance(data, Mapping):
            raise UsageError(where, data, "expected an object of token counts")
        return cls(**{name: _count(data.get(name), name) for name in TOKEN_FIELDS})


def _count(value: Any, name: str) -> int:
    if value is None:
        return 0
    if type(value) is float and value.is_integer():
        return int(value)
    if type(value) is not int or value < 0:
        raise UsageError(name, value, "token counts are non-negative integers")
    return value
