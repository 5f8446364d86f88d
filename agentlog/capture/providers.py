"""The one boundary between a provider's answer and the log.

``call(request)`` in :meth:`Recorder.llm` may return an OpenAI Chat Completions or Responses
object, an Anthropic message, a Gemini ``generateContent`` response (REST JSON or the SDK's
object), a plain mapping such as ``{"content": "...", "usage": {...}}``, or just a string.
:func:`normalize` recognises which it is, once (:data:`SHAPES`), and reads it into the fields
of an :class:`~agentlog.events.LLMResponse`: ``message``, ``finish_reason``, ``model``, ``id``,
``usage`` and ``provider``. :class:`LLMResult` is what the program gets back, the same when
recording and when the answer is served from the log.

**Usage** is counted the OpenTelemetry GenAI way (:class:`~agentlog.events.Usage`):
``input_tokens`` includes cache reads and writes, ``output_tokens`` includes reasoning.
Where genai-prices has an extractor for the shape (OpenAI chat and Responses, Anthropic,
Gemini), its ``extract_usage`` reads the counts; agentlog adds only what it does not read:

================================  ==========================================================
shape                             what agentlog adds to genai-prices' extraction
================================  ==========================================================
OpenAI Chat Completions           DeepSeek's ``prompt_cache_hit_tokens`` as cache reads
(also OpenRouter, DeepSeek, ...)
OpenAI Responses                  nothing
Anthropic Messages                cache writes sent only split by TTL (``cache_creation``
                                  without ``cache_creation_input_tokens``)
Google Gemini                     the SDK's snake_case spelling (read as the REST camelCase)
Ollama (its own chat and          all of it (genai-prices has no extractor): the top-level
generate APIs)                    ``prompt_eval_count`` and ``eval_count``
agentlog                          all of it: :class:`Usage`'s own fields (``Usage.to_dict()``);
                                  genai-prices and pydantic-ai spell cache reads
                                  ``cache_read_tokens``
================================  ==========================================================

Every shape: a count that is not a non-negative integer is refused naming its field, a count
the report leaves out is 0, and a top-level ``cost`` (OpenRouter's usage accounting, in USD)
becomes ``Usage.cost_usd``, the provider-reported cost.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..errors import UsageError
from ..events import BlobRef, Event, LLMResponse, Usage

__all__ = ["SHAPES", "LLMResult", "Normalized", "Shape", "ShapeName", "as_plain", "detect_shape",
           "normalize", "normalize_usage", "reports_usage", "response_shape"]

ShapeName = Literal["agentlog", "openai_chat", "openai_responses", "anthropic", "gemini", "ollama",
                    "ollama_generate", "plain"]

Message = dict[str, Any]


def as_plain(obj: Any) -> Any:
    """A JSON-like copy of an SDK object (pydantic ``model_dump``), or the object itself."""
    if isinstance(obj, type):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict) and not isinstance(obj, Mapping):
        return to_dict()
    return obj


# --- messages, one reader per shape ------------------------------------------------------------


def _get(obj: Any, *names: str) -> Any:
    """The first of ``names`` that ``obj`` has (REST camelCase or SDK snake_case)."""
    if not isinstance(obj, Mapping):
        return None
    for name in names:
        value = obj.get(name)
        if value is not None:
            return value
    return None


def _text_of_blocks(blocks: list[Any]) -> str | None:
    texts = [b.get("text", "") for b in blocks
             if isinstance(b, Mapping) and b.get("type") in ("text", "output_text")]
    return "".join(texts) if texts else None


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _assistant(content: Any, calls: list[dict[str, Any]]) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message


def _openai_chat(raw: Mapping[str, Any]) -> tuple[Message, str | None]:
    choice = raw["choices"][0] if raw.get("choices") else {}
    message = dict(choice.get("message") or {"role": "assistant", "content": None})
    return message, choice.get("finish_reason")


def _openai_responses(raw: Mapping[str, Any]) -> tuple[Message, str | None]:
    texts, calls = [], []
    for item in raw.get("output") or []:
        if item.get("type") == "message":
            texts.append(_text_of_blocks(item.get("content") or []) or "")
        elif item.get("type") == "function_call":
            calls.append(_call(item.get("call_id"), item.get("name"), item.get("arguments")))
    return _assistant("".join(texts) if texts else None, calls), raw.get("status")


def _anthropic(raw: Mapping[str, Any]) -> tuple[Message, str | None]:
    blocks = list(raw.get("content") or [])
    calls = [_call(b.get("id"), b.get("name"), b.get("input"))
             for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    return _assistant(_text_of_blocks(blocks), calls), raw.get("stop_reason")


def _gemini(raw: Mapping[str, Any]) -> tuple[Message, str | None]:
    candidates = raw.get("candidates") or [{}]
    first = candidates[0] if isinstance(candidates[0], Mapping) else {}
    parts = _get(first.get("content"), "parts") or []
    texts = [p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)
             and not p.get("thought")]
    calls = []
    for i, part in enumerate(parts):
        fn = _get(part, "functionCall", "function_call")
        if isinstance(fn, Mapping):
            calls.append(_call(fn.get("id") or f"call_{i}", fn.get("name"), fn.get("args")))
    finish = _get(first, "finishReason", "finish_reason")
    return _assistant("".join(texts) if texts else None, calls), finish


def _ollama(raw: Mapping[str, Any]) -> tuple[Message, str | None]:
    said = raw.get("message") or {}
    calls = []
    for i, call in enumerate(said.get("tool_calls") or []):
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):  # Ollama's calls have no id: the n-th is call_n
            calls.append(_call(call.get("id") or f"call_{i}", fn.get("name"), fn.get("arguments")))
    return _assistant(said.get("content"), calls), raw.get("done_reason")


def _ollama_generate(raw: Mapping[str, Any]) -> tuple[Message, str | None]:
    return _assistant(raw.get("response"), []), raw.get("done_reason")


def _plain(raw: Mapping[str, Any]) -> tuple[Message, str | None]:
    if isinstance(raw.get("message"), Mapping):
        return dict(raw["message"]), raw.get("finish_reason")
    return _assistant(raw.get("content"), list(raw.get("tool_calls") or [])), raw.get("finish_reason")


# --- usage -------------------------------------------------------------------------------------

_COUNT_NAME = re.compile(r"(tokens|TokenCount|token_count|tokenCount)$")
_CAMEL = re.compile(r"_([a-z])")


def _count(value: Any, path: str) -> int:
    """A token count: a non-negative int (an integral float, as some gateways send, counts)."""
    if type(value) is float and value.is_integer():
        return int(value)
    if type(value) is not int or value < 0:
        raise UsageError(path, value, "token counts are non-negative integers")
    return value


def _check_counts(usage: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse any count in the report that is not a count, naming it (genai-prices skips them)."""
    for key, value in usage.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _check_counts(value, f"{path}.")
        elif value is not None and isinstance(key, str) and _COUNT_NAME.search(key):
            _count(value, path)


def _cost(usage: Mapping[str, Any], key: str) -> float | None:
    value = usage.get(key)
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise UsageError(key, value, "a cost is a finite, non-negative number of USD")
    return float(value)


def _camel(value: Any) -> Any:
    """The Gemini SDK's snake_case report in the REST API's camelCase (``prompt_token_count``)."""
    if isinstance(value, Mapping):
        return {_CAMEL.sub(lambda m: m.group(1).upper(), k) if isinstance(k, str) else k: _camel(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _catalog(usage: Mapping[str, Any], shape: Shape) -> Usage:
    """Counts read by genai-prices' own extractor for the shape (a missing count is 0)."""
    assert shape.catalog is not None
    report = dict(usage)
    for name in shape.required:  # genai-prices refuses a report without them; agentlog reads 0
        report.setdefault(name, 0)
    plan = _plan(*shape.catalog, shape.holder)
    counts = None if plan is None else _read(report, plan)
    value = counts.get if counts is not None else _extract(report, shape)
    return Usage(input_tokens=int(value("input_tokens", 0)), output_tokens=int(value("output_tokens", 0)),
                 cached_tokens=int(value("cache_read_tokens", 0)),
                 cache_write_tokens=int(value("cache_write_tokens", 0)),
                 reasoning_tokens=int(value("output_reasoning_tokens", 0)))


def _extract(report: dict[str, Any], shape: Shape) -> Callable[[str, int], Any]:
    """The counts genai-prices' extractor reads from ``report``, by its names."""
    import genai_prices

    assert shape.catalog is not None
    provider_id, flavor = shape.catalog
    try:
        found = genai_prices.extract_usage({shape.holder: report}, provider_id=provider_id,
                                           api_flavor=flavor).usage
    except ValueError as exc:
        raise UsageError(shape.name, sorted(report), f"genai-prices could not read it: {exc}") from exc
    return vars(found).get  # the counts it read, each checked as it was stored (reported_value
    # gives the same, rebuilding the table of them at every call)


_Plan = tuple[tuple[tuple[str, ...], str, bool], ...]
_plans: dict[tuple[str, str, str], _Plan | None] = {}
_plans_of: list[object] = [None]  # the genai-prices snapshot the plans were read from


def _plan(provider_id: str, flavor: str, holder: str) -> _Plan | None:
    """genai-prices' extractor for a provider's API flavor, read once per snapshot as plain key
    paths under the usage report (found under ``holder``): ``(path, count name, required)`` for
    each count it reads; ``None`` when its paths are not plain keys from there (its own
    extractor reads those)."""
    from genai_prices import data_snapshot

    snap = data_snapshot.get_snapshot()
    if snap is not _plans_of[0]:
        _plans.clear()
        _plans_of[0] = snap
    key = (provider_id, flavor, holder)
    if key not in _plans:
        _plans[key] = _read_plan(snap, provider_id, flavor, holder)
    return _plans[key]


def _read_plan(snap: Any, provider_id: str, flavor: str, holder: str) -> _Plan | None:
    try:
        extractor = next(e for e in snap.find_provider(None, provider_id, None).extractors or ()
                         if e.api_flavor == flavor)
        known = extractor._reported_usage_keys  # the counts its Usage has (it skips the others)
    except (LookupError, StopIteration, AttributeError):  # not as this code knows it: its own extractor
        return None
    root = [extractor.root] if isinstance(extractor.root, str) else list(extractor.root)
    if root != [holder]:
        return None
    plan = []
    for mapping in extractor.mappings:
        path = (mapping.path,) if isinstance(mapping.path, str) else tuple(mapping.path)
        if not all(isinstance(step, str) for step in path):
            return None
        if mapping.dest in known:
            plan.append((path, mapping.dest, bool(mapping.required)))
    return tuple(plan)


def _read(report: Mapping[str, Any], plan: _Plan) -> dict[str, int] | None:
    """The counts genai-prices' extractor reads from ``report`` by ``plan`` (summed where two
    paths fill one count), for the usual report: dicts of ints. ``None`` for anything else (a
    float, a missing required count, no count at all), which its own extractor reads (or
    refuses, saying why)."""
    counts: dict[str, int] = {}
    for path, dest, required in plan:
        data: Any = report
        for step in path:
            if type(data) is not dict:
                return None
            data = data.get(step, _ABSENT)
            if data is _ABSENT or data is None:
                break
        if data is _ABSENT or data is None:
            if required:
                return None
            continue
        if type(data) is not int or data < 0:
            return None
        counts[dest] = counts.get(dest, 0) + data
    return counts if counts or not plan else None


_ABSENT: Final = object()


def _openai_chat_usage(usage: Mapping[str, Any], shape: Shape) -> Usage:
    counts = _catalog(usage, shape)
    hit = usage.get("prompt_cache_hit_tokens")  # DeepSeek's spelling of cache reads
    if not counts.cached_tokens and hit:
        counts = Usage(input_tokens=counts.input_tokens, output_tokens=counts.output_tokens,
                       cached_tokens=_count(hit, "prompt_cache_hit_tokens"),
                       cache_write_tokens=counts.cache_write_tokens,
                       reasoning_tokens=counts.reasoning_tokens)
    return counts


def _anthropic_usage(usage: Mapping[str, Any], shape: Shape) -> Usage:
    counts = _catalog(usage, shape)
    split = usage.get("cache_creation")
    if usage.get("cache_creation_input_tokens") is None and isinstance(split, Mapping):
        # Only the per-TTL split was sent: genai-prices leaves it out of input_tokens.
        write = sum(_count(split.get(k) or 0, f"cache_creation.{k}")
                    for k in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"))
        counts = Usage(input_tokens=counts.input_tokens + write, output_tokens=counts.output_tokens,
                       cached_tokens=counts.cached_tokens, cache_write_tokens=write,
                       reasoning_tokens=counts.reasoning_tokens)
    return counts


def _gemini_usage(usage: Mapping[str, Any], shape: Shape) -> Usage:
    return _catalog(_camel(usage), shape)


def _ollama_usage(usage: Mapping[str, Any], shape: Shape) -> Usage:
    def n(name: str) -> int:
        value = usage.get(name)
        return 0 if value is None else _count(value, name)
    return Usage(input_tokens=n("prompt_eval_count"), output_tokens=n("eval_count"))


def _agentlog_usage(usage: Mapping[str, Any], shape: Shape) -> Usage:
    def n(name: str) -> int:
        value = usage.get(name)
        return 0 if value is None else _count(value, name)
    return Usage(input_tokens=n("input_tokens"), output_tokens=n("output_tokens"),
                 cached_tokens=n("cached_tokens") or n("cache_read_tokens"),
                 cache_write_tokens=n("cache_write_tokens"), reasoning_tokens=n("reasoning_tokens"))


# --- the dispatch ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    """How one provider's answer is read."""

    name: ShapeName
    """The shape's name."""
    message: Callable[[Mapping[str, Any]], tuple[Message, str | None]]
    """``(message, finish_reason)`` of a whole response."""
    usage: Callable[[Mapping[str, Any], Shape], Usage]
    """The token counts of a usage report."""
    holder: str = "usage"
    """Where a response carries its usage report."""
    catalog: tuple[str, str] | None = None
    """genai-prices' ``(provider_id, api_flavor)`` whose extractor reads the counts."""
    required: tuple[str, ...] = ()
    """Counts genai-prices requires; agentlog reads a missing one as 0."""
    cost: str = "cost"
    """The key of a provider-reported cost in the usage report."""
    counts: tuple[str, ...] = ()
    """The counts a response carries at its top level, with no holder (Ollama's): its usage
    report is those."""


#: Every shape, by name: the one dispatch of provider answers.
SHAPES: Final[Mapping[str, Shape]] = {s.name: s for s in (
    Shape("openai_chat", _openai_chat, _openai_chat_usage, catalog=("openai", "chat"),
          required=("prompt_tokens", "completion_tokens")),
    Shape("openai_responses", _openai_responses, _catalog, catalog=("openai", "responses"),
          required=("input_tokens", "output_tokens")),
    Shape("anthropic", _anthropic, _anthropic_usage, catalog=("anthropic", "default"),
          required=("input_tokens", "output_tokens")),
    Shape("gemini", _gemini, _gemini_usage, holder="usageMetadata",
          catalog=("google", "default")),
    Shape("ollama", _ollama, _ollama_usage, counts=("prompt_eval_count", "eval_count")),
    Shape("ollama_generate", _ollama_generate, _ollama_usage, counts=("prompt_eval_count", "eval_count")),
    Shape("agentlog", _plain, _agentlog_usage, cost="cost_usd"),
    # No cache fields: OpenAI Responses' and Anthropic's readings of input_tokens agree.
    Shape("plain", _plain, _catalog, catalog=("openai", "responses"),
          required=("input_tokens", "output_tokens")),
)}

# Fields only a usage report of that shape has at its top level.
_AGENTLOG_MARKERS: Final = ("cached_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
                            "cost_usd")
_GEMINI_MARKERS: Final = ("promptTokenCount", "candidatesTokenCount", "totalTokenCount",
                          "cachedContentTokenCount", "prompt_token_count", "candidates_token_count",
                          "total_token_count")
_ANTHROPIC_MARKERS: Final = ("cache_read_input_tokens", "cache_creation_input_tokens", "cache_creation")
_USAGE_HOLDERS: Final = ("usage", "usageMetadata", "usage_metadata")
_ANTHROPIC_PROVIDERS: Final = ("anthropic", "claude")
_OPENAI_PROVIDERS: Final = ("openai", "azure", "openrouter")


def _family(provider: str | None) -> str | None:
    p = (provider or "").lower()
    if any(name in p for name in _ANTHROPIC_PROVIDERS):
        return "anthropic"
    if any(name in p for name in _OPENAI_PROVIDERS):
        return "openai_responses"
    return None


def _has(obj: Mapping[str, Any], key: str) -> bool:
    return obj.get(key) is not None


def detect_shape(usage: Any, *, provider: str | None = None) -> ShapeName:
    """Which shape a usage report has, from its field names.

    Where OpenAI Responses and Anthropic collide on ``input_tokens``, ``provider`` decides when
    given (a name containing ``anthropic`` or ``claude`` means Anthropic; ``openai``,
    ``azure`` or ``openrouter`` means OpenAI); otherwise Anthropic's cache fields mean
    Anthropic and ``input_tokens_details`` means OpenAI; with neither, both readings agree.

    >>> detect_shape({"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 1})
    'anthropic'
    >>> detect_shape({"input_tokens": 5, "output_tokens": 1}, provider="anthropic")
    'anthropic'
    >>> detect_shape({"input_tokens": 5, "output_tokens": 1})
    'plain'

    Raises:
        UsageError: no token counts, or both Anthropic and OpenAI cache fields.
    """
    usage = _fields(usage)
    if not isinstance(usage, Mapping):
        raise UsageError("*", type(usage).__name__, "expected a mapping of token counts")
    if any(_has(usage, k) for k in _AGENTLOG_MARKERS):
        return "agentlog"
    if any(_has(usage, k) for k in _GEMINI_MARKERS):
        return "gemini"
    if _has(usage, "prompt_tokens") or _has(usage, "completion_tokens"):
        return "openai_chat"
    if _has(usage, "prompt_eval_count") or _has(usage, "eval_count"):
        return "ollama"
    if not (_has(usage, "input_tokens") or _has(usage, "output_tokens")):
        raise UsageError("*", sorted(str(k) for k in usage), "no token counts found; expected an "
                         "OpenAI, Anthropic, Gemini or agentlog usage shape")
    family = _family(provider)
    if family is not None:
        return "anthropic" if family == "anthropic" else "openai_responses"
    anthropic = any(_has(usage, k) for k in _ANTHROPIC_MARKERS)
    openai = _has(usage, "input_tokens_details")
    if anthropic and openai:
        raise UsageError("input_tokens", usage.get("input_tokens"),
                         "the report has both Anthropic cache fields and OpenAI input_tokens_details; "
                         "pass provider='anthropic' or provider='openai'")
    return "anthropic" if anthropic else "openai_responses" if openai else "plain"


def response_shape(raw: Mapping[str, Any]) -> ShapeName:
    """Which shape a whole response has, by its structure (``plain``: none of the providers').

    >>> response_shape({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
    'openai_chat'
    >>> response_shape({"content": "hi"})
    'plain'
    """
    if "choices" in raw:
        return "openai_chat"
    if isinstance(raw.get("output"), list):
        return "openai_responses"
    if "candidates" in raw or _get(raw, "usageMetadata", "usage_metadata") is not None:
        return "gemini"
    if isinstance(raw.get("content"), list):
        return "anthropic"
    if isinstance(raw.get("message"), Mapping) and "done" in raw:
        return "ollama"
    if isinstance(raw.get("response"), str) and "done" in raw:
        return "ollama_generate"
    return "plain"


def _top_counts(raw: Mapping[str, Any], shape: Shape) -> dict[str, Any] | None:
    """The counts ``raw`` carries at its top level (``shape.counts``), or ``None`` for none."""
    return {k: raw[k] for k in shape.counts if raw.get(k) is not None} or None


def reports_usage(raw: Mapping[str, Any]) -> bool:
    """Whether a whole response reports its usage (a stream may not have been asked to)."""
    counts = SHAPES[response_shape(raw)].counts
    if counts:
        return any(raw.get(k) is not None for k in counts)
    return any(raw.get(holder) for holder in _USAGE_HOLDERS)


def _fields(obj: Any) -> Any:
    """A usage report as a mapping: SDK objects dumped, other objects read by attribute."""
    obj = as_plain(obj)
    if isinstance(obj, Mapping) or obj is None or isinstance(obj, (str, int, float, list)):
        return obj
    attrs = getattr(obj, "__dict__", None)
    if attrs is None:
        return obj
    return {k: _fields(v) for k, v in attrs.items() if not k.startswith("_")}


def _report(raw: Any) -> Any:
    """The usage report of a whole response, or the report itself."""
    for holder in _USAGE_HOLDERS:
        inner = _get(raw, holder)
        if inner is not None and not isinstance(inner, (int, float, str)):
            return _fields(inner)
    return raw


def _usage(report: Any, shape: ShapeName) -> Usage:
    if report is None or (isinstance(report, Mapping) and not report):
        return Usage()
    if not isinstance(report, Mapping):
        raise UsageError("*", type(report).__name__, "expected a mapping of token counts")
    reader = SHAPES[shape]
    _check_counts(report)
    counts = reader.usage(report, reader)
    cost = _cost(report, reader.cost)
    if cost is None:
        return counts
    return Usage(input_tokens=counts.input_tokens, output_tokens=counts.output_tokens,
                 cached_tokens=counts.cached_tokens, cache_write_tokens=counts.cache_write_tokens,
                 reasoning_tokens=counts.reasoning_tokens, cost_usd=cost)


def normalize_usage(raw: Any, *, provider: str | None = None) -> Usage:
    """Read a usage report (a mapping, an SDK object or a whole response) into a :class:`Usage`.

    A :class:`Usage` is returned as it is; ``None`` or an empty mapping (nothing reported)
    gives ``Usage()``. See :func:`detect_shape` for how the shape is found.

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
    report = _report(_fields(raw))
    if report is None or (isinstance(report, Mapping) and not report):
        return Usage()
    return _usage(report, detect_shape(report, provider=provider))


@dataclass(frozen=True, slots=True, kw_only=True)
class Normalized:
    """A provider's answer in the fields of an :class:`~agentlog.events.LLMResponse`."""

    message: Mapping[str, Any]
    """The assistant message: ``role``, ``content`` and maybe ``tool_calls``."""
    finish_reason: str | None
    """Why generation stopped, as the provider said."""
    model: str | None
    """The model that answered, when the response says."""
    id: str | None
    """The provider's response id, when the response says."""
    usage: Usage
    """The token counts (and a provider-reported cost)."""
    provider: str | None
    """Who served it, as the caller said (a response's shape does not say: an OpenAI-compatible
    answer may come from any server)."""

    def response(self, *, key: str, model: str | None, cost_usd: float | None, cost_source: Any,
                 duration_ms: float | None) -> LLMResponse:
        """The ``llm.response`` body of this answer to the request with cache ``key``.

        Args:
            model: the model to record when the response does not say (the one asked for).
        """
        return LLMResponse(key=key, model=self.model or model, message=self.message,
                           finish_reason=self.finish_reason, id=self.id, usage=self.usage,
                           cost_usd=cost_usd, cost_source=cost_source, provider=self.provider,
                           duration_ms=duration_ms)


def normalize(raw: Any, *, provider: str | None = None) -> Normalized:
    """Read what a model call returned into the fields of an ``llm.response``.

    Args:
        raw: an SDK response object, a provider's JSON, a plain mapping (``{"content",
            "tool_calls", "usage", "model", "id"}`` or ``{"message": {...}}``) or a string.
        provider: who serves the model, when the response alone is ambiguous.

    Raises:
        TypeError: ``raw`` is none of these.
        UsageError: its usage report cannot be read (see :func:`normalize_usage`).

    >>> n = normalize({"content": "hi", "usage": {"prompt_tokens": 5, "completion_tokens": 1}})
    >>> n.message, n.usage.input_tokens, n.usage.output_tokens
    ({'role': 'assistant', 'content': 'hi'}, 5, 1)
    >>> normalize("just text").message
    {'role': 'assistant', 'content': 'just text'}
    """
    raw = as_plain(raw)
    if isinstance(raw, str):
        raw = {"content": raw}
    if not isinstance(raw, Mapping):
        raise TypeError(f"a model call returned {type(raw).__name__}; return a mapping, a string "
                        "or an SDK response object")
    name = response_shape(raw)
    message, finish = SHAPES[name].message(raw)
    report = _report(raw)
    if SHAPES[name].counts:
        report = _top_counts(raw, SHAPES[name])
    elif report is raw:
        report = None  # the response carries no usage
    elif name == "plain" and isinstance(report, Mapping) and report:
        name = detect_shape(report, provider=provider)  # a plain answer: its report says
    model = _get(raw, "model", "modelVersion", "model_version")
    rid = _get(raw, "id", "responseId", "response_id")
    return Normalized(message=message, finish_reason=finish,
                      model=model if isinstance(model, str) else None,
                      id=rid if isinstance(rid, str) else None,
                      usage=_usage(report, name), provider=provider)


# --- what the program gets back ------------------------------------------------------------------


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
    """``provider``, ``computed``, ``unknown`` or ``cache``."""
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
        body = LLMResponse.of(event)
        return cls(message=body.message, model=event.model or body.model, seq=event.seq, key=body.key,
                   finish_reason=body.finish_reason, input_tokens=event.input_tokens,
                   output_tokens=event.output_tokens, cached_tokens=event.cached_tokens,
                   cost_usd=event.cost_usd, cost_source=body.cost_source, cache_hit=body.cache_hit,
                   payload=event.payload)
