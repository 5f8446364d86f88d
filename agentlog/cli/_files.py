"""Commands that write files or read them in: ``export``, ``import``, ``report``."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from ._app import cli
from ._util import (
    ExitCode,
    echo_json,
    existing_file,
    fail,
    open_run,
    options,
    output_file,
    progress,
    writing,
)

if TYPE_CHECKING:
    from ..store.run import Run

__all__: list[str] = []

_SUFFIX = {"jsonl": ".jsonl", "otlp": ".otlp.json", "html": ".html"}


@cli.command("export")
@click.argument("run")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "otlp", "html"]), default="jsonl",
              show_default=True, help="jsonl: lossless, imports back with identical hashes; otlp: "
              "an OpenTelemetry trace (GenAI conventions), OTLP/JSON; html: the report.")
@click.option("-o", "--output", metavar="FILE",
              help="Where to write (default: <run id>.jsonl / .otlp.json / .html; '-': stdout).")
@click.option("--blobs", metavar="DIR", help="jsonl: copy blobs to DIR instead of inlining them.")
def export_command(run: str, fmt: str, output: str | None, blobs: str | None) -> None:
    """Write RUN to a file in another format."""
    from ..interop import export_jsonl, export_otlp, write_otlp

    r = open_run(run)
    if blobs is not None and fmt != "jsonl":
        fail(ExitCode.BAD_INPUT, "--blobs applies to --format jsonl only")
    to_stdout = output == "-"
    if to_stdout and fmt == "html":
        fail(ExitCode.BAD_INPUT, "--format html needs a file: -o FILE.html")
    if to_stdout and blobs is not None:
        fail(ExitCode.BAD_INPUT, "--blobs needs a file to export to (-o FILE), not stdout")
    dest = None if to_stdout else output_file(output or f"{r.id}{_SUFFIX[fmt]}")
    with progress(total=1, desc=f"export {fmt}", unit="run") as bar, writing(dest):
        if fmt == "html":
            from ..report import write_report
            assert dest is not None
            write_report(r, dest)
            what = "report"
        elif fmt == "jsonl":
            n = export_jsonl(r, sys.stdout if dest is None else dest, blobs=blobs or "inline")
            what = f"{n:,} events"
        elif dest is None:
            click.echo(json.dumps(export_otlp(r), ensure_ascii=False, separators=(",", ":")))
            what = "trace"
        else:
            n = write_otlp(r, dest)
            what = f"{n:,} spans"
        bar.update()
    if dest is not None:
        click.echo(f"run {r.id}: {what} written to {dest}" + (f" (blobs in {blobs})" if blobs else ""))


@cli.command("import")
@click.argument("file")
@click.option("--format", "fmt", required=True,
              type=click.Choice(["jsonl", "otlp", "activegraph", "drangue"]),
              help="jsonl: an agentlog export; otlp: OTLP/JSON or ConsoleSpanExporter output (a run "
                   "per trace); activegraph: its SQLite store or JSONL trace; drangue: its SQLite store. "
                   "otlp, activegraph and drangue import every run of FILE, and importing a run again "
                   "adds only what is new.")
@click.option("--name", help="The new run's name.")
@click.option("--run", "source_run", metavar="ID",
              help="activegraph / drangue: import only this run of FILE (default: every run).")
@click.option("--run-id", help="jsonl / activegraph / drangue: the new run's id (one run only).")
@click.option("--blobs", metavar="DIR", help="jsonl: the blob folder of an export made with --blobs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def import_command(file: str, fmt: str, name: str | None, source_run: str | None, run_id: str | None,
                   blobs: str | None, as_json: bool) -> None:
    """Read FILE into the store as new runs; every imported run is verified."""
    from .. import interop
    from ..errors import RunExistsError

    path = existing_file(file)
    store = options.store()
    if source_run is not None and fmt not in ("activegraph", "drangue"):
        fail(ExitCode.BAD_INPUT, "--run applies to --format activegraph and drangue")
    if run_id is not None and fmt == "otlp":
        fail(ExitCode.BAD_INPUT, "--run-id does not apply to --format otlp (a run per trace)")
    if blobs is not None and fmt != "jsonl":
        fail(ExitCode.BAD_INPUT, "--blobs applies to --format jsonl only")
    with progress(total=1, desc=f"import {fmt}", unit="file") as bar:
        runs: list[Run]
        try:
            if fmt == "jsonl":
                runs = [interop.import_jsonl(path, store, run_id=run_id, name=name, blobs=blobs)]
            elif fmt == "otlp":
                runs = list(interop.import_otlp(path, store, name=name))
            elif fmt == "activegraph":
                runs = interop.import_activegraph(path, store, run=source_run, run_id=run_id, name=name)
            else:
                runs = interop.import_drangue(path, store, run=source_run, run_id=run_id, name=name)
        except RunExistsError as exc:
            fail(ExitCode.STORE, f"run {exc.run_id!r} already exists in {store.path}; import {file} "
                                 "under another id: --run-id NEW")
        bar.update()
    if not runs:
        fail(ExitCode.BAD_INPUT, f"{file}: no runs to import" if fmt != "otlp" else f"{file}: no traces to import")
    reports = [r.verify() for r in runs]
    if as_json:
        echo_json([{"run_id": r.id, "name": r.name, "events": len(r), "head": r.head,
                    "verified": rep.ok} for r, rep in zip(runs, reports, strict=True)])
    else:
        for r, rep in zip(runs, reports, strict=True):
            state = "verified ok" if rep.ok else f"verify found problems:\n{rep}"
            click.echo(f"imported {file} as run {r.id} ({len(r):,} events, head {r.head[:12]}…), {state}")
    if not all(rep.ok for rep in reports):
        raise click.exceptions.Exit(int(ExitCode.CHECK_FAILED))


@cli.command("report")
@click.argument("run")
@click.option("--vs", "vs", metavar="RUN_B", help="Compare with RUN_B (e.g. a fork): the side-by-side diff.")
@click.option("-o", "--output", metavar="FILE.html", help="Default: <run id>[-vs-<run b>].html.")
@click.option("--inline", is_flag=True,
              help="Put plotly.js in the page (one self-contained file, about 5 MB) instead of one "
                   "shared plotly-<version>.min.js next to the reports.")
def report_command(run: str, vs: str | None, output: str | None, inline: bool) -> None:
    """Write an HTML report of RUN that opens offline.

    Summary, verify result, waterfall, cost tables and charts, the event list with every
    payload; with --vs, the side-by-side diff of the two runs. plotly.js is one shared copy
    next to the reports (written once per folder), or in the page with --inline.
    """
    from ..report import plotly_js_name, write_report

    store = options.store()
    r = open_run(run, store)
    other = open_run(vs, store) if vs else None
    dest = output_file(output or (f"{r.id}-vs-{other.id}.html" if other else f"{r.id}.html"))
    with progress(total=None, desc="report", unit="step") as bar, writing(dest):
        path = write_report(r, dest, vs=other, progress=lambda step: _step(bar, step),
                            plotly="inline" if inline else "shared")
    size = path.stat().st_size
    shared = "" if inline else f", with plotly.js beside it in {path.parent / plotly_js_name()}"
    click.echo(f"report of run {r.id}" + (f" vs {other.id}" if other else "")
               + f" written to {path} ({size / 1e6:,.1f} MB{shared})")


def _step(bar: Any, step: str) -> None:
    bar.set_postfix_str(step, refresh=False)
    bar.update()
