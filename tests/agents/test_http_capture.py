"""Every httpx request inside a recording is recorded, by any client, with no change to the
program; a model endpoint's request is an LLM call with tokens and cost; replay serves it all
from the log with zero requests to the server."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest
from _server import ANSWERED_MODEL, MODEL, USAGE, LLMServer, expected_cost

import agentlog as al
from agentlog.capture import transport
from agentlog.events import LLMResponse

QUESTION = [{"role": "user", "content": "cpu=0.9, what now?"}]


def _types(run: Any) -> list[str]:
    return [e.type for e in run.iter_events()]


def test_a_client_made_before_the_recording_is_recorded(server: LLMServer, store: Any) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="sk-secret-1", max_retries=0)
    with client, al.recording(store=store, name="plain") as rec:
        answer = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0)
    assert answer.choices[0].message.content == "restart the api"
    run = store.run(rec.run_id)
    assert _types(run) == ["run.started", "span.started", "llm.request", "http.request", "http.response",
                           "llm.response", "span.ended", "run.finished"]
    calls = run.llm_calls()
    assert len(calls) == 1
    row = calls.iloc[0]
    assert (row["model"], row["input_tokens"], row["output_tokens"], row["cached_tokens"]) == (
        ANSWERED_MODEL, USAGE["prompt_tokens"], USAGE["completion_tokens"], 10)
    assert row["cost_usd"] == expected_cost()
    http = run.event(3)
    assert http.payload["headers"]["authorization"] == "[REDACTED]"
    assert "sk-secret-1" not in str([e.payload for e in run.iter_events()])
    request = run.event(2)
    assert request.payload["messages"] == QUESTION and request.payload["params"] == {"temperature": 0}
    assert run.verify().ok


def test_requests_outside_a_recording_pass_through(server: LLMServer, store: Any) -> None:
    with al.recording(store=store, name="install"):
        pass
    assert transport.installed()
    response = httpx.get(server.url.replace("/v1", "/nowhere"))
    assert response.status_code == 501  # the server's own answer to a GET: untouched
    assert len(store.list_runs()) == 1


def test_capture_http_false_records_nothing(server: LLMServer, store: Any) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
    with client, al.recording(store=store, name="off", capture_http=False) as rec:
        client.chat.completions.create(model=MODEL, messages=QUESTION)
    assert _types(store.run(rec.run_id)) == ["run.started", "run.finished"]
    assert len(server.requests) == 1


def test_strict_replay_sends_no_request(server: LLMServer, store: Any) -> None:
    def program(rec: Any) -> str:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            first = client.chat.completions.create(model=MODEL, messages=QUESTION)
        page = httpx.post(server.url + "/nothing-here", json={"q": 1})  # plain HTTP: http.* only
        return f"{first.choices[0].message.content} / {page.status_code}"

    run = al.record(program, store=store, name="replay")
    assert len(server.requests) == 2 and run.status == "finished"
    assert _types(run).count("llm.response") == 1 and _types(run).count("http.response") == 2
    before = len(server.requests)
    result = al.replay(program, run)
    assert result.ok, str(result.divergence)
    assert result.result == run.event(len(run) - 1).payload["result"]
    assert len(server.requests) == before  # zero requests: every answer came from the log


def test_permissive_replay_serves_the_answer_at_no_cost(server: LLMServer, store: Any) -> None:
    def program(rec: Any) -> str:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            return str(client.chat.completions.create(model=MODEL, messages=QUESTION).choices[0].message.content)

    run = al.record(program, store=store, name="permissive")
    again = al.replay(program, run, mode="permissive")
    assert len(server.requests) == 1 and again.served == 2  # the HTTP response and the LLM answer
    [answer] = [e for e in again.run.iter_events() if e.type == "llm.response"]
    assert LLMResponse.of(answer).cache_hit and answer.cost_usd == 0


def test_async_clients_are_recorded_and_replayed(server: LLMServer, store: Any) -> None:
    async def program(rec: Any) -> list[str]:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            async def ask(n: int) -> str:
                answer = await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": f"question {n}"}])
                return str(answer.choices[0].message.content)
            return [await ask(1), await ask(2)]

    run = asyncio.run(al.arecord(program, store=store, name="async"))
    assert len(run.llm_calls()) == 2 and len(server.requests) == 2
    assert run.llm_calls()["cost_usd"].sum() == pytest.approx(2 * expected_cost())


def test_an_explicit_recording_client_is_not_recorded_twice(server: LLMServer, store: Any) -> None:
    def program(rec: Any) -> str:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0,
                           http_client=al.transport.client(rec)) as client:
            return str(client.chat.completions.create(model=MODEL, messages=QUESTION).choices[0].message.content)

    run = al.record(program, store=store, name="explicit")
    assert _types(run).count("http.request") == 1 and len(run.llm_calls()) == 1
    assert al.replay(program, run).ok


def test_a_model_call_inside_rec_llm_is_one_row(server: LLMServer, store: Any) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)

    def program(rec: Any) -> str | None:
        return rec.llm({"model": MODEL, "messages": QUESTION},
                       call=lambda req: client.chat.completions.create(**req)).content

    with client:
        run = al.record(program, store=store, name="nested")
        assert _types(run).count("llm.response") == 1 and "http.request" not in _types(run)
        assert al.replay(program, run).ok


def test_a_failed_connection_is_recorded_and_replayed(store: Any) -> None:
    with LLMServer() as gone:
        url = gone.url
    client = openai.OpenAI(base_url=url, api_key="test", max_retries=0)

    def program(rec: Any) -> str:
        try:
            client.chat.completions.create(model=MODEL, messages=QUESTION)
        except openai.APIConnectionError:
            return "unreachable"
        return "reached"

    with client:
        run = al.record(program, store=store, name="down")
        replayed = al.replay(program, run)
    assert run.event(len(run) - 1).payload["result"] == "unreachable"
    assert [e.payload["kind"] for e in run.iter_events() if e.type == "error"] == ["http.response", "llm.response"]
    assert run.llm_calls()["cost_usd"].isna().tolist() == [True]  # no answer: cost unknown, not $0
    assert replayed.ok, str(replayed.divergence)


def test_transport_and_opentelemetry_on_one_call_make_one_row(instrumented: Any, server: LLMServer,
                                                              store: Any) -> None:
    def program(rec: Any) -> str:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client, \
                rec.span("triage", kind="agent"):
            answer = client.chat.completions.create(model=MODEL, messages=QUESTION)
        return str(answer.choices[0].message.content)

    run = al.record(program, store=store, name="both")
    kinds = [w.kind for w in instrumented.processor.written(run.id)]
    assert kinds == ["llm"]  # the OpenAI instrumentor's span was written...
    assert instrumented.processor.written(run.id)[0].call_seqs == []  # ...without a call of its own
    calls = run.llm_calls()
    assert len(calls) == 1 and calls["cost_usd"].sum() == expected_cost()  # paid once
    parents = {e.span_id: e.payload["parent"] for e in run.iter_events() if e.type == "span.started"}
    [otel_span] = instrumented.processor.written(run.id)
    assert parents[run.event(calls["seq"].iloc[0]).span_id] == otel_span.span_id  # nested in it
    before = len(server.requests)
    replayed = al.replay(program, run)
    assert replayed.ok, str(replayed.divergence)
    assert len(server.requests) == before


def test_a_divergence_inside_the_sdk_is_reported_as_the_first_difference(server: LLMServer, store: Any) -> None:
    def program(rec: Any, question: str = "cpu=0.9, what now?") -> str:
        with openai.OpenAI(base_url=server.url, api_key="test", max_retries=2) as client:
            answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}])
        return str(answer.choices[0].message.content)

    run = al.record(program, store=store, name="diverge")
    # the changed request diverges inside the SDK's HTTP call, which retries and wraps the error
    result = al.replay(lambda rec: program(rec, "cpu=0.2, what now?"), run)
    assert not result.ok and result.divergence is not None
    assert result.divergence.seq == 2 and result.divergence.expected.type == "llm.request"
    assert "cpu=0.2" in str(result.divergence)
    assert len(server.requests) == 1  # nothing went out


def _catalog_price(model: str, provider: str, response: dict[str, Any]) -> float:
    """genai-prices' own reading and price of a provider's response (the oracle)."""
    from genai_prices import calc_price, extract_usage

    usage = extract_usage(response, provider_id=provider).usage
    return float(calc_price(usage, model_ref=model, provider_id=provider).total_price)


def test_every_model_api_is_an_llm_row(server: LLMServer, store: Any) -> None:
    import anthropic
    from _server import ANTHROPIC_USAGE, GEMINI_USAGE

    root = server.url.removesuffix("/v1")
    with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as oai, \
            anthropic.Anthropic(base_url=root, api_key="test", max_retries=0) as claude, \
            al.recording(store=store, name="apis") as rec:
        oai.responses.create(model=MODEL, input="cpu=0.9, what now?")
        claude.messages.create(model="claude-3-5-haiku-20241022", max_tokens=100, messages=QUESTION)
        httpx.post(f"{root}/v1beta/models/gemini-1.5-flash:generateContent",
                   json={"contents": [{"role": "user", "parts": [{"text": "cpu=0.9"}]}]})
        httpx.post(f"{server.url}/embeddings", json={"model": "text-embedding-3-small", "input": "x"})
    run = store.run(rec.run_id)
    calls = run.llm_calls()
    assert calls["model"].tolist() == [ANSWERED_MODEL, "claude-3-5-haiku-20241022", "gemini-1.5-flash"]
    expected = [expected_cost(),
                _catalog_price("claude-3-5-haiku-20241022", "anthropic", {"usage": ANTHROPIC_USAGE}),
                _catalog_price("gemini-1.5-flash", "google", {"usageMetadata": GEMINI_USAGE})]
    assert calls["cost_usd"].tolist() == pytest.approx(expected, rel=1e-12)
    assert calls["cached_tokens"].tolist() == [10, 100, 10]
    assert [e.type for e in run.iter_events()].count("http.request") == 4  # the embeddings call: HTTP only


def test_an_azure_openai_deployment_is_an_llm_row(server: LLMServer, store: Any) -> None:
    """Azure OpenAI names the deployment in the path (``/openai/deployments/<name>/chat/completions
    ?api-version=...``): still a model call, priced by the model that answered."""
    root = server.url.removesuffix("/v1")
    with openai.AzureOpenAI(azure_endpoint=root, api_key="test", api_version="2024-10-21", max_retries=0) as azure, \
            al.recording(store=store, name="azure") as rec:
        azure.chat.completions.create(model="my-deployment", messages=QUESTION)
    assert server.requests[-1][0].startswith("/openai/deployments/my-deployment/chat/completions?api-version=")
    calls = store.run(rec.run_id).llm_calls()
    assert calls["model"].tolist() == [ANSWERED_MODEL]
    assert calls["cost_usd"].tolist() == pytest.approx([expected_cost()], rel=1e-12)


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_an_ollama_chat_is_an_llm_row_and_replays(server: LLMServer, store: Any, streamed: bool) -> None:
    """Ollama's own API (``/api/chat``, as the ``ollama`` client calls it, which LangChain's
    ChatOllama uses; JSON lines unless ``"stream": false``): one row with its counts and tool calls; a
    local model has no price in genai-prices, so its cost is unknown (warned of) unless one is
    set; replay serves the same chunks with no request."""
    import ollama
    from _server import OLLAMA_USAGE

    root = server.url.removesuffix("/v1")
    model = f"llama-local-{'streamed' if streamed else 'plain'}"  # a model no test warned of before
    tools = [{"type": "function", "function": {"name": "status", "parameters": {
        "type": "object", "properties": {"service": {"type": "string"}}}}}]

    def program(rec: Any) -> list[Any]:
        asked = [{"role": "user", "content": "cpu=0.9, what now?"}]
        with ollama.Client(host=root) as local:
            if streamed:  # each chunk as the SDK yields it
                said: Any = [c.model_dump(mode="json") for c in local.chat(model=model, messages=asked, stream=True)]
            else:
                said = str(local.chat(model=model, messages=asked).message.content)
            called = local.chat(model=model, messages=asked, tools=tools, stream=False).message.tool_calls or []
        return [said, [[c.function.name, dict(c.function.arguments)] for c in called]]

    with pytest.warns(al.errors.UnknownModelWarning, match=model):
        unpriced = al.record(program, store=store, name="ollama")
    said, called = unpriced.event(len(unpriced) - 1).payload["result"]
    text = "".join(c["message"]["content"] for c in said) if streamed else said
    assert text == "restart the api" and called == [["status", {"service": "api"}]]
    assert not streamed or len(said) == 4  # a word a chunk, and the last with the counts
    calls = unpriced.llm_calls()
    assert calls["input_tokens"].tolist() == [OLLAMA_USAGE["prompt_eval_count"]] * 2
    assert calls["output_tokens"].tolist() == [OLLAMA_USAGE["eval_count"]] * 2
    assert calls["cost_usd"].isna().all()  # unknown, never 0
    [_, asking] = [LLMResponse.of(e) for e in unpriced.iter_events() if e.type == "llm.response"]
    assert asking.message["tool_calls"][0]["function"] == {"name": "status", "arguments": {"service": "api"}}

    with al.pricing.overrides({model: {"input": 0.1, "output": 0.2}}):
        priced = al.record(program, store=store, name="ollama priced")
    expected = (OLLAMA_USAGE["prompt_eval_count"] * 0.1 + OLLAMA_USAGE["eval_count"] * 0.2) / 1e6
    assert priced.llm_calls()["cost_usd"].tolist() == pytest.approx([expected] * 2, rel=1e-12)
    sent = len(server.requests)
    replayed = al.replay(program, priced)
    assert replayed.ok, str(replayed.divergence)
    assert replayed.result == priced.event(len(priced) - 1).payload["result"] and len(server.requests) == sent


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_an_ollama_generate_is_an_llm_row_and_replays(server: LLMServer, store: Any, streamed: bool) -> None:
    """Ollama's completion API (``/api/generate``, the ollama client's ``generate``): the prompt is
    the request's user message (its ``system`` the system one), the ``response`` text the
    answer, one row with its counts; replay serves the same chunks with no request."""
    import ollama
    from _server import OLLAMA_USAGE

    root = server.url.removesuffix("/v1")

    def program(rec: Any) -> Any:
        with ollama.Client(host=root) as local:
            if streamed:
                return [c.model_dump(mode="json") for c in local.generate(
                    model="llama3.2", prompt="cpu=0.9, what now?", system="You are an SRE.", stream=True)]
            return local.generate(model="llama3.2", prompt="cpu=0.9, what now?", system="You are an SRE.").response

    with al.pricing.overrides({"llama3.2": {"input": 0.1, "output": 0.2}}):
        run = al.record(program, store=store, name="ollama generate")
    said = run.event(len(run) - 1).payload["result"]
    assert ("".join(c["response"] for c in said) if streamed else said) == "restart the api"
    [asked] = [e for e in run.iter_events() if e.type == "llm.request"]
    assert asked.payload["messages"] == [{"role": "system", "content": "You are an SRE."},
                                         {"role": "user", "content": "cpu=0.9, what now?"}]
    calls = run.llm_calls()
    assert (calls["input_tokens"].tolist(), calls["output_tokens"].tolist()) == (
        [OLLAMA_USAGE["prompt_eval_count"]], [OLLAMA_USAGE["eval_count"]])
    assert LLMResponse.of(run.event(int(calls["seq"].iloc[0]))).message["content"] == "restart the api"
    sent = len(server.requests)
    replayed = al.replay(program, run)
    assert replayed.ok, str(replayed.divergence)
    assert replayed.result == said and len(server.requests) == sent


class _AsksItself:
    """An agent whose own step asks a model with a plain httpx client (not through ``model=``),
    and whose ``model`` asks through the OpenAI SDK: the one is what ``capture_http`` decides,
    the other is a model call of the loop either way."""

    name = "asks itself"

    def __init__(self, url: str) -> None:
        self.url = url

    def next_step(self, state: Any) -> Any:
        if not state["messages"]:
            return al.CallModel({"model": MODEL, "messages": QUESTION})
        answer = httpx.post(f"{self.url}/chat/completions", json={"model": MODEL, "messages": QUESTION})
        return al.Finish({"own": answer.json()["choices"][0]["message"]["content"]})


@pytest.mark.parametrize("capture_http", [True, False])
def test_run_agent_takes_capture_http(server: LLMServer, store: Any, capture_http: bool) -> None:
    with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
        def model(request: Any) -> Any:
            return client.chat.completions.create(**request)

        kwargs = {} if capture_http else {"capture_http": False}  # on by default, as al.recording
        run = al.run_agent(_AsksItself(server.url), input={}, model=model, tools={}, store=store, **kwargs)
    assert run.status == "finished" and len(server.requests) == 2
    types = _types(run)
    assert types.count("http.request") == (1 if capture_http else 0)  # the step's own request only
    calls = run.llm_calls()
    assert len(calls) == (2 if capture_http else 1)  # the loop's model call is one row either way
    assert calls["cost_usd"].tolist() == [expected_cost()] * len(calls)


def test_an_anthropic_call_traced_by_its_instrumentor_is_one_row(server: LLMServer, store: Any) -> None:
    """The OpenInference Anthropic instrumentor's LLM span around a ``messages.create`` (plain
    and streamed) joins the call the transport wrote: one row each, priced by genai-prices from
    the usage Anthropic's API sent, and the span's own copy of the call is not written."""
    import anthropic
    from _server import ANTHROPIC_USAGE

    handle = al.instrument(instrumentors=["openinference-instrumentation-anthropic"])
    try:
        assert handle.instrumented == ["anthropic"], handle
        root = server.url.removesuffix("/v1")
        with anthropic.Anthropic(base_url=root, api_key="test", max_retries=0) as claude, \
                al.recording(store=store, name="claude") as rec:
            claude.messages.create(model="claude-3-5-haiku-20241022", max_tokens=100, messages=QUESTION)
            with claude.messages.stream(model="claude-3-5-haiku-20241022", max_tokens=100, messages=QUESTION) as stream:
                text = "".join(stream.text_stream)
        run = store.run(rec.run_id)
        calls = run.llm_calls()
        price = _catalog_price("claude-3-5-haiku-20241022", "anthropic", {"usage": ANTHROPIC_USAGE})
        assert len(calls) == len(server.requests) == 2 and text
        assert calls["cost_usd"].tolist() == pytest.approx([price, price], rel=1e-12)
        # the instrumentor opens two spans a call (its wrapper's and the client method's): none
        # writes a call of its own
        traced = [w for w in handle.processor.written(run.id) if w.kind == "llm"]
        assert len(traced) >= 2 and all(w.call_seqs == [] for w in traced)
        assert run.cost(by=())["cost_usd"].sum() == pytest.approx(2 * price, rel=1e-12)
        before = len(server.requests)

        def program(rec: Any) -> str:
            with anthropic.Anthropic(base_url=root, api_key="test", max_retries=0) as claude, \
                    claude.messages.stream(model="claude-3-5-haiku-20241022", max_tokens=100,
                                           messages=QUESTION) as stream:
                return "".join(stream.text_stream)

        streamed = al.record(program, store=store, name="claude-stream")
        assert streamed.event(len(streamed) - 1).payload["result"] == text == "restart the api"
        replayed = al.replay(program, streamed)
        assert replayed.ok and replayed.result == text and len(server.requests) == before + 1
    finally:
        handle.uninstrument()
