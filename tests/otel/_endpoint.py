"""A fake OpenAI-compatible endpoint in process (an httpx transport): chat completions with
usage (cached tokens included) and, when the tools are offered and not used yet, a tool call.
The real ``openai`` SDK, the Agents SDK and their instrumentors run against it unchanged."""

from __future__ import annotations

import json
from typing import Any

import httpx

MODEL = "gpt-4o-mini"
USAGE = {"prompt_tokens": 42, "completion_tokens": 4, "total_tokens": 46,
         "prompt_tokens_details": {"cached_tokens": 10}}


def chat(request: httpx.Request) -> httpx.Response:
    """``POST /v1/chat/completions``: a tool call first when tools are offered, then text."""
    body = json.loads(request.content)
    messages = body["messages"]
    asked_tool = bool(body.get("tools")) and not any(m.get("role") == "tool" for m in messages)
    if asked_tool:
        tool = body["tools"][0]["function"]["name"]
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": tool, "arguments": json.dumps({"service": "api"})}}]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": "restart the api"}, "stop"
    return httpx.Response(200, json={
        "id": f"chatcmpl-{len(messages)}", "object": "chat.completion", "created": 1,
        "model": body["model"] + "-2024-07-18",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}], "usage": USAGE})


def openai_client() -> Any:
    import openai

    return openai.OpenAI(api_key="test", base_url="http://llm.test/v1",
                         http_client=httpx.Client(transport=httpx.MockTransport(chat)))


def async_openai_client() -> Any:
    import openai

    async def handle(request: httpx.Request) -> httpx.Response:
        await request.aread()
        return chat(request)

    return openai.AsyncOpenAI(api_key="test", base_url="http://llm.test/v1",
                              http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)))
