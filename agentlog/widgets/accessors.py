"""The views of a run or a store, as their methods: ``run.waterfall()``, ``run.scrub()``,
``run.fork_panel(program)``, ``run.diff_view(other)``, ``run.cost_dashboard()``, ``run.show()``,
``store.cost_dashboard()``.

The store cannot import this layer, so ``agentlog/__init__.py`` registers these functions on
``Run`` and ``Store`` (:mod:`agentlog.accessors`); the notebook reprs (``_repr_html_``) are
the ``*_repr`` builders of :mod:`agentlog.widgets.html`. Importing this module loads neither
pandas nor ipywidgets: each view is imported when it is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.run import Run
    from ..store.store import Store
    from .costdash import CostDashboard
    from .diffview import DiffView
    from .forkpanel import ForkPanel
    from .scrubber import Scrubber
    from .tabs import RunTabs
    from .waterfall import Waterfall

__all__ = ["cost_dashboard", "diff_view", "fork_panel", "scrub", "show", "waterfall"]


def waterfall(run: Run, **options: Any) -> Waterfall:
    """The span waterfall of this run: ``agentlog.widgets.Waterfall(run, **options)``."""
    from .waterfall import Waterfall
    return Waterfall(run, **options)


def scrub(run: Run, **options: Any) -> Scrubber:
    """Step through this run's state: ``agentlog.widgets.Scrubber(run, **options)``."""
    from .scrubber import Scrubber
    return Scrubber(run, **options)


def fork_panel(run: Run, program: Any, **options: Any) -> ForkPanel:
    """Fork this run at an event from a notebook: ``agentlog.widgets.ForkPanel(run, program)``."""
    from .forkpanel import ForkPanel
    return ForkPanel(run, program, **options)


def diff_view(run: Run, other: Run, **options: Any) -> DiffView:
    """This run and ``other`` side by side: ``agentlog.widgets.DiffView(run, other)``."""
    from .diffview import DiffView
    return DiffView(run, other, **options)


def cost_dashboard(source: Run | Store, **options: Any) -> CostDashboard:
    """Cost and token tables with charts, of a run or of every run in a store:
    ``agentlog.widgets.CostDashboard(source)``."""
    from .costdash import CostDashboard
    return CostDashboard(source, **options)


def show(run: Run, **options: Any) -> RunTabs:
    """One tabbed view of this run (overview, waterfall, scrub, cost, graph, verify):
    ``agentlog.widgets.show(run)``."""
    from .tabs import show
    return show(run, **options)
