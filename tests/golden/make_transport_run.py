"""Regenerate tests/golden/transport_run.json: the events of ``tests/capture/_transport_golden.py``'s
recorded program, every column as stored.

``transport_run_v1.json`` was made from the tree in which the transport wrote a call's events
one ``emit`` at a time (before they were written in two batches), with::

    PYTHONPATH=<that tree>:tests/capture python tests/golden/make_transport_run.py

and the batched transport wrote exactly those events (every hash) until the HTTP events' version
2 kept UTF-8 bodies inline instead of as blobs; it stays as a run recorded by that version,
which must still replay strictly. ``transport_run_v2.json`` is the version 2 transport's
recording (the v1 events but for the two HTTP bodies), kept likewise since ``llm.response``
version 3 keeps a stream's raw bytes inline in its ``http.response`` instead of as a blob.
``transport_run.json`` is this program's recording by today's transport (the v2 events but for
the streamed call's two answer events, made from this tree):
``tests/capture/test_transport_events.py`` checks that the transport writes exactly these
events and that all three files replay. The program prices its calls by overrides, so
genai-prices' catalog does not move the hashes. Regenerate only when what a recorded call
writes is meant to change (a run recorded before must still replay: keep its file).
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
