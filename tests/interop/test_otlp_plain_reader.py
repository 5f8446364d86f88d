"""The direct OTLP/JSON reader reads exactly what protobuf's JSON mapping reads (the oracle), and
leaves to the mapping whatever is not in the plain shape."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

import agentlog as al
from agentlog.interop.otlp_read import (
    _NotPlain,
    _plain_spans,
    request_of_json,
    spans_of_json,
    spans_of_request,
)


def _request() -> dict[str, Any]:
    return al.interop.export_otlp(al.examples.sample_store().run("sre-0001"))


def _by_protobuf(request: dict[str, Any]) -> list[Any]:
    return spans_of_request(request_of_json(request, "t", 1), "t:1")


def test_plain_spans_equal_protobufs_reading() -> None:
    request = _request()
    plain = list(_plain_spans(request, "t:1"))
    assert len(plain) > 20
    assert plain == _by_protobuf(request)
    assert spans_of_json(request, "t", 1) == plain


def test_other_shapes_go_through_protobuf_and_read_the_same() -> None:
    request = _request()
    other = copy.deepcopy(request)
    span = other["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"] = base64.b64encode(bytes.fromhex(span["traceId"])).decode()  # protobuf's own id form
    with pytest.raises(_NotPlain):
        list(_plain_spans(other, "t:1"))
    assert spans_of_json(other, "t", 1) == _by_protobuf(request)
