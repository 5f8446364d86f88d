"""Cache keys: golden vectors, request canonicalisation, URL normalisation, explaining a key."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.canonical import canonical_json
from agentlog.errors import CanonicalJSONError
from agentlog.keys import (
    IGNORED_FIELDS,
    REQUEST_SLOTS,
    KeyParts,
    canonical_llm_key,
    canonical_request,
    explain_http,
    explain_llm,
    explain_tool,
    http_key,
    is_secret_field,
    llm_key,
    normalize_url,
    tool_key,
)
from agentlog.redact import Redactor

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "keys.json").read_text("utf-8"))
VECTORS = GOLDEN["vectors"]
HI = [{"role": "user", "content": "Say hi"}]
# No timing in tests: no per-example deadline, no "generation is slow" health check.
UNTIMED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASE = {"model": "gpt-4o", "messages": HI}


def _body(value: Any) -> str | bytes | None:
    return base64.b64decode(value["base64"]) if isinstance(value, dict) else value


def _key_of(v: dict[str, Any]) -> tuple[str, str]:
    """(canonical text, key) recomputed from a vector's input."""
    if v["kind"] == "llm":
        return canonical_json(canonical_request(v["request"])), llm_key(v["request"])
    if v["kind"] == "tool":
        return canonical_json({"name": v["tool"], "args": v["args"] or {}}), tool_key(v["tool"], v["args"])
    body = _body(v["body"])
    return f"{v['method'].upper()}|{normalize_url(v['url'])}|", http_key(v["method"], v["url"], body)


# --- golden vectors: any change to a recipe fails here ---------------------------------------


def test_golden_file_has_every_kind() -> None:
    kinds = [v["kind"] for v in VECTORS]
    assert len(VECTORS) >= 20
    assert {"llm", "tool", "http"} == set(kinds)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v['kind']}: {v['name']}")
def test_golden_vector_still_gives_its_key(vector: dict[str, Any]) -> None:
    text, key = _key_of(vector)
    assert text == vector["canonical"]
    assert key == vector["key"]
    # The documented byte recipe, computed by hand.
    if vector["kind"] == "http":
        body = _body(vector["body"])
        data = body.encode() if isinstance(body, str) else (body or b"")
        assert hashlib.sha256(text.encode() + data).hexdigest() == key
    else:
        assert hashlib.sha256(text.encode("utf-8")).hexdigest() == key


@pytest.mark.parametrize("vector", [v for v in VECTORS if v["same_as"]], ids=lambda v: v["name"])
def test_golden_equivalent_spellings_share_a_key(vector: dict[str, Any]) -> None:
    other = next(v for v in VECTORS if v["name"] == vector["same_as"])
    assert vector["key"] == other["key"]


def test_golden_distinct_requests_have_distinct_keys() -> None:
    groups = {v["key"] for v in VECTORS if not v["same_as"]}
    assert len(groups) == len([v for v in VECTORS if not v["same_as"]])


def test_keys_are_64_lower_hex() -> None:
    for key in (llm_key(BASE), tool_key("t", {}), http_key("GET", "https://x.example/", None)):
        assert len(key) == 64 and key == key.lower() and int(key, 16) >= 0


# --- canonical_request -------------------------------------------------------------------------


def test_canonical_shape_has_exactly_the_slots() -> None:
    assert tuple(canonical_request({})) == REQUEST_SLOTS
    assert canonical_request({}) == {"model": None, "messages": [], "tools": [], "params": {},
                                     "response_format": None}


def test_flat_and_nested_spellings_give_one_key() -> None:
    flat = {**BASE, "temperature": 0.0, "max_tokens": 5, "tool_choice": "none", "response_format": {"type": "text"}}
    nested = {**BASE, "params": {"temperature": 0.0, "max_tokens": 5, "tool_choice": "none"},
              "response_format": {"type": "text"}}
    mixed = {**BASE, "temperature": 0.0, "params": {"max_tokens": 5, "tool_choice": "none",
                                                    "response_format": {"type": "text"}}}
    assert llm_key(flat) == llm_key(nested) == llm_key(mixed)


@pytest.mark.parametrize("name", sorted(IGNORED_FIELDS))
def test_each_ignored_field_leaves_the_key_alone(name: str) -> None:
    assert llm_key({**BASE, name: "anything"}) == llm_key(BASE)
    assert llm_key({**BASE, "params": {name: {"x": 1}}}) == llm_key(BASE)


@pytest.mark.parametrize(("name", "value"), [
    ("temperature", 0.7), ("top_p", 0.5), ("n", 2), ("seed", 1), ("stop", ["END"]), ("max_tokens", 10),
    ("tool_choice", "required"), ("parallel_tool_calls", False), ("logprobs", True),
    ("reasoning_effort", "high"), ("system", "Be terse."), ("frequency_penalty", 0.5),
    ("extra_body", {"top_k": 5}),
])
def test_fields_that_change_the_answer_change_the_key(name: str, value: Any) -> None:
    assert llm_key({**BASE, name: value}) != llm_key(BASE)
    assert llm_key({**BASE, "params": {name: value}}) == llm_key({**BASE, name: value})


def test_model_messages_tools_and_schema_change_the_key() -> None:
    base = llm_key(BASE)
    assert llm_key({**BASE, "model": "gpt-4o-mini"}) != base
    assert llm_key({**BASE, "messages": [{"role": "user", "content": "Say hi!"}]}) != base
    assert llm_key({**BASE, "tools": [{"type": "function", "function": {"name": "f"}}]}) != base
    assert llm_key({**BASE, "response_format": {"type": "json_object"}}) != base


def test_message_order_matters() -> None:
    two = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert llm_key({**BASE, "messages": two}) != llm_key({**BASE, "messages": two[::-1]})


def test_missing_none_and_empty_are_the_same() -> None:
    key = llm_key(BASE)
    for extra in ({"tools": []}, {"tools": None}, {"params": {}}, {"params": None},
                  {"response_format": None}, {"response_format": {}}, {"temperature": None},
                  {"params": {"seed": None}}):
        assert llm_key({**BASE, **extra}) == key, extra
    assert llm_key({"model": "m"}) == llm_key({"model": "m", "messages": []})


def test_secret_fields_never_reach_the_key_or_the_text() -> None:
    secretive = {**BASE, "api_key": "sk-1", "Authorization": "Bearer sk-2", "x-api-key": "sk-3",
                 "params": {"openai_api_key": "sk-4", "client_secret": "sk-5", "password": "pw"}}
    parts = explain_llm(secretive)
    assert parts.key == llm_key(BASE)
    assert "sk-" not in parts.text and "pw" not in parts.text
    assert parts.dropped == ("Authorization", "api_key", "params.client_secret", "params.openai_api_key",
                             "params.password", "x-api-key")


def test_secret_names_inside_messages_are_data() -> None:
    # Only field names of the request are checked: what a user says is never dropped.
    msg = [{"role": "user", "content": "my password is hunter2", "api_key": "kept"}]
    assert "hunter2" in explain_llm({**BASE, "messages": msg}).text
    assert llm_key({**BASE, "messages": msg}) != llm_key(BASE)


@pytest.mark.parametrize(("name", "secret"), [
    ("api_key", True), ("API-Key", True), ("x-api-key", True), ("Authorization", True), ("cookie", True),
    ("anthropic_api_key", True), ("client_secret", True), ("aws_secret_access_key", True),
    ("max_tokens", False), ("max_completion_tokens", False), ("top_k", False), ("keyword", False),
    ("prompt_cache_key", False),
])
def test_is_secret_field(name: str, secret: bool) -> None:
    assert is_secret_field(name) is secret


def test_ignore_drops_user_named_fields() -> None:
    req = {**BASE, "trace_id": "t-1", "params": {"trace_id": "t-2"}}
    assert llm_key(req, ignore=["trace_id"]) == llm_key(BASE)
    assert explain_llm(req, ignore=["trace_id"]).dropped == ("params.trace_id", "trace_id")
    assert llm_key({**BASE, "trace_id": "t-1"}) != llm_key(BASE)


def test_null_message_fields_are_absent_but_deeper_nulls_are_data() -> None:
    with_null = {**BASE, "messages": [{"role": "assistant", "content": None,
                                       "tool_calls": [{"id": "c1", "function": {"name": "f", "x": None}}]}]}
    without = {**BASE, "messages": [{"role": "assistant",
                                     "tool_calls": [{"id": "c1", "function": {"name": "f", "x": None}}]}]}
    assert llm_key(with_null) == llm_key(without)
    assert '"x":null' in explain_llm(with_null).text


def test_sdk_message_objects_are_dumped_like_dicts() -> None:
    from openai.types import chat
    msg = chat.ChatCompletionMessage(role="assistant", content="Hello")
    assert llm_key({**BASE, "messages": [*HI, msg]}) == llm_key(
        {**BASE, "messages": [*HI, {"role": "assistant", "content": "Hello"}]})


def test_tuples_and_lists_are_the_same() -> None:
    assert llm_key({**BASE, "messages": tuple(HI), "stop": ("a",)}) == llm_key({**BASE, "stop": ["a"]})


def test_conflicting_flat_and_nested_values_are_refused() -> None:
    with pytest.raises(CanonicalJSONError) as info:
        canonical_request({**BASE, "temperature": 0.1, "params": {"temperature": 0.9}})
    assert str(info.value) == ("request.temperature: given twice with different values (0.1 and 0.9); "
                               "keep one")
    assert info.value.path == "request.temperature"
    # The same value twice is fine.
    assert llm_key({**BASE, "seed": 1, "params": {"seed": 1}}) == llm_key({**BASE, "seed": 1})


@pytest.mark.parametrize(("request_", "message"), [
    ({**BASE, "params": [1]}, "request.params: params must be a mapping, got list"),
    ({**BASE, "params": {"messages": []}}, "request.params.messages: messages belongs at the top level"),
    ({**BASE, 1: "x"}, "request[1]: keys must be strings, got int"),
])
def test_malformed_requests_name_the_field(request_: dict[Any, Any], message: str) -> None:
    with pytest.raises(CanonicalJSONError) as info:
        canonical_request(request_)
    assert str(info.value) == message


def test_values_without_canonical_json_are_refused_with_a_path() -> None:
    with pytest.raises(CanonicalJSONError) as info:
        llm_key({**BASE, "temperature": float("nan")})
    assert str(info.value) == "request.params.temperature: NaN is not JSON; use null or a string"
    with pytest.raises(CanonicalJSONError, match=r"^tool\.args\.when: set is not JSON$"):
        tool_key("t", {"when": {1}})


def test_request_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="a request must be a mapping, got list"):
        canonical_request([("model", "m")])  # type: ignore[arg-type]


def test_canonical_request_does_not_change_its_input() -> None:
    req = {**BASE, "stream": True, "params": {"seed": 1, "user": "u"}, "messages": [{"role": "user",
                                                                                     "content": None}]}
    snapshot = json.dumps(req, sort_keys=True)
    canonical_request(req)
    assert json.dumps(req, sort_keys=True) == snapshot


_params = st.dictionaries(
    st.sampled_from(["temperature", "top_p", "n", "seed", "stop", "max_tokens", "tool_choice", "system",
                     "stream", "user", "api_key", "metadata", "parallel_tool_calls"]),
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5),
              st.lists(st.text(max_size=3), max_size=2)),
)


@UNTIMED
@given(params=_params, split=st.integers(0, 13))
def test_property_any_split_between_flat_and_nested_gives_one_key(params: dict[str, Any], split: int) -> None:
    names = sorted(params)
    flat = {**BASE, **params}
    mixed = {**BASE, **{k: params[k] for k in names[:split]},
             "params": {k: params[k] for k in names[split:]}}
    assert llm_key(flat) == llm_key(mixed)


@UNTIMED
@given(params=_params)
def test_property_canonical_request_is_idempotent(params: dict[str, Any]) -> None:
    once = canonical_request({**BASE, **params})
    assert canonical_request(once) == once
    assert llm_key(once) == llm_key({**BASE, **params}) == canonical_llm_key(once)
    redacted = Redactor(frozenset({"temperature"})).value(once)  # as the recorder keys it
    assert canonical_llm_key(redacted) == llm_key(redacted)


# --- tool keys --------------------------------------------------------------------------------


def test_tool_key_depends_on_name_and_args() -> None:
    assert tool_key("a", {"x": 1}) != tool_key("b", {"x": 1})
    assert tool_key("a", {"x": 1}) != tool_key("a", {"x": 2})
    assert tool_key("a", {"x": 1}) != tool_key("a", {"x": "1"})
    assert tool_key("a", None) == tool_key("a", {})


def test_tool_name_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="a tool name must be a str, got int"):
        tool_key(3, {})  # type: ignore[arg-type]


# --- URL normalisation ------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "expected"), [
    ("HTTP://Example.COM:80/a?b=2&a=1#frag", "http://example.com/a?a=1&b=2"),
    ("https://example.com:443", "https://example.com/"),
    ("https://example.com:80/", "https://example.com:80/"),          # 80 is not https's default
    ("http://example.com:443/", "http://example.com:443/"),
    ("https://example.com:8443/x", "https://example.com:8443/x"),
    ("wss://example.com:443/socket", "wss://example.com/socket"),
    ("http://[::1]:8080/x", "http://[::1]:8080/x"),
    ("http://[2001:0DB8:0000::0001]:80/", "http://[2001:db8::1]/"),
    ("https://h.example/s?tag=b&q=x&tag=a", "https://h.example/s?q=x&tag=b&tag=a"),
    ("https://h.example/s?b=&a", "https://h.example/s?a=&b="),
    ("https://h.example/p?", "https://h.example/p"),
    ("https://h.example/p?&&", "https://h.example/p"),
    ("https://h.example", "https://h.example/"),
    ("https://h.example/Case/Kept", "https://h.example/Case/Kept"),
    ("https://h.example/%7euser/%2f/%e2%82%ac", "https://h.example/~user/%2F/%E2%82%AC"),
    ("https://h.example/café menu", "https://h.example/caf%C3%A9%20menu"),
    ("https://h.example/?q=a+b&r=a%20b&s=a%2Bb", "https://h.example/?q=a%20b&r=a%20b&s=a%2Bb"),
    ("https://h.example/a/./b/../c/.", "https://h.example/a/c/"),
    ("https://h.example/../x", "https://h.example/x"),
    ("https://user:secret@h.example/p", "https://h.example/p"),
    ("https://bücher.example/", "https://xn--bcher-kva.example/"),
    ("https://h.example/?key=AIza&API_KEY=x&access_token=t&keep=1",
     "https://h.example/?API_KEY=%5BREDACTED%5D&access_token=%5BREDACTED%5D&keep=1&key=%5BREDACTED%5D"),
    ("https://h.example/?q=%FF", "https://h.example/?q=%FF"),        # not UTF-8: bytes kept
    ("  https://h.example/x  ", "https://h.example/x"),
])
def test_normalize_url(url: str, expected: str) -> None:
    assert normalize_url(url) == expected
    assert normalize_url(expected) == expected  # idempotent


def test_normalize_url_can_keep_secrets_when_asked() -> None:
    assert normalize_url("https://h.example/?key=AIza", redact=False) == "https://h.example/?key=AIza"


@pytest.mark.parametrize(("url", "message"), [
    ("example.com/a", "'example.com/a' is not an absolute URL (scheme://host/...)"),
    ("/relative", "'/relative' is not an absolute URL (scheme://host/...)"),
    ("http://h.example:99999/", "'http://h.example:99999/': the port is not a number between 0 and 65535"),
])
def test_normalize_url_refuses_what_it_cannot_normalise(url: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        normalize_url(url)
    assert str(info.value) == message


_segment = st.text(alphabet="abcXYZ019-._~%/ é+", max_size=8)


@UNTIMED
@given(host=st.sampled_from(["Example.COM", "h.example", "[::1]", "127.0.0.1"]),
       port=st.sampled_from(["", ":80", ":443", ":8080"]), scheme=st.sampled_from(["http", "HTTPS"]),
       path=_segment, query=st.lists(st.tuples(st.text("abk", min_size=1, max_size=2), _segment), max_size=4),
       fragment=_segment)
def test_property_normalize_url_is_idempotent(host: str, port: str, scheme: str, path: str,
                                               query: list[tuple[str, str]], fragment: str) -> None:
    url = f"{scheme}://{host}{port}/{path}?{'&'.join(f'{k}={v}' for k, v in query)}#{fragment}"
    once = normalize_url(url)
    assert normalize_url(once) == once
    assert "#" not in once


# --- HTTP keys --------------------------------------------------------------------------------


def test_http_key_recipe_and_equivalences() -> None:
    url = "https://api.example.com/v1?b=1&a=2"
    expected = hashlib.sha256(b"POST|https://api.example.com/v1?a=2&b=1|" + b'{"x":1}').hexdigest()
    assert http_key("post", url, b'{"x":1}') == expected
    assert http_key("POST", url, '{"x":1}') == expected          # str body is UTF-8
    assert http_key("POST", url, bytearray(b'{"x":1}')) == expected
    assert http_key("GET", url, None) == http_key("GET", url, b"") == http_key("GET", url, "")
    assert http_key("GET", url) != http_key("HEAD", url)
    assert http_key("POST", url, b"a") != http_key("POST", url, b"b")


def test_http_key_refuses_other_body_types() -> None:
    with pytest.raises(TypeError, match="an HTTP body must be bytes, str or None, got dict"):
        http_key("POST", "https://h.example/", {"x": 1})  # type: ignore[arg-type]


# --- explaining keys --------------------------------------------------------------------------


def test_explain_llm_shows_what_was_hashed() -> None:
    req = {**BASE, "stream": True, "temperature": 0, "api_key": "sk-x"}
    parts = explain_llm(req)
    assert parts.key == llm_key(req)
    assert parts.kind == "llm"
    assert parts.dropped == ("api_key", "stream")
    assert parts.parts == canonical_request(req)
    assert str(parts) == (
        f"llm key {parts.key}\n"
        "dropped: api_key, stream\n"
        'hashed: {"messages":[{"content":"Say hi","role":"user"}],"model":"gpt-4o",'
        '"params":{"temperature":0},"response_format":null,"tools":[]}')


def test_diff_names_the_parts_that_differ() -> None:
    recorded = explain_llm({**BASE, "temperature": 0, "messages": [*HI, {"role": "user", "content": "more"}]})
    live = explain_llm({**BASE, "temperature": 0.5, "model": "gpt-4o-mini",
                        "messages": [*HI, {"role": "user", "content": "more!"}, {"role": "user", "content": "x"}]})
    assert recorded.diff(live) == ["messages[1].content", "messages[2]", "model", "params.temperature"]
    assert recorded.diff(recorded) == []


def test_explain_tool_and_http_match_their_keys() -> None:
    t = explain_tool("search", {"q": "x"})
    assert (t.kind, t.key, t.text) == ("tool", tool_key("search", {"q": "x"}), '{"args":{"q":"x"},"name":"search"}')
    h = explain_http("get", "HTTPS://H.example:443/x?b=1&a=2#f", b"\xff\x00")
    assert h.key == http_key("GET", "https://h.example/x?a=2&b=1", b"\xff\x00")
    assert h.text == "GET|https://h.example/x?a=2&b=1|<2 bytes>"
    assert h.parts == {"method": "GET", "url": "https://h.example/x?a=2&b=1", "body_size": 2,
                       "body_sha256": hashlib.sha256(b"\xff\x00").hexdigest(), "body_preview": None}
    other = explain_http("GET", "https://h.example/x?a=3&b=1", b"\xff\x00")
    assert h.diff(other) == ["url"]


def test_explain_http_preview_survives_a_cut_character() -> None:
    body = ("é" * 500).encode()  # byte 800 falls inside a character
    assert explain_http("POST", "https://h.example/", body).parts["body_preview"] == "é" * 200


def test_key_parts_is_frozen() -> None:
    parts = explain_tool("t", {})
    assert isinstance(parts, KeyParts)
    with pytest.raises(AttributeError):
        parts.key = "x"  # type: ignore[misc]
