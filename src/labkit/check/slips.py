"""Likely causes shared by the checks of labs 05–09: exact unit and bit factors, slips that give the same number,
and inputs a learner's call wrote into.

Each function returns a sentence for a ``Failed(..., cause=...)`` or None when the evidence does not support one.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

#: Exact factors between a wrong and a right figure, each the mark of one unit slip (wrong / right).
UNIT_FACTORS: tuple[tuple[float, str], ...] = (
    (8.0, "that is bits, not bytes: exactly 8 times the right figure. Divide by 8 bits per byte."),
    (1 / 8, "exactly an eighth of the right figure: bytes were divided by 8 as if they were bits. Keep bytes."),
    (1e3, "exactly 1,000 times the right figure: a unit slip (milliseconds for seconds, MB for GB, ...)."),
    (1e-3, "exactly 1,000 times too small: a unit slip (seconds for milliseconds, GB for MB, ...)."),
    (1e6, "exactly 10^6 times the right figure: a unit slip (microseconds for seconds, MB for TB, ...)."),
    (1e-6, "exactly 10^6 times too small: a unit slip (seconds for microseconds, ...)."),
    (1e9, "exactly 10^9 times the right figure: a unit slip (bytes for GB, Hz for GHz, ...)."),
    (1e-9, "exactly 10^9 times too small: a unit slip (GB for bytes, GHz for Hz, ...)."),
    (1e12, "exactly 10^12 times the right figure: a unit slip (FLOP for TFLOP, ...)."),
    (1e-12, "exactly 10^12 times too small: a unit slip (TFLOP for FLOP, ...)."),
    (1e9 / 2**30, "GiB (2^30 bytes) where the course uses GB (10^9 bytes)."),
    (2**30 / 1e9, "GB (10^9 bytes) where GiB (2^30 bytes) are meant, or the other way round."),
    (1e6 / 2**20, "MiB (2^20 bytes) where the course uses MB (10^6 bytes)."),
    (2**20 / 1e6, "MB (10^6 bytes) where MiB (2^20 bytes) are meant, or the other way round."),
)


def unit_cause(got: float, want: float, rel: float = 1e-3) -> str | None:
    """The unit slip whose exact factor ``got / want`` shows (within ``rel``), or None."""
    if not want or not np.isfinite(got) or not got:
        return None
    r = got / want
    for factor, cause in UNIT_FACTORS:
        if abs(r - factor) <= rel * factor:
            return cause
    return None


def merge_slips(slips: Mapping[str, float], rel: float) -> dict[str, float]:
    """``{cause: value}`` with causes whose values lie within ``rel`` of each other merged into one cause that names
    them all: when two slips give the same number, the check cannot tell which was made, so it names both."""
    groups: list[tuple[float, list[str]]] = []
    for cause, value in slips.items():
        for k, (v, causes) in enumerate(groups):
            if abs(value - v) <= rel * max(abs(v), 1e-300):
                causes.append(cause)
                break
        else:
            groups.append((value, [cause]))
    out: dict[str, float] = {}
    for value, causes in groups:
        if len(causes) == 1:
            out[causes[0]] = value
        else:
            out["two slips give this same number, so either: " + "; or ".join(c.rstrip(".") for c in causes) + "."] = value
    return out


def input_written(name: str, before: Any, after: Any, *, who: str = "your code") -> str | None:
    """A sentence naming input ``name`` when ``after`` differs from its copy ``before`` made before the call, in the
    words of :class:`labkit.check.inputs.InputGuard` (which the kernel checks use through ``grade``), or None."""
    from .inputs import change_detail, changed

    b, a = np.asarray(before), np.asarray(after)
    mask = changed(b, a)
    if not mask.any():
        return None
    return f"{who} wrote into its input `{name}`: {change_detail(b, a, mask)}"


INPUT_CAUSE = (
    "inputs are part of the answer: leave them as they are and write results only where the task says "
    "(a new array, or the output argument); an in-place update (`x -= ...`, `out=x`) destroys data the caller "
    "still needs."
)


def int32_wrap_cause(got: float, want: float, nbytes: int) -> str | None:
    """The cause when ``got`` is ``want`` with ``nbytes`` wrapped to a 32-bit signed integer (np.int32 arithmetic)."""
    wrapped = (int(nbytes) + 2**31) % 2**32 - 2**31
    if nbytes < 2**31 or not want or wrapped == nbytes:
        return None
    guess = want * wrapped / nbytes
    if abs(got - guess) <= 1e-6 * max(abs(guess), 1e-30):
        return (
            f"{nbytes:,} bytes is past 2^31: held in a 32-bit integer (np.int32) it wraps to {wrapped:,}. Byte "
            "counts of GPU memory need 64 bits: keep them Python ints (or np.int64)."
        )
    return None
