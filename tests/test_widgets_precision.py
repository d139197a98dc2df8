"""The precision widgets build without a browser."""

from __future__ import annotations

from labkit import precision as P
from labkit.widgets import precision as W


def test_bit_explorer_builds_and_updates_headless():
    box = W.bit_explorer(0.1)
    text, out = box.children
    assert "0 01011 1001100110".split()[1] in out.value  # FP16 exponent of 0.1
    text.value = "65520"
    assert "inf" in out.value
    text.value = "not a number"
    assert "is not a number" in out.value


def test_bit_table_html_has_every_format():
    page = W.bit_table_html(1e-8)
    for name in W.DEFAULT_FORMATS:
        assert f"<b>{name}</b>" in page
    assert "subnormal" in page or "zero" in page


def test_bit_fields_repr_html():
    assert "1001100110" in P.bits(0.1, "fp16")._repr_html_()
    assert "span" in W.bit_fields_html(P.bits(-3, "int8"))


def test_figures_are_plotly():
    import plotly.graph_objects as go

    assert isinstance(W.range_chart(), go.Figure)
    fig = W.error_vs_k_figure([16, 64], {"fp16": [1e-4, 2e-4], "fp16, FP16 acc": [1e-3, 1e-2]})
    assert isinstance(fig, go.Figure) and len(fig.data) == 2


def test_error_vs_k_curves_that_coincide_stay_visible():
    """TF32 and FP16 inputs give the same errors (10 mantissa bits each): the later curve is drawn dashed over the
    earlier one and says so in its legend entry; own-format accumulation is dotted; K is labelled at its values."""
    ks = [16, 64, 256]
    fig = W.error_vs_k_figure(ks, {"FP16, FP32 acc": [1e-4, 5e-5, 2e-5], "TF32, FP32 acc": [1e-4, 5e-5, 2.02e-5],
                                   "BF16, BF16 acc": [1e-2, 2e-2, 5e-2], "FP16, FP16 acc": [1e-3, 2e-3, 5e-3]})
    fp16, tf32, bf16_same, fp16_same = fig.data
    assert fp16.line.dash is None and tf32.line.dash == "dash" and "≈ FP16, FP32 acc" in tf32.name
    assert bf16_same.line.dash == "dot" and fp16_same.line.dash == "dot"
    assert list(fig.layout.xaxis.tickvals) == ks and fig.layout.yaxis.dtick == 1


def test_error_vs_k_warns_once_with_a_count_of_gemms():
    """Lab 06's curves: one warning for the FP8 curve, counting GEMMs (not matrices), its text said once."""
    import warnings

    from labkit import precision as P

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        P.error_vs_k("fp8_e4m3", "fp32", [16, 64, 256, 1024, 4096], m=16, seed=6)
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "of the 5 GEMMs (K = " in text and text.count("to fp8_e4m3") == 1


import pytest  # noqa: E402

from labkit.errors import LabkitError  # noqa: E402


@pytest.mark.parametrize("call,match", [
    (lambda: W.range_chart(None), r"formats must be a list of format names, got None"),
    (lambda: W.range_chart([]), r"formats must have at least 1"),
    (lambda: W.range_chart(["fp17"]), r"unknown number format"),
    (lambda: W.bit_explorer(0.1, formats=3), r"formats must be a list of format names"),
    (lambda: W.bit_explorer(None), r"value must be a number"),
    (lambda: W.bit_table_html("x"), r"x must be a number"),
    (lambda: W.bit_fields_html(0.1), r"takes the result of labkit.precision.bits"),
    (lambda: W.error_vs_k_figure([64, 256], {"a": [1e-3]}), r"must have 2 element"),
    (lambda: W.error_vs_k_figure(None, {}), r"ks must be a list of K values"),
    (lambda: W.error_vs_k_figure([64], None), r"curves must be a dict"),
])
def test_junk_arguments_are_labkit_errors(call, match) -> None:
    with pytest.raises(LabkitError, match=match):
        call()


def test_a_single_format_name_and_nan_errors_are_accepted() -> None:
    assert len(W.range_chart("fp16").data) == 2
    W.bit_table_html(float("nan"), "fp16")
    W.error_vs_k_figure([64, 256], {"FP16, FP16 acc": [float("nan"), float("inf")]})
