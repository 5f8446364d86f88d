"""The ``agentlog`` click group and its global options."""

from __future__ import annotations

import click

from ._util import options, store_option

__all__ = ["cli"]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Group(click.Group):
    """The ``agentlog`` group: every command it gets also takes ``--store PATH`` after its name."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Register ``cmd`` with a ``--store`` option of its own (set after the group's)."""
        if not any(isinstance(p, click.Option) and "--store" in p.opts for p in cmd.params):
            store_option()(cmd)
        super().add_command(cmd, name)


@click.group(cls=Group, context_settings=CONTEXT)
@store_option(envvar="AGENTLOG_STORE")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or remarks on stderr.")
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
@click.version_option(package_name="agentlog", prog_name="agentlog")
def cli(quiet: bool, debug: bool) -> None:
    """agentlog: record, replay, fork and inspect AI-agent runs.

    RUN is a run id, a unique prefix of one, or the path of a run folder
    (<store>/runs/run_id=<id>).

    \b
    Start here:
      agentlog demo                    sample runs, a report, JupyterLab
      agentlog ls                      the runs of the store
      agentlog show sre-0001           one run's summary card
      agentlog diff sre-0001 sre-0001-calm
      agentlog report sre-0001 --vs sre-0001-calm -o report.html

    \b
    Exit codes:
      0    ok
      1    a check failed: verify found a problem, diff found differences,
           a strict replay diverged
      2    usage error or bad input: an option, a file, an edit file,
           an ambiguous run prefix (the candidates are listed),
           a store that does not exist
      3    not found: no such run, or no such seq in the run
      4    the store cannot be used: a damaged or locked run, a newer schema,
           a run id that exists
      5    the program given to replay or fork raised
      6    unexpected error (--debug shows the traceback)
      130  interrupted
    """
    options.quiet = quiet
    options.debug = debug
