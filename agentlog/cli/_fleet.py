"""Commands that share runs through a team store: ``push``, ``pull``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from ._app import cli
from ._util import echo_json, existing_store, options

__all__: list[str] = []

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


@cli.command("push")
@click.argument("url", metavar="URL")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option("--follow", is_flag=True, help="Keep pushing as runs seal segments, until interrupted.")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              help="Seconds between pushes with --follow.")
@JSON_OPTION
def push_command(url: str, runs: Sequence[str], follow: bool, interval: float, as_json: bool) -> None:
    """Copy RUNs (default: every run) of the local store to the store at URL.

    URL is s3://bucket/prefix (endpoint and credentials from the AWS environment:
    AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...), gs://..., or a folder. Sealed segments,
    referenced blobs and checkpoints go first, run.json last; files already there are
    skipped, so pushing again is cheap and an interrupted push resumes. An open run goes up to
    its last sealed segment. Exits 4 if URL holds another run under one of these ids.
    """
    from ..store.push import PushReport
    from ..store.push import follow as follow_push

    store = existing_store()
    ids = list(runs) or None
    if follow:
        def say(one: PushReport) -> None:
            if one.files_sent and not options.quiet:
                click.echo(f"pushed: {one}", err=True)
        try:
            report = follow_push(store, url, ids, interval=interval, on_round=say)
        except KeyboardInterrupt:
            return
    else:
        report = store.push(url, ids, progress=not options.quiet and sys.stderr.isatty())
    _report(report, as_json)


@cli.command("pull")
@click.argument("url", metavar="URL")
@click.argument("run", metavar="RUN")
@JSON_OPTION
def pull_command(url: str, run: str, as_json: bool) -> None:
    """Copy RUN (id or unique prefix; with a fork's ancestors) from the store at URL into the
    local store, whole. Exits 2 if there is no store at URL, 3 if it has no such run, 4 if the
    local store holds another run under that id."""
    from ..store.store import Store

    existing_store(Store(url), what="remote store")  # the local store may be new: pull makes it
    _report(options.store().pull(url, run), as_json)


def _report(report: object, as_json: bool) -> None:
    from ..store.push import PushReport

    assert isinstance(report, PushReport)
    if as_json:
        echo_json({"runs": report.runs, "files_sent": report.files_sent, "bytes_sent": report.bytes_sent,
                   "files_skipped": report.files_skipped, "bytes_skipped": report.bytes_skipped,
                   "blobs_sent": report.blobs_sent, "blobs_skipped": report.blobs_skipped,
                   "seconds": round(report.seconds, 3)})
    else:
        click.echo(str(report))
