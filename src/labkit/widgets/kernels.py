"""Explorers for labs 02-03: which thread handles which element, what a warp's accesses cost, and occupancy.

- :func:`thread_map_figure` / :func:`thread_map`: a launch configuration over a 1-D or 2-D array; every element
  coloured by its block, hover shows block and thread; idle threads counted.
- :func:`coalescing_figure` / :func:`coalescing_explorer`: the addresses one warp touches for an access pattern,
  grouped into 32-byte sectors, with the efficiency.
- :func:`occupancy_figure` / :func:`occupancy_calculator`: blocks per SM each resource allows on sm_70, sm_80 or
  sm_90, the active warps and the limiting resource (maths in :mod:`labkit.occupancy`).

Figures are plotly ``go.Figure`` objects (never shown here); explorers are ipywidgets that build headless.
"""

from __future__ import annotations

import html
import math
from typing import Any

from labkit.hw import occupancy as occ

from ..errors import LabkitError
from ..validate import describe, require_int, require_sequence
from ._output import figure_outputs, guarded
from ._reopen import explorer

__all__ = [
    "coalescing_explorer",
    "coalescing_figure",
    "occupancy_calculator",
    "occupancy_figure",
    "thread_map",
    "thread_map_figure",
    "thread_map_summary",
]


def _pair(v: int | tuple[int, ...], name: str) -> tuple[int, ...]:
    """``v`` as a tuple of one or two positive whole numbers (``8``, ``(8,)``, ``(16, 8)``)."""
    expected = f"{name} must be a positive whole number or a pair of them, got {describe(v)}."
    try:
        items = [v] if not hasattr(v, "__iter__") or isinstance(v, (str, bytes, dict)) else require_sequence(v, name)
        t = tuple(require_int(x, name, min=1, max=1 << 31) for x in items)
    except LabkitError:
        raise LabkitError(expected, fix=f"e.g. {name}=256 or {name}=(16, 8).") from None
    if not t or len(t) > 2:
        raise LabkitError(expected, fix=f"e.g. {name}=256 or {name}=(16, 8).")
    return t


def thread_map_summary(
    shape: int | tuple[int, int], block: int | tuple[int, int], grid: int | tuple[int, int] | None = None
) -> dict[str, Any]:
    """Numbers behind the thread map: grid, threads launched, elements covered, idle threads, uncovered elements.

    ``shape`` is ``n`` or ``(rows, cols)``; ``block`` is ``bx`` or ``(bx, by)`` with x along columns; ``grid``
    defaults to the smallest grid covering the array.
    """
    shp, blk = _pair(shape, "shape"), _pair(block, "block")
    if len(shp) != len(blk):
        raise LabkitError(f"a {len(shp)}-D array needs a {len(shp)}-D block, got block={block!r}.")
    if len(shp) == 1:
        g = _pair(grid, "grid") if grid is not None else (math.ceil(shp[0] / blk[0]),)
        threads = g[0] * blk[0]
        covered = min(threads, shp[0])
        elements = shp[0]
    else:
        rows, cols = shp
        g = _pair(grid, "grid") if grid is not None else (math.ceil(cols / blk[0]), math.ceil(rows / blk[1]))
        tx, ty = g[0] * blk[0], g[1] * blk[1]
        threads = tx * ty
        covered = min(tx, cols) * min(ty, rows)
        elements = rows * cols
    return {
        "grid": g,
        "block": blk,
        "threads": threads,
        "elements": elements,
        "busy": covered,
        "idle": threads - covered,
        "uncovered": elements - covered,
    }


def thread_map_figure(
    shape: int | tuple[int, int],
    block: int | tuple[int, int],
    grid: int | tuple[int, int] | None = None,
    *,
    max_elements: int = 4096,
) -> Any:
    """Each array element coloured by the block whose thread handles it; hover for block and thread indices.

    Elements no thread reaches (a grid too small, without a grid-stride loop) are blank and counted in the title.
    """
    import plotly.graph_objects as go

    max_elements = require_int(max_elements, "max_elements", min=1, max=1 << 20)
    s = thread_map_summary(shape, block, grid)
    shp = _pair(shape, "shape")
    rows, cols = (1, shp[0]) if len(shp) == 1 else shp
    if rows * cols > max_elements:
        raise LabkitError(f"{rows}×{cols} elements is too many to draw (at most {max_elements}).", fix="Draw a smaller array.")
    bx = s["block"][0]
    by = s["block"][1] if len(s["block"]) > 1 else 1
    gx = s["grid"][0]
    gy = s["grid"][1] if len(s["grid"]) > 1 else 1
    z, text = [], []
    for r in range(rows):
        zr, tr = [], []
        for c in range(cols):
            bxi, byi = c // bx, r // by
            if bxi < gx and byi < gy:
                zr.append(byi * gx + bxi)
                tr.append(f"element {(r, c) if len(shp) == 2 else c}<br>block ({bxi}, {byi})<br>thread ({c % bx}, {r % by})")
            else:
                zr.append(None)
                tr.append(f"element {(r, c) if len(shp) == 2 else c}: no thread (grid too small)")
        z.append(zr)
        text.append(tr)
    fig = go.Figure(go.Heatmap(z=z, text=text, hoverinfo="text", colorscale="Turbo", showscale=False, xgap=1, ygap=1))
    title = f"grid {s['grid']} × block {s['block']}: {s['threads']} threads for {s['elements']} elements, {s['idle']} idle"
    if s["uncovered"]:
        title += f", {s['uncovered']} elements uncovered"
    fig.update_layout(
        title=title,
        xaxis_title="column (x)" if len(shp) == 2 else "element (x)",
        yaxis_title="row (y)" if len(shp) == 2 else "",
        yaxis_autorange="reversed",
        height=220 if rows == 1 else min(700, 120 + 14 * rows),
        margin=dict(l=50, r=20, t=60, b=40),
    )
    if rows == 1:
        fig.update_yaxes(showticklabels=False)
    return fig


def _show(box: Any, out: Any, fig: Any) -> None:
    """Put a plotly figure into an Output widget as display data (renders in Jupyter, builds without a kernel)."""
    box.figure = fig
    out.outputs = figure_outputs(fig)


def _explorer(rows: list, make: Any, controls: list, message: Any = None) -> Any:
    """A VBox of control rows, an optional HTML message and the figure; ``.figure`` is the current figure.

    ``make()`` returns the figure, or None when there is none to show (the message says why): the old figure is
    then cleared, never left standing for settings it does not show. A LabkitError shows in the widget."""
    import ipywidgets as W

    out = W.Output()
    box = W.VBox([*rows, *([message] if message is not None else []), out])
    box.figure = None

    @guarded(box, out)
    def update(change: Any = None) -> None:
        fig = make()
        if fig is None:
            box.figure = None
            out.outputs = ()
        else:
            _show(box, out, fig)

    for w in controls:
        w.observe(update, names="value")
    update()
    return box


@explorer
def thread_map(shape: tuple[int, int] = (20, 45), block: tuple[int, int] = (16, 8)) -> Any:
    """Sliders for the array shape and block shape over :func:`thread_map_figure` (an ipywidgets VBox)."""
    import ipywidgets as W

    shape, block = _pair(shape, "shape"), _pair(block, "block")
    if len(shape) != 2 or any(x > 64 for x in shape):
        raise LabkitError(
            f"shape must be (rows, cols), each 1 to 64 (the sliders' range), got {shape!r}.", fix="e.g. shape=(20, 45)."
        )
    if len(block) != 2 or any(x not in (1, 2, 4, 8, 16, 32) for x in block):
        raise LabkitError(
            f"block must be (x, y), each 1, 2, 4, 8, 16 or 32 (the menus' choices), got {block!r}.", fix="e.g. block=(16, 8)."
        )
    rows = W.IntSlider(value=shape[0], min=1, max=64, description="rows")
    cols = W.IntSlider(value=shape[1], min=1, max=64, description="cols")
    bx = W.Dropdown(options=[1, 2, 4, 8, 16, 32], value=block[0], description="block x")
    by = W.Dropdown(options=[1, 2, 4, 8, 16, 32], value=block[1], description="block y")
    return _explorer(
        [W.HBox([rows, cols]), W.HBox([bx, by])],
        lambda: thread_map_figure((rows.value, cols.value), (bx.value, by.value)),
        [rows, cols, bx, by],
    )


def _count(n: int, noun: str) -> str:
    """``"1 line"``, ``"4 lines"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def coalescing_figure(pattern: str = "contiguous", *, stride: int = 1, size: int = 4, offset: int = 0) -> Any:
    """The byte addresses of one warp's 32 accesses, coloured by 32-byte sector; the title gives sectors,
    128-byte lines and efficiency (bytes used / bytes moved)."""
    import plotly.graph_objects as go

    addrs = occ.warp_addresses(pattern, size=size, stride=stride, offset=offset)
    c = occ.coalescing(addrs, size)
    base = min(addrs)
    sectors = [(a - base - (base % occ.SECTOR)) // occ.SECTOR for a in addrs]
    fig = go.Figure(
        go.Scatter(
            x=list(range(32)),
            y=[a - base for a in addrs],
            mode="markers",
            marker=dict(size=10, color=sectors, colorscale="Turbo"),
            text=[f"lane {ln}: byte {a}, sector {a // occ.SECTOR}" for ln, a in enumerate(addrs)],
            hoverinfo="text",
        )
    )
    what = f"stride {stride}, " if pattern == "strided" else ""  # only the strided pattern uses the stride
    fig.update_layout(
        title=(
            f"{pattern} ({what}{size}-byte elements): {_count(c.sectors, 'sector')}, "
            f"{_count(c.lines, 'line')} of 128 B; "
            f"{c.bytes_used} B used of {c.bytes_moved} B moved = {100 * c.efficiency:.0f}% efficient"
        ),
        xaxis_title="lane",
        yaxis_title="byte offset from the lowest address",
        height=380,
        margin=dict(l=60, r=20, t=60, b=40),
    )
    return fig


@explorer
def coalescing_explorer() -> Any:
    """Pattern, stride, element size and offset controls over :func:`coalescing_figure` (an ipywidgets VBox)."""
    import ipywidgets as W

    pattern = W.Dropdown(options=["contiguous", "strided", "broadcast", "random"], value="contiguous", description="pattern")
    stride = W.IntSlider(value=2, min=1, max=64, description="stride")
    size = W.Dropdown(options=[1, 2, 4, 8, 16], value=4, description="bytes")
    offset = W.IntSlider(value=0, min=0, max=31, description="offset")

    def make() -> Any:
        stride.disabled = pattern.value != "strided"  # the other patterns have no stride: a live slider would mislead
        stride.description = "stride" if pattern.value == "strided" else "stride (strided only)"
        return coalescing_figure(pattern.value, stride=stride.value, size=size.value, offset=offset.value)

    box = _explorer([W.HBox([pattern, stride]), W.HBox([size, offset])], make, [pattern, stride, size, offset])
    box.controls = {"pattern": pattern, "stride": stride, "bytes": size, "offset": offset}
    return box


def occupancy_figure(arch: str = "sm_90", threads: int = 256, registers: int = 32, shared: int = 0) -> Any:
    """Blocks per SM that each resource alone allows, and the result: the smallest, in active warps."""
    import plotly.graph_objects as go

    o = occ.occupancy(arch, threads, registers, shared)
    names = list(o.block_limits)
    values = [o.block_limits[n] for n in names]
    colors = ["crimson" if n == o.limiter else "steelblue" for n in names]
    fig = go.Figure(go.Bar(x=names, y=values, marker_color=colors, text=values, textposition="outside"))
    fig.update_layout(
        title=(
            f"{o.arch}: {o.blocks_per_sm} blocks × {math.ceil(threads / 32)} warps = {o.active_warps}/{o.max_warps} "
            f"warps ({100 * o.occupancy:.0f}% occupancy), limited by {o.limiter}"
        ),
        yaxis_title="blocks per SM allowed",
        height=360,
        margin=dict(l=60, r=20, t=60, b=40),
    )
    fig.add_annotation(
        text=f"source: {occ.SOURCE[:90]}...", showarrow=False, xref="paper", yref="paper", x=0, y=-0.2, font=dict(size=9)
    )
    return fig


@explorer
def occupancy_calculator(arch: str = "sm_90", threads: int = 256, registers: int = 32, shared: int = 0) -> Any:
    """Architecture, threads per block, registers per thread and shared memory per block → occupancy (ipywidgets)."""
    import ipywidgets as W

    lim = occ.limits(arch)
    arch = lim.arch
    threads = require_int(
        threads,
        "threads",
        min=32,
        max=lim.max_threads_per_block,
        fix="The calculator's slider runs from 32 to 1024 threads per block in steps of 32.",
    )
    registers = require_int(
        registers,
        "registers",
        min=16,
        max=lim.max_registers_per_thread,
        fix=f"The calculator's slider runs from 16 to {lim.max_registers_per_thread} registers per thread.",
    )
    shared = require_int(
        shared,
        "shared",
        min=0,
        max=lim.max_shared_per_block,
        fix=f"Shared memory per block in bytes, 0 to {lim.max_shared_per_block} on {arch}.",
    )
    a = W.Dropdown(options=list(occ.ARCHS), value=arch, description="arch")
    t = W.IntSlider(value=threads, min=32, max=1024, step=32, description="threads")
    r = W.IntSlider(value=registers, min=16, max=255, description="registers")
    s = W.IntSlider(value=shared, min=0, max=96 * 1024, step=1024, description="shared B")
    msg = W.HTML()

    def make() -> Any:
        s.max = occ.limits(a.value).max_shared_per_block
        try:
            fig = occupancy_figure(a.value, t.value, r.value, s.value)
        except LabkitError as exc:
            text, _, fix = str(exc).partition("\n  What to do: ")
            text = text.removeprefix("cannot launch: ")  # the message already says it; the label says it once
            msg.value = f"<b>cannot launch:</b> {html.escape(text)}" + (
                f"<br><b>What to do:</b> {html.escape(fix)}" if fix else ""
            )
            return None
        msg.value = str(occ.occupancy(a.value, t.value, r.value, s.value))
        return fig

    return _explorer([W.HBox([a, t]), W.HBox([r, s])], make, [a, t, r, s], message=msg)
