"""``al.diff(run_a, run_b)``: where two runs part, what happened after, and what it changed.

1. **The shared prefix.** Runs related by forking share their first events by construction:
   ``run.json`` records each fork's parent and fork seq, so the common prefix of a fork and
   its parent (or of two forks of one parent, at any depth) is known without reading it. The
   hashes at its last seq are compared to confirm it (a chain hash covers every event before
   it), then the hash columns after it are compared, vectorised, to find the first seq where
   the runs differ. For unrelated runs the hash columns are compared from seq 0.
2. **The events after it** are aligned by signature (:mod:`agentlog.analysis.align`).
   Aligned pairs whose payloads are equal, apart from the fields that are bookkeeping of
   where an event was served from (:data:`IGNORED`), are *matched*, or *moved* when the
   same step stands elsewhere in the other run (calls made side by side that a fork
   finished in another order); the rest *changed*, with a summary of what changed.
3. **The state patch** is ``diff_states`` of the two final states. Both are folded from the
   state at the end of the shared prefix, so they share structure and the patch costs what
   changed. It is computed on first use (folding a long run takes time).
4. **Graph changes**: objects and relations added, removed or changed between the final
   states (provenance ignored: it names seqs, which shift).
5. **The usage delta**: events, calls, tokens, cost and duration of each run and b - a.

All the work on events after the prefix is vectorised or linear in the number of events
after it; the prefix itself is never walked.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..accessors import Extensible
from ..chain import GENESIS
from ..events import SPAN_STARTED, LLMRequest, LLMResponse, SpanStarted, ToolCall
from . import columns as C
from ._duck import query
from .align import Sig, Step, align
from .queries import field
from .tables import event_table, summary

if TYPE_CHECKING:
    from ..folding.patch import Patch
    from ..store.run import Run

__all__ = ["DIFFERS", "IGNORED", "RunDiff", "diff"]

#: Payload fields left out when deciding whether two aligned events are the same: they record
#: how an event came about, not what it says (the idempotency key and span ids derive from
#: seqs, which shift when a fork inserts ``fork.started``).
IGNORED: Final = frozenset({ToolCall.K.idempotency_key, LLMResponse.K.served_from_seq,
                            LLMResponse.K.cache_hit, LLMResponse.K.cost_source})
#: Per type, more such fields.
IGNORED_BY_TYPE: Final = {SPAN_STARTED: frozenset({SpanStarted.K.parent})}
#: The payload fields that name an event in its signature, first found first: a span's or
#: tool's ``name``, else a call's cache ``key``, else a response's ``id``.
_NAMED_BY: Final = (field(ToolCall, ToolCall.K.name), field(ToolCall, ToolCall.K.key),
                    field(LLMResponse, LLMResponse.K.id))
_KEY: Final = LLMRequest.K.key

_SUMMARY_OPS: Final = 2
_STATUSES: Final = ("matched", "moved", "changed", "only_a", "only_b")
#: The statuses of events that differ (a moved event is the same event elsewhere).
DIFFERS: Final = ("changed", "only_a", "only_b")


def _lineage(run: Run) -> dict[str, int]:
    """``{run id: last seq shared with run}`` for the run and each of its ancestors, from the
    fork records in ``run.json`` (nothing is read but ``run.json``)."""
    hi = len(run) - 1
    found = {run.id: hi}
    cur: Run | None = run
    while cur is not None and cur.fork_seq is not None:
        hi = min(hi, cur.fork_seq)
        try:
            cur = cur.parent
        except LookupError:  # the parent left the store: the lineage ends here
            break
        if cur is None or cur.id in found:
            break
        found[cur.id] = hi
    return found


def _hash_at(table: pa.Table, seq: int) -> str:
    return GENESIS if seq < 0 else str(table.column("hash")[seq].as_py())


def _first_difference(ha: pa.ChunkedArray, hb: pa.ChunkedArray) -> int:
    """Index of the first position where two hash columns differ (their common length if none)."""
    n = min(len(ha), len(hb))
    if n == 0:
        return 0
    same = pc.equal(ha.slice(0, n), hb.slice(0, n)).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(~same)
    return int(bad[0]) if len(bad) else n


def _shared_prefix(a: Run, b: Run, ta: pa.Table, tb: pa.Table) -> tuple[int, str]:
    """``(number of shared events, how it was found)``."""
    known, how = 0, "hash"
    same_store = a.store.path == b.store.path  # run ids name the same runs only in one store
    la, lb = (_lineage(a), _lineage(b)) if same_store else ({}, {})
    common = set(la) & set(lb)
    if common:
        best = max(min(la[c], lb[c]) for c in common)
        if best >= 0 and best < min(ta.num_rows, tb.num_rows) and \
                _hash_at(ta, best) == _hash_at(tb, best):
            known, how = best + 1, "lineage"
    rest = _first_difference(ta.column("hash").slice(known), tb.column("hash").slice(known))
    return known + rest, how


_SIG_SQL: Final = f"""
SELECT seq, type, actor, coalesce({", ".join(_NAMED_BY)}) AS name, payload
FROM t ORDER BY seq
"""


def _tail(table: pa.Table, start: int) -> dict[str, list[Any]]:
    out = query(_SIG_SQL, {"t": table.slice(start)})
    return {name: out.column(name).to_pylist() for name in out.column_names}


def _content(type_: str, payload: str) -> Any:
    value = json.loads(payload)
    if isinstance(value, dict):
        drop = IGNORED | IGNORED_BY_TYPE.get(type_, frozenset())
        value = {k: v for k, v in value.items() if k not in drop}
    return value


def _change_summary(type_: str, pa_: str, pb: str) -> str:
    from ..folding import diff_states, freeze
    changes = diff_states(freeze(_content(type_, pa_)), freeze(_content(type_, pb))).changes
    if len(changes) > 1:  # a request's key changes with anything else in it: say what else did
        changes = tuple(c for c in changes if c.op.get("path") != f"/{_KEY}")
    from ..folding.patch import Patch
    ops = changes
    lines = str(Patch(changes[:_SUMMARY_OPS])).splitlines()
    more = len(ops) - _SUMMARY_OPS
    return "; ".join(lines) + (f" (+{more} more)" if more > 0 else "")


def _describe(type_: str, payload: str) -> str:
    from ..folding.values import short
    value = _content(type_, payload)
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != _KEY}
    return short(value, 100)


#: The metrics of :attr:`RunDiff.usage`: columns of ``run.summary()``.
USAGE_METRICS: Final = ("events", "llm_calls", "tool_calls", "input_tokens", "output_tokens",
                        "cached_tokens", "cost_usd", "cost_unknown_calls", "duration_ms")


def _usage(run: Run) -> pd.Series:
    """The run's :data:`USAGE_METRICS` from ``run.summary()`` (one engine for every cost):
    nullable floats, the cost <NA> when every cost is unknown."""
    row = summary(run).iloc[0]
    values = [row[m] for m in USAGE_METRICS]
    return pd.Series(pd.array([None if pd.isna(v) else float(v) for v in values], dtype="Float64"),
                     index=list(USAGE_METRICS))


class RunDiff(Extensible):
    """How two runs differ; made by :func:`diff`. See the module docstring for the method.

    Attributes:
        a, b: the two runs.
        prefix: how many events they share (seqs ``0..prefix-1`` have equal hashes).
        divergence: the first seq where they differ, or ``None`` if they are the same run.
        prefix_from: ``lineage`` (fork records, confirmed by hash) or ``hash`` (compared).
        counts: aligned events after the prefix, per status.
    """

    _accessor_owner = "RunDiff"

    def __init__(self, a: Run, b: Run, *, prefix: int, prefix_from: str, rows: pa.Table,
                 usage: pd.DataFrame, reducers: Any = None,
                 pending: dict[int, tuple[str, str, str]] | None = None) -> None:
        self.a, self.b = a, b
        self.prefix = prefix
        self.prefix_from = prefix_from
        self._rows = rows
        # changed rows whose summary is not written yet: row -> (type, payload a, payload b)
        self._pending = dict(pending or {})
        self._summaries: dict[int, str] = {}
        self._usage = usage
        self._reducers = reducers
        statuses = Counter(rows.column("status").to_pylist())
        self.counts: dict[str, int] = {s: statuses.get(s, 0) for s in _STATUSES}
        same = sum(self.counts[s] for s in _STATUSES if s != "matched") == 0
        self.divergence: int | None = None if same else prefix

    def after_text(self, a: str = "a", b: str = "b", *, matched: bool = True) -> str:
        """The aligned events after the shared prefix, counted in words: "11 matched, 3 moved,
        2 changed, 1 only in a, 0 only in b" (moved only when there are some; matched left
        out with ``matched=False``); ``a`` and ``b``: what to call the runs."""
        c = self.counts
        same = f"{c['matched']:,} matched, " if matched else ""
        moved = f"{c['moved']:,} moved, " if c["moved"] else ""
        return (f"{same}{moved}{c['changed']:,} changed, {c['only_a']:,} only in {a}, "
                f"{c['only_b']:,} only in {b}")

    @property
    def same(self) -> bool:
        """True if the runs hold the same events."""
        return self.divergence is None

    def table(self) -> pd.DataFrame:
        """One row per aligned pair of events after the shared prefix (see
        :data:`~agentlog.analysis.columns.DIFF`)."""
        return C.to_frame(self._complete_rows(), C.DIFF)

    def columns(self, *names: str) -> dict[str, list[Any]]:
        """Columns of the aligned rows as lists, without writing the change summaries (cheap
        for views that show a window of rows; see :meth:`summary`)."""
        return {name: self._rows.column(name).to_pylist() for name in names}

    def summary(self, row: int) -> str:
        """The change summary of aligned row ``row`` ("" for matched rows), written on first
        use: runs that differ everywhere have one per row, and a view shows only a window."""
        if row in self._summaries:
            return self._summaries[row]
        pending = self._pending.pop(row, None)
        if pending is not None:
            self._summaries[row] = _change_summary(*pending)
            return self._summaries[row]
        return str(self._rows.column("summary")[row].as_py() or "")

    def _complete_rows(self) -> pa.Table:
        for row in list(self._pending):
            self.summary(row)
        if self._summaries:
            values = self._rows.column("summary").to_pylist()
            for row, text in self._summaries.items():
                values[row] = text
            index = self._rows.schema.get_field_index("summary")
            self._rows = self._rows.set_column(index, "summary", pa.array(values, pa.string()))
            self._summaries.clear()
        return self._rows

    @property
    def usage(self) -> pd.DataFrame:
        """Per metric (index): the value for ``a``, for ``b``, and ``delta`` = b - a. Metrics:
        events, llm_calls, tool_calls, input/output/cached tokens, cost_usd,
        cost_unknown_calls, duration_ms (first to last event)."""
        return self._usage.copy(deep=False)

    @functools.cached_property
    def _final_states(self) -> tuple[Any, Any]:
        from ..folding import fold
        a, b, r = self.a, self.b, self._reducers
        if self.prefix == 0:
            return a.state_at(len(a) - 1, reducers=r), b.state_at(len(b) - 1, reducers=r)
        base = a.state_at(self.prefix - 1, reducers=r)
        final_a = a.state_at(len(a) - 1, reducers=r)
        final_b = fold(b.iter_events(self.prefix), reducers=r, initial=base)
        return final_a, final_b

    @functools.cached_property
    def state_patch(self) -> Patch:
        """``diff_states(final state of a, final state of b)``: applying it to a's gives b's."""
        from ..folding import diff_states
        sa, sb = self._final_states
        return diff_states(sa, sb)

    @functools.cached_property
    def graph(self) -> pd.DataFrame:
        """Objects and relations ``added``, ``removed`` or ``changed`` from a's final state to
        b's: columns ``what`` (object / relation), ``id``, ``change``, ``detail``."""
        from ..folding import diff_states, thaw
        sa, sb = self._final_states
        rows: list[tuple[str, str, str, str]] = []
        for what, key in (("object", "objects"), ("relation", "relations")):
            ga, gb = sa.get(key) or {}, sb.get(key) or {}
            for ident in sorted(set(ga) | set(gb), key=str):
                va, vb = ga.get(ident), gb.get(ident)
                if va is None:
                    rows.append((what, str(ident), "added", _short_item(vb)))
                elif vb is None:
                    rows.append((what, str(ident), "removed", _short_item(va)))
                else:
                    strip_a, strip_b = _no_provenance(va), _no_provenance(vb)
                    if thaw(strip_a) != thaw(strip_b):
                        patch = diff_states(strip_a, strip_b)
                        rows.append((what, str(ident), "changed", "; ".join(str(patch).splitlines()[:3])))
        spec = [C.Column(n, pa.string(), "") for n in ("what", "id", "change", "detail")]
        cols: list[Sequence[str]] = [list(c) for c in zip(*rows, strict=True)] if rows else [[], [], [], []]
        return C.to_frame({s.name: pa.array(c, pa.string()) for s, c in zip(spec, cols, strict=True)}, spec)

    # --- display ---------------------------------------------------------------------------

    def _label(self, run: Run) -> str:
        return f"{run.id}" + (f" ({run.name})" if run.name else "")

    def __repr__(self) -> str:
        if self.same:
            return f"<RunDiff {self.a.id} = {self.b.id}: the same {self.prefix:,} events>"
        return (f"<RunDiff {self.a.id} → {self.b.id}: {self.prefix:,} shared, diverge at seq "
                f"{self.divergence}; {self.after_text(matched=False)}>")

    def __str__(self) -> str:
        from ..numbers import fmt_usd

        lines = [f"a: {self._label(self.a)}, {len(self.a):,} events",
                 f"b: {self._label(self.b)}, {len(self.b):,} events"]
        if self.same:
            lines.append(f"the same {self.prefix:,} events")
            return "\n".join(lines)
        c = self.counts
        lines.append(f"shared prefix: {self.prefix:,} events (by {self.prefix_from}); "
                     f"first divergence at seq {self.divergence}")
        lines.append(f"after it: {self.after_text()}")
        d = self._usage["delta"]
        cost = "cost unknown" if pd.isna(d["cost_usd"]) else fmt_usd(d["cost_usd"], sign=True)
        lines.append(f"usage b - a: {d['input_tokens']:+,.0f} input tokens, "
                     f"{d['output_tokens']:+,.0f} output tokens, {cost}, "
                     f"{d['llm_calls']:+,.0f} llm calls, {d['tool_calls']:+,.0f} tool calls")
        cols = self.columns("status", "seq_a", "seq_b", "type")
        shown = [i for i, status in enumerate(cols["status"]) if status in DIFFERS][:20]
        for i in shown:
            sa = "-" if cols["seq_a"][i] is None else cols["seq_a"][i]
            sb = "-" if cols["seq_b"][i] is None else cols["seq_b"][i]
            lines.append(f"  {cols['status'][i]:<8} {sa!s:>6} {sb!s:>6}  {cols['type'][i]}  "
                         f"{self.summary(i)}")
        hidden = sum(c[s] for s in DIFFERS) - len(shown)
        if hidden > 0:
            lines.append(f"  … {hidden:,} more")
        return "\n".join(lines)

    if TYPE_CHECKING:  # pragma: no cover - registered from above (agentlog.widgets.html)
        def _repr_html_(self) -> str | None: ...


def _no_provenance(value: Any) -> Any:
    return value.discard("provenance") if hasattr(value, "discard") else value


def _short_item(value: Any) -> str:
    from ..folding.values import short
    return short(_no_provenance(value), 100)


#: Pairs of one signature paired again by likeness at most (a group costs its size squared).
LIKENESS_GROUP: Final = 24


def _same_content(ea: dict[str, list[Any]], eb: dict[str, list[Any]], i: int, j: int) -> bool:
    pa_, pb = ea["payload"][i], eb["payload"][j]
    return bool(pa_ == pb or _content(ea["type"][i], pa_) == _content(eb["type"][j], pb))


def _by_likeness(steps: list[Step], sig_a: Sequence[Sig], ea: dict[str, list[Any]],
                 eb: dict[str, list[Any]], same: Callable[[int, int], bool]) -> list[Step]:
    """``steps`` with the pairs of one signature whose contents differ paired again, the most
    alike first (fewest changes between them), when the runs made some steps in another order
    (there are moved steps): spans of one name opened side by side, each with its own input,
    are paired in the order they came, which a fork may change (a LangGraph node's span for
    one topic against the other run's for another). A pair whose partner changed is
    ``moved``. A group is left in order when the new pairs keep the order (a step inserted
    before a loop's steps that differ by a counter: they are the same steps, shifted) or when
    it has over :data:`LIKENESS_GROUP` pairs."""
    from ..folding import diff_states, freeze

    if not any(status == "moved" for status, _, _ in steps):
        return steps
    groups: dict[Sig, dict[int, tuple[int, int]]] = {}  # signature -> {step: (i, j)}
    for n, (status, i, j) in enumerate(steps):
        if status in ("same", "moved") and i is not None and j is not None and not same(i, j):
            groups.setdefault(sig_a[i], {})[n] = (i, j)
    out = list(steps)
    for pairs in groups.values():
        if not 2 <= len(pairs) <= LIKENESS_GROUP:
            continue
        values_a = {n: freeze(_content(ea["type"][i], ea["payload"][i])) for n, (i, _) in pairs.items()}
        values_b = {n: freeze(_content(eb["type"][j], eb["payload"][j])) for n, (_, j) in pairs.items()}
        costs = sorted((len(diff_states(values_a[n], values_b[m]).changes), n != m, n, m)
                       for n in pairs for m in pairs)  # the pair as aligned first, of equal likeness
        taken_a: set[int] = set()
        taken_b: set[int] = set()
        partner: dict[int, int] = {}
        for _, _, n, m in costs:
            if n not in taken_a and m not in taken_b:
                taken_a.add(n)
                taken_b.add(m)
                partner[n] = m
        new = sorted((pairs[n][0], pairs[m][1]) for n, m in partner.items() if m != n)
        if any(j1 > j2 for (_, j1), (_, j2) in itertools.pairwise(new)):  # another order, not a shift
            for n, m in partner.items():
                if m != n:
                    out[n] = ("moved", pairs[n][0], pairs[m][1])
    return out


def diff(run_a: Run, run_b: Run, *, reducers: Any = None) -> RunDiff:
    """Compare two runs: shared prefix, first divergence, aligned events after it, state patch,
    graph changes and usage delta (see :mod:`agentlog.analysis.rundiff`).

    Args:
        run_a: the first run (e.g. the parent).
        run_b: the second (e.g. a fork of it).
        reducers: the reducer set for the states (default: the default projection).

    Returns:
        A :class:`RunDiff`; ``.table()`` lists the aligned events, ``.state_patch`` the patch.
    """
    ta, tb = event_table(run_a), event_table(run_b)
    prefix, how = _shared_prefix(run_a, run_b, ta, tb)
    ea, eb = _tail(ta, prefix), _tail(tb, prefix)
    sig_a = list(zip(ea["type"], ea["actor"], ea["name"], strict=True))
    sig_b = list(zip(eb["type"], eb["actor"], eb["name"], strict=True))
    status: list[str] = []
    seq_a: list[int | None] = []
    seq_b: list[int | None] = []
    types: list[str] = []
    actors: list[str | None] = []
    names: list[str | None] = []
    summaries: list[str | None] = []
    pending: dict[int, tuple[str, str, str]] = {}
    same = functools.cache(functools.partial(_same_content, ea, eb))  # asked twice of a pair when steps moved
    for step, i, j in _by_likeness(align(sig_a, sig_b), sig_a, ea, eb, same):
        side, k = (ea, i) if i is not None else (eb, j)
        assert k is not None
        if step == "only_a" or step == "only_b":
            summary = _describe(side["type"][k], side["payload"][k])
        else:
            assert i is not None and j is not None
            if step in ("same", "moved") and same(i, j):
                step, summary = "matched" if step == "same" else "moved", ""
            else:  # the summary is written when someone asks (RunDiff.summary)
                step, summary = "changed", None
                pending[len(status)] = (ea["type"][i], ea["payload"][i], eb["payload"][j])
        status.append(step)
        seq_a.append(None if i is None else ea["seq"][i])
        seq_b.append(None if j is None else eb["seq"][j])
        types.append(side["type"][k])
        actors.append(side["actor"][k])
        names.append(side["name"][k])
        summaries.append(summary)
    rows = pa.table({"status": pa.array(status, pa.string()), "seq_a": pa.array(seq_a, pa.int64()),
                     "seq_b": pa.array(seq_b, pa.int64()), "type": pa.array(types, pa.string()),
                     "actor": pa.array(actors, pa.string()), "name": pa.array(names, pa.string()),
                     "summary": pa.array(summaries, pa.string())})
    usage = pd.DataFrame({"a": _usage(run_a), "b": _usage(run_b)})
    usage["delta"] = usage["b"] - usage["a"]
    usage.index.name = "metric"
    return RunDiff(run_a, run_b, prefix=prefix, prefix_from=how, rows=rows, usage=usage,
                   reducers=reducers, pending=pending)

