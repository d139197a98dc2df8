"""Explorers for lab 01: DGX wiring, DGX generations side by side, and the roofline.

- :func:`system_explorer`: pick a system and two GPUs; see the route, the links and the bandwidth on the drawing.
- :func:`dgx_comparison`: DGX generations side by side (table with sources, and a bar chart of one metric).
- :func:`roofline_explorer`: pick a GPU and a precision, slide the arithmetic intensity.
- :func:`comparison_html`, :func:`evolution_figure`: the same content without widgets (static notebooks, tests).

Every figure shown comes from :mod:`labkit.hw` or is computed from it; the tables name the sources.
"""

from __future__ import annotations

import html
import math
from typing import Any, Callable, Sequence

from labkit import hw
from labkit.hw import roofline as rl
from labkit.hw import topology

from ..errors import LabkitError
from ..figstyle import log_axis
from ..validate import require_bool, require_choice, require_int, require_number, require_sequence
from ._names import one_or_more_names
from ._output import figure_outputs, guarded, message_outputs
from ._reopen import explorer

__all__ = [
    "DGX_GENERATIONS",
    "METRICS",
    "comparison_html",
    "dgx_comparison",
    "evolution_figure",
    "metric",
    "roofline_explorer",
    "system_explorer",
]

DGX_GENERATIONS = ("DGX-1 (P100)", "DGX-1 (V100)", "DGX-2", "DGX A100", "DGX H100", "DGX H200", "DGX B200", "DGX B300")


def _computed(value: float, unit: str, how: str) -> hw.Figure:
    return hw.Figure(round(value, 6), unit, f"computed: {how}")


def _all_gpus_peak(precision: str) -> Callable[[hw.System], hw.Figure | None]:
    def get(s: hw.System) -> hw.Figure | None:
        g = s.gpu_model
        if not g.has(precision):
            return None
        peak = g.peak(precision)
        n = s.gpu_count.value
        return _computed(n * peak.value / 1000, "PFLOP/s", f"{n:g} x {peak.text()} ({peak.source})")

    return get


def _memory_total(s: hw.System) -> hw.Figure:
    if s.gpu_memory_total is not None:
        return s.gpu_memory_total.to("GB")
    g = s.gpu_model
    return _computed(s.gpu_count.value * g.memory_size.value, "GB", f"{s.gpu_count.value:g} x {g.memory_size.text()}")


def _nvlink_total(s: hw.System) -> hw.Figure:
    if s.nvlink_domain_bandwidth is not None:
        return s.nvlink_domain_bandwidth
    g = s.gpu_model
    n = s.gpu_count.value
    return _computed(
        n * g.nvlink_bandwidth.value / 1000, "TB/s", f"{n:g} x {g.nvlink_bandwidth.text()} ({g.nvlink_bandwidth.source})"
    )


#: Metrics for :func:`dgx_comparison`: label -> function of a System returning a Figure (or None where not defined).
METRICS: dict[str, Callable[[hw.System], hw.Figure | None]] = {
    "year": lambda s: s.year,
    "GPUs": lambda s: s.gpu_count,
    "NVSwitch chips": lambda s: s.nvswitch_count,
    "NVLink per GPU (bidirectional)": lambda s: s.gpu_model.nvlink_bandwidth,
    "NVLink, all GPUs (bidirectional)": _nvlink_total,
    "HBM bandwidth per GPU": lambda s: s.gpu_model.memory_bandwidth,
    "GPU memory, all GPUs": _memory_total,
    "headline compute": lambda s: s.headline,
    "FP16 dense peak, all GPUs": _all_gpus_peak("fp16"),
    "FP8 dense peak, all GPUs": _all_gpus_peak("fp8"),
    "FP4 dense peak, all GPUs": _all_gpus_peak("fp4"),
    "FP64 peak, all GPUs": _all_gpus_peak("fp64"),
    "system memory": lambda s: s.system_memory,
    "power": lambda s: s.power.to("kW") if s.power is not None else None,
    "list price": lambda s: s.price,
}


def metric(system: str, label: str) -> hw.Figure | None:
    """One metric of :data:`METRICS` for one system (None where the system does not define it)."""
    return METRICS[_metric_label(label)](hw.system(system))


def _metric_label(label: Any) -> str:
    """``label`` as a key of :data:`METRICS` (case-insensitive), or a LabkitError with the closest names."""
    return require_choice(label, "metric", list(METRICS), fix=f"Use one of: {'; '.join(METRICS)}.")


def _system_names(systems: Any) -> list[str]:
    """``systems`` (one name or a list of them) as the record names of :func:`labkit.hw.system`."""
    names = one_or_more_names(
        systems,
        "systems",
        what="a list of system names",
        fix=f"e.g. {list(DGX_GENERATIONS[-2:])}; labkit.hw.systems() lists them.",
    )
    return [hw.system(n).name for n in names]


def _text(fig: hw.Figure) -> str:
    """A figure as a table or chart shows it: a year is just the year (``2016``, not ``2016 year``)."""
    return f"{fig.value:.0f}" if fig.unit == "year" else fig.text()


def _unit_label(unit: str | None) -> str:
    """The unit for a title or axis: none for a count or a year."""
    return "" if unit in (None, "count", "year") else unit


def _cell(fig: hw.Figure | None, extra: str = "") -> str:
    if fig is None:
        return "<td style='color:#999'>—</td>"
    mark = " *" if fig.unconfirmed else ""
    return f"<td title='{html.escape(fig.source)}'>{html.escape(_text(fig))}{mark}{extra}</td>"


def comparison_html(systems: Sequence[str] = DGX_GENERATIONS, metrics: Sequence[str] | None = None) -> str:
    """An HTML table: one column per system, one row per metric, sources as tooltips and listed below."""
    recs = [hw.system(s) for s in _system_names(systems)]
    if metrics is not None:
        metrics = [
            _metric_label(m)
            for m in require_sequence(
                [metrics] if isinstance(metrics, str) else metrics, "metrics", what="a list of metric names"
            )
        ]
    rows = [
        "<tr><th></th>" + "".join(f"<th>{html.escape(r.name)}</th>" for r in recs) + "</tr>",
        "<tr><td>GPU</td>" + "".join(f"<td>{html.escape(r.gpu)}</td>" for r in recs) + "</tr>",
        "<tr><td>fabric</td>" + "".join(f"<td>{html.escape(r.fabric)}</td>" for r in recs) + "</tr>",
    ]
    sources: dict[str, None] = {}
    for label in metrics or METRICS:
        cells = []
        for r in recs:
            fig = METRICS[label](r)
            extra = f"<br><small>{html.escape(r.headline_what)}</small>" if label == "headline compute" else ""
            cells.append(_cell(fig, extra))
            if fig is not None:
                sources[fig.source] = None
        rows.append(f"<tr><td>{html.escape(label)}</td>{''.join(cells)}</tr>")
    foot = (
        "<p style='font-size:smaller'>Hover a cell for its source. * unconfirmed figure. Sources: "
        + "; ".join(html.escape(s) for s in sources)
        + ".</p>"
    )
    return "<table style='border-collapse:collapse'>" + "".join(rows) + "</table>" + foot


def evolution_figure(label: str = "FP16 dense peak, all GPUs", systems: Sequence[str] = DGX_GENERATIONS, log: bool = True) -> Any:
    """A plotly bar chart of one metric across systems (log scale by default).

    Systems without the metric are left out and named under the chart. Years are always drawn on a linear axis (the
    title says so when ``log`` asked for a log scale). Raises :class:`LabkitError` when none of
    the systems has it, or when their figures are of different kinds (a bandwidth beside compute rates)."""
    import plotly.graph_objects as go

    label = _metric_label(label)
    systems = _system_names(systems)
    log = require_bool(log, "log")
    names, values, texts, hover, missing = [], [], [], [], []
    first: tuple[str, hw.Figure] | None = None
    for s in systems:
        fig = METRICS[label](hw.system(s))
        if fig is None:
            missing.append(s)
            continue
        if first is None:
            first = (s, fig)
        elif fig.unit != first[1].unit:
            try:
                fig = fig.to(first[1].unit)
            except LabkitError:
                what = hw.system(s).headline_what if label == "headline compute" else label
                raise LabkitError(
                    f"{s}'s {label} is {fig.text()} ({what}), which cannot share a chart with {first[0]}'s "
                    f"{first[1].text()}: they are different kinds of figure.",
                    fix=f"Unselect {s} or {first[0]}, or chart another metric; the table below still lists both.",
                ) from None
        names.append(s)
        values.append(fig.value)
        texts.append(_text(fig) + (" *" if fig.unconfirmed else ""))
        hover.append(f"{s}: {_text(fig)} ({fig.source})")
    if first is None:
        raise LabkitError(
            f"labkit has no {label} for {', '.join(systems) or 'these systems'}.",
            fix="Pick other systems or another metric; the table shows — where a figure is missing.",
        )
    unit = _unit_label(first[1].unit)
    linear_years = first[1].unit == "year" and log
    if first[1].unit == "year":
        log = False
    out = go.Figure(
        go.Bar(
            x=names,
            y=values,
            text=texts,
            textposition="outside",
            hovertext=hover,
            hoverinfo="text",
            marker_color="#76b900",
            cliponaxis=False,
        )
    )
    title = f"{label} ({unit})" if unit else label
    if linear_years:
        title += "<br><sup>years on a linear axis: a log scale does not apply to them</sup>"
    if missing:
        title += f"<br><sup>no figure in labkit for: {html.escape(', '.join(missing))}</sup>"
    yaxis: dict[str, Any] = {"type": "linear", "title": unit}
    if log and min(values) > 0:  # bars from the decade below the smallest, so at least two labels show
        yaxis = log_axis(values, title=unit, range=[math.floor(math.log10(min(values))), math.log10(max(values)) + 0.2])
    if first[1].unit == "year":
        yaxis.update(range=[min(values) - 2, max(values) + 1.5], tickformat="d", dtick=1 if max(values) - min(values) < 8 else 2)
    out.update_layout(title=title, template="plotly_white", height=400, yaxis=yaxis, margin={"t": 70})
    return out


_mime = figure_outputs
_message = message_outputs


def _box(children: list, **attrs: Any) -> Any:
    import ipywidgets as W

    box = W.VBox(children)
    for k, v in attrs.items():
        setattr(box, k, v)
    return box


@explorer
def system_explorer(system: str = "DGX-1 (V100)", a: int = 0, b: int = 5) -> Any:
    """Pick a system and two GPUs: the route between them, its links and its bandwidth, drawn on the system.

    Returns a ``VBox``; ``.controls`` holds the widgets, ``.summary`` the HTML text, ``.figure`` the current drawing."""
    import ipywidgets as W

    choices = topology.systems() + ["2x DGX-1 (V100)"]
    start = topology.load(system)
    if start.name not in choices:
        raise LabkitError(
            f"the explorer draws {', '.join(choices)}; {start.name} is not among them.",
            fix="Pick one of those, or draw it yourself with topology.load(...).draw().",
        )
    gpus = start.gpus()
    a, b = (
        require_int(v, n, min=gpus[0], max=gpus[-1], fix=f"{start.name} has GPUs {gpus[0]} to {gpus[-1]}.")
        for v, n in ((a, "a"), (b, "b"))
    )
    sys_w = W.Dropdown(options=choices, value=start.name, description="system")  # one of the choices (checked above)
    a_w = W.Dropdown(options=gpus, value=a, description="GPU a")
    b_w = W.Dropdown(options=gpus, value=b, description="GPU b")
    summary = W.HTML()
    out = W.Output()
    box = _box(
        [W.HBox([sys_w, a_w, b_w]), summary, out],
        controls={"system": sys_w, "a": a_w, "b": b_w},
        summary=summary,
        figure=None,
        topology=start,
    )
    state: dict[str, Any] = {"topo": start, "busy": False}

    @guarded(box, out)
    def render(*_: Any) -> None:
        if state["busy"]:
            return
        t = state["topo"]
        ga, gb = a_w.value, b_w.value
        if ga is None or gb is None:
            return
        if ga == gb:
            summary.value = f"<b>{t.name}</b>: pick two different GPUs."
            box.figure = t.draw()
        else:
            r = t.route(ga, gb)
            bw = r["bandwidth"]
            links = f"{r['links']} NVLink(s), " if r["links"] else ""
            summary.value = (
                f"<b>{t.name}</b>, GPU{ga} → GPU{gb}: {html.escape(r['kind'])} "
                f"(nvidia-smi would show <code>{t.relation(ga, gb)}</code>)<br>"
                f"route: {' → '.join(r['path'])}<br>"
                f"{links}NVLink bandwidth {bw:g} GB/s per direction, {2 * bw:g} GB/s bidirectional"
                + ("" if bw else f" — the GPUs share no NVLink; copies go over {r['kind'].split(': ', 1)[-1]}")
                + " <i>(model)</i>"
            )
            box.figure = t.draw(highlight=r["path"])
        out.outputs = _mime(box.figure)

    @guarded(box, out)
    def on_system(change: dict) -> None:
        t = topology.load(change["new"])
        state["topo"] = box.topology = t
        state["busy"] = True
        try:
            a_w.options, b_w.options = t.gpus(), t.gpus()
            a_w.value, b_w.value = t.gpus()[0], t.gpus()[-1]
        finally:
            state["busy"] = False
        render()

    sys_w.observe(on_system, names="value")
    a_w.observe(render, names="value")
    b_w.observe(render, names="value")
    render()
    return box


@explorer
def dgx_comparison(systems: Sequence[str] = DGX_GENERATIONS, label: str = "FP16 dense peak, all GPUs") -> Any:
    """DGX generations side by side: pick systems and a metric; a table with sources and a bar chart."""
    import ipywidgets as W

    label = _metric_label(label)
    systems = _system_names(systems)
    pick = W.SelectMultiple(options=hw.systems(), value=tuple(dict.fromkeys(systems)), description="systems", rows=8)
    metric_w = W.Dropdown(options=list(METRICS), value=label, description="chart")
    log_w = W.Checkbox(value=True, description="log scale")
    table = W.HTML()
    out = W.Output()
    box = _box(
        [W.HBox([pick, W.VBox([metric_w, log_w])]), out, table],
        controls={"systems": pick, "metric": metric_w, "log": log_w},
        table=table,
        figure=None,
    )

    def render(*_: Any) -> None:
        names = list(pick.value)
        if not names:  # nothing selected: say so, rather than quietly charting a system nobody picked
            box.figure = None
            table.value = ""
            out.outputs = message_outputs(
                LabkitError("no system is selected.", fix="Click a system in the list (Ctrl- or Cmd-click adds more).")
            )
            return
        table.value = comparison_html(names)
        years = metric_w.value == "year"  # a year has no log scale: the box greys out and says so
        log_w.disabled = years
        log_w.description = "log scale (not for years)" if years else "log scale"
        log_w.tooltip = "years are drawn on a linear axis" if years else None
        try:
            box.figure = evolution_figure(metric_w.value, names, log=log_w.value)
        except LabkitError as exc:
            box.figure = None  # the old chart no longer applies: clear it and say why, here rather than in a log
            out.outputs = _message(exc)
            return
        out.outputs = _mime(box.figure)

    for w in (pick, metric_w, log_w):
        w.observe(render, names="value")
    render()
    return box


def _nearest_precision(g: hw.GPU, precision: str) -> str:
    """The precision to show on ``g`` when it lacks ``precision``: the next wider format it has (FP4 -> FP6 -> FP8 ->
    FP16 ...), never a jump from a narrow Tensor Core format to FP64."""
    order = ["fp4", "fp6", "fp8", "fp16", "bf16", "tf32", "fp32", "fp64"]
    start = order.index(precision) if precision in order else 0
    for p in order[start:] + order[:start][::-1]:
        if g.has(p):
            return p
    return g.precisions()[0]


@explorer
def roofline_explorer(gpu: str = "H100", precision: str = "bf16", intensity: float = 10.0) -> Any:
    """Pick a GPU and a precision and slide the arithmetic intensity: the attainable rate and what bounds it."""
    import ipywidgets as W

    start = hw.gpu(gpu)
    precision = hw._normalise_precision(precision)
    intensity = require_number(
        intensity, "intensity", min=0.01, max=10_000, fix="The slider runs from 0.01 to 10000 FLOP/byte, e.g. intensity=10."
    )
    gpu_w = W.Dropdown(options=hw.gpus(), value=start.name, description="GPU")
    first = precision if start.has(precision) else _nearest_precision(start, precision)
    prec_w = W.Dropdown(options=start.precisions(), value=first, description="precision")
    sparse_w = W.Checkbox(value=False, description="2:4 sparsity")
    int_w = W.FloatLogSlider(value=intensity, base=10, min=-2, max=4, step=0.05, description="FLOP/byte", readout_format=".3g")
    summary = W.HTML()
    out = W.Output()
    box = _box(
        [W.HBox([gpu_w, prec_w, sparse_w]), int_w, summary, out],
        controls={"gpu": gpu_w, "precision": prec_w, "sparse": sparse_w, "intensity": int_w},
        summary=summary,
        figure=None,
    )

    busy = [False]
    notes: list[str] = []  # what a change of GPU did to the other controls, said once in the summary
    if first != precision:
        notes.append(
            f"{precision.upper()} does not exist on the {start.name} ({start.undefined.get(precision, 'no figure')}): "
            f"showing {first.upper()} instead."
        )

    @guarded(box, out)
    def render(*_: Any) -> None:
        if busy[0]:
            return
        g = hw.gpu(gpu_w.value)
        entry = g.peaks.get(prec_w.value)
        sparse_w.disabled = entry is None or entry.sparse is None
        if sparse_w.disabled and sparse_w.value:  # a greyed-out box must not stay ticked
            busy[0] = True
            try:
                sparse_w.value = False
            finally:
                busy[0] = False
            notes.append(f"2:4 sparsity is off: the {g.name} has no sparse {prec_w.value.upper()} rate.")
        sparse = sparse_w.value and not sparse_w.disabled
        r = rl.roofline(g.name, prec_w.value, sparse=sparse)
        x = int_w.value
        att = r.attainable(x)
        note = "".join(f"<br><span class='labkit-widget-note' style='color:#a04000'>{html.escape(n)}</span>" for n in notes)
        notes.clear()
        summary.value = (
            note
            + "<br>" * bool(note)
            + (
                f"<b>{g.name}, {r.precision.upper()}{' sparse' if sparse else ''}</b>: at {x:.3g} FLOP/byte the roof is "
                f"<b>{att:.4g} {r.peak.unit}</b> ({att / r.peak.value:.0%} of the {r.peak.text()} peak), "
                f"{r.bound(x)}; ridge point {r.ridge_point:.1f} FLOP/byte "
                f"(peak {html.escape(str(r.peak))} / memory {html.escape(str(r.bandwidth))}) <i>(model)</i>"
            )
        )
        box.figure = rl.roofline_figure(g.name, r.precision, kernels=[("your kernel", x, None)], sparse=sparse)
        out.outputs = _mime(box.figure)

    def on_gpu(change: dict) -> None:
        g = hw.gpu(change["new"])
        keep = prec_w.value if g.has(prec_w.value) else _nearest_precision(g, prec_w.value)
        if keep != prec_w.value:
            notes.append(
                f"{prec_w.value.upper()} does not exist on the {g.name} ({g.undefined.get(prec_w.value, 'no figure')}): "
                f"showing {keep.upper()} instead."
            )
        busy[0] = True
        try:
            prec_w.options = g.precisions()
            prec_w.value = keep
        finally:
            busy[0] = False
        render()

    gpu_w.observe(on_gpu, names="value")
    for w in (prec_w, sparse_w, int_w):
        w.observe(render, names="value")
    render()
    return box
