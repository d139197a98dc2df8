"""The notebooks' GPU-only branches and the checks' GPU paths, exercised as far as a CPU allows (issue 42, item 2).

1. Every call into labkit, CuPy, Numba, NumPy or cuda.core inside an ``if env.is_gpu ...:`` branch of notebooks/src binds to the function it names
   (name found, arguments accepted by its signature). These branches have never run anywhere; a renamed function or
   a changed parameter would otherwise first fail on the GPU (review 4 bound 113 such calls by hand, once).
2. The checks' launching GPU paths on each device profile: lab 10's cluster launch on every GPU of the profiles (runs
   with clusters from compute capability 9.0, says so below it), and the 1,000,003-element cases of lab 05's huber
   and l2norm checks run through their GPU path, the kernels built by the real CuPy (parameters parsed and checked
   against the call) and computed by labkit's CPU stand-in, with every buffer the path allocates counted against the
   smallest profile's memory.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))


def _imports(tree: ast.Module) -> dict[str, str]:
    """Name -> dotted module or object path for every import in the notebook (any cell)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _gpu_bodies(tree: ast.Module) -> list[list[ast.stmt]]:
    """The blocks that run only in gpu mode: the body of ``if env.is_gpu ...:``, the else of ``if not
    env.is_gpu:``."""
    out: list[list[ast.stmt]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "env.is_gpu" in ast.unparse(node.test):
            negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
            out.append(node.orelse if negated else node.body)
    return out


def _chain(func: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    return [func.id, *reversed(parts)]


def _resolve(path: str) -> Any:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)  # AttributeError: a name the notebook calls that does not exist
        return obj
    raise ImportError(path)


def _device_code(block: ast.Module) -> set[int]:
    """ids of the nodes inside kernels (``@cuda.jit`` functions): device code, not host calls."""
    out: set[int] = set()
    for node in ast.walk(block):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            out |= {id(n) for n in ast.walk(node)}
    return out


def _optional_missing(target: str) -> bool:
    """Whether ``target`` lives in a package that is not installed here (not a name missing from one that is)."""
    import importlib.util

    parts = target.split(".")
    for cut in range(2, len(parts)):
        try:
            if importlib.util.find_spec(".".join(parts[:cut])) is None:
                return True
        except (ImportError, ValueError):
            return True
    return False


def _labkit_calls(sources: dict[str, str] | None = None) -> list[tuple[str, int, str, ast.Call]]:
    """Every call into the packages the GPU branches use, in the GPU-only branches of ``sources`` (name -> text;
    default: notebooks/src)."""
    calls = []
    for name, text in (sources or {p.name: p.read_text() for p in SOURCES}).items():
        tree = ast.parse(text)
        everywhere = _imports(tree)
        for body in _gpu_bodies(tree):
            block = ast.Module(body=body, type_ignores=[])
            names = {**everywhere, **_imports(block)}  # the branch's own imports win
            device = _device_code(block)
            for node in ast.walk(block):
                if id(node) in device:
                    continue
                if isinstance(node, ast.Call) and (chain := _chain(node.func)) and chain[0] in names:
                    target = ".".join([names[chain[0]], *chain[1:]])
                    if target.split(".")[0] in ("labkit", "cupy", "cupyx", "numba", "numpy", "cuda"):
                        calls.append((name, node.lineno, target, node))
    return calls


def _binding_failures(calls: list[tuple[str, int, str, ast.Call]]) -> tuple[list[str], int]:
    """The calls that name nothing or do not bind to their function's signature, and how many did bind."""
    import warnings

    bad, bound = [], 0
    for where, line, target, node in calls:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # cuda.compute without a driver says so on import
                obj = _resolve(target)
        except (ImportError, AttributeError) as exc:
            if _optional_missing(target):
                continue  # an optional package (cuda.tile, ...) the cell guards with have(): not here
            if "CPU-only machine" in str(exc):
                continue  # cuda.compute exposes its algorithms only with a driver (test_rehearsal_cupy reads its source)
            bad.append(f"{where}:{line} {target}: not found ({exc})")
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue  # *args / **kwargs at the call: nothing to bind exactly
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            continue  # a builtin without a signature
        try:
            sig.bind(*([object()] * len(node.args)), **{k.arg: object() for k in node.keywords if k.arg})
            bound += 1
        except TypeError as exc:
            bad.append(f"{where}:{line} {target}{sig}: {exc}")
    return bad, bound


def test_every_call_in_a_gpu_only_branch_binds() -> None:
    import labkit

    labkit.setup(quiet=True)
    calls = _labkit_calls()
    assert len(calls) >= 115, len(calls)  # the branches hold this many such calls (118 since lab 05 §8 runs its RawModule
    # on the CPU stand-in too, outside a GPU-only branch): the test is not vacuous
    bad, bound = _binding_failures(calls)
    assert not bad, "\n".join(bad)
    assert bound >= 100, bound


def test_the_binding_check_catches_a_wrong_call_a_missing_name_and_skips_sim_code() -> None:
    source = """
from labkit import bandwidth as bw
import cupy
if env.is_gpu:
    bw.size_sweep(0, sizes_per_direction=3)
    bw.no_such_function()
    cupy.empty(4, dtype=cupy.float32)
else:
    bw.no_such_function_either()
if not env.is_gpu:
    pass
else:
    bw.pcie_link(0, 1, 2)
"""
    calls = _labkit_calls({"fake.py": source})
    assert [c[2] for c in calls] == ["labkit.bandwidth.size_sweep", "labkit.bandwidth.no_such_function", "cupy.empty",
                                     "labkit.bandwidth.pcie_link"]
    bad, bound = _binding_failures(calls)
    assert len(bad) == 3 and bound == 1, bad  # the wrong keyword, the missing name, too many arguments


# ---------------------------------------------------------------------------------------------- lab 10 on every profile


@pytest.mark.parametrize("key", ["T4", "A100 40GB", "L4", "RTX 4090", "H100", "H200", "B200", "RTX 5090"])
def test_cluster_launch_on_every_profile(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import labkit.mode
    from labkit.check import lab10_clusters
    from labkit.gpu import profiles

    sys.path.insert(0, str(ROOT / "tests"))
    import test_gpu_paths_graph_cluster as g

    prof = profiles.profile(key)
    seen = g._fake_cuda_core(monkeypatch)
    env = prof.environment()
    monkeypatch.setattr(labkit.mode, "env", lambda: env)
    arch = "".join(map(str, prof.compute_capability))
    core = sys.modules["cuda.core"]
    core.Device = lambda: types.SimpleNamespace(arch=arch, set_current=lambda: None,
                                                create_stream=lambda: types.SimpleNamespace(sync=lambda: None))
    msg = lab10_clusters._gpu_cases(lab10_clusters.reference_source())
    if prof.compute_capability >= (9, 0):
        assert "clusters of 2 and 4 blocks" in msg and seen["options"].arch == f"sm_{arch}"
    else:
        assert "has no clusters" in msg and "clusters" not in seen


# ---------------------------------------------------------------------------------------------- lab 05's large cases


class _CountingCuPy:
    """A NumPy CuPy for the checks' GPU path: arrays are NumPy's, and every array made on the "device" is counted
    (bytes), so the path's sizes can be held against a device profile's memory."""

    def __init__(self) -> None:
        self.float32, self.float64 = np.float32, np.float64
        self.allocated = 0
        self.largest = 0

    def _count(self, a: np.ndarray) -> np.ndarray:
        self.allocated += a.nbytes
        self.largest = max(self.largest, a.nbytes)
        return a

    def asarray(self, a: Any, dtype: Any = None) -> np.ndarray:
        return self._count(np.array(a, dtype=dtype))

    def zeros(self, shape: Any, dtype: Any = float) -> np.ndarray:
        return self._count(np.zeros(shape, dtype))

    def asnumpy(self, a: Any) -> np.ndarray:
        return np.asarray(a)


def _real_cupy_kernel_then_stand_in(kernel: Any) -> Any:
    """What ``kernel.cupy()`` gives on a GPU, built by the real CuPy from labkit's strings (CuPy parses the parameters
    and the operation's types), behind a wrapper that checks each call against CuPy's parameter counts and computes
    with labkit's CPU stand-in of the same kernel (the real kernel needs a device to run)."""
    import cupy

    built = getattr(cupy, kernel._CUPY)(*kernel._cupy_args())

    def call(*args: Any) -> Any:
        assert len(args) in (built.nin, built.nargs), f"{len(args)} arguments for {built.nin} inputs ({built.nargs} in all)"
        return kernel(*args)

    return call


@pytest.mark.parametrize("exercise", ["huber", "l2norm"])
def test_lab05_large_cases_run_through_the_gpu_path(exercise: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("cupy")
    from labkit.check import lab05
    from labkit.gpu import profiles

    fake = _CountingCuPy()
    monkeypatch.setattr(lab05, "cupy_or_none", lambda: fake)
    kernel = getattr(lab05, f"_reference_{exercise}")()
    monkeypatch.setattr(type(kernel), "cupy", lambda self: _real_cupy_kernel_then_stand_in(self))
    result = getattr(lab05, exercise)(kernel)
    assert "passed" in repr(result), str(result)
    assert fake.largest == 4 * 1_000_003  # the 1,000,003-element case ran through the GPU path
    smallest = min(p.memory.to("GB").value * 1e9 for p in profiles.profiles().values())
    assert fake.allocated < 0.01 * smallest  # all of it fits the smallest profile (a T4's 16 GB) a hundred times over
