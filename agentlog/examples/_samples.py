"""The bundled sample runs: how each one was made, with fixed run ids and clocks, so that
recording them again gives the same bytes.

=======================  ==========================================================================
``sre-0001``             waits for approval of the restart → approved → resumed → finished
``sre-0001-calm``        fork of ``sre-0001`` at the orders-db CPU reading, edited to 35%: no restart
``sre-0002``             the same incident, left ``waiting``: approve it yourself (in a copy)
``refunds-0001``         €47.90 refunded; €840 waits → denied by j.keller → resumed; €34.50 refunded
``refunds-0001-approve`` fork of ``refunds-0001`` before the approval → waiting → approved → refunded
``refunds-0002-tight``   the same queue with ``Budget(max_llm_calls=5)``: ``budget_exceeded``
``diligence-0001``       companies → questions → documents → claims → a contradiction → risks → memos
``jobhunt-0001``         three scans of three career pages (nine fetches, four page blobs), three applications
=======================  ==========================================================================
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..capture.fork import fork, replace_response
from ..capture.runtime import Budget, approve, deny, resume
from ..events import ApprovalRequested, Body, SpanStarted, ToolResult
from ..store import Store
from . import parts, program, run_example
from ._scripted import SAMPLE_T0, SampleClock

__all__ = ["record_samples"]


def _seq(run: Any, kind: type[Body], **fields: Any) -> int:
    """The seq of the first event of ``kind`` whose fields have these values."""
    return int(next(e.seq for e in run.iter_events()
                    if e.type == kind.TYPE and all(getattr(kind.of(e), k) == v for k, v in fields.items())))


def _fast(example: str, store: Store, run_id: str, clock: SampleClock, **kw: Any) -> Any:
    return run_example(example, store=store, run_id=run_id, clock=clock, durability="none", **kw)


def _sre(store: Store) -> None:
    clock = SampleClock(SAMPLE_T0 + 60)
    run = _fast("sre", store, "sre-0001", clock)
    clock.advance(420)  # seven minutes later, the on-call looks at the request
    approve(run, _seq(run, ApprovalRequested), "dana@oncall",
            "matches runbook orders-error-spike; go", store=store, clock=clock)
    clock.advance(35)
    run = resume(run, **parts("sre", clock), clock=clock, durability="none")
    cpu = _seq(run, ToolResult, name="query_metric", result={"service": "orders-db", "metric": "cpu",
                                                               "value": 0.93})
    fork(run, at=run.event(cpu).caused_by - 1, program=program("sre", clock), run_id="sre-0001-calm",
         name="sre example, calm database", tags={"example": "sre", "model": "scripted stand-in for gpt-4o-mini"}, clock=clock,
         edit=replace_response(cpu, {"result": {"service": "orders-db", "metric": "cpu", "value": 0.35}}))
    _fast("sre", store, "sre-0002", SampleClock(SAMPLE_T0 + 3600))


def _refunds(store: Store) -> None:
    clock = SampleClock(SAMPLE_T0 + 2 * 3600)
    run = _fast("refunds", store, "refunds-0001", clock)
    request = _seq(run, ApprovalRequested)
    clock.advance(1800)
    deny(run, request, "j.keller", "signed delivery + 3 fraud markers; routed to the fraud team",
         store=store, clock=clock)
    clock.advance(20)
    run = resume(run, **parts("refunds", clock), clock=clock, durability="none")
    step = run.event(request).span_id  # the approval step's span: fork just before it starts
    at = next(e.seq for e in run.iter_events() if e.type == SpanStarted.TYPE and e.span_id == step) - 1
    clock.advance(3600)
    other = fork(run, at=at, program=program("refunds", clock), run_id="refunds-0001-approve",
                 name="refunds example, approved instead", tags={"example": "refunds", "model": "scripted stand-in for claude-3-5-haiku-latest"}, clock=clock)
    clock.advance(300)
    approve(other, _seq(other, ApprovalRequested), "j.keller",
            "customer sent the returned-goods scan; approve", store=store, clock=clock)
    resume(other, **parts("refunds", clock), clock=clock, durability="none")
    _fast("refunds", store, "refunds-0002-tight", SampleClock(SAMPLE_T0 + 4 * 3600),
          budget=Budget(max_llm_calls=5), name="refunds example, tight budget")


def _diligence(store: Store) -> None:
    _fast("diligence", store, "diligence-0001", SampleClock(SAMPLE_T0 + 5 * 3600))


def _jobhunt(store: Store) -> None:
    _fast("jobhunt", store, "jobhunt-0001", SampleClock(SAMPLE_T0 + 6 * 3600))


def record_samples(out: Path) -> Path:
    """Record every sample run into ``out`` (its ``runs/`` and ``blobs/`` are replaced)."""
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("runs", "blobs"):
        shutil.rmtree(out / sub, ignore_errors=True)
    store = Store(out)
    for make in (_sre, _refunds, _diligence, _jobhunt):
        make(store)
    for lock in out.glob("runs/*/.lock"):
        lock.unlink()  # a writer's lock file, empty; the next writer makes its own
    return out
