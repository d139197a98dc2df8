"""A classroom on MIG slices: which profile, how many slices and GPUs, and which labs work on one slice.

    $ labkit mig-plan --gpu H200 --learners 40
    $ labkit mig-plan --gpu H100 --learners 56 --json
    $ labkit mig-plan --gpu "A100 80GB" --k8s-profiles > profiles.yaml   # Zero to JupyterHub profiles for those nodes

The profiles and their counts per GPU come from ``labkit/data/hw.yml`` (``mig_profiles``, each with its source);
the GPU's memory from :mod:`labkit.hw`. A profile's name says its size: ``1g.18gb`` is one of the GPU's seven
compute slices and 18 GB (nominal) of its memory.

What a slice cannot do: a MIG slice is one CUDA device with no CUDA IPC and no peer access to any other device, so
peer copies and NCCL between slices do not exist, and a learner on one slice sees one GPU. The per-lab table
(:data:`LABS`) says what each lab then skips; its GPU-memory figures are **computed from the labs' gpu-mode
problem sizes** (the buffers a lab holds at once), not measured.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from labkit import hw
from labkit.errors import LabkitError
from labkit.validate import require_str

#: GPUs in one DGX (DGX A100, H100, H200).
GPUS_PER_DGX = 8
_PROFILE = re.compile(r"^(\d)g\.(\d+)gb$")
#: Names that mean more than one GPU with MIG data: the plan asks which.
_AMBIGUOUS = dict.fromkeys(("a100", "a100sxm4", "nvidiaa100", "dgxa100"), ("A100 40GB", "A100 80GB"))


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile of one GPU model."""

    name: str  # e.g. "1g.18gb"
    gpu: str  # labkit.hw GPU name
    compute_slices: int  # of the GPU's 7
    memory: hw.Figure  # nominal, from the profile's name
    per_gpu: hw.Figure  # instances of this profile a GPU holds in a uniform layout

    @property
    def node_label(self) -> str:
        """The GPU Operator's configuration for a uniform layout: ``nvidia.com/mig.config=<this>``."""
        return f"all-{self.name}"

    @property
    def resource_mixed(self) -> str:
        """The Kubernetes resource a pod asks for under ``mig.strategy=mixed``."""
        return f"nvidia.com/mig-{self.name}"


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, Any]]:
    import yaml

    raw = yaml.safe_load(hw.DATA_FILE.read_text(encoding="utf-8")) or {}
    table = raw.get("mig_profiles") or {}
    if not table:
        raise hw.HardwareDataError(f"{hw.DATA_FILE} has no mig_profiles section.")
    return table


def gpus() -> list[str]:
    """The GPU models labkit has MIG profiles for."""
    return list(_table())


def mig_gpu(gpu: str) -> hw.GPU:
    """The GPU ``gpu`` names, refusing a name that could mean two MIG layouts (``A100``: 40 GB or 80 GB)."""
    gpu = require_str(gpu, "gpu", fix="Name the GPU by a string such as 'H200' (labkit.mig.gpus() lists them).")
    choices = _AMBIGUOUS.get(hw.normalise(gpu))
    if choices:
        raise LabkitError(
            f"{gpu!r} comes with two memory sizes, and their MIG slices differ (1g.5gb or 1g.10gb).",
            fix=f"Say which: --gpu '{choices[0]}' or --gpu '{choices[1]}' (nvidia-smi shows it).",
        )
    return hw.gpu(gpu)


def profiles(gpu: str) -> list[MigProfile]:
    """Every MIG profile of ``gpu`` (any name :func:`labkit.hw.gpu` knows), smallest first."""
    g = mig_gpu(gpu)
    entry = _table().get(g.name)
    if entry is None:
        raise LabkitError(
            f"labkit has no MIG profiles for the {g.name}.", fix=f"MIG profiles are known for: {', '.join(gpus())}."
        )
    src = entry["source"]
    out = []
    for name, count in entry["profiles"].items():
        m = _PROFILE.match(name)
        if not m:
            raise hw.HardwareDataError(f"mig_profiles.{g.name}: cannot read the profile name {name!r} (e.g. '1g.18gb').")
        per_gpu = hw._figure(count, src, f"mig_profiles.{g.name}.{name}")
        memory = hw.Figure(float(m.group(2)), "GB", src, note="nominal, from the profile's name")
        out.append(MigProfile(name, g.name, int(m.group(1)), memory, per_gpu))
    return sorted(out, key=lambda p: (p.compute_slices, p.memory.value))


def profile(gpu: str, name: str | None = None) -> MigProfile:
    """The profile called ``name`` on ``gpu``; without a name, the smallest (the one a learner gets)."""
    all_ = profiles(gpu)
    if name is None:
        return all_[0]
    name = require_str(name, "name", fix=f"Name a profile of the {all_[0].gpu}: {', '.join(p.name for p in all_)}.")
    for p in all_:
        if p.name == name.strip().lower():
            return p
    raise LabkitError(f"the {all_[0].gpu} has no MIG profile {name!r}.", fix=f"Its profiles: {', '.join(p.name for p in all_)}.")


def max_instances(gpu: str) -> hw.Figure:
    """The most MIG instances one ``gpu`` holds (7 on the A100, H100 and H200)."""
    g = mig_gpu(gpu)
    entry = _table().get(g.name)
    if entry is None:
        raise LabkitError(f"labkit has no MIG data for the {g.name}.", fix=f"MIG data exist for: {', '.join(gpus())}.")
    return hw._figure(entry["max_instances"], entry["source"], f"mig_profiles.{g.name}.max_instances")


# ---------------------------------------------------------------------------------------------- the labs on a slice


@dataclass(frozen=True)
class LabOnSlice:
    """What one lab needs in gpu mode and what it leaves out on one MIG slice."""

    lab: str
    gpu_memory_bytes: int  # computed from the lab's gpu-mode sizes: the buffers it holds at once
    how: str  # the computation, for the reader
    skips: tuple[str, ...] = ()  # sections that print a model instead of a measurement on one slice
    source: tuple[str, ...] = ()  # literals in notebooks/src/<lab>-*.py the figure depends on (a test keeps them true)
    label: str = "computed from the problem sizes, not measured"

    @property
    def gpu_memory_gb(self) -> float:
        return self.gpu_memory_bytes / 1e9


_F32 = 4
#: Per lab: GPU memory in gpu mode (computed) and what a single slice skips.
LABS: tuple[LabOnSlice, ...] = (
    LabOnSlice("00", 3 * _F32 * 10_000_000, "vector add: x, y, out of 10,000,000 float32", source=("gpu=10_000_000",)),
    LabOnSlice("01", 0, "figures, models and topology from labkit.hw; no device buffers"),
    LabOnSlice(
        "02",
        3 * _F32 * (1 << 25) + 2 * _F32 * 1080 * 1920,
        "SAXPY x, y, out of 2**25 float32; an image of 1080 x 1920 float32 in and out",
        source=("gpu=1 << 25", "gpu=(1080, 1920)"),
    ),
    LabOnSlice(
        "03",
        3 * _F32 * 8192 * 8192 + 3 * _F32 * 2048 * 2048,
        "transpose of 8192 x 8192 float32: input, output, library reference; matmul 2048 x 2048 A, B, C",
        source=("gpu=8192", "gpu=2048"),
    ),
    LabOnSlice(
        "04",
        2 * _F32 * (1 << 26),
        "reduction and histogram over 2**26 float32 (input and a work buffer)",
        source=("gpu=1 << 26",),
    ),
    LabOnSlice(
        "05",
        3 * _F32 * (1 << 26),
        "2**26 float32 (256 MiB) copied in, normalised out of place, and a pinned-copy target",
        source=("1 << 26",),
    ),
    LabOnSlice(
        "06",
        4 * _F32 * 8192 * 8192,
        "GEMM 8192 x 8192: A, B, C in float32 and the float32 draw being cast (the FP16/BF16 runs need less)",
        source=("gpu=8192",),
    ),
    LabOnSlice(
        "07",
        3 * 512 * 2**20 + 2**30,
        "device-local copy of 512 MiB (source and destination), a 512 MiB host-to-device target, and the largest "
        "buffer of the host-to-device size sweep (1 GiB; CuPy's memory pool may keep them all)",
        skips=(
            "peer-to-peer matrix over NVLink (one device, no peer access): the DGX-1 model is shown",
            "bidirectional peer copies (same reason)",
        ),
        source=('size = "512MiB"', "512 * 2**20", "bw.size_sweep("),
    ),
    LabOnSlice(
        "08",
        0,
        "models of all-reduce and scaling; the NCCL measurement needs two devices",
        skips=("NCCL all-reduce measurement: one slice is one device, and slices have no CUDA IPC, so no NCCL between them",),
    ),
    LabOnSlice(
        "09",
        60 * 1080 * 1920 * 2 + _F32 * 1080 * 1920,
        "60 frames of 1080 x 1920 uint8 and their masks; the float32 background",
        source=("gpu=60", "gpu=(1080, 1920)"),
    ),
)


def labs_on(p: MigProfile) -> list[dict[str, Any]]:
    """Each lab on the slice ``p``: does it fit, what it skips, its computed GPU memory."""
    if not isinstance(p, MigProfile):
        raise LabkitError(
            f"labs_on needs a MIG profile, got {type(p).__name__}.",
            fix="Pass one from labkit.mig.profile(gpu) or labkit.mig.profiles(gpu).",
        )
    rows = []
    for lab in LABS:
        fits = lab.gpu_memory_bytes <= p.memory.to("GB").value * 1e9 * 0.9  # leave 10% for the CUDA context and pools
        rows.append(
            {
                "lab": lab.lab,
                "works": fits,
                "gpu_memory_gb": round(lab.gpu_memory_gb, 2),
                "how": lab.how,
                "skips": list(lab.skips),
                "label": lab.label,
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Plan:
    """Slices and GPUs for a class: ``learners`` on ``profile``, plus whole GPUs for instructors.

    ``dgx_systems`` counts under ``mig.strategy=single`` (every GPU of a node cut alike, so instructors' whole GPUs
    need nodes of their own); ``dgx_systems_mixed`` under ``mixed`` (or one DGX with a per-GPU layout), where a
    node may hold slices and whole GPUs. ``node_label`` and the ``resource_*`` fields are the Kubernetes labels and
    resource requests as mappings."""

    gpu: str
    learners: int
    profile: str
    slice_memory_gb: float
    slices_per_gpu: int
    learner_gpus: int
    instructor_gpus: int
    gpus: int
    dgx_systems: int
    dgx_systems_mixed: int
    spare_slices: int
    gpu_memory_gb: float
    node_label: dict[str, str]
    instructor_node_label: dict[str, str]
    resource_single: dict[str, int]
    resource_mixed: dict[str, int]
    labs: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def plan(
    gpu: str, learners: int, *, instructor_gpus: int = 0, profile_name: str | None = None, gpus_per_system: int = GPUS_PER_DGX
) -> Plan:
    """How to seat ``learners`` on MIG slices of ``gpu``: one slice each (the smallest profile unless named)."""
    if not isinstance(learners, int) or isinstance(learners, bool) or learners < 1:
        raise LabkitError(f"learners must be a whole number from 1, not {learners!r}.")
    if not isinstance(instructor_gpus, int) or instructor_gpus < 0:
        raise LabkitError(f"instructor_gpus must be a whole number from 0, not {instructor_gpus!r}.")
    p = profile(gpu, profile_name)
    g = mig_gpu(gpu)
    per_gpu = int(p.per_gpu.value)
    learner_gpus = math.ceil(learners / per_gpu)
    total = learner_gpus + instructor_gpus
    # single: a node's GPUs are all cut alike, so whole GPUs live on nodes of their own; mixed: they may share one
    systems = math.ceil(learner_gpus / gpus_per_system) + math.ceil(instructor_gpus / gpus_per_system)
    systems_mixed = math.ceil(total / gpus_per_system)
    notes = [
        "One learner, one slice: a slice is one CUDA device with its own SMs, L2 slice and memory; others' work does not slow it.",
        "MIG slices have no CUDA IPC: no peer copies and no NCCL between slices; multi-GPU sections show labkit's models.",
        f"Timings on a {p.name} slice reflect {p.compute_slices} of 7 compute slices; percent-of-peak figures use the whole "
        f"{g.name}'s datasheet peaks, so read them as a share of the whole GPU.",
    ]
    if instructor_gpus:
        notes.append(
            f"Instructor GPUs run with MIG disabled: under mig.strategy=single on nodes of their own "
            f"(nvidia.com/mig.config=all-disabled), {systems} system(s) in all; under mixed (or one DGX with a "
            f"per-GPU mig-parted layout) beside the slices, {systems_mixed} system(s)."
        )
    free = systems * gpus_per_system - total
    if free:
        notes.append(f"{free} GPU(s) of the {systems} system(s) stay free.")
    return Plan(
        gpu=g.name,
        learners=learners,
        profile=p.name,
        slice_memory_gb=p.memory.value,
        slices_per_gpu=per_gpu,
        learner_gpus=learner_gpus,
        instructor_gpus=instructor_gpus,
        gpus=total,
        dgx_systems=systems,
        dgx_systems_mixed=systems_mixed,
        spare_slices=learner_gpus * per_gpu - learners,
        gpu_memory_gb=g.memory_size.to("GB").value,
        node_label={"nvidia.com/mig.config": p.node_label},
        instructor_node_label={"nvidia.com/mig.config": "all-disabled"},
        resource_single={"nvidia.com/gpu": 1},
        resource_mixed={p.resource_mixed: 1},
        labs=labs_on(p),
        notes=notes,
        sources={
            "profiles": p.per_gpu.source,
            "gpu memory": g.memory_size.source,
            "max instances": max_instances(gpu).source,
            "lab memory": LABS[0].label,
        },
    )


def format_plan(pl: Plan) -> str:
    """The plan as text for the terminal."""
    if not isinstance(pl, Plan):
        raise LabkitError(f"format_plan needs the plan labkit.mig.plan() returned, got {type(pl).__name__}.")

    def kv(d: dict[str, Any], sep: str) -> str:
        return ", ".join(f"{k}{sep}{v}" for k, v in d.items())

    systems = (
        f"{pl.dgx_systems} DGX system(s) of {GPUS_PER_DGX}"
        if pl.dgx_systems == pl.dgx_systems_mixed
        else f"{pl.dgx_systems} DGX system(s) of {GPUS_PER_DGX} under mig.strategy=single, {pl.dgx_systems_mixed} under mixed"
    )
    lines = [
        f"{pl.learners} learners on {pl.gpu} ({pl.gpu_memory_gb:g} GB): one MIG {pl.profile} slice each "
        f"({pl.slice_memory_gb:g} GB, {pl.slices_per_gpu} per GPU)",
        f"  GPUs: {pl.learner_gpus} for learners + {pl.instructor_gpus} whole for instructors = {pl.gpus} "
        f"-> {systems}; {pl.spare_slices} spare slice(s)",
        f"  GPU Operator: label the nodes {kv(pl.node_label, '=')}; pods ask for {kv(pl.resource_single, ': ')} "
        f"(mig.strategy=single) or {kv(pl.resource_mixed, ': ')} (mixed)",
        "",
        "  lab  works  GB*     skips on one slice",
    ]
    for row in pl.labs:
        skips = "; ".join(row["skips"]) or "-"
        lines.append(f"  {row['lab']}   {'yes' if row['works'] else 'NO ':<5}  {row['gpu_memory_gb']:>6.2f}  {skips}")
    lines += [
        f"  * GPU memory the lab holds in gpu mode, {LABS[0].label}",
        "",
        *(f"  - {n}" for n in pl.notes),
        "",
        "  sources: " + "; ".join(f"{k}: {v}" for k, v in pl.sources.items()),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- Kubernetes profiles


def _whole_gpus(count: int) -> dict[str, Any]:
    """KubeSpawner's override for an instructor's ``count`` whole GPUs (on nodes with MIG disabled), with 16 CPU cores
    and 64 GB of memory per GPU."""
    return {
        "extra_resource_limits": {"nvidia.com/gpu": str(count)},
        "node_selector": {"nvidia.com/mig.config": "all-disabled"},
        "cpu_limit": 16 * count,
        "mem_limit": f"{64 * count}G",
        "environment": {"LABKIT_GPU_SHARE": "whole-gpu"},
    }


def k8s_profiles(gpu: str, profile_name: str | None = None) -> list[dict[str, Any]]:
    """Zero to JupyterHub ``singleuser.profileList`` entries for nodes of ``gpu``: a learner's slice under
    ``mig.strategy=single`` (the default profile) and ``mixed``, and instructors' one or two whole GPUs (their
    slugs start with ``instructor``; ``deploy/k8s/values.yaml`` offers those to instructors only)."""
    p = profile(gpu, profile_name)
    g = p.gpu
    share = {"LABKIT_GPU_SHARE": f"mig-{p.name}"}
    return [
        {
            "display_name": f"Learner: one MIG {p.name} slice of an {g}",
            "slug": "learner",
            "default": True,
            "description": f"mig.strategy=single: a slice is one nvidia.com/gpu, on nodes labelled nvidia.com/mig.config={p.node_label}",
            "kubespawner_override": {
                "extra_resource_limits": {"nvidia.com/gpu": "1"},
                "node_selector": {"nvidia.com/mig.config": p.node_label},
                "environment": dict(share),
            },
        },
        {
            "display_name": f"Learner: one MIG {p.name} slice of an {g}, mixed strategy",
            "slug": "learner-mixed",
            "description": f"mig.strategy=mixed: the slice is asked for by its profile ({p.resource_mixed})",
            "kubespawner_override": {"extra_resource_limits": {p.resource_mixed: "1"}, "environment": dict(share)},
        },
        {
            "display_name": f"Instructor: one whole {g}",
            "slug": "instructor",
            "description": "MIG disabled; peer copies and NCCL need two GPUs (instructor-2gpu)",
            "kubespawner_override": _whole_gpus(1),
        },
        {
            "display_name": f"Instructor: two whole {g} (labs 07 and 08 measured)",
            "slug": "instructor-2gpu",
            "kubespawner_override": _whole_gpus(2),
        },
    ]


def k8s_profiles_yaml(gpu: str, profile_name: str | None = None) -> str:
    """:func:`k8s_profiles` as a values file for ``helm ... -f deploy/k8s/values.yaml -f <this>``."""
    import yaml

    g = mig_gpu(gpu).name
    head = (
        f"# Zero to JupyterHub profiles for {g} nodes, made by `labkit mig-plan --gpu '{g}' --k8s-profiles`.\n"
        f"# helm upgrade --install labkit jupyterhub/jupyterhub -f deploy/k8s/values.yaml -f <this file>\n"
    )
    return head + yaml.safe_dump({"singleuser": {"profileList": k8s_profiles(gpu, profile_name)}}, sort_keys=False, width=120)


def add_cli(sub: Any) -> None:
    """Register ``labkit mig-plan`` on an argparse subparsers object."""
    p = sub.add_parser("mig-plan", help="plan MIG slices for a class: profile, slices per GPU, GPUs, labs on a slice")
    p.add_argument("--gpu", default="H200", help="GPU model (default H200): H200, H100, 'A100 40GB', 'A100 80GB'")
    p.add_argument("--learners", type=int, default=None, help="number of learners, one slice each")
    p.add_argument("--instructor-gpus", type=int, default=0, help="whole GPUs (MIG off) for instructors")
    p.add_argument("--profile", default=None, help="MIG profile (default: the smallest, e.g. 1g.18gb)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--k8s-profiles",
        action="store_true",
        help="print Zero to JupyterHub profiles (a values file) for nodes of this GPU, and nothing else",
    )


def _emit(text: str) -> int:
    """Print ``text``; a reader that closed the pipe early (``| head``) ends the output quietly, no traceback."""
    import os
    import sys

    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit would fail on the closed pipe again
        return 0
    return 0


def cli(args: argparse.Namespace) -> int:
    """Run ``labkit mig-plan`` with parsed arguments."""
    if args.k8s_profiles:
        return _emit(k8s_profiles_yaml(args.gpu, args.profile).rstrip("\n"))
    if args.learners is None:
        raise LabkitError("mig-plan needs --learners N (or --k8s-profiles for the Kubernetes profiles alone).")
    pl = plan(args.gpu, args.learners, instructor_gpus=args.instructor_gpus, profile_name=args.profile)
    return _emit(json.dumps(asdict(pl), indent=2) if args.json else format_plan(pl))
