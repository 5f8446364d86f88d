"""What emit refuses, what it redacts, what becomes a blob; a refused emit changes nothing."""

from __future__ import annotations

import datetime
import enum
from pathlib import Path
from typing import Any

import pytest
from _store_helpers import FixedClock, sha, tree_bytes
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.errors import BlobNotFoundError, CanonicalJSONError, InvalidBlobRefError
from agentlog.events import BlobRef
from agentlog.store import Store


@pytest.fixture
def writer(store: Store) -> Any:
    w = store.create_run(run_id="p", clock=FixedClock(), blob_threshold=64)
    w.emit("note", {"first": True})
    yield w
    w.close()


def test_nan_message_names_path_run_and_seq(writer: Any) -> None:
    with pytest.raises(CanonicalJSONError) as info:
        writer.emit("note", {"usage": {"scores": [1.0, float("nan")]}})
    assert str(info.value) == ("payload.usage.scores[1]: NaN is not JSON; use null or a string "
                               "(run 'p', seq 1)")
    assert info.value.path == "payload.usage.scores[1]"


def test_set_message(writer: Any) -> None:
    with pytest.raises(CanonicalJSONError) as info:
        writer.emit("note", {"tags": {"a", "b"}})
    assert str(info.value) == "payload.tags: set is not JSON (run 'p', seq 1)"


def test_bytes_key_message(writer: Any) -> None:
    with pytest.raises(CanonicalJSONError) as info:
        writer.emit("note", {"h": {b"k": 1}})
    assert str(info.value) == "payload.h[b'k']: keys must be strings, got bytes (run 'p', seq 1)"


@pytest.mark.parametrize("bad", [[1, 2], "text", 3, ("a", "b")])
def test_payload_must_be_a_mapping(writer: Any, bad: Any) -> None:
    with pytest.raises(TypeError) as info:
        writer.emit("note", bad)
    assert str(info.value) == f"run 'p', seq 1: payload must be a mapping, got {type(bad).__name__}"


def test_other_non_json_values(writer: Any) -> None:
    for payload, path in [({"x": object()}, "payload.x"), ({"x": float("inf")}, "payload.x"),
                          ({"x": "\ud800"}, "payload.x"), ({"a": [{"b": 1j}]}, "payload.a[0].b")]:
        with pytest.raises(CanonicalJSONError) as info:
            writer.emit("note", payload)
        assert info.value.path == path and "(run 'p', seq 1)" in str(info.value)


def test_a_refused_emit_leaves_the_run_untouched(store: Store, writer: Any) -> None:
    run_dir = store.runs_path / "run_id=p"
    before = tree_bytes(run_dir), sorted(store.blobs), writer.seq, writer.head
    big = "x" * 1000  # would become a blob, but the event is refused: no blob is stored
    for bad in [{"big": big, "bad": float("nan")}, {"big": big, "s": {1}}, ["x"],
                {"b": b"bytes", "n": float("nan")}]:
        with pytest.raises((CanonicalJSONError, TypeError)):
            writer.emit("note", bad)
    with pytest.raises(CanonicalJSONError):
        writer.emit("note", {}, cost_usd=float("nan"))
    with pytest.raises(TypeError):
        writer.emit("note", {}, input_tokens="ten")
    assert (tree_bytes(run_dir), sorted(store.blobs), writer.seq, writer.head) == before
    e = writer.emit("note", {"ok": 1})
    assert e.seq == 1
    writer.close()
    assert store.run("p").verify().ok


def test_usage_nan_and_types(writer: Any) -> None:
    with pytest.raises(CanonicalJSONError) as info:
        writer.emit("note", {}, cost_usd=float("nan"))
    assert str(info.value) == "cost_usd: NaN is not JSON; use None (run 'p', seq 1)"
    with pytest.raises(TypeError, match="input_tokens must be a whole number"):
        writer.emit("note", {}, input_tokens=1.5)
    with pytest.raises(ValueError, match="does not fit in int64"):
        writer.emit("note", {}, output_tokens=2**63)
    with pytest.raises(ValueError, match="caused_by 5 is not an earlier seq"):
        writer.emit("note", {}, caused_by=5)
    e = writer.emit("note", {}, input_tokens=10.0, cost_usd=2, duration_ms=True)
    assert (e.input_tokens, e.cost_usd, e.duration_ms) == (10, 2.0, 1.0)


def test_redaction_before_anything_reaches_disk(store: Store) -> None:
    w = store.create_run(run_id="red", redact=["X-Session"])
    secret = "sk-very-secret-token-123"
    e = w.emit("x.request", {
        "headers": {"Authorization": secret, "proxy-authorization": secret, "API-Key": secret,
                    "x-api-key": secret, "Cookie": secret, "set-cookie": secret,
                    "x-session": secret, "accept": "text/html"},
        "nested": [{"authorization": {"deep": secret}}], "body": b"\x00",
    })
    assert e.payload["headers"]["Authorization"] == "[REDACTED]"
    assert e.payload["headers"]["x-session"] == "[REDACTED]"
    assert e.payload["headers"]["accept"] == "text/html"
    assert e.payload["nested"][0]["authorization"] == "[REDACTED]"
    wal = (store.runs_path / "run_id=red" / "wal.jsonl").read_bytes()
    assert secret.encode() not in wal and b"[REDACTED]" in wal
    w.close()
    assert all(secret.encode() not in data for data in tree_bytes(store.path).values())
    # the writer's own redaction names survive a reopen
    w2 = store.writer("red")
    assert w2.emit("note", {"X-SESSION": "again"}).payload["X-SESSION"] == "[REDACTED]"
    w2.close()
    assert store.run("red").verify().ok


def test_blob_threshold_and_bytes(store: Store) -> None:
    w = store.create_run(run_id="th", blob_threshold=16)
    e = w.emit("note", {"at": "a" * 16, "over": "a" * 17, "tiny": b"", "multi": "€" * 6})
    assert e.payload["at"] == "a" * 16
    assert isinstance(e.payload["over"], BlobRef) and e.payload["over"].size == 17
    assert e.payload["tiny"] == BlobRef(sha(b""), 0, "application/octet-stream")
    assert e.payload["multi"].size == 18  # 6 characters, 18 UTF-8 bytes
    w.close()


def test_blob_refs_in_payload(store: Store, tmp_path: Path) -> None:
    w = store.create_run(run_id="refs")
    ref = w.put_blob("stored text")
    e = w.emit("note", {"obj": ref, "json": ref.to_json()})
    assert e.payload["obj"] == ref == e.payload["json"]
    with pytest.raises(InvalidBlobRefError) as info:
        w.emit("note", {"x": {"$blob": "sha256:../../etc/passwd", "size": 1}})
    assert str(info.value) == ("payload.x (run 'refs', seq 1): invalid blob reference "
                               "'sha256:../../etc/passwd': expected 'sha256:' + 64 lower-case hex")
    with pytest.raises(InvalidBlobRefError):
        w.emit("note", {"x": {"$blob": ref.digest, "size": -1}})
    with pytest.raises(InvalidBlobRefError, match="the blob has 11 bytes"):
        w.emit("note", {"x": {"$blob": ref.digest, "size": 12}})
    for ambiguous in [{"x": {"$blob": None}}, {"x": [{"$blob": "text", "size": 4}]}]:
        with pytest.raises(InvalidBlobRefError):  # would read back as a (broken) reference
            w.emit("note", ambiguous)
    with pytest.raises(InvalidBlobRefError, match="a payload cannot itself be a blob reference"):
        w.emit("note", ref.to_json())
    missing = BlobRef(sha(b"never stored"), 12)
    with pytest.raises(BlobNotFoundError):
        w.emit("note", {"x": missing})
    assert w.seq == 1
    w.close()


def test_input_payload_is_not_modified(store: Store) -> None:
    w = store.create_run(run_id="inp", blob_threshold=4)
    payload = {"Authorization": "s", "long": "abcdef", "raw": b"x", "list": (1, 2)}
    copy = dict(payload)
    w.emit("note", payload)
    assert payload == copy
    w.close()


def test_type_and_text_fields_are_checked(writer: Any) -> None:
    with pytest.raises(TypeError, match="type must be a non-empty str"):
        writer.emit("", {})
    with pytest.raises(TypeError, match="actor must be a str"):
        writer.emit("note", {}, actor=3)
    with pytest.raises(CanonicalJSONError, match="span_id"):
        writer.emit("note", {}, span_id="\udc00")


class _Level(enum.IntEnum):
    HIGH = 3


class _Mode(enum.StrEnum):
    FAST = "fast"


_ODD = st.sampled_from([float("nan"), float("inf"), 1e-05, 9.99e-05, 5e-324, -1e-7, 1e16, 2**64, -(2**63) - 1,
                        "\ud800", "é\udfff", _Level.HIGH, _Mode.FAST, {1, 2}, datetime.date(2026, 12, 3), b"\x00\xff",
                        ("t", 1.5), 1j, object])
_PAYLOAD_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.text(min_size=70, max_size=90)
    | _ODD,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=6) | st.sampled_from(["api_key", "properties"]) | st.integers(0, 3) | st.just(_Mode.FAST),
        inner, max_size=3),
    max_leaves=10)


@settings(max_examples=500, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=6) | st.sampled_from(["token", "url"]), _PAYLOAD_VALUES, max_size=4))
def test_the_one_walk_encodes_as_the_checked_way(payload: dict[str, Any]) -> None:
    """PayloadPreparer.encode (one walk, canonical_json told what it found) gives what the walk and
    then canonical_json's own check give: the same value and text, or the same error at the same
    path (NaN, surrogates, a key that is not a str, scalar subclasses, tiny floats, big ints)."""
    from agentlog.canonical import canonical_json
    from agentlog.store.payload import PayloadPreparer

    preparer = PayloadPreparer(redact=["url"], threshold=64, reader=None)
    try:
        prepared = preparer.prepare(payload)
        expected: Any = (prepared, canonical_json(prepared.value, path="payload"))
    except (CanonicalJSONError, InvalidBlobRefError) as exc:
        expected = (type(exc), str(exc))
    try:
        got: Any = preparer.encode(payload)
    except (CanonicalJSONError, InvalidBlobRefError) as exc:
        got = (type(exc), str(exc))
    assert got == expected
