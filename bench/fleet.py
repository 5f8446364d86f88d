"""Benchmark the team store: push to S3, read remotely, and the fleet cost table on DuckDB and Dask.

    python bench/fleet.py [--quick] [--events N]

Needs the ``fleet`` extra and moto (``pip install -e '.[test]'``). Starts moto's S3 server on
loopback (a subprocess) and a ``dask.distributed`` LocalCluster with 2 worker processes.
Progress on stderr; one JSON line of figures on stdout. The calls timed are the user's:

``push``
    ``store.push("s3://…")`` of a 500-run store (``agentlog.testing.fleet.fleet_store``: model
    answers, tool results, a large tool result shared by every fifth run) on a new store
    object: MB/s and events/s; then the same push again (everything already there: skipped),
    timed the same way.
``remote``
    in a **fresh Python process** each time (the call timed after the imports, median of 3):
    ``al.Store(url).run(id).state_at(last)`` and ``al.Store(url).run(id).events`` against
    the same calls on a local copy of the run (``store.pull``), as ratios.
``cost``
    ``store.cost(by)`` for ``by`` = ``("run", "model", "day")`` and ``("span", "kind")`` (the
    span join) over a store of ``--events`` events (default 10,000,000: 500 runs of 20,002,
    recorded with spans: an agent span, and per call an llm span with its request and answer
    and a tool span with its call and result), with DuckDB (embedded, the default engine) and
    with ``engine="dask"`` on the 2-worker cluster (after one untimed call, in which the
    workers import agentlog), medians of 3, on a new store object each time (so the store is listed and read each time): seconds and events/s. The
    tables are checked equal (to the cent). The store is on local disk: 10M events through
    moto's single-threaded emulator would time the emulator. To make 10M events in minutes,
    25 distinct runs are recorded through the writer and each is cloned (its files hard-linked
    under 19 more run ids): the cost engines read 500 runs' files either way, but only 25
    distinct runs' contents (the clones verify as damaged: their hashes name the first id).
    The cost tables over the 500-run store on S3 (no spans) are timed too (DuckDB, Dask).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import logger, median_time

log = logger("fleet")
S3_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def _moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from moto.server import main; main()", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto did not start")


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench_push(root: Path, url: str, runs: int, calls: int) -> dict[str, Any]:
    import agentlog as al
    from agentlog.testing.fleet import fleet_store

    t0 = time.perf_counter()
    local = fleet_store(root / "push-src", runs=runs, calls=calls, segment_events=100)
    log(f"recorded {runs} runs in {time.perf_counter() - t0:.1f}s")
    events = runs * calls * 2
    t0 = time.perf_counter()
    first = al.Store(local.path).push(url, progress=False)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    second = al.Store(local.path).push(url, progress=False)
    second_s = time.perf_counter() - t0
    log(f"push {first} in {first_s:.2f}s; again: {second} in {second_s:.2f}s")
    return {"runs": runs, "events": events, "files": first.files_sent, "bytes": first.bytes_sent,
            "local_store_bytes": _dir_bytes(local.path),
            "push_s": round(first_s, 3), "push_mb_per_s": round(first.bytes_sent / first_s / 1e6, 2),
            "push_events_per_s": round(events / first_s),
            "second_push_s": round(second_s, 3), "second_push_files_sent": second.files_sent,
            "second_push_bytes_skipped": second.bytes_skipped,
            "second_push_over_first": round(second_s / first_s, 3)}


_FRESH = """
import sys, time
import agentlog as al
t0 = time.perf_counter()
run = al.Store(sys.argv[1]).run(sys.argv[2])
if sys.argv[3] == "state_at":
    run.state_at(len(run) - 1)
else:
    run.events
print(time.perf_counter() - t0)
"""


def _fresh(store: str, run_id: str, what: str, env: dict[str, str]) -> float:
    times = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", _FRESH, store, run_id, what], env=env, check=True,
                             capture_output=True, text=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def bench_remote(root: Path, url: str, env: dict[str, str]) -> dict[str, Any]:
    import agentlog as al

    remote = al.Store(url)
    run_id = remote.list_runs()[len(remote.list_runs()) // 2]
    local = al.Store(root / "pulled")
    local.pull(url, run_id)
    out: dict[str, Any] = {"run_id": run_id, "events": len(local.run(run_id))}
    for what in ("state_at", "events"):
        r = _fresh(url, run_id, what, env)
        loc = _fresh(str(local.path), run_id, what, env)
        out[what] = {"remote_s": round(r, 4), "local_s": round(loc, 4), "remote_over_local": round(r / loc, 2)}
        log(f"{what}: remote {r * 1000:.1f} ms, local {loc * 1000:.1f} ms")
    return out


def _clone(store: Any, copies: int) -> None:
    """Hard-link each run's files under ``copies`` more run ids (see the module docstring)."""
    from agentlog.store.meta import RUN_JSON
    for run_id in list(store.list_runs()):
        src = store.runs_path / f"run_id={run_id}"
        meta = json.loads((src / RUN_JSON).read_bytes())
        for c in range(1, copies + 1):
            new = f"{run_id}-c{c:02d}"
            dst = store.runs_path / f"run_id={new}"
            dst.mkdir()
            for f in src.iterdir():
                if f.name.startswith("events-"):
                    os.link(f, dst / f.name)
            (dst / RUN_JSON).write_text(json.dumps(dict(meta, run_id=new)))


#: The groupings timed: the dashboard's default, and by span (the span join: each usage event's
#: span found from the ``span.started`` events of its run as read, payload JSON included).
GROUPINGS = (("run", "model", "day"), ("span", "kind"))


def bench_cost(root: Path, events: int, client: Any, remote_url: str) -> dict[str, Any]:
    import pandas as pd

    import agentlog as al
    from agentlog.testing.fleet import fleet_store

    per_run = 20_000
    runs = max(1, events // per_run)
    distinct = min(25, runs)
    t0 = time.perf_counter()
    store = fleet_store(root / "cost", runs=distinct, calls=(per_run - 2) // 8, segment_events=65536, spans=True)
    _clone(store, runs // distinct - 1)
    total = int(al.Store(store.path).sql("select count(*) as n from events")["n"][0])
    log(f"made {len(store.list_runs())} runs, {total:,} events in {time.perf_counter() - t0:.1f}s")
    out: dict[str, Any] = {"events": total, "runs": len(store.list_runs()), "distinct_runs": distinct,
                           "store_bytes": _dir_bytes(store.path)}
    for by in GROUPINGS:
        duck_s = median_time(3, lambda by=by: al.Store(store.path).cost(by))
        log(f"{by}: duckdb {duck_s:.2f}s")
        al.Store(store.path).cost(by, engine="dask")  # untimed: the workers import agentlog once
        dask_s = median_time(3, lambda by=by: al.Store(store.path).cost(by, engine="dask"))
        log(f"{by}: dask {dask_s:.2f}s")
        a, b = al.Store(store.path).cost(by), al.Store(store.path).cost(by, engine="dask")
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9)
        remote_duck = median_time(3, lambda by=by: al.Store(remote_url).cost(by))
        remote_dask = median_time(2, lambda by=by: al.Store(remote_url).cost(by, engine="dask"))
        log(f"{by}: remote (500-run push store): duckdb {remote_duck:.2f}s dask {remote_dask:.2f}s")
        out["by_" + "_".join(by)] = {
            "duckdb_s": round(duck_s, 3), "duckdb_events_per_s": round(total / duck_s),
            "dask_2_workers_s": round(dask_s, 3), "dask_events_per_s": round(total / dask_s),
            "dask_over_duckdb": round(dask_s / duck_s, 2), "tables_equal": True,
            "remote_push_store_duckdb_s": round(remote_duck, 3),
            "remote_push_store_dask_s": round(remote_dask, 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--events", type=int, default=None, help="events for the cost table (10,000,000)")
    args = parser.parse_args()
    events = args.events or (200_000 if args.quick else 10_000_000)
    runs, calls = (50, 10) if args.quick else (500, 50)
    proc, endpoint = _moto()
    env = dict(os.environ, **S3_ENV, AWS_ENDPOINT_URL=endpoint)
    os.environ.update(env)
    root = Path(tempfile.mkdtemp(prefix="agentlog-fleet-bench-"))
    try:
        import s3fs
        from dask.distributed import Client, LocalCluster

        bucket = "fleet-" + secrets.token_hex(4)
        s3fs.S3FileSystem().mkdir(bucket)
        url = f"s3://{bucket}/team"
        push = bench_push(root, url, runs, calls)
        remote = bench_remote(root, url, env)
        t0 = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
                Client(c) as client:
            start_s = time.perf_counter() - t0
            cost = bench_cost(root, events, client, url)
        cost["cluster_start_s"] = round(start_s, 2)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"bench": "fleet", "quick": args.quick, "cpus": os.cpu_count(),
                      "loadavg_at_end": round(os.getloadavg()[0], 2),
                      "push": push, "remote": remote, "cost": cost}))


if __name__ == "__main__":
    main()
