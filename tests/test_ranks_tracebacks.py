"""An Interrupt or a time-out of a run on MPI processes (labkit.ranks, lab 08's check) shows, in IPython, the
learner's own line and one summary line, none of labkit's frames; no process is left behind. Cost: about 10 s
(four launches of 2 processes, each stopped after 1-2 s)."""

from __future__ import annotations

import signal
import time

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from labkit import learner_frames, ranks

pytest.importorskip("mpi4py", reason="make test installs mpi4py and mpich (pyproject.toml)")
pytestmark = pytest.mark.skipif(not ranks.available()[0], reason=ranks.available()[1])

HANG = '''
def hang(comm, *rest):
    buf = np.zeros(3)
    if comm.Get_rank() == 1:
        comm.Recv(buf, source=0)  # no rank sends: waits forever
    return buf
'''

SPIN = '''
def spin(comm, buf):
    while True:
        pass
'''


@pytest.fixture(autouse=True)
def _own_temp_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank jobs of this test only in its temp folder: the Interrupt below waits for *this* job's rank 1, never for
    a job another pytest worker runs at the same time."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("ranks")))


@pytest.fixture()
def shell() -> InteractiveShell:
    sh = InteractiveShell.instance()
    sh.run_cell("from labkit import ranks\nimport numpy as np\nimport labkit.check", store_history=False)
    return sh


def _interrupt_after(seconds: float):  # noqa: ANN202 - what Jupyter's Interrupt does: SIGINT -> KeyboardInterrupt
    def interrupt(signum, frame):  # noqa: ANN001, ANN202
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return old


def _interrupt_when_rank_1_waits(at_most: float = 20.0):  # noqa: ANN202
    """Interrupt once rank 1 of the newest run says it is in comm.Recv (its status file), or after ``at_most`` s: a
    loaded machine starts the processes slowly, and the summary should name where they were."""
    import tempfile
    from pathlib import Path

    t0 = time.perf_counter()

    def waiting() -> bool:
        runs = sorted(Path(tempfile.gettempdir()).glob("labkit-ranks-*"), key=lambda p: p.stat().st_mtime)
        try:
            return bool(runs) and b"comm.Recv" in (runs[-1] / "status.1").read_bytes()
        except OSError:
            return False

    def interrupt(signum, frame):  # noqa: ANN001, ANN202
        if waiting() or time.perf_counter() - t0 > at_most:
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)
    return old


def _stop_alarm(old) -> None:  # noqa: ANN001
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


def _shown(shell: InteractiveShell, cell: str) -> list[str]:
    """What IPython prints for ``cell`` (stdout and stderr), its lines without colour codes or blank lines."""
    import re

    with capture_output() as cap:
        shell.run_cell(cell, store_history=False)
    text = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout + cap.stderr)
    return [ln for ln in text.splitlines() if ln.strip()]


def _no_labkit_frames(lines: list[str]) -> None:
    text = "\n".join(lines)
    for inside in ("dist/ranks.py", "lab08_ranks.py", "core.py", "learner_frames.py", "interactiveshell.py", "site-packages"):
        assert inside not in text, text


def test_an_interrupted_call_ends_at_the_learners_line_with_one_summary(shell: InteractiveShell) -> None:
    shell.run_cell(HANG, store_history=False)
    old = _interrupt_when_rank_1_waits()
    try:
        lines = _shown(shell, "x = 1\nrun = ranks.call(hang, 2, limit_s=30.0)\n")
    finally:
        _stop_alarm(old)
    assert lines[-1].startswith("KeyboardInterrupt: stopped by Interrupt after "), lines
    assert "rank 1 was in comm.Recv(" in lines[-1] and lines[-1].endswith("the 2 ranks were killed, none left running")
    assert any("run = ranks.call(hang, 2, limit_s=30.0)" in ln for ln in lines), lines  # the learner's own line
    _no_labkit_frames(lines)
    assert ranks.leftovers() == []


def test_the_summary_says_so_when_a_process_is_still_running() -> None:
    """The words are measured, not fixed: a process the kill missed is named (here: one that was never a rank)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        import psutil

        words = ranks._interrupt_summary(2, 1.234, ["case 1|comm.Recv(source=0)", "|running"],
                                         ranks._left_running(proc, [psutil.Process(proc.pid)]))
    finally:
        proc.kill()
        proc.wait()
    assert words.startswith("stopped by Interrupt after 1.2 s: rank 0 was in comm.Recv(source=0); ")
    assert f"1 process(es) still run (PID {proc.pid})" in words and "none left" not in words


def test_a_hung_call_shows_the_learners_line_and_the_hang(shell: InteractiveShell) -> None:
    from labkit.errors import install_notebook_handler

    shell.run_cell(HANG, store_history=False)
    assert install_notebook_handler()  # as labkit.setup() does in a notebook: LabkitError without labkit's frames
    try:
        lines = _shown(shell, "run = ranks.call(hang, 2, limit_s=1.0)\n")
    finally:
        shell.set_custom_exc((), None)
    assert any("run = ranks.call(hang, 2, limit_s=1.0)" in ln for ln in lines), lines
    assert lines[-2].startswith("RankError: your function: rank 1 is stuck in comm.Recv(") and "What to do:" in lines[-1]
    assert "Stopped after 1 s: the 2 ranks were killed, none left running." in lines[-2]
    _no_labkit_frames(lines)
    assert ranks.leftovers() == []


def test_an_interrupted_check_ends_at_the_learners_line(shell: InteractiveShell) -> None:
    """Lab 08's check runs the ring on MPI processes: an Interrupt there shows the cell's line and the summary."""
    shell.run_cell(HANG, store_history=False)
    old = _interrupt_when_rank_1_waits()  # the check's preflight, then the ranks start and hang
    try:
        lines = _shown(shell, "labkit.check.mpi_ring(hang)\n")
    finally:
        _stop_alarm(old)
    assert lines[-1].startswith("KeyboardInterrupt: stopped by Interrupt after "), lines
    assert "rank 1 was in comm.Recv(" in lines[-1] and lines[-1].endswith("none left running")
    assert any("labkit.check.mpi_ring(hang)" in ln for ln in lines), lines
    _no_labkit_frames(lines)
    assert ranks.leftovers() == []


def test_an_interrupt_in_the_checks_one_rank_preflight_ends_in_the_learners_loop(shell: InteractiveShell) -> None:
    shell.run_cell(SPIN, store_history=False)
    old = _interrupt_after(0.5)
    try:
        lines = _shown(shell, "labkit.check.mpi_ring(spin)\n")
    finally:
        _stop_alarm(old)
    assert lines[-1] == ("KeyboardInterrupt: stopped by Interrupt in your function, run once on one rank in this "
                         "process before any MPI process started (none was started)"), lines
    assert any("while True:" in ln or "pass" in ln for ln in lines[:-1]), lines  # the learner's loop
    _no_labkit_frames(lines)


def test_the_simulator_and_ranks_share_one_mechanism() -> None:
    from labkit.sim import limits, tracebacks

    assert tracebacks.hide_engine is learner_frames.hide_library_frames
    assert limits.is_learner_frame is learner_frames.is_learner_frame
    assert ranks.hide_library_frames is learner_frames.hide_library_frames
