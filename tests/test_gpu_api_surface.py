"""Every CuPy, cupy_backends, cuda-bindings, numba.cuda and pynvml name labkit's GPU code calls exists in the
installed package and accepts the arguments labkit passes (issue 11: no GPU code had ever run).

The calls are found by reading labkit's source (``ast``), not listed by hand: a new call is checked as soon as it
is written. Signatures come from ``inspect.signature`` or, for CuPy's Cython functions, from the signature Cython
embeds in the docstring (:func:`gpu_fakes.signature_of`). Runs without a GPU: CuPy imports without one.
Cost: about 3 s (importing CuPy and pynvml; one subprocess for numba's real CUDA target).
"""

from __future__ import annotations

import ast
import ctypes
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_fakes import signature_of

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "labkit"
#: The modules whose GPU paths this issue owns, and the others that call CuPy/NVML (checked too).
GPU_MODULES = ["mode.py", "device.py", "cli/doctor.py", "hw/nvml.py", "hw/topology.py", "gpu/bandwidth.py", "gpu/tensorcores.py", "gpu/bench.py",
               "gpu/cupylab.py", "gpu/spin.py", "gpu/errors.py", "dist/collectives.py"]

cupy = pytest.importorskip("cupy", reason="make test installs CuPy (cupy-cuda12x[ctk]); it imports without a GPU")


def _real_modules() -> dict[str, Any]:
    import pynvml
    from cuda.bindings import runtime as cudart
    from cupy._core import _routines_linalg as rl
    from cupy.cuda import cublas

    import cupyx

    return {"cupy": cupy, "cupy.cuda": cupy.cuda, "cupy.cuda.runtime": cupy.cuda.runtime, "cupy.cuda.cublas": cublas,
            "cupyx": cupyx, "rl": rl, "cudart": cudart, "pynvml": pynvml}


#: How a name in labkit's source maps to a real module: (dotted prefix as written, module key).
PREFIXES = [
    (("cp", "cuda", "runtime"), "cupy.cuda.runtime"), (("cupy", "cuda", "runtime"), "cupy.cuda.runtime"),
    (("self", "cp", "cuda", "runtime"), "cupy.cuda.runtime"), (("rt",), "cupy.cuda.runtime"),
    (("cp", "cuda"), "cupy.cuda"), (("cupy", "cuda"), "cupy.cuda"), (("self", "cp", "cuda"), "cupy.cuda"),
    (("cp",), "cupy"), (("cupy",), "cupy"), (("self", "cp"), "cupy"), (("cupyx",), "cupyx"),
    (("cublas",), "cupy.cuda.cublas"), (("rl",), "rl"), (("cudart",), "cudart"),
    (("nvml",), "pynvml"), (("pynvml",), "pynvml"),
]


def _chain(node: ast.AST) -> tuple[str, ...] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


def _uses() -> list[dict[str, Any]]:
    """Every attribute use with a known prefix in the GPU modules: module key, name, and the call's arguments."""
    out = []
    for fname in GPU_MODULES:
        tree = ast.parse((SRC / fname).read_text())
        calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            chain = _chain(node)
            if chain is None:
                continue
            for prefix, key in PREFIXES:
                if chain[:-1] == prefix:
                    call = calls.get(id(node))
                    use = {"where": f"{fname}:{node.lineno}", "module": key, "name": chain[-1], "call": call is not None}
                    if call is not None and not any(isinstance(a, ast.Starred) for a in call.args) \
                            and not any(k.arg is None for k in call.keywords):
                        use["nargs"] = len(call.args)
                        use["kwargs"] = [k.arg for k in call.keywords]
                    out.append(use)
                    break
    return out


USES = _uses()
# labkit's own helpers that take the pynvml module as ``nvml`` (``nv.session(nvml)``) are not pynvml names
_NOT_API = {("pynvml", "NVMLError")}


def test_the_scan_finds_the_calls_that_broke() -> None:
    names = {(u["module"], u["name"]) for u in USES}
    for expected in [("pynvml", "nvmlDeviceGetNvLinkRemotePciInfo"), ("pynvml", "nvmlDeviceGetP2PStatus"),
                     ("cupy.cuda.runtime", "memcpyAsync"), ("cupy.cuda.runtime", "memcpyPeerAsync"),
                     ("cupy.cuda.cublas", "gemmEx"), ("cupy", "RawKernel"), ("cudart", "cudaDeviceDisablePeerAccess"),
                     ("pynvml", "nvmlDeviceGetHandleByUUID"), ("pynvml", "nvmlDeviceGetHandleByPciBusId")]:
        assert expected in names, expected
    assert len(USES) > 80


@pytest.mark.parametrize("use", USES, ids=lambda u: f"{u['module']}.{u['name']}@{u['where']}")
def test_name_exists_and_takes_the_arguments_used(use: dict[str, Any]) -> None:
    real = _real_modules()[use["module"]]
    assert hasattr(real, use["name"]), f"{use['where']}: {use['module']} has no {use['name']!r}"
    obj = getattr(real, use["name"])
    if "nargs" not in use:
        return
    assert callable(obj), f"{use['where']}: {use['module']}.{use['name']} is called but is a {type(obj).__name__}"
    target = obj
    if isinstance(obj, type):
        try:
            sig = signature_of(obj)
        except TypeError:
            try:
                sig = signature_of(obj.__init__)
            except TypeError:
                return  # a Cython class without an embedded signature: existence is what can be checked
    else:
        try:
            sig = signature_of(target)
        except TypeError:
            pytest.fail(f"{use['where']}: no signature for {use['module']}.{use['name']}")
    args = [object()] * use["nargs"]
    kwargs = {k: object() for k in use["kwargs"]}
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        pytest.fail(f"{use['where']}: {use['module']}.{use['name']}{sig} does not take "
                    f"{use['nargs']} positional argument(s) and {use['kwargs']}: {exc}")


def test_cython_signatures_are_really_enforced() -> None:
    """The embedded signatures are the real ones: a call with the wrong count raises TypeError before CUDA is asked."""
    rt = cupy.cuda.runtime
    assert list(signature_of(rt.memcpyAsync).parameters) == ["dst", "src", "size", "kind", "stream"]
    with pytest.raises(TypeError, match="exactly 5 positional"):
        rt.memcpyAsync(0, 0, 0)
    from cupy.cuda import cublas

    assert len(signature_of(cublas.gemmEx).parameters) == 19


def test_nvml_constants_labkit_reads_are_integers_after_unpacking() -> None:
    import pynvml

    from labkit import bandwidth, nvml

    assert isinstance(pynvml.NVML_P2P_CAPS_INDEX_READ, tuple)  # the trap: (0,), not 0
    with pytest.raises(ctypes.ArgumentError):
        ctypes.CDLL(None).abs(pynvml.NVML_P2P_CAPS_INDEX_READ)  # what ctypes does with it (the real call's failure)
    for cap in bandwidth._P2P_CAPS:
        assert isinstance(nvml.cap_index(pynvml, cap), int)
    src = "\n".join((SRC / f).read_text() for f in GPU_MODULES)
    names = set(re.findall(r'constant\(\w+, "(NVML_\w+)"', src)) | set(bandwidth._P2P_STATUS_TEXT)
    assert names and all(hasattr(pynvml, n) for n in names), sorted(n for n in names if not hasattr(pynvml, n))
    assert all(isinstance(nvml.constant(pynvml, n, -1), int) for n in names)


def test_driver_symbols_and_attribute_codes_match_cuda_h() -> None:
    """device.py calls libcuda through ctypes: its symbols and CUdevice_attribute codes against cuda-bindings."""
    from cuda.bindings import driver

    from labkit import device

    for sym in device.DRIVER_SYMBOLS:
        assert hasattr(driver, sym.removesuffix("_v2")) or hasattr(driver, sym), sym
    attr = driver.CUdevice_attribute
    assert device._ATTR_SM_COUNT == attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    assert device._ATTR_CC_MAJOR == attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    assert device._ATTR_CC_MINOR == attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
    assert device._ATTR_L2_BYTES == attr.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
    assert device._ATTR_PCI_BUS == attr.CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
    assert device._ATTR_PCI_DEVICE == attr.CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
    assert device._ATTR_PCI_DOMAIN == attr.CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
    assert ctypes.sizeof(device._CUuuid) == 16


def test_runtime_attribute_and_error_codes_match_cuda_bindings() -> None:
    from cuda.bindings import runtime as cudart

    from labkit import bandwidth, spin

    assert spin._ATTR_CLOCK_KHZ == cudart.cudaDeviceAttr.cudaDevAttrClockRate
    assert bandwidth._ATTR_SM_COUNT == cudart.cudaDeviceAttr.cudaDevAttrMultiProcessorCount
    for name in ("cudaSuccess", "cudaErrorPeerAccessAlreadyEnabled", "cudaErrorPeerAccessNotEnabled"):
        assert hasattr(cudart.cudaError_t, name)
    for fn in ("cudaSetDevice", "cudaDeviceEnablePeerAccess", "cudaDeviceDisablePeerAccess", "cudaGetErrorString"):
        assert callable(getattr(cudart, fn))


def test_cublas_enums_match_cupy() -> None:
    from cupy.cuda import cublas

    from labkit import tensorcores as tc

    assert tc._CUBLAS_COMPUTE_32F == cublas.CUBLAS_COMPUTE_32F
    assert tc._CUBLAS_GEMM_DEFAULT == cublas.CUBLAS_GEMM_DEFAULT
    assert tc._CUDA_R_32F == cupy.cuda.runtime.CUDA_R_32F and tc._CUDA_R_16BF == cupy.cuda.runtime.CUDA_R_16BF
    from cupy._core import _routines_linalg as rl

    assert all(hasattr(rl, n) for n in ("set_compute_type", "get_compute_type", "COMPUTE_TYPE_TF32", "COMPUTE_TYPE_DEFAULT"))


def test_cublas_loads_the_way_labkit_imports_it_in_a_fresh_process() -> None:
    """The BF16 GEMM imported ``cupy_backends.cuda.libs.cublas`` directly: in a fresh process that fails to find
    libcublas (CuPy loads the wheel's library only through ``cupy.cuda.cublas``). labkit's way must work."""
    code = ("import labkit.tensorcores as tc; m = tc._cublas(); print(hasattr(m, 'gemmEx'))\n"
            "import subprocess, sys\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr[-2000:]


def _numba_cuda_uses() -> dict[str, list[str]]:
    """``cuda.<name>`` in every labkit module where ``cuda`` is numba's CUDA module (``from numba import cuda`` or
    ``cuda = ...cuda_module()``): name -> where."""
    out: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if "from numba import cuda" not in text and not re.search(r"^\s*cuda(: Any)? = .*(cuda_module\(\)|_cuda\(\)|None  # numba)", text, re.M):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and _chain(node) == ("cuda", node.attr):
                out.setdefault(node.attr, []).append(f"{path.relative_to(SRC)}:{node.lineno}")
    return out


def test_numba_cuda_names_exist_in_the_real_target() -> None:
    """The Numba labs and the kernels suite use numba.cuda's real target on a GPU; the test process runs the
    simulator, so the real module is asked in a subprocess (it imports without a GPU)."""
    uses = _numba_cuda_uses()
    assert {"grid", "jit", "syncthreads", "to_device", "device_array", "shared", "atomic"} <= set(uses)
    code = ("import importlib, json, sys\nfrom numba import cuda\nnames = json.loads(sys.argv[1])\n"
            "def has(n):\n    if hasattr(cuda, n): return True\n"
            "    try: importlib.import_module('numba.cuda.' + n); return True\n    except ImportError: return False\n"
            "print(json.dumps([n for n in names if not has(n)]))")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "LABKIT_MODE")}
    res = subprocess.run([sys.executable, "-c", code, json.dumps(sorted(uses))], capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    missing = json.loads(res.stdout.strip().splitlines()[-1])
    assert missing == [], {n: uses[n] for n in missing}


def test_spin_kernel_and_wmma_compile_for_the_course_targets() -> None:
    """The CUDA C++ labkit hands CuPy's RawKernel compiles (NVRTC, no GPU): the spin kernel and the SM copy."""
    from labkit import bandwidth, ptx, spin

    for src, name in ((spin.SOURCE, "labkit_spin"), (bandwidth._KERNELS, "labkit_sm_copy")):
        out = ptx.compile_cuda(src, "sm_90", name=f"{name}.cu")
        assert name in str(getattr(out, "text", out))
    sig = inspect.signature(ptx.compile_cuda)
    assert "options" in sig.parameters
