"""Streamed model calls: through the transport (server-sent events) and given to ``rec.llm`` as
the SDK's stream object, sync and async. The log gets one ``llm.response`` with the assembled
message and the usage the stream reported (unknown when it reported none); replay serves the
raw stream back from the log, so the SDK's iterator yields the same chunks with no request."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import warnings
from typing import Any

import openai
import pandas as pd
import pytest
from _server import ANSWERED_MODEL, MODEL, USAGE, LLMServer, expected_cost

import agentlog as al
from agentlog.events import HTTPResponse, LLMResponse

QUESTION = [{"role": "user", "content": "cpu=0.9, what now?"}]
TOOLS = [{"type": "function", "function": {"name": "restart", "description": "Restart a service.",
                                           "parameters": {"type": "object", "properties": {"service": {"type": "string"}}}}}]
USAGE_ON = {"include_usage": True}


def _chunks(stream: Any) -> list[dict[str, Any]]:
    return [chunk.model_dump(mode="json") for chunk in stream]


def test_a_stream_through_the_transport_is_one_row_and_replays_chunk_by_chunk(server: LLMServer,
                                                                              store: Any) -> None:
    def program(rec: Any) -> list[dict[str, Any]]:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            return _chunks(client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True,
                                                          stream_options=USAGE_ON))

    run = al.record(program, store=store, name="stream")
    live = run.event(len(run) - 1).payload["result"]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in live if c["choices"]) == "restart the api"
    [answer] = [e for e in run.iter_events() if e.type == "llm.response"]
    body = LLMResponse.of(answer)
    assert body.message == {"role": "assistant", "content": "restart the api"} and body.finish_reason == "stop"
    assert (answer.model, answer.input_tokens, answer.cached_tokens) == (ANSWERED_MODEL, USAGE["prompt_tokens"], 10)
    assert answer.cost_usd == expected_cost()
    assert body.streamed
    [exchange] = [e for e in run.iter_events() if e.type == "http.response"]
    raw = HTTPResponse.of(exchange).content  # the raw stream, kept in the event: no blob file of its own
    assert raw.startswith(b"data: ") and raw.rstrip().endswith(b"data: [DONE]")
    assert isinstance(exchange.payload["body"], str)
    assert not [p for p in (store.path / "blobs").rglob("*") if p.is_file()]
    assert server.requests[-1][1]["stream_options"] == USAGE_ON  # as the caller asked, unchanged

    replayed = al.replay(program, run)
    assert replayed.ok, str(replayed.divergence)
    assert replayed.result == live  # the SDK yielded the same chunks from the log
    assert len(server.requests) == 1


def test_a_stream_without_usage_has_an_unknown_cost(server: LLMServer, store: Any) -> None:
    with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client, \
            al.recording(store=store, name="no usage") as rec:
        _chunks(client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True))
    assert "stream_options" not in server.requests[-1][1]  # never asked for behind the caller's back
    run = store.run(rec.run_id)
    calls = run.llm_calls()
    assert len(calls) == 1 and calls["cost_usd"].isna().all()  # unknown, never $0
    for column in ("input_tokens", "output_tokens", "cached_tokens"):  # unknown, never 0 tokens
        assert calls[column].isna().all(), column
    [answer] = [e for e in run.iter_events() if e.type == "llm.response"]
    assert LLMResponse.of(answer).usage is None and answer.input_tokens is None
    assert run.cost()["cost_unknown_calls"].sum() == 1


@pytest.mark.parametrize("asynchronous", [False, True])
def test_rec_llm_of_a_stream_without_usage_has_unknown_tokens(server: LLMServer, store: Any,
                                                              asynchronous: bool) -> None:
    request = {"model": MODEL, "messages": QUESTION}

    def program(rec: Any) -> Any:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            answer = rec.llm(request, call=lambda req: client.chat.completions.create(**req, stream=True))
            return [answer.input_tokens, answer.output_tokens, answer.cost_usd]

    async def aprogram(rec: Any) -> Any:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            async def call(req: Any) -> Any:
                return await client.chat.completions.create(**req, stream=True)
            answer = await rec.allm(request, call=call)
            return [answer.input_tokens, answer.output_tokens, answer.cost_usd]

    run = asyncio.run(al.arecord(aprogram, store=store, name="a")) if asynchronous else \
        al.record(program, store=store, name="s")
    assert run.event(len(run) - 1).payload["result"] == [None, None, None]
    calls = run.llm_calls()
    assert calls[["input_tokens", "output_tokens", "cost_usd"]].isna().all().all()
    [answer] = [e for e in run.iter_events() if e.type == "llm.response"]
    assert LLMResponse.of(answer).streamed  # an SDK's stream object: streamed too


def test_a_streamed_tool_call_is_assembled(server: LLMServer, store: Any) -> None:
    with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client, \
            al.recording(store=store, name="tool stream") as rec:
        _chunks(client.chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS, stream=True,
                                               stream_options=USAGE_ON))
    [answer] = [e for e in store.run(rec.run_id).iter_events() if e.type == "llm.response"]
    body = LLMResponse.of(answer)
    assert body.finish_reason == "tool_calls"
    assert body.tool_calls == ({"id": "call_1", "type": "function",
                                "function": {"name": "restart", "arguments": '{"service": "api"}'}},)


def test_an_async_stream_through_the_transport(server: LLMServer, store: Any) -> None:
    async def program(rec: Any) -> list[dict[str, Any]]:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True,
                                                          stream_options=USAGE_ON)
            return [chunk.model_dump(mode="json") async for chunk in stream]

    run = asyncio.run(al.arecord(program, store=store, name="async stream"))
    assert len(run.llm_calls()) == 1 and run.llm_calls()["cost_usd"].iloc[0] == expected_cost()
    replayed = asyncio.run(al.areplay(program, run))
    assert replayed.ok and replayed.result == run.event(len(run) - 1).payload["result"]
    assert len(server.requests) == 1


@pytest.mark.parametrize("asynchronous", [False, True])
def test_rec_llm_takes_the_sdks_stream(server: LLMServer, store: Any, asynchronous: bool) -> None:
    request = {"model": MODEL, "messages": QUESTION}

    def program(rec: Any) -> str | None:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            return rec.llm(request, call=lambda req: client.chat.completions.create(
                **req, stream=True, stream_options=USAGE_ON)).content

    async def aprogram(rec: Any) -> str | None:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            async def call(req: Any) -> Any:
                return await client.chat.completions.create(**req, stream=True, stream_options=USAGE_ON)
            return (await rec.allm(request, call=call)).content

    if asynchronous:
        run = asyncio.run(al.arecord(aprogram, store=store, name="allm stream"))
        assert asyncio.run(al.areplay(aprogram, run)).ok
    else:
        run = al.record(program, store=store, name="llm stream")
        assert al.replay(program, run).ok
    assert run.event(len(run) - 1).payload["result"] == "restart the api"
    types = [e.type for e in run.iter_events()]
    assert types.count("llm.response") == 1 and "http.request" not in types  # one row: rec.llm's
    assert run.llm_calls()["cost_usd"].tolist() == [expected_cost()]
    assert len(server.requests) == 1


def test_the_program_gets_each_chunk_as_the_server_sends_it(server: LLMServer, store: Any) -> None:
    gate = server.hold_streams()  # the server sends two chunks, then waits for the test
    seen: list[str] = []
    with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client, \
            al.recording(store=store, name="live stream") as rec:
        stream = client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True,
                                                stream_options=USAGE_ON)
        for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
            if len(seen) == 2:  # got before the server sent the rest: not read whole first
                assert "llm.response" not in [e.type for e in store.run(rec.run_id).iter_events()]
                gate.set()
    assert server.gate_waited is True and "".join(seen) == "restart the api"
    run = store.run(rec.run_id)
    assert [e.type for e in run.iter_events()][1:-1] == [
        "span.started", "llm.request", "http.request", "http.response", "llm.response", "span.ended"]
    assert run.llm_calls()["cost_usd"].tolist() == [expected_cost()]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_explicit_recording_client_passes_a_stream_on_live(server: LLMServer, store: Any,
                                                              asynchronous: bool) -> None:
    """``al.transport.client(rec)`` / ``async_client(rec)``: each chunk reaches the program as the
    server sends it (the server holds the rest until the program has the first two), not once
    the stream is read whole; the answer is one row, and replays from the log."""
    gate = server.hold_streams()

    def program(rec: Any) -> str:
        parts: list[str] = []
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0,
                           http_client=al.transport.client(rec)) as client:
            for chunk in client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True,
                                                        stream_options=USAGE_ON):
                parts.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
                if len(parts) == 2 and not gate.is_set():  # live (replay serves the log's answer)
                    assert "llm.response" not in [e.type for e in store.run(rec.run_id).iter_events()]
                    gate.set()
        return "".join(parts)

    async def aprogram(rec: Any) -> str:
        parts: list[str] = []
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0,
                                      http_client=al.transport.async_client(rec)) as client:
            stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True,
                                                          stream_options=USAGE_ON)
            async for chunk in stream:
                parts.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
                if len(parts) == 2:
                    gate.set()
        return "".join(parts)

    if asynchronous:
        run = asyncio.run(al.arecord(aprogram, store=store, name="explicit async stream"))
    else:
        run = al.record(program, store=store, name="explicit stream")
    assert server.gate_waited is True and run.event(len(run) - 1).payload["result"] == "restart the api"
    assert [e.type for e in run.iter_events()].count("http.request") == 1
    assert run.llm_calls()["cost_usd"].tolist() == [expected_cost()]
    server.hold_streams().set()  # replay sends nothing; a request would not be held
    replayed = asyncio.run(al.areplay(aprogram, run)) if asynchronous else al.replay(program, run)
    assert replayed.ok and len(server.requests) == 1


def test_an_async_stream_reaches_the_program_live(server: LLMServer, store: Any) -> None:
    gate = server.hold_streams()

    async def program(rec: Any) -> str:
        parts = []
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True)
            async for chunk in stream:
                parts.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
                if len(parts) == 2:
                    gate.set()
        return "".join(parts)

    run = asyncio.run(al.arecord(program, store=store, name="async live stream"))
    assert server.gate_waited is True and run.event(len(run) - 1).payload["result"] == "restart the api"
    assert run.llm_calls()["cost_usd"].isna().all()  # no usage asked for: unknown
    assert asyncio.run(al.areplay(program, run)).ok


def test_a_stream_traced_by_the_openai_instrumentor_is_one_row(instrumented: Any, server: LLMServer,
                                                               store: Any) -> None:
    """The OpenInference OpenAI instrumentor traces streamed calls too, ending its span when the
    stream is read to its end (or closed): each streamed call, sync, async or cut short, is one
    row, paid once (unknown when the stream was closed before its usage), and replays."""
    def program(rec: Any) -> list[Any]:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            whole = _chunks(client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True,
                                                           stream_options=USAGE_ON))
            cut = client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True, stream_options=USAGE_ON)
            first = next(iter(cut)).model_dump(mode="json")
            cut.close()

        async def asynchronous() -> list[dict[str, Any]]:
            async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
                stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True,
                                                              stream_options=USAGE_ON)
                return [chunk.model_dump(mode="json") async for chunk in stream]

        return [whole, first, asyncio.run(asynchronous())]

    run = al.record(program, store=store, name="stream-traced")
    assert run.status == "finished", run.status
    calls = run.llm_calls()
    assert len(calls) == len(server.requests) == 3
    assert calls["input_tokens"].tolist()[::2] == [USAGE["prompt_tokens"]] * 2
    assert calls["cost_usd"].tolist()[::2] == pytest.approx([expected_cost()] * 2, rel=1e-12)
    assert pd.isna(calls["cost_usd"].iloc[1]) and pd.isna(calls["input_tokens"].iloc[1])  # cut: unknown, not 0
    traced = [w for w in instrumented.processor.written(run.id) if w.kind == "llm"]
    assert len(traced) == 3 and all(w.call_seqs == [] for w in traced)  # each span joined the transport's call
    assert run.cost(by=())["cost_usd"].sum() == pytest.approx(2 * expected_cost(), rel=1e-12)
    replayed = al.replay(program, run)
    assert replayed.ok, str(replayed.divergence)
    assert replayed.result == run.event(len(run) - 1).payload["result"] and len(server.requests) == 3


def test_a_span_that_ends_before_its_stream_is_still_one_row(instrumented: Any, server: LLMServer, store: Any,
                                                            fresh_loop: None) -> None:
    """The Agents SDK streaming from the Responses API, traced by the OpenAI instrumentor,
    which ends its span of the call before the stream it wraps ends: the transport's call,
    asked while the span was open and answered after it ended, is still the span's. One row
    per call, with tokens and cost, not a second row of the span's own with none."""
    from agents import Agent, OpenAIResponsesModel, Runner

    async def program(rec: Any) -> str:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            agent = Agent(name="sre", instructions="You are an SRE.",
                          model=OpenAIResponsesModel(model=MODEL, openai_client=client))
            streamed = Runner.run_streamed(agent, "cpu=0.9, what now?")
            async for _ in streamed.stream_events():
                pass
            return str(streamed.final_output)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the instrumentor's own: a coroutine it never awaits
        run = asyncio.run(al.arecord(program, store=store, name="responses stream traced"))
    assert run.event(len(run) - 1).payload["result"] == "restart the api"
    [ended_early] = [w for w in instrumented.processor.written(run.id) if w.kind == "llm" and w.ended_seq is not None
                     and w.ended_seq < run.llm_calls()["seq"].iloc[0]]
    assert ended_early.call_seqs == []  # it wrote no call of its own
    calls = run.llm_calls()
    assert len(calls) == len(server.requests) == 1
    assert calls["input_tokens"].tolist() == [42] and calls["cost_usd"].notna().all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        replayed = asyncio.run(al.areplay(program, run))  # joined the same way, with no request
    assert replayed.ok, str(replayed.divergence)
    assert len(server.requests) == 1


def test_a_call_in_flight_is_not_taken_by_another_threads_span(instrumented: Any, server: LLMServer,
                                                               store: Any) -> None:
    """A model span of one thread that makes no HTTP call (an answer from a cache of its own)
    ends while another thread's streamed call is in flight: that call is not the span's; the
    span writes its own call, and the other call is one row of its own."""
    tracer = instrumented.provider.get_tracer("cache")
    gate = server.hold_streams()
    asked, ended = threading.Event(), threading.Event()

    def streaming() -> str:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            stream = client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True, stream_options=USAGE_ON)
            asked.set()
            ended.wait(10)
            gate.set()
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    def program(rec: Any) -> str:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            with tracer.start_as_current_span("cached answer", attributes={
                    "openinference.span.kind": "LLM", "llm.model_name": MODEL,
                    "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": "from the cache"}):
                future = pool.submit(contextvars.copy_context().run, streaming)
                asked.wait(10)
            ended.set()
            return future.result()

    run = al.record(program, store=store, name="in flight")
    assert run.event(len(run) - 1).payload["result"] == "restart the api"
    calls = run.llm_calls()
    assert len(calls) == 2 and len(server.requests) == 1
    answers = [LLMResponse.of(run.event(seq)).message["content"] for seq in calls["seq"]]
    assert sorted(answers) == ["from the cache", "restart the api"]
    spans = {run.event(w.started_seq).payload["name"]: w for w in instrumented.processor.written(run.id)}
    assert len(spans["cached answer"].call_seqs) == 2  # the span wrote its own call
    assert spans["ChatCompletion"].call_seqs == []  # the OpenAI instrumentor's span joined the transport's


def test_a_gemini_stream_from_the_google_genai_sdk(server: LLMServer, store: Any) -> None:
    """Google's ``google-genai`` SDK streaming ``generate_content_stream`` (``:streamGenerateContent``,
    server-sent events) through the transport: one row with the usage of the last chunk, priced
    by genai-prices, and a replay whose iterator yields the same texts with no request."""
    from _server import GEMINI_USAGE
    from genai_prices import calc_price, extract_usage
    from google import genai
    from google.genai import types

    root = server.url.removesuffix("/v1")

    def program(rec: Any) -> list[str]:
        client = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=root, api_version="v1beta"))
        return [str(chunk.text) for chunk in client.models.generate_content_stream(
            model="gemini-1.5-flash", contents="cpu=0.9, what now?")]

    run = al.record(program, store=store, name="gemini-stream")
    live = run.event(len(run) - 1).payload["result"]
    assert "".join(live) == "restart the api" and len(live) == 3
    [answer] = [e for e in run.iter_events() if e.type == "llm.response"]
    usage = extract_usage({"usageMetadata": GEMINI_USAGE}, provider_id="google").usage
    price = float(calc_price(usage, model_ref="gemini-1.5-flash", provider_id="google").total_price)
    assert (answer.model, answer.input_tokens, answer.cached_tokens) == (
        "gemini-1.5-flash", GEMINI_USAGE["promptTokenCount"], GEMINI_USAGE["cachedContentTokenCount"])
    assert answer.cost_usd == pytest.approx(price, rel=1e-12) and LLMResponse.of(answer).streamed
    assert LLMResponse.of(answer).message == {"role": "assistant", "content": "restart the api"}
    replayed = al.replay(program, run)
    assert replayed.ok, str(replayed.divergence)
    assert replayed.result == live and len(server.requests) == 1
