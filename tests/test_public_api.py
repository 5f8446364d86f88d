"""The public surface: ``__all__`` is the committed list, every name resolves, and the names
that are reachable but not starred (``al.open``) or renamed (``al.http``) behave as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agentlog as al

PINNED = Path(__file__).with_name("public_api.txt")


def test_all_is_the_committed_list() -> None:
    """A change to the public names is a change to tests/public_api.txt, made on purpose."""
    pinned = PINNED.read_text(encoding="utf-8").split()
    assert al.__all__ == pinned


def test_all_is_sorted_and_resolves() -> None:
    assert al.__all__ == sorted(al.__all__)
    for name in al.__all__:
        assert getattr(al, name) is not None, name


def test_every_export_is_starred_but_open() -> None:
    assert set(al.__all__) == (set(al._EXPORTS) - {"open"}) | {"__version__"}


def test_star_import_does_not_shadow_the_builtin_open() -> None:
    namespace: dict[str, object] = {}
    exec("from agentlog import *", namespace)  # noqa: S102 - the point of the test
    assert "open" not in namespace and "transport" in namespace and "DivergenceError" in namespace
    from agentlog.store import open as open_run
    assert al.open is open_run  # still reachable as al.open


def test_divergence_error_is_exported() -> None:
    from agentlog.errors import DivergenceError, ReplayError
    assert al.DivergenceError is DivergenceError and issubclass(DivergenceError, ReplayError)


def test_transport_is_the_httpx_capture_module_and_http_is_its_old_name() -> None:
    from agentlog.capture import transport
    assert al.transport is transport
    with pytest.warns(DeprecationWarning, match=r"al\.http is now al\.transport"):
        assert al.http is transport


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        al.no_such_thing  # noqa: B018


def test_import_agentlog_pulls_in_nothing_heavy() -> None:
    code = ("import sys, agentlog, agentlog.events, agentlog.canonical, agentlog.chain\n"
            "heavy = {'pyarrow', 'pandas', 'ipywidgets', 'plotly', 'duckdb'} & set(sys.modules)\n"
            "print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_widgets_all_lists_every_lazy_view() -> None:
    from agentlog import widgets
    assert set(widgets.__all__) == set(widgets._VIEWS) | {"get_options", "set_options"}
    for name in widgets.__all__:
        assert getattr(widgets, name) is not None, name


def test_fold_is_the_function_like_fork_replay_and_diff() -> None:
    import agentlog.folding  # importing the package must not put a module in its place
    from agentlog.events import Event

    ops = [{"op": "add", "path": "/n", "value": 2}]
    state = al.fold([Event(seq=0, type="state.patch", payload={"ops": ops})])
    assert callable(al.fold) and al.fold is agentlog.folding.fold
    assert dict(state["vars"]) == {"n": 2}
