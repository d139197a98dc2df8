"""Bandwidth measured the way nvbandwidth measures it, host-memory bandwidth STREAM-style, and busbw maths.

``gpu`` mode (CuPy, plus ``cuda.bindings`` to switch peer access off):

- :func:`host_to_device`, :func:`device_to_host`: pinned or pageable host memory, through the copy engine;
- :func:`device_local_copy`: a copy inside one GPU's memory, by the copy engine (``memcpy``) or by an SM kernel;
- :func:`peer_matrix`: every GPU pair, one direction or both at once, peer access enabled or explicitly disabled;
- :func:`latency`: time per small copy; :func:`size_sweep`: 1 KiB to 1 GiB, latency-bound to bandwidth-bound;
- :func:`discover`, :func:`p2p_status`, :func:`pcie_link`: what NVML and ``nvidia-smi topo -m`` say about the machine.

The method is nvbandwidth's: 512 MiB buffers; pinned host memory on the GPU's NUMA node where the OS names it
(``/sys/bus/pci/devices/<bus id>/numa_node``; the measuring thread runs on that node's CPUs); for each sample a spin
kernel holds the stream, warm-up copies, the start event, 16 copies and the stop event are queued behind it, then the
hold is released (so neither queuing nor launching is timed); the median of the samples, with their coefficient of
variation. Bidirectional copies start together (the second stream waits on an event recorded after the hold) and
are reported *per direction*, and say so. A copy inside one GPU's memory counts its bytes once (nvbandwidth's
convention); :attr:`Record.read_write_gbps` gives the read+write figure, labelled so.

Both modes: :func:`host_stream` and :func:`host_sweep` measure this computer's memory with NumPy (one thread,
bytes counted as STREAM counts them); :func:`model_peer_matrix` gives a DGX's peer matrix from
:mod:`labkit.topology`, labelled as a model; :func:`busbw_factor`, :func:`algbw`, :func:`busbw` are nccl-tests' maths.

Every result is a :class:`Record` (JSON with :func:`to_json`), drawn by :func:`heatmap` and :func:`sweep_figure`,
printed by :func:`format_matrix`. GB/s means 10^9 bytes per second.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from labkit.errors import LabkitError, NoGPUError, require
from labkit.figstyle import bytes_axis, human_bytes, log_axis
from labkit.mode import env
from labkit.validate import require_choice, require_items, require_number, require_sequence, require_str

KiB, MiB, GiB = 1024, 1024**2, 1024**3

DEFAULT_SIZE = 512 * MiB  #: nvbandwidth's buffer size
DEFAULT_COPIES = 16  #: timed copies per sample (nvbandwidth's loop count)
DEFAULT_WARMUP = 4  #: untimed copies before the samples
DEFAULT_SAMPLES = 3  #: samples; the median is reported
SWEEP_SIZES = tuple(KiB * 4**k for k in range(11))  #: 1 KiB, 4 KiB, ... 1 GiB

#: Direction conventions a :class:`Record` can carry.
ONE_WAY = "one direction"
PER_DIRECTION = "per direction, both directions running at once (nvbandwidth convention)"
SUM_BOTH = "sum of both directions (p2pBandwidthLatencyTest convention)"
READ_WRITE = "bytes read + bytes written (bandwidthTest D2D convention)"
COPY_ONCE = (
    "bytes copied, counted once (nvbandwidth convention); read+write (bandwidthTest convention) is twice this: "
    "Record.read_write_gbps"
)
STREAM_COUNT = "STREAM count: copy 2, triad 3 array-sizes per pass (write-allocate not counted)"

_SPIN_LIMIT = 128  # never queue more than this many operations behind the spin kernel (labkit.spin.MAX_QUEUED)
_SWEEP_WARMUP, _LATENCY_WARMUP = 2, 4  # untimed copies per sample of size_sweep and latency

# ---------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Record:
    """One figure: what was copied where, how fast, counted how, measured how and on what.

    ``bytes`` is the buffer size of one copy (one array for the host tests); ``counted_bytes`` is what the GB/s
    counts per copy (twice the buffer for a copy inside one memory, as bandwidthTest and STREAM count it).
    ``gbps`` is ``counted_bytes / median(samples) / 1e9``; ``None`` when the test could not run (``note`` says
    why). ``kind`` is ``"measured"`` or ``"model"``; a model has no samples.
    """

    test: str
    src: str
    dst: str
    bytes: int
    gbps: float | None
    direction: str
    samples: tuple[float, ...]
    method: str
    device: str
    kind: str = "measured"
    counted_bytes: int = 0
    note: str = ""

    @property
    def seconds(self) -> float | None:
        """Median seconds per copy (None for a model or a test that could not run)."""
        return statistics.median(self.samples) if self.samples else None

    @property
    def latency_us(self) -> float | None:
        """Median microseconds per copy."""
        s = self.seconds
        return None if s is None else s * 1e6

    @property
    def spread(self) -> float | None:
        """(max - min) / median of the samples: 0.03 means within 3%."""
        s = self.seconds
        if not s:
            return None
        return (max(self.samples) - min(self.samples)) / s

    @property
    def cv(self) -> float | None:
        """Coefficient of variation of the samples (standard deviation / mean), as nvbandwidth reports it."""
        if len(self.samples) < 2:
            return 0.0 if self.samples else None
        mean = statistics.fmean(self.samples)
        return statistics.stdev(self.samples) / mean if mean > 0 else None

    @property
    def read_write_gbps(self) -> float | None:
        """For a copy inside one memory counted once (:data:`COPY_ONCE`): bytes read + written per second (twice
        :attr:`gbps`); otherwise None (other tests move each byte across a link once)."""
        return 2 * self.gbps if self.direction == COPY_ONCE and self.gbps is not None else None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["samples"] = list(self.samples)
        d["seconds"] = self.seconds
        d["cv"] = self.cv
        d["read_write_gbps"] = self.read_write_gbps
        return d

    def __str__(self) -> str:
        rate = f"{self.gbps:,.2f} GB/s" if self.gbps is not None else "N/A"
        if self.read_write_gbps is not None:
            rate += f" (read+write {self.read_write_gbps:,.2f} GB/s)"
        if self.kind != "model" and self.cv is not None and len(self.samples) > 1:
            rate += f", CV {100 * self.cv:.1f}%"
        what = "model" if self.kind == "model" else f"measured on {self.device}"
        extra = f" ({self.note})" if self.note else ""
        return f"{self.test} {self.src}->{self.dst}, {_fmt_bytes(self.bytes)}: {rate} [{self.direction}; {what}]{extra}"


def to_json(records: Iterable[Record], **meta: Any) -> str:
    """The records (and any metadata given as keywords) as a JSON document."""
    records = _records(records, "records")
    doc = {"unit": "GB/s (10^9 bytes per second)", **meta, "records": [r.as_dict() for r in records]}
    return json.dumps(doc, indent=1, default=str, allow_nan=False)


def _records(records: Any, name: str) -> list[Record]:
    """``records`` as a list of :class:`Record` (what this module's measurements and models return)."""
    return require_items(
        records,
        name,
        Record,
        what="a list of bandwidth records",
        fix="Pass the list a measurement returned, e.g. peer_matrix(), host_sweep() or model_peer_matrix().",
    )


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(n)} B"


# ---------------------------------------------------------------------------------------------- validation

_SIZE_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)\s*$", re.I)


def parse_size(size: int | str) -> int:
    """Bytes from ``4096``, ``"4KiB"``, ``"512 MiB"``, ``"1G"`` (binary) or ``"1GB"`` (decimal). Must be > 0."""
    if isinstance(size, bool):
        raise LabkitError(f"a size in bytes cannot be {size!r}.", fix="Give a whole number of bytes, e.g. 64 * 2**20 or '64MiB'.")
    if isinstance(size, float) and size.is_integer():
        size = int(size)
    if isinstance(size, int):
        value = size
    elif isinstance(size, str):
        m = _SIZE_RE.match(size)
        if not m:
            raise LabkitError(f"cannot read {size!r} as a size.", fix="Write e.g. '4KiB', '64MiB', '1GiB' or a number of bytes.")
        number, prefix, suffix = float(m.group(1)), m.group(2).upper(), m.group(3).lower()
        power = "KMGT".index(prefix) + 1 if prefix else 0
        base = 1000 if suffix == "b" and prefix else 1024
        value = number * base**power
        if not float(value).is_integer():
            raise LabkitError(f"{size!r} is not a whole number of bytes.", fix="Use a whole number of bytes.")
        value = int(value)
    else:
        raise LabkitError(f"a size must be a number of bytes or a string like '64MiB', not {type(size).__name__}.")
    if value <= 0:
        raise LabkitError(f"a size must be positive, got {size!r}.", fix="Give a size of at least 1 byte, e.g. '4KiB'.")
    return value


def _positive_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LabkitError(f"{name} must be a whole number ≥ {minimum}, got {value!r}.")
    return value


def host_available_bytes() -> int | None:
    """Memory the operating system could give this process now (``MemAvailable``), or None if unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_host_memory(need: int, what: str, fraction: float = 0.5) -> None:
    """Refuse a host buffer larger than ``fraction`` of the memory available now, but never one of nvbandwidth's
    size (:data:`DEFAULT_SIZE`) or less: a VM's memory can grow when it is asked for (ballooning, hot-plug), so
    ``MemAvailable`` read before the allocation can be too low; a default-sized allocation that really fails is
    reported by the allocation itself ("could not pin ...")."""
    if need <= DEFAULT_SIZE:
        return
    avail = host_available_bytes()
    if avail is not None and need > fraction * avail:
        raise LabkitError(
            f"{what} needs {_fmt_bytes(need)} of host memory, but only {_fmt_bytes(avail)} is available "
            f"(labkit uses at most {fraction:.0%} of it).",
            fix="Choose a smaller size.",
        )


# ---------------------------------------------------------------------------------------------- host memory (both modes)


def cache_sizes() -> dict[str, int]:
    """Data-cache sizes of CPU 0 in bytes, ``{"L1": ..., "L2": ..., "L3": ...}`` (Linux sysfs; defaults elsewhere)."""
    sizes = {"L1": 32 * KiB, "L2": 1 * MiB, "L3": 32 * MiB}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    found: dict[str, int] = {}
    try:
        for index in sorted(base.glob("index*")):
            kind = (index / "type").read_text().strip()
            if kind not in ("Data", "Unified"):
                continue
            level = (index / "level").read_text().strip()
            text = (index / "size").read_text().strip().upper()
            m = re.match(r"(\d+)([KMG]?)", text)
            if m:
                found[f"L{level}"] = int(m.group(1)) * {"": 1, "K": KiB, "M": MiB, "G": GiB}[m.group(2)]
    except OSError:
        pass
    sizes.update(found)
    return sizes


def size_class(working_set: int, caches: dict[str, int] | None = None) -> str:
    """Where a working set of this many bytes lives: the smallest cache that holds it, or ``"DRAM"``.

    A working set between the last-level cache and twice its size is ``"L3/DRAM"``: partly cached."""
    working_set = require_number(working_set, "working_set", min=0)
    if caches is not None and not (
        isinstance(caches, dict)
        and caches
        and all(isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in caches.items())
    ):
        raise LabkitError(
            f"caches must be a dict of cache name -> size in bytes, got {caches!r:.60}.",
            fix="Pass cache_sizes() or e.g. {'L1': 48 * 1024, 'L2': 2 * 2**20}, or leave it out.",
        )
    caches = caches or cache_sizes()
    levels = sorted(caches.items(), key=lambda kv: kv[1])
    for name, size in levels:
        if working_set <= size:
            return name
    last = levels[-1][1]
    return f"{levels[-1][0]}/DRAM" if working_set <= 2 * last else "DRAM"


_STREAM_ARRAYS = {"copy": 2, "triad": 3}


def _host_kernel(kernel: str, n: int) -> tuple[Callable[[], None], list[Any]]:
    import numpy as np

    arrays = [np.full(n, 1.0 + k, dtype=np.float64) for k in range(_STREAM_ARRAYS[kernel])]  # touched: no zero pages
    if kernel == "copy":
        a, b = arrays

        def run() -> None:
            np.copyto(b, a)

        return run, arrays
    a, b, c = arrays
    scalar = 3.0
    chunk = max(1024, cache_sizes().get("L2", MiB) // (4 * 8))  # three chunks fit in L2 with room to spare

    def run() -> None:  # a = b + scalar * c, in L2-sized chunks: NumPy's two passes then touch memory once
        for i in range(0, n, chunk):
            j = i + chunk
            np.multiply(c[i:j], scalar, out=a[i:j])
            np.add(a[i:j], b[i:j], out=a[i:j])

    return run, arrays


def _time_host(run: Callable[[], None], samples: int, min_sample_s: float) -> list[float]:
    """Seconds per call: one warm-up call, calibrate a repeat count so a sample lasts ``min_sample_s``, then sample."""
    run()
    reps = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            run()
        dt = time.perf_counter() - t0
        if dt >= min_sample_s or reps >= 1 << 22:
            break
        reps = min(1 << 22, max(2 * reps, int(reps * 1.3 * min_sample_s / max(dt, 1e-9))))
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(reps):
            run()
        out.append((time.perf_counter() - t0) / reps)
    return out


def host_stream(kernel: str = "copy", size: int | str = 64 * MiB, *, samples: int = 5, min_sample_s: float = 0.003) -> Record:
    """Measure this computer's memory bandwidth with NumPy: ``"copy"`` (``b = a``) or ``"triad"`` (``a = b + s*c``).

    ``size`` is the size of one float64 array. Bytes are counted as STREAM counts them: copy reads one array and
    writes one (2 x size), triad reads two and writes one (3 x size); the extra read a cache does before writing
    (write-allocate) is not counted. One thread: NumPy does not use several cores for these.
    """
    kernel = require_choice(kernel, "host kernel", list(_STREAM_ARRAYS), fix="Use 'copy' or 'triad'.")
    nbytes = parse_size(size)
    samples = _positive_int(samples, "samples")
    min_sample_s = require_number(min_sample_s, "min_sample_s", min=0, max=10)
    n = max(1, nbytes // 8)
    k = _STREAM_ARRAYS[kernel]
    _check_host_memory(k * n * 8, f"host_stream({kernel!r}, {_fmt_bytes(nbytes)})")
    run, arrays = _host_kernel(kernel, n)
    try:
        times = _time_host(run, samples, min_sample_s)
    finally:
        arrays.clear()
    counted = k * n * 8
    median = statistics.median(times)
    return Record(
        test=f"host_{kernel}",
        src="host",
        dst="host",
        bytes=n * 8,
        gbps=counted / median / 1e9,
        direction=STREAM_COUNT,
        samples=tuple(times),
        device=_host_name(),
        counted_bytes=counted,
        note=size_class(k * n * 8),
        method=(
            "NumPy float64, one thread; "
            + ("np.copyto(b, a)" if kernel == "copy" else "a = b + 3.0*c in L2-sized chunks (NumPy's two passes stay in cache)")
            + f"; median of {samples} samples, each long enough to time (>= {min_sample_s * 1e3:g} ms)"
        ),
    )


def default_host_sizes() -> list[int]:
    """Array sizes from L1-sized (4 KiB) to well past the last-level cache, by factors of 4."""
    llc = max(cache_sizes().values())
    top = 64 * MiB
    while 2 * top < 4 * llc:  # a copy's working set (2 arrays) at least 4x the last-level cache
        top *= 4
    avail = host_available_bytes()
    while avail is not None and top > 4 * MiB and 3 * top > avail / 4:
        top //= 4
    sizes, s = [], 4 * KiB
    while s <= top:
        sizes.append(s)
        s *= 4
    return sizes


def host_sweep(
    sizes: Sequence[int | str] | None = None,
    kernels: Sequence[str] = ("copy", "triad"),
    *,
    samples: int = 5,
    min_sample_s: float = 0.003,
) -> list[Record]:
    """:func:`host_stream` over array sizes from L1-sized to DRAM-sized; each record's ``note`` names the level
    (``L1``, ``L2``, ``L3``, ``DRAM``) its working set fits in. About 2-5 s with the default sizes."""
    sizes_b = [
        parse_size(s)
        for s in (require_sequence(sizes, "sizes", what="a list of sizes") if sizes is not None else default_host_sizes())
    ]
    kernels = require_sequence(
        kernels,
        "kernels",
        min_len=1,
        what="a list of host kernel names ('copy', 'triad')",
        item=lambda k, n: require_choice(k, n, list(_STREAM_ARRAYS)),
    )
    if not sizes_b:
        raise LabkitError("host_sweep needs at least one size.")
    return [host_stream(k, s, samples=samples, min_sample_s=min_sample_s) for k in kernels for s in sizes_b]


def best_by_class(records: Iterable[Record]) -> dict[str, float]:
    """The best GB/s per size class (``note``) of host records."""
    out: dict[str, float] = {}
    for r in _records(records, "records"):
        if r.gbps is not None:
            out[r.note] = max(out.get(r.note, 0.0), r.gbps)
    return out


def _host_name() -> str:
    import platform

    return f"host CPU ({platform.processor() or platform.machine()})"


# ---------------------------------------------------------------------------------------------- collectives maths

_COLLECTIVES: dict[str, tuple[str, Callable[[int], float]]] = {
    "all_reduce": ("2(n-1)/n", lambda n: 2 * (n - 1) / n),
    "all_gather": ("(n-1)/n", lambda n: (n - 1) / n),
    "reduce_scatter": ("(n-1)/n", lambda n: (n - 1) / n),
    "alltoall": ("(n-1)/n", lambda n: (n - 1) / n),
    "broadcast": ("1", lambda n: 1.0),
    "reduce": ("1", lambda n: 1.0),
}


def collectives() -> list[str]:
    """The collectives :func:`busbw_factor` knows."""
    return list(_COLLECTIVES)


def _collective(name: str) -> str:
    if not isinstance(name, str):
        raise LabkitError(f"a collective's name must be a string, not {type(name).__name__}.")
    key = re.sub(r"[\s\-]", "_", name.strip().lower())
    key = {
        "allreduce": "all_reduce",
        "allgather": "all_gather",
        "reducescatter": "reduce_scatter",
        "all_to_all": "alltoall",
        "bcast": "broadcast",
    }.get(key, key)
    if key not in _COLLECTIVES:
        import difflib

        close = difflib.get_close_matches(key, _COLLECTIVES, n=1)
        did = f" Did you mean {close[0]!r}?" if close else ""
        raise LabkitError(f"unknown collective {name!r}.{did}", fix=f"Use one of: {', '.join(_COLLECTIVES)}.")
    return key


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' factor from algorithm bandwidth to bus bandwidth for ``n`` ranks:
    all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce 1."""
    key = _collective(collective)
    n = _positive_int(n, "the number of ranks n")
    return _COLLECTIVES[key][1](n)


def busbw_formula(collective: str) -> str:
    """The factor as text, e.g. ``"2(n-1)/n"``."""
    return _COLLECTIVES[_collective(collective)][0]


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth in GB/s: the collective's data size (nccl-tests' "size") over the time."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or nbytes < 0 or not math.isfinite(nbytes):
        raise LabkitError(f"nbytes must be a non-negative number of bytes, got {nbytes!r}.")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0 or not math.isfinite(seconds):
        raise LabkitError(f"seconds must be a positive time, got {seconds!r}.")
    return nbytes / seconds / 1e9


def busbw(nbytes: float, seconds: float, collective: str, n: int) -> float:
    """Bus bandwidth in GB/s: ``algbw x busbw_factor``. It reflects the busiest link and compares across n."""
    return algbw(nbytes, seconds) * busbw_factor(collective, n)


# ---------------------------------------------------------------------------------------------- models (both modes)


def pcie_peak(generation: int, lanes: int = 16) -> float:
    """Theoretical PCIe bandwidth per direction in GB/s, from the x16 figure in :mod:`labkit.hw`."""
    from labkit import hw

    generation = _positive_int(generation, "PCIe generation")
    lanes = _positive_int(lanes, "lane count")
    if lanes not in (1, 2, 4, 8, 16, 32):
        raise LabkitError(f"a PCIe link has 1, 2, 4, 8, 16 or 32 lanes, not {lanes}.")
    try:
        x16 = hw.link(f"PCIe {generation}").per_link
    except LabkitError:
        raise LabkitError(
            f"labkit has no data for PCIe generation {generation}.", fix="labkit.hw.links() lists the generations."
        ) from None
    assert x16 is not None
    return x16.value * lanes / 16


def model_peer_matrix(system: str = "DGX-1 (V100)", bidirectional: bool = False) -> list[Record]:
    """A DGX's GPU-to-GPU bandwidth from its wiring (:mod:`labkit.topology`): a model, not a measurement.

    NVLink pairs get links x per-link bandwidth (through NVSwitches: the bottleneck of the paths). Pairs with no
    NVLink path get the bandwidth of the GPU's PCIe link as an upper bound (traffic goes over PCIe and the CPUs),
    noted as such. ``bidirectional=True`` gives per-direction figures with both directions running: links are full
    duplex, so they equal the one-way figures; :func:`sum_convention` turns them into sums.
    """
    from labkit.hw import topology

    topo = topology.load(system)
    gpus = topo.gpus()
    out = []
    for a in gpus:
        for b in gpus:
            if a == b:
                continue
            nv = topo.peer_bandwidth(a, b)
            if nv > 0:
                rel = topo.relation(a, b)
                method = f"model: {rel}, NVLink, {topo.gpu_model} ({topo.name})"
                gbps, note = nv, ""
            else:
                gbps, link = _model_pcie(topo, a)
                method = f"model: no NVLink path ({topo.relation(a, b)}); upper bound {link} x16 of the GPU"
                note = "no NVLink: PCIe and CPU (upper bound)"
            out.append(
                Record(
                    test="peer_bidirectional" if bidirectional else "peer_unidirectional",
                    src=f"GPU{a}",
                    dst=f"GPU{b}",
                    bytes=0,
                    gbps=gbps,
                    direction=PER_DIRECTION if bidirectional else ONE_WAY,
                    samples=(),
                    method=method,
                    device=topo.name,
                    kind="model",
                    note=note,
                )
            )
    return out


def _model_pcie(topo: Any, gpu: int) -> tuple[float, str]:
    for _, _, d in topo.graph.edges(f"GPU{gpu}", data=True):
        if d.get("kind") == "pcie" and d.get("per_link"):
            return float(d["per_link"]), str(d.get("label", "PCIe")).replace(" x16", "")
    return 0.0, "PCIe (unknown)"


def sum_convention(records: Iterable[Record]) -> list[Record]:
    """Per-direction bidirectional records -> one record per pair with the two directions added
    (p2pBandwidthLatencyTest's convention). Both directions of a pair must be present."""
    recs = [r for r in _records(records, "records") if r.direction == PER_DIRECTION]
    by_pair = {(r.src, r.dst): r for r in recs}
    out = []
    for (s, d), r in by_pair.items():
        back = by_pair.get((d, s))
        if back is None:
            raise LabkitError(
                f"the reverse direction {d}->{s} of {s}->{d} is missing.", fix="Pass both directions of every pair."
            )
        total = None if r.gbps is None or back.gbps is None else r.gbps + back.gbps
        out.append(replace(r, gbps=total, direction=SUM_BOTH, method=r.method + "; both directions added"))
    return out


# ---------------------------------------------------------------------------------------------- matrices, tables, plots


def matrix(records: Iterable[Record]) -> tuple[list[str], list[str], list[list[float | None]]]:
    """(row labels = sources, column labels = destinations, GB/s) from pairwise records; missing cells are None."""
    recs = _records(records, "records")
    srcs = sorted({r.src for r in recs}, key=_label_key)
    dsts = sorted({r.dst for r in recs}, key=_label_key)
    cell = {(r.src, r.dst): r.gbps for r in recs}
    return srcs, dsts, [[cell.get((s, d)) for d in dsts] for s in srcs]


def _label_key(label: str) -> tuple[str, int]:
    m = re.match(r"([A-Za-z]*)(\d*)", label)
    return (m.group(1), int(m.group(2)) if m and m.group(2) else -1) if m else (label, -1)


def format_matrix(records: Iterable[Record], title: str | None = None) -> str:
    """An nvbandwidth-style text matrix: sources in rows, destinations in columns, ``N/A`` where nothing ran."""
    recs = _records(records, "records")
    title = None if title is None else require_str(title, "title", empty=True)
    if not recs:
        return "(no records)"
    srcs, dsts, m = matrix(recs)
    r0 = recs[0]
    what = "model" if r0.kind == "model" else f"measured on {r0.device}"
    head = title or f"{r0.test}: {r0.method.split(';')[0]}"
    lines = [f"{head}", f"  GB/s, {r0.direction}; {what}. Rows: source, columns: destination."]
    lines.append(" " * 8 + "".join(f"{d:>10}" for d in dsts))
    for s, row in zip(srcs, m):
        lines.append(f"{s:>8}" + "".join(f"{'N/A' if v is None else f'{v:,.2f}':>10}" for v in row))
    notes = sorted({r.note for r in recs if r.note})
    lines += [f"  note: {n}" for n in notes]
    return "\n".join(lines)


def _cell_text(v: float) -> str:
    """A GB/s figure as a heatmap cell shows it: up to two decimals, none padded (15.75, 31.5, 300), never rounded to
    a whole number the figure is not (PCIe Gen3 x16's 15.75 GB/s is not "16")."""
    return f"{v:,.2f}".rstrip("0").rstrip(".")


def heatmap(records: Iterable[Record], title: str | None = None) -> Any:
    """A plotly heatmap of pairwise records (source rows, destination columns), labelled model or measured."""
    import plotly.graph_objects as go

    recs = _records(records, "records")
    title = None if title is None else require_str(title, "title", empty=True)
    if not recs:
        raise LabkitError("heatmap() got no records.", fix="Pass the list that peer_matrix() or model_peer_matrix() returned.")
    srcs, dsts, m = matrix(recs)
    r0 = recs[0]
    text = [["N/A" if v is None else _cell_text(v) for v in row] for row in m]
    hover = [["N/A: nothing ran" if v is None else f"{_cell_text(v)} GB/s" for v in row] for row in m]  # as table() says
    what = "model" if r0.kind == "model" else f"measured on {r0.device}"
    fig = go.Figure(
        go.Heatmap(
            z=m,
            x=dsts,
            y=srcs,
            text=text,
            texttemplate="%{text}",
            colorscale="Greens",
            customdata=hover,
            hoverongaps=True,
            colorbar={"title": "GB/s"},
            hovertemplate="%{y} -> %{x}: %{customdata}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title or f"{r0.test} ({what}; {r0.direction.split('(')[0].strip()})",
        xaxis_title="destination",
        yaxis_title="source",
        yaxis_autorange="reversed",
        width=620,
        height=520,
    )
    return fig


def sweep_figure(records: Iterable[Record], title: str | None = None) -> Any:
    """GB/s against transfer size (log-log), one line per test; host records are marked by cache level."""
    import plotly.graph_objects as go

    recs = [r for r in _records(records, "records") if r.gbps is not None]
    title = None if title is None else require_str(title, "title", empty=True)
    if not recs:
        raise LabkitError("sweep_figure() got no measured records.")
    fig = go.Figure()
    for test in dict.fromkeys(r.test for r in recs):
        rs = sorted((r for r in recs if r.test == test), key=lambda r: r.bytes)
        fig.add_trace(
            go.Scatter(
                x=[r.bytes for r in rs],
                y=[r.gbps for r in rs],
                mode="lines+markers+text",
                name=test,
                text=[r.note if r.test.startswith("host_") else "" for r in rs],
                textposition="top center",
                customdata=[human_bytes(r.bytes) for r in rs],
                hovertemplate="%{customdata}: %{y:.2f} GB/s<extra>" + test + "</extra>",
            )
        )
    where = recs[0].device
    fig.update_layout(
        title=title or f"Bandwidth against size (measured on {where})",
        width=760,
        height=460,
        xaxis=bytes_axis([r.bytes for r in recs], title="bytes per array / per copy"),
        yaxis=log_axis([r.gbps for r in recs], title="GB/s"),
    )
    return fig


def peak_table(records: Iterable[Record], topo: Any = None, pcie: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """Each measured figure beside its theoretical link peak: ``{"test", "src", "dst", "measured", "peak", "percent", "link"}``.

    Peer records use ``topo`` (a :class:`labkit.topology.Topology`; NVLink, else the PCIe link); host<->device records
    use ``pcie = (generation, lanes)``; device-local copies use the GPU's memory bandwidth from :mod:`labkit.hw`
    (a MIG slice's share of it: :func:`labkit.bench.device_hw`); host records have no datasheet peak here (None)."""
    from labkit.gpu.bench import device_hw

    records = _records(records, "records")
    from labkit.hw.topology import Topology

    if topo is not None and not isinstance(topo, Topology):
        raise LabkitError(f"topo must be a Topology (labkit.topology.load(...)) or None, got {topo!r:.60}.")
    if pcie is not None:
        from labkit.validate import require_int

        gen, lanes = require_sequence(pcie, "pcie", min_len=2, max_len=2, what="a (generation, lanes) pair")
        pcie = (require_int(gen, "pcie generation", min=1, max=7), require_int(lanes, "pcie lanes", min=1, max=32))
    rows = []
    for r in records:
        peak, link = None, ""
        if r.test.startswith("peer_") and topo is not None:
            a, b = int(r.src[3:]), int(r.dst[3:])
            nv = topo.peer_bandwidth(a, b)
            if nv > 0:
                peak, link = nv, f"{topo.relation(a, b)} ({topo.gpu_model or 'NVLink'})"
            else:
                peak, link = _model_pcie(topo, a)
                link = f"{link} x16 (no NVLink)"
            if r.direction == SUM_BOTH:
                peak *= 2
        elif r.test in ("host_to_device", "device_to_host") and pcie is not None:
            peak, link = pcie_peak(*pcie), f"PCIe Gen{pcie[0]} x{pcie[1]}"
        elif r.test == "device_local_copy":
            g, _, memory, scaled = device_hw(r.device)
            if g is not None:
                peak = g.memory_bandwidth.to("GB/s").value * memory
                link = f"{g.memory_type} ({g.memory_bandwidth.source}{scaled})"
        pct = 100 * r.gbps / peak if (peak and r.gbps is not None) else None
        rows.append(
            {
                "test": r.test,
                "src": r.src,
                "dst": r.dst,
                "measured": r.gbps,
                "peak": peak,
                "percent": pct,
                "link": link,
                "kind": r.kind,
            }
        )
    return rows


def format_peak_table(rows: list[dict[str, Any]]) -> str:
    """:func:`peak_table` as text."""
    keys = ("test", "src", "dst", "measured", "peak", "percent", "link")
    rows = require_sequence(rows, "rows", what="the rows peak_table() returned")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not all(k in row for k in keys):
            raise LabkitError(
                f"rows[{i}] is not a row of peak_table() (a dict with {', '.join(keys)}): {row!r:.60}.",
                fix="Pass what peak_table(records, ...) returned.",
            )
    out = [f"{'test':<22}{'src->dst':<14}{'GB/s':>10}{'peak':>10}{'%':>6}  link"]
    for row in rows:
        m = "N/A" if row["measured"] is None else f"{row['measured']:,.1f}"
        p = "-" if row["peak"] is None else f"{row['peak']:,.1f}"
        pc = "-" if row["percent"] is None else f"{row['percent']:.0f}"
        out.append(f"{row['test']:<22}{row['src'] + '->' + row['dst']:<14}{m:>10}{p:>10}{pc:>6}  {row['link']}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- GPU plumbing

_KERNELS = r"""
extern "C" __global__ void labkit_sm_copy(const unsigned char *src, unsigned char *dst, unsigned long long nbytes) {
    // Grid-stride copy in 16-byte words, then the tail byte by byte.
    unsigned long long nvec = nbytes / 16;
    const ulonglong2 *s = (const ulonglong2 *)src;
    ulonglong2 *d = (ulonglong2 *)dst;
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long k = i; k < nvec; k += stride) d[k] = s[k];
    for (unsigned long long k = nvec * 16 + i; k < nbytes; k += stride) dst[k] = src[k];
}
"""


def _gpu(what: str) -> Any:
    """CuPy, after checking that labkit is in gpu mode (else :class:`NoGPUError` naming ``what``)."""
    e = env()
    if not e.is_gpu:
        raise NoGPUError(
            f"{what} runs on a GPU, and labkit is in sim mode ({e.reason}).",
            fix="Run it on a machine with an NVIDIA GPU. Without one, host_sweep() measures this computer's memory "
            "and model_peer_matrix() models a DGX.",
        )
    return require("cupy", feature=what, install="pip install 'labkit[cuda12]' (or [cuda13], see README)")


def _device_count(cp: Any) -> int:
    return int(cp.cuda.runtime.getDeviceCount())


def _check_device(cp: Any, device: Any, name: str = "device") -> int:
    n = _device_count(cp)
    if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < n:
        span = f"0-{n - 1}" if n > 1 else "0"
        raise LabkitError(
            f"{name} {device!r} does not exist: this machine has {n} GPU(s), numbered {span}.",
            fix=f"Use a GPU index from {span}.",
        )
    return device


def _device_name(cp: Any, device: int) -> str:
    gpus = env().gpus
    if device < len(gpus):
        return gpus[device].name
    name = cp.cuda.runtime.getDeviceProperties(device)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def _check_device_memory(cp: Any, device: int, need: int, what: str) -> None:
    with cp.cuda.Device(device):
        free, total = cp.cuda.runtime.memGetInfo()
    if need > 0.9 * free:
        raise LabkitError(
            f"{what} needs {_fmt_bytes(need)} on GPU {device}, which has {_fmt_bytes(free)} free of {_fmt_bytes(total)}.",
            fix="Choose a smaller size (e.g. size='64MiB').",
        )


# ---------------------------------------------------------------------------------------------- NUMA placement

PCI_DEVICES = Path("/sys/bus/pci/devices")


def _parse_cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def numa_placement(bus_id: str, root: Path | None = None) -> tuple[int | None, set[int]]:
    """(NUMA node, CPUs near the device) for a PCI bus id, as Linux reports them under
    ``/sys/bus/pci/devices/<bus id>/``; (None, empty) where the OS does not say (``numa_node`` is -1 or absent)."""
    base = _sysfs_dir(bus_id, root)
    try:
        node = int((base / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None, set()
    if node < 0:
        return None, set()
    try:
        cpus = _parse_cpulist((base / "local_cpulist").read_text())
    except (OSError, ValueError):
        cpus = set()
    return node, cpus


_MPOL_DEFAULT, _MPOL_PREFERRED = 0, 1
_SYS_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}


def _sysfs_dir(bus_id: Any, root: Any) -> Path:
    """``root / bus_id`` (``root`` defaults to :data:`PCI_DEVICES`), both checked: a bus id string and a folder path."""
    bus_id = require_str(bus_id, "bus_id", fix="Give a PCI bus id such as '0000:19:00.0' (nvidia_smi_bus_ids()).")
    if root is not None and not isinstance(root, (str, os.PathLike)):
        raise LabkitError(f"root must be a folder path or None, got {root!r:.60}.")
    return (PCI_DEVICES if root is None else Path(root)) / bus_id


def _set_mempolicy(mode: int, node: int | None) -> bool:
    """Linux ``set_mempolicy`` through ``syscall`` (glibc has no wrapper); True when the kernel accepted it."""
    import platform

    number = _SYS_SET_MEMPOLICY.get(platform.machine())
    if number is None:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if node is None:
            return libc.syscall(number, mode, None, ctypes.c_ulong(0)) == 0
        mask = (ctypes.c_ulong * (node // 64 + 1))()
        mask[node // 64] = 1 << (node % 64)
        return libc.syscall(number, mode, mask, ctypes.c_ulong(64 * len(mask) + 1)) == 0
    except (OSError, AttributeError):
        return False


class _NumaLocal:
    """``with _NumaLocal(bus_id):`` this thread runs on the CPUs of the GPU's NUMA node and prefers that node's
    memory, so pinned buffers allocated inside are NUMA-local (nvbandwidth sets the CPU affinity the same way).
    :attr:`note` says what was done (or that the OS does not name a node)."""

    def __init__(self, bus_id: str, root: Path | None = None) -> None:
        self.node, self.cpus = numa_placement(bus_id, root) if bus_id else (None, set())
        self.bus_id = bus_id
        self._old_cpus: set[int] | None = None
        self._policy = False

    @property
    def note(self) -> str:
        if self.node is None:
            return "NUMA node not reported by the OS: host buffers wherever it put them"
        return f"pinned host buffers on NUMA node {self.node}, local to the GPU ({self.bus_id})"

    def __enter__(self) -> "_NumaLocal":
        if self.node is None:
            return self
        if self.cpus and hasattr(os, "sched_setaffinity"):
            try:
                self._old_cpus = os.sched_getaffinity(0)
                allowed = self.cpus & self._old_cpus
                if allowed:
                    os.sched_setaffinity(0, allowed)
            except OSError:
                self._old_cpus = None
        self._policy = _set_mempolicy(_MPOL_PREFERRED, self.node)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._policy:
            _set_mempolicy(_MPOL_DEFAULT, None)
        if self._old_cpus is not None:
            try:
                os.sched_setaffinity(0, self._old_cpus)
            except OSError:
                pass


def _bus_id(device: int) -> str:
    gpus = env().gpus
    return gpus[device].pci_bus_id if device < len(gpus) else ""


class _Arena:
    """Device memory, pinned host memory and streams allocated for one test; :meth:`close` frees them all."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.items: list[tuple[str, int, int]] = []  # (kind, pointer, device)
        self.keep: list[Any] = []  # streams, events, arrays

    def __enter__(self) -> "_Arena":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def device(self, device: int, nbytes: int) -> int:
        rt = self.cp.cuda.runtime
        with self.cp.cuda.Device(device):
            try:
                ptr = int(rt.malloc(nbytes))
            except Exception as exc:  # cudaErrorMemoryAllocation
                raise LabkitError(
                    f"could not allocate {_fmt_bytes(nbytes)} on GPU {device}: {exc}.", fix="Choose a smaller size."
                ) from None
            self.items.append(("device", ptr, device))
            rt.memset(ptr, 1, nbytes)
        return ptr

    def pinned(self, nbytes: int) -> int:
        rt = self.cp.cuda.runtime
        try:
            ptr = int(rt.hostAlloc(nbytes, rt.hostAllocPortable | rt.hostAllocMapped))
        except Exception as exc:
            raise LabkitError(
                f"could not pin {_fmt_bytes(nbytes)} of host memory: {exc}.", fix="Choose a smaller size."
            ) from None
        self.items.append(("pinned", ptr, -1))
        ctypes.memset(ptr, 1, nbytes)
        return ptr

    def pageable(self, nbytes: int) -> int:
        import numpy as np

        arr = np.ones(nbytes, dtype=np.uint8)
        self.keep.append(arr)
        return int(arr.ctypes.data)

    def stream(self, device: int) -> Any:
        with self.cp.cuda.Device(device):
            s = self.cp.cuda.Stream(non_blocking=True)
        self.keep.append(s)
        return s

    def close(self) -> None:
        rt = self.cp.cuda.runtime
        for s in self.keep:
            if hasattr(s, "synchronize"):
                try:
                    s.synchronize()
                except Exception:
                    pass
        self.keep.clear()
        while self.items:
            kind, ptr, device = self.items.pop()
            try:
                if kind == "device":
                    with self.cp.cuda.Device(device):
                        rt.free(ptr)
                else:
                    rt.freeHost(ptr)
            except Exception:
                pass


_KERNEL_CACHE: dict[tuple[int, str], Any] = {}


def _kernel(cp: Any, device: int, name: str) -> Any:
    key = (device, name)
    if key not in _KERNEL_CACHE:
        with cp.cuda.Device(device):
            _KERNEL_CACHE[key] = cp.RawKernel(_KERNELS, name)
    return _KERNEL_CACHE[key]


_ATTR_SM_COUNT = 16  # cudaDevAttrMultiProcessorCount


class _Lane:
    """One stream of copies on one device: what to queue, and the events that time it."""

    def __init__(self, cp: Any, arena: _Arena, device: int, enqueue: Callable[[Any], None]) -> None:
        self.cp, self.device, self.enqueue = cp, device, enqueue
        self.stream = arena.stream(device)
        with cp.cuda.Device(device):
            self.start, self.stop = cp.cuda.Event(), cp.cuda.Event()

    def elapsed_s(self) -> float:
        return self.cp.cuda.get_elapsed_time(self.start, self.stop) / 1e3


def _run_lanes(
    cp: Any, arena: _Arena, lanes: list[_Lane], copies: int, warmup: int, samples: int, spin: bool
) -> list[list[float]]:
    """For each lane, ``samples`` times in seconds per copy of ``copies`` copies queued at once; all lanes together.

    Every sample: with ``spin``, the first lane's stream is held by a spin kernel (:mod:`labkit.spin`) and an event
    recorded behind it; every other lane's stream waits on that event, so all lanes start together when the host
    releases the hold. Each lane then queues ``warmup`` untimed copies, its start event, ``copies`` copies and its
    stop event: nvbandwidth's method. Without ``spin`` (pageable memory: the call blocks the host), the same
    sequence runs unheld."""
    from labkit.gpu.spin import SpinHold

    spin = spin and warmup + copies <= _SPIN_LIMIT
    out: list[list[float]] = [[] for _ in lanes]
    for lane in lanes:  # lazy loading: every kernel queued behind the hold is loaded before it (labkit.spin.load)
        preload = getattr(lane.enqueue, "preload", None)
        if preload is not None:
            preload()
    hold = SpinHold(cp) if spin else None
    go = None
    if hold is not None and len(lanes) > 1:
        with cp.cuda.Device(lanes[0].device):
            go = cp.cuda.Event(disable_timing=True)
    try:
        for _ in range(samples):
            try:
                if hold is not None:
                    hold.hold(lanes[0].stream, lanes[0].device)
                    if go is not None:
                        with cp.cuda.Device(lanes[0].device):
                            go.record(lanes[0].stream)
                        for lane in lanes[1:]:
                            with cp.cuda.Device(lane.device):
                                lane.stream.wait_event(go)
                for lane in lanes:
                    with cp.cuda.Device(lane.device):
                        for _ in range(warmup):
                            lane.enqueue(lane.stream)
                        lane.start.record(lane.stream)
                        for _ in range(copies):
                            lane.enqueue(lane.stream)
                        lane.stop.record(lane.stream)
            finally:
                if hold is not None:
                    hold.release()
            for i, lane in enumerate(lanes):
                lane.stop.synchronize()
                out[i].append(lane.elapsed_s() / copies)
            if hold is not None and hold.timed_out:
                raise LabkitError(
                    "the spin kernel timed out before the copies were queued: the host was blocked, so the "
                    "samples are not valid.",
                    fix="Use fewer copies or warm-up copies per sample (copies=, warmup=); if it repeats, "
                    "another process may be holding the GPU (nvidia-smi).",
                )
    finally:
        if hold is not None:
            hold.close()
    return out


def _memcpy(cp: Any, dst: int, src: int, nbytes: int, kind: int) -> Callable[[Any], None]:
    rt = cp.cuda.runtime
    return lambda stream: rt.memcpyAsync(dst, src, nbytes, kind, stream.ptr)


def _sm_copy(cp: Any, device: int, dst: int, src: int, nbytes: int) -> Callable[[Any], None]:
    k = _kernel(cp, device, "labkit_sm_copy")
    sms = cp.cuda.runtime.deviceGetAttribute(_ATTR_SM_COUNT, device)
    grid = max(1, min(4 * sms, (nbytes + 16 * 512 - 1) // (16 * 512)))
    args = (cp.uint64(src), cp.uint64(dst), cp.uint64(nbytes))

    def run(stream: Any) -> None:
        with cp.cuda.Device(device):
            k((grid,), (512,), args, stream=stream)

    def preload() -> None:
        from labkit.gpu.spin import load

        load(cp, k, device)

    run.preload = preload  # type: ignore[attr-defined]
    return run


def _record(
    test: str,
    src: str,
    dst: str,
    nbytes: int,
    times: list[float],
    direction: str,
    method: str,
    device: str,
    counted: int | None = None,
    note: str = "",
) -> Record:
    counted = nbytes if counted is None else counted
    median = statistics.median(times)
    return Record(
        test=test,
        src=src,
        dst=dst,
        bytes=nbytes,
        gbps=counted / median / 1e9 if median > 0 else None,
        direction=direction,
        samples=tuple(times),
        method=method,
        device=device,
        counted_bytes=counted,
        note=note,
    )


def _method(how: str, copies: int, warmup: int, samples: int, spin: bool) -> str:
    if spin and warmup + copies <= _SPIN_LIMIT:
        hold = "queued behind a spin kernel"
    elif spin:  # asked for, but more operations than may wait behind it: launch overhead is in these timings
        hold = (
            f"no spin kernel ({warmup + copies} operations per sample, more than the {_SPIN_LIMIT} a hold may queue; "
            "launch overhead is timed)"
        )
    else:
        hold = "no spin kernel (the call blocks the host)"
    return (
        f"{how}; per sample {warmup} warm-up and {copies} timed copies {hold}, CUDA events; median of {samples} "
        "samples, with their CV"
    )


def _validate_run(size: int | str, copies: int, warmup: int, samples: int) -> tuple[int, int, int, int]:
    return (
        parse_size(size),
        _positive_int(copies, "copies"),
        _positive_int(warmup, "warmup", 0),
        _positive_int(samples, "samples"),
    )


# ---------------------------------------------------------------------------------------------- GPU tests


def _host_device(direction: str, device: int, size: int | str, memory: str, copies: int, warmup: int, samples: int) -> Record:
    what = f"{direction}({memory!r})"
    cp = _gpu(what)
    if memory not in ("pinned", "pageable"):
        raise LabkitError(f"host memory is 'pinned' or 'pageable', not {memory!r}.")
    nbytes, copies, warmup, samples = _validate_run(size, copies, warmup, samples)
    device = _check_device(cp, device)
    _check_device_memory(cp, device, nbytes, what)
    _check_host_memory(nbytes, what)
    rt = cp.cuda.runtime
    near = _NumaLocal(_bus_id(device))
    with near, _Arena(cp) as arena:
        dev = arena.device(device, nbytes)
        host = arena.pinned(nbytes) if memory == "pinned" else arena.pageable(nbytes)
        if direction == "host_to_device":
            op = _memcpy(cp, dev, host, nbytes, rt.memcpyHostToDevice)
            src, dst = "CPU", f"GPU{device}"
        else:
            op = _memcpy(cp, host, dev, nbytes, rt.memcpyDeviceToHost)
            src, dst = f"GPU{device}", "CPU"
        spin = memory == "pinned"  # a pageable copy blocks the host: it cannot wait behind a spin kernel
        (times,) = _run_lanes(cp, arena, [_Lane(cp, arena, device, op)], copies, warmup, samples, spin)
    return _record(
        direction,
        src,
        dst,
        nbytes,
        times,
        ONE_WAY,
        _method(f"cudaMemcpyAsync, copy engine, {memory} host memory; {near.note}", copies, warmup, samples, spin),
        _device_name(cp, device),
        note=memory,
    )


def host_to_device(
    device: int = 0,
    size: int | str = DEFAULT_SIZE,
    memory: str = "pinned",
    *,
    copies: int = DEFAULT_COPIES,
    warmup: int = DEFAULT_WARMUP,
    samples: int = DEFAULT_SAMPLES,
) -> Record:
    """Host -> GPU ``device`` bandwidth through the copy engine, from ``"pinned"`` or ``"pageable"`` host memory."""
    return _host_device("host_to_device", device, size, memory, copies, warmup, samples)


def device_to_host(
    device: int = 0,
    size: int | str = DEFAULT_SIZE,
    memory: str = "pinned",
    *,
    copies: int = DEFAULT_COPIES,
    warmup: int = DEFAULT_WARMUP,
    samples: int = DEFAULT_SAMPLES,
) -> Record:
    """GPU ``device`` -> host bandwidth through the copy engine, into ``"pinned"`` or ``"pageable"`` host memory."""
    return _host_device("device_to_host", device, size, memory, copies, warmup, samples)


def device_local_copy(
    device: int = 0,
    size: int | str = DEFAULT_SIZE,
    method: str = "ce",
    *,
    copies: int = DEFAULT_COPIES,
    warmup: int = DEFAULT_WARMUP,
    samples: int = DEFAULT_SAMPLES,
) -> Record:
    """A copy inside one GPU's memory: ``method="ce"`` (cudaMemcpyAsync, copy engine) or ``"sm"`` (a kernel).

    ``gbps`` counts the bytes copied once (nvbandwidth's convention, :data:`COPY_ONCE`); ``read_write_gbps`` counts
    bytes read + bytes written (2 x size, bandwidthTest's convention), which is what compares with the memory's
    datasheet bandwidth."""
    cp = _gpu(f"device_local_copy(method={method!r})")
    if method not in ("ce", "sm"):
        raise LabkitError(f"method is 'ce' (copy engine) or 'sm' (kernel), not {method!r}.")
    nbytes, copies, warmup, samples = _validate_run(size, copies, warmup, samples)
    device = _check_device(cp, device)
    _check_device_memory(cp, device, 2 * nbytes, "device_local_copy")
    with _Arena(cp) as arena:
        a, b = arena.device(device, nbytes), arena.device(device, nbytes)
        if method == "ce":
            op, how = (
                _memcpy(cp, b, a, nbytes, cp.cuda.runtime.memcpyDeviceToDevice),
                "cudaMemcpyAsync device to device, copy engine",
            )
        else:
            op, how = _sm_copy(cp, device, b, a, nbytes), "SM copy kernel, 16-byte words, grid-stride"
        (times,) = _run_lanes(cp, arena, [_Lane(cp, arena, device, op)], copies, warmup, samples, True)
    return _record(
        "device_local_copy",
        f"GPU{device}",
        f"GPU{device}",
        nbytes,
        times,
        COPY_ONCE,
        _method(how, copies, warmup, samples, True),
        _device_name(cp, device),
        note=method,
    )


def can_access_peer() -> list[list[bool]]:
    """``m[i][j]``: may GPU ``i`` access GPU ``j``'s memory directly (cudaDeviceCanAccessPeer)."""
    cp = _gpu("can_access_peer()")
    n = _device_count(cp)
    return [[i != j and bool(cp.cuda.runtime.deviceCanAccessPeer(i, j)) for j in range(n)] for i in range(n)]


def _cudart() -> Any:
    try:
        from cuda.bindings import runtime as cudart  # cuda-bindings >= 12.6
    except ImportError:
        try:
            from cuda import cudart  # type: ignore[no-redef]  # older cuda-python
        except ImportError:
            raise LabkitError(
                "switching peer access off needs the package cuda-bindings.",
                fix="pip install cuda-bindings (it comes with labkit's requirements).",
            ) from None
    return cudart


def _set_peer_access(cp: Any, src: int, dst: int, enabled: bool) -> bool:
    """Enable or disable ``src``'s access to ``dst``'s memory; return whether it was enabled before.

    This goes through ``cuda.bindings`` (the same primary context as CuPy's), whose calls return the error code
    instead of raising, so "already enabled" and "not enabled" are told apart from a real failure; CuPy 14's
    ``runtime.deviceDisablePeerAccess`` would do too, but raises for both. Every call's code is checked, the
    ``cudaSetDevice`` first: on a failed switch the enable or disable would apply to the wrong GPU."""
    from labkit.gpu.errors import PEER_UNAVAILABLE, GpuError

    cudart = _cudart()
    err_t = cudart.cudaError_t

    def text_of(err: Any) -> str:
        _, text = cudart.cudaGetErrorString(err)
        return text.decode() if isinstance(text, bytes) else str(text)

    current = cp.cuda.runtime.getDevice()
    try:
        (err,) = cudart.cudaSetDevice(src)
        if err != err_t.cudaSuccess:
            raise GpuError(
                f"could not make GPU{src} current to {'enable' if enabled else 'disable'} its peer access to "
                f"GPU{dst}: {text_of(err)}.",
                kind=PEER_UNAVAILABLE,
                fix="Check that the GPU is visible (CUDA_VISIBLE_DEVICES) and healthy (nvidia-smi).",
            )
        if enabled:
            (err,) = cudart.cudaDeviceEnablePeerAccess(dst, 0)
            if err == err_t.cudaErrorPeerAccessAlreadyEnabled:
                return True
            before = False
        else:
            (err,) = cudart.cudaDeviceDisablePeerAccess(dst)
            if err == err_t.cudaErrorPeerAccessNotEnabled:
                return False
            before = True
        if err != err_t.cudaSuccess:
            raise GpuError(
                f"could not {'enable' if enabled else 'disable'} peer access GPU{src} -> GPU{dst}: {text_of(err)}.",
                kind=PEER_UNAVAILABLE,
                fix="Check p2p_status() or `nvidia-smi topo -p2p r` for the reason; peer_matrix(peer_access=False) "
                "still measures, staged through host memory.",
            )
        return before
    finally:
        cp.cuda.runtime.setDevice(current)


def peer_matrix(
    size: int | str = DEFAULT_SIZE,
    *,
    bidirectional: bool = False,
    peer_access: bool = True,
    method: str = "ce",
    copies: int = DEFAULT_COPIES,
    warmup: int = DEFAULT_WARMUP,
    samples: int = DEFAULT_SAMPLES,
) -> list[Record]:
    """Bandwidth between every pair of GPUs: one record per ordered pair (source -> destination).

    ``bidirectional=True`` runs both directions of a pair at once and reports each direction on its own
    (nvbandwidth's convention; :func:`sum_convention` gives p2pBandwidthLatencyTest's sums).
    ``peer_access=True`` enables direct access (NVLink or PCIe peer-to-peer); ``False`` disables it explicitly, so the
    driver stages the copy through host memory. ``method="sm"`` copies with a kernel on the source GPU writing
    into the peer's memory (needs peer access). Pairs that cannot run get ``gbps=None`` and the reason in ``note``.
    Peer access is put back as it was."""
    cp = _gpu("peer_matrix()")
    if method not in ("ce", "sm"):
        raise LabkitError(f"method is 'ce' (copy engine) or 'sm' (kernel), not {method!r}.")
    if method == "sm" and not peer_access:
        raise LabkitError("an SM copy to another GPU needs peer access.", fix="Use method='ce' with peer_access=False.")
    nbytes, copies, warmup, samples = _validate_run(size, copies, warmup, samples)
    n = _device_count(cp)
    if n < 2:
        raise NoGPUError(
            f"peer-to-peer needs two GPUs; this machine has {n} ({_device_name(cp, 0)}).",
            fix="Run on a multi-GPU machine (a DGX); here, model_peer_matrix('DGX-1 (V100)') shows a model.",
        )
    for d in range(n):
        _check_device_memory(cp, d, 2 * nbytes if bidirectional else nbytes, "peer_matrix")
    access = [[i != j and bool(cp.cuda.runtime.deviceCanAccessPeer(i, j)) for j in range(n)] for i in range(n)]
    reasons = _p2p_reasons_safe()
    test = "peer_bidirectional" if bidirectional else "peer_unidirectional"
    how = "SM copy kernel writing to the peer" if method == "sm" else "cudaMemcpyPeerAsync, copy engine, stream on the source GPU"
    how += ", peer access enabled" if peer_access else ", peer access disabled (staged through host memory by the driver)"
    out: list[Record] = []
    done: set[tuple[int, int]] = set()
    for i in range(n):
        for j in range(n):
            if i == j or (bidirectional and (j, i) in done):
                continue
            done.add((i, j))
            pairs = [(i, j), (j, i)] if bidirectional else [(i, j)]
            if peer_access and not all(access[s][d] for s, d in pairs):
                why = reasons.get((i, j)) or f"cudaDeviceCanAccessPeer({i}, {j}) = 0"
                for s, d in pairs:
                    out.append(
                        Record(
                            test,
                            f"GPU{s}",
                            f"GPU{d}",
                            nbytes,
                            None,
                            PER_DIRECTION if bidirectional else ONE_WAY,
                            (),
                            how,
                            _device_name(cp, s),
                            note=f"peer access unsupported: {why}",
                        )
                    )
                continue
            out += _peer_pairs(cp, pairs, nbytes, peer_access, method, copies, warmup, samples, test, how, bidirectional)
    return out


def _peer_pairs(
    cp: Any,
    pairs: list[tuple[int, int]],
    nbytes: int,
    peer_access: bool,
    method: str,
    copies: int,
    warmup: int,
    samples: int,
    test: str,
    how: str,
    bidirectional: bool,
) -> list[Record]:
    before = {p: _set_peer_access(cp, p[0], p[1], peer_access) for p in pairs}
    try:
        with _Arena(cp) as arena:
            lanes = []
            for s, d in pairs:
                src, dst = arena.device(s, nbytes), arena.device(d, nbytes)
                if method == "sm":
                    op = _sm_copy(cp, s, dst, src, nbytes)
                else:
                    rt = cp.cuda.runtime
                    op = lambda stream, dst=dst, d=d, src=src, s=s: rt.memcpyPeerAsync(dst, d, src, s, nbytes, stream.ptr)
                lanes.append(_Lane(cp, arena, s, op))
            times = _run_lanes(cp, arena, lanes, copies, warmup, samples, True)
    finally:
        for (s, d), was in before.items():
            if was != peer_access:
                _set_peer_access(cp, s, d, was)
    return [
        _record(
            test,
            f"GPU{s}",
            f"GPU{d}",
            nbytes,
            t,
            PER_DIRECTION if bidirectional else ONE_WAY,
            _method(how, copies, warmup, samples, True),
            _device_name(cp, s),
        )
        for (s, d), t in zip(pairs, times)
    ]


def latency(
    test: str = "host_to_device",
    *,
    device: int = 0,
    peer: int = 1,
    size: int | str = 4,
    copies: int = 100,
    samples: int = DEFAULT_SAMPLES,
) -> Record:
    """Time per small copy (``size`` bytes, default 4) when ``copies`` are queued back to back: the fixed cost of a copy.

    ``test``: ``"host_to_device"``, ``"device_to_host"`` (pinned memory) or ``"peer"`` (``device`` -> ``peer``,
    peer access enabled). The record's ``latency_us`` is the figure; its GB/s is tiny, as it should be."""
    cp = _gpu(f"latency({test!r})")
    if test not in ("host_to_device", "device_to_host", "peer"):
        raise LabkitError(f"latency test is 'host_to_device', 'device_to_host' or 'peer', not {test!r}.")
    nbytes = parse_size(size)
    copies = min(_positive_int(copies, "copies"), _SPIN_LIMIT - _LATENCY_WARMUP)  # warm-up and copies all behind the hold
    samples = _positive_int(samples, "samples")
    device = _check_device(cp, device)
    rt = cp.cuda.runtime
    before = None
    if test == "peer":
        peer = _check_device(cp, peer, "peer")
        if peer == device:
            raise LabkitError("a peer latency needs two different GPUs.", fix="Pass device and peer with different indices.")
        if not rt.deviceCanAccessPeer(device, peer):
            why = _p2p_reasons_safe().get((device, peer)) or f"cudaDeviceCanAccessPeer({device}, {peer}) = 0"
            raise LabkitError(f"GPU{device} cannot access GPU{peer} directly: {why}.")
        before = _set_peer_access(cp, device, peer, True)
    try:
        with _Arena(cp) as arena:
            a = arena.device(device, nbytes)
            if test == "host_to_device":
                op, src, dst = _memcpy(cp, a, arena.pinned(nbytes), nbytes, rt.memcpyHostToDevice), "CPU", f"GPU{device}"
            elif test == "device_to_host":
                op, src, dst = _memcpy(cp, arena.pinned(nbytes), a, nbytes, rt.memcpyDeviceToHost), f"GPU{device}", "CPU"
            else:
                b = arena.device(peer, nbytes)
                op = lambda stream: rt.memcpyPeerAsync(b, peer, a, device, nbytes, stream.ptr)
                src, dst = f"GPU{device}", f"GPU{peer}"
            (times,) = _run_lanes(cp, arena, [_Lane(cp, arena, device, op)], copies, _LATENCY_WARMUP, samples, True)
    finally:
        if before is False:
            _set_peer_access(cp, device, peer, False)
    return _record(
        f"latency_{test}",
        src,
        dst,
        nbytes,
        times,
        ONE_WAY,
        _method(
            f"{_fmt_bytes(nbytes)} cudaMemcpyAsync copies back to back; time per copy", copies, _LATENCY_WARMUP, samples, True
        ),
        _device_name(cp, device),
    )


#: How each sweep copies (the label of its records).
SWEEP_METHODS = {
    "host_to_device": "cudaMemcpyAsync, copy engine, pinned host memory",
    "device_to_host": "cudaMemcpyAsync, copy engine, pinned host memory",
    "device_local_copy": "cudaMemcpyAsync device to device, copy engine, one GPU's memory",
    "peer": "cudaMemcpyPeerAsync, copy engine, peer access enabled",
}


def _fit_host_memory(sizes: list[int], fraction: float = 0.5) -> list[int]:
    """The default sweep's sizes that :func:`_check_host_memory` allows now: those up to :data:`DEFAULT_SIZE` always,
    larger ones while they fit ``fraction`` of MemAvailable (a VM whose memory starts small gets a shorter sweep)."""
    avail = host_available_bytes()
    return [n for n in sizes if n <= DEFAULT_SIZE or avail is None or n <= fraction * avail]


def size_sweep(
    test: str = "host_to_device",
    sizes: Sequence[int | str] | None = None,
    *,
    device: int = 0,
    peer: int = 1,
    samples: int = DEFAULT_SAMPLES,
) -> list[Record]:
    """GB/s from 1 KiB to 1 GiB (or ``sizes``): small copies are latency-bound, large ones bandwidth-bound. The default
    host sweeps leave out sizes above 512 MiB that half of the host's available memory cannot hold.

    ``test``: ``"host_to_device"``, ``"device_to_host"`` (pinned), ``"device_local_copy"`` (copy engine) or ``"peer"``.
    Buffers are allocated once at the largest size; more copies are queued for small sizes."""
    cp = _gpu(f"size_sweep({test!r})")
    if test not in ("host_to_device", "device_to_host", "device_local_copy", "peer"):
        raise LabkitError(f"sweep test is 'host_to_device', 'device_to_host', 'device_local_copy' or 'peer', not {test!r}.")
    sizes_b = sorted({parse_size(s) for s in (sizes if sizes is not None else SWEEP_SIZES)})
    if sizes is None and test in ("host_to_device", "device_to_host"):
        sizes_b = _fit_host_memory(sizes_b)  # the default sweep stops where host memory does, it is not refused
    samples = _positive_int(samples, "samples")
    device = _check_device(cp, device)
    top = sizes_b[-1]
    rt = cp.cuda.runtime
    if test == "peer":
        peer = _check_device(cp, peer, "peer")
        if peer == device:
            raise LabkitError("a peer sweep needs two different GPUs.")
        _check_device_memory(cp, peer, top, "size_sweep('peer')")
    _check_device_memory(cp, device, top * (2 if test == "device_local_copy" else 1), f"size_sweep({test!r})")
    if test in ("host_to_device", "device_to_host"):
        _check_host_memory(top, f"size_sweep({test!r})")
    before = _set_peer_access(cp, device, peer, True) if test == "peer" else None
    out = []
    try:
        with _NumaLocal(_bus_id(device)), _Arena(cp) as arena:
            a = arena.device(device, top)
            b = {"host_to_device": arena.pinned, "device_to_host": arena.pinned}.get(test, lambda n: 0)(top)
            if test == "device_local_copy":
                b = arena.device(device, top)
            elif test == "peer":
                b = arena.device(peer, top)
            for nbytes in sizes_b:
                # warm-up and timed copies all fit behind the spin kernel, however small the copy
                copies = int(min(_SPIN_LIMIT - _SWEEP_WARMUP, max(DEFAULT_COPIES, (64 * MiB) // nbytes)))
                if test == "host_to_device":
                    op, src, dst, counted = _memcpy(cp, a, b, nbytes, rt.memcpyHostToDevice), "CPU", f"GPU{device}", nbytes
                elif test == "device_to_host":
                    op, src, dst, counted = _memcpy(cp, b, a, nbytes, rt.memcpyDeviceToHost), f"GPU{device}", "CPU", nbytes
                elif test == "device_local_copy":
                    op, src, dst, counted = (
                        _memcpy(cp, b, a, nbytes, rt.memcpyDeviceToDevice),
                        f"GPU{device}",
                        f"GPU{device}",
                        nbytes,
                    )
                else:
                    op = lambda stream, n=nbytes: rt.memcpyPeerAsync(b, peer, a, device, n, stream.ptr)
                    src, dst, counted = f"GPU{device}", f"GPU{peer}", nbytes
                (times,) = _run_lanes(cp, arena, [_Lane(cp, arena, device, op)], copies, _SWEEP_WARMUP, samples, True)
                out.append(
                    _record(
                        test if test != "peer" else "peer_unidirectional",
                        src,
                        dst,
                        nbytes,
                        times,
                        COPY_ONCE if test == "device_local_copy" else ONE_WAY,
                        _method(SWEEP_METHODS[test], copies, _SWEEP_WARMUP, samples, True),
                        _device_name(cp, device),
                        counted=counted,
                    )
                )
    finally:
        if before is False:
            _set_peer_access(cp, device, peer, False)
    return out


# ---------------------------------------------------------------------------------------------- discovery (NVML, nvidia-smi)

_P2P_CAPS = ("READ", "WRITE", "NVLINK", "ATOMICS")
_P2P_STATUS_TEXT = {
    "NVML_P2P_STATUS_OK": "OK",
    "NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED": "the chipset does not support peer-to-peer",
    "NVML_P2P_STATUS_GPU_NOT_SUPPORTED": "the GPU does not support peer-to-peer",
    "NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED": "the PCIe topology (I/O hub) does not support peer-to-peer",
    "NVML_P2P_STATUS_DISABLED_BY_REGKEY": "peer-to-peer is disabled by a driver registry key",
    "NVML_P2P_STATUS_NOT_SUPPORTED": "peer-to-peer is not supported here",
    "NVML_P2P_STATUS_UNKNOWN": "unknown (NVML could not tell)",
}


def _nvml() -> Any:
    from labkit.hw import nvml as nv

    return nv.load()


def p2p_status() -> dict[tuple[int, int], dict[str, str]]:
    """NVML's peer-to-peer status of every ordered pair of CUDA devices, per capability (READ, WRITE, NVLINK,
    ATOMICS): ``"OK"`` or the reason in words. Devices are matched to NVML by UUID / PCI bus id."""
    _gpu("p2p_status()")
    return _p2p_status_module(_nvml(), env().gpus)


def _p2p_status_module(nvml: Any, gpus: Sequence[Any]) -> dict[tuple[int, int], dict[str, str]]:
    from labkit.hw import nvml as nv

    codes = {nv.constant(nvml, k, -1): v for k, v in _P2P_STATUS_TEXT.items() if hasattr(nvml, k)}
    with nv.session(nvml):
        hs = nv.handles_for(nvml, gpus)
        n = len(hs)
        out: dict[tuple[int, int], dict[str, str]] = {}
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                row = {}
                for cap in _P2P_CAPS:
                    if not hasattr(nvml, f"NVML_P2P_CAPS_INDEX_{cap}"):
                        continue
                    try:
                        code = nvml.nvmlDeviceGetP2PStatus(hs[i], hs[j], nv.cap_index(nvml, cap))
                        row[cap] = codes.get(code, f"status {code}")
                    except nvml.NVMLError as exc:
                        row[cap] = f"NVML error: {exc}"
                out[(i, j)] = row
        return out


def _p2p_reasons_safe() -> dict[tuple[int, int], str]:
    """For each pair whose READ capability is not OK, NVML's reason; empty if NVML cannot be asked."""
    try:
        status = p2p_status()
    except LabkitError:
        return {}
    return {p: f"NVML says {row.get('READ')}" for p, row in status.items() if row.get("READ") not in (None, "OK")}


def active_nvlinks() -> dict[int, int]:
    """Active NVLinks per CUDA device (NVML ``nvmlDeviceGetNvLinkState``); 0 for a GPU without NVLink."""
    _gpu("active_nvlinks()")
    return _active_nvlinks_module(_nvml(), env().gpus)


def _active_nvlinks_module(nvml: Any, gpus: Sequence[Any]) -> dict[int, int]:
    from labkit.hw import nvml as nv

    with nv.session(nvml):
        enabled = nv.constant(nvml, "NVML_FEATURE_ENABLED", 1)
        out = {}
        for g, h in zip(gpus, nv.handles_for(nvml, gpus)):
            k = 0
            for link in range(nv.constant(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    k += int(nvml.nvmlDeviceGetNvLinkState(h, link) == enabled)
                except nvml.NVMLError:  # NOT_SUPPORTED / INVALID_ARGUMENT: no more links
                    break
            out[g.index] = k
        return out


def pcie_link(device: int = 0) -> dict[str, Any]:
    """The PCIe link of GPU ``device``: current and maximum generation and width, and the theoretical
    per-direction bandwidth of the maximum (GB/s, from :mod:`labkit.hw`). An idle GPU may show a lower current
    generation: it saves power until traffic arrives. From NVML; without NVML, from Linux's
    ``/sys/bus/pci/devices/<bus id>/`` (``source`` says which); neither: :class:`~labkit.nvml.NvmlUnavailable`."""
    from labkit.hw import nvml as nv

    cp = _gpu("pcie_link()")
    device = _check_device(cp, device)
    gpu = env().gpus[device]
    try:
        return _pcie_link_module(_nvml(), gpu)
    except nv.NvmlUnavailable as exc:
        found = pcie_from_sysfs(gpu.pci_bus_id)
        if found is None:
            raise nv.NvmlUnavailable(
                f"{exc} Linux's /sys/bus/pci/devices/{gpu.pci_bus_id or '?'} does not give the link either.", fix=exc.fix
            ) from None
        return found


_GTS_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_from_sysfs(bus_id: str, root: Path | None = None) -> dict[str, Any] | None:
    """The PCIe link as Linux reports it (``max_link_speed`` "32.0 GT/s PCIe", ``max_link_width`` "16", and the
    current ones), in :func:`pcie_link`'s form; None when the files are not there."""
    base = _sysfs_dir(bus_id, root)
    try:

        def read(kind: str) -> tuple[int, int]:
            speed = float((base / f"{kind}_link_speed").read_text().split()[0])
            return _GTS_TO_GEN[speed], int((base / f"{kind}_link_width").read_text().strip())

        cur, top = read("current"), read("max")
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return {
        "current": cur,
        "max": top,
        "peak_gbps": pcie_peak(*top),
        "source": f"Linux sysfs ({base}); x16 figures from labkit.hw",
    }


def _pcie_link_module(nvml: Any, gpu: Any) -> dict[str, Any]:
    from labkit.hw import nvml as nv

    with nv.session(nvml):
        h = nv.handle_for(nvml, gpu)
        cur_gen, cur_w = nvml.nvmlDeviceGetCurrPcieLinkGeneration(h), nvml.nvmlDeviceGetCurrPcieLinkWidth(h)
        max_gen, max_w = nvml.nvmlDeviceGetMaxPcieLinkGeneration(h), nvml.nvmlDeviceGetMaxPcieLinkWidth(h)
    return {
        "current": (int(cur_gen), int(cur_w)),
        "max": (int(max_gen), int(max_w)),
        "peak_gbps": pcie_peak(int(max_gen), int(max_w)),
        "source": "NVML; x16 figures from labkit.hw",
    }


def nvidia_smi_topo() -> str | None:
    """The output of ``nvidia-smi topo -m``, or None when nvidia-smi is not there or fails."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        res = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 and res.stdout.strip() else None


def nvidia_smi_bus_ids() -> dict[int, str] | None:
    """nvidia-smi's index -> PCI bus id of each GPU (``nvidia-smi --query-gpu=index,pci.bus_id``): the key from
    ``nvidia-smi topo -m``'s numbering (NVML's) to CUDA's. None when nvidia-smi is not there or fails."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        res = subprocess.run(
            [exe, "--query-gpu=index,pci.bus_id", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_smi_bus_ids(res.stdout) if res.returncode == 0 else None


def parse_smi_bus_ids(text: str) -> dict[int, str] | None:
    """``"0, 00000000:19:00.0"`` lines -> ``{0: "00000000:19:00.0"}``; None when a line is not of that form."""
    text = require_str(
        text, "text", empty=True, fix="Pass the output of nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader."
    )
    out: dict[int, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        index, _, bus = line.partition(",")
        if not index.strip().isdigit() or not bus.strip():
            return None
        out[int(index)] = bus.strip()
    return out or None


def discover() -> dict[str, Any]:
    """This machine's GPU topology: ``{"nvml": Topology, "nvidia_smi": Topology | None, "active_nvlinks": {...},
    "p2p": {...}, "pcie": {...}, "skipped": {section: why}}``. Needs ``gpu`` mode. A section NVML cannot answer is
    None and ``skipped`` says why; the others are still there."""
    _gpu("discover()")
    from labkit.hw import nvml as nv
    from labkit.hw import topology

    e = env()
    out: dict[str, Any] = {"skipped": {}}
    sections: dict[str, Callable[[], Any]] = {
        "nvml": topology.from_nvml,
        "active_nvlinks": active_nvlinks,
        "p2p": p2p_status,
        "pcie": lambda: {i: pcie_link(i) for i in range(e.gpu_count)},
    }
    for key, fn in sections.items():
        try:
            out[key] = fn()
        except LabkitError as exc:
            out[key] = None
            out["skipped"][key] = nv.skipped(key, exc)
    text = nvidia_smi_topo()
    smi = None
    if text:
        try:
            smi = topology.from_nvidia_smi(text, gpu=e.device_name)
        except LabkitError:  # a GPU labkit.hw has no record of: the wiring without bandwidths
            smi = topology.from_nvidia_smi(text)
    if smi is not None:  # nvidia-smi numbers GPUs as NVML does; measurements use CUDA's numbers
        buses = nvidia_smi_bus_ids()
        if buses is not None:
            smi = topology.in_cuda_order(smi, buses, [g.pci_bus_id for g in e.gpus])
        else:
            smi.notes.append(
                "GPUs are numbered as nvidia-smi numbers them (NVML's order), which need not be CUDA's: "
                "nvidia-smi did not give the PCI bus ids to match them."
            )
    out["nvidia_smi"] = smi
    return out


# ---------------------------------------------------------------------------------------------- gpu-check targets


def _best_library_copy(cp: Any, nbytes: int, samples: int) -> list[tuple[str, float]]:
    """GB/s (bytes copied, counted once) of the copies other libraries offer on GPU 0: CuPy's elementwise copy and,
    if importable, PyTorch's ``copy_``; each sample is 16 copies between one pair of events, the median reported."""
    out = []
    n = nbytes // 4
    a, b = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
    try:
        for _ in range(3):
            b[...] = a
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(samples):
            s, t = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            for _ in range(DEFAULT_COPIES):
                b[...] = a
            t.record()
            t.synchronize()
            times.append(cp.cuda.get_elapsed_time(s, t) / 1e3 / DEFAULT_COPIES)
        out.append(("cupy b[...] = a", n * 4 / statistics.median(times) / 1e9))
    finally:
        del a, b
        cp.get_default_memory_pool().free_all_blocks()
    try:
        import torch  # noqa: PLC0415 - optional
    except ImportError:
        return out
    if not torch.cuda.is_available():
        return out
    x = torch.ones(n, device="cuda:0")
    y = torch.empty_like(x)
    try:
        for _ in range(3):
            y.copy_(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(samples):
            s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(DEFAULT_COPIES):
                y.copy_(x)
            t.record()
            t.synchronize()
            times.append(s.elapsed_time(t) / 1e3 / DEFAULT_COPIES)
        out.append(("torch y.copy_(x)", n * 4 / statistics.median(times) / 1e9))
    finally:
        del x, y
        torch.cuda.empty_cache()
    return out


def _target(
    name: str,
    target: str,
    value: float | None,
    threshold: float,
    passed: bool | None,
    dev: str,
    details: dict[str, Any],
    unit: str = "%",
    why: str | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "target": target,
        "value": value,
        "threshold": threshold,
        "unit": unit,
        "passed": passed,
        "device": dev,
        "details": details,
        **({"error": why} if why else {}),
    }


def gpu_check_suite(size: int | str = DEFAULT_SIZE) -> list[dict[str, Any]]:
    """The bandwidth targets ``make gpu-check`` records, one dict each:
    ``{"name", "target", "value", "threshold", "unit", "passed", "device", "details"}`` (and ``"error"`` when a
    target could not be measured: ``passed`` is then None and the other targets are still there).

    1. labkit's device-to-device copy (best of copy engine and SM kernel) within 5% of the best copy CuPy or PyTorch
       achieves on GPU 0 (both counted once); 2. five repeated runs of it spread less than 3%; 3. pinned host->device
       at least 80% of the PCIe link's theoretical rate (generation and width from NVML)."""
    from labkit.gpu.errors import explain

    cp = _gpu("gpu_check_suite()")
    nbytes = parse_size(size)
    dev = _device_name(cp, 0)
    results = []
    d2d = "bandwidth.d2d-vs-best-library"
    try:
        ce, sm = device_local_copy(0, nbytes, "ce"), device_local_copy(0, nbytes, "sm")
        ours = max(ce.gbps or 0.0, sm.gbps or 0.0)
        others = _best_library_copy(cp, nbytes, DEFAULT_SAMPLES)
        best_name, best = max(others, key=lambda kv: kv[1]) if others else ("none", 0.0)
        results.append(
            _target(
                d2d,
                "labkit's device-to-device GB/s >= 95% of the best library copy",
                100 * ours / best if best else None,
                95.0,
                bool(best) and ours >= 0.95 * best,
                dev,
                {
                    "labkit_ce_gbps": ce.gbps,
                    "labkit_sm_gbps": sm.gbps,
                    "labkit_ce_cv": ce.cv,
                    "libraries": dict(others),
                    "best": best_name,
                    "counting": COPY_ONCE,
                    "size": nbytes,
                },
            )
        )
        runs = [device_local_copy(0, nbytes, "ce" if (ce.gbps or 0) >= (sm.gbps or 0) else "sm").gbps or 0.0 for _ in range(5)]
        spread = (max(runs) - min(runs)) / statistics.median(runs) if statistics.median(runs) > 0 else None
        results.append(
            _target(
                "bandwidth.d2d-repeatability",
                "five runs of the device-to-device figure spread < 3%",
                None if spread is None else 100 * spread,
                3.0,
                spread is not None and spread < 0.03,
                dev,
                {"runs_gbps": runs},
            )
        )
    except Exception as exc:  # noqa: BLE001 - one failing target must not lose the others
        why = str(explain(exc, "the device-to-device copy"))
        results.append(
            _target(d2d, "labkit's device-to-device GB/s >= 95% of the best library copy", None, 95.0, None, dev, {}, why=why)
        )
        results.append(
            _target(
                "bandwidth.d2d-repeatability",
                "five runs of the device-to-device figure spread < 3%",
                None,
                3.0,
                None,
                dev,
                {},
                why=why,
            )
        )
    h2d_name, h2d_target = "bandwidth.h2d-pinned-vs-pcie", "pinned host->device >= 80% of the PCIe link's theoretical rate"
    try:
        h2d = host_to_device(0, nbytes, "pinned")
    except Exception as exc:  # noqa: BLE001
        results.append(_target(h2d_name, h2d_target, None, 80.0, None, dev, {}, why=str(explain(exc, "host_to_device"))))
        return results
    try:
        link = pcie_link(0)
    except LabkitError as exc:  # no NVML: the measurement stays, the judgement says why it is missing
        from labkit.hw import nvml as nv

        results.append(
            _target(
                h2d_name,
                h2d_target,
                None,
                80.0,
                None,
                dev,
                {"h2d_gbps": h2d.gbps, "h2d_cv": h2d.cv},
                why=nv.skipped("the PCIe link rate", exc),
            )
        )
        return results
    pct = 100 * (h2d.gbps or 0.0) / link["peak_gbps"]
    details = {"h2d_gbps": h2d.gbps, "h2d_cv": h2d.cv, "method": h2d.method, "pcie": link}
    if pct > 100.0:  # faster than the link can carry: the link reported is not the link the copies used
        gen, lanes = link["max"]
        rec = _target(
            h2d_name,
            h2d_target,
            pct,
            80.0,
            None,
            dev,
            details,
            why=f"measured {h2d.gbps:.1f} GB/s, above the {link['peak_gbps']:.1f} GB/s a PCIe Gen{gen} x{lanes} "
            f"link can carry ({link['source']}): the reported link is wrong (in a VM the link the "
            "hypervisor shows need not be the physical one), so the percentage is not judged",
        )
        rec["implausible"] = True
        results.append(rec)
        return results
    results.append(_target(h2d_name, h2d_target, pct, 80.0, pct >= 80.0, dev, details))
    return results


# ---------------------------------------------------------------------------------------------- CLI


def cli(argv: list[str]) -> int:
    """``labkit bench bandwidth [--json] [--sizes S ...] [--size S] [--system NAME] [--samples N]``.

    GPU: host<->device (pinned), device-local copy, peer matrices (when there are two GPUs or more), a size sweep of
    host->device when ``--sizes`` is given. Without a GPU: this computer's memory (host copy and triad over the
    sizes) and the modelled peer matrix of ``--system``, each labelled."""
    ap = argparse.ArgumentParser(prog="labkit bench bandwidth", description="nvbandwidth-style measurements (GB/s = 10^9 B/s).")
    ap.add_argument("--json", action="store_true", help="print the records as JSON")
    ap.add_argument("--sizes", nargs="+", help="sizes for the sweep, e.g. 4KiB 1MiB 64MiB (commas work too)")
    ap.add_argument("--size", default=None, help="buffer size of the matrix tests (default 512MiB on a GPU)")
    ap.add_argument("--system", default="DGX-1 (V100)", help="system for the modelled peer matrix (sim mode)")
    ap.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="samples per figure (median reported)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        sizes = [s for item in (args.sizes or []) for s in item.split(",") if s.strip()] or None
        records, blocks = _cli_records(args, sizes)
    except LabkitError as exc:
        print(f"labkit bench bandwidth: {exc}", file=sys.stderr)
        return 2
    if args.json:
        e = env()
        print(to_json(records, mode=e.mode, device=e.device_name))
    else:
        print("\n\n".join(blocks))
    return 0


def _cli_records(args: argparse.Namespace, sizes: list[str] | None) -> tuple[list[Record], list[str]]:
    e = env()
    records: list[Record] = []
    blocks: list[str] = []
    if not e.is_gpu:
        host = host_sweep(sizes, samples=args.samples)
        records += host
        lines = [
            f"Host memory ({host[0].device}), NumPy, one thread; {STREAM_COUNT}. Measured, sim mode: this is the "
            "computer's memory, not a GPU's.",
            f"{'kernel':<8}{'array':>10}{'level':>10}{'GB/s':>10}",
        ]
        lines += [f"{r.test[5:]:<8}{_fmt_bytes(r.bytes):>10}{r.note:>10}{r.gbps:>10.2f}" for r in host]
        blocks.append("\n".join(lines))
        model = model_peer_matrix(args.system)
        records += model
        blocks.append(
            format_matrix(
                model,
                f"MODEL of {model[0].device}: GPU(row) -> GPU(column), from its wiring (labkit.topology), not a measurement",
            )
        )
        return records, blocks
    size = args.size or DEFAULT_SIZE
    n = e.gpu_count
    for test, fn in (("host_to_device", host_to_device), ("device_to_host", device_to_host)):
        recs = [fn(d, size, "pinned", samples=args.samples) for d in range(n)]
        records += recs
        blocks.append(
            format_matrix(
                recs,
                f"memcpy CE {'CPU(row) -> GPU(column)' if test == 'host_to_device' else 'GPU(row) -> CPU(column)'}"
                " bandwidth, pinned host memory",
            )
        )
    recs = [device_local_copy(d, size, "ce", samples=args.samples) for d in range(n)]
    records += recs
    blocks.append(format_matrix(recs, "device-local copy, copy engine"))
    if n >= 2:
        for bidir in (False, True):
            recs = peer_matrix(size, bidirectional=bidir, samples=args.samples)
            records += recs
            blocks.append(
                format_matrix(recs, f"memcpy CE GPU(row) -> GPU(column), {'bidirectional' if bidir else 'unidirectional'}")
            )
    else:
        blocks.append(f"peer-to-peer: skipped, this machine has one GPU ({e.device_name}).")
    if sizes:
        sweep = size_sweep("host_to_device", sizes, samples=args.samples)
        records += sweep
        blocks.append(
            "\n".join(
                f"host_to_device {_fmt_bytes(r.bytes):>10}: {r.gbps:10.2f} GB/s, {r.latency_us:.1f} µs per copy" for r in sweep
            )
        )
    return records, blocks
