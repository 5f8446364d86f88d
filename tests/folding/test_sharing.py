"""Consecutive states share structure: appending a message copies O(log n) nodes, not the state."""

from __future__ import annotations

import sys
from itertools import pairwise

from agentlog.events import Event
from agentlog.folding import Reducers, SnapshotIndex, diff_states

N = 1_000


def conversation() -> list[Event]:
    events = [Event(seq=0, type="state.patch", payload={"ops": [
        {"op": "add", "path": "/plan", "value": ["read", "answer"]}]}),
        Event(seq=1, type="object.created", payload={"id": "doc", "kind": "page", "data": {}})]
    for i in range(N):
        events.append(Event(seq=len(events), type="llm.response",
                            payload={"message": {"role": "assistant", "content": f"step {i}"}},
                            model="m", input_tokens=10, output_tokens=2, cost_usd=0.001))
    return events


def test_appended_messages_share_everything_else() -> None:
    index = SnapshotIndex.of(conversation(), Reducers.standard(), every=100)
    states = [state for _, state in index.states(2)]
    assert len(states) == N and len(states[-1]["messages"]) == N
    for before, after in pairwise(states):
        # untouched root keys are the very same objects
        for key in ("vars", "objects", "relations", "approvals", "status"):
            assert after[key] is before[key], key
        # every earlier message is the same object: the vector shares its elements
        n = len(before["messages"])
        assert all(after["messages"][i] is before["messages"][i] for i in range(n))
        # and the diff is exactly the one append plus the usage counters
        patch = diff_states(before, after)
        assert [op["path"] for op in patch if op["path"].startswith("/messages")] == ["/messages/-"]
        assert all(op["path"].startswith(("/messages", "/usage")) for op in patch)
    # snapshots (built by one bulk fold) share the same way among themselves
    early, late = index.at(199), index.at(899)  # snapshots 2 and 9
    assert late["vars"] is early["vars"] and late["objects"] is early["objects"]
    assert all(late["messages"][i] is early["messages"][i] for i in range(len(early["messages"])))


def test_a_new_message_vector_is_small_next_to_the_conversation() -> None:
    """The vector object itself is O(1); its tail and path are what a step copies."""
    index = SnapshotIndex.of(conversation(), Reducers.standard(), every=100)
    a, b = index.at(N), index.at(N + 1)
    assert diff_states(a, b).paths[0] == "/messages/-"
    assert sys.getsizeof(b["messages"]) < 1_000
