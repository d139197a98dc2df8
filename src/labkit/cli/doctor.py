"""``labkit doctor``: a report of the learner's environment and what to do next.

JSON keys (``labkit doctor --json``), all always present:

- ``labkit``: labkit's version; ``python``: Python version; ``platform``: OS and machine;
- ``packages``: ``{name: version or null}`` for numpy, numba, numba-cuda, cupy, cuda-bindings, ml_dtypes,
  networkx, plotly, ipywidgets, nvidia-ml-py, jupyterlab;
- ``mode``: ``"gpu"`` or ``"sim"``; ``mode_reason``: why;
- ``driver_version``: CUDA driver version (``"12.8"``) or null; ``cuda_runtime``: the CUDA runtime CuPy uses, or null;
- ``gpus``: list of ``{index, name, compute_capability, memory_gib, sm_count, uuid, pci_bus_id, mig}`` (CUDA order);
- ``nvlink``: ``{available: bool, reason, per_gpu: [{index, active_links}], p2p: [[status per pair]]}``: NVML's view,
  each CUDA device matched to its NVML device by UUID or PCI bus id; without NVML ``reason`` says why it is skipped;
- ``ptx``: ``{toolchain, nvrtc, cuda_bindings, arches, headers_from, nvvm, ptxas, ok}``: the PTX toolchain that works
  without a GPU: which CUDA it is (``"CUDA 12.9"`` or ``"CUDA 13.0"``), the architectures its NVRTC targets and
  where its headers came from (``[{path, origin}]``: a wheel and its version, or a toolkit such as ``CUDA_HOME``);
- ``labs``: ``{device, profile, plan: [{lab, part, action, why}], note}``: what each lab does on the GPU found
  (:func:`labkit.gpu.profiles.lab_plan`: ``action`` is runs, model, ptx or skipped, ``why`` in words); in sim mode
  ``plan`` is empty and ``note`` says so. ``labkit doctor --profile T4`` shows the same for a device profile;
- ``next_steps``: list of sentences.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from typing import Any, Sequence

from labkit.errors import LabkitError

PACKAGES = (
    "numpy",
    "numba",
    "numba-cuda",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "cuda-bindings",
    "cuda-pathfinder",
    "ml_dtypes",
    "networkx",
    "plotly",
    "ipywidgets",
    "nvidia-ml-py",
    "jupyterlab",
)
KEYS = (
    "labkit",
    "python",
    "platform",
    "packages",
    "mode",
    "mode_reason",
    "driver_version",
    "cuda_runtime",
    "gpus",
    "nvlink",
    "ptx",
    "labs",
    "next_steps",
)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _nvlink_summary(gpus: Sequence[Any], nvml_module: Any = None) -> dict[str, Any]:
    """NVLink links and P2P READ status of the CUDA devices ``gpus``, from NVML (``nvml_module``: tests)."""
    from labkit.hw import nvml as nv

    if not gpus:
        return {"available": False, "reason": "no GPU in gpu mode", "per_gpu": [], "p2p": []}
    try:
        with nv.session(nvml_module) as pynvml:
            handles = nv.handles_for(pynvml, gpus)
            enabled = nv.constant(pynvml, "NVML_FEATURE_ENABLED", 1)
            ok = nv.constant(pynvml, "NVML_P2P_STATUS_OK", 0)
            read = nv.cap_index(pynvml, "READ")
            per_gpu = []
            for g, h in zip(gpus, handles):
                active = 0
                for link in range(nv.constant(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
                    try:
                        active += int(pynvml.nvmlDeviceGetNvLinkState(h, link) == enabled)
                    except pynvml.NVMLError:  # NOT_SUPPORTED / INVALID_ARGUMENT past the last link
                        break
                per_gpu.append({"index": g.index, "active_links": active})
            p2p = []
            for i, a in enumerate(handles):
                row = []
                for j, b in enumerate(handles):
                    if i == j:
                        row.append("X")
                        continue
                    try:
                        status = pynvml.nvmlDeviceGetP2PStatus(a, b, read)
                        row.append("OK" if status == ok else f"not supported ({status})")
                    except pynvml.NVMLError as exc:
                        row.append(f"unknown ({exc})")
                p2p.append(row)
            return {"available": True, "reason": None, "per_gpu": per_gpu, "p2p": p2p}
    except LabkitError as exc:  # NVML missing, failing, or not knowing a CUDA device: a report, not a crash
        return {"available": False, "reason": nv.skipped("NVLink and P2P", exc), "per_gpu": [], "p2p": []}


def _cuda_runtime() -> str | None:
    try:
        import cupy

        v = cupy.cuda.runtime.runtimeGetVersion()
        return f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:  # noqa: BLE001 - absent CuPy is normal in sim mode
        return None


def _in_jupyter() -> bool:
    """True inside a Jupyter kernel (a notebook), or in a command a notebook or JupyterLab's terminal started."""
    if "ipykernel" in sys.modules:
        try:
            from IPython import get_ipython

            if getattr(get_ipython(), "kernel", None) is not None:
                return True
        except ImportError:  # pragma: no cover
            pass
    return bool(os.environ.get("JPY_PARENT_PID") or os.environ.get("JPY_SESSION_NAME"))


def report() -> dict[str, Any]:
    """Everything ``labkit doctor`` knows, as a JSON-ready dict with the keys in :data:`KEYS`."""
    from labkit.cuda.ptx import toolchain
    from labkit.mode import env

    from .._version import __version__

    e = env()
    tc = toolchain()
    ptx = {
        "toolchain": tc.get("toolchain"),
        "nvrtc": tc.get("nvrtc"),
        "cuda_bindings": tc.get("cuda_bindings"),
        "arches": tc.get("arches", []),
        "headers_from": tc.get("headers_from", []),
        "headers": tc.get("headers", {}),
        "nvvm": tc.get("nvvm"),
        "ptxas": tc.get("ptxas"),
        "ok": bool(tc.get("nvrtc") and tc.get("nvvm") and all(tc.get("headers", {}).values())),
    }
    packages = {name: _version(name) for name in PACKAGES}
    cupy_installed = bool(packages["cupy-cuda12x"] or packages["cupy-cuda13x"])
    steps = []
    if e.mode == "sim":
        start = "Carry on with the labs in this JupyterLab." if _in_jupyter() else "Start with `make lab` (or `labkit lab`)."
        steps.append(
            "You are in sim mode: every lab runs on this CPU through the CUDA simulator and NumPy; "
            f"timings are CPU times. {start}"
        )
        if e.driver_version and " found, but " in e.reason:
            steps.append(f"A GPU is here but gpu mode is not possible yet: {e.reason}.")
        elif e.driver_version and not cupy_installed:
            from labkit.mode import install_command

            steps.append(
                "A CUDA driver is installed but no device is usable; check `nvidia-smi` and CUDA_VISIBLE_DEVICES. "
                f"gpu mode also needs CuPy: {install_command(e.driver_version)}."
            )
        elif e.driver_version:
            steps.append("A CUDA driver is installed but no device is usable; check `nvidia-smi` and CUDA_VISIBLE_DEVICES.")
    else:
        if e.mig:
            steps.append(f"This is a {e.mig}: peaks and sizes are the slice's, not the whole GPU's.")
        steps.append("You are in gpu mode: kernels run on the device and timings are CUDA-event times.")
    if not ptx["ok"]:
        missing = [h for h, ok in ptx["headers"].items() if not ok]
        what = f" (headers not found: {', '.join(missing)})" if missing else ""
        steps.append(
            f"The PTX toolchain is incomplete{what}: reinstall with `make test` or `pip install -e .` (the "
            "nvidia-cuda-nvrtc-cu12 and nvidia-cuda-nvcc-cu12 wheels), or on a CUDA 13 stack set CUDA_HOME "
            "to a CUDA 13 toolkit (or install nvidia-cuda-crt, nvidia-cuda-runtime and nvidia-cuda-nvrtc 13)."
        )
    return {
        "labkit": __version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "packages": packages,
        "mode": e.mode,
        "mode_reason": e.reason,
        "driver_version": e.driver_version,
        "cuda_runtime": _cuda_runtime() if e.mode == "gpu" else None,
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "compute_capability": ".".join(map(str, g.compute_capability)),
                "memory_gib": round(g.memory_bytes / 2**30, 1),
                "sm_count": g.sm_count,
                "uuid": g.uuid,
                "pci_bus_id": g.pci_bus_id,
                "mig": e.mig if g.mig or (g.index == 0 and e.mig) else None,
            }
            for g in e.gpus
        ],
        "nvlink": _nvlink_summary(e.gpus),
        "ptx": ptx,
        "labs": labs(e),
        "next_steps": steps,
    }


def labs(e: Any) -> dict[str, Any]:
    """What each lab does on the GPU of ``e`` (an Environment: this machine's, or a device profile's)."""
    from dataclasses import asdict

    from labkit.gpu import profiles

    if not e.is_gpu:
        return {"device": None, "profile": None, "plan": [], "note": profiles.plan_text(e)}
    prof = profiles.match(e.device_name)
    return {
        "device": prof.describe() if prof else e.device_name,
        "profile": prof.key if prof else None,
        "plan": [asdict(step) for step in profiles.lab_plan(e)],
        "note": None if prof else "no device profile for this GPU: the plan follows its compute capability alone",
    }


def render_labs(data: dict[str, Any]) -> list[str]:
    """The ``labs`` section as lines."""
    if not data["plan"]:
        return [f"labs: {data['note']}"]
    lines = [f"labs on {data['device']}:"]
    lines += [f"  - {p['lab']} {p['part']}: {p['action']}" + (f" ({p['why']})" if p["why"] else "") for p in data["plan"]]
    if data.get("note"):
        lines.append(f"  ({data['note']})")
    return lines


def profile_report(name: str, gpus: int = 1) -> dict[str, Any]:
    """``labkit doctor --profile NAME``: what each lab would do on that device profile (no GPU needed)."""
    from labkit.gpu import profiles

    return labs(profiles.profile(name).environment(gpus))


def render(data: dict[str, Any]) -> str:
    """The human-readable report."""
    lines = [
        f"labkit {data['labkit']} on Python {data['python']} ({data['platform']})",
        f"mode: {data['mode']} ({data['mode_reason']})",
        f"CUDA driver: {data['driver_version'] or 'none'}; CUDA runtime (CuPy): {data['cuda_runtime'] or 'n/a'}",
    ]
    for g in data["gpus"]:
        lines.append(
            f"GPU {g['index']}: {g['name']}, cc {g['compute_capability']}, {g['memory_gib']} GiB, {g['sm_count']} SMs"
            + (f", PCI {g['pci_bus_id']}" if g.get("pci_bus_id") else "")
            + (f" ({g['mig']})" if g.get("mig") else "")
        )
    nv = data["nvlink"]
    if nv["available"]:
        lines.append("NVLink active links per GPU: " + ", ".join(f"GPU{p['index']}={p['active_links']}" for p in nv["per_gpu"]))
    else:
        lines.append(
            f"NVLink/P2P: {nv['reason']}"
            if nv["reason"] and "skipped" in nv["reason"]
            else f"NVLink/P2P: not available ({nv['reason']})"
        )
    p = data["ptx"]
    arches = p.get("arches") or []
    span = f", targets {arches[0]} to {arches[-1]}" if arches else ""
    lines.append(
        f"PTX toolchain: {p.get('toolchain') or 'no CUDA toolchain'} (NVRTC {p['nvrtc'] or 'missing'}{span}; "
        f"cuda-bindings {p.get('cuda_bindings') or 'missing'}), NVVM {'found' if p['nvvm'] else 'missing'}, "
        f"ptxas {'found' if p['ptxas'] else 'missing'} -> {'OK' if p['ok'] else 'INCOMPLETE'}"
    )
    origins = list(dict.fromkeys(h["origin"] for h in p.get("headers_from") or []))
    if origins and p["ok"]:  # working headers need no inventory here; --json lists each folder
        lines.append(
            f"CUDA headers: found ({len(origins)} {'source' if len(origins) == 1 else 'sources'}; "
            "labkit doctor --json lists them)"
        )
    else:
        lines.append("CUDA headers from: " + ("; ".join(origins) if origins else "nowhere (no CUDA header folder found)"))
    gpu_only = ("cupy-cuda12x", "cupy-cuda13x", "nvidia-ml-py")  # used in gpu mode only
    sim = data["mode"] == "sim"
    lines.append("packages: " + ", ".join(f"{k} {v}" for k, v in data["packages"].items() if v and not (sim and k in gpu_only)))
    if sim and any(data["packages"].get(k) for k in gpu_only):
        lines.append(
            "for gpu mode (unused here): " + ", ".join(f"{k} {data['packages'][k]}" for k in gpu_only if data["packages"].get(k))
        )
    if data.get("labs"):  # a report from before the labs key (a saved doctor.json) has none
        lines += render_labs(data["labs"])
    lines.append("next:")
    lines += [f"  - {s}" for s in data["next_steps"]]
    return "\n".join(_wrap(line) for line in lines)


def _wrap(line: str, width: int | None = None) -> str:
    """``line`` folded at spaces to the terminal's width (80 where there is none, as in a notebook's ``!labkit
    doctor``), continuation lines indented: never a word cut in two, as a terminal's own wrapping does."""
    import shutil
    import textwrap

    width = width or max(40, min(shutil.get_terminal_size((80, 24)).columns, 120))
    lead = len(line) - len(line.lstrip(" -")) if line.lstrip().startswith("- ") else 0
    return textwrap.fill(line, width=width, subsequent_indent=" " * (lead or 4), break_long_words=False, break_on_hyphens=False)


def main(as_json: bool = False, profile: str | None = None) -> int:
    if profile is not None:  # a device profile instead of this machine
        plan = profile_report(profile)
        print(json.dumps(plan, indent=2) if as_json else "\n".join(_wrap(line) for line in render_labs(plan)))
        return 0
    data = report()
    print(json.dumps(data, indent=2) if as_json else render(data))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main("--json" in sys.argv))
