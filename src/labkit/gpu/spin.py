"""A spin kernel that holds a CUDA stream, so that work queued behind it starts back to back (nvbandwidth's method).

The host queues the spin kernel, then the start event, the timed work and the stop event, then releases the
flag: the GPU runs the work without waiting for Python to launch it, so launch overhead is not timed. The
kernel gives up after a timeout (so a mistake cannot hang the GPU) and says so: a timed-out hold means the host
blocked while queuing (the work synchronised), and the measurement is not valid as a held one. GPU only (CuPy).

Lazy loading: with CUDA's default ``CUDA_MODULE_LOADING=LAZY`` a kernel's function is loaded on its first launch,
and loading waits for the device to go idle. A kernel first launched behind a held stream therefore waits for a
spin kernel that waits for the host: the hold times out and the measurement is lost. Every kernel that is queued
behind the spin kernel must be loaded before the hold (:func:`load`), as nvbandwidth preloads its kernels.
"""

from __future__ import annotations

import ctypes
from typing import Any

SOURCE = r"""
extern "C" __global__ void labkit_spin(volatile int *flag, unsigned long long timeout_clocks) {
    // flag[0]: the host writes 1 to release; flag[1]: set here when the timeout passed first.
    unsigned long long start = clock64();
    while (flag[0] == 0) {
        if (clock64() - start > timeout_clocks) { flag[1] = 1; break; }
    }
}
"""

#: Never queue more than this many operations behind the spin kernel: a full launch queue would block the host.
MAX_QUEUED = 128
TIMEOUT_S = 5.0
_ATTR_CLOCK_KHZ = 13  # cudaDevAttrClockRate

_KERNELS: dict[tuple[int, int], Any] = {}  # (id of the CuPy module, device) -> RawKernel


def load(cp: Any, kernel: Any, device: int) -> None:
    """Load a CuPy ``RawKernel`` on ``device`` now (compile, module, function), not at its first launch.

    Reading the function's attributes (``cuFuncGetAttribute``) loads it, as CUDA's lazy-loading notes advise."""
    with cp.cuda.Device(device):
        attrs = kernel.attributes
    if not isinstance(attrs, dict):
        raise TypeError(f"{getattr(kernel, 'name', kernel)!r}: no function attributes, so it was not loaded")


def spin_kernel(cp: Any, device: int) -> Any:
    """The spin kernel of ``device``, compiled and loaded (cached per CuPy module and device)."""
    key = (id(cp), device)
    if key not in _KERNELS:
        with cp.cuda.Device(device):
            k = cp.RawKernel(SOURCE, "labkit_spin")
        load(cp, k, device)
        _KERNELS[key] = k
    return _KERNELS[key]


def clock_hz(cp: Any, device: int) -> float:
    """The device's clock in Hz (3 GHz when the attribute is not there: a longer timeout, never a shorter one)."""
    try:
        khz = cp.cuda.runtime.deviceGetAttribute(_ATTR_CLOCK_KHZ, device)
    except Exception:  # noqa: BLE001 - deprecated attribute on newer toolkits
        khz = 0
    return float(khz) * 1e3 if khz else 3.0e9


class SpinHold:
    """A flag in pinned (mapped) host memory and the spin kernel that waits on it; :meth:`close` frees the flag."""

    def __init__(self, cp: Any, timeout_s: float = TIMEOUT_S) -> None:
        rt = cp.cuda.runtime
        self.cp, self.timeout_s = cp, timeout_s
        self.ptr = int(rt.hostAlloc(8, rt.hostAllocPortable | rt.hostAllocMapped))
        self.flag = (ctypes.c_int * 2).from_address(self.ptr)
        self.flag[0], self.flag[1] = 1, 0

    def hold(self, stream: Any, device: int) -> None:
        """Queue the spin kernel on ``stream`` (of ``device``); it holds the stream until :meth:`release`.

        Whatever is queued behind it must already be loaded (:func:`load`): see the module's note on lazy loading."""
        cp = self.cp
        kernel = spin_kernel(cp, device)  # loaded before the flag is set: nothing is held yet
        self.flag[0], self.flag[1] = 0, 0
        timeout = int(self.timeout_s * clock_hz(cp, device))
        with cp.cuda.Device(device):
            kernel((1,), (1,), (cp.uint64(self.ptr), cp.uint64(timeout)), stream=stream)

    def release(self) -> None:
        """Let every held stream go."""
        self.flag[0] = 1

    @property
    def timed_out(self) -> bool:
        """True when a spin kernel gave up before the release (read after the held work finished)."""
        return bool(self.flag[1])

    def close(self) -> None:
        self.release()
        try:
            self.cp.cuda.runtime.deviceSynchronize()
            self.cp.cuda.runtime.freeHost(self.ptr)
        except Exception:  # noqa: BLE001 - freeing at exit must not hide the result
            pass

    def __enter__(self) -> "SpinHold":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
