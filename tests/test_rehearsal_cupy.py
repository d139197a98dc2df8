"""Rehearsal (issue 29, B2 and the API surface): real CuPy 14.2 (cupy-cuda13x, the image's) traces every function
labkit and the notebooks pass to ``cupy.fuse`` on arrays over ``UnownedMemory`` (no GPU: only the device may fail), and
the API-surface tests run again against the image's CuPy, cuda-core and cuda-bindings 13."""

from __future__ import annotations

import ast
import re
import subprocess

import pytest

from rehearsal_env import PY, ROOT, env, needs_rehearsal, run_json


def fused_functions() -> set[str]:
    """Names of every function passed to ``*.fuse(...)`` in labkit and the notebook sources (read with ``ast``)."""
    names = set()
    for path in [*(ROOT / "src" / "labkit").rglob("*.py"), *(ROOT / "notebooks" / "src").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fuse" \
                    and node.args:
                arg = node.args[0]
                names.add(arg.attr if isinstance(arg, ast.Attribute) else getattr(arg, "id", ast.unparse(arg)))
    return names


#: Every fusable function: the public, checked one (learners may fuse it) and what fusion_benchmark fuses.
FUSABLE = ("affine_normalize", "_affine_expr")

TRACE = """
import json, traceback
import numpy as np, cupy
from cupy.cuda import MemoryPointer, UnownedMemory
from labkit import cupylab

def fake(n):  # a device array at a made-up address: CuPy traces it, only a launch would touch the device
    return cupy.ndarray((n,), np.float32, MemoryPointer(UnownedMemory(1 << 32, n * 4, owner=None, device_id=0), 0))

out = {}
x, g, b = fake(1024), fake(1024), fake(1024)
for name in NAMES:
    try:
        cupy.fuse(getattr(cupylab, name))(x, g, b, 0.1, 1.7)
        out[name] = {"error": None}
    except Exception as exc:
        frames = [f.name for f in traceback.extract_tb(exc.__traceback__)]
        out[name] = {"type": type(exc).__module__ + "." + type(exc).__name__, "error": str(exc)[:300], "frames": frames}
print(json.dumps(out))
"""


def test_every_fused_function_is_traced_here() -> None:
    assert fused_functions() <= set(FUSABLE), fused_functions() - set(FUSABLE)


@needs_rehearsal
def test_b2_real_cupy_fuse_traces_every_fused_function() -> None:
    out = run_json(f"NAMES = {FUSABLE!r}\n" + TRACE)
    for name, r in out.items():
        # traced and built into a kernel; it fails at the launch, which asks for a device (there is none here)
        assert r.get("type", "").startswith("cupy_backends.cuda.api."), (name, r)
        assert any(f.endswith("ElementwiseKernel.__call__") for f in r["frames"]), (name, r)


@needs_rehearsal
def test_api_surface_against_the_image_packages() -> None:
    """tests/test_gpu_api_surface.py and tests/test_lab10_api_surface.py, run by the image's Python: every CuPy,
    cuda-core, cuda.bindings, numba.cuda and NVML name labkit and the GPU cells call, bound to cupy-cuda13x 14.2's,
    cuda-core 1.2's and cuda-bindings 13's signatures (cuda.tile, cuda.coop and cuda.compute are not on the image:
    those tests skip there and run in the suite's own .venv)."""
    res = subprocess.run([str(PY), "-m", "pytest", "-q", "-p", "no:randomly", "-x", "--timeout", "300",
                          "tests/test_gpu_api_surface.py", "tests/test_lab10_api_surface.py", "-k", "not unchecked_packages"],
                         cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    tail = res.stdout[-3000:]
    assert res.returncode == 0, tail + res.stderr[-2000:]
    assert " passed" in tail and " failed" not in tail, tail


@needs_rehearsal
def test_nvmath_calls_bind_to_the_wheel_signatures() -> None:
    """Lab 10's nvmath-python cell (not on the image: the cell says how to install it): ``matmul`` and
    ``MatmulEpilog.RELU_BIAS`` as nvmath-python 1.0.1's wheel defines them, read with ``ast`` (importing it needs the
    GPU stack). The call's arguments are bound to the signature; a wrong keyword would fail here."""
    import inspect
    import zipfile

    import test_lab10_api_surface as surface

    (wheel,) = (ROOT / ".venv-rehearsal" / "not-on-image").glob("nvmath_python-*.whl")
    with zipfile.ZipFile(wheel) as z:
        module = ast.parse(z.read("nvmath/linalg/advanced/matmulmod.py").decode())
        config = z.read("nvmath/linalg/advanced/_configuration.py").decode()
        stub = z.read("nvmath/bindings/cublasLt.pyi").decode(errors="replace")
    (fn,) = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "matmul"]
    sig = surface._signature_of(fn)
    calls = [u for u in surface._uses() if u["name"] == "nvmath.linalg.advanced.matmul" and "nargs" in u]
    assert calls, "lab 10 calls nvmath.linalg.advanced.matmul"
    for use in calls:
        sig.bind(*[object()] * use["nargs"], **{k: object() for k in use["kwargs"]})
    assert {"epilog", "epilog_inputs"} <= set(sig.parameters)
    assert "MatmulEpilog = cublaslt.Epilogue" in config and re.search(r"\bRELU_BIAS\b", stub)
    with pytest.raises(TypeError):  # the reader is not one that binds anything
        sig.bind(object(), object(), epilogue=object())
    assert inspect.Parameter.POSITIONAL_ONLY in {p.kind for p in sig.parameters.values()}


FUSED_COMPILE = """
import json, tempfile, os
os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np, cupy
import cupy._core._fusion_thread_local as fusing
import cupy._core.core as core
import cupy.cuda.compiler as compiler
from cupy._core import _carray, _kernel, _scalar, fusion
from cupy.cuda import MemoryPointer, UnownedMemory
from labkit import cupylab

def fake(n):
    return cupy.ndarray((n,), np.float32, MemoryPointer(UnownedMemory(1 << 32, n * 4, owner=None, device_id=0), 0))

def fused_kernel(fn, args):  # what Fusion.__call__ does before it launches: trace the function into a kernel
    history = fusion._FusionHistory()
    fusing.thread_local.history, fusing.thread_local.is_old_fusing = history, True
    try:
        return history.get_fusion(fn, args, fn.__name__)[0]
    finally:
        fusing.thread_local.history, fusing.thread_local.is_old_fusing = None, False

def source(k):  # CuPy's own elementwise template, for 1-D contiguous float32 arrays, double scalars and the indexer
    infos = []
    for p in k.params:
        if p.name == "_ind":
            infos.append(_kernel._ArgInfo(2, _carray.Indexer, None, 1, True, True))
        elif p.dtype == np.float64:
            infos.append(_kernel._ArgInfo(3, _scalar.CScalar, p.dtype, 0, True, True))
        else:
            infos.append(_kernel._ArgInfo(1, cupy.ndarray, p.dtype, 1, True, True))
    return _kernel._get_elementwise_kernel_code(tuple(infos), _kernel._TypeMap(()), k.params, k.operation, k.name,
                                                k.preamble)

compiler._get_arch_for_options_for_nvrtc = lambda arch=None: ("-arch=sm_90", "cubin")  # the device's arch, asked of none

def compile(code):
    before = set(os.listdir(os.environ["CUPY_CACHE_DIR"]))
    try:
        core.compile_with_cache(code, (), arch="90")
        return {"stage": "loaded"}
    except compiler.CompileException as exc:
        return {"stage": "compile failed", "error": str(exc)[:300]}
    except Exception as exc:  # the module load asks for a device
        made = set(os.listdir(os.environ["CUPY_CACHE_DIR"])) - before
        return {"stage": "compiled, load failed" if any(m.endswith(".cubin") for m in made) else "failed before compiling",
                "error": type(exc).__name__}

x, g, b = fake(1024), fake(1024), fake(1024)
out = {}
for name in NAMES:
    k = fused_kernel(getattr(cupylab, name), (x, g, b, 0.1, 1.7))
    code = source(k)
    out[name] = {**compile(code), "nin": k.nin, "nout": k.nout, "float_ops": code.count("static_cast< float >")}
out["broken"] = compile(source(k).replace("_ind.set(i);", "_ind.set(i); cupy_no_such_op();"))  # the control: fails here
print(json.dumps(out))
"""


@needs_rehearsal
def test_c7_the_fused_kernel_itself_compiles_with_nvrtc() -> None:
    """Review 4, C7: the fuse test above stops at the device check before CuPy writes the kernel. Here CuPy 14.2's own
    tracing (``_FusionHistory.get_fusion``, the step ``Fusion.__call__`` takes) and its own elementwise template make
    the fused kernel's CUDA source, and CuPy's NVRTC path compiles it for sm_90; only the module load, which needs a
    device, fails. A kernel with a wrong operation fails at the compile, so the check can see a broken fusion."""
    out = run_json(f"NAMES = {FUSABLE!r}\n" + FUSED_COMPILE)
    for name in FUSABLE:
        r = out[name]
        assert r["stage"] == "compiled, load failed", (name, r)
        assert (r["nin"], r["nout"]) == (5, 1) and r["float_ops"] >= 8, (name, r)  # float32 arithmetic, as unfused
    assert out["broken"]["stage"] == "compile failed" and "cupy_no_such_op" in out["broken"]["error"], out["broken"]
