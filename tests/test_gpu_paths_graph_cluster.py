"""The GPU paths of 05.graph and 10.cluster, run against fakes (no GPU here): the graph check on a CuPy whose streams
and graphs are the recording stand-in, the cluster check on a cuda.core whose launch computes what the kernel
would. What the fakes accept is bound to the real packages: cuda.core's ProgramOptions is the real class, and the
LaunchConfig fake takes only the parameters the real one declares. Cost: under a second."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from labkit.check import lab05_graphs, lab10_clusters  # noqa: E402
from labkit.check.core import Failed  # noqa: E402
from labkit.check.graphs import RecordingGraphCuPy  # noqa: E402


# ----------------------------------------------------------------------------- 05.graph on a fake CuPy
def _fake_cupy_modules() -> tuple[types.ModuleType, types.ModuleType, RecordingGraphCuPy]:
    rec = RecordingGraphCuPy()
    cp = types.ModuleType("cupy")
    for name in ("cuda", "empty", "zeros", "asarray", "empty_like"):
        setattr(cp, name, getattr(rec, name))

    def elementwise(in_params: str, out_params: str, operation: str, name: str) -> Any:
        assert (in_params, out_params, operation) == ("float32 a", "float32 b", "b = 2 * a - 1")
        return rec.kernel(lambda a, b: np.copyto(b, 2 * a - 1), name)

    cp.ElementwiseKernel = elementwise
    cupyx = types.ModuleType("cupyx")

    def empty_pinned(shape: Any, dtype: Any = np.float32) -> np.ndarray:
        a = np.empty(shape, dtype)
        rec.pinned.append(a)
        return a

    cupyx.empty_pinned = empty_pinned
    return cp, cupyx, rec


def test_graph_check_gpu_path_passes_the_reference_and_fails_a_missing_synchronize(monkeypatch) -> None:
    cp, cupyx, rec = _fake_cupy_modules()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    assert "5 replays" in lab05_graphs._grade_gpu(lab05_graphs._reference)
    assert sum(g.launches for g in rec.graphs) == 5

    def no_sync(cp, frames, x, y, kernel):
        s = cp.cuda.Stream(non_blocking=True)
        d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)
        with s:
            s.begin_capture()
            d_in.set(x)
            kernel(d_in, d_out)
            d_out.get(out=y, blocking=False)
            g = s.end_capture()
        out = []
        for f in frames:
            x[...] = f
            g.launch(s)
            out.append(y.copy())
        return out

    cp, cupyx, _ = _fake_cupy_modules()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    with pytest.raises(Failed, match="frame 0"):
        lab05_graphs._grade_gpu(no_sync)


# ----------------------------------------------------------------------------- 10.cluster on a fake cuda.core
class _Buffers:
    def __init__(self) -> None:
        self.arrays: dict[int, np.ndarray] = {}

    def wrap(self, a: np.ndarray) -> Any:
        ptr = 0x1000 * (len(self.arrays) + 1)
        self.arrays[ptr] = a
        return types.SimpleNamespace(data=types.SimpleNamespace(ptr=ptr), array=a)


def _fake_cuda_core(monkeypatch, *, combine: bool = True) -> dict[str, Any]:
    import cuda.core as real

    from test_lab10_api_surface import _doc_params

    bufs, seen = _Buffers(), {}
    cp = types.ModuleType("cupy")
    cp.float32 = np.float32
    cp.asarray = lambda a: bufs.wrap(np.array(a, dtype=np.float32))
    cp.full = lambda n, v, dtype=None: bufs.wrap(np.full(n, v, dtype=np.float32))
    cp.asnumpy = lambda d: d.array.copy()
    cp.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(synchronize=lambda: None))
    core = types.ModuleType("cuda.core")
    params = _doc_params(real.LaunchConfig)

    class LaunchConfig:
        def __init__(self, **kw: Any) -> None:
            assert set(kw) <= set(params), kw
            self.__dict__.update(kw)

    class Program:
        def __init__(self, code: str, code_type: str, options: Any) -> None:
            assert code_type == "c++" and isinstance(options, real.ProgramOptions)
            seen["options"] = options

        def compile(self, target: str) -> Any:
            assert target == "cubin"
            return types.SimpleNamespace(get_kernel=lambda name: name)

    def launch(stream: Any, config: LaunchConfig, kernel: str, px: int, pout: int, n: np.int32) -> None:
        assert kernel == "cluster_sum" and isinstance(n, np.int32)
        x, out = bufs.arrays[px], bufs.arrays[pout]
        per = config.cluster * config.block if combine else config.block
        assert config.grid == -(-int(n) // (config.cluster * config.block))
        sums = [x[k:k + per].sum() for k in range(0, int(n), per)]
        out[:] = sums[: out.size]
        seen.setdefault("clusters", []).append(config.cluster)

    core.Device = lambda: types.SimpleNamespace(arch="90", set_current=lambda: None,
                                                create_stream=lambda: types.SimpleNamespace(sync=lambda: None))
    core.LaunchConfig, core.Program, core.ProgramOptions, core.launch = LaunchConfig, Program, real.ProgramOptions, launch
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cuda.core", core)
    monkeypatch.setattr(labkit.mode, "env", lambda: types.SimpleNamespace(compute_capability=(9, 0)))
    return seen


def test_cluster_check_gpu_path_launches_with_clusters_and_compares(monkeypatch) -> None:
    seen = _fake_cuda_core(monkeypatch)
    msg = lab10_clusters._gpu_cases(lab10_clusters.reference_source())
    assert "clusters of 2 and 4 blocks" in msg and seen["clusters"] == [2, 4, 2]
    assert seen["options"].arch == "sm_90" and seen["options"].include_path


def test_cluster_check_gpu_path_fails_a_kernel_that_does_not_combine(monkeypatch) -> None:
    _fake_cuda_core(monkeypatch, combine=False)
    with pytest.raises(Failed, match="expected"):
        lab10_clusters._gpu_cases(lab10_clusters.reference_source())


def test_cluster_check_on_a_gpu_without_clusters_says_so(monkeypatch) -> None:
    monkeypatch.setattr(labkit.mode, "env", lambda: types.SimpleNamespace(compute_capability=(8, 0)))
    assert "has no clusters" in lab10_clusters._gpu_cases(lab10_clusters.reference_source())
