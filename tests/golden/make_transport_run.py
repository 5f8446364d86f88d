"""Regenerate tests/golden/transport_run.json: the events of ``tests/capture/_transport_golden.py``'s
recorded program, every column as stored.

It was made from the tree in which the transport wrote a call's events one ``emit`` at a time
(before they were written in two batches), with::

    PYTHONPATH=<that tree>:tests/capture python tests/golden/make_transport_run.py

``tests/capture/test_transport_events.py`` checks that the transport writes exactly these
events (every hash the same) and that they replay. The program prices its calls by overrides,
so genai-prices' catalog does not move the hashes. Regenerate only when what a recorded call
writes is meant to change (a run recorded before would no longer replay): then from a tree
whose transport is known to write what it wrote here.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import agentlog as al

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "capture"))
from _transport_golden import record, rows

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        events = rows(record(al.Store(tmp)))
    out = Path(__file__).with_name("transport_run.json")
    out.write_text(json.dumps({"events": events}, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {len(events)} events")
