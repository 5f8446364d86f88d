"""What the benchmarks share: progress lines on stderr and median wall times."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def logger(name: str) -> Callable[[str], None]:
    """A ``log(msg)`` that prints ``[bench/<name>] msg`` on stderr (stdout is for the JSON)."""
    def log(msg: str) -> None:
        print(f"[bench/{name}] {msg}", file=sys.stderr, flush=True)
    return log


def median_time(trials: int, fn: Callable[[], Any]) -> float:
    """The median wall time of ``trials`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(trials):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
