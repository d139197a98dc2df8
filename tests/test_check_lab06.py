"""Lab 06 checks accept right answers and reject wrong ones with a useful message."""

from __future__ import annotations

import math

import numpy as np
import pytest

import labkit
from labkit.check import core, lab06
from labkit.tensorcores import WMMA_SOURCE


@pytest.fixture(autouse=True)
def _sim(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "sim")
    monkeypatch.delenv("LABKIT_EXPECT", raising=False)
    labkit.setup(quiet=True)


# ---------------------------------------------------------------- 06.decode-fp16


def good_decode(b):
    s, e, m = int(b[0]), int(b[1:6], 2), int(b[6:], 2)
    sign = -1.0 if s else 1.0
    if e == 31:
        return math.nan if m else sign * math.inf
    if e == 0:
        return sign * m / 1024 * 2**-14
    return sign * (1 + m / 1024) * 2 ** (e - 15)


def ldexp_decode(b):  # correct, written differently: copysign keeps the sign of a zero
    s, e, m = int(b[0]), int(b[1:6], 2), int(b[6:], 2)
    if e == 31:
        v = math.inf if m == 0 else math.nan
    elif e == 0:
        v = math.ldexp(m, -24)
    else:
        v = math.ldexp(1024 + m, e - 25)
    return math.copysign(v, -1.0 if s == 1 else 1.0)


def int_sign_decode(b):  # the old hint's formula: (-1)**s * 0 is the integer 0, so 1 00000 0000000000 gives +0.0
    s, e, m = int(b[0]), int(b[1:6], 2), int(b[6:], 2)
    if e == 31:
        return math.nan if m else (-1) ** s * math.inf
    if e == 0:
        return (-1) ** s * m / 1024 * 2**-14
    return (-1) ** s * (1 + m / 1024) * 2 ** (e - 15)


def abs_zero_decode(b):  # returns abs(0.0) for every zero
    v = good_decode(b)
    return 0.0 if v == 0 else v


def string_decode(b):
    return str(good_decode(b))


def numpy_decode(b):
    return float(np.array([int(b, 2)], dtype=np.uint16).view(np.float16)[0])


def no_subnormals(b):
    s, e, m = int(b[0]), int(b[1:6], 2), int(b[6:], 2)
    if e == 31:
        return math.nan if m else (-1) ** s * math.inf
    return (-1) ** s * (1 + m / 1024) * 2 ** (e - 15)


def wrong_bias(b):
    s, e, m = int(b[0]), int(b[1:6], 2), int(b[6:], 2)
    if e == 31:
        return math.nan if m else (-1) ** s * math.inf
    if e == 0:
        return (-1) ** s * m / 1024 * 2**-14
    return (-1) ** s * (1 + m / 1024) * 2 ** (e - 16)


def test_decode_accepts_correct_versions():
    assert lab06.decode_fp16(good_decode)
    assert lab06.decode_fp16(numpy_decode)
    assert lab06.decode_fp16(ldexp_decode)
    assert lab06.decode_fp16(lab06._reference_decode_fp16())


def test_decode_tells_negative_zero():
    for fn in (int_sign_decode, abs_zero_decode):
        r = lab06.decode_fp16(fn)
        assert r.status == "failed" and "−0.0" in r.cause and "1 00000 0000000000 decodes to -0.0" in r.message


def test_decode_hint_formula_keeps_the_sign_of_zero():
    from labkit.check.core import _get

    last = _get("06.decode-fp16").hints[-1]
    assert "sign = -1.0 if s else 1.0" in last and "(-1)**s" not in last


def test_decode_rejects_a_string():
    r = lab06.decode_fp16(string_decode)
    assert r.status == "failed" and "should be a number, got str" in r.message


@pytest.mark.parametrize("fn, word", [(no_subnormals, "subnormal"), (wrong_bias, "bias")])
def test_decode_rejects_wrong_versions(fn, word):
    r = lab06.decode_fp16(fn)
    assert r.status == "failed" and word in (r.cause or "")


def test_decode_skeleton_is_unsolved():
    assert lab06.decode_fp16(lambda b: None).status == "unsolved"
    assert lab06.decode_fp16(...).status == "unsolved"


# ---------------------------------------------------------------- 06.predict-range


def test_predict_range():
    right = lab06._reference_predictions()
    assert right == {"fp16": ["overflow", "subnormal", "underflow", "overflow", "underflow", "normal"],
                     "bf16": ["normal", "normal", "normal", "overflow", "subnormal", "normal"]}
    assert lab06.predict_range(right)
    wrong = {"fp16": list(right["fp16"]), "bf16": list(right["bf16"])}
    wrong["fp16"][5] = "overflow"  # 65519 rounds down to 65504
    assert lab06.predict_range(wrong).status == "failed"
    assert lab06.predict_range({"fp16": [...] * 6, "bf16": [...] * 6}).status == "unsolved"
    assert lab06.predict_range({"fp16": ["normal"] * 5, "bf16": right["bf16"]}).status == "failed"


# ---------------------------------------------------------------- 06.tf32-round


def tf32_no_nan_care(x):  # the bit trick alone: low-payload NaNs become inf, all-ones NaNs wrap to -0.0
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    return u.astype(np.uint32).view(np.float32)


def tf32_good(x):  # the taught trick: NaNs pass through
    return np.where(np.isnan(x), x, tf32_no_nan_care(x))


def tf32_quiet_nan(x):  # correct too: every NaN becomes the canonical quiet NaN
    return np.where(np.isnan(x), np.float32(np.nan), tf32_no_nan_care(x)).astype(np.float32)


def tf32_exponent_test(x):  # correct too: leaves every all-ones exponent (inf and NaN) alone
    u = x.view(np.uint32)
    special = (u & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return np.where(special, x, tf32_no_nan_care(x))


def tf32_truncate(x):
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def tf32_half_up(x):
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def tf32_float64(x):
    with np.errstate(invalid="ignore"):
        return tf32_good(x).astype(np.float64)


def test_tf32_accepts_correct():
    assert lab06.tf32_round(tf32_good)
    assert lab06.tf32_round(tf32_quiet_nan)
    assert lab06.tf32_round(tf32_exponent_test)
    assert lab06.tf32_round(core._get("06.tf32-round").reference())


def test_tf32_cases_hold_low_payload_nans():
    x = lab06._tf32_cases()
    bits = x.view(np.uint32)
    nan = np.isnan(x)
    low_only = nan & ((bits & np.uint32(0x007FE000)) == 0)  # payload only in the 13 dropped bits
    assert low_only.sum() >= 10 and (nan & ((bits & np.uint32(0x7FFFFF)) == 0x7FFFFF)).any()
    assert np.isinf(tf32_no_nan_care(x[low_only])).any()  # the bare trick really turns some into infinity


def test_tf32_rejects_the_bare_trick_on_nans():
    r = lab06.tf32_round(tf32_no_nan_care)
    assert r.status == "failed" and "NaN must stay a NaN" in r.cause


@pytest.mark.parametrize("fn, word", [(tf32_truncate, "truncates"), (tf32_half_up, "tie"), (tf32_float64, "float32")])
def test_tf32_rejects_wrong(fn, word):
    r = lab06.tf32_round(fn)
    assert r.status == "failed"
    assert word in (r.cause or "") + r.message


def test_tf32_skeleton():
    assert lab06.tf32_round(lambda x: None).status == "unsolved"


# ---------------------------------------------------------------- 06.wmma-gemm

SKELETON = WMMA_SOURCE.split("    for (int k = 0")[0] + "    // TODO\n}\n"
NO_STORE = WMMA_SOURCE.replace("    wmma::store_matrix_sync(C + (size_t)tile_row * 16 * N + tile_col * 16, acc, N, wmma::mem_row_major);\n", "")
BROKEN = WMMA_SOURCE.replace("wmma::mma_sync(acc, a, b, acc);", "wmma::mma_sync(acc, a, b, acc)")


HOST = __import__("labkit.cuda_cpp", fromlist=["host_compiler"]).host_compiler() is not None
needs_host = pytest.mark.skipif(not HOST, reason="no C++ compiler for the CPU stand-in")


@pytest.mark.toolchain
def test_wmma_accepts_reference():
    r = lab06.wmma_gemm(WMMA_SOURCE)
    assert r and "wmma.mma" in r.message
    assert ("values are right on the CPU stand-in" in r.message) == HOST


@pytest.mark.toolchain
def test_wmma_without_the_stand_in_says_a_gpu_checks_values(monkeypatch):
    monkeypatch.setenv("LABKIT_HOST_CXX", "none")
    r = lab06.wmma_gemm(WMMA_SOURCE)
    assert r and "GPU run will check its values" in r.message


# Each plausible WMMA mistake, and the word its likely cause must contain (None: the generic offsets cause).
WMMA_WRONG = {
    "tile offset": (("A + (size_t)tile_row * 16 * K + k", "A + (size_t)tile_row * K + k"), "offsets"),
    "leading dimension": (("tile_col * 16, N);", "tile_col * 16, K);"), "leading dimension"),
    "K step": (("k += 16", "k += 32"), "step by 16"),
    "store layout": (("wmma::mem_row_major", "wmma::mem_col_major"), "transposed"),
    "re-zeroed accumulator": (("        wmma::load_matrix_sync(a,", "        wmma::fill_fragment(acc, 0.0f);\n        wmma::load_matrix_sync(a,"),
                              "zeroed inside the loop"),
    "store offset": (("C + (size_t)tile_row * 16 * N + tile_col * 16,", "C + (size_t)tile_row * 16 * N + tile_col * 16 + 16,"), "outside"),
    "lane-0 store": (("    wmma::store_matrix_sync(", "    if (threadIdx.x == 0) wmma::store_matrix_sync("), "lane"),
    "early return off by one": (("tile_row * 16 >= M", "tile_row * 16 > M"), "outside C"),
    "no early return": (("if (tile_row * 16 >= M || tile_col * 16 >= N) return;", ""), "must leave before any load"),
    "A read column-major": (("half, wmma::row_major> a;", "half, wmma::col_major> a;"), "offsets"),
}


@needs_host
@pytest.mark.parametrize("mistake", list(WMMA_WRONG))
def test_wmma_mistakes_fail_by_their_values_in_sim(mistake):
    (old, new), word = WMMA_WRONG[mistake]
    src = WMMA_SOURCE.replace(old, new)
    assert src != WMMA_SOURCE
    r = lab06.wmma_gemm(src)
    assert r.status == "failed", mistake
    assert word in r.message + (r.cause or ""), (mistake, r.message, r.cause)


@needs_host
def test_wmma_specific_causes_are_not_given_to_other_mistakes():
    r = lab06.wmma_gemm(WMMA_SOURCE.replace("A + (size_t)tile_row * 16 * K + k", "A + (size_t)tile_row * K + k"))
    for word in ("zeroed inside the loop", "transposed", "every other"):
        assert word not in (r.cause or "")


@needs_host
def test_wmma_correct_variants_pass_in_sim():
    # the warp's tile row computed from the linear thread index instead of threadIdx.y; an int zero for fill_fragment
    variant = WMMA_SOURCE.replace(
        "const int tile_row = blockIdx.y * blockDim.y + threadIdx.y;",
        "const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;\n    const int tile_row = blockIdx.y * 4 + warp;")
    assert variant != WMMA_SOURCE
    assert lab06.wmma_gemm(variant)
    zero_c = WMMA_SOURCE.replace("wmma::fill_fragment(acc, 0.0f);", "wmma::fill_fragment(acc, 0);")
    assert lab06.wmma_gemm(zero_c)


@pytest.mark.toolchain
def test_wmma_skeleton_is_unsolved():
    assert lab06.wmma_gemm(SKELETON).status == "unsolved"


@pytest.mark.toolchain
def test_wmma_rejects_missing_store_and_compile_errors():
    r = lab06.wmma_gemm(NO_STORE)
    assert r.status == "failed" and "store" in r.message
    r = lab06.wmma_gemm(BROKEN)
    assert r.status == "failed" and "does not compile" in r.message
    assert lab06.wmma_gemm(WMMA_SOURCE.replace("wmma_gemm", "my_gemm")).status == "failed"


# ---------------------------------------------------------------- 06.loss-scale


def scaler_good(scale, found_inf, good, interval):
    if found_inf:
        return scale / 2, 0, False
    good += 1
    if good == interval:
        return scale * 2, 0, True
    return scale, good, True


def scaler_applies_bad_step(scale, found_inf, good, interval):
    s, g, _ = scaler_good(scale, found_inf, good, interval)
    return s, g, True


def scaler_never_grows(scale, found_inf, good, interval):
    if found_inf:
        return scale / 2, 0, False
    return scale, good + 1, True


def test_loss_scale():
    assert lab06.loss_scale(scaler_good)
    assert lab06.loss_scale(core._get("06.loss-scale").reference())
    own = lab06.loss_scale(lab06.reference_update_scale)  # the function the check compares with is no answer
    assert own.status == "failed" and "reference_update_scale" in own.report(), own.report()
    assert lab06.loss_scale(scaler_applies_bad_step).status == "failed"
    assert lab06.loss_scale(scaler_never_grows).status == "failed"
    assert lab06.loss_scale(lambda *a: None).status == "unsolved"


def my_update(scale, found_inf, good, interval):  # a learner's own correct rule (calling labkit's is rejected)
    if found_inf:
        return scale / 2, 0, False
    good += 1
    return (scale * 2, 0, True) if good >= interval else (scale, good, True)


def scaler_fixed_interval(scale, found_inf, good, interval):  # hard-codes the notebook's growth interval of 50
    return my_update(scale, found_inf, good, 50)


def scaler_off_by_one(scale, found_inf, good, interval):  # doubles one good step late
    if found_inf:
        return scale / 2, 0, False
    if good + 1 > interval:
        return scale * 2, 0, True
    return scale, good + 1, True


def scaler_strings(scale, found_inf, good, interval):
    s, g, a = my_update(scale, found_inf, good, interval)
    return str(s), g, a


def scaler_int_flag(scale, found_inf, good, interval):  # 0/1 for the flag is not a bool
    s, g, a = my_update(scale, found_inf, good, interval)
    return s, g, int(a)


def scaler_numpy(scale, found_inf, good, interval):  # correct: NumPy scalars
    s, g, a = my_update(scale, found_inf, good, interval)
    return np.float64(s), np.int64(g), np.bool_(a)


@pytest.mark.parametrize("fn, word", [(scaler_fixed_interval, "expected"), (scaler_off_by_one, "growth_interval"),
                                      (scaler_strings, "should be a number, got str"), (scaler_int_flag, "True or False")])
def test_loss_scale_wrong(fn, word):
    for _ in range(3):  # fresh intervals each run: a hard-coded 50 must fail every time
        r = lab06.loss_scale(fn)
        assert r.status == "failed" and word in r.message + (r.cause or "")


def test_loss_scale_numpy_scalars_pass():
    assert lab06.loss_scale(scaler_numpy)


# ---------------------------------------------------------------- 06.v100-fma


def test_v100_fma():
    from labkit import hw

    v = hw.gpu("V100")
    clock = v.peak("fp32").value * 1e12 / (v.sm_count.value * v.fp32_cores_per_sm.value * 2)
    fma = v.peak("fp16").value * 1e12 / (v.sm_count.value * v.tensor_cores_per_sm.value * 2 * clock)
    assert lab06.v100_fma(fma)
    assert lab06.v100_fma(64)
    r = lab06.v100_fma(2 * fma)
    assert r.status == "failed" and "two floating-point" in r.cause
    r = lab06.v100_fma(8 * fma)
    assert r.status == "failed" and "per Tensor Core" in r.cause
    assert lab06.v100_fma(...).status == "unsolved"
    r = lab06.v100_fma("64")
    assert r.status == "failed" and "should be a number, got str" in r.message
    from labkit.check.answers import separation

    assert separation(fma, lab06._v100_fma_slips()) > 2 * lab06.V100_FMA_REL


@pytest.mark.parametrize("factor, word", [(0.5, "twice"), (8 / 64, "FP32 cores"), (1e9, "GHz"), (1e-12, "10^12"),
                                          (1.1, "recheck the formula")])
def test_v100_fma_wrong(factor, word):
    r = lab06.v100_fma(lab06._reference_v100_fma() * factor)
    assert r.status == "failed" and word in r.cause


def test_every_lab06_exercise_has_three_hints_and_a_reference():
    from labkit.check import core

    ids = [e for e, _, _ in core.exercises("06.")]
    assert len(ids) >= 5
    for ex_id in ids:
        ex = core._REGISTRY[ex_id]
        assert len(ex.hints) == 3 and ex.reference is not None


# --------------------------------------------------------------------------------------------- 06.gemm-predict
def _gemm(*, flops2=True, traffic="full", roof=True, size_of=None, sparse=False):
    """predict_gemm answers: the defaults give a correct one written differently from the reference."""
    from labkit import hw

    def predict_gemm(m, n, k, precision, gpu):
        g = hw.gpu(gpu)
        size = (size_of or {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1})[precision]
        flops = (2 if flops2 else 1) * m * n * k
        elems = {"full": m * k + k * n + m * n, "inputs": m * k + k * n, "square": 3 * max(m, n, k) ** 2}[traffic]
        peak = g.peak(precision, sparse=sparse).value * 1e12
        bw = g.memory_bandwidth.to("GB/s").value * 1e9
        if not roof:
            return peak / 1e12
        intensity = flops / (size * elems)
        return min(peak, intensity * bw) / 1e12

    return predict_gemm


def test_gemm_predict_accepts_correct_models() -> None:
    from labkit.check import core

    assert lab06.gemm_predict(core._REGISTRY["06.gemm-predict"].reference())
    assert lab06.gemm_predict(_gemm())  # min(peak, intensity x bandwidth) is the same roofline


@pytest.mark.parametrize(("answer", "needle"), [
    (_gemm(roof=False), "roofline"),
    (_gemm(flops2=False), "2 FLOPs"),
    (_gemm(traffic="square"), "square formula"),
    (_gemm(traffic="inputs"), "TFLOP/s"),  # on a short-k shape this reads as the peak alone
    (_gemm(size_of={p: 1 for p in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")}), "TFLOP/s"),
])
def test_gemm_predict_rejects_wrong_models(answer, needle) -> None:
    result = lab06.gemm_predict(answer)
    assert result.status == "failed", result.report()
    assert needle in (result.cause or "") + result.message, result.report()


def test_gemm_predict_wrong_calls() -> None:
    assert lab06.gemm_predict(1.0).status == "failed"
    assert lab06.gemm_predict(lambda m, n, k, p, g: "fast").status == "failed"
    assert lab06.gemm_predict(lambda m, n: 1.0).status == "failed"
    assert lab06.gemm_predict(lambda m, n, k, p, g: None).status == "unsolved"


def test_gemm_predict_gpu_part_on_a_mig_slice_bounds_with_the_slices_share(monkeypatch) -> None:
    """On a slice the learner still predicts for the whole GPU; the bound is scaled by the slice's share, so a slice
    is measured (not "no labkit.hw record") and a figure above the slice's share still fails."""
    from types import SimpleNamespace

    import numpy as np

    from labkit import bench
    from labkit.check import lab06
    from labkit.check.core import Failed

    from test_tensorcores import _mig_environment

    e = _mig_environment()
    monkeypatch.setattr(bench, "env", lambda: e)
    ref = lab06._reference_gemm_predict()
    share = max(bench.slice_fractions(e.sm_count, e.memory_bytes, bench.device_hw()[0]))
    measured = {}

    def measure(fn, *args, name=None, flops=None, **kw):
        m, n, k = (int(v) for v in name.split()[-1].split("x"))
        tflops = measured["factor"] * share * ref(m, n, k, "fp16", "H100 SXM")
        return bench.Timing(name=name, samples_s=(flops / (tflops * 1e12),), mode="gpu", device=e.device_name, flops=flops)

    monkeypatch.setattr(bench, "measure", measure)
    cp = SimpleNamespace(random=SimpleNamespace(standard_normal=lambda shape, dtype=None: np.zeros((2, 2), np.float32)),
                         float32=np.float32, float16=np.float16, matmul=np.matmul)
    measured["factor"] = 0.9
    out = lab06._measure_gemm_gpu(cp, ref)
    assert "Measured on the GPU" in out and "MIG slice" in out
    measured["factor"] = 1.5  # above what the slice can do: the check still catches a bound that is not a bound
    with pytest.raises(Failed, match="above your bound"):
        lab06._measure_gemm_gpu(cp, lambda m, n, k, p, g: 0.5 * ref(m, n, k, p, g))


def test_loss_scale_calling_labkits_rule_is_rejected_by_name():
    def calls_labkit(scale, found_inf, good, interval):
        return lab06.reference_update_scale(scale, found_inf, good, interval)

    r = lab06.loss_scale(calls_labkit)
    assert r.status == "failed" and "reference_update_scale" in r.message
    assert lab06.loss_scale(my_update)
