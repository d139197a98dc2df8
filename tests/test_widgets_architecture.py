"""The lab 01 explorers build and update without a browser."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

import labkit.widgets as W
from labkit.errors import LabkitError
from labkit.widgets import architecture as A


def test_lazy_reexport() -> None:
    assert W.system_explorer is A.system_explorer
    assert W.architecture is A
    assert "roofline_explorer" in dir(W)
    with pytest.raises(AttributeError, match="no widget named"):
        W.no_such_widget  # noqa: B018


def test_system_explorer_headless() -> None:
    box = W.system_explorer()
    assert "GPU0 → GPU5" in box.summary.value and "0 GB/s per direction" in box.summary.value and "SYS" in box.summary.value
    assert isinstance(box.figure, go.Figure)
    box.controls["b"].value = 3
    assert "direct NVLink" in box.summary.value and "50 GB/s per direction, 100 GB/s bidirectional" in box.summary.value
    box.controls["system"].value = "DGX-2"
    assert box.controls["b"].value == 15
    assert "NVSwitch" in box.summary.value and "300 GB/s bidirectional" in box.summary.value
    box.controls["system"].value = "DGX H100"
    assert "900 GB/s bidirectional" in box.summary.value
    box.controls["system"].value = "2x DGX-1 (V100)"
    assert "network" in box.summary.value
    box.controls["a"].value = box.controls["b"].value
    assert "two different GPUs" in box.summary.value
    out = box.children[-1]
    assert "application/vnd.plotly.v1+json" in out.outputs[0]["data"]


def test_dgx_comparison_headless() -> None:
    box = W.dgx_comparison()
    for name in A.DGX_GENERATIONS:
        assert name in box.table.value
    assert "199000 USD" in box.table.value and "NVIDIA DGX A100 datasheet" in box.table.value
    assert isinstance(box.figure, go.Figure) and box.figure.data[0].y[-1] == pytest.approx(8 * 989 / 1000)
    box.controls["metric"].value = "NVLink per GPU (bidirectional)"
    assert list(box.figure.data[0].y) == [160, 300, 300, 600, 900, 900]
    box.controls["systems"].value = ("DGX-2", "DGX A100")
    assert "DGX-1 (P100)" not in box.table.value
    box.controls["log"].value = False
    assert box.figure.layout.yaxis.type == "linear"


def test_roofline_explorer_headless() -> None:
    box = W.roofline_explorer("H100", "bf16", 10)
    assert "33.5 TFLOP/s" in box.summary.value and "memory-bound" in box.summary.value
    box.controls["intensity"].value = 1000
    assert "compute-bound" in box.summary.value
    box.controls["gpu"].value = "P100 SXM2"
    assert "bf16" not in box.controls["precision"].options and box.controls["sparse"].disabled
    box.controls["gpu"].value = "A100 SXM4 40GB"
    box.controls["precision"].value = "tf32"
    box.controls["sparse"].value = True
    assert "TF32 sparse" in box.summary.value and "312 TFLOP/s" in box.summary.value


def test_static_helpers() -> None:
    assert A.metric("DGX A100", "FP16 dense peak, all GPUs").value == pytest.approx(8 * 312 / 1000)
    assert A.metric("DGX-1 (P100)", "NVSwitch chips").value == 0
    assert A.metric("DGX-1 (P100)", "list price") is None
    with pytest.raises(LabkitError, match="unknown metric"):
        A.metric("DGX-2", "colour")
    fig = A.evolution_figure("GPU memory, all GPUs")
    assert fig.data[0].y[2] == 512


def _shown(box) -> str:
    """What the widget's own output area shows as text (a figure's title, or the message)."""
    data = box.children[1].outputs[0]["data"] if box.children[1].outputs else {}
    return data.get("text/html", "") + data.get("text/plain", "")


def test_dgx_comparison_headline_of_different_kinds_shows_why_in_the_widget() -> None:
    """GB200 NVL72's headline is a bandwidth (130 TB/s); beside DGX H100's 32 PFLOP/s there is no chart: the widget
    says so, with what to do, and clears the old chart instead of leaving it (or logging the error only)."""
    box = W.dgx_comparison(("DGX H100", "GB200 NVL72"))
    assert box.figure is not None
    box.controls["metric"].value = "headline compute"
    assert box.figure is None
    text = _shown(box)
    assert "130 TB/s" in text and "32 PFLOP/s" in text and "What to do" in text and "Unselect" in text
    assert "GB200 NVL72" in box.table.value and "130 TB/s" in box.table.value  # the table still has both
    box.controls["systems"].value = ("DGX H100", "DGX H200")
    assert box.figure is not None and list(box.figure.data[0].y) == [32, 32]
    with pytest.raises(LabkitError, match="different kinds"):
        A.evolution_figure("headline compute", ["DGX H100", "GB200 NVL72"])


def test_list_price_and_year_read_like_a_person_wrote_them() -> None:
    box = W.dgx_comparison(("DGX-2", "DGX H100"))
    box.controls["metric"].value = "list price"  # labkit records no price for either
    assert box.figure is None and "no list price" in _shown(box) and "None" not in _shown(box)
    box.controls["systems"].value = ("DGX-2", "DGX A100")
    title = box.figure.layout.title.text
    assert title.startswith("list price (USD)") and "no figure in labkit for: DGX-2" in title
    assert list(box.figure.data[0].x) == ["DGX A100"]
    box.controls["metric"].value = "year"
    assert box.figure.layout.title.text == "year" and box.figure.layout.yaxis.type == "linear"
    assert list(box.figure.data[0].text) == ["2018", "2020"]
    assert ">2016<" in A.comparison_html(["DGX-1 (P100)"]) and "2016 year" not in A.comparison_html(["DGX-1 (P100)"])


def test_log_axes_label_powers_of_ten_only() -> None:
    fig = A.evolution_figure("FP16 dense peak, all GPUs")
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.dtick == 1
