#!/usr/bin/env python3
"""Nsight Compute reports (``ncu --set basic`` plus the memory workload, CSV) of the course's reference kernels, for a GPU machine.

    python3 tools/ncu_reference.py [--out benchmarks/results] [--kernels saxpy copy ...] [--stem NAME]

For each kernel it runs ``ncu --set basic --section MemoryWorkloadAnalysis --kernel-name regex:<kernel> --launch-count 1 --csv --page raw`` on this
script in ``--launch`` mode (which launches that kernel once at a GPU size) and saves the CSV as
``<stem>-ncu-<kernel>.csv``. When ncu cannot read the performance counters (``ERR_NVGPUCTRPERM``: profiling
needs root or ``NVreg_RestrictProfilingToAdminUsers=0``), it writes ``<stem>-ncu-note.txt`` saying so instead.
Exit status: 0 every report written, 1 a kernel failed, 3 ncu missing or not allowed to read counters.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: Reference kernels profiled: name -> what it is.
KERNELS = {
    "saxpy": "SAXPY, 2^26 float32 (labs 02, target >= 85% of D2D)",
    "copy": "copy kernel, 2^26 float32 (lab 02)",
    "transpose_shared": "shared-memory transpose, 8192^2 float32 (lab 03)",
    "transpose_naive": "naive transpose, 8192^2 float32 (lab 03)",
    "sum_all": "block reduction with one atomic per block, 2^26 float32 (lab 04)",
    "matmul_naive": "naive matmul, 2048^3 float32 (lab 03)",
    "matmul_tiled": "shared-memory tiled matmul, 2048^3 float32 (lab 03)",
    "wmma_gemm": "WMMA GEMM, FP16 in / FP32 accumulate, 1024^3 (lab 06)",
    "labkit_sm_copy": "labkit's SM copy kernel, 256 MiB (lab 07)",
}
#: What ncu collects: its basic set (speed of light, launch statistics, occupancy) and the memory workload, about a
#: quarter of ``--set full``'s replay passes, so five kernels fit the first run's 80 s (review gpu-review-3 W4).
SECTIONS = ("--set", "basic", "--section", "MemoryWorkloadAnalysis")
NO_COUNTERS = ("ERR_NVGPUCTRPERM", "Failed to initialize the profiler", "LibraryNotLoaded")


def launch(name: str) -> None:
    """Launch kernel ``name`` once at a GPU size (this process runs under ncu)."""
    os.environ["LABKIT_MODE"] = "gpu"
    sys.path.insert(0, str(SRC))
    import numpy as np

    import labkit

    labkit.setup(quiet=True)
    if name == "wmma_gemm":
        rng = np.random.default_rng(0)
        a, b = rng.uniform(-1, 1, (1024, 1024)), rng.uniform(-1, 1, (1024, 1024))
        labkit.tensorcores.run_wmma_gemm(a, b)
        return
    if name == "labkit_sm_copy":
        labkit.bandwidth.device_local_copy(0, "256MiB", "sm", copies=1, warmup=1, samples=1)
        return
    from numba import cuda

    from labkit import kernels
    from labkit.kernels import memory

    k = kernels.get(name)
    rng = np.random.default_rng(0)
    n, side, mm, block = 1 << 26, 8192, 2048, 256
    if name in ("saxpy", "copy", "sum_all"):
        x = cuda.to_device(rng.standard_normal(n, dtype=np.float32))
        y = cuda.to_device(rng.standard_normal(n, dtype=np.float32))
        out = cuda.device_array(n, np.float32)
        grid = min(math.ceil(n / block), 1 << 16)
        if name == "saxpy":
            k[grid, block](np.float32(2.0), x, y, out)
        elif name == "copy":
            k[grid, block](x, out)
        else:
            total = cuda.to_device(np.zeros(1, np.float32))
            k[min(math.ceil(n / block), 1024), block](x, total)
    elif name.startswith("transpose"):
        a = cuda.to_device(rng.standard_normal((side, side), dtype=np.float32))
        at = cuda.device_array((side, side), np.float32)
        if name == "transpose_shared":
            k[(math.ceil(side / memory.TILE),) * 2, (memory.TILE, memory.BLOCK_ROWS)](a, at)
        else:
            k[(math.ceil(side / 32), math.ceil(side / 8)), (32, 8)](a, at)
    elif name.startswith("matmul"):
        A = cuda.to_device(rng.standard_normal((mm, mm), dtype=np.float32))
        B = cuda.to_device(rng.standard_normal((mm, mm), dtype=np.float32))
        C = cuda.device_array((mm, mm), np.float32)
        k[(math.ceil(mm / memory.MM_TILE),) * 2, (memory.MM_TILE, memory.MM_TILE)](A, B, C)
    else:
        raise SystemExit(f"unknown kernel {name!r}; choose from {', '.join(KERNELS)}")
    cuda.synchronize()


def default_stem() -> str:
    """``<gpu>-<date>`` from nvidia-smi's first GPU name (``gpu`` without nvidia-smi)."""
    name = "gpu"
    exe = shutil.which("nvidia-smi")
    if exe:
        try:
            res = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            if res.returncode == 0 and res.stdout.strip():
                name = res.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return f"{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}-{dt.date.today().isoformat()}"


def ncu_command(ncu: str, kernel: str) -> list[str]:
    """The ncu command line that profiles the first launch of ``kernel``, at the clocks the GPU runs at (ncu locks them
    to base clocks by default, which would make its figures disagree with the course's measurements)."""
    return [ncu, "--clock-control", "none", *SECTIONS, "--kernel-name", f"regex:{kernel}", "--launch-count", "1", "--csv",
            "--page", "raw", "--target-processes", "all", sys.executable, str(Path(__file__).resolve()), "--launch", kernel]


#: The first profile pays what the later ones find warm (ncu's own start, the disk cache of Python, CuPy and the CUDA
#: libraries, the driver's JIT cache): it gets this many shares of the budget to the others' one (review 4, W9).
FIRST_SHARES = 1.6


def shares(left: float, kernels_left: int, first: bool) -> float:
    """The seconds the next profile may take of ``left``, with ``kernels_left`` profiles (this one included) to go."""
    weight = FIRST_SHARES if first else 1.0
    return max(1.0, left * weight / (kernels_left - 1 + weight))


def run_in_group(cmd: list[str], limit: float) -> subprocess.CompletedProcess[str]:
    """``cmd`` in a process group of its own; past ``limit`` seconds the whole group is killed, so the Python that ncu
    profiles (``--target-processes all``) stops with it instead of holding the GPU into the next profile (W9).
    Raises :class:`subprocess.TimeoutExpired` then, as :func:`subprocess.run` does."""
    import signal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=3)
                break
            except subprocess.TimeoutExpired:
                continue
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def ncu_version(ncu: str) -> str:
    """``ncu --version``'s last line (C8), or why there is none."""
    try:
        res = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"ncu --version failed: {exc}"
    lines = (res.stdout + res.stderr).strip().splitlines()
    return lines[-1] if lines else f"ncu --version printed nothing (exit {res.returncode})"


def profile(out: Path, kernels: list[str], stem: str, timeout: int = 600, budget: float | None = None) -> int:
    """One report per kernel; with ``budget`` (seconds for all of them) each kernel gets its share of what is left
    (:func:`shares`: the first a larger one), so a slow one cannot take the later ones' time (a kernel cut short writes
    ``<stem>-ncu-<kernel>.err.txt``, and its profiled process is stopped with ncu)."""
    import time

    deadline = time.monotonic() + budget if budget else None
    ncu = shutil.which("ncu")
    out.mkdir(parents=True, exist_ok=True)
    if ncu is None:
        (out / f"{stem}-ncu-note.txt").write_text("ncu (Nsight Compute) is not installed on this machine: no reports.\n")
        print("ncu not found", file=sys.stderr)
        return 3
    print(f"ncu: {ncu_version(ncu)}", flush=True)
    failed = 0
    for i, kernel in enumerate(kernels):
        limit = timeout if deadline is None else shares(deadline - time.monotonic(), len(kernels) - i, i == 0)
        try:
            res = run_in_group(ncu_command(ncu, kernel), limit)
        except subprocess.TimeoutExpired:
            failed += 1
            (out / f"{stem}-ncu-{kernel}.err.txt").write_text(
                f"ncu did not finish within {limit:.0f} s (its share of the budget); ncu and the process it profiled were stopped\n")
            print(f"{kernel}: ncu cut after {limit:.0f} s", file=sys.stderr)
            continue
        text = res.stdout + res.stderr
        if any(mark in text for mark in NO_COUNTERS):
            (out / f"{stem}-ncu-note.txt").write_text(
                "ncu could not read the GPU performance counters here (ERR_NVGPUCTRPERM needs root or the driver option "
                "NVreg_RestrictProfilingToAdminUsers=0; 'Failed to initialize the profiler' means this machine's "
                "runtime does not let the profiler in). No reports were recorded. ncu said:\n\n" + text[-2000:])
            print("ncu: cannot read the performance counters here", file=sys.stderr)
            return 3
        csv = [line for line in res.stdout.splitlines() if line.startswith('"')]
        if res.returncode != 0 or not csv:
            failed += 1
            (out / f"{stem}-ncu-{kernel}.err.txt").write_text(text[-4000:])
            print(f"{kernel}: ncu failed (exit {res.returncode})", file=sys.stderr)
            continue
        (out / f"{stem}-ncu-{kernel}.csv").write_text("\n".join(csv) + "\n")
        print(f"{kernel}: {KERNELS.get(kernel, '')} -> {stem}-ncu-{kernel}.csv")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--kernels", nargs="*", default=list(KERNELS), choices=list(KERNELS))
    ap.add_argument("--stem", default=None, help="file name start (default <gpu>-<date>)")
    ap.add_argument("--budget", type=float, default=None, help="seconds for all kernels together (shared out evenly)")
    ap.add_argument("--launch", metavar="KERNEL", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.launch:
        launch(args.launch)
        return 0
    return profile(Path(args.out), args.kernels, args.stem or default_stem(), budget=args.budget)


if __name__ == "__main__":
    sys.exit(main())
