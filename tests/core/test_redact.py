"""The redaction policy: which names are secrets, what becomes the marker, what is left alone."""

from __future__ import annotations

import pytest

from agentlog.redact import DEFAULT, MARKER, Redactor


@pytest.mark.parametrize(("name", "secret"), [
    ("Authorization", True), ("x-api-key", True), ("X-Goog-Api-Key", True), ("set-cookie", True),
    ("openai_api_key", True), ("client_secret", True), ("db_password", True), ("credentials", True),
    ("key", False), ("token", False), ("max_tokens", False), ("input_tokens", False), ("id", False),
    ("prompt_cache_key", False), ("keyword", False),
])
def test_names(name: str, secret: bool) -> None:
    assert DEFAULT.is_secret(name) is secret
    assert DEFAULT.is_secret(name) is secret  # the memo answers the same


def test_url_only_parameters() -> None:
    assert DEFAULT.is_secret_param("key") and DEFAULT.is_secret_param("X-Amz-Signature")
    assert not DEFAULT.is_secret_param("q")


def test_values_are_walked_and_secret_ones_replaced_whole() -> None:
    schema = {"type": "object", "properties": {"password": {"type": "string"}, "api_key": "x"}}
    value = {"password": "p", "nested": [{"api_key": 7}], "token": "t", "credentials": {"pin": 1},
             "tools": [schema], "link": "https://h.test/?sig=abc&x=1"}
    assert DEFAULT.value(value) == {
        "password": MARKER, "nested": [{"api_key": MARKER}], "token": "t", "credentials": MARKER,
        "tools": [{"type": "object", "properties": {"password": {"type": "string"}, "api_key": MARKER}}],
        "link": "https://h.test/?sig=%5BREDACTED%5D&x=1"}
    assert value["password"] == "p"  # a copy: the input is not changed


def test_urls_without_secrets_are_kept_byte_for_byte() -> None:
    for url in ("https://h.test/a?b=c+d&e=%2F", "https://h.test/x", "ftp://u:p@h.test/", "not a url ?key=1"):
        assert DEFAULT.url(url) == url if url.startswith("http") else DEFAULT.value(url) == url


def test_names_added_by_a_run() -> None:
    mine = DEFAULT.with_names(["Session-ID"])
    assert mine.names == ("session_id",) and mine.is_secret("session_id") and not DEFAULT.is_secret("session_id")
    assert mine.with_names(["session_id"]) is mine and mine == Redactor(["SESSION_ID"])
    assert mine.headers([("Session-Id", "s1"), ("Accept", "*/*")]) == {"session-id": MARKER, "accept": "*/*"}
