#!/usr/bin/env python3
"""How fast labkit's strict simulator runs the course's Numba kernels, against Numba's own CUDA simulator.

    python benchmarks/sim_speed.py [--repeat N] [--only NAME,NAME] [--out DIR] [--no-first]     (``make bench-sim``)

Every reference kernel of the course (``labkit.kernels.REFERENCE``, which the checks grade against and the
solution notebooks use, the lab 09 kernels of ``labkit.kernels.video``, and the correct kernels of the solution
notebooks that are not among them) runs on the same seeded inputs, at the sizes the labs and checks use in
``sim`` mode:

- under **Numba's simulator** as it ships (``NUMBA_ENABLE_CUDASIM=1``, one OS thread per CUDA thread), in a
  fresh Python process that never imports labkit's simulator, so nothing of labkit changes it;
- under **labkit.sim** in this process, as a check launches it: ``labkit.sim.launch_strict`` with every rule on
  (races within and between blocks, divergent barriers, warp rules, poisoned outputs and shared memory,
  integer widths) and, in a second timing, with every access recorded (``record=True``, what coalescing and
  bank-conflict checks and ``labkit.sim.trace`` use).

Kernels written outside the course (``benchmarks/outside_kernels.py``) run beside them: a grid-stride stencil,
histograms and counters with shared- and global-memory atomics in grid-stride loops, a block reduction that ends in
an atomic, and warp shuffles and votes. Numba's simulator has no warp functions; for those kernels it gets shuffles
and votes made of a ``threading.Barrier`` per warp (the way it waits at ``syncthreads``), for full warps, and the
table says so.

Two figures per kernel and simulator:

- **first launch**: in a fresh Python process per kernel, after the imports (and ``labkit.setup()``), the CPU time of
  ``cuda.jit`` and the kernel's first launch: what a learner waits for when a check launches a new kernel (the
  simulator's per-kernel preparation: reading the source, compiling its variants, copying read-only inputs);
- **repeated**: the least CPU time of the simulator's process over ``--repeat`` launches (default 3) after that;
  for labkit also recorded (``record=True``) and as ``labkit.show`` traces it (``labkit.sim.trace``: every access
  with its array, thread, element, kind, value and line, and each warp request's sectors and bank conflicts).

CPU time (of all the process's threads: Numba's simulator runs one OS thread per CUDA thread) on an idle machine is
the wall time; on a shared one it leaves out the other programs. These are times of simulators, never of a GPU. The
outputs of both simulators are compared. Results go to ``benchmarks/results/sim-speed-<date>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    """One kernel launch to time: ``make(rng)`` returns (args, names, outputs poisoned by the strict launch)."""

    name: str
    kernel: str  # "module:function" inside labkit.kernels
    grid: Any
    block: Any
    make: Callable[[np.random.Generator], tuple[list[Any], list[str], tuple[str, ...]]]


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _zeros(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return np.zeros(shape, dtype)


N1 = 2000  # 1-D kernels: elements (8 blocks of 256 threads, the last one partial)
B1 = 256
G1 = -(-N1 // B1)
FRAME = (40, 48)  # lab 09 frames (rows, columns)
CUBE = (16, 16, 16)  # the 3-D stencil: 4,096 points, 4 per thread (4 blocks of 256 threads, a grid-stride loop)
MM = 48  # matrix multiplies: 48 x 48 (the measurement), blocks of 16 x 16
NG = 20_000  # grid-stride kernels outside the course: 20,000 elements for 256 threads (78 per thread)


def _cases() -> list[Case]:
    c = [
        Case("saxpy", "numba_basics:saxpy", G1, B1,
             lambda r: ([np.float32(2.5), _f32(r, N1), _f32(r, N1), _zeros(N1)], ["a", "x", "y", "out"], ("out",))),
        Case("copy", "numba_basics:copy", G1, B1,
             lambda r: ([_f32(r, N1), _zeros(N1)], ["src", "dst"], ("dst",))),
        Case("grayscale", "numba_basics:grayscale", (3, 3), (16, 16),
             lambda r: ([r.integers(0, 256, (*FRAME, 3)).astype(np.uint8), _zeros(*FRAME, dtype=np.uint8)],
                        ["img", "out"], ("out",))),
        Case("to_unit", "numba_basics:to_unit", (3, 3), (16, 16),
             lambda r: ([r.integers(0, 256, FRAME).astype(np.uint8), _zeros(*FRAME)], ["img", "out"], ("out",))),
        Case("copy2d_coalesced", "memory:copy2d_coalesced", (2, 5), (32, 8),
             lambda r: ([_f32(r, *FRAME), _zeros(*FRAME)], ["src", "dst"], ("dst",))),
        Case("copy2d_strided", "memory:copy2d_strided", (5, 2), (8, 32),
             lambda r: ([_f32(r, *FRAME), _zeros(*FRAME)], ["src", "dst"], ("dst",))),
        Case("transpose_naive", "memory:transpose_naive", (2, 5), (32, 8),
             lambda r: ([_f32(r, *FRAME), _zeros(FRAME[1], FRAME[0])], ["a", "out"], ("out",))),
        Case("transpose_shared", "memory:transpose_shared", (2, 2), (32, 8),
             lambda r: ([_f32(r, *FRAME), _zeros(FRAME[1], FRAME[0])], ["a", "out"], ("out",))),
        Case("matmul_naive", "memory:matmul_naive", (3, 3), (16, 16),
             lambda r: ([_f32(r, MM, MM), _f32(r, MM, MM), _zeros(MM, MM)], ["A", "B", "C"], ("C",))),
        Case("matmul_tiled", "memory:matmul_tiled", (3, 3), (16, 16),
             lambda r: ([_f32(r, MM, MM), _f32(r, MM, MM), _zeros(MM, MM)], ["A", "B", "C"], ("C",))),
        Case("stencil_1d", "memory:stencil_1d", G1, B1,
             lambda r: ([_f32(r, N1), _zeros(N1)], ["x", "out"], ("out",))),
        Case("histogram_global", "reductions:histogram_global", G1, B1,
             lambda r: ([r.integers(0, 256, N1).astype(np.uint8), _zeros(256, dtype=np.int32)], ["data", "hist"], ())),
        Case("histogram_shared", "reductions:histogram_shared", G1, B1,
             lambda r: ([r.integers(0, 256, N1).astype(np.uint8), _zeros(256, dtype=np.int32)], ["data", "hist"], ())),
        Case("block_sum", "reductions:block_sum", G1, B1,
             lambda r: ([_f32(r, N1), _zeros(G1)], ["x", "partial"], ("partial",))),
        Case("sum_all", "reductions:sum_all", G1, B1,
             lambda r: ([_f32(r, N1), _zeros(1)], ["x", "out"], ())),
        Case("warp_sum", "reductions:warp_sum", G1, B1,
             lambda r: ([_f32(r, N1), _zeros(-(-N1 // 32))], ["x", "out"], ("out",))),
        Case("count_above", "reductions:count_above", G1, B1,
             lambda r: ([_f32(r, N1), np.float32(0.5), _zeros(G1, dtype=np.int32)], ["x", "threshold", "counts"],
                        ("counts",))),
        Case("scan_block", "scan:scan_block", G1, B1,
             lambda r: ([_f32(r, N1), _zeros(G1), _zeros(N1)], ["x", "sums", "out"], ("sums", "out"))),
        Case("add_offsets", "scan:add_offsets", G1, B1,
             lambda r: ([_f32(r, N1), _f32(r, G1), _zeros(N1)], ["partial", "offsets", "out"], ("out",))),
        Case("fused_update", "video:fused_update", (3, 3), (16, 16),
             lambda r: ([r.integers(0, 256, FRAME).astype(np.uint8), (r.random(FRAME) * 255).astype(np.float32),
                         _zeros(*FRAME, dtype=np.uint8), np.float32(0.05), np.float32(25.0)],
                        ["frame", "bg", "mask", "alpha", "thresh"], ("mask",))),
        Case("erode3x3", "video:erode3x3", (3, 3), (16, 16),
             lambda r: ([(r.random(FRAME) < 0.8).astype(np.uint8), _zeros(*FRAME, dtype=np.uint8)], ["mask", "out"],
                        ("out",))),
        Case("dilate3x3", "video:dilate3x3", (3, 3), (16, 16),
             lambda r: ([(r.random(FRAME) < 0.2).astype(np.uint8), _zeros(*FRAME, dtype=np.uint8)], ["mask", "out"],
                        ("out",))),
        Case("tile_counts", "video:tile_counts", (3, 3), (16, 16),
             lambda r: ([(r.random(FRAME) < 0.3).astype(np.uint8), 8, _zeros(5, 6, dtype=np.int32)],
                        ["mask", "tile", "counts"], ())),
        # kernels of the solution notebooks that labkit.kernels does not have
        Case("vector_add (lab 00)", "notebook:00-start-here:vector_add", G1, B1,
             lambda r: ([_f32(r, N1), _f32(r, N1), _zeros(N1)], ["a", "b", "out"], ("out",))),
        Case("tile_columns (lab 03)", "notebook:03-memory-hierarchy:tile_columns", 1, (32, 8),
             lambda r: ([_zeros(32, 32)], ["out"], ("out",))),
        Case("tile_columns_padded (lab 03)", "notebook:03-memory-hierarchy:tile_columns_padded", 1, (32, 8),
             lambda r: ([_zeros(32, 32)], ["out"], ("out",))),
        # written outside the course (benchmarks/outside_kernels.py)
        Case("stencil7_gridstride (outside)", "outside:stencil7_gridstride", 4, B1,
             lambda r: ([_f32(r, *CUBE), _zeros(*CUBE)], ["u", "out"], ("out",))),
        Case("hist_shared_gridstride (outside)", "outside:hist_shared_gridstride", 2, 128,
             lambda r: ([r.integers(0, 1 << 30, NG).astype(np.int32), _zeros(64, dtype=np.int32)], ["keys", "counts"], ())),
        Case("count_in_range (outside)", "outside:count_in_range", 2, 128,
             lambda r: ([_f32(r, NG), np.float32(-0.5), np.float32(0.5), _zeros(1, dtype=np.int32)],
                        ["x", "lo", "hi", "found"], ())),
        Case("sum_blocks_atomic (outside)", "outside:sum_blocks_atomic", 2, 128,
             lambda r: ([r.standard_normal(NG), _zeros(1, dtype=np.float64)], ["x", "total"], ())),
        Case("warp_shuffle_sum (outside)", "outside:warp_shuffle_sum", 2, 128,
             lambda r: ([r.standard_normal(NG), _zeros(1, dtype=np.float64)], ["x", "total"], ())),
        Case("warp_vote_positive (outside)", "outside:warp_vote_positive", 2, 128,
             lambda r: ([_f32(r, NG), _zeros(8, dtype=np.int64)], ["x", "per_warp"], ("per_warp",))),
    ]
    return c


def _notebook_kernel(stem: str, name: str, jit: Callable[[Any], Any], cuda: Any) -> Any:
    """A ``@cuda.jit`` function of a solution notebook, from its source (``notebooks/src/<stem>.py``), with the
    notebook's integer constants; the learner's skeleton lines are left out."""
    import re

    text = (ROOT / "notebooks" / "src" / f"{stem}.py").read_text()
    names: dict[str, Any] = {"cuda": cuda, "np": np}
    for const, value in re.findall(r"^([A-Z_][A-Z0-9_]*) = (\d+)\s*(?:#.*)?$", text, flags=re.M):
        names[const] = int(value)
    for const, expr in re.findall(r"^([A-Z_][A-Z0-9_]*) = ([A-Z_][A-Z0-9_]* [+*] \d+)\s*(?:#.*)?$", text, flags=re.M):
        names[const] = eval(expr, {}, dict(names))  # noqa: S307 - the course's own constants (TILE + 1)
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith(f"def {name}("))
    body, skeleton = [], False
    for line in lines[start:]:
        if body and line and not line.startswith((" ", "#")):
            break
        skeleton = (skeleton or "BEGIN SKELETON" in line) and "END SKELETON" not in line
        if not skeleton and "END SKELETON" not in line:
            body.append(line)
    source, filename = "\n".join(body) + "\n", f"<notebook {stem}>"
    import linecache

    # (a notebook's cell keeps its text where the simulator reads it back, as IPython keeps each cell's in linecache)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), names)  # noqa: S102 - the course's own kernel
    return jit(names[name])


def _kernel(spec: str, jit: Callable[[Any], Any], cuda: Any) -> Any:
    """The jitted kernel for ``module:function`` of labkit.kernels (video kernels are jitted at import),
    ``notebook:<stem>:function`` of a solution notebook, or ``outside:function`` of ``outside_kernels.py``."""
    import importlib
    import importlib.util

    if spec.startswith("notebook:"):
        _, stem, name = spec.split(":")
        return _notebook_kernel(stem, name, jit, cuda)
    if spec.startswith("outside:"):
        where = importlib.util.spec_from_file_location("outside_kernels", Path(__file__).with_name("outside_kernels.py"))
        outside = importlib.util.module_from_spec(where)
        where.loader.exec_module(outside)
        outside.cuda = cuda
        return jit(getattr(outside, spec.split(":")[1]))
    module_name, fn = spec.split(":")
    module = importlib.import_module(f"labkit.kernels.{module_name}")
    if module_name == "video":
        return getattr(module, fn)
    module.cuda = cuda
    return jit(getattr(module, fn))


def _inputs(case: Case) -> tuple[list[Any], list[str], tuple[str, ...]]:
    seed = sum(ord(ch) * (k + 1) for k, ch in enumerate(case.name))
    return case.make(np.random.default_rng(seed))


def _best(run: Callable[[], None], repeat: int) -> float:
    """The least CPU time of this process (all its threads: Numba's simulator runs one OS thread per CUDA thread) over
    ``repeat`` runs. Both simulators keep one core busy at a time, so on an idle machine it equals the wall time;
    on a shared one it leaves out the time other programs took, which made wall-clock ratios swing 3x."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


WARP_CASES = ("warp_sum", "warp_shuffle_sum (outside)", "warp_vote_positive (outside)")  # Numba gets the shim


def _numba_warp_shim() -> None:
    """Warp shuffles and votes for Numba's simulator, which has none, made the way it waits at ``syncthreads``: each
    lane is an OS thread, so the lanes of a warp meet at a ``threading.Barrier`` of the warp's size, put their values
    in a table, meet again and read. For full warps whose lanes all call (the benchmark's warp kernels)."""
    import threading

    from numba.cuda.simulator import kernelapi

    lock = threading.Lock()
    meetings: dict[Any, Any] = {}

    def meet(value: Any) -> tuple[dict[int, Any], int]:
        me = threading.current_thread()
        warp = (tuple(me.blockIdx), me.thread_id // 32)
        with lock:
            found = meetings.get(warp)
            if found is None:
                found = meetings[warp] = ({}, threading.Barrier(32))
        table, barrier = found
        lane = me.thread_id % 32
        table[lane] = value
        barrier.wait()
        return table, lane

    def done(values: dict[int, Any]) -> None:
        me = threading.current_thread()
        meetings[(tuple(me.blockIdx), me.thread_id // 32)][1].wait()

    def shuffled(value: Any, source: Any) -> Any:
        table, lane = meet(value)
        got = table[source(lane) & 31] if 0 <= source(lane) < 32 else value
        done(table)
        return got

    def vote(predicate: Any) -> list[bool]:
        table, _ = meet(bool(predicate))
        votes = [table[k] for k in range(32)]
        done(table)
        return votes

    m = kernelapi.FakeCUDAModule
    m.shfl_sync = lambda self, mask, value, src: shuffled(value, lambda lane: src)
    m.shfl_down_sync = lambda self, mask, value, d: shuffled(value, lambda lane: lane + d if lane + d < 32 else lane)
    m.shfl_up_sync = lambda self, mask, value, d: shuffled(value, lambda lane: lane - d if lane >= d else lane)
    m.shfl_xor_sync = lambda self, mask, value, x: shuffled(value, lambda lane: lane ^ x)
    m.any_sync = lambda self, mask, p: any(vote(p))
    m.all_sync = lambda self, mask, p: all(vote(p))
    m.ballot_sync = lambda self, mask, p: sum(1 << k for k, v in enumerate(vote(p)) if v)


def _numba_child(names: list[str], repeat: int, outdir: str) -> None:
    """In a fresh process: Numba's own simulator, nothing of labkit's simulator imported."""
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from numba import cuda

    _numba_warp_shim()
    times: dict[str, Any] = {}
    for case in [c for c in _cases() if c.name in names]:
        kernel = _kernel(case.kernel, cuda.jit, cuda)
        args, _, _ = _inputs(case)
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        try:
            kernel[case.grid, case.block](*copies)  # the outputs of one run, to compare
        except Exception as exc:  # noqa: BLE001 - e.g. warp shuffles, which Numba's simulator does not have
            times[case.name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
            continue
        np.savez(Path(outdir) / f"{case.name}.npz", *[a for a in copies if isinstance(a, np.ndarray)])

        def run() -> None:
            fresh = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            kernel[case.grid, case.block](*fresh)

        times[case.name] = _best(run, repeat)
    print(json.dumps(times))


def _first_child(simulator: str, name: str) -> None:
    """In a fresh process: the CPU time of ``cuda.jit`` and the first launch of one kernel (after the imports), and
    of the imports themselves; printed as JSON."""
    start = time.process_time()
    if simulator == "numba":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        from numba import cuda

        _numba_warp_shim()
    else:
        import labkit
        from labkit import sim

        labkit.setup(quiet=True)
        from numba import cuda
    (case,) = [c for c in _cases() if c.name == name]
    if case.kernel.startswith("video:"):
        import labkit.kernels.video  # noqa: F401 - (its kernels are jitted at import: not part of the first launch)
    imported = time.process_time()
    clock = [0.0]

    def jit(fn: Any) -> Any:
        clock[0] = time.process_time()
        return cuda.jit(fn)

    kernel = _kernel(case.kernel, jit, cuda)
    clock[0] = clock[0] or time.process_time()
    args, names, outputs = _inputs(case)
    if simulator == "numba":
        kernel[case.grid, case.block](*args)
    else:
        sim.launch_strict(kernel, case.grid, case.block, *args, names=names, outputs=outputs)
    print(json.dumps({"first_s": time.process_time() - clock[0], "import_s": imported - start}))


def _first_launch(simulator: str, name: str) -> dict[str, float]:
    """:func:`_first_child` in a fresh process."""
    env = dict(os.environ)
    if simulator == "numba":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    proc = subprocess.run([sys.executable, __file__, "--first-child", simulator, "--outdir", name],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1][:160] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _labkit_times(case: Case, repeat: int) -> tuple[float, float, list[np.ndarray]]:
    import labkit
    from labkit import sim

    labkit.setup(quiet=True)
    from numba import cuda

    kernel = _kernel(case.kernel, lambda fn: cuda.jit(fn), cuda)
    args, names, outputs = _inputs(case)

    def fresh() -> list[Any]:
        return [a.copy() if isinstance(a, np.ndarray) else a for a in args]

    first = fresh()
    sim.launch_strict(kernel, case.grid, case.block, *first, names=names, outputs=outputs)
    strict = _best(lambda: sim.launch_strict(kernel, case.grid, case.block, *fresh(), names=names, outputs=outputs), repeat)
    recorded = _best(lambda: sim.launch_strict(kernel, case.grid, case.block, *fresh(), names=names, outputs=outputs,
                                               record=True), repeat)
    traced = _best(lambda: sim.trace(kernel, case.grid, case.block, *fresh(), names=names, outputs=outputs), repeat)
    return strict, recorded, traced, [a for a in first if isinstance(a, np.ndarray)]


def run(repeat: int = 3, only: list[str] | None = None, first: bool = True) -> dict[str, Any]:
    """Time every case under both simulators; returns the results as a JSON-ready dict."""
    cases = [c for c in _cases() if not only or c.name in only]
    load_start = [round(x, 1) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryDirectory() as outdir:
        proc = subprocess.run([sys.executable, __file__, "--numba-child", ",".join(c.name for c in cases),
                               "--repeat", str(repeat), "--outdir", outdir],
                              capture_output=True, text=True, env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1"))
        if proc.returncode != 0:
            raise SystemExit(f"Numba's simulator run failed:\n{proc.stderr[-2000:]}")
        numba_times = json.loads(proc.stdout.strip().splitlines()[-1])
        rows = []
        imports: dict[str, list[Any]] = {}
        for case in cases:
            strict, recorded, traced, outs = _labkit_times(case, repeat)
            row = {"kernel": case.name, "grid": case.grid, "block": case.block, "labkit_strict_s": round(strict, 4),
                   "labkit_recorded_s": round(recorded, 4), "labkit_trace_s": round(traced, 4),
                   "numba_warp_shim": case.name in WARP_CASES}
            if first:
                mine, theirs_first = _first_launch("labkit", case.name), _first_launch("numba", case.name)
                row["labkit_first_s"] = round(mine["first_s"], 4) if "first_s" in mine else None
                row["numba_first_s"] = round(theirs_first["first_s"], 4) if "first_s" in theirs_first else None
                row["speedup_first"] = (round(row["numba_first_s"] / row["labkit_first_s"], 1)
                                        if row["numba_first_s"] and row["labkit_first_s"] else None)
                imports.setdefault("labkit", []).append(mine.get("import_s"))
                imports.setdefault("numba", []).append(theirs_first.get("import_s"))
            numba_s = numba_times[case.name]
            if isinstance(numba_s, dict):
                row.update(numba_s=None, numba_error=numba_s["error"], speedup_strict=None, speedup_recorded=None,
                           speedup_trace=None, same_outputs=None)
            else:
                with np.load(Path(outdir) / f"{case.name}.npz") as ref:
                    theirs = [ref[f"arr_{k}"] for k in range(len(ref.files))]
                same = all(np.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True) for a, b in zip(outs, theirs))
                row.update(numba_s=round(numba_s, 4), speedup_strict=round(numba_s / strict, 1),
                           speedup_recorded=round(numba_s / recorded, 1), speedup_trace=round(numba_s / traced, 1),
                           same_outputs=bool(same))
            rows.append(row)
    import greenlet
    import numba

    return {
        "what": "seconds per launch (best of repeat) of the course's reference kernels in two CUDA simulators on a CPU; "
                "not GPU times",
        "date": _dt.date.today().isoformat(), "repeat": repeat, "python": platform.python_version(),
        "numba": numba.__version__, "greenlet": greenlet.__version__, "cpu_count": os.cpu_count(),
        "machine": platform.machine(), "rows": rows,
        "load_average": [round(x, 1) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "load_average_start": load_start,
        "min_speedup_strict": min((r["speedup_strict"] for r in rows if r["speedup_strict"]), default=None),
        "min_speedup_recorded": min((r["speedup_recorded"] for r in rows if r["speedup_recorded"]), default=None),
        "min_speedup_first": min((r["speedup_first"] for r in rows if r.get("speedup_first")), default=None),
        "min_speedup_trace": min((r["speedup_trace"] for r in rows if r.get("speedup_trace")), default=None),
        "import_s": {k: round(min(x for x in v if x is not None), 3) for k, v in imports.items() if any(x is not None for x in v)},
    }


def _s(value: Any) -> str:
    return "–" if value is None else f"{value:.3f} s"


def _x(value: Any) -> str:
    return "–" if not value else f"{value:.1f}"


def markdown(result: dict[str, Any]) -> str:
    """The table of a result, as in the README."""
    lines = [f"Simulator speed on {result['date']} ({result['cpu_count']} CPU cores, Python {result['python']}, Numba "
             f"{result['numba']}; CPU seconds of each simulator's process: a first launch in a fresh process, then the "
             f"best of {result['repeat']} launches; simulators, not GPU times"
             + (f"; load average {result['load_average_start'][0]:g} at the start and {result['load_average'][0]:g} at the "
                "end (a machine shared with other work), so compare the ratios"
                if result.get("load_average") and result.get("load_average_start")
                else f"; load average {result['load_average'][0]:g} at the end, so compare the ratios"
                if result.get("load_average") else "")
             + "):", "",
             "| kernel | grid × block | first launch: Numba's simulator | labkit | × faster | repeated: Numba's simulator "
             "| labkit strict | × faster | labkit strict + recorded | × faster | labkit.show's trace | × faster "
             "| same outputs |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in result["rows"]:
        shim = " ¹" if r.get("numba_warp_shim") and r["numba_s"] is not None else ""
        first = f"{_s(r.get('numba_first_s'))} | {_s(r.get('labkit_first_s'))} | {_x(r.get('speedup_first'))}"
        if r["numba_s"] is None:
            lines.append(f"| {r['kernel']} | {r['grid']} × {r['block']} | {first} | cannot run it "
                         f"({r['numba_error'][:60]}) | {r['labkit_strict_s']:.3f} s | – | {r['labkit_recorded_s']:.3f} s | – | "
                         f"{_s(r.get('labkit_trace_s'))} | – | – |")
            continue
        lines.append(f"| {r['kernel']}{shim} | {r['grid']} × {r['block']} | {first} | {r['numba_s']:.3f} s | "
                     f"{r['labkit_strict_s']:.3f} s | {r['speedup_strict']:.1f} | {r['labkit_recorded_s']:.3f} s | "
                     f"{r['speedup_recorded']:.1f} | {_s(r.get('labkit_trace_s'))} | {_x(r.get('speedup_trace'))} | "
                     f"{'yes' if r['same_outputs'] else 'NO'} |")
    lines += ["", f"Smallest speed-up with every rule on: {_x(result['min_speedup_strict'])}× repeated, "
              f"{_x(result.get('min_speedup_recorded'))}× recorded, {_x(result.get('min_speedup_first'))}× first launch, "
              f"{_x(result.get('min_speedup_trace'))}× for `labkit.show`'s trace (every access with its line, and "
              "each warp request's sectors and bank conflicts, against Numba's plain launch)."]
    if any(r.get("numba_warp_shim") and r["numba_s"] is not None for r in result["rows"]):
        lines.append("¹ Numba's simulator has no warp functions: it ran these with shuffles and votes made of a "
                     "`threading.Barrier` per warp (benchmarks/sim_speed.py).")
    if result.get("import_s"):
        lines.append("Imports before a first launch (not in the figures above): "
                     + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(result["import_s"].items())) + " of CPU time.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--no-first", action="store_true", help="skip the first-launch figures (a fresh process each)")
    parser.add_argument("--numba-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--first-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--outdir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.numba_child is not None:
        _numba_child(args.numba_child.split(","), args.repeat, args.outdir)
        return 0
    if args.first_child is not None:
        _first_child(args.first_child, args.outdir)
        return 0
    result = run(args.repeat, [n for n in args.only.split(",") if n] or None, first=not args.no_first)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"sim-speed-{result['date']}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    print(f"wrote {stem}.json and {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
