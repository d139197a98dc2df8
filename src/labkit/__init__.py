"""labkit: the helper library of the DGX GPU-computing course.

Start every notebook with ``import labkit; env = labkit.setup()``. ``labkit.xp`` is CuPy on a GPU and
NumPy in the simulator; ``labkit.size(gpu=..., sim=...)`` picks a problem size for the mode.
Submodules (``check``, ``bench``, ``ptx``, ``hw``, ``topology``, ``bandwidth``, ``precision``,
``widgets``) load on first use.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from ._moved import install as _install_moved
from ._version import __version__
from .device import GPUInfo
from .errors import LabkitError
from .mode import SETUP_STEPS, Environment, current_mode, env, setup, size

_install_moved()  # labkit.<old module> -> its new package (labkit._moved.MOVED)


def _install_sim_rules() -> None:
    from .sim import install

    install()


def _describe_slice(gpu: GPUInfo) -> str | None:
    from .hw.slices import describe_slice

    return describe_slice(gpu)


# setup()'s steps that need the layers above labkit.mode (this root is the one place that knows them all)
SETUP_STEPS.install_sim_rules = _install_sim_rules
SETUP_STEPS.describe_slice = _describe_slice


__all__ = ["Environment", "LabkitError", "current_mode", "env", "setup", "show", "size", "xp", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "xp":
        from .mode import array_module

        return array_module()
    if name == "show":  # labkit.show(kernel, *args, grid=, block=): what every thread read and wrote
        from .widgets.trace import show

        return show
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
