"""The errors of reading and writing other formats: each names the file, the line and the field.

::

    AgentlogError
    └── InteropError                         a file in another format
        ├── InteropFormatError (ValueError)  not the format, or a malformed line or field
        └── InteropIntegrityError            a line that does not hash to its recorded hash,
                                             or a blob that does not match its digest

A newer schema version is the store's :class:`~agentlog.errors.SchemaVersionError`, with the
file and line as its path. These classes live here rather than in :mod:`agentlog.errors`
because only the interop package raises them; the lead may move them there.
"""

from __future__ import annotations

from ..errors import AgentlogError

__all__ = ["InteropError", "InteropFormatError", "InteropIntegrityError"]


class InteropError(AgentlogError):
    """A file in another format (JSONL export, OTLP, ActiveGraph, drangue) cannot be used."""


class InteropFormatError(InteropError, ValueError):
    """The file is not in the expected format, or one of its lines or fields is malformed.

    >>> str(InteropFormatError("run.jsonl", 3, "not JSON (Expecting value)"))
    'run.jsonl:3: not JSON (Expecting value)'
    >>> str(InteropFormatError("run.jsonl", 1, "missing", field="id"))
    'run.jsonl:1: field id: missing'
    """

    def __init__(self, path: str, line: int | None, problem: str, *, field: str | None = None) -> None:
        self.path, self.line, self.problem, self.field = path, line, problem, field
        where = path if line is None else f"{path}:{line}"
        what = f"field {field}: " if field else ""
        super().__init__(f"{where}: {what}{problem}")


class InteropIntegrityError(InteropError):
    """A line's event does not hash to its recorded hash, or a blob does not match its digest.

    Nothing is written to the store when this is raised.

    >>> str(InteropIntegrityError("run.jsonl", 7, 5, "chain hash differs"))
    'run.jsonl:7: seq 5: chain hash differs; the file was changed after it was exported'
    """

    def __init__(self, path: str, line: int, seq: int | None, problem: str) -> None:
        self.path, self.line, self.seq, self.problem = path, line, seq, problem
        at = f"seq {seq}: " if seq is not None else ""
        super().__init__(f"{path}:{line}: {at}{problem}; the file was changed after it was exported")
