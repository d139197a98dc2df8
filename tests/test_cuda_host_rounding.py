"""The C++ stand-in's fused half and bfloat16 operations round once, as CUDA's do (issue 45, item 5).

``__hfma``/``__hfma2`` and their bfloat16 forms are checked bit for bit against an exact reference (Python's
fractions: a*b+c computed exactly, then rounded to nearest even once) on random inputs and on crafted inputs where
computing in float and rounding a second time gives another answer (the exact sum lies just off a midpoint of the
narrow format). The same kernel checks the half2 and bfloat162 operators against the scalar operations."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from labkit import cuda_cpp

pytestmark = pytest.mark.skipif(cuda_cpp.host_compiler() is None, reason="no C++ compiler for the CPU stand-in")

FUSED = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void fused(const unsigned short* a, const unsigned short* b, const unsigned short* c,
                                 unsigned short* h, unsigned short* h2, unsigned short* bf, unsigned short* bf2, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half ha = __ushort_as_half(a[i]), hb = __ushort_as_half(b[i]), hc = __ushort_as_half(c[i]);
    h[i] = __half_as_ushort(__hfma(ha, hb, hc));
    __half2 p = __hfma2(__halves2half2(hc, ha), __halves2half2(hc, hb), __halves2half2(ha, hc));
    h2[i] = __half_as_ushort(__high2half(p));  // the high lane: a*b+c
    __nv_bfloat16 ba = __ushort_as_bfloat16(a[i]), bb = __ushort_as_bfloat16(b[i]), bc = __ushort_as_bfloat16(c[i]);
    bf[i] = __bfloat16_as_ushort(__hfma(ba, bb, bc));
    __nv_bfloat162 q = __hfma2(__halves2bfloat162(ba, bc), __halves2bfloat162(bb, bc), __halves2bfloat162(bc, ba));
    bf2[i] = __bfloat16_as_ushort(__low2bfloat16(q));
}
extern "C" __global__ void directed(const float* a, const float* b, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    float r[12] = {__fadd_rz(x, y), __fadd_ru(x, y), __fadd_rd(x, y), __fsub_rz(x, y), __fsub_ru(x, y), __fsub_rd(x, y),
                   __fmul_rz(x, y), __fmul_ru(x, y), __fmul_rd(x, y), __fdiv_rz(x, y), __fdiv_ru(x, y), __fdiv_rd(x, y)};
    for (int k = 0; k < 12; ++k) out[12 * i + k] = r[k];
}
"""

HALF = (11, -14, Fraction(65504))
BF16 = (8, -126, Fraction(2**8 - 1, 2**7) * Fraction(2) ** 127)


def _value(bits: int, fmt: str) -> Fraction:
    if fmt == "half":
        return Fraction(float(np.array(bits, np.uint16).view(np.float16)))
    return Fraction(float(np.array(bits << 16, np.uint32).view(np.float32)))


def _round_once(q: Fraction, spec: tuple[int, int, Fraction]) -> float:
    """``q`` rounded to nearest even in a binary format of ``prec`` bits (exactly, by the definition)."""
    prec, emin, maxv = spec
    if q == 0:
        return 0.0
    sign, q = (-1 if q < 0 else 1), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()  # 2^(e-1) <= q < 2^(e+1)
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    exp = max(e, emin) - (prec - 1)  # the weight of the last kept bit
    scaled = q / Fraction(2) ** exp
    n, rem = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rem
    if twice > scaled.denominator or (twice == scaled.denominator and n % 2):
        n += 1
    r = Fraction(n) * Fraction(2) ** exp
    return sign * (float("inf") if r > maxv else float(r))


def _bits(value: float, fmt: str) -> int:
    if fmt == "half":
        return int(np.array(value, np.float16).view(np.uint16))  # exact: value is a half already
    return int(np.array(value, np.float32).view(np.uint32)) >> 16  # exact: value is a bfloat16 already


def _reference(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str) -> np.ndarray:
    spec = HALF if fmt == "half" else BF16
    out = [
        _bits(_round_once(_value(x, fmt) * _value(y, fmt) + _value(z, fmt), spec), fmt)
        for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())
    ]
    return np.array(out, np.uint16)


def _float_then_round(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str) -> np.ndarray:
    """What the old stand-in computed: fmaf in float, then a second rounding."""
    if fmt == "half":
        fa, fb, fc = (x.view(np.float16).astype(np.float64) for x in (a, b, c))
        return np.array([np.float16(np.float32(x * y + z)) for x, y, z in zip(fa, fb, fc)]).view(np.uint16)
    fa, fb, fc = ((x.astype(np.uint32) << 16).view(np.float32).astype(np.float64) for x in (a, b, c))
    f32 = (fa * fb + fc).astype(np.float32).view(np.uint32)  # exact product, one rounding to float (as fmaf)
    rounded = (f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def _crafted(fmt: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a*b is a midpoint of the format (one bit more than it holds) and c is tiny: the exact sum rounds away from the
    tie, float arithmetic loses c and rounds the tie to even."""
    prec = 11 if fmt == "half" else 8
    lo, hi = 2**prec + 1, 2 ** (prec + 1)
    rows = []
    for m in range(lo, hi, 2):  # odd midpoints
        for f in range(3, int(m**0.5) + 1, 2):
            if m % f == 0 and m // f < 2**prec:
                rows.append((f, m // f))
    pick = [rows[k] for k in rng.choice(len(rows), size=min(len(rows), 300), replace=False)]
    a, b, c = [], [], []
    for x, y in pick:
        # a*b lies in [2^5, 2^12], where a float's half-ulp is at least 2^-19; c is below it (and a half or bfloat16)
        tiny = 2.0 ** -int(rng.integers(21, 25) if prec == 11 else rng.integers(30, 60))
        sign = 1.0 if rng.random() < 0.5 else -1.0
        scale = 2.0 ** -int(rng.integers(0, 7))
        a.append(x * scale)
        b.append(y * 1.0)
        c.append(sign * tiny)
    if fmt == "half":
        return tuple(np.array(v, np.float16).view(np.uint16) for v in (a, b, c))  # type: ignore[return-value]
    return tuple((np.array(v, np.float32).view(np.uint32) >> 16).astype(np.uint16) for v in (a, b, c))  # type: ignore[return-value]


def _finite_bits(rng: np.random.Generator, n: int, fmt: str) -> np.ndarray:
    bits = rng.integers(0, 2**16, n, dtype=np.uint32).astype(np.uint16)
    exp = (bits >> 10) & 0x1F if fmt == "half" else (bits >> 7) & 0xFF
    return bits[exp != (0x1F if fmt == "half" else 0xFF)]


@pytest.mark.parametrize("fmt", ["half", "bf16"])
def test_fused_multiply_add_rounds_once(fmt: str) -> None:
    rng = np.random.default_rng(45)
    n_rand = 6000
    ra, rb, rc = (_finite_bits(rng, n_rand, fmt)[: n_rand // 2] for _ in range(3))
    near = lambda: (np.float32(rng.uniform(0.5, 2.0, n_rand // 2)))  # noqa: E731 - products near 1, where ties sit
    if fmt == "half":
        na, nb, nc = (near().astype(np.float16).view(np.uint16) for _ in range(3))
    else:
        na, nb, nc = ((near().view(np.uint32) >> 16).astype(np.uint16) for _ in range(3))
    ca, cb, cc = _crafted(fmt, rng)
    a, b, c = (np.concatenate(v) for v in ((ra, na, ca), (rb, nb, cb), (rc, nc, cc)))
    n = a.size
    outs = [np.zeros(n, np.uint16) for _ in range(4)]
    cuda_cpp.run_on_host(FUSED, "fused", ((n + 127) // 128,), (128,), (a, b, c, *outs, np.int32(n)))
    h, h2, bf, bf2 = outs
    got, got2 = (h, h2) if fmt == "half" else (bf, bf2)
    want = _reference(a, b, c, fmt)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got2, want)
    # the crafted inputs are ones a second rounding gets wrong: the test would catch the old float-then-round
    k = ca.size
    twice = _float_then_round(a[-k:], b[-k:], c[-k:], fmt)
    assert (twice != want[-k:]).sum() > k // 4  # about half: where c points away from the even neighbour


F32 = (24, -126, Fraction(2**24 - 1, 2**23) * Fraction(2) ** 127)


def _directed(q: Fraction, mode: str) -> np.float32:
    """``q`` rounded to float32 toward zero, up or down (from the nearest, by the exact comparison)."""
    r = np.float32(_round_once(q, F32))
    if Fraction(float(r)) == q:
        return r
    above = Fraction(float(r)) > q
    if mode == "rz" and (above if q > 0 else not above):
        return np.nextafter(r, np.float32(0))
    if mode == "ru" and not above:
        return np.nextafter(r, np.float32(np.inf))
    if mode == "rd" and above:
        return np.nextafter(r, np.float32(-np.inf))
    return r


def test_directed_rounding_intrinsics_round_toward_zero_up_and_down() -> None:
    rng = np.random.default_rng(46)
    n = 600
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
    out = np.zeros(12 * n, np.float32)
    cuda_cpp.run_on_host(FUSED, "directed", ((n + 127) // 128,), (128,), (a, b, out, np.int32(n)))
    got = out.reshape(n, 12)
    ops = (lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x / y)
    inexact = 0
    for i in range(n):
        x, y = Fraction(float(a[i])), Fraction(float(b[i]))
        for k, op in enumerate(ops):
            exact = op(x, y)
            for m, mode in enumerate(("rz", "ru", "rd")):
                assert got[i, 3 * k + m] == _directed(exact, mode), (a[i], b[i], k, mode)
            inexact += Fraction(float(got[i, 3 * k + 1])) != Fraction(float(got[i, 3 * k + 2]))
    assert inexact > n  # most results are inexact, so up and down differ: the modes were really applied
