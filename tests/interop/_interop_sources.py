"""Make the foreign files the importers read, for real, with the tools that write them.

- ActiveGraph: the ``activegraph quickstart`` fixture run (its own code, pointed at a tmp
  folder), ``activegraph export-trace --format jsonl`` of it, and a ``JSONLEventSink`` file.
- drangue: an SRE run with an assisted (approval-gated) tool on ``SQLiteStore``, with
  drangue's scripted ``FakeModel``.
- OpenTelemetry: the real ``openai`` SDK against an in-process httpx mock, traced by the
  OpenTelemetry GenAI instrumentation (``opentelemetry-instrumentation-openai-v2``) or by
  OpenInference's (``openinference-instrumentation-openai``), exported by the SDK's
  ``ConsoleSpanExporter`` and encoded as OTLP JSON by ``opentelemetry-exporter-otlp-proto-common``
  + ``google.protobuf.json_format``.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

# --- ActiveGraph ----------------------------------------------------------------------------


def activegraph_quickstart(folder: Path, monkeypatch: Any) -> Path:
    """Run the bundled quickstart (fixture provider, frozen clock) into ``folder``; its SQLite path."""
    from activegraph.cli import quickstart

    db_dir = folder / "activegraph_quickstart"
    db_path = db_dir / "quickstart_demo_run.db"
    monkeypatch.setattr(quickstart, "_QUICKSTART_DB_DIR", str(db_dir))
    monkeypatch.setattr(quickstart, "_QUICKSTART_DB_PATH", str(db_path))
    logger = logging.getLogger("activegraph")
    before = (logger.level, list(logger.handlers))
    try:
        assert quickstart.run_fixture_mode(stream=io.StringIO()) == 0
    finally:
        # The quickstart configures activegraph's logging for a terminal; undo it.
        logger.setLevel(before[0])
        for handler in list(logger.handlers):
            if handler not in before[1]:
                logger.removeHandler(handler)
    return db_path


def activegraph_export_trace(db: Path, out: Path, run_id: str = "quickstart_demo_run") -> Path:
    """``activegraph export-trace sqlite:///<db> --run-id <id> --format jsonl -o <out>``."""
    from activegraph.cli.main import cli
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["export-trace", f"sqlite:///{db}", "--run-id", run_id,
                                      "--format", "jsonl", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def activegraph_sink_run(folder: Path, run_id: str = "sink_run") -> tuple[Path, Path]:
    """One diligence goal with a ``JSONLEventSink`` attached: ``(sink file, SQLite store)``."""
    from activegraph import FrozenClock, Graph, IDGen, Runtime
    from activegraph.packs.diligence import DiligenceSettings
    from activegraph.packs.diligence import pack as diligence_pack
    from activegraph.packs.diligence.fixtures import THREE_COMPANIES, RecordedDiligenceProvider, company_goal
    from activegraph.sinks.jsonl import JSONLEventSink

    sink_path, db_path = folder / f"{run_id}.jsonl", folder / "sinks.db"
    graph = Graph(ids=IDGen(), clock=FrozenClock("2026-01-01T00:00:00Z"), run_id=run_id)
    runtime = Runtime(graph, llm_provider=RecordedDiligenceProvider(companies=THREE_COMPANIES[:1]),
                      persist_to=str(db_path), seed=0, sinks=[JSONLEventSink(sink_path)],
                      budget={"max_llm_calls": 80, "max_tool_calls": 100, "max_cost_usd": "5.00"})
    runtime.load_pack(diligence_pack, settings=DiligenceSettings(
        llm_model="claude-sonnet-4-5", max_documents_per_company=5, max_claims_per_document=10,
        confidence_threshold_for_review=0.7, min_questions=8, max_questions=12))
    runtime.run_goal(company_goal(THREE_COMPANIES[0]))
    assert runtime.close_sinks()
    return sink_path, db_path


def activegraph_rows(db: Path, run_id: str) -> list[tuple[str, str, str | None]]:
    """``(id, type, caused_by)`` of a run's rows, in seq order, straight from SQLite."""
    with sqlite3.connect(db) as conn:
        return list(conn.execute("SELECT id, type, caused_by FROM events WHERE run_id = ? ORDER BY seq",
                                 (run_id,)))


# --- drangue --------------------------------------------------------------------------------


def drangue_sre(db: Path, run_id: str = "sre-1", *, model: str = "claude-sonnet-4-5") -> list[Any]:
    """An on-call run: a metric tool, then an approval-gated restart, approved, resumed.

    Returns:
        drangue's own events of the run (``Result.events`` after the resume).
    """
    from drangue import Agent, Autonomy, ModelResponse, SQLiteStore, ToolCall, tool
    from drangue.testing import FakeModel

    @tool
    def error_rate(service: str) -> str:
        """Return the recent 5xx error rate for a service."""
        return f"{service}: 4.2% 5xx over 15m (baseline 0.3%)"

    @tool(reversible=False)
    def restart(service: str, idempotency_key: str = "") -> str:
        """Restart a service (irreversible)."""
        return f"restarted {service}"

    fake = FakeModel([
        ModelResponse(tool_calls=[ToolCall(id="c1", name="error_rate", arguments={"service": "checkout"})],
                      usage={"input_tokens": 120, "output_tokens": 12, "cache_read_input_tokens": 40},
                      stop_reason="tool_use", reasoning="check the error rate first"),
        ModelResponse(tool_calls=[ToolCall(id="c2", name="restart", arguments={"service": "checkout"})],
                      usage={"input_tokens": 160, "output_tokens": 10}, stop_reason="tool_use",
                      reasoning="the error rate is 14x baseline; restart"),
        ModelResponse(text="Restarted checkout; 5xx was 14x baseline.",
                      usage={"input_tokens": 190, "output_tokens": 15}, stop_reason="end_turn"),
    ])
    fake.model = model  # the name drangue records as the model that ran

    async def main() -> list[Any]:
        store = SQLiteStore(str(db))
        try:
            agent = Agent(fake, tools=[error_rate, restart], store=store,
                          autonomy=Autonomy(modes={"restart": "assisted"}))
            paused = await agent.run("Is checkout healthy? Fix it if not.", run_id=run_id)
            assert paused.status == "paused"
            await agent.approve(run_id)
            done = await agent.resume(run_id)
            assert done.status == "completed"
            return list(done.events)
        finally:
            store.close()

    return asyncio.run(main())


# --- OpenTelemetry --------------------------------------------------------------------------


def _chat(request: httpx.Request) -> httpx.Response:
    """A fake OpenAI Chat Completions endpoint with usage (cached tokens included)."""
    body = json.loads(request.content)
    return httpx.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": body["model"] + "-2024-07-18",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "restart the api"}}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 4, "total_tokens": 46,
                  "prompt_tokens_details": {"cached_tokens": 10}}})


def traced_agent(convention: str) -> tuple[str, list[Any]]:
    """An agent span with a real instrumented OpenAI call and a tool span inside, traced.

    Args:
        convention: ``"genai"`` (OpenTelemetry's openai-v2 instrumentation, tool span with
            ``gen_ai.*`` attributes) or ``"openinference"`` (OpenInference's instrumentation,
            tool span through OpenInference's ``OITracer``).

    Returns:
        ``(ConsoleSpanExporter output, finished ReadableSpans)``.
    """
    import openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    out, memory = io.StringIO(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if convention == "genai":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor  # type: ignore[no-redef]
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        client = openai.OpenAI(api_key="test", base_url="http://llm.test/v1",
                               http_client=httpx.Client(transport=httpx.MockTransport(_chat)))
        tracer = provider.get_tracer("sre-agent")
        with tracer.start_as_current_span("invoke_agent sre", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sre"}):
            client.chat.completions.create(model="gpt-4o-mini", messages=[
                {"role": "system", "content": "You are an SRE."},
                {"role": "user", "content": "cpu=0.9, what now?"}], temperature=0)
            if convention == "genai":
                with tracer.start_as_current_span("execute_tool restart", kind=SpanKind.INTERNAL, attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "restart",
                        "gen_ai.tool.call.id": "call_1",
                        "gen_ai.tool.call.arguments": json.dumps({"service": "api"}),
                        "gen_ai.tool.call.result": json.dumps("restarted api")}):
                    pass
            else:
                from openinference.instrumentation import OITracer, TraceConfig

                oi = OITracer(tracer, config=TraceConfig())
                with oi.start_as_current_span("restart", openinference_span_kind="tool") as span:
                    span.set_tool(name="restart", description="restart a service", parameters={})
                    span.set_input(json.dumps({"service": "api"}), mime_type="application/json")
                    span.set_output("restarted api")
    finally:
        instrumentor.uninstrument()
    return out.getvalue(), list(memory.get_finished_spans())


def otlp_json(spans: list[Any], *, hex_ids: bool = True) -> dict[str, Any]:
    """Spans as an OTLP/JSON ``ExportTraceServiceRequest``, encoded by the OTel exporter's own
    protobuf encoder and ``json_format``.

    ``json_format`` writes ``bytes`` fields in base64; the OTLP/JSON spec says trace and span
    ids are hex (what the collector writes), so ``hex_ids`` rewrites them as the spec says.
    Enum values are written as integers, as the spec says.
    """
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    if hex_ids:
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64decode(span[key]).hex()
    return request


def attribute(span: Mapping[str, Any], key: str) -> Any:
    """An attribute's ``AnyValue`` of an OTLP/JSON span."""
    for kv in span.get("attributes", ()):
        if kv["key"] == key:
            return kv["value"]
    raise KeyError(key)
