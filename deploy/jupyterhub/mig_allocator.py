"""One MIG slice per learner on one DGX, for DockerSpawner (used by ``jupyterhub_config.py`` beside this file).

The slices are the MIG devices NVML lists (through ``pynvml``, from the ``nvidia-ml-py`` package), or, without
NVML, the ``MIG-...`` UUIDs in ``nvidia-smi -L``; ``LABKIT_MIG_SLICES=MIG-a,MIG-b,...`` overrides both.
A learner's server gets one slice when it starts (the same one again while it holds it), keeps it until the server
stops, and no slice is ever given to two servers at once. Assignments are saved to a JSON file, so a hub restart
(while containers keep running) does not hand out a slice that is still in use.

DockerSpawner turns the answer of :meth:`SliceAllocator.host_config` into ``docker run --gpus device=MIG-<uuid>``
(a Docker ``DeviceRequest``); instructors get whole GPUs (those with MIG disabled) the same way.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

_SMI_GPU = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*\(UUID:\s*(GPU-[0-9a-fA-F-]+)\)")
_SMI_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*(MIG-[0-9a-zA-Z/-]+)\)")


class NoSliceLeft(RuntimeError):
    """Every slice is held by a running server."""


@dataclass(frozen=True)
class Slice:
    """One MIG device: the GPU it is on, its profile and its UUID (what ``--gpus device=`` takes)."""

    gpu: int
    profile: str
    uuid: str


def parse_nvidia_smi_l(text: str) -> tuple[list[Slice], list[tuple[int, str, str]]]:
    """Parse ``nvidia-smi -L``: (MIG slices, whole GPUs as ``(index, name, uuid)``); a GPU listing MIG devices is
    in MIG mode, and its slices are listed under it."""
    slices: list[Slice] = []
    gpus: list[tuple[int, str, str]] = []
    current = -1
    for line in text.splitlines():
        m = _SMI_GPU.match(line)
        if m:
            current = int(m.group(1))
            gpus.append((current, m.group(2), m.group(3)))
            continue
        m = _SMI_MIG.match(line)
        if m and current >= 0:
            slices.append(Slice(current, m.group(1), m.group(3)))
    return slices, gpus


def slices_from_nvml() -> list[Slice]:
    """The MIG devices NVML reports, GPU by GPU (empty when NVML or MIG is not there)."""
    try:
        import pynvml as nv
    except ImportError:
        return []
    try:
        nv.nvmlInit()
    except nv.NVMLError:
        return []
    out: list[Slice] = []
    try:
        for i in range(nv.nvmlDeviceGetCount()):
            gpu = nv.nvmlDeviceGetHandleByIndex(i)
            try:
                current, _ = nv.nvmlDeviceGetMigMode(gpu)
            except nv.NVMLError:
                continue
            if current != nv.NVML_DEVICE_MIG_ENABLE:
                continue
            for j in range(nv.nvmlDeviceGetMaxMigDeviceCount(gpu)):
                try:
                    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, j)
                except nv.NVMLError:
                    continue
                uuid = nv.nvmlDeviceGetUUID(mig)
                name = nv.nvmlDeviceGetName(mig)
                profile = name.split("MIG", 1)[-1].strip() if "MIG" in name else name
                out.append(Slice(i, profile, uuid.decode() if isinstance(uuid, bytes) else uuid))
    finally:
        nv.nvmlShutdown()
    return out


def discover(env: dict[str, str] | None = None, run: Callable[..., Any] = subprocess.run) -> list[Slice]:
    """The slices to hand out: ``LABKIT_MIG_SLICES``, else NVML, else ``nvidia-smi -L``."""
    env = os.environ if env is None else env
    listed = [u.strip() for u in env.get("LABKIT_MIG_SLICES", "").split(",") if u.strip()]
    if listed:
        return [Slice(-1, "listed", u) for u in listed]
    found = slices_from_nvml()
    if found:
        return found
    try:
        out = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_nvidia_smi_l(out.stdout or "")[0]


class SliceAllocator:
    """Hands out slices, one per user, never one to two users at once; freed when the server stops."""

    def __init__(self, slices: Iterable[Slice | str], state_file: str | Path | None = None) -> None:
        self.slices = [s if isinstance(s, Slice) else Slice(-1, "listed", s) for s in slices]
        uuids = [s.uuid for s in self.slices]
        if len(set(uuids)) != len(uuids):
            raise ValueError("a slice is listed twice")
        self.state_file = Path(state_file) if state_file else None
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}  # user -> slice uuid
        self._last: dict[str, str] = {}  # user -> the slice they had last (given back to them when free)
        self._load()

    # ------------------------------------------------------------------ state
    def _load(self) -> None:
        if self.state_file and self.state_file.exists():
            try:
                d = json.loads(self.state_file.read_text())
            except ValueError:
                return
            known = {s.uuid for s in self.slices}
            self._held = {u: s for u, s in d.get("held", {}).items() if s in known}
            self._last = {u: s for u, s in d.get("last", {}).items() if s in known}

    def _save(self) -> None:
        if self.state_file:
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"held": self._held, "last": self._last}, indent=1, sort_keys=True))
            tmp.replace(self.state_file)

    # ------------------------------------------------------------------ allocation
    def assign(self, user: str) -> str:
        """The slice (UUID) for ``user``: the one they hold, else their last one if free, else the first free one."""
        with self._lock:
            if user in self._held:
                return self._held[user]
            taken = set(self._held.values())
            free = [s.uuid for s in self.slices if s.uuid not in taken]
            if not self.slices:
                raise NoSliceLeft("no MIG slices were found (NVML, nvidia-smi -L, LABKIT_MIG_SLICES): "
                                  "enable MIG and create the instances before starting the hub")
            if not free:
                raise NoSliceLeft(f"all {len(self.slices)} MIG slices are in use; stop an idle server or add GPUs")
            choice = self._last.get(user) if self._last.get(user) in free else free[0]
            self._held[user] = self._last[user] = choice
            self._save()
            return choice

    def release(self, user: str) -> str | None:
        """Free ``user``'s slice (when their server stops); returns it, or None if they held none."""
        with self._lock:
            uuid = self._held.pop(user, None)
            self._save()
            return uuid

    def held(self) -> dict[str, str]:
        """user -> slice, for the slices in use now."""
        with self._lock:
            return dict(self._held)

    # ------------------------------------------------------------------ DockerSpawner hooks
    def host_config(self, spawner: Any, *, instructors: Iterable[str] = (), instructor_gpus: Iterable[str] = ()) -> dict:
        """``DockerSpawner.extra_host_config`` (a callable of the spawner): the learner's slice, or the instructor's
        whole GPUs, as a Docker device request."""
        name = spawner.user.name
        groups = {g.name for g in getattr(spawner.user, "groups", [])}
        if name in set(instructors) or "instructors" in groups:
            devices = [str(g) for g in instructor_gpus]
            if not devices:
                raise NoSliceLeft("no whole GPU is set aside for instructors (LABKIT_INSTRUCTOR_GPUS)")
        else:
            devices = [self.assign(name)]
        return {"device_requests": [{"driver": "nvidia", "device_ids": devices, "capabilities": [["gpu"]]}]}

    def post_stop_hook(self, spawner: Any) -> None:
        """Free the slice of the server that stopped. Give ``Spawner.post_stop_hook`` a plain function that calls
        this, not the bound method: traitlets deep-copies config values, and would copy the allocator with it."""
        self.release(spawner.user.name)
