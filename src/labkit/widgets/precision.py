"""Explorers for number formats: bit fields of a number in every format, format ranges, error curves.

- :func:`bit_explorer`: type a number, see its sign, exponent and mantissa in each format, the rounded
  value and the error (ipywidgets; builds without a browser).
- :func:`bit_table_html`: the same table as HTML, for a static notebook or a test.
- :func:`range_chart`: plotly chart of each format's range (smallest subnormal, smallest normal, largest).
- :func:`error_vs_k_figure`: plotly log-log chart of GEMM error against K.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Iterable, Sequence

from labkit.numerics import precision as P
from labkit.numerics.precision import _COLOURS, _span, bit_fields_html  # noqa: F401  (re-exported: the widget's names)

from ..errors import LabkitError
from ..figstyle import log_axis
from ..validate import describe, require_int, require_number, require_sequence, require_str
from ._names import one_or_more_names
from ._reopen import explorer

__all__ = ["bit_explorer", "bit_fields_html", "bit_table_html", "error_vs_k_figure", "range_chart"]

DEFAULT_FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")


def _format_names(formats: Any) -> list[str]:
    """``formats`` (one name or a list of them) as canonical format names; at least one."""
    names = one_or_more_names(
        formats,
        "formats",
        what="a list of format names",
        fix="e.g. formats=['fp32', 'bf16']; labkit.precision.formats() lists them.",
    )
    return [P.normalize_name(f) for f in names]


def _error_value(e: Any, name: str) -> float:
    """A relative error for a chart: a number ≥ 0, infinity (an overflow) or NaN (drawn as a gap)."""
    return require_number(e, name, min=0, finite=False, nan=True, fix="A relative error is a number ≥ 0 (inf for an overflow).")


def _fmt_err(x: float) -> str:
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "∞"
    return f"{x:.3g}"


def bit_table_html(x: float, formats: Iterable[str] = DEFAULT_FORMATS) -> str:
    """An HTML table of ``x`` in each format: bits, kind, stored value, absolute and relative error."""
    x = require_number(x, "x", finite=False, nan=True, fix="One number, e.g. 0.1, 65520, 1e-8, float('inf') or float('nan').")
    rows = []
    for name in _format_names(formats):
        b = P.bits(x, name)
        rows.append(
            "<tr>"
            f"<td><b>{html.escape(b.fmt)}</b></td><td>{html.escape(b.info.layout)}</td><td>{bit_fields_html(b)}</td>"
            f"<td>{html.escape(b.kind)}</td><td style='font-family:monospace'>{b.value!r}</td>"
            f"<td>{_fmt_err(b.error)}</td><td>{_fmt_err(b.relative_error)}</td>"
            "</tr>"
        )
    head = (
        "<tr><th>format</th><th>layout</th><th>sign exponent mantissa</th><th>kind</th><th>stored value</th>"
        "<th>error</th><th>relative error</th></tr>"
    )
    return (
        f"<p>x = {x!r}</p><table style='border-collapse:collapse'>{head}{''.join(rows)}</table>"
        f"<p style='font-size:smaller'>{_span('sign', 'sign')} · {_span('exponent', 'exponent')} · "
        f"{_span('mantissa', 'mantissa')}; values rounded to nearest, ties to even (TF32 from the FP32 value).</p>"
    )


@explorer
def bit_explorer(value: float | str = 0.1, formats: Sequence[str] = DEFAULT_FORMATS) -> Any:
    """A text box for a number and a table of its bit fields in each format, updated as you type.

    Accepts anything ``float()`` reads (``1e-8``, ``inf``, ``nan``). Returns an ``ipywidgets.VBox``.
    """
    import ipywidgets as w

    names = _format_names(formats)
    if isinstance(value, str):
        value = require_str(value, "value", empty=True)
    else:
        value = require_number(value, "value", finite=False, nan=True, fix="A number, or text such as '1e-8' or 'inf'.")
    box = w.Text(value=str(value), description="number", continuous_update=False, layout=w.Layout(width="320px"))
    out = w.HTML()

    def update(change: Any = None) -> None:
        text = box.value.strip()
        try:
            x = float(text)
        except ValueError:
            out.value = f"<p style='color:#c0392b'>{html.escape(text)!s} is not a number (try 0.1, 65520, 1e-8, inf).</p>"
            return
        out.value = bit_table_html(x, names)

    box.observe(update, names="value")
    update()
    return w.VBox([box, out])


def range_chart(formats: Sequence[str] = ("fp32", "tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3")) -> Any:
    """plotly bar chart of each format's range on a log2 axis: subnormals (light) and normals (dark)."""
    import plotly.graph_objects as go

    names = _format_names(formats)
    infos = [P.format_info(n) for n in names]
    lo_sub = [math.log2(i.min_subnormal) for i in infos]
    lo_norm = [math.log2(i.min_normal) for i in infos]
    hi = [math.log2(i.max_normal) for i in infos]
    fig = go.Figure()
    bands = (  # (name, from, to, colour, hover)
        ("subnormal", lo_sub, lo_norm, "#aed6f1", "%{y}: 2^%{base:.0f} .. 2^%{x:.0f}<extra>subnormal</extra>"),
        ("normal", lo_norm, hi, "#2471a3", "%{y}<extra>normal</extra>"),
    )
    for band, lo, top, colour, hover in bands:
        fig.add_bar(
            y=names,
            x=[t - b for b, t in zip(lo, top)],
            base=lo,
            orientation="h",
            name=band,
            marker_color=colour,
            hovertemplate=hover,
        )
    fig.update_layout(
        barmode="overlay",
        title="Range of each format (log2 of the magnitude)",
        xaxis_title="log2 |x|",
        height=320,
        margin=dict(l=80, r=20, t=50, b=40),
    )
    return fig


def error_vs_k_figure(ks: Sequence[int], curves: dict[str, Sequence[float]], *, title: str | None = None) -> Any:
    """plotly log-log chart: one line per label in ``curves`` (relative error for each K).

    A curve accumulating in its own format (``"FP16, FP16 acc"``, ``"... same"``) is dotted. A curve within 5% of
    an earlier one (TF32 and FP16 inputs both keep 10 mantissa bits, so their errors nearly agree) would hide under
    it: it is drawn dashed with open markers and its legend entry says which curve it nearly equals."""
    import plotly.graph_objects as go

    ks = require_sequence(
        ks, "ks", min_len=1, what="a list of K values (positive whole numbers)", item=lambda k, n: require_int(k, n, min=1)
    )
    if not isinstance(curves, dict) or not curves:
        raise LabkitError(
            f"curves must be a dict of label -> one relative error per K, got {describe(curves)}.",
            fix="e.g. curves={'FP16, FP32 acc': [1e-4, 2e-4, 4e-4]} for ks=[64, 256, 1024].",
        )
    for label, errs in curves.items():
        require_str(str(label), "a curve's label")
        errs = require_sequence(
            errs,
            f"curves[{label!r}]",
            min_len=len(ks),
            max_len=len(ks),
            what=f"a list of {len(ks)} relative errors (one per K)",
            item=_error_value,
        )
    if title is not None:
        title = require_str(title, "title", empty=True)
    fig = go.Figure()
    drawn: dict[str, list[float]] = {}
    values: list[float] = []
    for label, errs in curves.items():
        ys = [max(float(e), 1e-17) for e in errs]
        values += ys
        twin = next(
            (
                other
                for other, prev in drawn.items()  # within 5%: on a log axis one line covers the other
                if len(prev) == len(ys) and all(math.isclose(a, b, rel_tol=0.05) for a, b in zip(prev, ys))
            ),
            None,
        )
        own_acc = "same" in label or re.fullmatch(r"\s*(.+?),\s*\1 acc\s*", label, flags=re.IGNORECASE) is not None
        line: dict[str, Any] = {"dash": "dot" if own_acc else None}
        marker: dict[str, Any] = {}
        name = label
        if twin is not None:
            line.update(dash="dash", width=3)
            marker.update(symbol="circle-open", size=11, line={"width": 2})
            name = f"{label} (≈ {twin}: drawn over it)"
        fig.add_scatter(x=list(ks), y=ys, mode="lines+markers", name=name, line=line, marker=marker)
        drawn[label] = ys
    fig.update_layout(
        title=title or "GEMM error against K (CPU emulation)",
        xaxis=log_axis(
            ks, title="K (length of each dot product)", tickmode="array", tickvals=list(ks), ticktext=[str(k) for k in ks]
        ),
        yaxis=log_axis(values, title="max |C − C_fp64| / max |C_fp64|", exponentformat="power"),
        height=440,
        margin=dict(l=70, r=20, t=50, b=50),
    )
    return fig
