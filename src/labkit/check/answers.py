"""Grading numeric answers: read a learner's number, compare it, and name the likely slip."""

from __future__ import annotations

import math
from typing import Any

from .core import Failed


def number(value: Any, what: str, *, positive: bool = False) -> float:
    """``value`` as a finite float, or :class:`Failed` naming ``what`` (booleans and strings are not numbers)."""
    if isinstance(value, (bool, str, bytes)):
        raise Failed(f"{what} should be a number, got {type(value).__name__} {value!r}.")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise Failed(f"{what} should be a number, got {type(value).__name__} {value!r}.") from None
    if not math.isfinite(x):
        raise Failed(f"{what} is {x}, not a finite number.")
    if positive and x <= 0:
        raise Failed(f"{what} is {x}; it should be a positive number.")
    return x


def close(got: float, want: float, rel: float = 0.01) -> bool:
    """``got`` within ``rel`` (relative) of ``want``."""
    return abs(got - want) <= rel * abs(want) + 1e-12


def ratio_cause(got: float, want: float, causes: dict[float, str]) -> str | None:
    """The cause whose factor ``got / want`` matches (within 1%), e.g. ``{2.0: "counted both directions"}``."""
    if want == 0:
        return None
    r = got / want
    for factor, cause in causes.items():
        if close(r, factor, 0.01):
            return cause
    return None
