"""A MIG slice (or any device with fewer SMs than its datasheet) beside the whole GPU of its record."""

from __future__ import annotations

from ..device import GPUInfo
from ..errors import LabkitError
from ..validate import describe
from . import match_device


def describe_slice(gpu: GPUInfo) -> str | None:
    """For a MIG slice (or any device with fewer SMs than its model's datasheet): what it is beside the whole GPU."""
    if not isinstance(gpu, GPUInfo):
        raise LabkitError(f"gpu must be a GPUInfo (labkit.env().gpus holds them), got {describe(gpu)}.")
    whole = match_device(gpu.name.split(" MIG ")[0])
    full_sms = int(whole.sm_count.value) if whole else None
    if not gpu.mig and (full_sms is None or gpu.sm_count >= full_sms):
        return None
    mem = gpu.memory_bytes / 2**30
    if whole is None:
        return f"MIG slice: {gpu.sm_count} SMs, {mem:.1f} GiB; peak figures unknown for this GPU"
    full_mem = whole.memory_size.value
    return (
        f"MIG slice: {gpu.sm_count} of {full_sms} SMs, {mem:.1f} GiB of {full_mem:g} {whole.memory_size.unit} "
        f"of the whole {whole.name}; peak figures scaled to the slice"
    )
