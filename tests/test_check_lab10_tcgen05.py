"""Lab 10's Blackwell check (10.tcgen05-tmem) reads the PTX for sm_100a of the learner's Tensor Memory kernel:
right sources pass for fresh widths, each plausible mistake gets its cause. NVRTC compiles sm_100a without a GPU
(12.9 and 13 both do). Cost: about 15 s (a few NVRTC compiles per case)."""

from __future__ import annotations

import pytest

import labkit
from labkit.check import lab10_tcgen05 as T

pytestmark = pytest.mark.toolchain  # NVRTC compiles sm_100a: `make test-cu13` runs these under CUDA 13 too


@pytest.fixture(autouse=True)
def _sim(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "sim")
    monkeypatch.delenv("LABKIT_EXPECT", raising=False)
    labkit.setup(quiet=True)


def _cause(r) -> str:
    return f"{r.message} {r.cause or ''}"


def source(n, cols=None, relinquish=True, barrier=True, dealloc=None, register=False, group=1):
    cols = T.columns_for(n) if cols is None else cols
    count = '"r"(cols)' if register else f'"n"({cols})'
    return f"""
extern "C" __global__ void tmem_tile(unsigned* out)
{{
    __shared__ unsigned tmem_base;
    unsigned cols = {cols};
    if (threadIdx.x < 32) {{
        unsigned dst = (unsigned)__cvta_generic_to_shared(&tmem_base);
        asm volatile("tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32 [%0], %1;" :: "r"(dst), {count});
        {'asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");' if relinquish else ''}
    }}
    {'__syncthreads();' if barrier else ''}
    unsigned taddr = tmem_base;
    out[threadIdx.x] = taddr + cols;
    {'__syncthreads();' if barrier else ''}
    if (threadIdx.x < 32) {{
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "n"({cols if dealloc is None else dealloc}));
    }}
}}
"""


def test_columns_rule() -> None:
    assert [T.columns_for(n) for n in (1, 32, 33, 64, 65, 200, 256, 257, 512)] == [32, 32, 64, 64, 128, 256, 256, 512, 512]


def test_accepts_a_right_source() -> None:
    assert T.tcgen05_tmem(lambda n: source(n))


@pytest.mark.parametrize(
    "make, word",
    [
        (lambda n: source(n, cols=n if n % 32 else n + 1), "allocates"),
        (lambda n: source(n, relinquish=False), "relinquish"),
        (lambda n: source(n, barrier=False), "barrier"),
        (lambda n: source(n, dealloc=32), "dealloc"),
        (lambda n: source(n, register=True), "register"),
    ],
)
def test_rejects_mistakes_with_their_cause(make, word) -> None:
    r = T.tcgen05_tmem(make)
    assert not r and word in _cause(r), _cause(r)


def test_skeleton_junk_and_a_non_compiling_source() -> None:
    assert T.tcgen05_tmem(lambda n: ...).status == "unsolved"
    assert T.tcgen05_tmem(lambda n: 'extern "C" __global__ void tmem_tile(unsigned* out) { out[0] = 1; }').status == "unsolved"
    assert not T.tcgen05_tmem(lambda n: 42)
    r = T.tcgen05_tmem(lambda n: 'extern "C" __global__ void tmem_tile(unsigned* out) { tcgen05(); }')
    assert not r and "does not compile" in _cause(r)


def test_cases_cover_the_rounding_edges() -> None:
    cases = T._cases()
    assert any(n < 32 for n in cases) and any(n & (n - 1) == 0 and n >= 64 for n in cases)
    assert any(n > 256 for n in cases) and any(n & (n - 1) for n in cases if n > 32)


def test_the_reference_cu_file_reads_right_for_every_width() -> None:
    """kernels/cuda/tmem_tile.cu with TMEM_COLUMNS set passes the PTX reading the check applies."""
    from labkit.cuda import ptx

    for n in (1, 64, 300):
        T.judge(n, ptx.compile_cuda(T.reference_source(n), "sm_100a").text)
