"""Notebook display: the HTML reprs of runs, stores, diffs and verify reports, and their options.

- :mod:`~agentlog.widgets.html` — pure builders (a summary value in, an HTML string out) and
  the ``*_repr`` entry points that ``_repr_html_`` calls;
- :mod:`~agentlog.widgets.options` — :func:`set_options` (``display="text"`` turns the HTML
  off) and :func:`get_options`.

Importing this package loads neither pandas nor ipywidgets.
"""

from __future__ import annotations

from .options import get_options, set_options

__all__ = ["get_options", "set_options"]
