"""Cost: the genai-prices catalog at the request's date, user overrides, provider-reported costs.

Expected dollar figures are computed from the catalog's own per-million prices, never typed in,
and checked against ``genai_prices.calc_price`` for the same usage.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from genai_prices import data_snapshot
from genai_prices import types as gp
from hypothesis import given, settings
from hypothesis import strategies as st

import agentlog as al
from agentlog import pricing
from agentlog.capture.providers import Usage, normalize_usage
from agentlog.errors import PricingError, UnknownModelWarning
from agentlog.pricing import Cost, Price

WHEN = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CACHED = Usage(input_tokens=120_000, cached_tokens=100_000, output_tokens=4_000)
ANTHROPIC_RAW = {"input_tokens": 2_000, "cache_read_input_tokens": 150_000, "cache_creation_input_tokens": 10_000,
                 "output_tokens": 1_500}


@pytest.fixture(autouse=True)
def _isolated_overrides() -> Iterator[None]:
    with pricing.overrides():
        yield


def catalog_prices(model: str, when: datetime = WHEN, provider: str | None = None) -> gp.ModelPrice:
    """The catalog's per-million prices for a model on a date, straight from genai-prices."""
    _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider, None)
    return info.get_prices(when)


def per_million(value: Any) -> Decimal:
    assert isinstance(value, Decimal), f"expected a flat price, got {value!r}"
    return value / Decimal(1_000_000)


def reference(usage: Usage, model: str, when: datetime = WHEN, provider: str | None = None) -> float:
    """genai_prices.calc_price for the same usage: the independent answer."""
    calc = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=usage.input_tokens, cache_read_tokens=usage.cached_tokens,
                           cache_write_tokens=usage.cache_write_tokens, output_tokens=usage.output_tokens),
        model, provider_id=provider, genai_request_timestamp=when)
    return float(calc.total_price)


# --- the catalog --------------------------------------------------------------------------------


def test_catalog_price_with_cached_tokens_is_charged_once() -> None:
    p = catalog_prices("gpt-4o")
    # 20,000 uncached at the input price, 100,000 at the cached price, 4,000 out.
    expected = float(20_000 * per_million(p.input_mtok) + 100_000 * per_million(p.cache_read_mtok)
                     + 4_000 * per_million(p.output_mtok))
    result = pricing.cost("gpt-4o", CACHED, when=WHEN)
    assert result.source == "computed"
    assert result.usd == pytest.approx(expected, rel=1e-12)
    assert result.usd == reference(CACHED, "gpt-4o")
    # Charging input_tokens in full and the cache on top would be more.
    double = float(120_000 * per_million(p.input_mtok) + 100_000 * per_million(p.cache_read_mtok)
                   + 4_000 * per_million(p.output_mtok))
    assert result.usd < double
    assert result.detail.startswith(f"genai-prices {genai_prices.__version__}: openai gpt-4o, $")


def test_anthropic_usage_normalised_then_priced_does_not_double_count() -> None:
    usage = normalize_usage(ANTHROPIC_RAW)
    assert usage == Usage(input_tokens=162_000, cached_tokens=150_000, cache_write_tokens=10_000,
                          output_tokens=1_500)
    p = catalog_prices("claude-3-5-sonnet")
    expected = float(2_000 * per_million(p.input_mtok) + 150_000 * per_million(p.cache_read_mtok)
                     + 10_000 * per_million(p.cache_write_mtok) + 1_500 * per_million(p.output_mtok))
    result = pricing.cost("claude-3-5-sonnet-20241022", usage, provider="anthropic", when=WHEN)
    assert result.usd == pytest.approx(expected, rel=1e-12)
    # genai-prices reading the raw response itself gives the same number.
    extracted = genai_prices.extract_usage({"model": "claude-3-5-sonnet-20241022", "usage": ANTHROPIC_RAW},
                                           provider_id="anthropic")
    assert result.usd == float(extracted.calc_price(genai_request_timestamp=WHEN).total_price)


def test_prices_follow_the_request_date() -> None:
    # o3 was repriced on 2025-06-10; the catalog holds both prices.
    before, after = datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC)
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    old, new = pricing.cost("o3", usage, when=before), pricing.cost("o3", usage, when=after)
    assert old.usd == reference(usage, "o3", before)
    assert new.usd == reference(usage, "o3", after)
    p_old, p_new = catalog_prices("o3", before), catalog_prices("o3", after)
    assert old.usd == float(p_old.input_mtok + p_old.output_mtok)
    assert new.usd == float(p_new.input_mtok + p_new.output_mtok)
    assert old.usd != new.usd


def test_prices_that_change_within_a_day_are_not_memoised_by_date() -> None:
    # DeepSeek has off-peak hours: same date, two prices.
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    noon, night = datetime(2026, 6, 1, 12, tzinfo=UTC), datetime(2026, 6, 1, 20, tzinfo=UTC)
    a, b = pricing.cost("deepseek-chat", usage, when=noon), pricing.cost("deepseek-chat", usage, when=night)
    assert a.usd == reference(usage, "deepseek-chat", noon)
    assert b.usd == reference(usage, "deepseek-chat", night)
    assert a.usd != b.usd


def test_naive_times_are_utc_and_dates_are_midnight() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=1_000)
    aware = pricing.cost("o3", usage, when=datetime(2025, 6, 10, tzinfo=UTC))
    assert pricing.cost("o3", usage, when=datetime(2025, 6, 10)) == aware
    assert pricing.cost("o3", usage, when=date(2025, 6, 10)) == aware


def test_provider_selects_the_provider_price() -> None:
    result = pricing.cost("gpt-4o", CACHED, provider="azure", when=WHEN)
    assert result.usd == reference(CACHED, "gpt-4o", provider="azure")
    assert "azure gpt-4o" in result.detail


def test_a_provider_the_catalog_does_not_know_is_said_in_the_detail() -> None:
    result = pricing.cost("gpt-4o", CACHED, provider="my-proxy", when=WHEN)
    assert result.usd == reference(CACHED, "gpt-4o")
    assert "(no price at provider 'my-proxy'; priced as openai)" in result.detail


def test_zero_usage_costs_zero() -> None:
    assert pricing.cost("gpt-4o", Usage(), when=WHEN).usd == 0.0


# --- provider-reported cost ---------------------------------------------------------------------


def test_a_reported_cost_wins() -> None:
    usage = normalize_usage({"prompt_tokens": 100, "completion_tokens": 20, "cost": 0.0123})
    pricing.set("gpt-4o", input=1, output=1)
    assert pricing.cost("gpt-4o", usage, when=WHEN) == Cost(usd=0.0123, source="provider",
                                                           detail="reported by the provider")


def test_a_reported_cost_needs_no_price_and_warns_nothing() -> None:
    usage = Usage(input_tokens=1, output_tokens=1, cost_usd=0.5)
    assert pricing.cost("reported-only-model", usage).usd == 0.5  # filterwarnings=error would fail a warning


# --- overrides ----------------------------------------------------------------------------------


def test_an_override_wins_over_the_catalog() -> None:
    pricing.set("gpt-4o", input=1.0, output=3.0, cached_input=0.5)
    result = pricing.cost("GPT-4o", CACHED, when=WHEN)
    # 20,000 x $1 + 100,000 x $0.5 + 4,000 x $3, per million.
    assert result.usd == pytest.approx((20_000 * 1.0 + 100_000 * 0.5 + 4_000 * 3.0) / 1e6, rel=1e-12)
    assert result == Cost(usd=result.usd, source="computed",
                          detail="override for 'GPT-4o': $1/M input, $3/M output, $0.5/M cached input")


def test_override_cache_prices_default_to_the_input_price() -> None:
    pricing.set("flat-model", input=2.0, output=4.0)
    usage = Usage(input_tokens=1_000, cached_tokens=300, cache_write_tokens=200, output_tokens=500)
    assert pricing.cost("flat-model", usage).usd == pytest.approx((1_000 * 2.0 + 500 * 4.0) / 1e6, rel=1e-12)


def test_override_with_cache_write_price() -> None:
    pricing.set("cw-model", input=3, output=15, cached_input=0.3, cache_write=3.75)
    usage = normalize_usage(ANTHROPIC_RAW)
    expected = (2_000 * 3 + 150_000 * 0.3 + 10_000 * 3.75 + 1_500 * 15) / 1e6
    assert pricing.cost("cw-model", usage).usd == pytest.approx(expected, rel=1e-12)


def test_provider_specific_override() -> None:
    pricing.set("gpt-4o", input=100, output=100, provider="my-proxy")
    usage = Usage(input_tokens=1_000_000)
    assert pricing.cost("gpt-4o", usage, provider="my-proxy").usd == 100.0
    assert pricing.cost("gpt-4o", usage, provider="openai", when=WHEN).usd == reference(usage, "gpt-4o")
    pricing.set("gpt-4o", input=7, output=7)
    assert pricing.cost("gpt-4o", usage, provider="openai").usd == 7.0
    assert pricing.cost("gpt-4o", usage, provider="my-proxy").usd == 100.0


def test_overrides_match_the_exact_model_name() -> None:
    pricing.set("gpt-4o", input=100, output=100)
    usage = Usage(input_tokens=1_000_000)
    assert pricing.cost("gpt-4o-2024-08-06", usage, when=WHEN).usd == reference(usage, "gpt-4o-2024-08-06")


def test_overrides_context_restores_what_was_there() -> None:
    pricing.set("kept", input=1, output=1)
    with pricing.overrides({"temp": {"input": 2, "output": 2}}):
        pricing.set("inner", input=3, output=3)
        pricing.clear()
        assert pricing._override("kept", None) is None
    assert pricing._override("kept", None) == Price(input=1, output=1)
    assert pricing._override("temp", None) is None
    assert pricing._override("inner", None) is None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"input": -1, "output": 1}, "price input=-1: a price is a finite, non-negative number of USD per million tokens"),
    ({"input": 1, "output": float("inf")},
     "price output=inf: a price is a finite, non-negative number of USD per million tokens"),
    ({"input": 1, "output": 1, "cached_input": True},
     "price cached_input=True: a price is a finite, non-negative number of USD per million tokens"),
    ({"input": "1", "output": 1}, "price input='1': a price is a finite, non-negative number of USD per million tokens"),
])
def test_bad_prices_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PricingError) as info:
        pricing.set("m", **kwargs)
    assert str(info.value) == message


def test_set_needs_a_model_name() -> None:
    with pytest.raises(PricingError, match="a price needs a model name, got ''"):
        pricing.set("", input=1, output=1)


# --- load ---------------------------------------------------------------------------------------


def test_load_json(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"json-model": {"input": 1, "output": 2, "cached_input": 0.1},
                                "proxied": {"input": 5, "output": 5, "provider": "my-proxy"}}))
    assert pricing.load(path) == 2
    assert pricing.cost("json-model", Usage(input_tokens=1_000_000, output_tokens=1_000_000)).usd == 3.0
    assert pricing.cost("proxied", Usage(input_tokens=1_000_000), provider="my-proxy").usd == 5.0


def test_load_toml(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('["toml/model"]\ninput = 3\noutput = 15\ncache_write = 3.75\n', encoding="utf-8")
    assert pricing.load(str(path)) == 1
    usage = Usage(input_tokens=1_000_000, cache_write_tokens=1_000_000)
    assert pricing.cost("toml/model", usage).usd == 3.75


@pytest.mark.parametrize(("name", "text", "message"), [
    ("bad.json", "{not json", ("not valid JSON: Expecting property name enclosed in double quotes: "
                               "line 1 column 2 (char 1)")),
    ("bad.toml", "= 1", "not valid TOML: Invalid statement (at line 1, column 1)"),
    ("list.json", "[1]", "expected a table of models, {model: {input, output, ...}}, got list"),
    ("typo.json", '{"m": {"input": 1, "output": 2, "cached": 0.1}}',
     "model 'm': unknown field(s) cached; allowed: input, output, cached_input, cache_write, provider"),
    ("missing.json", '{"m": {"input": 1}}', "model 'm': missing output (USD per million tokens)"),
    ("negative.json", '{"m": {"input": 1, "output": -2}}',
     "model 'm': price output=-2: a price is a finite, non-negative number of USD per million tokens"),
    ("scalar.json", '{"m": 3}', "model 'm': expected {input, output, ...}, got int"),
])
def test_load_refuses_bad_files_and_changes_nothing(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text('{"ok": {"input": 1, "output": 1}, ' + text[1:] if name == "typo.json" else text)
    with pytest.raises(PricingError) as info:
        pricing.load(path)
    assert str(info.value) == f"{path}: {message}"
    assert pricing._override("ok", None) is None  # checked whole before anything is set


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        pricing.load(tmp_path / "nope.json")


# --- unknown models -----------------------------------------------------------------------------


def test_unknown_model_is_none_with_one_warning() -> None:
    usage = Usage(input_tokens=10, output_tokens=1)
    with pytest.warns(UnknownModelWarning) as record:
        first = pricing.cost("no-such-model-a1", usage)
    assert first == Cost(usd=None, source="unknown",
                         detail="no price for 'no-such-model-a1' in genai-prices; set one with al.pricing.set()")
    assert len(record) == 1
    assert str(record[0].message) == (
        "no price for model 'no-such-model-a1' in genai-prices; its cost is recorded as unknown. "
        "Set one with al.pricing.set('no-such-model-a1', input=..., output=...) in USD per million tokens")
    assert record[0].filename == __file__  # points at the caller of cost()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise
        second = pricing.cost("no-such-model-a1", usage)
        pricing.cost("No-Such-Model-A1", usage, provider="openai")
    assert second.usd is None and second.source == "unknown"


def test_the_warning_names_the_provider_and_carries_facts() -> None:
    with pytest.warns(UnknownModelWarning, match=r"\(provider 'openai'\)") as record:
        pricing.cost("gpt-99-b2", Usage(), provider="openai")
    warning = record[0].message
    assert isinstance(warning, UnknownModelWarning)
    assert (warning.model, warning.provider) == ("gpt-99-b2", "openai")


def test_clear_forgets_the_warnings_too() -> None:
    with pytest.warns(UnknownModelWarning):
        pricing.cost("no-such-model-c3", Usage())
    pricing.clear()
    with pytest.warns(UnknownModelWarning):
        pricing.cost("no-such-model-c3", Usage())


def test_an_override_prices_an_unknown_model() -> None:
    pricing.set("no-such-model-d4", input=1, output=1)
    assert pricing.cost("no-such-model-d4", Usage(input_tokens=1_000_000)).usd == 1.0


def test_no_model_name_is_unknown_without_a_warning() -> None:
    assert pricing.cost(None, Usage(input_tokens=1)) == Cost(usd=None, source="unknown",
                                                             detail="no model name, so no price")


# --- memoisation --------------------------------------------------------------------------------


def test_catalog_lookups_are_memoised(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = data_snapshot.get_snapshot()
    calls: list[str] = []
    real = snap.find_provider_model

    def counting(model_ref: str, *args: Any) -> Any:
        calls.append(model_ref)
        return real(model_ref, *args)

    pricing.cost("gpt-4o-mini", CACHED, when=WHEN)  # make sure the snapshot is the memo's
    # not looked up yet, whatever ran before
    monkeypatch.delitem(pricing._lookups, ("claude-3-5-haiku-latest", None), raising=False)
    monkeypatch.setattr(snap, "find_provider_model", counting)
    for _ in range(5):
        pricing.cost("gpt-4o-mini", CACHED, when=WHEN)
        pricing.cost("claude-3-5-haiku-latest", CACHED, when=WHEN)
    assert calls == ["claude-3-5-haiku-latest"]


def _every_catalog_price() -> Iterator[tuple[str, gp.ModelPrice]]:
    for provider in data_snapshot.get_snapshot().providers:
        for info in provider.models:
            for entry in info.prices if isinstance(info.prices, list) else [info.prices]:
                yield f"{provider.id} {info.id}", getattr(entry, "prices", entry)


def _catalog_usage(u: Usage) -> genai_prices.Usage:
    return genai_prices.Usage(input_tokens=u.input_tokens, cache_read_tokens=u.cached_tokens,
                              cache_write_tokens=u.cache_write_tokens, output_tokens=u.output_tokens,
                              output_reasoning_tokens=u.reasoning_tokens)


def test_a_price_read_per_token_gives_calc_prices_figure_for_the_whole_catalog() -> None:
    """Every flat price in the catalog, at usages of every kind of token: the per-token form
    the recorder prices with gives exactly ``ModelPrice.calc_price``'s figure (the oracle)."""
    import random

    rng = random.Random(12)
    checked = tiered = 0
    for name, model_price in _every_catalog_price():
        linear = pricing._Linear.of(model_price)
        if linear is None:
            assert any(isinstance(v, gp.TieredPrices) for v in vars(model_price).values()), name
            tiered += 1
            continue
        for _ in range(3):
            inp, out = rng.randrange(0, 2_000_000), rng.randrange(0, 200_000)
            cached = rng.randrange(0, inp + 1)
            usage = Usage(input_tokens=inp, cached_tokens=cached, cache_write_tokens=rng.randrange(0, inp - cached + 1),
                          output_tokens=out, reasoning_tokens=rng.randrange(0, out + 1))
            assert float(linear.total(usage)) == float(model_price.calc_price(_catalog_usage(usage))["total_price"]), \
                (name, usage)
            checked += 1
    assert checked > 3000 and tiered > 0  # the catalog holds both kinds


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["gpt-4o-mini", "gpt-4o", "o3", "claude-3-5-haiku-latest", "claude-sonnet-4-0",
                        "gemini-2.5-pro", "gemini-2.0-flash"]),
       st.integers(0, 3_000_000), st.integers(0, 100), st.integers(0, 100), st.integers(0, 300_000),
       st.integers(0, 100))
def test_cost_equals_genai_prices_calc_price(model: str, inp: int, cached_pct: int, write_pct: int, out: int,
                                             reasoning_pct: int) -> None:
    """``pricing.cost`` (memoised, per token) against ``genai_prices.calc_price`` by model name
    (the whole lookup and calculation, every time), at random usages; tiered models included."""
    cached = inp * cached_pct // 100
    usage = Usage(input_tokens=inp, cached_tokens=cached, cache_write_tokens=(inp - cached) * write_pct // 100,
                  output_tokens=out, reasoning_tokens=out * reasoning_pct // 100)
    expected = genai_prices.calc_price(_catalog_usage(usage), model, genai_request_timestamp=WHEN).total_price
    assert pricing.cost(model, usage, when=WHEN).usd == float(expected)


def test_a_new_catalog_snapshot_is_picked_up() -> None:
    model = gp.ModelInfo(id="gpt-4o", match=gp.ClauseEquals(equals="gpt-4o"),
                         prices=gp.ModelPrice(input_mtok=Decimal(100), output_mtok=Decimal(200)))
    provider = gp.Provider(id="openai", name="OpenAI", api_pattern="https://api.openai.com",
                           model_match=gp.ClauseStartsWith(starts_with="gpt"), models=[model])
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    before = pricing.cost("gpt-4o", usage, when=WHEN).usd
    data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot(providers=[provider], from_auto_update=True))
    try:
        assert pricing.cost("gpt-4o", usage, when=WHEN).usd == 300.0
    finally:
        data_snapshot.set_custom_snapshot(None)
    assert pricing.cost("gpt-4o", usage, when=WHEN).usd == before


# --- public surface -----------------------------------------------------------------------------


def test_public_names() -> None:
    assert al.pricing is pricing
    assert al.UnknownModelWarning is UnknownModelWarning
    assert issubclass(UnknownModelWarning, UserWarning)
    assert sorted(pricing.__all__) == ["Cost", "CostSource", "Price", "TokenCounts", "clear", "cost", "load", "overrides", "set"]


def test_importing_pricing_does_not_load_the_catalog() -> None:
    import subprocess
    import sys

    code = ("import sys, agentlog as al; al.pricing; al.keys\n"
            "print(sorted({'genai_prices', 'pydantic', 'pandas', 'pyarrow'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
