"""03_fork_and_compare.ipynb in a real JupyterLab: run all, move the scrubber, press Fork, and
see the DiffView of the parent and the fork appear in the panel."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

import agentlog as al

NOTEBOOK = "03_fork_and_compare.ipynb"
KERNEL_IDLE = ("() => window.jupyterapp?.shell.currentWidget?.sessionContext"
               "?.session?.kernel?.status === 'idle'")
RUN_ALL = "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
APPROVE = {"decision": "approve", "by": "j.keller", "note": "approved in the browser test"}


@pytest.fixture(scope="module")
def store_copy(nb_dir: Path) -> Path:
    """The store the lab's kernels open (``$AGENTLOG_STORE`` = ``nb_dir/agentlog-runs``)."""
    path = nb_dir / "agentlog-runs"
    if not path.exists():
        al.examples.sample_store(copy_to=path)
    return path


def test_fork_from_the_panel_in_jupyterlab(lab: Callable[[str], str], page: Any, shots: Path,
                                           store_copy: Path) -> None:
    before = set(al.Store(store_copy).list_runs())
    page.goto(lab(NOTEBOOK))
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)  # else run-all opens "Select Kernel"
    page.evaluate(RUN_ALL)  # fire and forget: page.evaluate has no timeout

    area = page.locator(".jp-OutputArea:has(.agentlog-forkpanel)")
    panel = area.locator(".agentlog-forkpanel")
    scrubber = area.locator(".jp-OutputArea-output").first
    readout = scrubber.locator(".widget-readout").first
    expect(panel).to_be_visible(timeout=60_000)
    expect(readout).to_have_text("79", timeout=60_000)
    expect(scrubber).to_contain_text("state after seq 79")
    expect(panel.locator(".agentlog-fork-editor textarea")).to_have_value(json.dumps(APPROVE | {
        "note": "customer sent the returned-goods scan; approve"}, indent=2))
    # the rest of the notebook ran too: the fork made in code and its DiffView
    expect(page.locator(".al-dv-divergence").first).to_contain_text("runs diverge here: seq 80",
                                                                      timeout=60_000)
    # the DiffView opens at the divergence: the shared prefix is one folded line above it, and
    # counters that only moved (a fork's extra step) are not marked changed
    first_rows = page.locator(".al-dv-events").first.locator("tbody tr")
    expect(first_rows.nth(0)).to_have_class("al-dv-fold")
    expect(first_rows.nth(1)).to_have_class("al-dv-divergence")
    shifted = page.locator(".al-dv-events").first.locator("tr.al-dv-shifted[data-status]")
    expect(shifted.first).to_contain_text("span.started")
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    panel.locator(".agentlog-fork-button").scroll_into_view_if_needed()
    page.screenshot(path=shots / "lab_03_loaded.png")

    # keyboard on the scrubber's slider handle -> the kernel folds the next event
    scrubber.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    expect(readout).to_have_text("80")
    expect(scrubber).to_contain_text("state after seq 80")
    expect(scrubber).to_contain_text("approval.denied")
    expect(panel).to_contain_text("approval.denied")  # the linked panel follows (seq 80)
    # the prepared "approve" survives a scrubber round trip (▶ ◀ ▶)
    editor = panel.locator(".agentlog-fork-editor textarea")
    expect(editor).to_have_value(re.compile('"decision": "approve"'))
    handle = scrubber.locator(".noUi-handle").first
    handle.focus()
    page.keyboard.press("ArrowLeft")
    expect(readout).to_have_text("79")
    page.keyboard.press("ArrowRight")
    expect(readout).to_have_text("80")
    expect(panel).to_contain_text("approval.denied")
    expect(editor).to_have_value(json.dumps(APPROVE | {"note": "customer sent the returned-goods scan; approve"},
                                            indent=2))
    expect(panel.locator(".agentlog-fork-kept")).to_contain_text("edits kept at seq 80")
    readout.scroll_into_view_if_needed()
    page.screenshot(path=shots / "lab_03_scrubbed.png")

    # type the edit, as a user would, then fork
    editor = panel.locator(".agentlog-fork-editor textarea")
    editor.fill('{"decision": "approve", ')
    expect(panel.locator(".agentlog-fork-error")).to_contain_text("not JSON")
    expect(panel.locator(".agentlog-fork-button")).to_be_disabled()
    editor.fill(json.dumps(APPROVE))
    expect(panel.locator(".agentlog-fork-error")).to_have_text("")
    button = panel.locator(".agentlog-fork-button")
    expect(button).to_be_enabled()
    button.click()
    result = panel.locator(".agentlog-fork-result")
    expect(result.locator(".al-dv-divergence")).to_contain_text("runs diverge here: seq 80",
                                                                timeout=60_000)
    expect(result).to_contain_text("new run")
    expect(panel).to_contain_text("forked: ")
    page.evaluate("() => document.querySelector('.agentlog-fork-result .al-dv-divergence')"
                  ".scrollIntoView({block: 'center'})")
    page.screenshot(path=shots / "lab_03_forked.png")
    # every label of the facts grids fits its column (a long one, "total incl. inherited
    # prefix", once ran into its value)
    overflowing = page.evaluate("() => [...document.querySelectorAll('.al-grid dt')]"
                                ".filter(dt => dt.offsetParent !== null && dt.scrollWidth > dt.clientWidth + 1)"
                                ".map(dt => dt.textContent)")
    assert overflowing == []

    after = set(al.Store(store_copy).list_runs())
    assert len(after - before) == 2  # the fork made in code and the one made with the button
