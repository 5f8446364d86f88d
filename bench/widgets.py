"""Benchmark the notebook views: waterfall build and render, scrubber steps, DiffView build.

Run ``python bench/widgets.py``. Progress goes to stderr; the last line on stdout is one JSON
object merging the figures of ``bench/widgets_waterfall.py`` (waterfall figure build time for
1,000 / 10,000 / 100,000 spans, and Chromium render time of the 100k-span figure against a
1k-span one) and ``bench/widgets_state.py`` (scrubber step and jump times on a 100,000-event
run; DiffView build for two 100,000-event runs diverging late and early). Each part also runs
on its own.

Targets: scrubber step median ≤ 30 ms; 10,000-span waterfall built in ≤ 2 s; 100,000 spans
built in ≤ 10 s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import widgets_state
import widgets_waterfall


def main() -> None:
    waterfall = widgets_waterfall.measure()
    state = widgets_state.measure()
    targets = {"scrubber_step_median_le_30ms": state["step_forward_median_ms"] <= 30.0,
               "waterfall_10k_le_2s": waterfall["total_10000_s"] <= 2.0,
               "waterfall_100k_le_10s": waterfall["total_100000_s"] <= 10.0}
    print(json.dumps({"bench": "widgets", "waterfall": waterfall, "state": state, "targets": targets}))


if __name__ == "__main__":
    main()
