"""Rehearsal (issue 29, B4 and W2-W4): tools/first_gpu_run.sh end to end in the image's Python, with a stand-in
``nvidia-smi`` and ``ncu`` and the fakes of tests/rehearsal_fakes in place of the device: the wheelhouse is installed
as on the device (the same script), every phase runs within its limit and writes what it promises, the whole run
stays within 9 minutes, and OUT (what the device hands back: at most 8 files, 2 folders deep) holds one archive per
phase plus the gpu-check JSON and MD."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

from rehearsal_env import ROOT, VENV, needs_rehearsal

pytestmark = needs_rehearsal

LIMITS = {"env": 5 + 30, "gpu-check": 170, "notebooks": 230, "ncu": 85}
#: The device lends 15 minutes; its start takes 1-2 and the transfers some more: the script gets 9.
TOTAL_S = 540


def _stand_ins(bin_dir: Path) -> None:
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n"
                                        'case "$*" in *topo*) echo "GPU0 X";; *) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)";; esac\n')
    (bin_dir / "ncu").write_text("#!/bin/sh\n"  # what ncu prints: its log lines, then the CSV of the raw page
                                 'echo "==PROF== Connected to process"\n'
                                 'echo "\\"ID\\",\\"Kernel Name\\",\\"dram__throughput\\""\n'
                                 'echo "\\"0\\",\\"$(echo "$*" | sed "s/.*--launch //")\\",\\"80.1\\""\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)


def test_first_gpu_run_end_to_end(tmp_path: Path) -> None:
    _stand_ins(tmp_path / "bin")
    out, res_dir = tmp_path / "OUT", tmp_path / "results"
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(PATH=f"{tmp_path / 'bin'}:{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin", OUT=str(out),
               WHL=str(VENV / "whl"), SITE=str(tmp_path / "site"), MPI_PREFIX=str(tmp_path / "mpi"),
               PYTHONPATH=str(ROOT / "tests" / "rehearsal_fakes"), LABKIT_REHEARSAL_FAKES="1",
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    res = subprocess.run(["sh", str(ROOT / "tools" / "first_gpu_run.sh"), str(res_dir)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=TOTAL_S)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]

    # every phase within its limit, the whole run within the budget
    done = [(m[1], int(m[2]), int(m[3])) for m in re.finditer(r"== (\S+) finished \(exit (\d+)\) at (\d+) s", log)]
    assert [d[0] for d in done] == list(LIMITS), log[-3000:]
    installed = re.search(r"== wheelhouse installed at (\d+) s", log)
    assert installed, log[-3000:]  # the wheelhouse was installed, as on the device
    start = int(installed[1])
    for phase, status, at in done:
        assert at - start <= LIMITS[phase], (phase, at - start)
        start = at
    assert done[-1][2] <= TOTAL_S
    assert dict((p, s) for p, s, _ in done) == {"env": 0, "gpu-check": 0, "notebooks": 0, "ncu": 0}, done

    # what comes back: at most 8 files, at most 2 folders down, the gpu-check JSON and MD among them
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["1-env.tgz", "2-gpu-check.tgz", "3-notebooks.tgz", "4-ncu.tgz", "gpu-check.json", "gpu-check.md"]
    assert all(p.count("/") <= 2 and (out / p).stat().st_size < 16 * 2**20 for p in files)
    report = json.loads((out / "gpu-check.json").read_text())
    assert len(report["judgement"]) == 13 and all(r["status"] == "pass" for r in report["judgement"]), report["judgement"]
    solutions = sorted(p.name for p in (ROOT / "notebooks" / "solutions").glob("*.ipynb"))
    assert [n["notebook"] for n in report["notebooks"]] == solutions
    assert "| NVIDIA H200" in (out / "gpu-check.md").read_text() or "NVIDIA H200" in (out / "gpu-check.md").read_text()

    with tarfile.open(out / "1-env.tgz") as tar:
        names = set(tar.getnames())
        versions = tar.extractfile("env/versions.txt").read().decode()
        doctor = tar.extractfile("env/doctor.json").read().decode()
    assert {"env/versions.txt", "env/nvidia-smi.txt", "env/doctor.json"} <= names
    assert "numpy 2.5." in versions and "cuda-core 1.2" in versions and "mpi4py.MPI: MPICH" in versions, versions
    assert "mpiexec: " + str(tmp_path / "mpi" / "bin" / "mpiexec") in versions, versions  # B3: MPICH as the run brings it
    json.loads(doctor)  # C1: stderr is kept out of the JSON
    with tarfile.open(out / "3-notebooks.tgz") as tar:
        saved = sorted(Path(n).name for n in tar.getnames() if n.endswith(".ipynb"))
    assert saved == solutions  # W3: every executed notebook comes back
    with tarfile.open(out / "4-ncu.tgz") as tar:
        csvs = sorted(Path(n).name.split("-ncu-")[1] for n in tar.getnames() if n.endswith(".csv"))
    assert csvs == sorted(f"{k}.csv" for k in ("saxpy", "transpose_shared", "sum_all", "matmul_tiled", "wmma_gemm"))
