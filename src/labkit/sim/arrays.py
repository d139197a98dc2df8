"""Arrays as a kernel sees them in a plain (not strict) simulator launch.

Numba's simulator hands a kernel its arrays through two layers of wrappers, and builds a new tuple for every
``a.shape``; in a loop that is most of the time a kernel takes. :class:`KernelArray` is one thin layer over the
NumPy array with GPU rules where NumPy differs:

- an element index below zero is out of bounds (NumPy would count from the end);
- elements of integer types narrower than 64 bits read as 64-bit integers (:data:`~labkit.sim.integers.READS`:
  Python ints for 8 bits, ``np.int64`` tagged with its width for 16 and 32, so that ``cuda.clz`` counts 32 bits of
  an ``int32``) and stores wrap to the element's width, as Numba types them on a GPU (:mod:`labkit.sim.integers`);
- ``shape``, ``size``, ``ndim`` and ``dtype`` are plain attributes; anything else is the NumPy array's.

The strict memory model has its own arrays (:mod:`labkit.sim.memory`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .integers import READS, Int32, reads_for, store_value


class KernelArray:
    """A kernel's view of an array argument in a plain launch (see the module docstring)."""

    __slots__ = ("live", "shape", "size", "ndim", "dtype")

    def __init__(self, live: np.ndarray) -> None:
        self.live = live
        self.shape, self.size, self.ndim, self.dtype = live.shape, live.size, live.ndim, live.dtype

    def __len__(self) -> int:
        return self.shape[0]

    def __getattr__(self, name: str) -> Any:  # (only for names not above: a kernel rarely needs them)
        return getattr(self.live, name)

    def __getitem__(self, idx: Any) -> Any:
        tp = type(idx)
        if tp is int or tp is Int32:  # (Int32: cuda.threadIdx.x)
            if idx >= 0:
                return self.live[idx]
        elif tp is tuple and len(idx) == 2:
            i, j = idx
            if type(i) in _INTS and type(j) in _INTS and i >= 0 and j >= 0:
                return self.live[idx]
        return self.live[_checked(idx, self.shape)]

    def __setitem__(self, idx: Any, value: Any) -> None:
        tp = type(idx)
        if tp is int or tp is Int32:
            if idx >= 0:
                self.live[idx] = value
                return
        elif tp is tuple and len(idx) == 2:
            i, j = idx
            if type(i) in _INTS and type(j) in _INTS and i >= 0 and j >= 0:
                self.live[idx] = value
                return
        self.live[_checked(idx, self.shape)] = value

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """A NumPy ufunc called in a kernel (``np.sin(x, out)``, as numba-cuda allows): on the arrays themselves."""
        return array_ufunc(ufunc, method, inputs, kwargs)


class NarrowIntArray(KernelArray):
    """A :class:`KernelArray` of int8/16/32 or uint8/16/32 elements: reads widen, stores wrap (as on a GPU)."""

    __slots__ = ("_wide",)

    def __init__(self, live: np.ndarray) -> None:
        super().__init__(live)
        self._wide = reads_for(live.dtype) or READS[live.dtype]  # (this launch's: labkit.sim.integers.reads_for)

    def __getitem__(self, idx: Any) -> Any:
        value = KernelArray.__getitem__(self, idx)
        return self._wide(value) if isinstance(value, np.integer) else value

    def __setitem__(self, idx: Any, value: Any) -> None:
        KernelArray.__setitem__(self, idx, store_value(value, self.dtype))


_INTS = (int, Int32)


def _unwrap(value: Any) -> Any:
    if isinstance(value, KernelArray):
        return value.live
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    return value


def array_ufunc(ufunc: Any, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc`` (``method``) on kernel arrays: applied to the NumPy arrays under them; what it writes is written."""
    if method != "__call__":
        return NotImplemented
    inputs = tuple(_unwrap(v) for v in inputs)
    kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
    return getattr(ufunc, method)(*inputs, **kwargs)


def _checked(idx: Any, shape: tuple[int, ...]) -> Any:
    """``idx`` with every integer index checked: below zero is out of bounds, as on a GPU."""
    parts = idx if isinstance(idx, tuple) else (idx,)
    for axis, i in enumerate(parts):
        if isinstance(i, (int, np.integer)) and not isinstance(i, bool) and i < 0:
            size = shape[axis] if axis < len(shape) else 0
            raise IndexError(f"index {int(i)} is out of bounds for axis {axis} with size {size}")
    return idx


def kernel_array(live: np.ndarray) -> KernelArray:
    """The view a kernel gets of ``live``."""
    narrow = live.dtype.kind in "iu" and live.dtype.itemsize < 8
    return (NarrowIntArray if narrow else KernelArray)(live)
