"""The kernel explorers build headless and show the right numbers."""

from __future__ import annotations

import pytest

from labkit.errors import LabkitError
from labkit.widgets import kernels as wk


def test_thread_map_summary() -> None:
    s = wk.thread_map_summary(1000, 128)
    assert (s["grid"], s["threads"], s["idle"], s["uncovered"]) == ((8,), 1024, 24, 0)
    s = wk.thread_map_summary((20, 45), (16, 8))
    assert s["grid"] == (3, 3) and s["threads"] == 48 * 24 and s["idle"] == 48 * 24 - 900
    s = wk.thread_map_summary(1000, 128, grid=4)  # too small a grid without a grid-stride loop
    assert s["uncovered"] == 1000 - 512 and s["idle"] == 0
    with pytest.raises(LabkitError):
        wk.thread_map_summary((4, 4), 16)


def test_thread_map_figure() -> None:
    fig = wk.thread_map_figure((20, 45), (16, 8))
    z = fig.data[0].z
    assert len(z) == 20 and len(z[0]) == 45
    assert z[0][0] == 0 and z[0][16] == 1 and z[8][0] == 3  # block ids: x fastest
    assert "idle" in fig.layout.title.text
    fig1 = wk.thread_map_figure(100, 32, grid=2)
    assert fig1.data[0].z[0][63] is not None and fig1.data[0].z[0][64] is None
    assert "uncovered" in fig1.layout.title.text


def test_coalescing_figure() -> None:
    assert "4 sectors" in wk.coalescing_figure("contiguous").layout.title.text
    assert "100% efficient" in wk.coalescing_figure("contiguous").layout.title.text
    assert "32 sectors" in wk.coalescing_figure("strided", stride=32).layout.title.text


def test_occupancy_figure() -> None:
    fig = wk.occupancy_figure("sm_80", 256, 64, 0)
    assert "limited by registers" in fig.layout.title.text and "32/64" in fig.layout.title.text
    with pytest.raises(LabkitError):
        wk.occupancy_figure("sm_80", 4096)


def test_explorers_build_headless() -> None:
    import ipywidgets as W

    for make in (wk.thread_map, wk.coalescing_explorer, wk.occupancy_calculator):
        box = make()
        assert isinstance(box, W.VBox)
    calc = wk.occupancy_calculator("sm_70", 128, 32, 0)
    sliders = [w for row in calc.children[:2] for w in row.children]
    sliders[2].value = 128  # registers: 128 × 32 = 4096 per warp → 4 warps per sub-partition
    assert "limited by registers" in calc.children[2].value
    sliders[2].value = 255
    sliders[1].value = 1024  # cannot launch: too many registers for one block
    assert "cannot launch" in calc.children[2].value


def test_reexported_from_package() -> None:
    import labkit.widgets

    assert labkit.widgets.occupancy_calculator is wk.occupancy_calculator


def test_occupancy_calculator_clears_the_figure_when_the_block_cannot_launch() -> None:
    """sm_80, 672 threads, 128 registers: 86,016 registers for one block, over 65,536. The 33% chart of the
    previous settings must not stay on screen beside "cannot launch"."""
    calc = wk.occupancy_calculator("sm_80", 256, 32, 0)
    arch, threads, registers, _ = [w for row in calc.children[:2] for w in row.children]
    out = calc.children[-1]
    assert calc.figure is not None and out.outputs
    registers.value = 128
    threads.value = 672
    assert "cannot launch" in calc.children[2].value and "65536" in calc.children[2].value
    assert calc.figure is None and out.outputs == ()
    threads.value = 256
    assert calc.figure is not None and "application/vnd.plotly.v1+json" in out.outputs[0]["data"]
    assert "cannot launch" not in calc.children[2].value


@pytest.mark.parametrize("call,match", [
    (lambda: wk.occupancy_calculator("sm_100"), r"unknown arch 'sm_100'\. Did you mean sm_90"),
    (lambda: wk.occupancy_calculator("sm_90", threads="abc"), r"threads must be a whole number from 32 to 1024, got 'abc'"),
    (lambda: wk.occupancy_calculator("sm_90", registers=300), r"registers must be a whole number from 16 to 255"),
    (lambda: wk.occupancy_calculator("sm_70", shared=200_000), r"shared must be a whole number from 0 to 98304"),
    (lambda: wk.thread_map(shape=None), r"shape must be a positive whole number or a pair of them, got None"),
    (lambda: wk.thread_map(block=(3, 8)), r"block must be \(x, y\), each 1, 2, 4, 8, 16 or 32"),
    (lambda: wk.thread_map(shape=(100, 5)), r"each 1 to 64"),
    (lambda: wk.thread_map_summary("x", 32), r"shape must be a positive whole number or a pair"),
    (lambda: wk.thread_map_summary(100, 2.5), r"block must be a positive whole number or a pair"),
    (lambda: wk.thread_map_figure(100, 32, max_elements=None), r"max_elements must be a whole number"),
    (lambda: wk.coalescing_figure("diagonal"), r"unknown pattern 'diagonal'"),
    (lambda: wk.occupancy_figure("sm_90", 800, 80), r"cannot launch"),
])
def test_junk_arguments_are_labkit_errors(call, match) -> None:
    with pytest.raises(LabkitError, match=match):
        call()


def test_occupancy_calculator_says_cannot_launch_for_a_block_the_hardware_refuses() -> None:
    box = wk.occupancy_calculator("sm_90", 800, 80)
    msg = next(c for c in box.children if type(c).__name__ == "HTML")
    assert "cannot launch" in msg.value and "counted as 28" in msg.value and box.figure is None


def test_coalescing_stride_is_live_only_for_strided() -> None:
    """Browser review 3, item 6: the stride slider stayed live and in the title for "contiguous" and "broadcast",
    where it changes nothing; and "1 lines of 128 B"."""
    from labkit.widgets import kernels as K

    box = K.coalescing_explorer()
    stride, pattern = box.controls["stride"], box.controls["pattern"]
    assert pattern.value == "contiguous" and stride.disabled
    title = box.figure.layout.title.text
    assert "stride" not in title and "1 line of 128 B" in title and "1 lines" not in title
    pattern.value = "strided"
    assert not stride.disabled and "stride 2" in box.figure.layout.title.text
    stride.value = 32
    assert "32 sectors" in box.figure.layout.title.text
    pattern.value = "broadcast"
    assert stride.disabled and "stride" not in box.figure.layout.title.text and "1 sector," in box.figure.layout.title.text


def test_occupancy_cannot_launch_said_once() -> None:
    """Browser review 3, item 7: "cannot launch: cannot launch: 72 registers per thread × 1024 threads ..."."""
    from labkit.widgets import kernels as K

    box = K.occupancy_calculator("sm_90", 1024, 72, 0)
    msg = next(c for c in box.children if c.__class__.__name__ == "HTML").value
    assert msg.count("cannot launch") == 1 and "72 registers per thread × 1024 threads" in msg
    assert "What to do:" in msg and box.figure is None
