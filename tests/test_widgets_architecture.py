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
    assert isinstance(box.figure, go.Figure) and box.figure.data[0].y[5] == pytest.approx(8 * 989 / 1000)  # DGX H200
    assert box.figure.data[0].y[-1] == pytest.approx(8 * 2250 / 1000)  # DGX B300
    box.controls["metric"].value = "NVLink per GPU (bidirectional)"
    assert list(box.figure.data[0].y) == [160, 300, 300, 600, 900, 900, 1800, 1800]
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


def _row(table: str, label: str) -> str:
    """One row of :func:`A.comparison_html`'s table, by its label."""
    start = table.index(f"<tr><td>{label}</td>")
    return table[start : table.index("</tr>", start)]


def test_gb200_headline_is_compute_and_its_nvlink_bandwidth_is_its_own_row() -> None:
    """GB200 NVL72's headline is 720 PFLOP/s FP8 with sparsity (not its 130 TB/s of NVLink): it charts beside DGX H100's
    32 PFLOP/s, and the 130 TB/s is in the NVLink row."""
    box = W.dgx_comparison(("DGX H100", "GB200 NVL72"))
    box.controls["metric"].value = "headline compute"
    assert box.figure is not None and list(box.figure.data[0].y) == [32, 720]
    assert "(PFLOP/s)" in box.figure.layout.title.text
    headline = _row(box.table.value, "headline compute")
    assert "720 PFLOP/s" in headline and "FP8 Tensor Core with sparsity" in headline and "TB/s" not in headline
    nvlink = _row(box.table.value, "NVLink, all GPUs (bidirectional)")
    assert "130 TB/s" in nvlink and "7.2 TB/s" in nvlink  # 8 x 900 GB/s for the DGX H100
    box.controls["metric"].value = "NVLink, all GPUs (bidirectional)"
    assert list(box.figure.data[0].y) == [7.2, 130]


def test_dgx_comparison_figures_of_different_kinds_show_why_in_the_widget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric whose figures are of different kinds (here a made-up one: a bandwidth for one system, compute for the
    other) gives no chart: the widget says so, with what to do, and clears the old chart instead of leaving it."""
    mixed = {"DGX H100": lambda s: s.headline, "GB200 NVL72": lambda s: s.nvlink_domain_bandwidth}
    monkeypatch.setitem(A.METRICS, "mixed", lambda s: mixed.get(s.name, mixed["DGX H100"])(s))
    box = W.dgx_comparison(("DGX H100", "GB200 NVL72"))
    assert box.figure is not None
    box.controls["metric"].options = list(A.METRICS)
    box.controls["metric"].value = "mixed"
    assert box.figure is None
    text = _shown(box)
    assert "130 TB/s" in text and "32 PFLOP/s" in text and "What to do" in text and "Unselect" in text
    assert "GB200 NVL72" in box.table.value and "130 TB/s" in box.table.value  # the table still has both
    box.controls["systems"].value = ("DGX H100", "DGX H200")
    assert box.figure is not None and list(box.figure.data[0].y) == [32, 32]
    with pytest.raises(LabkitError, match="different kinds"):
        A.evolution_figure("mixed", ["DGX H100", "GB200 NVL72"])


def test_list_price_and_year_read_like_a_person_wrote_them() -> None:
    box = W.dgx_comparison(("DGX-2", "DGX H100"))
    box.controls["metric"].value = "list price"  # labkit records no price for either
    assert box.figure is None and "no list price" in _shown(box) and "None" not in _shown(box)
    box.controls["systems"].value = ("DGX-2", "DGX A100")
    title = box.figure.layout.title.text
    assert title.startswith("list price (USD)") and "no figure in labkit for: DGX-2" in title
    assert list(box.figure.data[0].x) == ["DGX A100"]
    box.controls["metric"].value = "year"
    assert box.figure.layout.title.text.startswith("year<br>") and box.figure.layout.yaxis.type == "linear"
    assert list(box.figure.data[0].text) == ["2018", "2020"]
    assert ">2016<" in A.comparison_html(["DGX-1 (P100)"]) and "2016 year" not in A.comparison_html(["DGX-1 (P100)"])


def test_log_scale_on_the_year_chart_is_greyed_out_and_the_chart_says_why() -> None:
    """ "log scale" cannot apply to years: the box is disabled while the year is charted, and the chart's title says
    the years are on a linear axis (rather than the tick being silently ignored)."""
    box = W.dgx_comparison()
    log = box.controls["log"]
    assert log.value and not log.disabled
    box.controls["metric"].value = "year"
    assert log.disabled and "not for years" in log.description and "linear" in log.tooltip
    assert box.figure.layout.yaxis.type == "linear" and "years on a linear axis" in box.figure.layout.title.text
    log.value = False
    assert "years on a linear axis" not in box.figure.layout.title.text
    box.controls["metric"].value = "GPUs"
    assert not log.disabled and log.description == "log scale"
    log.value = True
    assert box.figure.layout.yaxis.type == "log"
    assert "linear" not in A.evolution_figure("year", log=False).layout.title.text


def test_log_axes_label_powers_of_ten_only() -> None:
    fig = A.evolution_figure("FP16 dense peak, all GPUs")
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.dtick == 1


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: A.system_explorer("DGX-1 (V100)", 0, 9), r"b must be a whole number from 0 to 7, got 9"),
        (lambda: A.system_explorer("DGX-2", -1, 3), r"a must be a whole number from 0 to 15, got -1"),
        (lambda: A.system_explorer("DGX-2", "GPU1", 3), r"a must be a whole number"),
        (lambda: A.system_explorer(None), r"system name must be a string"),
        (lambda: A.dgx_comparison(label="x"), r"unknown metric 'x'"),
        (lambda: A.dgx_comparison(label="gpus"), None),  # case does not matter
        (lambda: A.dgx_comparison(systems=None), r"systems must be a list of system names"),
        (lambda: A.dgx_comparison(systems=[]), r"systems must have at least 1"),
        (lambda: A.roofline_explorer("H100", "bf16", "ten"), r"intensity must be a finite number from 0.01 to 10000, got 'ten'"),
        (lambda: A.roofline_explorer("H100", None), r"precision is named by a string"),
        (lambda: A.roofline_explorer("H100", "bf61"), r"unknown precision"),
        (lambda: A.evolution_figure("GPUs", log="yes"), r"log must be True or False"),
        (lambda: A.comparison_html(metrics=["colour"]), r"unknown metric 'colour'"),
        (lambda: A.metric("DGX H100", ["GPUs"]), r"metric must be one of"),
    ],
)
def test_constructor_arguments_are_checked_before_any_widget_is_built(call, match) -> None:
    """Each of these once ended in a TraitError or a TypeError from ipywidgets' insides."""
    if match is None:
        call()
        return
    with pytest.raises(LabkitError, match=match):
        call()


def test_dgx_comparison_with_nothing_selected_says_so() -> None:
    """Browser review 3, item 8: deselecting every system showed DGX-1 (P100) without a word. Now the chart and the
    table clear and the output names the problem."""
    box = W.dgx_comparison()
    box.controls["systems"].value = ()
    out = box.children[1]
    assert box.figure is None and box.table.value == ""
    assert "no system is selected" in out.outputs[0]["data"]["text/plain"]
    assert "DGX-1 (P100)" not in out.outputs[0]["data"]["text/plain"]
    box.controls["systems"].value = ("DGX B200",)  # and it comes back
    assert isinstance(box.figure, go.Figure) and "DGX B200" in box.table.value


def test_dgx_comparison_offers_blackwell_and_fp4() -> None:
    assert {"DGX B200", "DGX B300"} <= set(A.DGX_GENERATIONS)
    assert {"DGX B200", "DGX B300", "GB300 NVL72"} <= set(W.dgx_comparison().controls["systems"].options)
    fp4 = A.evolution_figure("FP4 dense peak, all GPUs", ["DGX H100", "DGX B200", "DGX B300"])
    assert list(fp4.data[0].y) == [pytest.approx(8 * 9000 / 1000), pytest.approx(8 * 13500 / 1000)]
    assert "DGX H100" in fp4.layout.title.text  # named as having no FP4 figure, not drawn as zero


def test_roofline_explorer_says_when_the_precision_changes() -> None:
    """Browser review 3, item 9: H100 FP8 sparse, then V100, silently became FP64 with the sparsity box still ticked.
    Now the nearest wider format is chosen (FP16), the box is unticked, and the summary says both."""
    box = W.roofline_explorer("H100", "fp8", 10)
    box.controls["sparse"].value = True
    box.controls["gpu"].value = "V100 SXM2 16GB"
    assert box.controls["precision"].value == "fp16"
    assert box.controls["sparse"].value is False and box.controls["sparse"].disabled
    assert "FP8 does not exist on the V100 SXM2 16GB" in box.summary.value and "showing FP16 instead" in box.summary.value
    assert "2:4 sparsity is off" in box.summary.value
    box.controls["intensity"].value = 20  # the note is said once, not repeated on every change
    assert "does not exist" not in box.summary.value
    box.controls["gpu"].value = "B300"
    assert "fp4" in box.controls["precision"].options
    box.controls["precision"].value = "fp4"
    assert "B300, FP4" in box.summary.value
    box.controls["gpu"].value = "H200"  # FP4 -> the next wider format H200 has, FP8
    assert box.controls["precision"].value == "fp8" and "FP4 does not exist on the H200" in box.summary.value
    start = W.roofline_explorer("V100", "fp8", 10)  # a start precision the GPU lacks is said too
    assert start.controls["precision"].value == "fp16" and "showing FP16 instead" in start.summary.value


def test_system_explorer_draws_the_blackwell_systems() -> None:
    """DGX B200/B300 and GB300 NVL72 are in the explorer, and it agrees with the comparison on NVSwitch chips."""
    from labkit import topology

    box = W.system_explorer("DGX B200", 0, 7)
    assert "1800 GB/s bidirectional" in box.summary.value and "NVSwitch" in box.summary.value
    for name in ("DGX B300", "GB300 NVL72"):
        box.controls["system"].value = name
        assert name in box.summary.value and "1800 GB/s bidirectional" in box.summary.value
    assert box.controls["b"].value == 71
    for name in set(topology.systems()) & set(A.DGX_GENERATIONS + ("GB200 NVL72", "GB300 NVL72")):
        drawn = len(topology.load(name).nodes("nvswitch"))
        assert A.metric(name, "NVSwitch chips").value == drawn, name
