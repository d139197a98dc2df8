"""What numba-cuda's own test suite found (tests/test_numba_peer.py), one unit test per class of fix:

integer intrinsics at the width CUDA gives them, ``print(cuda.threadIdx)`` as Numba prints it, NumPy ufuncs writing
into a kernel's arrays (recorded by the strict memory model), the thread's position in a kernel's exceptions, and
``debug=True`` raising on a division by zero. Expected values are what a GPU gives (CUDA's definitions of
``__clz``, ``__popc``, ``__brev``, ``__ffs``), not what the code happens to do.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit import sim  # noqa: E402


# ----------------------------------------------------------------------------- integer intrinsics at CUDA's width
@cuda.jit
def bits_of_elements(a, out):
    out[0] = cuda.clz(a[0])
    out[1] = cuda.popc(a[1])
    out[2] = cuda.ffs(a[1])
    out[3] = cuda.clz(cuda.threadIdx.x)
    out[4] = cuda.popc(cuda.blockIdx.x - 1)


def test_int32_elements_and_thread_index_are_32_bit() -> None:
    a = np.array([1, -1], np.int32)
    out = np.zeros(5, np.int64)
    bits_of_elements[1, 1](a, out)
    # clz(1) of 32 bits is 31; popc(-1) counts 32 bits; ffs(-1) is 1; clz(threadIdx.x = 0) is 32;
    # blockIdx.x - 1 widens to 64 bits as Numba types int32 - int64 (popc of -1 in 64 bits)
    assert out.tolist() == [31, 32, 1, 32, 64]


def test_uint32_and_narrow_elements() -> None:
    for dtype, width in ((np.uint32, 32), (np.int16, 16)):  # (uint8 elements read as int64: see integers.WIDE)
        a = np.array([1, np.iinfo(dtype).max if np.dtype(dtype).kind == "u" else -1], dtype)
        out = np.zeros(5, np.int64)
        bits_of_elements[1, 1](a, out)
        assert out[0] == width - 1 and out[1] == width, dtype


@cuda.jit
def brev_element(out, src):
    out[0] = cuda.brev(src[0])


def test_brev_of_uint32_element_stored_into_uint32() -> None:
    out = np.zeros(1, np.uint32)
    brev_element[1, 1](out, np.ones(1, np.uint32))
    assert out[0] == 0x80000000


def test_declared_signature_is_honoured() -> None:
    def clz(ary, c):
        ary[0] = cuda.clz(c)

    def ffs(ary, c):
        ary[0] = cuda.ffs(c)

    ary = np.zeros(1, np.int32)
    cuda.jit("void(int32[:], int32)")(clz)[1, 1](ary, 0x00100000)
    assert ary[0] == 11
    cuda.jit("void(int32[:], int32)")(clz)[1, 1](ary, 0xFFFFFFFF)  # wraps to -1 as an int32 argument
    assert ary[0] == 0
    cuda.jit("void(int32[:], uint32)")(ffs)[1, 1](ary, 0x80000000)
    assert ary[0] == 32
    cuda.jit("void(int32[:], int64)")(clz)[1, 1](ary, 0x00100000)  # a 64-bit argument stays 64-bit
    assert ary[0] == 43
    cuda.jit(clz)[1, 1](ary, 0x00100000)  # no signature: a Python int is int64, as Numba types it
    assert ary[0] == 43


def test_wide_elements_still_compute_in_64_bits() -> None:
    """The width tag does not change arithmetic: an int32 element times a large number does not overflow."""
    @cuda.jit
    def grow(out, a):
        out[0] = a[0] * 3_000_000_000

    out = np.zeros(1, np.int64)
    grow[1, 1](out, np.array([5], np.int32))
    assert out[0] == 15_000_000_000


def test_print_dim3_as_numba() -> None:
    code = textwrap.dedent("""
        import labkit
        labkit.setup("sim", quiet=True)
        from numba import cuda

        @cuda.jit
        def show():
            print(cuda.threadIdx)

        show[1, (2, 1, 1)]()
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert sorted(out.stdout.split("\n")[-3:-1]) == ["(0, 0, 0)", "(1, 0, 0)"], out.stdout + out.stderr


# ----------------------------------------------------------------------------- ufuncs into kernel arrays
@cuda.jit
def sine(x, out):
    np.sin(x, out)


@cuda.jit
def add_rows(a, b, out):
    np.add(a, b, out=out)


def test_ufunc_out_into_kernel_array() -> None:
    x = np.linspace(0, 1, 7)
    out = np.zeros(7)
    sine[1, 1](x, out)
    np.testing.assert_array_equal(out, np.sin(x))
    a, b, c = np.arange(6.0).reshape(2, 3), np.ones((2, 3)), np.zeros((2, 3))
    add_rows[1, 1](a, b, c)
    np.testing.assert_array_equal(c, a + 1)


def test_strict_model_records_ufunc_writes() -> None:
    x = np.linspace(0, 1, 5)
    out = np.zeros(5)
    report = sim.launch_strict(sine, 1, 1, x, out, names=["x", "out"], record=True)
    assert report.count("out", "write") == 5 and report.count("x", "read") == 5
    np.testing.assert_array_equal(out, np.sin(x))


def test_ufunc_writes_race_like_any_write() -> None:
    """Two threads of a block writing the whole output through a ufunc race, as a loop of stores would."""
    with pytest.raises(sim.KernelFault, match="race"):
        sim.launch_strict(sine, 1, 2, np.linspace(0, 1, 4), np.zeros(4), names=["x", "out"])


# ----------------------------------------------------------------------------- which thread raised
@cuda.jit
def past_the_end(a):
    a[cuda.threadIdx.x] = 1.0


def test_exception_names_thread_and_block_as_numba() -> None:
    with pytest.raises(IndexError) as info:
        past_the_end[1, 9](np.zeros(8))
    assert str(info.value).startswith("tid=[8, 0, 0] ctaid=[0, 0, 0]: index 8 is out of bounds")
    assert info.value.sim_thread == ((8, 0, 0), (0, 0, 0))


def test_exception_of_strict_launch_names_thread() -> None:
    with pytest.raises(IndexError, match=r"^tid=\[8, 0, 0\] ctaid=\[0, 0, 0\]: "):
        sim.launch_strict(past_the_end, 2, 9, np.zeros(8))


def test_exception_without_message_gets_position() -> None:
    @cuda.jit
    def raises(flag):
        if flag:
            raise ValueError

    with pytest.raises(ValueError, match=r"^tid=\[0, 0, 0\] ctaid=\[0, 0, 0\]$"):
        raises[1, 1](True)


def test_labkit_fault_keeps_its_words() -> None:
    @cuda.jit
    def skips_barrier(a):
        if cuda.threadIdx.x > 0:
            cuda.syncthreads()

    with pytest.raises(sim.DivergentBarrier) as info:
        skips_barrier[1, 4](np.zeros(4))
    assert not str(info.value).startswith("tid=")


# ----------------------------------------------------------------------------- debug=True
def test_debug_kernel_raises_on_division_by_zero() -> None:
    @cuda.jit(debug=True, opt=False)
    def divide(r, x, y):
        r[0] = y[0] / x[0]
        r[1] = y[0]

    r = np.zeros(2)
    with pytest.raises(ZeroDivisionError, match="division by zero") as info:
        divide[1, 1](r, np.zeros(1), np.ones(1))
    assert isinstance(info.value, FloatingPointError)  # what Numba's simulator raises, so its tests pass too
    assert r.tolist() == [0.0, 0.0]  # the thread stopped at the division


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_kernel_without_debug_gives_inf() -> None:
    @cuda.jit
    def divide(r, x, y):
        r[0] = y[0] / x[0]
        r[1] = y[0]

    r = np.zeros(2)
    divide[1, 1](r, np.zeros(1), np.ones(1))
    assert np.isinf(r[0]) and r[1] == 1.0
