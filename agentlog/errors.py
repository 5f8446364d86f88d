"""Every exception agentlog raises, in one tree.

::

    AgentlogError
    ├── CanonicalJSONError (ValueError)        a value that has no canonical JSON form
    ├── InvalidBlobRefError (ValueError)       a blob reference that is not sha256:<64 hex>
    ├── MissingDependencyError (ImportError)   an optional extra is not installed
    ├── EventSchemaError (ValueError)          a payload that does not fit its event type
    │   └── EventVersionError                  a payload newer than this agentlog knows
    ├── ProofError (ValueError)                a signed head, proof or key that cannot be used
    ├── StoreError                             files on disk
    │   ├── StorePathError (NotADirectoryError)
    │   ├── RunNotFoundError (LookupError)
    │   ├── AmbiguousRunError (LookupError)
    │   ├── RunExistsError (FileExistsError)
    │   ├── RunLockedError
    │   ├── RunClosedError
    │   ├── RunDamagedError                    a run folder whose run.json is missing or invalid
    │   ├── SchemaVersionError
    │   ├── CorruptSegmentError
    │   ├── CorruptWALError
    │   ├── CorruptEventError                  a stored event whose payload cannot be read
    │   ├── BlobNotFoundError (FileNotFoundError)
    │   ├── BlobIntegrityError
    │   ├── EventNotFoundError (IndexError)
    │   └── CheckpointError                    a stored checkpoint node or file that does not check out
    ├── FoldError                              the fold and JSON Patch
    │   ├── PatchError (ValueError)
    │   │   └── PatchTestError                 a ``test`` op whose value differs
    │   └── ReducerError                       a reducer raised; names the seq and the type
    ├── RecordError                            the recorder SDK
    │   ├── PricingError (LookupError)
    │   ├── UsageError (ValueError)            token counts that cannot be normalised
    │   └── ToolError                          a recorded tool failed (re-raised on replay)
    ├── ReplayError                            replay and fork
    │   ├── ReplayMissError (LookupError)      a call with no recorded response
    │   ├── DivergenceError                    strict replay found a different event
    │   └── NotReplayableError (ValueError)    a run with no program's recorded answers (an import)
    └── AgentError                             the loop runtime
        ├── ApprovalError (LookupError)        a decision on a request that is not pending
        └── BudgetExceededError

Warnings (``warnings.warn``, never raised)::

    UnknownModelWarning (UserWarning)          no price for a model: its cost is recorded as unknown
    CheckpointWarning (RuntimeWarning)         a checkpoint was not written or not used (derived data)
    ForkEditWarning (UserWarning)              a fork's edited answer was never served: the fork ran without it

Facts become attributes, and every message names the run, the seq, the field or the file,
and, where there is one, the next step.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentError",
    "AgentlogError",
    "AmbiguousRunError",
    "ApprovalError",
    "BlobIntegrityError",
    "BlobNotFoundError",
    "BudgetExceededError",
    "CanonicalJSONError",
    "CheckpointError",
    "CheckpointWarning",
    "CorruptEventError",
    "CorruptSegmentError",
    "CorruptWALError",
    "DivergenceError",
    "EventNotFoundError",
    "EventSchemaError",
    "EventVersionError",
    "FoldError",
    "ForkEditWarning",
    "InvalidBlobRefError",
    "MissingDependencyError",
    "NotReplayableError",
    "PatchError",
    "PatchTestError",
    "PricingError",
    "ProofError",
    "ReadOnlyStoreError",
    "RecordError",
    "ReducerError",
    "ReplayError",
    "ReplayMissError",
    "RunClosedError",
    "RunDamagedError",
    "RunExistsError",
    "RunIdClashError",
    "RunLockedError",
    "RunNotFoundError",
    "SchemaVersionError",
    "StoreError",
    "StorePathError",
    "ToolError",
    "UnknownModelWarning",
    "UsageError",
    "missing_dependency",
]


class AgentlogError(Exception):
    """The root of every agentlog exception."""


class CanonicalJSONError(AgentlogError, ValueError):
    """A value has no canonical JSON form (NaN, a set, a non-string key, ...).

    ``path`` names the field, e.g. ``payload.messages[2].content``.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


class InvalidBlobRefError(AgentlogError, ValueError):
    """A blob reference is not ``sha256:`` followed by 64 lower-case hex digits."""

    def __init__(self, ref: object, where: str = "") -> None:
        self.ref, self.where = ref, where
        at = f"{where}: " if where else ""
        super().__init__(f"{at}invalid blob reference {ref!r}: expected 'sha256:' + 64 lower-case hex")


class MissingDependencyError(AgentlogError, ImportError):
    """An optional dependency is missing; the message gives the pip command."""


def missing_dependency(module: str, extra: str) -> MissingDependencyError:
    """Build the error for a missing optional module, naming the extra that installs it.

    >>> str(missing_dependency("ipywidgets", "notebook"))
    "ipywidgets is needed for this; pip install 'agentlog[notebook]'"
    """
    return MissingDependencyError(f"{module} is needed for this; pip install 'agentlog[{extra}]'")


class ProofError(AgentlogError, ValueError):
    """A signed head, an inclusion or consistency proof, or a signing key cannot be used
    (malformed, wrong kind, unreadable); ``where`` names the file and ``field`` the field.

    A proof that is well formed but does not verify is not an error: the check's result
    says so.
    """

    def __init__(self, where: str, problem: str, *, field: str | None = None) -> None:
        self.where, self.problem, self.field = where, problem, field
        what = f"field {field}: " if field else ""
        super().__init__(f"{where}: {what}{problem}")


# --- store -----------------------------------------------------------------------------------


class EventSchemaError(AgentlogError, ValueError):
    """A payload that does not fit its event type: a missing or unknown field, a wrong type.

    ``type`` is the event type, ``field`` the dotted path of the field, ``value`` what was
    found and ``expected`` what the vocabulary asks for. ``run_id`` and ``seq`` are set where
    the event has a place in a run (:meth:`at` adds them).
    """

    def __init__(self, type: str, field: str, value: Any, expected: str, *,
                 run_id: str | None = None, seq: int | None = None) -> None:
        self.type, self.field, self.value, self.expected = type, field, value, expected
        self.run_id, self.seq = run_id, seq
        super().__init__(self._message())

    def _message(self) -> str:
        where = ""
        if self.run_id is not None:
            where = f"run {self.run_id}" + (f" seq {self.seq}" if self.seq is not None else "") + ": "
        return f"{where}{self.type} {self.field}: {self._found()}; expected {self.expected}"

    def _found(self) -> str:
        if self.value is _MISSING:
            return "missing"
        text = repr(self.value)
        text = text if len(text) <= 60 else text[:57] + "..."
        return f"{text} ({type(self.value).__name__})"

    def at(self, run_id: str | None, seq: int | None) -> EventSchemaError:
        """The same error, naming the run and the seq of the event."""
        if self.value is _MISSING:
            return type(self)(self.type, self.field, _MISSING, self.expected, run_id=run_id, seq=seq)
        return type(self)(self.type, self.field, self.value, self.expected, run_id=run_id, seq=seq)


class EventVersionError(EventSchemaError):
    """A payload written by a newer agentlog than this one: its event type's version is unknown."""

    def __init__(self, type: str, field: str, value: Any, expected: str, *,
                 run_id: str | None = None, seq: int | None = None) -> None:
        super().__init__(type, field, value, expected, run_id=run_id, seq=seq)

    def _message(self) -> str:
        return super()._message() + "; upgrade agentlog to read it"


#: The ``value`` of an :class:`EventSchemaError` for a field that is not there.
_MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<missing>"})()


class StoreError(AgentlogError):
    """Something about the files of a store or a run."""


class StorePathError(StoreError, NotADirectoryError):
    """The store path exists but is not a directory."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: a store must be a directory, and this is a file")


class ReadOnlyStoreError(StoreError, PermissionError):
    """A remote store (``s3://``, ...) was asked to record: recording stays local."""

    def __init__(self, url: str, action: str) -> None:
        self.url, self.action = url, action
        super().__init__(f"{url} is a remote store: cannot {action} there. Recording stays local (the "
                         "write-ahead log needs fsync and a lock): record into a local store and "
                         f"`agentlog push {url}` (or store.push(url)) to share the runs")


class RunIdClashError(StoreError):
    """A push or pull met another run under the same id in the target store."""

    def __init__(self, run_id: str, where: str, why: str) -> None:
        self.run_id, self.where, self.why = run_id, where, why
        super().__init__(f"run {run_id!r}: {where} holds another run with this id ({why}); nothing of "
                         "it was overwritten. Rename one of them (agentlog never merges two runs)")


class RunNotFoundError(StoreError, LookupError):
    """No run with this id (or id prefix) in the store."""

    def __init__(self, run_id: str, store: str) -> None:
        self.run_id, self.store = run_id, store
        super().__init__(f"no run {run_id!r} in store {store}; agentlog ls lists the runs")


class AmbiguousRunError(StoreError, LookupError):
    """An id prefix matches more than one run."""

    def __init__(self, prefix: str, matches: list[str]) -> None:
        self.prefix, self.matches = prefix, matches
        shown = ", ".join(matches[:5]) + (" …" if len(matches) > 5 else "")
        super().__init__(f"run prefix {prefix!r} matches {len(matches)} runs ({shown}); give more characters")


class RunExistsError(StoreError, FileExistsError):
    """A run with this id already exists."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id!r} already exists; open it with store.writer({run_id!r}) to append")


class RunLockedError(StoreError):
    """Another writer holds the run's lock."""

    def __init__(self, run_id: str, path: str) -> None:
        self.run_id, self.path = run_id, path
        super().__init__(f"run {run_id!r} is being written by another writer (lock {path}); "
                         "one writer per run")


class RunClosedError(StoreError):
    """An emit on a writer that was closed."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id!r}: this writer is closed; open a new one with store.writer({run_id!r})")


class RunDamagedError(StoreError):
    """A run folder whose ``run.json`` is missing or invalid; ``agentlog repair`` rebuilds it."""

    def __init__(self, run_id: str, path: str, problem: str) -> None:
        self.run_id, self.path, self.problem = run_id, path, problem
        super().__init__(f"run {run_id!r} is damaged: {path}: {problem}; "
                         f"agentlog repair {run_id} rebuilds its run.json from its events")


class SchemaVersionError(StoreError):
    """A run or segment was written by a newer agentlog."""

    def __init__(self, path: str, found: Any, supported: int) -> None:
        self.path, self.found, self.supported = path, found, supported
        super().__init__(f"{path}: schema version {found} is newer than this agentlog reads "
                         f"({supported}); pip install -U agentlog")


class CorruptSegmentError(StoreError):
    """A sealed Parquet segment cannot be read."""

    def __init__(self, path: str, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


class CorruptWALError(StoreError):
    """A WAL line that is not the torn last line cannot be read."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        self.path, self.line, self.problem = path, line, problem
        super().__init__(f"{path}:{line}: {problem}")


class CorruptEventError(StoreError):
    """A stored event that cannot be read (its payload is not a JSON object, a blob
    reference in it is malformed); names the file, the run and the seq."""

    def __init__(self, path: str, run_id: str, seq: int, problem: str) -> None:
        self.path, self.run_id, self.seq, self.problem = path, run_id, seq, problem
        super().__init__(f"{path}: run {run_id!r}, seq {seq}: {problem}; "
                         f"agentlog verify {run_id} checks the whole run")


class BlobNotFoundError(StoreError, FileNotFoundError):
    """A referenced blob is not in the store."""

    def __init__(self, digest: str, path: str) -> None:
        self.digest, self.path = digest, path
        super().__init__(f"blob {digest} is missing ({path})")


class BlobIntegrityError(StoreError):
    """A blob's bytes do not hash to its name."""

    def __init__(self, digest: str, actual: str, path: str) -> None:
        self.digest, self.actual, self.path = digest, actual, path
        super().__init__(f"blob {digest} was altered: its bytes hash to sha256:{actual} ({path})")


class EventNotFoundError(StoreError, IndexError):
    """A seq outside the run."""

    def __init__(self, run_id: str, seq: int, count: int) -> None:
        self.run_id, self.seq, self.count = run_id, seq, count
        super().__init__(f"run {run_id!r} has {count} events (seq 0..{count - 1}); no seq {seq}")


class CheckpointError(StoreError):
    """A checkpoint file or node does not check out (its digest, its pack's hash, its format).

    Checkpoints are derived data: ``run.state_at`` falls back to an older checkpoint or to the
    log; deleting ``runs/run_id=<id>/checkpoints/`` loses nothing.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}; checkpoints are derived data: delete the run's "
                         "checkpoints/ folder or run `agentlog checkpoint --rebuild` to make them again")


# --- fold --------------------------------------------------------------------------------------


class FoldError(AgentlogError):
    """Something went wrong while folding events into state."""


class PatchError(FoldError, ValueError):
    """A JSON Patch operation cannot be applied; names the op index and the pointer."""

    def __init__(self, index: int, op: str, path: str, problem: str) -> None:
        self.index, self.op, self.path, self.problem = index, op, path, problem
        super().__init__(f"op {index} ({op} {path!r}): {problem}")


class PatchTestError(PatchError):
    """A ``test`` operation found a different value."""


class ReducerError(FoldError):
    """A reducer raised while folding an event."""

    def __init__(self, seq: int, type: str, reducer: str, cause: BaseException) -> None:
        self.seq, self.type, self.reducer, self.cause = seq, type, reducer, cause
        super().__init__(f"seq {seq} ({type}): reducer {reducer} raised "
                         f"{type_name(cause)}: {cause}")


def type_name(exc: BaseException) -> str:
    """The class name of an exception, for messages."""
    return exc.__class__.__name__


# --- record / replay / runtime -----------------------------------------------------------------


class RecordError(AgentlogError):
    """Something went wrong while recording."""


class PricingError(RecordError, LookupError):
    """A price lookup or price override is malformed."""


class UsageError(RecordError, ValueError):
    """A usage report whose token counts cannot be normalised (negative, parts above the whole)."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field, self.value, self.problem = field, value, problem
        super().__init__(f"usage {field}={value!r}: {problem}")


class CheckpointWarning(RuntimeWarning):
    """A checkpoint could not be written (the recording goes on) or was not used (the state is
    folded from the log instead). Checkpoints are derived data: nothing recorded is lost."""


class ForkEditWarning(UserWarning):
    """A fork ran without one of its edits: the program did not make the edited call again
    after the cut (an earlier edit, or a changed program, took it down another path), so that
    edited answer was never served. The fork is recorded all the same; its ``fork.started``
    lists every edit asked for. ``fork_id`` and ``seqs`` (the parent's seqs of the answers
    never served) say which."""

    def __init__(self, fork_id: str, seqs: list[int]) -> None:
        self.fork_id, self.seqs = fork_id, seqs
        which = ", ".join(f"seq {seq}" for seq in seqs)
        super().__init__(f"fork {fork_id}: the edited answer at {which} was never served: the program did "
                         "not make that call again after the cut (before the fork ended or stopped), so the fork "
                         "ran without that edit")


class UnknownModelWarning(UserWarning):
    """No price is known for a model, so its cost is recorded as unknown (``None``), never guessed.

    Warned once per model per process. ``model`` and ``provider`` name what was looked up.
    """

    def __init__(self, model: str, provider: str | None = None) -> None:
        self.model, self.provider = model, provider
        via = f" (provider {provider!r})" if provider else ""
        super().__init__(f"no price for model {model!r}{via} in genai-prices; its cost is recorded as "
                         f"unknown. Set one with al.pricing.set({model!r}, input=..., output=...) "
                         "in USD per million tokens")


class ToolError(RecordError):
    """A recorded tool call failed; on replay the same error is raised again."""

    def __init__(self, name: str, seq: int, error: str) -> None:
        self.name, self.seq, self.error = name, seq, error
        super().__init__(f"tool {name!r} (seq {seq}) failed: {error}")


class ReplayError(AgentlogError):
    """Replay or fork could not go on."""


class ReplayMissError(ReplayError, LookupError):
    """A call has no recorded response; names the key and the nearest recorded ones."""


class DivergenceError(ReplayError):
    """Strict replay emitted an event that differs from the recorded one."""

    def __init__(self, divergence: Any) -> None:
        self.divergence = divergence
        super().__init__(str(divergence))


class NotReplayableError(ReplayError, ValueError):
    """A run that holds no program's recorded answers (an import, an OTLP trace) was given to
    replay or fork; ``reason`` says why (it is :attr:`agentlog.Run.replayable_reason`).

    >>> str(NotReplayableError("otlp-ab", "it was imported from otlp"))
    'run otlp-ab cannot be replayed or forked: it was imported from otlp'
    """

    def __init__(self, run_id: str, reason: str) -> None:
        self.run_id, self.reason = run_id, reason
        super().__init__(f"run {run_id} cannot be replayed or forked: {reason}")


class AgentError(AgentlogError):
    """The loop runtime could not go on."""


class ApprovalError(AgentError, LookupError):
    """``al.approve`` / ``al.deny`` named a request that is not waiting for a decision."""

    def __init__(self, run_id: str, request: int, problem: str) -> None:
        self.run_id, self.request, self.problem = run_id, request, problem
        super().__init__(f"run {run_id!r}: cannot decide approval request seq {request}: {problem}")


class BudgetExceededError(AgentError):
    """A budget limit was reached."""
