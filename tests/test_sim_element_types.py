"""Element types as a GPU has them (issue 45, item 2): bit intrinsics on 8- and 16-bit elements count the element's
width, in a direct launch and a strict one, in the kernel and in a device function it calls; pixel arithmetic keeps
Numba's types; a division by zero stops with labkit's words where Python would raise and a GPU gives a value."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="the simulator's element types")

from numba import cuda  # noqa: E402

from labkit import sim  # noqa: E402


@cuda.jit
def bits_of(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = cuda.popc(v)
        out[i, 1] = cuda.clz(v)
        out[i, 2] = cuda.ffs(v)


@cuda.jit(device=True)
def leading(v):
    return cuda.clz(v)


@cuda.jit
def bits_in_device_function(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = leading(x[i])


@cuda.jit
def reversed_bytes(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = cuda.brev(x[i])


def _gpu_bits(values: np.ndarray) -> np.ndarray:
    """popc, clz (LLVM's ctpop and ctlz in the element's own width, as Numba lowers them) and ffs, per element."""
    width = values.dtype.itemsize * 8
    out = []
    for v in values.tolist():
        bits = v & ((1 << width) - 1)
        out.append([bin(bits).count("1"), width - bits.bit_length(), (bits & -bits).bit_length()])
    return np.array(out, dtype=np.int64)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
@pytest.mark.parametrize("strict", [False, True])
def test_intrinsics_count_the_elements_width(dtype: type, strict: bool) -> None:
    info = np.iinfo(dtype)
    x = np.array([0, 1, 2, 5, info.max, info.min, info.max // 3, -1 if info.min < 0 else 200], dtype=dtype)
    out = np.zeros((x.size, 3), np.int64)
    if strict:
        sim.launch_strict(bits_of, 1, 32, x, out, names=["x", "out"])
    else:
        bits_of[1, 32](x, out)
    assert out.tolist() == _gpu_bits(x).tolist()


def test_an_intrinsic_in_a_device_function_counts_the_elements_width() -> None:
    x = np.array([1, 16, 255], np.uint8)
    out = np.zeros(3, np.int64)
    bits_in_device_function[1, 32](x, out)
    assert out.tolist() == [7, 3, 0]  # clz in 8 bits (64 bits would give 63, 59, 56)


def test_brev_of_a_byte_reverses_32_bits() -> None:
    """Numba's brev takes uint32 or uint64: a uint8 converts to uint32."""
    x = np.array([1, 0x80, 0xF0], np.uint8)
    out = np.zeros(3, np.uint64)
    reversed_bytes[1, 32](x, out)
    assert out.tolist() == [0x80000000, 0x01000000, 0x0F000000]


@cuda.jit
def weigh(img, out):
    i = cuda.grid(1)
    if i < img.size:
        out[i] = np.float32(0.299) * img[i] + cuda.popc(img[i]) * 0  # (a kernel that uses an intrinsic)


def test_a_byte_read_for_intrinsics_keeps_float32_arithmetic() -> None:
    """float32 * uint8 is float32 in Numba: the tagged read gives the same float32 as a plain one."""
    img = np.arange(0, 250, 7, dtype=np.uint8)
    out = np.zeros(img.size, np.float64)
    weigh[1, 64](img, out)
    assert out.tolist() == (np.float32(0.299) * img.astype(np.float32)).astype(np.float64).tolist()


@cuda.jit
def ratio(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] // b[i]


@cuda.jit(debug=True, opt=False)
def ratio_debug(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] // b[i]


@pytest.mark.parametrize("strict", [False, True])
def test_a_byte_divided_by_zero_stops_with_labkits_words(strict: bool) -> None:
    a, b, out = np.array([6, 7], np.uint8), np.array([3, 0], np.uint8), np.zeros(2, np.uint8)
    with pytest.raises(sim.ZeroDivisor) as info:
        if strict:
            sim.launch_strict(ratio, 1, 32, a, b, out, names=["a", "b", "out"])
        else:
            ratio[1, 32](a, b, out)
    text = str(info.value)
    assert text.startswith("tid=[1, 0, 0] ctaid=[0, 0, 0]: integer division or modulo by zero")
    assert "undefined value" in text and "gives 0" in text and "debug=True" in info.value.cause
    assert isinstance(info.value, ZeroDivisionError)  # (code that catches ZeroDivisionError still does)


def test_a_debug_kernel_raises_zero_division_as_a_gpu_does() -> None:
    a, b, out = np.array([6, 7], np.uint8), np.array([3, 0], np.uint8), np.zeros(2, np.uint8)
    with pytest.raises(ZeroDivisionError) as info:
        ratio_debug[1, 32](a, b, out)
    assert not isinstance(info.value, sim.ZeroDivisor)


def test_wider_elements_divided_by_zero_give_what_numbas_kernel_gives() -> None:
    """int32 elements compute as int64 (NumPy's scalars): ``//`` by zero gives 0, as Numba's compiled kernel does, with
    NumPy's warning."""
    a, b, out = np.array([6, 7], np.int32), np.array([3, 0], np.int32), np.full(2, 9, np.int32)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        ratio[1, 32](a, b, out)
    assert out.tolist() == [2, 0]


@cuda.jit
def difference(a, b, wide, narrow):
    i = cuda.grid(1)
    if i < a.size:
        wide[i] = a[i] - b[i]
        narrow[i] = a[i] - b[i]


def test_a_byte_minus_a_larger_byte_is_negative_and_stores_the_same_bits() -> None:
    """The README's difference: Numba types uint8 - uint8 as uint64 (it wraps: 2**64 - 3), the simulator as int64
    (-3); stored into a uint8 array both give 253."""
    a, b = np.array([2, 9], np.uint8), np.array([5, 4], np.uint8)
    wide, narrow = np.zeros(2, np.int64), np.zeros(2, np.uint8)
    difference[1, 32](a, b, wide, narrow)
    assert wide.tolist() == [-3, 5] and narrow.tolist() == [253, 5]


def _kernel_calling(device_function):
    @cuda.jit
    def zeros_of(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = device_function(x[i])  # (a device function the kernel reaches through its closure)

    return zeros_of


def test_a_device_function_in_a_closure_still_counts_the_elements_width() -> None:
    x = np.array([1, 256], np.int32)
    out = np.zeros(2, np.int64)
    _kernel_calling(leading)[1, 32](x, out)
    assert out.tolist() == [31, 23]  # clz in 32 bits


def test_a_trace_reads_elements_as_its_own_kernels_launch_does() -> None:
    """A trace makes its arrays before the launch: they read narrow elements as this kernel needs (tagged for its
    intrinsics), whatever the launch before it was."""
    x = np.array([1, 16, 255], np.uint8)
    ratio[1, 32](np.array([6], np.int32), np.array([3], np.int32), np.zeros(1, np.int32))  # (no intrinsics)
    t = sim.trace(bits_of, 1, 32, x, np.zeros((3, 3), np.int64), names=["x", "out"])
    assert t.outputs["out"][:, 1].tolist() == [7, 3, 0]  # clz in 8 bits
