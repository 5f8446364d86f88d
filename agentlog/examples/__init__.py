"""Four offline example agents, and the sample runs they recorded.

Each example is a pure agent, a scripted stand-in for a real model (it reads its context and
answers by rules, reporting a real model name so costs are priced), and tools over fixtures:

- ``sre`` (:mod:`.sre`): incident triage that asks before it restarts;
- ``refunds`` (:mod:`.refunds`): refunds under a budget, large ones decided by a person;
- ``diligence`` (:mod:`.diligence`): research as a graph with provenance, a contradiction
  included;
- ``jobhunt`` (:mod:`.jobhunt`): repeated scans of career pages over recorded HTTP, and a form
  filled with an idempotency key.

Run one into a store, or open the bundled sample runs (a copy, so forks and approvals do not
touch the package)::

    import agentlog as al
    run = al.examples.run_example("sre", store="runs")          # stops, waiting for approval
    store = al.examples.sample_store()                           # the sample runs, copied
    store.list_runs()
    run = store.run("refunds-0001")
    fork = al.fork(run, at=40, program=al.examples.program("refunds"))

``python -m agentlog.examples --regenerate`` records the sample runs again, byte for byte.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import import_module, resources
from pathlib import Path
from typing import Any

from ..capture.runtime import AgentProgram, run_agent

__all__ = ["EXAMPLES", "parts", "program", "regenerate", "run_example", "sample_runs_path", "sample_store"]

#: The example names, in the order of the tour.
EXAMPLES = ("sre", "refunds", "diligence", "jobhunt")

_AGENTS = {"sre": "SREAgent", "refunds": "RefundsAgent", "diligence": "DiligenceAgent",
           "jobhunt": "JobHuntAgent"}


def _module(name: str) -> Any:
    if name not in _AGENTS:
        raise KeyError(f"no example {name!r}; the examples are {', '.join(EXAMPLES)}")
    return import_module(f"agentlog.examples.{name}")


def parts(name: str, clock: Any = None) -> dict[str, Any]:
    """An example's ``agent``, ``model`` and ``tools``, as keywords for ``al.resume``.

    >>> sorted(parts("sre"))
    ['agent', 'model', 'tools']

    Raises:
        KeyError: no example with that name (the message lists them).
    """
    module = _module(name)
    return {"agent": getattr(module, _AGENTS[name])(), "model": module.model(clock),
            "tools": module.tools(clock)}


def program(name: str, clock: Any = None) -> AgentProgram:
    """An example as a program, for ``al.replay`` and ``al.fork``."""
    p = parts(name, clock)
    return AgentProgram(p["agent"], model=p["model"], tools=p["tools"])


def run_example(name: str, /, *, store: Any = None, **overrides: Any) -> Any:
    """Run an example agent into a store.

    Args:
        name: one of :data:`EXAMPLES`.
        store: a :class:`~agentlog.Store` or a path (default: the default store).
        overrides: any keyword of :func:`~agentlog.run_agent` (``input``, ``budget``,
            ``run_id``, ``clock``, ``durability``, ``name``, ``tags``, ``model``, ``tools``).

    Returns:
        The :class:`~agentlog.Run` (``sre`` and ``refunds`` stop ``waiting`` for a decision).
    """
    module = _module(name)
    clock = overrides.get("clock")
    p = parts(name, clock)
    kwargs: dict[str, Any] = {
        "input": module.INPUT, "model": p["model"], "tools": p["tools"], "store": store,
        "name": f"{name} example", "budget": getattr(module, "BUDGET", None),
        "tags": {"example": name, "model": f"scripted stand-in for {module.MODEL}"}}
    kwargs.update(overrides)
    return run_agent(p["agent"], **kwargs)


def sample_runs_path() -> Path:
    """Where the bundled sample runs are (read them; copy them to write)."""
    return Path(str(resources.files("agentlog.examples").joinpath("sample_runs")))


def sample_store(copy_to: str | Path | None = None) -> Any:
    """A :class:`~agentlog.Store` on a fresh copy of the bundled sample runs.

    Args:
        copy_to: a folder that does not exist yet (default: a new temporary folder).

    Raises:
        FileExistsError: ``copy_to`` exists.
    """
    from ..store import Store
    target = Path(tempfile.mkdtemp(prefix="agentlog-samples-")) / "store" if copy_to is None else Path(copy_to)
    if target.exists():
        raise FileExistsError(f"{target} exists; sample_store copies into a new folder")
    shutil.copytree(sample_runs_path(), target)
    return Store(target)


def regenerate(out: str | Path | None = None) -> Path:
    """Record the sample runs again (byte-identical), into ``out`` or the package's folder."""
    from ._samples import record_samples
    return record_samples(Path(out) if out is not None else sample_runs_path())
