"""Find the CUDA driver and devices with ctypes, without importing numba or CuPy.

The driver counts as usable when ``libcuda`` loads, ``cuInit`` succeeds and at least one device exists.
That is not yet ``gpu`` mode: :mod:`labkit.mode` also needs CuPy to run an operation on the device.
Each device carries its UUID and PCI bus id, which is how it is matched with NVML's view of the machine
(NVML numbers every GPU of the machine; CUDA numbers only the visible ones, in its own order).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
from dataclasses import dataclass
from typing import Any

# CUdevice_attribute values from cuda.h (tests/test_gpu_api_surface.py checks them against cuda-bindings)
_ATTR_SM_COUNT = 16
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76
_ATTR_L2_BYTES = 38
_ATTR_PCI_BUS = 33
_ATTR_PCI_DEVICE = 34
_ATTR_PCI_DOMAIN = 50

#: The libcuda entry points :func:`probe_driver` calls (checked against cuda-bindings' driver API by the tests).
DRIVER_SYMBOLS = (
    "cuDriverGetVersion",
    "cuInit",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetUuid_v2",
    "cuDeviceGetPCIBusId",
)


class _CUuuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 16)]


@dataclass(frozen=True)
class GPUInfo:
    """One CUDA device as the driver reports it (``index`` is the CUDA index, after ``CUDA_VISIBLE_DEVICES``)."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    memory_bytes: int
    sm_count: int
    l2_bytes: int
    pci_bus: int
    uuid: str = ""  # "GPU-8-4-4-4-12" hex as NVML and nvidia-smi write it ("MIG-..." for a MIG slice)
    pci_bus_id: str = ""  # "0000:19:00.0", normalised by :func:`normalise_bus_id`
    mig: bool = False  # a MIG slice (a part of a GPU), not a whole GPU

    @property
    def arch(self) -> str:
        """The ``sm_XY`` name of the device's architecture."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"


@dataclass(frozen=True)
class DriverProbe:
    """What probing the CUDA driver found: devices, driver version, or why there is no GPU."""

    gpus: tuple[GPUInfo, ...]
    driver_version: str | None
    reason: str | None  # why no GPU is usable; None when one is

    @property
    def usable(self) -> bool:
        return bool(self.gpus)

    @property
    def driver_major(self) -> int | None:
        """The CUDA major version the driver supports (12 for "12.8"), or None without a driver."""
        return int(self.driver_version.split(".")[0]) if self.driver_version else None


def _load_libcuda() -> Any:
    for name in ("libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda"), "nvcuda.dll"):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _version_text(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def format_uuid(raw: bytes, mig: bool = False) -> str:
    """16 UUID bytes as NVML writes them: ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` (``MIG-`` for a slice)."""
    h = bytes(raw).hex()
    return f"{'MIG' if mig else 'GPU'}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def normalise_bus_id(text: str | bytes) -> str:
    """A PCI bus id in one spelling, ``dddd:bb:dd.f`` lower case: NVML writes an 8-digit domain
    (``00000000:19:00.0``), CUDA a 4-digit one (``0000:19:00.0``)."""
    s = text.decode() if isinstance(text, bytes) else str(text)
    m = re.fullmatch(r"\s*(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])\s*", s)
    if not m:
        return s.strip().lower()
    domain = int(m.group(1) or "0", 16)
    return f"{domain:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"


def visible_devices_hidden() -> bool:
    """True when ``CUDA_VISIBLE_DEVICES`` is set but empty (or only spaces): CUDA then sees no GPU at all."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return value is not None and not value.strip()


def _visible_mig() -> bool:
    return any(part.strip().startswith("MIG-") for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(","))


def probe_driver(lib: Any = None) -> DriverProbe:
    """Ask the CUDA driver (through ctypes) which GPUs this process can use. ``lib``: a loaded libcuda (tests)."""
    lib = _load_libcuda() if lib is None else lib
    if lib is None:
        return DriverProbe((), None, "no CUDA driver (libcuda) on this machine")
    version = ctypes.c_int(0)
    driver_version = None
    if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
        driver_version = _version_text(version.value)
    if visible_devices_hidden():
        return DriverProbe((), driver_version, 'CUDA_VISIBLE_DEVICES="" hides every GPU from CUDA (unset it to use the GPU)')
    status = lib.cuInit(0)
    if status != 0:
        return DriverProbe((), driver_version, f"the CUDA driver failed to initialise (cuInit returned {status})")
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return DriverProbe((), driver_version, "the CUDA driver sees no device (check CUDA_VISIBLE_DEVICES)")
    gpus = []
    for index in range(count.value):
        dev = ctypes.c_int(0)
        lib.cuDeviceGet(ctypes.byref(dev), index)
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, dev)

        def attr(code: int) -> int:
            out = ctypes.c_int(0)
            lib.cuDeviceGetAttribute(ctypes.byref(out), code, dev)
            return out.value

        mem = ctypes.c_size_t(0)
        lib.cuDeviceTotalMem_v2(ctypes.byref(mem), dev)
        uuid = _CUuuid()
        has_uuid = lib.cuDeviceGetUuid_v2(ctypes.byref(uuid), dev) == 0
        bus = ctypes.create_string_buffer(64)
        if lib.cuDeviceGetPCIBusId(bus, 64, dev) == 0 and bus.value:
            bus_id = normalise_bus_id(bus.value)
        else:
            bus_id = f"{attr(_ATTR_PCI_DOMAIN):04x}:{attr(_ATTR_PCI_BUS):02x}:{attr(_ATTR_PCI_DEVICE):02x}.0"
        text = name.value.decode(errors="replace")
        mig = " MIG " in f" {text} " or _visible_mig()
        gpus.append(
            GPUInfo(
                index=index,
                name=text,
                compute_capability=(attr(_ATTR_CC_MAJOR), attr(_ATTR_CC_MINOR)),
                memory_bytes=mem.value,
                sm_count=attr(_ATTR_SM_COUNT),
                l2_bytes=attr(_ATTR_L2_BYTES),
                pci_bus=attr(_ATTR_PCI_BUS),
                uuid=format_uuid(bytes(uuid.bytes), mig) if has_uuid else "",
                pci_bus_id=bus_id,
                mig=mig,
            )
        )
    return DriverProbe(tuple(gpus), driver_version, None)
