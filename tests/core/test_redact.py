"""The redaction policy: which names are secrets, what becomes the marker, what is left alone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


_NAMES = st.sampled_from(["api_key", "password", "Authorization", "properties", "content", "key", "token",
                          "messages", "session_id", "x"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.sampled_from([MARKER, "hi", "https://h.test/?key=k1", "https://h.test/?q=1",
                                     "https://u:pw@h.test/", "https://h.test/x", "http://a?token=t"]))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(_NAMES, inner, max_size=4)),
                       max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(value=_VALUES, names=st.sampled_from([(), ("session_id",)]))
def test_finds_says_whether_value_would_change_anything(value: Any, names: tuple[str, ...]) -> None:
    # The transport keeps a request body byte for byte, and skips the redacted copy of its
    # canonical form, exactly when this is False: the oracle is the copy itself.
    redactor = Redactor(names)
    assert redactor.finds(value) is (redactor.value(value) != value)
    assert redactor.finds({"properties": value}) is (redactor.value({"properties": value}) != {"properties": value})


def test_finds_a_marker_already_in_place_changes_nothing() -> None:
    assert not DEFAULT.finds({"api_key": MARKER, "nested": [{"password": MARKER}]})
    assert DEFAULT.finds({"api_key": None}) and DEFAULT.finds({"credentials": {"pin": 1}})
    schema = {"properties": {"password": {"type": "string"}}}
    assert not DEFAULT.finds(schema) and DEFAULT.finds({"properties": {"password": "p"}})
