"""tools/gpu_check.py as a judge: every COURSE.md target reported with value, target and pass/fail; exit 1 when a
target fails (or is not measured, or a notebook fails), 2 when it cannot run. Judged from recorded result files
(tests/fixtures/gpu_check/*.json, synthetic, written by make_fixtures.py there). Cost: about 3 s."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "gpu_check"
TOOL = ROOT / "tools" / "gpu_check.py"


def _tool():
    spec = importlib.util.spec_from_file_location("gpu_check_tool", TOOL)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["gpu_check_tool"] = mod  # dataclasses look the module up while the class is made
    spec.loader.exec_module(mod)
    return mod


gc = _tool()


def _report(name: str) -> dict:
    return json.loads((FIX / name).read_text())


def test_every_course_target_is_judged() -> None:
    """COURSE.md's performance targets, read from the design itself, each have a Target with that threshold."""
    course = (ROOT.parent / "shared" / "COURSE.md")
    text = course.read_text() if course.exists() else ""
    section = text.split("## Performance targets", 1)[-1].split("\n## ", 1)[0] if text else ""
    by_id = {t.id: t for t in gc.TARGETS}
    wanted = {"saxpy": 85, "copy": 85, "transpose": 75, "reduction": 75, "tiled-matmul": 4, "fp16-gemm": 70,
              "bf16-gemm": 70, "d2d-vs-library": 95, "h2d-pinned": 80, "overlap": 1.5, "d2d-spread": 3}
    for tid, threshold in wanted.items():
        assert by_id[tid].threshold == threshold, tid
    assert by_id["wmma"].op == "true" and by_id["fusion"].op == "true"
    if section:  # the figures in the design are the ones judged
        for figure in ("85%", "75%", "4×", "70%", "5%"):
            assert figure in section, figure


def test_all_pass_fixture_exits_0_with_every_target_reported() -> None:
    rep = _report("all-pass.json")
    rows = gc.judge(rep["benchmarks"])
    assert [r["id"] for r in rows] == [t.id for t in gc.TARGETS]
    assert all(r["status"] == "pass" and r["value"] is not None for r in rows)
    rep["judgement"] = rows
    assert gc.exit_code(rep) == 0
    md = gc.markdown(rep)
    for t in gc.TARGETS:
        assert t.course in md
    assert md.count("| PASS |") == len(gc.TARGETS) and "Exit status 0" in md


@pytest.mark.parametrize("name,failing,status", [
    ("gemm-below-target.json", "bf16-gemm", "fail"),
    ("wmma-wrong.json", "wmma", "fail"),
    ("no-nvml.json", "h2d-pinned", "not measured"),
])
def test_one_bad_target_exits_1_and_names_it(name: str, failing: str, status: str) -> None:
    rep = _report(name)
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    assert rows[failing]["status"] == status
    assert all(r["status"] == "pass" for k, r in rows.items() if k != failing)
    rep["judgement"] = list(rows.values())
    assert gc.exit_code(rep) == 1
    if name == "no-nvml.json":
        assert "NVML" in rows[failing]["why"]


def test_the_judge_does_not_trust_a_records_own_verdict() -> None:
    rep = _report("all-pass.json")
    bw = next(s for s in rep["benchmarks"] if s["suite"] == gc.BANDWIDTH)
    h2d = next(r for r in bw["records"] if r["name"] == "bandwidth.h2d-pinned-vs-pcie")
    h2d["value"], h2d["passed"] = 61.0, True  # a record claiming a pass below the target
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    assert rows["h2d-pinned"]["status"] == "fail" and rows["h2d-pinned"]["value"] == 61.0


def test_a_crashed_suite_marks_its_targets_not_measured() -> None:
    rep = _report("tensor-suite-crashed.json")
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    for tid in ("fp16-gemm", "bf16-gemm", "wmma"):
        assert rows[tid]["status"] == "not measured" and "libcublas" in rows[tid]["why"]
    assert rows["saxpy"]["status"] == "pass"
    rep["judgement"] = list(rows.values())
    assert gc.exit_code(rep) == 1


def test_missing_record_is_not_a_pass() -> None:
    rep = _report("all-pass.json")
    numba = next(s for s in rep["benchmarks"] if s["suite"] == gc.NUMBA)
    numba["records"] = [r for r in numba["records"] if r["name"] != "sum reduction (Numba)"]
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    assert rows["reduction"]["status"] == "not measured" and "no record" in rows["reduction"]["why"]


@pytest.mark.parametrize("name,code", [("all-pass.json", 0), ("gemm-below-target.json", 1), ("no-nvml.json", 1),
                                       ("notebook-failed.json", 1), ("cannot-run.json", 2)])
def test_judge_command_exit_status(name: str, code: int) -> None:
    res = subprocess.run([sys.executable, str(TOOL), "--judge", str(FIX / name)], capture_output=True, text=True, timeout=60)
    assert res.returncode == code, res.stdout + res.stderr
    if code != 2:
        assert len(re.findall(r"^\s*(PASS|FAIL|NOT MEASURED)\s", res.stdout, re.M)) == len(gc.TARGETS)


def test_without_a_gpu_gpu_check_exits_2_and_says_why(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_MODE", "NUMBA_ENABLE_CUDASIM")}
    res = subprocess.run([sys.executable, str(TOOL), "--skip-notebooks", "--out", str(tmp_path)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "gpu-check needs gpu mode" in res.stderr and "Traceback" not in res.stderr
    assert not list(tmp_path.iterdir())


def test_notebook_kernels_can_import_labkit_without_an_install(tmp_path: Path) -> None:
    """The defect: src/ was on gpu-check's own sys.path only. A kernel process (here: Python without site-packages,
    so no installed labkit) started with the environment gpu-check gives its kernels imports this checkout's labkit."""
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **gc._kernel_env()}
    code = "import labkit, os; print(os.path.dirname(labkit.__file__))"
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()) == ROOT / "src" / "labkit"
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=bare, cwd=tmp_path, timeout=60)
    assert res.returncode != 0  # the check above is not vacuous
    assert env["LABKIT_MODE"] == "gpu" and env["LABKIT_EXPECT"] == "solved"


# ---------------------------------------------------------------------------------------------- Nsight Compute reports


def _ncu_tool():
    spec = importlib.util.spec_from_file_location("ncu_reference_tool", ROOT / "tools" / "ncu_reference.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["ncu_reference_tool"] = mod
    spec.loader.exec_module(mod)
    return mod


def _fake_ncu(tmp_path: Path, body: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "ncu"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)


def test_ncu_reports_are_saved_per_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ncu = _ncu_tool()
    _fake_ncu(tmp_path, 'echo "==PROF== Connected"\necho "\\"ID\\",\\"Kernel Name\\",\\"args\\""\necho "\\"0\\",\\"k\\",\\"$*\\""\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert ncu.profile(tmp_path / "out", ["saxpy", "wmma_gemm"], "fixture-gpu-2026-12-01") == 0
    csv = (tmp_path / "out" / "fixture-gpu-2026-12-01-ncu-saxpy.csv").read_text()
    assert "--set full" in csv and "regex:saxpy" in csv and "--launch saxpy" in csv and "==PROF==" not in csv
    assert (tmp_path / "out" / "fixture-gpu-2026-12-01-ncu-wmma_gemm.csv").exists()


def test_ncu_without_counter_permission_writes_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ncu = _ncu_tool()
    _fake_ncu(tmp_path, 'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert ncu.profile(tmp_path / "out", ["saxpy"], "g") == 3
    assert "NVreg_RestrictProfilingToAdminUsers" in (tmp_path / "out" / "g-ncu-note.txt").read_text()


def test_ncu_missing_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ncu = _ncu_tool()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert ncu.profile(tmp_path / "out", ["copy"], "g") == 3
    assert "not installed" in (tmp_path / "out" / "g-ncu-note.txt").read_text()
    assert set(ncu.KERNELS) >= {"saxpy", "copy", "transpose_shared", "sum_all", "matmul_tiled", "wmma_gemm"}
