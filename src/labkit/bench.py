"""Timing with warm-up, repetitions, median and spread.

``gpu`` mode: each repetition is bracketed by CUDA events on the current stream (work queued before the
start event is excluded). ``sim`` mode: a wall clock (``time.perf_counter``) — a CPU time of the simulator or
NumPy, labelled as such, never presented as GPU speed.

Given the bytes moved or the FLOPs done, a :class:`Timing` reports GB/s (10^9 B/s), TFLOP/s and, on a GPU
that ``labkit.hw`` knows, the percent of that device's datasheet peak.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import LabkitError
from .mode import current_mode, env


@dataclass(frozen=True)
class Timing:
    """Result of :func:`measure`: seconds per call and, when bytes/FLOPs were given, rates."""

    name: str
    samples_s: tuple[float, ...]
    mode: str
    device: str
    bytes: float | None = None
    flops: float | None = None
    peak_gbps: float | None = None
    peak_tflops: float | None = None
    peak_source: str | None = field(default=None, repr=False)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def spread(self) -> float:
        """(max − min) / median of the samples: 0.03 means the runs were within 3%."""
        return (max(self.samples_s) - min(self.samples_s)) / self.median_s if self.median_s > 0 else 0.0

    @property
    def gbps(self) -> float | None:
        return self.bytes / self.median_s / 1e9 if self.bytes else None

    @property
    def tflops(self) -> float | None:
        return self.flops / self.median_s / 1e12 if self.flops else None

    @property
    def percent_of_peak(self) -> float | None:
        """Percent of the device's datasheet memory bandwidth (given bytes) or compute peak (given FLOPs)."""
        if self.gbps is not None and self.peak_gbps:
            return 100 * self.gbps / self.peak_gbps
        if self.tflops is not None and self.peak_tflops:
            return 100 * self.tflops / self.peak_tflops
        return None

    @property
    def label(self) -> str:
        """What kind of time this is, in words."""
        return f"CUDA-event time on {self.device}" if self.mode == "gpu" else "CPU time (simulator or NumPy), not GPU speed"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "mode": self.mode, "device": self.device, "median_s": self.median_s,
            "spread": self.spread, "repeat": len(self.samples_s), "bytes": self.bytes, "flops": self.flops,
            "gbps": self.gbps, "tflops": self.tflops, "percent_of_peak": self.percent_of_peak,
            "peak_source": self.peak_source, "label": self.label,
        }

    def __str__(self) -> str:
        parts = [f"{self.name}: {_fmt_time(self.median_s)} median of {len(self.samples_s)} (spread {100 * self.spread:.0f}%)"]
        if self.gbps is not None:
            parts.append(f"{self.gbps:,.1f} GB/s")
        if self.tflops is not None:
            parts.append(f"{self.tflops:,.3f} TFLOP/s" if self.tflops < 1 else f"{self.tflops:,.1f} TFLOP/s")
        pct = self.percent_of_peak
        if pct is not None:
            parts.append(f"{pct:.0f}% of peak")
        return ", ".join(parts) + f"  [{self.label}]"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def _fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def device_peaks(precision: str = "fp32") -> tuple[float | None, float | None, str | None]:
    """(memory GB/s, compute TFLOP/s for ``precision``, source) of the current GPU from ``labkit.hw``, or Nones."""
    e = env()
    if not e.is_gpu:
        return None, None, None
    try:
        from . import hw

        gpu = hw.match_device(e.device_name)
        if gpu is None:
            return None, None, None
        mem = gpu.memory_bandwidth
        try:
            peak = gpu.peak(precision)
            return mem.value, peak.value, f"{mem.source}; {peak.source}"
        except LabkitError:
            return mem.value, None, mem.source
    except ImportError:
        return None, None, None


def _gpu_samples(fn: Callable[[], Any], warmup: int, repeat: int) -> list[float]:
    from numba import cuda

    for _ in range(warmup):
        fn()
    cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, stop = cuda.event(), cuda.event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(cuda.event_elapsed_time(start, stop) / 1e3)
    return samples


def _cpu_samples(fn: Callable[[], Any], warmup: int, repeat: int) -> list[float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def measure(
    fn: Callable[..., Any],
    *args: Any,
    name: str | None = None,
    bytes: float | None = None,  # noqa: A002 - the natural name
    flops: float | None = None,
    precision: str = "fp32",
    warmup: int = 2,
    repeat: int = 10,
    **kwargs: Any,
) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``repeat`` timed ones; median and spread.

    ``bytes``: bytes read plus written per call (gives GB/s); ``flops``: floating-point operations per call
    (gives TFLOP/s against the ``precision`` peak). On a GPU, ``fn`` must only queue GPU work (a kernel launch,
    a CuPy call); the CUDA events bracket it on the current stream.
    """
    if repeat < 1 or warmup < 0:
        raise LabkitError(f"repeat must be ≥ 1 and warmup ≥ 0 (got repeat={repeat}, warmup={warmup}).")
    if not callable(fn):
        raise LabkitError(f"measure() needs a function to call, got {type(fn).__name__}.")
    call = (lambda: fn(*args, **kwargs)) if args or kwargs else fn
    mode = current_mode()
    samples = _gpu_samples(call, warmup, repeat) if mode == "gpu" else _cpu_samples(call, warmup, repeat)
    peak_gbps, peak_tflops, source = device_peaks(precision)
    return Timing(
        name=name or getattr(fn, "__name__", "call"),
        samples_s=tuple(samples),
        mode=mode,
        device=env().device_name,
        bytes=bytes,
        flops=flops,
        peak_gbps=peak_gbps if bytes else None,
        peak_tflops=peak_tflops if flops else None,
        peak_source=source,
    )


def table(timings: list[Timing]) -> str:
    """A plain-text table of several timings (name, median, GB/s, TFLOP/s, % of peak)."""
    width = max([28, *(len(t.name) for t in timings)])
    rows = [f"{'name':<{width}} {'median':>10} {'GB/s':>10} {'TFLOP/s':>9} {'% peak':>7}"]
    for t in timings:
        g = f"{t.gbps:,.1f}" if t.gbps is not None else "-"
        f = f"{t.tflops:,.2f}" if t.tflops is not None else "-"
        p = f"{t.percent_of_peak:.0f}" if t.percent_of_peak is not None else "-"
        rows.append(f"{t.name:<{width}} {_fmt_time(t.median_s):>10} {g:>10} {f:>9} {p:>7}")
    if timings:
        rows.append(f"({timings[0].label})")
    return "\n".join(rows)
