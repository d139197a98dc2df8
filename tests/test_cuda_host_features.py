"""What the C++ stand-in builds and what it refuses (issue 45, item 5): half2/bfloat162 operators, cooperative-groups
tile shuffles of any trivially copyable type and thread_group, templates launched by name expression (CuPy's
RawModule), `extern T __shared__ s[]`, one build for every kernel of a source, host headers refused in labkit's words,
and the README's refusal list matching what is refused. Kernels written for these tests."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from labkit import cuda_cpp
from labkit.cuda import host
from labkit.errors import CompileError

pytestmark = pytest.mark.skipif(cuda_cpp.host_compiler() is None, reason="no C++ compiler for the CPU stand-in")

PAIRS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void pairs(const float* a, const float* b, float* h, float* bf, int* cmp, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half2 x = __floats2half2_rn(a[i], b[i]), y = __floats2half2_rn(b[i], a[i]);
    __half2 r[5] = {x + y, x - y, x * y, x / y, -x};
    __half2 acc = x; acc += y; acc *= y;
    __nv_bfloat162 p = __floats2bfloat162_rn(a[i], b[i]), q = __floats2bfloat162_rn(b[i], a[i]);
    __nv_bfloat162 s[5] = {p + q, p - q, p * q, p / q, -p};
    for (int k = 0; k < 5; ++k) {
        h[10 * i + 2 * k] = __low2float(r[k]); h[10 * i + 2 * k + 1] = __high2float(r[k]);
        bf[10 * i + 2 * k] = __low2float(s[k]); bf[10 * i + 2 * k + 1] = __high2float(s[k]);
    }
    h[10 * n + i] = __low2float(acc);
    cmp[4 * i] = x == y; cmp[4 * i + 1] = x < y; cmp[4 * i + 2] = p != q; cmp[4 * i + 3] = __hbge2(p, q);
}
"""


def _bf16(v: np.ndarray) -> np.ndarray:
    u = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)


def test_half2_and_bfloat162_operators_round_per_lane() -> None:
    rng = np.random.default_rng(7)
    n = 200
    a = rng.uniform(-4, 4, n).astype(np.float32)
    b = rng.uniform(0.25, 4, n).astype(np.float32)
    b[:10] = a[:10]  # equal pairs for the comparisons
    h, bf, cmp = np.zeros(11 * n, np.float32), np.zeros(10 * n, np.float32), np.zeros(4 * n, np.int32)
    cuda_cpp.run_on_host(PAIRS, "pairs", (2,), (128,), (a, b, h, bf, cmp, np.int32(n)))
    ha, hb = a.astype(np.float16), b.astype(np.float16)
    for k, op in enumerate((np.add, np.subtract, np.multiply, np.divide)):
        np.testing.assert_array_equal(h[: 10 * n].reshape(n, 10)[:, 2 * k], op(ha, hb).astype(np.float32))
        np.testing.assert_array_equal(h[: 10 * n].reshape(n, 10)[:, 2 * k + 1], op(hb, ha).astype(np.float32))
        ba, bb = _bf16(a), _bf16(b)
        np.testing.assert_array_equal(bf.reshape(n, 10)[:, 2 * k], _bf16(op(ba, bb)))
    np.testing.assert_array_equal(h[: 10 * n].reshape(n, 10)[:, 8], -ha.astype(np.float32))
    np.testing.assert_array_equal(h[10 * n :], ((ha + hb) * hb).astype(np.float32))
    c = cmp.reshape(n, 4)
    assert c[:10, 0].all() and not c[10:, 0].any()  # both lanes equal only where a == b
    np.testing.assert_array_equal(c[:, 1], (ha < hb) & (hb < ha))  # `<` holds when it holds in both lanes
    ba, bb = _bf16(a), _bf16(b)
    np.testing.assert_array_equal(c[:, 2], (ba != bb) & (bb != ba))
    np.testing.assert_array_equal(c[:, 3], (ba >= bb) & (bb >= ba))


GROUPS = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void groups(const unsigned* in, unsigned* out, double* half_sums, unsigned* ranks)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_group all = block;
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    uint4 v = make_uint4(in[block.thread_rank()], 2 * in[block.thread_rank()], 3u, block.thread_rank());
    uint4 got = warp.shfl(v, (warp.thread_rank() + 5) % 32);  // 16 bytes, word by word
    unsigned t = block.thread_rank();
    out[4 * t] = got.x; out[4 * t + 1] = got.y; out[4 * t + 2] = got.z; out[4 * t + 3] = got.w;
    all.sync();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);  // two tiles per warp shuffle at once
    double s = in[t];
    for (int d = 8; d > 0; d /= 2) s += tile.shfl_down(s, d);
    if (tile.thread_rank() == 0) half_sums[t / 16] = s;
    cg::thread_group eight = cg::tiled_partition(block, 8);
    eight.sync();
    ranks[t] = eight.thread_rank() + 100 * eight.size();
}
"""


def test_cooperative_group_shuffles_of_any_type_and_thread_group() -> None:
    n = 64
    x = np.random.default_rng(8).integers(0, 1000, n).astype(np.uint32)
    out, sums, ranks = np.zeros(4 * n, np.uint32), np.zeros(n // 16), np.zeros(n, np.uint32)
    cuda_cpp.run_on_host(GROUPS, "groups", (1,), (n,), (x, out, sums, ranks))
    src = np.array([(t // 32) * 32 + (t % 32 + 5) % 32 for t in range(n)])
    np.testing.assert_array_equal(out.reshape(n, 4), np.stack([x[src], 2 * x[src], np.full(n, 3), src], axis=1))
    np.testing.assert_array_equal(sums, x.reshape(-1, 16).sum(axis=1).astype(np.float64))
    np.testing.assert_array_equal(ranks, np.arange(n) % 8 + 800)


TEMPLATES = r"""
template <typename T>
__global__ void scale(T* x, T a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
extern "C" __global__ void fill(float* x, float v, int n)
{
    extern float __shared__ tile[];  // specifiers in this order are CUDA C++ too
    tile[threadIdx.x] = v;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = tile[blockDim.x - 1 - threadIdx.x];
}
"""


def test_templates_launch_by_name_expression_and_one_build_serves_the_module() -> None:
    module = cuda_cpp.RawModule(code=TEMPLATES, name_expressions=["scale<float>", "scale<double>"])
    built = len(host._LIB_CACHE)
    xf, xd = np.arange(100, dtype=np.float32), np.arange(100, dtype=np.float64)
    module.get_function("scale<float>")((1,), (128,), (xf, np.float32(2.5), np.int32(100)))
    module.get_function("scale<double>")((1,), (128,), (xd, np.float64(0.5), np.int32(100)))
    fill = module.get_function("fill")
    y = np.zeros(100, np.float32)
    fill((1,), (128,), (y, np.float32(7), np.int32(100)), shared_mem=128 * 4)
    np.testing.assert_array_equal(xf, np.arange(100, dtype=np.float32) * np.float32(2.5))
    np.testing.assert_array_equal(xd, np.arange(100) * 0.5)
    assert (y == 7).all()
    assert len(host._LIB_CACHE) - built <= 1  # three kernels, one build (none when it was cached already)
    with pytest.raises(cuda_cpp.LabkitError, match="name_expressions"):
        module.get_function("scale<int>")
    with pytest.raises(cuda_cpp.LabkitError, match="wrong number of arguments|parameter"):
        module.get_function("scale<float>")((1,), (128,), (xf, np.float32(2.5)))


@pytest.mark.parametrize("header", ["stdio.h", "cuda.h", "cmath"])
def test_host_headers_are_refused_in_labkits_words(header: str) -> None:
    src = f'#include <{header}>\nextern "C" __global__ void k(float* x) {{ x[0] = 1; }}\n'
    with pytest.raises(CompileError, match=rf"NVRTC, which CuPy compiles RawKernel sources with, has no <{re.escape(header)}>"):
        cuda_cpp.RawKernel(src, "k")
    with pytest.raises(CompileError, match="has no"):
        cuda_cpp.run_on_host(src, "k", (1,), (1,), (np.zeros(1, np.float32),))


README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_lists_exactly_what_the_stand_in_refuses() -> None:
    text = README.read_text()
    m = re.search(r"<!-- stand-in refusals: begin -->(.*?)<!-- stand-in refusals: end -->", text, re.S)
    assert m, "README.md has no list of what the C++ stand-in refuses"
    listed = [ln[2:].strip() for ln in m.group(1).splitlines() if ln.startswith("- ")]
    refused = [what for _, what in host._NOT_EMULATED]
    refused += [f"host headers NVRTC cannot open: {', '.join(f'<{h}>' for h in (*host.STANDARD_HEADERS, *host.HOST_ONLY_HEADERS))}"]
    refused += [f"any other header than {', '.join(f'<{h}>' for h in host.STANDIN_HEADERS)}"]
    assert listed == refused
    for pattern, what in host._NOT_EMULATED:  # every line is refused by name, before any compiler runs
        example = _EXAMPLES[what]
        assert pattern.search(host.strip_comments_and_strings(example))
        with pytest.raises(cuda_cpp.HostUnavailable, match=re.escape(what)):
            host.host_plan(example)


_EXAMPLES = {
    "dynamic shared memory declared other than `extern __shared__ T name[];`": "extern __shared__ float s[8];",
    "inline PTX (asm)": 'asm volatile("trap;");',
    "textures and surfaces": "cudaTextureObject_t t;",
    "cooperative groups beyond this_thread_block(), this_cluster(), tiled_partition() and thread_group": "cg::this_grid().sync();",
    "kernel launches from the GPU (dynamic parallelism)": "k<<<1, 1>>>();",
    "__match_*_sync and __reduce_*_sync": "__match_any_sync(~0u, 1);",
    "a cluster size fixed at compile time (__cluster_dims__)": "__global__ void __cluster_dims__(2,1,1) k() {}",
    "WMMA beyond FP16/BF16 16×16×16 fragments": "wmma::precision::tf32 t;",
}


def test_a_cuda_function_the_stand_in_lacks_is_named_not_a_compiler_error() -> None:
    src = '#include <cuda_fp16.h>\nextern "C" __global__ void k(float* x) { x[0] = __half2float(hcos(__float2half(x[0]))); }\n'
    with pytest.raises(cuda_cpp.HostUnavailable, match=r"the CPU stand-in does not offer `hcos`"):
        cuda_cpp.run_on_host(src, "k", (1,), (1,), (np.zeros(1, np.float32),))


@pytest.mark.parametrize(
    "call",
    ["atomicAdd(&s[i % 4], (short)1)", "atomicAnd(&f[0], 1.0f)", "atomicMax(&f[0], 2.0f)", "atomicInc(&n[0], 4)"],
)
def test_an_atomic_on_a_type_cuda_has_no_overload_for_is_refused_as_a_gpu_compile_refuses_it(call: str) -> None:
    """``atomicAdd`` on a 16-bit integer, bitwise and min/max atomics on a float, ``atomicInc`` on a signed int: CUDA
    declares none of these, so the kernel does not build for a GPU; RawKernel compiles every source with NVRTC
    first, so the stand-in never runs one (its own atomics are templates that would)."""
    src = (
        'extern "C" __global__ void k(short* s, float* f, int* n) {\n'
        f"    int i = threadIdx.x;\n    {call};\n}}\n"
    )
    with pytest.raises(CompileError, match=r'no instance of overloaded function "atomic\w+"|"int \*" is incompatible'):
        cuda_cpp.RawKernel(src, "k")
