"""A MIG slice (or any device with fewer SMs than its datasheet) beside the whole GPU of its record."""

from __future__ import annotations

from functools import lru_cache

from ..device import GPUInfo
from ..errors import LabkitError
from ..validate import describe
from . import Figure, match_device


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


@lru_cache(maxsize=1)
def _mig_table() -> dict:
    import yaml

    from . import DATA_FILE

    return (yaml.safe_load(DATA_FILE.read_text(encoding="utf-8")) or {}).get("mig_profiles") or {}


def smallest_mig_slices(gpu: str) -> tuple[str, Figure]:
    """The smallest MIG profile of ``gpu`` and how many of it one GPU holds, from ``hw.yml``'s ``mig_profiles``
    (with its source): ``("1g.23gb", 7 count)`` for a B200. ``labkit.mig`` has the full tables and the class plans."""
    import re

    from . import _figure
    from . import gpu as _gpu

    g = _gpu(gpu)
    table = _mig_table()
    entry = table.get(g.name)
    if entry is None:
        raise LabkitError(f"labkit has no MIG profiles for the {g.name}.", fix=f"MIG profiles are known for: {', '.join(table)}.")
    sizes = {name: re.match(r"(\d+)g\.(\d+)gb", name) for name in entry["profiles"]}
    name = min((n for n, m in sizes.items() if m), key=lambda n: (int(sizes[n].group(1)), int(sizes[n].group(2))))  # type: ignore[union-attr]
    fig: Figure = _figure(entry["profiles"][name], entry["source"], f"mig_profiles.{g.name}.{name}")
    return name, fig
