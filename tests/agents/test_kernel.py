"""In a real Jupyter kernel (its event loop is running): ``await al.areplay(...)`` replays an
``async def`` program, and ``al.replay(...)`` says to await it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

CELLS = [
    ("import asyncio, agentlog as al\n"
     "async def program(rec):\n"
     "    await asyncio.sleep(0)\n"
     "    return str(rec.uuid())\n"
     "run = await al.arecord(program, store='agentlog-runs', name='in a kernel')"),
    "print('REPLAYED', (await al.areplay(program, run)).ok)",
    ("try:\n"
     "    al.replay(program, run)\n"
     "except RuntimeError as exc:\n"
     "    print('REFUSED', exc)"),
]


def test_a_notebook_cell_awaits_areplay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "jupyter" / "kernels" / "python3"  # this interpreter's kernel, first on the path
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "agentlog tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1"))
    text = "".join(o.get("text", "") for cell in nb.cells for o in cell.get("outputs", []))
    assert "REPLAYED True" in text
    assert "REFUSED" in text and "await al.areplay" in text
