"""``async def`` programs replay and fork: ``await al.areplay`` / ``await al.afork`` in a running
loop, and ``al.replay`` / ``al.fork`` on a loop of their own (inside a running loop they say to
await the async form)."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from _server import MODEL, LLMServer

import agentlog as al


def _program(server: LLMServer) -> Any:
    async def program(rec: Any) -> str:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            status = await rec.atool("status", {"service": "api"}, fn=_status)
            answer = await client.chat.completions.create(model=MODEL, tools=[_TOOL], messages=[
                {"role": "user", "content": "what now?"},
                {"role": "assistant", "content": None, "tool_calls": [_CALL]},
                {"role": "tool", "tool_call_id": "call_0", "content": status}])
            return str(answer.choices[0].message.content)
    return program


async def _status(service: str) -> str:
    await asyncio.sleep(0)
    return f"{service} cpu=0.9"


_TOOL = {"type": "function", "function": {"name": "restart", "parameters": {"type": "object", "properties": {}}}}
_CALL = {"id": "call_0", "type": "function", "function": {"name": "status", "arguments": "{}"}}


def test_areplay_and_afork_in_a_running_loop(server: LLMServer, store: Any) -> None:
    program = _program(server)

    async def main() -> tuple[Any, Any, Any]:
        run = await al.arecord(program, store=store, name="async")
        replayed = await al.areplay(program, run)
        [result] = [e for e in run.iter_events() if e.type == "tool.result"]
        forked = await al.afork(run, result.seq - 1, program=program,
                                edit=al.edit.replace_response(result.seq, {"result": "api cpu=0.1"}))
        return run, replayed, forked

    run, replayed, forked = asyncio.run(main())
    assert run.event(len(run) - 1).payload["result"] == "done: api cpu=0.9"
    assert replayed.ok, str(replayed.divergence)
    assert len(server.requests) == 2  # the recording's call, and the fork's changed one; none in replay
    assert server.requests[-1][1]["messages"][-1]["content"] == "api cpu=0.1"
    assert forked.event(len(forked) - 1).payload["result"] == "done: api cpu=0.1"
    assert len(forked.llm_calls()) == 1 and forked.llm_calls()["cost_usd"].iloc[0] > 0  # paid: it went out


def test_the_sync_forms_run_an_async_program_on_their_own_loop(server: LLMServer, store: Any) -> None:
    program = _program(server)
    run = asyncio.run(al.arecord(program, store=store, name="async"))
    assert al.replay(program, run).ok
    forked = al.fork(run, 3, program=program)
    assert forked.status == "finished" and len(server.requests) == 1  # all served from the parent


def test_the_sync_forms_inside_a_running_loop_say_to_await(server: LLMServer, store: Any) -> None:
    program = _program(server)
    run = asyncio.run(al.arecord(program, store=store, name="async"))

    async def in_a_cell() -> None:
        with pytest.raises(RuntimeError, match=r"await al\.areplay"):
            al.replay(program, run)
        with pytest.raises(RuntimeError, match=r"await al\.afork"):
            al.fork(run, 3, program=program)

    asyncio.run(in_a_cell())
