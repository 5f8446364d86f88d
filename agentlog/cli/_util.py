"""What every command shares: exit codes, the global options, finding runs, printing tables and
JSON, progress bars, and turning exceptions into one line on stderr with the right exit code."""

from __future__ import annotations

import enum
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    import pandas as pd
    from click.decorators import FC

    from ..store.run import Run
    from ..store.store import Store

__all__ = ["CLIError", "ExitCode", "Options", "agentlog_notes", "echo_json", "echo_table", "env_store_path",
           "error_code", "existing_file", "existing_store", "fail", "frame_records", "open_run", "open_runs", "options",
           "output_file", "plain", "progress", "report_error", "store_option", "writing"]

T = TypeVar("T")


class ExitCode(enum.IntEnum):
    """The exit codes of ``agentlog``; the main ``--help`` lists them."""

    OK = 0
    """Done."""
    CHECK_FAILED = 1
    """verify found a problem, diff found differences, a strict replay diverged."""
    BAD_INPUT = 2
    """A usage error or bad input: an option, a file, an edit, an ambiguous run prefix, a store
    that does not exist."""
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
    """The global options, set by the ``agentlog`` group (``--store`` by a command too)."""

    store_path: str | None = None
    quiet: bool = False
    debug: bool = False

    def store(self) -> Store:
        """The store of ``--store``, else ``$AGENTLOG_STORE``, else ``./agentlog-runs``."""
        from ..store.store import Store
        return Store(self.store_path)


#: One per process: the CLI runs one command.
options = Options()

STORE_HELP = "The store folder (default: $AGENTLOG_STORE, else ./agentlog-runs)."


def _set_store(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        options.store_path = value


def store_option(*, envvar: str | None = None) -> Callable[[FC], FC]:
    """``--store PATH``: the group has it (with ``$AGENTLOG_STORE``), and so does every command,
    since people type it after the command too (``agentlog ls --store runs``)."""
    return click.option("--store", metavar="PATH", envvar=envvar, show_envvar=envvar is not None,
                        expose_value=False, callback=_set_store, help=STORE_HELP)


def progress(iterable: Iterable[T] | None = None, *, desc: str, total: int | None = None,
             unit: str = "it") -> Any:
    """A tqdm bar on stderr; off with ``--quiet`` or when stderr is not a terminal."""
    from tqdm import tqdm
    return tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False,
                disable=options.quiet or not sys.stderr.isatty())


def existing_store(store: Store | None = None, *, what: str = "store") -> Store:
    """``store`` (default: the store of ``--store``), or exit 2 when it does not exist: a typo
    in ``--store`` must read neither as an empty store nor as a missing run.

    Args:
        what: the store's name in the message (``pull`` reads a ``"remote store"``).
    """
    st = options.store() if store is None else store
    if not st.fs.isdir(st.path):
        why = "nothing is stored at that URL" if st.fs.remote else "the folder does not exist"
        fail(ExitCode.BAD_INPUT, f"{st.url}: no such {what} ({why})")
    return st


def open_run(ref: str, store: Store | None = None) -> Run:
    """The run named by ``ref``: an id, a unique id prefix, or a run folder (``…/run_id=<id>``).

    Raises:
        CLIError: no such store (exit 2), no such run (exit 3), or an ambiguous prefix (exit 2,
            listing the candidates).
        RunDamagedError: the run's ``run.json`` is missing or invalid (exit 4).
    """
    from ..errors import AmbiguousRunError
    from ..store.meta import RUN_JSON, run_id_of
    from ..store.store import Store

    path = Path(ref).expanduser()
    if path.is_dir() and ((path / RUN_JSON).is_file() or run_id_of(path.name) is not None):
        rid = run_id_of(path.name)
        if rid is None:
            fail(ExitCode.BAD_INPUT, f"{ref}: a run folder is named run_id=<id>")
        return Store(path.resolve().parent.parent).run(rid, exact=True)
    st = existing_store(store)
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
        NotReplayableError,
        PatchError,
        ProofError,
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
    if isinstance(exc, (InteropError, CanonicalJSONError, PatchError, NotReplayableError, ProofError)):
        return ExitCode.BAD_INPUT
    if isinstance(exc, StoreError):
        return ExitCode.STORE
    if isinstance(exc, OSError):  # a file the command was given: missing, a folder, no space, no right
        return ExitCode.BAD_INPUT
    return ExitCode.INTERNAL


def agentlog_notes(exc: BaseException) -> list[str]:
    """The notes agentlog added to ``exc`` on its way up (e.g. ``fork recorded as run <id>``)."""
    return [n.removeprefix("agentlog: ") for n in getattr(exc, "__notes__", [])
            if isinstance(n, str) and n.startswith("agentlog: ")]


def report_error(exc: BaseException) -> int:
    """Print ``exc`` on stderr (the traceback too with ``--debug``); return its code.

    The message is one line, except a replay divergence, which keeps its lines (expected,
    actual, the payload diff). Notes agentlog added (the run a failed fork was recorded as)
    follow in parentheses.
    """
    from ..errors import DivergenceError

    code = error_code(exc)
    if options.debug:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, KeyboardInterrupt):
        message = "interrupted"
    elif isinstance(exc, CLIError):
        message = exc.message
    elif code is ExitCode.INTERNAL:
        hint = "" if options.debug else "; run again with --debug for the traceback"  # printed above
        message = f"unexpected {type(exc).__name__}: {exc}{hint}"
    elif isinstance(exc, FileNotFoundError) and exc.filename:
        message = f"{exc.filename}: no such file"
    elif isinstance(exc, OSError) and exc.filename and exc.strerror:
        message = f"{exc.filename}: {exc.strerror}"
    else:
        message = str(exc)
    notes = agentlog_notes(exc)
    if isinstance(exc, DivergenceError):
        message = message.rstrip() + "".join(f"\n  ({note})" for note in notes)
    else:
        message = " ".join(message.split()) + "".join(f" ({note})" for note in notes)
    click.echo(f"agentlog: error: {message}", err=True)
    return int(code)


def existing_file(path: str) -> Path:
    """``path`` as a Path, or exit 2 naming it when it is not a readable file."""
    p = Path(path).expanduser()
    if p.is_dir():
        fail(ExitCode.BAD_INPUT, f"{path}: is a folder; give a file")
    if not p.is_file():
        fail(ExitCode.BAD_INPUT, f"{path}: no such file")
    return p


def output_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path to write, or exit 2 when it is a folder or its folder does not exist."""
    p = Path(path).expanduser()
    if p.is_dir():
        fail(ExitCode.BAD_INPUT, f"cannot write {path}: it is a folder; give a file name")
    if not p.parent.is_dir():
        fail(ExitCode.BAD_INPUT, f"cannot write {path}: folder {p.parent} does not exist")
    return p


@contextmanager
def writing(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Name ``path`` in an OSError raised while writing it (``write()`` errors such as ENOSPC
    carry no file name), so the message says which file could not be written."""
    from ..errors import AgentlogError

    try:
        yield
    except OSError as exc:
        if (path is None or exc.filename is not None or exc.errno is None
                or isinstance(exc, (AgentlogError, BrokenPipeError))):
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def env_store_path() -> str:
    """The store path that applies now (for messages)."""
    from ..store.store import DEFAULT_STORE
    return options.store_path or os.environ.get("AGENTLOG_STORE") or DEFAULT_STORE


def open_runs(refs: Iterable[str]) -> Iterator[Run]:
    """Open each of ``refs`` (see :func:`open_run`)."""
    store = options.store()
    for ref in refs:
        yield open_run(ref, store)
