"""One MIG slice per learner on one DGX, for DockerSpawner (used by ``jupyterhub_config.py`` beside this file).

The slices are the MIG devices NVML lists (through ``pynvml``, from the ``nvidia-ml-py`` package), or, without
NVML, the ``MIG-...`` UUIDs in ``nvidia-smi -L``; ``LABKIT_MIG_SLICES=MIG-a,MIG-b,...`` overrides both.
A learner's server gets one slice when it starts (the same one again while it holds it), keeps it until the server
stops, and no slice is ever given to two servers at once. Assignments are saved to a JSON file, so a hub restart
(while containers keep running) does not hand out a slice that is still in use.

When every slice is taken, a start waits in line (:meth:`SliceAllocator.acquire`, the spawner's pre-spawn hook):
a stop that is still under way frees its slice for the first learner waiting, and a learner still without a slice
after the wait is told how many slices there are and where they stood in the line. A state file that cannot be read
never means "every slice is free": the allocator rebuilds the assignments from the running containers (their
``--gpus device=...`` requests, :func:`held_by_containers`), or, without that, refuses to start with a message.

DockerSpawner turns the answer of :meth:`SliceAllocator.host_config` into ``docker run --gpus device=MIG-<uuid>``
(a Docker ``DeviceRequest``); instructors get whole GPUs (those with MIG disabled) the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

_SMI_GPU = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*\(UUID:\s*(GPU-[0-9a-fA-F-]+)\)")
_SMI_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*(MIG-[0-9a-zA-Z/-]+)\)")


class NoSliceLeft(RuntimeError):
    """Every slice is held by a running server."""


class AllocatorStateError(RuntimeError):
    """The state file cannot be read, and the assignments cannot be rebuilt: the hub must not start."""


log = logging.getLogger("labkit.mig_allocator")


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


def held_by_containers(client: Any, slices: Iterable[Slice]) -> dict[str, str]:
    """The slices the running containers hold, from their device requests: ``{"container:<name>": uuid}``.

    ``client`` is a ``docker.DockerClient`` (``docker.from_env()``). A slice held this way is freed when the server
    of that container stops (:meth:`SliceAllocator.release` with the container's name)."""
    known = {s.uuid for s in slices}
    out: dict[str, str] = {}
    for container in client.containers.list():
        requests = ((container.attrs or {}).get("HostConfig") or {}).get("DeviceRequests") or []
        for req in requests:
            for dev in req.get("DeviceIDs") or []:
                if dev in known:
                    out[f"container:{container.name}"] = dev
    return out


def _valid_state(d: Any) -> bool:
    return (isinstance(d, dict) and all(isinstance(d.get(k, {}), dict) for k in ("held", "last"))
            and all(isinstance(a, str) and isinstance(b, str) for k in ("held", "last") for a, b in d.get(k, {}).items()))


class SliceAllocator:
    """Hands out slices, one per user, never one to two users at once; freed when the server stops.

    ``rebuild`` (for example ``lambda: held_by_containers(docker.from_env(), slices)``) is asked for the slices in
    use when the state file is damaged; without it a damaged file raises :class:`AllocatorStateError`."""

    def __init__(self, slices: Iterable[Slice | str], state_file: str | Path | None = None, *,
                 rebuild: Callable[[], dict[str, str]] | None = None) -> None:
        self.slices = [s if isinstance(s, Slice) else Slice(-1, "listed", s) for s in slices]
        uuids = [s.uuid for s in self.slices]
        if len(set(uuids)) != len(uuids):
            raise ValueError("a slice is listed twice")
        self.state_file = Path(state_file) if state_file else None
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}  # user (or "container:<name>" after a rebuild) -> slice uuid
        self._last: dict[str, str] = {}  # user -> the slice they had last (given back to them when free)
        self._queue: list[str] = []  # users waiting for a slice, first come first served
        self._rebuild = rebuild
        self._load()

    # ------------------------------------------------------------------ state
    def _load(self) -> None:
        if not (self.state_file and self.state_file.exists()):
            return
        known = {s.uuid for s in self.slices}
        try:
            d = json.loads(self.state_file.read_text())
            if not _valid_state(d):
                raise ValueError("not the allocator's layout ({'held': {user: slice}, 'last': {user: slice}})")
        except (ValueError, OSError) as exc:
            problem = f"the MIG slice state file {self.state_file} is damaged ({exc})"
            if self._rebuild is None:
                raise AllocatorStateError(
                    f"{problem}. The hub does not start: reading it as empty would hand out slices that running "
                    "servers still use. Check `docker ps` (each learner's container and its --gpus device), then move "
                    "the file away to start with no slice in use, or restore it.") from None
            try:
                held = self._rebuild()
            except Exception as err:  # noqa: BLE001 - no Docker daemon, say
                raise AllocatorStateError(f"{problem}, and the slices in use could not be read from the running "
                                          f"containers ({err}). The hub does not start; see `docker ps`.") from None
            damaged = self.state_file.with_name(f"{self.state_file.name}.damaged-{int(time.time())}")
            self.state_file.replace(damaged)
            log.warning("%s; kept as %s, and rebuilt from the running containers: %d slice(s) in use", problem, damaged, len(held))
            self._held = {k: v for k, v in held.items() if v in known}
            self._save()
            return
        self._held = {u: s for u, s in d.get("held", {}).items() if s in known}
        self._last = {u: s for u, s in d.get("last", {}).items() if s in known}

    def _save(self) -> None:
        if self.state_file:
            tmp = self.state_file.with_suffix(".tmp")
            with open(tmp, "w") as fh:
                fh.write(json.dumps({"held": self._held, "last": self._last}, indent=1, sort_keys=True))
                fh.flush()
                os.fsync(fh.fileno())
            tmp.replace(self.state_file)

    # ------------------------------------------------------------------ allocation
    def assign(self, user: str, *, container: str | None = None, _queued: bool = False) -> str:
        """The slice (UUID) for ``user``: the one they hold (or their container held when the state was rebuilt),
        else their last one if free, else the first free one. Raises :class:`NoSliceLeft` when none is free, or
        when others waiting in line (:meth:`acquire`) come first."""
        if ":" in user:  # "container:<name>" keys are the rebuilt holdings: no user may name one
            raise NoSliceLeft(f"the user name {user!r} contains ':', which the slice allocator refuses")
        with self._lock:
            if user in self._held:
                return self._held[user]
            if container and f"container:{container}" in self._held:
                self._held[user] = self._last[user] = self._held.pop(f"container:{container}")
                self._save()
                return self._held[user]
            taken = set(self._held.values())
            free = [s.uuid for s in self.slices if s.uuid not in taken]
            if not self.slices:
                raise NoSliceLeft("no MIG slices were found (NVML, nvidia-smi -L, LABKIT_MIG_SLICES): "
                                  "enable MIG and create the instances before starting the hub")
            ahead = self._queue.index(user) if user in self._queue else len(self._queue)
            if len(free) <= ahead or (not _queued and self._queue):
                raise NoSliceLeft(f"all {len(self.slices)} MIG slices are in use; stop an idle server or add GPUs")
            choice = self._last.get(user) if self._last.get(user) in free else free[0]
            self._held[user] = self._last[user] = choice
            if user in self._queue:
                self._queue.remove(user)
            self._save()
            return choice

    async def acquire(self, user: str, *, wait_s: float = 120.0, every_s: float = 1.0, container: str | None = None,
                      say: Callable[[str], Any] | None = None) -> str:
        """:meth:`assign`, waiting up to ``wait_s`` seconds in line when every slice is taken (a stop under way
        frees one). ``say`` hears where the user stands; the error at the end says it too."""
        deadline = time.monotonic() + wait_s
        told = None
        try:
            while True:
                try:
                    return self.assign(user, container=container, _queued=True)
                except NoSliceLeft:
                    if not self.slices:
                        raise
                with self._lock:
                    if user not in self._queue:
                        self._queue.append(user)
                    place = self._queue.index(user) + 1
                if place != told and say is not None:
                    say(f"all {len(self.slices)} MIG slices are in use: you are number {place} in line for the next one to be freed")
                    told = place
                if time.monotonic() >= deadline:
                    raise NoSliceLeft(
                        f"all {len(self.slices)} MIG slices are in use; you were number {place} in line and none was freed "
                        f"in {wait_s:.0f} s. Try again in a few minutes (idle servers are stopped, freeing their slices), "
                        "or ask the instructor.")
                await asyncio.sleep(every_s)
        finally:
            with self._lock:
                if user in self._queue:
                    self._queue.remove(user)

    def release(self, user: str, *, container: str | None = None) -> str | None:
        """Free ``user``'s slice (when their server stops), and the slice their container held if the state was
        rebuilt from the containers; returns the slice, or None if they held none."""
        with self._lock:
            uuid = self._held.pop(user, None)
            if container:
                uuid = self._held.pop(f"container:{container}", None) or uuid
            self._save()
            return uuid

    def waiting(self) -> list[str]:
        """The users waiting for a slice, first in line first."""
        with self._lock:
            return list(self._queue)

    def held(self) -> dict[str, str]:
        """user -> slice, for the slices in use now."""
        with self._lock:
            return dict(self._held)

    # ------------------------------------------------------------------ spawner hooks
    @staticmethod
    def is_instructor(spawner: Any, instructors: Iterable[str] = ()) -> bool:
        """An instructor: listed, or in the hub group ``instructors``."""
        groups = {g.name for g in getattr(spawner.user, "groups", [])}
        return spawner.user.name in set(instructors) or "instructors" in groups

    async def pre_spawn_hook(self, spawner: Any, *, instructors: Iterable[str] = (), wait_s: float = 120.0) -> None:
        """``Spawner.pre_spawn_hook``: a learner's slice before the server starts, waiting in line when all are taken."""
        if self.is_instructor(spawner, instructors):
            return
        await self.acquire(spawner.user.name, wait_s=wait_s, container=getattr(spawner, "object_name", None),
                           say=lambda text: spawner.log.info("labkit: %s: %s", spawner.user.name, text))

    def host_config(self, spawner: Any, *, instructors: Iterable[str] = (), instructor_gpus: Iterable[str] = ()) -> dict:
        """``DockerSpawner.extra_host_config`` (a callable of the spawner): the learner's slice, or the instructor's
        whole GPUs, as a Docker device request."""
        if self.is_instructor(spawner, instructors):
            devices = [str(g) for g in instructor_gpus]
            if not devices:
                raise NoSliceLeft("no whole GPU is set aside for instructors (LABKIT_INSTRUCTOR_GPUS)")
        else:
            devices = [self.assign(spawner.user.name, container=getattr(spawner, "object_name", None))]
        return {"device_requests": [{"driver": "nvidia", "device_ids": devices, "capabilities": [["gpu"]]}]}

    def post_stop_hook(self, spawner: Any) -> None:
        """Free the slice of the server that stopped. Give ``Spawner.post_stop_hook`` a plain function that calls
        this, not the bound method: traitlets deep-copies config values, and would copy the allocator with it."""
        self.release(spawner.user.name, container=getattr(spawner, "object_name", None))

    async def post_stop_hook_checked(self, spawner: Any) -> None:
        """:meth:`post_stop_hook` once the server's container is gone. JupyterHub runs the post-stop hook even when
        stopping failed (a Docker daemon that timed out, a removal that failed), so the hook asks the spawner first:
        while ``poll()`` says the container still runs, or cannot say, the slice stays held (and logged) rather than
        handed to the next learner; the next stop, or rebuilding the state from the running containers, frees it."""
        user = spawner.user.name
        try:
            status = await spawner.poll()
        except Exception as exc:  # noqa: BLE001 - Docker did not answer: the container may still hold the slice
            log.warning("keeping %s's MIG slice: cannot tell whether their container stopped (%s)", user, exc)
            return
        if status is None:
            log.warning("keeping %s's MIG slice: their container is still running after the stop", user)
            return
        self.post_stop_hook(spawner)
