"""The public surface: every exported name resolves, and ``__all__`` is pinned and sorted."""

from __future__ import annotations

import subprocess
import sys

import agentlog as al


def test_all_is_sorted_and_resolves() -> None:
    names = [n for n in al.__all__ if n != "__version__"]
    assert names == sorted(names)
    for name in names:
        assert getattr(al, name) is not None, name


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        al.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


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
