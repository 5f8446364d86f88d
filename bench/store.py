"""Benchmark the run store: appends, opening a big run, bytes on disk, verify, growing state.

    python bench/store.py [--quick]

Progress goes to stderr; one JSON line with the figures goes to stdout. Times are medians of
repeated trials on both sides of every ratio. Everything happens in a temp dir. The calls
timed are the user's:

- appends: ``RunWriter.emit`` N times **and** ``close()`` (the last seal is part of the work);
- open → pandas: ``Store(p).run(id).events`` on a new store object (against
  ``pq.read_table(one equivalent file).to_pandas()``); open → Table: ``run.table()``;
- verify: ``run.verify()``;
- growing state: bytes on disk after 1,000 ``state.patch`` steps (a 5 KiB message each, the
  same 1 MiB page every 5th), against the information they carry: the random bytes the
  text encodes (3 bytes per 4 base64 characters), not the text's length; and LangGraph's
  ``SqliteSaver`` run side by side on the same steps (a ``bench`` extra), as a ratio of bytes.

Targets: batch appends >= 50,000 events/s; fsync appends within 1.5x of a raw
``os.write`` + ``os.fsync`` loop over the same bytes; opening a 1M-event run as a DataFrame
within 1.5x of ``pq.read_table(one file).to_pandas()``; the growing-state workload within
1.5x of the information it carries.
"""

from __future__ import annotations

import argparse
import base64
import json
import operator
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pyarrow.parquet as pq

from agentlog.store import Store


def log(msg: str) -> None:
    print(f"[bench/store] {msg}", file=sys.stderr, flush=True)


def median_of(trials: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(trials))


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- appends -----------------------------------------------------------------------------------


def append_rate(root: Path, mode: str, n: int, tag: str) -> tuple[float, bytes]:
    """Events/s for n small events; also the WAL bytes written (for the raw baseline)."""
    st = Store(root / f"{mode}-{tag}")
    w = st.create_run(run_id=f"append-{mode}", durability=mode, segment_events=n + 1)  # keep every line in the WAL
    t0 = time.perf_counter()
    for i in range(n):
        w.emit("tool.result", {"key": f"k{i}", "name": "search", "result": "ok"}, actor="bench")
    w.flush()
    t_read = time.perf_counter()
    wal = (w.path / "wal.jsonl").read_bytes()  # for the raw baseline: read before close seals it
    read_s = time.perf_counter() - t_read
    w.close()  # the seal (WAL -> Parquet segment, run.json) is part of the user's work
    dt = time.perf_counter() - t0 - read_s
    return n / dt, wal


def raw_loop_rate(root: Path, lines: list[bytes], *, sync: bool, tag: str) -> float:
    path = root / f"raw-{tag}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for line in lines:
        os.write(fd, line)
        if sync:
            os.fsync(fd)
    dt = time.perf_counter() - t0
    os.close(fd)
    path.unlink()
    return len(lines) / dt


# --- open a big run ----------------------------------------------------------------------------


def open_big_run(root: Path, n: int, trials: int) -> dict[str, Any]:
    st = Store(root / "big")
    log(f"recording a {n:,}-event run (batch durability)")
    t0 = time.perf_counter()
    w = st.create_run(run_id="big", durability="batch")
    models = ["gpt-x", "claude-y", None]
    for i in range(n):
        if i % 3 == 1:
            w.emit("llm.response", {"content": f"answer {i}", "usage": {"in": 120, "out": 30}},
                   actor="agent", caused_by=i - 1, span_id=f"s{i // 10}", model=models[i % 3],
                   input_tokens=120, output_tokens=30, cost_usd=0.00042, duration_ms=812.5)
        else:
            w.emit("tool.call", {"name": "search", "args": {"q": f"query {i}"}}, actor="agent",
                   span_id=f"s{i // 10}")
    w.close()
    record_s = time.perf_counter() - t0
    run_dir = st.runs_path / "run_id=big"

    equivalent = root / "equivalent.parquet"
    pq.write_table(st.run("big").table(), equivalent, compression="zstd")

    def ours_table() -> float:
        t = time.perf_counter()
        table = st.run("big").table()
        assert table.num_rows == n
        return time.perf_counter() - t

    def ours_df() -> float:
        t = time.perf_counter()
        df = Store(st.path).run("big").events
        assert len(df) == n
        return time.perf_counter() - t

    def plain() -> float:
        t = time.perf_counter()
        df = pq.read_table(equivalent).to_pandas()
        assert len(df) == n
        return time.perf_counter() - t

    log(f"timing open → Table / DataFrame against one plain Parquet file ({trials} trials)")
    plain()  # warm the page cache for both
    ours_df()
    # Interleaved, so that other load on the machine hits both sides alike.
    table_t, df_t, plain_t = [], [], []
    for _ in range(trials):
        plain_t.append(plain())
        df_t.append(ours_df())
        table_t.append(ours_table())
    table_s, df_s, plain_s = (statistics.median(x) for x in (table_t, df_t, plain_t))

    log("verifying the big run")
    run = st.run("big")
    t = time.perf_counter()
    report = run.verify()
    verify_s = time.perf_counter() - t
    assert report.ok, str(report)
    size = du(run_dir)
    return {
        "events": n, "segments": len(list(run_dir.glob("events-*.parquet"))),
        "record_s": round(record_s, 2),
        "open_table_s": round(table_s, 4), "open_dataframe_s": round(df_s, 4),
        "plain_read_table_to_pandas_s": round(plain_s, 4),
        "dataframe_ratio_vs_plain": round(df_s / plain_s, 3),
        "bytes_on_disk": size, "bytes_per_event": round(size / n, 2),
        "plain_file_bytes_per_event": round(equivalent.stat().st_size / n, 2),
        "verify_s": round(verify_s, 3), "verify_events_per_s": round(n / verify_s),
    }


# --- growing state -----------------------------------------------------------------------------


class GrowingState(TypedDict):
    """The growing-state workload as a LangGraph state: channels that accumulate."""

    messages: Annotated[list[str], operator.add]
    pages: Annotated[dict[str, str], operator.or_]
    step: int


def growing_steps(steps: int) -> tuple[list[tuple[str, str | None]], int]:
    """The workload: per step a 5 KiB message and, every 5th step, the one 1 MiB page; and
    the information it carries (the random bytes under the base64 text, the page once)."""
    rng = random.Random(7)
    # Random base64 text: little for zstd to squeeze, so the ratio is not flattered.
    page = base64.b64encode(rng.randbytes(3 * 1024 * 1024 // 4)).decode()[:1024 * 1024]
    message_size = 5 * 1024
    out = []
    for step in range(steps):
        message = base64.b64encode(rng.randbytes(message_size * 3 // 4)).decode()[:message_size]
        out.append((message, page if step % 5 == 4 else None))
    return out, steps * message_size * 3 // 4 + len(page) * 3 // 4


def growing_state(root: Path, steps: int) -> dict[str, Any]:
    """Each step adds a ~5 KiB message to the state; every 5th step the same 1 MiB page."""
    work, info = growing_steps(steps)
    st = Store(root / "growing")
    w = st.create_run(run_id="growing", durability="batch")
    for step, (message, page) in enumerate(work):
        ops = [{"op": "add", "path": "/messages/-", "value": message}]
        if page is not None:
            ops.append({"op": "add", "path": f"/pages/{step}", "value": page})
        w.emit("state.patch", {"ops": ops})
    w.close()
    on_disk = du(st.path)
    out: dict[str, Any] = {"steps": steps, "bytes_on_disk": on_disk, "information_bytes": info,
                           "ratio": round(on_disk / info, 3),
                           "content": "random base64 text (5 KiB messages, one 1 MiB page referenced "
                                      "every 5th step); information = the random bytes it encodes"}
    out["langgraph"] = langgraph_side_by_side(root, work, on_disk, info)
    return out


def langgraph_side_by_side(root: Path, work: list[tuple[str, str | None]], ours: int, info: int) -> dict[str, Any]:
    """The same steps through a LangGraph StateGraph with the SqliteSaver checkpointer."""
    import sqlite3
    from importlib.metadata import version

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, StateGraph

    def step(state: GrowingState) -> dict[str, Any]:
        message, page = work[state["step"]]
        update: dict[str, Any] = {"messages": [message], "step": state["step"] + 1}
        if page is not None:
            update["pages"] = {str(state["step"]): page}
        return update

    builder = StateGraph(GrowingState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    path = root / "langgraph.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        graph = builder.compile(checkpointer=SqliteSaver(conn))
        config: Any = {"configurable": {"thread_id": "growing"}}
        for i in range(len(work)):
            graph.invoke({"messages": [], "pages": {}, "step": 0} if i == 0 else {"step": i}, config)
    finally:
        conn.close()
    theirs = sum(p.stat().st_size for p in root.glob("langgraph.sqlite*"))
    log(f"LangGraph SqliteSaver: {theirs / 2**20:.1f} MB for {len(work):,} steps vs agentlog {ours / 2**20:.1f} MB")
    return {"version": version("langgraph"), "checkpoint_sqlite_version": version("langgraph-checkpoint-sqlite"),
            "steps": len(work), "bytes_on_disk": theirs, "ratio_to_information": round(theirs / info, 2),
            "langgraph_over_agentlog": round(theirs / ours, 1)}


# --- main --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    quick = args.quick
    small_n = 20_000 if quick else 100_000
    fsync_n = 1_000 if quick else 5_000
    big_n = 100_000 if quick else 1_000_000
    steps = 50 if quick else 200  # LangGraph's checkpoints grow with the square of the steps
    trials = 3

    with tempfile.TemporaryDirectory(prefix="agentlog-bench-") as tmp:
        root = Path(tmp)
        append: dict[str, Any] = {}
        for mode, n in (("none", small_n), ("batch", small_n), ("fsync", fsync_n)):
            log(f"append {n:,} small events, durability={mode} ({trials} trials)")
            rates, wal = [], b""
            for t in range(trials):
                rate, wal = append_rate(root, mode, n, str(t))
                rates.append(rate)
            append[mode] = {"events": n, "events_per_s": round(statistics.median(rates))}
        lines = wal.splitlines(keepends=True)
        log(f"raw os.write + os.fsync loop over the same {len(lines):,} WAL lines")
        raw_fsync = statistics.median(raw_loop_rate(root, lines, sync=True, tag=str(t)) for t in range(trials))
        raw_write = statistics.median(raw_loop_rate(root, lines, sync=False, tag=str(t)) for t in range(trials))
        append["fsync"]["note"] = (f"{fsync_n:,} events, not {small_n:,}: each fsync costs "
                                   f"{1e6 / raw_fsync:.0f} us on this disk")
        append["raw_fsync_loop_events_per_s"] = round(raw_fsync)
        append["fsync_slowdown_vs_raw_fsync_loop"] = round(raw_fsync / append["fsync"]["events_per_s"], 3)
        append["raw_write_loop_events_per_s"] = round(raw_write)

        big = open_big_run(root, big_n, 7)
        log(f"growing-state workload, {steps:,} steps (and LangGraph's SqliteSaver on the same steps)")
        grow = growing_state(root, steps)

    result = {
        "bench": "store", "quick": quick, "append": append, "open": big,
        "bytes_per_event": big["bytes_per_event"], "verify_events_per_s": big["verify_events_per_s"],
        "growing_state": grow,
        "targets": {
            "batch_events_per_s>=50000": append["batch"]["events_per_s"] >= 50_000,
            "fsync_within_1.5x_raw": append["fsync_slowdown_vs_raw_fsync_loop"] <= 1.5,
            "open_dataframe_within_1.5x_plain": big["dataframe_ratio_vs_plain"] <= 1.5,
            "growing_state<=1.5x": grow["ratio"] <= 1.5,
        },
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
