"""``agentlog serve --otlp PORT``: an OTLP/HTTP endpoint that writes every trace it receives
into the store as a run, while the traced program runs."""

from __future__ import annotations

import threading

import click

from ._app import cli
from ._util import ExitCode, fail, options

__all__: list[str] = []


@cli.command("serve")
@click.option("--otlp", "port", type=click.IntRange(0, 65535), required=True, metavar="PORT",
              help="Accept OTLP/HTTP traces (POST /v1/traces, protobuf or JSON) on PORT; 4318 is "
                   "OTLP's. Each trace becomes a run (otlp-<trace id>) that grows as spans arrive.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; the endpoint has no authentication.")
@click.option("--idle", type=click.FloatRange(min=0.1), default=30.0, show_default=True, metavar="SECONDS",
              help="Close a run no span reached for this long (a later span reopens it).")
def serve_command(port: int, host: str, idle: float) -> None:
    """Receive OpenTelemetry traces from running agents until Ctrl-C."""
    from ..otel.server import serve

    store = options.store()
    try:
        server = serve(store, port=port, host=host, idle=idle)
    except OSError as exc:
        fail(ExitCode.BAD_INPUT, f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    click.echo(f"agentlog: OTLP/HTTP traces to {server.traces_url} go to {store.path} "
               "(Ctrl-C stops)", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    click.echo(f"agentlog: stopped after {server.spans_received:,} spans", err=True)
