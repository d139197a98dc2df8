"""The trace pictures build headless and show what the trace holds (labkit.show, Trace.figure).

About 5 s on one core."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit.errors import LabkitError  # noqa: E402
from labkit.sim import trace  # noqa: E402
from labkit.widgets import trace as wt  # noqa: E402


@cuda.jit
def copy_shifted(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i + 1]


@cuda.jit
def copy_plain(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cuda.jit
def column_tile(a, out):
    tile = cuda.shared.array((32, 32), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = a[ty, tx]
    cuda.syncthreads()
    out[ty, tx] = tile[tx, ty]


@cuda.jit
def racy_then_divergent(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    out[t] = s[31 - t]  # no barrier: a race
    if t < 8:
        cuda.syncthreads()  # only some threads: a divergent barrier


@cuda.jit
def row_f64(x, out):
    s = cuda.shared.array(32, np.float64)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    out[t] = s[t]


@pytest.fixture(scope="module")
def tile_trace():
    a = np.arange(32 * 4, dtype=np.float32).reshape(4, 32)
    return trace(column_tile, 1, (32, 4), a, np.zeros((4, 32), np.float32))


def test_figures_of_one_trace(tile_trace) -> None:
    box = wt.trace_view(tile_trace)
    import ipywidgets as W

    assert isinstance(box, W.VBox) and set(box.figures) == {"threads", "elements", "coalescing", "banks"}
    assert "traced in the simulator" in box.figures["threads"].layout.title.text
    assert "worst 32-way conflict" in box.figures["banks"].layout.title.text  # column reads of a 32×32 tile
    banks = box.figures["banks"].data[0]
    assert list(banks.x) == list(range(32)) and max(max(row) for row in banks.z) == 32  # warp 0 reads column 0: bank 0
    # thread (3, 1): read a[1, 3] and tile[3, 1], wrote tile[1, 3] and out[1, 3]
    box.controls["thread"].value = 3 + 32 * 1
    el = box.figures["elements"]
    assert "thread (3, 1, 0)" in el.layout.title.text
    a_panel, out_panel, tile_panel = el.data
    assert a_panel.z[1][3] == wt.READ and np.nansum(a_panel.z) == wt.READ
    assert out_panel.z[1][3] == wt.WRITE
    assert tile_panel.z[1][3] == wt.WRITE and tile_panel.z[3][1] == wt.READ
    box.controls["scope"].value = "warp"
    assert (np.array(box.figures["elements"].data[0].z)[1] == wt.READ).all()  # warp 1 read row 1 of a
    assert "<table" in box.scores.value and "shared reads" in box.scores.value and box.tabs.titles[-1] == "scores"


def test_races_and_divergent_barriers_are_marked() -> None:
    t = trace(racy_then_divergent, 1, 32, np.arange(32, dtype=np.float32), np.zeros(32, np.float32))
    fig = wt.threads_figure(t)
    marks = [d for d in fig.data if d.name == "race"]
    assert marks and len(marks[0].x) == 2 * len(t.races) and "race" in marks[0].text[0]
    red = [s for s in fig.layout.shapes if s.line.color == "crimson"]
    assert len(red) == 1  # the block whose barrier diverged
    assert "1 divergent barrier" in fig.layout.title.text
    html_text = wt.trace_view(t).children[0].value
    assert "race" in html_text and "divergent barrier" in html_text


def test_sampled_traces_say_so() -> None:
    x = np.arange(1024, dtype=np.float32)
    t = trace(copy_plain, 16, 64, x, np.zeros(1024, np.float32), max_threads=256)
    assert t.sampled
    for fig in (wt.threads_figure(t), wt.elements_figure(t), wt.coalescing_figure(t), wt.banks_figure(t)):
        assert "sampled: 4 of 16 blocks traced" in fig.layout.title.text
    assert "Sampled" in wt.trace_view(t).children[0].value


def test_coalescing_against_the_ideal() -> None:
    x = np.arange(65, dtype=np.float32)
    t = trace(copy_shifted, 1, 64, x, np.zeros(64, np.float32))
    fig = wt.coalescing_figure(t)
    bars, ideal = fig.data
    reads = [k for k, label in enumerate(bars.x) if " x read" in label]
    assert [bars.y[k] for k in reads] == [5, 5] and [ideal.y[k] for k in reads] == [4, 4]  # one element off: 5 sectors
    assert "x 5/4" in fig.layout.title.text


def test_show_beside_the_reference_and_with_a_case() -> None:
    x = np.arange(65, dtype=np.float32)
    out = np.zeros(64, np.float32)
    box = labkit.show(copy_shifted, x, out, grid=1, block=64, reference=copy_plain)
    assert set(box.traces) == {"yours", "reference"}
    table = box.children[0].value
    assert "your kernel (copy_shifted)" in table and "reference (copy_plain)" in table
    assert "5 (4)" in table and "4 (4)" in table  # sectors per request of x: yours, the reference's
    case = types.SimpleNamespace(grid=1, block=64, args=[x, out], names=["x", "out"])
    one = labkit.show(copy_plain, case)
    assert one.trace.names == ["x", "out"] and not out.any()
    with pytest.raises(LabkitError, match="launch configuration"):
        labkit.show(copy_plain, x, out)


def test_a_failed_check_names_the_show_call_that_draws_its_case() -> None:
    from labkit.check import harness

    x = np.arange(65, dtype=np.float32)
    case = harness.Launch(grid=1, block=64, inputs=(x,), expected=x[:64], label="n=64", names=("x", "out"))
    text = harness.show_hint_for(copy_shifted, case)
    assert text.endswith("labkit.show(copy_shifted, labkit.check.harness.failed_case())")
    failed = harness.failed_case()
    assert failed.args[0] is not x and failed.args[1].shape == (64,)
    box = labkit.show(copy_shifted, failed)
    assert box.trace.summary()["global_sectors_per_request"]["x"] == 5


def test_one_table_for_two_traces_and_no_choice_where_there_is_none() -> None:
    x = np.arange(65, dtype=np.float32)
    box = labkit.show(copy_shifted, x, np.zeros(64, np.float32), grid=1, block=64, reference=copy_plain)
    assert box.children[0].value.count("<table") == 1
    for view in box.children[1].children:
        assert "<table" not in view.children[0].value
        assert view.controls["block"].disabled  # one block traced: nothing to choose


def test_the_reference_beside_itself_is_shown_once() -> None:
    x = np.arange(64, dtype=np.float32)
    box = labkit.show(copy_plain, x, np.zeros(64, np.float32), grid=1, block=64, reference=copy_plain)
    assert "once its check has passed" in box.children[0].value and box.trace.kernel == "copy_plain"


def test_bank_pictures_say_they_use_the_4_byte_bank_model(tile_trace) -> None:
    """A contiguous float64 access counts as 2-way in the 4-byte bank model (Nsight Compute: two phases, no conflict):
    the banks figure and the score table say which model they use, and for 8-byte arrays what it means."""
    t = trace(row_f64, 1, 32, np.arange(32, dtype=np.float64), np.zeros(32, np.float64))
    fig = wt.banks_figure(t)
    title = fig.layout.title.text
    assert "worst 2-way conflict" in title and wt.BANK_MODEL in title
    assert "8-byte elements span two banks" in title and "Nsight Compute" in title and "no conflict" in title
    table = wt.score_table({"row_f64": t})
    assert "worst bank conflict, 4-byte banks" in table and "2-way" in table
    assert "4-byte bank model" in table and "two phases" in table
    # a float32 tile: the model is named, the float64 remark is not
    f32 = wt.banks_figure(tile_trace).layout.title.text
    assert wt.BANK_MODEL in f32 and "8-byte" not in f32
    assert "4-byte bank model" in wt.score_table({"tile": tile_trace}) and "8-byte" not in wt.score_table({"tile": tile_trace})
    # a kernel without shared memory: no bank remark at all
    plain = trace(copy_plain, 1, 32, np.arange(32, dtype=np.float32), np.zeros(32, np.float32))
    assert "bank model" not in wt.banks_figure(plain).layout.title.text and "bank model" not in wt.score_table({"p": plain})


def test_a_figure_with_nothing_to_draw_is_one_line_of_text_not_an_empty_chart() -> None:
    """copy_plain uses no shared memory: its bank map would be an empty chart; the explorer shows one line of text
    (the figure's title) in that place, and the figures with content stay charts."""
    t = trace(copy_plain, 1, 32, np.arange(32, dtype=np.float32), np.zeros(32, np.float32))
    box = wt.trace_view(t)
    banks_out = box.outputs["banks"]
    (only,) = banks_out.outputs
    assert set(only["data"]) == {"text/html", "text/plain"} and "uses no shared memory" in only["data"]["text/plain"]
    assert "<br>" not in only["data"]["text/plain"]
    assert "uses no shared memory" in box.figures["banks"].layout.title.text  # the figure object is still there
    for out in (box.outputs[k] for k in ("threads", "elements", "coalescing")):  # real charts
        assert "application/vnd.plotly.v1+json" in out.outputs[0]["data"]
    assert wt._empty(wt.banks_figure(t)) and not wt._empty(wt.coalescing_figure(t))


# ----------------------------------------------------------------------------- the picture of a failed check
@cuda.jit
def saxpy_past_the_end(a, x, y, out):
    i = cuda.grid(1)
    if i <= x.size:  # one thread too many
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_one_lane_wrong(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i] + (np.float32(1.0) if cuda.threadIdx.x == 5 else np.float32(0.0))


@cuda.jit
def transpose_without_barrier(a, out):
    tile = cuda.shared.array((32, 33), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.blockIdx.x * 32 + tx, cuda.blockIdx.y * 32 + ty
    for j in range(0, 32, 8):
        if row + j < a.shape[0] and col < a.shape[1]:
            tile[ty + j, tx] = a[row + j, col]
    col, row = cuda.blockIdx.y * 32 + tx, cuda.blockIdx.x * 32 + ty
    for j in range(0, 32, 8):
        if row + j < out.shape[0] and col < out.shape[1]:
            out[row + j, col] = tile[tx, ty + j]


def _picture_of_failure(check, kernel):
    from labkit.check import harness

    result = check(kernel)
    assert not result
    case = harness.failed_case()
    return result, case, labkit.show(kernel, case)


def _star(fig):
    return [(t.x[0], t.y[0]) for t in fig.data if getattr(t, "name", None) == "the check's thread"]


def test_the_picture_of_an_out_of_bounds_thread_opens_on_it_and_says_why_its_block_stopped() -> None:
    import re

    result, case, box = _picture_of_failure(labkit.check.saxpy, saxpy_past_the_end)
    m = re.search(r"thread \((\d+), 0, 0\) of block \((\d+), 0, 0\)", result.message)
    thread, block = int(m.group(1)), int(m.group(2))
    k = box.controls["block"].value
    assert box.trace.traced_blocks[k] == (block, 0, 0) and box.controls["thread"].value == thread
    assert _star(box.figures["threads"]) == [(thread, k)]
    assert any(t.name == "raised" for t in box.figures["threads"].data)
    header = box.children[0].value
    assert "The check found" in header and f"threadIdx ({thread}, 0, 0)" in header and "not a second bug" in header
    again = labkit.show(saxpy_past_the_end, case)  # the same case draws the same picture
    assert again.figures["threads"].to_json() == box.figures["threads"].to_json()
    assert again.figures["elements"].to_json() == box.figures["elements"].to_json()


def test_the_picture_of_a_wrong_value_opens_on_the_thread_that_wrote_it_and_marks_the_element() -> None:
    result, case, box = _picture_of_failure(labkit.check.saxpy, saxpy_one_lane_wrong)
    assert "first at index 5:" in result.message
    assert case.focus.array == "out" and case.focus.index == (5,)
    assert box.controls["thread"].value == 5 and box.trace.traced_blocks[box.controls["block"].value] == (0, 0, 0)
    stars = [t for t in box.figures["elements"].data if t.type == "scatter"]
    assert len(stars) == 1 and "out[5]" in stars[0].text[0]
    assert "the last thread that wrote out[5]" in box.children[0].value


def test_the_picture_of_a_race_replays_the_checks_schedule_and_opens_on_the_thread_it_names() -> None:
    import re

    result, case, box = _picture_of_failure(labkit.check.transpose, transpose_without_barrier)
    m = re.search(r"thread \(\d+, \d+, \d+\) did a \w+ and thread \((\d+), (\d+), 0\) a", result.message)
    assert m, result.message
    t = int(m.group(1)) + 32 * int(m.group(2))
    assert box.controls["thread"].value == t
    assert box.trace.schedule == case.schedule and box.trace.seed == case.seed
    assert "race" in box.children[0].value and "block" in box.children[0].value


def test_a_sampled_trace_keeps_the_block_the_check_names() -> None:
    from labkit.sim.trace import Focus

    x = np.arange(64 * 200, dtype=np.float32)
    case = types.SimpleNamespace(grid=200, block=64, args=[x, np.zeros(x.size - 1, np.float32)], names=["x", "out"],
                                 schedule="shuffle", seed=3, outputs=("out",),
                                 focus=Focus("made up", array="out", index=(64 * 137 + 9,), block=(137, 0, 0),
                                             thread=(9, 0, 0)))
    box = labkit.show(copy_shifted, case)
    assert box.trace.sampled and (137, 0, 0) in box.trace.traced_blocks
    assert box.trace.traced_blocks[box.controls["block"].value] == (137, 0, 0) and box.controls["thread"].value == 9
    with pytest.raises(LabkitError, match="plain Python function"):
        labkit.show(copy_shifted.py_func, x, x, grid=1, block=32)


def test_warp_scope_slider_picks_a_warp(tile_trace) -> None:
    """Browser review 3, item 10: in "warp" scope the slider still picked a thread (typing 3 or 5 stayed on warp 0).
    Now it is a warp slider (0..3 for 128 threads), warp n draws threads 32n..32n+31, and "thread" scope gets the
    thread back; in "block" scope it picks nothing and is disabled."""
    box = wt.trace_view(tile_trace, thread=40)
    scope, slider = box.controls["scope"], box.controls["thread"]
    scope.value = "warp"
    assert slider.description == "warp" and slider.max == 3 and slider.value == 1  # thread 40 is in warp 1
    slider.value = 3
    warp3 = box.figures["threads"]
    assert warp3.to_json() == wt.threads_figure(tile_trace, block=0, thread=96, scope="warp").to_json()
    assert warp3.to_json() != wt.threads_figure(tile_trace, block=0, thread=0, scope="warp").to_json()
    assert box.figures["elements"].to_json() == wt.elements_figure(tile_trace, block=0, thread=96, scope="warp").to_json()
    scope.value = "block"
    assert slider.disabled and slider.layout.display == "none"
    scope.value = "thread"
    assert slider.description == "thread" and slider.max == 127 and slider.value == 40 and not slider.disabled
    assert slider.layout.display is None
    one_warp = wt.trace_view(trace(copy_plain, 1, 32, np.arange(32, dtype=np.float32), np.zeros(32, np.float32)))
    one_warp.controls["scope"].value = "warp"  # one warp per block: nothing to pick, so no slider to drag
    assert one_warp.controls["thread"].layout.display == "none"


def test_reference_tab_titles_are_short() -> None:
    """Item 10 too: the tab titles were cut off ("copy2d (x = colum..."); they say "your kernel" and "reference"
    and the table above names the kernels in full."""
    x = np.arange(65, dtype=np.float32)
    box = labkit.show(copy_shifted, x, np.zeros(64, np.float32), grid=1, block=64, reference=copy_plain)
    tabs = box.children[1]
    assert [tabs.get_title(k) for k in range(2)] == ["your kernel", "reference"]
    assert "your kernel (copy_shifted)" in box.children[0].value


def _out_of_bounds_cells(fig):
    return [(t.x[0], t.y[0], t.text[0].strip(), t.marker.line.color) for t in fig.data
            if getattr(t, "name", None) == "out of bounds"]


def test_the_off_by_one_saxpy_picture_draws_the_element_past_the_end_marked() -> None:
    """Browser review 3, finding 5: the thread that raised touched x[n], one past the end; its elements panel was
    empty. The picture now draws that element where it would be (row 5, column 2 of 32-wide rows for n = 162),
    outlined in red and labelled, in the thread's panel and the block's; the check's focus names the array."""
    _, case, box = _picture_of_failure(labkit.check.saxpy, saxpy_past_the_end)
    n = case.args[1].size
    fault = next(f for f in box.trace.faults if f.out_of_bounds)
    assert (fault.array, fault.index, fault.kind) == ("x", (n,), "read")  # a * x[i] + y[i]: x is read first
    assert case.focus.array == "x" and case.focus.index == (n,)
    words = f"x[{n}] — out of bounds ({n} elements)"
    cols = 32 if n <= 1024 else 64
    assert _out_of_bounds_cells(box.figures["elements"]) == [(n % cols, n // cols, words, "crimson")]
    assert words in box.children[0].value and "outlined in red" in box.children[0].value
    box.controls["scope"].value = "block"  # the array as the whole block touched it: still drawn
    assert _out_of_bounds_cells(box.figures["elements"]) == [(n % cols, n // cols, words, "crimson")]
    box.controls["scope"].value = "thread"
    box.controls["thread"].value = (box.controls["thread"].value + 1) % box.trace.threads_per_block
    assert _out_of_bounds_cells(box.figures["elements"]) == []  # another thread did not touch it


@cuda.jit
def write_row_past_the_end(out):
    i, j = cuda.grid(2)
    if i <= out.shape[0] and j < out.shape[1]:
        out[i, j] = 1.0


def test_a_2d_write_past_the_last_row_is_drawn_below_it() -> None:
    t = trace(write_row_past_the_end, (1, 1), (8, 8), np.zeros((4, 4), np.float32))
    (f,) = [f for f in t.faults if f.out_of_bounds]
    assert (f.array, f.kind) == ("out", "write") and f.index[0] == 4 and 0 <= f.index[1] < 4
    box = wt.trace_view(t)
    assert _out_of_bounds_cells(box.figures["elements"]) == [
        (f.index[1], 4, f"out[4, {f.index[1]}] — out of bounds (shape (4, 4))", "crimson")]


# ----------------------------------------------------------------------------- pictures that fit (issue 45, item 4)
@cuda.jit
def grayscale_rows_cols_swapped(img, out):
    row, col = cuda.grid(2)  # (x is the column: the learner's mix-up of browser review 4, item 9)
    if row < out.shape[0] and col < out.shape[1]:
        v = np.float32(0.299) * img[row, col, 0] + np.float32(0.587) * img[row, col, 1] + np.float32(0.114) * img[row, col, 2]
        out[row, col] = int(v + np.float32(0.5))


def _heights(box) -> dict[str, int]:
    return {k: int(f.layout.height) for k, f in box.figures.items()}


def test_a_row_column_mix_up_opens_on_a_thread_that_worked_and_draws_the_image_by_pixel() -> None:
    result, case, box = _picture_of_failure(labkit.check.grayscale, grayscale_rows_cols_swapped)
    k, t = box.controls["block"].value, box.controls["thread"].value
    assert wt._accesses(box.trace)[k, t] > 0  # never a thread that touched nothing
    header = box.children[0].value
    assert "made no access at all" in header and "nearest thread that did" in header
    img = case.args[0]
    (panel,) = [d for d in box.figures["elements"].data if d.type == "heatmap" and "img[" in str(d.text[0][0])]
    rows, cols = np.array(panel.z).shape
    assert cols == img.shape[1]  # one cell per pixel, its 3 channels together
    title = box.figures["elements"].layout.annotations[0].text
    assert "one cell per pixel with its 3 channels" in title
    if rows < img.shape[0]:  # an image taller than the figure has room for (the draw decides) is drawn a page of rows
        page = re.search(rf"rows (\d+)\.\.(\d+) of {img.shape[0]} drawn", title)
        assert page and int(page.group(2)) - int(page.group(1)) + 1 == rows, title
    else:
        assert rows == img.shape[0]
    assert box.tabs.selected_index == 0 and box.tabs.titles[0] == "elements"
    assert max(_heights(box).values()) <= wt.FIGURE_PX


@cuda.jit
def strided_reads(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[7 * i]


def test_a_large_array_is_drawn_a_page_of_rows_at_a_time_around_what_the_thread_touched() -> None:
    x = np.arange(100_000, dtype=np.float32)
    t = trace(strided_reads, 4, 64, x, np.zeros(256, np.float32))
    box = wt.trace_view(t, block=3, thread=60)  # reads x[7 * 252] = x[1764]
    fig = box.figures["elements"]
    title = fig.layout.annotations[0].text
    assert "rows" in title and "of 1563 drawn: the rows it touched" in title
    first_row = int(title.split("rows ")[1].split("..")[0])
    z = np.array(fig.data[0].z)
    assert z.shape[1] == 64 and 1764 // 64 - first_row in range(z.shape[0])
    assert z[1764 // 64 - first_row, 1764 % 64] == wt.READ
    assert fig.layout.height <= wt.FIGURE_PX and max(_heights(box).values()) <= wt.FIGURE_PX


def test_every_fact_of_the_picture_is_still_there_in_its_tabs(tile_trace) -> None:
    box = wt.trace_view(tile_trace)
    assert set(box.outputs) == {"threads", "elements", "coalescing", "banks"}
    assert list(box.tabs.children) == [box.outputs[k] for k in ("elements", "threads", "coalescing", "banks")] + [box.scores]
    for name, out in box.outputs.items():
        assert out.outputs and box.figures[name].layout.title.text  # each figure drawn, with its title


MM_TILE = 16


@cuda.jit
def matmul_no_barrier_after_loads(A, B, C):
    sa = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
    sb = cuda.shared.array((MM_TILE, MM_TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * MM_TILE + tx
    row = cuda.blockIdx.y * MM_TILE + ty
    acc = np.float32(0.0)
    for t in range((A.shape[1] + MM_TILE - 1) // MM_TILE):
        k = t * MM_TILE
        sa[ty, tx] = A[row, k + tx] if row < A.shape[0] and k + tx < A.shape[1] else np.float32(0.0)
        sb[ty, tx] = B[k + ty, col] if k + ty < B.shape[0] and col < B.shape[1] else np.float32(0.0)
        for kk in range(MM_TILE):  # (the learner forgot the barrier after the loads)
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


SCREEN_PX = 880  # a 1080p screen less the system's bar, the browser's and JupyterLab's: what one output may take
CONTROLS_PX = 3 * 36  # the two rows of controls and the tab bar (ipywidgets' 28-pixel controls with their margins)
COLUMN_PX = 1000  # the notebook column, narrow (JupyterLab's file browser open): the header wraps the most


def _chromium_path():
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium_path() is None, reason="no Chromium installed (`apt-get install chromium`)")
def test_pictures_of_course_failures_fit_one_1080p_screen_in_a_browser(tmp_path) -> None:
    """The pictures the browser review measured at 1,760-4,930 px (a row/column mix-up, a tiled matmul without its
    barrier, the off-by-one SAXPY) and those labs 03, 04 and 09 draw of course kernels, laid out by Chromium in a notebook column: header (its own HTML), controls and
    the tab bar, and each tab's figure drawn by plotly.js; every combination fits one screen."""
    import json

    import plotly.offline
    from playwright.sync_api import sync_playwright

    pictures = {
        "grayscale": _picture_of_failure(labkit.check.grayscale, grayscale_rows_cols_swapped)[2],
        "matmul": _picture_of_failure(labkit.check.matmul, matmul_no_barrier_after_loads)[2],
        "saxpy": _picture_of_failure(labkit.check.saxpy, saxpy_past_the_end)[2],
        **_pictures_the_notebooks_draw(),
    }
    (tmp_path / "plotly.js").write_text(plotly.offline.get_plotlyjs())
    parts = []
    for name, box in pictures.items():
        for tab, fig in box.figures.items():
            parts.append(
                f"<div class='pic' id='{name}-{tab}' style='width:{COLUMN_PX}px'><div>{box.children[0].value}</div>"
                f"<div style='height:{CONTROLS_PX}px'></div><div class='fig' data-fig='{html_attr(fig.to_json())}'></div></div>"
            )
    page_html = (
        "<html><head><script src='plotly.js'></script></head><body style='font-family:sans-serif;font-size:13px'>"
        + "".join(parts)
        + "<script>for (const d of document.querySelectorAll('.fig')) { const f = JSON.parse(d.dataset.fig);"
        " Plotly.newPlot(d, f.data, f.layout); }</script></body></html>"
    )
    (tmp_path / "pictures.html").write_text(page_html)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1920, "height": 1080})
            page.goto((tmp_path / "pictures.html").as_uri())
            page.wait_for_function("document.querySelectorAll('.fig .main-svg').length >= %d" % len(parts))
            # each picture: its header as laid out, the controls and tab bar, the figure's drawing (plotly's own box)
            heights = page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('.pic')].map(p => [p.id,"
                " p.children[0].getBoundingClientRect().height + p.children[1].getBoundingClientRect().height"
                " + p.querySelector('.svg-container').getBoundingClientRect().height]))"
            )
        finally:
            browser.close()
    assert len(heights) == len(parts) == 4 * len(pictures), heights
    too_tall = {k: round(v) for k, v in heights.items() if v > SCREEN_PX}
    assert not too_tall, json.dumps(heights)


def _pictures_the_notebooks_draw() -> dict:
    """labkit.show of course kernels as labs 03, 04 and 09 draw them (the same shapes and launches)."""
    rng = np.random.default_rng(3)
    k = labkit.kernels.get
    f32 = np.float32
    return {
        "transpose": labkit.show(k("transpose_shared"), rng.standard_normal((40, 72), dtype=f32), np.zeros((72, 40), f32),
                                 grid=(3, 2), block=(32, 8)),
        "stencil": labkit.show(k("stencil_1d"), rng.standard_normal(100, dtype=f32), np.zeros(100, f32), grid=4, block=32),
        "block-sum": labkit.show(k("block_sum"), rng.standard_normal(64).astype(f32), np.zeros(2, f32), grid=2, block=32),
        "erode": labkit.show(labkit.video.reference_kernels().erode, (rng.random((10, 12)) > 0.2).astype(np.uint8),
                             np.zeros((10, 12), np.uint8), grid=(2, 2), block=(8, 8)),
    }


def html_attr(text: str) -> str:
    import html as _html

    return _html.escape(text, quote=True)


@cuda.jit
def first_reads_x(x, y, out):
    i = cuda.grid(1)
    if i == 0:
        out[0] = x[0]
    elif i < out.size:
        out[i] = y[i]


def test_arrays_a_thread_did_not_touch_are_named_not_drawn_blank() -> None:
    t = trace(first_reads_x, 1, 32, np.ones(32, np.float32), np.ones(32, np.float32), np.zeros(32, np.float32))
    fig = wt.elements_figure(t, thread=0)
    assert [a.text for a in fig.layout.annotations] == ["x (global, shape (32,))", "out (global, shape (32,))"]
    assert "not touched by it: y" in fig.layout.title.text
    assert len(wt.elements_figure(t, thread=5).layout.annotations) == 2  # y and out
