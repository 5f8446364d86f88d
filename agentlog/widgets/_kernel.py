"""What every notebook view shares: knowing whether a live kernel is there, and showing itself.

Outside a kernel (a static export, a plain ``python``), a view falls back to its static HTML;
inside one, to its ipywidgets view.
"""

from __future__ import annotations

from typing import Any

from .options import OPTIONS


def in_kernel() -> bool:
    """True inside a running Jupyter kernel (where widgets can show), else False."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebook extra
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_objects(*objs: Any, html_text: str | None = None) -> None:
    """``IPython.display.display`` each object (``html_text`` first, as HTML)."""
    from IPython.display import HTML, display
    if html_text is not None:
        display(HTML(html_text))  # type: ignore[no-untyped-call]
    display(*objs)  # type: ignore[no-untyped-call]


def as_widget(view: Any) -> Any:
    """An ipywidgets widget for a view: the view itself, its ``widget`` (property or method), or
    an ``Output`` it displays itself into."""
    import ipywidgets as widgets

    if isinstance(view, widgets.Widget):
        return view
    made = getattr(view, "widget", None)
    if callable(made) and not isinstance(made, widgets.Widget):
        made = made()
    if isinstance(made, widgets.Widget):
        return made
    out = widgets.Output()
    with out:
        from IPython.display import display
        display(view)  # type: ignore[no-untyped-call]
    return out


class KernelView:
    """Display protocol of a view with a static ``snapshot_html()`` and a lazy ``widget``."""

    widget: Any

    def snapshot_html(self) -> str:  # pragma: no cover - each view defines it
        raise NotImplementedError

    def _repr_html_(self) -> str | None:
        if OPTIONS["display"] != "html":
            return None
        return self.snapshot_html()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
        """In a live kernel, the interactive widget; elsewhere ``None`` (``_repr_html_`` is used)."""
        if not in_kernel():
            return None
        bundle: dict[str, Any] = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        return bundle


def figure_output(fig: Any) -> Any:
    """A plain plotly figure shown in an ``ipywidgets.Output`` (drawn by plotly's JupyterLab
    renderer). Used instead of a ``FigureWidget`` wherever no Python callback is needed: every
    FigureWidget is an anywidget model carrying plotly.js (about 5 MB), and JupyterLab's
    anywidget runtime gives each model 2 seconds to start; with several notebooks restored at
    once, those starts missed it ("[anywidget] Failed to initialize model")."""
    import ipywidgets as widgets
    from IPython.display import display

    out = widgets.Output()
    with out:
        display(fig)  # type: ignore[no-untyped-call]
    return out
