"""Benchmark fsyncs: one fsync a recorded model call against two, side by side in one process.

    python bench/fsyncs.py [--calls N]

With ``durability="fsync"`` (the default) the transport writes a model call's request events
before the request goes out without an fsync, and fsyncs them with the answer: one fsync a
call. This bench times that against the way before it (the request side fsynced too: two a
call, made here by writing every batch with ``sync=True``), and against ``durability="none"``
(no fsync), on the same client in the same process, the rows taking turns one call each
(``bench/capture.py``'s loopback server and the real ``openai`` SDK; three recordings open side
by side in one store). Timed call: ``client.chat.completions.create(...)``, by the wall clock
and in this process's CPU time (an fsync's kernel time counts); medians of ``calls`` calls per
row, each row over the same call with httpx unpatched. The recordings' closes (their seals)
are not timed here: they are alike on every row, and ``bench/capture.py`` adds them. One JSON
line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import logger

log = logger("fsyncs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps({"bench": "fsyncs", "calls_per_row": args.calls, **rows(args.calls),
                      "load_average_1min": round(os.getloadavg()[0], 2)}))


def rows(n: int) -> dict[str, Any]:
    """µs over the unpatched call, per row: ``[wall, cpu]``."""
    from capture import _interleaved, served, unpatched

    import agentlog as al
    from agentlog.capture import recorder
    from agentlog.capture.recorder import activate

    forced = {"on": False}
    emit_many = recorder.Recorder.emit_many

    def synced(self: Any, items: Any, *, taken: Any = None, sync: bool = True) -> Any:
        return emit_many(self, items, taken=taken, sync=True if forced["on"] else sync)

    @contextmanager
    def two_fsyncs(rec: Any) -> Iterator[None]:
        forced["on"] = True
        try:
            with activate(rec):
                yield
        finally:
            forced["on"] = False

    recorder.Recorder.emit_many = synced  # type: ignore[method-assign]
    try:
        with served() as (_, tmp, client):
            store = al.Store(tmp)
            with al.recording(store=store, name="one", durability="fsync") as one, \
                    al.recording(store=store, name="two", durability="fsync") as two, \
                    al.recording(store=store, name="none", durability="none") as none:
                timed = _interleaved(client, n, {"unpatched": unpatched, "fsync_one": lambda: activate(one),
                                                 "fsync_two": lambda: two_fsyncs(two),
                                                 "none": lambda: activate(none)})
    finally:
        recorder.Recorder.emit_many = emit_many  # type: ignore[method-assign]
    wall0, cpu0 = timed["unpatched"]
    out: dict[str, Any] = {"unpatched_us": [round(wall0), round(cpu0)]}
    for name in ("fsync_one", "fsync_two", "none"):
        wall, cpu = timed[name]
        out[f"{name}_over_unpatched_us"] = [round(wall - wall0), round(cpu - cpu0)]
    out["two_minus_one_us"] = [round(timed["fsync_two"][0] - timed["fsync_one"][0]),
                               round(timed["fsync_two"][1] - timed["fsync_one"][1])]
    log(f"over unpatched: one fsync {out['fsync_one_over_unpatched_us']}, two "
        f"{out['fsync_two_over_unpatched_us']}, none {out['none_over_unpatched_us']} µs [wall, cpu]")
    return out


if __name__ == "__main__":
    main()
