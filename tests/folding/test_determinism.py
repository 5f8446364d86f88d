"""check_determinism names the reducer that reads the clock or global state."""

from __future__ import annotations

import time
from typing import Any

from agentlog.events import Event
from agentlog.folding import DeterminismReport, Reducers, State, check_determinism, diff_states

STANDARD = Reducers.standard()


def run(n: int) -> list[Event]:
    events = []
    for seq in range(n):
        if seq % 5 == 2:
            events.append(Event(seq=seq, type="tick"))
        else:
            events.append(Event(seq=seq, type="state.patch", payload={"ops": [
                {"op": "add", "path": f"/k{seq % 4}", "value": seq}]}))
    return events


def stamp_clock(state: State, event: Event) -> State:
    return state.set("stamp", time.perf_counter_ns())


_counter = 0


def count_globally(state: State, event: Event) -> State:
    global _counter
    _counter += 1
    return state.set("calls", _counter)


def count_purely(state: State, event: Event) -> State:
    return state.set("calls", state.get("calls", 0) + 1)


def test_the_standard_reducers_are_deterministic() -> None:
    events = run(50) + [Event(seq=50, type="llm.response", payload={"content": "x"},
                              input_tokens=3, cost_usd=0.1)]
    report = check_determinism(events, STANDARD, every=7)
    assert report.ok
    assert (report.events, report.every, report.compared, report.seq) == (51, 7, 8, None)
    assert str(report) == "deterministic: 51 events folded twice, 8 states compared"
    assert repr(report) == "<DeterminismReport ok: 51 events, 8 states compared>"


def test_a_pure_custom_reducer_passes() -> None:
    report = check_determinism(run(40), STANDARD.with_reducer("tick", count_purely), every=6)
    assert report.ok


def test_clock_reading_reducer_is_caught_at_its_first_event() -> None:
    reducers = STANDARD.with_reducer("tick", stamp_clock)
    report = check_determinism(run(40), reducers, every=8)
    assert not report.ok
    assert (report.seq, report.type) == (2, "tick")  # the first tick
    assert report.reducers == (f"{__name__}.stamp_clock",)
    assert report.paths == ("/stamp",)
    assert report.patch is not None and report.patch[0]["op"] == "replace"
    assert str(report).startswith(
        "not deterministic: after seq 2 (tick) the two folds differ at /stamp; reducers for "
        f"'tick': {__name__}.stamp_clock.")


def test_global_counter_reducer_is_caught() -> None:
    reducers = STANDARD.with_reducer("tick", count_globally)
    events = run(40)
    report = check_determinism(events, reducers, every=8)
    assert not report.ok
    assert (report.seq, report.type, report.paths) == (2, "tick", ("/calls",))
    assert report.reducers == (f"{__name__}.count_globally",)
    # caught even when it first misbehaves late in the run
    late = [Event(seq=i, type="note") for i in range(30)] + [Event(seq=30, type="tick")]
    report = check_determinism(late, reducers, every=8)
    assert (report.ok, report.seq) == (False, 30)


def test_one_stretch_and_no_events() -> None:
    assert check_determinism([], STANDARD).ok
    report = check_determinism(run(5), STANDARD.with_reducer("tick", stamp_clock))
    assert (report.ok, report.seq, report.compared) == (False, 2, 1)


def test_run_like_sources() -> None:
    events = run(20)

    class Run:
        def iter_events(self, start: int = 0, stop: int | None = None) -> Any:
            return iter(events[start:stop])

        def __len__(self) -> int:
            return len(events)

    assert check_determinism(Run(), STANDARD, every=3).ok
    report = check_determinism(Run(), STANDARD.with_reducer("tick", stamp_clock), every=3)
    assert report.seq == 2


def test_report_is_a_value() -> None:
    report = DeterminismReport(ok=False, events=3, every=1, compared=3, seq=1, type="t",
                               reducers=("m.f",), paths=("/a", "/b"),
                               patch=diff_states({"a": 1}, {"a": 2}))
    assert repr(report) == "<DeterminismReport NOT deterministic at seq 1 (t)>"
    assert "differ at /a, /b; reducers for 't': m.f." in str(report)
