"""``labkit export --otter``: every lab's exercises have a check call to grade; the grading function's messages; and
lab 00's autograder end to end with Otter's own ``otter run`` (here on the course's own notebooks; learners' submissions go through the sandbox, tests/test_classroom_grading.py) on the solution notebook (1/1) and the
learner notebook (0/1, the check's "not solved yet" as feedback). The two runs go in parallel. Measured on a shared
2-core machine: one `otter run` of lab 00 took 11.7 s wall and 6.5 s CPU (load average 2.3); this test, both runs
together, 33-40 s wall and about 20 s CPU (load average 3.5-7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from labkit import check, course, export
from labkit.errors import LabkitError

ROOT = Path(__file__).resolve().parents[1]


def test_every_exercise_of_every_lab_has_a_check_call() -> None:
    for lab in course.labs():
        if not lab.ready:
            continue
        calls = export._lab_calls(lab.id, ROOT / "notebooks" / lab.filename)
        assert [c.exercise_id for c in calls] == [row[0] for row in check.exercises(lab.id)], lab.id
        solutions = {c.exercise_id: c.args for c in export.check_calls(ROOT / "notebooks" / "solutions" / lab.filename)}
        assert all(solutions.get(c.exercise_id) == c.args for c in calls), lab.id  # the same call in both versions


def test_check_calls_reads_arguments_as_written(tmp_path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%time x = 1\nlabkit.check.matmul(matmul, tile=MM_TILE);"),
        nbformat.v4.new_code_cell('labkit.check.hint("03.matmul")\nlabkit.check.solved_or_reference("03.matmul", mm)'),
        nbformat.v4.new_code_cell("def broken(:\n  pass"),
    ])
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, str(path))
    calls = export.check_calls(path)
    assert [(c.exercise_id, c.name, c.args) for c in calls] == [("03.matmul", "matmul", "matmul, tile=MM_TILE")]
    with pytest.raises(LabkitError, match="no check call for 00.vector-add"):
        export._lab_calls("00", path)
    with pytest.raises(LabkitError, match="there is no lab"):
        export.export_otter("42", ROOT, tmp_path / "out")


def test_grade_answer_feedback() -> None:
    with pytest.raises(AssertionError, match=r"NOT SOLVED YET\] 00.vector-add: the notebook defines no 'vector_add'"):
        export.grade_answer({}, "00.vector-add", "vector_add")
    with pytest.raises(AssertionError, match=r"NOT SOLVED YET\] 00.vector-add") as info:
        export.grade_answer({"vector_add": ...}, "00.vector-add", "vector_add")
    assert "labkit.check.hint('00.vector-add')" in str(info.value)
    with pytest.raises(AssertionError, match="could not be read"):
        export.grade_answer({"vector_add": 1}, "00.vector-add", "vector_add[")


@pytest.mark.slow
def test_otter_run_grades_lab00_solved_and_unsolved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("otter")
    from labkit import cli

    out = tmp_path / "otter"
    assert cli.main(["export", "--otter", "00", "--out", str(out)]) == 0
    assert "-m labkit.classroom.grading --autograder" in capsys.readouterr().out  # the sandbox, never `otter run` as you
    zipped = set(zipfile.ZipFile(out / "autograder.zip").namelist())
    assert {"tests/00.vector-add.py", "otter_config.json", "run_autograder"} <= zipped
    assert json.loads((out / "otter_config.json").read_text())["points_possible"] == 1

    env = {k: v for k, v in os.environ.items() if k != "LABKIT_EXPECT"}
    env.update(LABKIT_MODE="sim", LABKIT_PROGRESS="off", XDG_DATA_HOME=str(tmp_path / "data"), PYTHONUNBUFFERED="1",
               JUPYTER_DATA_DIR=str(tmp_path / "jupyter"))  # no user kernelspec: the kernel is this environment's python3
    otter = [sys.executable, "-m", "otter", "run", "--no-logo", "-a", str(out / "autograder.zip")]
    runs = {}
    for kind, notebook in (("solved", ROOT / "notebooks/solutions/00-start-here.ipynb"), ("unsolved", ROOT / "notebooks/00-start-here.ipynb")):
        (tmp_path / kind).mkdir()
        runs[kind] = subprocess.Popen([*otter, "-o", str(tmp_path / kind), str(notebook)], cwd=tmp_path, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logs = {kind: p.communicate(timeout=240)[0] for kind, p in runs.items()}
    results = {}
    for kind, p in runs.items():
        assert p.returncode == 0, logs[kind][-3000:]
        results[kind] = json.loads((tmp_path / kind / "results.json").read_text())
    assert results["solved"]["score"] == 1.0, logs["solved"][-3000:]
    assert results["unsolved"]["score"] == 0.0, logs["unsolved"][-3000:]
    feedback = {t["name"]: t for t in results["unsolved"]["tests"]}
    assert feedback["00.vector-add"]["max_score"] == 1
    text = feedback["Public Tests"]["output"]
    assert "[NOT SOLVED YET] 00.vector-add: the kernel ran but wrote nothing" in text and feedback["Public Tests"]["visibility"] == "visible"
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("progress.jsonl"))  # grading recorded no progress
