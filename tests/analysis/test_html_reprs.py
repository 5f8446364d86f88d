"""Notebook reprs: golden HTML, escaping of everything a run says, the text fallback, the option."""

from __future__ import annotations

import html
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from _analysis_runs import Tools, answer, golden_reprs, make_agent, seq_of

import agentlog as al
from agentlog.chain import Problem
from agentlog.errors import UnknownModelWarning
from agentlog.store.verify import VerifyReport
from agentlog.testing.fakes import FakeLLM
from agentlog.widgets import html as H
from agentlog.widgets import set_options

GOLDEN = Path(__file__).parents[1] / "golden" / "html"
EVIL = "<script>alert(1)</script>"


@pytest.mark.parametrize("name", ["run", "fork", "store", "diff", "patch", "verify_ok", "verify_bad"])
def test_reprs_match_the_golden_files(store: Any, name: str) -> None:
    """Regenerate with ``python tests/golden/html/make_html.py`` after a deliberate change."""
    reprs = golden_reprs(store)
    assert reprs[name] + "\n" == (GOLDEN / f"{name}.html").read_text("utf-8")


def test_the_stylesheet_is_package_data_loaded_once(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    css = H._css()
    assert ".al-repr" in css and H._css() is css  # read once per process
    page = run._repr_html_()
    assert page is not None and f"<style>{css}</style>" in page


@pytest.fixture
def evil(store: Any) -> tuple[Any, Any]:
    """A run whose name, tool name, model name and payloads are all ``<script>`` tags."""
    tools = Tools(tool_name=EVIL)
    program = make_agent(tools, FakeLLM(lambda req: EVIL), FakeLLM(EVIL), second_name=EVIL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownModelWarning)
        run = al.record(program, store=store, name=EVIL, inputs={"service": EVIL})
        metric = seq_of(run, "tool.result", name=EVIL)
        fork = al.fork(run, at=metric - 1, program=make_agent(Tools(tool_name=EVIL), FakeLLM(answer),
                                                               FakeLLM(EVIL), second_name=EVIL),
                       edit=al.edit.replace_response(metric, {"result": EVIL}))
    return run, fork


def reprs_of(store: Any, run: Any, fork: Any) -> dict[str, str]:
    d = al.diff(run, fork)
    bad = VerifyReport(run_id=run.id, ok=False, events=3, head="0" * 64, first_bad_seq=1,
                       problems=(Problem(kind="chain_broken", seq=1, message=f"payload {EVIL}"),))
    found = {"run": run._repr_html_(), "fork": fork._repr_html_(), "store": store._repr_html_(),
             "diff": d._repr_html_(), "patch": H.patch_html(d.state_patch),
             "verify": bad._repr_html_(), "verify_ok": run.verify()._repr_html_()}
    assert all(v is not None for v in found.values())
    return found  # type: ignore[return-value]


def test_untrusted_text_is_escaped_everywhere(store: Any, evil: tuple[Any, Any]) -> None:
    run, fork = evil
    reprs = reprs_of(store, run, fork)
    escaped = html.escape(EVIL)
    for name, page in reprs.items():
        assert EVIL not in page, name
        assert "<script" not in page.lower(), name
    # and it is shown, escaped, where it belongs: the run name, the model, the payloads, the tool
    for name in ("run", "fork", "store", "diff", "patch", "verify"):
        assert escaped in reprs[name] or html.escape(html.escape(EVIL)) in reprs[name], name
    d = al.diff(run, fork).table()
    assert (d["name"] == EVIL).any()  # the tool name made it into the diff rows
    assert run.llm_calls()["model"].tolist()[1] == EVIL and run.tool_calls()["name"].tolist()[0] == EVIL


def test_plain_repr_is_one_short_line_without_io(golden: tuple[Any, Any], store: Any) -> None:
    run, fork = golden
    d = al.diff(run, fork)
    for obj in (run, store, d, run.verify()):
        text = repr(obj)
        assert "\n" not in text and len(text) < 200, text
    fresh = store.run("g1")  # never read: its repr still does no reading
    assert repr(fresh) == "<Run g1 'triage' 18 events finished>" and fresh._snap is None
    assert repr(d) == "<RunDiff g1 → g2: 10 shared, diverge at seq 10; 3 changed, 4 only in a, 2 only in b>"


def test_text_fallback_agrees_with_the_html(golden: tuple[Any, Any]) -> None:
    run, _ = golden
    page = run._repr_html_()
    assert page is not None
    text = html.unescape(re.search(r'<pre class="al-text">(.*?)</pre>', page, re.DOTALL).group(1))  # type: ignore[union-attr]
    facts = dict(line.strip().split(": ", 1) for line in text.splitlines()[1:])
    wrap = page.split('<div class="al-wrap"', 1)[1]
    for label, value in facts.items():
        assert f"<dt>{html.escape(label)}</dt><dd>{html.escape(value)}</dd>" in wrap


def test_display_option_turns_html_off(golden: tuple[Any, Any], store: Any) -> None:
    run, fork = golden
    d = al.diff(run, fork)
    with set_options(display="text"):
        assert run._repr_html_() is None and store._repr_html_() is None
        assert d._repr_html_() is None and run.verify()._repr_html_() is None
    assert run._repr_html_() is not None


def test_long_tables_fold_and_cut(store: Any) -> None:
    runs = [{"run_id": f"r{i:03d}", "name": f"run {i}", "status": "finished", "events": i,
             "llm_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
             "own_cost_usd": 0.0, "created": None, "parent": None, "fork_seq": None}
            for i in range(120)]
    page = H.store_card("/s", runs)
    assert "<details><summary>Runs" in page  # folded: more rows than fold_rows
    assert f"… {120 - H.STORE_ROWS:,} more" in page and "r049" in page and "r050" not in page
    small = H.store_card("/s", runs[:3])
    assert "<details open><summary>Runs" in small
    with set_options(fold_rows=2):
        assert "<details><summary>Runs" in H.store_card("/s", runs[:3])


def test_long_cells_are_cut_with_a_count() -> None:
    page = H.table(["x"], [["y" * 500]])
    assert f"… {500 - H.CELL_LIMIT + 1:,} more" in page and "y" * H.CELL_LIMIT not in page
