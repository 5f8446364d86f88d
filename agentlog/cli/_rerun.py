"""Commands that run a program again: ``replay`` and ``fork``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ._app import cli
from ._program import EDIT_HELP, load_edits, load_program
from ._util import CLIError, ExitCode, agentlog_notes, echo_json, fail, open_run, options

__all__: list[str] = []

T = TypeVar("T")

PROGRAM_HELP = ("The program: MODULE:CALLABLE (a callable taking a recorder, or a class or "
                "no-argument factory that returns one), or example:NAME for a bundled example "
                "(sre, refunds, diligence, jobhunt).")


def _run_program(what: str, call: Callable[[], T]) -> T:
    """``call()``; an exception the program raised becomes exit 5, naming the run it was recorded as.

    A model call or tool of the program that failed (:class:`~agentlog.LLMCallError`,
    :class:`~agentlog.ToolError`: the recorder's wrapping of what the program's own call raised,
    or of the failure recorded there) is the program raising too, named with the seq it was
    recorded at."""
    from ..capture.recorder import LLMCallError
    from ..errors import AgentlogError, ToolError

    try:
        return call()
    except LLMCallError as exc:
        raised = f"{exc.error} in its model call at seq {exc.seq}"
        error: BaseException = exc
    except ToolError as exc:
        raised = f"{exc.error} in tool {exc.name!r} at seq {exc.seq}"
        error = exc
    except (AgentlogError, CLIError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - the user's program raised
        raised = f"{type(exc).__name__}: {exc}"
        error = exc
    notes = "; ".join(agentlog_notes(error))
    # from error: --debug shows where in the program it was raised
    raise CLIError(ExitCode.PROGRAM, f"{what}: the program raised {raised}"
                                     + (f" ({notes})" if notes else "")) from error


@cli.command("replay")
@click.argument("run")
@click.option("--program", "spec", required=True, metavar="MODULE:CALLABLE", help=PROGRAM_HELP)
@click.option("--strict/--permissive", default=True, show_default=True,
              help="strict: compare every event with the recorded one, write nothing; permissive: "
                   "serve recorded calls, send new ones out live, record into a new run.")
@click.option("--name", help="The new run's name (permissive).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def replay_command(run: str, spec: str, strict: bool, name: str | None, as_json: bool) -> None:
    """Re-run a program against RUN with every recorded answer served from the log.

    Strict mode exits 1 at the first event that differs, naming the seq, the expected and
    the actual event.
    """
    from ..capture.replay import replay

    r = open_run(run)
    program = load_program(spec)
    mode = "strict" if strict else "permissive"
    result = _run_program(f"replay of run {r.id}",
                          lambda: replay(program, r, mode=mode, name=name))
    _raised_in_replay(r.id, result.divergence)
    if as_json:
        div = result.divergence
        echo_json({"run": r.id, "mode": str(result.mode), "ok": result.ok, "events": result.events,
                   "served": result.served, "live": result.live,
                   "divergence": None if div is None else {"seq": div.seq, "text": str(div)},
                   "new_run": None if result.run is None else result.run.id})
    else:
        click.echo(str(result) if result.divergence is not None else f"run {r.id}: {result}")
    if not result.ok:
        raise click.exceptions.Exit(int(ExitCode.CHECK_FAILED))


def _raised_in_replay(run_id: str, divergence: Any) -> None:
    """A strict replay whose program raised ends in a ``run.failed`` the recorded run does not
    have: that is the program failing (exit 5), not the run being different (exit 1)."""
    from ..events import RUN_FAILED, RunFailed

    actual = None if divergence is None else divergence.actual
    if actual is None or actual.type != RUN_FAILED:
        return
    expected = divergence.expected
    if expected is not None and expected.type == RUN_FAILED:
        return  # the recorded run failed here too: a real difference in how
    failed = RunFailed.of(actual)
    where = f"at seq {divergence.seq}" + (f", where the recorded run has {expected.type}"
                                         if expected is not None else "")
    fail(ExitCode.PROGRAM, f"replay of run {run_id}: the program raised {failed.error} ({where})")


@cli.command("fork", epilog=EDIT_HELP)
@click.argument("run")
@click.option("--at", "at", type=int, required=True, metavar="SEQ",
              help="The last event of RUN the fork keeps (-1: none, to change the inputs).")
@click.option("--program", "spec", required=True, metavar="MODULE:CALLABLE", help=PROGRAM_HELP)
@click.option("--edit", "edit_file", metavar="FILE", help="A JSON edit file (below).")
@click.option("--name", help="The fork's name (default: '<parent name> fork@SEQ').")
@click.option("--run-id", help="The fork's id (default: generated).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def fork_command(run: str, at: int, spec: str, edit_file: str | None, name: str | None,
                 run_id: str | None, as_json: bool) -> None:
    """Fork RUN after seq --at with one thing changed, and run the program on.

    The fork shares RUN's events 0..SEQ (same hashes, not copied); calls the parent already
    made are served from its log, new ones go out live. Prints the new run and where it
    leaves its parent.
    """
    import pandas as pd

    from ..analysis.rundiff import diff
    from ..capture.fork import fork
    from ..errors import RunExistsError

    r = open_run(run)
    if not -1 <= at < len(r):
        fail(ExitCode.NOT_FOUND, f"--at {at}: no such seq in run {r.id} ({len(r):,} events, seq "
                                 f"0..{len(r) - 1}; a fork keeps seq -1..{len(r) - 2})")
    if at == len(r) - 1:
        fail(ExitCode.BAD_INPUT, f"--at {at}: seq {at} is the last event of run {r.id}; a fork keeps "
                                 f"seq -1..{len(r) - 2} (something must remain to re-run)")
    edits = load_edits(edit_file, r, at) if edit_file else []
    program = load_program(spec)
    try:
        new = _run_program(f"fork of run {r.id} at seq {at}",
                           lambda: fork(r, at, program=program, edit=edits, name=name, run_id=run_id))
    except RunExistsError as exc:
        fail(ExitCode.STORE, f"run {exc.run_id!r} already exists in {r.store.path}; give the fork "
                             "another id (--run-id NEW), or leave --run-id out for a new one")
    d = diff(r, new)
    if as_json:
        echo_json({"run_id": new.id, "parent": r.id, "at": at, "status": new.status,
                   "events": len(new), "divergence": d.divergence, "counts": d.counts,
                   "edits": [e.describe() for e in edits]})
        return
    click.echo(f"forked {r.id} at seq {at} into run {new.id} ({new.status}, {len(new):,} events, "
               f"{len(new) - at - 1:,} of its own)")
    if d.same:
        click.echo("it holds the same events as its parent")
    else:
        u = d.usage["delta"]
        click.echo(f"first divergence at seq {d.divergence}: {d.after_text(r.id, 'the fork', matched=False)}; usage "
                   f"{u['input_tokens']:+,.0f} input / {u['output_tokens']:+,.0f} output tokens, "
                   + ("cost unknown" if pd.isna(u["cost_usd"]) else f"${u['cost_usd']:+,.6f}"))
    click.echo(f"see: agentlog diff {r.id} {new.id}" + (f" --store {options.store_path}"
                                                        if options.store_path else ""))
