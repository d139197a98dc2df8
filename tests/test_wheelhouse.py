"""``make wheelhouse`` (tools/wheelhouse.py) gives a GPU machine without a package registry everything labkit needs
beyond its image (CuPy, numba-cuda, Jupyter): installed with ``--no-index`` into a fresh venv that sees only such an
"image", labkit imports, sets up, and ``pip check`` finds every requirement met. Also: the CUDA extras are coherent.

Cost: about 20-30 s (one wheel build of labkit, pip downloads from the cache, one venv), marked slow.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_cuda_extras_bring_cupys_cuda_libraries_and_agree_with_the_stack() -> None:
    """The defect: cuda12/cuda13 installed CuPy without its CUDA libraries (cuBLAS, cuRAND: cp.matmul, cp.random)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert extras["cuda12"] == ["cupy-cuda12x[ctk]==14.2.0", "nvidia-nccl-cu12==2.27.5",  # NCCL is not in [ctk]
                                "jupyterlab-nvdashboard==0.15.0"]  # the GPU dashboards (tests/test_nvdashboard.py)
    cuda13 = dict(r.split("==") for r in extras["cuda13"])
    assert cuda13.pop("jupyterlab-nvdashboard") == "0.15.0"
    assert cuda13.pop("cupy-cuda13x") == "14.2.0" and cuda13.pop("nvidia-nccl-cu13").startswith("2.27.")
    # the CUDA 13 libraries CuPy loads, each at the version of one toolkit release (cuda-toolkit 13.0.2's list)
    assert cuda13 == {"nvidia-cuda-runtime": "13.0.96", "nvidia-cuda-nvrtc": "13.0.88", "nvidia-cublas": "13.1.0.3",
                      "nvidia-cufft": "12.0.0.61", "nvidia-curand": "10.4.0.35", "nvidia-cusolver": "12.0.4.66",
                      "nvidia-cusparse": "12.6.3.3", "nvidia-nvjitlink": "13.0.88"}
    assert not any("cu12" in r or "ctk" in r for r in extras["cuda13"])
    deps = " ".join(project["dependencies"])
    assert "numba-cuda[cu12]" in deps and "cuda-bindings==12.9" in deps  # why cupy-cuda13x[ctk] cannot join them
    pins = {_norm(l.split("==")[0]): l.split("==")[1] for l in (ROOT / "constraints.txt").read_text().split() if "==" in l}
    assert pins["cupy-cuda12x"] == "14.2.0"
    for lib in ("nvidia-cublas-cu12", "nvidia-curand-cu12", "nvidia-cufft-cu12", "nvidia-cusolver-cu12", "nvidia-cusparse-cu12",
                "nvidia-nccl-cu12"):
        assert lib in pins, lib


def test_installed_cupy_has_its_cuda_libraries() -> None:
    """What `make test` installs (.[cuda12]): the CUDA library wheels are there, at the pinned versions."""
    pytest.importorskip("cupy")
    pins = {_norm(l.split("==")[0]): l.split("==")[1] for l in (ROOT / "constraints.txt").read_text().split() if "==" in l}
    for lib in ("nvidia-cublas-cu12", "nvidia-curand-cu12", "nvidia-nccl-cu12"):
        assert metadata.version(lib) == pins[lib]
    code = ("import cupy; from cupy.cuda import cublas, curand, nccl\n"
            "print(cublas.gemmEx.__name__, curand.createGenerator.__name__, nccl.get_version() // 10000)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.split() == ["gemmEx", "createGenerator", "2"], res.stderr[-1500:]


def _add_image(vsite: Path, wheel_names: set[str]) -> None:
    """Put into the fresh venv's site-packages links to this environment's packages minus labkit and minus what the
    wheelhouse brings: the GPU machine's image (CuPy, numba-cuda, CUDA wheels, Jupyter kernel). Links, not copies,
    so it is fast; ``nvidia/`` is a real folder of links (the nvcc wheel adds to it) with its ``__init__.py`` copied,
    so installing never writes through a link into this environment."""
    site = Path(sysconfig.get_paths()["purelib"])
    skip: set[str] = set()
    for dist in metadata.distributions():
        name = _norm(dist.metadata["Name"])
        if name in wheel_names or name == "labkit":
            for f in dist.files or ():
                parts = Path(f).parts
                skip.add("/".join(parts[:2]) if parts[0] == "nvidia" else parts[0])  # nvidia/ is shared
    for entry in site.iterdir():
        if entry.name in skip or entry.name.startswith("__editable__") or entry.name.startswith("labkit") \
                or entry.suffix == ".pth" or entry.name == "__pycache__" or (vsite / entry.name).exists():
            continue
        if entry.name == "nvidia":
            (vsite / "nvidia").mkdir()
            for sub in entry.iterdir():
                if sub.name == "__init__.py":
                    shutil.copy(sub, vsite / "nvidia" / sub.name)
                elif f"nvidia/{sub.name}" not in skip and sub.name != "__pycache__":
                    (vsite / "nvidia" / sub.name).symlink_to(sub)
            continue
        (vsite / entry.name).symlink_to(entry)


@pytest.mark.slow
def test_labkit_installs_from_the_wheelhouse_with_no_index(tmp_path: Path) -> None:
    wh = tmp_path / "wheelhouse"
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "wheelhouse.py"), str(wh)], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    wheels = sorted(wh.glob("*.whl"))
    names = {_norm(w.name.split("-")[0]) for w in wheels}
    assert "labkit" in names and {"plotly", "networkx", "nvidia-ml-py", "ml-dtypes", "nvidia-cuda-nvcc-cu12"} <= names
    assert "--no-index --no-deps" in (wh / "INSTALL.txt").read_text()

    venv = tmp_path / "gpu-box"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    vsite = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                capture_output=True, text=True, check=True).stdout.strip())
    _add_image(vsite, names - {"labkit"})
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL")}
    env["PIP_CONFIG_FILE"] = os.devnull
    before = subprocess.run([str(py), "-c", "import labkit"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert before.returncode != 0  # the image alone has no labkit
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    res = subprocess.run([*pip, "install", "--no-index", "--no-deps", "--quiet", *map(str, wheels)], capture_output=True,
                         text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    res = subprocess.run([*pip, "check"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    code = ("import labkit, labkit.topology, labkit.bandwidth, labkit.doctor, labkit.widgets, plotly, networkx, pynvml\n"
            "e = labkit.setup(quiet=True); r = labkit.doctor.report()\n"
            "print(labkit.__file__); print(plotly.__file__); print(e.mode, r['ptx']['ok'])\n"
            "import labkit.tensorcores as tc; print(len(tc.wmma_include_dirs()) > 0)")
    res = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env={**env, "LABKIT_MODE": "sim"},
                         cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith(str(venv)) and lines[1].startswith(str(venv))  # from the wheelhouse, not this checkout
    assert lines[2] == "sim True" and lines[3] == "True"


def test_image_names_file_and_first_run_script() -> None:
    """The prepared first GPU run: the image's package list parses, and the script's phases fit one 10-minute command."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import wheelhouse
    finally:
        sys.path.pop(0)
    names = wheelhouse.read_names(ROOT / "benchmarks" / "gpu-image-h200.txt")
    assert {"cupy-cuda13x", "numba-cuda", "torch", "ml-dtypes", "nvidia-ml-py"} <= names and "ipykernel" not in names
    script = (ROOT / "tools" / "first_gpu_run.sh").read_text()
    limits = [int(m) for m in re.findall(r'timeout "\$\(limit (\d+)\)"', script)]  # each phase's own limit
    budget = int(re.search(r"BUDGET=\$\{RUN_BUDGET_S:-(\d+)\}", script)[1])  # and what is left of the budget caps it
    assert len(limits) == 5 and sum(limits) <= budget <= 540, (limits, budget)
    assert "--image benchmarks/gpu-image-h200.txt --notebooks --no-nvcc" in script
    header = (ROOT / "benchmarks" / "gpu-image-h200.txt").read_text().split("\n", 2)[:2]
    assert "H200 image" in header[0] and "2026-11-17" in header[0] and not any("/work/" in h or ".library" in h for h in header)
    res = subprocess.run(["sh", "-n", str(ROOT / "tools" / "first_gpu_run.sh")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
