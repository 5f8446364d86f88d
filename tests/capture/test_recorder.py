"""Recording: what a program does through the recorder lands in the log, complete."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _record_programs import MODEL, Tools, decide

import agentlog as al
from agentlog.errors import ToolError
from agentlog.folding import thaw
from agentlog.testing.fakes import FakeLLM


def types(run: Any) -> list[str]:
    return [e.type for e in run.iter_events()]


def test_record_writes_the_whole_story(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, tools, model = recorded
    assert types(run) == [
        "run.started", "span.started",
        "span.started", "tool.call", "tool.result", "span.ended",
        "span.started", "tool.call", "tool.result", "span.ended",
        "span.started", "llm.request", "llm.response", "span.ended",
        "state.patch",
        "span.started", "tool.call", "tool.result", "span.ended",
        "span.ended", "run.finished"]
    assert run.event(0).payload == {"inputs": {"service": "api"}}
    assert run.event(len(run) - 1).payload == {"result": "restart the api"}
    assert (model.calls, tools.alerts.calls, tools.metric.calls, tools.restart.calls) == (1, 1, 1, 1)
    assert run.verify().ok


def test_llm_response_carries_usage_and_cost(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    response = next(e for e in run.iter_events() if e.type == "llm.response")
    request = run.event(response.caused_by)
    assert request.type == "llm.request" and request.payload["key"] == response.payload["key"]
    assert response.model == MODEL and response.input_tokens > 0 and response.output_tokens == 3
    assert response.cost_usd is not None and response.cost_usd > 0
    assert response.payload["cost_source"] == "computed" and response.payload["cache_hit"] is False
    assert response.payload["message"] == {"role": "assistant", "content": "restart the api"}
    assert response.duration_ms is not None and response.duration_ms >= 0


def test_tool_gets_an_idempotency_key_of_run_and_seq(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, tools, _ = recorded
    call = next(e for e in run.iter_events() if e.type == "tool.call" and e.payload["name"] == "restart")
    assert call.payload["idempotency_key"] == f"{run.id}:{call.seq}"
    assert tools.restarts == [f"{run.id}:{call.seq}"]


def test_spans_nest_and_events_belong_to_them(recorded: tuple[Any, Tools, FakeLLM]) -> None:
    run, _, _ = recorded
    events = list(run.iter_events())
    outer = events[1]
    assert outer.type == "span.started" and outer.payload == {"name": "triage", "kind": "agent", "parent": None}
    inner = [e for e in events if e.type == "span.started" and e.seq != outer.seq]
    assert {e.payload["parent"] for e in inner} == {outer.span_id}
    assert {e.payload["kind"] for e in inner} == {"tool", "llm"}
    llm_span = next(e for e in inner if e.payload["kind"] == "llm")
    assert {e.type for e in events if e.span_id == llm_span.span_id} == {
        "span.started", "llm.request", "llm.response", "span.ended"}


def test_state_is_folded_as_the_program_runs(store: Any) -> None:
    seen = {}

    def program(rec: Any) -> None:
        rec.patch([{"op": "add", "path": "/plan", "value": ["look"]}])
        seen["plan"] = thaw(rec.state["vars"]["plan"])
        with pytest.raises(al.PatchError):  # checked before anything is written
            rec.patch([{"op": "remove", "path": "/missing"}])
    run = al.record(program, store=store)
    assert seen == {"plan": ["look"]}
    assert [e.type for e in run.iter_events()] == ["run.started", "state.patch", "run.finished"]


def test_failing_tool_is_recorded_and_raised(store: Any) -> None:
    def boom(**_: Any) -> None:
        raise RuntimeError("disk full")

    def program(rec: Any) -> None:
        rec.tool("write", {"path": "/x"}, boom)

    with pytest.raises(ToolError, match="disk full") as info:
        al.record(program, store=store, name="fails")
    run = store.run(store.list_runs()[0])
    assert any("recorded as run" in note for note in info.value.__notes__)
    result = next(e for e in run.iter_events() if e.type == "tool.result")
    assert result.payload["error"] == "RuntimeError: disk full"
    assert [e.type for e in run.iter_events()][-2:] == ["span.ended", "run.failed"]
    assert run.meta["status"] == "failed"


def test_now_uuid_random_are_recorded(store: Any) -> None:
    def program(rec: Any) -> list[Any]:
        return [rec.now(), str(rec.uuid()), rec.random()]
    run = al.record(program, store=store, clock=lambda: 1_700_000_000.0)
    values = [e.payload["value"] for e in run.iter_events() if e.type in ("time.now", "uuid.new", "random.value")]
    assert values == run.event(len(run) - 1).payload["result"]
    assert values[0] == 1_700_000_000.0


def test_decorators_record_only_under_a_recorder(store: Any) -> None:
    @al.tool
    def lookup(term: str, limit: int = 3) -> list[str]:
        return [term] * limit

    @al.span(kind="agent")
    def plan() -> list[str]:
        return lookup("cpu", limit=2)

    assert plan() == ["cpu", "cpu"]  # a plain call
    run = al.record(lambda rec: plan(), store=store)
    call = next(e for e in run.iter_events() if e.type == "tool.call")
    assert call.payload["name"] == "lookup" and call.payload["args"] == {"term": "cpu", "limit": 2}
    assert next(e for e in run.iter_events() if e.type == "span.started").payload["name"] == "plan"


def test_recording_context_manager(store: Any) -> None:
    with al.recording(store=store, name="block") as rec:
        rec.emit("note", {"text": "hello"})
    run = store.run(rec.run_id)
    assert [e.type for e in run.iter_events()] == ["run.started", "note", "run.finished"]


def test_async_program_records_with_correct_span_nesting(store: Any) -> None:
    model = FakeLLM(decide)

    async def fetch(rec: Any, name: str) -> Any:
        with rec.span(f"fetch {name}", kind="chain"):
            await asyncio.sleep(0)
            return await rec.atool("get_metric", {"name": name}, lambda name: 0.9)

    async def program(rec: Any) -> str:
        with rec.span("root", kind="agent"):
            values = await asyncio.gather(fetch(rec, "cpu"), fetch(rec, "mem"))
            answer = await rec.allm({"model": MODEL, "messages": [
                {"role": "user", "content": f"cpu={values[0]}"}]}, call=model.acall)
            return answer.content

    run = asyncio.run(al.arecord(program, store=store))
    events = list(run.iter_events())
    spans = {e.span_id: e.payload for e in events if e.type == "span.started"}
    root = next(sid for sid, p in spans.items() if p["name"] == "root")
    fetches = {sid for sid, p in spans.items() if p["name"].startswith("fetch")}
    assert {spans[sid]["parent"] for sid in fetches} == {root}
    tool_spans = [sid for sid, p in spans.items() if p["kind"] == "tool"]
    assert {spans[sid]["parent"] for sid in tool_spans} == fetches  # each tool under its own fetch
    assert run.event(len(run) - 1).payload["result"] == "restart the api"
    assert al.replay(program_sync_wrapper(program), run).ok


def program_sync_wrapper(program: Any) -> Any:
    """Strict replay drives programs synchronously; run the coroutine to completion inside."""
    def sync(rec: Any) -> Any:
        return asyncio.run(program(rec))
    return sync


def test_a_batch_the_writer_refuses_is_written_as_one_at_a_time_would_be(store: Any) -> None:
    from agentlog.capture.recorder import Recorder
    from agentlog.capture.sinks import WriterSink
    from agentlog.errors import CanonicalJSONError
    from agentlog.events import Note, SpanStarted
    from agentlog.store.writer import Emit

    writer = store.create_run(run_id="r", durability="none")
    rec = Recorder(WriterSink(writer))
    ok = rec.emit_many([Emit(Note(extra={"text": "a"})), Emit(Note(extra={"text": "b"}), caused_by_item=0)])
    assert [(e.seq, e.caused_by) for e in ok] == [(0, None), (1, 0)]
    bad = SpanStarted(name="x", kind="chain", attributes={"v": object()})  # no JSON form
    taken: list[Any] = []
    with pytest.raises(CanonicalJSONError, match="seq 4"):
        rec.emit_many([Emit(Note(extra={"text": "c"})), Emit(Note(extra={"text": "d"}), caused_by_item=0),
                       Emit(bad)], taken=taken)
    assert [(e.seq, e.caused_by) for e in taken] == [(2, None), (3, 2)]  # the two before the refused one
    writer.close()
    assert [e.payload.get("text") for e in store.run("r").iter_events()] == ["a", "b", "c", "d"]


@pytest.mark.usefixtures("no_background_write")  # fsyncs counted exactly
def test_a_model_call_costs_one_fsync_and_a_tool_call_two(store: Any, fsyncs: list[int]) -> None:
    """With the default durability, ``rec.llm`` writes its span and request before the model
    is asked (a reader sees them) and fsyncs them with the answer; ``rec.tool``'s call is on
    disk, fsynced, before the tool runs (it may change something), and its result is fsynced
    with the span's end."""
    synced = fsyncs
    seen: dict[str, Any] = {}

    def look(what: str) -> None:
        seen[what] = ([e.type for e in store.run(seen["run"]).iter_events()][-2:], synced.count(seen["fd"]))

    def model(request: Any) -> dict[str, Any]:
        look("model")
        return {"model": MODEL, "choices": [{"message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1}}

    def tool(x: int) -> int:
        look("tool")
        return x + 1

    with al.recording(store=store, name="fsyncs") as rec:
        seen["run"], seen["fd"] = rec.run_id, rec._sink.writer._wal._fd
        synced.clear()
        rec.llm({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, model)
        after_llm = synced.count(seen["fd"])
        assert rec.tool("add", {"x": 1}, tool) == 2
        after_tool = synced.count(seen["fd"])
    assert seen["model"] == (["span.started", "llm.request"], 0)
    assert after_llm == 1
    assert seen["tool"] == (["span.started", "tool.call"], 2)
    assert after_tool == 3


def test_spans_opened_at_once_from_threads_each_get_their_own_id(store: Any) -> None:
    """A span's id is the seq of its ``span.started``, taken as it is written: spans opened at
    the same moment from several threads of one recording (a parallel run's branches, a thread
    pool of tool calls) never share one, and each event is in its own thread's span."""
    import threading

    def program(rec: Any) -> None:
        def work(i: int) -> None:
            for j in range(40):
                with rec.span(f"step {i}.{j}"):
                    rec.emit("note", {"thread": i, "step": j})

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    run = al.record(program, store=store)
    events = list(run.iter_events())
    started = [e for e in events if e.type == "span.started"]
    assert len(started) == 240 and all(e.span_id == f"s{e.seq}" for e in started)
    names = {e.span_id: e.payload["name"] for e in started}
    notes = [e for e in events if e.type == "note"]
    assert all(names[e.span_id] == f"step {e.payload['thread']}.{e.payload['step']}" for e in notes)
