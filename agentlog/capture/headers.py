"""Request headers that say nothing of what was asked: the trace context a tracer adds, and the
client's description of itself.

- :data:`TRACE_HEADERS` are not recorded (:mod:`agentlog.capture.transport`): their ids are
  new on every run, as the OpenTelemetry ids the span processor leaves out of a span's payload.
- The client's own headers (:func:`describes_the_client`: ``User-Agent``, the Stainless SDKs'
  ``X-Stainless-*``: OpenAI's and Anthropic's package version, OS, architecture, Python) are
  recorded, and a strict replay does not compare them: a run recorded on a laptop replays in CI
  on another OS, or after an SDK upgrade, as long as the program asks the same.

Pure: names only.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CLIENT_HEADERS", "CLIENT_HEADER_PREFIXES", "TRACE_HEADERS", "describes_the_client"]

#: The trace context a tracer adds to every request it sees go out: W3C Trace Context and
#: Baggage, B3, Jaeger, Datadog, Sentry, AWS X-Ray, Google Cloud (the Anthropic SDK, for one,
#: sends ``traceparent`` once a tracer provider is set).
TRACE_HEADERS: Final = frozenset({
    "traceparent", "tracestate", "baggage", "b3", "x-b3-traceid", "x-b3-spanid", "x-b3-parentspanid",
    "x-b3-sampled", "x-b3-flags", "uber-trace-id", "x-datadog-trace-id", "x-datadog-parent-id",
    "x-datadog-sampling-priority", "x-datadog-origin", "x-datadog-tags", "sentry-trace",
    "x-amzn-trace-id", "x-cloud-trace-context"})

#: Headers in which a client describes itself (its name and version, Google's API client tag).
CLIENT_HEADERS: Final = frozenset({"user-agent", "x-goog-api-client"})
#: Prefixes of such headers (the Stainless-generated SDKs: OpenAI, Anthropic, ...).
CLIENT_HEADER_PREFIXES: Final = ("x-stainless-",)


def describes_the_client(name: str) -> bool:
    """True for a header in which the client describes itself (lower-cased name).

    >>> describes_the_client("x-stainless-package-version"), describes_the_client("anthropic-version")
    (True, False)
    """
    return name in CLIENT_HEADERS or name.startswith(CLIENT_HEADER_PREFIXES)
