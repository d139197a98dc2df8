"""Reads of read-only arrays compiled into the kernel (``labkit.sim.fastreads``): the variant is really used, gives
the same values, raises the same errors at the learner's line, and is never used where it could be wrong (an array
a thread writes after all, a kernel whose source cannot be read, an index with a call in it)."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator tests")

from numba import cuda  # noqa: E402

from labkit import kernels, sim  # noqa: E402
from labkit.sim import fastreads, lockstep  # noqa: E402
from labkit.sim.errors import KernelFault, KernelTimeout  # noqa: E402


matmul = kernels.get("matmul_naive")  # the course's own: one thread per element of C, reads of A and B only


@pytest.fixture(autouse=True)
def _engine_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the engine's compiled variants: kernels lockstep would run (labkit.sim.lockstep) run on
    the engine here."""
    monkeypatch.setattr(lockstep, "ENABLED", False)


@cuda.jit
def laplace3d(u, out):
    nz, ny, nx = u.shape
    for idx in range(cuda.grid(1), nz * ny * nx, cuda.gridsize(1)):
        z, y, x = idx // (ny * nx), (idx // nx) % ny, idx % nx
        if 0 < z < nz - 1 and 0 < y < ny - 1 and 0 < x < nx - 1:
            out[z, y, x] = (u[z - 1, y, x] + u[z + 1, y, x] + u[z, y - 1, x] + u[z, y + 1, x]
                            + u[z, y, x - 1] + u[z, y, x + 1] - 6.0 * u[z, y, x])


def _variant_arrays(kernel) -> list[str]:
    code = kernel.py_func.__code__
    return sorted({name for (c, _), v in fastreads._variants.items() if c is code and v for name in v[1]})


def test_the_variant_is_used_and_gives_the_same_results() -> None:
    rng = np.random.default_rng(1)
    for n in (17, 48, 50):  # sizes that are not multiples of the block
        A, B = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
        C = np.zeros((n, n), np.float32)
        g = -(-n // 16)
        sim.launch_strict(matmul, (g, g), (16, 16), A, B, C, names=["A", "B", "C"], outputs=("C",))
        acc = np.zeros((n, n), np.float32)
        for k in range(n):  # float32 sums in the kernel's order: the same bits
            acc += A[:, k:k + 1] * B[k:k + 1, :]
        assert np.array_equal(C, acc)
    assert _variant_arrays(matmul) == ["A", "B"]
    u = rng.standard_normal((9, 10, 11)).astype(np.float32)
    out = np.zeros_like(u)
    sim.launch_strict(laplace3d, 3, 64, u, out, names=["u", "out"], outputs=("out",))
    inner = (u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1] + u[1:-1, 1:-1, :-2]
             + u[1:-1, 1:-1, 2:] - np.float32(6.0) * u[1:-1, 1:-1, 1:-1])
    assert np.allclose(out[1:-1, 1:-1, 1:-1], inner, rtol=1e-5, atol=1e-5)
    assert _variant_arrays(laplace3d) == ["u"]


def _shifted(dz: int, dy: int, dx: int):
    @cuda.jit
    def shifted(u, out):
        z, y, x = cuda.grid(3)
        if z < out.shape[0] and y < out.shape[1] and x < out.shape[2]:
            out[z, y, x] = u[z + dz, y + dy, x + dx]

    return shifted


@pytest.mark.parametrize("shift", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (-1, 0, 0), (0, -1, 0), (0, 0, -1)])
def test_reads_out_of_bounds_raise_on_every_axis(shift) -> None:
    kernel = _shifted(*shift)
    u, out = np.ones((4, 4, 4), np.float32), np.zeros((4, 4, 4), np.float32)
    with pytest.raises(IndexError, match="out of bounds for axis") as info:
        sim.launch_strict(kernel, (1, 1, 1), (4, 4, 4), u, out, names=["u", "out"], outputs=("out",))
    assert _variant_arrays(kernel) == ["u"]
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert "u[z + dz, y + dy, x + dx]" in last.line or last.name != "shifted"


@cuda.jit
def float_index(x, out):
    i = cuda.grid(1)
    half = i / 2
    if i < out.size:
        out[i] = x[half]


def test_a_float_index_gets_labkits_message_at_the_learners_line() -> None:
    with pytest.raises(TypeError, match="array index must be an integer, got float") as info:
        sim.launch_strict(float_index, 1, 32, np.ones(32, np.float32), np.zeros(32, np.float32),
                          names=["x", "out"], outputs=("out",))
    learner = [f for f in traceback.extract_tb(info.value.__traceback__) if f.filename == __file__]
    assert learner[-1].line == "out[i] = x[half]"
    assert "list" not in str(info.value)


def test_a_closure_kernel_keeps_its_free_variables() -> None:
    for offset in (1, 2):
        @cuda.jit
        def ahead(x, out):
            i = cuda.grid(1)
            if i + offset < x.size:
                out[i] = x[i + offset]

        x = np.arange(40, dtype=np.float32)
        out = np.zeros(40, np.float32)
        sim.launch_strict(ahead, 2, 32, x, out, names=["x", "out"])
        assert out[: 40 - offset].tolist() == x[offset:].tolist()


@cuda.jit(device=True)
def poke(a, i):
    a[i] = 1.0


@cuda.jit
def reads_then_pokes(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[(i + 1) % a.size]
        poke(a, i)


def test_an_array_a_thread_writes_after_all_is_watched_and_its_race_found() -> None:
    with pytest.raises(KernelFault, match="race"):
        sim.launch_strict(reads_then_pokes, 1, 64, np.zeros(64, np.float32), np.zeros(64, np.float32),
                          names=["a", "out"], outputs=("out",))


def test_kernels_it_cannot_read_or_rewrite_run_as_written() -> None:
    namespace = {"cuda": cuda, "np": np}
    exec("def copy(x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = x[i]\n", namespace)  # noqa: S102
    copy = cuda.jit(namespace["copy"])
    x, out = np.arange(33, dtype=np.float32), np.zeros(33, np.float32)
    sim.launch_strict(copy, 2, 32, x, out, names=["x", "out"], outputs=("out",))
    assert out.tolist() == x.tolist() and _variant_arrays(copy) == []

    @cuda.jit
    def gather(x, idx, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[int(idx[i])]  # a call in the index: read as written

    idx = np.arange(33)[::-1].astype(np.float32)
    sim.launch_strict(gather, 2, 32, x, idx, out, names=["x", "idx", "out"], outputs=("out",))
    assert out.tolist() == x[::-1].tolist() and _variant_arrays(gather) == ["idx"]


@cuda.jit
def endless(x, out):
    i = cuda.grid(1)
    total = np.float32(0)
    while i < x.size:
        total += x[i]
    out[0] = total


def test_a_hung_variant_names_the_learners_line() -> None:
    with pytest.raises(KernelTimeout) as info:
        sim.launch_strict(endless, 1, 4, np.ones(8, np.float32), np.zeros(1, np.float32), names=["x", "out"],
                          outputs=("out",), time_limit_s=1.0)
    assert "line" in str(info.value) and ("while i < x.size:" in str(info.value) or "total += x[i]" in str(info.value))
    assert _variant_arrays(endless) == ["x"]


def test_a_record_argument_is_passed_through_untouched() -> None:
    """Numba's wrapper of a record answers any attribute with a lookup of its own: only the argument's type is
    asked whether it is a snapshot (numba-cuda's record tests failed when the wrapper was asked)."""
    rec_type = np.dtype([("a", np.float32), ("b", np.int32)])
    rec = np.zeros(1, rec_type)[0]
    out = np.zeros(2, np.float32)

    @cuda.jit
    def fields(r, out):
        out[0] = r.a + 1
        out[1] = r.b + 2

    fields[1, 1](rec, out)
    assert out.tolist() == [1.0, 2.0]
