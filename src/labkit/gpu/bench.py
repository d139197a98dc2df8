"""Timing with warm-up, repetitions, median and spread.

``gpu`` mode: Python's launch overhead is kept out of the timing. For each sample the stream is held by a spin
kernel (:mod:`labkit.spin`), the start event and ``launches`` calls are queued behind it, then the stop event, and the
hold is released: the GPU runs the calls back to back and the events time only the GPU's work. A function that
makes the host wait (it synchronises) cannot be queued behind a hold; it is then timed with many calls between
one pair of events instead, and the :class:`Timing` says so (:attr:`Timing.how`).
``sim`` mode: a wall clock (``time.perf_counter``) — a CPU time of the simulator or NumPy, labelled as such; no
bandwidth or FLOP rate is printed for it (it would be a CPU figure dressed as a GPU one).

Given the bytes moved or the FLOPs done, a :class:`Timing` reports GB/s (10^9 B/s), TFLOP/s and, on a GPU
that ``labkit.hw`` knows, the percent of that device's datasheet peak (scaled to a MIG slice's SMs and memory).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from labkit.errors import LabkitError
from labkit.gpu._records import attribute_dict
from labkit.mode import current_mode, env
from labkit.validate import describe, require_callable, require_int, require_number, require_sequence, require_str


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
    how: str = ""  # how the samples were taken (spin-held launches, launches between one pair of events, wall clock)
    launches: int = 1  # calls per sample; samples_s are seconds per call

    @property
    def claims_rate(self) -> bool:
        """Whether GB/s and TFLOP/s are printed: only for GPU timings, never for simulator (CPU) time."""
        return self.mode == "gpu"

    @property
    def cv(self) -> float:
        """Coefficient of variation of the samples (standard deviation / mean); 0 for a single sample."""
        if len(self.samples_s) < 2:
            return 0.0
        mean = statistics.fmean(self.samples_s)
        return statistics.stdev(self.samples_s) / mean if mean > 0 else 0.0

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
        if self.mode != "gpu":
            return "CPU time (simulator or NumPy), not GPU speed"
        if "spin kernel:" in self.how:
            return f"CUDA-event time on {self.device}, {self.launches} launches held behind a spin kernel (launch time excluded)"
        if "back-to-back" in self.how:
            return f"CUDA-event time on {self.device}, {self.launches} calls between one pair of events (the call waits)"
        return f"CUDA-event time on {self.device}"

    def as_dict(self) -> dict[str, Any]:
        return {
            **attribute_dict(self, "name mode device median_s spread"),
            "repeat": len(self.samples_s),
            **attribute_dict(self, "bytes flops gbps tflops percent_of_peak peak_source label how launches cv claims_rate"),
        }

    def __str__(self) -> str:
        parts = [f"{self.name}: {_fmt_time(self.median_s)} median of {len(self.samples_s)} (spread {100 * self.spread:.0f}%)"]
        if not self.claims_rate:
            return parts[0] + f"  [{self.label}; no GB/s or TFLOP/s claimed for it]"
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


def slice_fractions(sm_count: int, memory_bytes: int, whole: Any) -> tuple[float, float]:
    """(compute, memory) fraction of a whole GPU that a device with ``sm_count`` SMs and ``memory_bytes`` has.

    A MIG slice gets its SMs' share of the compute peak and its memory's share of the bandwidth (memory slices
    come with their share of the memory controllers); a whole GPU gets (1, 1)."""
    from labkit import hw

    sm_count = require_int(sm_count, "sm_count", min=0)
    memory_bytes = require_int(memory_bytes, "memory_bytes", min=0)
    if not isinstance(whole, hw.GPU):
        raise LabkitError(f"whole must be a GPU record of labkit.hw, got {describe(whole)}.", fix="e.g. labkit.hw.gpu('H100').")
    full_sms = float(whole.sm_count.value)
    compute = min(1.0, sm_count / full_sms) if full_sms else 1.0
    full_mem = float(whole.memory_size.to("GB").value if hasattr(whole.memory_size, "to") else whole.memory_size.value) * 1e9
    memory = min(1.0, memory_bytes / full_mem) if full_mem and compute < 1.0 else 1.0
    return compute, memory


def device_hw(device_name: str | None = None) -> tuple[Any, float, float, str]:
    """``(record, compute fraction, memory fraction, note)`` for a device of ``labkit.hw``: the current GPU when
    ``device_name`` is None or is its name, else the device so named (whole, unscaled). A MIG slice
    (``"NVIDIA H100 80GB HBM3 MIG 1g.10gb"``) is its parent GPU's record with :func:`slice_fractions` of it, and
    ``note`` says so ("; scaled to this MIG slice ..."); a slice that is not the current device cannot be scaled,
    so it gets no record. ``(None, 1.0, 1.0, "")`` when labkit.hw has no record. The one place every peak a
    measurement is compared with (bench, tensorcores, bandwidth.peak_table, the lab-06 check) is looked up."""
    from labkit import hw

    if device_name is not None:
        device_name = require_str(device_name, "device_name", fix="A device name, e.g. 'NVIDIA H100 80GB HBM3', or None.")
    e = env()
    current = device_name is None or device_name == e.device_name
    name = e.device_name if device_name is None else device_name
    mig = bool(getattr(e, "mig", None)) if current else False
    if " MIG " in name and not current:
        return None, 1.0, 1.0, ""
    gpu = hw.match_device(name.split(" MIG ")[0])
    if gpu is None:
        return None, 1.0, 1.0, ""
    if not (mig or " MIG " in name):
        return gpu, 1.0, 1.0, ""
    compute, memory = slice_fractions(e.sm_count or 0, e.memory_bytes or 0, gpu)
    note = (
        f"; scaled to this MIG slice ({e.sm_count} of {gpu.sm_count.value:.0f} SMs: x{compute:.3f} compute, "
        f"x{memory:.3f} memory bandwidth)"
    )
    return gpu, compute, memory, note


def device_peaks(precision: str = "fp32") -> tuple[float | None, float | None, str | None]:
    """(memory GB/s, compute TFLOP/s for ``precision``, source) of the current GPU from ``labkit.hw``, or Nones.

    On a MIG slice the figures are scaled to the slice's SMs and memory, and the source says so (:func:`device_hw`)."""
    e = env()
    if not e.is_gpu:
        return None, None, None
    try:
        gpu, compute, memory, scaled = device_hw()
        if gpu is None:
            return None, None, None
        mem = gpu.memory_bandwidth
        try:
            peak = gpu.peak(precision)
            return mem.value * memory, peak.value * compute, f"{mem.source}; {peak.source}{scaled}"
        except LabkitError:
            return mem.value * memory, None, f"{mem.source}{scaled}"
    except ImportError:
        return None, None, None


SPIN_HELD = "CUDA events around {n} launch(es) queued behind a spin kernel: Python's launch time excluded"
BETWEEN_EVENTS = (
    "CUDA events around {n} back-to-back launches (the function makes the host wait, so it cannot be "
    "held by a spin kernel; launch time is spread over the {n} calls)"
)
WALL_CLOCK = "wall clock (time.perf_counter) around each call: CPU time"


def _launches_for(one_call_s: float) -> int:
    """Calls per sample: enough that a sample lasts about 1 ms, at most what may queue behind a spin kernel."""
    from labkit.gpu.spin import MAX_QUEUED

    if one_call_s <= 0:
        return MAX_QUEUED // 2
    return int(max(1, min(MAX_QUEUED // 2, round(1e-3 / one_call_s))))


def _gpu_samples(fn: Callable[[], Any], warmup: int, repeat: int, launches: int | None) -> tuple[list[float], str, int]:
    """(seconds per call for each sample, how, calls per sample) on the current CuPy stream (the legacy default
    stream, which Numba's launches use too)."""
    import cupy as cp

    from labkit.gpu.spin import SpinHold

    stream = cp.cuda.get_current_stream()
    device = cp.cuda.runtime.getDevice()
    for _ in range(max(1, warmup) if launches is not None else warmup):  # at least one call before the hold: lazy
        fn()  # loading loads fn's kernels now, unheld
    stream.synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    if launches is None:  # one call between events, after the warm-up, to size the batches
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        launches = _launches_for(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    samples: list[float] = []
    with SpinHold(cp, timeout_s=1.0) as hold:  # queuing 64 launches takes about a millisecond; 1 s means the host waited
        for _ in range(repeat):
            hold.hold(stream, device)
            try:
                start.record(stream)
                for _ in range(launches):
                    fn()
                stop.record(stream)
            finally:
                hold.release()
            stop.synchronize()
            if hold.timed_out:  # the host waited inside fn(): time it between one pair of events instead
                return _between_events(cp, fn, stream, repeat, launches), BETWEEN_EVENTS.format(n=launches), launches
            samples.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / launches)
    return samples, SPIN_HELD.format(n=launches), launches


def _between_events(cp: Any, fn: Callable[[], Any], stream: Any, repeat: int, launches: int) -> list[float]:
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    samples = []
    for _ in range(repeat):
        start.record(stream)
        for _ in range(launches):
            fn()
        stop.record(stream)
        stop.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / launches)
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
    launches: int | None = None,
    **kwargs: Any,
) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``repeat`` timed ones; median and spread.

    ``bytes``: bytes read plus written per call (gives GB/s); ``flops``: floating-point operations per call
    (gives TFLOP/s against the ``precision`` peak). On a GPU, ``fn`` should only queue GPU work (a kernel launch,
    a CuPy call) on the default stream: ``launches`` calls per sample (default: enough for about 1 ms, at most 64)
    are queued behind a spin kernel, so the events time the GPU's work without Python's launch overhead.
    """
    fn = require_callable(
        fn,
        "measure()'s first argument",
        what="a function to call (the function itself, not its result)",
        fix="e.g. bench.measure(kernel[grid, block], x, y, out) or bench.measure(lambda: xp.sort(a)).",
    )
    repeat = require_int(repeat, "repeat", min=1, max=100_000, fix="repeat is how many timed calls to make, e.g. repeat=10.")
    warmup = require_int(warmup, "warmup", min=0, max=100_000, fix="warmup is how many untimed calls come first, e.g. warmup=2.")
    if name is not None:
        name = require_str(name, "name", fix="name is the label printed for this timing, e.g. name='saxpy'.")
    if bytes is not None:
        bytes = require_number(
            bytes,
            "bytes",
            min=0,  # noqa: A001 - 0 (or None): no GB/s
            fix="bytes = bytes read plus written by one call, e.g. 3 * n * 4 for SAXPY in FP32.",
        )
    if flops is not None:
        flops = require_number(flops, "flops", min=0, fix="flops = floating-point operations of one call, e.g. 2 * n.")
    from labkit.hw import _normalise_precision

    precision = _normalise_precision(precision)
    call = (lambda: fn(*args, **kwargs)) if args or kwargs else fn
    if launches is not None:
        launches = require_int(launches, "launches", min=1, fix="launches is the calls per sample, a whole number ≥ 1.")
    from labkit.gpu.spin import MAX_QUEUED

    if launches is not None and launches > MAX_QUEUED // 2:
        raise LabkitError(
            f"at most {MAX_QUEUED // 2} launches can queue behind the spin kernel (got {launches}).",
            fix="Use fewer launches, or a bigger problem per launch.",
        )
    mode = current_mode()
    if mode == "gpu":
        try:
            samples, how, per_sample = _gpu_samples(call, warmup, repeat, launches)
        except LabkitError:
            raise
        except Exception as exc:
            from labkit.gpu.errors import OTHER, explain

            err = explain(exc, f"timing {name or getattr(fn, '__name__', 'the call')}")
            if err.kind == OTHER:  # a bug in the function itself: its own exception, unchanged
                raise
            raise err from None
    else:
        samples, how, per_sample = _cpu_samples(call, warmup, repeat), WALL_CLOCK, 1
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
        how=how,
        launches=per_sample,
    )


def table(timings: list[Timing]) -> str:
    """A plain-text table of several timings (name, median, GB/s, TFLOP/s, % of peak)."""
    timings = require_sequence(
        timings,
        "table()'s argument",
        what="a list of timings from bench.measure",
        fix="e.g. bench.table([t1, t2]) with t1 = bench.measure(...).",
    )
    for i, t in enumerate(timings):
        if not isinstance(t, Timing):
            raise LabkitError(
                f"table() takes timings from bench.measure; element {i} is {describe(t)}.",
                fix="e.g. bench.table([bench.measure(f, x), bench.measure(g, x)]).",
            )
    width = max([28, *(len(t.name) for t in timings)])
    rows = [f"{'name':<{width}} {'median':>10} {'GB/s':>10} {'TFLOP/s':>9} {'% peak':>7}"]
    for t in timings:
        g = f"{t.gbps:,.1f}" if t.gbps is not None and t.claims_rate else "-"
        f = f"{t.tflops:,.2f}" if t.tflops is not None and t.claims_rate else "-"
        p = f"{t.percent_of_peak:.0f}" if t.percent_of_peak is not None else "-"
        rows.append(f"{t.name:<{width}} {_fmt_time(t.median_s):>10} {g:>10} {f:>9} {p:>7}")
    if timings:
        rows.append(
            f"({timings[0].label})"
            if timings[0].claims_rate
            else f"({timings[0].label}: no GB/s or TFLOP/s is claimed for simulator time)"
        )
    return "\n".join(rows)
