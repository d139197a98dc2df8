"""NVML (the ``pynvml`` module of nvidia-ml-py) for labkit: opened once per question, its devices matched to
CUDA's by UUID or PCI bus id (never by index), and a sentence saying why a section is skipped without it.

NVML numbers every GPU in the machine; CUDA numbers the ones ``CUDA_VISIBLE_DEVICES`` lets it see, in its own
order. :func:`handles_for` therefore maps each CUDA device (:class:`~labkit.device.GPUInfo`) to its NVML handle.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from labkit.device import GPUInfo, normalise_bus_id
from labkit.errors import LabkitError


class NvmlUnavailable(LabkitError):
    """NVML cannot answer here (no nvidia-ml-py, no driver library, or a device it does not know)."""


def load() -> Any:
    """The ``pynvml`` module, or :class:`NvmlUnavailable` saying how to get it."""
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable(
            "NVML queries need the package nvidia-ml-py, which is not installed.",
            fix="pip install nvidia-ml-py (it is one of labkit's requirements).",
        ) from None
    return pynvml


@contextlib.contextmanager
def session(nvml: Any = None) -> Iterator[Any]:
    """``with session() as nvml:`` NVML initialised for the block and shut down after it.

    Raises :class:`NvmlUnavailable` (with NVML's own words) when the library cannot be initialised, and in place of any
    ``NVMLError`` the block lets out (a query this GPU or this VM does not answer)."""
    nvml = load() if nvml is None else nvml
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        raise NvmlUnavailable(
            f"NVML could not start ({type(exc).__name__}: {exc}).",
            fix="Check that the NVIDIA driver is loaded (`nvidia-smi` works); everything else in labkit runs without NVML.",
        ) from None
    try:
        yield nvml
    except Exception as exc:
        error_type = getattr(nvml, "NVMLError", None)
        if not (isinstance(error_type, type) and isinstance(exc, error_type)):
            raise
        # A query the block did not handle itself: in a VM NVML answers many of them "Not Supported", "No
        # permission" or "Unknown" (nvidia-smi shows N/A). Every caller handles NvmlUnavailable (a LabkitError), so a
        # field NVML cannot give skips that section with NVML's words instead of taking down its caller (review 4, B5).
        raise NvmlUnavailable(
            f"NVML could not answer a query on this machine ({type(exc).__name__}: {exc}); in a virtual machine "
            "nvidia-smi shows such fields as N/A.",
            fix="Nothing to do: the section that needs it is skipped, the rest runs.",
        ) from None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def cap_index(nvml: Any, name: str) -> int:
    """The integer of ``NVML_P2P_CAPS_INDEX_<name>``. nvidia-ml-py defines ``READ`` as the tuple ``(0,)``; passing
    the tuple to ``nvmlDeviceGetP2PStatus`` raises ``ctypes.ArgumentError``, so it is unpacked here."""
    value = getattr(nvml, f"NVML_P2P_CAPS_INDEX_{name}")
    if isinstance(value, (tuple, list)):
        (value,) = value
    return int(value)


def constant(nvml: Any, name: str, default: int) -> int:
    """An integer NVML constant (tuples of one unpacked), or ``default`` when this nvidia-ml-py lacks it."""
    value = getattr(nvml, name, default)
    if isinstance(value, (tuple, list)):
        (value,) = value
    return int(value)


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def handle_for(nvml: Any, gpu: GPUInfo) -> Any:
    """The NVML handle of one CUDA device: by UUID, else by PCI bus id. A MIG slice maps to its physical GPU
    (its bus id), which is what NVLink, PCIe and P2P questions are about."""
    tried = []
    order = (("bus", gpu.pci_bus_id), ("uuid", gpu.uuid)) if gpu.mig else (("uuid", gpu.uuid), ("bus", gpu.pci_bus_id))
    for kind, key in order:
        if not key:
            continue
        try:
            if kind == "uuid":
                return nvml.nvmlDeviceGetHandleByUUID(key)
            return nvml.nvmlDeviceGetHandleByPciBusId(key)
        except Exception as exc:  # noqa: BLE001 - NVMLError_NotFound and friends: try the other key
            tried.append(f"{kind} {key}: {exc}")
    raise NvmlUnavailable(
        f"NVML has no device matching CUDA device {gpu.index} ({gpu.name}): {'; '.join(tried) or 'no UUID or bus id'}.",
        fix="Run `nvidia-smi -L` to compare; CUDA and NVML should see the same GPUs.",
    )


def handles_for(nvml: Any, gpus: Sequence[GPUInfo]) -> list[Any]:
    """NVML handles in CUDA's order, one per device of ``gpus``."""
    return [handle_for(nvml, g) for g in gpus]


def bus_id(nvml: Any, handle: Any) -> str:
    """The normalised PCI bus id NVML reports for a handle."""
    return normalise_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId))


def skipped(section: str, exc: BaseException) -> str:
    """The sentence a report shows for a section that needs NVML when NVML could not answer."""
    first = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
    return f"{section}: skipped, it needs NVML ({first})"
