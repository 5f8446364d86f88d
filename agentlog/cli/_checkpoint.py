"""``agentlog checkpoint``: write fold checkpoints for runs recorded or imported without them."""

from __future__ import annotations

import click

from ._app import cli
from ._util import echo_json, open_runs, progress

__all__: list[str] = []


@cli.command("checkpoint")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--every", type=click.IntRange(min=1), default=12_288, show_default=True,  # checkpoints.EVERY
              help="Events between checkpoints (one is always written at the last event).")
@click.option("--program", metavar="MODULE:CALLABLE",
              help="Fold with this program's reducers (e.g. example:refunds for an agent run); "
                   "default: the standard projection and any @al.reducer registered on import.")
@click.option("--rebuild", is_flag=True, help="Fold from event 0 and replace the checkpoints there are.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
def checkpoint_command(runs: tuple[str, ...], every: int, program: str | None, rebuild: bool,
                       as_json: bool) -> None:
    """Fold each RUN and store its states as checkpoints, so that a new process reads the state
    at any event from the nearest checkpoint instead of from event 0.

    Checkpoints are derived data: they name the seq, the run's hash there and the reducers,
    are checked before use, and deleting them (runs/run_id=<id>/checkpoints/) loses nothing.
    Building again after a run grew folds only the new events.
    """
    from ..folding import Reducers
    from ..store.checkpoints import build_checkpoints, list_checkpoints

    reducers = Reducers.default()
    if program is not None:
        from ._program import load_program
        reducers = getattr(load_program(program), "reducers", None) or reducers
    for run in open_runs(runs):
        with progress(total=len(run), desc=f"checkpoint {run.id}", unit="event") as bar:
            def advance(seq: int, bar: object = bar) -> None:
                bar.n = seq + 1  # type: ignore[attr-defined]
                bar.refresh()  # type: ignore[attr-defined]
            written = build_checkpoints(run, reducers, every=every, rebuild=rebuild, progress=advance)
        ours = [c for c in list_checkpoints(run.path) if c.reducers == reducers.fingerprint()]
        if as_json:
            echo_json({"run_id": run.id, "events": len(run), "written": [p.name for p in written],
                       "checkpoints": [c.seq for c in ours], "reducers": reducers.fingerprint()})
        else:
            seqs = ", ".join(f"{c.seq:,}" for c in ours) or "none"
            click.echo(f"{run.id}: {len(written)} checkpoint{'s' if len(written) != 1 else ''} written; "
                       f"checkpoints at seq {seqs}")
