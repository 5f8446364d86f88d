"""The state tree: truncation, highlighting (escaped pointer tokens, appends, removals),
escaping, depth and budget limits, blob previews."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from agentlog.events import BlobRef
from agentlog.folding import apply_patch, diff_states, freeze
from agentlog.widgets.statetree import highlighted_paths, marked_paths, render_state

_LI = re.compile(r'<li class="(al-st-hl|al-st-path)" data-path="([^"]*)"')


def marks(text: str) -> dict[str, str]:
    """``{pointer: class}`` of the marked nodes in a rendered tree."""
    return {html.unescape(path): cls for cls, path in _LI.findall(text)}


def test_a_ten_thousand_item_list_is_cut_with_a_count() -> None:
    state = freeze({"vars": {"big": list(range(10_000))}})
    text = render_state(state, ["/vars/big"])
    assert "… and 9,950 more" in text
    assert len(text) < 20_000
    assert "<span class=\"al-st-val\">49</span>" in text
    assert "<span class=\"al-st-val\">50</span>" not in text


def test_a_big_map_shows_its_first_keys_in_sorted_order() -> None:
    state = freeze({"m": {f"k{i:05d}": i for i in range(10_000)}})
    text = render_state(state, ["/m/k00003"], max_children=5)
    keys = re.findall(r'<span class="al-st-key">(k\d+)</span>', text)
    assert keys == ["k00000", "k00001", "k00002", "k00003", "k00004"]
    assert "… and 9,995 more" in text


def test_a_highlighted_child_beyond_the_cut_is_shown_between_counts() -> None:
    a = freeze({"log": list(range(1_000))})
    b = apply_patch(a, [{"op": "replace", "path": "/log/700", "value": -1}])
    text = render_state(b, diff_states(a, b), max_children=10)
    assert marks(text)["/log/700"] == "al-st-hl"
    assert "… and 690 more" in text and "… and 299 more" in text


def test_nested_paths_with_escaped_tokens_are_highlighted_and_their_ancestors_open() -> None:
    a = freeze({"vars": {"a/b": {"c~d": 1, "e": 2}, "plain": 0}, "status": "x"})
    b = apply_patch(a, [{"op": "replace", "path": "/vars/a~1b/c~0d", "value": 5}])
    patch = diff_states(a, b)
    assert highlighted_paths(patch) == ["/vars/a~1b/c~0d"]
    text = render_state(b, patch)
    assert marks(text) == {"": "al-st-path", "/vars": "al-st-path", "/vars/a~1b": "al-st-path",
                           "/vars/a~1b/c~0d": "al-st-hl"}
    # the ancestors are open, the untouched sibling map is folded
    assert re.search(r'data-path="/vars/a~1b"><details open>', text)
    assert marked_paths(b, patch) == ["/vars/a~1b/c~0d"]


def test_an_append_highlights_the_new_last_element() -> None:
    a = freeze({"messages": [{"role": "user", "content": "hi"}]})
    b = apply_patch(a, [{"op": "add", "path": "/messages/-", "value": {"role": "assistant", "content": "yo"}}])
    patch = diff_states(a, b)
    assert highlighted_paths(patch) == ["/messages/-"]
    assert marked_paths(b, patch) == ["/messages/1"]
    assert marks(render_state(b, patch))["/messages/1"] == "al-st-hl"


def test_a_removed_key_opens_and_marks_its_parent_only() -> None:
    a = freeze({"vars": {"x": 1, "y": 2}})
    b = apply_patch(a, [{"op": "remove", "path": "/vars/y"}])
    text = render_state(b, diff_states(a, b))
    assert marks(text) == {"": "al-st-path", "/vars": "al-st-path"}
    assert marked_paths(b, diff_states(a, b)) == []


def test_everything_else_is_folded_below_the_root() -> None:
    state = freeze({"vars": {"x": {"y": 1}}, "messages": []})
    text = render_state(state)
    assert text.count("<details open>") == 1  # the root only
    assert marks(text) == {}


def test_keys_and_values_are_escaped() -> None:
    state = freeze({"<b>key</b>": "<script>alert(1)</script>", "long": "<i>" * 100})
    text = render_state(state, ["/<b>key</b>"])
    assert "<script>" not in text and "<b>" not in text and "<i>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;b&gt;key&lt;/b&gt;" in text


def test_deep_levels_become_previews_and_the_budget_bounds_the_output() -> None:
    deep: Any = "leaf"
    for i in range(20):
        deep = {f"d{i}": deep}
    text = render_state(freeze({"deep": deep}))
    assert text.count("<details") <= 4  # root + two folded levels written out
    wide = freeze({f"k{i}": {f"j{j}": {"v": j} for j in range(50)} for i in range(50)})
    small = render_state(wide, budget=200)
    assert len(small) < len(render_state(wide, budget=10_000)) / 3


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls = 0

    def __call__(self, digest: str) -> bytes:
        self.calls += 1
        return self.data


def test_a_blob_shows_size_and_an_escaped_preview_that_unfolds() -> None:
    reader = _Reader(b"<h1>page</h1>" + b"x" * 100)
    ref = BlobRef("sha256:" + "1" * 64, 113, "text/html", reader)
    text = render_state(freeze({"page": ref}), ["/page"])
    assert '<details class="al-st-blob">' in text
    assert "113 bytes" in text and "text/html" in text
    assert "&lt;h1&gt;page&lt;/h1&gt;" in text and "<h1>" not in text
    render_state(freeze({"page": ref}))
    assert reader.calls == 1  # previews are kept by digest


def test_an_unreadable_or_binary_blob_says_so() -> None:
    lost = BlobRef("sha256:" + "2" * 64, 10, "text/plain")  # no store attached
    binary = BlobRef("sha256:" + "3" * 64, 10, "image/png")
    text = render_state(freeze({"a": lost, "b": binary}))
    assert "not readable" in text and "image/png" in text


@pytest.mark.parametrize("patch", [None, [], ["/nope/deeper"], ["no-slash"]])
def test_odd_or_missing_patches_render(patch: Any) -> None:
    assert render_state(freeze({"a": 1}), patch).startswith('<div class="al-st">')
