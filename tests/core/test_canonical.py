"""Canonical JSON: golden vectors, refusals with field paths, round trips."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.canonical import canonical_json
from agentlog.chain import chain_hash
from agentlog.errors import CanonicalJSONError
from agentlog.events import BlobRef
from agentlog.folding import pmap, pvector
from agentlog.testing.strategies import json_values

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "canonical.json").read_text("utf-8"))


@pytest.mark.parametrize("vector", GOLDEN["vectors"], ids=lambda v: v["name"])
def test_golden_vectors(vector: dict) -> None:
    text = canonical_json(vector["input"])
    assert text == vector["canonical"]
    assert hashlib.sha256(text.encode()).hexdigest() == vector["sha256"]


def test_golden_chain_hash() -> None:
    chain = GOLDEN["chain"]
    assert chain_hash(chain["prev"], chain["body"]) == chain["hash"]


def test_persistent_structures_encode_like_plain_ones() -> None:
    value = pmap({"b": pvector([1, pmap({"y": 2, "x": 1})]), "a": (1, 2)})
    assert canonical_json(value) == '{"a":[1,2],"b":[1,{"x":1,"y":2}]}'


def test_blob_ref_encodes_as_its_reference() -> None:
    ref = BlobRef("sha256:" + "0" * 64, 5, "text/plain")
    assert canonical_json({"p": ref}) == (
        '{"p":{"$blob":"sha256:' + "0" * 64 + '","media_type":"text/plain","size":5}}')


@pytest.mark.parametrize(("value", "message"), [
    ({"x": float("nan")}, "payload.x: NaN is not JSON; use null or a string"),
    ({"x": [1, float("inf")]}, "payload.x[1]: infinity is not JSON; use null or a string"),
    ({"x": {1: "a"}}, "payload.x[1]: keys must be strings, got int"),
    ({"x": {"s": {1, 2}}}, "payload.x.s: set is not JSON"),
    ({"x": b"raw"}, "payload.x: bytes is not JSON (store bytes with put_blob)"),
    ({"x": Decimal("1.5")}, "payload.x: Decimal is not JSON"),
    ({"x": "\ud800"}, "payload.x: string is not valid UTF-8 (surrogates not allowed at 0)"),
])
def test_refusals_name_the_field(value: object, message: str) -> None:
    with pytest.raises(CanonicalJSONError) as info:
        canonical_json(value, path="payload")
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


@given(json_values())
def test_round_trip(value: object) -> None:
    text = canonical_json(value)
    assert json.loads(text) == value
    assert canonical_json(json.loads(text)) == text


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(st.characters(blacklist_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), max_size=6), inner, max_size=4),
    max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(value=_JSON)
def test_the_fast_writer_gives_the_standard_encoders_text(value: Any) -> None:
    """canonical_json writes most values with orjson; its text must be the standard encoder's,
    byte for byte (hashes and cache keys of old logs depend on it)."""
    from agentlog.canonical import _ENCODER
    assert canonical_json(value) == _ENCODER.encode(value)


@pytest.mark.parametrize("x", [1e-05, 1e-9, 5e-324, 9.99e-05, 1e-4, 1e16, 1.5e300, -0.0, 0.1 + 0.2, 2**64, -(2**63) - 1])
def test_the_fast_writer_at_the_edges(x: Any) -> None:
    from agentlog.canonical import _ENCODER
    assert canonical_json({"x": [x, {"y": x}]}) == _ENCODER.encode({"x": [x, {"y": x}]})


# --- plain_numbers: when JSON text read by the standard library needs no check walk ---------

_FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [1e-05, 1e-9, 5e-324, 9.99e-05, 1e-4, -0.0, 0.0, float("nan"), float("inf"), -float("inf")])
_TEXT = st.text(st.characters(blacklist_categories=("Cs",))) | st.sampled_from(["\ud800", "NaN", "1e-05"])
_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | _FLOATS | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=30)


def _text_of(value: Any) -> bytes:
    """JSON text as a program's client writes it (the standard library: NaN and Infinity as
    its literals, lone surrogates escaped)."""
    return json.dumps({"v": value}).encode()


@settings(max_examples=500, deadline=None)
@given(value=_ANY_JSON)
def test_plain_numbers_lets_the_walk_be_skipped_only_where_the_text_is_the_same(value: Any) -> None:
    """The transport keys a model call's request without the check walk when
    ``plain_numbers`` says its body allows: the text (or the error) must be the checked one's."""
    from agentlog.canonical import plain_numbers

    data = _text_of(value)
    parsed = json.loads(data)
    try:
        checked: object = canonical_json(parsed, path="request")
    except CanonicalJSONError as exc:
        checked = exc
    walked = plain_numbers(data)
    try:
        fast: object = canonical_json(parsed, path="request", walked=walked)
    except CanonicalJSONError as exc:
        fast = exc
    if isinstance(checked, CanonicalJSONError):
        assert isinstance(fast, CanonicalJSONError) and str(fast) == str(checked)
    else:
        assert fast == checked


@pytest.mark.parametrize(("data", "plain"), [
    (b'{"temperature":0.2,"max_tokens":30,"top_p":1}', True),
    (b'{"x":1e-05}', False), (b'{"x":1E-7}', False), (b'{"x":0.00001}', False), (b'{"x":-0.000012}', False),
    (b'{"x":NaN}', False), (b'{"x":-Infinity}', False), (b'{"x":0.0001}', True), (b'{"x":1e+300}', True),
    (b'{"note":"e-mail"}', False),  # a string spelling one: the checked way, the same text
])
def test_plain_numbers_at_the_edges(data: bytes, plain: bool) -> None:
    from agentlog.canonical import _ENCODER, plain_numbers

    assert plain_numbers(data) is plain
    if plain:  # the fast writer's text is then the standard encoder's
        value = json.loads(data)
        assert canonical_json(value, walked=True) == _ENCODER.encode(value)
