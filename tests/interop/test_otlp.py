"""OTLP JSON out and in: the GenAI attributes, a round trip, and files real tracers wrote."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from _interop_fixtures import *  # the fixtures: store, other, run, forked
from _interop_sources import attribute, otlp_json, traced_agent

from agentlog.interop import InteropFormatError, export_otlp, import_otlp, write_otlp
from agentlog.interop.otlp import span_id_of, trace_id_of


def _spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _by_name(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in _spans(request)}


def _span_tree(run: Any) -> list[tuple[str, str, str | None]]:
    """(name, kind, parent name) of every span of a run, in start order."""
    names: dict[str, str] = {}
    out = []
    for e in run.iter_events():
        if e.type == "span.started":
            names[e.span_id] = e.payload["name"]
            out.append((e.payload["name"], e.payload["kind"], names.get(e.payload["parent"])))
    return out


def _llm(run: Any) -> list[tuple[Any, ...]]:
    return [(e.model, e.input_tokens, e.output_tokens, e.cached_tokens, e.cost_usd)
            for e in run.iter_events() if e.type == "llm.response"]


# --- export ---------------------------------------------------------------------------------


def test_export_is_an_export_trace_service_request(run: Any) -> None:
    request = export_otlp(run)
    spans = _spans(request)
    trace = trace_id_of(run.id)
    assert len(trace) == 32 and all(s["traceId"] == trace for s in spans)
    assert all(len(s["spanId"]) == 16 and int(s["spanId"], 16) for s in spans)
    started = [e for e in run.iter_events() if e.type == "span.started"]
    assert len(spans) == len(started) + 1  # one per span, and the run's root span
    assert all(isinstance(s["startTimeUnixNano"], str) and int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"])
               for s in spans)
    assert request == export_otlp(run)  # deterministic


def test_export_parses_as_the_official_protobuf(run: Any) -> None:
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = export_otlp(run)
    for span in _spans(request):  # protobuf's JSON mapping wants bytes in base64, OTLP hex
        for key in ("traceId", "spanId", "parentSpanId"):
            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    message = ParseDict(request, ExportTraceServiceRequest())
    assert len(message.resource_spans[0].scope_spans[0].spans) == len(_spans(request))


def test_llm_spans_carry_the_genai_attributes(run: Any) -> None:
    span = _by_name(export_otlp(run))["chat gpt-4o-mini"]
    response = next(e for e in run.iter_events() if e.type == "llm.response")
    assert span["kind"] == 3  # CLIENT
    assert attribute(span, "gen_ai.operation.name") == {"stringValue": "chat"}
    assert attribute(span, "gen_ai.request.model") == {"stringValue": "gpt-4o-mini"}
    assert attribute(span, "gen_ai.response.model") == {"stringValue": response.model}
    assert attribute(span, "gen_ai.usage.input_tokens") == {"intValue": str(response.input_tokens)}
    assert attribute(span, "gen_ai.usage.output_tokens") == {"intValue": str(response.output_tokens)}
    assert attribute(span, "gen_ai.usage.cache_read.input_tokens") == {"intValue": "4"}
    assert attribute(span, "agentlog.cost_usd") == {"doubleValue": response.cost_usd}
    assert attribute(span, "gen_ai.request.temperature") == {"intValue": "0"}
    assert attribute(span, "gen_ai.response.finish_reasons") == {"arrayValue": {"values": [{"stringValue": "stop"}]}}
    messages = json.loads(attribute(span, "gen_ai.input.messages")["stringValue"])
    assert messages[0] == {"role": "system", "parts": [{"type": "text", "content": "You are an SRE."}]}


def test_tool_spans_and_their_failures(run: Any) -> None:
    spans = _by_name(export_otlp(run))
    ok, failed = spans["execute_tool get_metric"], spans["execute_tool flaky_probe"]
    assert ok["kind"] == 1 and ok["status"] == {"code": 1}
    assert attribute(ok, "gen_ai.operation.name") == {"stringValue": "execute_tool"}
    assert attribute(ok, "gen_ai.tool.name") == {"stringValue": "get_metric"}
    assert json.loads(attribute(ok, "gen_ai.tool.call.arguments")["stringValue"]) == {"name": "cpu"}
    assert attribute(ok, "gen_ai.tool.call.result") == {"stringValue": "0.9"}
    assert failed["status"] == {"code": 2, "message": "ToolError: tool 'flaky_probe' (seq 12) failed: "
                                                      "TimeoutError: api did not answer"}
    assert attribute(failed, "agentlog.tool.error") == {"stringValue": "TimeoutError: api did not answer"}
    assert attribute(failed, "error.type") == {"stringValue": "TimeoutError"}


def test_nesting_and_other_events(run: Any) -> None:
    request = export_otlp(run)
    spans = _by_name(request)
    root = next(s for s in _spans(request) if s["parentSpanId"] == "")
    agent, decide = spans["invoke_agent triage"], spans["decide"]
    assert agent["parentSpanId"] == root["spanId"] == span_id_of(run.id, "<run>")
    assert decide["parentSpanId"] == agent["spanId"] and spans["chat gpt-4o-mini"]["parentSpanId"] == decide["spanId"]
    assert [e["name"] for e in root["events"]] == ["run.started", "run.finished"]
    assert [e["name"] for e in agent["events"]] == ["state.patch", "note"]


def test_write_otlp_writes_one_request_per_line(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    count = write_otlp(run, path)
    lines = path.read_text().splitlines()
    assert len(lines) == 1 and count == len(_spans(json.loads(lines[0])))


# --- round trip -------------------------------------------------------------------------------


def test_round_trip_keeps_spans_nesting_models_and_tokens(run: Any, other: Any, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    write_otlp(run, path)
    [back] = import_otlp(path, other)
    assert back.name == "triage" and back.verify().ok
    assert _span_tree(back) == _span_tree(run)
    assert _llm(back) == _llm(run)
    assert [e.type for e in back.iter_events()] == [e.type for e in run.iter_events()]
    tools = [(e.payload["name"], e.payload.get("result"), e.payload.get("error"))
             for e in run.iter_events() if e.type == "tool.result"]
    assert [(e.payload["name"], e.payload.get("result"), e.payload.get("error"))
            for e in back.iter_events() if e.type == "tool.result"] == tools
    before, after = run.state_at(len(run) - 1), back.state_at(len(back) - 1)
    assert after["vars"] == before["vars"]
    assert after["usage"]["by_model"] == before["usage"]["by_model"]
    assert after["usage"]["tool_calls"] == before["usage"]["tool_calls"]


def test_round_trip_of_a_fork(forked: Any, other: Any) -> None:
    [back] = import_otlp(export_otlp(forked), other)
    assert _span_tree(back) == _span_tree(forked) and _llm(back) == _llm(forked)
    assert back.state_at(len(back) - 1)["vars"] == forked.state_at(len(forked) - 1)["vars"]


# --- files real tracers wrote ---------------------------------------------------------------


def _check_traced(run: Any, *, request_model: str, cached: int) -> None:
    assert run.verify().ok
    assert _span_tree(run)[0] == ("invoke_agent sre", "agent", None)
    kinds = [(kind, parent) for _, kind, parent in _span_tree(run)[1:]]
    assert kinds == [("llm", "invoke_agent sre"), ("tool", "invoke_agent sre")]
    [request] = [e for e in run.iter_events() if e.type == "llm.request"]
    [response] = [e for e in run.iter_events() if e.type == "llm.response"]
    assert request.payload["model"] == request_model and request.payload["params"]["temperature"] == 0
    assert (response.model, response.input_tokens, response.output_tokens, response.cached_tokens) == \
        ("gpt-4o-mini-2024-07-18", 42, 4, cached)
    assert response.caused_by == request.seq and response.cost_usd is not None and response.cost_usd > 0
    [call] = [e for e in run.iter_events() if e.type == "tool.call"]
    [result] = [e for e in run.iter_events() if e.type == "tool.result"]
    assert (call.payload["name"], call.payload["args"], result.payload["result"]) == ("restart", {"service": "api"},
                                                                                      "restarted api")
    assert [e.ts for e in run.iter_events()] == sorted(e.ts for e in run.iter_events())
    usage = run.state_at(len(run) - 1)["usage"]
    assert (usage["llm_calls"], usage["tool_calls"], usage["input_tokens"]) == (1, 1, 42)


def test_console_exporter_output_with_genai_attributes(other: Any, tmp_path: Path) -> None:
    text, _ = traced_agent("genai")
    path = tmp_path / "console.txt"
    path.write_text(text)
    [run] = import_otlp(path, other)
    _check_traced(run, request_model="gpt-4o-mini", cached=0)  # openai-v2 does not record cache reads
    started = next(e for e in run.iter_events() if e.payload.get("kind") == "llm")
    assert started.payload["otel"]["kind"] == "CLIENT"
    assert started.payload["attributes"]["gen_ai.system"] == "openai"


def test_console_exporter_output_with_openinference_attributes(other: Any) -> None:
    text, _ = traced_agent("openinference")
    [run] = import_otlp(io.StringIO(text), other)
    _check_traced(run, request_model="gpt-4o-mini", cached=10)
    [request] = [e for e in run.iter_events() if e.type == "llm.request"]
    assert request.payload["messages"] == [{"role": "system", "content": "You are an SRE."},
                                           {"role": "user", "content": "cpu=0.9, what now?"}]
    [response] = [e for e in run.iter_events() if e.type == "llm.response"]
    assert response.payload["message"] == {"role": "assistant", "content": "restart the api"}


@pytest.mark.parametrize("convention", ["genai", "openinference"])
def test_otlp_json_from_the_sdk_encoder(convention: str, other: Any, tmp_path: Path) -> None:
    _, spans = traced_agent(convention)
    path = tmp_path / "traces.jsonl"  # the collector's file exporter: one request per line
    path.write_text(json.dumps(otlp_json(spans[:1])) + "\n" + json.dumps(otlp_json(spans[1:])) + "\n")
    [run] = import_otlp(path, other)
    _check_traced(run, request_model="gpt-4o-mini", cached=0 if convention == "genai" else 10)


def test_base64_ids_and_named_enums_are_read_too(other: Any) -> None:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    _, spans = traced_agent("genai")
    request = MessageToDict(encode_spans(spans))  # plain protobuf JSON: base64 ids, enum names
    assert _spans(request)[0]["kind"].startswith("SPAN_KIND_")
    [run] = import_otlp(request, other)
    _check_traced(run, request_model="gpt-4o-mini", cached=0)


def test_one_run_per_trace(other: Any) -> None:
    _, first = traced_agent("genai")
    _, second = traced_agent("openinference")
    runs = import_otlp(otlp_json(first + second), other)
    assert len(runs) == 2 and all(len(r) == 10 for r in runs)
    assert runs[0].meta["tags"]["trace_id"] != runs[1].meta["tags"]["trace_id"]


def test_a_failed_llm_span_becomes_an_error(other: Any) -> None:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat gpt-4o-mini", "kind": 3,
            "startTimeUnixNano": "1000000000", "endTimeUnixNano": "2000000000",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                           {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}}],
            "status": {"code": 2, "message": "rate limited"}}
    [run] = import_otlp({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}, other)
    assert [e.type for e in run.iter_events()] == ["span.started", "llm.request", "error", "span.ended"]
    assert run.event(2).payload["error"] == "rate limited" and run.event(3).payload["status"] == "error"
    assert run.event(0).ts == 1_000_000 and run.event(3).ts == 2_000_000


def test_not_json_names_the_file_and_line(other: Any, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text('{"resourceSpans": []}\n{"resourceSpans": [\n')
    with pytest.raises(InteropFormatError) as info:
        import_otlp(path, other)
    assert info.value.line == 2 and str(info.value).startswith(f"{path}:2: not JSON (")


def test_json_that_is_not_spans_names_the_line(other: Any, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text('{"resourceSpans": []}\n\n{"hello": "world"}\n')
    with pytest.raises(InteropFormatError) as info:
        import_otlp(path, other)
    assert str(info.value) == (f"{path}:3: neither an OTLP ExportTraceServiceRequest (resourceSpans) "
                               "nor a ConsoleSpanExporter span")


def test_a_bad_span_id_names_the_field(other: Any) -> None:
    span = {"traceId": "ab" * 16, "spanId": "xyz", "name": "s", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    with pytest.raises(InteropFormatError, match="field spanId: spanId 'xyz' is neither 16 hex digits"):
        import_otlp({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}, other)


def test_an_unfinished_span_ends_where_it_starts(other: Any) -> None:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "work", "startTimeUnixNano": "5000000000",
            "endTimeUnixNano": "0"}
    [run] = import_otlp({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}, other)
    assert [(e.type, e.ts) for e in run.iter_events()] == [("span.started", 5_000_000), ("span.ended", 5_000_000)]


# --- one run per trace, whatever arrives twice or late ------------------------------------------


def test_importing_a_trace_twice_adds_nothing(other: Any, tmp_path: Path) -> None:
    text, _ = traced_agent("genai")
    path = tmp_path / "console.txt"
    path.write_text(text)
    [first] = import_otlp(path, other)
    [again] = import_otlp(path, other)
    assert (again.id, again.head, len(again)) == (first.id, first.head, len(first))
    assert other.list_runs() == [first.id] and first.id == "otlp-" + first.meta["tags"]["trace_id"]


def test_spans_that_arrive_later_extend_the_run(other: Any) -> None:
    _, spans = traced_agent("openinference")  # in end order: the model call, the tool, the agent
    [early] = import_otlp(otlp_json(spans[:1]), other)
    size, head = len(early), early.head
    [run] = import_otlp(otlp_json(spans), other)  # all three: only two are new
    assert run.id == early.id and len(run) > size and run.event(size - 1).hash == head
    names = {e.span_id: e.payload["name"] for e in run.iter_events() if e.type == "span.started"}
    llm = next(e for e in run.iter_events() if e.type == "span.started" and e.payload["kind"] == "llm")
    assert names[llm.payload["parent"]] == "invoke_agent sre"  # named before its parent arrived
    assert len(run.llm_calls()) == 1 and run.verify().ok
    assert len(import_otlp(otlp_json(spans), other)[0]) == len(run)
