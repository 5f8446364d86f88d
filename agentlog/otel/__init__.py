"""Live OpenTelemetry: framework spans into the recording as the agent runs, and an OTLP
endpoint that writes every trace it receives into the store.

==========================  =================================================================
name                        what it does
==========================  =================================================================
:func:`instrument`          installs :class:`SpanProcessor` on the global tracer provider
                            and turns on the installed OpenInference instrumentors
                            (``al.instrument()``)
:class:`SpanProcessor`      writes spans into the recording active in their context, on
                            start and end
:func:`serve`               an OTLP/HTTP endpoint (``/v1/traces``, protobuf and JSON): one
                            run per trace, growing as spans arrive (``agentlog serve --otlp``)
==========================  =================================================================

The mapping of a span to events is the OTLP import's (:mod:`agentlog.interop.spanmap`).
Needs the ``otel`` extra (``pip install 'agentlog[otel]'``) for the SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import missing_dependency

__all__ = ["CallJoin", "Instrumentation", "OTLPServer", "SpanProcessor", "WrittenSpan", "instrument",
           "serve"]

_EXPORTS = {"CallJoin": "processor", "SpanProcessor": "processor", "WrittenSpan": "processor",
            "Instrumentation": "instrument", "instrument": "instrument", "OTLPServer": "server",
            "serve": "server"}

if TYPE_CHECKING:  # pragma: no cover
    from .instrument import Instrumentation, instrument
    from .processor import CallJoin, SpanProcessor, WrittenSpan
    from .server import OTLPServer, serve


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentlog.otel' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("opentelemetry"):
            raise missing_dependency(exc.name, "otel") from exc
        raise
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
