"""The ``agentlog`` command line: ``agentlog --help`` lists the commands and the exit codes.

==========  ======================================================================================
module      commands
==========  ======================================================================================
_app        the group and its global options (``--store``, ``--quiet``, ``--debug``)
_inspect    ``ls``, ``show``, ``verify``, ``diff``, ``cost``, ``gc``
_rerun      ``replay``, ``fork``
_files      ``export``, ``import``, ``report``
_checkpoint ``checkpoint``
_serve      ``serve`` (an OTLP/HTTP endpoint)
_integrity  ``repair``, ``keygen``, ``sign``, ``prove``, ``verify-proof``
_demo       ``demo``
_fleet      ``push``, ``pull`` (a team store: s3://, gs://, a folder)
==========  ======================================================================================

Every error is one line on stderr that names the run, the seq or the file, with an exit code
(:class:`~agentlog.cli._util.ExitCode`); ``--debug`` adds the traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

# the command modules register their commands
from . import _checkpoint, _demo, _files, _fleet, _inspect, _integrity, _rerun, _serve
from ._app import cli
from ._util import ExitCode, report_error

__all__ = ["ExitCode", "cli", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return (and, as a console script, exit with) its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        # not cli.main(): it turns a closed stdout (EPIPE) into sys.exit(1) before we see it
        with cli.make_context("agentlog", args) as ctx:
            result = cli.invoke(ctx)
    except click.exceptions.Exit as exc:  # --help, --version, a command's own exit code
        return int(exc.exit_code)
    except click.ClickException as exc:  # usage errors: click's own message and exit code 2
        exc.show()
        return int(exc.exit_code)
    except BrokenPipeError:  # e.g. agentlog export RUN -o - | head: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line, mapped to a code
        return report_error(exc)
    return int(result or 0)
