"""Grading numeric answers: read a learner's number, compare it, and name the likely slip."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from .core import Failed


def number(value: Any, what: str, *, positive: bool = False, finite: bool = True) -> float:
    """``value`` as a float, or :class:`Failed` naming ``what`` (booleans and strings are not numbers, nor are
    NumPy arrays of more than one element); infinities and NaN only where ``finite`` is False."""
    if isinstance(value, (bool, str, bytes, np.bool_, np.str_, np.bytes_)) or (isinstance(value, np.ndarray) and value.size != 1):
        raise Failed(f"{what} should be a number, got {type(value).__name__} {value!r}.")
    if isinstance(value, np.ndarray) and value.dtype.kind not in "iuf":
        raise Failed(f"{what} should be a number, got an array of {value.dtype}.")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise Failed(f"{what} should be a number, got {type(value).__name__} {value!r}.") from None
    if finite and not math.isfinite(x):
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


def judge(got: float, want: float, what: str, unit: str, *, rel: float, slips: Mapping[str, float] | None = None,
          otherwise: str = "recompute from the figures printed above (labkit.hw) and check the units") -> str:
    """Pass ``got`` (a number already read with :func:`number`) when it is within ``rel`` of ``want`` and nearer to
    ``want`` than to any slip; otherwise raise :class:`Failed` naming the nearest slip (``{cause: wrong value}``) when
    ``got`` lies within ``rel`` of it. Returns a short description of the right answer."""
    candidates = [(abs(got - want) / abs(want) if want else abs(got), None)]
    for cause, value in (slips or {}).items():
        candidates.append((abs(got - value) / abs(value) if value else abs(got), cause))
    distance, cause = min(candidates, key=lambda c: c[0])
    value = f"{got:.4g} {unit}".rstrip()
    if cause is None and distance <= rel:
        return f"{what} = {value}."
    if cause is not None and distance <= rel:
        raise Failed(f"{what}: you have {value}; that is not it.", cause=cause)
    raise Failed(f"{what}: you have {value}, which does not match the data.", cause=otherwise)


def separation(want: float, slips: Mapping[str, float]) -> float:
    """The smallest relative distance from ``want`` to a slip's value: a check's tolerance must stay below half of it,
    so that no plausible wrong answer passes (used by the tests)."""
    return min((abs(v - want) / abs(want) for v in slips.values()), default=math.inf)
