"""labkit.ptx: Numba kernels and CUDA C++ to PTX for sm_70/80/90 without a GPU, summaries and errors."""

import pytest
from numba import cuda

from labkit import ptx
from labkit.errors import CompileError, LabkitError

TPB = 64


@cuda.jit(device=True)
def _square(x):
    return x * x


@cuda.jit
def tiled_sum(a, out):
    tile = cuda.shared.array(TPB, labkit_float32)  # noqa: F821 - defined below, resolved at compile time
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    tile[t] = _square(a[i]) if i < a.size else 0.0
    cuda.syncthreads()
    if t == 0:
        s = 0.0
        for k in range(TPB):
            s += tile[k]
        cuda.atomic.add(out, 0, s)


import numba  # noqa: E402

labkit_float32 = numba.float32


@pytest.mark.parametrize("arch", ["sm_70", "sm_80", "sm_90"])
def test_numba_kernel_compiles_for_each_arch(arch: str) -> None:
    p = ptx.compile(tiled_sum, "void(float32[:], float32[:])", arch)
    assert f".target {arch}" in p.text
    mix = p.summary()
    assert mix.barriers == 1
    assert mix.shared_stores == {32: 1}
    assert mix.atomics_global == 1 and mix.atomics_shared == 0
    assert mix.global_loads.get(32, 0) >= 1
    res = p.resources()
    assert res and res[0].registers > 0 and res[0].shared_bytes == 4 * TPB


def test_compile_error_names_the_line() -> None:
    @cuda.jit
    def broken(a):
        i = cuda.grid(1)
        a[i] = a + 1  # an array assigned into an element

    with pytest.raises(CompileError) as info:
        ptx.compile(broken, "void(float32[:])")
    text = str(info.value)
    line = broken.py_func.__code__.co_firstlineno + 3  # the decorator, def, i = ..., then the faulty line
    assert "broken does not compile" in text and f"at line {line} of the cell or file (broken): a[i] = a + 1" in text


def test_undefined_name_error() -> None:
    @cuda.jit
    def broken(a):
        a[0] = not_defined_anywhere  # noqa: F821

    with pytest.raises(CompileError, match="not_defined_anywhere"):
        ptx.compile(broken, "void(float32[:])")


def test_bad_arguments() -> None:
    with pytest.raises(LabkitError, match="not an architecture"):
        ptx.compile(tiled_sum, "void(float32[:], float32[:])", "hopper")
    with pytest.raises(LabkitError, match="signature must be a string"):
        ptx.compile(tiled_sum, (numba.float32[:],))  # type: ignore[arg-type]


CUDA_SRC = r"""
extern "C" __global__ void shfl_sum(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
"""


@pytest.mark.toolchain
@pytest.mark.parametrize("arch", ["sm_70", "sm_80", "sm_90"])
def test_cuda_cpp_compiles(arch: str) -> None:
    if not ptx.can_target(arch):  # NVRTC 13 has no sm_70: a clear error naming what it targets, not a compile failure
        with pytest.raises(ptx.ArchNotSupported, match=f"cannot target {arch}; it targets .*sm_90"):
            ptx.compile_cuda(CUDA_SRC, arch)
        return
    p = ptx.compile_cuda(CUDA_SRC, arch)
    mix = p.summary()
    assert mix.shuffles == 5 and mix.atomics_global == 1
    assert any(".entry shfl_sum" in line for line in p.text.splitlines())


@pytest.mark.toolchain
def test_wmma_needs_headers_and_shows_tensor_core_ops() -> None:
    src = r"""
    #include <mma.h>
    using namespace nvcuda;
    extern "C" __global__ void tile(const half* a, const half* b, float* c) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
        wmma::fill_fragment(fc, 0.0f);
        wmma::load_matrix_sync(fa, a, 16);
        wmma::load_matrix_sync(fb, b, 16);
        wmma::mma_sync(fc, fa, fb, fc);
        wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
    }"""
    oldest = ptx.targetable(["sm_70", "sm_75", "sm_80"])[0][0]  # Volta on CUDA 12, Turing on CUDA 13
    assert ptx.compile_cuda(src, oldest).summary().tensor_core >= 1


@pytest.mark.toolchain
def test_cuda_compile_error_has_line_number() -> None:
    with pytest.raises(CompileError) as info:
        ptx.compile_cuda('extern "C" __global__ void k(float* a) {\n  a[0] = undefined_b;\n}', name="mine.cu")
    assert 'mine.cu(2): error: identifier "undefined_b" is undefined' in str(info.value)


def test_summary_widths() -> None:
    text = "ld.global.v4.f32 {%f1,%f2,%f3,%f4}, [%rd1];\nst.shared.f64 [%r1], %fd1;\nld.param.u64 %rd1, [p];\nbar.sync 0;\n"
    mix = ptx.summarize(text)
    assert mix.global_loads == {128: 1} and mix.shared_stores == {64: 1} and mix.barriers == 1 and mix.total == 4


@pytest.mark.toolchain
def test_toolchain_is_complete_here() -> None:
    import importlib.metadata as md

    tc = ptx.toolchain()
    major = md.version("cuda-bindings").split(".")[0]  # 12 in .venv, 13 in .venv-cu13
    assert tc["nvrtc"].startswith(f"{major}.") and tc["toolchain"] == f"CUDA {tc['nvrtc']}"
    assert all(tc["headers"].values()) and "sm_90" in tc["arches"]
    if major == "12":  # the pinned install also has NVVM and ptxas as wheels
        assert tc["nvvm"] and tc["ptxas"]


def test_kernel_made_in_a_function_compiles() -> None:
    """A kernel that closes over a local constant (as test helpers and notebooks sometimes make them)."""

    def make(scale: float):
        @cuda.jit
        def scaled(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] *= scale

        return scaled

    assert ptx.compile(make(2.0), "void(float32[:])", "sm_80").summary().global_stores == {32: 1}
