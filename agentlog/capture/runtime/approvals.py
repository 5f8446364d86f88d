"""Decisions: ``al.approve`` / ``al.deny`` append a person's decision to a stopped run, from
any process, any time later; ``al.resume`` then goes on (a granted gated tool call runs, a
denied one never does: the agent reads the decision in ``state["approvals"]["decided"]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import ApprovalError
from ...events import ApprovalDenied, ApprovalGranted, Event
from ...folding import Reducers
from .start import open_run

__all__ = ["approve", "deny"]


def _decide(decision: type[ApprovalGranted | ApprovalDenied], run_or_id: Any, request_seq: int,
            by: str, note: str, store: Any, clock: Callable[[], float] | None) -> Event:
    if isinstance(request_seq, bool) or not isinstance(request_seq, int):
        raise TypeError(f"request_seq must be the int seq of an approval.requested event, got {request_seq!r}")
    if not isinstance(by, str) or not by:
        raise TypeError(f"by must name who decides (a non-empty str), got {by!r}")
    run = open_run(run_or_id, store)
    before = run.status
    writer = run.store.writer(run.id, clock=clock)
    try:
        current = writer.run
        approvals = current.state_at(len(current) - 1, reducers=Reducers.standard())["approvals"]
        key = str(request_seq)
        done = approvals["decided"].get(key)
        if done is not None:
            raise ApprovalError(run.id, request_seq, f"it was already {done['decision']} by "
                                f"{done['by']} (seq {done['decision_seq']})")
        if key not in approvals["pending"]:
            waiting = ", ".join(sorted(approvals["pending"], key=int)) or "none"
            raise ApprovalError(run.id, request_seq, "no approval request waits at that seq "
                                f"(waiting: {waiting})")
        event: Event = writer.emit(decision(request=request_seq, by=by, note=note),
                                   actor=by, caused_by=request_seq)
        left = len(approvals["pending"]) - 1
    except BaseException:
        writer.close(status=before)
        raise
    # "ready": decided, and al.resume goes on from here.
    writer.close(status="waiting" if left else "ready")
    return event


def approve(run_or_id: Any, request_seq: int, by: str, note: str = "", *, store: Any = None,
            clock: Callable[[], float] | None = None) -> Event:
    """Grant a waiting approval request; ``al.resume`` then runs the gated action.

    Works from any process, any time later: it appends ``approval.granted`` (``{"request",
    "by", "note"}``) to the run through its own writer.

    Args:
        run_or_id: a :class:`~agentlog.Run` or a run id.
        request_seq: the seq of the ``approval.requested`` event
            (``state["approvals"]["pending"]`` lists them).
        by: who decides.
        note: why, for the agent and the audit trail.

    Returns:
        The appended event. The run is closed with status ``ready`` (``waiting`` while other
        requests still wait).

    Raises:
        ApprovalError: no request waits at that seq, or it was decided already.
        RunLockedError: the run is being written (it is not stopped).
    """
    return _decide(ApprovalGranted, run_or_id, request_seq, by, note, store, clock)


def deny(run_or_id: Any, request_seq: int, by: str, note: str = "", *, store: Any = None,
         clock: Callable[[], float] | None = None) -> Event:
    """Deny a waiting approval request: the gated action never runs; the agent sees the denial.

    The same as :func:`approve`, appending ``approval.denied``.
    """
    return _decide(ApprovalDenied, run_or_id, request_seq, by, note, store, clock)
