"""Align two event sequences by their signatures: which events match, changed, or are only in one.

An event's signature is ``(type, actor, name)``, where ``name`` is the payload's ``name``, else
its ``key`` (the request hash of a model call, tool call or HTTP exchange), else its ``id`` (an
object's), else ``None``. Two
events with the same signature are the same step; whether their content differs is decided
later (:mod:`agentlog.analysis.rundiff`).

- Short tails (both at most :data:`DIFFLIB_LIMIT` events) go through
  :class:`difflib.SequenceMatcher` with ``autojunk`` off, which finds the longest matching
  blocks. Inside a block it reports as replaced, events of the same ``(type, actor)`` are
  paired in order as *changed* (a model request whose prompt changed has a new key, but it is
  still the same step), and the rest are only in one run.
- Longer tails use a keyed greedy walk, near-linear: at a mismatch it looks up (by bisection
  in per-signature position lists) where each side's current signature next occurs on the
  other side and skips the shorter way; when neither occurs within :data:`WINDOW` events, the
  two events are paired (same kind) or both reported alone.

Then an event only in ``a`` and one only in ``b`` with the same signature, a name included,
are paired as *moved*: the same step in another place (calls made side by side, finished in
another order by a fork; the n-th such event only in ``a`` pairs with the n-th only in ``b``).
A moved pair stands where its ``a`` event does.

Pure: no I/O.

>>> s = [("a", None, "x"), ("b", None, "y"), ("c", None, "z")]
>>> t = [("a", None, "x"), ("n", None, None), ("b", None, "y"), ("c", None, "w")]
>>> align(s, t)
[('same', 0, 0), ('only_b', None, 1), ('same', 1, 2), ('changed', 2, 3)]
>>> align(s, t, limit=0) == align(s, t)
True
>>> align([("a", None, "x"), ("b", None, "y")], [("b", None, "y"), ("a", None, "x")])
[('same', 0, 1), ('moved', 1, 0)]
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Hashable, Sequence
from typing import Final

__all__ = ["DIFFLIB_LIMIT", "WINDOW", "Step", "align"]

#: Tails up to this many events on both sides are aligned by difflib.
DIFFLIB_LIMIT: Final = 2_000
#: The greedy walk does not skip further than this to find a match.
WINDOW: Final = 1_000

Sig = tuple[Hashable, ...]
Step = tuple[str, int | None, int | None]
"""``(status, index in a, index in b)``; status ``same``, ``changed``, ``moved``, ``only_a`` or
``only_b``."""


def _kind(sig: Sig) -> Sig:
    return sig[:2]


def align(a: Sequence[Sig], b: Sequence[Sig], *, limit: int = DIFFLIB_LIMIT) -> list[Step]:
    """Align ``a`` and ``b`` (lists of signatures); see the module docstring."""
    steps = _difflib(a, b) if len(a) <= limit and len(b) <= limit else _greedy(a, b)
    return _moved(steps, a, b)


def _moved(steps: list[Step], a: Sequence[Sig], b: Sequence[Sig]) -> list[Step]:
    """``steps`` with each event only in ``a`` paired, as ``moved``, with the next event only in
    ``b`` of the same named signature not paired yet; the pair stands where the ``a`` event
    did and the ``b`` event's own step goes."""
    alone_b: dict[Sig, deque[int]] = defaultdict(deque)  # signature -> steps only in b, in order
    for n, (status, _, j) in enumerate(steps):
        if status == "only_b" and j is not None and b[j][2] is not None:
            alone_b[b[j]].append(n)
    if not alone_b:
        return steps
    paired: dict[int, int] = {}  # step only in a -> step only in b
    for n, (status, i, _) in enumerate(steps):
        if status == "only_a" and i is not None and (waiting := alone_b.get(a[i])):
            paired[n] = waiting.popleft()
    if not paired:
        return steps
    taken = set(paired.values())
    return [("moved", i, steps[paired[n]][2]) if n in paired else (status, i, j)
            for n, (status, i, j) in enumerate(steps) if n not in taken]


def _difflib(a: Sequence[Sig], b: Sequence[Sig]) -> list[Step]:
    steps: list[Step] = []
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    # named signatures of the events each side has out of the matching blocks: to be moved
    alone_a = {a[i] for tag, i1, i2, _, _ in opcodes if tag != "equal" for i in range(i1, i2) if a[i][2] is not None}
    alone_b = {b[j] for tag, _, _, j1, j2 in opcodes if tag != "equal" for j in range(j1, j2) if b[j][2] is not None}
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            steps.extend(("same", i, j) for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
        elif tag == "delete":
            steps.extend(("only_a", i, None) for i in range(i1, i2))
        elif tag == "insert":
            steps.extend(("only_b", None, j) for j in range(j1, j2))
        else:
            steps.extend(_pair_block(a, b, range(i1, i2), range(j1, j2), alone_a, alone_b))
    return steps


def _pair_block(a: Sequence[Sig], b: Sequence[Sig], ia: range, jb: range,
                alone_a: set[Sig], alone_b: set[Sig]) -> list[Step]:
    """Pair a replaced block's events of the same (type, actor) in order, but for named events
    whose very signature the other run has out of the matching blocks too (``alone_b`` for an
    event of a, ``alone_a`` for one of b): those are left alone, to be paired as moved (a
    span's end is not another span's end changed)."""
    steps: list[Step] = []
    j, end = jb.start, jb.stop
    for i in ia:
        k = None if a[i] in alone_b else next(
            (k for k in range(j, end) if _kind(b[k]) == _kind(a[i]) and b[k] not in alone_a), None)
        if k is None:
            steps.append(("only_a", i, None))
            continue
        steps.extend(("only_b", None, m) for m in range(j, k))
        steps.append(("changed", i, k))
        j = k + 1
    steps.extend(("only_b", None, m) for m in range(j, end))
    return steps


def _positions(seq: Sequence[Sig]) -> dict[Sig, list[int]]:
    found: dict[Sig, list[int]] = defaultdict(list)
    for i, sig in enumerate(seq):
        found[sig].append(i)
    return found


def _next(positions: dict[Sig, list[int]], sig: Sig, start: int) -> int | None:
    where = positions.get(sig)
    if not where:
        return None
    k = bisect_left(where, start)
    return where[k] if k < len(where) else None


def _greedy(a: Sequence[Sig], b: Sequence[Sig]) -> list[Step]:
    in_a, in_b = _positions(a), _positions(b)
    steps: list[Step] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            steps.append(("same", i, j))
            i, j = i + 1, j + 1
            continue
        kb = _next(in_b, a[i], j)  # where a[i] shows up in b
        ka = _next(in_a, b[j], i)  # where b[j] shows up in a
        skip_b = kb - j if kb is not None and kb - j <= WINDOW else None
        skip_a = ka - i if ka is not None and ka - i <= WINDOW else None
        if skip_b is None and skip_a is None:
            if _kind(a[i]) == _kind(b[j]):
                steps.append(("changed", i, j))
            else:
                steps.extend((("only_a", i, None), ("only_b", None, j)))
            i, j = i + 1, j + 1
        elif skip_a is None or (skip_b is not None and skip_b <= skip_a):
            assert kb is not None
            steps.extend(("only_b", None, m) for m in range(j, kb))
            j = kb
        else:
            assert ka is not None
            steps.extend(("only_a", m, None) for m in range(i, ka))
            i = ka
    steps.extend(("only_a", m, None) for m in range(i, len(a)))
    steps.extend(("only_b", None, m) for m in range(j, len(b)))
    return steps
