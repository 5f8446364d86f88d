"""One redaction policy: planted secrets reach no file, and cache keys stay honest.

Secrets are planted in tool arguments, model request fields, HTTP headers, URLs, cookies and
request bodies; every byte of the store (Parquet decoded), the JSONL and OTLP exports and the
HTML report is searched for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

import agentlog as al
from agentlog.events import HTTPRequest
from agentlog.interop import export_jsonl, write_otlp
from agentlog.keys import canonical_llm_key, canonical_request, http_key, tool_key
from agentlog.redact import MARKER, Redactor
from agentlog.report import write_report

SECRETS = {
    "tool arg": "sk-tool-0c1d", "llm param": "sk-llm-77ab", "llm nested": "sk-nested-91f0",
    "authorization": "sk-bearer-3e3e", "x-api-key": "sk-header-5a5a", "cookie": "cookie-9b9b",
    "set-cookie": "setcookie-4c4c", "url key": "AIza-url-6d6d", "url password": "pw-url-8e8e",
    "json body": "body-secret-2f2f", "form body": "form-secret-1a1a", "note": "note-pw-7c7c",
    "named": "ssn-123-45-6789",
}


def _server(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"ok": True}, headers={"set-cookie": f"s={SECRETS['set-cookie']}"})


def planted(rec: Any) -> str:
    rec.tool("lookup", {"q": "orders", "api_key": SECRETS["tool arg"], "session_id": SECRETS["named"]},
             fn=lambda q, api_key, session_id: {"rows": 3})
    rec.llm({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
             "api_key": SECRETS["llm param"], "extra_body": {"vendor_api_key": SECRETS["llm nested"]}},
            call=lambda request: {"content": "hello", "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    with al.transport.client(rec, transport=httpx.MockTransport(_server),
                        cookies={"session": SECRETS["cookie"]}) as client:
        client.get(f"https://maps.example.test/geo?q=berlin&key={SECRETS['url key']}",
                   headers={"Authorization": f"Bearer {SECRETS['authorization']}",
                            "X-Api-Key": SECRETS["x-api-key"]})
        client.get(f"https://bob:{SECRETS['url password']}@files.example.test/report.csv")
        client.post("https://auth.example.test/token", json={"client": "app",
                                                             "client_secret": SECRETS["json body"]})
        client.post("https://auth.example.test/form", data={"grant_type": "password",
                                                            "password": SECRETS["form body"]})
    rec.emit("note", {"text": "logged in", "password": SECRETS["note"]})
    return "done"


def store_bytes(root: Path) -> bytes:
    """Every byte under ``root``, with Parquet segments decoded (they are compressed on disk)."""
    chunks = []
    for path in root.rglob("*"):
        if path.is_file():
            chunks.append(path.read_bytes())
            if path.suffix == ".parquet":
                chunks.append(json.dumps(pq.read_table(path).to_pylist(), default=str).encode())
    return b"\n".join(chunks)


@pytest.fixture
def recorded(store: Any) -> Any:
    return al.record(planted, store=store, name="planted", redact=["session_id"])


def test_no_planted_secret_reaches_any_file(recorded: Any, store: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    export_jsonl(recorded, out / "run.jsonl")
    write_otlp(recorded, out / "run.otlp.json")
    write_report(recorded, out / "report.html")
    places = {"store": store_bytes(store.path), "exports and report": store_bytes(out)}
    for where, data in places.items():
        leaked = [name for name, secret in SECRETS.items() if secret.encode() in data]
        assert leaked == [], f"{where}: {leaked}"
        assert MARKER.encode() in data or b"%5BREDACTED%5D" in data


def test_the_program_sees_its_secrets_and_the_log_the_marker(store: Any) -> None:
    seen = {}

    def program(rec: Any) -> Any:
        return rec.tool("login", {"user": "ann", "password": "hunter2"},
                        fn=lambda user, password: seen.setdefault("password", password) and {"ok": True})
    run = al.record(program, store=store)
    call = next(e for e in run.iter_events() if e.type == "tool.call")
    assert seen == {"password": "hunter2"}
    assert call.payload["args"] == {"user": "ann", "password": MARKER}
    assert call.payload["key"] == tool_key("login", {"user": "ann", "password": MARKER})


def test_a_tools_api_key_never_reaches_the_disk(store: Any) -> None:
    """The regression of issue 14 item 6: the store's list lacked ``api_key``."""
    al.record(lambda rec: rec.tool("x", {"api_key": "sk-live-abc123"}, fn=lambda api_key: 1), store=store)
    assert b"sk-live-abc123" not in store_bytes(store.path)


def _key_of(store: Any, args: dict[str, Any], run_id: str) -> str:
    run = al.record(lambda rec: rec.tool("search", args, fn=lambda **kw: 1), store=store, run_id=run_id)
    return next(e.payload["key"] for e in run.iter_events() if e.type == "tool.call")


def test_keys_tell_apart_what_is_not_secret(store: Any) -> None:
    # "key" and "token" are data as argument names (a cache key, a token count): never redacted
    a = _key_of(store, {"key": "a", "token": 1, "api_key": "sk-1"}, "a")
    b = _key_of(store, {"key": "b", "token": 1, "api_key": "sk-1"}, "b")
    c = _key_of(store, {"key": "a", "token": 2, "api_key": "sk-1"}, "c")
    assert len({a, b, c}) == 3
    assert store.run("b").event(2).payload["args"]["key"] == "b"


def test_a_rotated_credential_keeps_its_key_and_replays(store: Any) -> None:
    assert _key_of(store, {"q": "x", "api_key": "sk-old"}, "old") == _key_of(
        store, {"q": "x", "api_key": "sk-new"}, "new")
    run = store.run("old")

    def rotated(rec: Any) -> Any:
        return rec.tool("search", {"q": "x", "api_key": "sk-rotated"}, fn=lambda **kw: 1)
    assert al.replay(rotated, run).ok  # served from the log: the credential is not the request


def test_a_url_credential_is_not_the_request(store: Any) -> None:
    assert http_key("GET", "https://h.test/a?q=1&key=one") == http_key("GET", "https://h.test/a?q=1&key=two")
    assert http_key("GET", "https://h.test/a?q=1&key=one") != http_key("GET", "https://h.test/a?q=2&key=one")
    assert http_key("GET", "https://h.test/a?key=one") == http_key("GET", f"https://h.test/a?key={MARKER}")


def test_names_of_the_run_are_kept_for_its_replays_and_forks(recorded: Any, store: Any) -> None:
    assert recorded.meta["writer"]["redact"] == ["session_id"]
    call = next(e for e in recorded.iter_events() if e.type == "tool.call")
    assert call.payload["args"]["session_id"] == MARKER
    assert al.replay(planted, recorded).ok  # the replay keys the calls as the recording did
    fork = al.fork(recorded, at=len(recorded) - 3, program=planted)
    assert fork.meta["writer"]["redact"] == ["session_id"]


_COMPLETION = {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
               "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


@pytest.mark.parametrize("names", [(), ("session_id",)])
@pytest.mark.parametrize("secret", [None, "field", "url", "run name"])
def test_a_model_calls_body_through_the_transport_is_redacted_with_its_request(
        store: Any, secret: str | None, names: tuple[str, ...]) -> None:
    """The request body is looked at once for secrets: with none it is stored byte for byte,
    with one it is stored re-encoded with the marker, and the ``llm.request`` holds (and is
    keyed by) the canonical request with the same secrets redacted, as ``rec.llm`` writes it."""
    body: dict[str, Any] = {"model": "gpt-4o-mini", "temperature": 0,
                            "messages": [{"role": "user", "content": "hi é"}],
                            "tools": [{"type": "function", "function": {"name": "login", "parameters": {
                                "type": "object", "properties": {"password": {"type": "string"}}}}}]}
    planted = "sk-body-4b4b"
    if secret == "field":
        body["vendor"] = {"client_secret": planted, "region": "eu"}
    elif secret == "url":
        body["messages"].append({"role": "user", "content": f"https://h.test/cb?token={planted}&q=1"})
    elif secret == "run name":
        body["session_id"] = planted
    sent: list[bytes] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, json=_COMPLETION)

    def program(rec: Any) -> Any:
        with al.transport.client(rec, transport=httpx.MockTransport(server)) as client:
            return client.post("https://api.openai.com/v1/chat/completions", json=body).json()
    run = al.record(program, store=store, redact=names)
    asked = next(e for e in run.iter_events() if e.type == "llm.request")
    stored = HTTPRequest.of(next(e for e in run.iter_events() if e.type == "http.request")).content
    redactor = Redactor(names)
    # The oracle: the redaction as a copy (what the recorder does for rec.llm), not its shortcut.
    expected = redactor.value(canonical_request(body))
    assert {k: asked.payload[k] for k in ("model", "messages", "tools", "params")} == \
        {k: v for k, v in expected.items() if k in ("model", "messages", "tools", "params")}
    assert asked.payload["key"] == canonical_llm_key(expected)
    leaks = secret is not None and not (secret == "run name" and not names)
    if leaks:
        assert stored == json.dumps(redactor.value(body), ensure_ascii=False).encode() != sent[0]
        assert planted.encode() not in store_bytes(store.path)
    else:
        assert stored == sent[0]  # byte for byte
    assert al.replay(program, run).ok
