"""Lab 06's Hopper/Blackwell checks (06.wmma-peak, 06.mx-quantize, 06.fp8-promotion) accept right answers and reject
wrong ones with the cause each mistake deserves. Cost: about 2 s."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import labkit
from labkit import precision as P
from labkit import scaling
from labkit.check import core, lab06_hopper as H


@pytest.fixture(autouse=True)
def _sim(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "sim")
    monkeypatch.delenv("LABKIT_EXPECT", raising=False)
    labkit.setup(quiet=True)


def _cause(result) -> str:
    return f"{result.message} {result.cause or ''}"


# ---------------------------------------------------------------- 06.wmma-peak


def test_wmma_peak_accepts_the_model_and_says_why() -> None:
    r = H.wmma_peak(512, 80)
    assert r and "25%" in r.message
    assert H.wmma_peak(512.0, np.float64(80.0))


@pytest.mark.parametrize("wmma, wgmma, word", [
    (256, 80, "2 FLOPs"),              # a multiply-add counted as one FLOP
    (128, 80, "per Tensor Core"),      # forgot the 4 Tensor Cores per SM
    (1024, 80, "FP16 (2 bytes)"),      # FP32 operands
    (None, 80, "accumulator"),        # C read and written too (set in the test)
    (512, 64, "only B"),               # wgmma with A in registers, not what was asked
    (512, 512, "WMMA shape"),          # copied the first answer
    (0.25, 80, "not a fraction"),      # a fraction of the peak instead of bytes per clock
])
def test_wmma_peak_rejects_slips_with_their_cause(wmma, wgmma, word) -> None:
    if word == "accumulator":
        wmma = 4096 * (2 * 256 * 2 + 2 * 256 * 4) / 8192  # A and B plus C read and written in FP32
    r = H.wmma_peak(wmma, wgmma)
    assert not r and word in _cause(r), _cause(r)


def test_wmma_peak_skeleton_and_bad_types() -> None:
    assert H.wmma_peak(..., ...).status == "unsolved"
    assert not H.wmma_peak("512", 80)
    assert not H.wmma_peak(-512, 80)


# ---------------------------------------------------------------- 06.mx-quantize


def good_mx(x):
    b = x.reshape(*x.shape[:-1], -1, 32)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    s = 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8)
    return (P.round_to(b / s, "fp8_e4m3", on_range="ignore") * s).reshape(x.shape)


def frexp_mx(x):  # correct, written differently: frexp's exponent is floor(log2) + 1
    b = x.reshape(x.shape[0], -1, 32)
    _, e = np.frexp(np.abs(b).max(axis=-1, keepdims=True))
    s = np.ldexp(1.0, e - 1 - 8)
    return np.clip(P.round_to(b / s, "fp8_e4m3", on_range="ignore"), -448, 448).__mul__(s).reshape(x.shape)


def no_saturation(x):  # ml_dtypes' cast: values above 464 become NaN
    b = x.reshape(*x.shape[:-1], -1, 32)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    s = 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8)
    return ((b / s).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * s).reshape(x.shape)


def per_tensor(x):
    return scaling.quantize_per_tensor(x, "fp8_e4m3").values


def exact_scale(x):  # amax / 448: not a power of two
    b = x.reshape(*x.shape[:-1], -1, 32)
    s = np.abs(b).max(axis=-1, keepdims=True) / 448
    s = np.where(s > 0, s, 1.0)
    return (P.round_to(b / s, "fp8_e4m3", on_range="ignore") * s).reshape(x.shape)


def ceil_scale(x):
    b = x.reshape(*x.shape[:-1], -1, 32)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    s = 2.0 ** (np.ceil(np.log2(np.where(amax > 0, amax, 1.0))) - 8)
    return (P.round_to(b / s, "fp8_e4m3", on_range="ignore") * s).reshape(x.shape)


def round_up_mx(x):  # NVIDIA's MXFP8 recipe (Transformer Engine): 2**ceil(log2(amax / 448)), nothing clamps
    b = x.reshape(*x.shape[:-1], -1, 32)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    s = 2.0 ** np.ceil(np.log2(np.where(amax > 0, amax, 448.0) / 448))
    return (P.round_to(b / s, "fp8_e4m3", on_range="ignore") * s).reshape(x.shape)


def test_mx_quantize_gives_nvidias_round_up_rule_its_own_cause() -> None:
    """Review 4, P2: the round-up rule is NVIDIA's production recipe, not a mistake that 'wastes a binade'."""
    for _ in range(5):
        r = H.mx_quantize(round_up_mx)
        assert not r and "NVIDIA's round-up rule" in _cause(r) and "asks for OCP MX v1.0's floor rule" in _cause(r)
        assert "wastes" not in _cause(r)


def blocks_of_16(x):
    b = x.reshape(*x.shape[:-1], -1, 16)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    s = 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 8)
    return (P.round_to(b / s, "fp8_e4m3", on_range="ignore") * s).reshape(x.shape)


def test_mx_quantize_accepts_correct_versions() -> None:
    assert H.mx_quantize(good_mx)
    assert H.mx_quantize(frexp_mx)
    assert H.mx_quantize(H._reference_mx_quantize())


@pytest.mark.parametrize("fn, word", [
    (no_saturation, "saturate"),
    (per_tensor, "whole tensor"),
    (exact_scale, "power of two"),
    (ceil_scale, "ceil"),
    (blocks_of_16, "blocks of 16"),
])
def test_mx_quantize_rejects_wrong_versions(fn, word) -> None:
    r = H.mx_quantize(fn)
    assert not r and word in _cause(r), _cause(r)


def test_mx_quantize_cases_hold_the_edge_cases() -> None:
    x = H._mx_cases()[0]  # first, so that its edge cases name the slip before any other case
    assert not x[0, :32].any()  # an all-zero block
    assert any(abs(scaling.quantize_blocks(x, "mxfp8_e4m3").values[r, 5]) != abs(x[r, 5]) for r in (2, 3))
    ratio = np.abs(x[2:4, :32]).max(axis=1) / scaling.e8m0_scale(np.abs(x[2:4, :32]).max(axis=1))
    assert np.all(ratio > 464)  # ml_dtypes' cast would make them NaN: saturation is tested on every run


def test_mx_quantize_skeleton_and_wrong_shapes() -> None:
    assert H.mx_quantize(lambda x: ...).status == "unsolved"
    assert not H.mx_quantize(lambda x: good_mx(x).ravel())
    assert not H.mx_quantize(42)


# ---------------------------------------------------------------- 06.fp8-promotion


def promoted(a, b, interval):
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], interval):
        c += P.gemm(a[:, k0:k0 + interval], b[k0:k0 + interval], "fp8_e4m3", accumulate="limited").astype(np.float32)
    return c


def promoted_fp64(a, b, interval):  # the total in float64: the same numbers here, but the statement asks for FP32
    return sum(P.gemm(a[:, k0:k0 + interval], b[k0:k0 + interval], "fp8_e4m3", accumulate="limited")
               for k0 in range(0, a.shape[1], interval))


def no_promotion(a, b, interval):
    return P.gemm(a, b, "fp8_e4m3", accumulate="limited")


def drops_last_chunk(a, b, interval):
    K = a.shape[1] - a.shape[1] % interval
    return promoted(a[:, :K], b[:K], interval)


def fp32_chunks(a, b, interval):
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], interval):
        c += P.gemm(a[:, k0:k0 + interval], b[k0:k0 + interval], "fp8_e4m3", accumulate="fp32").astype(np.float32)
    return c


def fixed_128(a, b, interval):
    return promoted(a, b, 128)


def fp16_total(a, b, interval):
    c = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for k0 in range(0, a.shape[1], interval):
        c += P.gemm(a[:, k0:k0 + interval], b[k0:k0 + interval], "fp8_e4m3", accumulate="limited").astype(np.float16)
    return c


def test_fp8_promotion_accepts_correct_versions() -> None:
    assert H.fp8_promotion(promoted)
    assert H.fp8_promotion(H._reference_promotion())
    r = H.fp8_promotion(promoted_fp64)  # issue 34: a float64 total where the statement asks for np.float32
    assert r.status == "failed" and "FP32 total" in r.message


@pytest.mark.parametrize("fn, word", [
    (no_promotion, "no promotion"),
    (drops_last_chunk, "last chunk"),
    (fp32_chunks, "limited accumulator"),
    (fixed_128, "fixed 128"),
    (fp16_total, "FP16"),
])
def test_fp8_promotion_rejects_wrong_versions(fn, word) -> None:
    r = H.fp8_promotion(fn)
    assert not r and word in _cause(r), _cause(r)


def test_fp8_promotion_skeleton_and_errors() -> None:
    assert H.fp8_promotion(lambda a, b, i: ...).status == "unsolved"
    assert not H.fp8_promotion(lambda a, b, i: np.zeros(3))
    assert not H.fp8_promotion(lambda a, b, i: 1 / 0)


def test_promotion_makes_a_difference_the_check_can_see() -> None:
    a, b, interval = H._promotion_cases()[0]
    with_p = P.gemm(a, b, "fp8_e4m3", accumulate="limited", promote_every=interval, on_range="ignore")
    without = P.gemm(a, b, "fp8_e4m3", accumulate="limited", on_range="ignore")
    assert np.max(np.abs(with_p - without)) > 1e-4 * np.max(np.abs(with_p))


def test_every_new_exercise_has_three_hints_a_reference_and_a_kind() -> None:
    for ex_id, kind in (("06.wmma-peak", "numeric"), ("06.mx-quantize", "code"), ("06.fp8-promotion", "code"),
                        ("06.te-scale", "code")):
        ex = core._REGISTRY[ex_id]
        assert len(ex.hints) == 3 and ex.reference is not None and ex.kind == kind
        assert getattr(labkit.check, ex.check.__name__).exercise_id == ex_id


# ---------------------------------------------------------------- 06.te-scale


def good_scale(amax_history, fmt, margin, previous):
    import math

    if not all(math.isfinite(a) for a in amax_history):  # inf or NaN anywhere: the step overflowed
        return previous
    amax = max(amax_history)
    if amax <= 0:
        return previous
    return P.format_info(fmt).max_normal / amax / 2**margin


def np_scale(amax_history, fmt, margin, previous):  # correct, written with NumPy
    a = np.max(np.asarray(amax_history))
    return np.float64(previous) if not np.isfinite(a) or a == 0 else np.ldexp(P.format_info(fmt).max_normal / a, -margin)


def test_te_scale_accepts_correct_versions() -> None:
    assert H.te_scale(good_scale)
    assert H.te_scale(np_scale)
    assert H.te_scale(H._reference_te_scale())


@pytest.mark.parametrize("fn, word", [
    (lambda h, f, m, p: max(h) / P.format_info(f).max_normal * 2**m if 0 < max(h) < np.inf else p, "inverse"),
    (lambda h, f, m, p: P.format_info(f).max_normal / h[-1] / 2**m if 0 < max(h) < np.inf else p, "most recent"),
    (lambda h, f, m, p: P.format_info(f).max_normal / max(h) if 0 < max(h) < np.inf else p, "margin"),
    (lambda h, f, m, p: 448 / max(h) / 2**m if 0 < max(h) < np.inf else p, "57,344"),
    (lambda h, f, m, p: P.format_info(f).max_normal / max(h) / 2**m if max(h) > 0 else p, "previous"),
    (lambda h, f, m, p: P.format_info(f).max_normal / max(max(h), 1e-30) / 2**m if max(h) < np.inf else p, "previous"),
])
def test_te_scale_rejects_wrong_versions(fn, word) -> None:
    r = H.te_scale(fn)
    assert not r and word in _cause(r), _cause(r)


def test_te_scale_skeleton() -> None:
    assert H.te_scale(lambda h, f, m, p: ...).status == "unsolved"
