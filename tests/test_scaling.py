"""labkit.scaling: FP8 per-tensor (delayed) scaling and the MX / NVFP4 block formats, against the specs' rules.
Cost: well under a second."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from labkit import precision as P
from labkit import scaling as S
from labkit.errors import LabkitError


def test_te_scale_is_fp8_max_over_amax_and_keeps_the_old_scale_on_zero_or_inf() -> None:
    assert S.te_scale([2.0, 4.0, 1.0], "fp8_e4m3") == 448 / 4
    assert S.te_scale([2.0, 4.0, 1.0], "fp8_e4m3", algo="most_recent") == 448.0
    assert S.te_scale([4.0], "fp8_e5m2", margin=1) == 57344 / 4 / 2
    assert S.te_scale([0.0], previous=3.0) == 3.0
    assert S.te_scale([np.inf], previous=3.0) == 3.0
    assert S.HYBRID == {"forward": "fp8_e4m3", "backward": "fp8_e5m2"}
    with pytest.raises(LabkitError):
        S.te_scale([])


def test_delayed_scaling_saturates_for_one_step_when_a_tensor_grows() -> None:
    rng = np.random.default_rng(0)
    d = S.DelayedScaling(history_len=2)
    d.quantize(rng.standard_normal(256))
    grown = d.quantize(10 * rng.standard_normal(256))  # stored with the previous step's scale
    assert grown.report.saturated > 0
    after = d.quantize(10 * rng.standard_normal(256))  # the scale has caught up
    assert after.report.saturated == 0


def test_e8m0_scale_follows_ocp_mx() -> None:
    np.testing.assert_array_equal(S.e8m0_scale([448.0, 449.0, 512.0, 1.0, 0.0], "fp8_e4m3"),
                                  [1.0, 1.0, 2.0, 2.0**-8, 2.0**-127])
    assert S.e8m0_scale(6.0, "fp4_e2m1") == 1.0 and S.e8m0_scale(4.0, "fp4_e2m1") == 1.0
    assert S.element_emax("fp8_e5m2") == 15


def test_mxfp8_elements_are_e4m3_and_saturate() -> None:
    x = np.array([[1.99 * 2.0**3] + [0.1] * 31])
    q = S.quantize_blocks(x, "mxfp8_e4m3")
    assert q.scales[0, 0] == 2.0 ** (3 - 8) and q.values[0, 0] == 448 * 2.0**-5
    stored = q.values / q.scales[..., None].repeat(32, axis=-1).reshape(x.shape)
    assert np.array_equal(stored, stored.astype(ml_dtypes.float8_e4m3fn).astype(np.float64))


def test_nvfp4_uses_blocks_of_16_with_e4m3_scales_under_a_tensor_scale() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 64))
    q = S.quantize_blocks(x, "nvfp4")
    assert q.scales.shape == (4, 4) and q.fmt.block == 16
    block_scales = q.scales / q.tensor_scale
    np.testing.assert_allclose(block_scales, P.round_to(block_scales, "fp8_e4m3"), rtol=1e-12)
    elements = q.values.reshape(4, 4, 16) / q.scales[..., None]
    np.testing.assert_allclose(elements, P.round_to(elements, "fp4_e2m1"), rtol=1e-12, atol=1e-12)


def test_block_scaling_keeps_small_rows_where_one_tensor_scale_loses_them() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((32, 128)) * 2.0 ** rng.uniform(-12, 4, size=(32, 1))
    b = rng.standard_normal((128, 16))
    ref = a @ b
    per_tensor = S.rowwise_error(S.scaled_gemm(a, b, "fp8_e4m3"), ref)
    blocks = S.rowwise_error(S.scaled_gemm(a, b, "mxfp8_e4m3"), ref)
    assert blocks < 0.2 < per_tensor


def test_scaling_errors_are_labkit_errors() -> None:
    with pytest.raises(LabkitError, match="multiple of 32"):
        S.quantize_blocks(np.ones((2, 40)))
    with pytest.raises(LabkitError, match="not a block-scaled"):
        S.quantize_blocks(np.ones(32), "mxfp5")
    with pytest.raises(LabkitError, match="inf or NaN"):
        S.quantize_blocks(np.full(32, np.nan))
    with pytest.raises(LabkitError, match="unknown scheme"):
        S.scaled_gemm(np.ones((2, 32)), np.ones((32, 2)), "int4")
    with pytest.raises(LabkitError, match="block-scaled format"):
        P.normalize_name("nvfp4")
