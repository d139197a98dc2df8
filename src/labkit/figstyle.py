"""Axis settings shared by labkit's plotly figures, so every chart reads the same way.

- :func:`log_axis`: a log axis labelled at powers of ten only (plotly otherwise labels 2, 3, 5, ... between them
  when a chart spans a few decades), with unlabelled minor ticks; an axis spanning less than a decade is
  labelled at 1, 2 and 5 times a power of ten.
- :func:`bytes_axis`: a log axis of sizes in bytes labelled ``4 KiB``, ``1 MiB``, ... at powers of two.
- :func:`count_axis`: a linear axis of whole numbers (no ``0.86`` ticks on a count of regions).
- :func:`human_bytes`: ``1048576`` -> ``"1 MiB"`` for hover text and tables.

Each returns a dict for ``fig.update_layout(xaxis=...)`` (or ``update_xaxes(**...)``); nothing imports plotly.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from .validate import require_number

__all__ = ["bytes_axis", "count_axis", "human_bytes", "log_axis"]


def _finite_positive(values: Iterable[Any]) -> list[float]:
    if isinstance(values, dict) or not hasattr(values, "__iter__"):
        from .errors import LabkitError
        from .validate import describe

        raise LabkitError(f"values must be a list or array of the numbers the axis shows, got {describe(values)}.")
    out = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(x) and x > 0:
            out.append(x)
    return out


def log_axis(values: Iterable[Any] = (), title: str | None = None, **extra: Any) -> dict[str, Any]:
    """A log axis for ``values``: labels at powers of ten (or 1-2-5 within a decade), minor ticks unlabelled."""
    xs = _finite_positive(values)
    span = math.log10(max(xs) / min(xs)) if len(xs) > 1 else 0.0
    plain = not xs or (min(xs) >= 1e-3 and max(xs) <= 1e5)  # 0.01 ... 10000 as numbers; beyond, 10^k
    axis: dict[str, Any] = {"type": "log", "exponentformat": "none" if plain else "power"}
    if span >= 1 or not xs:
        axis.update(dtick=1, minor={"ticks": "outside", "ticklen": 3, "showgrid": False})
    else:  # within a decade plotly would label bare digits: label a few round values in full instead
        lo, hi = min(xs), max(xs)
        ticks = sorted(
            {
                m * 10.0**e
                for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                for m in (1, 1.5, 2, 3, 4, 5, 6, 8)
                if lo * 0.97 <= m * 10.0**e <= hi * 1.03
            }
        )
        while len(ticks) > 6:
            ticks = ticks[::2]
        axis.update(tickmode="array", tickvals=ticks, ticktext=[f"{t:.2g}" for t in ticks])
    if title is not None:
        axis["title"] = title
    if "tickvals" in extra:
        axis.pop("minor", None)
        axis.pop("dtick", None)
    axis.update(extra)
    return axis


def human_bytes(n: float) -> str:
    """A size in bytes as people write it: ``512 B``, ``4 KiB``, ``1.5 MiB``, ``2 GiB``."""
    n = require_number(n, "a size in bytes", finite=False, nan=True)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def bytes_axis(values: Iterable[Any], title: str | None = None, **extra: Any) -> dict[str, Any]:
    """A log axis of byte sizes, labelled at powers of two (at most about eight labels) in KiB/MiB/GiB."""
    xs = _finite_positive(values)
    axis: dict[str, Any] = {"type": "log"}
    if xs:
        lo, hi = math.floor(math.log2(min(xs))), math.ceil(math.log2(max(xs)))
        step = max(1, math.ceil((hi - lo) / 8))
        step += step % 2 if step > 1 else 0  # even steps keep labels on 1, 4, 16, 64 ... of a unit
        ticks = [2.0**e for e in range(lo, hi + 1) if (e - lo) % step == 0]
        axis.update(tickmode="array", tickvals=ticks, ticktext=[human_bytes(t) for t in ticks])
    if title is not None:
        axis["title"] = title
    axis.update(extra)
    return axis


def count_axis(largest: float, title: str | None = None, **extra: Any) -> dict[str, Any]:
    """A linear axis of whole numbers from zero to ``largest``: integer ticks only (1, 2 or 5 times a power of ten)."""
    rough = max(1.0, require_number(largest, "largest", nan=True) / 5)
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    axis: dict[str, Any] = {"tickmode": "linear", "tick0": 0, "dtick": int(step), "tickformat": "d", "rangemode": "tozero"}
    if title is not None:
        axis["title"] = title
    axis.update(extra)
    return axis
