"""Every code block of README.md runs: the ``python`` blocks in order, in one namespace, in a
fresh folder (as a reader pasting them into one notebook would); every other block is one of
the few listed below that are not Python (shell commands, a folder tree), so a new block must
be either runnable or listed here on purpose."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)

#: Blocks that are not Python, by their first line: the demo and test commands (they install
#: packages and run the whole suite), and the layout of a store on disk.
NOT_PYTHON = {
    ("bash", "python3 -m venv .venv && .venv/bin/pip install -e '.[notebook]' && .venv/bin/agentlog demo"),
    ("bash", ".ci/run"),
    ("", "agentlog-runs/"),
    ("bash", "agentlog push s3://team-runs/agents            # or name RUNs; --follow keeps pushing as runs seal"),
    ("text", 'spark.read.option("basePath", "s3a://team-runs/agents/runs") \\'),
}

#: Python blocks that need a program the reader already has (an agent), by the section they are
#: in: the test named runs them with a real one built on loopback.
RUN_ELSEWHERE = {"OpenTelemetry, live": "tests/otel/test_readme_otel.py",
                 "Record the agent you already have": "tests/agents/test_readme_agents.py",
                 "Async agents": "tests/agents/test_readme_agents.py",
                 "A team store on S3": "tests/fleet/test_readme_fleet.py"}


def section_of(line: int) -> str:
    """The ``## `` heading above README line ``line``."""
    heads = [h[3:] for h in README.read_text(encoding="utf-8").splitlines()[:line] if h.startswith("## ")]
    return heads[-1] if heads else ""


def blocks() -> list[tuple[int, str, str]]:
    """``(line, language, code)`` of every fenced block of the README."""
    text = README.read_text(encoding="utf-8")
    return [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def test_every_block_is_python_or_listed() -> None:
    found = blocks()
    assert sum(lang == "python" for _, lang, _ in found) >= 4
    others = {(lang, code.splitlines()[0].strip()) for _, lang, code in found if lang != "python"}
    assert others == NOT_PYTHON


def test_blocks_run_elsewhere_are_run_there() -> None:
    root = README.parent
    for section, test in RUN_ELSEWHERE.items():
        assert any(lang == "python" and section_of(line) == section for line, lang, _ in blocks())
        assert f'section_code("{section}")' in (root / test).read_text(encoding="utf-8")


def test_the_python_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTLOG_STORE", raising=False)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for line, lang, code in blocks():
        if lang != "python" or section_of(line) in RUN_ELSEWHERE:
            continue
        # Line numbers in a traceback are README.md's own.
        exec(compile("\n" * line + code, str(README), "exec"), namespace)  # noqa: S102
    assert (tmp_path / "agentlog-runs" / "runs").is_dir()
    assert os.listdir(tmp_path / "agentlog-runs" / "runs")
