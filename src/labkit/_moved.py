"""Where labkit's modules moved (issue 32): old name -> new name. :mod:`labkit` installs a finder that makes
``import labkit.<old>`` (and ``python -m labkit.<old>``) give the module that lives at the new name: one module
object under both names, so a monkeypatch or a JupyterHub config that names the old one reaches the real one.
The script that made the move (``tools/relayout.py``, commit 6ef99a9) wrote this table; tests/test_layers.py checks that every entry resolves."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

MOVED: dict[str, str] = {
    "occupancy": "hw.occupancy",
    "roofline": "hw.roofline",
    "topology": "hw.topology",
    "nvml": "hw.nvml",
    "ptx": "cuda.ptx",
    "cuda_cpp": "cuda.cpp",
    "cuda_host": "cuda.host",
    "kernels_cuda": "cuda.sources",
    "precision": "numerics.precision",
    "scaling": "numerics.scaling",
    "bench": "gpu.bench",
    "bandwidth": "gpu.bandwidth",
    "spin": "gpu.spin",
    "gpuerrors": "gpu.errors",
    "cupylab": "gpu.cupylab",
    "tensorcores": "gpu.tensorcores",
    "video": "kernels.video_pipeline",
    "ranks": "dist.ranks",
    "_rank_worker": "dist._rank_worker",
    "_rank_gpu": "dist._rank_gpu",
    "_rank_ddp": "dist._rank_ddp",
    "mpi_ring": "dist.mpi_ring",
    "ddp": "dist.ddp",
    "collectives": "dist.collectives",
    "hub_setup": "classroom.hub_setup",
    "hub_native": "classroom.hub_native",
    "progress_service": "classroom.progress_service",
    "gradebook": "classroom.gradebook",
    "mig": "classroom.mig",
    "export": "classroom.export",
    "workcopy": "classroom.workcopy",
    "doctor": "cli.doctor",
}


#: new name -> the old (public) name: what notebooks and messages call a module
PUBLIC: dict[str, str] = {f"labkit.{v}": f"labkit.{k}" for k, v in MOVED.items()}


def public_name(module: str) -> str:
    """``labkit.numerics.precision`` -> ``labkit.precision`` (and ``labkit.numerics.precision.x`` likewise); other
    names unchanged."""
    for new in sorted(PUBLIC, key=len, reverse=True):
        if module == new or module.startswith(new + "."):
            return PUBLIC[new] + module[len(new) :]
    return module


class _Alias(importlib.abc.Loader):
    """Loads an old name: imports the new one and leaves it in sys.modules under the old name, which is the
    module the import system then hands back (the placeholder it made is dropped)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder module; exec_module replaces it

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[module.__name__] = importlib.import_module(self.target)

    def get_code(self, fullname: str) -> Any:  # `python -m labkit.<old>` runs the new module as __main__
        return compile(
            f"import runpy; runpy.run_module({self.target!r}, run_name='__main__', alter_sys=True)",
            f"<labkit alias {fullname} -> {self.target}>",
            "exec",
        )


class AliasFinder(importlib.abc.MetaPathFinder):
    """``labkit.<old>`` -> ``labkit.<new>`` for every entry of :data:`MOVED`."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname[len("labkit.") :]) if fullname.startswith("labkit.") else None
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias("labkit." + new))


def install() -> None:
    """Put the finder on sys.meta_path once."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(AliasFinder())
