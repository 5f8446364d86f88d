"""The attribute names agentlog writes and reads on spans, spelled once.

OpenTelemetry GenAI semantic conventions (``opentelemetry-semantic-conventions`` 0.66b2,
``gen_ai_attributes``), OpenInference (``openinference-semantic-conventions``), and the
``agentlog.*`` attributes that make an agentlog → OTLP → agentlog round trip keep what the
two conventions have no name for. Pure: constants only.
"""

from __future__ import annotations

from typing import Final

# --- OpenTelemetry GenAI --------------------------------------------------------------------
GEN_AI_OPERATION: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER: Final = "gen_ai.provider.name"
GEN_AI_SYSTEM: Final = "gen_ai.system"  # deprecated for gen_ai.provider.name; still read
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"  # deprecated; still read
GEN_AI_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"  # deprecated; still read
#: Input tokens served from the provider's cache; SHOULD be included in input_tokens.
GEN_AI_CACHE_READ: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_CACHE_WRITE: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_REQUEST_PARAMS: Final = {"temperature": "gen_ai.request.temperature",
                                "max_tokens": "gen_ai.request.max_tokens",
                                "top_p": "gen_ai.request.top_p", "seed": "gen_ai.request.seed"}
#: Operation names that are a model call.
LLM_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content", "completion"})

# --- OpenInference --------------------------------------------------------------------------
OI_KIND: Final = "openinference.span.kind"
OI_MODEL: Final = "llm.model_name"
OI_REQUEST_MODEL: Final = "llm.request.model_name"
OI_RESPONSE_MODEL: Final = "llm.response.model_name"
OI_PROVIDER: Final = "llm.provider"
OI_SYSTEM: Final = "llm.system"
OI_PROMPT_TOKENS: Final = "llm.token_count.prompt"
OI_COMPLETION_TOKENS: Final = "llm.token_count.completion"
OI_TOTAL_TOKENS: Final = "llm.token_count.total"
OI_CACHE_READ: Final = "llm.token_count.prompt_details.cache_read"
OI_CACHE_WRITE: Final = "llm.token_count.prompt_details.cache_write"
OI_COST_TOTAL: Final = "llm.cost.total"
OI_FINISH_REASON: Final = "llm.finish_reason"
OI_INVOCATION_PARAMETERS: Final = "llm.invocation_parameters"
OI_INPUT_MESSAGES: Final = "llm.input_messages"
OI_OUTPUT_MESSAGES: Final = "llm.output_messages"
OI_INPUT_VALUE: Final = "input.value"
OI_OUTPUT_VALUE: Final = "output.value"
OI_TOOL_NAME: Final = "tool.name"
OI_TOOL_PARAMETERS: Final = "tool.parameters"
OI_TOOL_CALL_ID: Final = "tool_call.id"
#: OpenInference span kinds → agentlog span kinds.
OI_KINDS: Final = {"LLM": "llm", "TOOL": "tool", "AGENT": "agent", "CHAIN": "chain",
                   "RETRIEVER": "retriever", "RERANKER": "reranker", "EMBEDDING": "embedding",
                   "GUARDRAIL": "guardrail", "EVALUATOR": "evaluator", "PROMPT": "prompt"}

# --- agentlog -------------------------------------------------------------------------------
AL_SPAN_ID: Final = "agentlog.span.id"
AL_SPAN_NAME: Final = "agentlog.span.name"
AL_SPAN_KIND: Final = "agentlog.span.kind"
AL_SPAN_ATTRIBUTES: Final = "agentlog.span.attributes"
AL_ROOT: Final = "agentlog.run.root"
AL_RUN_ID: Final = "agentlog.run.id"
AL_RUN_NAME: Final = "agentlog.run.name"
AL_RUN_TAGS: Final = "agentlog.run.tags"
AL_KEY: Final = "agentlog.key"
AL_COST: Final = "agentlog.cost_usd"
AL_COST_SOURCE: Final = "agentlog.cost_source"
AL_CACHE_HIT: Final = "agentlog.cache_hit"
AL_DURATION: Final = "agentlog.duration_ms"
AL_FORMAT: Final = "agentlog.format"
AL_PARAMS: Final = "agentlog.request.params"
AL_TYPE: Final = "agentlog.type"
AL_SEQ: Final = "agentlog.seq"
AL_ACTOR: Final = "agentlog.actor"
AL_CAUSED_BY: Final = "agentlog.caused_by"
AL_PAYLOAD: Final = "agentlog.payload"
AL_TOOL_ERROR: Final = "agentlog.tool.error"
