"""labkit.precision: formats, exact rounding, ties, ranges, subnormals, overflow reports, bit fields, GEMM."""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from labkit import precision as P
from labkit.errors import LabkitError

rng = np.random.default_rng(2024)


def _wide_float32(n: int) -> np.ndarray:
    """Random float32 values of both signs over the whole exponent range (normals and subnormals)."""
    u = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    x = u.view(np.float32)
    return x[np.isfinite(x)]


# ------------------------------------------------------------------ formats


@pytest.mark.parametrize(
    "name, bits, e, m, bias, max_normal, min_normal, min_sub, eps",
    [
        ("fp64", 64, 11, 52, 1023, np.finfo(np.float64).max, 2.0**-1022, 2.0**-1074, 2.0**-52),
        ("fp32", 32, 8, 23, 127, float(np.finfo(np.float32).max), 2.0**-126, 2.0**-149, 2.0**-23),
        ("tf32", 19, 8, 10, 127, (2 - 2**-10) * 2.0**127, 2.0**-126, 2.0**-136, 2.0**-10),
        ("fp16", 16, 5, 10, 15, 65504.0, 2.0**-14, 2.0**-24, 2.0**-10),
        ("bf16", 16, 8, 7, 127, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), 2.0**-126, 2.0**-133, 2.0**-7),
        ("fp8_e4m3", 8, 4, 3, 7, 448.0, 2.0**-6, 2.0**-9, 2.0**-3),
        ("fp8_e5m2", 8, 5, 2, 15, 57344.0, 2.0**-14, 2.0**-16, 2.0**-2),
    ],
)
def test_format_info(name, bits, e, m, bias, max_normal, min_normal, min_sub, eps):
    info = P.format_info(name)
    assert (info.bits, info.exponent_bits, info.mantissa_bits, info.bias) == (bits, e, m, bias)
    assert info.max_normal == max_normal
    assert info.min_normal == min_normal
    assert info.min_subnormal == min_sub
    assert info.epsilon == eps


def test_ml_dtypes_agree_on_fp8_and_bf16_ranges():
    for name, dt in (("fp8_e4m3", ml_dtypes.float8_e4m3fn), ("fp8_e5m2", ml_dtypes.float8_e5m2), ("bf16", ml_dtypes.bfloat16)):
        fi, info = ml_dtypes.finfo(dt), P.format_info(name)
        assert float(fi.max) == info.max_normal
        assert float(fi.smallest_normal) == info.min_normal
        assert float(fi.smallest_subnormal) == info.min_subnormal
        assert float(fi.eps) == info.epsilon


def test_inf_nan_flags_and_int8():
    assert P.format_info("fp8_e4m3").has_inf is False and P.format_info("fp8_e4m3").saturates
    assert P.format_info("fp8_e5m2").has_inf is True
    i8 = P.format_info("int8")
    assert i8.kind == "int" and i8.max_normal == 127 and not i8.has_nan
    assert P.formats() == ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "int8"]


def test_names_aliases_and_did_you_mean():
    assert P.normalize_name("FP16") == "fp16"
    assert P.normalize_name("half") == "fp16"
    assert P.normalize_name("E4M3") == "fp8_e4m3"
    assert P.normalize_name("fp8-e5m2") == "fp8_e5m2"
    assert P.normalize_name(np.float16) == "fp16"
    assert P.normalize_name(ml_dtypes.bfloat16) == "bf16"
    with pytest.raises(LabkitError, match="Did you mean bf16"):
        P.format_info("bf61")
    with pytest.raises(LabkitError, match="ambiguous"):
        P.round_to(1.0, "fp8")
    with pytest.raises(LabkitError):
        P.round_to(1.0, 3.5)


# ------------------------------------------------------------------ rounding: hand-worked values and ties


@pytest.mark.parametrize(
    "fmt, x, expected",
    [
        ("fp16", 0.1, 0.0999755859375),
        ("fp16", 1 / 3, 0.333251953125),
        ("fp16", 1 + 2**-11, 1.0),                      # tie -> even mantissa (0)
        ("fp16", 1 + 3 * 2**-11, 1 + 2**-9),            # tie -> even mantissa (2, not 1)
        ("fp16", 1 + 2**-11 + 2**-40, 1 + 2**-10),      # just above the tie
        ("fp16", 65519.0, 65504.0),
        ("fp16", 2.0**-25, 0.0),                        # half the smallest subnormal: tie to 0
        ("fp16", 1.5 * 2.0**-25, 2.0**-24),
        ("fp16", 3 * 2.0**-25, 2.0**-23),               # tie between subnormals 1 and 2 units -> 2
        ("bf16", 0.1, 0.10009765625),
        ("bf16", math.pi, 3.140625),
        ("bf16", 1 + 2**-8, 1.0),                       # tie
        ("bf16", 1 + 2**-8 + 2**-40, 1 + 2**-7),        # ml_dtypes gets this wrong from float64 (rounds twice)
        ("bf16", 1 + 3 * 2**-8, 1 + 2**-6),
        ("fp8_e4m3", 1 + 2**-4, 1.0),                   # tie
        ("fp8_e4m3", 1 + 3 * 2**-4, 1.25),
        ("fp8_e4m3", 460.0, 448.0),
        ("fp8_e4m3", 2.0**-10, 0.0),                    # tie between 0 and the smallest subnormal
        ("fp8_e5m2", 1 + 2**-3, 1.0),
        ("fp8_e5m2", 61439.0, 57344.0),
        ("fp32", 1 + 2**-24, 1.0),
        ("fp32", 1 + 3 * 2**-24, 1 + 2**-22),
        ("fp64", 0.1, 0.1),
        ("int8", 2.5, 2.0),
        ("int8", 3.5, 4.0),
        ("int8", -2.5, -2.0),
        ("int8", 127.4, 127.0),
        ("int8", -128.5, -128.0),
    ],
)
def test_round_hand_worked(fmt, x, expected):
    assert P.round_to(x, fmt, on_range="ignore") == expected


@pytest.mark.parametrize(
    "x, expected",
    [
        (1.0, 1.0),
        (1 + 2**-10, 1 + 2**-10),
        (1 + 2**-11, 1.0),                    # tie, kept bit 0 -> down
        (1 + 3 * 2**-11, 1 + 2**-9),          # tie, kept bit 1 -> up
        (1 + 2**-11 + 2**-23, 1 + 2**-10),    # above the tie
        (1 + 2**-11 - 2**-23, 1.0),           # below the tie
        (-(1 + 3 * 2**-11), -(1 + 2**-9)),
        (2 - 2**-11, 2.0),                    # tie carrying into the exponent: 1.11..1|1 -> 10.0
        (0.1, 0.0999755859375),               # same 10-bit mantissa as FP16
        (2.0**-130, 2.0**-130),               # subnormal in TF32 and FP32
        (2.0**-137, 0.0),                     # half TF32's smallest subnormal: tie to 0
        (3 * 2.0**-137, 2.0**-135),
        (float(np.finfo(np.float32).max), math.inf),
    ],
)
def test_tf32_hand_worked_and_ties(x, expected):
    assert P.round_to(x, "tf32", on_range="ignore") == expected
    assert float(P.round_tf32_bits(np.float32(x))) == expected


def test_tf32_bits_match_exact_rounding_of_fp32_values():
    x = _wide_float32(200_000)
    info = P.format_info("tf32")
    exact = P._round_float_exact(x.astype(np.float64), info)
    exact = np.where(np.abs(exact) > info.max_normal, np.copysign(np.inf, exact), exact)
    got = P.round_tf32_bits(x).astype(np.float64)
    assert np.array_equal(got, exact)
    # every result keeps the 13 low bits zero
    assert not (P.round_tf32_bits(x).view(np.uint32) & 0x1FFF).any()


def test_tf32_keeps_nan_and_inf():
    out = P.round_tf32_bits(np.array([np.nan, np.inf, -np.inf], np.float32))
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf


@pytest.mark.parametrize("fmt, dt", [("bf16", ml_dtypes.bfloat16), ("fp16", np.float16), ("fp8_e5m2", ml_dtypes.float8_e5m2), ("fp8_e4m3", ml_dtypes.float8_e4m3fn)])
def test_exact_rounding_matches_ml_dtypes_from_float32(fmt, dt):
    """From float32 inputs, ml_dtypes and NumPy round once; labkit must agree bit for bit (in range)."""
    x = _wide_float32(100_000)
    info = P.format_info(fmt)
    x = x[np.abs(x) <= info.max_normal]
    ref = x.astype(dt).astype(np.float64)
    got = P.round_to(x.astype(np.float64), fmt, on_range="ignore")
    assert np.array_equal(got, ref)


def test_fp16_matches_numpy_from_float64():
    x = rng.standard_normal(100_000) * 2.0 ** rng.integers(-30, 17, 100_000)
    got = P.round_to(x, "fp16", on_range="ignore")
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16).astype(np.float64)
    assert np.array_equal(got, ref)


def test_native_storage_dtypes():
    assert P.round_to([1.0], "bf16", native=True).dtype == ml_dtypes.bfloat16
    assert P.round_to([1.0], "fp8_e4m3", native=True).dtype == ml_dtypes.float8_e4m3fn
    assert P.round_to([1.0], "tf32", native=True).dtype == np.float32
    assert P.round_to([1.5, 300], "int8", native=True, on_range="ignore").tolist() == [2, 127]
    assert P.round_to(np.float32(0.1), "fp32") == float(np.float32(0.1))


# ------------------------------------------------------------------ ranges, overflow, saturation, reports


def test_overflow_to_inf_and_report():
    q = P.quantize([1.0, 65520.0, -1e6, 65519.0], "fp16")
    assert q.values.tolist() == [1.0, math.inf, -math.inf, 65504.0]
    assert q.report.overflow == 2 and q.report.saturated == 0
    assert "overflowed to inf" in str(q.report)


def test_e5m2_tie_at_the_top_overflows():
    assert P.round_to(61440.0, "fp8_e5m2", on_range="ignore") == math.inf


def test_e4m3_saturates_and_reports():
    q = P.quantize([465.0, -1000.0, np.inf, 448.0, np.nan], "fp8_e4m3")
    assert q.values[:4].tolist() == [448.0, -448.0, 448.0, 448.0]
    assert np.isnan(q.values[4])
    assert q.report.saturated == 3 and q.report.overflow == 0 and q.report.nan_in == 1


def test_int8_saturates_nan_to_zero():
    q = P.quantize([127.5, -129, 1000, np.nan, 0.3], "int8")
    assert q.values.tolist() == [127, -128, 127, 0, 0]
    assert q.report.saturated == 3
    assert q.report.underflow == 0  # 0.3 -> 0 is integer rounding, not an underflow


def test_underflow_and_subnormal_counts():
    q = P.quantize([1e-8, 3e-8, 1e-5, 1e-3], "fp16")
    assert q.report.underflow == 1
    assert q.report.subnormal == 2
    assert q.values[1] == 2.0**-24


def test_round_to_warns_raises_or_ignores():
    with pytest.warns(P.PrecisionWarning, match="overflowed"):
        P.round_to([1e5], "fp16")
    with pytest.warns(P.PrecisionWarning, match="underflowed"):
        P.round_to([1e-9], "fp16")
    with pytest.raises(LabkitError, match="overflowed"):
        P.round_to([1e5], "fp16", on_range="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P.round_to([1e5], "fp16", on_range="ignore")
        P.round_to([1e5, 1e-9], "bf16")  # within bf16's range: nothing to say


@pytest.mark.parametrize(
    "x, fp16, bf16",
    [
        (70000.0, "overflow", "normal"),
        (65504.0, "normal", "normal"),
        (1e-5, "subnormal", "normal"),
        (1e-8, "underflow", "normal"),
        (1e-40, "underflow", "subnormal"),
        (3.4e38, "overflow", "overflow"),
        (0.0, "zero", "zero"),
        (math.inf, "inf", "inf"),
    ],
)
def test_classify(x, fp16, bf16):
    assert P.classify(x, "fp16") == fp16
    assert P.classify(x, "bf16") == bf16


def test_classify_saturating():
    assert P.classify(500.0, "fp8_e4m3") == "saturated"
    assert P.classify(300.0, "int8") == "saturated"
    assert list(P.classify([1.0, 1e-4], "fp8_e4m3")) == ["normal", "underflow"]


# ------------------------------------------------------------------ bit fields and decoding


@pytest.mark.parametrize(
    "fmt, x, raw",
    [
        ("fp16", 1.0, 0x3C00),
        ("fp16", -2.0, 0xC000),
        ("fp16", 65504.0, 0x7BFF),
        ("fp16", 2.0**-24, 0x0001),
        ("fp16", 0.1, 0x2E66),
        ("bf16", 1.0, 0x3F80),
        ("bf16", 0.1, 0x3DCD),
        ("bf16", math.pi, 0x4049),
        ("fp32", 1.0, 0x3F800000),
        ("tf32", 1.0, 0x1FC00),
        ("fp8_e4m3", 448.0, 0x7E),
        ("fp8_e4m3", 2.0**-9, 0x01),
        ("fp8_e5m2", 57344.0, 0x7B),
        ("fp8_e5m2", -math.inf, 0xFC),
        ("int8", -1.0, 0xFF),
        ("int8", 5.0, 0x05),
    ],
)
def test_bits_and_decode_round_trip(fmt, x, raw):
    b = P.bits(x, fmt)
    assert b.raw == raw
    assert b.value == P.round_to(x, fmt)
    assert P.decode(raw, fmt) == b.value
    assert P.decode(format(raw, f"0{P.format_info(fmt).bits}b"), fmt) == b.value


def test_bits_fields_and_strings():
    b = P.bits(0.1, "fp16")
    assert b.string == "0 01011 1001100110"
    assert (b.sign, b.exponent_field, b.mantissa_field, b.exponent, b.kind) == (0, 11, 0b1001100110, -4, "normal")
    assert b.error == pytest.approx(0.0999755859375 - 0.1)
    assert P.bits(1e-7, "fp16").kind == "subnormal"
    assert P.bits(-0.0, "fp16").string == "1 00000 0000000000"
    assert P.bits(np.nan, "fp16").kind == "nan"
    assert P.bits(1e6, "fp8_e5m2").kind == "inf"
    assert P.bits(1e6, "fp8_e4m3").value == 448.0


def test_decode_special_patterns_and_formats_of_input():
    assert P.decode("0 11111 0000000000", "fp16") == math.inf
    assert math.isnan(P.decode("0 11111 0000000001", "fp16"))
    assert math.isnan(P.decode("0 1111 111", "fp8_e4m3"))
    assert P.decode("0 1111 110", "fp8_e4m3") == 448.0
    assert P.decode("0x3C00", "fp16") == 1.0
    assert P.decode("0b0_01111_0000000000", "fp16") == 1.0
    assert P.decode("1 00000 0000000001", "fp16") == -(2.0**-24)


def test_decode_every_fp16_and_fp8_pattern_matches_numpy_and_ml_dtypes():
    for fmt, dt, n in (("fp16", np.uint16, 16), ("fp8_e4m3", np.uint8, 8), ("fp8_e5m2", np.uint8, 8)):
        raws = np.arange(2**n, dtype=dt)
        view = raws.view({"fp16": np.float16, "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}[fmt])
        ref = view.astype(np.float64)
        step = 1 if n == 8 else 7
        for r in range(0, 2**n, step):
            got = P.decode(int(r), fmt)
            assert (math.isnan(got) and math.isnan(ref[r])) or got == ref[r], (fmt, r)


def test_decode_rejects_bad_patterns():
    with pytest.raises(LabkitError, match="16 bits"):
        P.decode("0101", "fp16")
    with pytest.raises(LabkitError, match="not a bit string"):
        P.decode("01x1", "fp8_e4m3")
    with pytest.raises(LabkitError, match="does not fit"):
        P.decode(300, "fp8_e4m3")
    with pytest.raises(LabkitError):
        P.bits([1.0, 2.0], "fp16")


# ------------------------------------------------------------------ GEMM emulation


def test_gemm_fp32_accumulation_of_fp16_inputs():
    a, b = rng.uniform(0, 1, (32, 64)), rng.uniform(0, 1, (64, 16))
    c = P.gemm(a, b, "fp16")
    ar, br = P.round_to(a, "fp16"), P.round_to(b, "fp16")
    assert np.allclose(c, ar @ br, rtol=1e-6)
    assert c.dtype == np.float64


def test_gemm_same_accumulation_is_fma_per_step():
    a, b = rng.uniform(0, 1, (4, 50)), rng.uniform(0, 1, (50, 3))
    c = P.gemm(a, b, "fp16", "same")
    ar, br = P.round_to(a, "fp16"), P.round_to(b, "fp16")
    expect = np.zeros((4, 3))
    for k in range(50):
        expect = (expect + np.outer(ar[:, k], br[k])).astype(np.float16).astype(np.float64)
    assert np.array_equal(c, expect)
    # every value is an fp16 number
    assert np.array_equal(c, P.round_to(c, "fp16"))


def test_gemm_errors_grow_in_the_expected_order():
    a, b = rng.uniform(0, 1, (32, 1024)), rng.uniform(0, 1, (1024, 32))
    e = {(f, acc): P.gemm_error(a, b, f, acc) for f, acc in [("fp64", None), ("fp32", None), ("tf32", None), ("fp16", None), ("bf16", None), ("fp16", "same")]}
    assert e[("fp64", None)] < 1e-14
    assert e[("fp32", None)] < 1e-5
    assert e[("fp16", None)] < 2.0**-10 and e[("tf32", None)] < 2.0**-10
    assert 4 * e[("fp16", None)] < e[("bf16", None)] < 2.0**-7
    assert e[("fp16", "same")] > 5 * e[("fp16", None)]


def test_gemm_int8_and_argument_errors():
    a = np.array([[1, 2], [3, 4]])
    assert P.gemm(a, a, "int8").tolist() == [[7, 10], [15, 22]]
    with pytest.raises(LabkitError, match="not possible"):
        P.gemm(a, a, "int8", "fp32")
    with pytest.raises(LabkitError, match="inner dimensions"):
        P.gemm(np.ones((2, 3)), np.ones((2, 3)), "fp16")
    with pytest.raises(LabkitError, match="too big"):
        P.gemm(np.ones((512, 512)), np.ones((512, 512)), "fp16", "same")
    with pytest.raises(LabkitError):
        P.gemm(a, a, "fp8", "same")


def test_gemm_fp16_accumulator_overflow_is_visible():
    a = np.full((2, 300), 16.0)
    with pytest.warns(P.PrecisionWarning, match="overflowed"):
        c = P.gemm(a, a.T, "fp16", "same")
    assert np.isinf(c).all()


def test_gemm_tolerance_bounds_the_error():
    a, b = rng.uniform(-1, 1, (16, 256)), rng.uniform(-1, 1, (256, 16))
    for fmt in ("fp16", "bf16", "tf32", "fp8_e4m3"):
        err = np.abs(P.gemm(a, b, fmt, on_range="ignore") - a @ b)
        assert (err <= P.gemm_tolerance(a, b, fmt)).all()


def test_relative_error_and_error_vs_k():
    assert P.relative_error([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert P.relative_error([1.5, 2.0], [1.0, 2.0]) == 0.25
    errs = P.error_vs_k("fp16", "same", [16, 256, 2048], m=16)
    assert errs[0] < errs[-1]


# ---------------------------------------------------------------- FP4 and the limited FP8 accumulator


def test_fp4_e2m1_has_eight_magnitudes_no_nan_and_matches_ml_dtypes() -> None:
    import ml_dtypes

    info = P.format_info("fp4")
    assert (info.max_normal, info.min_normal, info.min_subnormal, info.has_nan, info.has_inf) == (6.0, 1.0, 0.5, False, False)
    assert [P.decode(i, "fp4_e2m1") for i in range(8)] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    x = np.linspace(-7, 7, 141)
    ours = P.round_to(x, "fp4_e2m1", on_range="ignore")
    assert np.array_equal(ours, np.clip(x, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(np.float64))
    with pytest.raises(LabkitError, match="no NaN"):
        P.bits(float("nan"), "fp4_e2m1")


def test_round_significant_truncates_or_rounds_to_the_bits_kept() -> None:
    v = 1 + 2.0**-13 + 2.0**-15
    assert P.round_significant(v, 14, "toward_zero") == 1 + 2.0**-13
    assert P.round_significant(1 + 3 * 2.0**-15, 14, "nearest") == 1 + 2.0**-13
    with pytest.raises(LabkitError):
        P.round_significant(1.0, 30)


def test_limited_accumulator_loses_accuracy_with_k_and_promotion_recovers_it() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0, 1, (8, 4096)), rng.uniform(0, 1, (4096, 8))
    fp32 = P.gemm(a, b, "fp8_e4m3", "fp32", on_range="ignore")
    limited = P.relative_error(P.gemm(a, b, "fp8_e4m3", "limited", on_range="ignore"), fp32)
    promoted = P.relative_error(P.gemm(a, b, "fp8_e4m3", "limited", promote_every=128, on_range="ignore"), fp32)
    assert limited > 10 * promoted and limited > 1e-3
    with pytest.raises(LabkitError, match="multiple of block_k"):
        P.gemm(a, b, "fp8_e4m3", "limited", promote_every=100, on_range="ignore")


def _fp32_loop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The reference: one FP32 multiply-add per step, scalar by scalar, in order along K (float64 product and sum,
    one rounding to FP32)."""
    a32, b32 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    out = np.zeros((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = np.float32(0.0)
            for k in range(a.shape[1]):
                acc = np.float32(float(acc) + a32[i, k] * b32[k, j])
            out[i, j] = acc
    return out


def test_fp32_accumulation_is_labkits_sequential_sum_not_blas():
    """Review 3 N11: FP32 accumulation was NumPy's float32 @ (the CPU's BLAS, whose order differs by CPU). It is now
    labkit's own sum in a fixed order, equal bit for bit to a scalar loop, and it differs from BLAS's float32 result."""
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0, 1, (3, 257)), rng.uniform(0, 1, (257, 4))
    got = P.gemm(a, b, "fp32", "fp32")
    assert np.array_equal(got, _fp32_loop(a, b))
    assert np.array_equal(P.fp32_dot_sequential(a, b), got)
    fp16 = P.gemm(a, b, "fp16", "fp32")
    assert np.array_equal(fp16, _fp32_loop(P.round_to(a, "fp16"), P.round_to(b, "fp16")))
    with pytest.raises(LabkitError, match="too big"):
        P.fp32_dot_sequential(np.zeros((1024, 1024)), np.zeros((1024, 1024)))


def test_error_table_is_the_same_on_every_blas_kernel():
    """The lab 06 FP32 row, computed under three OpenBLAS CPU kernels (AVX-512 default, Haswell, Sandybridge), is the
    same to the last bit; and its figures are the ones the notes and slides quote (1.4e-6 at K = 1024)."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, warnings; from labkit import precision as P; warnings.simplefilter('ignore');"
            "print(json.dumps(P.error_vs_k('fp32', 'fp32', [16, 64, 256, 1024, 4096], m=16, seed=6)))")
    rows = []
    for core in (None, "Haswell", "Sandybridge"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        if core:
            env["OPENBLAS_CORETYPE"] = core
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        rows.append(json.loads(proc.stdout))
    # The FP32 sums are identical; only the float64 reference product (BLAS dgemm) may differ in its last bits,
    # which moves an error by about 1e-10 of itself: the printed figures are the same.
    for other in rows[1:]:
        assert all(abs(x - y) <= 1e-8 * x for x, y in zip(rows[0], other)), (rows[0], other)
        assert [f"{e:.2e}" for e in other] == [f"{e:.2e}" for e in rows[0]]
    assert [f"{e:.1e}" for e in rows[0]] == ["1.4e-07", "3.3e-07", "5.7e-07", "1.4e-06", "2.1e-06"]
