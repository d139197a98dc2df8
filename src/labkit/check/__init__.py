"""Exercise checks: ``labkit.check.<exercise>(answer)``, ``run``, ``exercises``, ``hint``.

Every lab's checks live in ``labkit.check.labNN`` and are reachable here by name, e.g.
``labkit.check.vector_add(kernel)``. See :mod:`labkit.check.core` for the result and hint mechanism and
:mod:`labkit.check.harness` for how kernels are graded.
"""

from __future__ import annotations

from typing import Any

from .core import Failed, Result, Unsolved, exercise, exercises, hint, run, solved_or_reference

__all__ = ["Failed", "Result", "Unsolved", "exercise", "exercises", "hint", "run", "solved_or_reference"]


def __getattr__(name: str) -> Any:
    import importlib
    import pkgutil

    if name.startswith("_"):
        raise AttributeError(name)
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("lab"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            if hasattr(module, name):
                return getattr(module, name)
    raise AttributeError(f"labkit.check has no check named {name!r}; labkit.check.exercises() lists them")
