"""Layers import downward only, and no two packages import each other, not even lazily.

The import graph is read from the source (the AST of every module): ``import`` and ``from ...
import`` statements anywhere (inside functions and ``TYPE_CHECKING`` blocks too),
``importlib.import_module("...")`` calls, and string constants that name an agentlog module
(``"agentlog.widgets.waterfall"``, ``"agentlog.analysis.cost:cost"``) as lazy-import tables hold
them. Every module is placed in a layer below, by name: a new module fails this test until it
is placed.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentlog

ROOT = Path(agentlog.__file__).parent

#: The layers, lowest first: a module may import its own layer and the layers below it.
LAYERS: dict[str, str] = {
    "core": """
        agentlog._lazy agentlog._version agentlog._words agentlog.accessors agentlog.canonical agentlog.chain agentlog.errors
        agentlog.keys agentlog.pricing
        agentlog.merkle agentlog.numbers agentlog.proofs agentlog.redact agentlog.events.origin
        agentlog.events agentlog.events.approval agentlog.events.base agentlog.events.calls
        agentlog.events.event agentlog.events.graph agentlog.events.run agentlog.events.span
        agentlog.events.usage
    """,
    "fold": """
        agentlog.folding agentlog.folding._transient
        agentlog.folding.determinism agentlog.folding.diff agentlog.folding.engine agentlog.folding.patch
        agentlog.folding.pointer agentlog.folding.reducers agentlog.folding.values
        agentlog.folding.encode agentlog.folding.persistent
    """,
    "store": """
        agentlog.store agentlog.store._fs agentlog.store.blobs agentlog.store.gc agentlog.store.lock
        agentlog.store.meta agentlog.store.payload agentlog.store.run agentlog.store.segments
        agentlog.store.snapshot agentlog.store.store agentlog.store.verify agentlog.store.wal
        agentlog.store.writer
        agentlog.store.checkpoints agentlog.store.heads agentlog.store.repair agentlog.store.tail
        agentlog.store.tmp agentlog.store.fsys agentlog.store.push
    """,
    "capture": """
        agentlog.capture agentlog.capture.divergence agentlog.capture.fork
        agentlog.capture.loopstate agentlog.capture.recorder agentlog.capture.replay
        agentlog.capture.runtime agentlog.capture.session agentlog.capture.sinks
        agentlog.capture.transport agentlog.capture.httpx_hook agentlog.capture.endpoints
        agentlog.capture.streams agentlog.capture.headers agentlog.capture.rewire
        agentlog.capture.forkplan
        agentlog.capture.effects agentlog.capture.lifecycle agentlog.capture.loopfork
        agentlog.capture.providers agentlog.capture.replayable agentlog.capture.runtime.approvals
        agentlog.capture.runtime.budget agentlog.capture.runtime.loop agentlog.capture.runtime.resume
        agentlog.capture.runtime.start agentlog.capture.runtime.steps
        agentlog.edit
        agentlog.testing agentlog.testing.fakes agentlog.testing.strategies agentlog.testing.fleet
    """,
    # programs built on the runtime, and runs read from and written to other formats
    "programs": """
        agentlog.examples agentlog.examples.__main__ agentlog.examples._data
        agentlog.examples._samples agentlog.examples._scripted agentlog.examples.diligence
        agentlog.examples.jobhunt agentlog.examples.refunds agentlog.examples.sre
        agentlog.examples.notebooks._make
        agentlog.interop agentlog.interop._common agentlog.interop.activegraph
        agentlog.interop.drangue agentlog.interop.errors agentlog.interop.jsonl
        agentlog.interop.messages agentlog.interop.otlp agentlog.interop.otlp_import
        agentlog.interop.otlp_read agentlog.interop.semconv
        agentlog.interop.spanmap
        agentlog.otel agentlog.otel.instrument agentlog.otel.processor agentlog.otel.server
    """,
    "analysis": """
        agentlog.analysis agentlog.analysis._duck agentlog.analysis.align agentlog.analysis.columns
        agentlog.analysis.cost agentlog.analysis.queries agentlog.analysis.rundiff
        agentlog.analysis.spans agentlog.analysis.storewide agentlog.analysis.tables agentlog.analysis.fleet
    """,
    "views": """
        agentlog.widgets agentlog.widgets._kernel agentlog.widgets.accessors
        agentlog.widgets.costdash agentlog.widgets.diffview agentlog.widgets.forkpanel
        agentlog.widgets.html agentlog.widgets.options agentlog.widgets.scrubber
        agentlog.widgets.statetree agentlog.widgets.tabs agentlog.widgets.waterfall
        agentlog.widgets.chat agentlog.widgets.graph agentlog.widgets.live
        agentlog.widgets.spantree agentlog.widgets.timeline
        agentlog.report
    """,
    "cli": """
        agentlog.cli agentlog.cli.__main__ agentlog.cli._app agentlog.cli._demo agentlog.cli._files
        agentlog.cli._inspect agentlog.cli._program agentlog.cli._rerun agentlog.cli._util
        agentlog.cli._checkpoint agentlog.cli._integrity agentlog.cli._serve agentlog.cli._fleet
    """,
    # the public names (al.*) and the registry of methods attached from above
    "package": "agentlog",
}
RANK = {name: i for i, name in enumerate(LAYERS)}
LAYER_OF = {module: layer for layer, text in LAYERS.items() for module in text.split()}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _known(name: str) -> str | None:
    """``name`` (a module, or ``module:attr``, or ``module.attr``) as the agentlog module it
    names, or ``None``."""
    name = name.split(":")[0]
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_of(module: str) -> Iterator[tuple[str, int]]:
    """``(imported agentlog module, line)`` for every import in ``module``'s source."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (found := _known(alias.name)) is not None:
                    yield found, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.level, node.module)
            for alias in node.names:
                # "from agentlog import interop" imports the module agentlog.interop
                found = _known(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES else _known(base)
                if found is not None:
                    yield found, node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            # "agentlog" alone is a word (a format name, a program name), not an import
            if text.startswith("agentlog.") and text.split(":")[0] in MODULES:
                yield text.split(":")[0], node.lineno


def _edges() -> list[tuple[str, str, int]]:
    return [(m, target, line) for m in MODULES for target, line in imports_of(m) if target != m]


def package_of(module: str) -> str:
    """The package a module belongs to (``agentlog.store.run`` -> ``agentlog.store``); a
    top-level module is its own package."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_every_module_is_placed_in_a_layer() -> None:
    unplaced = sorted(set(MODULES) - set(LAYER_OF))
    assert not unplaced, f"place these modules in a layer of LAYERS: {unplaced}"
    gone = sorted(set(LAYER_OF) - set(MODULES))
    assert not gone, f"these modules no longer exist; remove them from LAYERS: {gone}"


def test_layers_import_downward_only() -> None:
    upward = [f"{m}:{line} ({LAYER_OF[m]}) imports {t} ({LAYER_OF[t]})"
              for m, t, line in _edges()
              if m in LAYER_OF and t in LAYER_OF and RANK[LAYER_OF[t]] > RANK[LAYER_OF[m]]]
    assert not upward, "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], str] = {}
    for m, t, line in _edges():
        a, b = package_of(m), package_of(t)
        if a != b and a != "agentlog" and b != "agentlog":
            graph[a].add(b)
            where.setdefault((a, b), f"{m}:{line} -> {t}")
    cycles = _cycles(graph)
    detail = [f"{' <-> '.join(c)}: " + "; ".join(where[(a, b)] for a in c for b in c if (a, b) in where)
              for c in cycles]
    assert not cycles, "\n".join(detail)


def test_the_graph_finds_lazy_and_string_imports() -> None:
    """The walker sees what this test is about: imports inside functions and lazy tables."""
    targets = {t for t, _ in imports_of("agentlog.widgets")}
    assert "agentlog.widgets.waterfall" in targets  # the lazy table of agentlog.widgets
    inside = {t for t, _ in imports_of("agentlog.store.run")}
    assert "agentlog.folding" in inside  # imported inside Run._index
    assert "agentlog.analysis.rundiff" in {t for t, _ in imports_of("agentlog")}  # _EXPORTS


def test_using_the_store_loads_no_analysis_or_widgets(tmp_path: Path) -> None:
    code = f"""
import sys
import agentlog.store as st
store = st.Store({str(tmp_path)!r})
with store.create_run(run_id="r") as w:
    w.emit("note", {{"text": "hi"}})
run = store.run("r")
assert run.verify().ok and run.event(0).payload == {{"text": "hi"}} and len(list(run.iter_events())) == 1
run.state_at(0)
print(sorted(m for m in sys.modules if m.startswith(("agentlog.analysis", "agentlog.widgets"))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the methods attached from above ----------------------------------------------------------


def _registered() -> list[tuple[str, str, Any]]:
    from agentlog import accessors
    from agentlog.analysis.rundiff import RunDiff
    from agentlog.store import Run, Store, VerifyReport

    classes = {"Run": Run, "Store": Store, "VerifyReport": VerifyReport, "RunDiff": RunDiff}
    return [(owner, name, acc) for owner, cls in classes.items()
            for name, acc in accessors.accessors(cls._accessor_owner).items()]


def test_every_registered_method_resolves_and_has_a_docstring() -> None:
    found = _registered()
    assert {o for o, _, _ in found} == {"Run", "Store", "VerifyReport", "RunDiff"}
    for owner, name, acc in found:
        func = acc.function()
        assert callable(func), (owner, name)
        if not name.startswith("_"):
            assert inspect.getdoc(func), f"{owner}.{name} ({acc.target}) has no docstring"


def _stub_signature(sig: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def test_type_stubs_match_the_registered_functions() -> None:
    """The ``TYPE_CHECKING`` stubs (what mypy sees) take the parameters the functions take."""
    stubs = {}
    for owner, path in [("Run", ROOT / "store" / "run.py"), ("Store", ROOT / "store" / "store.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner)
        for node in ast.walk(cls):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                for fn in node.body:
                    if isinstance(fn, ast.FunctionDef):
                        args = fn.args
                        names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
                        if args.vararg:
                            names.append("*" + args.vararg.arg)
                        if args.kwarg:
                            names.append("**" + args.kwarg.arg)
                        stubs[(owner, fn.name)] = names[1:]
    for owner, name, acc in _registered():
        if owner not in ("Run", "Store"):
            continue
        assert (owner, name) in stubs, f"{owner}.{name} has no type stub"
        params = list(inspect.signature(acc.function()).parameters.values())[1:]
        names = [("*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else "") + p.name
                 for p in params]
        assert stubs.pop((owner, name)) == names, f"{owner}.{name}: stub and {acc.target} differ"
    assert not stubs, f"stubs with no registered function: {sorted(stubs)}"


@pytest.fixture(scope="module")
def sample() -> Any:
    return agentlog.examples.sample_store()


def test_attached_methods_work_like_methods(sample: Any) -> None:
    run = sample.run("sre-0001")
    assert {"events", "cost", "spans", "waterfall", "show", "run_id"} <= set(dir(run))
    assert {"runs", "cost", "sql", "cost_dashboard"} <= set(dir(sample))
    assert run.cost.__self__ is run and "Tokens, calls and cost summed by" in (run.cost.__doc__ or "")
    assert len(run.events) == len(run)  # a property
    assert run.run_id == run.id == "sre-0001"
    with pytest.raises(AttributeError, match="'Run' object has no attribute 'no_such_method'"):
        run.no_such_method  # noqa: B018
