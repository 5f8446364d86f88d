"""``agentlog demo``: the sample runs in a store, their verify results, a report, JupyterLab."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path

import click

from ._app import cli
from ._util import ExitCode, fail, options, output_file, progress, writing

__all__ = ["notebook_source"]

REPORT_RUNS = ("sre-0001", "sre-0001-calm")


def notebook_source() -> Path | None:
    """Where the tour notebooks are: ``agentlog/examples/notebooks`` (``notebooks/`` at the
    root of a checkout points there); ``None`` if it holds none."""
    folder = Path(str(resources.files("agentlog.examples").joinpath("notebooks")))
    return folder if folder.is_dir() and any(folder.glob("*.ipynb")) else None


def _fill_store(path: Path, record: bool) -> str:
    """Put the sample runs in ``path``; return what was done."""
    from ..examples import regenerate, sample_runs_path, sample_store
    from ..store.store import Store

    store = Store(path)
    existing = store.list_runs()
    if existing:
        if record:
            fail(ExitCode.BAD_INPUT, f"{path} already holds {len(existing)} runs; --record records "
                                     "the sample runs into a new store: give --store NEW_FOLDER")
        return f"using the existing store {path} ({len(existing)} runs)"
    if record:
        with progress(total=1, desc="record the sample runs", unit="store") as bar:
            regenerate(path)
            bar.update()
        return f"recorded the sample runs with the example agents into {path}"
    if path.exists():
        shutil.copytree(sample_runs_path(), path, dirs_exist_ok=True)
    else:
        sample_store(copy_to=path)
    return f"copied the bundled sample runs to {path}"


@cli.command("demo")
@click.option("--record", is_flag=True,
              help="Record the sample runs again with the example agents (offline, scripted models) "
                   "instead of copying the bundled ones; the store must be new.")
@click.option("--no-lab", is_flag=True, help="Do not start JupyterLab.")
@click.option("--report", "report_path", default="agentlog-demo-report.html", show_default=True,
              metavar="FILE", help="Where the demo report goes.")
@click.option("--notebooks", "nb_path", default="agentlog-notebooks", show_default=True, metavar="DIR",
              help="Where the tour notebooks are copied (kept if it exists).")
@click.option("--port", type=int, help="JupyterLab's port (default: its own choice).")
def demo_command(record: bool, no_lab: bool, report_path: str, nb_path: str, port: int | None) -> None:
    """The tour in one command.

    \b
    1. makes the store (--store, default ./agentlog-runs) from the bundled sample runs,
       unless it already holds runs (--record records them again instead);
    2. prints the runs and verifies every one;
    3. writes a report of sre-0001 vs its fork sre-0001-calm (the calm-database what-if):
       summary, waterfall, cost, events and the side-by-side diff;
    4. copies the tour notebooks to ./agentlog-notebooks and starts JupyterLab on them
       with AGENTLOG_STORE set to the store (not with --no-lab).

    Exits 1 if a run does not verify.
    """
    from ..report import write_report
    from ._inspect import runs_table, verify_id

    report_file = output_file(report_path)
    store = options.store()
    done = [_fill_store(store.path, record)]
    frame = store.runs()
    click.echo(f"store {store.path}: {len(frame)} runs")
    click.echo(runs_table(frame).to_string(index=False))

    click.echo("\nverify:")
    ok: list[str] = []
    ids = store.list_runs()
    for rid in progress(ids, desc="verify", unit="run"):
        rep = verify_id(store, rid)  # a damaged run is reported; the demo goes on
        if rep.ok:
            ok.append(rid)
        click.echo(textwrap.indent(str(rep), "  "))
    bad = len(ids) - len(ok)
    done.append(f"verified {len(ids)} runs: " + ("all ok" if not bad else f"{bad} with problems"))

    report: Path | None = None
    a, b = REPORT_RUNS if all(r in ok for r in REPORT_RUNS) else (ok[0] if ok else None, None)
    if a is None:
        done.append("no run verified ok: no report written")
    else:
        run_b = store.run(b, exact=True) if b else None
        with progress(total=None, desc="report", unit="step") as bar, writing(report_file):
            report = write_report(store.run(a, exact=True), report_file, vs=run_b,
                                  progress=lambda _: bar.update())
        done.append(f"wrote the report of {a}" + (f" vs {b}" if b else "") + f" to {report.resolve()}")

    source = notebook_source()
    nb_dir = Path(nb_path).resolve()
    if source is None:
        done.append("no tour notebooks found in this installation; JupyterLab not started")
        no_lab = True
    elif nb_dir.exists():
        done.append(f"the notebooks are in {nb_dir} (kept as they were)")
    else:
        nb_dir.mkdir(parents=True)
        for notebook in sorted(source.glob("*.ipynb")):
            shutil.copy2(notebook, nb_dir / notebook.name)
        done.append(f"copied the tour notebooks from {source} to {nb_dir}")

    click.echo("\ndone:")
    for line in done:
        click.echo(f"  - {line}")
    if report is None:
        click.echo(f"  next: agentlog --store {store.path} verify --all")
    else:
        click.echo(f"  next: agentlog --store {store.path} show {a}, or open {report.name} in a browser")
    if not no_lab:
        _lab(nb_dir, store.path, port)
    if bad:
        raise click.exceptions.Exit(int(ExitCode.CHECK_FAILED))


def _lab(nb_dir: Path, store: Path, port: int | None) -> None:
    """Run JupyterLab on ``nb_dir`` in the foreground, with ``AGENTLOG_STORE`` set to ``store``."""
    if importlib.util.find_spec("jupyterlab") is None:
        click.echo("JupyterLab is not installed: pip install 'agentlog[notebook]', then agentlog demo",
                   err=True)
        return
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={nb_dir}"]
    if port is not None:
        cmd.append(f"--port={port}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # JupyterLab refuses root without it (containers)
    env = dict(os.environ, AGENTLOG_STORE=str(store))
    click.echo(f"starting JupyterLab on {nb_dir} (AGENTLOG_STORE={store}); Ctrl-C stops it", err=True)
    proc = subprocess.Popen(cmd, env=env)
    try:
        proc.wait()
    except KeyboardInterrupt:
        proc.wait()  # JupyterLab got the Ctrl-C too and shuts its kernels down
