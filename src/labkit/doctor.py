"""``labkit doctor``: a report of the learner's environment and what to do next.

JSON keys (``labkit doctor --json``), all always present:

- ``labkit``: labkit's version; ``python``: Python version; ``platform``: OS and machine;
- ``packages``: ``{name: version or null}`` for numpy, numba, numba-cuda, cupy, cuda-bindings, ml_dtypes,
  networkx, plotly, ipywidgets, nvidia-ml-py, jupyterlab;
- ``mode``: ``"gpu"`` or ``"sim"``; ``mode_reason``: why;
- ``driver_version``: CUDA driver version (``"12.8"``) or null; ``cuda_runtime``: the CUDA runtime CuPy uses, or null;
- ``gpus``: list of ``{index, name, compute_capability, memory_gib, sm_count}``;
- ``nvlink``: ``{available: bool, reason, per_gpu: [{index, active_links}], p2p: [[status per pair]]}``;
- ``ptx``: ``{nvrtc, nvvm, ptxas, ok}``: the PTX toolchain that works without a GPU;
- ``next_steps``: list of sentences.
"""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata
from typing import Any

PACKAGES = ("numpy", "numba", "numba-cuda", "cupy-cuda12x", "cupy-cuda13x", "cuda-bindings", "ml_dtypes",
            "networkx", "plotly", "ipywidgets", "nvidia-ml-py", "jupyterlab")
KEYS = ("labkit", "python", "platform", "packages", "mode", "mode_reason", "driver_version", "cuda_runtime",
        "gpus", "nvlink", "ptx", "next_steps")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _nvlink_summary(gpu_count: int) -> dict[str, Any]:
    if gpu_count == 0:
        return {"available": False, "reason": "no GPU", "per_gpu": [], "p2p": []}
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVML missing or failing is a report, not a crash
        return {"available": False, "reason": f"NVML unavailable: {exc}", "per_gpu": [], "p2p": []}
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        per_gpu = []
        for i, h in enumerate(handles):
            active = 0
            for link in range(18):
                try:
                    active += int(pynvml.nvmlDeviceGetNvLinkState(h, link) == pynvml.NVML_FEATURE_ENABLED)
                except pynvml.NVMLError:
                    break
            per_gpu.append({"index": i, "active_links": active})
        p2p = []
        for a in handles:
            row = []
            for b in handles:
                if a is b:
                    row.append("X")
                    continue
                try:
                    status = pynvml.nvmlDeviceGetP2PStatus(a, b, pynvml.NVML_P2P_CAPS_INDEX_READ)
                    row.append("OK" if status == pynvml.NVML_P2P_STATUS_OK else f"not supported ({status})")
                except pynvml.NVMLError as exc:
                    row.append(f"unknown ({exc})")
            p2p.append(row)
        return {"available": True, "reason": None, "per_gpu": per_gpu, "p2p": p2p}
    finally:
        pynvml.nvmlShutdown()


def _cuda_runtime() -> str | None:
    try:
        import cupy

        v = cupy.cuda.runtime.runtimeGetVersion()
        return f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:  # noqa: BLE001 - absent CuPy is normal in sim mode
        return None


def report() -> dict[str, Any]:
    """Everything ``labkit doctor`` knows, as a JSON-ready dict with the keys in :data:`KEYS`."""
    from . import __version__
    from .mode import env
    from .ptx import toolchain

    e = env()
    tc = toolchain()
    ptx = {"nvrtc": tc.get("nvrtc"), "nvvm": tc.get("nvvm"), "ptxas": tc.get("ptxas"),
           "ok": bool(tc.get("nvrtc") and tc.get("nvvm"))}
    packages = {name: _version(name) for name in PACKAGES}
    cupy_installed = bool(packages["cupy-cuda12x"] or packages["cupy-cuda13x"])
    steps = []
    if e.mode == "sim":
        steps.append("You are in sim mode: every lab runs on this CPU through the CUDA simulator and NumPy; "
                     "timings are CPU times. Start with `make lab` (or `labkit lab`).")
        if e.driver_version:
            steps.append("A CUDA driver is installed but no device is usable; check `nvidia-smi` and CUDA_VISIBLE_DEVICES.")
    else:
        if not cupy_installed:
            major = (e.driver_version or "12").split(".")[0]
            steps.append(f"Install CuPy for gpu mode: pip install -e '.[cuda{major if major in ('12', '13') else '12'}]'.")
        steps.append("You are in gpu mode: kernels run on the device and timings are CUDA-event times.")
    if not ptx["ok"]:
        steps.append("The PTX toolchain is incomplete: reinstall with `make test` or `pip install -e .` (needs the "
                     "nvidia-cuda-nvrtc-cu12 and nvidia-cuda-nvcc-cu12 wheels).")
    return {
        "labkit": __version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "packages": packages,
        "mode": e.mode,
        "mode_reason": e.reason,
        "driver_version": e.driver_version,
        "cuda_runtime": _cuda_runtime() if e.mode == "gpu" else None,
        "gpus": [{"index": g.index, "name": g.name, "compute_capability": ".".join(map(str, g.compute_capability)),
                  "memory_gib": round(g.memory_bytes / 2**30, 1), "sm_count": g.sm_count} for g in e.gpus],
        "nvlink": _nvlink_summary(e.gpu_count),
        "ptx": ptx,
        "next_steps": steps,
    }


def render(data: dict[str, Any]) -> str:
    """The human-readable report."""
    lines = [f"labkit {data['labkit']} on Python {data['python']} ({data['platform']})",
             f"mode: {data['mode']} ({data['mode_reason']})",
             f"CUDA driver: {data['driver_version'] or 'none'}; CUDA runtime (CuPy): {data['cuda_runtime'] or 'n/a'}"]
    for g in data["gpus"]:
        lines.append(f"GPU {g['index']}: {g['name']}, cc {g['compute_capability']}, {g['memory_gib']} GiB, {g['sm_count']} SMs")
    nv = data["nvlink"]
    if nv["available"]:
        lines.append("NVLink active links per GPU: " + ", ".join(f"GPU{p['index']}={p['active_links']}" for p in nv["per_gpu"]))
    else:
        lines.append(f"NVLink/P2P: not available ({nv['reason']})")
    p = data["ptx"]
    lines.append(f"PTX toolchain: NVRTC {p['nvrtc'] or 'missing'}, NVVM {'found' if p['nvvm'] else 'missing'}, "
                 f"ptxas {'found' if p['ptxas'] else 'missing'} -> {'OK' if p['ok'] else 'INCOMPLETE'}")
    lines.append("packages: " + ", ".join(f"{k} {v}" for k, v in data["packages"].items() if v))
    lines.append("next:")
    lines += [f"  - {s}" for s in data["next_steps"]]
    return "\n".join(lines)


def main(as_json: bool = False) -> int:
    data = report()
    print(json.dumps(data, indent=2) if as_json else render(data))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main("--json" in sys.argv))
