"""labkit.ranks' GPU path (one process per GPU, the ring over NCCL): every CuPy/NCCL/mpi4py name it calls exists in
the installed packages with the arguments it passes; NcclRing turns Sendrecv into one NCCL group on the current
stream (a fake NCCL whose methods are bound to the real signatures); without two GPUs the reason is clear.
No GPU needed. Cost: about 2 s (importing CuPy)."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from labkit import ranks
from labkit.errors import NoGPUError

sys.path.insert(0, str(ranks.WORKER.parent))
import _rank_gpu  # noqa: E402  (the rank-side script, as the worker imports it)

cupy = pytest.importorskip("cupy", reason="make test installs CuPy; it imports without a GPU")


def test_every_nccl_and_cupy_name_exists() -> None:
    from cupy.cuda import nccl

    for name in ("get_unique_id", "NcclCommunicator", "groupStart", "groupEnd", "NCCL_SUM", *_rank_gpu.NCCL_TYPES.values()):
        assert hasattr(nccl, name), name
    for method in ("send", "recv", "allReduce", "destroy"):
        assert callable(getattr(nccl.NcclCommunicator, method)), method
    assert _params(nccl.NcclCommunicator.send) == ["self", "sendbuf", "count", "datatype", "peer", "stream"]
    assert _params(nccl.NcclCommunicator.recv) == ["self", "recvbuf", "count", "datatype", "peer", "stream"]
    assert _params(nccl.NcclCommunicator.allReduce) == ["self", "sendbuf", "recvbuf", "count", "datatype", "op", "stream"]
    for name in ("Event", "get_elapsed_time", "get_current_stream", "Device"):
        assert hasattr(cupy.cuda, name), name
    for name in ("getDeviceCount", "getDeviceProperties"):
        assert hasattr(cupy.cuda.runtime, name), name


def test_cuda_awareness_is_read_from_mpi_memory_kinds() -> None:
    class Info:
        def __init__(self, kinds: str | None) -> None:
            self.kinds = kinds

        def Get(self, key: str) -> str | None:  # noqa: N802
            return self.kinds if key == "mpi_memory_alloc_kinds" else None

        def Free(self) -> None:  # noqa: N802
            pass

    def comm(kinds: str | None) -> Any:
        return SimpleNamespace(Get_info=lambda: Info(kinds))

    assert not _rank_gpu.cuda_aware_mpi(comm("mpi,system"))  # the PyPI mpich wheel
    assert _rank_gpu.cuda_aware_mpi(comm("mpi,system,cuda:device,cuda:host"))
    assert not _rank_gpu.cuda_aware_mpi(comm(None))
    from mpi4py import MPI

    assert callable(MPI.Comm.Get_info) and callable(MPI.Info.Get) and callable(MPI.Info.Free)


def _params(method: Any) -> list[str]:
    """Parameter names of a Cython method from the signature it embeds in its docstring (``Cls.m(self, int x, ...)``)."""
    doc = (method.__doc__ or "").strip().splitlines()[0]
    inside = doc[doc.index("(") + 1: doc.index(")")]
    return [p.split()[-1] for p in inside.split(",") if p.strip()]


def _bound(method: Any, record: list[tuple[Any, ...]], name: str) -> Any:
    """A fake method that takes exactly the real one's parameters (after self) and records the call."""
    names = _params(method)[1:]

    def call(*args: Any) -> None:
        assert len(args) == len(names), f"{name} takes {names}, got {len(args)} arguments"
        record.append((name, *args))

    return call


class _Buf:
    """A stand-in for a CuPy array: dtype, size, nbytes and a device pointer."""

    def __init__(self, size: int, dtype: str = "float32", ptr: int = 0x1000) -> None:
        self.dtype, self.size, self.nbytes = np.dtype(dtype), size, size * np.dtype(dtype).itemsize
        self.data = SimpleNamespace(ptr=ptr)


def test_sendrecv_is_one_nccl_group_on_the_current_stream() -> None:
    from cupy.cuda import nccl as real

    calls: list[tuple[Any, ...]] = []
    comm_cls = real.NcclCommunicator
    fake_comm = SimpleNamespace(send=_bound(comm_cls.send, calls, "send"), recv=_bound(comm_cls.recv, calls, "recv"))
    fake = SimpleNamespace(groupStart=lambda: calls.append(("start",)), groupEnd=lambda: calls.append(("end",)),
                           **{k: getattr(real, k) for k in _rank_gpu.NCCL_TYPES.values()})
    stream = SimpleNamespace(ptr=0xBEEF, synchronize=lambda: None)
    ring = _rank_gpu.NcclRing(fake, fake_comm, 1, 4, stream)
    ring.Sendrecv(_Buf(10, ptr=0xA), dest=2, recvbuf=_Buf(9, ptr=0xB), source=0)
    assert [c[0] for c in calls] == ["start", "send", "recv", "end"]
    assert calls[1][1:] == (0xA, 10, real.NCCL_FLOAT32, 2, 0xBEEF)
    assert calls[2][1:] == (0xB, 9, real.NCCL_FLOAT32, 0, 0xBEEF)
    assert ring.sent_bytes == 40 and ring.partners == {2} and ring.Get_rank() == 1 and ring.Get_size() == 4
    with pytest.raises(TypeError, match="NCCL here carries"):
        ring.Sendrecv(_Buf(3, "complex64"), dest=2, recvbuf=_Buf(3, "complex64"), source=0)


def test_local_rank_picks_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPI_LOCALRANKID", "5")
    assert _rank_gpu.local_device(13, 8) == 5 and _rank_gpu.local_device(13, 4) == 1
    monkeypatch.delenv("MPI_LOCALRANKID")
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_RANK", raising=False)
    assert _rank_gpu.local_device(3, 2) == 1


def test_without_two_gpus_the_reason_is_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    import labkit.mode

    one = SimpleNamespace(is_gpu=True, gpu_count=1, device_name="NVIDIA H200", reason="a GPU")
    monkeypatch.setattr(labkit.mode, "env", lambda: one)
    ok, why = ranks.gpu_status()
    assert not ok and "one GPU (NVIDIA H200)" in why and "CPU processes" in why
    sim = SimpleNamespace(is_gpu=False, gpu_count=0, device_name="", reason="no CUDA driver")
    monkeypatch.setattr(labkit.mode, "env", lambda: sim)
    assert "sim mode" in ranks.gpu_status()[1]
    with pytest.raises(NoGPUError, match="gpu_bench cannot run"):
        ranks.gpu_bench("def f(comm, buf):\n    return buf\n")


@pytest.mark.skipif(not ranks.available()[0], reason=ranks.available()[1])
def test_the_gpu_rank_code_runs_end_to_end_on_a_fake_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real MPI processes run _rank_gpu.run with tests/fake_cupy_ranks first on their path: the unique id travels
    over MPI, each rank picks the device of its local rank, the learner's ring runs over (fake) NCCL send/recv groups,
    and its result equals (fake) NCCL's allReduce. Cost: one launch of 3 processes (about 1 s)."""
    import os
    from pathlib import Path

    from labkit.mpi_ring import ring_allreduce

    fake = Path(__file__).with_name("fake_cupy_ranks")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]))
    import labkit.mode

    monkeypatch.setattr(ranks, "gpu_status", lambda: (True, "3 fake GPUs"))
    monkeypatch.setattr(labkit.mode, "env", lambda: SimpleNamespace(is_gpu=True, gpu_count=3, device_name="Fake GPU"))
    rows, info = ranks.gpu_bench(ring_allreduce, sizes=(10, 2), reps=2)  # 3 ranks: 3 divides neither size
    assert info == {"device": "Fake GPU", "cuda_aware_mpi": False, "devices": [0, 1, 2]}  # the GPU of its local rank
    assert [(t.n, t.nbytes, t.correct) for t in rows] == [(3, 40, True), (3, 8, True)]
    for t in rows:
        assert t.seconds > 0 and t.nccl_seconds > 0 and t.cuda_aware_mpi_seconds is None
        assert t.busbw() == pytest.approx(t.nbytes / t.seconds / 1e9 * 4 / 3)
    assert ranks.leftovers() == []
