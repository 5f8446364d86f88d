"""The README's code, by section, for the tests that run one section's example as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def section_code(heading: str, lang: str = "python") -> str:
    """The one ``lang`` block of the README section ``## heading``."""
    section = README.read_text(encoding="utf-8").split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(rf"```{lang}\n(.*?)```", section, flags=re.DOTALL)
    return str(code)
