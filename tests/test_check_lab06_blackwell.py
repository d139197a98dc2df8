"""Lab 06's Blackwell check (06.nvfp4-quantize) accepts right NVFP4 quantizers and names each plausible mistake;
the OCP and round-up MX scale rules of labkit.scaling measure as the lab says. Cost: about 2 s."""

from __future__ import annotations

import numpy as np
import pytest

import labkit
from labkit import precision as P
from labkit import scaling
from labkit.check import lab06_blackwell as B


@pytest.fixture(autouse=True)
def _sim(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "sim")
    monkeypatch.delenv("LABKIT_EXPECT", raising=False)
    labkit.setup(quiet=True)


def _cause(result) -> str:
    return f"{result.message} {result.cause or ''}"


def good(x):
    b = x.reshape(*x.shape[:-1], -1, 16)
    a = np.abs(b).max(axis=-1, keepdims=True)
    t = np.abs(x).max() / (448 * 6) or 1.0
    s = P.round_to(a / 6 / t, "fp8_e4m3", on_range="ignore") * t
    safe = np.where(s > 0, s, 1.0)
    return np.where(s > 0, P.round_to(b / safe, "fp4_e2m1", on_range="ignore") * safe, 0.0).reshape(x.shape)


def good_loops(x):  # the same, block by block in Python loops
    out = np.zeros_like(x)
    t = float(np.abs(x).max()) / 2688 if np.abs(x).max() > 0 else 1.0
    for r in range(x.shape[0]):
        for c in range(0, x.shape[1], 16):
            blk = x[r, c : c + 16]
            s = float(P.round_to(np.array([np.abs(blk).max() / 6 / t]), "fp8_e4m3", on_range="ignore")[0]) * t
            if s > 0:
                out[r, c : c + 16] = np.clip(P.round_to(blk / s, "fp4_e2m1", on_range="ignore"), -6, 6) * s
    return out


def test_nvfp4_accepts_correct_versions() -> None:
    assert B.nvfp4_quantize(good)
    assert B.nvfp4_quantize(good_loops)
    assert B.nvfp4_quantize(B._reference_nvfp4())


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"block": 32}, "blocks of 32"),
        ({"scale_fmt": "e8m0"}, "power-of-two"),
        ({"tensor_max": None}, "no tensor scale"),
        ({"tensor_max": 6.0}, "448 × 6"),
        ({"scale_fmt": None}, "stored in E4M3"),
        ({"per_row": True}, "one scale per row"),
        ({"element": "fp8_e4m3"}, "E2M1"),
    ],
)
def test_nvfp4_rejects_slips_with_their_cause(kwargs, word) -> None:
    r = B.nvfp4_quantize(lambda x: B._nvfp4(x, **kwargs))
    assert not r and word in _cause(r), _cause(r)


def test_nvfp4_rejects_mxfp4_nan_and_shape() -> None:
    r = B.nvfp4_quantize(lambda x: scaling.quantize_blocks(x, "mxfp4").values)
    assert not r and "compares with" in _cause(r)  # the answer guard: the reference's own function is out of reach

    def zero_block_nan(x):
        b = x.reshape(*x.shape[:-1], -1, 16)
        return (good(x).reshape(b.shape) * np.where(np.abs(b).max(axis=-1, keepdims=True) > 0, 1.0, np.nan)).reshape(x.shape)

    r = B.nvfp4_quantize(zero_block_nan)
    assert not r and "all-zero block" in _cause(r)
    assert B.nvfp4_quantize(lambda x: ...).status == "unsolved"
    assert not B.nvfp4_quantize(lambda x: good(x).ravel())
    assert not B.nvfp4_quantize(42)


def test_nvfp4_cases_hold_their_edge_cases() -> None:
    first = B._cases()[0]
    assert not first[0, :16].any()  # an all-zero block
    t = np.abs(first).max() / 2688
    raw = np.abs(first[2, 16:32]).max() / 6 / t
    assert P.round_to(np.array([raw]), "fp8_e4m3")[0] < raw  # the E4M3 block scale rounds down: the maximum passes 6
    q = scaling.quantize_blocks(first, "nvfp4")
    assert (q.scales[1] < 2.0**-6 * t).all()  # the row 2^-16 down has subnormal E4M3 block scales
    assert all(x.shape[-1] % 16 == 0 for x in B._cases()) and any(x.shape[-1] % 32 for x in B._cases())


def test_scale_rules_measure_as_the_lab_says() -> None:
    """OCP's floor rule clamps about a fifth of Gaussian blocks; NVIDIA's round-up rule none (review 4, P2)."""
    gen = np.random.default_rng(7)
    x = gen.standard_normal((500, 32 * 40)) * 2.0 ** gen.uniform(-8, 8, size=(500, 1))
    clamped = {}
    for rule in ("ocp", "round_up"):
        q = scaling.quantize_blocks(x, "mxfp8_e4m3", rule=rule)
        over = np.abs(x.reshape(500, 40, 32)) / q.scales[..., None] > 448
        clamped[rule] = over.any(axis=-1).mean()
    assert 0.17 < clamped["ocp"] < 0.22 and clamped["round_up"] == 0
    assert list(scaling.e8m0_scale([448.0, 449.0, 1.0], rule="round_up")) == [1.0, 2.0, 2.0**-8]
    with pytest.raises(labkit.LabkitError):
        scaling.quantize_blocks(x, "mxfp8_e4m3", rule="floor")
