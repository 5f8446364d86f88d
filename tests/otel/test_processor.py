"""The live span processor: spans of the real OpenAI SDK and Agents SDK, traced by their real
OpenInference instrumentors, land in the recording active in their context while it runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _endpoint import MODEL, USAGE, async_openai_client, openai_client

import agentlog as al
from agentlog.events import LLMResponse, SpanEnded, SpanStarted

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
from _interop_sources import otlp_json

QUESTION = [{"role": "user", "content": "cpu=0.9, what now?"}]


def _expected_cost(model: str) -> float:
    """genai-prices' own price of the endpoint's usage (the oracle)."""
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=USAGE["prompt_tokens"], output_tokens=USAGE["completion_tokens"],
                  cache_read_tokens=USAGE["prompt_tokens_details"]["cached_tokens"])
    return float(calc_price(usage, model_ref=model, provider_id="openai").total_price)


def _spans(run: Any) -> list[tuple[str, str, str | None]]:
    """(name, kind, parent name) of each span, in start order."""
    names: dict[str, str] = {}
    out = []
    for e in run.iter_events():
        if e.type == "span.started":
            body = SpanStarted.of(e)
            names[e.span_id] = body.name
            out.append((body.name, body.kind, names.get(body.parent) if body.parent else None))
    return out


def test_spans_are_written_while_the_recording_runs(instrumented: Any, store: Any) -> None:
    client = openai_client()
    with al.recording(store=store, name="live") as rec, rec.span("triage", kind="agent"):
        client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0)
        during = store.run(rec.run_id)  # the run on disk, before the recording ends
        seen = [e.type for e in during.iter_events()]
    assert seen == ["run.started", "span.started", "span.started", "llm.request", "llm.response", "span.ended"]
    run = store.run(rec.run_id)
    assert run.verify().ok
    assert _spans(run) == [("triage", "agent", None), ("ChatCompletion", "llm", "triage")]
    [call] = [e for e in run.iter_events() if e.type == "llm.response"]
    body = LLMResponse.of(call)
    assert (call.model, call.input_tokens, call.output_tokens, call.cached_tokens) == (f"{MODEL}-2024-07-18", 42, 4, 10)
    assert body.cost_source == "computed" and call.cost_usd == _expected_cost(f"{MODEL}-2024-07-18")
    assert body.message == {"role": "assistant", "content": "restart the api"}
    request = run.event(call.caused_by)
    assert request.type == "llm.request" and request.payload["messages"] == QUESTION
    assert request.payload["params"]["temperature"] == 0
    started = next(e for e in run.iter_events() if e.type == "span.started" and e.span_id == call.span_id)
    assert "trace_id" not in SpanStarted.of(started).otel  # random ids would break a replay
    assert SpanStarted.of(started).attributes["openinference.span.kind"] == "LLM"


def test_a_span_outside_any_recording_is_not_written(instrumented: Any, store: Any) -> None:
    openai_client().chat.completions.create(model=MODEL, messages=QUESTION)
    assert store.list_runs() == []
    with al.recording(store=store, name="after") as rec:
        pass
    assert [e.type for e in store.run(rec.run_id).iter_events()] == ["run.started", "run.finished"]


def test_concurrent_recordings_each_get_their_own_spans(instrumented: Any, store: Any) -> None:
    client = async_openai_client()

    async def one(name: str) -> str:
        with al.recording(store=store, name=name) as rec:
            for _ in range(2):
                await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": name}])
                await asyncio.sleep(0)
        return rec.run_id

    async def both() -> list[str]:
        return list(await asyncio.gather(one("a"), one("b")))

    for run_id, name in zip(asyncio.run(both()), "ab", strict=True):
        run = store.run(run_id)
        requests = [e.payload["messages"] for e in run.iter_events() if e.type == "llm.request"]
        assert requests == [[{"role": "user", "content": name}]] * 2
        assert len(run.llm_calls()) == 2 and run.verify().ok


def test_two_instrumentors_on_one_call_count_once(instrumented: Any, store: Any, tmp_path: Any,
                                                 fresh_loop: None) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()  # the same spans, for the import below
    instrumented.provider.add_span_processor(SimpleSpanProcessor(memory))

    @function_tool
    def restart(service: str) -> str:
        """Restart a service."""
        return f"restarted {service}"

    agent = Agent(name="sre", instructions="You are an SRE.", tools=[restart],
                  model=OpenAIChatCompletionsModel(model=MODEL, openai_client=async_openai_client()))
    with al.recording(store=store, name="agents") as rec:
        result = Runner.run_sync(agent, "cpu=0.9, what now?")
    assert result.final_output == "restart the api"
    run = store.run(rec.run_id)
    llm_spans = [w for w in instrumented.processor.written(run.id) if w.kind == "llm"]
    assert len(llm_spans) == 4  # the Agents SDK's generation span around each OpenAI client span
    assert [len(w.call_seqs) for w in llm_spans] == [0, 2, 0, 2]  # the inner one writes the call
    calls = run.llm_calls()
    assert len(calls) == 2 and [e.type for e in run.iter_events()].count("llm.response") == 2
    assert calls["cost_usd"].sum() == 2 * _expected_cost(f"{MODEL}-2024-07-18")
    spans = _spans(run)
    assert ("sre", "agent") in [(n, k) for n, k, _ in spans]
    assert ("restart", "tool", "turn") in spans
    [result_event] = [e for e in run.iter_events() if e.type == "tool.result"]
    assert result_event.payload["result"] == "restarted api"
    call = run.event(result_event.caused_by)
    assert call.type == "tool.call" and call.payload["args"] == {"service": "api"}
    # the import of the same spans counts each call once too
    spans = list(memory.get_finished_spans())
    memory.shutdown()
    [imported] = al.interop.import_otlp(otlp_json(spans), al.Store(tmp_path / "imported"))
    assert [e.type for e in imported.iter_events()].count("llm.response") == 2
    assert imported.llm_calls()["cost_usd"].sum() == calls["cost_usd"].sum()
    assert len([e for e in imported.iter_events() if e.type == "span.started"]) == len(spans)


def test_each_span_joins_one_transport_call_and_joined_calls_are_let_go(instrumented: Any, store: Any) -> None:
    """Many calls one after the other, then several at once in one recording: one row each
    (the span joined to the transport's call), and the join's list lets joined calls go."""
    import httpx
    import openai
    from _endpoint import chat

    from agentlog.capture.transport import model_calls

    async def handle(request: httpx.Request) -> httpx.Response:
        await request.aread()
        return chat(request)

    async def calls(rec: Any) -> None:
        client = openai.AsyncOpenAI(api_key="test", base_url="http://llm.test/v1", http_client=al.transport.async_client(
            rec, transport=httpx.MockTransport(handle)))

        async def ask(text: str) -> Any:
            return await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}])

        for i in range(12):
            await ask(f"one {i}")
        await asyncio.gather(*(ask(f"together {i}") for i in range(5)))

    with al.recording(store=store, name="many") as rec:
        asyncio.run(calls(rec))
        left = list(model_calls(rec))
    run = store.run(rec.run_id)
    rows = run.llm_calls()
    assert len(rows) == 17 and [e.type for e in run.iter_events()].count("llm.response") == 17
    # every call joined; those joined before the last join were let go (the list is cut at a join)
    assert all(call.joined for call in left) and len(left) <= 5
    llm_spans = [w for w in instrumented.processor.written(run.id) if w.kind == "llm"]
    assert len(llm_spans) == 17 and all(w.call_seqs == [] for w in llm_spans)  # none wrote a call of its own


GENAI_CALL = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": MODEL,
              "gen_ai.response.model": MODEL, "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3}


def _rows_of_two_flows(rec: Any, store: Any) -> Any:
    """The model calls of ``rec``'s run: its own span's call (7 tokens in) and the other flow's (42)."""
    run = store.run(rec.run_id)
    return sorted(run.llm_calls()["input_tokens"].tolist())


def test_an_llm_span_of_one_thread_is_not_taken_for_another_threads_call(instrumented: Any, store: Any) -> None:
    """An ``llm`` span open in one thread, with no HTTP call of its own (a cached answer, a local
    model), while another thread's instrumented call goes through the transport and ends first:
    each is its own row. Only a call asked in the span's own flow (or, for a span a framework
    opened from a thread pool, a task's) is taken for the span's."""
    import contextvars
    import threading

    import httpx
    import openai
    from _endpoint import chat
    from opentelemetry import trace

    tracer = trace.get_tracer("test")
    opened, asked = threading.Event(), threading.Event()

    def cached() -> None:
        with tracer.start_as_current_span("cached chat", attributes=GENAI_CALL):
            opened.set()
            assert asked.wait(10)

    def call(rec: Any) -> None:
        assert opened.wait(10)
        client = openai.OpenAI(api_key="test", base_url="http://llm.test/v1",
                               http_client=al.transport.client(rec, transport=httpx.MockTransport(chat)))
        client.chat.completions.create(model=MODEL, messages=QUESTION)
        asked.set()

    with al.recording(store=store, name="two threads") as rec:
        threads = [threading.Thread(target=contextvars.copy_context().run, args=(cached,)),
                   threading.Thread(target=contextvars.copy_context().run, args=(call, rec))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    assert _rows_of_two_flows(rec, store) == [GENAI_CALL["gen_ai.usage.input_tokens"], USAGE["prompt_tokens"]]


def test_an_llm_span_of_one_task_is_not_taken_for_another_tasks_call(instrumented: Any, store: Any) -> None:
    """The same with two asyncio tasks of one loop (one thread): the span's task asked no call."""
    import httpx
    import openai
    from _endpoint import chat
    from opentelemetry import trace

    tracer = trace.get_tracer("test")

    async def handle(request: httpx.Request) -> httpx.Response:
        await request.aread()
        return chat(request)

    async def both(rec: Any) -> None:
        opened, asked = asyncio.Event(), asyncio.Event()

        async def cached() -> None:
            with tracer.start_as_current_span("cached chat", attributes=GENAI_CALL):
                opened.set()
                await asked.wait()

        async def call() -> None:
            await opened.wait()
            client = openai.AsyncOpenAI(api_key="test", base_url="http://llm.test/v1", http_client=al.transport.async_client(
                rec, transport=httpx.MockTransport(handle)))
            await client.chat.completions.create(model=MODEL, messages=QUESTION)
            asked.set()

        await asyncio.gather(cached(), call())

    with al.recording(store=store, name="two tasks") as rec:
        asyncio.run(both(rec))
    assert _rows_of_two_flows(rec, store) == [GENAI_CALL["gen_ai.usage.input_tokens"], USAGE["prompt_tokens"]]


def test_what_a_span_tells_at_its_end_is_its_span_ended(store: Any, tmp_path: Path) -> None:
    """A framework that sets a span's attributes as it ends (LangChain's instrumentor does: its
    input, output and kind): the attributes set or changed after the start are the
    ``span.ended``'s, the kind they tell is the span's in ``run.spans()`` and in the OTLP export,
    and a strict replay does not compare them (they can hold values new on every run), while it
    still compares the rest of the ``span.ended``."""
    import uuid

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider()
    provider.add_span_processor(al.otel.SpanProcessor())
    tracer = provider.get_tracer("framework")
    fail = [False]

    def program(rec: Any) -> str:
        with tracer.start_as_current_span("Planner", attributes={"input.mime_type": "text/plain"}) as span:
            span.set_attributes({"openinference.span.kind": "AGENT", "input.mime_type": "text/plain",
                                 "output.value": "restart the api", "message.id": str(uuid.uuid4())})
            if fail[0]:
                span.set_status(Status(StatusCode.ERROR, "changed"))
        return "done"

    run = al.record(program, store=store, name="set at the end")
    [started] = [SpanStarted.of(e) for e in run.iter_events() if e.type == "span.started"]
    [ended] = [SpanEnded.of(e) for e in run.iter_events() if e.type == "span.ended"]
    assert started.kind == "chain" and started.attributes == {"input.mime_type": "text/plain"}
    assert ended.kind == "agent"  # what the attributes tell once set
    assert ended.attributes is not None and set(ended.attributes) == {"openinference.span.kind", "output.value",
                                                                      "message.id"}
    assert run.spans()["kind"].tolist() == ["agent"]
    exported = [{a["key"]: a["value"] for a in s["attributes"]}
                for s in al.interop.export_otlp(run)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    [exported] = [a for a in exported if a.get("agentlog.span.name") == {"stringValue": "Planner"}]
    assert exported["agentlog.span.kind"] == {"stringValue": "agent"}
    assert exported["output.value"] == {"stringValue": "restart the api"}
    assert exported["openinference.span.kind"] == {"stringValue": "AGENT"}
    assert al.replay(program, run).ok  # a new message id: not compared
    fail[0] = True
    diverged = al.replay(program, run)
    assert not diverged.ok and diverged.divergence is not None and "status" in str(diverged.divergence)


def test_what_a_span_saw_of_an_exception_is_not_compared_on_replay(store: Any) -> None:
    """A framework's span that records an exception (LangGraph's ``interrupt()`` raises one
    whose message holds an id new on every run) and a span event with attributes new on every
    run: a strict replay compares the exception's type and the event's name, not what the
    tracer saw of them (a message, a traceback whose paths and line numbers move with any edit
    of the code, an event's attributes), while a span that records another exception type
    diverges."""
    import uuid

    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(al.otel.SpanProcessor())
    tracer = provider.get_tracer("framework")
    raised: list[type[Exception]] = [LookupError]

    def program(rec: Any) -> str:
        with contextlib.suppress(LookupError), tracer.start_as_current_span("review") as span:
            span.add_event("checkpoint", {"checkpoint.id": str(uuid.uuid4())})
            raise raised[0](f"Interrupt(id={uuid.uuid4().hex!r})")  # caught, as LangGraph catches its own
        return "paused"

    run = al.record(program, store=store, name="interrupted")
    [error] = [e for e in run.iter_events() if e.type == "error"]
    assert error.payload["type"] == "LookupError" and "Interrupt(id=" in error.payload["error"]
    [event] = [e for e in run.iter_events() if e.type == "span.event"]
    assert event.payload["name"] == "checkpoint"
    result = al.replay(program, run)  # another id in the message and in the event: not compared
    assert result.ok, str(result.divergence)

    raised[0] = KeyError  # another exception: what the program did changed
    diverged = al.replay(program, run)
    assert not diverged.ok and diverged.divergence is not None and diverged.divergence.seq == error.seq


def test_the_join_hook_sees_each_model_call_once(instrumented: Any, store: Any) -> None:
    seen: list[tuple[str, list[str]]] = []

    def join(rec: Any, span: Any, outs: Any) -> list[Any]:
        seen.append((rec.run_id, [o.type for o in outs]))
        return []  # as if the HTTP transport had written this call already

    default, instrumented.processor.join = instrumented.processor.join, join
    try:
        with al.recording(store=store, name="joined") as rec:
            openai_client().chat.completions.create(model=MODEL, messages=QUESTION)
    finally:
        instrumented.processor.join = default
    assert seen == [(rec.run_id, ["llm.request", "llm.response"])]
    types = [e.type for e in store.run(rec.run_id).iter_events()]
    assert "llm.response" not in types and types.count("span.started") == 1
    [written] = instrumented.processor.written(rec.run_id)
    assert written.kind == "llm" and written.call_seqs == [] and written.ended_seq == len(types) - 2


def test_a_recording_with_live_spans_replays_strictly(instrumented: Any, store: Any) -> None:
    import httpx
    import openai
    from _endpoint import chat

    def program(rec: Any) -> str:
        client = openai.OpenAI(api_key="test", base_url="http://llm.test/v1",
                               http_client=al.transport.client(rec, transport=httpx.MockTransport(chat)))
        with rec.span("triage", kind="agent"):
            answer = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0)
        return str(answer.choices[0].message.content)

    run = al.record(program, store=store, name="replayable")
    assert [e.type for e in run.iter_events()].count("llm.response") == 1
    result = al.replay(program, run)
    assert result.ok, str(result.divergence)
    assert result.result == "restart the api"


def test_instrument_turns_on_the_openinference_instrumentors_only() -> None:
    from importlib import metadata

    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as GenAIOpenAIInstrumentor

    installed = {ep.name for ep in metadata.entry_points(group="openinference_instrumentor")}
    handle = al.instrument()
    try:
        # every OpenInference instrumentor this environment installs (its libraries are installed too)
        assert set(handle.instrumented) == installed >= {"openai", "openai_agents", "langchain", "anthropic"}
        assert not GenAIOpenAIInstrumentor().is_instrumented_by_opentelemetry  # opentelemetry group: by name
    finally:
        handle.uninstrument()


def test_uninstrument_stops_writing(store: Any) -> None:
    handle = al.instrument(instrumentors=["openinference-instrumentation-openai"])
    assert handle.instrumented == ["openai"] and handle.processor.enabled
    again = al.instrument(instrumentors=["openinference-instrumentation-openai"])
    assert again.processor is handle.processor and again.already == ["openai"]
    handle.uninstrument()
    with al.recording(store=store, name="plain") as rec:
        openai_client().chat.completions.create(model=MODEL, messages=QUESTION)
    assert [e.type for e in store.run(rec.run_id).iter_events()] == ["run.started", "run.finished"]


def test_an_unknown_instrumentor_lists_the_installed_ones() -> None:
    import pytest

    with pytest.raises(KeyError, match="no instrumentor 'nope' is installed; installed: .*openai"):
        al.instrument(instrumentors=["nope"])


def test_a_span_that_outlives_its_recording_loses_only_its_end(instrumented: Any, store: Any,
                                                               caplog: Any) -> None:
    tracer = instrumented.provider.get_tracer("test")
    with al.recording(store=store, name="short") as rec:
        span = tracer.start_span("background job")
    span.end()  # after the run was closed: nothing to write into, and no error for the program
    types = [e.type for e in store.run(rec.run_id).iter_events()]
    assert types == ["run.started", "span.started", "run.finished"]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "WARNING")]


def test_spans_under_a_root_are_held_briefly_and_the_root_end_writes_them(store: Any) -> None:
    import time

    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(al.otel.SpanProcessor())
    tracer = provider.get_tracer("held")

    def on_disk(run_id: str) -> list[str]:
        return [e.type for e in al.Store(store.path).run(run_id).iter_events()]  # another reader

    with al.recording(store=store, name="held") as rec:
        with tracer.start_as_current_span("flat"):
            pass
        assert on_disk(rec.run_id)[-2:] == ["span.started", "span.ended"]  # a root span: written at its end
        with tracer.start_as_current_span("agent"):
            for i in range(3):
                with tracer.start_as_current_span(f"step {i}"):
                    pass
            deadline = time.monotonic() + 30  # held for one write: the writer's thread writes them
            while on_disk(rec.run_id).count("span.ended") < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert on_disk(rec.run_id).count("span.ended") == 4  # the steps, while the agent span is open
        assert on_disk(rec.run_id).count("span.ended") == 5  # the root's end wrote at once
    run = store.run(rec.run_id)
    assert run.verify().ok
    assert _spans(run) == [("flat", "chain", None), ("agent", "chain", None)] + [
        (f"step {i}", "chain", "agent") for i in range(3)]


def test_a_tool_traced_by_a_framework_and_recorded_by_al_tool_is_one_row(instrumented: Any, store: Any) -> None:
    import json

    processor = instrumented.processor
    tracer = instrumented.provider.get_tracer("tools")

    @al.tool
    def lookup(service: str) -> str:
        return f"{service} ok"

    def traced(convention: str, service: str, inner: bool = True) -> Any:
        """A framework's tool span (OpenInference TOOL or GenAI execute_tool) around the tool."""
        attributes = ({"openinference.span.kind": "TOOL", "tool.name": "lookup",
                       "input.value": json.dumps({"service": service})} if convention == "oi" else
                      {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                       "gen_ai.tool.call.arguments": json.dumps({"service": service})})
        with tracer.start_as_current_span("lookup", attributes=attributes) as span:
            result = lookup(service) if inner else f"{service} ok"
            span.set_attribute("output.value" if convention == "oi" else "gen_ai.tool.call.result", result)
        return result

    def program(rec: Any) -> list[str]:
        out = [traced("oi", "api"), traced("genai", "db")]
        with rec.span("plain", kind="agent"):
            out.append(traced("oi", "web", inner=False))  # traced only: the span's call is the row
        return out

    run = al.record(program, store=store, name="tools")
    calls = [e for e in run.iter_events() if e.type == "tool.call"]
    results = [e for e in run.iter_events() if e.type == "tool.result"]
    assert [c.payload["args"]["service"] for c in calls] == ["api", "db", "web"]
    assert [r.payload["result"] for r in results] == ["api ok", "db ok", "web ok"]
    assert [r.caused_by for r in results] == [c.seq for c in calls]
    tool_spans = [w for w in processor.written(run.id) if w.kind == "tool"]
    assert [len(w.call_seqs) for w in tool_spans] == [0, 0, 2]  # only the traced-only span wrote its call
    for call, span in zip(calls[:2], tool_spans, strict=False):  # @al.tool's span nests under the framework's
        assert run.event(int(call.span_id[1:])).payload["parent"] == span.span_id
    assert run.verify().ok
    assert al.replay(program, run).ok  # the replay joins them the same way

    # the other nesting: a framework's tool span inside the recorded tool (what runs inside a
    # recorded tool is not run again on replay, so this one is not replayed)
    with al.recording(store=store, name="inside") as rec:
        assert al.tool(name="lookup")(lambda service: traced("oi", service, inner=False))("cache") == "cache ok"
    inside = store.run(rec.run_id)
    assert [e.type for e in inside.iter_events()].count("tool.call") == 1
    assert [e.payload["result"] for e in inside.iter_events() if e.type == "tool.result"] == ["cache ok"]
    [span] = [w for w in processor.written(rec.run_id) if w.kind == "tool"]
    assert span.call_seqs == []


def test_a_fork_refuses_to_edit_what_a_traced_span_reported(instrumented: Any, store: Any) -> None:
    """A tool a framework runs in its own code (the Agents SDK's handoff) is written from its
    span, as the framework saw it: the program was never served that result from the log, so a
    fork could not serve it changed. Editing it is refused before anything is written, naming
    the seq and the span, and the fork panel says so; a tool the recorder ran stays editable."""
    from agentlog.capture.forkplan import applicability

    tracer = instrumented.provider.get_tracer("tools")

    @al.tool
    def lookup(service: str) -> str:
        return f"{service} ok"

    def program(rec: Any) -> str:
        with tracer.start_as_current_span("handoff", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "handoff", "input.value": "triage"}) as span:
            span.set_attribute("output.value", "sre")  # what the framework decided, in its own code
        return lookup("api")

    run = al.record(program, store=store, name="handoff")
    traced, recorded = [e for e in run.iter_events() if e.type == "tool.result"]
    assert traced.payload["result"] == "sre" and recorded.payload["result"] == "api ok"
    runs = len(store.runs())

    with pytest.raises(ValueError, match=rf"replace_response\(seq={traced.seq}\).*traced span "
                                         rf"{traced.span_id} \('handoff'\)"):
        al.fork(run, 0, program=program, edit=al.edit.replace_response(traced.seq, {"result": "billing"}))
    assert len(store.runs()) == runs  # refused before a fork was made
    why = applicability(run, traced.seq, "tool_result")
    assert why is not None and f"seq {traced.seq}" in why and "traced span" in why

    assert applicability(run, recorded.seq, "tool_result") is None
    fork = al.fork(run, 0, program=program, edit=al.edit.replace_response(recorded.seq, {"result": "api down"}))
    assert fork.event(len(fork) - 1).payload["result"] == "api down"


@pytest.mark.usefixtures("no_background_write")
def test_force_flush_writes_the_held_spans(store: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(al.otel.SpanProcessor())
    tracer = provider.get_tracer("flush")

    def on_disk(run_id: str) -> list[str]:
        return [e.type for e in al.Store(store.path).run(run_id).iter_events()]

    with al.recording(store=store, name="flush", durability="none") as rec, tracer.start_as_current_span("agent"):
        with tracer.start_as_current_span("step"):
            pass
        assert on_disk(rec.run_id) == ["run.started"]  # held
        assert provider.force_flush()
        assert on_disk(rec.run_id) == ["run.started", "span.started", "span.started", "span.ended"]


def test_a_live_span_keeps_the_redaction_and_blobs_of_every_event(store: Any) -> None:
    """A secret in a span attribute is redacted before it is hashed; a long attribute stays in
    its ``span.started`` (an instrumentor's ``input.value`` is unique to its span: a blob file
    would cost fsyncs at every span's start) up to ``INLINE_MAX``, and goes to a blob past it;
    the same for its ``span.ended`` (a long status message, the attributes set at the end):
    the live processor's events are prepared like any other."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Status, StatusCode

    from agentlog.store.writer import INLINE_MAX

    provider = TracerProvider()
    provider.add_span_processor(al.otel.SpanProcessor())
    tracer = provider.get_tracer("secrets")
    long_text, huge, long_error = "x" * 70_000, "y" * (INLINE_MAX + 1), "boom " * 20_000
    secrets = {"api_key": "sk-SECRET", "session_id": "s-SECRET", "url": "https://h.test/v1?key=K-SECRET&q=1"}
    with al.recording(store=store, name="secrets", redact=["session_id"]) as rec, \
            tracer.start_as_current_span("outer", attributes=secrets) as outer_span, \
            tracer.start_as_current_span("inner", attributes={"prompt": long_text, "doc": huge}) as inner:
        inner.set_status(Status(StatusCode.ERROR, long_error))
        outer_span.set_attributes({"output.value": long_text, "password": "p-SECRET", "report": huge})
    run = store.run(rec.run_id)
    assert run.verify().ok
    started = {SpanStarted.of(e).name: SpanStarted.of(e) for e in run.iter_events() if e.type == "span.started"}
    outer = started["outer"].attributes
    assert outer["api_key"] == outer["session_id"] == "[REDACTED]"
    assert outer["url"] == "https://h.test/v1?key=%5BREDACTED%5D&q=1"
    assert started["inner"].attributes["prompt"] == long_text  # in the event itself
    assert started["inner"].attributes["doc"].text() == huge  # a blob, read back whole
    [failed] = [e for e in run.iter_events() if e.type == "span.ended" and e.payload["status"] == "error"]
    assert failed.payload["error"] == long_error  # in the event itself
    [ended] = [SpanEnded.of(e) for e in run.iter_events() if e.type == "span.ended" and e.payload["name"] == "outer"]
    assert ended.attributes is not None and set(ended.attributes) == {"output.value", "password", "report"}
    assert ended.attributes["output.value"] == long_text and ended.attributes["password"] == "[REDACTED]"
    assert ended.attributes["report"].text() == huge
    stored = "".join(json.dumps(e.payload, default=repr) for e in run.iter_events())
    assert "SECRET" not in stored and huge not in stored
    assert len([p for p in (store.path / "blobs").rglob("*") if p.is_file()]) == 1  # doc and report: one blob


@pytest.mark.usefixtures("no_background_write")  # fsyncs counted exactly
def test_an_instrumented_model_call_costs_one_fsync(instrumented: Any, store: Any, fsyncs: list[int]) -> None:
    """With the default durability an instrumented model call makes the one fsync of its
    answer: the instrumentor's span (a root span) is written when it ends, to the OS (a reader
    sees it at once), and fsynced by the next write that syncs, not on its own."""
    import httpx
    import openai
    from _endpoint import chat

    def on_disk(run_id: str) -> list[str]:
        return [e.type for e in al.Store(store.path).run(run_id).iter_events()]  # another reader

    with al.recording(store=store, name="instrumented") as rec:
        client = openai.OpenAI(api_key="test", base_url="http://llm.test/v1",
                               http_client=al.transport.client(rec, transport=httpx.MockTransport(chat)))
        fd = rec._sink.writer._wal._fd
        fsyncs.clear()
        client.chat.completions.create(model=MODEL, messages=QUESTION)
        one = fsyncs.count(fd)
        assert on_disk(rec.run_id)[-1] == "span.ended"  # the span's end, written at once
        client.chat.completions.create(model=MODEL, messages=QUESTION)
        two = fsyncs.count(fd)
        assert instrumented.processor.force_flush()  # the second span's end: fsynced now
        flushed = fsyncs.count(fd)
    assert (one, two, flushed) == (1, 2, 3)
    run = store.run(rec.run_id)
    assert run.verify().ok and len(run.llm_calls()) == 2


def test_spans_written_unsynced_are_fsynced_by_the_writers_thread(store: Any, fsyncs: list[int]) -> None:
    """A root span's end, written with no fsync, is fsynced by the writer's thread
    (``HOLD_MS`` later) when nothing else syncs the run."""
    import time

    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(al.otel.SpanProcessor())
    with al.recording(store=store, name="unsynced") as rec:
        fd = rec._sink.writer._wal._fd
        fsyncs.clear()
        with provider.get_tracer("unsynced").start_as_current_span("step"):
            pass
        deadline = time.monotonic() + 30
        while fsyncs.count(fd) < 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert fsyncs.count(fd) == 1
        assert provider.force_flush()
        assert fsyncs.count(fd) == 1  # nothing left unsynced


def _callback_tracer(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Any]]:
    """A tracer whose spans are started, never made current (as LangChain's are), on a
    provider with agentlog's processor, and the list whose first span stands for the one a
    framework has open here (``FRAMEWORK_SPANS``), for this test only."""
    from opentelemetry.sdk.trace import TracerProvider

    from agentlog.capture import recorder
    from agentlog.otel import processor as module

    provider = TracerProvider()
    processor = al.otel.SpanProcessor()
    provider.add_span_processor(processor)
    here: list[Any] = []
    monkeypatch.setattr(module, "FRAMEWORK_SPANS", [lambda: here[0] if here else None])
    monkeypatch.setattr(recorder, "SPAN_PARENTS", [processor.open_span_id])
    return provider.get_tracer("callbacks"), here


def test_a_frameworks_own_span_is_the_parent_and_its_one_open_child_only(store: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A framework that keeps its open span in its own context, never the current
    OpenTelemetry span (LangChain's runs: ``FRAMEWORK_SPANS``): the recorder's spans nest under
    that span, or under its one open child (a chat model's span, whose HTTP call runs in its
    parent's context); with two children open side by side, under neither of them."""
    from opentelemetry import trace

    tracer, here = _callback_tracer(monkeypatch)

    with al.recording(store=store, name="callbacks") as rec:
        run_span = tracer.start_span("RunnableParallel")
        under = trace.set_span_in_context(run_span)
        first, second = tracer.start_span("first model", context=under), tracer.start_span("second model", context=under)
        here.append(run_span)
        with rec.span("call while both run"):
            pass
        second.end()
        with rec.span("call while one runs"):
            pass
        first.end()
        with rec.span("call after both"):
            pass
        here.clear()
        with rec.span("call outside the run"):
            pass
        run_span.end()
    assert _spans(store.run(rec.run_id)) == [
        ("RunnableParallel", "chain", None), ("first model", "chain", "RunnableParallel"),
        ("second model", "chain", "RunnableParallel"), ("call while both run", "chain", "RunnableParallel"),
        ("call while one runs", "chain", "first model"), ("call after both", "chain", "RunnableParallel"),
        ("call outside the run", "chain", None)]


def test_written_keeps_the_spans_of_the_last_runs_only(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that records run after run: :meth:`SpanProcessor.written` forgets the spans of
    the runs begun longest ago, past ``WRITTEN_RUNS_KEPT`` runs."""
    from opentelemetry.sdk.trace import TracerProvider

    from agentlog.otel import processor as module

    monkeypatch.setattr(module, "WRITTEN_RUNS_KEPT", 3)
    provider = TracerProvider()
    processor = al.otel.SpanProcessor()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("runs")
    runs = []
    for i in range(5):
        with al.recording(store=store, name=f"run {i}") as rec, tracer.start_as_current_span(f"step {i}"):
            runs.append(rec.run_id)
    assert [len(processor.written(run_id)) for run_id in runs] == [0, 0, 1, 1, 1]
    assert [w.span_id for w in processor.written(runs[-1])] == ["s1"]


def test_calls_no_span_saw_are_let_go_and_the_traced_still_join(instrumented: Any, store: Any) -> None:
    """Model calls no tracer saw (sent by a plain httpx client: no instrumentor, no span) are
    rows of their own; the join's list lets them go once no open span can join them, so the
    spans that end later do not look at every one of them, and each traced call still joins."""
    import httpx
    import openai
    from _endpoint import chat

    from agentlog.capture.transport import model_calls

    untraced = 30
    with al.recording(store=store, name="mixed") as rec:
        plain = al.transport.client(rec, transport=httpx.MockTransport(chat))
        for i in range(untraced):
            plain.post("http://llm.test/v1/chat/completions",
                       json={"model": MODEL, "messages": [{"role": "user", "content": f"plain {i}"}]})
        assert len(model_calls(rec)) == untraced  # none joined: no span saw them
        client = openai.OpenAI(api_key="test", base_url="http://llm.test/v1", http_client=plain)
        for i in range(3):
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": f"traced {i}"}])
        left = list(model_calls(rec))
    run = store.run(rec.run_id)
    assert len(run.llm_calls()) == untraced + 3
    traced = [w for w in instrumented.processor.written(run.id) if w.kind == "llm"]
    assert len(traced) == 3 and all(w.call_seqs == [] for w in traced)  # each joined its own call
    assert len(left) <= 1 and all(call.joined for call in left)


def test_of_a_frameworks_children_side_by_side_the_calling_threads_is_the_parent(
        store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parallel run's branches in threads of their own (LangChain's ``RunnableParallel``,
    sync): with two children of the framework's span open, a span the recorder opens nests
    under the one started in its own thread."""
    import threading

    from opentelemetry import trace

    tracer, here = _callback_tracer(monkeypatch)

    with al.recording(store=store, name="branches") as rec:
        run_span = tracer.start_span("RunnableParallel")
        under = trace.set_span_in_context(run_span)
        mine = tracer.start_span("this thread's model", context=under)
        theirs: list[Any] = []
        other = threading.Thread(target=lambda: theirs.append(tracer.start_span("other thread's model", context=under)))
        other.start()
        other.join()
        here.append(run_span)
        with rec.span("call in this thread"):
            pass
        mine.end()
        theirs[0].end()
        run_span.end()
    spans = _spans(store.run(rec.run_id))
    assert ("call in this thread", "chain", "this thread's model") in spans
