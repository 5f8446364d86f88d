"""Property: whatever JSON a program emits, in whatever rhythm of seals and reopens, reads back."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.events import BlobRef
from agentlog.redact import DEFAULT
from agentlog.store import Store

# "$blob" keys are blob references, refused when malformed (test_payload.py)
_keys = st.text(min_size=0, max_size=8).filter(lambda k: k != "$blob")
_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40))
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(_keys, inner, max_size=4), max_leaves=12)
_payloads = st.dictionaries(_keys, _json | st.binary(max_size=30), max_size=5)
# each step: ("emit", payload) or ("reopen", None)
_steps = st.lists(st.one_of(st.tuples(st.just("emit"), _payloads),
                            st.tuples(st.just("reopen"), st.none())), min_size=1, max_size=25)


def _plain(value: Any) -> Any:
    """What a stored payload looks like read back: blobs as their bytes."""
    if isinstance(value, BlobRef):
        return value.read_bytes()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _expected(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str) and len(value.encode("utf-8", "surrogatepass")) > 32:
        return value.encode()
    if isinstance(value, dict):
        return {k: ("[REDACTED]" if DEFAULT.is_secret(k) else _expected(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_expected(v) for v in value]
    return value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps, segment_events=st.integers(min_value=1, max_value=5))
def test_emitted_payloads_read_back_through_seals_and_reopens(steps: list[tuple[str, Any]],
                                                              segment_events: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp))
        w = store.create_run(run_id="prop", segment_events=segment_events, blob_threshold=32,
                             durability="none")
        emitted, model = [], []
        for kind, payload in steps:
            if kind == "reopen":
                w.close()
                w = store.writer("prop", durability="none")
                continue
            before = copy.deepcopy(payload)
            e = w.emit("note", payload)
            assert payload == before  # the input is not changed
            emitted.append(e)
            model.append(_expected(payload))
        w.close()
        run = store.run("prop")
        events = list(run.iter_events())
        assert events == emitted
        assert [_plain(e.payload) for e in events] == model
        assert run.verify().ok and len(run) == len(model)
