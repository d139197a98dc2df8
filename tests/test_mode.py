"""labkit.setup(): mode choice, forcing, repeated calls, and the numba-imported-first case."""

import subprocess
import sys
import textwrap

import pytest

import labkit
from labkit import mode
from labkit.errors import ModeError


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    full_env = {k: v for k, v in os.environ.items() if k not in ("LABKIT_MODE", "NUMBA_ENABLE_CUDASIM")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=120)


def test_sim_mode_here() -> None:
    e = labkit.env()
    assert e.mode == "sim" and not e.is_gpu
    assert "sim mode" in e.banner() and "never GPU speed" in e.banner()
    assert labkit.xp.__name__ == "numpy"
    assert labkit.size(gpu=10**8, sim=100) == 100


def test_setup_twice_is_harmless(capsys: pytest.CaptureFixture) -> None:
    assert labkit.setup() is labkit.setup(quiet=True)
    assert "labkit sim mode" in capsys.readouterr().out


def test_switching_mode_in_a_kernel_is_an_error() -> None:
    with pytest.raises(ModeError, match="Restart the kernel"):
        labkit.setup("gpu")


def test_auto_detects_sim_without_driver() -> None:
    proc = _run("import labkit, os; e = labkit.setup(); print(e.mode, os.environ['NUMBA_ENABLE_CUDASIM'])")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "sim 1"


def test_forcing_gpu_without_gpu_is_one_clear_error() -> None:
    proc = _run("""
        import labkit
        try:
            labkit.setup()
        except labkit.LabkitError as e:
            print("ERR", type(e).__name__, e)
    """, LABKIT_MODE="gpu")
    assert "ERR ModeError gpu mode was forced" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_unknown_mode_value() -> None:
    proc = _run("import labkit\ntry:\n    labkit.setup()\nexcept labkit.LabkitError as e:\n    print('ERR', e)", LABKIT_MODE="fast")
    assert "is not a mode" in proc.stdout


def test_numba_imported_first_asks_for_restart() -> None:
    proc = _run("""
        from numba import cuda   # the real CUDA target (no simulator): sim mode is impossible now
        import labkit
        try:
            labkit.setup()
        except labkit.LabkitError as e:
            print("ERR", e)
    """)
    assert "ERR numba's CUDA target was imported before labkit.setup()" in proc.stdout
    assert "Restart the kernel" in proc.stdout


def test_numba_core_imported_first_is_fine() -> None:
    proc = _run("import numba\nimport labkit\ne = labkit.setup(quiet=True)\nfrom numba import cuda\nprint(e.mode, cuda.simulator_init is not None)")
    assert proc.stdout.split() == ["sim", "True"], proc.stderr


def test_notebook_handler_hides_labkit_tracebacks() -> None:
    from labkit.errors import LabkitError, _show_labkit_error

    class Shell:
        pass

    import io
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        _show_labkit_error(Shell(), LabkitError, LabkitError("bad thing", fix="do this"), None)
    assert buf.getvalue() == "LabkitError: bad thing\n  What to do: do this\n"


def test_environment_as_dict() -> None:
    d = mode.env().as_dict()
    assert d["mode"] == "sim" and d["gpus"] == []
