"""The GPUs learners run gpu mode on, and what each lab does on each of them.

A learner who reads "on a GPU, gpu mode" may have a T4 in a free Colab runtime, an A100 or an L4 in a cloud, an RTX
4090 or 5090 at home, or an H100, H200 or B200 at work. :func:`profiles` describes each (``data/devices.yml``: compute
capability, memory, bandwidth, SMs, clocks, PCIe, NVLink or not, MIG or not, each figure with its source; the DGX GPUs
take their figures from :mod:`labkit.hw`). From the GPU found (or a profile named), :func:`lab_plan` says what every
lab runs for real, what it shows as a model or as PTX instead and why; :func:`needs` words a feature this GPU lacks
("FP8 Tensor Cores need compute capability 8.9 or later; this is a Tesla T4 (7.5)."); :func:`ceiling` names the
labkit.hw record a measurement may be drawn against: this GPU's own, or none.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from labkit.device import GPUInfo
from labkit.errors import LabkitError
from labkit.hw import Figure
from labkit.validate import require_str

__all__ = [
    "Feature",
    "LabStep",
    "Profile",
    "cc_text",
    "ceiling",
    "features",
    "lab_plan",
    "match",
    "needs",
    "plan_text",
    "profile",
    "profiles",
]

CC = tuple[int, int]


def _cc(text: Any) -> CC:
    major, minor = str(text).split(".")
    return int(major), int(minor)


def _check_cc(cc: Any) -> CC | None:
    if cc is None:
        return None
    if not (
        isinstance(cc, (tuple, list))
        and len(cc) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in cc)
    ):
        raise LabkitError(
            f"a compute capability is two whole numbers, such as (8, 9); got {cc!r:.60}.",
            fix="Use env.compute_capability (labkit.setup()) or a profile's compute_capability.",
        )
    return int(cc[0]), int(cc[1])


def cc_text(cc: CC | None) -> str:
    """``(8, 9)`` -> ``"8.9"``; None -> ``"?"``."""
    checked = _check_cc(cc)
    return "?" if checked is None else f"{checked[0]}.{checked[1]}"


@dataclass(frozen=True)
class Feature:
    """A hardware feature the labs decide with: from which compute capability on (``since``), or on exactly which
    (``only``: architecture-specific instructions such as ``wgmma``, sm_90a only)."""

    key: str
    what: str
    since: CC | None = None
    only: tuple[CC, ...] = ()

    def on(self, cc: CC) -> bool:
        """Whether a GPU of compute capability ``cc`` has it."""
        if self.only:
            return cc in self.only
        return self.since is not None and cc >= self.since

    def requirement(self) -> str:
        if self.only:
            return "compute capability " + " or ".join(cc_text(c) for c in self.only) + " exactly"
        return f"compute capability {cc_text(self.since)} or later"


@dataclass(frozen=True)
class Profile:
    """One GPU model as labkit sees it in gpu mode (``Environment``) plus what the labs decide with."""

    key: str  # "T4"
    name: str  # the name the driver reports, "Tesla T4"
    device_names: tuple[str, ...]
    compute_capability: CC
    architecture: str
    where: str  # where learners meet it
    memory: Figure
    memory_bandwidth: Figure
    sm_count: Figure
    boost_clock: Figure | None
    pcie: tuple[int, int]  # generation, lanes
    pcie_source: str
    nvlink: str | None  # "NVLink 4", or None for a PCIe card
    nvlink_source: str
    mig_instances: int  # 0: no MIG
    mig_source: str
    hw: str | None  # the labkit.hw record (datasheet peaks); None: labkit has no peaks for it

    def environment(self, gpus: int = 1) -> Any:
        """What ``labkit.setup()`` reports on a machine with ``gpus`` of these (for rehearsals and ``labkit doctor
        --profile``): a :class:`~labkit.mode.Environment` in gpu mode with one :class:`GPUInfo` per GPU."""
        from labkit.mode import Environment
        from labkit.validate import require_int

        gpus = require_int(gpus, "gpus", min=1, max=256)
        mem = int(self.memory.to("GB").value * 10**9)
        infos = tuple(
            GPUInfo(
                i,
                self.name,
                self.compute_capability,
                mem,
                int(self.sm_count.value),
                0,
                0x18 + i,
                f"GPU-{i:08x}-0000-0000-0000-{self.key.encode().hex()[:12]:0>12}",
                f"0000:{0x18 + i:02x}:00.0",
            )
            for i in range(gpus)
        )
        return Environment(
            "gpu",
            self.name,
            self.compute_capability,
            mem,
            int(self.sm_count.value),
            gpus,
            "580.95",
            f"device profile {self.key} (labkit.gpu.profiles): no GPU here",
            gpus=infos,
        )

    def describe(self) -> str:
        """One line: name, compute capability, memory, bandwidth, SMs, PCIe, NVLink, MIG."""
        clock = f", {self.boost_clock.text()} boost" if self.boost_clock else ""
        link = self.nvlink or "no NVLink"
        mig = f"MIG up to {self.mig_instances} instances" if self.mig_instances else "no MIG"
        return (
            f"{self.name}: {self.architecture}, compute capability {cc_text(self.compute_capability)}, "
            f"{self.memory.text()} at {self.memory_bandwidth.text()}, {self.sm_count.text()} SMs{clock}, "
            f"PCIe Gen{self.pcie[0]} x{self.pcie[1]}, {link}, {mig}"
        )


def _figure(raw: dict[str, Any], where: str) -> Figure:
    if not isinstance(raw, dict) or not {"value", "unit", "source"} <= set(raw):
        raise LabkitError(f"devices.yml: {where} needs value, unit and source.")
    return Figure(float(raw["value"]), str(raw["unit"]), str(raw["source"]), raw.get("note"), bool(raw.get("unconfirmed")))


@functools.lru_cache(maxsize=1)
def _data() -> tuple[dict[str, Feature], dict[str, Profile]]:
    from labkit import hw

    raw = yaml.safe_load(resources.files("labkit").joinpath("data", "devices.yml").read_text(encoding="utf-8"))
    features = {
        k: Feature(k, v["what"], _cc(v["since"]) if "since" in v else None, tuple(_cc(c) for c in v.get("only", ())))
        for k, v in raw["features"].items()
    }
    out = {}
    for key, p in raw["profiles"].items():
        where = f"profile {key}"
        if p.get("hw"):
            g = hw.gpu(p["hw"])
            cc, arch, names = g.compute_capability, g.architecture, tuple(g.device_names)
            memory, bandwidth, sms, nvlink = g.memory_size, g.memory_bandwidth, g.sm_count, g.nvlink or None
            nvlink_source, clock = f"labkit.hw ({g.name}: {g.nvlink_bandwidth})", None
        else:
            cc, arch, names = _cc(p["compute_capability"]), p["architecture"], tuple(p["device_names"])
            memory, bandwidth = (
                _figure(p["memory"], f"{where}.memory"),
                _figure(p["memory_bandwidth"], f"{where}.memory_bandwidth"),
            )
            sms = _figure(p["sm_count"], f"{where}.sm_count")
            nvlink, nvlink_source = None, str(p["nvlink"]["source"])
            if p["nvlink"]["value"]:
                raise LabkitError(f"devices.yml: {where} has NVLink but no labkit.hw record to name it.")
        clock = _figure(p["boost_clock"], f"{where}.boost_clock") if p.get("boost_clock") else None
        mig = p["mig"]
        out[key] = Profile(
            key,
            p["name"],
            names,
            cc,
            arch,
            p["where"],
            memory,
            bandwidth,
            sms,
            clock,
            (int(p["pcie"]["generation"]), int(p["pcie"]["lanes"])),
            str(p["pcie"]["source"]),
            nvlink,
            nvlink_source,
            int(mig.get("instances", 0)) if mig["value"] else 0,
            str(mig["source"]),
            p.get("hw"),
        )
    return features, out


def features() -> dict[str, Feature]:
    """Every feature of ``devices.yml`` by key (``"fp8_tensor"``, ``"clusters"``, ``"wgmma"``, ...)."""
    return dict(_data()[0])


def profiles() -> dict[str, Profile]:
    """Every device profile by key, in the file's order (T4, A100 40GB, L4, RTX 4090, H100, H200, B200, RTX 5090)."""
    return dict(_data()[1])


def profile(name: str) -> Profile:
    """A profile by key (``"T4"``), or by the name the driver reports (``"Tesla T4"``); a clear error otherwise."""
    name = require_str(
        name, "name", fix=f"A profile such as 'T4' or a driver's name such as 'Tesla T4' ({', '.join(profiles())})."
    )
    every = profiles()
    if name in every:
        return every[name]
    found = match(name)
    if found is None:
        raise LabkitError(f"no device profile {name!r}.", fix=f"Use one of: {', '.join(every)}.")
    return found


def match(device_name: str | None) -> Profile | None:
    """The profile of a GPU as the driver names it (a MIG slice: its GPU's), or None."""
    if device_name is None:
        return None
    base = require_str(device_name, "device_name", empty=True, fix="The GPU's name as the driver reports it.")
    base = base.split(" MIG ")[0].strip().lower()
    if not base:
        return None
    for p in _data()[1].values():
        if base == p.name.lower() or base in (n.lower() for n in p.device_names):
            return p
    return None


def _gpu_env(env: Any) -> Any:
    """``env``, or this machine's; anything that is not an environment is refused in words."""
    if env is None:
        from labkit.mode import env as current

        return current()
    if not (hasattr(env, "is_gpu") and hasattr(env, "device_name")) or not isinstance(env.is_gpu, bool):
        raise LabkitError(
            f"env must be a labkit environment, got {env!r:.60}.",
            fix="Pass labkit.setup()'s result, or a device profile's environment() "
            "(labkit.gpu.profiles.profile('T4').environment()).",
        )
    _check_cc(getattr(env, "compute_capability", None))
    return env


def needs(feature: str, env: Any = None) -> str | None:
    """None when the GPU of ``env`` (default: this one) has ``feature``; else the sentence saying what it needs and
    what this GPU is: ``"FP8 Tensor Cores need compute capability 8.9 or later; this is a Tesla T4 (7.5)."``.
    In sim mode (no GPU to ask) None: the simulator does not model these features' speed."""
    feature = require_str(feature, "feature", fix=f"One of: {', '.join(features())}.")
    f = features().get(feature)
    if f is None:
        raise LabkitError(f"no feature {feature!r}.", fix=f"Use one of: {', '.join(features())}.")
    e = _gpu_env(env)
    cc = getattr(e, "compute_capability", None)
    if not e.is_gpu or cc is None:  # sim mode, or a GPU that did not say: nothing to decide on, so it is tried
        return None
    if f.on(tuple(cc)):
        return None
    verb = "needs" if f.what.startswith("the ") else "need"
    article = "an" if str(e.device_name)[:1] in "AEIOUN" else "a"  # "an NVIDIA L4", "a Tesla T4"
    return (
        f"{f.what[0].upper()}{f.what[1:]} {verb} {f.requirement()}; this is {article} {e.device_name} "
        f"({cc_text(tuple(e.compute_capability))})."
    )


def ceiling(env: Any = None, default: str = "H200") -> tuple[str, str | None]:
    """The labkit.hw GPU a figure is drawn against, and why it is not this one.

    In gpu mode: ``(this GPU's record, None)`` when labkit.hw has it; otherwise ``(default, sentence)``: the model is
    drawn for ``default`` and the sentence says that this GPU's measurements are not placed under it. In sim mode:
    ``(default, None)`` (a model, nothing measured)."""
    from labkit import hw

    e = _gpu_env(env)
    default = hw.gpu(require_str(default, "default", fix="A GPU labkit.hw has, such as 'H200'.")).name
    if not e.is_gpu:
        return default, None
    here = hw.match_device(str(e.device_name).split(" MIG ")[0])
    if here is not None:
        return here.name, None
    return default, (
        f"labkit.hw has no datasheet figures for the {e.device_name}: the model is the {default}'s, and "
        f"this GPU's measurements are listed on their own, not drawn under the {default}'s ceiling."
    )


@dataclass(frozen=True)
class LabStep:
    """One part of a lab on one GPU: ``action`` is ``"runs"`` (measured on this GPU), ``"model"`` (a model or a
    labelled stand-in instead), ``"ptx"`` (compiled and shown, not launched) or ``"skipped"``; ``why`` in words."""

    lab: str
    part: str
    action: str
    why: str

    def __str__(self) -> str:
        return f"{self.lab} {self.part}: {self.action}" + (f" ({self.why})" if self.why else "")


def lab_plan(env: Any = None) -> list[LabStep]:
    """What every lab does on the GPU of ``env`` (default: this machine's; a profile's ``environment()`` to ask about
    another GPU). Empty in sim mode: there every lab runs on the CUDA simulator."""
    from labkit import hw

    e = _gpu_env(env)
    if not e.is_gpu:
        return []
    cc = tuple(e.compute_capability or (0, 0))
    here = hw.match_device(str(e.device_name).split(" MIG ")[0])
    prof = match(e.device_name)
    steps: list[LabStep] = []

    def step(
        lab: str, part: str, feature: str | None = None, *, fallback: str = "model", why_fallback: str = "", ok_why: str = ""
    ) -> None:
        need = needs(feature, e) if feature else None
        if need is None:
            steps.append(LabStep(lab, part, "runs", ok_why))
        else:
            steps.append(LabStep(lab, part, fallback, f"{need} {why_fallback}".strip()))

    if not features()["cuda13"].on(cc):
        return [LabStep("all", "GPU parts", "skipped", needs("cuda13", e) or "")]
    peak_why = (
        f"against the {here.name}'s datasheet peak from labkit.hw"
        if here is not None
        else f"measured only: labkit.hw has no datasheet peak for the {e.device_name}, so no % of peak is shown"
    )
    step("00", "first kernel, timed on this GPU")
    step("01", "this machine's topology from NVML", ok_why="labkit's record: " + (here.name if here else "none"))
    step("02", "SAXPY and copy against this GPU's own device-to-device copy")
    step("03", "transposes and matmuls, timed")
    step("04", "reductions and atomics, timed")
    pcie = f"PCIe Gen{prof.pcie[0]} x{prof.pcie[1]}" if prof else "the PCIe link NVML reports"
    step("05", "CuPy, streams, copy/compute overlap, graphs", ok_why=f"overlap model on {pcie}")
    step("06", "FP32 and FP16 GEMMs with CuPy", "fp16_tensor", ok_why=peak_why)
    step("06", "TF32 GEMM", "tf32_tensor", why_fallback="The row says so; the roofline model shows the DGX GPUs.")
    step("06", "BF16 GEMM (cuBLAS)", "bf16_tensor", why_fallback="The row says so; the roofline model shows the DGX GPUs.")
    step(
        "06",
        "FP8 GEMM",
        "fp8_tensor",
        why_fallback="The row says so; the roofline model shows the DGX GPUs.",
        ok_why="where this CuPy can multiply FP8 (CuPy 14 cannot: the row says so)",
    )
    step("06", "WMMA exercise on Tensor Cores", "fp16_tensor", fallback="skipped")
    wg = needs("wgmma", e)
    steps.append(
        LabStep(
            "06",
            "wgmma/TMA tile",
            "ptx",
            "compiled to PTX for sm_90a and shown, never launched; "
            + (wg[0].lower() + wg[1:] if wg else "ptxas assembles it for this GPU"),
        )
    )
    peers = "peer copies and NVLink" if e.gpu_count >= 2 else "peer copies and NVLink (need two GPUs; this machine has one)"
    step("07", "device copy, host<->device (pinned) and the size sweep")
    steps.append(
        LabStep(
            "07",
            peers,
            "runs" if e.gpu_count >= 2 else "skipped",
            "" if e.gpu_count >= 2 else "the section says so and shows the DGX model",
        )
    )
    steps.append(
        LabStep(
            "08",
            "NCCL all-reduce",
            "runs" if e.gpu_count >= 2 else "skipped",
            "" if e.gpu_count >= 2 else "one GPU: NCCL needs two; MPI ranks and the alpha-beta model run",
        )
    )
    roof, why = ceiling(e)
    steps.append(
        LabStep(
            "09",
            "capstone stages timed, on the roofline",
            "runs",
            f"drawn under the {roof}'s own ceiling" if why is None else why,
        )
    )
    step("10", "cuda.core kernel launch")
    step("10", "thread block clusters", "clusters", fallback="skipped", why_fallback="The cell says so.")
    if getattr(e, "mig", None):
        steps.append(LabStep("all", "peaks", "runs", f"a MIG slice ({e.mig}): datasheet peaks scaled to its SMs"))
    return steps


def plan_text(env: Any = None) -> str:
    """:func:`lab_plan` as lines for ``labkit doctor``."""
    e = _gpu_env(env)
    if not e.is_gpu:
        return "sim mode: every lab runs on the CUDA simulator (`labkit doctor --profile T4` shows what a T4 would do)."
    prof = match(e.device_name)
    head = prof.describe() if prof else f"{e.device_name}: compute capability {cc_text(e.compute_capability)} (no device profile)"
    return "\n".join([head, *(f"  {s}" for s in lab_plan(e))])
