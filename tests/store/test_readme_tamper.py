"""The README's tamper-evidence example runs, and says what it shows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from _readme import section_code


def test_the_tamper_evidence_example_runs() -> None:
    code = section_code("Tamper evidence")
    lines = code.splitlines()
    scope: dict[str, Any] = {}
    # each line whose comment claims a value is checked: "# True: ..." and "# []: ..."
    for i, line in enumerate(lines):
        claim = re.search(r"#\s*(True|\[\])", line)
        if claim and not line.lstrip().startswith("#"):
            expr = line.split("#", 1)[0].strip()
            exec("\n".join(lines[:i]), scope)  # noqa: S102 - the README's own code
            assert eval(expr, scope) == eval(claim.group(1)), line
    exec(code, scope)  # noqa: S102
    assert len(Path(scope["outside"] / "audit-1.head.json").read_text()) < 500
