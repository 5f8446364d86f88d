"""Notebook display: HTML reprs, plotly figures and ipywidgets views of runs and stores.

- :mod:`~agentlog.widgets.html` — pure builders (a summary value in, an HTML string out) and
  the ``*_repr`` entry points that ``_repr_html_`` calls;
- :mod:`~agentlog.widgets.options` — :func:`set_options` (``display="text"`` turns the HTML
  off) and :func:`get_options`;
- :class:`Waterfall` (span tree on a time axis), :class:`Scrubber` (state at each event),
  :class:`ForkPanel` (fork at an event), :class:`DiffView` (two runs side by side),
  :class:`CostDashboard` (tokens and cost), and :func:`show` (all of them in tabs).

Importing this package loads neither pandas nor ipywidgets: the view classes are imported on
first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .options import get_options, set_options

_VIEWS: dict[str, str] = {
    "Waterfall": "agentlog.widgets.waterfall",
    "waterfall_figure": "agentlog.widgets.waterfall",
    "Scrubber": "agentlog.widgets.scrubber",
    "ForkPanel": "agentlog.widgets.forkpanel",
    "DiffView": "agentlog.widgets.diffview",
    "CostDashboard": "agentlog.widgets.costdash",
    "cost_figures": "agentlog.widgets.costdash",
    "show": "agentlog.widgets.tabs",
}

__all__ = ["CostDashboard", "DiffView", "ForkPanel", "Scrubber", "Waterfall", "cost_figures",
           "get_options", "set_options", "show", "waterfall_figure"]

if TYPE_CHECKING:  # pragma: no cover
    from .costdash import CostDashboard, cost_figures
    from .diffview import DiffView
    from .forkpanel import ForkPanel
    from .scrubber import Scrubber
    from .tabs import show
    from .waterfall import Waterfall, waterfall_figure


def __getattr__(name: str) -> Any:
    module = _VIEWS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentlog.widgets' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
