"""Which element types ``cuda.atomic`` works on, as Numba's CUDA target types it (numba-cuda's ``cudadecl``), so that
the simulator refuses, in words, an atomic that a GPU compile refuses: Numba's simulator itself would update an
``int16`` or ``uint8`` array where the compile for a GPU stops with a ``TypingError``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import KernelFault

_FLOATS = ("float32", "float64")
_INTEGERS = ("int32", "uint32", "int64", "uint64")
#: the element types each ``cuda.atomic`` function has an implementation for on a GPU
TYPES: dict[str, tuple[str, ...]] = {
    **{op: _FLOATS + _INTEGERS for op in ("add", "sub", "max", "min", "nanmax", "nanmin")},
    **{op: _INTEGERS for op in ("and_", "or_", "xor", "exch", "compare_and_swap", "cas")},
    **{op: ("uint32", "uint64") for op in ("inc", "dec")},
}


class AtomicTypeError(KernelFault, TypeError):
    """``cuda.atomic.<op>`` on an array whose element type Numba's CUDA target has no atomic for."""


def check(op: str, array: Any) -> None:
    """Raise :class:`AtomicTypeError` when a GPU compile would reject ``cuda.atomic.<op>`` on ``array``."""
    allowed = TYPES.get(op) if isinstance(op, str) else None  # (not an atomic's name: nothing to check)
    dtype = getattr(array, "dtype", None)
    if allowed is None or dtype is None or np.dtype(dtype).name in allowed:
        return
    dt = np.dtype(dtype)
    name = dt.name
    raise AtomicTypeError(
        f"cuda.atomic.{op.rstrip('_')} on an array of {name}: Numba's CUDA target has no such atomic (it has "
        f"{', '.join(allowed)}), so a compile for a GPU stops with a TypingError; the simulator stops here too.",
        cause=_fix(op, dt, allowed),
    )


def _fix(op: str, dt: np.dtype, allowed: tuple[str, ...]) -> str:
    """What to change, in words, for ``cuda.atomic.<op>`` on elements of ``dt``."""
    if dt.kind in "iub" and dt.itemsize < 4:
        return (
            f"a {dt.name} counter is narrower than int32, and a GPU has atomics for 32- and 64-bit elements only: keep "
            "the counts in int32 or uint32 (a histogram's usual type) and convert after the kernel if you need to."
        )
    if dt.kind == "f" and "float32" not in allowed:
        return (
            f"cuda.atomic.{op.rstrip('_')} works on integers only; to add floats from many threads use "
            "cuda.atomic.add, which takes float32 and float64."
        )
    if dt.kind == "f":
        return f"a GPU has float atomics for float32 and float64: keep the values in float32 (not {dt.name})."
    return f"cuda.atomic.{op.rstrip('_')} takes {' or '.join(allowed)} elements: use an array of one of them."


class Checked:
    """A kernel's ``cuda.atomic``: each function checks the array's element type (:func:`check`), then runs ``inner``'s."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, op: str) -> Any:
        run = getattr(self._inner, op)

        def atomic(array: Any, *rest: Any) -> Any:
            check(op, array)
            return run(array, *rest)

        atomic.__name__ = op
        setattr(self, op, atomic)  # (found directly from now on)
        return atomic
