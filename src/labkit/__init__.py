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
from .errors import LabkitError
from .mode import Environment, current_mode, env, setup, size

_install_moved()  # labkit.<old module> -> its new package (labkit._moved.MOVED)

__version__ = "0.1.0"


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
