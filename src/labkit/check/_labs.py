"""Imports each lab's check module so that every exercise is registered.

Each module ``labkit.check.labNN`` registers its exercises with :func:`labkit.check.core.exercise`
at import time and must not import numba or CuPy at module level.
"""

import importlib
import pkgutil

_here = __name__.rsplit(".", 1)[0]
for _info in pkgutil.iter_modules(importlib.import_module(_here).__path__):
    if _info.name.startswith("lab"):
        importlib.import_module(f"{_here}.{_info.name}")
