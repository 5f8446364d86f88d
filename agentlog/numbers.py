"""Money, durations and counts as every view, table and command shows them: one helper for each,
used everywhere (pure: the analysis texts, the CLI and the widgets all format through it).

**Money is summed exactly.** A recorded cost is a float (the ``cost_usd`` column); a sum of
floats drifts (``0.014584999999999997``). :func:`usd` reads a value as a :class:`~decimal.Decimal`
through its shortest repr and rounds it to a pico-dollar (``1e-12``, far below any price per
token), which also drops the drift of a sum already made in floats; :func:`usd_sum` adds such
values exactly. Views sum with :func:`usd_sum`, never with ``float`` addition.

**Money is shown at a precision that fits the amount** (:func:`fmt_usd`): cents from one
dollar up (``$1,234.50``), three significant digits below (``$0.0146``, ``$0.000593``,
``$0.00000075``), ``$0`` for nothing, ``–`` for a missing value. Cards, tables, trees,
patches, axes (:func:`usd_axis`) and the CLI all call it, so one amount reads the same
everywhere.

**One word, one meaning** (:data:`PAID`, :data:`TOTAL`): *paid* is what a run's own events
cost; for a fork, *total incl. inherited prefix* adds the events it shares with its parent
(which the parent paid for). Every view that shows both uses these labels, and a fork's other
figures that count the prefix say so (:data:`INCL_PREFIX`).

>>> fmt_usd(0.014584999999999997), fmt_usd(0.000593), fmt_usd(1234.5), fmt_usd(0.0)
('$0.0146', '$0.000593', '$1,234.50', '$0')
>>> fmt_usd(-0.00331, sign=True), fmt_usd(0.0005929, sign=True), fmt_usd(None)
('−$0.00331', '+$0.000593', '–')
>>> usd_sum([0.1, 0.2]) == Decimal("0.3"), float(usd_sum([0.1, None, 0.2]))
(True, 0.3)
>>> fmt_ms(203.000069), fmt_ms(61_500), fmt_ms(450_000), fmt_ms(None)
('203 ms', '1 min 1.5 s', '7.5 min', '–')
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Final

__all__ = ["INCL_PREFIX", "PAID", "PICO", "SIGNIFICANT", "TOTAL", "USD_PATTERN", "fmt_cost", "fmt_ms", "fmt_scalar", "fmt_usd",
           "is_missing", "unknown_text", "usd", "usd_axis", "usd_sum", "usd_sum_known"]

#: The unit money is rounded to when read: a pico-dollar.
PICO: Final = Decimal("1e-12")
#: Significant digits of an amount below one dollar.
SIGNIFICANT: Final = 3
#: What a run's own events cost.
PAID: Final = "paid"
#: Said of a fork's figure (events, calls, tokens, cost) that counts the prefix it shares with
#: its parent, beside the run's own.
INCL_PREFIX: Final = "incl. inherited prefix"
#: What a fork's events cost with the prefix it shares with its parent.
TOTAL: Final = f"total {INCL_PREFIX}"
#: A regular expression every amount :func:`fmt_usd` writes matches (tests check views with it).
USD_PATTERN: Final = r"[+−]?\$(?:0|\d{1,3}(?:,\d{3})*\.\d{2}|0\.0*[1-9]\d{0,2})(?![\d])"

_MINUS: Final = "−"  # U+2212: a minus sign, not a hyphen


def is_missing(value: Any) -> bool:
    """True for ``None``, NaN, NaT and ``pd.NA``."""
    if value is None:
        return True
    try:
        return bool(value != value)  # noqa: PLR0124 - NaN and NaT differ from themselves; pd.NA raises
    except TypeError:
        return True


def usd(value: Any) -> Decimal | None:
    """A dollar amount as an exact :class:`~decimal.Decimal` rounded to a pico-dollar;
    ``None`` when missing.

    A float is read through its shortest repr (``0.1`` is ``Decimal("0.1")``, not
    ``0.1000000000000000055…``).

    >>> usd(0.1), usd("0.25"), usd(None), usd(0.013392499999999998)
    (Decimal('0.100000000000'), Decimal('0.250000000000'), None, Decimal('0.013392500000'))
    """
    if is_missing(value):
        return None
    if isinstance(value, Decimal):
        d = value
    else:
        try:
            d = Decimal(repr(float(value)))
        except (InvalidOperation, ValueError, TypeError, OverflowError):
            return None
    if not d.is_finite():
        return None
    return d.quantize(PICO, rounding=ROUND_HALF_UP)


def usd_sum(values: Iterable[Any]) -> Decimal:
    """The exact sum of dollar amounts, missing ones left out (never counted as 0 elsewhere:
    count them apart, see :func:`unknown_text`)."""
    total = Decimal(0)
    for v in values:
        d = usd(v)
        if d is not None:
            total += d
    return total


def _round_sig(d: Decimal, digits: int) -> Decimal:
    exp = d.adjusted() - digits + 1  # the exponent of the last digit kept
    return d.quantize(Decimal(1).scaleb(exp), rounding=ROUND_HALF_UP)


def fmt_usd(value: Any, *, sign: bool = False) -> str:
    """Dollars at a precision that fits the amount (see the module docstring); ``–`` when missing.

    Args:
        value: a float, int, Decimal or numeric string.
        sign: write ``+`` before a positive amount (and ``−`` before a negative one, always).
    """
    d = usd(value)
    if d is None:
        return "–"
    if d == 0:
        return "$0"
    neg = d < 0
    a = -d if neg else d
    if a >= 1 or _round_sig(a, SIGNIFICANT) >= 1:
        text = f"{a.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,.2f}"
    else:
        r = _round_sig(a, SIGNIFICANT)
        text = format(r.normalize(), "f")
    prefix = _MINUS if neg else ("+" if sign else "")
    return f"{prefix}${text}"


def unknown_text(calls: Any) -> str:
    """``+ N unknown`` for calls whose cost the log does not know (empty for none)."""
    n = 0 if is_missing(calls) else int(calls)
    return f" + {n:,} unknown" if n else ""


def fmt_cost(value: Any, unknown: Any = 0, *, sign: bool = False) -> str:
    """A cost cell: the known dollars (:func:`fmt_usd`), ``+ N unknown`` for the calls whose
    cost is unknown, and ``unknown`` when no cost is known (an unknown cost never reads $0).

    >>> fmt_cost(0.25), fmt_cost(0.25, 2), fmt_cost(None, 3), fmt_cost(0.0)
    ('$0.25', '$0.25 + 2 unknown', 'unknown', '$0')
    """
    if is_missing(value):
        return "unknown"
    return fmt_usd(value, sign=sign) + unknown_text(unknown)


def usd_sum_known(values: Iterable[Any]) -> Decimal | None:
    """:func:`usd_sum`, or ``None`` when no value is known (so the total reads ``unknown``)."""
    known = [d for d in map(usd, values) if d is not None]
    return sum(known, Decimal(0)) if known else None


def usd_axis(top: float, *, ticks: int = 5) -> dict[str, Any]:
    """A plotly axis (``tickvals``, ``ticktext``, ``range``) from $0 to at least ``top``, its
    labels written by :func:`fmt_usd` at round steps.

    >>> usd_axis(0.00874)["ticktext"]
    ['$0', '$0.002', '$0.004', '$0.006', '$0.008', '$0.01']
    """
    top = float(top) if not is_missing(top) and math.isfinite(float(top)) and top > 0 else 0.001
    raw = top / ticks
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    count = math.ceil(top / step - 1e-9)
    vals = [float(usd(step * k) or 0) for k in range(count + 1)]
    return {"tickmode": "array", "tickvals": vals, "ticktext": [fmt_usd(v) for v in vals],
            "range": [0, vals[-1] * 1.04]}


def fmt_ms(value: Any) -> str:
    """A duration in readable units: ``850 ms``, ``3.2 s``, ``1 min 5.0 s``, ``7.5 min`` (whole
    minutes past five), ``1 h 2 min``, ``3.2 days``; ``–`` when missing."""
    if is_missing(value):
        return "–"
    ms = float(value)
    if ms < 1000:
        return f"{ms:.0f} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    if s < 300:
        return f"{int(s // 60)} min {s % 60:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    if s < 2 * 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{s / 86400:.1f} days"


def is_money_key(key: str) -> bool:
    """True for a key that holds dollars (``cost_usd``, ``total_cost``, ``usd``)."""
    k = key.lower()
    return "cost" in k or "usd" in k


def fmt_scalar(value: Any, key: str = "") -> str:
    """A JSON scalar as a tree or a patch shows it: dollars under a money key (``cost_usd``) by
    :func:`fmt_usd`, other floats to six significant digits (no float noise), durations under
    a ``*_ms`` key kept as numbers; strings and the rest as JSON.

    >>> fmt_scalar(0.013392499999999998, "cost_usd"), fmt_scalar(203.000069, "duration_ms")
    ('$0.0134', '203')
    >>> fmt_scalar(True), fmt_scalar("a"), fmt_scalar(12)
    ('true', '"a"', '12')
    """
    import json
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)) and is_money_key(key) and not isinstance(value, bool):
        return fmt_usd(value)
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else json.dumps(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
