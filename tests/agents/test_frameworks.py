"""Real agents recorded as they are, with one line: a LangGraph ``create_react_agent`` (langgraph
+ langchain-openai), an OpenAI Agents SDK agent and a PydanticAI agent, against the loopback
OpenAI-compatible server. Each run has one LLM row per model call with tokens and cost equal to genai-prices' own
price of the usage the server sent, replays strictly with zero requests, and forks at a tool
result with a changed value: the fork's next model call differs and goes to the server."""

from __future__ import annotations

import asyncio
import itertools
import json
import operator
import warnings
from typing import Annotated, Any, TypedDict

import httpx
import pandas as pd
import pytest
from _server import ANSWERED_MODEL, ASK_EVERY, EVERY_SERVICE, MODEL, SLOW, USAGE, LLMServer, expected_cost

import agentlog as al
from agentlog.events import SpanEnded

QUESTION = "cpu=0.9 on api, what now?"


def _status(service: str) -> str:
    return f"{service} cpu=0.9"


def _check_calls(run: Any, n: int) -> None:
    calls = run.llm_calls()
    assert len(calls) == n
    assert calls["model"].tolist() == [ANSWERED_MODEL] * n
    assert calls["input_tokens"].tolist() == [USAGE["prompt_tokens"]] * n
    assert calls["cached_tokens"].tolist() == [USAGE["prompt_tokens_details"]["cached_tokens"]] * n
    assert calls["cost_usd"].tolist() == pytest.approx([expected_cost()] * n, rel=1e-12)


def _fork_at_the_tool_result(run: Any, program: Any, server: LLMServer) -> Any:
    [result] = [e for e in run.iter_events() if e.type == "tool.result"]
    before = len(server.requests)
    forked = al.fork(run, result.seq - 1, program=program,
                     edit=al.edit.replace_response(result.seq, {"result": "api cpu=0.1"}))
    assert len(server.requests) == before + 1  # the changed model call went out; the first was served
    assert "api cpu=0.1" in str(server.requests[-1][1]["messages"][-1])
    return forked


def _check_nested_under_langchain(handle: Any, run: Any, openai_spans: bool = False) -> None:
    """Each span the recorder opened inside a LangChain run is under that run's span, though
    LangChain never makes its spans current: the transport's model call under LangChain's LLM
    span (ChatOpenAI's; under the OpenAI instrumentor's span there when ``openai_spans``, that
    span under LangChain's), @al.tool's span under LangChain's tool span. The graph's span is
    the only root."""
    spans = run.spans().set_index("span_id")
    written = {w.span_id for w in handle.processor.written(run.id)}

    def parent(span_id: str) -> str | None:
        above = spans.loc[span_id, "parent"]
        return None if pd.isna(above) else str(above)

    def what(span_id: str | None) -> tuple[str, str]:
        return str(spans.loc[span_id, "name"]), str(spans.loc[span_id, "kind"])

    assert [what(s) for s in spans.index if parent(s) is None] == [("LangGraph", "chain")]
    own = [s for s in spans.index if s not in written]  # the transport's model calls, @al.tool's call
    assert sorted(what(s)[1] for s in own) == ["llm", "llm", "tool"]
    for span_id in own:
        above = parent(span_id)
        if what(span_id)[1] == "tool":
            assert what(above) == ("status", "tool")
            continue
        if openai_spans:
            assert what(above) == ("ChatCompletion", "llm")
            above = parent(above)
        assert what(above) == ("ChatOpenAI", "llm")


# --- LangGraph ----------------------------------------------------------------------------------


def _langgraph_agent(server: LLMServer, async_client: Any = None) -> Any:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent
    from langgraph.warnings import LangGraphDeprecatedSinceV10

    @tool
    @al.tool  # the one change to the agent: its tool's result is recorded, so a fork can change it
    def status(service: str) -> str:
        """The status of a service."""
        return _status(service)

    model = ChatOpenAI(model=MODEL, base_url=server.url, api_key="test", max_retries=0,  # type: ignore[arg-type]
                       http_async_client=async_client)
    with warnings.catch_warnings():  # LangGraph 1.x points to langchain.agents (not installed here)
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        return create_react_agent(model, [status])


def test_a_langgraph_agent_recorded_replayed_and_forked(server: LLMServer, store: Any) -> None:
    graph = _langgraph_agent(server)

    def program(rec: Any) -> str:
        state = graph.invoke({"messages": [("user", QUESTION)]})
        return str(state["messages"][-1].content)

    run = al.record(program, store=store, name="langgraph")
    assert run.status == "finished", run.status
    assert run.event(len(run) - 1).payload["result"] == "done: api cpu=0.9"
    assert len(server.requests) == 2
    _check_calls(run, 2)
    assert [e.payload["name"] for e in run.iter_events() if e.type == "tool.call"] == ["status"]

    result = al.replay(program, run)
    assert result.ok, str(result.divergence)
    assert len(server.requests) == 2  # strict replay: zero requests

    forked = _fork_at_the_tool_result(run, program, server)
    assert forked.event(len(forked) - 1).payload["result"] == "done: api cpu=0.1"
    calls = forked.llm_calls()
    own = calls[calls["seq"] > forked.fork_seq]  # the prefix's call is the parent's
    assert len(calls) == 2 and own["cost_usd"].tolist() == pytest.approx([expected_cost()], rel=1e-12)
    changes = al.diff(run, forked)
    assert "api cpu=0.1" in str(changes)


def test_a_langgraph_agent_with_its_spans_counts_each_call_once(server: LLMServer, store: Any) -> None:
    """LangGraph traced by the OpenInference LangChain instrumentor: its TOOL span around the
    @al.tool tool and its LLM spans around the transport's calls are one row each."""
    handle = al.instrument(instrumentors=["openinference-instrumentation-langchain"])
    try:
        graph = _langgraph_agent(server)

        def program(rec: Any) -> str:
            state = graph.invoke({"messages": [("user", QUESTION)]})
            return str(state["messages"][-1].content)

        run = al.record(program, store=store, name="langgraph-traced")
        assert run.status == "finished", run.status
        _check_calls(run, 2)
        written = handle.processor.written(run.id)
        assert sum(1 for w in written if w.kind == "llm") == 2
        calls = [e for e in run.iter_events() if e.type == "tool.call"]
        assert [(c.payload["name"], c.payload["args"]) for c in calls] == [("status", {"service": "api"})]
        assert [e.payload["result"] for e in run.iter_events() if e.type == "tool.result"] == ["api cpu=0.9"]
        [traced] = [w for w in written if w.kind == "tool"]
        assert traced.call_seqs == []  # LangChain's TOOL span is @al.tool's call, not a second one
        assert traced.ended_seq is not None and traced.started_seq < calls[0].seq < traced.ended_seq
        # LangChain sets a span's attributes as it ends: its kind and its input and output are there
        kinds = dict(zip(run.spans()["span_id"], run.spans()["kind"], strict=True))
        assert all(kinds[w.span_id] == w.kind for w in written)
        assert sorted(w.kind for w in written if w.kind in ("llm", "tool", "agent")) == ["agent", "agent", "llm", "llm",
                                                                                        "tool"]
        [graph_end] = [SpanEnded.of(e) for e in run.iter_events() if e.type == "span.ended" and e.payload["name"] == "LangGraph"]
        for w in written:  # LangChain's LLM span: its kind, but not its answer again (the transport's is logged)
            if w.kind == "llm":
                assert w.ended_seq is not None
                end = SpanEnded.of(run.event(w.ended_seq))
                assert end.kind == "llm" and end.attributes is None
        [answer] = [e.payload["result"] for e in run.iter_events() if e.type == "run.finished"]
        assert graph_end.attributes is not None and json.dumps(answer)[1:-1] in graph_end.attributes["output.value"]
        _check_nested_under_langchain(handle, run)
        assert al.replay(program, run).ok  # LangChain's message ids, new on every run, are not compared
        assert len(server.requests) == 2
    finally:
        handle.uninstrument()


def test_a_langgraph_interrupt_traced_replays_and_forks_at_the_human_answer(server: LLMServer, store: Any) -> None:
    """LangGraph's human in the loop: ``interrupt()`` raises inside a node (LangChain's span
    records the exception, its message holding an id new on every run), the program asks a
    person (a recorded tool) and resumes the graph with ``Command(resume=...)`` from its
    checkpointer. The traced run replays strictly, and a fork that changes the person's
    answer changes the next model request."""
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    class Draft(TypedDict, total=False):
        question: str
        draft: str
        verdict: str
        final: str

    llm = ChatOpenAI(model=MODEL, base_url=server.url, api_key="test", max_retries=0)
    builder = StateGraph(Draft)
    builder.add_node("draft", lambda s: {"draft": llm.invoke(s["question"]).content})
    builder.add_node("review", lambda s: {"verdict": interrupt({"draft": s["draft"]})})
    builder.add_node("finish", lambda s: {"final": llm.invoke(f"{s['draft']}; the reviewer: {s['verdict']}").content})
    for edge in ((START, "draft"), ("draft", "review"), ("review", "finish"), ("finish", END)):
        builder.add_edge(*edge)

    def program(rec: Any) -> str:
        graph, config = builder.compile(checkpointer=MemorySaver()), {"configurable": {"thread_id": "t1"}}
        paused = graph.invoke({"question": QUESTION}, config)
        verdict = rec.tool("ask_reviewer", {"draft": paused["draft"]}, lambda draft: "approved")
        return str(graph.invoke(Command(resume=verdict), config)["final"])

    handle = al.instrument(instrumentors=["openinference-instrumentation-langchain"])
    try:
        run = al.record(program, store=store, name="langgraph-interrupt")
        assert run.status == "finished", run.status
        interrupts = [e for e in run.iter_events() if e.type == "error" and "Interrupt" in str(e.payload["error"])]
        assert interrupts, "LangChain's span recorded the interrupt"
        result = al.replay(program, run)
        assert result.ok, str(result.divergence)
        [asked] = [e for e in run.iter_events() if e.type == "tool.result"]
        forked = al.fork(run, asked.seq - 1, program=program,
                         edit=al.edit.replace_response(asked.seq, {"result": "rejected"}))
        assert forked.status == "finished"
        [last] = [e for e in forked.iter_events() if e.type == "llm.request"][-1:]
        assert "the reviewer: rejected" in json.dumps(last.payload["messages"])
    finally:
        handle.uninstrument()


def test_a_langgraph_run_recorded_before_its_spans_nested_replays(server: LLMServer, store: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A run recorded when LangChain's spans were not found as parents (the transport's and
    @al.tool's spans at the root of the log) replays strictly now that they are."""
    from agentlog.otel import processor

    handle = al.instrument(instrumentors=["openinference-instrumentation-langchain"])
    try:
        program = _langgraph_program(_langgraph_agent(server))
        with monkeypatch.context() as before:
            before.setattr(processor, "FRAMEWORK_SPANS", [])
            run = al.record(program, store=store, name="langgraph-before")
        roots = run.spans().query("parent.isna()", engine="python")
        assert sorted(roots["kind"]) == ["chain", "llm", "llm", "tool"]  # the graph's, and the recorder's three
        assert al.replay(program, run).ok
        assert len(server.requests) == 2
    finally:
        handle.uninstrument()


def _each_call_under_its_chat_model(run: Any, handle: Any) -> None:
    """The two model calls the transport wrote in ``run`` each under a ChatOpenAI span of
    its own, and one row each."""
    spans = run.spans().set_index("span_id")
    written = {w.span_id for w in handle.processor.written(run.id)}
    calls = [s for s in spans.index if s not in written]  # the transport's
    assert len(calls) == 2 and len(run.llm_calls()) == 2
    parents = [spans.loc[s, "parent"] for s in calls]
    assert [spans.loc[p, "name"] for p in parents] == ["ChatOpenAI", "ChatOpenAI"] and parents[0] != parents[1]


def test_parallel_model_calls_each_nest_under_their_own_chat_model_span(server: LLMServer, store: Any) -> None:
    """A ``RunnableParallel`` of two chat models, run sync (each branch in a thread of its
    own): each model call the transport writes is under its own branch's ChatOpenAI span,
    though both are open side by side."""
    from langchain_core.runnables import RunnableParallel
    from langchain_openai import ChatOpenAI

    handle = al.instrument(instrumentors=["openinference-instrumentation-langchain"])
    try:
        model = ChatOpenAI(model=MODEL, base_url=server.url, api_key="test", max_retries=0)  # type: ignore[arg-type]
        both = RunnableParallel(a=model, b=model)
        run = al.record(lambda rec: sorted(both.invoke(QUESTION)), store=store, name="parallel")
        _each_call_under_its_chat_model(run, handle)
        # the branches' order is the threads': a strict replay finds each branch's events
        # where the log has them, a permissive one serves each answer by its key
        for _ in range(3):
            strict = al.replay(lambda rec: sorted(both.invoke(QUESTION)), run)
            assert strict.ok, str(strict.divergence)
        replayed = al.replay(lambda rec: sorted(both.invoke(QUESTION)), run, mode="permissive")
        assert replayed.ok and replayed.live == 0 and len(server.requests) == 2
    finally:
        handle.uninstrument()


def test_parallel_model_calls_awaited_each_nest_under_their_own_chat_model_span(server: LLMServer,
                                                                              store: Any) -> None:
    """The same ``RunnableParallel`` awaited (``ainvoke``: each branch an asyncio task, and
    LangChain runs the instrumentor's callbacks, which open the ChatOpenAI spans, in a thread
    pool): each model call is still under its own branch's ChatOpenAI span, and replays."""
    from langchain_core.runnables import RunnableParallel
    from langchain_openai import ChatOpenAI

    handle = al.instrument(instrumentors=["openinference-instrumentation-langchain"])

    async def ask() -> list[str]:  # a client per event loop, closed in it
        async with httpx.AsyncClient() as http:
            model = ChatOpenAI(model=MODEL, base_url=server.url, api_key="test", max_retries=0,  # type: ignore[arg-type]
                               http_async_client=http)
            return sorted(await RunnableParallel(a=model, b=model).ainvoke(QUESTION))

    try:
        def program(rec: Any) -> list[str]:
            return asyncio.run(ask())

        run = al.record(program, store=store, name="parallel-async")
        _each_call_under_its_chat_model(run, handle)
        for _ in range(3):
            strict = al.replay(program, run)
            assert strict.ok, str(strict.divergence)
        assert len(server.requests) == 2
    finally:
        handle.uninstrument()


BOTH = ["openinference-instrumentation-langchain", "openinference-instrumentation-openai"]


class Topics(TypedDict):
    """The state of :func:`_fan_out`'s graph."""

    topics: list[str]
    answers: Annotated[list[str], operator.add]


def _fan_out(server: LLMServer) -> Any:
    """A LangGraph map step: one ``Send`` per topic to the node ``ask``, which asks the model
    about its topic; LangGraph runs the three in threads of its own, side by side. A program
    of it takes the topics in the order to send them."""
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    model = ChatOpenAI(model=MODEL, base_url=server.url, api_key="test", max_retries=0)  # type: ignore[arg-type]

    def ask(state: Topics) -> dict[str, list[str]]:
        return {"answers": [f"{state['topics'][0]}: {model.invoke(state['topics'][0]).content}"]}

    graph = StateGraph(Topics)
    graph.add_node("ask", ask)
    graph.add_conditional_edges(START, lambda state: [Send("ask", {"topics": [t], "answers": []})
                                                      for t in state["topics"]], ["ask"])
    graph.add_edge("ask", END)
    compiled = graph.compile()

    def program(topics: list[str]) -> Any:
        return lambda rec: sorted(compiled.invoke({"topics": topics, "answers": []})["answers"])
    return program


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "langchain"])
def test_a_fork_plan_edits_one_branch_of_a_fan_out_in_any_order(server: LLMServer, store: Any,
                                                                traced: bool) -> None:
    """The fork panel's plan for an edited answer of one branch of a LangGraph fan-out cuts
    before any branch began (:func:`~agentlog.capture.forkplan.quiet_cut`), so the fork goes
    through whatever order its branches start in: every branch's answer edited, under each of
    the six orders, with no request sent. Cut just before the call instead, with a branch's
    span begun in the prefix, about 1 fork in 20 failed (``bench/forks.py --shapes fan_out_edit``)."""
    from agentlog.capture.forkplan import execute_plan, plan_fork

    handle = al.instrument(instrumentors=["openinference-instrumentation-langchain"]) if traced else None
    try:
        program = _fan_out(server)
        topics = [f"{SLOW} api", "db", "cache"]
        run = al.record(program(topics), store=store, name="fan-out")
        sent = len(server.requests)
        for answer in [e for e in run.iter_events() if e.type == "llm.response"]:
            asked = run.event(int(answer.caused_by or 0)).payload["messages"][-1]["content"]
            plan = plan_fork(run, answer.seq, "llm_response", {"message": {"role": "assistant", "content": "edited"}})
            assert not any(run.event(s).type == "span.started" and run.event(s).payload["name"] in ("ask", MODEL)
                           for s in range(plan.at + 1))  # no branch begun in the prefix
            for order in itertools.permutations(topics):
                forked = execute_plan(run, plan, program(list(order)))
                assert f"{asked}: edited" in forked.event(len(forked) - 1).payload["result"], (asked, order)
        assert len(server.requests) == sent
    finally:
        if handle is not None:
            handle.uninstrument()


@pytest.mark.parametrize("instrumentors", [["openinference-instrumentation-langchain"], BOTH], ids=["langchain", "both"])
def test_a_langgraph_fan_out_replays_strictly_in_any_order(server: LLMServer, store: Any,
                                                           instrumentors: list[str]) -> None:
    """LangGraph's node spans of a ``Send`` fan-out are alike when they open (LangChain sets
    their attributes as they end): a replay whose branches open in another order than
    recorded (the topics sent the other way round) binds each to the recorded one its model
    call says it is, and replays strictly with no request; a changed topic still diverges."""
    handle = al.instrument(instrumentors=instrumentors)
    try:
        program = _fan_out(server)
        topics = [f"{SLOW} api", "db", "cache"]
        run = al.record(program(topics), store=store, name="fan-out")
        assert run.status == "finished", run.status
        _check_calls(run, 3)
        sent = len(server.requests)

        for order in (topics[::-1], topics, [topics[1], topics[2], topics[0]]) * 2:
            replayed = al.replay(program(order), run)
            assert replayed.ok, f"{order}: {replayed.divergence}"
        assert len(server.requests) == sent
        changed = al.replay(program(["api", "db", "cache"]), run)
        assert not changed.ok
    finally:
        handle.uninstrument()


def _langgraph_program(graph: Any) -> Any:
    def program(rec: Any) -> str:
        return str(graph.invoke({"messages": [("user", QUESTION)]})["messages"][-1].content)
    return program


def _check_both_spans_one_row(handle: Any, run: Any) -> None:
    """LangChain's LLM span and the OpenAI instrumentor's span of each call were both written,
    the second under the first in the log, though OpenTelemetry has the OpenAI span as a root
    of its own trace (LangChain's spans are opened from callbacks and never become the current
    span); each call is one row, paid once."""
    _check_calls(run, 2)
    _check_nested_under_langchain(handle, run, openai_spans=True)
    written = handle.processor.written(run.id)
    llm = [w for w in written if w.kind == "llm"]
    assert len(llm) == 4, [(w.span_id, w.kind) for w in written]  # two spans for each of the two calls
    assert len({w.trace_id for w in llm}) == 3  # the graph's trace, and one of the OpenAI span's per call
    assert [w.call_seqs for w in llm] == [[]] * 4  # none wrote a call: the transport's is theirs
    assert run.cost(by=())["cost_usd"].sum() == pytest.approx(2 * expected_cost(), rel=1e-12)


def test_langgraph_traced_by_langchain_and_openai_instrumentors_counts_each_call_once(
        server: LLMServer, store: Any) -> None:
    """Both OpenInference instrumentors on (what ``al.instrument()`` does when both are
    installed): the framework's span and the client's span of a call are one row."""
    handle = al.instrument(instrumentors=BOTH)
    try:
        program = _langgraph_program(_langgraph_agent(server))
        run = al.record(program, store=store, name="langgraph-both")
        assert run.status == "finished", run.status
        _check_both_spans_one_row(handle, run)
        before = len(server.requests)
        assert al.replay(program, run).ok
        assert len(server.requests) == before
    finally:
        handle.uninstrument()


def test_async_langgraph_traced_by_both_instrumentors_counts_each_call_once(
        server: LLMServer, store: Any) -> None:
    """The same graph run with ``ainvoke``: LangChain runs its tracer's callbacks in a thread
    pool, so LangChain's LLM span starts outside the task that makes the call."""
    import httpx

    handle = al.instrument(instrumentors=BOTH)
    try:
        async def main() -> Any:
            async with httpx.AsyncClient() as client:  # closed in its loop (LangChain's default outlives it)
                graph = _langgraph_agent(server, client)

                async def program(rec: Any) -> str:
                    state = await graph.ainvoke({"messages": [("user", QUESTION)]})
                    return str(state["messages"][-1].content)

                return await al.arecord(program, store=store, name="langgraph-both-async")

        run = asyncio.run(main())
        assert run.status == "finished", run.status
        _check_both_spans_one_row(handle, run)
    finally:
        handle.uninstrument()


# --- the OpenAI Agents SDK ----------------------------------------------------------------------


def _sdk_agent(client: Any) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, function_tool

    @function_tool
    @al.tool
    def status(service: str) -> str:
        """The status of a service."""
        return _status(service)

    return Agent(name="sre", instructions="You are an SRE.", tools=[status],
                 model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client))


def test_an_agents_sdk_agent_recorded_replayed_and_forked(server: LLMServer, store: Any,
                                                         fresh_loop: None) -> None:
    import openai
    from agents import Runner

    async def program(rec: Any) -> str:
        # an async client per event loop (al.fork runs this one on a loop of its own)
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            result = await Runner.run(_sdk_agent(client), QUESTION)
        return str(result.final_output)

    run = asyncio.run(al.arecord(program, store=store, name="agents-sdk"))
    assert run.status == "finished", run.status
    assert run.event(len(run) - 1).payload["result"] == "done: api cpu=0.9"
    _check_calls(run, 2)

    result = asyncio.run(al.areplay(program, run))
    assert result.ok, str(result.divergence)
    assert len(server.requests) == 2

    forked = _fork_at_the_tool_result(run, program, server)  # al.fork runs it on a loop of its own
    assert forked.event(len(forked) - 1).payload["result"] == "done: api cpu=0.1"


def _sdk_agent_calling_tools_side_by_side(server: LLMServer) -> tuple[Any, list[str]]:
    """An Agents SDK program whose model asks for three tool calls in one turn (the loopback
    server's :data:`ASK_EVERY`), and the services its tool was run for."""
    import openai
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool

    ran: list[str] = []

    @function_tool
    @al.tool
    async def status(service: str) -> str:
        """The status of a service."""
        ran.append(service)
        await asyncio.sleep(0.2 if service == EVERY_SERVICE[0] else 0)  # the first one asked ends last
        return _status(service)

    async def program(rec: Any) -> str:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            agent = Agent(name="sre", instructions="You are an SRE.", tools=[status],
                          model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client))
            result = await Runner.run(agent, f"{QUESTION} Check {ASK_EVERY}.")
        return str(result.final_output)

    return program, ran


def test_an_agents_sdk_agent_calling_tools_side_by_side_replays_strictly(server: LLMServer, store: Any,
                                                                        fresh_loop: None) -> None:
    """The model asks for three tool calls in one turn; the SDK runs them at once and the slow
    one ends last, so the log holds their results in another order than the replay makes
    them: the replay is still strict, with no request and no tool run."""
    program, ran = _sdk_agent_calling_tools_side_by_side(server)
    run = asyncio.run(al.arecord(program, store=store, name="agents-sdk-parallel"))
    assert run.status == "finished", run.status
    results = [e.payload["result"] for e in run.iter_events() if e.type == "tool.result"]
    assert sorted(results) == sorted(_status(s) for s in EVERY_SERVICE)
    assert results[-1] == _status(EVERY_SERVICE[0])  # the slow one, called first, ended last
    sent, ran[:] = len(server.requests), []

    replayed = asyncio.run(al.areplay(program, run))

    assert replayed.ok, str(replayed.divergence)
    assert replayed.result == run.event(len(run) - 1).payload["result"]
    assert len(server.requests) == sent and ran == []  # every answer and tool result from the log


@pytest.mark.parametrize("which", [0, -1])  # the result written first (before the others'), the last
def test_an_agents_sdk_fork_changing_one_of_three_tool_results_made_side_by_side(
        server: LLMServer, store: Any, fresh_loop: None, which: int) -> None:
    """A fork cut just before one of three tool results made side by side: the calls whose
    results lie past the cut go on past it while the others are still replayed; the changed
    result reaches the next model request, the others are served from the parent."""
    program, ran = _sdk_agent_calling_tools_side_by_side(server)
    run = asyncio.run(al.arecord(program, store=store, name="agents-sdk-parallel"))
    changed = [e for e in run.iter_events() if e.type == "tool.result"][which]
    sent, ran[:] = len(server.requests), []

    forked = al.fork(run, changed.seq - 1, program=program,
                     edit=al.edit.replace_response(changed.seq, {"result": "x cpu=0.1"}))

    results = [_status(s) for s in EVERY_SERVICE]  # in the order the model asked for them
    results[results.index(changed.payload["result"])] = "x cpu=0.1"
    assert forked.status == "finished"
    assert forked.event(len(forked) - 1).payload["result"] == "done: " + "; ".join(results)
    assert ran == [] and len(server.requests) == sent + 1  # no tool run; one new model request


def test_an_agents_sdk_agent_with_its_spans_counts_each_call_once(instrumented: Any, server: LLMServer,
                                                                  store: Any) -> None:
    import openai
    from agents import Runner

    def program(rec: Any) -> str:
        # Runner.run_sync runs on the thread's default loop and shuts its async generators down
        # after each run: a loop per run, or the second run warns about httpx's auth flow
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        client = openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)
        try:
            return str(Runner.run_sync(_sdk_agent(client), QUESTION).final_output)
        finally:
            loop.run_until_complete(client.close())
            asyncio.set_event_loop(None)
            loop.close()

    run = al.record(program, store=store, name="agents-sdk-traced")
    _check_calls(run, 2)  # the SDK's spans, the OpenAI instrumentor's and the transport: one row each
    written = instrumented.processor.written(run.id)
    kinds = {(w.kind, len(w.call_seqs)) for w in written}
    assert ("agent", 0) in kinds and ("llm", 0) in kinds and ("llm", 2) not in kinds
    # the tool, traced by the SDK's function span and recorded by @al.tool: one tool row
    calls = [e for e in run.iter_events() if e.type == "tool.call"]
    results = [e for e in run.iter_events() if e.type == "tool.result"]
    assert [(c.payload["name"], c.payload["args"]) for c in calls] == [("status", {"service": "api"})]
    assert [r.payload["result"] for r in results] == ["api cpu=0.9"] and results[0].caused_by == calls[0].seq
    [sdk_tool] = [w for w in written if w.kind == "tool"]
    assert sdk_tool.call_seqs == []  # the SDK's span wrote no call of its own: it is @al.tool's
    tool_span = run.event(int(calls[0].span_id[1:]))  # @al.tool's span, inside the SDK's function span
    assert tool_span.type == "span.started" and tool_span.payload["parent"] == sdk_tool.span_id
    assert al.replay(program, run).ok
    assert len(server.requests) == 2


def test_an_agents_sdk_handoff_is_what_the_sdk_saw_and_a_fork_cannot_edit_it(instrumented: Any, server: LLMServer,
                                                                           store: Any, fresh_loop: None) -> None:
    """The SDK hands off in its own code: its handoff span's tool call is written as the SDK
    saw it, and replays, but a fork cannot serve it changed. The fork refuses the edit, naming
    the seq and the span, and the fork panel says why, instead of making a fork that looks
    edited and runs exactly as the parent did."""
    import openai
    from agents import Agent, OpenAIChatCompletionsModel, Runner

    from agentlog.capture.forkplan import applicability

    async def program(rec: Any) -> str:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
            model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
            sre = Agent(name="sre", instructions="You are an SRE.", model=model)
            triage = Agent(name="triage", instructions="Hand off to sre.", handoffs=[sre], model=model)
            return str((await Runner.run(triage, QUESTION)).final_output)

    run = asyncio.run(al.arecord(program, store=store, name="agents-sdk-handoff"))
    assert run.status == "finished", run.status
    [handoff] = [e for e in run.iter_events() if e.type == "tool.result"]
    assert handoff.payload["result"] == "sre" and "handoff" in handoff.payload["name"]
    assert asyncio.run(al.areplay(program, run)).ok

    with pytest.raises(ValueError, match=rf"replace_response\(seq={handoff.seq}\).*traced span {handoff.span_id}"):
        al.fork(run, handoff.seq - 1, program=program,
                edit=al.edit.replace_response(handoff.seq, {"result": "billing"}))
    why = applicability(run, handoff.seq, "tool_result")
    assert why is not None and "traced span" in why


# --- PydanticAI ----------------------------------------------------------------------------------


def test_a_pydantic_ai_agent_traced_by_its_own_spans_recorded_replayed_and_forked(server: LLMServer,
                                                                                 store: Any) -> None:
    """A PydanticAI agent with its own OpenTelemetry instrumentation (``agent.instrument``: GenAI
    convention spans, the agent's, each model request's and each tool's) and one line of
    agentlog: one row per model call, the tool one row under PydanticAI's tool span, a strict
    replay with zero requests though PydanticAI's spans carry ids new on every run
    (``gen_ai.conversation.id``), and a fork at the tool result."""
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    handle = al.instrument(instrumentors=[])  # PydanticAI's spans only: no OpenInference instrumentor
    try:
        agent = Agent(system_prompt="You are an SRE.")
        agent.instrument = True  # PydanticAI's own spans, on the global tracer provider (al.instrument's)

        @agent.tool_plain
        @al.tool  # the one change to the agent: its tool's result is recorded, so a fork can change it
        def status(service: str) -> str:
            """The status of a service."""
            return _status(service)

        async def ask() -> str:  # a client per event loop, closed in it
            async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
                model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
                return str((await agent.run(QUESTION, model=model)).output)

        def program(rec: Any) -> str:
            return asyncio.run(ask())

        run = al.record(program, store=store, name="pydantic-ai")
        assert run.status == "finished", run.status
        assert run.event(len(run) - 1).payload["result"] == "done: api cpu=0.9"
        _check_calls(run, 2)
        written = handle.processor.written(run.id)
        assert sorted(w.kind for w in written) == ["agent", "llm", "llm", "tool"]
        assert all(w.call_seqs == [] for w in written)  # each call and the tool: the transport's, @al.tool's
        [traced_tool] = [w for w in written if w.kind == "tool"]
        [call] = [e for e in run.iter_events() if e.type == "tool.call"]
        assert (call.payload["name"], call.payload["args"]) == ("status", {"service": "api"})
        assert run.event(int(call.span_id[1:])).payload["parent"] == traced_tool.span_id
        [started] = [e for e in run.iter_events() if e.type == "span.started" and e.span_id == written[0].span_id]
        assert "gen_ai.conversation.id" in started.payload["attributes"]  # new on every run: not compared

        result = al.replay(program, run)
        assert result.ok, str(result.divergence)
        assert len(server.requests) == 2  # strict replay: zero requests

        forked = _fork_at_the_tool_result(run, program, server)
        assert forked.event(len(forked) - 1).payload["result"] == "done: api cpu=0.1"
        assert "api cpu=0.1" in str(al.diff(run, forked))
    finally:
        handle.uninstrument()


def test_pydantic_ai_agents_run_side_by_side_replay_strictly_in_any_order(server: LLMServer,
                                                                          store: Any) -> None:
    """Three PydanticAI agent runs gathered in one event loop: their spans alike when they open
    (the same attributes, valued with ids new on every run) are told apart by the calls made in
    them, so a strict replay that starts them in other orders than recorded serves each run its
    own answer with no request."""
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    handle = al.instrument(instrumentors=[])
    try:
        agent = Agent(system_prompt="You are an SRE.")
        agent.instrument = True
        order = [0, 1, 2]
        questions = ["status of api?", "status of db?", "status of queue?"]

        async def one(client: Any, i: int) -> str:
            await asyncio.sleep(0.002 * order.index(i))  # started in the order given
            model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
            return str((await agent.run(questions[i], model=model)).output)

        async def ask() -> list[str]:
            async with openai.AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0) as client:
                return list(await asyncio.gather(*(one(client, i) for i in range(3))))

        def program(rec: Any) -> list[str]:
            return asyncio.run(ask())

        run = al.record(program, store=store, name="pydantic-ai-gathered")
        assert run.status == "finished" and len(run.llm_calls()) == 3
        for order[:] in ([2, 1, 0], [1, 0, 2], [0, 2, 1]):
            replayed = al.replay(program, run)
            assert replayed.ok, f"{order}: {replayed.divergence}"
        assert len(server.requests) == 3
    finally:
        handle.uninstrument()


# --- smolagents ----------------------------------------------------------------------------------


def test_a_smolagents_agent_traced_by_its_instrumentor_recorded_replayed_and_forked(server: LLMServer,
                                                                                   store: Any) -> None:
    """A smolagents ``ToolCallingAgent`` on ``OpenAIServerModel``, traced by OpenInference's
    smolagents and OpenAI instrumentors (``al.instrument``), and one line of agentlog: one row
    per model call though two instrumentors trace each, the tool one row, a strict replay with
    zero requests, and a fork at the tool result whose changed value reaches the next request."""
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    handle = al.instrument(instrumentors=["smolagents", "openai"])
    try:
        with warnings.catch_warnings():  # smolagents warns of decorators under its @tool (remote executors)
            warnings.simplefilter("ignore", UserWarning)

            @tool
            @al.tool  # the one change to the agent: its tool's result is recorded, so a fork can change it
            def status(service: str) -> str:
                """The status of a service.

                Args:
                    service: the service's name.
                """
                return _status(service)

        model = OpenAIServerModel(model_id=MODEL, api_base=server.url, api_key="test")
        # one step: the model asks for the tool; then smolagents asks it for a final answer
        agent = ToolCallingAgent(tools=[status], model=model, max_steps=1, verbosity_level=0)

        def program(rec: Any) -> str:
            return str(agent.run(QUESTION))

        run = al.record(program, store=store, name="smolagents")
        assert run.status == "finished", run.status
        _check_calls(run, 2)
        kinds = sorted(w.kind for w in handle.processor.written(run.id))
        assert kinds.count("llm") == 4 and "agent" in kinds and "tool" in kinds  # two instrumentors a call
        [call] = [e for e in run.iter_events() if e.type == "tool.call"]
        assert (call.payload["name"], call.payload["args"]) == ("status", {"service": "api"})

        result = al.replay(program, run)
        assert result.ok, str(result.divergence)
        assert len(server.requests) == 2  # strict replay: zero requests

        forked = _fork_at_the_tool_result(run, program, server)
        assert forked.status == "finished"
        assert "api cpu=0.1" in str(al.diff(run, forked))
    finally:
        handle.uninstrument()
