"""tools/gpu_check.py as a judge: every COURSE.md target reported with value, target and pass/fail; exit 1 when a
target fails (or is not measured, or a notebook fails), 2 when it cannot run. The result files it judges are made
by the producers: gpu_check's own ``main`` running every suite's real record-building code on fakes
(tests/gpu_producers.py), so a record or a field renamed in a suite fails here. Only
tests/fixtures/gpu_check/cannot-run.json is a file (no producer writes one). Cost: about 8 s."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gpu_producers

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "gpu_check"
TOOL = ROOT / "tools" / "gpu_check.py"

gc = gpu_producers.gpu_check_tool()


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every variant of gpu_producers.VARIANTS written by the producers, once for this module."""
    tmp = tmp_path_factory.mktemp("produced")
    gpu_producers.write_all(tmp / "work", tmp / "results")
    return tmp / "results"


@pytest.fixture
def report_of(produced: Path):
    def load(name: str) -> dict:
        return json.loads(((FIX if name == "cannot-run.json" else produced) / name).read_text())

    return load


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


def test_all_pass_fixture_exits_0_with_every_target_reported(report_of) -> None:
    rep = report_of("all-pass.json")
    rows = gc.judge(rep["benchmarks"])
    assert [r["id"] for r in rows] == [t.id for t in gc.TARGETS]
    assert all(r["status"] == "pass" and r["value"] is not None for r in rows)
    rep["judgement"] = rows
    assert gc.exit_code(rep) == 0
    md = gc.markdown(rep)
    for t in gc.TARGETS:
        assert t.course in md
    assert md.count("| PASS |") == len(gc.TARGETS) and "Exit status 0" in md
    # what each lab does on this GPU (an H200, one of it): the plan from the device profile, its fallbacks in the MD
    plan = {(p["lab"], p["part"]): p["action"] for p in rep["labs"]}
    assert plan[("06", "FP8 GEMM")] == "runs" and plan[("08", "NCCL all-reduce")] == "skipped"
    assert "## What does not run for real on this GPU" in md and "08 NCCL all-reduce: skipped" in md


@pytest.mark.parametrize("name,failing,status", [
    ("gemm-below-target.json", "bf16-gemm", "fail"),
    ("wmma-wrong.json", "wmma", "fail"),
    ("no-nvml.json", "h2d-pinned", "not measured"),
    ("vm-nvml-refuses.json", "h2d-pinned", "not measured"),  # B5: the two D2D targets kept, h2d says why
    ("overlap-wrong-result.json", "overlap", "fail"),
    ("h2d-above-link.json", "h2d-pinned", "not measured"),
])
def test_one_bad_target_exits_1_and_names_it(report_of, name: str, failing: str, status: str) -> None:
    rep = report_of(name)
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    assert rows[failing]["status"] == status
    assert all(r["status"] == "pass" for k, r in rows.items() if k != failing)
    rep["judgement"] = list(rows.values())
    assert gc.exit_code(rep) == 1
    if name == "no-nvml.json":
        assert "NVML" in rows[failing]["why"]
    if name == "vm-nvml-refuses.json":  # labkit's own pcie_link asked the VM's NVML, which refused
        assert "NVML could not answer" in rows[failing]["why"] and "N/A" in rows[failing]["why"], rows[failing]["why"]
        h2d = next(r for r in gc._records(rep["benchmarks"]) if r["name"] == "bandwidth.h2d-pinned-vs-pcie")
        assert h2d["details"]["h2d_gbps"] > 0  # measured, kept
    if name == "overlap-wrong-result.json":  # the speed-up passes; the wrong result fails it
        assert rows[failing]["value"] >= 1.5 and "correct = False" in rows[failing]["why"]
    if name == "h2d-above-link.json":  # the figure is kept and shown, but not judged
        assert rows[failing]["value"] > 100 and "PCIe Gen3 x16" in rows[failing]["why"]


def test_the_judge_does_not_trust_a_records_own_verdict(report_of) -> None:
    rep = report_of("all-pass.json")
    bw = next(s for s in rep["benchmarks"] if s["suite"] == gc.BANDWIDTH)
    h2d = next(r for r in bw["records"] if r["name"] == "bandwidth.h2d-pinned-vs-pcie")
    h2d["value"], h2d["passed"] = 61.0, True  # a record claiming a pass below the target
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    assert rows["h2d-pinned"]["status"] == "fail" and rows["h2d-pinned"]["value"] == 61.0


def test_a_crashed_suite_marks_its_targets_not_measured(report_of) -> None:
    rep = report_of("tensor-suite-crashed.json")
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    for tid in ("fp16-gemm", "bf16-gemm", "wmma"):
        assert rows[tid]["status"] == "not measured" and "libcublas" in rows[tid]["why"]
    assert rows["saxpy"]["status"] == "pass"
    rep["judgement"] = list(rows.values())
    assert gc.exit_code(rep) == 1


def test_missing_record_is_not_a_pass(report_of) -> None:
    rep = report_of("all-pass.json")
    numba = next(s for s in rep["benchmarks"] if s["suite"] == gc.NUMBA)
    numba["records"] = [r for r in numba["records"] if r["name"] != "sum reduction (Numba)"]
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    assert rows["reduction"]["status"] == "not measured" and "no record" in rows["reduction"]["why"]


@pytest.mark.parametrize("name,code", [("all-pass.json", 0), ("gemm-below-target.json", 1), ("no-nvml.json", 1),
                                       ("notebook-failed.json", 1), ("overlap-wrong-result.json", 1),
                                       ("cannot-run.json", 2)])
def test_judge_command_exit_status(produced: Path, name: str, code: int) -> None:
    path = (FIX if name == "cannot-run.json" else produced) / name
    res = subprocess.run([sys.executable, str(TOOL), "--judge", str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == code, res.stdout + res.stderr
    if code != 2:
        assert len(re.findall(r"^\s*(PASS|FAIL|NOT MEASURED)\s", res.stdout, re.M)) == len(gc.TARGETS)


def test_the_overlap_needs_its_correct_field(report_of) -> None:
    """The speed-up alone is not the target: a record with no ``correct`` (or not True) fails."""
    rep = report_of("all-pass.json")
    cupy = next(s for s in rep["benchmarks"] if s["suite"] == gc.CUPY)
    overlap = next(r for r in cupy["records"] if r["name"] == "cupy-stream-overlap")
    assert overlap["correct"] is True  # the producer's own field
    del overlap["correct"]
    row = {r["id"]: r for r in gc.judge(rep["benchmarks"])}["overlap"]
    assert row["status"] == "fail" and "correct = None" in row["why"]


@pytest.mark.parametrize("module,fn,old,new,target", [
    ("tensorcores", "gpu_check", "tensorcores.bf16-gemm-vs-dense-peak", "tensorcores.bf16-vs-peak", "bf16-gemm"),
    ("kernels", "benchmark_suite", "sum reduction (Numba)", "reduction (Numba)", "reduction"),
    ("cupylab", "benchmarks", "cupy-stream-overlap", "cupy-overlap", "overlap"),
    ("bandwidth", "gpu_check_suite", "bandwidth.h2d-pinned-vs-pcie", "bandwidth.h2d-vs-pcie", "h2d-pinned"),
])
def test_a_record_renamed_by_its_producer_is_not_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str,
                                                         fn: str, old: str, new: str, target: str) -> None:
    """What the fixtures being produced buys: rename a record where a suite makes it and the judge no longer
    finds it (the all-pass tests above then fail)."""
    import labkit
    import labkit.kernels  # noqa: F401 - the attribute below

    mod = getattr(labkit, module)
    real = getattr(mod, fn)

    def renamed(*a, **k):
        out = real(*a, **k)
        for rec in gc._records(out):
            if rec.get("name") == old:
                rec["name"] = new
        return out

    monkeypatch.setattr(mod, fn, renamed)
    rep = gpu_producers.report(tmp_path)
    rows = {r["id"]: r for r in gc.judge(rep["benchmarks"])}
    assert rows[target]["status"] == "not measured" and f"no record '{old}'" in rows[target]["why"]
    assert gc.exit_code({**rep, "judgement": list(rows.values())}) == 1


def test_without_a_gpu_gpu_check_exits_2_and_says_why(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_MODE", "NUMBA_ENABLE_CUDASIM")}
    res = subprocess.run([sys.executable, str(TOOL), "--skip-notebooks", "--out", str(tmp_path)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "gpu-check needs gpu mode" in res.stderr and "Traceback" not in res.stderr
    # C9: the summary is written all the same, saying why nothing was measured
    (written,) = tmp_path.glob("no-gpu-*.json")
    report = json.loads(written.read_text())
    assert "gpu-check needs gpu mode" in report["cannot_run"] and gc.exit_code(report) == 2
    md = written.with_suffix(".md").read_text()
    assert "could not run here" in md and f"all {len(gc.TARGETS)} targets" in md and "Exit status 2" in md
    assert gc.rejudge(written) == 2
    # the notebook phase failing after the benchmarks ran: their file keeps its figures and says what was not run
    produced = json.loads((tmp_path / written.name).read_text())
    day = tmp_path / f"fake-h200-{produced['date']}.json"
    day.write_text(json.dumps({"date": produced["date"], "benchmarks": [], "judgement": [], "notebooks": []}))
    args = gc.argparse.Namespace(skip_benchmarks=True, skip_notebooks=False)
    assert gc.cannot_run(tmp_path, "gpu-check needs gpu mode: no CUDA driver", args) == 2
    later = json.loads(day.read_text())
    assert later["not_run"] == ["the notebooks: gpu-check needs gpu mode: no CUDA driver"] and gc.exit_code(later) == 1
    assert "Not run: the notebooks" in day.with_suffix(".md").read_text()


def test_a_run_cut_by_its_time_limit_names_what_it_did_not_finish(tmp_path: Path) -> None:
    """W7/C9: SIGTERM (what `timeout` sends at the phase limit) mid-notebooks: the JSON and MD say the run was cut and
    name the notebooks not finished; the ones finished stay; exit 124 at once."""
    import signal
    import time

    driver = tmp_path / "driver.py"
    driver.write_text(f"""
import sys, time
sys.path.insert(0, {str(ROOT / 'tests')!r})
import gpu_producers as P
import labkit
gc = P.gpu_check_tool()
labkit.setup = lambda *a, **k: P._environment()
def run_one(path, timeout):
    if not path.name.startswith("07-"):
        time.sleep(60)
    return {{"notebook": path.name, "status": "passed", "seconds": 0.1, "error": None}}
gc._run_one = run_one
gc.os.environ.update = lambda *a, **k: None  # keep this process's mode
sys.exit(gc.main(["--skip-benchmarks", "--jobs", "3", "--out", {str(tmp_path / 'out')!r}]))
""")
    env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_MODE",)}
    proc = subprocess.Popen([sys.executable, str(driver)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            files = list((tmp_path / "out").glob("*.json"))
            if files and '"07-' in files[0].read_text():
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 124, err
    (written,) = (tmp_path / "out").glob("*.json")
    report = json.loads(written.read_text())
    assert [n["notebook"][:3] for n in report["notebooks"]] == ["07-"]  # 07 ran first, alone, and is kept
    assert "SIGTERM" in report["cut"] and "running the notebooks" in report["cut"]
    assert len(report["notebooks_not_run"]) == len(gc.notebook_paths(None)) - 1 and gc.exit_code(report) == 1
    md = written.with_suffix(".md").read_text()
    assert "Cut short" in md and "not run or not finished: 00-" in md


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
    assert "--set basic" in csv and "MemoryWorkloadAnalysis" in csv and "regex:saxpy" in csv and "--launch saxpy" in csv and "==PROF==" not in csv
    assert (tmp_path / "out" / "fixture-gpu-2026-12-01-ncu-wmma_gemm.csv").exists()


def test_ncu_without_counter_permission_writes_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ncu = _ncu_tool()
    _fake_ncu(tmp_path, 'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert ncu.profile(tmp_path / "out", ["saxpy"], "g") == 3
    assert "NVreg_RestrictProfilingToAdminUsers" in (tmp_path / "out" / "g-ncu-note.txt").read_text()


def test_a_cut_ncu_profile_stops_the_process_it_profiles_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """W9: the profiled Python (here a `sleep` ncu starts, as --target-processes all starts the launch script) must not
    outlive its cut profile; the first kernel gets the larger share."""
    import time

    ncu = _ncu_tool()
    pids = tmp_path / "pids"
    _fake_ncu(tmp_path, f'case "$*" in *--version*) echo "NVIDIA (R) Nsight Compute Command Line Profiler"; '
                        f'echo "Version 2025.3.1.0 (build 1)"; exit 0;; esac\nsleep 30 & echo $! >> {pids}\nwait\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    t0 = time.monotonic()
    assert ncu.profile(tmp_path / "out", ["saxpy", "copy"], "g", budget=2.0) == 1
    assert time.monotonic() - t0 < 10
    assert "stopped" in (tmp_path / "out" / "g-ncu-saxpy.err.txt").read_text()
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 2
    time.sleep(0.2)

    def running(pid: int) -> bool:  # a killed child may linger as a zombie until its new parent reaps it
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    assert not [pid for pid in children if running(pid)]  # killed with its group
    assert ncu.shares(80, 5, True) > 16 == ncu.shares(80, 5, False)
    assert ncu.shares(80, 5, True) + 4 * ncu.shares(80 - ncu.shares(80, 5, True), 4, False) == pytest.approx(80)
    assert ncu.ncu_version(str(tmp_path / "bin" / "ncu")) == "Version 2025.3.1.0 (build 1)"


def test_ncu_missing_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ncu = _ncu_tool()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert ncu.profile(tmp_path / "out", ["copy"], "g") == 3
    assert "not installed" in (tmp_path / "out" / "g-ncu-note.txt").read_text()
    assert set(ncu.KERNELS) >= {"saxpy", "copy", "transpose_shared", "sum_all", "matmul_tiled", "wmma_gemm"}


# ---------------------------------------------------------------------------------------------- nothing measured is lost
class _FakeEnv:
    device_name, compute_capability, sm_count, memory_bytes, gpu_count, driver_version, mig = \
        "Fake H200", (9, 0), 132, 141 * 2**30, 1, "13.0", None


def _fake_gpu_check(monkeypatch: pytest.MonkeyPatch, suites: dict) -> None:
    import labkit

    monkeypatch.setenv("LABKIT_MODE", os.environ.get("LABKIT_MODE", "sim"))  # gpu_check.main sets it to gpu: restored after
    monkeypatch.setattr(labkit, "setup", lambda *a, **k: _FakeEnv())
    for (module, fn), impl in suites.items():
        monkeypatch.setattr(getattr(labkit, module), fn, impl)


def test_the_json_is_written_after_each_suite_and_survives_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A suite that kills the run (here: KeyboardInterrupt, as a timeout's signal would) keeps the suites before it."""

    def crash() -> None:
        raise KeyboardInterrupt

    _fake_gpu_check(monkeypatch, {
        ("kernels", "benchmark_suite"): lambda: [{"name": "saxpy", "gbps": 4000.0}],
        ("tensorcores", "gpu_check"): lambda: {"targets": [{"name": "fp16", "tflops": 700.0}]},
        ("cupylab", "benchmarks"): crash,
    })
    with pytest.raises(KeyboardInterrupt):
        gc.main(["--skip-notebooks", "--out", str(tmp_path)])
    (written,) = tmp_path.glob("*.json")
    report = json.loads(written.read_text())
    assert [s["suite"] for s in report["benchmarks"]] == [gc.NUMBA, gc.TENSOR]
    assert report["benchmarks"][0]["records"] == [{"name": "saxpy", "gbps": 4000.0}]
    assert report["judgement"] and (tmp_path / written.name.replace(".json", ".md")).exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_the_notebook_phase_keeps_the_benchmarks_and_the_benchmark_phase_keeps_the_notebooks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu_check(monkeypatch, {
        ("kernels", "benchmark_suite"): lambda: [{"name": "saxpy"}], ("tensorcores", "gpu_check"): lambda: [],
        ("cupylab", "benchmarks"): lambda: [], ("bandwidth", "gpu_check_suite"): lambda: [],
    })
    rows = [{"notebook": "00-start-here.ipynb", "status": "passed", "seconds": 1.0, "error": None}]

    def fake_notebooks(stems, timeout, progress=None, jobs=1):
        progress(rows)
        return rows

    monkeypatch.setattr(gc, "run_notebooks", fake_notebooks)
    gc.main(["--skip-benchmarks", "--out", str(tmp_path)])
    gc.main(["--skip-notebooks", "--out", str(tmp_path)])  # a later benchmark run of the same day
    (written,) = tmp_path.glob("*.json")
    report = json.loads(written.read_text())
    assert report["notebooks"] == rows and len(report["benchmarks"]) == 4


def test_notebooks_share_the_gpu_but_the_timing_ones_run_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """05 (stream overlap judged by time, W2) and 07 (bandwidth) run alone, first, 07 (the longest) before 05 (W7):
    a cut phase loses notebooks of the shared batch, not the figures only a GPU gives."""
    paths = sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))
    batches = gc.notebook_batches(paths, 3)
    assert [[p.name[:3] for p in b] for b in batches[:2]] == [["07-"], ["05-"]] and len(batches) == 3
    assert not any(p.name.startswith(("05-", "07-")) for p in batches[2]) and len(batches[2]) == len(paths) - 2
    assert gc.notebook_batches(paths, 1) == [[p] for p in paths]
    seen: list[int] = []

    def runner(path: Path, timeout: int) -> dict:
        return {"notebook": path.name, "status": "passed", "seconds": 0.1, "error": None}

    monkeypatch.setattr(gc, "_kernel_env", lambda: {})
    out = gc.run_notebooks(None, 5, progress=lambda r: seen.append(len(r)), jobs=3, runner=runner)
    assert seen == list(range(1, len(paths) + 1))  # written after every notebook
    assert [r["notebook"] for r in out] == sorted(p.name for p in paths)


def test_ncu_runs_at_the_gpus_own_clocks() -> None:
    spec = importlib.util.spec_from_file_location("ncu_tool_clock", ROOT / "tools" / "ncu_reference.py")
    ncu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ncu)
    cmd = ncu.ncu_command("ncu", "saxpy")
    assert cmd[cmd.index("--clock-control") + 1] == "none"


def _first_run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str], Path]:
    """tools/first_gpu_run.sh with python3, nvidia-smi and timeout faked: python3 logs what it runs and writes gpu-check's
    JSON and MD into its --out, as the real phases do; the version script runs on the real Python. (The run itself, on
    the image's packages and labkit's fakes, is rehearsed in tests/test_rehearsal_run.py.)"""
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "log"
    (fake / "python3").write_text(f"""#!/bin/sh
[ "$1" = - ] && exec {sys.executable} -
echo "$*" >> {log}
case "$*" in *gpu_check.py*--out*) out=$(echo "$*" | sed 's/.*--out \\([^ ]*\\).*/\\1/'); echo "$*" >> "$out/fake-h200.json"; echo "$*" >> "$out/fake-h200.md";; esac
case "$*" in *labkit.doctor*) echo '{{"mode": "sim"}}'; echo "a warning" >&2;; esac
exit 0
""")
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: Fake H200'\n")
    (fake / "timeout").write_text(f"#!/bin/sh\necho \"limit $1 $2\" >> {log}\nshift\nexec \"$@\"\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "OUT": str(tmp_path / "device-out"),
           "WHL": str(tmp_path / "no-wheelhouse")}
    res = subprocess.run(["sh", str(ROOT / "tools" / "first_gpu_run.sh"), *args], capture_output=True, text=True,
                         env=env, timeout=60)
    return res, log.read_text().splitlines(), tmp_path / "device-out"


def test_first_gpu_run_order_limits_and_output_folder(tmp_path: Path) -> None:
    import tarfile

    res, log, device_out = _first_run(tmp_path, str(tmp_path / "results"))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # versions, MPI and MemAvailable first, before anything touches the GPU (C1)
    assert out.index("cuda-bindings") < out.index("labkit.doctor") if "labkit.doctor" in out else True
    for name in ("numpy", "numba", "cuda-bindings", "cuda-core", "numba-cuda", "cuda-pathfinder", "cupy-cuda13x", "torch",
                 "mpi4py", "mpi4py.MPI:", "mpiexec:", "MemAvailable"):
        assert name in out, name
    runs = [line for line in log if not line.startswith("limit")]
    assert "labkit.doctor" in runs[0] and "--skip-notebooks" in runs[1] and "--skip-benchmarks --jobs 3" in runs[2]
    assert "--save-notebooks" in runs[2] and "ncu_reference.py" in runs[3]  # the notebooks run before ncu
    limits = [int(line.split()[1]) for line in log if line.startswith("limit") and line.split()[2] == "python3"]
    assert len(limits) == 6 and sum(limits[:5]) <= 530, limits  # the last is the 10 s re-judging of the JSON
    smi = [line for line in log if line.startswith("limit") and line.split()[2] == "nvidia-smi"]
    assert len(smi) >= 5 and all(line.split()[1] == "10" for line in smi)  # every nvidia-smi call has a limit (C8)
    assert "ncu: not found" in out and "nvcc" in out  # the tool versions are recorded (C8)
    assert (tmp_path / "results" / "env" / "clocks-before.txt").exists()
    assert (tmp_path / "results" / "notebooks" / "clocks-after-notebooks.txt").exists()
    res_dir = tmp_path / "results"
    assert json.loads((res_dir / "env" / "doctor.json").read_text()) == {"mode": "sim"}  # stderr kept apart (C1)
    assert out.count("finished (exit") == 4  # a copy to $OUT after every phase
    files = sorted(p.relative_to(device_out).as_posix() for p in device_out.rglob("*") if p.is_file())
    assert files == ["1-env.tgz", "2-gpu-check.tgz", "3-notebooks.tgz", "4-ncu.tgz", "gpu-check.json", "gpu-check.md"]
    with tarfile.open(device_out / "1-env.tgz") as tar:
        assert {"env/versions.txt", "env/nvidia-smi.txt", "env/doctor.json"} <= set(tar.getnames())
    assert "--skip-benchmarks" in (device_out / "gpu-check.json").read_text()  # the copy after the notebooks phase


def test_first_gpu_run_writes_to_a_fresh_folder_and_keeps_to_the_budget(tmp_path: Path) -> None:
    script = (ROOT / "tools" / "first_gpu_run.sh").read_text()
    assert 'RES=${1:-/tmp/gpu-run-$START}' in script and "benchmarks/results" not in script.split("set -u")[1]
    assert "/work/" not in script and "carry" not in script  # the course's own commands only
    res, log, _ = _first_run(tmp_path, str(tmp_path / "r"))
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "RUN_BUDGET_S": "100",
           "WHL": str(tmp_path / "none")}
    (tmp_path / "log").write_text("")
    subprocess.run(["sh", str(ROOT / "tools" / "first_gpu_run.sh"), str(tmp_path / "r2")], capture_output=True, text=True,
                   env=env, timeout=60, check=True)
    limits = [int(line.split()[1]) for line in (tmp_path / "log").read_text().splitlines()
              if line.startswith("limit") and line.split()[2] == "python3"]
    assert limits[:2] == [5, 30] and all(v <= 100 for v in limits[2:5]), limits  # no phase past what is left
