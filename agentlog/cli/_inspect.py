"""Commands that read: ``ls``, ``show``, ``verify``, ``diff``, ``cost``, ``gc``."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._app import cli
from ._util import (
    ExitCode,
    echo_json,
    echo_table,
    env_store_path,
    existing_store,
    fail,
    frame_records,
    open_run,
    open_runs,
    options,
    plain,
    progress,
)

if TYPE_CHECKING:
    import pandas as pd

    from ..store.run import Run
    from ..store.store import Store
    from ..store.verify import VerifyReport

__all__ = ["run_records", "runs_table", "verify_id", "verify_json"]

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


def runs_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``agentlog ls`` from ``store.runs()``: short, formatted for people.

    ``paid`` is what each run's own events cost; a fork's ``total incl. inherited prefix`` adds
    the events it shares with its parent (blank for a run that is not a fork)."""
    import pandas as pd

    from ..numbers import PAID, TOTAL, fmt_cost
    from ..widgets.html import cut

    def fork(row: Mapping[str, Any]) -> str:
        return "" if pd.isna(row["parent"]) else f"{row['parent']}@{row['fork_seq']}"

    records = frame.to_dict(orient="records")
    forks = frame["parent"].notna().any()
    out = pd.DataFrame({
        "run": frame["run_id"].astype(str),
        "name": [cut("" if pd.isna(r["name"]) else str(r["name"]), 34) for r in records],
        "status": frame["status"].astype(str),
        "events": frame["events"].astype("int64"),
        "llm": frame["llm_calls"].astype("int64"),
        "tools": frame["tool_calls"].astype("int64"),
        "tokens": (frame["input_tokens"] + frame["output_tokens"]).astype("int64"),
        PAID: [fmt_cost(r["own_cost_usd"], r["own_cost_unknown_calls"]) for r in records],
    })
    if forks:
        out[TOTAL] = ["" if pd.isna(r["parent"]) else fmt_cost(r["cost_usd"], r["cost_unknown_calls"])
                      for r in records]
    out["forked from"] = [fork(r) for r in records]
    out["created"] = [r["created"].strftime("%Y-%m-%d %H:%M") if not pd.isna(r["created"]) else ""
                      for r in records]
    return out


def run_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of ``store.runs()`` or ``run.summary()`` as JSON-ready records, with the tags as
    the object (or list) they are: the table holds them as JSON text."""
    import json

    records = frame_records(frame)
    for r in records:
        if isinstance(r.get("tags"), str):
            r["tags"] = json.loads(r["tags"])
    return records


@cli.command("ls")
@JSON_OPTION
def ls_command(as_json: bool) -> None:
    """List the runs of the store: status, events, calls, tokens, what each paid, lineage."""
    from ..numbers import INCL_PREFIX, PAID, TOTAL
    store = existing_store()
    frame = store.runs()
    if as_json:
        echo_json(run_records(frame))
        return
    if frame.empty:
        click.echo(f"no runs in {store.path} (agentlog demo makes some)")
        return
    echo_table(runs_table(frame))
    if frame["parent"].notna().any():
        click.echo(f"{PAID}: the run's own events (what `agentlog cost` sums); {TOTAL}: a fork's "
                   "paid plus the events it shares with its parent, which the parent paid for; a fork's "
                   f"events, llm, tools and tokens are {INCL_PREFIX} too")
    damaged = frame.loc[frame["status"].isin(["damaged", "unreadable"]), "run_id"].tolist()
    if damaged:
        click.echo(f"{len(damaged)} damaged run{'s' if len(damaged) != 1 else ''} ({', '.join(damaged)}): "
                   "`agentlog verify RUN` says what is wrong, `agentlog repair RUN` rebuilds a lost run.json")


# --- show ----------------------------------------------------------------------------------------


@cli.command("show")
@click.argument("run")
@click.option("--events", "n_events", type=int, default=0, metavar="N",
              help="Also list the first N events (-1: all).")
@click.option("--no-verify", is_flag=True, help="Do not verify the run (reads every event).")
@JSON_OPTION
def show_command(run: str, n_events: int, no_verify: bool, as_json: bool) -> None:
    """Show RUN's summary: name, status, counts, duration, tokens, cost, parent, verify."""
    from ..widgets.html import own_figures, run_text

    r = open_run(run)
    report = None if no_verify else r.verify()
    summary_frame = r.summary()
    summary = run_records(summary_frame)[0]
    from ..analysis.cost import cost
    own_cost = cost(r, ("model",), own=True)
    by_model = own_cost[own_cost["llm_calls"] > 0].sort_values("cost_usd", ascending=False, kind="stable")
    events = _events_frame(r, n_events) if n_events else None
    if as_json:
        out: dict[str, Any] = {"summary": summary, "cost_by_model": frame_records(by_model),
                               "verify": None if report is None else verify_json(report)}
        if events is not None:
            out["events"] = frame_records(events)
        echo_json(out)
        return
    click.echo(run_text(summary_frame.to_dict(orient="records")[0], own_figures(r, own_cost)))
    if report is not None and not report.ok:
        click.echo(str(report))
    if not by_model.empty:
        click.echo("\npaid by model" + (" (own events)" if r.fork_seq is not None else "") + ":")
        cols = ["model", "llm_calls", "input_tokens", "output_tokens", "cached_tokens", "cost_usd",
                "cost_unknown_calls"]
        echo_table(_cost_text(by_model[cols]))
    if events is not None:
        click.echo(f"\nevents ({len(events):,} of {len(r):,}):")
        echo_table(events)


def _events_frame(run: Run, n: int) -> pd.DataFrame:
    import pandas as pd

    from ..widgets.html import cut
    table = run.table()
    if n >= 0:
        table = table.slice(0, n)
    cols = {name: table.column(name).to_pylist() for name in ("seq", "type", "actor", "span_id", "payload")}
    return pd.DataFrame({"seq": cols["seq"], "type": [str(t) for t in cols["type"]],
                         "actor": [a or "" for a in cols["actor"]],
                         "span": [s or "" for s in cols["span_id"]],
                         "payload": [cut(p, 80) for p in cols["payload"]]})


# --- verify --------------------------------------------------------------------------------------


def verify_id(store: Store, run_id: str) -> VerifyReport:
    """Verify the run ``run_id`` of ``store``; a run that cannot be opened (its ``run.json`` is
    damaged, its schema is newer) gets a report of that problem instead of stopping the caller."""
    from ..errors import StoreError
    from ..store.verify import unreadable_report

    try:
        return store.run(run_id, exact=True).verify()
    except StoreError as exc:
        return unreadable_report(run_id, exc)


def verify_json(report: VerifyReport) -> dict[str, Any]:
    """A verify report as JSON-ready data."""
    return {"run_id": report.run_id, "ok": report.ok, "events": report.events, "head": report.head,
            "first_bad_seq": report.first_bad_seq,
            "problems": [{"seq": p.seq, "kind": str(p.kind), "message": p.message}
                         for p in report.problems]}


@cli.command("verify")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option("--all", "all_runs", is_flag=True,
              help="Verify every run of the store (or of the store URL given: agentlog verify --all s3://b/p).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Runs verified at once with --all (default: 8 for a remote store, else 1).")
@click.option("--expect-head", metavar="HEAD",
              help="A head kept elsewhere: a signed head file (agentlog sign), or the head hash "
                   "(at least 8 hex digits); one RUN only.")
@click.option("--public-key", metavar="KEY",
              help="With a signed head: require it to be signed by this key (PEM file or base64).")
@JSON_OPTION
def verify_command(runs: Sequence[str], all_runs: bool, jobs: int | None, expect_head: str | None,
                   public_key: str | None, as_json: bool) -> None:
    """Check the hash chain, seqs, payloads, blobs, head and fork prefix of RUNs (or --all).

    Alone, verify detects any change to a closed run's events and any damage; it cannot
    detect a cut tail of a run still open, or a history re-chained with run.json rewritten
    to match. --expect-head with a head kept outside the store detects both.

    Exits 1 if any run has a problem (the first bad seq is named) or RUN does not match
    --expect-head.
    """
    from ..errors import RunDamagedError
    from ..store.fsys import is_url
    from ..store.store import Store
    from ..store.verify import unreadable_report, with_problems
    from ._integrity import public_key_arg, read_head_arg

    url = runs[0] if all_runs and len(runs) == 1 and is_url(runs[0]) else None
    if url is not None:
        runs = ()
    if bool(runs) == all_runs:
        fail(ExitCode.BAD_INPUT, "verify: give one or more RUNs, or --all (optionally with a store URL)")
    signed = None
    if expect_head is not None:
        if len(runs) != 1:
            fail(ExitCode.BAD_INPUT, "verify --expect-head needs exactly one RUN")
        if Path(expect_head).expanduser().is_file():
            signed = read_head_arg(expect_head)
        elif len(expect_head) < 8 or any(c not in "0123456789abcdef" for c in expect_head.lower()):
            fail(ExitCode.BAD_INPUT, f"--expect-head {expect_head!r}: a signed head file, or at least "
                                     "8 hex digits of a head hash")
    if public_key is not None and signed is None:
        fail(ExitCode.BAD_INPUT, "--public-key goes with --expect-head SIGNED_HEAD_FILE")
    store = existing_store(None if url is None else Store(url))
    reports: list[VerifyReport] = []
    if all_runs:
        found = store.verify(progress=not options.quiet and sys.stderr.isatty(), jobs=jobs)
        if not found:
            fail(ExitCode.NOT_FOUND, f"no runs in {store.url}")
        reports.extend(found.values())
    else:
        for ref in progress(list(runs), desc="verify", unit="run"):
            try:
                run = open_run(ref, store)
            except RunDamagedError as exc:  # a damaged run is a finding, not a reason to stop
                reports.append(unreadable_report(exc.run_id, exc))
                continue
            report = run.verify()
            if signed is not None:
                from ..store.heads import check_head
                report = with_problems(report, check_head(run, signed, public_key=public_key_arg(public_key)))
            reports.append(report)
    head_ok = True
    if expect_head is not None and signed is None:
        head_ok = reports[0].head.lower().startswith(expect_head.lower())
    bad = [rep for rep in reports if not rep.ok]
    if as_json:
        out = [verify_json(rep) for rep in reports]
        if expect_head is not None:
            out[0]["expected_head"] = signed.to_json() if signed is not None else expect_head
            out[0]["head_ok"] = head_ok and reports[0].ok if signed is not None else head_ok
        echo_json(out if len(out) != 1 or all_runs else out[0])
    else:
        for rep in reports:
            if expect_head is not None and rep.ok:
                continue  # one line below says both: the chain is intact, and whether the head is
            click.echo(str(rep))
        if signed is not None and reports[0].ok:
            rep = reports[0]
            grown = f", and {rep.events - signed.size:,} events since" if rep.events > signed.size else ""
            click.echo(f"run {rep.run_id}: holds the {signed.size:,} events signed at {signed.signed_at} by "
                       f"key {signed.key_id}{' (pinned)' if public_key else ''}, unchanged{grown}")
        elif expect_head is not None and signed is None:
            rep = reports[0]
            intact = "the chain is intact" if rep.ok else "and the chain has problems (above)"
            if head_ok:
                click.echo(f"run {rep.run_id}: {'ok, ' if rep.ok else ''}{rep.events:,} events, head "
                           f"{rep.head[:12]}… is the expected head")
            else:
                click.echo(f"run {rep.run_id}: head differs from the expected {expect_head}: it is "
                           f"{rep.head} ({rep.events:,} events; {intact})")
        if len(reports) > 1:
            click.echo(f"{len(reports):,} runs: {len(reports) - len(bad):,} ok, {len(bad):,} with problems")
    if bad or not head_ok:
        raise click.exceptions.Exit(int(ExitCode.CHECK_FAILED))


# --- diff ----------------------------------------------------------------------------------------


@cli.command("diff")
@click.argument("run_a")
@click.argument("run_b")
@click.option("--limit", type=int, default=50, show_default=True,
              help="Differing events listed (JSON lists them all).")
@JSON_OPTION
def diff_command(run_a: str, run_b: str, limit: int, as_json: bool) -> None:
    """Compare RUN_A and RUN_B: the first divergence, the events after it, the usage delta.

    Exits 0 if the runs hold the same events, 1 if they differ.
    """
    import pandas as pd

    from ..analysis.rundiff import diff

    store = options.store()
    a, b = open_run(run_a, store), open_run(run_b, store)
    d = diff(a, b)
    if as_json:
        echo_json({"a": a.id, "b": b.id, "same": d.same, "prefix": d.prefix,
                   "prefix_from": d.prefix_from, "divergence": d.divergence, "counts": d.counts,
                   "usage": {str(m): {k: None if pd.isna(v) else float(v) for k, v in row.items()}
                             for m, row in d.usage.iterrows()},
                   "rows": frame_records(d.table())})
    else:
        _print_diff(d, limit)
    if not d.same:
        raise click.exceptions.Exit(int(ExitCode.CHECK_FAILED))


def _print_diff(d: Any, limit: int) -> None:
    import pandas as pd

    from ..analysis.rundiff import DIFFERS
    from ..widgets.html import cut, fmt_num
    label = {"a": d.a, "b": d.b}
    for k, r in label.items():
        click.echo(f"{k}: {r.id}" + (f" ({r.name})" if r.name else "") + f", {len(r):,} events")
    if d.same:
        click.echo(f"the same {d.prefix:,} events")
        return
    click.echo(f"shared prefix: {d.prefix:,} events (by {d.prefix_from}); first divergence at seq "
               f"{d.divergence}")
    click.echo(f"after it: {d.after_text()}")
    click.echo("\nusage:")
    usage = d.usage
    click.echo(pd.DataFrame({"metric": usage.index, "a": [fmt_num(v) for v in usage["a"]],
                             "b": [fmt_num(v) for v in usage["b"]],
                             "b - a": [fmt_num(v, sign=True) for v in usage["delta"]]}).to_string(index=False))
    rows = d.table()
    rows = rows[rows["status"].isin(DIFFERS)]
    if rows.empty:
        return
    shown = rows.head(limit) if limit >= 0 else rows
    moved = d.counts["moved"]
    click.echo(f"\nevents that differ ({len(shown):,} of {len(rows):,}"
               + (f"; the {moved:,} moved are not listed: --json lists every row" if moved else "") + "):")
    click.echo(plain(pd.DataFrame({"status": shown["status"], "seq a": shown["seq_a"], "seq b": shown["seq_b"],
                                   "type": shown["type"], "summary": [cut(str(s), 90) for s in shown["summary"]]}),
                     na="-").to_string(index=False))
    if len(rows) > len(shown):
        click.echo(f"… {len(rows) - len(shown):,} more (--limit -1 lists all)")


# --- cost ----------------------------------------------------------------------------------------

_RUN_KEYS = ("model", "actor", "span", "kind", "type", "day")
_STORE_KEYS = ("run", *_RUN_KEYS)


def _cost_text(frame: pd.DataFrame) -> pd.DataFrame:
    """A cost table for people: the cost column is what was paid, written by ``fmt_cost`` (an
    unknown cost reads ``unknown``, never $0), with calls of unknown cost counted beside it;
    no-model rows that are only tool calls say so."""
    import pandas as pd

    from ..numbers import PAID, fmt_cost
    out = frame.copy()
    out["cost_usd"] = [fmt_cost(v, u) for v, u in zip(frame["cost_usd"], frame["cost_unknown_calls"], strict=True)]
    if "model" in out.columns:
        tools = frame["model"].isna() & (frame["llm_calls"] == 0)
        out["model"] = out["model"].astype(object).where(~tools.to_numpy(), "(tool calls)")
        out["model"] = out["model"].where(pd.notna(out["model"]), "(no model)")
    return out.drop(columns="cost_unknown_calls").rename(columns={"cost_usd": PAID})


def cost_total(frame: pd.DataFrame) -> str:
    """The total line under a cost table: calls, tokens, what was paid and ``+ N unknown``."""
    from ..numbers import PAID, fmt_cost
    total = frame.sum(numeric_only=True)  # sum() leaves unknown (<NA>) costs out
    unknown = int(total["cost_unknown_calls"])
    known = frame["cost_usd"].notna().any() or not unknown
    return (f"total: {int(total['llm_calls']):,} model calls, {int(total['tool_calls']):,} tool "
            f"calls, {int(total['input_tokens']):,} input + {int(total['output_tokens']):,} output "
            f"tokens, {PAID} {fmt_cost(total['cost_usd'] if known else None, unknown)}")


@cli.command("cost")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option("--by", default="model", show_default=True, metavar="KEYS",
              help=f"Comma-separated keys: {', '.join(_STORE_KEYS)}.")
@JSON_OPTION
def cost_command(runs: Sequence[str], by: str, as_json: bool) -> None:
    """Tokens, calls and what was paid, summed by --by, over RUNs or the whole store.

    Each run counts its own events: a fork's prefix was paid by its parent (`agentlog ls` and
    `agentlog show` give a fork's total incl. inherited prefix too).
    """
    keys = [k.strip() for k in by.split(",") if k.strip()]
    bad = [k for k in keys if k not in _STORE_KEYS]
    if not keys or bad:
        fail(ExitCode.BAD_INPUT, f"--by {by!r}: the keys are {', '.join(_STORE_KEYS)}")
    if runs:
        frame = _runs_cost(list(open_runs(runs)), keys)
    else:
        frame = existing_store().cost(by=keys)
    if as_json:
        echo_json(frame_records(frame))
        return
    echo_table(_cost_text(frame), empty=f"no usage in {env_store_path()}")
    if not frame.empty:
        click.echo(cost_total(frame))


def _runs_cost(runs: Sequence[Run], keys: Sequence[str]) -> pd.DataFrame:
    """What each of ``runs`` paid (its own events) by ``keys``, with a ``run_id`` column first (as
    over the store) unless ``keys`` has no ``run`` and there is one run; ``--by run`` alone is one
    row per run."""
    import pandas as pd

    from ..analysis.cost import cost
    per_run = [k for k in keys if k != "run"]
    frames = []
    for r in runs:
        part = cost(r, per_run, own=True)  # by=(): the run is the only key, one row of totals
        part.insert(0, "run_id", r.id)
        frames.append(part)
    frame = pd.concat(frames, ignore_index=True)
    if "run" not in keys and len(runs) == 1:
        frame = frame.drop(columns="run_id")
    return frame


# --- gc ------------------------------------------------------------------------------------------


@cli.command("gc")
@click.option("--apply", is_flag=True, help="Delete (the default is a dry run that only reports).")
@click.option("--min-age", type=float, default=60.0, show_default=True, metavar="SECONDS",
              help="Keep files younger than this (a live writer may be about to use them).")
@JSON_OPTION
def gc_command(apply: bool, min_age: float, as_json: bool) -> None:
    """Find blobs no run references and temp files a crash left; delete them with --apply.

    Never deletes runs; blobs a fork reaches through its parent are kept.
    """
    report = existing_store().gc(apply=apply, min_age=min_age)
    if as_json:
        echo_json({"applied": report.applied, "blobs": report.blobs, "bytes": report.bytes,
                   "digests": list(report.digests), "referenced": report.referenced,
                   "kept_recent": report.kept_recent, "temp_files": report.temp_files,
                   "temp_bytes": report.temp_bytes})
        return
    click.echo(str(report))
    for digest in report.digests[:20]:
        click.echo(f"  {digest}")
    if len(report.digests) > 20:
        click.echo(f"  … {len(report.digests) - 20:,} more")
    if not apply and (report.blobs or report.temp_files):
        click.echo("dry run: nothing deleted; agentlog gc --apply deletes them")
