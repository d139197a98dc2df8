"""Reference kernels of lab 02 (first kernels): SAXPY and copy with grid-stride loops, a 2-D greyscale kernel.

The kernels are plain functions here; :func:`labkit.kernels.get` compiles them with ``cuda.jit`` once the mode
is chosen (so importing this module never imports numba). ``cuda`` below is set at that moment.
"""

from __future__ import annotations

from typing import Any

import numpy as np

cuda: Any = None  # numba.cuda, set by labkit.kernels before the first jit


def saxpy(a, x, y, out):
    """out[i] = a * x[i] + y[i], grid-stride loop: correct for any grid size."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, out.size, stride):
        out[i] = a * x[i] + y[i]


def copy(src, dst):
    """dst[i] = src[i], grid-stride loop."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, dst.size, stride):
        dst[i] = src[i]


def grayscale(img, out):
    """out[row, col] = round(0.299 R + 0.587 G + 0.114 B); x (fastest) runs along a row, i.e. over columns.

    The constants are float32: a bare ``0.299`` is a float64 in Numba and would put FP64 instructions in the PTX."""
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        v = np.float32(0.299) * img[row, col, 0] + np.float32(0.587) * img[row, col, 1] + np.float32(0.114) * img[row, col, 2]
        out[row, col] = int(v + np.float32(0.5))


def to_unit(img, out):
    """out[row, col] = img[row, col] / 127.5 - 1 in float32: uint8 pixels to [-1, 1], no FP64 instruction."""
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = img[row, col] / np.float32(127.5) - np.float32(1.0)
