"""The README's "OpenTelemetry, live" example runs as written, with the Agents SDK agent it
takes as given built against the in-process endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _endpoint import MODEL, async_openai_client
from _readme import README, section_code


def _turn_everything_off() -> None:
    """Undo the README's ``al.instrument()``: its instrumentors and the processor (process-wide)."""
    from importlib import metadata

    import agentlog as al

    for ep in metadata.entry_points(group="openinference_instrumentor"):
        instrumentor = ep.load()()
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
    al.instrument(instrumentors=[]).uninstrument()  # the global processor, found again, off


def test_the_live_opentelemetry_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            fresh_loop: None) -> None:
    from agents import Agent, OpenAIChatCompletionsModel


    monkeypatch.chdir(tmp_path)
    agent = Agent(name="sre", instructions="You are an SRE.",
                  model=OpenAIChatCompletionsModel(model=MODEL, openai_client=async_openai_client()))
    namespace: dict[str, Any] = {"agent": agent}
    try:
        exec(compile(section_code("OpenTelemetry, live"), str(README), "exec"), namespace)  # noqa: S102 - the README
    finally:
        _turn_everything_off()
    run = namespace["run"]
    assert len(run.llm_calls()) == 1 and run.llm_calls()["cost_usd"].iloc[0] > 0
