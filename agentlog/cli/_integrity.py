"""Commands that mend and prove: ``repair``."""

from __future__ import annotations

from pathlib import Path

import click

from ._app import cli
from ._util import echo_json, options

__all__: list[str] = []

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


@cli.command("repair")
@click.argument("run")
@JSON_OPTION
def repair_command(run: str, as_json: bool) -> None:
    """Rebuild RUN's lost or damaged run.json from its segments and WAL.

    RUN is the exact run id (or the run folder). The count, head, fork parent and times come
    from the events; what only run.json knew (name, tags, writer settings, how a closed run
    ended) is marked unknown unless the damaged file still holds it; that file is kept as
    run.json.damaged-<n>. A run whose run.json is fine is left alone.
    """
    from ..store.meta import run_id_of
    from ..store.store import Store

    folder = Path(run).expanduser()
    rid = run_id_of(folder.name) if folder.is_dir() else None
    store = options.store() if rid is None else Store(folder.resolve().parent.parent)
    report = store.repair(rid or run)
    if as_json:
        parent = None if report.parent is None else {"run_id": report.parent[0], "seq": report.parent[1]}
        echo_json({"run_id": report.run_id, "repaired": report.repaired, "events": report.events,
                   "head": report.head, "status": report.status, "parent": parent,
                   "unknown": list(report.unknown), "inferred": list(report.inferred),
                   "kept": report.kept})
        return
    click.echo(str(report))
