"""Benchmark forks: how often ``al.fork`` of branches run side by side goes wrong, when the
fork runs them in another order than the recording did.

    python bench/forks.py [--seeds N] [--recordings N] [--forks N] [--shapes a,b] [--quick]

The program is the tests' (``tests/agents/test_parallel_replay.py``, ``_nested``): two or
three branches under one tracer's span, each in a thread of its own, a tracer's span "ask",
a span "chat" under it and the real ``openai`` client's model call under that, every step of
every branch interleaved in an order drawn at random, against the tests' loopback
OpenAI-compatible server (``tests/agents/_server.py``). Three shapes:

- ``plain``: the spans carry no attributes;
- ``topics``: each chat carries its question as an attribute (as the OpenAI instrumentor's
  spans carry their request), which the fork's prefix must show on the right span;
- ``two_calls``: each chat makes two model calls.

And one more, not run unless named (``--shapes fan_out_edit``): a real LangGraph ``Send``
fan-out of three topics (the tests' ``_fan_out`` in ``tests/agents/test_frameworks.py``), not
traced, each recording forked at each branch's model call with that call's answer edited, the
topics sent in an order drawn from the six, twice: cut just before the call's request
(``before_call``: the fork panel's cut until this stop) and at the fork plan's
:func:`~agentlog.capture.forkplan.quiet_cut` (``quiet``: before any branch began). A fork
fails when ``al.fork`` raises or the edited answer is not its topic's in the result.

For each seed, ``recordings`` runs are recorded (``al.record``, one random order each) and
each is forked ``forks`` times (``al.fork``) at a random event, with another random order. A
fork **fails** when ``al.fork`` raises (a ``DivergenceError``, for one) or the fork does not
finish, leaves a span open, or puts a branch's calls under more than one chat or ask or two
branches' under one; a fork of ``topics`` is **misnamed** when a chat's question is not that
of the calls under it. ``sent``: requests the forks sent to the server (a fork that works
sends none: every answer is served from the recording).

Counts, not times: the figures are ``failed``, ``misnamed`` and ``sent`` per shape. Beside
them, ``fork_ms``: the median wall time of the public call ``al.fork`` (its prefix read from
the store and replayed, the program run, the new run sealed), in a warm process (the forks
of one run follow each other), not a cold start; no baseline, so no ratio: a side figure,
not a target. ``agentlog_commit``: the commit of the tree measured. Seeds make the orders, so a tree and the
next one are compared on the same draws: ``PYTHONPATH=<other tree> python bench/forks.py``
runs this file (and the tests' program of this tree) against another tree's ``agentlog``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "agents"))
from _common import logger

log = logger("forks")
SHAPES = ("plain", "topics", "two_calls")
EXTRA_SHAPES = ("fan_out_edit",)


def _text(order: list[tuple[int, str]]) -> str:
    """An order as the tests write it (``"0:ask 1:ask 0:chat ..."``, see ``_steps``)."""
    return " ".join(f"{b}:{step}" for b, step in order)


def verdict(run: Any, branches: int, topics: bool) -> str | None:
    """``None`` for a fork as it should be, else ``failed`` or ``misnamed`` (see above): the
    tests' own checks (``_nested_well``, ``_chats_name_their_calls``)."""
    from test_parallel_replay import _chats_name_their_calls, _nested_well

    if run.status != "finished":
        return "failed"
    try:
        _nested_well(run, branches)
    except (AssertionError, KeyError):
        return "failed"
    try:
        if topics:
            _chats_name_their_calls(run)
    except AssertionError:
        return "misnamed"
    return None


def shape_counts(shape: str, seeds: int, recordings: int, forks: int) -> dict[str, Any]:
    """Record and fork the shape's program on every seed's draws; the counts (see above)."""
    from _server import LLMServer
    from test_parallel_replay import _nested, _schedule

    import agentlog as al

    topics, calls = shape == "topics", 2 if shape == "two_calls" else 1
    counts: Counter[str] = Counter()
    times: list[float] = []
    handle = al.instrument(instrumentors=[])
    try:
        with LLMServer() as server, tempfile.TemporaryDirectory() as tmp:
            store = al.Store(tmp)
            for seed in range(1, seeds + 1):
                rng = random.Random(seed)
                for _ in range(recordings):
                    branches = rng.choice([2, 3])
                    questions = [f"q{b}" for b in range(branches)]
                    recorded = _schedule(rng, branches, calls)
                    run = al.record(_nested(server, questions, recorded, topics=topics), store=store, name=shape)
                    for _ in range(forks):
                        cut, order = rng.randrange(2, len(run) - 2), _schedule(rng, branches, calls)
                        sent = len(server.requests)
                        t0 = time.perf_counter()
                        try:
                            forked = al.fork(run, cut, program=_nested(server, questions, order, topics=topics))
                            times.append(time.perf_counter() - t0)
                            outcome = verdict(forked, branches, topics)
                        except Exception as exc:  # noqa: BLE001 - a fork that fails is counted, whatever it raised
                            outcome = "failed"
                            counts[f"raised {type(exc).__name__}"] += 1
                            log(f"{shape} seed {seed}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                        counts["forks"] += 1
                        counts["sent"] += len(server.requests) - sent
                        if outcome is not None:
                            counts[outcome] += 1
                            log(f"{shape} seed {seed}: {outcome}: recorded {_text(recorded)!r}, cut {cut}, "
                                f"forked {_text(order)!r}")
                log(f"{shape} seed {seed}: {dict(counts)}")
    finally:
        handle.uninstrument()
    return {"forks": counts["forks"], "failed": counts["failed"], "misnamed": counts["misnamed"],
            "sent": counts["sent"], "raised": {k[7:]: v for k, v in counts.items() if k.startswith("raised ")},
            "fork_ms": round(statistics.median(times) * 1000, 1) if times else None}


def fan_out_counts(seeds: int, recordings: int) -> dict[str, Any]:
    """The ``fan_out_edit`` shape (see above): its counts, for each of the two cuts."""
    return {cut: _fan_out_counts(seeds, recordings, cut) for cut in ("before_call", "quiet")}


def _fan_out_counts(seeds: int, recordings: int, cut: str) -> dict[str, Any]:
    import itertools
    import warnings

    from _server import SLOW, LLMServer
    from test_frameworks import _fan_out

    import agentlog as al
    from agentlog.capture.forkplan import quiet_cut

    counts: Counter[str] = Counter()
    times: list[float] = []
    topics = [f"{SLOW} api", "db", "cache"]
    orders = list(itertools.permutations(topics))
    with LLMServer() as server, tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangGraph's own deprecation warnings
        store = al.Store(tmp)
        program = _fan_out(server)
        for seed in range(1, seeds + 1):
            rng = random.Random(seed)
            for _ in range(recordings):
                run = al.record(program(topics), store=store, name="fan out")
                for answer in [e for e in run.iter_events() if e.type == "llm.response"]:
                    asked = run.event(int(answer.caused_by or 0)).payload["messages"][-1]["content"]
                    order = list(rng.choice(orders))
                    sent = len(server.requests)
                    t0 = time.perf_counter()
                    try:
                        at = quiet_cut(run, answer) if cut == "quiet" else int(answer.caused_by or 0) - 1
                        forked = al.fork(run, at, program=program(order),
                                         edit=al.edit.replace_response(answer.seq, {"message": {
                                             "role": "assistant", "content": "edited"}}))
                        times.append(time.perf_counter() - t0)
                        if f"{asked}: edited" not in forked.event(len(forked) - 1).payload["result"]:
                            counts["failed"] += 1
                    except Exception as exc:  # noqa: BLE001 - a fork that fails is counted, whatever it raised
                        counts["failed"] += 1
                        counts[f"raised {type(exc).__name__}"] += 1
                        log(f"fan_out_edit {cut} seed {seed}: order {order}, answer {answer.seq}: {type(exc).__name__}")
                    counts["forks"] += 1
                    counts["sent"] += len(server.requests) - sent
            log(f"fan_out_edit {cut} seed {seed}: {dict(counts)}")
    return {"forks": counts["forks"], "failed": counts["failed"], "sent": counts["sent"],
            "raised": {k[7:]: v for k, v in counts.items() if k.startswith("raised ")},
            "fork_ms": round(statistics.median(times) * 1000, 1) if times else None}


def agentlog_commit() -> str | None:
    """The commit of the checkout the imported ``agentlog`` comes from (the tree measured,
    which ``PYTHONPATH`` may point elsewhere); ``None`` outside a git checkout."""
    import agentlog

    where = Path(agentlog.__file__).resolve().parent
    done = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--recordings", type=int, default=30, help="runs recorded a seed")
    parser.add_argument("--forks", type=int, default=3, help="forks of each recorded run")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--quick", action="store_true", help="one seed, 5 recordings")
    args = parser.parse_args()
    seeds, recordings = (1, 5) if args.quick else (args.seeds, args.recordings)
    figures: dict[str, Any] = {"bench": "forks", "quick": args.quick, "seeds": seeds, "recordings": recordings,
                               "forks_each": args.forks, "agentlog_commit": agentlog_commit()}
    for shape in args.shapes.split(","):
        if shape not in SHAPES + EXTRA_SHAPES:
            parser.error(f"--shapes: {shape!r} is not one of {', '.join(SHAPES + EXTRA_SHAPES)}")
        figures[shape] = (fan_out_counts(seeds, recordings) if shape == "fan_out_edit"
                          else shape_counts(shape, seeds, recordings, args.forks))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
