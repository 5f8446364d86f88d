"""The independent answer for dollar figures in tests: genai-prices, called here on the usage a
run recorded (never a figure pasted from output)."""

from __future__ import annotations


def genai_prices_cost(run: object, *, own: bool = False) -> float:
    """What ``run``'s model answers cost by genai-prices, computed here from each answer's
    recorded usage, model, provider and time (the independent answer); an answer served from
    a log (``cache_hit``) was paid by the run that recorded it, so 0 here."""
    from datetime import UTC, datetime

    import genai_prices

    from agentlog.events import LLM_RESPONSE, LLMResponse

    fork_seq = getattr(run, "fork_seq", None)
    start = fork_seq + 1 if own and fork_seq is not None else 0
    total = 0.0
    for event in run.iter_events(start):  # type: ignore[attr-defined]
        if event.type != LLM_RESPONSE:
            continue
        body = LLMResponse.of(event)
        if body.cache_hit:
            continue
        u = body.usage
        usage = genai_prices.Usage(input_tokens=u.input_tokens, cache_read_tokens=u.cached_tokens,
                                   cache_write_tokens=u.cache_write_tokens, output_tokens=u.output_tokens,
                                   output_reasoning_tokens=u.reasoning_tokens)
        when = datetime.fromtimestamp(event.ts / 1e6, tz=UTC)
        price = genai_prices.calc_price(usage, body.model or "", provider_id=body.provider,
                                        genai_request_timestamp=when)
        total += float(price.total_price)
    return total
