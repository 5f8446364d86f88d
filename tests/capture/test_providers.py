"""The provider boundary: every provider's answer and usage shape, in one dispatch.

Expected numbers are computed by hand in comments; genai-prices' own extractors are a second
opinion where they read the same shape.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import genai_prices
import pytest
from anthropic.types import Message as AnthropicMessage
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from agentlog.capture import providers as _providers
from agentlog.capture.providers import Usage, detect_shape, normalize, normalize_usage
from agentlog.errors import UsageError

OPENAI_CHAT = {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
               "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
               "completion_tokens_details": {"reasoning_tokens": 192}}
OPENAI_RESPONSES = {"input_tokens": 5000, "output_tokens": 900, "total_tokens": 5900,
                    "input_tokens_details": {"cached_tokens": 4096},
                    "output_tokens_details": {"reasoning_tokens": 600}}
ANTHROPIC = {"input_tokens": 50, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200,
             "output_tokens": 30}
GEMINI = {"promptTokenCount": 1200, "candidatesTokenCount": 80, "thoughtsTokenCount": 40,
          "cachedContentTokenCount": 1000, "toolUsePromptTokenCount": 10, "totalTokenCount": 1330}
OPENROUTER = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "cost": 0.00123,
              "prompt_tokens_details": {"cached_tokens": 0}}

SHAPES: dict[str, tuple[dict[str, Any], Usage]] = {
    # prompt_tokens already includes the 1920 cached; completion includes the 192 reasoning.
    "openai_chat": (OPENAI_CHAT, Usage(input_tokens=2006, output_tokens=300, cached_tokens=1920,
                                       reasoning_tokens=192)),
    "openai_responses": (OPENAI_RESPONSES, Usage(input_tokens=5000, output_tokens=900, cached_tokens=4096,
                                                 reasoning_tokens=600)),
    # Anthropic's input_tokens (50) excludes the cache: 50 + 1000 read + 200 written = 1250.
    "anthropic": (ANTHROPIC, Usage(input_tokens=1250, output_tokens=30, cached_tokens=1000,
                                   cache_write_tokens=200)),
    # 1200 prompt (1000 cached within) + 10 tool-use prompt = 1210; 80 candidates + 40 thoughts = 120.
    "gemini": (GEMINI, Usage(input_tokens=1210, output_tokens=120, cached_tokens=1000, reasoning_tokens=40)),
    "openrouter": (OPENROUTER, Usage(input_tokens=100, output_tokens=20, cost_usd=0.00123)),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_by_hand(shape: str) -> None:
    raw, expected = SHAPES[shape]
    assert normalize_usage(raw) == expected


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_normalising_twice_changes_nothing(shape: str) -> None:
    usage = normalize_usage(SHAPES[shape][0])
    assert normalize_usage(usage) is usage
    assert normalize_usage(usage.to_dict()) == usage
    assert normalize_usage(dataclasses.asdict(usage)) == usage
    assert usage.to_dict() == dataclasses.asdict(usage)


def test_openai_chat_cache_write_and_deepseek_cache_hits() -> None:
    raw = {"prompt_tokens": 1000, "completion_tokens": 5,
           "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 300}}
    assert normalize_usage(raw) == Usage(input_tokens=1000, output_tokens=5, cached_tokens=600,
                                         cache_write_tokens=300)
    deepseek = {"prompt_tokens": 900, "completion_tokens": 7, "prompt_cache_hit_tokens": 800,
                "prompt_cache_miss_tokens": 100}
    assert normalize_usage(deepseek) == Usage(input_tokens=900, output_tokens=7, cached_tokens=800)


def test_anthropic_cache_creation_split_by_ttl() -> None:
    raw = {"input_tokens": 10, "output_tokens": 1,
           "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 50}}
    assert normalize_usage(raw) == Usage(input_tokens=160, output_tokens=1, cache_write_tokens=150)


def test_anthropic_sdk_dump_with_null_cache_fields() -> None:
    # anthropic's Usage.model_dump() writes None for the cache fields when there was no caching.
    raw = {"input_tokens": 12, "output_tokens": 3, "cache_creation_input_tokens": None,
           "cache_read_input_tokens": None, "server_tool_use": None, "service_tier": "standard"}
    assert normalize_usage(raw) == Usage(input_tokens=12, output_tokens=3)


def test_gemini_snake_case_from_the_sdk() -> None:
    raw = {"prompt_token_count": 1200, "candidates_token_count": 80, "thoughts_token_count": 40,
           "cached_content_token_count": 1000, "total_token_count": 1320}
    assert normalize_usage(raw) == Usage(input_tokens=1200, output_tokens=120, cached_tokens=1000,
                                         reasoning_tokens=40)


def test_openai_sdk_objects() -> None:
    import openai.types as usage_types
    from openai.types import responses
    chat = usage_types.CompletionUsage.model_validate(OPENAI_CHAT)
    assert normalize_usage(chat) == SHAPES["openai_chat"][1]
    resp = responses.ResponseUsage.model_validate(
        {**OPENAI_RESPONSES, "input_tokens_details": {"cached_tokens": 4096, "cache_write_tokens": 0}})
    assert normalize_usage(resp) == SHAPES["openai_responses"][1]


def test_plain_objects_are_read_by_attribute() -> None:
    # e.g. an SDK object without model_dump; nested details are objects too.
    raw = SimpleNamespace(input_tokens=50, output_tokens=30, cache_read_input_tokens=1000,
                          cache_creation_input_tokens=200)
    assert normalize_usage(raw) == SHAPES["anthropic"][1]
    chat = SimpleNamespace(prompt_tokens=10, completion_tokens=2,
                           prompt_tokens_details=SimpleNamespace(cached_tokens=4))
    assert normalize_usage(chat) == Usage(input_tokens=10, output_tokens=2, cached_tokens=4)


def test_whole_responses_are_unwrapped() -> None:
    assert normalize_usage({"id": "msg_1", "model": "claude", "usage": ANTHROPIC}) == SHAPES["anthropic"][1]
    assert normalize_usage({"candidates": [], "usageMetadata": GEMINI}) == SHAPES["gemini"][1]


def test_genai_prices_style_cache_read_tokens() -> None:
    raw = {"input_tokens": 100, "cache_read_tokens": 60, "cache_write_tokens": 10, "output_tokens": 5}
    assert normalize_usage(raw) == Usage(input_tokens=100, output_tokens=5, cached_tokens=60,
                                         cache_write_tokens=10)


def test_nothing_reported_is_zero_usage() -> None:
    assert normalize_usage({}) == Usage()
    assert normalize_usage(None) == Usage()


# --- the input_tokens ambiguity: OpenAI Responses vs Anthropic ---------------------------------


def test_cache_fields_decide_without_a_provider() -> None:
    assert detect_shape(ANTHROPIC) == "anthropic"
    assert detect_shape(OPENAI_RESPONSES) == "openai_responses"
    assert detect_shape({"input_tokens": 7, "output_tokens": 1}) == "plain"
    # Anthropic may send output_tokens_details (thinking); it is not an OpenAI marker.
    assert detect_shape({**ANTHROPIC, "output_tokens_details": {"thinking_tokens": 3}}) == "anthropic"


def test_without_cache_fields_both_readings_agree() -> None:
    raw = {"input_tokens": 7, "output_tokens": 1}
    expected = Usage(input_tokens=7, output_tokens=1)
    assert normalize_usage(raw) == normalize_usage(raw, provider="anthropic") == expected
    assert normalize_usage(raw, provider="openai") == expected


def test_provider_decides_when_given() -> None:
    both = {"input_tokens": 100, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 40},
            "cache_read_input_tokens": 40}
    # Anthropic: 100 uncached + 40 read = 140 in all. OpenAI: 100 in all, 40 of them cached.
    assert normalize_usage(both, provider="anthropic") == Usage(input_tokens=140, output_tokens=5,
                                                                 cached_tokens=40)
    assert normalize_usage(both, provider="Anthropic-Vertex") == normalize_usage(both, provider="anthropic")
    assert normalize_usage(both, provider="openai") == Usage(input_tokens=100, output_tokens=5, cached_tokens=40)
    assert normalize_usage(both, provider="azure") == normalize_usage(both, provider="openai")


def test_conflicting_markers_without_a_provider_are_refused() -> None:
    both = {"input_tokens": 100, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 40},
            "cache_read_input_tokens": 40}
    with pytest.raises(UsageError) as info:
        normalize_usage(both)
    assert str(info.value) == ("usage input_tokens=100: the report has both Anthropic cache fields and OpenAI "
                               "input_tokens_details; pass provider='anthropic' or provider='openai'")


def test_an_unknown_provider_falls_back_to_the_fields() -> None:
    assert normalize_usage(ANTHROPIC, provider="my-gateway") == SHAPES["anthropic"][1]


# --- agreement with genai-prices' extractors ---------------------------------------------------


@pytest.mark.parametrize(("shape", "provider_id", "flavor", "model"), [
    ("openai_chat", "openai", "chat", "gpt-4o"),
    ("openai_responses", "openai", "responses", "gpt-4o"),
    ("anthropic", "anthropic", "default", "claude-3-5-sonnet"),
])
def test_agrees_with_genai_prices_extract_usage(shape: str, provider_id: str, flavor: str, model: str) -> None:
    raw = SHAPES[shape][0]
    extracted = genai_prices.extract_usage({"model": model, "usage": raw}, provider_id=provider_id,
                                           api_flavor=flavor).usage
    ours = normalize_usage(raw)
    assert ours.input_tokens == extracted.input_tokens
    assert ours.output_tokens == extracted.output_tokens
    assert ours.cached_tokens == extracted.cache_read_tokens
    assert ours.cache_write_tokens == extracted.cache_write_tokens


def test_gemini_agrees_with_genai_prices() -> None:
    extracted = genai_prices.extract_usage({"modelVersion": "gemini-2.5-pro", "usageMetadata": GEMINI},
                                           provider_id="google").usage
    ours = normalize_usage(GEMINI)
    assert (ours.input_tokens, ours.output_tokens, ours.cached_tokens, ours.reasoning_tokens) == (
        extracted.input_tokens, extracted.output_tokens, extracted.cache_read_tokens,
        extracted.output_reasoning_tokens)


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "message"), [
    ({"prompt_tokens": -1, "completion_tokens": 0}, "usage prompt_tokens=-1: token counts are non-negative integers"),
    ({"prompt_tokens": True, "completion_tokens": 0},
     "usage prompt_tokens=True: token counts are non-negative integers"),
    ({"prompt_tokens": "12", "completion_tokens": 0},
     "usage prompt_tokens='12': token counts are non-negative integers"),
    ({"prompt_tokens": 1.5, "completion_tokens": 0},
     "usage prompt_tokens=1.5: token counts are non-negative integers"),
    ({"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 11}},
     "usage cached_tokens=11: cache reads and writes (11) exceed input_tokens (10)"),
    ({"prompt_tokens": 10, "completion_tokens": 1, "completion_tokens_details": {"reasoning_tokens": 2}},
     "usage reasoning_tokens=2: exceeds output_tokens (1)"),
    ({"prompt_tokens": 10, "completion_tokens": 1, "cost": float("nan")},
     "usage cost=nan: a cost is a finite, non-negative number of USD"),
    ({"prompt_tokens": 10, "completion_tokens": 1, "cost": -0.1},
     "usage cost=-0.1: a cost is a finite, non-negative number of USD"),
    ({"total": 5}, ("usage *=['total']: no token counts found; expected an OpenAI, Anthropic, Gemini or "
                    "agentlog usage shape")),
])
def test_bad_reports_are_refused_with_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as info:
        normalize_usage(raw)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_integral_floats_are_counts() -> None:
    assert normalize_usage({"prompt_tokens": 12.0, "completion_tokens": 3}).input_tokens == 12


# --- the Usage record ---------------------------------------------------------------------------


def test_usage_properties_and_defaults() -> None:
    u = Usage(input_tokens=1250, output_tokens=30, cached_tokens=1000, cache_write_tokens=200)
    assert u.uncached_input_tokens == 50
    assert u.total_tokens == 1280
    assert u.cost_usd is None
    assert Usage() == Usage(input_tokens=0, output_tokens=0, cached_tokens=0, cache_write_tokens=0,
                            reasoning_tokens=0, cost_usd=None)


def test_usage_is_frozen_and_keyword_only() -> None:
    u = Usage(input_tokens=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        u.input_tokens = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Usage(1, 2)  # type: ignore[misc]


def test_usage_cost_is_a_float() -> None:
    assert Usage(cost_usd=1).cost_usd == 1.0
    assert isinstance(Usage(cost_usd=1).cost_usd, float)
    with pytest.raises(UsageError, match="usage cost_usd=True"):
        Usage(cost_usd=True)  # type: ignore[arg-type]


def test_cache_writes_count_against_input_too() -> None:
    with pytest.raises(UsageError) as info:
        Usage(input_tokens=10, cached_tokens=5, cache_write_tokens=6)
    assert info.value.field == "cache_write_tokens"
    assert str(info.value) == "usage cache_write_tokens=6: cache reads and writes (11) exceed input_tokens (10)"


# --- whole answers, from the real SDKs' objects -------------------------------------------------

CHAT_COMPLETION = ChatCompletion.model_validate({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 7}'}}]}}],
    "usage": OPENAI_CHAT})
RESPONSE = Response.model_validate({
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4o", "status": "completed",
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "hello", "annotations": []}]},
               {"type": "function_call", "id": "fc1", "call_id": "call_9", "name": "lookup",
                "arguments": "{}", "status": "completed"}],
    "usage": {**OPENAI_RESPONSES, "input_tokens_details": {"cached_tokens": 4096, "cache_write_tokens": 0}}})
ANTHROPIC_MESSAGE = AnthropicMessage.model_validate({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-sonnet-20241022",
    "content": [{"type": "text", "text": "hi"}, {"type": "tool_use", "id": "tu_1", "name": "lookup",
                                                  "input": {"id": 7}}],
    "stop_reason": "tool_use", "stop_sequence": None, "usage": ANTHROPIC})
GEMINI_RESPONSE = {  # generateContent's REST JSON (the API reference's shape)
    "candidates": [{"content": {"role": "model", "parts": [
        {"text": "hi"}, {"functionCall": {"name": "lookup", "args": {"id": 7}}}]}, "finishReason": "STOP"}],
    "usageMetadata": GEMINI, "modelVersion": "gemini-2.5-pro", "responseId": "r-1"}

SDK_ANSWERS: dict[str, tuple[Any, str, str, dict[str, Any]]] = {
    # name: (answer, genai-prices provider id, api flavor, what the answer says apart from usage)
    "openai_chat": (CHAT_COMPLETION, "openai", "chat", {
        "message": {"role": "assistant", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 7}'}}]},
        "finish_reason": "tool_calls", "model": "gpt-4o-2024-08-06", "id": "chatcmpl-1"}),
    "openai_responses": (RESPONSE, "openai", "responses", {
        "message": {"role": "assistant", "content": "hello", "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        "finish_reason": "completed", "model": "gpt-4o", "id": "resp_1"}),
    "anthropic": (ANTHROPIC_MESSAGE, "anthropic", "default", {
        "message": {"role": "assistant", "content": "hi", "tool_calls": [
            {"id": "tu_1", "type": "function", "function": {"name": "lookup", "arguments": {"id": 7}}}]},
        "finish_reason": "tool_use", "model": "claude-3-5-sonnet-20241022", "id": "msg_1"}),
    "gemini": (GEMINI_RESPONSE, "google", "default", {
        "message": {"role": "assistant", "content": "hi", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": {"id": 7}}}]},
        "finish_reason": "STOP", "model": "gemini-2.5-pro", "id": "r-1"}),
}


def _as_json(answer: Any) -> Any:
    dump = getattr(answer, "model_dump", None)
    return dump(mode="json") if dump else answer


@pytest.mark.parametrize("shape", sorted(SDK_ANSWERS))
def test_a_whole_answer_is_read_once(shape: str) -> None:
    answer, _, _, says = SDK_ANSWERS[shape]
    got = normalize(answer)
    assert {"message": dict(got.message), "finish_reason": got.finish_reason, "model": got.model,
            "id": got.id} == says
    assert got.usage == SHAPES[shape][1]  # the counts worked out by hand above
    assert got.provider is None  # the shape does not say who served it
    assert normalize(answer, provider="azure").provider == "azure"


@pytest.mark.parametrize("shape", sorted(SDK_ANSWERS))
def test_counts_equal_genai_prices_own_extraction(shape: str) -> None:
    answer, provider_id, flavor, _ = SDK_ANSWERS[shape]
    data = {k: v for k, v in _as_json(answer).items() if k not in ("model", "modelVersion")}
    theirs = genai_prices.extract_usage(data, provider_id=provider_id, api_flavor=flavor).usage
    ours = normalize(answer).usage
    assert (ours.input_tokens, ours.output_tokens, ours.cached_tokens, ours.cache_write_tokens,
            ours.reasoning_tokens) == tuple(theirs.reported_value(k) for k in (
                "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                "output_reasoning_tokens"))


def test_the_gemini_sdk_spelling_reads_as_the_rest_one() -> None:
    snake = {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "hi"}, {"function_call": {"name": "lookup", "args": {"id": 7}}}]}, "finish_reason": "STOP"}],
        "usage_metadata": {"prompt_token_count": 1200, "candidates_token_count": 80,
                           "thoughts_token_count": 40, "cached_content_token_count": 1000,
                           "tool_use_prompt_token_count": 10, "total_token_count": 1330},
        "model_version": "gemini-2.5-pro", "response_id": "r-1"}
    assert normalize(snake) == normalize(GEMINI_RESPONSE)


def test_plain_answers_and_their_usage() -> None:
    got = normalize({"content": "ok", "tool_calls": [{"id": "c"}], "finish_reason": "stop",
                     "model": "m", "usage": {"input_tokens": 3, "output_tokens": 1}})
    assert got.message == {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c"}]}
    assert (got.finish_reason, got.model, got.usage) == ("stop", "m", Usage(input_tokens=3, output_tokens=1))
    assert normalize({"message": {"role": "assistant", "content": "x"}}).usage == Usage()
    assert normalize("text").message == {"role": "assistant", "content": "text"}
    assert normalize({"content": "x", "usage": {"prompt_tokens": 2, "completion_tokens": 1,
                                                "cost": 0.5}}).usage.cost_usd == 0.5
    with pytest.raises(TypeError, match="a model call returned int"):
        normalize(7)


# --- the counts read without genai-prices' extractor are the ones it reads -------------------

_SHAPES_READ = [name for name, shape in _providers.SHAPES.items() if shape.catalog is not None]


def _outcome(read: Any) -> Any:
    try:
        return ("counts", dataclasses.astuple(read()))
    except UsageError as exc:
        return ("refused", str(exc))


@pytest.mark.parametrize("shape_name", _SHAPES_READ)
def test_counts_read_by_key_paths_are_genai_prices_own(shape_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from agentlog.capture import providers

    shape = providers.SHAPES[shape_name]
    assert shape.catalog is not None
    plan = providers._plan(*shape.catalog, shape.holder)
    names = sorted({step for path, _, _ in plan or () for step in path} | {"total_tokens", "other"})
    count = st.one_of(st.integers(0, 10**9), st.integers(0, 10**9), st.none(), st.just(-1), st.just(True),
                      st.just(2.0), st.just("3"))
    report = st.recursive(st.dictionaries(st.sampled_from(names), count, max_size=6),
                          lambda inner: st.dictionaries(st.sampled_from(names), st.one_of(count, inner), max_size=6),
                          max_leaves=12)

    @settings(max_examples=300, deadline=None)
    @given(report)
    def check(usage: dict[str, Any]) -> None:
        fast = _outcome(lambda: providers._catalog(usage, shape))
        with monkeypatch.context() as m:  # the same report through genai-prices' extractor
            m.setattr(providers, "_plan", lambda *args: None)
            oracle = _outcome(lambda: providers._catalog(usage, shape))
        assert fast == oracle

    check()
    if plan is not None:  # the usual report is read by the key paths, not handed to genai-prices
        required = {path[0]: 7 for path, _, needed in plan if needed}
        assert providers._read(required, plan) is not None
