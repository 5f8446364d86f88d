"""Regenerate tests/golden/keys.json: request -> canonical text -> cache key, for all three kinds.

Run ``python tests/golden/make_keys.py`` only when a key recipe is meant to change. It should
not: every recorded run finds its answers by these keys, so a change makes old runs miss on
replay. ``tests/core/test_keys.py`` checks every vector, and that the vectors marked
``same_as`` share their key.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from agentlog.keys import explain_http, explain_llm, explain_tool

HI = [{"role": "user", "content": "Say hi"}]

# (name, request, same_as): same_as names an earlier vector that must give the same key.
LLM: list[tuple[str, dict[str, Any], str | None]] = [
    ("llm minimal", {"model": "gpt-4o", "messages": HI}, None),
    ("llm flat sampling", {"model": "gpt-4o", "messages": HI, "temperature": 0.2, "max_tokens": 100,
                           "seed": 7}, None),
    ("llm nested sampling", {"model": "gpt-4o", "messages": HI,
                             "params": {"max_tokens": 100, "seed": 7, "temperature": 0.2}}, "llm flat sampling"),
    ("llm dropped fields", {"model": "gpt-4o", "messages": HI, "temperature": 0.2, "max_tokens": 100, "seed": 7,
                            "stream": True, "stream_options": {"include_usage": True}, "user": "u-42",
                            "metadata": {"run": "x"}, "store": True, "service_tier": "flex", "timeout": 30,
                            "extra_headers": {"X-Trace": "abc"}, "api_key": "sk-secret",
                            "params": {"OPENAI_API_KEY": "sk-also-secret"}}, "llm flat sampling"),
    ("llm empty equals missing", {"model": "gpt-4o", "messages": HI, "tools": [], "params": {},
                                  "response_format": None, "temperature": None}, "llm minimal"),
    ("llm answer-changing params", {"model": "gpt-4o", "messages": HI, "n": 2, "top_p": 0.9, "stop": ["\n"],
                                    "tool_choice": "none", "parallel_tool_calls": False}, None),
    ("llm unicode", {"model": "gpt-4o", "messages": [
        {"role": "system", "content": "Réponds en français — brièvement."},
        {"role": "user", "content": "日本語で? 🙂 \u00e9 vs e\u0301"}]}, None),
    ("llm tools and schema", {"model": "gpt-4o-mini", "messages": HI, "tool_choice": "auto", "tools": [
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}},
     None),
    ("llm tools given in params", {"model": "gpt-4o-mini", "messages": HI, "params": {
        "tool_choice": "auto", "tools": [
            {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}}},
     "llm tools and schema"),
    ("llm anthropic style", {"model": "claude-3-5-sonnet-20241022", "system": "Be terse.", "max_tokens": 1024,
                             "messages": HI, "x-api-key": "sk-ant-secret", "anthropic_version": "2023-06-01"},
     None),
    ("llm null message fields", {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "Say hi", "name": None}]}, "llm minimal"),
]

TOOL: list[tuple[str, str, Any, str | None]] = [
    ("tool simple", "search", {"q": "weather in Paris", "k": 3}, None),
    ("tool args order", "search", {"k": 3, "q": "weather in Paris"}, "tool simple"),
    ("tool unicode nested", "write_file", {"path": "notes/é.md", "lines": ["一", "二"],
                                           "opts": {"mode": "w", "append": False}}, None),
    ("tool no args", "now", None, None),
    ("tool empty args", "now", {}, "tool no args"),
]

HTTP: list[tuple[str, str, str, str | bytes | None, str | None]] = [
    ("http case, default port, sorted query, fragment", "get", "HTTP://Example.COM:80/a?b=2&a=1#frag", None, None),
    ("http same, normalised", "GET", "http://example.com/a?a=1&b=2", b"", "http case, default port, sorted query, fragment"),
    ("https default port with body", "POST", "https://API.example.com:443/v1/chat", '{"q":"hi"}', None),
    ("https explicit other port", "POST", "https://api.example.com:8443/v1/chat", '{"q":"hi"}', None),
    ("ipv6 host", "GET", "http://[2001:DB8:0:0::1]:8080/x?z=1", None, None),
    ("repeated query keys keep order", "GET", "https://h.example/s?tag=b&q=x&tag=a&empty=", None, None),
    ("empty query and empty path", "GET", "https://h.example?", None, None),
    ("percent-encoding", "GET", "https://h.example/%7euser/a%2fb/caf\u00e9 menu?q=caf%C3%A9+au+lait", None, None),
    ("secret query value redacted", "GET", "https://gen.example/v1/models?key=AIza-secret&alt=json", None, None),
    ("userinfo and dot segments dropped", "DELETE", "https://bob:pw@h.example/a/./b/../c", None, None),
    ("binary body", "PUT", "https://h.example/blob", bytes(range(256)), None),
]


def _body_json(body: str | bytes | None) -> Any:
    if body is None or isinstance(body, str):
        return body
    return {"base64": base64.b64encode(body).decode("ascii")}


def build() -> dict[str, Any]:
    vectors: list[dict[str, Any]] = []
    for name, request, same in LLM:
        parts = explain_llm(request)
        vectors.append({"kind": "llm", "name": name, "request": request, "canonical": parts.text,
                        "key": parts.key, "same_as": same})
    for name, tool, args, same in TOOL:
        parts = explain_tool(tool, args)
        vectors.append({"kind": "tool", "name": name, "tool": tool, "args": args, "canonical": parts.text,
                        "key": parts.key, "same_as": same})
    for name, method, url, body, same in HTTP:
        parts = explain_http(method, url, body)
        vectors.append({"kind": "http", "name": name, "method": method, "url": url, "body": _body_json(body),
                        "canonical": f"{parts.parts['method']}|{parts.parts['url']}|",
                        "key": parts.key, "same_as": same})
    return {"recipe": {
        "llm": "sha256(canonical_json(canonical_request(request)).encode('utf-8'))",
        "tool": "sha256(canonical_json({'name': name, 'args': args}).encode('utf-8'))",
        "http": "sha256(f'{METHOD}|{normalize_url(url)}|'.encode() + body_bytes)",
    }, "vectors": vectors}


def main() -> None:
    out = Path(__file__).with_name("keys.json")
    data = build()
    out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({len(data['vectors'])} vectors)")


if __name__ == "__main__":
    main()
