"""labkit.cuda_host (re-exported by labkit.cuda_cpp), the CPU stand-in: real constructs decide (not words in comments), CUDA's device functions exist and
compute the right numbers, barriers and warp calls behave as on a GPU (and their misuse is an error), and the
nvcuda::wmma fragment API runs on the CPU. About 15 s on 2 cores (most of it compiling kernels once; cached)."""

from __future__ import annotations

import numpy as np
import pytest

from labkit import cuda_cpp, kernels_cuda, tensorcores

pytestmark = pytest.mark.skipif(cuda_cpp.host_compiler() is None, reason="no C++ compiler for the CPU stand-in")


# ----------------------------------------------------------------------------------------- reading code, not comments
def test_strip_comments_and_strings_keeps_lines_and_code() -> None:
    src = 'int a; // __syncthreads()\n/* __shared__\n wmma */ int b; const char* s = "__shfl_sync"; char c = \'"\';\nint d;'
    out = cuda_cpp.strip_comments_and_strings(src)
    assert out.count("\n") == src.count("\n")
    for word in ("__syncthreads", "__shared__", "wmma", "__shfl_sync"):
        assert word not in out
    assert "int a;" in out and "int b;" in out and "int d;" in out


def test_plan_is_decided_by_code_only() -> None:
    quiet = 'extern "C" __global__ void k(float* x) {\n  // no __syncthreads(), no __shared__, no asm("trap;") and no extern __shared__ here\n' \
            '  /* #include <cooperative_groups.h> */ printf("__shfl_sync wmma::mma_sync\\n"); x[0] = 1; }'
    plan = cuda_cpp.host_plan(quiet)
    assert plan.fibers is False and plan.includes == ()
    assert cuda_cpp.host_plan('#include <cuda_fp16.h>\n#include <mma.h>\n' + quiet).includes == ("cuda_fp16.h", "mma.h")
    assert cuda_cpp.host_plan(quiet.replace("x[0] = 1;", "__syncthreads(); x[0] = 1;")).fibers is True


@pytest.mark.parametrize("code, what", [
    ('extern __shared__ float s[4]; extern "C" __global__ void k(float* x) { x[0] = s[0]; }', "dynamic shared memory"),
    ('extern "C" __global__ void k(float* x) { asm volatile("trap;"); }', "inline PTX"),
    ('#include <cooperative_groups.h>\nextern "C" __global__ void k(float* x) { cooperative_groups::this_grid().sync(); }',
     "cooperative groups beyond"),
    ('extern "C" __global__ void __cluster_dims__(2, 1, 1) k(float* x) { x[0] = 1; }', "__cluster_dims__"),
    ('#include <curand_kernel.h>\nextern "C" __global__ void k(float* x) { x[0] = 1; }', "curand_kernel"),
])
def test_what_the_stand_in_does_not_emulate_is_named(code: str, what: str) -> None:
    with pytest.raises(cuda_cpp.HostUnavailable, match=what):
        cuda_cpp.host_plan(code)


COMMENTED_LEAKY = '''#include <cuda_fp16.h>   // included but unused: must not switch the stand-in off
// This kernel uses no __syncthreads(), no __shared__ memory, no wmma and no __shfl_sync; #include <mma.h> later.
extern "C" __global__
void leaky_relu(const float* __restrict__ x, float* __restrict__ y, float alpha, int n)
{
    /* an old version used asm("...") and extern __shared__ buffers */
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.0f ? v : alpha * v; }
}
'''


def test_words_in_comments_and_includes_do_not_switch_it_off_and_i_le_n_is_caught() -> None:
    n = 300
    x = np.linspace(-1, 1, n, dtype=np.float32)
    y = np.full(n, np.nan, np.float32)
    cuda_cpp.run_on_host(COMMENTED_LEAKY, "leaky_relu", (4,), (128,), (x, y, np.float32(0.25), np.int32(n)))
    np.testing.assert_allclose(y, np.where(x > 0, x, np.float32(0.25) * x), rtol=1e-6)
    with pytest.raises(cuda_cpp.OutOfBounds, match="past the end"):
        cuda_cpp.run_on_host(COMMENTED_LEAKY.replace("i < n", "i <= n"), "leaky_relu", (4,), (128,),
                             (x, y, np.float32(0.25), np.int32(n)))


# ----------------------------------------------------------------------------------------- device functions and intrinsics
INTRINSICS = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ __forceinline__ float sq(float v) { return v * v; }
extern "C" __global__ void many(const float* __restrict__ x, float* __restrict__ out, int* __restrict__ count, int n)
{
    int i = (blockIdx.z * gridDim.y * gridDim.x + blockIdx.y * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z)
          + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float* o = out + 12 * i;
    o[0] = rsqrtf(fabsf(v) + 1.0f);
    o[1] = __expf(v) + expf(-v);
    o[2] = fmaxf(v, 0.25f) + fminf(v, -0.25f);
    o[3] = sqrtf(sq(v) + 1.0f);
    o[4] = __fdividef(v, 3.0f);
    o[5] = __half2float(__float2half(v));
    o[6] = __half2float(__hadd(__float2half(v), __float2half(1.0f)));
    o[7] = __half2float(__hmul(__float2half(v), __float2half(v)));
    o[8] = __bfloat162float(__float2bfloat16(v));
    o[9] = (float)min(i, 7) + (float)max(i, n - 5);
    o[10] = __saturatef(v) + __logf(fabsf(v) + 1.0f);
    o[11] = (float)__float2int_rn(4.0f * v) + (float)__popc((unsigned)i);
    atomicAdd(count, 1);
}
'''


def _numpy_many(x: np.ndarray) -> np.ndarray:
    n = x.size
    i = np.arange(n)
    f16 = lambda a: np.asarray(a, np.float32).astype(np.float16).astype(np.float32)  # noqa: E731
    bf16 = (x.view(np.uint32) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) & 0xFFFF0000
    return np.stack([
        1 / np.sqrt(np.abs(x) + 1), np.exp(x) + np.exp(-x), np.maximum(x, 0.25) + np.minimum(x, -0.25), np.sqrt(x * x + 1),
        x / 3, f16(x), f16(f16(x) + 1), f16(f16(x) * f16(x)), bf16.astype(np.uint32).view(np.float32),
        np.minimum(i, 7) + np.maximum(i, n - 5), np.clip(x, 0, 1) + np.log(np.abs(x) + 1),
        np.rint(4 * x) + np.array([bin(k).count("1") for k in i]),
    ], axis=1).astype(np.float32)


@pytest.mark.parametrize("grid, block", [((5,), (64,)), ((2, 3), (8, 4)), ((2, 2, 2), (4, 2, 5))])
def test_intrinsics_half_bf16_atomics_and_3d_indices_give_numpys_numbers(grid: tuple, block: tuple) -> None:
    threads = int(np.prod(grid) * np.prod(block))
    n = threads - 3
    x = np.random.default_rng(3).uniform(-3, 3, n).astype(np.float32)
    out = np.full((n, 12), np.nan, np.float32)
    count = np.zeros(1, np.int32)
    cuda_cpp.run_on_host(INTRINSICS, "many", grid, block, (x, out, count, np.int32(n)))
    np.testing.assert_allclose(out, _numpy_many(x), rtol=2e-6, atol=1e-6)
    assert count[0] == n


HALF_BITS = r'''
#include <cuda_fp16.h>
extern "C" __global__ void bits(const float* x, unsigned short* h, float* back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { __half v = __float2half_rn(x[i]); h[i] = __half_as_ushort(v); back[i] = __half2float(v); }
}
'''


def test_float_to_half_rounds_like_numpy_everywhere() -> None:
    rng = np.random.default_rng(7)
    special = np.array([0.0, -0.0, 65504, 65519.99, 65520, -65520, 1e9, np.inf, -np.inf, 2.0**-24, 2.0**-25, 1.5 * 2.0**-25,
                        2.0**-14, 2.0**-14 - 2.0**-25, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 6e-8, 3e-8], np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        x = np.concatenate([special, rng.uniform(-70000, 70000, 3000), rng.uniform(-1e-4, 1e-4, 3000),
                            (rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)).view(np.float32)]).astype(np.float32)
        x = x[~np.isnan(x)]
        want = x.astype(np.float16)
    n = x.size
    h, back = np.zeros(n, np.uint16), np.zeros(n, np.float32)
    cuda_cpp.run_on_host(HALF_BITS, "bits", ((n + 255) // 256,), (256,), (x, h, back, np.int32(n)))
    np.testing.assert_array_equal(h, want.view(np.uint16))
    np.testing.assert_array_equal(back, want.astype(np.float32))


# ----------------------------------------------------------------------------------------- barriers, shared memory, warps
BLOCK_SUM = r'''
extern "C" __global__ void bsum(const float* x, float* out, int n) {
    __shared__ float s[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
'''


def test_shared_memory_and_barriers_give_a_tree_reduction() -> None:
    n = 1000
    x = np.random.default_rng(1).uniform(-1, 1, n).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    cuda_cpp.run_on_host(BLOCK_SUM, "bsum", (4,), (256,), (x, out, np.int32(n)))
    np.testing.assert_allclose(out, np.add.reduceat(np.pad(x, (0, 24)), [0, 256, 512, 768]), rtol=1e-5)
    # without the barrier inside the loop, a thread writes what another reads in the same phase: a race, reported
    racy = BLOCK_SUM.replace("        __syncthreads();\n    }", "    }")
    with pytest.raises(cuda_cpp.HostKernelError, match=r"shared-memory race: .* s\[\d+\] .*no __syncthreads\(\)"):
        cuda_cpp.run_on_host(racy, "bsum", (4,), (256,), (x, np.full(4, np.nan, np.float32), np.int32(n)))


def test_a_barrier_only_some_threads_reach_is_an_error() -> None:
    early = BLOCK_SUM.replace("    s[t] = i < n ? x[i] : 0.0f;", "    if (i >= n) return;\n    s[t] = x[i];")
    x = np.ones(1000, np.float32)
    with pytest.raises(cuda_cpp.HostKernelError, match="only some threads"):
        cuda_cpp.run_on_host(early, "bsum", (4,), (256,), (x, np.zeros(4, np.float32), np.int32(1000)))
    inside_if = BLOCK_SUM.replace("        if (t < k) s[t] += s[t + k];\n        __syncthreads();",
                                  "        if (t < k) { s[t] += s[t + k]; __syncthreads(); }")
    with pytest.raises(cuda_cpp.HostKernelError, match="__syncthreads"):
        cuda_cpp.run_on_host(inside_if, "bsum", (4,), (256,), (x, np.zeros(4, np.float32), np.int32(1000)))


WARP_SUM = r'''
extern "C" __global__ void wsum(const float* x, float* out, unsigned* votes, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    unsigned b = __ballot_sync(0xffffffffu, i < n && x[i] > 0.0f);
    if ((threadIdx.x & 31) == 0) { atomicAdd(out, v); votes[i / 32] = b; }
}
'''


def test_shuffles_and_votes_are_made_by_the_warp_together() -> None:
    n = 200
    x = np.random.default_rng(2).uniform(-1, 1, n).astype(np.float32)
    out, votes = np.zeros(1, np.float32), np.zeros(8, np.uint32)
    cuda_cpp.run_on_host(WARP_SUM, "wsum", (2,), (128,), (x, out, votes, np.int32(n)))
    assert out[0] == pytest.approx(float(x.sum()), rel=1e-5)
    padded = np.pad(x > 0, (0, 256 - n)).reshape(8, 32)
    assert votes.tolist() == [int(sum(1 << k for k in range(32) if row[k])) for row in padded]
    early = WARP_SUM.replace("    float v = i < n ? x[i] : 0.0f;", "    if (i >= n) return;\n    float v = x[i];")
    with pytest.raises(cuda_cpp.HostKernelError, match="returned"):
        cuda_cpp.run_on_host(early, "wsum", (2,), (128,), (x, np.zeros(1, np.float32), votes, np.int32(n)))


# ----------------------------------------------------------------------------------------- WMMA on the CPU
def _wmma(source: str, M: int, N: int, K: int, *, block: tuple | None = None, b_layout: str = "row") -> np.ndarray:
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-1, 1, (M, K)), rng.uniform(-1, 1, (K, N))
    B = b if b_layout == "row" else np.ascontiguousarray(b.T)
    C = np.full((M, N), np.nan, np.float32)
    grid, blk = tensorcores.wmma_launch(M, N)
    cuda_cpp.run_on_host(source, "wmma_gemm", grid, block or blk,
                         (a.astype(np.float16), B.astype(np.float16), C, np.int32(M), np.int32(N), np.int32(K)))
    grade = tensorcores.wmma_error(C, a, b)
    assert grade.unwritten == 0
    return np.array([grade.ok, grade.worst_ratio])


def test_the_reference_wmma_kernel_is_right_on_the_cpu() -> None:
    for shape in ((16, 16, 16), (80, 48, 112)):
        ok, _ = _wmma(tensorcores.WMMA_SOURCE, *shape)
        assert ok


def test_col_major_fragments_and_accumulator_loads() -> None:
    # B passed transposed (N x K row-major = K x N column-major), read with a col_major fragment;
    # C loaded as the accumulator's start (zeros here), via mem_col_major then stored row-major
    src = tensorcores.WMMA_SOURCE.replace(
        "wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;",
        "wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;").replace(
        "B + (size_t)k * N + tile_col * 16, N);", "B + (size_t)tile_col * 16 * K + k, K);")
    ok, _ = _wmma(src, 48, 32, 64, b_layout="col")
    assert ok
    wrong = src.replace("wmma::col_major> b;", "wmma::row_major> b;")
    ok, _ = _wmma(wrong, 48, 32, 64, b_layout="col")
    assert not ok


@pytest.mark.parametrize("change, match", [
    (("A + (size_t)tile_row * 16 * K + k, K)", "A + (size_t)tile_row * 16 * K + k + (threadIdx.x & 1) * 16, K)"), "different pointer"),
    (("    wmma::store_matrix_sync(", "    if (threadIdx.x == 0) wmma::store_matrix_sync("), "every lane|returned"),
    (("A + (size_t)tile_row * 16 * K + k, K)", "A + (size_t)tile_row * 16 * K + k + 1, K)"), "256-bit"),
])
def test_wmma_misuse_is_an_error(change: tuple[str, str], match: str) -> None:
    src = tensorcores.WMMA_SOURCE.replace(*change)
    assert src != tensorcores.WMMA_SOURCE
    with pytest.raises(cuda_cpp.HostKernelError, match=match):
        _wmma(src, 32, 32, 32)


def test_wmma_needs_whole_warps() -> None:
    with pytest.raises(cuda_cpp.HostKernelError, match="whole warp"):
        _wmma(tensorcores.WMMA_SOURCE, 16, 16, 16, block=(16, 1))


def test_every_registered_raw_kernel_runs_its_source_file_on_the_cpu() -> None:
    for name in kernels_cuda.names():
        k = kernels_cuda.get(name)
        if k.kind in ("raw", "module"):
            assert k.code == (kernels_cuda.CUDA_DIR / f"{name}.cu").read_text()
            try:
                cuda_cpp.host_plan(k.code)  # nothing the stand-in lacks ...
            except cuda_cpp.HostUnavailable as exc:  # ... unless it is GPU-only by design (inline PTX, clusters)
                assert any(w in str(exc) for w in ("inline PTX", "clusters", "cooperative groups")), (name, str(exc))


def test_printf_output_is_shown_and_strings_with_comment_marks_are_code(capsys: pytest.CaptureFixture[str]) -> None:
    src = r'''extern "C" __global__ void k(float* x, int n) {
    int i = threadIdx.x;
    if (i < n) { x[i] = 2 * i; if (i < 2) printf("thread %d: /* not a comment */ // nor this\n", i); }
}'''
    x = np.zeros(4, np.float32)
    cuda_cpp.run_on_host(src, "k", (1,), (32,), (x, np.int32(4)))
    np.testing.assert_array_equal(x, [0, 2, 4, 6])
    assert capsys.readouterr().out.splitlines() == ["thread 0: /* not a comment */ // nor this",
                                                    "thread 1: /* not a comment */ // nor this"]


def test_shared_memory_starts_each_block_uninitialised() -> None:
    """Shared memory is poisoned (all bytes 0xFF) before every block: a kernel that leaves part of a tile unwritten
    reads NaN there, as it would read garbage on a GPU, instead of zeros or the previous block's values."""
    forgets = BLOCK_SUM.replace("    s[t] = i < n ? x[i] : 0.0f;", "    if (i < n) s[t] = x[i];")
    x = np.ones(1000, np.float32)
    out = np.zeros(4, np.float32)
    cuda_cpp.run_on_host(forgets, "bsum", (4,), (256,), (x, out, np.int32(1000)))
    assert out[:3].tolist() == [256, 256, 256] and np.isnan(out[3])
    counter = 'extern "C" __global__ void k(int* out) { __shared__ int c; if (threadIdx.x == 0) { out[blockIdx.x] = c; c = 0; } }'
    got = np.zeros(3, np.int32)
    cuda_cpp.run_on_host(counter, "k", (3,), (32,), (got,))
    assert got.tolist() == [-1, -1, -1]  # not 0, and not what the previous block left


def test_an_array_passed_twice_is_one_buffer() -> None:
    src = 'extern "C" __global__ void inc(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i] + 1.0f; }'
    a = np.arange(8, dtype=np.float32)
    cuda_cpp.run_on_host(src, "inc", (1,), (32,), (a, a, np.int32(8)))  # in place, as on a GPU
    np.testing.assert_array_equal(a, np.arange(8) + 1)


def test_a_kernel_that_never_ends_or_writes_far_away_is_a_clear_error() -> None:
    spin = 'extern "C" __global__ void k(float* x, int n) { for (int i = threadIdx.x; i < n; i += 0) x[i] = 1; }'
    with pytest.raises(cuda_cpp.LabkitError, match="did not finish within"):
        cuda_cpp.run_on_host(spin, "k", (1,), (32,), (np.zeros(8, np.float32), np.int32(8)), timeout_s=1.5)
    wild = 'extern "C" __global__ void k(float* x, int n) { x[(long long)threadIdx.x << 34] = 1; }'
    with pytest.raises(cuda_cpp.LabkitError, match="crashed"):
        cuda_cpp.run_on_host(wild, "k", (1,), (32,), (np.zeros(8, np.float32), np.int32(8)))


def test_dynamic_shared_declarations_are_rewritten_keeping_lines() -> None:
    src = ('extern __shared__ float s[];\nextern "C" __global__ void k(float* x) {\n'
           '  extern __shared__ __align__(16) unsigned char raw[];\n  x[0] = s[0] + raw[0]; }')
    out, count = cuda_cpp.rewrite_dynamic_shared(src)
    assert count == 2 and "extern __shared__" not in out and out.count("\n") == src.count("\n")
    assert "float* const s = reinterpret_cast<float*>(__lk_dyn_smem);" in out
    assert "unsigned char* const raw" in out
    plan = cuda_cpp.host_plan(src)
    assert plan.dynamic_shared and plan.fibers
    assert not cuda_cpp.host_plan('extern "C" __global__ void k(float* x) { x[0] = 1; }').dynamic_shared
