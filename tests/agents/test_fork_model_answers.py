"""A fork that edits a model answer the HTTP transport recorded serves the program that answer:
the SDK reads the edited text and tool calls from the HTTP response it is served (a JSON body,
or a stream in the API's own shapes: server-sent events, Ollama's JSON lines), for every model
API, plain and streamed. The real SDKs, against the loopback server, are the oracle for the wire formats."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from _server import MODEL, OVERLOADED, LLMServer

import agentlog as al
from agentlog.capture.rewire import rewired
from agentlog.events import HTTPResponse, LLMResponse

EDITED = "scale the db instead"
CLAUDE, GEMINI, LLAMA = "claude-3-5-haiku-20241022", "gemini-1.5-flash", "llama3.2"
#: An edited call's arguments, long enough to be streamed in several pieces (rewire.PIECE).
ARGS = {"service": "db", "reason": "cpu at 0.9 on the api for ten minutes"}
CALL = {"id": "call_7", "type": "function", "function": {"name": "status", "arguments": json.dumps(ARGS)}}
APIS = ["openai_chat", "openai_responses", "anthropic", "gemini", "ollama"]  # each answers with tool calls too


@pytest.fixture(autouse=True)
def _local_price() -> Any:
    """A price for the local model (genai-prices has none: its cost would be unknown, and warned of)."""
    with al.pricing.overrides({LLAMA: {"input": 0.1, "output": 0.2}}):
        yield


def _ask(server: LLMServer, api: str, streamed: bool, heard: list[list[str]] | None = None) -> Callable[[str], str]:
    """``ask(question) -> the answer's text``, through the real SDK of ``api``; streamed, the
    pieces of text the SDK yielded are appended to ``heard``, a list a call."""
    root = server.url.removesuffix("/v1")
    said = heard if heard is not None else []

    def joined(chunks: list[str]) -> str:
        said.append(chunks)
        return "".join(chunks)

    if api == "openai_chat":
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)

        def chat(question: str) -> str:
            messages = [{"role": "user", "content": question}]
            if not streamed:
                return str(client.chat.completions.create(model=MODEL, messages=messages).choices[0].message.content)
            chunks = client.chat.completions.create(model=MODEL, messages=messages, stream=True)
            return joined([c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content])
        return chat
    if api == "openai_responses":
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)

        def responses(question: str) -> str:
            if not streamed:
                return client.responses.create(model=MODEL, input=question).output_text
            with client.responses.stream(model=MODEL, input=question) as stream:
                deltas = joined([e.delta for e in stream if e.type == "response.output_text.delta"])
                final = stream.get_final_response().output_text
            assert deltas == final  # the deltas and the whole answer agree
            return final
        return responses
    if api == "anthropic":
        import anthropic

        claude = anthropic.Anthropic(base_url=root, api_key="test", max_retries=0)

        def messages(question: str) -> str:
            asked = [{"role": "user", "content": question}]
            if not streamed:
                return str(claude.messages.create(model=CLAUDE, max_tokens=100, messages=asked).content[0].text)
            with claude.messages.stream(model=CLAUDE, max_tokens=100, messages=asked) as stream:
                text = joined(list(stream.text_stream))
                assert stream.get_final_message().content[0].text == text
            return text
        return messages
    if api == "ollama":
        import ollama

        def chat_local(question: str) -> str:
            asked = [{"role": "user", "content": question}]
            with ollama.Client(host=root) as local:
                if not streamed:
                    return str(local.chat(model=LLAMA, messages=asked).message.content)
                return joined([str(c.message.content) for c in local.chat(model=LLAMA, messages=asked, stream=True)
                               if c.message.content])
        return chat_local
    if api == "ollama_generate":
        import ollama

        def generate_local(question: str) -> str:
            with ollama.Client(host=root) as local:
                if not streamed:
                    return str(local.generate(model=LLAMA, prompt=question).response)
                return joined([str(c.response) for c in local.generate(model=LLAMA, prompt=question, stream=True)
                               if c.response])
        return generate_local
    from google import genai
    from google.genai import types

    client_g = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=root, api_version="v1beta"))

    def gemini(question: str) -> str:
        if not streamed:
            return str(client_g.models.generate_content(model=GEMINI, contents=question).text)
        return joined([str(c.text) for c in client_g.models.generate_content_stream(model=GEMINI, contents=question)
                       if c.text])
    return gemini


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("api", [*APIS, "ollama_generate"])
def test_a_fork_serves_the_edited_model_answer_to_the_sdk(server: LLMServer, store: Any, api: str,
                                                          streamed: bool) -> None:
    def program(rec: Any) -> list[str]:
        ask = _ask(server, api, streamed)
        first = ask("cpu=0.9, what now?")
        return [first, ask(f"you said: {first}")]

    run = al.record(program, store=store, name=f"{api} {'streamed' if streamed else 'plain'}")
    assert run.status == "finished", run.status
    recorded = run.event(len(run) - 1).payload["result"]
    assert recorded[0] == "restart the api"
    answer = next(e for e in run.iter_events() if e.type == "llm.response")
    message = {**LLMResponse.of(answer).message, "content": EDITED}
    sent = len(server.requests)

    fork = al.fork(run, answer.caused_by - 1, program=program,
                   edit=al.edit.replace_response(answer.seq, {"message": message}))

    assert fork.event(len(fork) - 1).payload["result"][0] == EDITED  # what the SDK read
    assert len(server.requests) == sent + 1  # the edited call served, the next one asked
    assert f"you said: {EDITED}" in json.dumps(server.requests[-1][1])
    own = list(fork.iter_events(start=answer.caused_by))
    [served_http] = [HTTPResponse.of(e) for e in own[:8] if e.type == "http.response"]
    [served_llm] = [LLMResponse.of(e) for e in own[:8] if e.type == "llm.response"]
    assert served_http.edited and served_llm.edited and served_llm.message["content"] == EDITED
    assert served_llm.cost_usd == 0.0  # served: nothing paid


@pytest.mark.parametrize("api", [*APIS, "ollama_generate"])
def test_an_edited_streamed_answer_reaches_the_sdk_a_word_a_chunk(server: LLMServer, store: Any, api: str) -> None:
    """The edited text is streamed as a model streams it, a piece at a time: the SDK yields
    the edited answer's words, with the spaces before them, one by one."""
    heard: list[list[str]] = []

    def program(rec: Any) -> str:
        return _ask(server, api, True, heard)("cpu=0.9, what now?")

    run = al.record(program, store=store, name=f"{api} streamed")
    assert len(heard[-1]) > 1, heard  # the loopback server streams its answer in pieces too
    answer = next(e for e in run.iter_events() if e.type == "llm.response")
    edited = "scale  the db instead, then wait for it "
    message = {**LLMResponse.of(answer).message, "content": edited}

    fork = al.fork(run, answer.caused_by - 1, program=program,
                   edit=al.edit.replace_response(answer.seq, {"message": message}))

    assert fork.event(len(fork) - 1).payload["result"] == edited
    words = ["scale", "  the", " db", " instead,", " then", " wait", " for", " it", " "]
    assert heard[-1] == words
    sent = len(server.requests)
    assert al.replay(program, fork).ok  # the fork replays: the stream it was served, as served
    assert heard[-1] == words and len(server.requests) == sent


def _streamed_calls(server: LLMServer, api: str) -> Callable[[str], dict[str, Any]]:
    """``ask(question) -> {"calls": [[tool name, arguments], ...], "finish": why it stopped}``
    as the real SDK of ``api`` assembles them from a stream."""
    root = server.url.removesuffix("/v1")
    if api in ("openai_chat", "openai_responses"):
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        if api == "openai_chat":
            def chat(question: str) -> dict[str, Any]:
                with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": question}]) as s:
                    choice = s.get_final_completion().choices[0]
                return {"calls": [[c.function.name, json.loads(c.function.arguments)]
                                  for c in choice.message.tool_calls or []], "finish": choice.finish_reason}
            return chat

        def responses(question: str) -> dict[str, Any]:
            with client.responses.stream(model=MODEL, input=question) as s:
                deltas = "".join(e.delta for e in s if e.type == "response.function_call_arguments.delta")
                final = s.get_final_response()
            calls = [i for i in final.output if i.type == "function_call"]
            assert deltas == "".join(c.arguments for c in calls)
            return {"calls": [[c.name, json.loads(c.arguments)] for c in calls], "finish": final.status}
        return responses
    if api == "anthropic":
        import anthropic

        claude = anthropic.Anthropic(base_url=root, api_key="test", max_retries=0)

        def messages(question: str) -> dict[str, Any]:
            with claude.messages.stream(model=CLAUDE, max_tokens=100,
                                        messages=[{"role": "user", "content": question}]) as s:
                final = s.get_final_message()
            return {"calls": [[b.name, b.input] for b in final.content if b.type == "tool_use"],
                    "finish": final.stop_reason}
        return messages
    if api == "ollama":
        import ollama

        def chat_local(question: str) -> dict[str, Any]:
            with ollama.Client(host=root) as local:
                chunks = list(local.chat(model=LLAMA, messages=[{"role": "user", "content": question}], stream=True))
            return {"calls": [[c.function.name, dict(c.function.arguments)] for chunk in chunks
                              for c in chunk.message.tool_calls or []], "finish": chunks[-1].done_reason}
        return chat_local
    from google import genai
    from google.genai import types

    client_g = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=root, api_version="v1beta"))

    def gemini(question: str) -> dict[str, Any]:
        chunks = list(client_g.models.generate_content_stream(model=GEMINI, contents=question))
        finish = chunks[-1].candidates[0].finish_reason if chunks[-1].candidates else None
        return {"calls": [[c.name, c.args] for chunk in chunks for c in chunk.function_calls or []],
                "finish": getattr(finish, "value", finish)}
    return gemini


@pytest.mark.parametrize("api", APIS)
def test_a_tool_call_edited_into_a_streamed_answer_is_assembled_by_the_sdk(server: LLMServer, store: Any,
                                                                           api: str) -> None:
    """The model answered text; the fork's edit makes it ask for a tool instead: the SDK's own
    stream helpers assemble the edited call from the served stream, and the finish reason
    says it asks for tools where the API says so (the edit gave none)."""
    def program(rec: Any) -> dict[str, Any]:
        return _streamed_calls(server, api)("cpu=0.9, what now?")

    run = al.record(program, store=store, name=f"{api} stream")
    recorded = run.event(len(run) - 1).payload["result"]
    assert recorded["calls"] == []
    answer = next(e for e in run.iter_events() if e.type == "llm.response")
    message = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    fork = al.fork(run, answer.caused_by - 1, program=program,
                   edit=al.edit.replace_response(answer.seq, {"message": message}))
    result = fork.event(len(fork) - 1).payload["result"]
    assert result["calls"] == [["status", ARGS]]
    finish = {"openai_chat": "tool_calls", "anthropic": "tool_use"}.get(api, recorded["finish"])
    assert result["finish"] == finish
    [served] = [e for e in fork.iter_events(start=answer.caused_by) if e.type == "llm.response"]
    assert served.payload["finish_reason"] == finish  # the log says what the SDK read
    streamed_args = {"openai_chat": '"arguments"', "openai_responses": '"type": "response.function_call_arguments.delta"',
                     "anthropic": '"type": "input_json_delta"'}
    if api in streamed_args:  # the arguments went out in pieces, as a model streams them
        [wire] = [HTTPResponse.of(e) for e in fork.iter_events(start=answer.caused_by) if e.type == "http.response"]
        assert wire.content.decode().count(streamed_args[api]) > 1


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_fork_that_edits_a_tool_call_runs_the_tool_with_the_edited_arguments(
        server: LLMServer, store: Any, streamed: bool) -> None:
    """The model asked for ``status(service="api")``; the fork edits the call to ask for
    ``db``: the SDK hands the program the edited call, the tool runs for ``db``, and the
    next request carries its result."""
    tools = [{"type": "function", "function": {"name": "status", "parameters": {
        "type": "object", "properties": {"service": {"type": "string"}}}}}]

    def program(rec: Any) -> str:
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "Is the api healthy?"}]
        asked = client.chat.completions.create(model=MODEL, messages=messages, tools=tools, stream=streamed)
        if streamed:
            calls: dict[int, dict[str, Any]] = {}
            for chunk in asked:
                for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                    slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] += call.id or ""
                    slot["name"] += (call.function.name or "") if call.function else ""
                    slot["arguments"] += (call.function.arguments or "") if call.function else ""
            [call] = calls.values()
        else:
            made = asked.choices[0].message.tool_calls[0]
            call = {"id": made.id, "name": made.function.name, "arguments": made.function.arguments}
        service = json.loads(call["arguments"])["service"]
        result = rec.tool("status", {"service": service}, lambda service: f"{service} cpu=0.1")
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]},
                     {"role": "tool", "tool_call_id": call["id"], "content": result}]
        return str(client.chat.completions.create(model=MODEL, messages=messages).choices[0].message.content)

    run = al.record(program, store=store, name="tool call")
    assert run.event(len(run) - 1).payload["result"] == "done: api cpu=0.1"
    answer = next(e for e in run.iter_events() if e.type == "llm.response")
    message = json.loads(json.dumps(LLMResponse.of(answer).message))
    message["tool_calls"][0]["function"]["arguments"] = json.dumps({"service": "db"})

    fork = al.fork(run, answer.caused_by - 1, program=program,
                   edit=al.edit.replace_response(answer.seq, {"message": message}))

    assert [e.payload["args"] for e in fork.iter_events() if e.type == "tool.call"] == [{"service": "db"}]
    assert fork.event(len(fork) - 1).payload["result"] == "done: db cpu=0.1"


def test_an_edited_http_response_of_a_model_call_is_the_answer_the_log_keeps(server: LLMServer,
                                                                             store: Any) -> None:
    """Editing the raw HTTP response of a model call instead: the fork's ``llm.response`` is
    read from the edited bytes (what the program saw), marked edited, at no cost."""
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)

    def program(rec: Any) -> str:
        answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        return str(answer.choices[0].message.content)

    run = al.record(program, store=store, name="raw edit")
    response = next(e for e in run.iter_events() if e.type == "http.response")
    body = json.loads(HTTPResponse.of(response).content)
    body["choices"][0]["message"]["content"] = EDITED
    fork = al.fork(run, response.caused_by - 2, program=program,
                   edit=al.edit.replace_response(response.seq, {"body": json.dumps(body)}))
    assert fork.event(len(fork) - 1).payload["result"] == EDITED
    [answer] = [LLMResponse.of(e) for e in fork.iter_events(start=response.caused_by - 1) if e.type == "llm.response"]
    assert answer.message["content"] == EDITED and answer.edited and answer.cost_usd == 0.0


def test_a_failed_model_call_answered_in_a_fork_is_the_answer_the_log_keeps(server: LLMServer,
                                                                           store: Any) -> None:
    """What if the model had answered? A call that failed (HTTP 503) edited into a success:
    the SDK gets the answer, and the fork's log has it as the call's ``llm.response``, not
    the recorded failure."""
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)

    def program(rec: Any) -> str:
        try:
            answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": OVERLOADED}])
        except openai.InternalServerError:
            return "gave up"
        return str(answer.choices[0].message.content)

    run = al.record(program, store=store, name="overloaded")
    assert run.event(len(run) - 1).payload["result"] == "gave up"
    response = next(e for e in run.iter_events() if e.type == "http.response")
    assert response.payload["status"] == 503 and [e.type for e in run.iter_events()].count("error") == 1
    body = {"id": "c1", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": EDITED}}]}
    fork = al.fork(run, response.caused_by - 2, program=program,
                   edit=al.edit.replace_response(response.seq, {"status": 200, "body": json.dumps(body)}))
    assert fork.event(len(fork) - 1).payload["result"] == EDITED
    own = list(fork.iter_events(start=response.caused_by - 1))
    assert "error" not in [e.type for e in own]
    [answer] = [LLMResponse.of(e) for e in own if e.type == "llm.response"]
    assert answer.message["content"] == EDITED and answer.edited


# --- the rewired bodies, read by the SDKs' own types ---------------------------------------------

def test_a_rewired_anthropic_answer_is_a_message_with_the_tool_use() -> None:
    from anthropic.types import Message

    recorded = {"id": "msg_1", "type": "message", "role": "assistant", "model": CLAUDE,
                "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "x"}],
                "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 2}}
    body = rewired("anthropic", False, json.dumps(recorded).encode(),
                   {"role": "assistant", "content": "checking", "tool_calls": [CALL]}, "tool_use")
    message = Message.model_validate_json(body)
    thinking, text, tool = message.content
    assert thinking.type == "thinking" and text.type == "text" and text.text == "checking"
    assert (tool.type, tool.id, tool.name, tool.input) == ("tool_use", "call_7", "status", ARGS)
    assert message.stop_reason == "tool_use" and message.usage.input_tokens == 3


def test_a_rewired_responses_answer_is_a_response_with_the_function_call() -> None:
    from openai.types.responses import Response

    recorded = {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": MODEL,
                "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                           {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                            "content": [{"type": "output_text", "text": "x", "annotations": []}]}],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    body = rewired("openai_responses", False, json.dumps(recorded).encode(),
                   {"role": "assistant", "content": "checking", "tool_calls": [CALL]}, None)
    response = Response.model_validate_json(body)
    assert response.output_text == "checking"
    reasoning, said, call = response.output
    assert reasoning.type == "reasoning" and said.id == "msg_1"
    assert (call.type, call.call_id, call.name, json.loads(call.arguments)) == (
        "function_call", "call_7", "status", ARGS)


def test_a_rewired_gemini_answer_is_a_response_with_the_function_call() -> None:
    from google.genai import types

    recorded = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 3}}
    body = rewired("gemini", False, json.dumps(recorded).encode(),
                   {"role": "assistant", "content": "checking", "tool_calls": [CALL]}, None)
    response = types.GenerateContentResponse.model_validate_json(body)
    assert response.text == "checking"
    [call] = response.function_calls or []
    assert (call.name, call.args) == ("status", ARGS)
    assert response.usage_metadata is not None and response.usage_metadata.prompt_token_count == 3
