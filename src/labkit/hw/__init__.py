"""Hardware data: GPUs, DGX systems and interconnects, every figure with its unit and source.

    >>> from labkit import hw
    >>> print(hw.gpu("H200").memory_bandwidth)
    4800 GB/s (NVIDIA H200 datasheet)
    >>> hw.gpu("A100").peak("tf32", sparse=True).value
    312.0

The data live in one file, ``labkit/data/hw.yml``. The loader checks every unit against :data:`UNITS`,
requires a source for every figure, and recomputes derived totals (links x per-link bandwidth x 2 =
a GPU's bidirectional NVLink bandwidth; GPU count x per-GPU peak = a system's headline, within the
tolerance the file states), so a typo in the data fails loudly. A system's headline is always a compute rate
(TFLOP/s or PFLOP/s, TOPS or POPS for integers) with its number format (``headline_precision``) and whether it counts
2:4 sparsity (``headline_sparse``); a system's NVLink bandwidth is its own figure (``nvlink_domain_bandwidth``). Bandwidth is in GB/s (10^9 B/s), per
direction unless the name says bidirectional; compute in TFLOP/s (TOPS for integers).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from labkit.errors import LabkitError

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "hw.yml"

#: Units a figure may carry.
UNITS = frozenset(
    {
        "GB",
        "TB",
        "MB",
        "KB",
        "GB/s",
        "TB/s",
        "Gb/s",
        "TFLOP/s",
        "PFLOP/s",
        "TOPS",
        "POPS",
        "W",
        "kW",
        "mm²",
        "billion",
        "count",
        "USD",
        "year",
        "FMA/clock",
        "B/clock",
    }
)
#: Units a system's headline (a compute rate) may carry: TFLOP/s or PFLOP/s, for int8 TOPS or POPS.
HEADLINE_UNITS = {"float": ("TFLOP/s", "PFLOP/s"), "int": ("TOPS", "POPS")}
#: An ``undefined`` reason that starts with this marks a format the GPU has but no usable source gives a figure for.
NO_FIGURE = "no figure:"
#: Precisions :meth:`GPU.peak` knows (fp6 and fp4: Blackwell's Tensor Core formats; FP6 is MXFP6's element, FP4
#: MXFP4's and NVFP4's).
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8")

_SCALE = {  # unit -> (dimension, factor to the dimension's base unit)
    "GB/s": ("bandwidth", 1.0),
    "TB/s": ("bandwidth", 1e3),
    "TFLOP/s": ("flops", 1.0),
    "PFLOP/s": ("flops", 1e3),
    "TOPS": ("ops", 1.0),
    "POPS": ("ops", 1e3),
    "KB": ("bytes", 1e-3),
    "MB": ("bytes", 1.0),
    "GB": ("bytes", 1e3),
    "TB": ("bytes", 1e6),
    "W": ("power", 1.0),
    "kW": ("power", 1e3),
}


class HardwareDataError(LabkitError):
    """The hardware data file is inconsistent (a unit, a source or a derived total is wrong)."""


@dataclass(frozen=True)
class Figure:
    """One number with its unit and source: ``str(fig)`` gives ``"4800 GB/s (NVIDIA H200 datasheet)"``."""

    value: float
    unit: str
    source: str
    note: str | None = None
    unconfirmed: bool = False

    def __str__(self) -> str:
        flag = ", unconfirmed" if self.unconfirmed else ""
        return f"{self.text()} ({self.source}{flag})"

    def text(self) -> str:
        """Value and unit without the source, e.g. ``"4800 GB/s"`` (a count is just the number)."""
        return _fmt(self.value) if self.unit == "count" else f"{_fmt(self.value)} {self.unit}"

    def __float__(self) -> float:
        return float(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def to(self, unit: str) -> "Figure":
        """The same figure in another unit of the same kind: GB/s <-> TB/s, TFLOP/s <-> PFLOP/s, TOPS <-> POPS,
        KB/MB/GB/TB, W <-> kW."""
        if unit == self.unit:
            return self
        if self.unit not in _SCALE or unit not in _SCALE or _SCALE[self.unit][0] != _SCALE[unit][0]:
            raise LabkitError(
                f"cannot convert {self.unit} to {unit}.",
                fix="Convert within one kind: GB/s and TB/s, TFLOP/s and PFLOP/s, TOPS and POPS, KB/MB/GB/TB, W and kW.",
            )
        value = self.value * _SCALE[self.unit][1] / _SCALE[unit][1]
        return Figure(round(value, 12), unit, self.source, self.note, self.unconfirmed)


def _fmt(value: float) -> str:
    if float(value).is_integer() and abs(value) >= 1e6:
        return f"{value:,.0f}"
    return f"{value:g}" if abs(value) < 1e6 else f"{value:,.2f}"


@dataclass(frozen=True)
class Peak:
    """A GPU's peak rate for one precision (dense, and with 2:4 structured sparsity where defined)."""

    precision: str
    dense: Figure
    sparse: Figure | None = None
    simt: Figure | None = None  # rate on the CUDA cores where it differs from the Tensor Core rate
    tensor_core: bool = True


class _WithFigures:
    """A record whose scalar figures :meth:`figures` lists (a GPU's peaks, held in a dict, are not among them)."""

    def figures(self) -> dict[str, Figure]:
        """Every scalar figure of this record (GPU or system) by attribute name."""
        return {k: v for k, v in vars(self).items() if isinstance(v, Figure)}


@dataclass(frozen=True)
class GPU(_WithFigures):
    """One GPU model. Figures are :class:`Figure`; ``peak(precision, sparse)`` gives compute peaks."""

    name: str
    aliases: tuple[str, ...]
    device_names: tuple[str, ...]
    architecture: str
    compute_capability: tuple[int, int]
    year: Figure
    source: str
    memory_type: str
    memory_size: Figure
    memory_bandwidth: Figure
    sm_count: Figure
    nvlink: str
    nvlink_links: Figure
    nvlink_bandwidth: Figure  # bidirectional, per GPU
    power: Figure
    process: str
    transistors: Figure | None = None
    die_size: Figure | None = None
    fp32_cores_per_sm: Figure | None = None
    tensor_cores_per_sm: Figure | None = None
    l2_cache: Figure | None = None
    register_file_per_sm: Figure | None = None
    shared_memory_per_sm: Figure | None = None
    tensor_core_fma_per_clock: Figure | None = None  # dense FP16 multiply-adds per Tensor Core per clock
    shared_memory_bandwidth_per_sm: Figure | None = None  # bytes per clock per SM (32 banks x 4 B)
    peaks: dict[str, Peak] = field(default_factory=dict, repr=False)
    undefined: dict[str, str] = field(default_factory=dict, repr=False)

    def peak(self, precision: str, sparse: bool = False, tensor_core: bool = True) -> Figure:
        """Peak rate for ``precision`` (fp64, fp32, tf32, fp16, bf16, fp8, fp6, fp4, int8) in TFLOP/s (TOPS for int8).

        ``sparse=True`` gives the 2:4 structured-sparsity rate where the GPU defines one;
        ``tensor_core=False`` the rate on the CUDA cores where the datasheet gives both.
        Raises :class:`LabkitError` for a precision this GPU does not have.
        """
        p = _normalise_precision(precision)
        if p in self.undefined:
            reason = self.undefined[p]
            if reason.startswith(NO_FIGURE):  # the format exists, but no source gives a figure labkit can use
                raise LabkitError(
                    f"labkit has no {p.upper()} figure for the {self.name}: {reason[len(NO_FIGURE) :].strip()}.",
                    fix=f"The {self.name} has figures for: {', '.join(self.precisions())}.",
                )
            raise LabkitError(
                f"{p.upper()} does not exist on the {self.name}: {reason}.",
                fix=f"The {self.name} has: {', '.join(self.precisions())}.",
            )
        entry = self.peaks[p]
        if not tensor_core:
            if entry.simt is not None:
                return entry.simt
            if entry.tensor_core:
                raise LabkitError(
                    f"labkit has no CUDA-core (non-Tensor-Core) {p.upper()} rate for the {self.name}.",
                    fix="Ask for the Tensor Core rate (tensor_core=True).",
                )
        if sparse:
            if entry.sparse is None:
                raise LabkitError(
                    f"the {self.name} has no structured-sparsity rate for {p.upper()}.",
                    fix="Sparsity (2:4) doubles Tensor Core rates from the A100 on; ask for sparse=False here.",
                )
            return entry.sparse
        return entry.dense

    def runs_on(self, precision: str) -> str:
        """Where the dense ``peak(precision)`` runs: ``"Tensor Cores"``, ``"CUDA cores"``, or
        ``"Tensor Cores and CUDA cores"`` where the datasheet gives one figure for both (B200 FP64).

        A table of peaks that mixes the two (the A100's FP64 is a Tensor Core rate, the V100's a CUDA-core rate)
        should label each cell with this.
        """
        p = _normalise_precision(precision)
        self.peak(p)  # a precision this GPU lacks raises with the reason
        entry = self.peaks[p]
        if not entry.tensor_core:
            return "CUDA cores"
        if entry.simt is not None and entry.simt.value == entry.dense.value:
            return "Tensor Cores and CUDA cores"
        return "Tensor Cores"

    def precisions(self) -> list[str]:
        """The precisions with a defined peak on this GPU."""
        return [p for p in PRECISIONS if p in self.peaks]

    def has(self, precision: str) -> bool:
        """True when ``precision`` has a peak on this GPU."""
        return _normalise_precision(precision) in self.peaks


@dataclass(frozen=True)
class System(_WithFigures):
    """A DGX system (or a rack or cluster of them)."""

    name: str
    aliases: tuple[str, ...]
    year: Figure
    source: str
    gpu: str
    gpu_count: Figure
    fabric: str
    nvlink: str
    headline: Figure
    headline_precision: str | None
    headline_sparse: bool
    headline_what: str
    nvswitch: str | None = None
    nvswitch_count: Figure | None = None
    cpu: str | None = None
    cpu_count: Figure | None = None
    system_memory: Figure | None = None
    storage: Figure | None = None
    network: str | None = None
    network_bandwidth: Figure | None = None
    power: Figure | None = None
    gpu_memory_total: Figure | None = None
    memory_bandwidth_total: Figure | None = None
    nvlink_domain_bandwidth: Figure | None = None
    mig_instances: Figure | None = None
    price: Figure | None = None
    compute_trays: Figure | None = None  # an NVL72's compute trays: each holds GPUs and CPUs and runs one OS (a node)
    allreduce_busbw_nvls: Figure | None = None  # measured NCCL all-reduce busbw with NVLS (in-switch reduction)
    allreduce_busbw_ring: Figure | None = None  # the same with NCCL_NVLS_ENABLE=0 (ring)
    system: str | None = None
    system_count: Figure | None = None
    pcie: str | None = None
    note: str | None = None

    @property
    def gpu_model(self) -> GPU:
        """The :class:`GPU` record of this system's GPUs."""
        return gpu(self.gpu)

    def headline_text(self) -> str:
        """The headline with its number format and sparsity, e.g. ``"720 PFLOP/s FP8 (sparse)"``."""
        return (
            f"{self.headline.text()} {(self.headline_precision or '').upper()} ({'sparse' if self.headline_sparse else 'dense'})"
        )


@dataclass(frozen=True)
class Link:
    """An interconnect: an NVLink generation, an NVSwitch generation, a PCIe generation (x16) or an InfiniBand rate."""

    name: str
    aliases: tuple[str, ...]
    kind: str  # nvlink, nvswitch, pcie, infiniband
    source: str
    per_link: Figure | None = None  # per direction: per NVLink, per x16 slot, per IB port
    links_per_gpu: Figure | None = None
    per_gpu: Figure | None = None  # bidirectional NVLink bandwidth of one GPU
    ports: Figure | None = None
    per_port: Figure | None = None  # NVSwitch: per port, per direction
    transistors: Figure | None = None
    signalling: Figure | None = None
    nccl_model: Figure | None = None
    nvlink: str | None = None
    year: Figure | None = None
    used_in: tuple[str, ...] = ()

    @property
    def bandwidth(self) -> Figure:
        """Per-link (per-port) bandwidth per direction."""
        fig = self.per_link or self.per_port
        assert fig is not None
        return fig


@dataclass(frozen=True)
class Claim:
    """A figure a source talk or article gave, next to the record's (datasheet) figure for the same thing."""

    record: str
    field: str
    claimed: Figure
    datasheet: Figure
    why: str

    @property
    def difference(self) -> float:
        """(claimed − datasheet) / datasheet, in the datasheet's unit: −0.09 means the talk says 9% less."""
        return (self.claimed.to(self.datasheet.unit).value - self.datasheet.value) / self.datasheet.value

    def __str__(self) -> str:
        return (
            f"{self.record} {self.field.replace('_', ' ')}: the talk says {self.claimed.text()}, "
            f"the datasheet {self.datasheet.text()} ({self.difference:+.0%}). {self.why}"
        )


@dataclass(frozen=True)
class HardwareData:
    """Everything in one data file, validated."""

    gpus: dict[str, GPU]
    systems: dict[str, System]
    links: dict[str, Link]
    headline_tolerance: float
    path: Path
    claims: tuple[Claim, ...] = ()


# ---------------------------------------------------------------------------------------------- loading

_FIGURE_KEYS = {"value", "unit", "source", "note", "unconfirmed"}
_PEAK_KEYS = {"dense", "sparse", "simt", "tensor_core", "source", "note", "unconfirmed"}
_NUMBER = re.compile(r"^\s*([-+]?\d[\d_,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)\s+(\S.*?)\s*$")


def _figure(raw: Any, source: str | None, where: str) -> Figure:
    """Parse ``"732 GB/s"``, a bare number (unit ``count``) or a mapping into a checked :class:`Figure`."""
    note, unconfirmed = None, False
    if isinstance(raw, dict):
        unknown = set(raw) - _FIGURE_KEYS
        if unknown:
            raise HardwareDataError(
                f"{where}: unknown key(s) {sorted(unknown)} in a figure.", fix="Use value, unit, source, note, unconfirmed."
            )
        if "value" not in raw or "unit" not in raw:
            raise HardwareDataError(f"{where}: a figure needs a value and a unit.", fix="Write {value: 900, unit: GB/s}.")
        value, unit = raw["value"], raw["unit"]
        source = raw.get("source", source)
        note = raw.get("note")
        unconfirmed = bool(raw.get("unconfirmed", False))
    elif isinstance(raw, str):
        m = _NUMBER.match(raw)
        if not m:
            raise HardwareDataError(f"{where}: cannot read {raw!r} as 'VALUE UNIT'.", fix="Write e.g. '900 GB/s'.")
        value, unit = m.group(1).replace(",", "").replace("_", ""), m.group(2)
    else:
        raise HardwareDataError(
            f"{where}: {raw!r} has no unit.", fix="Write the unit after the number, e.g. '900 GB/s' or '8 count'."
        )
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise HardwareDataError(f"{where}: {value!r} is not a number.") from None
    if unit not in UNITS:
        close = difflib.get_close_matches(str(unit), UNITS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise HardwareDataError(f"{where}: unknown unit {unit!r}.{hint}", fix=f"Use one of: {', '.join(sorted(UNITS))}.")
    if not source or not str(source).strip():
        raise HardwareDataError(f"{where}: figure {raw!r} has no source.", fix="Give the record a source: or the figure its own.")
    return Figure(number, str(unit), str(source).strip(), note, unconfirmed)


def _opt(d: dict, key: str, source: str, where: str) -> Figure | None:
    return _figure(d[key], source, f"{where}.{key}") if d.get(key) is not None else None


def _req(d: dict, key: str, where: str) -> Any:
    if key not in d or d[key] is None:
        raise HardwareDataError(f"{where}: missing required field {key!r}.")
    return d[key]


def _parse_gpu(name: str, d: dict) -> GPU:
    where = f"gpus.{name}"
    src = _req(d, "source", where)
    if not str(src).strip():
        raise HardwareDataError(f"{where}: empty source.")
    peaks: dict[str, Peak] = {}
    for p, e in (d.get("peaks") or {}).items():
        if p not in PRECISIONS:
            raise HardwareDataError(f"{where}.peaks: unknown precision {p!r}.", fix=f"Use {', '.join(PRECISIONS)}.")
        if not isinstance(e, dict) or set(e) - _PEAK_KEYS:
            bad = sorted(set(e) - _PEAK_KEYS) if isinstance(e, dict) else e
            raise HardwareDataError(f"{where}.peaks.{p}: unknown key(s) {bad}.", fix=f"Use {', '.join(sorted(_PEAK_KEYS))}.")
        psrc = e.get("source", src)
        extra = {k: e[k] for k in ("note", "unconfirmed") if k in e}

        def fig(key: str, e: dict = e, psrc: str = psrc, extra: dict = extra, p: str = p) -> Figure | None:
            if e.get(key) is None:
                return None
            raw = e[key]
            if isinstance(raw, str):
                base = _figure(raw, psrc, f"{where}.peaks.{p}.{key}")
                return Figure(base.value, base.unit, base.source, extra.get("note"), bool(extra.get("unconfirmed", False)))
            return _figure(raw, psrc, f"{where}.peaks.{p}.{key}")

        dense = fig("dense")
        if dense is None:
            raise HardwareDataError(f"{where}.peaks.{p}: no dense peak.")
        want = "TOPS" if p == "int8" else "TFLOP/s"
        for f in (dense, fig("sparse"), fig("simt")):
            if f is not None and f.unit != want:
                raise HardwareDataError(f"{where}.peaks.{p}: unit {f.unit!r}, expected {want}.")
        peaks[p] = Peak(p, dense, fig("sparse"), fig("simt"), bool(e.get("tensor_core", True)))
    undefined = {str(k): str(v) for k, v in (d.get("undefined") or {}).items()}
    for p in PRECISIONS:
        if p not in peaks and p not in undefined:
            raise HardwareDataError(
                f"{where}: precision {p} is neither given a peak nor listed under undefined (with the reason)."
            )
    cc = str(_req(d, "compute_capability", where)).split(".")
    return GPU(
        name=name,
        aliases=tuple(d.get("aliases") or ()),
        device_names=tuple(d.get("device_names") or ()),
        architecture=_req(d, "architecture", where),
        compute_capability=(int(cc[0]), int(cc[1])),
        year=_figure(_req(d, "year", where), src, f"{where}.year"),
        source=src,
        memory_type=_req(d, "memory_type", where),
        memory_size=_figure(_req(d, "memory_size", where), src, f"{where}.memory_size"),
        memory_bandwidth=_figure(_req(d, "memory_bandwidth", where), src, f"{where}.memory_bandwidth"),
        sm_count=_figure(_req(d, "sm_count", where), src, f"{where}.sm_count"),
        nvlink=_req(d, "nvlink", where),
        nvlink_links=_figure(_req(d, "nvlink_links", where), src, f"{where}.nvlink_links"),
        nvlink_bandwidth=_figure(_req(d, "nvlink_bandwidth", where), src, f"{where}.nvlink_bandwidth"),
        power=_figure(_req(d, "power", where), src, f"{where}.power"),
        process=_req(d, "process", where),
        transistors=_opt(d, "transistors", src, where),
        die_size=_opt(d, "die_size", src, where),
        fp32_cores_per_sm=_opt(d, "fp32_cores_per_sm", src, where),
        tensor_cores_per_sm=_opt(d, "tensor_cores_per_sm", src, where),
        l2_cache=_opt(d, "l2_cache", src, where),
        register_file_per_sm=_opt(d, "register_file_per_sm", src, where),
        shared_memory_per_sm=_opt(d, "shared_memory_per_sm", src, where),
        tensor_core_fma_per_clock=_opt(d, "tensor_core_fma_per_clock", src, where),
        shared_memory_bandwidth_per_sm=_opt(d, "shared_memory_bandwidth_per_sm", src, where),
        peaks=peaks,
        undefined=undefined,
    )


_SYSTEM_FIGURES = (
    "nvswitch_count",
    "cpu_count",
    "system_memory",
    "storage",
    "network_bandwidth",
    "power",
    "gpu_memory_total",
    "memory_bandwidth_total",
    "nvlink_domain_bandwidth",
    "mig_instances",
    "price",
    "compute_trays",
    "system_count",
    "allreduce_busbw_nvls",
    "allreduce_busbw_ring",
)


def _parse_system(name: str, d: dict) -> System:
    where = f"systems.{name}"
    src = _req(d, "source", where)
    h = dict(_req(d, "headline", where))
    unknown = set(h) - _FIGURE_KEYS - {"precision", "sparse", "what"}
    if unknown:
        raise HardwareDataError(
            f"{where}.headline: unknown key(s) {sorted(unknown)}.",
            fix="A headline is a compute rate: value, unit, precision, sparse, what (and source, note).",
        )
    precision, sparse, what = h.pop("precision", None), h.pop("sparse", False), str(h.pop("what", ""))
    if precision is None:
        raise HardwareDataError(
            f"{where}.headline: no precision: a system's headline is a compute rate in a number format.",
            fix="Give precision (fp8, fp16, ...) and sparse; put a bandwidth in its own field (e.g. nvlink_domain_bandwidth).",
        )
    try:
        precision = _normalise_precision(str(precision))
    except LabkitError:
        raise HardwareDataError(
            f"{where}.headline: unknown precision {precision!r}.", fix=f"Use {', '.join(PRECISIONS)}."
        ) from None
    if not isinstance(sparse, bool):
        raise HardwareDataError(f"{where}.headline: sparse must be true or false, not {sparse!r}.")
    allowed = HEADLINE_UNITS["int" if precision == "int8" else "float"]
    if isinstance(h, dict) and h.get("unit") not in allowed:
        raise HardwareDataError(
            f"{where}.headline: unit {h.get('unit')!r} is not a compute rate for {precision.upper()}.",
            fix=f"Write the headline in {' or '.join(allowed)}; a bandwidth goes in its own field.",
        )
    return System(
        name=name,
        aliases=tuple(d.get("aliases") or ()),
        year=_figure(_req(d, "year", where), src, f"{where}.year"),
        source=src,
        gpu=_req(d, "gpu", where),
        gpu_count=_figure(_req(d, "gpu_count", where), src, f"{where}.gpu_count"),
        fabric=_req(d, "fabric", where),
        nvlink=_req(d, "nvlink", where),
        headline=_figure(h, src, f"{where}.headline"),
        headline_precision=precision,
        headline_sparse=sparse,
        headline_what=what,
        nvswitch=d.get("nvswitch"),
        cpu=d.get("cpu"),
        network=d.get("network"),
        system=d.get("system"),
        pcie=d.get("pcie"),
        note=d.get("note"),
        **{k: _opt(d, k, src, where) for k in _SYSTEM_FIGURES},
    )


def _parse_link(name: str, d: dict) -> Link:
    where = f"links.{name}"
    src = _req(d, "source", where)
    kind = _req(d, "kind", where)
    if kind not in ("nvlink", "nvswitch", "pcie", "infiniband"):
        raise HardwareDataError(f"{where}: unknown kind {kind!r}.")
    figs = {
        k: _opt(d, k, src, where)
        for k in ("per_link", "links_per_gpu", "per_gpu", "ports", "per_port", "transistors", "signalling", "nccl_model", "year")
    }
    if figs["per_link"] is None and figs["per_port"] is None:
        raise HardwareDataError(f"{where}: needs per_link (or per_port for a switch).")
    return Link(
        name=name,
        aliases=tuple(d.get("aliases") or ()),
        kind=kind,
        source=src,
        nvlink=d.get("nvlink"),
        used_in=tuple(d.get("used_in") or ()),
        **figs,
    )


def _parse_claims(raw: Any, gpus: dict[str, GPU], systems: dict[str, System]) -> tuple[Claim, ...]:
    out: list[Claim] = []
    for i, c in enumerate(raw or []):
        where = f"claims[{i}]"
        if not isinstance(c, dict) or set(c) - {"record", "field", "claimed", "why"}:
            raise HardwareDataError(f"{where}: a claim has record, field, claimed and why.")
        record, fname = str(_req(c, "record", where)), str(_req(c, "field", where))
        rec = systems.get(record) or gpus.get(record)
        if rec is None:
            raise HardwareDataError(f"{where}: no system or GPU record called {record!r}.")
        datasheet = rec.figures().get(fname)
        if datasheet is None:
            raise HardwareDataError(f"{where}: {record} has no figure {fname!r}.")
        claimed = _figure(_req(c, "claimed", where), None, f"{where}.claimed")
        try:
            claimed.to(datasheet.unit)
        except LabkitError:
            raise HardwareDataError(f"{where}: claimed unit {claimed.unit} does not convert to {datasheet.unit}.") from None
        out.append(Claim(record, fname, claimed, datasheet, str(_req(c, "why", where))))
    return tuple(out)


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


def _validate(data: HardwareData) -> None:
    """Recompute the derived totals; raise :class:`HardwareDataError` naming the first that disagrees."""
    tol = data.headline_tolerance
    for ln in data.links.values():
        if ln.kind == "nvlink" and ln.links_per_gpu and ln.per_gpu and ln.per_link:
            derived = ln.links_per_gpu.value * ln.per_link.value * 2
            if not _close(derived, ln.per_gpu.to("GB/s").value, 1e-6):
                raise HardwareDataError(
                    f"links.{ln.name}: {ln.links_per_gpu.value:g} links x {ln.per_link.value:g} GB/s x 2 = {derived:g} GB/s, "
                    f"but per_gpu says {ln.per_gpu.text()}."
                )
        if ln.kind == "nvswitch":
            if ln.nvlink not in data.links:
                raise HardwareDataError(f"links.{ln.name}: unknown NVLink generation {ln.nvlink!r}.")
            nv = data.links[ln.nvlink].per_link
            if ln.per_port and nv and not _close(ln.per_port.value, nv.value, 1e-6):
                raise HardwareDataError(
                    f"links.{ln.name}: per-port {ln.per_port.text()} differs from {ln.nvlink}'s per-link {nv.text()}."
                )
    for g in data.gpus.values():
        if g.nvlink not in data.links:
            raise HardwareDataError(f"gpus.{g.name}: unknown NVLink generation {g.nvlink!r}.")
        per_link = data.links[g.nvlink].per_link
        assert per_link is not None
        derived = g.nvlink_links.value * per_link.value * 2
        if not _close(derived, g.nvlink_bandwidth.to("GB/s").value, 1e-6):
            raise HardwareDataError(
                f"gpus.{g.name}: {g.nvlink_links.value:g} links x {per_link.value:g} GB/s per direction x 2 = {derived:g} GB/s, "
                f"but nvlink_bandwidth says {g.nvlink_bandwidth.text()}."
            )
    for s in data.systems.values():
        if s.gpu not in data.gpus:
            raise HardwareDataError(f"systems.{s.name}: unknown GPU {s.gpu!r}.")
        if s.nvlink not in data.links:
            raise HardwareDataError(f"systems.{s.name}: unknown NVLink generation {s.nvlink!r}.")
        g, n = data.gpus[s.gpu], s.gpu_count.value
        if s.system:
            if s.system not in data.systems or s.system_count is None:
                raise HardwareDataError(f"systems.{s.name}: unknown building block {s.system!r} or no system_count.")
            inner = data.systems[s.system]
            if not _close(s.system_count.value * inner.gpu_count.value, n, 1e-9):
                raise HardwareDataError(
                    f"systems.{s.name}: {s.system_count.value:g} x {inner.gpu_count.value:g} GPUs is not {n:g}."
                )
        unit = "TOPS" if s.headline_precision == "int8" else "TFLOP/s"
        derived = n * g.peak(str(s.headline_precision), sparse=s.headline_sparse).to(unit).value
        claimed = s.headline.to(unit).value
        if not _close(derived, claimed, tol):
            raise HardwareDataError(
                f"systems.{s.name}: {n:g} GPUs x per-GPU figure = {derived:g} {unit}, but the headline says "
                f"{s.headline.text()} (more than {tol:.0%} apart).",
                fix="Check the GPU count, the GPU's peak, the headline's precision and sparsity.",
            )
        if s.nvlink_domain_bandwidth is not None and not s.system:
            derived = n * g.nvlink_bandwidth.to("GB/s").value
            if not _close(derived, s.nvlink_domain_bandwidth.to("GB/s").value, tol):
                raise HardwareDataError(
                    f"systems.{s.name}: {n:g} GPUs x {g.nvlink_bandwidth.text()} = {derived:g} GB/s, but "
                    f"nvlink_domain_bandwidth says {s.nvlink_domain_bandwidth.text()} (more than {tol:.0%} apart)."
                )


def load(path: str | Path | None = None) -> HardwareData:
    """Read and validate a hardware data file (the packaged ``hw.yml`` by default)."""
    import yaml

    if path is not None and not isinstance(path, (str, Path)):
        raise LabkitError(
            f"path must be the path of a YAML file (a string or Path), not {path!r}.",
            fix="Leave it out to read labkit's own hardware data.",
        )
    p = Path(path) if path is not None else DATA_FILE
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HardwareDataError(f"cannot read hardware data {p}: {exc}") from None
    except yaml.YAMLError as exc:
        raise HardwareDataError(f"{p} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict) or not {"gpus", "systems", "links"} <= set(raw):
        raise HardwareDataError(f"{p}: needs top-level gpus, systems and links.")
    tol = float((raw.get("checks") or {}).get("headline_tolerance", 0.02))
    gpus_ = {n: _parse_gpu(n, d) for n, d in raw["gpus"].items()}
    systems_ = {n: _parse_system(n, d) for n, d in raw["systems"].items()}
    data = HardwareData(
        gpus=gpus_,
        systems=systems_,
        links={n: _parse_link(n, d) for n, d in raw["links"].items()},
        headline_tolerance=tol,
        path=p,
        claims=_parse_claims(raw.get("claims"), gpus_, systems_),
    )
    _validate(data)
    return data


@lru_cache(maxsize=1)
def data() -> HardwareData:
    """The packaged data, loaded and validated once."""
    return load()


# ---------------------------------------------------------------------------------------------- lookup


def normalise(name: str) -> str:
    """Lower case, without spaces or punctuation: ``"DGX-1 (V100)"`` -> ``"dgx1v100"``."""
    return re.sub(r"[^0-9a-z]", "", str(name).lower())


def _normalise_precision(precision: str) -> str:
    if not isinstance(precision, str):
        raise LabkitError(
            f"a precision is named by a string such as 'fp32', not {precision!r}.", fix=f"Use one of: {', '.join(PRECISIONS)}."
        )
    p = normalise(precision)
    p = {
        "double": "fp64",
        "single": "fp32",
        "half": "fp16",
        "float64": "fp64",
        "float32": "fp32",
        "float16": "fp16",
        "bfloat16": "bf16",
        "fp8e4m3": "fp8",
        "fp8e5m2": "fp8",
        "fp6e2m3": "fp6",
        "fp6e3m2": "fp6",
        "fp4e2m1": "fp4",
        "nvfp4": "fp4",
        "mxfp4": "fp4",
        "mxfp6": "fp6",
        "mxfp8": "fp8",
    }.get(p, p)
    if p not in PRECISIONS:
        raise LabkitError(f"unknown precision {precision!r}.", fix=f"Use one of: {', '.join(PRECISIONS)}.")
    return p


def _find(kind: str, name: str, records: dict[str, Any]) -> Any:
    if not isinstance(name, str):
        raise LabkitError(f"a {kind} name must be a string, not {type(name).__name__}.", fix=f"labkit.hw.{kind}s() lists them.")
    key = normalise(name)
    table: dict[str, str] = {}
    for rname, rec in records.items():
        table.setdefault(normalise(rname), rname)
    for rname, rec in records.items():
        for alias in rec.aliases:
            table.setdefault(normalise(alias), rname)
    if key in table:
        return records[table[key]]
    labels = {normalise(a): a for r in records.values() for a in r.aliases}
    labels.update({normalise(n): n for n in records})
    close = difflib.get_close_matches(key, list(labels), n=6, cutoff=0.5)
    names = list(dict.fromkeys(table[c] for c in close))[:3]  # suggest record names, best first
    did = f" Did you mean {', '.join(repr(n) for n in names)}?" if names else ""
    raise LabkitError(f"there is no {kind} called {name!r}.{did}", fix=f"labkit.hw.{kind}s() lists them: {', '.join(records)}.")


def gpus() -> list[str]:
    """Names of the GPUs labkit has data for, oldest first."""
    return list(data().gpus)


def gpu(name: str) -> GPU:
    """The :class:`GPU` called ``name`` (case, spaces and punctuation ignored; aliases such as ``"H100"`` work).

    A system's name gives that system's GPU: ``gpu("DGX H100")`` is the H100 SXM.
    """
    try:
        return _find("gpu", name, data().gpus)
    except LabkitError:
        key = normalise(name) if isinstance(name, str) else None
        for s in data().systems.values():
            if key in {normalise(s.name), *map(normalise, s.aliases)}:
                return data().gpus[s.gpu]
        raise


def systems() -> list[str]:
    """Names of the systems labkit has data for, oldest first."""
    return list(data().systems)


def system(name: str) -> System:
    """The :class:`System` called ``name`` (aliases such as ``"DGX-1"`` for the V100 version work)."""
    return _find("system", name, data().systems)


def links() -> list[str]:
    """Names of the interconnects labkit has data for."""
    return list(data().links)


def link(name: str) -> Link:
    """The :class:`Link` called ``name`` (e.g. ``"NVLink 3"``, ``"PCIe 4"``, ``"InfiniBand HDR"``, ``"EDR"``)."""
    return _find("link", name, data().links)


def match_device(device_name: str) -> GPU | None:
    """The GPU record for a name as the driver reports it (``"NVIDIA H100 80GB HBM3"``), or None if labkit has none.

    Only exact product matches count: a PCIe or NVL card has other figures than the SXM part, so it returns None.
    """
    key = normalise(device_name)
    for g in data().gpus.values():
        if any(normalise(d) == key for d in g.device_names) or key in (normalise(g.name),):
            return g
    return None


def claims() -> list[Claim]:
    """What the 2018 DGX-2 talk said where the datasheets differ: each :class:`Claim` pairs the talk's figure
    with the record's datasheet figure and says why they differ."""
    return list(data().claims)


def unconfirmed() -> list[tuple[str, str, Figure]]:
    """Every figure marked unconfirmed: ``(record name, field, Figure)``; the course says so wherever it shows one."""
    out: list[tuple[str, str, Figure]] = []
    d = data()
    for g in d.gpus.values():
        out += [(g.name, k, f) for k, f in g.figures().items() if f.unconfirmed]
        for p, pk in g.peaks.items():
            out += [
                (g.name, f"peak {p}{tag}", f)
                for tag, f in (("", pk.dense), (" sparse", pk.sparse), (" CUDA cores", pk.simt))
                if f is not None and f.unconfirmed
            ]
    for s in d.systems.values():
        out += [(s.name, k, f) for k, f in s.figures().items() if f.unconfirmed]
    for ln in d.links.values():
        out += [(ln.name, k, f) for k, f in vars(ln).items() if isinstance(f, Figure) and f.unconfirmed]
    return out


def table(
    names: Iterable[str] | None = None, attrs: Iterable[str] = ("memory_size", "memory_bandwidth", "sm_count")
) -> list[dict[str, Any]]:
    """Rows ``{"gpu": name, attr: Figure, ...}`` for printing or plotting."""
    from labkit.validate import require_choice, require_sequence

    names = (
        gpus()
        if names is None
        else require_sequence(
            [names] if isinstance(names, str) else names, "names", what="a list of GPU names", fix="labkit.hw.gpus() lists them."
        )
    )
    fields = [f for f in GPU.__dataclass_fields__ if not f.startswith("_")]
    attrs = require_sequence(
        [attrs] if isinstance(attrs, str) else attrs,
        "attrs",
        what="a list of GPU attribute names",
        item=lambda a, what: require_choice(a, what, fields),
    )
    rows = []
    for n in names:
        g = gpu(n)
        rows.append({"gpu": g.name, **{a: getattr(g, a) for a in attrs}})
    return rows


# ----------------------------------------------------------------------------- FP64 against FP32, per architecture
#: Source of :func:`arithmetic_rates`: the throughput table of NVIDIA's programming guide.
ARITHMETIC_SOURCE = (
    "CUDA C++ Programming Guide, Arithmetic Instructions: throughput of native arithmetic "
    "instructions (operations per clock cycle per multiprocessor), 32-bit and 64-bit floating-point add, "
    "multiply, multiply-add"
)
#: compute capability -> (FP32, FP64) results per clock per SM, and GPUs of that compute capability.
_PER_CLOCK: dict[tuple[int, int], tuple[int, int, str]] = {
    (7, 0): (64, 32, "V100"),
    (7, 5): (64, 2, "T4"),
    (8, 0): (64, 32, "A100"),
    (8, 6): (128, 2, "A10, A40"),
    (8, 9): (128, 2, "L4, L40S"),
    (9, 0): (128, 64, "H100, H200"),
}


@dataclass(frozen=True)
class ArithmeticRates:
    """FP32 and FP64 add/multiply/FMA results per clock per SM for one compute capability."""

    compute_capability: tuple[int, int]
    gpus: str
    fp32_per_clock: Figure
    fp64_per_clock: Figure

    @property
    def fp64_fraction(self) -> float:
        """FP64 rate over FP32 rate: 1/2 on the HPC parts (V100, A100, H100), 1/64 on L4 and L40S."""
        return self.fp64_per_clock.value / self.fp32_per_clock.value

    def __str__(self) -> str:
        cc = f"{self.compute_capability[0]}.{self.compute_capability[1]}"
        return (
            f"compute capability {cc} ({self.gpus}): {self.fp32_per_clock.text()} FP32 and {self.fp64_per_clock.text()} "
            f"FP64 results per clock per SM, FP64 at 1/{round(1 / self.fp64_fraction)} of FP32 ({ARITHMETIC_SOURCE})"
        )


def arithmetic_rates(arch: str | tuple[int, int]) -> ArithmeticRates:
    """FP32 and FP64 throughput per SM and clock for ``arch`` (``"sm_89"``, ``(8, 9)``, or a GPU named in the table
    such as ``"L4"``), from the programming guide's table (:data:`ARITHMETIC_SOURCE`)."""
    cc: tuple[int, int] | None = None
    if isinstance(arch, tuple) and len(arch) == 2:
        cc = (int(arch[0]), int(arch[1]))
    elif isinstance(arch, str):
        m = re.fullmatch(r"(?:sm_|compute_)?(\d)(\d)a?", arch.strip())
        if m:
            cc = (int(m.group(1)), int(m.group(2)))
        else:
            key = normalise(arch)
            cc = next((c for c, (_, _, names) in _PER_CLOCK.items() if key in {normalise(n) for n in names.split(", ")}), None)
    if cc not in _PER_CLOCK:
        known = ", ".join(f"sm_{a}{b} ({n})" for (a, b), (_, _, n) in _PER_CLOCK.items())
        raise LabkitError(f"labkit has no FP32/FP64 throughput for {arch!r}.", fix=f"Ask for one of {known}.")
    f32, f64, names = _PER_CLOCK[cc]
    return ArithmeticRates(cc, names, Figure(f32, "count", ARITHMETIC_SOURCE), Figure(f64, "count", ARITHMETIC_SOURCE))
