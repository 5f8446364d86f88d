"""The event vocabulary: the event, the blob reference, and one typed body per standard type.

An :class:`Event` is one row of the log: ``seq``, ``type``, ``payload`` and the columns the
writer stamps. Each standard type has a frozen body class whose fields are its payload's keys
and the usage columns it fills; every layer that writes or reads a standard event goes through
these classes (``LLMResponse.of(event).usage``, ``StatePatch.K.ops``), never through a payload
key spelled by hand. See :mod:`agentlog.events.base` for fields, checks and versions.

================================  =======================================================
type                              body
================================  =======================================================
``run.started`` / ``.finished``   :class:`RunStarted` / :class:`RunFinished` /
/ ``.failed``                     :class:`RunFailed`
``span.started`` / ``.ended``     :class:`SpanStarted` / :class:`SpanEnded`
``llm.request`` / ``.response``   :class:`LLMRequest` / :class:`LLMResponse` (version 2)
``tool.call`` / ``.result``       :class:`ToolCall` / :class:`ToolResult`
``http.request`` / ``.response``  :class:`HTTPRequest` / :class:`HTTPResponse`
``error``                         :class:`CallFailed`
``state.patch``                   :class:`StatePatch`
``object.created`` / ``.updated`` :class:`ObjectCreated` / :class:`ObjectUpdated`
``relation.created``              :class:`RelationCreated`
``approval.requested`` /          :class:`ApprovalRequested` / :class:`ApprovalGranted` /
``.granted`` / ``.denied``        :class:`ApprovalDenied`
``budget.set`` / ``.exceeded``    :class:`BudgetSet` / :class:`BudgetExceeded`
``fork.started``                  :class:`ForkStarted`
``note``                          :class:`Note` (open: any payload)
``time.now`` / ``uuid.new`` /     :class:`TimeNow` / :class:`UUIDNew` / :class:`RandomValue`
``random.value``
``span.event``                    :class:`SpanEvent` (a tracer's point event in a span)
================================  =======================================================

An imported event keeps the source system's own event under one key, ``origin``
(:class:`Origin`, :func:`with_origin`, :func:`origin_of`).

A run may add types of its own: they stay plain ``type`` + ``payload`` events.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

from .approval import ApprovalDenied, ApprovalGranted, ApprovalRequested
from .base import (
    VERSION_KEY,
    Body,
    Keys,
    Text,
    Value,
    body_class,
    body_of,
    check_payload,
    column,
    event_type,
    json_path,
    lift,
    optional,
    registry,
    upcaster,
)
from .calls import CostSource, HTTPRequest, HTTPResponse, LLMRequest, LLMResponse, ToolCall, ToolResult
from .event import USAGE_FIELDS, BlobRef, Event, is_blob_json
from .graph import ObjectCreated, ObjectUpdated, RelationCreated, StatePatch
from .origin import ORIGIN_KEY, Origin, origin_of, with_origin
from .run import (
    BudgetExceeded,
    BudgetSet,
    CallFailed,
    ForkStarted,
    Note,
    RandomValue,
    RunFailed,
    RunFinished,
    RunStarted,
    TimeNow,
    UUIDNew,
)
from .span import INTERRUPTED, SpanEnded, SpanEvent, SpanStarted
from .usage import TOKEN_FIELDS, Usage

__all__ = [
    "APPROVAL_DENIED", "APPROVAL_GRANTED", "APPROVAL_REQUESTED", "BUDGET_EXCEEDED", "BUDGET_SET",
    "ERROR", "FORK_STARTED", "HTTP_REQUEST", "HTTP_RESPONSE", "INTERRUPTED", "LLM_REQUEST",
    "LLM_RESPONSE", "NOTE", "OBJECT_CREATED", "OBJECT_UPDATED", "ORIGIN_KEY", "RANDOM_VALUE",
    "RELATION_CREATED", "RUN_FAILED", "RUN_FINISHED", "RUN_STARTED", "SPAN_ENDED", "SPAN_EVENT",
    "SPAN_STARTED", "STANDARD_TYPES",
    "STATE_PATCH", "TIME_NOW", "TOKEN_FIELDS", "TOOL_CALL", "TOOL_RESULT", "USAGE_FIELDS",
    "UUID_NEW", "VERSION_KEY",
    "ApprovalDenied", "ApprovalGranted", "ApprovalRequested", "BlobRef", "Body", "BudgetExceeded",
    "BudgetSet", "CallFailed", "CostSource", "Event", "ForkStarted", "HTTPRequest", "HTTPResponse",
    "Keys", "LLMRequest", "LLMResponse", "Note", "ObjectCreated", "ObjectUpdated", "Origin",
    "RandomValue", "RelationCreated", "RunFailed", "RunFinished", "RunStarted", "SpanEnded",
    "SpanEvent", "SpanStarted",
    "StatePatch", "Text", "TimeNow", "ToolCall", "ToolResult", "UUIDNew", "Usage", "Value",
    "body_class", "body_of", "check_payload", "column", "event_type", "is_blob_json", "json_path",
    "lift", "optional", "origin_of", "registry", "upcaster", "with_origin",
]

# The type names, each taken from its body class (spelled once, in the class's registration).
RUN_STARTED: Final = RunStarted.TYPE
RUN_FINISHED: Final = RunFinished.TYPE
RUN_FAILED: Final = RunFailed.TYPE
SPAN_STARTED: Final = SpanStarted.TYPE
SPAN_ENDED: Final = SpanEnded.TYPE
SPAN_EVENT: Final = SpanEvent.TYPE
LLM_REQUEST: Final = LLMRequest.TYPE
LLM_RESPONSE: Final = LLMResponse.TYPE
TOOL_CALL: Final = ToolCall.TYPE
TOOL_RESULT: Final = ToolResult.TYPE
HTTP_REQUEST: Final = HTTPRequest.TYPE
HTTP_RESPONSE: Final = HTTPResponse.TYPE
ERROR: Final = CallFailed.TYPE
STATE_PATCH: Final = StatePatch.TYPE
OBJECT_CREATED: Final = ObjectCreated.TYPE
OBJECT_UPDATED: Final = ObjectUpdated.TYPE
RELATION_CREATED: Final = RelationCreated.TYPE
APPROVAL_REQUESTED: Final = ApprovalRequested.TYPE
APPROVAL_GRANTED: Final = ApprovalGranted.TYPE
APPROVAL_DENIED: Final = ApprovalDenied.TYPE
BUDGET_SET: Final = BudgetSet.TYPE
BUDGET_EXCEEDED: Final = BudgetExceeded.TYPE
FORK_STARTED: Final = ForkStarted.TYPE
NOTE: Final = Note.TYPE
TIME_NOW: Final = TimeNow.TYPE
UUID_NEW: Final = UUIDNew.TYPE
RANDOM_VALUE: Final = RandomValue.TYPE

#: Every standard event type.
STANDARD_TYPES: Final = frozenset(registry())
