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

from .. import precision as P
from ..figstyle import log_axis
from ._reopen import explorer

__all__ = ["bit_explorer", "bit_fields_html", "bit_table_html", "error_vs_k_figure", "range_chart"]

DEFAULT_FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
_COLOURS = {"sign": "#c0392b", "exponent": "#2471a3", "mantissa": "#1e8449"}


def _span(text: str, part: str) -> str:
    return f'<span style="color:{_COLOURS[part]};font-family:monospace">{html.escape(text)}</span>'


def bit_fields_html(b: P.BitFields) -> str:
    """One format's bit fields as coloured HTML (sign red, exponent blue, mantissa green)."""
    if b.info.kind == "int":
        raw = format(b.raw, "08b")
        return _span(raw[0], "sign") + _span(raw[1:], "mantissa")
    return " ".join([_span(b.sign_bits, "sign"), _span(b.exponent_bits, "exponent"), _span(b.mantissa_bits, "mantissa")])


def _fmt_err(x: float) -> str:
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "∞"
    return f"{x:.3g}"


def bit_table_html(x: float, formats: Iterable[str] = DEFAULT_FORMATS) -> str:
    """An HTML table of ``x`` in each format: bits, kind, stored value, absolute and relative error."""
    rows = []
    for name in formats:
        b = P.bits(x, name)
        rows.append(
            "<tr>"
            f"<td><b>{html.escape(b.fmt)}</b></td><td>{html.escape(b.info.layout)}</td><td>{bit_fields_html(b)}</td>"
            f"<td>{html.escape(b.kind)}</td><td style='font-family:monospace'>{b.value!r}</td>"
            f"<td>{_fmt_err(b.error)}</td><td>{_fmt_err(b.relative_error)}</td>"
            "</tr>"
        )
    head = ("<tr><th>format</th><th>layout</th><th>sign exponent mantissa</th><th>kind</th><th>stored value</th>"
            "<th>error</th><th>relative error</th></tr>")
    return (f"<p>x = {x!r}</p><table style='border-collapse:collapse'>{head}{''.join(rows)}</table>"
            f"<p style='font-size:smaller'>{_span('sign', 'sign')} · {_span('exponent', 'exponent')} · "
            f"{_span('mantissa', 'mantissa')}; values rounded to nearest, ties to even (TF32 from the FP32 value).</p>")


@explorer
def bit_explorer(value: float | str = 0.1, formats: Sequence[str] = DEFAULT_FORMATS) -> Any:
    """A text box for a number and a table of its bit fields in each format, updated as you type.

    Accepts anything ``float()`` reads (``1e-8``, ``inf``, ``nan``). Returns an ``ipywidgets.VBox``.
    """
    import ipywidgets as w

    names = [P.normalize_name(f) for f in formats]
    box = w.Text(value=str(value), description="number", continuous_update=False,
                 layout=w.Layout(width="320px"))
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

    names = [P.normalize_name(f) for f in formats]
    infos = [P.format_info(n) for n in names]
    lo_sub = [math.log2(i.min_subnormal) for i in infos]
    lo_norm = [math.log2(i.min_normal) for i in infos]
    hi = [math.log2(i.max_normal) for i in infos]
    fig = go.Figure()
    fig.add_bar(y=names, x=[n - s for s, n in zip(lo_sub, lo_norm)], base=lo_sub, orientation="h", name="subnormal",
                marker_color="#aed6f1", hovertemplate="%{y}: 2^%{base:.0f} .. 2^%{x:.0f}<extra>subnormal</extra>")
    fig.add_bar(y=names, x=[h - n for n, h in zip(lo_norm, hi)], base=lo_norm, orientation="h", name="normal",
                marker_color="#2471a3", hovertemplate="%{y}<extra>normal</extra>")
    fig.update_layout(barmode="overlay", title="Range of each format (log2 of the magnitude)",
                      xaxis_title="log2 |x|", height=320, margin=dict(l=80, r=20, t=50, b=40))
    return fig


def error_vs_k_figure(ks: Sequence[int], curves: dict[str, Sequence[float]], *, title: str | None = None) -> Any:
    """plotly log-log chart: one line per label in ``curves`` (relative error for each K).

    A curve accumulating in its own format (``"FP16, FP16 acc"``, ``"... same"``) is dotted. A curve within 5% of
    an earlier one (TF32 and FP16 inputs both keep 10 mantissa bits, so their errors nearly agree) would hide under
    it: it is drawn dashed with open markers and its legend entry says which curve it nearly equals."""
    import plotly.graph_objects as go

    fig = go.Figure()
    drawn: dict[str, list[float]] = {}
    values: list[float] = []
    for label, errs in curves.items():
        ys = [max(float(e), 1e-17) for e in errs]
        values += ys
        twin = next((other for other, prev in drawn.items()  # within 5%: on a log axis one line covers the other
                     if len(prev) == len(ys) and all(math.isclose(a, b, rel_tol=0.05) for a, b in zip(prev, ys))), None)
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
    fig.update_layout(title=title or "GEMM error against K (CPU emulation)",
                      xaxis=log_axis(ks, title="K (length of each dot product)", tickmode="array", tickvals=list(ks),
                                     ticktext=[str(k) for k in ks]),
                      yaxis=log_axis(values, title="max |C − C_fp64| / max |C_fp64|", exponentformat="power"),
                      height=440, margin=dict(l=70, r=20, t=50, b=50))
    return fig
