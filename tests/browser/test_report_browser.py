"""The HTML report in a real browser: charts drawn, nothing fetched, payloads shown as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

import agentlog as al
from agentlog.report import write_report

SCRIPT = "<script>document.title='pwned'; window.__pwned = 1</script><img src=x onerror=\"window.__pwned=2\">"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    """The sample runs plus a small run whose payloads carry HTML that must not run."""
    st = al.examples.sample_store(copy_to=tmp_path / "store")
    with st.create_run(name=f"evil {SCRIPT}", run_id="evil-1", durability="none") as w:
        w.emit("run.started", {"inputs": {"prompt": SCRIPT}})
        w.emit("span.started", {"name": "tool <b>x</b>", "kind": "tool"}, span_id="s1")
        w.emit("tool.call", {"key": "k1", "name": "fetch", "args": {"url": SCRIPT}, "idempotency_key": None},
               span_id="s1")
        w.emit("tool.result", {"key": "k1", "name": "fetch", "result": SCRIPT}, span_id="s1")
        w.emit("span.ended", {"name": "tool <b>x</b>", "status": "ok"}, span_id="s1")
        w.emit("run.finished", {"result": SCRIPT})
    return st


def _open(page: Any, path: Path) -> list[str]:
    """Open a report from disk; returns the URLs it requested (kept growing)."""
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return requests


def _charts(page: Any, n: int) -> None:
    expect(page.locator(".js-plotly-plot .main-svg").nth(n - 1)).to_be_attached()
    count = page.locator(".js-plotly-plot .main-svg").count()
    assert count >= n, count


def _offline(requests: list[str]) -> None:
    outside = [u for u in requests if not u.startswith(("file://", "data:", "blob:", "about:"))]
    assert not outside, outside


def test_report_of_a_run(page: Any, store: Any, tmp_path: Path, shots: Path) -> None:
    path = write_report(store.run("refunds-0001"), tmp_path / "report.html")
    requests = _open(page, path)
    figures = page.locator(".plotly-graph-div").count()
    assert figures >= 5  # the waterfall and four cost charts
    _charts(page, figures)
    _offline(requests)
    expect(page.locator("section#summary")).to_contain_text("refunds-0001")
    expect(page.locator("section#verify")).to_contain_text("ok")
    events = page.locator("#events-list > details")
    assert events.count() == 136
    first = events.nth(0)
    first.locator("summary").click()
    expect(first.locator("pre")).to_be_visible()
    expect(first.locator("pre")).to_contain_text('"inputs"')
    page.locator("input.al-filter-input").fill("approval.denied")
    expect(page.locator("#events-list > details:visible")).to_have_count(1)
    page.locator("input.al-filter-input").fill("")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(shots / "report.png"), full_page=False)


def test_report_vs_a_fork(page: Any, store: Any, tmp_path: Path, shots: Path) -> None:
    path = write_report(store.run("sre-0001"), tmp_path / "vs.html", vs=store.run("sre-0001-calm"))
    requests = _open(page, path)
    figures = page.locator(".plotly-graph-div").count()
    assert figures >= 10  # two waterfalls and two sets of four cost charts
    _charts(page, figures)
    _offline(requests)
    diff = page.locator("section#diff")
    expect(diff).to_contain_text("first divergence at seq 27")
    table = diff.locator("table.al-sbs")
    expect(table.locator("tr.sbs-changed").first).to_contain_text("0.93 → 0.35")
    assert table.locator("tr.sbs-only_a").count() == 40
    assert table.locator("tr.sbs-only_b").count() == 1
    page.locator("section#diff").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "report_vs.png"), full_page=False)


def test_payload_html_is_shown_as_text(page: Any, store: Any, tmp_path: Path, shots: Path) -> None:
    path = write_report(store.run("evil-1"), tmp_path / "evil.html")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    requests = _open(page, path)
    _offline(requests)  # the <img src=x> was not loaded: it is text
    assert page.evaluate("window.__pwned") is None
    assert page.title().startswith("agentlog report: evil <script>")  # text, not a script that ran
    event = page.locator("#events-list > details").nth(3)  # tool.result
    event.locator("summary").click()
    expect(event.locator("pre")).to_contain_text("<script>document.title='pwned'")
    expect(page.locator("header.al-top h1")).to_contain_text("evil <script>")
    assert page.locator("main script").count() == page.locator(".plotly-graph-div").count()
    assert not dialogs
