"""02.float32: a kernel whose values are right but whose PTX computes in FP64 fails with the literal as the cause;
the float32 versions pass. Also the FP64 lines of lab 02's greyscale kernel with Python literals (issue 20, item 7).
Cost: about 6 s (a few PTX compilations in the helper process, small strict launches)."""

from __future__ import annotations

import numpy as np

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402  (after setup: the simulator in sim mode)

from labkit import check, kernels, ptx  # noqa: E402
from labkit.check import lab02_fp32  # noqa: E402


@cuda.jit
def to_unit_mul(img, out):  # a valid variant: multiply by a float32 reciprocal
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = img[row, col] * np.float32(1.0 / 127.5) - np.float32(1)


@cuda.jit
def to_unit_literals(img, out):  # right values, FP64 arithmetic
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = img[row, col] / 127.5 - 1.0


@cuda.jit
def to_unit_float(img, out):  # float() is a float64 too
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = float(img[row, col]) / np.float32(127.5) - np.float32(1.0)


@cuda.jit
def to_unit_swapped(img, out):  # row and column mixed up
    row, col = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = img[row, col] / np.float32(127.5) - np.float32(1.0)


@cuda.jit
def to_unit_no_bounds(img, out):
    col, row = cuda.grid(2)
    out[row, col] = img[row, col] / np.float32(127.5) - np.float32(1.0)


@cuda.jit
def to_unit_floor(img, out):  # integer division: wrong values
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = np.float32(img[row, col] // 127) - np.float32(1.0)


@cuda.jit
def to_unit_empty(img, out):
    pass


def test_accepts_the_reference_and_a_variant() -> None:
    assert check.to_unit(kernels.get("to_unit")).status == "passed"
    assert check.to_unit(to_unit_mul).status == "passed"


def test_fp64_literals_fail_with_the_literal_as_the_cause() -> None:
    for kernel in (to_unit_literals, to_unit_float):
        r = check.to_unit(kernel)
        assert r.status == "failed", kernel
        assert "FP64" in r.message and "f64" in r.message
        assert "np.float32" in r.cause and "literal" in r.cause


def test_other_mistakes_fail_with_their_own_cause() -> None:
    r = check.to_unit(to_unit_swapped)
    assert r.status == "failed" and "FP64" not in r.message and "swapped" in (r.cause or "")
    r = check.to_unit(to_unit_no_bounds)
    assert r.status == "failed" and "bounds" in (r.message + (r.cause or "")).lower()
    r = check.to_unit(to_unit_floor)
    assert r.status == "failed" and "expected" in r.message
    assert check.to_unit(to_unit_empty).status == "unsolved"


def test_fp64_instructions_of_the_greyscale_literals() -> None:
    """The lab's claim, measured: Python literals put FP64 conversions and arithmetic in the greyscale PTX; the
    reference (np.float32 constants) has none."""
    sig = "void(uint8[:,:,:], uint8[:,:])"
    assert ptx.compile(kernels.get("grayscale"), sig, "sm_90").fp64() == []
    lines = lab02_fp32.fp64_lines(_grey_literals, sig, "sm_90")
    ops = {ln.split(None, 1)[0].rstrip(";") for ln in lines}
    assert {"mul.f64", "fma.rn.f64"} <= ops and any(op.startswith("cvt.rn.f64") for op in ops), ops


def test_fp64_instructions_reads_predicated_lines_and_ignores_directives() -> None:
    text = ".version 8.5\n// mul.f64 in a comment\n@%p1 add.f64 %fd1, %fd2, %fd3;\nmul.f32 %f1, %f2, %f3;\n.reg .f64 %fd<4>;\n"
    assert ptx.fp64_instructions(text) == ["@%p1 add.f64 %fd1, %fd2, %fd3;"]


@cuda.jit
def _grey_literals(img, out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        v = 0.299 * img[row, col, 0] + 0.587 * img[row, col, 1] + 0.114 * img[row, col, 2]
        out[row, col] = int(v + 0.5)
