"""The labkit command: doctor (text and JSON), topo, bench, and clear errors."""

import json
import subprocess
import sys

from labkit import cli, doctor


def _labkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labkit.cli", *args], capture_output=True, text=True, timeout=300)


def test_doctor_json_keys_and_sim_mode() -> None:
    proc = _labkit("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert tuple(data) == doctor.KEYS
    assert data["mode"] == "sim" and data["gpus"] == [] and data["nvlink"]["available"] is False
    assert data["ptx"]["ok"] is True and data["packages"]["numba-cuda"].startswith("0.30.")
    assert data["next_steps"]


def test_doctor_text() -> None:
    proc = _labkit("doctor")
    assert proc.returncode == 0 and "mode: sim" in proc.stdout and "PTX toolchain" in proc.stdout


def test_topo(capsys) -> None:
    assert cli.main(["topo"]) == 0
    assert "DGX-2" in capsys.readouterr().out
    assert cli.main(["topo", "DGX-2"]) == 0
    assert cli.main(["topo", "DGX-3000"]) == 2
    assert "did you mean" in capsys.readouterr().err.lower()


def test_bench_usage_and_unknown_suite(capsys) -> None:
    assert cli.main(["bench"]) == 0 and "bandwidth" in capsys.readouterr().out
    assert cli.main(["bench", "flops"]) == 2


def test_lab_command_needs_the_course(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "__file__", str(tmp_path / "x.py"))
    assert cli.main(["lab"]) == 2
    assert "cannot find the course" in capsys.readouterr().err


def test_lab_passes_flags_through(capsys) -> None:
    """`labkit lab --version` reaches `jupyter lab --version`, which answers and exits."""
    assert cli.main(["lab", "--version"]) == 0
    assert "jupyter" in capsys.readouterr().out
