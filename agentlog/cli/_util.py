"""What every command shares: exit codes, the global options, finding runs, printing tables and
JSON, progress bars, and turning exceptions into one line on stderr with the right exit code."""

from __future__ import annotations

import enum
import json
import os
import sys
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    import pandas as pd

    from ..store.run import Run
    from ..store.store import Store

__all__ = ["CLIError", "ExitCode", "Options", "echo_json", "echo_table", "env_store_path", "error_code",
           "existing_file", "fail", "frame_records", "open_run", "open_runs", "options", "plain",
           "progress", "report_error"]

T = TypeVar("T")


class ExitCode(enum.IntEnum):
    """The exit codes of ``agentlog``; the main ``--help`` lists them."""

    OK = 0
    """Done."""
    CHECK_FAILED = 1
    """verify found a problem, diff found differences, a strict replay diverged."""
    BAD_INPUT = 2
    """A usage error or bad input: an option, a file, an edit, an ambiguous run prefix."""
    NOT_FOUND = 3
    """No such run (or seq in a run)."""
    STORE = 4
    """The store or a run cannot be used: damaged, locked, newer schema, run exists."""
    PROGRAM = 5
    """The program given to replay or fork raised."""
    INTERNAL = 6
    """An unexpected error in agentlog (``--debug`` shows the traceback)."""
    INTERRUPTED = 130
    """Ctrl-C."""


class CLIError(Exception):
    """An error the CLI reports as one line, with an exit code."""

    def __init__(self, code: ExitCode, message: str) -> None:
        self.code, self.message = code, message
        super().__init__(message)


def fail(code: ExitCode, message: str) -> NoReturn:
    """Stop the command: ``message`` goes to stderr, ``code`` is the exit code."""
    raise CLIError(code, message)


@dataclass(slots=True)
class Options:
    """The global options, set by the ``agentlog`` group."""

    store_path: str | None = None
    quiet: bool = False
    debug: bool = False

    def store(self) -> Store:
        """The store of ``--store``, else ``$AGENTLOG_STORE``, else ``./agentlog-runs``."""
        from ..store.store import Store
        return Store(self.store_path)


#: One per process: the CLI runs one command.
options = Options()


def progress(iterable: Iterable[T] | None = None, *, desc: str, total: int | None = None,
             unit: str = "it") -> Any:
    """A tqdm bar on stderr; off with ``--quiet`` or when stderr is not a terminal."""
    from tqdm import tqdm
    return tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False,
                disable=options.quiet or not sys.stderr.isatty())


def open_run(ref: str, store: Store | None = None) -> Run:
    """The run named by ``ref``: an id, a unique id prefix, or a run folder (``…/run_id=<id>``).

    Raises:
        CLIError: no such run (exit 3), or an ambiguous prefix (exit 2, listing the candidates).
    """
    from ..errors import AmbiguousRunError
    from ..store.meta import RUN_JSON, run_id_of
    from ..store.store import Store

    path = Path(ref).expanduser()
    if path.is_dir() and (path / RUN_JSON).is_file():
        rid = run_id_of(path.name)
        if rid is None:
            fail(ExitCode.BAD_INPUT, f"{ref}: a run folder is named run_id=<id>")
        return Store(path.resolve().parent.parent).run(rid, exact=True)
    st = store if store is not None else options.store()
    try:
        return st.run(ref)
    except AmbiguousRunError as exc:
        fail(ExitCode.BAD_INPUT, f"run prefix {ref!r} matches {len(exc.matches)} runs: "
                                 f"{', '.join(exc.matches)}; give more characters")


# --- output ------------------------------------------------------------------------------------


def frame_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A DataFrame as JSON-ready records: missing values as ``null``, times as ISO text."""
    return list(json.loads(frame.to_json(orient="records", date_format="iso", date_unit="us")))


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def echo_table(frame: pd.DataFrame, *, empty: str = "(none)") -> None:
    """Print a DataFrame as aligned text without its index."""
    if frame.empty:
        click.echo(empty)
        return
    click.echo(plain(frame).to_string(index=False))


def plain(frame: pd.DataFrame, na: str = "–") -> pd.DataFrame:
    """``frame`` as objects with missing values (``pd.NA`` too) shown as ``na``, for printing."""
    out = frame.astype(object)
    return out.where(out.notna(), na)


# --- errors ------------------------------------------------------------------------------------


def error_code(exc: BaseException) -> ExitCode:
    """The exit code for an exception that reached the top."""
    from ..errors import (
        AmbiguousRunError,
        CanonicalJSONError,
        DivergenceError,
        EventNotFoundError,
        PatchError,
        RunNotFoundError,
        StoreError,
    )
    from ..interop.errors import InteropError

    if isinstance(exc, CLIError):
        return exc.code
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, (RunNotFoundError, EventNotFoundError)):
        return ExitCode.NOT_FOUND
    if isinstance(exc, AmbiguousRunError):
        return ExitCode.BAD_INPUT
    if isinstance(exc, DivergenceError):
        return ExitCode.CHECK_FAILED
    if isinstance(exc, (InteropError, CanonicalJSONError, PatchError)):
        return ExitCode.BAD_INPUT
    if isinstance(exc, StoreError):
        return ExitCode.STORE
    if isinstance(exc, FileNotFoundError):
        return ExitCode.BAD_INPUT
    return ExitCode.INTERNAL


def report_error(exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr (the traceback too with ``--debug``); return its code."""
    code = error_code(exc)
    if options.debug:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, KeyboardInterrupt):
        message = "interrupted"
    elif isinstance(exc, CLIError):
        message = exc.message
    elif code is ExitCode.INTERNAL:
        message = (f"unexpected {type(exc).__name__}: {exc}; run again with --debug for the traceback")
    elif isinstance(exc, FileNotFoundError) and exc.filename:
        message = f"{exc.filename}: no such file"
    else:
        message = str(exc)
    click.echo(f"agentlog: error: {' '.join(message.split())}", err=True)
    return int(code)


def existing_file(path: str) -> Path:
    """``path`` as a Path, or exit 2 naming it when it is not a readable file."""
    p = Path(path).expanduser()
    if not p.is_file():
        fail(ExitCode.BAD_INPUT, f"{path}: no such file")
    return p


def env_store_path() -> str:
    """The store path that applies now (for messages)."""
    from ..store.store import DEFAULT_STORE
    return options.store_path or os.environ.get("AGENTLOG_STORE") or DEFAULT_STORE


def open_runs(refs: Iterable[str]) -> Iterator[Run]:
    """Open each of ``refs`` (see :func:`open_run`)."""
    store = options.store()
    for ref in refs:
        yield open_run(ref, store)
