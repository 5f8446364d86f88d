"""What a model call cost, in USD: reported by the provider, computed from a price, or unknown.

Prices come from the `genai-prices <https://github.com/pydantic/genai-prices>`_ catalog, at the
date of the request (prices change: ``o3`` cost $10/$40 per million tokens until 2025-06-10
and $2/$8 after), and from user overrides, which win. Override prices are in **USD per million
tokens**, as providers list them::

    import agentlog as al
    al.pricing.set("my-finetune", input=3.0, output=12.0, cached_input=0.3)
    al.pricing.load("prices.toml")      # or .json: {"model": {"input": .., "output": .., ...}}

:func:`cost` never guesses: a model with no price gets ``usd=None`` (source ``unknown``) and
one :class:`~agentlog.errors.UnknownModelWarning` per model per process. A cost the provider
reported (``Usage.cost_usd``, e.g. OpenRouter's) wins over a computed one.

Tokens are charged once each: ``usage.input_tokens`` includes cache reads and writes, so the
plain input price applies to ``input_tokens - cached_tokens - cache_write_tokens``, the cached
price to ``cached_tokens`` and the cache-write price to ``cache_write_tokens``.

Catalog lookups are memoised per (model, provider) and prices per (model, provider, UTC date),
each price read once into USD per token of each kind (genai-prices' own ``calc_price`` at a few
counts; tiered prices are left to ``calc_price`` at every call), so :func:`cost` is cheap
enough to call on every model response (a few µs). The only I/O is in
:func:`load`, which reads the file it is given.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from .errors import PricingError, UnknownModelWarning
from .events.usage import Usage

if TYPE_CHECKING:  # pragma: no cover
    from genai_prices.types import ModelInfo, ModelPrice, Provider

__all__ = ["Cost", "CostSource", "Price", "TokenCounts", "clear", "cost", "load", "overrides", "set"]

CostSource = Literal["provider", "computed", "unknown"]

_PER: Final = Decimal(1_000_000)  # prices are per million tokens
_PRICE_FIELDS: Final = ("input", "output", "cached_input", "cache_write")


class TokenCounts(Protocol):
    """What a price needs to know of a call's usage: :class:`agentlog.events.Usage` has it."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...
    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def uncached_input_tokens(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """The cost of one model call.

    >>> Cost(usd=None, source="unknown", detail="no price for 'x'")
    Cost(usd=None, source='unknown', detail="no price for 'x'")
    """

    usd: float | None
    """US dollars; ``None`` when no price is known."""
    source: CostSource
    """``provider`` (reported in the response), ``computed`` (from a price) or ``unknown``."""
    detail: str
    """Where the number came from: the override or the catalog entry and its prices."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """A user's price for a model, in USD per million tokens.

    ``cached_input`` and ``cache_write`` default to the ``input`` price: a model with no
    cache discount charges cached tokens like any others.

    >>> p = Price(input=2.5, output=10, cached_input=1.25)
    >>> p.cost_of(Usage(input_tokens=1_000_000, cached_tokens=400_000, output_tokens=100_000))
    3.0
    >>> 0.6 * 2.5 + 0.4 * 1.25 + 0.1 * 10  # 600k uncached, 400k cached, 100k out, per million
    3.0
    """

    input: float
    """Per million uncached input tokens."""
    output: float
    """Per million output tokens (reasoning included)."""
    cached_input: float | None = None
    """Per million input tokens read from the cache; ``None``: the input price."""
    cache_write: float | None = None
    """Per million input tokens written to the cache; ``None``: the input price."""

    def __post_init__(self) -> None:
        for name in _PRICE_FIELDS:
            value = getattr(self, name)
            if value is None and name in ("cached_input", "cache_write"):
                continue
            if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise PricingError(f"price {name}={value!r}: a price is a finite, non-negative number "
                                   "of USD per million tokens")

    def cost_of(self, usage: TokenCounts) -> float:
        """The USD cost of ``usage`` at this price (exact decimal arithmetic, then a float)."""
        def d(value: float | None) -> Decimal:
            return Decimal(repr(value if value is not None else self.input))

        total = (usage.uncached_input_tokens * d(self.input) + usage.cached_tokens * d(self.cached_input)
                 + usage.cache_write_tokens * d(self.cache_write) + usage.output_tokens * d(self.output))
        return float(total / _PER)

    def describe(self) -> str:
        """``$2.5/M input, $10/M output, ...`` for cost details."""
        parts = [f"${self.input:g}/M input", f"${self.output:g}/M output"]
        if self.cached_input is not None:
            parts.append(f"${self.cached_input:g}/M cached input")
        if self.cache_write is not None:
            parts.append(f"${self.cache_write:g}/M cache write")
        return ", ".join(parts)


# --- overrides ---------------------------------------------------------------------------------

_lock = threading.Lock()
# (model, provider or None), both lower-case -> the user's price.
_overrides: dict[tuple[str, str | None], Price] = {}
# Models already warned about (lower-case): one UnknownModelWarning each per process.
_warned: dict[str, None] = {}


def _norm(model: str, provider: str | None) -> tuple[str, str | None]:
    return model.strip().lower(), (provider.strip().lower() or None) if provider else None


def set(model: str, *, input: float, output: float, cached_input: float | None = None,
        cache_write: float | None = None, provider: str | None = None) -> Price:
    """Price ``model`` yourself, in USD per million tokens; it wins over the catalog.

    The model name matches exactly (case aside): pricing ``gpt-4o`` does not price
    ``gpt-4o-2024-08-06``. With ``provider``, the price applies only to calls made with that
    provider; without, to every call of the model that has no provider-specific price.

    Args:
        model: the model name as the request or response gives it.
        input: per million uncached input tokens.
        output: per million output tokens.
        cached_input: per million cache-read tokens (default: ``input``).
        cache_write: per million cache-write tokens (default: ``input``).
        provider: limit the price to one provider.

    Returns:
        The :class:`Price` now in force.

    Raises:
        PricingError: a price is negative, not finite or not a number.

    >>> with overrides():
    ...     _ = set("my-model", input=1, output=2)
    ...     cost("my-model", Usage(input_tokens=1_000_000, output_tokens=500_000)).usd
    2.0
    """
    if not isinstance(model, str) or not model.strip():
        raise PricingError(f"a price needs a model name, got {model!r}")
    price = Price(input=input, output=output, cached_input=cached_input, cache_write=cache_write)
    with _lock:
        _overrides[_norm(model, provider)] = price
    return price


def _parse(data: Any, where: str) -> dict[tuple[str, str | None], Price]:
    if not isinstance(data, Mapping):
        raise PricingError(f"{where}: expected a table of models, {{model: {{input, output, ...}}}}, "
                           f"got {type(data).__name__}")
    out: dict[tuple[str, str | None], Price] = {}
    allowed = (*_PRICE_FIELDS, "provider")
    for model, entry in data.items():
        if not isinstance(entry, Mapping):
            raise PricingError(f"{where}: model {model!r}: expected {{input, output, ...}}, "
                               f"got {type(entry).__name__}")
        unknown = sorted(str(k) for k in entry if k not in allowed)
        if unknown:
            raise PricingError(f"{where}: model {model!r}: unknown field(s) {', '.join(unknown)}; "
                               f"allowed: {', '.join(allowed)}")
        missing = [k for k in ("input", "output") if k not in entry]
        if missing:
            raise PricingError(f"{where}: model {model!r}: missing {' and '.join(missing)} "
                               "(USD per million tokens)")
        provider = entry.get("provider")
        if provider is not None and not isinstance(provider, str):
            raise PricingError(f"{where}: model {model!r}: provider must be a string, got {provider!r}")
        try:
            price = Price(input=entry["input"], output=entry["output"],
                          cached_input=entry.get("cached_input"), cache_write=entry.get("cache_write"))
        except PricingError as exc:
            raise PricingError(f"{where}: model {model!r}: {exc}") from None
        out[_norm(str(model), provider)] = price
    return out


def load(path: str | os.PathLike[str]) -> int:
    """Add the price overrides in a JSON or TOML file (by its suffix); returns how many.

    The file maps model names to prices in USD per million tokens, with an optional
    ``provider``. JSON: ``{"my-model": {"input": 3, "output": 15, "cached_input": 0.3}}``.
    TOML::

        ["my-model"]
        input = 3
        output = 15
        cache_write = 3.75

    The whole file is checked before any price is changed.

    Raises:
        PricingError: the file is not valid JSON/TOML, or an entry is malformed (an unknown
            field, a missing ``input``/``output``, a negative price); the message names the
            file and the model.
        FileNotFoundError: no such file.
    """
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix.lower() == ".toml":
            import tomllib  # only for a TOML price file: not every recording pays its import
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        kind = "TOML" if p.suffix.lower() == ".toml" else "JSON"
        raise PricingError(f"{p}: not valid {kind}: {exc}") from None
    parsed = _parse(data, str(p))
    with _lock:
        _overrides.update(parsed)
    return len(parsed)


def clear() -> None:
    """Forget every override, and which unknown models were already warned about."""
    with _lock:
        _overrides.clear()
        _warned.clear()


@contextlib.contextmanager
def overrides(prices: Mapping[str, Mapping[str, Any]] | None = None) -> Iterator[None]:
    """Within the block, add ``prices`` (the :func:`load` format); on exit, restore the overrides.

    Calls to :func:`set`, :func:`load` and :func:`clear` inside the block are undone too
    (the record of warned models is not), which makes it the tool for tests.

    >>> with overrides({"tiny": {"input": 1, "output": 1}}):
    ...     cost("tiny", Usage(input_tokens=500_000, output_tokens=500_000)).usd
    1.0
    """
    parsed = _parse(prices or {}, "overrides()")
    with _lock:
        saved = dict(_overrides)
        _overrides.update(parsed)
    try:
        yield
    finally:
        with _lock:
            _overrides.clear()
            _overrides.update(saved)


def _override(model: str, provider: str | None) -> Price | None:
    m, p = _norm(model, provider)
    if p is not None and (price := _overrides.get((m, p))) is not None:
        return price
    return _overrides.get((m, None))


# --- the catalog -------------------------------------------------------------------------------

# Memoised lookups, valid for one genai-prices snapshot (UpdatePrices can swap it at runtime).
_memo_snapshot: object | None = None
# (model, provider) -> (provider, model info, note) or None when the catalog has no price.
_lookups: dict[tuple[str, str | None], tuple[Provider, ModelInfo, str] | None] = {}
# (model, provider, UTC date) -> (price in force that day, detail text, its per-token form).
_prices: dict[tuple[str, str | None, date], tuple[ModelPrice, str, _Linear | None]] = {}


def _snapshot() -> Any:
    global _memo_snapshot
    from genai_prices import data_snapshot  # imported on first use: ~0.1 s and pydantic

    snap = data_snapshot.get_snapshot()
    if snap is not _memo_snapshot:
        _lookups.clear()
        _prices.clear()
        _memo_snapshot = snap
    return snap


def _find(model: str, provider: str | None) -> tuple[Provider, ModelInfo, str] | None:
    snap = _snapshot()
    key = _norm(model, provider)
    if key in _lookups:
        return _lookups[key]
    found: tuple[Provider, ModelInfo, str] | None = None
    try:
        p, m = snap.find_provider_model(model, None, provider, None)
        found = (p, m, "")
    except LookupError:
        if provider:
            # The catalog does not know this provider, or not this model at it: price the model
            # where the catalog does know it, and say so in the detail.
            try:
                p, m = snap.find_provider_model(model, None, None, None)
                found = (p, m, f" (no price at provider {provider!r}; priced as {p.id})")
            except LookupError:
                pass
    _lookups[key] = found
    return found


def _time_of_day(info: ModelInfo) -> bool:
    """True if the model's price changes within a day (off-peak hours), so a date is not enough."""
    from genai_prices.types import TimeOfDateConstraint

    prices = info.prices if isinstance(info.prices, list) else []
    return any(isinstance(c.constraint, TimeOfDateConstraint) for c in prices)


def _catalog_usage(usage: TokenCounts) -> Any:
    from genai_prices import Usage as CatalogUsage

    return CatalogUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                        cache_read_tokens=usage.cached_tokens, cache_write_tokens=usage.cache_write_tokens,
                        output_reasoning_tokens=usage.reasoning_tokens)


@dataclass(frozen=True, slots=True)
class _Linear:
    """A catalog price with no tiers, as USD per token of each kind, read off genai-prices'
    own ``calc_price`` (so its decomposition of usage into priced units is the one applied).

    Such a price is linear in the token counts: ``calc_price`` sums ``price * count / per``
    over its units, each unit's count a difference of the counts given. So the price of one
    token of each kind (read as differences of ``calc_price`` at a few counts) gives the same
    exact decimal total as ``calc_price`` for any valid usage, at a fraction of the work
    (``calc_price`` resolves and validates the price's units on every call: 0.1-0.4 ms).
    ``tests/core/test_pricing.py`` compares the two over the whole catalog.
    """

    fixed: Decimal  # per call (a price per request), whatever the counts
    input: Decimal  # per uncached input token
    cached: Decimal  # per cache-read token, over the input price
    cache_write: Decimal  # per cache-write token, over the input price
    output: Decimal
    reasoning: Decimal  # per reasoning token, over the output price

    @classmethod
    def of(cls, model_price: ModelPrice) -> _Linear | None:
        """The per-token form of ``model_price``; ``None`` for a tiered price (not linear) or
        one genai-prices cannot price from token counts alone."""
        from genai_prices.types import TieredPrices

        if any(isinstance(value, TieredPrices) for value in vars(model_price).values()):
            return None

        def at(**counts: int) -> Decimal:
            return Decimal(model_price.calc_price(_catalog_usage(Usage(**counts)))["total_price"])

        try:
            fixed, one_in, one_out = at(), at(input_tokens=1), at(output_tokens=1)
            return cls(fixed=fixed, input=one_in - fixed,
                       cached=at(input_tokens=1, cached_tokens=1) - one_in,
                       cache_write=at(input_tokens=1, cache_write_tokens=1) - one_in,
                       output=one_out - fixed, reasoning=at(output_tokens=1, reasoning_tokens=1) - one_out)
        except ValueError:
            return None

    def total(self, usage: TokenCounts) -> Decimal | None:
        """The price of ``usage``; ``None`` for counts ``calc_price`` would refuse (parts
        larger than their whole), which it is then left to say."""
        cached, written, reasoning = usage.cached_tokens, usage.cache_write_tokens, usage.reasoning_tokens
        if cached + written > usage.input_tokens or reasoning > usage.output_tokens:
            return None
        return (self.fixed + usage.input_tokens * self.input + cached * self.cached
                + written * self.cache_write + usage.output_tokens * self.output
                + reasoning * self.reasoning)


def _price_at(model: str, provider: str | None, found: tuple[Provider, ModelInfo, str],
              when: datetime) -> tuple[ModelPrice, str, _Linear | None]:
    p, info, note = found
    day = (when.astimezone(UTC) if when.tzinfo else when).date()  # naive is UTC, as in genai-prices
    key = (*_norm(model, provider), day)
    hit = _prices.get(key)
    if hit is not None:
        return hit
    import genai_prices

    model_price = info.get_prices(when)
    detail = f"genai-prices {genai_prices.__version__}: {p.id} {info.id}{note}, {model_price}"
    if _time_of_day(info):  # looked up at every call: not worth reading off per token
        return model_price, detail, None
    _prices[key] = found_price = (model_price, detail, _Linear.of(model_price))
    return found_price


def _when(when: datetime | date | None) -> datetime:
    if when is None:
        return datetime.now(UTC)
    if isinstance(when, datetime):
        return when
    return datetime.combine(when, time(), tzinfo=UTC)


def cost(model: str | None, usage: TokenCounts, *, provider: str | None = None,
         when: datetime | date | None = None) -> Cost:
    """The cost of a model call with ``usage``.

    In order: the provider-reported ``usage.cost_usd`` (source ``provider``); a user override
    (source ``computed``); the genai-prices catalog at ``when`` (source ``computed``); else
    ``usd=None`` (source ``unknown``) and, the first time for this model, an
    :class:`~agentlog.errors.UnknownModelWarning`.

    Args:
        model: the model name, as the response (or else the request) gives it.
        usage: normalised usage (an :class:`agentlog.events.Usage`).
        provider: the provider id (``openai``, ``anthropic``, ``azure``, ``openrouter``,
            ``aws``...) when known: the same model can cost differently at another provider.
            A provider the catalog does not know is ignored (the detail says so).
        when: the time of the request (a naive datetime is UTC). Default: now. Pass the
            recorded time, so that re-pricing an old run uses the prices of its day.

    Raises:
        PricingError: the catalog could not price this usage.

    >>> cost("gpt-4o", Usage(input_tokens=10, output_tokens=1, cost_usd=0.5)).source
    'provider'
    """
    if usage.cost_usd is not None:
        return Cost(usd=usage.cost_usd, source="provider", detail="reported by the provider")
    if not model:
        return Cost(usd=None, source="unknown", detail="no model name, so no price")
    price = _override(model, provider)
    if price is not None:
        return Cost(usd=price.cost_of(usage), source="computed",
                    detail=f"override for {model!r}: {price.describe()}")
    found = _find(model, provider)
    if found is None:
        _warn_once(model, provider)
        return Cost(usd=None, source="unknown",
                    detail=f"no price for {model!r} in genai-prices; set one with al.pricing.set()")
    model_price, detail, linear = _price_at(model, provider, found, _when(when))
    total = linear.total(usage) if linear is not None else None
    if total is None:
        try:
            total = model_price.calc_price(_catalog_usage(usage))["total_price"]
        except ValueError as exc:
            raise PricingError(f"model {model!r}: genai-prices could not price {usage}: {exc}") from exc
    return Cost(usd=float(total), source="computed", detail=detail)


def _warn_once(model: str, provider: str | None) -> None:
    key = model.strip().lower()
    with _lock:
        if key in _warned:
            return
        _warned[key] = None
    warnings.warn(UnknownModelWarning(model, provider), stacklevel=3)
