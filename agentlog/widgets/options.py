"""Display options for the notebook reprs, in the manner of ``xarray.set_options``.

>>> from agentlog.widgets import get_options, set_options
>>> get_options()["display"]
'html'
>>> with set_options(display="text"):
...     get_options()["display"]
'text'
>>> set_options(display="pictures")
Traceback (most recent call last):
...
ValueError: display must be one of 'html', 'text'; got 'pictures'
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Final, Self

__all__ = ["OPTIONS", "get_options", "set_options"]

#: The current options: ``display`` (``html``, or ``text`` to turn the HTML reprs off for
#: plain-text consumers, so that notebooks and reports show ``repr()``) and ``fold_rows``
#: (tables longer than this start folded).
OPTIONS: Final[dict[str, Any]] = {"display": "html", "fold_rows": 12}

_VALID: Final = {"display": ("html", "text")}


class set_options:
    """Set display options for good, or within a ``with`` block.

    Args:
        display: ``html`` (default) or ``text``: with ``text``, ``_repr_html_`` returns
            ``None`` and notebooks fall back to the plain ``repr``.
        fold_rows: sections with more rows than this start folded.

    Raises:
        ValueError: an unknown option or value.
    """

    def __init__(self, **options: Any) -> None:
        for name, value in options.items():
            if name not in OPTIONS:
                raise ValueError(f"unknown option {name!r}; the options are {', '.join(OPTIONS)}")
            valid = _VALID.get(name)
            if valid is not None and value not in valid:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, valid))}; got {value!r}")
            if name == "fold_rows" and (not isinstance(value, int) or value < 0):
                raise ValueError(f"fold_rows must be a non-negative int; got {value!r}")
        self._old = {name: OPTIONS[name] for name in options}
        OPTIONS.update(options)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        OPTIONS.update(self._old)


def get_options() -> dict[str, Any]:
    """A copy of the current options."""
    return dict(OPTIONS)
