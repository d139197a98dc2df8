"""Lab 06 checks accept right answers and reject wrong ones with a useful message."""

from __future__ import annotations

import math

import numpy as np
import pytest

import labkit
from labkit.check import lab06
from labkit.tensorcores import WMMA_SOURCE


@pytest.fixture(autouse=True)
def _sim(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "sim")
    monkeypatch.delenv("LABKIT_EXPECT", raising=False)
    labkit.setup(quiet=True)


# ---------------------------------------------------------------- 06.decode-fp16


def good_decode(b):
    s, e, m = int(b[0]), int(b[1:6], 2), int(b[6:], 2)
    if e == 31:
        return math.nan if m else (-1) ** s * math.inf
    if e == 0:
        return (-1) ** s * m / 1024 * 2**-14
    return (-1) ** s * (1 + m / 1024) * 2 ** (e - 15)


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


def tf32_good(x):
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    return u.astype(np.uint32).view(np.float32)


def tf32_truncate(x):
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def tf32_half_up(x):
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def tf32_float64(x):
    return tf32_good(x).astype(np.float64)


def test_tf32_accepts_correct():
    assert lab06.tf32_round(tf32_good)
    assert lab06.tf32_round(lab06._reference_round_tf32())


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


def test_wmma_accepts_reference():
    r = lab06.wmma_gemm(WMMA_SOURCE)
    assert r and "wmma.mma" in r.message


def test_wmma_skeleton_is_unsolved():
    assert lab06.wmma_gemm(SKELETON).status == "unsolved"


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
    assert lab06.loss_scale(lab06.reference_update_scale)
    assert lab06.loss_scale(scaler_applies_bad_step).status == "failed"
    assert lab06.loss_scale(scaler_never_grows).status == "failed"
    assert lab06.loss_scale(lambda *a: None).status == "unsolved"


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


def test_every_lab06_exercise_has_three_hints_and_a_reference():
    from labkit.check import core

    ids = [e for e, _, _ in core.exercises("06.")]
    assert len(ids) >= 5
    for ex_id in ids:
        ex = core._REGISTRY[ex_id]
        assert len(ex.hints) == 3 and ex.reference is not None
