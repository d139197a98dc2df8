"""The kernel-grading harness: strict memory model, race detection, guards, comparisons and lab 00 still passing."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="the strict model runs in the simulator")

from numba import cuda  # noqa: E402

from labkit import check  # noqa: E402
from labkit.check import harness as H  # noqa: E402
from labkit.sim import memory as MM  # noqa: E402
from labkit.check.core import Failed, Unsolved  # noqa: E402
from labkit.sim.errors import KernelFault  # noqa: E402


@cuda.jit
def neighbour_sum(x, out):  # reads neighbours' shared writes: needs the barrier
    sh = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncthreads()
    out[t] = sh[t] + sh[(t + 1) % cuda.blockDim.x]


@cuda.jit
def neighbour_sum_no_barrier(x, out):
    sh = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    out[t] = sh[t] + sh[(t + 1) % cuda.blockDim.x]


@cuda.jit
def negative_index(x, out):
    t = cuda.threadIdx.x
    out[t] = x[t - 1]


@cuda.jit
def same_thread_accumulates(x, out):  # a thread re-reading its own writes is not a race
    t = cuda.grid(1)
    if t < out.size:
        out[t] = 0.0
        for k in range(3):
            out[t] += x[t]


def test_barrier_makes_writes_visible() -> None:
    x = np.arange(64, dtype=np.float32)
    out = cuda.to_device(np.zeros(64, np.float32))
    for reverse in (False, True):
        MM.launch_strict(neighbour_sum, 1, 64, cuda.to_device(x), out, reverse=reverse)
        assert np.array_equal(out.copy_to_host(), x + np.roll(x, -1))


def test_missing_barrier_is_a_race_in_either_thread_order() -> None:
    x = np.arange(64, dtype=np.float32)
    for reverse in (False, True):
        with pytest.raises(KernelFault, match="race on shared array"):
            MM.launch_strict(neighbour_sum_no_barrier, 1, 64, cuda.to_device(x), cuda.to_device(np.zeros(64, np.float32)),
                            reverse=reverse)
    report = MM.launch_strict(neighbour_sum_no_barrier, 1, 64, cuda.to_device(x), cuda.to_device(np.zeros(64, np.float32)),
                             allow_races=True)
    assert report.race is not None and {report.race.first, report.race.second} == {"read", "write"}


def test_negative_indices_are_out_of_bounds() -> None:
    with pytest.raises(IndexError, match="-1"):
        MM.launch_strict(negative_index, 1, 8, cuda.to_device(np.zeros(8, np.float32)), cuda.to_device(np.zeros(8, np.float32)))


def test_own_writes_are_visible() -> None:
    x = np.arange(10, dtype=np.float32)
    out = cuda.to_device(np.zeros(10, np.float32))
    MM.launch_strict(same_thread_accumulates, 2, 8, cuda.to_device(x), out)
    assert np.array_equal(out.copy_to_host(), 3 * x)


def test_record_and_sectors() -> None:
    x = np.arange(64, dtype=np.float32)
    report = MM.launch_strict(neighbour_sum, 1, 64, cuda.to_device(x), cuda.to_device(np.zeros(64, np.float32)),
                             record=True, names=("x", "out"))
    sectors, eff = MM.sectors_per_request(report, "x")
    assert sectors == 4 and eff == 1.0
    assert MM.bank_conflicts(report, report.shared[0][0]) == 1


def test_guarded_and_compare() -> None:
    g = H.Guarded((3, 4), np.float32, fill=0.0)
    assert (g.fetch() == 0).all()
    got = np.full(5, np.nan, np.float32)
    with pytest.raises(Unsolved):
        H.compare(got, np.ones(5, np.float32), label="t", unwritten_means_unsolved=True)
    got[:3] = 1
    with pytest.raises(Failed, match="never written"):
        H.compare(got, np.ones(5, np.float32), label="t")
    with pytest.raises(Failed, match="no thread had stored"):
        H.compare(got, np.ones(5, np.float32), label="t", written=np.ones(5, bool))
    a = np.arange(9, dtype=np.float32).reshape(3, 3)
    with pytest.raises(Failed) as info:
        H.compare(a.T.copy(), a, label="t")
    assert "swapped" in info.value.cause


def test_grid_2d() -> None:
    assert H.grid_2d((13, 37), (16, 8)) == (3, 2)
    assert H.grid_2d((1, 1), (32, 8)) == (1, 1)


def test_lab00_still_passes() -> None:
    from labkit.check.lab00 import _reference_vector_add

    assert check.vector_add(_reference_vector_add()).passed


@cuda.jit
def spins_forever(a, x, y, out):
    i = 0
    while i >= 0:  # never ends, and calls nothing the simulator could interrupt
        i = (i + 1) % 7


@cuda.jit
def wrong_signature(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def raises(a, x, y, out):
    i = cuda.grid(1)
    out[i] = 1 // (i - i)


def test_bad_kernels_get_messages(monkeypatch) -> None:
    import time

    monkeypatch.setattr(H, "CASE_TIME_LIMIT_S", 1.0)
    t0 = time.monotonic()
    r = check.saxpy(spins_forever)
    assert r.status == "failed" and "did not finish" in r.message
    assert time.monotonic() - t0 < 10
    r = check.saxpy(wrong_signature)
    assert r.status == "failed" and "arguments" in r.message
    r = check.saxpy(raises)
    assert r.status == "failed" and "ZeroDivisionError" in r.message
    r = check.saxpy(lambda a, x, y, out: None)
    assert r.status == "failed" and "@cuda.jit" in r.message


def test_require_ptx_structural_checks() -> None:
    from labkit import kernels

    H.require_ptx(kernels.get("transpose_shared"), "void(float32[:, :], float32[:, :])", ["shared memory", "a barrier"],
                  label="t", cause="c")
    with pytest.raises(Failed, match="no shared memory"):
        H.require_ptx(kernels.get("transpose_naive"), "void(float32[:, :], float32[:, :])", ["shared memory"],
                      label="t", cause="c")
    H.require_ptx(kernels.get("warp_sum"), "void(float32[:], float32[:])", ["warp shuffles"], label="t", cause="c")
    with pytest.raises(Failed, match="shared-memory atomics"):
        H.require_ptx(kernels.get("histogram_global"), "void(uint8[:], int32[:])", ["shared-memory atomics"], label="t", cause="c")


def test_gpu_mode_repeats_each_case(monkeypatch) -> None:
    calls = []
    x = np.arange(5, dtype=np.float32)

    def fake_launch(kernel, grid, block, *args, **kw):  # stands in for a device launch that copies x
        calls.append(1)
        args[-1][:] = x

    monkeypatch.setattr(H, "current_mode", lambda: "gpu")
    monkeypatch.setattr(H, "launch", fake_launch)
    monkeypatch.setattr(H, "require_kernel", lambda kernel: None)
    H.run_case(None, 1, 8, (x,), out_shape=5, out_dtype=np.float32, expected=x, label="t")
    assert len(calls) == H.GPU_REPEATS


def test_a_launch_labkit_refuses_is_a_host_side_error_not_the_kernels() -> None:
    import labkit
    from labkit import sim
    from labkit.check import harness

    if labkit.setup(quiet=True).is_gpu:
        pytest.skip("the simulator's launch checks")
    from numba import cuda

    @cuda.jit
    def k(x):
        pass

    with pytest.raises(labkit.LabkitError) as info:
        sim.launch_strict(k, 0.5, 32, np.zeros(3))
    failed = harness.explain_exception(info.value, k)
    assert str(failed).startswith("the launch was refused on the host, before any thread ran: griddim")
    assert "kernel raised" not in str(failed) and "What to do" not in str(failed) and "(n + 255) // 256" in failed.cause
