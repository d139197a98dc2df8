"""Grading in a sandbox (review 4, R4-2): the red team's submission, replayed.

R4-2: ``otter run`` ran a submission in the grader's account; one added cell wrote into the grader's home, copied a
stand-in ``~/.ssh`` key, and replaced ``labkit.check.run`` so lab 00 graded itself 1/1 (the learner notebook: 0/1).
Here the same submission goes through :func:`labkit.classroom.grading.grade` (as root: a throwaway user, no network,
the homes and /tmp emptied): it must leave nothing in the grader's home, copy no key, reach no listening socket, and
score 0 of 1; the solution's exercise cell in the same notebook scores 1 of 1 (the sandbox grades at all). Both
grades run side by side (about 25-60 s on 2 shared cores); without root or util-linux's ``unshare`` the replay is
skipped and only the notebook and flag checks run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from labkit.classroom import grading

ROOT = Path(__file__).resolve().parents[1]
HANDOUT = ROOT / "notebooks" / "00-start-here.ipynb"
SOLUTION = ROOT / "notebooks" / "solutions" / "00-start-here.ipynb"

#: R4-2's cell, added at the top of the learner's notebook: it makes every check pass.
FORGE = """
import labkit.check
class _Pass:
    def __bool__(self): return True
    def report(self): return "passed"
labkit.check.run = lambda *a, **k: _Pass()
"""
#: R4-2's escape, inside the exercise cell itself (which is graded, so it runs): write into the grader's home, copy
#: its key out, phone home.
ESCAPE = """
import os, shutil, socket, pathlib
home = pathlib.Path("GRADER_HOME")
report = []
for what, attempt in (
        ("write", lambda: (home / "GRADER-WAS-HERE.txt").write_text("learner code ran as uid %d" % os.getuid())),
        ("key", lambda: shutil.copy(home / ".ssh" / "id_ed25519", "stolen-key")),
        ("network", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2).sendall(b"hello"))):
    try:
        attempt()
        report.append(what + " WORKED")
    except Exception as e:
        report.append(what + " refused " + type(e).__name__)
report.append("uid %d" % os.getuid())
pathlib.Path(os.path.expanduser("~/escape-report.txt")).write_text("\\n".join(report))
"""


def _notebook(tmp_path: Path, name: str, *, forge: str | None = None, solved: bool = False, escape: str = "") -> Path:
    import nbformat

    nb = nbformat.read(str(HANDOUT), as_version=4)
    sol = {c.get("id"): c for c in nbformat.read(str(SOLUTION), as_version=4).cells}
    for cell in nb.cells:
        if "exercise" in cell.metadata.get("tags", []):
            cell.source = escape + (sol[cell.get("id")].source if solved else cell.source)
    if forge is not None:
        nb.cells.insert(0, nbformat.v4.new_code_cell(forge))
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_the_graded_notebook_is_the_handout_with_the_learners_exercise_cells(tmp_path: Path) -> None:
    forged = _notebook(tmp_path, "forged", forge=FORGE, solved=True)
    nb, dropped = grading.grading_notebook(HANDOUT, forged)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    assert dropped == 1 and not any("labkit.check.run =" in s for s in sources)  # the added cell is not run
    assert any("cuda.grid" in s or "blockIdx" in s for s in sources)  # the learner's (solved) exercise cell is
    assert grading.flags(nb) == []
    # the sibling: the same patch inside the exercise cell itself is run, and flagged for the instructor to read
    import nbformat

    inside = nbformat.read(str(forged), as_version=4)
    for cell in inside.cells:
        if "exercise" in cell.metadata.get("tags", []):
            cell.source = "import labkit.check\nlabkit.check.run = lambda *a, **k: True\n" + cell.source
    nbformat.write(inside, str(tmp_path / "inside.ipynb"))
    nb, _ = grading.grading_notebook(HANDOUT, tmp_path / "inside.ipynb")
    (flag,) = grading.flags(nb)
    assert "00-009" in flag and "labkit" in flag


def _can_sandbox() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the sandbox needs root"
    if any(shutil.which(t) is None for t in ("unshare", "setpriv", "ip")):
        return "util-linux's unshare and setpriv, or iproute2's ip, are missing"
    if subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True).returncode != 0:
        return "this machine refuses new namespaces"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_can_sandbox() is not None, reason=str(_can_sandbox()))
def test_r4_2_submission_neither_escapes_nor_grades_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("otter")
    from labkit.classroom import export

    grader_home = tmp_path / "grader"
    (grader_home / ".ssh").mkdir(parents=True)
    (grader_home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY----- stand-in")
    os.chmod(grader_home / ".ssh" / "id_ed25519", 0o600)
    monkeypatch.setenv("HOME", str(grader_home))
    monkeypatch.setenv("LABKIT_MODE", "sim")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.5)
    heard: list[bytes] = []
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            heard.append(conn.recv(100))
            conn.close()

    threading.Thread(target=listen, daemon=True).start()
    done = export.export_otter("00", ROOT, tmp_path / "otter")
    escape = ESCAPE.replace("GRADER_HOME", str(grader_home)).replace("PORT", str(listener.getsockname()[1]))
    forged = _notebook(tmp_path, "mallory", forge=FORGE, escape=escape)
    solved = _notebook(tmp_path, "alice", solved=True)
    results: dict[str, grading.GradeResult] = {}

    def run(name: str, nb: Path) -> None:
        results[name] = grading.grade(done.autograder, nb, done.notebook, tmp_path / "results" / name, timeout_s=400,
                                      keep=tmp_path / "sandbox" / name)

    threads = [threading.Thread(target=run, args=a) for a in (("mallory", forged), ("alice", solved))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(450)
    stop.set()
    listener.close()
    assert set(results) == {"mallory", "alice"}
    assert results["alice"].score == 1.0, results["alice"].log[-3000:]  # the sandbox grades
    forged_result = results["mallory"]
    assert forged_result.score == 0.0 and forged_result.possible == 1.0, forged_result.log[-3000:]
    assert forged_result.dropped == 1 and any("socket" in f for f in forged_result.flags)
    assert not (grader_home / "GRADER-WAS-HERE.txt").exists()  # nothing written into the grader's home
    assert sorted(p.name for p in grader_home.rglob("*")) == [".ssh", "id_ed25519"]
    assert not list(tmp_path.rglob("stolen-key")) and heard == []  # no key copied out, no connection made
    # the escape did run (in the sandbox), and each attempt was refused there
    report = (tmp_path / "sandbox" / "mallory" / "escape-report.txt").read_text().splitlines()
    assert [line.split()[:2] for line in report[:3]] == [["write", "refused"], ["key", "refused"], ["network", "refused"]], report
    assert report[3] != "uid 0" and report[3] != f"uid {os.getuid()}", report
