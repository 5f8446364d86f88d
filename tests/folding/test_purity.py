"""The fold engine is pure core: importing it pulls in no pyarrow, pandas or widgets."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyarrow", "pandas", "ipywidgets", "duckdb", "plotly", "httpx")


def test_importing_the_fold_pulls_in_no_heavy_modules() -> None:
    code = (
        "import sys, agentlog.folding, agentlog.folding.engine, agentlog.folding.determinism\n"
        "from agentlog.folding import fold, SnapshotIndex, diff_states\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported: {out.stdout.strip()}"


def test_the_tripwire_can_trip() -> None:
    code = "import sys, json, agentlog.folding; import decimal; print('decimal' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_the_fold_does_no_io() -> None:
    """No file, socket or subprocess calls while folding (audit hooks see every one)."""
    code = r"""
import sys
from agentlog.events import Event
from agentlog.folding import Reducers, SnapshotIndex, check_determinism, diff_states, fold
events = [Event(seq=i, type="state.patch", payload={"ops": [{"op": "add", "path": f"/k{i%9}", "value": i}]})
          for i in range(300)]
seen = []
def hook(name, args):
    if name.split(".")[0] in ("open", "os", "socket", "subprocess", "shutil", "time"):
        seen.append(name)
sys.addaudithook(hook)
index = SnapshotIndex.of(events, Reducers.standard(), every=10)
diff_states(index.at(5), index.at(250))
list(index.states(100, 120))
fold(events)
check_determinism(events, every=50)
print(sorted(set(seen)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
