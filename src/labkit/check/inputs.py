"""Inputs are part of the answer: a kernel or host function that writes into an array it was given to read fails.

Every graded launch (:func:`labkit.check.harness.grade`, so ``run_case`` and every :class:`~labkit.check.harness.Launch`)
copies each input array back after the launch and compares it with the host array it was copied from; a check of a
host function does the same with :func:`inputs_kept`::

    from labkit.check.inputs import inputs_kept

    with inputs_kept({"x": x, "y": y}, who="repeated_saxpy"):
        got = repeated_saxpy(a, x, y, steps)

An exercise whose statement says it works in place names those arguments: ``Launch(..., in_place=("y",))`` or
``inputs_kept(..., in_place=("y",))``. Expected values must be computed from the check's own host arrays (or from
copies taken before the call), never from what the learner's code may have changed.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..sim.memory import fmt_index
from .verdicts import Failed


def host_copy(value: Any) -> np.ndarray | None:
    """A host copy of an array argument (a NumPy array, or a device array with ``copy_to_host``), None otherwise."""
    if isinstance(value, np.ndarray):
        return value.copy()
    fetch = getattr(value, "copy_to_host", None)
    if callable(fetch) and bool(getattr(value, "ndim", 0)):
        try:
            return np.asarray(fetch()).copy()
        except Exception:  # noqa: BLE001 - an array that cannot be read back is not compared
            return None
    get = getattr(value, "get", None)  # a CuPy array
    if callable(get) and hasattr(value, "dtype") and hasattr(value, "shape") and bool(getattr(value, "ndim", 0)):
        try:
            return np.asarray(get()).copy()
        except Exception:  # noqa: BLE001
            return None
    return None


def changed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Mask of the elements of ``after`` that differ from ``before`` (NaN equals NaN; a changed shape: all of them)."""
    if before.shape != after.shape:
        return np.ones(before.shape, dtype=bool)
    if before.dtype.kind in "fc" or after.dtype.kind in "fc":
        same = (before == after) | (np.isnan(before) & np.isnan(after))
    else:
        same = before == after
    return ~np.asarray(same, dtype=bool)


def fmt_value(x: Any) -> str:
    """A value as a learner reads it: 0.25 rather than np.float32(0.25)."""
    x = x.item() if hasattr(x, "item") else x
    return f"{x:.7g}" if isinstance(x, float) else repr(x)


def change_detail(before: np.ndarray, after: np.ndarray, mask: np.ndarray) -> str:
    """What changed between ``before`` and ``after`` (``mask``: :func:`changed`), in the words of a failure: the new
    shape, or how many elements changed and the first of them with its old and new value."""
    if before.shape != after.shape:
        return f"its shape went from {before.shape} to {after.shape}"
    idx = tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()
    return (
        f"{int(mask.sum())} of {mask.size} elements changed, the first at index {fmt_index(idx)} "
        f"(was {fmt_value(before[idx])}, now {fmt_value(after[idx])})"
    )


class InputGuard:
    """Copies of some input arrays taken now, to compare with the arrays after a call (:meth:`verify`).

    ``arrays`` maps each argument's name to the array the learner's code receives (host or device); ``who`` is how a
    failure names the code (``"your kernel"``, ``"repeated_saxpy"``); ``in_place`` names arguments the statement lets
    the code change."""

    def __init__(self, arrays: Mapping[str, Any], *, who: str = "your function", in_place: Sequence[str] = ()) -> None:
        self.who = who
        self._live = {name: value for name, value in arrays.items() if name not in set(in_place)}
        self._before = {name: copy for name, value in self._live.items() if (copy := host_copy(value)) is not None}

    def watch(self, name: str, live: Any, before: np.ndarray) -> None:
        """Also compare ``live`` (what the code receives) after the call with ``before``, a host array the code never
        sees (a launch's host input, whose device copy the kernel gets)."""
        self._live[name] = live
        self._before[name] = before

    def first_change(self) -> tuple[str, np.ndarray, np.ndarray, np.ndarray] | None:
        """(name, mask of changed elements, before, after) of the first argument that changed, or None."""
        for name, before in self._before.items():
            after = host_copy(self._live[name])
            if after is None:
                continue
            mask = changed(before, after)
            if mask.any():
                return name, mask, before, after
        return None

    def problem(self) -> Failed | None:
        """The :class:`Failed` naming the first changed argument, or None when every input is as it was."""
        found = self.first_change()
        if found is None:
            return None
        name, mask, before, after = found
        return Failed(
            f"{self.who} wrote into its input `{name}`: {change_detail(before, after, mask)}.",
            cause=f"`{name}` is an input: read it, never write it (the check compares every input after the "
            "call with a copy taken before). Store results only in the output the exercise names; a "
            "kernel that overwrites its input also breaks any later use of that input.",
        )

    def verify(self) -> None:
        """Raise the :meth:`problem`, if any."""
        failure = self.problem()
        if failure is not None:
            raise failure


@contextlib.contextmanager
def inputs_kept(arrays: Mapping[str, Any], *, who: str = "your function", in_place: Sequence[str] = ()) -> Iterator[InputGuard]:
    """Run the ``with`` block (a call of the learner's code), then raise :class:`Failed` naming the first of ``arrays``
    the block changed (see :class:`InputGuard`). An exception inside the block passes through unchanged."""
    guard = InputGuard(arrays, who=who, in_place=in_place)
    yield guard
    guard.verify()
