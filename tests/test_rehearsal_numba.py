"""Rehearsal (issue 29, B1, W6): numba-cuda 0.30.4 on the image's NumPy 2.5 compiles every reference kernel, in the
process (gpu mode: labkit.mode's ``row_stack`` shim) and in the PTX worker (sim mode's GPU build: the worker's own
shim); without the shim the same compile fails, so these tests can see B1 come back."""

from __future__ import annotations

from rehearsal_env import needs_rehearsal, run, run_json


#: labkit in gpu mode without a device: the mode is set by hand, so labkit's own code paths (harness.cuda_module,
#: kernels.get: numba's real CUDA target) run as they run on the H200, up to the compile.
GPU_MODE = """
import labkit.mode as m
m._ENV = m.Environment(mode="gpu", device_name="rehearsal, no device", compute_capability=(9, 0), memory_bytes=None,
                       sm_count=None, gpu_count=0, driver_version=None, reason="rehearsal")
"""


@needs_rehearsal
def test_the_image_versions() -> None:
    v = run_json("""
import json, sys, importlib.metadata as md
names = ("numpy", "cupy-cuda13x", "cuda-bindings", "cuda-core", "numba", "numba-cuda", "mpi4py", "labkit")
print(json.dumps({"python": "%d.%d" % sys.version_info[:2], **{n: md.version(n) for n in names}}))
""")
    assert v["numpy"].startswith("2.5."), v
    assert (v["cupy-cuda13x"], v["cuda-bindings"][:4], v["numba-cuda"]) == ("14.2.0", "13.0", "0.30.4"), v
    assert v["python"] in ("3.12", "3.11"), v  # 3.12 where the machine has one (the image: 3.12)


@needs_rehearsal
def test_b1_numba_cuda_fails_on_numpy_25_without_labkit() -> None:
    """The failure the shim exists for: if numba-cuda ever fixes it, this fails, and the shim can go."""
    res = run("""
from numba import cuda
def k(a):
    a[cuda.grid(1)] = 1.0
cuda.compile_ptx(k, "void(float32[:])", cc=(9, 0))
""")
    assert res.returncode != 0 and "has no attribute 'row_stack'" in res.stderr, res.stderr[-2000:]


@needs_rehearsal
def test_b1_every_reference_kernel_compiles_in_gpu_mode() -> None:
    """gpu mode's path: ``import labkit`` (the shim), then numba's real target compiles each ``kernels.get`` kernel."""
    out = run_json(GPU_MODE + """
import json
from numba import cuda
from labkit import kernels
out = {}
extra = [("matmul_naive_uncoalesced", "void(float32[:,:], float32[:,:], float32[:,:])")]  # the tiled target's baseline
for name, sig in [(r.name, r.signature) for r in kernels.REFERENCE] + extra:
    ptx, _ = cuda.compile_ptx(kernels.get(name).py_func, sig, cc=(9, 0))
    out[name] = ".target sm_90" in ptx
print(json.dumps(out))
""")
    assert len(out) == 20 and all(out.values()), out


@needs_rehearsal
def test_b1_every_reference_kernel_builds_in_the_ptx_worker() -> None:
    """sim mode's GPU build (``require_ptx``, ``labkit.ptx.compile``) runs in ptx's worker process: its own shim."""
    out = run_json("""
import json, labkit
labkit.setup("sim", quiet=True)
from labkit import kernels, ptx
out = {}
for ref in kernels.REFERENCE:
    out[ref.name] = ptx.compile(kernels.source(ref.name), ref.signature, "sm_90").summary().total
print(json.dumps(out))
""")
    assert len(out) == 19 and all(n > 0 for n in out.values()), out


def test_w6_the_ptx_worker_imports_numba_cuda_021_layout_guarded() -> None:
    """numba-cuda <= 0.20 has no ``numba.cuda.core.errors``: the worker imports it inside ``try ... except
    ImportError`` and clears only the ``loc_info`` it found (W6). (No numba-cuda 0.20 runs on this image's NumPy, so
    the guard is read, not run; the worker itself runs in the test above.)"""
    import ast

    from labkit import ptx

    tree = ast.parse(ptx._WORKER)
    guarded = [n for n in ast.walk(tree) if isinstance(n, ast.Try)
               and any(isinstance(b, ast.Import) and b.names[0].name == "numba.cuda.core.errors" for b in n.body)
               and any(getattr(h.type, "id", None) == "ImportError" for h in n.handlers)]
    bare = [n for n in tree.body if isinstance(n, ast.Import) and n.names[0].name == "numba.cuda.core.errors"]
    assert guarded and not bare
    assert "_errors2.loc_info" not in ptx._WORKER  # the optional module is only reached through _LOCS


@needs_rehearsal
def test_every_reference_kernel_compiles_for_the_oldest_and_newest_profile() -> None:
    """gpu mode on a T4 (sm_75, the oldest GPU the CUDA 13 stack serves) and an RTX 5090 (sm_120): labkit's
    environment is the device profile's (issue 42, item 3), and numba-cuda 0.30.4's real target with the image's NVVM
    compiles every reference kernel for that GPU's own architecture. (sm_90 is compiled above.)"""
    out = run_json("""
import json
import labkit.mode as m
from labkit.gpu import profiles
from numba import cuda
from labkit import kernels
out = {}
for key in ("T4", "RTX 5090"):
    m._ENV = env = profiles.profile(key).environment()
    cc = env.compute_capability
    for ref in kernels.REFERENCE:
        ptx, _ = cuda.compile_ptx(kernels.get(ref.name).py_func, ref.signature, cc=cc)
        out[f"{key}:{ref.name}"] = f".target sm_{cc[0]}{cc[1]}" in ptx
print(json.dumps(out))
""", timeout=300)
    assert len(out) == 2 * 19 and all(out.values()), [k for k, ok in out.items() if not ok]
