"""Regenerate tests/golden/html/*.html: the notebook reprs of a small run, its fork, their store,
their diff, the diff's state patch and two verify reports.

Run ``python tests/golden/html/make_html.py`` after changing a repr on purpose (a builder in
``agentlog/widgets/html.py`` or the stylesheet), then review the diff of the files.
``tests/analysis/test_html_reprs.py`` compares the reprs with these files as strings. The runs are
built by ``tests/analysis/_analysis_runs.py`` with fixed ids and a scripted clock.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    sys.path.insert(0, str(HERE.parents[1] / "analysis"))
    from _analysis_runs import golden_reprs

    import agentlog as al

    with tempfile.TemporaryDirectory() as tmp:
        reprs = golden_reprs(al.Store(Path(tmp) / "store"))
    for name, html in reprs.items():
        (HERE / f"{name}.html").write_text(html + "\n", encoding="utf-8")
        print(f"wrote {name}.html ({len(html):,} characters)")


if __name__ == "__main__":
    main()
