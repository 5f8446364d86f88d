"""The README's "Record the agent you already have" and "Async agents" examples run as written,
with the LangGraph graph, the openai client and the Agents SDK agent they take as given built
against the loopback server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _readme import README, section_code
from _server import LLMServer, expected_cost
from test_frameworks import _langgraph_agent, _sdk_agent


def _exec(code: str, namespace: dict[str, Any]) -> None:
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README


def test_record_the_agent_you_already_have(server: LLMServer, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    monkeypatch.chdir(tmp_path)
    with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
        namespace: dict[str, Any] = {"graph": _langgraph_agent(server), "client": client}
        _exec(section_code("Record the agent you already have"), namespace)
    run = namespace["run"]
    assert run.llm_calls()["cost_usd"].tolist() == pytest.approx([expected_cost()] * 2, rel=1e-12)
    assert namespace["text"] == "restart the api"
    plain = namespace["al"].Store("agentlog-runs").run(namespace["rec"].run_id)
    assert plain.llm_calls()["cost_usd"].tolist() == [expected_cost()]
    assert len(server.requests) == 3  # two for the graph, one streamed; the replay sent none


def test_async_agents(server: LLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}

    import httpx2

    # no kept-alive connection: the example's loop (asyncio.run) ends before the client could close
    client = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0,
                                http_client=openai.DefaultAsyncHttpxClient(
                                    limits=httpx2.Limits(max_keepalive_connections=0)))
    namespace["agent"] = _sdk_agent(client)
    _exec(section_code("Async agents"), namespace)
    assert namespace["replayed"].ok and len(server.requests) == 2
    assert namespace["run"].llm_calls()["cost_usd"].sum() == pytest.approx(2 * expected_cost())
