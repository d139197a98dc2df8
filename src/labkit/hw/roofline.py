"""The roofline model: how fast a kernel can go on a GPU given its arithmetic intensity.

    attainable(I) = min(peak, I x memory bandwidth)      [TFLOP/s]

where the intensity ``I`` is FLOPs per byte moved to or from GPU memory (HBM). Below the ridge point
``peak / bandwidth`` a kernel is memory-bound; above it, compute-bound. Peaks and bandwidths come from
:mod:`labkit.hw` (datasheet figures), so the roofline is a model: it says what the hardware allows,
not what a kernel achieves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from labkit import hw
from labkit.errors import LabkitError
from labkit.figstyle import log_axis
from labkit.validate import describe, require_bool, require_number, require_sequence, require_str


@dataclass(frozen=True)
class Roofline:
    """The roofline of one GPU at one precision. Rates in TFLOP/s (TOPS for int8), bandwidth in GB/s."""

    gpu: str
    precision: str
    sparse: bool
    peak: hw.Figure
    bandwidth: hw.Figure

    @property
    def ridge_point(self) -> float:
        """Intensity (FLOP/byte) where memory bandwidth stops being the limit: peak / bandwidth."""
        return self.peak.value * 1e12 / (self.bandwidth.to("GB/s").value * 1e9)

    def attainable(self, intensity: Any) -> Any:
        """The highest rate (TFLOP/s) a kernel of ``intensity`` FLOP/byte can reach; works on numbers and NumPy arrays."""
        import numpy as np

        try:
            arr = np.asarray(intensity, dtype=float)
        except (TypeError, ValueError):
            arr = np.asarray(np.nan)
        if arr.size == 0 or np.any(~np.isfinite(arr)) or np.any(arr <= 0):
            raise LabkitError(
                f"arithmetic intensity must be a positive number of FLOP per byte, got {intensity!r}.",
                fix="Intensity = FLOPs / bytes moved, e.g. 2 FLOP / 12 bytes for SAXPY in FP32.",
            )
        out = np.minimum(self.peak.value, arr * self.bandwidth.to("GB/s").value / 1e3)
        return float(out) if out.ndim == 0 else out

    def bound(self, intensity: float) -> str:
        """``"memory-bound"`` or ``"compute-bound"`` for a kernel of ``intensity`` FLOP/byte."""
        intensity = require_number(
            intensity,
            "intensity",
            min=0,
            min_open=True,
            fix="Intensity = FLOPs / bytes moved, a positive number, e.g. 2 / 12 for SAXPY in FP32.",
        )
        return "memory-bound" if intensity < self.ridge_point else "compute-bound"

    def __str__(self) -> str:
        sp = " sparse" if self.sparse else ""
        return (
            f"{self.gpu} {self.precision.upper()}{sp}: peak {self.peak}, memory {self.bandwidth}, "
            f"ridge point {self.ridge_point:.1f} FLOP/byte"
        )


def roofline(gpu_name: str, precision: str = "fp32", sparse: bool = False) -> Roofline:
    """The :class:`Roofline` of ``gpu_name`` (any name :func:`labkit.hw.gpu` accepts) at ``precision``."""
    sparse = require_bool(sparse, "sparse", fix="sparse=True gives the 2:4 structured-sparsity peak.")
    if not isinstance(precision, str):
        raise LabkitError(
            f"precision must be a name such as 'fp32' or 'bf16', got {describe(precision)}.",
            fix=f"Use one of: {', '.join(hw.PRECISIONS)}.",
        )
    g = hw.gpu(gpu_name)
    peak = g.peak(precision, sparse=sparse)
    return Roofline(g.name, precision.lower(), sparse, peak, g.memory_bandwidth)


def roofline_figure(
    gpu_name: str,
    precision: str | Sequence[str] = "fp32",
    kernels: Iterable[tuple[str, float, float | None]] = (),
    sparse: bool = False,
    intensity_range: tuple[float, float] = (0.01, 10_000.0),
) -> Any:
    """A log-log plotly figure of the roofline(s) with ``kernels`` placed on it.

    ``kernels`` are ``(name, intensity FLOP/byte, measured TFLOP/s or None)``: a measured kernel is a filled dot,
    an unmeasured one a hollow marker on the roof (the model's bound). ``precision`` may be a list of precisions.
    """
    import numpy as np
    import plotly.graph_objects as go

    precisions = (
        [precision]
        if isinstance(precision, str)
        else require_sequence(
            precision,
            "precision",
            what="a precision name or a list of them",
            min_len=1,
            item=require_str,
            fix="e.g. precision='bf16' or ['fp32', 'bf16'].",
        )
    )
    rng = require_sequence(
        intensity_range,
        "intensity_range",
        what="a pair (low, high) of intensities",
        min_len=2,
        max_len=2,
        item=lambda v, n: require_number(v, n, min=0, min_open=True),
    )
    lo, hi = rng
    if not lo < hi:
        raise LabkitError(f"intensity_range must be (low, high) with 0 < low < high, got {intensity_range!r}.")
    kernels = require_sequence(
        kernels,
        "kernels",
        what="a list of (name, intensity, measured TFLOP/s or None)",
        fix="e.g. kernels=[('saxpy', 2 / 12, None)].",
    )
    xs = np.logspace(np.log10(lo), np.log10(hi), 200)
    fig = go.Figure()
    roofs = [roofline(gpu_name, p, sparse) for p in precisions]
    for r in roofs:
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=r.attainable(xs),
                mode="lines",
                name=f"{r.precision.upper()} roof ({r.peak.text()})",
                hovertemplate="%{x:.3g} FLOP/B → %{y:.4g} " + r.peak.unit + "<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[r.ridge_point],
                y=[r.peak.value],
                mode="markers",
                marker={"symbol": "diamond", "size": 9},
                name=f"ridge {r.ridge_point:.1f} FLOP/B",
                hovertemplate="ridge point %{x:.1f} FLOP/B<extra></extra>",
            )
        )
    main = roofs[0]
    placed: list[tuple[float, float]] = []
    spots = ("top center", "bottom center", "middle right", "middle left", "top right", "bottom right")

    def spot(x: float, y: float) -> str:
        """Where a kernel's label goes: above it, unless labels already sit close by (equal intensities)."""
        near = sum(1 for px, py in placed if abs(np.log10(x / px)) < 0.3 and abs(np.log10(y / py)) < 0.3)
        placed.append((x, y))
        return spots[near % len(spots)]

    for item in kernels:
        try:
            name, intensity, measured = item
        except (TypeError, ValueError):
            raise LabkitError(f"each kernel is (name, intensity, measured_tflops_or_None), got {item!r}.") from None
        name = str(name)
        intensity = require_number(
            intensity,
            f"the intensity of {name!r}",
            min=0,
            min_open=True,
            fix="Intensity = FLOPs / bytes moved, a positive number.",
        )
        if measured is not None:
            measured = require_number(
                measured,
                f"the measured rate of {name!r}",
                min=0,
                min_open=True,
                fix="Give the measured TFLOP/s, or None for a kernel not measured.",
            )
        bound = main.attainable(intensity)
        if measured is None:  # unmeasured: an open circle at the model's bound
            y, marker, label = bound, {"size": 11, "symbol": "circle-open", "line": {"width": 2}}, f"model bound {bound:.3g}"
        else:
            if measured <= 0:
                raise LabkitError(f"measured rate of {name!r} must be positive, got {measured!r}.")
            y, marker, label = measured, {"size": 11}, f"{measured / bound:.0%} of its roof"
        fig.add_trace(
            go.Scatter(
                x=[intensity],
                y=[y],
                mode="markers+text",
                text=[name],
                textposition=spot(intensity, y),
                marker=marker,
                name=f"{name} ({label})",
            )
        )
    fig.update_layout(
        title=f"Roofline of the {main.gpu} (model from datasheet figures)",
        template="plotly_white",
        height=450,
        xaxis=log_axis([lo, hi], title="arithmetic intensity (FLOP per byte of memory traffic)"),
        yaxis=log_axis([r.peak.value for r in roofs] + [main.attainable(lo)], title=f"attainable rate ({main.peak.unit})"),
    )
    return fig
