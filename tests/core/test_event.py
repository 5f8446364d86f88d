"""Event and BlobRef values."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlog.errors import InvalidBlobRefError
from agentlog.events import BlobRef, Event, is_blob_json

HEX = "0123456789abcdef" * 4


def test_event_is_frozen() -> None:
    event = Event(seq=0, type="note")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 1  # type: ignore[misc]
    assert dataclasses.replace(event, seq=1).seq == 1


def test_event_time_is_utc() -> None:
    assert Event(seq=0, type="x", ts=1_700_000_000_000_000).time.isoformat() == "2023-11-14T22:13:20+00:00"


@pytest.mark.parametrize("digest", ["sha256:../../etc/passwd", "sha256:" + HEX.upper(), "md5:" + HEX,
                                    "sha256:" + HEX[:-1], "sha256:" + HEX + "0", None, 5])
def test_blob_ref_refuses_anything_but_sha256_hex(digest: object) -> None:
    with pytest.raises(InvalidBlobRefError):
        BlobRef(digest, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidBlobRefError):
        BlobRef.from_json({"$blob": digest, "size": 1})


def test_blob_ref_from_json_checks_size() -> None:
    with pytest.raises(InvalidBlobRefError):
        BlobRef.from_json({"$blob": "sha256:" + HEX, "size": -1})
    ref = BlobRef.from_json({"$blob": "sha256:" + HEX, "size": 3})
    assert ref.media_type == "application/octet-stream" and ref.hex == HEX


def test_blob_ref_reads_through_its_reader() -> None:
    ref = BlobRef("sha256:" + HEX, 7, "application/json", reader=lambda d: b'{"a": 1}')
    assert ref.json() == {"a": 1} and ref.text() == '{"a": 1}'
    assert ref == BlobRef("sha256:" + HEX, 7, "application/json")  # the reader is not part of equality
    with pytest.raises(RuntimeError, match="not attached to a store"):
        BlobRef("sha256:" + HEX, 7).read_bytes()


def test_is_blob_json() -> None:
    assert is_blob_json({"$blob": "x"}) and not is_blob_json({"blob": 1}) and not is_blob_json("$blob")


@given(values=st.tuples(st.integers(0, 10**9), st.text(max_size=8), st.dictionaries(st.text(max_size=3), st.integers()),
                        st.none() | st.text(max_size=4), st.none() | st.integers(0, 9), st.none() | st.text(max_size=4),
                        st.integers(), st.none() | st.text(max_size=4), st.none() | st.integers(), st.none() | st.integers(),
                        st.none() | st.integers(), st.none() | st.floats(allow_nan=False), st.none() | st.floats(allow_nan=False),
                        st.text(max_size=8)))
def test_stamped_makes_the_event_the_constructor_makes(values: tuple[Any, ...]) -> None:
    """The writer's event maker sets every field, in Event's order, and nothing else runs in
    Event's __init__ that it would skip."""
    from agentlog.events.event import stamped

    names = [f.name for f in dataclasses.fields(Event)]
    made = stamped(*values)
    assert made == Event(**dict(zip(names, values, strict=True)))
    assert [getattr(made, name) for name in names] == list(values)
    assert not hasattr(Event, "__post_init__")
