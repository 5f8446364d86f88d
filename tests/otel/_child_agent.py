"""An agent in a process of its own that exports its spans over OTLP/HTTP with the real
exporter (``opentelemetry-exporter-otlp-proto-http``), the way any traced program would.

It runs ``STEPS`` steps (an OpenAI call traced by OpenInference's instrumentor, inside a step
span inside an agent span), flushes its spans after each and prints ``step N``, then waits
for a line on stdin before going on, so a test can look at the store between steps. Usage:
``python _child_agent.py <traces url>``.
"""

from __future__ import annotations

import sys

STEPS = 2


def main(url: str) -> None:
    from _endpoint import MODEL, openai_client
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "child-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url), schedule_delay_millis=50))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("child-agent")
    client = openai_client()
    with tracer.start_as_current_span("invoke_agent sre", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sre"}):
        for step in range(STEPS):
            with tracer.start_as_current_span(f"step {step}"):
                client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": f"step {step}"}])
            provider.force_flush()
            print(f"step {step}", flush=True)
            sys.stdin.readline()
    provider.shutdown()  # exports the agent span, which ends last
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
