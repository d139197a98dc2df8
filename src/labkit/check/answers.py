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


UNIT_FACTORS: dict[float, str] = {
    8.0: "exactly 8 times the right value: bits where bytes were meant (a byte is 8 bits; 100 Gb/s is 12.5 GB/s)",
    1 / 8: "exactly 1/8 of the right value: bytes where bits were meant, or a divide by 8 too many (a byte is 8 bits)",
    1000.0: "exactly 1000 times the right value: a unit slip (TFLOP/s for PFLOP/s, GB/s for TB/s, ms for s)",
    1 / 1000: "exactly 1/1000 of the right value: a unit slip (PFLOP/s for TFLOP/s, TB/s for GB/s, s for ms)",
}


def unit_slips(want: float, slips: Mapping[str, float] | None = None, *, rel: float = 0.01) -> dict[str, float]:
    """The wrong values that exact factors of 8 and 1000 give (bits for bytes, a unit prefix off by one step), each
    with its cause, leaving out any that a more specific slip in ``slips`` already explains (lies within ``rel`` of)."""
    out: dict[str, float] = {}
    for factor, cause in UNIT_FACTORS.items():
        value = want * factor
        if value and not any(abs(v - value) <= rel * abs(value) for v in (slips or {}).values()):
            out[cause] = value
    return out


def judge(
    got: float,
    want: float,
    what: str,
    unit: str,
    *,
    rel: float,
    slips: Mapping[str, float] | None = None,
    otherwise: str | None = None,
    unit_factors: bool = False,
) -> str:
    """Pass ``got`` (a number already read with :func:`number`) when it is within ``rel`` of ``want`` and nearer to
    ``want`` than to any slip; otherwise raise :class:`Failed` naming the nearest slip (``{cause: wrong value}``) when
    ``got`` lies within ``rel`` of it. Two slips that give the same number (within ``rel``) are named together,
    since the number cannot tell them apart. ``unit_factors`` adds the slips of :func:`unit_slips` (exact factors
    of 8 and 1000). Returns a short description of the right answer."""
    slips = dict(slips or {})
    if unit_factors:
        slips.update(unit_slips(want, slips, rel=rel))
    candidates: list[tuple[float, str | None, float]] = [(abs(got - want) / abs(want) if want else abs(got), None, want)]
    for slip, wrong in slips.items():
        candidates.append((abs(got - wrong) / abs(wrong) if wrong else abs(got), slip, wrong))
    distance, cause, nearest = min(candidates, key=lambda c: c[0])
    value = f"{got:.4g} {unit}".rstrip()
    if cause is None and distance <= rel:
        return f"{what} = {value}."
    if cause is not None and distance <= rel:
        alike = [
            c for d, c, v in candidates if c is not None and d <= rel and abs(v - nearest) <= rel * max(abs(nearest), 1e-300)
        ]
        if len(alike) > 1:
            cause = "slips that give this same number (it cannot tell them apart): " + "; or ".join(alike)
        raise Failed(f"{what}: you have {value}; that is not it.", cause=cause)
    raise Failed(f"{what}: you have {value}, which does not match the data.", cause=otherwise or _the_computation())


def _the_computation() -> str:
    """The likely cause of a wrong figure that no known slip explains: how the running exercise's figure is computed
    (its second hint, the formula), rather than a general word about units."""
    from . import core

    running = core.running_exercise()
    try:
        hints = core.exercise_data(running)["hints"] if running else []
    except ValueError:
        hints = []
    if len(hints) >= 2:
        return f"none of the usual slips gives this number; recompute it step by step: {str(hints[1]).rstrip('.')}."
    return "none of the usual slips gives this number; recompute it step by step from the figures printed above (labkit.hw)."


def separation(want: float, slips: Mapping[str, float]) -> float:
    """The smallest relative distance from ``want`` to a slip's value: a check's tolerance must stay below half of it,
    so that no plausible wrong answer passes (used by the tests)."""
    return min((abs(v - want) / abs(want) for v in slips.values()), default=math.inf)
