"""Replay: strict replay makes zero calls and explains divergences; permissive makes only new calls."""

from __future__ import annotations

import time
from typing import Any

import pytest
from _record_programs import MODEL, Tools, make_triage

import agentlog as al
from agentlog.testing.fakes import FakeLLM


def test_strict_replay_makes_zero_calls(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    tools, model = Tools(forbidden=True), FakeLLM.forbidden()
    result = al.replay(make_triage(tools, model), run, mode="strict")
    assert result.ok, str(result)
    assert result.events == len(run) and result.live == 0 and result.served == 4
    assert result.result == "restart the api"
    assert model.calls == 0 and tools.restart.calls == 0
    assert len(al.Store(run.path.parents[1]).list_runs()) == 1  # strict replay writes nothing


def test_assert_replays(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    al.testing.assert_replays(run, make_triage(Tools(forbidden=True), FakeLLM.forbidden()))
    with pytest.raises(AssertionError, match="replay diverged at seq"):
        al.testing.assert_replays(run, lambda rec: rec.emit("note", {"other": True}))


def test_reading_the_clock_directly_diverges_at_the_right_seq(store: Any) -> None:
    def program(rec: Any) -> None:
        rec.emit("note", {"step": 1})
        rec.emit("note", {"at": time.time()})  # not through rec.now(): not replayable
    run = al.record(program, store=store)
    result = al.replay(program, run)
    assert not result.ok
    d = result.divergence
    assert d.seq == 2 and d.fields == ("payload",)
    assert d.expected.payload["at"] != d.actual.payload["at"]
    assert [op["path"] for op in d.diff] == ["/at"]
    assert "replay diverged at seq 2" in str(d) and "differs in: payload" in str(d)


def test_rec_now_replays_the_recorded_time(store: Any) -> None:
    def program(rec: Any) -> None:
        rec.emit("note", {"at": rec.now()})
    run = al.record(program, store=store)
    assert al.replay(program, run).ok


def test_program_that_stops_early_or_goes_on_diverges(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    result = al.replay(lambda rec: "done", run)
    assert not result.ok and result.divergence.seq == 1
    assert result.divergence.actual.type == "run.finished"

    def longer(rec: Any) -> None:
        make_triage(Tools(forbidden=True), FakeLLM.forbidden())(rec)
        rec.emit("note", {"extra": 1})
    result = al.replay(longer, run)
    assert not result.ok and result.divergence.expected.type == "run.finished"


def test_changed_prompt_diverges_at_the_request(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded

    def changed(rec: Any) -> None:
        rec.llm({"model": MODEL, "messages": [{"role": "user", "content": "something else"}]},
                call=FakeLLM.forbidden())
    result = al.replay(changed, run)
    assert not result.ok and result.divergence.seq == 1


def test_permissive_replay_makes_exactly_the_changed_calls(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    tools, model = Tools(), FakeLLM(lambda req: "wait and watch")

    def changed(rec: Any) -> str:  # the same tools, a new system prompt for the model
        alerts = rec.tool("get_alerts", {"service": "api"}, tools.alerts)
        cpu = rec.tool("get_metric", {"name": "cpu"}, tools.metric)
        return rec.llm({"model": MODEL, "messages": [
            {"role": "system", "content": "You are a careful SRE."},
            {"role": "user", "content": f"alerts={alerts} cpu={cpu}"}]}, call=model).content
    result = al.replay(changed, run, mode="permissive")
    assert result.ok and (result.served, result.live) == (2, 1)
    assert (tools.alerts.calls, tools.metric.calls, model.calls) == (0, 0, 1)
    new = result.run
    assert new.id != run.id and new.meta["tags"] == {"replay_of": run.id}
    served = [e for e in new.iter_events() if e.type == "tool.result"]
    assert all(e.payload["served_from_seq"] >= 0 for e in served)


def test_permissive_replay_serves_llm_calls_with_no_cost(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    result = al.replay(make_triage(Tools(), FakeLLM.forbidden()), run, mode="permissive")
    response = next(e for e in result.run.iter_events() if e.type == "llm.response")
    assert response.payload["cache_hit"] is True and response.cost_usd == 0.0
    assert response.input_tokens > 0  # the conversation's size is still a fact


def test_bad_mode_lists_the_valid_ones(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    with pytest.raises(ValueError, match="use one of 'strict', 'permissive'"):
        al.replay(lambda rec: None, recorded[0], mode="lenient")


def test_failed_llm_call_replays_as_the_same_failure(store: Any) -> None:
    def flaky(request: Any) -> Any:
        raise TimeoutError("model timed out")

    def program(rec: Any) -> str:
        try:
            rec.llm({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, call=flaky)
        except al.LLMCallError as exc:
            return f"gave up: {exc.error}"
        return "answered"
    run = al.record(program, store=store)
    assert run.event(len(run) - 1).payload["result"] == "gave up: TimeoutError: model timed out"
    result = al.replay(program, run)
    assert result.ok and result.result == "gave up: TimeoutError: model timed out"


def test_permissive_replay_serves_recorded_values_and_failures(store: Any) -> None:
    def program(rec: Any) -> list[Any]:
        got = [rec.now(), str(rec.uuid()), rec.random()]
        try:
            rec.tool("divide", {"by": 0}, fn=lambda by: 1 / by)
        except al.errors.ToolError as exc:
            got.append(exc.error)
        return got
    run = al.record(program, store=store)
    replayed = al.replay(program, run, mode="permissive")
    assert replayed.ok and replayed.live == 0 and replayed.served == 4
    assert replayed.result == run.event(len(run) - 1).payload["result"]
    served = [e for e in replayed.run.iter_events() if e.type == "tool.result"]
    assert served[0].payload["served_from_seq"] == next(
        e.seq for e in run.iter_events() if e.type == "tool.result")


def test_long_text_and_bytes_the_writer_made_blobs_replay(store: Any) -> None:
    """The writer keeps a long string (over the run's blob threshold) and bytes as blobs; the
    program emits them inline, and that is the same event, not a divergence."""
    def program(rec: Any, text: str = "x" * 40_000) -> int:
        rec.emit("note", {"text": text, "raw": b"\x00\xff" * 500, "short": "kept inline"})
        return 1

    run = al.record(program, store=store)
    note = next(e for e in run.iter_events() if e.type == "note")
    assert isinstance(note.payload["text"], al.BlobRef) and isinstance(note.payload["raw"], al.BlobRef)
    assert al.replay(program, run).ok
    changed = al.replay(lambda rec: program(rec, "y" * 40_000), run)
    assert not changed.ok and changed.divergence.seq == note.seq


def test_a_span_recorded_at_the_root_replays_under_a_tracers_span_and_no_other_change(
        store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run recorded before a tracer's spans were found as parents (LangChain's, through
    ``agentlog.otel.processor.FRAMEWORK_SPANS``) had the recorder's span at the root; its
    replay, where the same span opens under the tracer's, is strict all the same. A parent that
    changes from one span to another, or any other change of the span, still diverges."""
    from agentlog.capture import recorder

    def program(rec: Any) -> None:
        with rec.span("agent", kind="agent"), rec.span("tool call", kind="tool"):
            pass
        with rec.span("model call", kind="llm"):
            rec.emit("note", {"step": 1})

    run = al.record(program, store=store)
    started = [e for e in run.iter_events() if e.type == "span.started"]
    assert [e.payload["parent"] for e in started] == [None, started[0].span_id, None]

    def under_the_agent(rec: Any) -> str:  # a tracer whose span, s1, is open around the model call
        return started[0].span_id

    monkeypatch.setattr(recorder, "SPAN_PARENTS", [*recorder.SPAN_PARENTS, under_the_agent])
    assert al.replay(program, run).ok  # the model call's span: recorded at the root, now under s1

    def elsewhere(rec: Any) -> str:  # every span under another span, s99: the tool call's was under s1
        return "s99"

    monkeypatch.setattr(recorder, "SPAN_PARENTS", [elsewhere])
    result = al.replay(program, run)
    assert not result.ok and result.divergence.seq == started[1].seq

    def renamed(rec: Any) -> None:
        with rec.span("agent", kind="agent"), rec.span("tool call", kind="tool"):
            pass
        with rec.span("another call", kind="llm"):
            rec.emit("note", {"step": 1})

    monkeypatch.setattr(recorder, "SPAN_PARENTS", [under_the_agent])
    result = al.replay(renamed, run)
    assert not result.ok and result.divergence.seq == started[2].seq


def test_the_attributes_of_the_recorders_own_span_are_compared(store: Any) -> None:
    """A tracer's span attributes are what it saw and are not compared (they can hold ids new
    on every run); the attributes a program gives its own span are what it did, and are."""
    given = iter(["first", "second"])

    def program(rec: Any) -> None:
        with rec.span("step", attributes={"plan": next(given)}):
            rec.emit("note", {"step": 1})

    run = al.record(program, store=store)
    result = al.replay(program, run)
    assert not result.ok and result.divergence.seq == 1
    assert "/attributes/plan" in str(result.divergence)


def test_recorded_answers_are_taken_from_several_threads_at_once() -> None:
    """A permissive replay or a fork of a run whose calls went out side by side from threads
    (a parallel run's branches) takes their answers at once: each call gets its own, once."""
    import threading

    from agentlog.capture.sinks import ResponseCache
    from agentlog.events import Event

    def recorded() -> Any:  # read lazily, as the cache reads a run
        for i in range(4000):
            time.sleep(0)  # let another thread in while this one reads
            yield Event(seq=i, type="tool.result", payload={"key": f"k{i}", "name": "t", "result": i})

    cache = ResponseCache(recorded())
    got: dict[int, Any] = {}
    failed: list[BaseException] = []

    def take(worker: int) -> None:
        try:
            for i in range(worker, 4000, 8):
                got[i] = cache.take("tool.result", f"k{3999 - i}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    threads = [threading.Thread(target=take, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == []
    assert all(got[i] is not None and got[i].payload["result"] == 3999 - i for i in range(4000))
