"""Find the CUDA driver and devices with ctypes, without importing numba or CuPy.

A GPU counts as usable when ``libcuda`` loads, ``cuInit`` succeeds and at least one device exists.
An importable CuPy or numba-cuda is not enough: both import fine on a laptop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

# CUdevice_attribute values from cuda.h
_ATTR_SM_COUNT = 16
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76
_ATTR_L2_BYTES = 38
_ATTR_PCI_BUS = 33


@dataclass(frozen=True)
class GPUInfo:
    """One CUDA device as the driver reports it."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    memory_bytes: int
    sm_count: int
    l2_bytes: int
    pci_bus: int

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


def _load_libcuda() -> ctypes.CDLL | None:
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


def probe_driver() -> DriverProbe:
    """Ask the CUDA driver (through ctypes) which GPUs this process can use."""
    lib = _load_libcuda()
    if lib is None:
        return DriverProbe((), None, "no CUDA driver (libcuda) on this machine")
    version = ctypes.c_int(0)
    driver_version = None
    if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
        driver_version = _version_text(version.value)
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
        gpus.append(
            GPUInfo(
                index=index,
                name=name.value.decode(errors="replace"),
                compute_capability=(attr(_ATTR_CC_MAJOR), attr(_ATTR_CC_MINOR)),
                memory_bytes=mem.value,
                sm_count=attr(_ATTR_SM_COUNT),
                l2_bytes=attr(_ATTR_L2_BYTES),
                pci_bus=attr(_ATTR_PCI_BUS),
            )
        )
    return DriverProbe(tuple(gpus), driver_version, None)
