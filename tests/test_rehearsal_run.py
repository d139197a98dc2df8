"""Rehearsal (issue 29, B4 and W2-W4; issue 42, B5 and C8-C9): tools/first_gpu_run.sh end to end in the image's
Python, with a stand-in ``nvidia-smi`` and ``ncu`` and the fakes of tests/rehearsal_fakes in place of the device, on
the machine a first run is most likely to meet: a GPU passed through to a virtual machine, whose nvidia-smi shows N/A
for the PCIe link, persistence mode and clocks, whose NVML refuses those queries, and whose ncu may not read the
performance counters. The wheelhouse is installed as on the device (the same script), every phase runs within its
limit and ends with results and words, the whole run stays within 9 minutes, and OUT (what the device hands back: at
most 8 files, 2 folders deep) holds one archive per phase plus the gpu-check JSON and MD."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

from rehearsal_env import ROOT, VENV, needs_rehearsal

pytestmark = needs_rehearsal

LIMITS = {"env": 5 + 30 + 6 * 10, "gpu-check": 150 + 10, "notebooks": 270 + 10, "ncu": 60}  # + nvidia-smi's limits
#: The device lends 15 minutes; its start takes 1-2 and the transfers some more: the script gets 9.
TOTAL_S = 540


def _stand_ins(bin_dir: Path) -> None:
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n"  # a VM's: N/A where the hypervisor hides the field
                                        'case "$*" in *topo*) echo "GPU0 X";;\n'
                                        '  *query-gpu*) echo "name, persistence_mode, clocks.sm"; echo "NVIDIA H200, N/A, N/A";;\n'
                                        '  *-q*) echo "Persistence Mode : N/A"; echo "Clocks"; echo "    SM : N/A";;\n'
                                        '  *) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)";; esac\n')
    (bin_dir / "ncu").write_text("#!/bin/sh\n"  # ncu in a VM that keeps the counters to root
                                 'case "$*" in *--version*) echo "Version 2025.3.1.0 (build 36398880)"; exit 0;; esac\n'
                                 'echo "==PROF== Connected to process"\n'
                                 'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU '
                                 'Performance Counters on the target device 0." >&2\nexit 1\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)


def test_first_gpu_run_end_to_end(tmp_path: Path) -> None:
    _stand_ins(tmp_path / "bin")
    out, res_dir = tmp_path / "OUT", tmp_path / "results"
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(PATH=f"{tmp_path / 'bin'}:{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin", OUT=str(out),
               WHL=str(VENV / "whl"), SITE=str(tmp_path / "site"), MPI_PREFIX=str(tmp_path / "mpi"),
               PYTHONPATH=str(ROOT / "tests" / "rehearsal_fakes"), LABKIT_REHEARSAL_FAKES="1", LABKIT_REHEARSAL_VM="1",
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
    # every phase ends with its results and words: h2d cannot be judged (exit 1), ncu cannot read counters (exit 3)
    assert dict((p, s) for p, s, _ in done) == {"env": 0, "gpu-check": 1, "notebooks": 1, "ncu": 3}, done

    # what comes back: at most 8 files, at most 2 folders down, the gpu-check JSON and MD among them
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["1-env.tgz", "2-gpu-check.tgz", "3-notebooks.tgz", "4-ncu.tgz", "gpu-check.json", "gpu-check.md"]
    assert all(p.count("/") <= 2 and (out / p).stat().st_size < 16 * 2**20 for p in files)
    report = json.loads((out / "gpu-check.json").read_text())
    rows = {r["id"]: r for r in report["judgement"]}
    assert len(rows) == 13 and all(r["status"] == "pass" for k, r in rows.items() if k != "h2d-pinned"), rows
    assert rows["h2d-pinned"]["status"] == "not measured" and "N/A" in rows["h2d-pinned"]["why"]  # B5: words, not a crash
    solutions = sorted(p.name for p in (ROOT / "notebooks" / "solutions").glob("*.ipynb"))
    assert [n["notebook"] for n in report["notebooks"]] == solutions and not report["notebooks_not_run"]
    md = (out / "gpu-check.md").read_text()
    assert "NVIDIA H200" in md and "Targets: 13 of 13 measured" not in md and "not measured: h2d-pinned" in md

    with tarfile.open(out / "1-env.tgz") as tar:
        names = set(tar.getnames())
        versions = tar.extractfile("env/versions.txt").read().decode()
        doctor = tar.extractfile("env/doctor.json").read().decode()
        clocks = tar.extractfile("env/clocks-before.txt").read().decode()
    assert {"env/versions.txt", "env/nvidia-smi.txt", "env/doctor.json", "env/clocks-before.txt"} <= names
    assert "ncu (" in versions and "Version 2025.3.1.0" in versions and "nvcc" in versions  # C8
    assert "Persistence Mode : N/A" in clocks  # recorded as the VM says it
    assert "numpy 2.5." in versions and "cuda-core 1.2" in versions and "mpi4py.MPI: MPICH" in versions, versions
    assert "mpiexec: " + str(tmp_path / "mpi" / "bin" / "mpiexec") in versions, versions  # B3: MPICH as the run brings it
    json.loads(doctor)  # C1: stderr is kept out of the JSON
    with tarfile.open(out / "3-notebooks.tgz") as tar:
        saved = sorted(Path(n).name for n in tar.getnames() if n.endswith(".ipynb"))
    assert saved == solutions  # W3: every executed notebook comes back
    with tarfile.open(out / "4-ncu.tgz") as tar:
        notes = [n for n in tar.getnames() if n.endswith("-ncu-note.txt")]
        assert len(notes) == 1, tar.getnames()
        note = tar.extractfile(notes[0]).read().decode()
    assert "NVreg_RestrictProfilingToAdminUsers" in note and "ERR_NVGPUCTRPERM" in note  # why no reports, in words
