"""Budgets: checked before every model or tool call from the folded usage; an overrun is
recorded and the run stops cleanly, and a larger budget on resume goes on."""

from __future__ import annotations

from typing import Any

import pytest
from _prices import genai_prices_cost
from _runtime_helpers import MODEL, Ledger, LedgerAgent, comparable, program, scripted, tools_for

import agentlog as al
from agentlog.testing.fakes import FakeLLM


def run_with(store: Any, tmp_path: Any, budget: al.Budget | None, run_id: str, *, model: Any = None) -> Any:
    return al.run_agent(LedgerAgent(), input={"steps": 4}, model=model or FakeLLM(scripted, model=MODEL),
                        tools=tools_for(Ledger(tmp_path / run_id)), store=store, budget=budget,
                        run_id=run_id)


@pytest.mark.parametrize(("budget", "limit", "value", "max"), [
    (al.Budget(max_llm_calls=2), "max_llm_calls", 2, 2),
    (al.Budget(max_tool_calls=1), "max_tool_calls", 1, 1),
    (al.Budget(max_tokens=40), "max_tokens", 57, 40),
    (al.Budget(max_cost_usd=0.00001), "max_cost_usd", None, 0.00001),  # None: from genai-prices
    (al.Budget(max_events=20), "max_events", 20, 20),
])
def test_each_limit_stops_the_run_cleanly(store: Any, tmp_path: Any, budget: al.Budget, limit: str,
                                          value: float | None, max: float) -> None:
    run = run_with(store, tmp_path, budget, f"b-{limit}")  # no exception reaches the caller
    assert run.status == "budget_exceeded"
    last = run.event(len(run) - 1)
    assert last.type == "budget.exceeded"  # nothing after the stop
    assert last.payload["limit"] == limit and last.payload["max"] == max
    if value is None:  # what the model calls before the stop cost, priced by genai-prices now
        value = genai_prices_cost(run)
        assert value > max
    assert last.payload["value"] == pytest.approx(value, rel=1e-9)
    assert run.event(1).type == "budget.set" and run.event(1).payload["budget"] == budget.to_json()
    state = run.state_at(len(run) - 1)
    assert state["status"] == "budget_exceeded"
    assert not any(e.type == "span.started" for e in run.iter_events(last.seq))
    assert al.replay(program(), run).ok


def test_the_limit_is_reached_at_the_value_not_before(store: Any, tmp_path: Any) -> None:
    run = run_with(store, tmp_path, al.Budget(max_llm_calls=3), "three")
    assert run.state_at(len(run) - 1)["usage"]["llm_calls"] == 3


def test_resume_keeps_the_budget_or_goes_on_with_a_larger_one(store: Any, tmp_path: Any) -> None:
    run = run_with(store, tmp_path, al.Budget(max_llm_calls=2), "grow")
    ledger = Ledger(tmp_path / "grow")
    same = al.resume(run, LedgerAgent(), model=FakeLLM.forbidden(), tools=tools_for(ledger))
    assert same.status == "budget_exceeded" and len(same) == len(run)  # nothing recorded twice
    more = al.resume(run, LedgerAgent(), model=FakeLLM(scripted, model=MODEL), tools=tools_for(ledger),
                     budget=al.Budget(max_llm_calls=10))
    assert more.status == "finished"
    assert comparable(more) == comparable(run_with(store, tmp_path, None, "no-budget"))
    sets = [e.payload["budget"]["max_llm_calls"] for e in more.iter_events() if e.type == "budget.set"]
    assert sets == [2, 10]
    replayed = al.replay(program(), more)  # the recorded budgets apply, in order
    assert replayed.ok, str(replayed)


def test_a_cost_that_is_not_known_reaches_a_cost_limit(store: Any, tmp_path: Any) -> None:
    def unpriced(request: Any) -> dict[str, Any]:
        return {"model": "scripted-model-x", "choices": [{"message": {"role": "assistant", "content": scripted(request)}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5}}

    with pytest.warns(al.UnknownModelWarning):
        run = run_with(store, tmp_path, al.Budget(max_cost_usd=1.0), "unpriced", model=FakeLLM(unpriced))
    last = run.event(len(run) - 1)
    assert last.payload == {"limit": "max_cost_usd", "value": None, "max": 1.0,
                            "note": "1 call(s) of unknown cost; set a price with al.pricing.set"}


def test_a_budget_is_numbers() -> None:
    with pytest.raises(ValueError, match=r"Budget\(max_tokens=-1\): a limit is a number >= 0, or None"):
        al.Budget(max_tokens=-1)
