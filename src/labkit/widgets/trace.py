"""Pictures of what a kernel touched, from its traced execution in the simulator (:mod:`labkit.sim.trace`).

- :func:`show` (also ``labkit.show``): trace ``kernel[grid, block](*args)`` and draw it; with ``reference=``
  the reference kernel is traced on the same input and the two are compared, score for score;
- :func:`trace_view` (also ``Trace.figure()``): the ipywidgets picture of one trace — the grid of threads
  (races marked ×, blocks with a divergent barrier outlined in red), a thread / warp / block chosen with the
  controls and the elements it read and wrote in each array, the sectors each warp request touched against the
  ideal, and the bank-conflict map of the shared-memory requests;
- the figures alone (plotly ``go.Figure``): :func:`threads_figure`, :func:`elements_figure`,
  :func:`coalescing_figure`, :func:`banks_figure`; :func:`score_table` (HTML).

The score is GPU-Puzzles': the most global and shared reads and writes any one thread makes (an atomic counts
as a read and a write). Every picture says that it comes from the simulator, and when only some blocks were
traced (a large launch), which.
"""

from __future__ import annotations

import html
import math
from typing import Any, Sequence

import numpy as np

from ..errors import LabkitError
from ..sim.trace import _dims
from ._reopen import explorer

__all__ = ["banks_figure", "coalescing_figure", "elements_figure", "score_table", "show", "threads_figure", "trace_view"]

NONE, READ, WRITE, BOTH, ATOMIC = range(5)

#: The bank model the bank pictures and tables use, said beside every bank-conflict figure.
BANK_MODEL = "4-byte bank model: 32 banks, each one 4-byte word wide"


def _wide_bank_note(names: Sequence[str]) -> str:
    """What the 4-byte bank model means for shared arrays of 8-byte elements (float64, int64), named in ``names``."""
    return (
        f"{', '.join(names)}: 8-byte elements span two banks, so a contiguous warp access counts as 2-way in this "
        "model; Nsight Compute serves an 8-byte warp access in two phases of 16 lanes and reports no conflict"
    )


_CATEGORY = ["untouched", "read", "written", "read and written", "atomic"]
_COLORS = ["#f2f2f2", "#4c78a8", "#f58518", "#b279a2", "#54a24b"]
MAX_REQUESTS_DRAWN = 48
FIGURE_PX = 480  # the tallest figure: with the header, the controls and the tab bar the picture fits a 1080p screen


def _scale() -> list[list[Any]]:
    n = len(_COLORS)
    out = []
    for k, c in enumerate(_COLORS):
        out += [[k / n, c], [(k + 1) / n, c]]
    return out


def _sim_note(trace: Any) -> str:
    note = "traced in the simulator"
    if trace.sampled:
        note += f"; sampled: {len(trace.traced_blocks)} of {trace.total_blocks} blocks traced"
    return note


def _is_1d(trace: Any) -> bool:
    return trace.grid[1:] == (1, 1) and trace.block[1:] == (1, 1)


def _cell(trace: Any, k: int, t: int) -> tuple[int, int]:
    """(row, col) in the threads figure of thread ``t`` of the ``k``-th traced block."""
    if _is_1d(trace):
        return k, t
    bx, by, bz = trace.traced_blocks[k]
    tx, ty, tz = trace.thread_index(t)
    BX, BY, BZ = trace.block
    GY = trace.grid[1]
    return (bz * BZ + tz) * GY * BY + by * BY + ty, bx * BX + tx


# ----------------------------------------------------------------------------- figures
def threads_figure(
    trace: Any, *, block: int = 0, thread: int = 0, scope: str = "thread", marked: tuple[int, int] | None = None
) -> Any:
    """The grid of traced threads, coloured by how many reads and writes each made; the selection outlined.

    1-D launches: one row per traced block. Otherwise: threads at their global (x, y) position. Threads of a
    race are marked ×, threads that raised (an index out of bounds) ◆; blocks where a divergent barrier stopped
    the block are outlined in red. ``marked`` (traced block, thread), the thread a failed check points at, gets ★."""
    import plotly.graph_objects as go

    counts = trace.counts()
    total = sum(counts.values())
    one_d = _is_1d(trace)
    if one_d:
        rows, cols = max(1, len(trace.traced_blocks)), trace.threads_per_block
    else:
        rows = trace.grid[1] * trace.block[1] * trace.grid[2] * trace.block[2]
        cols = trace.grid[0] * trace.block[0]
    z: list[list[Any]] = [[None] * cols for _ in range(rows)]
    text: list[list[str]] = [[""] * cols for _ in range(rows)]
    for k, b in enumerate(trace.traced_blocks):
        for t in range(trace.threads_per_block):
            r, c = _cell(trace, k, t)
            z[r][c] = int(total[k, t])
            parts = ", ".join(f"{name} {int(v[k, t])}" for name, v in counts.items() if v[k, t])
            text[r][c] = f"block {b}, thread {trace.thread_index(t)} (warp {t // 32})<br>{parts or 'no accesses'}"
    fig = go.Figure(
        go.Heatmap(z=z, text=text, hoverinfo="text", colorscale="Blues", colorbar=dict(title="accesses"), xgap=1, ygap=1)
    )
    # selection
    k = max(0, min(block, len(trace.traced_blocks) - 1))
    if trace.traced_blocks:
        if scope == "block":
            members = range(trace.threads_per_block)
        elif scope == "warp":
            w = thread // 32
            members = range(32 * w, min(32 * w + 32, trace.threads_per_block))
        else:
            members = [thread]
        cells = [_cell(trace, k, t) for t in members]
        rs, cs = [c[0] for c in cells], [c[1] for c in cells]
        fig.add_shape(
            type="rect", x0=min(cs) - 0.5, x1=max(cs) + 0.5, y0=min(rs) - 0.5, y1=max(rs) + 0.5, line=dict(color="black", width=2)
        )
    # races: both threads
    order = {tuple(b): k for k, b in enumerate(trace.traced_blocks)}
    xs, ys, hover = [], [], []
    for race in trace.races:
        other = race.other_block if race.scope == "grid" else race.block
        for blk, thr in ((other, race.first_thread), (race.block, race.second_thread)):
            kk = order.get(tuple(blk))
            if kk is None:
                continue
            r, c = _cell(trace, kk, trace._thread_linear(thr))
            xs.append(c)
            ys.append(r)
            hover.append(html.escape(race.message()))
    if xs:
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                marker=dict(symbol="x", color="crimson", size=9),
                name="race",
                text=hover,
                hoverinfo="text",
            )
        )
    faults = [(order[tuple(f.block)], trace._thread_linear(f.thread), f.message) for f in trace.faults if tuple(f.block) in order]
    if faults:
        cells = [_cell(trace, kk, t) for kk, t, _ in faults]
        fig.add_trace(
            go.Scatter(
                x=[c[1] for c in cells],
                y=[c[0] for c in cells],
                mode="markers",
                name="raised",
                marker=dict(symbol="diamond", color="crimson", size=10, line=dict(color="white", width=1)),
                text=[html.escape(m) for _, _, m in faults],
                hoverinfo="text",
            )
        )
    if marked is not None and 0 <= marked[0] < len(trace.traced_blocks) and 0 <= marked[1] < trace.threads_per_block:
        r, c = _cell(trace, *marked)
        fig.add_trace(_star(go, c, r, "the thread the check's message is about", 15, name="the check's thread"))
    for d in trace.divergent:
        kk = order.get(tuple(d.block))
        if kk is None:
            continue
        cells = [_cell(trace, kk, t) for t in (0, trace.threads_per_block - 1)]
        fig.add_shape(
            type="rect",
            x0=min(c[1] for c in cells) - 0.5,
            x1=max(c[1] for c in cells) + 0.5,
            y0=min(c[0] for c in cells) - 0.5,
            y1=max(c[0] for c in cells) + 0.5,
            line=dict(color="crimson", width=3, dash="dot"),
        )
    title = (
        f"{trace.kernel}: threads ({_sim_note(trace)}); {len(trace.races)} race(s), {len(trace.divergent)} divergent barrier(s)"
    )
    fig.update_layout(
        title=title,
        height=min(FIGURE_PX, max(260, 140 + 14 * rows)),
        margin=dict(l=60, r=20, t=50, b=40),
        xaxis_title="threadIdx.x" if one_d else "global x (blockIdx.x * blockDim.x + threadIdx.x)",
        yaxis_title="traced block" if one_d else "global y",
        showlegend=False,
    )
    fig.update_yaxes(autorange="reversed")
    if one_d:
        fig.update_yaxes(tickmode="array", tickvals=list(range(rows)), ticktext=[str(b[0]) for b in trace.traced_blocks] or ["0"])
    return fig


MAX_ELEMENTS_DRAWN = 16384


def _flat_in(trace: Any, marked: tuple[str, tuple[int, ...]]) -> int | None:
    """The flat index of element ``marked`` = (array, index) of the trace, None when it is not in the array."""
    info = trace.arrays.get(marked[0])
    idx = tuple(int(i) for i in marked[1])
    if info is None or len(idx) != len(info.shape) or not all(0 <= i < n for i, n in zip(idx, info.shape)):
        return None
    return int(np.ravel_multi_index(idx, info.shape)) if info.shape else 0


def _star(go: Any, x: int, y: int, text: str, size: int, **extra: Any) -> Any:
    """A gold star on cell (``x``, ``y``) with hover ``text``: what the check's message is about."""
    return go.Scatter(
        x=[x],
        y=[y],
        mode="markers",
        hoverinfo="text",
        text=[text],
        marker=dict(symbol="star", color="gold", size=size, line=dict(color="black", width=1)),
        **extra,
    )


def _fmt_index(index: Sequence[int]) -> str:
    return str(index[0]) if len(index) == 1 else ", ".join(str(i) for i in index)


MIN_CELL_PX = 5  # the smallest cell drawn: an array with more rows than fit is drawn a page of rows at a time


def _cells(shape: Sequence[int]) -> tuple[int, int]:
    """(columns, channels) of an array's panel: 1-D arrays wrap in rows of 32 or 64, 2-D ones are drawn as they are;
    an array of 3 or more dimensions whose last axis has at most 4 elements (an image's colour channels) is drawn
    one cell per pixel, its channels together; any other is drawn with its last axis as columns."""
    size = int(np.prod(shape))
    if len(shape) == 1:
        return max(1, min(size, 32 if size <= 1024 else 64)), 1
    if len(shape) >= 3 and int(shape[-1]) <= 4:
        return max(1, int(shape[-2])), int(shape[-1])
    return max(1, int(shape[-1])), 1


def _window(
    trace: Any, name: str, keep: int | None = None, *, rows_max: int | None = None, near: np.ndarray | None = None
) -> tuple[int, int, int, int]:
    """(first cell, rows, cols, cells drawn) of an array's panel (a cell is an element, or a pixel of an image with
    its channels: :func:`_cells`). An array with more than ``rows_max`` rows is drawn a page of that many rows: the
    page with element ``keep`` (the one the check names), else the first cell of ``near`` (what the selection
    touched), else the first the kernel touched."""
    info = trace.arrays[name]
    shape = info.shape or (1,)
    cols, ch = _cells(shape)
    cells = max(1, int(np.prod(shape)) // ch)
    total_rows = math.ceil(cells / cols)
    most = max(1, min(rows_max or total_rows, max(1, MAX_ELEMENTS_DRAWN // cols)))
    first = 0
    if total_rows > most:
        if keep is not None:
            anchor = keep // ch
        elif near is not None and near.size:
            anchor = int(near.min()) // ch
        else:
            touched = trace.columns["flat"][trace.columns["array"] == trace.names.index(name)]
            anchor = int(touched.min()) // ch if touched.size else 0
        top = max(0, min(total_rows - most, anchor // cols - most // 4))
        first = top * cols
    count = min(cells - first, most * cols)
    return first, math.ceil(count / cols), cols, count


def _row_label(shape: Sequence[int], ch: int, row: int) -> str:
    """The label of a panel row: its index (its leading indices for more than 2 dimensions)."""
    lead = shape[:-2] if ch > 1 else shape[:-1]
    if len(lead) <= 1:
        return str(row)
    return ", ".join(str(int(v)) for v in np.unravel_index(row, tuple(int(n) for n in lead)))


def _ticks(n: int, most: int = 8) -> list[int]:
    """At most ``most`` evenly spaced tick positions in 0..n-1 (integers only)."""
    step = max(1, math.ceil(n / most))
    return list(range(0, n, step))


def elements_figure(
    trace: Any,
    *,
    block: int = 0,
    thread: int = 0,
    scope: str = "thread",
    arrays: Sequence[str] | None = None,
    marked: tuple[str, tuple[int, ...]] | None = None,
) -> Any:
    """For the selected thread, warp or block: the elements it read and wrote in each array (one panel per array).

    Shared arrays show the selected block's copy. Colours: read, written, both, atomic. ``marked`` (array,
    index), the element a failed check names, is outlined with ★ in its panel."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = list(arrays) if arrays is not None else list(trace.names)
    if not names:
        fig = go.Figure()
        fig.update_layout(title=f"{trace.kernel} touched no array elements ({_sim_note(trace)})", height=200)
        return fig
    b = trace.traced_blocks[max(0, min(block, len(trace.traced_blocks) - 1))] if trace.traced_blocks else (0, 0, 0)
    where: dict[str, Any] = {"block": b}
    if scope == "thread":
        where["thread"] = thread
    elif scope == "warp":
        where["warp"] = thread // 32
    mark_flat = _flat_in(trace, marked) if marked is not None else None
    mine = {
        n: np.concatenate([trace.elements(n, kind, **where) for kind in ("read", "write", "atomic")]).astype(np.int64)
        for n in names
    }
    # a panel for each array the selection touched (or tried to: out of bounds), or the check names; the others are
    # named in the title instead of drawn blank
    tried = {f.array for f in getattr(trace, "faults", ()) if getattr(f, "out_of_bounds", False) and tuple(f.block) == tuple(b)}
    drawn = [n for n in names if mine[n].size or n in tried or (marked is not None and marked[0] == n)]
    untouched = [n for n in names if n not in drawn]
    if not drawn:
        who = {"thread": f"thread {trace.thread_index(thread)}", "warp": f"warp {thread // 32}", "block": "the block"}[scope]
        fig = go.Figure()
        fig.update_layout(
            title=f"{who} of block {b} touched no array element ({', '.join(names)}): see the threads tab", height=200
        )
        return fig
    names = drawn
    gap = 60 if len(names) <= 3 else 45
    per_panel = max(50, (FIGURE_PX - 90 - gap * len(names)) // len(names))
    rows_max = max(4, per_panel // MIN_CELL_PX)
    windows = {
        n: _window(trace, n, mark_flat if marked is not None and marked[0] == n else None, rows_max=rows_max, near=mine[n])
        for n in names
    }
    titles = []
    for n in names:
        info, (first, rows, cols, count) = trace.arrays[n], windows[n]
        shape = info.shape or (1,)
        ch = _cells(shape)[1]
        total_rows = math.ceil(int(np.prod(shape)) // ch / cols)
        if rows < total_rows:
            part = f", rows {first // cols}..{first // cols + rows - 1} of {total_rows} drawn: the rows it touched"
        else:
            part = ""
        chans = f", one cell per {'pixel' if ch > 1 else 'element'} with its {ch} channels" if ch > 1 else ""
        titles.append(f"{n} ({info.space}, shape {info.shape}{chans}{part})")
    # cells about square on a ~900-pixel-wide plot, 5 to 22 pixels high, the figure at most FIGURE_PX high
    panel = [
        max(1, windows[n][1]) * max(MIN_CELL_PX, min(22, 900 // max(1, windows[n][2]), per_panel // max(1, windows[n][1])))
        for n in names
    ]
    total = sum(panel) + gap * len(names) + 40
    fig = make_subplots(
        rows=len(names), cols=1, vertical_spacing=gap / total if len(names) > 1 else 0, row_heights=panel, subplot_titles=titles
    )
    for row, name in enumerate(names, start=1):
        info = trace.arrays[name]
        first, rows, cols, count = windows[name]
        ch = _cells(info.shape or (1,))[1]
        cat = np.zeros(rows * cols, dtype=np.int64)
        for kind, value in (("read", READ), ("write", WRITE), ("atomic", ATOMIC)):
            flats = trace.elements(name, kind, **where) // ch - first
            flats = flats[(flats >= 0) & (flats < count)]
            if kind == "write":
                cat[flats] = np.where(cat[flats] == READ, BOTH, WRITE)
            elif kind == "atomic":
                cat[flats] = value
            else:
                cat[flats] = np.where(cat[flats] == WRITE, BOTH, np.maximum(cat[flats], value))
        z = cat.astype(float)
        z[count:] = np.nan
        shape = info.shape or (1,)

        def label(i: int) -> str:
            if i >= count:
                return ""
            f = (first + i) * ch
            idx = f if len(shape) == 1 else tuple(int(v) for v in np.unravel_index(f, shape))
            if ch > 1:
                idx = idx[:-1] + (f"0..{ch - 1}",)  # type: ignore[index, operator]
                return f"{name}[{', '.join(str(v) for v in idx)}]: {_CATEGORY[int(cat[i])]}"
            return f"{name}[{idx}]: {_CATEGORY[int(cat[i])]}"

        text = np.array([label(i) for i in range(rows * cols)], dtype=object).reshape(rows, cols)
        fig.add_trace(
            go.Heatmap(
                z=z.reshape(rows, cols),
                text=text,
                hoverinfo="text",
                zmin=-0.5,
                zmax=len(_COLORS) - 0.5,
                colorscale=_scale(),
                showscale=row == 1,
                xgap=1,
                ygap=1,
                colorbar=dict(tickvals=list(range(len(_COLORS))), ticktext=_CATEGORY, len=0.5, y=1, yanchor="top"),
            ),
            row=row,
            col=1,
        )
        fig.update_yaxes(
            autorange="reversed",
            row=row,
            col=1,
            tickmode="array",
            tickvals=_ticks(rows),
            ticktext=[
                _row_label(shape, ch, first // cols + r) if len(shape) > 1 else str(first + r * cols) for r in _ticks(rows)
            ],
            title_text="row" if len(shape) > 1 else "first index",
        )
        fig.update_xaxes(row=row, col=1, tickmode="array", tickvals=_ticks(cols), ticktext=[str(c) for c in _ticks(cols)])
        if marked is not None and marked[0] == name and mark_flat is not None and 0 <= mark_flat // ch - first < count:
            r, c = divmod(mark_flat // ch - first, cols)
            star = _star(go, c, r, f"{name}[{_fmt_index(marked[1])}]: the element the check names", 14, showlegend=False)
            fig.add_trace(star, row=row, col=1)
        _draw_out_of_bounds(fig, trace, name, row, windows[name], panel[row - 1] // max(1, windows[name][1]), b, thread, scope)
    who = {"thread": f"thread {trace.thread_index(thread)}", "warp": f"warp {thread // 32}", "block": "all its threads"}[scope]
    fig.update_layout(
        title=f"elements read and written by {who} of block {b} ({_sim_note(trace)})"
        + (f"<br>not touched by it: {', '.join(untouched)}" if untouched else ""),
        height=min(FIGURE_PX, total + 50),
        margin=dict(l=70, r=20, t=70, b=30),
    )
    return fig


def out_of_bounds_words(trace: Any, fault: Any) -> str:
    """``x[162] — out of bounds (162 elements)``: the element a thread tried to touch outside array ``fault.array``."""
    info = trace.arrays.get(fault.array)
    size = (
        (f"{int(np.prod(info.shape)):,} elements" if info is None or len(info.shape) <= 1 else f"shape {tuple(info.shape)}")
        if info is not None
        else "outside the array"
    )
    return f"{fault.array}[{_fmt_index(fault.index)}] — out of bounds ({size})"


def _oob_cell(fault: Any, shape: Sequence[int], first: int, rows: int, cols: int) -> tuple[int, int]:
    """(row, col) in an array's panel where the out-of-bounds element of ``fault`` is drawn: where it would be if the
    array went on (past the last element of a 1-D array, past the last row or column of a 2-D one; before the
    first for a negative index); for more dimensions, one cell below the panel."""
    idx = tuple(int(i) for i in fault.index)
    if len(shape) == 1:
        r, c = divmod(idx[0] - first, cols)
    elif len(shape) == 2:
        r, c = idx[0] - first // cols, idx[1]
    else:
        return rows, 0
    # far from the rows drawn (a large array drawn in part, a wild index): one cell below the panel, labelled
    return (r, c) if -1 <= r <= rows and -1 <= c <= cols else (rows, 0)


def _draw_out_of_bounds(
    fig: Any,
    trace: Any,
    name: str,
    row: int,
    window: tuple[int, int, int, int],
    cell_px: int,
    block: Sequence[int],
    thread: int,
    scope: str,
) -> None:
    """Each element of ``name`` outside the array that a selected thread tried to read or write (the access that
    stopped its block): an extra cell where it would be, outlined in red and labelled, in the panel of ``name``."""
    import plotly.graph_objects as go

    first, rows, cols, _ = window
    shape = trace.arrays[name].shape or (1,)
    hits = []
    for f in getattr(trace, "faults", ()):
        if not getattr(f, "out_of_bounds", False) or f.array != name or tuple(f.block) != tuple(block):
            continue
        t = trace._thread_linear(f.thread)
        if (scope == "thread" and t != thread) or (scope == "warp" and t // 32 != thread // 32):
            continue
        hits.append(f)
    for f in hits:
        r, c = _oob_cell(f, shape, first, rows, cols)
        words = out_of_bounds_words(trace, f)
        verb = {"read": "tried to read", "write": "tried to write", "atomic": "tried to update atomically"}[f.kind]
        hover = f"{words}: thread {tuple(f.thread)} of block {tuple(f.block)} {verb} it, and its block stopped there"
        fig.add_trace(
            go.Scatter(
                x=[c],
                y=[r],
                mode="markers+text",
                name="out of bounds",
                showlegend=False,
                text=[f"  {words}"],
                textposition="middle right" if c < cols / 2 else "middle left",
                textfont=dict(color="crimson"),
                hovertext=[html.escape(hover)],
                hoverinfo="text",
                marker=dict(
                    symbol="square", size=max(8, cell_px), color="rgba(220, 20, 60, 0.15)", line=dict(color="crimson", width=3)
                ),
            ),
            row=row,
            col=1,
        )


def coalescing_figure(trace: Any, *, block: int = 0) -> Any:
    """Each warp request of the selected block to a global array: 32-byte sectors touched against the ideal."""
    import plotly.graph_objects as go

    b = trace.traced_blocks[max(0, min(block, len(trace.traced_blocks) - 1))] if trace.traced_blocks else (0, 0, 0)
    glob = [n for n in trace.names if trace.arrays[n].space == "global"]
    reqs = trace.requests.of(block=b, arrays=glob)
    reqs.sort(key=lambda r: (r.warp, trace.names.index(r.array), r.line, r.seq, r.kind))
    shown = reqs[:MAX_REQUESTS_DRAWN]
    labels = [f"w{r.warp} {r.array} {r.kind} line {r.line}" + (f" #{r.seq}" if r.seq else "") for r in shown]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=labels,
            y=[r.sectors for r in shown],
            name="sectors touched",
            marker_color=["crimson" if r.sectors > r.ideal else "steelblue" for r in shown],
            text=[f"{r.lanes} lanes" for r in shown],
            hovertemplate="%{x}: %{y} sectors, %{text}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=[r.ideal for r in shown],
            mode="markers",
            name="ideal",
            marker=dict(symbol="line-ew-open", size=18, color="black"),
        )
    )
    more = f" (first {len(shown)} of {len(reqs)} requests)" if len(reqs) > len(shown) else ""
    means = ", ".join(
        f"{n} {trace.sectors_per_request(n):g}/{trace.ideal_sectors_per_request(n):g}"
        for n in trace.names
        if trace.arrays[n].space == "global"
    )
    fig.update_layout(
        title=f"sectors per warp request in block {b}{more}; whole trace (measured/ideal): {means or '—'} ({_sim_note(trace)})",
        yaxis_title="32-byte sectors",
        height=360,
        margin=dict(l=60, r=20, t=60, b=90),
        barmode="overlay",
    )
    return fig


def banks_figure(trace: Any, *, block: int = 0, thread: int = 0) -> Any:
    """The shared-memory requests of the selected warp: distinct 4-byte words each request reads in each of the
    32 banks (more than one word in a bank = a conflict; the worst bank gives the n of an n-way conflict).

    The picture uses the 4-byte bank model (:data:`BANK_MODEL`) and says so under its title; where a shared array
    has 8-byte elements it also says that a contiguous float64 access is 2-way here and conflict-free in Nsight
    Compute's two-phase count."""
    import plotly.graph_objects as go

    b = trace.traced_blocks[max(0, min(block, len(trace.traced_blocks) - 1))] if trace.traced_blocks else (0, 0, 0)
    warp = thread // 32
    shared = [n for n in trace.names if trace.arrays[n].space == "shared"]
    c = trace.columns
    rows, labels = [], []
    for r in sorted(
        trace.requests.of(block=b, warp=warp, arrays=shared),
        key=lambda r: (r.array, r.line, r.seq, r.kind),
    )[:MAX_REQUESTS_DRAWN]:
        m = trace.select(r.array, block=b, warp=warp, kind=r.kind) & (c["instance"] == r.seq) & (c["site"] == r.site)
        size = trace.arrays[r.array].itemsize
        words: dict[int, set[int]] = {}
        for f in c["flat"][m]:
            w = int(f) * size // 4
            words.setdefault(w % 32, set()).add(w)
        rows.append([len(words.get(k, ())) for k in range(32)])
        labels.append(f"{r.array} {r.kind} line {r.line}" + (f" #{r.seq}" if r.seq else "") + f" ({r.ways}-way)")
    fig = go.Figure()
    if rows:
        fig.add_trace(
            go.Heatmap(
                z=rows,
                x=list(range(32)),
                y=labels,
                colorscale="Reds",
                zmin=0,
                colorbar=dict(title="words"),
                xgap=1,
                ygap=1,
                hovertemplate="bank %{x}, %{y}: %{z} word(s)<extra></extra>",
            )
        )
        worst = max(max(r) for r in rows)
        title = f"shared-memory banks, warp {warp} of block {b}: worst {worst}-way conflict ({_sim_note(trace)})"
    else:
        title = (
            f"no shared-memory requests by warp {warp} of block {b}" if shared else f"{trace.kernel} uses no shared memory"
        ) + f" ({_sim_note(trace)})"
    if shared:
        wide = [n for n in shared if trace.arrays[n].itemsize > 4]
        title += f"<br><sup>{BANK_MODEL}" + (f"; {html.escape(_wide_bank_note(wide))}" if wide else "") + "</sup>"
    fig.update_layout(
        title=title,
        xaxis_title="bank",
        height=min(FIGURE_PX, 160 + 22 * max(1, len(rows))),
        margin=dict(l=200, r=20, t=80 if shared else 60, b=40),
    )
    fig.update_yaxes(autorange="reversed")
    return fig


# ----------------------------------------------------------------------------- text
def score_table(traces: dict[str, Any]) -> str:
    """HTML table: score and summary of one or more traces side by side (columns = traces)."""
    labels = list(traces)
    s = {k: t.summary() for k, t in traces.items()}
    rows: list[tuple[str, list[str]]] = []
    for key in next(iter(s.values()))["score"]:
        rows.append((f"{key} (max per thread)", [str(s[k]["score"][key]) for k in labels]))
    arrays = list(dict.fromkeys(n for v in s.values() for n in v["global_sectors_per_request"]))
    for n in arrays:
        rows.append(
            (
                f"{n}: sectors per warp request (ideal)",
                [
                    f"{s[k]['global_sectors_per_request'][n]:g} ({s[k]['ideal_sectors_per_request'][n]:g})"
                    if n in s[k]["global_sectors_per_request"]
                    else "—"
                    for k in labels
                ],
            )
        )
    shared = list(dict.fromkeys(n for v in s.values() for n in v["shared_max_conflict_ways"]))
    wide = [n for n in shared if any(n in t.arrays and t.arrays[n].itemsize > 4 for t in traces.values())]
    for n in shared:
        rows.append(
            (
                f"{n} (shared): worst bank conflict, 4-byte banks",
                [f"{s[k]['shared_max_conflict_ways'][n]}-way" if n in s[k]["shared_max_conflict_ways"] else "—" for k in labels],
            )
        )
    for key, name in (("races", "races"), ("divergent_barriers", "divergent barriers"), ("errors", "errors")):
        rows.append((name, [str(s[k][key]) for k in labels]))
    cell = "padding:0 10px; line-height:1.25"
    head = "".join(f"<th style='{cell}'>{html.escape(k)}</th>" for k in labels)
    body = "".join(
        f"<tr><td style='{cell}'>{html.escape(name)}</td>"
        + "".join(f"<td style='{cell}; text-align:center'>{html.escape(v)}</td>" for v in vals)
        + "</tr>"
        for name, vals in rows
    )
    table = f"<table style='border-collapse:collapse; font-size:0.95em'><tr><th></th>{head}</tr>{body}</table>"
    if shared:
        note = BANK_MODEL + (f"; {_wide_bank_note(wide)}" if wide else "") + "."
        table += f"<div style='font-size:0.85em; color:#555'>Bank conflicts: {html.escape(note)}</div>"
    return table


def _notes(trace: Any, focus: Any = None, opened: tuple[int, int] | None = None, why: str = "") -> str:
    parts = []
    if focus is not None:
        line = f"<b>The check found</b>: {html.escape(focus.finding)}"
        if opened is not None and trace.traced_blocks:
            b = trace.traced_blocks[opened[0]]
            line += (
                f"<br><b>Opened on</b> block {html.escape(str(tuple(b)))}, threadIdx "
                f"{html.escape(str(trace.thread_index(opened[1])))} (★){html.escape(why)}"
            )
        elif why:
            line += "<br>" + html.escape(why)
        if trace.schedule != "forward":
            line += f" — threads in {html.escape(_schedule_words(trace))}, as in the check"
        parts.append(line)
    parts += [
        f"<b>{html.escape(trace.kernel)}</b>[{html.escape(_dims(trace.grid))}, {html.escape(_dims(trace.block))}]: "
        f"{trace.threads_traced} threads traced in {html.escape(trace.origin)} — which elements each thread touched, "
        "not how fast a GPU runs it."
    ]
    if trace.sampled:
        parts.append(
            f"<b>Sampled</b>: the launch has {trace.total_blocks} blocks; {len(trace.traced_blocks)} of them "
            "(evenly spaced, the first and the last included) ran and are drawn."
        )
    for r in trace.races[:3]:
        parts.append("<span style='color:crimson'>race</span>: " + html.escape(r.message()))
    if len(trace.races) > 3:
        parts.append(f"... and {len(trace.races) - 3} more race(s), marked × in the grid of threads.")
    for d in trace.divergent[:2]:
        parts.append("<span style='color:crimson'>divergent barrier</span>: " + html.escape(d.message))
    for e in trace.errors[:2]:
        parts.append("<span style='color:crimson'>error</span>: " + html.escape(e))
    for f in trace.faults[:2]:
        parts.append(
            f"thread {html.escape(str(f.thread))} of block {html.escape(str(f.block))} raised (◆): that block "
            "stopped there, so its threads that had not run yet drew no accesses — not a second bug"
        )
        if getattr(f, "out_of_bounds", False):
            verb = {"read": "read", "write": "write", "atomic": "update atomically"}[f.kind]
            parts[-1] += (
                f"; it tried to {verb} <span style='color:crimson'>{html.escape(out_of_bounds_words(trace, f))}"
                "</span>, drawn outlined in red where that element would be"
            )
    if trace.uninitialised is not None:
        u = trace.uninitialised
        name = u.array[len("shared array `") : -1] if u.array.startswith("shared array `") else u.array
        parts.append(
            f"uninitialised read: {html.escape(name)}[{html.escape(_fmt_index(u.index))}] by thread "
            f"{html.escape(str(u.thread))} of block {html.escape(str(u.block))}"
        )
    return "<br>".join(parts)


def _schedule_words(trace: Any) -> str:
    """How the traced threads were ordered (``schedule 'shuffle', seed 12``)."""
    from ..sim.engine import describe_schedule

    return describe_schedule(trace.schedule, trace.seed)


# ----------------------------------------------------------------------------- widgets
def _empty(fig: Any) -> bool:
    """True for a figure with nothing drawn in it: no trace, or traces without a single point."""

    def points(t: Any) -> int:
        return max((len(v) for v in (getattr(t, k, None) for k in ("x", "y", "z")) if v is not None), default=0)

    return all(points(t) == 0 for t in fig.data)


def _put(out: Any, fig: Any) -> None:
    """A plotly figure into an Output widget as display data (renders in Jupyter, builds without a kernel).

    A figure with nothing drawn (a kernel without shared memory has no bank map) shows as one line of text, its
    title, instead of an empty chart taking a figure's space."""
    import json

    if _empty(fig):
        line = (fig.layout.title.text or "nothing to draw").split("<br>")[0]
        out.outputs = (
            {
                "output_type": "display_data",
                "metadata": {},
                "data": {
                    "text/html": f"<div class='labkit-trace-empty' style='color:#555'>{html.escape(line)}</div>",
                    "text/plain": line,
                },
            },
        )
        return
    out.outputs = (
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                "application/vnd.plotly.v1+json": json.loads(fig.to_json()),
                "text/plain": f"<plotly figure: {fig.layout.title.text}>",
            },
        },
    )


def _natural_thread(trace: Any, index: Sequence[int]) -> tuple[int, int] | None:
    """(traced block, thread) whose global index is ``index`` (x the last axis of a 2-D element): in a kernel with
    one thread per element, the thread that should have written it; None when that thread was not traced."""
    idx = tuple(int(i) for i in index)
    gx = (idx[0],) if len(idx) == 1 else ((idx[1], idx[0]) if len(idx) == 2 else None)
    if gx is None:
        return None
    blk = tuple(g // b for g, b in zip(gx, trace.block)) + (0,) * (3 - len(gx))
    thr = tuple(g % b for g, b in zip(gx, trace.block)) + (0,) * (3 - len(gx))
    order = {tuple(b): k for k, b in enumerate(trace.traced_blocks)}
    if blk not in order or any(t >= b for t, b in zip(thr, trace.block)):
        return None
    return order[blk], trace._thread_linear(thr)


def _accesses(trace: Any) -> np.ndarray:
    """Accesses per (traced block, thread), all arrays together."""
    counts = trace.counts()
    if not counts:
        return np.zeros((max(1, len(trace.traced_blocks)), trace.threads_per_block), dtype=np.int64)
    return sum(counts.values())


def _busy_near(trace: Any, block: int, thread: int) -> tuple[int, int] | None:
    """The traced thread nearest to (``block``, ``thread``) that made an access (the same block first, by thread
    index; then the nearest block), or None when no thread made one."""
    made = _accesses(trace)
    if made[block, thread]:
        return block, thread
    order = sorted(range(made.shape[0]), key=lambda k: (abs(k - block), k))
    for k in order:
        busy = np.flatnonzero(made[k])
        if busy.size:
            return k, int(busy[np.argmin(np.abs(busy - thread))])
    return None


def _focus_selection(trace: Any, focus: Any) -> tuple[tuple[int, int] | None, str]:
    """Where the picture of a failed check opens, and why there (for the header); never a thread that made no
    access at all, whose panels would be empty."""
    found = trace.locate(focus)
    if found is not None:
        if focus.block is not None and focus.thread is not None:
            return found, ": the thread the check names"
        return found, f": the last thread that wrote {focus.array}[{_fmt_index(focus.index)}]"
    if focus.index is not None:
        guess = _natural_thread(trace, focus.index)
        what = f"{focus.array}[{_fmt_index(focus.index)}]" if focus.array else f"element {_fmt_index(focus.index)}"
        if guess is not None:
            busy = _busy_near(trace, *guess)
            if busy == guess:
                return guess, (
                    f": no thread wrote {what}; this is the thread whose global index matches it, the one that "
                    "writes it in a kernel with one thread per element"
                )
            matching = f"thread {trace.thread_index(guess[1])} of block {trace.traced_blocks[guess[0]]}"
            if busy is None:
                return guess, f": no thread wrote {what}, and no thread made any access"
            return busy, (
                f": no thread wrote {what}. {matching}, whose global index matches it, made no access at all (its "
                "index fails the kernel's bounds test: compare the index formula with the array's shape; the threads "
                "tab shows which threads worked); this is the nearest thread that did"
            )
        return None, f"No traced thread wrote {what}."
    return None, ""


def _default_selection(trace: Any) -> tuple[int, int]:
    order = {tuple(b): k for k, b in enumerate(trace.traced_blocks)}
    if trace.races:
        r = trace.races[0]
        return order.get(tuple(r.block), 0), trace._thread_linear(r.second_thread)
    faults = [f for f in trace.faults if tuple(f.block) in order]
    if faults:  # the thread that raised (an index out of bounds: the picture draws the element it tried to touch)
        return order[tuple(faults[0].block)], trace._thread_linear(faults[0].thread)
    if trace.divergent:
        return order.get(tuple(trace.divergent[0].block), 0), 0
    return _busy_near(trace, 0, 0) or (0, 0)


def trace_view(
    trace: Any,
    *,
    block: int | None = None,
    thread: int | None = None,
    scope: str = "thread",
    table: bool = True,
    focus: Any = None,
) -> Any:
    """The picture of a :class:`~labkit.sim.trace.Trace` with controls (an ipywidgets VBox, builds headless).

    ``table=False`` leaves out the score table (:func:`show` puts one table above two traces). ``focus`` (a
    :class:`~labkit.sim.trace.Focus` from a failed check) opens the picture on the thread it is about, marks that
    thread and the element the check named with ★, and says in the header what the check found.
    ``box.figures`` holds the current plotly figures (``threads``, ``elements``, ``coalescing``, ``banks``);
    ``box.controls`` the scope buttons and the block and thread selectors."""
    import ipywidgets as W

    if scope not in ("thread", "warp", "block"):
        raise LabkitError(f"scope must be 'thread', 'warp' or 'block', got {scope!r}.")
    b0, t0 = _default_selection(trace)
    opened, why = _focus_selection(trace, focus) if focus is not None else (None, "")
    if opened is not None:
        b0, t0 = opened
    b0 = b0 if block is None else block
    t0 = t0 if thread is None else thread
    nb = max(1, len(trace.traced_blocks))
    if not 0 <= b0 < nb or not 0 <= t0 < trace.threads_per_block:
        raise LabkitError(f"block must be 0..{nb - 1} (a traced block) and thread 0..{trace.threads_per_block - 1}.")
    scope_w = W.ToggleButtons(options=["thread", "warp", "block"], value=scope, description="show")
    block_w = W.Dropdown(
        options=[(f"block {b}", k) for k, b in enumerate(trace.traced_blocks)] or [("block (0, 0, 0)", 0)],
        value=b0,
        description="block",
    )
    block_w.disabled = len(trace.traced_blocks) <= 1  # nothing to choose
    thread_w = W.IntSlider(
        value=t0, min=0, max=trace.threads_per_block - 1, description="thread", disabled=trace.threads_per_block <= 1
    )
    where = W.HTML()
    outs = {k: W.Output() for k in ("threads", "elements", "coalescing", "banks")}
    header = W.HTML(_notes(trace, focus, opened, why))
    # one figure at a time, in tabs, so that the picture fits one screen (browser review 4, item 9); it opens on the
    # elements of the chosen thread, or on the threads when that thread made no access (nothing else did either)
    scores = [W.HTML(score_table({trace.kernel: trace}))] if table else []  # (show() puts one table above two traces)
    tabs = W.Tab(children=[outs["elements"], outs["threads"], outs["coalescing"], outs["banks"], *scores])
    tabs.titles = ("elements", "threads", "coalescing", "bank conflicts", "scores")[: len(tabs.children)]
    tabs.selected_index = 0 if _accesses(trace)[min(b0, nb - 1), t0] or scope != "thread" else 1
    box = W.VBox([header, W.HBox([scope_w, block_w]), W.HBox([thread_w, where]), tabs])
    box.outputs = outs
    box.tabs = tabs
    box.scores = scores[0] if scores else None
    box.trace = trace
    box.figures = {}
    box.controls = {"scope": scope_w, "block": block_w, "thread": thread_w}
    box.focus = focus
    marked_element = (focus.array, tuple(focus.index)) if focus is not None and focus.array and focus.index else None

    last_thread = [t0]  # the thread the slider picks in "thread" scope, kept while it picks a warp or nothing
    busy = [False]

    def on_scope(change: Any = None) -> None:
        """In "warp" scope the slider picks a warp (0..warps-1), in "block" scope it picks nothing (browser review 3,
        item 10: it kept picking a thread, so typing 5 stayed on warp 0)."""
        s, nw = scope_w.value, (trace.threads_per_block + 31) // 32
        busy[0] = True
        try:
            if change is not None and change["old"] == "thread":
                last_thread[0] = thread_w.value
            if s == "warp":
                thread_w.description, thread_w.max = "warp", max(0, nw - 1)
                thread_w.value = last_thread[0] // 32
                thread_w.disabled = nw <= 1
            else:
                thread_w.description, thread_w.max = "thread", trace.threads_per_block - 1
                thread_w.value = last_thread[0]
                thread_w.disabled = s == "block" or trace.threads_per_block <= 1
            # a slider with nothing to pick (the whole block, or the only warp) is hidden, not left to be dragged
            thread_w.layout.display = "none" if s == "block" or (s == "warp" and nw <= 1) else None
        finally:
            busy[0] = False

    def update(change: Any = None) -> None:
        if busy[0]:
            return
        if change is not None and change.get("owner") is scope_w:
            on_scope(change)
        k, s = block_w.value, scope_w.value
        t = thread_w.value * 32 if s == "warp" else thread_w.value
        if s == "thread":
            last_thread[0] = t
        shown = trace.traced_blocks[k] if 0 <= k < len(trace.traced_blocks) else (0, 0, 0)
        where.value = f"block {shown}, threadIdx {trace.thread_index(t)}, warp {t // 32}, lane {t % 32}"
        figs = {
            "threads": threads_figure(trace, block=k, thread=t, scope=s, marked=opened),
            "elements": elements_figure(trace, block=k, thread=t, scope=s, marked=marked_element),
            "coalescing": coalescing_figure(trace, block=k),
            "banks": banks_figure(trace, block=k, thread=t),
        }
        for name, fig in figs.items():
            _put(outs[name], fig)
        box.figures = figs

    for w in (scope_w, block_w, thread_w):
        w.observe(update, names="value")
    on_scope()
    update()
    return box


def _case_args(args: Sequence[Any], grid: Any, block: Any, names: Sequence[str] | None) -> tuple[Any, Any, list, Any]:
    """``show(kernel, case)`` with a case object (grid, block, args, names) from the check layer, or plain args."""
    if len(args) == 1 and all(hasattr(args[0], a) for a in ("grid", "block", "args")):
        case = args[0]
        return case.grid, case.block, list(case.args), names or getattr(case, "names", None)
    if grid is None or block is None:
        raise LabkitError(
            "labkit.show needs the launch configuration: labkit.show(kernel, *args, grid=..., block=...).",
            fix="Pass grid= and block= as you would write kernel[grid, block](*args).",
        )
    return grid, block, list(args), names


def _same_kernel(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are one kernel (the same object or the same compiled function)."""
    code_a = getattr(getattr(a, "py_func", a), "__code__", None)
    return a is b or (code_a is not None and code_a is getattr(getattr(b, "py_func", b), "__code__", None))


@explorer
def show(
    kernel: Any,
    *args: Any,
    grid: Any = None,
    block: Any = None,
    reference: Any = None,
    names: Sequence[str] | None = None,
    max_threads: int | None = None,
    labels: tuple[str, str] | None = None,
) -> Any:
    """Trace ``kernel[grid, block](*args)`` in the simulator and draw what every thread read and wrote.

    With ``reference=`` (the exercise's reference kernel) both are traced on copies of the same input and shown
    with their scores side by side, then one tab each (``labels`` names the two; default "your kernel" and
    "reference"). ``show(kernel, case)`` takes the launch from a case object (``grid``, ``block``, ``args``,
    ``names``), as a failed check offers: then the threads run in the check's order (its schedule and seed), its
    output starts poisoned as the check's did, and the picture opens on the thread and element the check's message
    is about (see :func:`trace_view`). Returns an ipywidgets box (the last expression of a cell displays it).
    The caller's arrays are unchanged."""
    import ipywidgets as W

    from ..sim.trace import MAX_THREADS, trace

    grid, block, call_args, names = _case_args(args, grid, block, names)
    limit = max_threads or MAX_THREADS
    case = args[0] if len(args) == 1 and hasattr(args[0], "args") else None
    focus = getattr(case, "focus", None)
    replay = dict(
        schedule=getattr(case, "schedule", "forward"),
        seed=getattr(case, "seed", None),
        outputs=tuple(getattr(case, "outputs", ())),
        include_blocks=[focus.block] if focus is not None and focus.block is not None else [],
    )
    mine = trace(kernel, grid, block, *call_args, names=names, max_threads=limit, **replay)
    if reference is None:
        return trace_view(mine, focus=focus)
    if _same_kernel(kernel, reference):  # solved_or_reference gave the reference: the learner's kernel is not there yet
        note = W.HTML(
            f"<b>The reference kernel ({html.escape(mine.kernel)})</b>: your own kernel appears here beside "
            "it once its check has passed."
        )
        box = W.VBox([note, trace_view(mine)])
        box.trace = mine
        return box
    ref = trace(reference, grid, block, *call_args, names=names, max_threads=limit, **replay)
    yours, theirs = labels or (f"your kernel ({mine.kernel})", f"reference ({ref.kernel})")
    if yours == theirs:
        raise LabkitError("the two labels must differ.")
    table = W.HTML(
        f"<b>{html.escape(yours)} beside {html.escape(theirs)}, on the same input</b> (traced in the "
        "simulator; the score is the most reads and writes one thread makes, lower is better for the same "
        "result):<br>" + score_table({yours: mine, theirs: ref})
    )
    tabs = W.Tab(children=[trace_view(mine, table=False, focus=focus), trace_view(ref, table=False)])
    short = labels or ("your kernel", "reference")  # tab titles are cut at about 20 characters: the table names both
    for k, title in enumerate(short):
        tabs.set_title(k, title if len(title) <= 20 else title[:19] + "…")
    box = W.VBox([table, tabs])
    box.traces = {"yours": mine, "reference": ref}
    return box
