"""Interactive explorers (ipywidgets + plotly), one module per concern: ``architecture``, ``precision``, ...

Names are re-exported lazily: ``labkit.widgets.system_explorer()`` imports ``labkit.widgets.architecture`` on
first use. A module's public names are its ``__all__`` (or, without one, the functions and classes it defines).
Widgets build without a browser, so tests can drive them headless.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any


def _modules() -> list[str]:
    return [info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")]


def _public(module: ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__ and callable(v)
    ]


def __getattr__(name: str) -> Any:
    if name in _modules():
        return importlib.import_module(f"{__name__}.{name}")
    for mod_name in _modules():
        module = importlib.import_module(f"{__name__}.{mod_name}")
        if name in _public(module):
            return getattr(module, name)
    raise AttributeError(f"labkit.widgets has no widget named {name!r}; modules: {', '.join(_modules())}")


def __dir__() -> list[str]:
    names = set(_modules())
    for mod_name in _modules():
        try:
            names.update(_public(importlib.import_module(f"{__name__}.{mod_name}")))
        except ImportError:  # pragma: no cover - a module with a missing optional dependency
            continue
    return sorted(names | set(globals()))
