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
