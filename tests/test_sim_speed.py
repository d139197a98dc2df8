"""benchmarks/sim_speed.py (make bench-sim): both simulators time the same kernels and agree on their outputs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)
from numba import cuda  # noqa: E402 - (after labkit.setup: the simulator's)

pytestmark = pytest.mark.skipif(env.is_gpu, reason="simulator benchmark")

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("sim_speed", ROOT / "benchmarks" / "sim_speed.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sim_speed"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_every_reference_kernel_has_a_case() -> None:
    from labkit import kernels

    bench = _bench()
    names = {c.name for c in bench._cases()}
    assert set(kernels.names()) <= names
    assert {"fused_update", "erode3x3", "dilate3x3", "tile_counts"} <= names


def test_a_run_writes_json_and_markdown(tmp_path: Path) -> None:
    bench = _bench()
    assert bench.main(["--only", "copy,warp_sum", "--repeat", "1", "--no-first", "--out", str(tmp_path)]) == 0
    (json_file,) = tmp_path.glob("sim-speed-*.json")
    result = json.loads(json_file.read_text())
    rows = {r["kernel"]: r for r in result["rows"]}
    assert rows["copy"]["same_outputs"] is True and rows["copy"]["numba_s"] > 0 and rows["copy"]["labkit_strict_s"] > 0
    # Numba's simulator has no warp functions: the benchmark gives it some, and says so in the row and under the table
    assert rows["warp_sum"]["numba_warp_shim"] is True and rows["warp_sum"]["same_outputs"] is True
    assert rows["copy"]["numba_warp_shim"] is False
    table = json_file.with_suffix(".md").read_text()
    assert "| copy |" in table and "not GPU times" in table and "| warp_sum ¹ |" in table
    assert "threading.Barrier" in table and "first launch" in table


def test_a_first_launch_is_timed_in_a_fresh_process() -> None:
    bench = _bench()
    for simulator in ("labkit", "numba"):
        got = bench._first_launch(simulator, "copy")
        # a fresh process reports the imports and the jit + first launch as two timings (no ratio between them is
        # asserted: both are CPU times that move with the machine's load)
        assert "error" not in got and got["import_s"] > 0 and got["first_s"] > 0, got


def test_the_readme_shows_the_newest_committed_table() -> None:
    results = sorted((ROOT / "benchmarks" / "results").glob("sim-speed-*.md"))
    assert results, "run `make bench-sim` and commit benchmarks/results/sim-speed-<date>.md"
    table = [line for line in results[-1].read_text().splitlines() if line.startswith("|")]
    readme = (ROOT / "README.md").read_text()
    assert all(line in readme for line in table), "README.md's simulator table differs from " + results[-1].name


_runs: list[int] = []


def _put(a, i, v):
    a[i] = v


def _writes_in_its_text(x, total, out):
    _runs.append(1)
    acc = 0.0
    for k in range(x.shape[0]):
        acc += x[k]
    cuda.atomic.add(total, 0, acc)
    out[cuda.grid(1)] = acc


def _writes_in_a_device_function(x, total, out):
    _runs.append(1)
    acc = 0.0
    for k in range(x.shape[0]):
        acc += x[k]
    _put_device(out, cuda.grid(1), acc)


def test_a_first_launch_runs_each_thread_once_when_the_text_shows_the_writes() -> None:
    """An output written only at a kernel's end (an atomic, a store) is watched from the first launch on: the launch
    is not run a second time to find it (which doubled a first launch), and a write made in a device function is
    still found by running again."""
    import numpy as np

    from labkit import sim

    global _put_device
    _put_device = cuda.jit(device=True)(_put)
    x = np.arange(50, dtype=np.float64)
    # (the device function's write stops the first thread at its store: the launch runs again, watching `out`)
    for fn, threads, atomics in ((_writes_in_its_text, 64, 64), (_writes_in_a_device_function, 1 + 64, 0)):
        _runs.clear()
        total, out = np.zeros(1), np.zeros(64)
        sim.launch_strict(cuda.jit(fn), 2, 32, x, total, out, names=["x", "total", "out"])
        assert len(_runs) == threads, fn.__name__
        assert np.all(out == x.sum()) and total[0] == atomics * x.sum()


def _matmul(A, B, C):
    row, col = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


def test_a_recorded_launch_logs_each_read_of_a_read_only_array_where_it_happened() -> None:
    """A recorded launch keeps the reads of read-only arrays as runs of flat indices (cheaper than a tuple each); its
    report gives every access all the same, with the thread, flat index and order the checks read."""
    import numpy as np

    from labkit import sim

    rng = np.random.default_rng(5)
    n = 20
    A, B, C = rng.standard_normal((n, n)), rng.standard_normal((n, n)), np.zeros((n, n))
    report = sim.launch_strict(cuda.jit(_matmul), (2, 2), (16, 16), A, B, C, names=["A", "B", "C"], outputs=("C",),
                               record=True)
    assert np.allclose(C, A @ B)
    assert (report.count("A"), report.count("B"), report.count("C", "write")) == (n**3, n**3, n**2)
    assert len(report.log) == len(list(report.log)) == 2 * n**3 + n**2
    accesses = report.accesses
    for thread, block, row, col in ((0, (0, 0, 0), 0, 0), (16 * 3 + 2, (1, 0, 0), 16 + 2, 3)):  # (x: the row)
        mine = [(a.array, a.flat, a.kind) for a in accesses if a.thread == thread and a.block == block]
        assert [f for name, f, _ in mine if name == "A"] == [row * n + k for k in range(n)]
        assert [f for name, f, _ in mine if name == "B"] == [k * n + col for k in range(n)]
        assert ("C", row * n + col, "write") in mine
    for name in ("A", "B"):  # the warp requests the coalescing checks read are those of the accesses
        expected: dict = {}
        for a in accesses:
            if a.array == name and a.kind == "read":
                expected.setdefault((a.block, a.thread // 32, a.seq), []).append(a.flat)
        assert expected and report.requests(name) == expected


def _tiled(A, B, C):
    sa = cuda.shared.array((8, 8), np.float64)
    sb = cuda.shared.array((8, 8), np.float64)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * 8 + ty, cuda.blockIdx.x * 8 + tx
    acc = 0.0
    for t in range((A.shape[1] + 7) // 8):
        sa[ty, tx] = A[row, t * 8 + tx] if row < A.shape[0] and t * 8 + tx < A.shape[1] else 0.0
        sb[ty, tx] = B[t * 8 + ty, col] if t * 8 + ty < B.shape[0] and col < B.shape[1] else 0.0
        cuda.syncthreads()
        for k in range(8):
            acc += sa[ty, k] * sb[k, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


def test_a_recorded_launch_logs_shared_memory_as_a_noting_model_does() -> None:
    """Reads of written arrays (shared tiles, read-modify-written outputs) wait as flat indices too: the log has the
    same accesses as that of a model that notes each one as it comes, each array's in the same order, epochs and all."""
    from labkit.sim import memory

    class Noting(memory.Model):
        def note(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().note(*args, **kwargs)

    rng = np.random.default_rng(6)
    A, B = rng.standard_normal((13, 11)), rng.standard_normal((11, 10))
    logs = []
    for model_class in (memory.Model, Noting):
        C = np.zeros((13, 10))
        model = model_class(record=True)
        tracked = memory._track_args(model, [A, B, C], ["A", "B", "C"], ("C",))
        with memory.strict(model):
            cuda.jit(_tiled)[(2, 2), (8, 8)](*tracked)
        model.end_block()
        assert np.allclose(C, A @ B)
        logs.append([(a.name, t.key, flat, kind, epoch) for a, t, flat, kind, epoch, _ in model.recorded()])
    assert sorted(logs[0]) == sorted(logs[1])
    names = {e[0] for e in logs[0]}
    assert {"A", "B", "C"} < names and len(names) == 5  # and both shared tiles
    for name in names:
        assert [e for e in logs[0] if e[0] == name] == [e for e in logs[1] if e[0] == name], name
