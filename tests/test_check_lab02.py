"""Lab 02 checks accept correct kernels (the reference and other valid variants) and reject wrong ones."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402  (after setup: the simulator in sim mode)

from labkit import check, kernels  # noqa: E402


def status(fn, answer) -> str:
    return fn(answer).status


# ----------------------------------------------------------------------------- saxpy
@cuda.jit
def saxpy_while(a, x, y, out):  # a valid variant: while loop, own stride arithmetic
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    while i < out.shape[0]:
        out[i] = a * x[i] + y[i]
        i += cuda.blockDim.x * cuda.gridDim.x


@cuda.jit
def saxpy_no_stride(a, x, y, out):  # one element per thread: wrong when the grid is small
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_no_bounds(a, x, y, out):
    i = cuda.grid(1)
    out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_off_by_one(a, x, y, out):
    for i in range(cuda.grid(1), out.size + 1, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_block_stride(a, x, y, out):  # strides by the block, not the grid: threads of different blocks collide
    for i in range(cuda.grid(1), out.size, cuda.blockDim.x):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_empty(a, x, y, out):
    pass


def test_saxpy_accepts() -> None:
    assert status(check.saxpy, kernels.get("saxpy")) == "passed"
    assert status(check.saxpy, saxpy_while) == "passed"


@pytest.mark.parametrize("k", [saxpy_no_stride, saxpy_no_bounds, saxpy_off_by_one, saxpy_block_stride])
def test_saxpy_rejects(k) -> None:
    r = check.saxpy(k)
    assert r.status == "failed", r.message


def test_saxpy_skeletons_unsolved() -> None:
    assert status(check.saxpy, saxpy_empty) == "unsolved"
    assert status(check.saxpy, ...) == "unsolved"


@cuda.jit
def saxpy_four_rounds(a, x, y, out):  # a fixed number of grid-stride rounds: enough for small tests only
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for r in range(4):
        i = start + r * stride
        if i < out.size:
            out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_stride_256(a, x, y, out):  # assumes 256 threads per block in the stride
    for i in range(cuda.grid(1), out.size, 256 * cuda.gridDim.x):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_small_block_only(a, x, y, out):  # threads past 512 of a block idle: the 1024-thread block catches it
    if cuda.threadIdx.x < 512:
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = a * x[i] + y[i]


@pytest.mark.parametrize("k", [saxpy_four_rounds, saxpy_stride_256, saxpy_small_block_only])
def test_saxpy_rejects_shortcuts(k) -> None:
    r = check.saxpy(k)
    assert r.status == "failed", r.message


def test_saxpy_feedback_names_size_and_cause() -> None:
    import re

    r = check.saxpy(saxpy_no_stride)
    assert re.search(r"n=\d+, [12] block\(s\) of (32|96) threads", r.message) and "grid-stride" in r.cause
    r = check.saxpy(saxpy_no_bounds)
    assert "out of bounds" in r.message or "indexed element" in r.message


# ----------------------------------------------------------------------------- grayscale
@cuda.jit
def grey_int_math(img, out):  # valid variant: integer arithmetic with rounding, 0.5 up
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = (299 * np.int32(img[row, col, 0]) + 587 * np.int32(img[row, col, 1])
                         + 114 * np.int32(img[row, col, 2]) + 500) // 1000


@cuda.jit
def grey_swapped(img, out):
    row, col = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2] + 0.5)


@cuda.jit
def grey_truncates(img, out):  # wrong dtype handling: float stored into uint8
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = 0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2]


@cuda.jit
def grey_no_bounds(img, out):
    col, row = cuda.grid(2)
    out[row, col] = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2] + 0.5)


@cuda.jit
def grey_partial(img, out):  # only the first row of each block... writes rows where y is even
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1] and row % 2 == 0:
        out[row, col] = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2] + 0.5)


def test_grayscale() -> None:
    assert status(check.grayscale, kernels.get("grayscale")) == "passed"
    assert status(check.grayscale, grey_int_math) == "passed"
    r = check.grayscale(grey_swapped)
    assert r.status == "failed" and "column" in (r.cause or "")
    r = check.grayscale(grey_truncates)
    assert r.status == "failed" and "truncat" in r.message
    assert status(check.grayscale, grey_no_bounds) == "failed"
    assert status(check.grayscale, grey_partial) == "failed"
    assert status(check.grayscale, grey_block_16) == "failed"


@cuda.jit
def grey_block_16(img, out):  # hard-codes 16-thread-wide blocks in its index: wrong for 8×8 and 32×32 blocks
    col = cuda.blockIdx.x * 16 + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = int(0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2] + 0.5)


# ----------------------------------------------------------------------------- launch config
def test_launch_config() -> None:
    assert status(check.launch_config, lambda s, b: ((s[1] + b[0] - 1) // b[0], (s[0] + b[1] - 1) // b[1])) == "passed"
    import math

    assert status(check.launch_config, lambda s, b: (math.ceil(s[1] / b[0]), math.ceil(s[0] / b[1]))) == "passed"
    r = check.launch_config(lambda s, b: ((s[0] + b[0] - 1) // b[0], (s[1] + b[1] - 1) // b[1]))
    assert r.status == "failed" and "swapped" in r.cause
    r = check.launch_config(lambda s, b: (s[1] // b[0], s[0] // b[1]))
    assert r.status == "failed" and "too few" in r.cause
    r = check.launch_config(lambda s, b: (s[1] // b[0] + 1, s[0] // b[1] + 1))
    assert r.status == "failed" and "idle" in r.cause
    r = check.launch_config(lambda s, b: (s[1] / b[0], s[0] / b[1]))
    assert r.status == "failed" and "integer" in r.message
    assert status(check.launch_config, lambda s, b: None) == "unsolved"
    frame = {((1080, 1920), (16, 16)): (120, 68), ((1, 1), (32, 8)): (1, 1)}  # answers learned from a fixed list
    assert status(check.launch_config, lambda s, b: frame.get((tuple(s), tuple(b)), (1, 1))) == "failed"
    r = check.launch_config(lambda s, b: ((s[1] + b[0] - 1) // b[0], max(1, s[0] // b[1])))  # floor in y only
    assert r.status == "failed" and "too few" in r.cause


# ----------------------------------------------------------------------------- transfers
def _good(a, x, y, steps):
    k = kernels.get("saxpy")
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    for _ in range(steps):
        k[4, 64](a, dx, dy, dy)
    return dy.copy_to_host()


def _copies_each_step(a, x, y, steps):
    k = kernels.get("saxpy")
    for _ in range(steps):
        dx, dy = cuda.to_device(x), cuda.to_device(y)
        k[4, 64](a, dx, dy, dy)
        y = dy.copy_to_host()
    return y


def _host_arrays(a, x, y, steps):
    k = kernels.get("saxpy")
    y = y.copy()
    for _ in range(steps):
        k[4, 64](a, x, y, y)
    return y


def _float64(a, x, y, steps):
    return _good(a, x, y, steps).astype(np.float64)


def test_transfers() -> None:
    assert status(check.transfers, _good) == "passed"
    r = check.transfers(_copies_each_step)
    assert r.status == "failed" and "copies to the device" in r.message
    r = check.transfers(_host_arrays)
    assert r.status == "failed" and "host" in r.message
    r = check.transfers(_float64)
    assert r.status == "failed" and "float64" in r.message
    assert status(check.transfers, lambda a, x, y, steps: None) == "unsolved"


@cuda.jit
def grey_grid_stride(img, out):  # valid variant: a 2-D grid-stride loop
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for row in range(y0, out.shape[0], sy):
        for col in range(x0, out.shape[1], sx):
            v = 0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2]
            out[row, col] = round(v)


@cuda.jit("void(float32, float32[:], float32[:], float32[:])")
def saxpy_eager(a, x, y, out):  # valid variant: compiled eagerly with an explicit signature
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


def test_more_valid_variants() -> None:
    assert check.grayscale(grey_grid_stride).passed
    assert check.saxpy(saxpy_eager).passed


def _host_only(a, x, y, steps):  # right values, computed with NumPy on the host: no copies, no kernel
    y = y.copy()
    for _ in range(steps):
        y = a * x + y
    return y


def _round_trip_then_host(a, x, y, steps):  # one copy each way, but the work still runs on the host
    y = cuda.to_device(y).copy_to_host()
    for _ in range(steps):
        y = a * x + y
    return y


def test_transfers_rejects_host_computation() -> None:
    for answer in (_host_only, _round_trip_then_host):
        r = check.transfers(answer)
        assert r.status == "failed" and "no kernel was launched" in r.message, (answer, r.message)
