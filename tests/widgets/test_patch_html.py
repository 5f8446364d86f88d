"""A Patch drawn as HTML: a view in agentlog.widgets.html, not part of the fold."""

from __future__ import annotations

import subprocess
import sys

from agentlog.folding import Change, Patch
from agentlog.widgets.html import patch_html


def test_patch_html_escapes_everything() -> None:
    patch = Patch([{"op": "add", "path": "/<b>", "value": "<script>alert('x')</script>"},
                   Change({"op": "replace", "path": "/a&b", "value": 1}, old="<i>")])
    html = patch_html(patch)
    assert "<script>" not in html and "<b>" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert '<td class="al-patch-path">/&lt;b&gt;</td>' in html and "/a&amp;b" in html
    assert "Patch · 2 ops" in html
    assert html.count("<tr class=") == 2


def test_patch_html_is_cut_past_200_rows() -> None:
    patch = Patch([{"op": "add", "path": f"/k{i}", "value": i} for i in range(250)])
    html = patch_html(patch)
    assert html.count('<tr class="al-add">') == 200
    assert "… 50 more" in html


def test_one_patch_table_in_every_view() -> None:
    """The scrubber and a bare patch draw the same rows: values at one precision, money by
    fmt_usd, move and copy by their source."""
    from agentlog.numbers import fmt_usd
    from agentlog.widgets.html import patch_table

    patch = Patch([Change({"op": "replace", "path": "/usage/cost_usd", "value": 0.5}, old=0.25),
                   {"op": "move", "from": "/a", "path": "/b"},
                   Change({"op": "remove", "path": "/c"}, old=3)])
    table = patch_table(patch)
    assert f"{fmt_usd(0.25)} → {fmt_usd(0.5)}" in table
    assert "from /a" in table and "was 3" in table
    assert table in patch_html(patch)
    assert patch_table(patch, limit=1).count('<tr class="al-') == 1
    assert "no changes" in patch_table(Patch([]))


def test_a_bare_patch_shows_as_html_in_ipython() -> None:
    """agentlog registers the view with a running IPython; the fold module stays HTML-free."""
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "import agentlog as al\n"
        "from agentlog.folding import diff_states, freeze\n"
        "patch = diff_states(freeze({'a': 1}), freeze({'a': '<b>'}))\n"
        "data, _ = shell.display_formatter.format(patch)\n"
        "print(sorted(data)); print(data['text/html']); print(data['text/plain'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "['text/html', 'text/plain']"
    assert 'class="agentlog-patch"' in out and "&quot;&lt;b&gt;&quot;" in out
    assert '~ /a: 1 → "<b>"' in out  # the text display: repr, then the lines
