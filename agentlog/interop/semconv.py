"""The attribute names agentlog writes and reads on spans: the published conventions' own
constants, and the ``agentlog.*`` names that neither convention has.

- OpenTelemetry GenAI: ``opentelemetry-semantic-conventions`` (``gen_ai_attributes``, still
  incubating upstream; its names are the ones the GenAI instrumentations write).
- OpenInference: ``openinference-semantic-conventions`` (``SpanAttributes``, span kinds).
- ``agentlog.*``: what makes an agentlog → OTLP → agentlog round trip keep what the two
  conventions have no name for.

Pure: constants only. Modules that read or write span attributes import them from here, so
each name is spelled once (and, for the two conventions, by their maintainers).
"""

from __future__ import annotations

from typing import Final

from openinference.semconv.trace import (
    MessageAttributes,
    MessageContentAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
    ToolCallAttributes,
)
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
from opentelemetry.semconv._incubating.attributes import http_attributes as _old_http
from opentelemetry.semconv.attributes import error_attributes as _error
from opentelemetry.semconv.attributes import exception_attributes as _exception
from opentelemetry.semconv.attributes import http_attributes as _http

# --- OpenTelemetry GenAI --------------------------------------------------------------------
GEN_AI_OPERATION: Final = _gen_ai.GEN_AI_OPERATION_NAME
GEN_AI_PROVIDER: Final = _gen_ai.GEN_AI_PROVIDER_NAME
GEN_AI_SYSTEM: Final = _gen_ai.GEN_AI_SYSTEM  # deprecated for gen_ai.provider.name; still read
GEN_AI_REQUEST_MODEL: Final = _gen_ai.GEN_AI_REQUEST_MODEL
GEN_AI_RESPONSE_MODEL: Final = _gen_ai.GEN_AI_RESPONSE_MODEL
GEN_AI_RESPONSE_ID: Final = _gen_ai.GEN_AI_RESPONSE_ID
GEN_AI_FINISH_REASONS: Final = _gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
GEN_AI_INPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_OUTPUT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
GEN_AI_PROMPT_TOKENS: Final = _gen_ai.GEN_AI_USAGE_PROMPT_TOKENS  # deprecated; still read
GEN_AI_COMPLETION_TOKENS: Final = _gen_ai.GEN_AI_USAGE_COMPLETION_TOKENS  # deprecated; still read
#: Input tokens served from the provider's cache; SHOULD be included in input_tokens.
GEN_AI_CACHE_READ: Final = _gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
GEN_AI_CACHE_WRITE: Final = _gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
GEN_AI_REASONING_TOKENS: Final = _gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
GEN_AI_INPUT_MESSAGES: Final = _gen_ai.GEN_AI_INPUT_MESSAGES
GEN_AI_OUTPUT_MESSAGES: Final = _gen_ai.GEN_AI_OUTPUT_MESSAGES
GEN_AI_TOOL_NAME: Final = _gen_ai.GEN_AI_TOOL_NAME
GEN_AI_TOOL_CALL_ID: Final = _gen_ai.GEN_AI_TOOL_CALL_ID
GEN_AI_TOOL_ARGUMENTS: Final = _gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
GEN_AI_TOOL_RESULT: Final = _gen_ai.GEN_AI_TOOL_CALL_RESULT
GEN_AI_AGENT_NAME: Final = _gen_ai.GEN_AI_AGENT_NAME
GEN_AI_REQUEST_PARAMS: Final = {"temperature": _gen_ai.GEN_AI_REQUEST_TEMPERATURE,
                                "max_tokens": _gen_ai.GEN_AI_REQUEST_MAX_TOKENS,
                                "top_p": _gen_ai.GEN_AI_REQUEST_TOP_P, "seed": _gen_ai.GEN_AI_REQUEST_SEED}
_OP: Final = _gen_ai.GenAiOperationNameValues
OP_CHAT: Final = _OP.CHAT.value
OP_EXECUTE_TOOL: Final = _OP.EXECUTE_TOOL.value
OP_INVOKE_AGENT: Final = _OP.INVOKE_AGENT.value
OP_EMBEDDINGS: Final = _OP.EMBEDDINGS.value
#: Operation names that are a model call.
LLM_OPERATIONS: Final = frozenset({_OP.CHAT.value, _OP.TEXT_COMPLETION.value, _OP.GENERATE_CONTENT.value,
                                   "completion"})
#: Operation names that are an agent (or a workflow of agents).
AGENT_OPERATIONS: Final = frozenset({_OP.INVOKE_AGENT.value, _OP.CREATE_AGENT.value,
                                     _OP.INVOKE_WORKFLOW.value})

# --- general OpenTelemetry ------------------------------------------------------------------
ERROR_TYPE: Final = _error.ERROR_TYPE
EXCEPTION_EVENT: Final = "exception"  # the span event name the SDK's record_exception writes
EXCEPTION_TYPE: Final = _exception.EXCEPTION_TYPE
EXCEPTION_MESSAGE: Final = _exception.EXCEPTION_MESSAGE
EXCEPTION_STACKTRACE: Final = _exception.EXCEPTION_STACKTRACE
HTTP_METHODS: Final = (_http.HTTP_REQUEST_METHOD, _old_http.HTTP_METHOD)  # today's, and the old name
SERVICE_NAME: Final = "service.name"

# --- OpenInference --------------------------------------------------------------------------
OI_KIND: Final = SpanAttributes.OPENINFERENCE_SPAN_KIND
OI_MODEL: Final = SpanAttributes.LLM_MODEL_NAME
OI_REQUEST_MODEL: Final = SpanAttributes.LLM_REQUEST_MODEL_NAME
OI_RESPONSE_MODEL: Final = SpanAttributes.LLM_RESPONSE_MODEL_NAME
OI_PROVIDER: Final = SpanAttributes.LLM_PROVIDER
OI_SYSTEM: Final = SpanAttributes.LLM_SYSTEM
OI_PROMPT_TOKENS: Final = SpanAttributes.LLM_TOKEN_COUNT_PROMPT
OI_COMPLETION_TOKENS: Final = SpanAttributes.LLM_TOKEN_COUNT_COMPLETION
OI_TOTAL_TOKENS: Final = SpanAttributes.LLM_TOKEN_COUNT_TOTAL
OI_CACHE_READ: Final = SpanAttributes.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_READ
OI_CACHE_WRITE: Final = SpanAttributes.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_WRITE
OI_REASONING_TOKENS: Final = SpanAttributes.LLM_TOKEN_COUNT_COMPLETION_DETAILS_REASONING
OI_COST_TOTAL: Final = SpanAttributes.LLM_COST_TOTAL
OI_FINISH_REASON: Final = SpanAttributes.LLM_FINISH_REASON
OI_INVOCATION_PARAMETERS: Final = SpanAttributes.LLM_INVOCATION_PARAMETERS
OI_INPUT_MESSAGES: Final = SpanAttributes.LLM_INPUT_MESSAGES
OI_OUTPUT_MESSAGES: Final = SpanAttributes.LLM_OUTPUT_MESSAGES
OI_INPUT_VALUE: Final = SpanAttributes.INPUT_VALUE
OI_OUTPUT_VALUE: Final = SpanAttributes.OUTPUT_VALUE
OI_TOOL_NAME: Final = SpanAttributes.TOOL_NAME
OI_TOOL_PARAMETERS: Final = SpanAttributes.TOOL_PARAMETERS
OI_TOOL_CALL_ID: Final = ToolCallAttributes.TOOL_CALL_ID
# The parts of one flattened OpenInference message (``llm.input_messages.<i>.<part>``).
OI_MESSAGE_ROLE: Final = MessageAttributes.MESSAGE_ROLE
OI_MESSAGE_CONTENT: Final = MessageAttributes.MESSAGE_CONTENT
OI_MESSAGE_CONTENTS: Final = MessageAttributes.MESSAGE_CONTENTS
OI_MESSAGE_NAME: Final = MessageAttributes.MESSAGE_NAME
OI_MESSAGE_TOOL_CALLS: Final = MessageAttributes.MESSAGE_TOOL_CALLS
OI_MESSAGE_TOOL_CALL_ID: Final = MessageAttributes.MESSAGE_TOOL_CALL_ID
OI_CONTENT_TEXT: Final = MessageContentAttributes.MESSAGE_CONTENT_TEXT
OI_CALL_ID: Final = ToolCallAttributes.TOOL_CALL_ID
OI_CALL_NAME: Final = ToolCallAttributes.TOOL_CALL_FUNCTION_NAME
OI_CALL_ARGUMENTS: Final = ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON
OI_LLM: Final = OpenInferenceSpanKindValues.LLM.value
#: OpenInference span kinds → agentlog span kinds (UNKNOWN stays unmapped: a ``chain``).
OI_KINDS: Final = {v.value: v.value.lower() for v in OpenInferenceSpanKindValues
                   if v is not OpenInferenceSpanKindValues.UNKNOWN}

# --- agentlog -------------------------------------------------------------------------------
AL_SPAN_ID: Final = "agentlog.span.id"
AL_SPAN_NAME: Final = "agentlog.span.name"
AL_SPAN_KIND: Final = "agentlog.span.kind"
AL_SPAN_ATTRIBUTES: Final = "agentlog.span.attributes"
AL_SPAN_OPEN: Final = "agentlog.span.open"
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
#: The usage columns of an exported event, as ``agentlog.<column>`` span-event attributes.
AL_COLUMN_PREFIX: Final = "agentlog."
