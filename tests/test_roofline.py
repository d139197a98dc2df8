"""labkit.roofline: the model's arithmetic and its figure."""

from __future__ import annotations

import numpy as np
import pytest

from labkit import roofline as rl
from labkit.errors import LabkitError


def test_ridge_and_attainable() -> None:
    r = rl.roofline("H100", "bf16")
    assert r.peak.value == 989 and r.bandwidth.value == 3350
    assert r.ridge_point == pytest.approx(989e12 / 3350e9)
    assert r.attainable(1.0) == pytest.approx(3.35)
    assert r.attainable(1e4) == pytest.approx(989)
    assert r.attainable(r.ridge_point) == pytest.approx(989)
    np.testing.assert_allclose(r.attainable(np.array([1.0, 1e4])), [3.35, 989])
    assert r.bound(10) == "memory-bound" and r.bound(1000) == "compute-bound"
    assert "ridge point 295.2" in str(r)


def test_sparse_and_other_gpus() -> None:
    assert rl.roofline("A100", "tf32", sparse=True).peak.value == 312
    assert rl.roofline("A100 80GB", "fp32").ridge_point == pytest.approx(19.5e12 / 2039e9)
    assert rl.roofline("V100", "fp16").ridge_point == pytest.approx(125e12 / 900e9)


def test_errors() -> None:
    with pytest.raises(LabkitError, match="does not exist on the P100"):
        rl.roofline("P100", "tf32")
    with pytest.raises(LabkitError, match="(?i)did you mean"):
        rl.roofline("H2000", "fp32")
    r = rl.roofline("H200", "fp32")
    for bad in (0, -1, float("nan")):
        with pytest.raises(LabkitError, match="positive"):
            r.attainable(bad)


def test_figure() -> None:
    import plotly.graph_objects as go

    fig = rl.roofline_figure("H200", "bf16", kernels=[("saxpy", 2 / 12, None), ("gemm 8192", 2730.0, 780.0)])
    assert isinstance(fig, go.Figure)
    names = [t.name for t in fig.data]
    assert any(n.startswith("saxpy (model bound") for n in names)
    assert any(n.startswith("gemm 8192 (79% of its roof)") for n in names)
    assert fig.layout.xaxis.type == "log" and "model" in fig.layout.title.text
    fig2 = rl.roofline_figure("A100", ["fp32", "tf32", "fp16"])
    assert sum(1 for t in fig2.data if "roof" in (t.name or "")) == 3
    with pytest.raises(LabkitError, match="each kernel"):
        rl.roofline_figure("A100", "fp32", kernels=[("x", 1.0)])


@pytest.mark.parametrize("call,match", [
    (lambda: rl.roofline("H100", "fp32").bound("x"), r"intensity must be a positive finite number, got 'x'"),
    (lambda: rl.roofline("H100", "fp32").bound(float("nan")), r"intensity must be a positive"),
    (lambda: rl.roofline("H100", "fp32").attainable("x"), r"arithmetic intensity must be a positive number"),
    (lambda: rl.roofline("H100", "fp32").attainable([]), r"arithmetic intensity must be a positive number"),
    (lambda: rl.roofline("H100", None), r"precision must be a name such as 'fp32'"),
    (lambda: rl.roofline("H100", "fp32", sparse="no"), r"sparse must be True or False"),
    (lambda: rl.roofline(None), r"name must be a string"),
    (lambda: rl.roofline_figure("H100", precision=None), r"precision must be a precision name or a list"),
    (lambda: rl.roofline_figure("H100", kernels=None), r"kernels must be a list of \(name, intensity"),
    (lambda: rl.roofline_figure("H100", kernels=[("k", "ten", None)]), r"the intensity of 'k' must be a positive"),
    (lambda: rl.roofline_figure("H100", kernels=[("k", 1.0, "fast")]), r"the measured rate of 'k' must be a positive"),
    (lambda: rl.roofline_figure("H100", intensity_range=None), r"intensity_range must be a pair"),
    (lambda: rl.roofline_figure("H100", intensity_range=(10, 1)), r"0 < low < high"),
])
def test_junk_arguments_are_labkit_errors(call, match) -> None:
    with pytest.raises(LabkitError, match=match):
        call()
