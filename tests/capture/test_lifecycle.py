"""One run lifecycle: every entry point ends a run the same way for the same cause.

Entry points: ``al.record``, ``al.arecord``, ``al.recording``, ``al.run_agent``, ``al.resume``,
``al.fork`` and permissive ``al.replay``. Causes: the program returns, raises an error, is
interrupted (Ctrl-C), or stops for a decision (``Stopped``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

import agentlog as al
from agentlog.capture.lifecycle import Stopped

CAUSES = ("returns", "error", "ctrl-c", "stop")

#: cause -> (run status, the exception the caller sees)
EXPECTED: dict[str, tuple[str, type[BaseException] | None]] = {
    "returns": ("finished", None),
    "error": ("failed", ValueError),
    "ctrl-c": ("interrupted", KeyboardInterrupt),
    "stop": ("waiting", None),
}


def act(cause: str) -> str:
    if cause == "error":
        raise ValueError("boom")
    if cause == "ctrl-c":
        raise KeyboardInterrupt
    if cause == "stop":
        raise Stopped("waiting", "a person decides")
    return "done"


def program_for(cause: str) -> Callable[[Any], str]:
    def program(rec: Any) -> str:
        rec.tool("work", {"n": 1}, fn=lambda n: n + 1)
        with rec.span("last step"):
            return act(cause)
    return program


def aprogram_for(cause: str) -> Callable[[Any], Any]:
    async def program(rec: Any) -> str:
        await rec.atool("work", {"n": 1}, fn=lambda n: n + 1)
        with rec.span("last step"):
            await asyncio.sleep(0)
            return act(cause)
    return program


class CauseAgent:
    """Works once, then ends with the cause (after a person's decision, with ``gate``)."""

    name = "cause-agent"

    def __init__(self, cause: str, *, gate: bool = False) -> None:
        self.cause, self.gate = cause, gate

    def next_step(self, state: Any) -> Any:
        if self.gate and not state["approvals"]["decided"]:
            return al.RequestApproval({"go": True}, reason="first, a person")
        if not state["tools"]:
            return al.CallTool("work", {"n": 1})
        if self.cause == "returns":
            return al.Finish("done")
        if self.cause == "error":
            raise ValueError("boom")
        if self.cause == "ctrl-c":
            return al.CallTool("interrupt", {})
        return al.RequestApproval({"again": True}, reason="stop for a decision")


def _interrupt() -> None:
    raise KeyboardInterrupt


TOOLS = {"work": lambda n: n + 1, "interrupt": _interrupt}


def _entry_record(store: Any, cause: str) -> None:
    al.record(program_for(cause), store=store, name="plain", run_id="r")


def _entry_arecord(store: Any, cause: str) -> None:
    asyncio.run(al.arecord(aprogram_for(cause), store=store, name="async", run_id="r"))


def _entry_recording(store: Any, cause: str) -> None:
    with al.recording(store=store, name="block", run_id="r") as rec:
        program_for(cause)(rec)


def _entry_run_agent(store: Any, cause: str) -> None:
    al.run_agent(CauseAgent(cause), input={}, model=None, tools=TOOLS, store=store, durability="none",
                 run_id="r")


def _entry_resume(store: Any, cause: str) -> None:
    agent = CauseAgent(cause, gate=True)
    run = al.run_agent(agent, input={}, model=None, tools=TOOLS, store=store, durability="none", run_id="r")
    assert run.status == "waiting"
    al.approve(run, next(e.seq for e in run.iter_events() if e.type == "approval.requested"), "ann")
    al.resume(run.id, agent, model=None, tools=TOOLS, store=store, durability="none")


def _entry_fork(store: Any, cause: str) -> None:
    parent = al.record(program_for("returns"), store=store, name="parent", run_id="parent")
    al.fork(parent, at=0, program=program_for(cause), run_id="r")


def _entry_replay(store: Any, cause: str) -> None:
    recorded = al.record(program_for("returns"), store=store, name="recorded", run_id="recorded")
    al.replay(program_for(cause), recorded, mode="permissive")


ENTRIES: dict[str, Callable[[Any, str], None]] = {
    "record": _entry_record, "arecord": _entry_arecord, "recording": _entry_recording,
    "run_agent": _entry_run_agent, "resume": _entry_resume, "fork": _entry_fork,
    "replay": _entry_replay,
}


def _written(store: Any) -> Any:
    """The run the entry point wrote: ``r``, or the permissive replay's new run."""
    if "r" in store:
        return store.run("r")
    (run_id,) = [rid for rid in store.list_runs() if rid != "recorded"]
    return store.run(run_id)


@pytest.mark.parametrize("cause", CAUSES)
@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_same_cause_same_end(store: Any, entry: str, cause: str) -> None:
    status, raised = EXPECTED[cause]
    caught: BaseException | None = None
    try:
        ENTRIES[entry](store, cause)
    except BaseException as exc:  # noqa: BLE001 - what the caller sees is the point
        caught = exc
    assert type(caught) is raised if raised is not None else caught is None, repr(caught)

    run = _written(store)
    assert run.status == status
    types = [e.type for e in run.iter_events()]
    assert types.count("run.finished") == (cause == "returns")
    assert types.count("run.failed") == (cause == "error")
    if cause == "error":
        failed = run.event(types.index("run.failed"))
        assert failed.payload == {"error": "ValueError: boom", "type": "ValueError"}
        assert any(run.id in note for note in getattr(caught, "__notes__", []))
    if cause == "ctrl-c":  # resumable: every open span closed as interrupted
        ended = [e for e in run.iter_events() if e.type == "span.ended"]
        assert ended and ended[-1].payload["error"] == "interrupted"
        assert len(ended) == types.count("span.started")


def test_a_run_interrupted_by_ctrl_c_is_resumed(store: Any) -> None:
    presses: list[str] = []

    def interrupt(idempotency_key: str) -> str:  # Ctrl-C the first time only
        presses.append(idempotency_key)
        if len(presses) == 1:
            raise KeyboardInterrupt
        return "ran"

    tools = {**TOOLS, "interrupt": interrupt}
    agent = CauseAgent("ctrl-c")
    with contextlib.suppress(KeyboardInterrupt):
        al.run_agent(agent, input={}, model=None, tools=tools, store=store, durability="none", run_id="r")
    assert store.run("r").status == "interrupted"
    agent.cause = "returns"
    run = al.resume("r", agent, model=None, tools=tools, store=store, durability="none")
    assert run.status == "finished" and run.event(len(run) - 1).payload == {"result": "done"}
    assert presses[0] == presses[1]  # the interrupted call was finished under its own key
