"""numba-cuda's own warp-operation tests, run against labkit's warp primitives in the simulator.

The installed package ships ``numba/cuda/tests/cudapy/test_warp_ops.py``, written for GPUs and skipped on
the simulator (``@skip_on_cudasim``). This file loads that module as installed, with the simulator skip made a
no-op (its ``numba.cuda.testing`` import is answered by a stand-in, since the real one needs ``filecheck``,
a test-only dependency), and runs each of its test methods. Nothing of it is copied here.

Left out, each for a reason a simulator cannot change:

- ``test_shfl_sync_const_mode_val`` and ``test_vote_sync_const_mode_val`` read the LLVM IR of the compiled
  kernel (``inspect_llvm``): the simulator compiles nothing;
- ``test_shfl_sync_const_mode_val_sm100`` and ``test_vote_sync_const_mode_val_sm100`` compile PTX for sm_100
  (``compile_ptx`` is None in the simulator);
- ``test_vote_sync_type_validation`` expects ``TypingError`` from ``cuda.jit(signature)`` itself, at compile
  time; the simulator has no compile step, so labkit rejects those types at the call instead
  (``tests/test_sim_warp.py::test_types_a_gpu_compile_rejects``).
"""

from __future__ import annotations

import importlib.util
import sys
import types
import unittest
from pathlib import Path

import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests (on a GPU numba-cuda's own suite applies)")

NOT_IN_A_SIMULATOR = {
    "test_shfl_sync_const_mode_val": "reads the compiled LLVM IR",
    "test_vote_sync_const_mode_val": "reads the compiled LLVM IR",
    "test_shfl_sync_const_mode_val_sm100": "compiles PTX (compile_ptx)",
    "test_vote_sync_const_mode_val_sm100": "compiles PTX (compile_ptx)",
    "test_vote_sync_type_validation": "expects TypingError when cuda.jit compiles",
}


def _installed_test_file() -> Path:
    import numba.cuda

    path = Path(numba.cuda.__file__).parent / "tests" / "cudapy" / "test_warp_ops.py"
    if not path.is_file():
        pytest.skip(f"numba-cuda's warp tests are not installed ({path})")
    return path


def _standin_testing() -> types.ModuleType:
    """What test_warp_ops imports from numba.cuda.testing, with the simulator skip removed."""
    mod = types.ModuleType("numba.cuda.testing")
    mod.unittest = unittest  # type: ignore[attr-defined]
    mod.CUDATestCase = unittest.TestCase  # type: ignore[attr-defined]
    mod.skip_on_cudasim = lambda reason: (lambda obj: obj)  # type: ignore[attr-defined]
    return mod


def _load() -> types.ModuleType:
    from labkit.sim import warp

    warp.install()
    spec = importlib.util.spec_from_file_location("numba_cuda_installed_test_warp_ops", _installed_test_file())
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get("numba.cuda.testing")
    sys.modules["numba.cuda.testing"] = _standin_testing()
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("numba.cuda.testing", None)
        else:
            sys.modules["numba.cuda.testing"] = saved
    return module


# kept in a dict, not a module attribute: pytest would collect the TestCase class itself, skips and all
_loaded = {"case": getattr(_load(), "TestCudaWarpOperations", None)} if not env.is_gpu else {"case": None}
_names = sorted(n for n in dir(_loaded["case"]) if n.startswith("test_")) if _loaded["case"] is not None else []


def test_the_installed_suite_is_the_one_expected() -> None:
    case = _loaded["case"]
    assert case is not None and len(_names) >= 15, _names
    assert not getattr(case, "__unittest_skip__", False), "the simulator skip was not removed"
    assert set(NOT_IN_A_SIMULATOR) <= set(_names), "numba-cuda renamed tests: review NOT_IN_A_SIMULATOR"


@pytest.mark.parametrize("name", [n for n in _names if n not in NOT_IN_A_SIMULATOR])
def test_numba_cuda_warp_op(name: str) -> None:
    result = unittest.TestResult()
    _loaded["case"](name).run(result)
    problems = [text for _, text in result.failures + result.errors]
    assert not problems, "\n".join(problems)
    assert not result.skipped, result.skipped
