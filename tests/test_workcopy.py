"""Work copies (labkit.workcopy) and `labkit lab`'s own flags: the learner's notebooks live outside the repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit import cli, workcopy
from labkit.errors import LabkitError

ROOT = Path(__file__).resolve().parents[1]


def _x(path: Path) -> str:
    """The marker a test notebook carries."""
    return json.loads(path.read_text())["x"]


def _course(tmp_path: Path, labs: tuple[str, ...] = ("00-start-here", "03-memory-hierarchy")) -> Path:
    nbs = tmp_path / "course" / "notebooks"
    (nbs / "solutions").mkdir(parents=True)
    for name in labs:
        (nbs / f"{name}.ipynb").write_text(json.dumps({"metadata": {}, "x": f"learner {name}"}))
        (nbs / "solutions" / f"{name}.ipynb").write_text(json.dumps({"metadata": {}, "x": f"solution {name}"}))
    return nbs


def test_work_dir_from_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LABKIT_WORK_DIR", str(tmp_path / "mine"))
    assert workcopy.work_dir() == tmp_path / "mine"
    monkeypatch.delenv("LABKIT_WORK_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert workcopy.work_dir() == tmp_path / "data" / "labkit" / "work"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert workcopy.work_dir() == tmp_path / "labkit-work"


def test_first_start_copies_everything_and_later_starts_keep_the_learners_work(tmp_path) -> None:
    nbs, work = _course(tmp_path), tmp_path / "work"
    report = workcopy.sync(nbs, work)
    assert sorted(report.copied) == ["00-start-here.ipynb", "03-memory-hierarchy.ipynb",
                                     "solutions/00-start-here.ipynb", "solutions/03-memory-hierarchy.ipynb"]
    assert _x(work / "solutions" / "03-memory-hierarchy.ipynb") == "solution 03-memory-hierarchy"
    (work / "03-memory-hierarchy.ipynb").write_text('{"x": "my answers"}')
    again = workcopy.sync(nbs, work)
    assert again.copied == [] and again.updated == []
    assert (work / "03-memory-hierarchy.ipynb").read_text() == '{"x": "my answers"}'


def test_classroom_work_folders_get_no_solved_notebooks(tmp_path) -> None:
    """Review 4, R4-2: every learner's home held the solved notebooks. The classroom's server start
    (deploy/singleuser.sh) copies the learner notebooks only; self-paced `labkit lab` keeps both (above)."""
    nbs, work = _course(tmp_path), tmp_path / "work"
    report = workcopy.sync(nbs, work, solutions=False)
    assert sorted(report.copied) == ["00-start-here.ipynb", "03-memory-hierarchy.ipynb"]
    assert not (work / "solutions").exists()
    script = (ROOT / "deploy" / "singleuser.sh").read_text()
    assert "solutions=False" in script and "workcopy.sync(" in script


def test_an_update_adds_new_labs_and_reports_changed_ones_without_overwriting(tmp_path) -> None:
    nbs, work = _course(tmp_path), tmp_path / "work"
    workcopy.sync(nbs, work)
    (work / "03-memory-hierarchy.ipynb").write_text('{"x": "my answers"}')
    (nbs / "03-memory-hierarchy.ipynb").write_text('{"x": "03, corrected"}')  # `git pull` brings a new version
    (nbs / "05-cupy.ipynb").write_text("{}")  # and a new lab
    report = workcopy.sync(nbs, work)
    assert report.copied == ["05-cupy.ipynb"] and report.updated == ["03-memory-hierarchy.ipynb"]
    assert (work / "03-memory-hierarchy.ipynb").read_text() == '{"x": "my answers"}'
    assert "labkit lab --reset 03" in "\n".join(report.lines())


def test_reset_gives_a_fresh_copy_and_keeps_the_old_one_aside(tmp_path) -> None:
    nbs, work = _course(tmp_path), tmp_path / "work"
    workcopy.sync(nbs, work)
    (work / "03-memory-hierarchy.ipynb").write_text('{"x": "my answers"}')
    (nbs / "03-memory-hierarchy.ipynb").write_text('{"x": "03, corrected"}')
    lines = workcopy.reset(nbs, "3", work)
    assert _x(work / "03-memory-hierarchy.ipynb") == "03, corrected"
    kept = list((work / "old").glob("03-memory-hierarchy.*.ipynb"))
    assert len(kept) == 1 and kept[0].read_text() == '{"x": "my answers"}'
    assert not list((work / "old" / "solutions").glob("03-memory-hierarchy.*.ipynb"))  # untouched: just replaced
    assert any("moved to" in line for line in lines)
    assert workcopy.sync(nbs, work).updated == []  # the manifest now records the new version
    manifest = json.loads((work / workcopy.MANIFEST).read_text())
    assert set(manifest) >= {"03-memory-hierarchy.ipynb", "solutions/03-memory-hierarchy.ipynb"}


def test_reset_replaces_an_untouched_copy_without_moving_it_to_old(tmp_path) -> None:
    """A copy still as labkit made it (even with its metadata rewritten, as JupyterLab does on opening) is replaced,
    not kept in old/; the changed one beside it is kept; a copy from before labkit recorded copies is kept too."""
    nbs, work = _course(tmp_path), tmp_path / "work"
    workcopy.sync(nbs, work)
    opened = json.loads((work / "03-memory-hierarchy.ipynb").read_text())
    opened["metadata"]["language_info"] = {"name": "python", "version": "3.99"}  # only opened in JupyterLab
    (work / "03-memory-hierarchy.ipynb").write_text(json.dumps(opened))
    (work / "solutions" / "03-memory-hierarchy.ipynb").write_text('{"x": "my notes"}')
    (nbs / "03-memory-hierarchy.ipynb").write_text('{"metadata": {}, "x": "03, corrected"}')
    lines = workcopy.reset(nbs, "03", work)
    assert _x(work / "03-memory-hierarchy.ipynb") == "03, corrected"
    assert not list((work / "old").glob("03-memory-hierarchy.*.ipynb"))
    kept = list((work / "old" / "solutions").glob("03-memory-hierarchy.*.ipynb"))
    assert len(kept) == 1 and kept[0].read_text() == '{"x": "my notes"}'
    assert any("03-memory-hierarchy.ipynb was untouched" in line for line in lines)
    assert any("solutions/03-memory-hierarchy.ipynb moved to" in line for line in lines)
    # the fresh copies are untouched in turn: a second reset keeps nothing
    assert not any("moved to" in line for line in workcopy.reset(nbs, "03", work))
    assert len(list((work / "old").rglob("*.ipynb"))) == 1
    # a copy labkit has no record of (made before it kept them) counts as the learner's
    manifest = json.loads((work / workcopy.MANIFEST).read_text())
    del manifest["copy:00-start-here.ipynb"]
    (work / workcopy.MANIFEST).write_text(json.dumps(manifest))
    assert any("00-start-here.ipynb moved to" in line for line in workcopy.reset(nbs, "00", work))


def test_untouched_means_cells_and_outputs_unchanged(tmp_path) -> None:
    """Running a cell (new outputs) or editing one makes a copy the learner's; cell metadata and ids do not."""
    nb = {"metadata": {}, "nbformat": 4, "cells": [
        {"cell_type": "code", "id": "a1", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": None}]}
    p = tmp_path / "n.ipynb"
    p.write_text(json.dumps(nb))
    before = workcopy._content_digest(p)
    nb["cells"][0].update(id="b2", metadata={"collapsed": True})
    p.write_text(json.dumps(nb, indent=1))
    assert workcopy._content_digest(p) == before
    nb["cells"][0].update(execution_count=1, outputs=[{"output_type": "stream", "name": "stdout", "text": "1"}])
    p.write_text(json.dumps(nb))
    assert workcopy._content_digest(p) != before
    p.write_text("not json")
    assert workcopy._content_digest(p) != before


def test_reset_of_an_unknown_lab_and_a_work_folder_inside_the_course_are_clear_errors(tmp_path) -> None:
    nbs = _course(tmp_path)
    with pytest.raises(LabkitError, match="there is no lab"):
        workcopy.reset(nbs, "42", tmp_path / "work")
    with pytest.raises(LabkitError, match="inside the course"):
        workcopy.sync(nbs, nbs / "work")


def test_the_real_course_copies_in_with_working_links(tmp_path) -> None:
    """Links between notebooks are relative: the copy keeps notebooks/'s layout, so they resolve there too."""
    work = tmp_path / "work"
    report = workcopy.sync(ROOT / "notebooks", work)
    assert len(report.copied) == len(workcopy.course_notebooks(ROOT / "notebooks")) >= 20
    copy = json.loads((work / "solutions" / "03-memory-hierarchy.ipynb").read_text())
    assert copy["metadata"] == {**json.loads((ROOT / "notebooks" / "solutions" / "03-memory-hierarchy.ipynb").read_text())["metadata"],
                                **workcopy.kernel_metadata()}
    assert {p.name for p in work.glob("*.ipynb")} == {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_copies_carry_this_machines_kernel_so_jupyterlab_does_not_mark_them_changed(tmp_path) -> None:
    """JupyterLab writes the kernel's language_info (Python version included) into a notebook it opens; a copy
    that already has it opens clean (tests/test_browser.py checks the dot in a real browser)."""
    import platform

    meta = workcopy.kernel_metadata()
    assert meta["language_info"]["version"] == platform.python_version()
    assert meta["kernelspec"]["name"] == "python3"
    nbs, work = _course(tmp_path), tmp_path / "work"
    workcopy.sync(nbs, work)
    assert json.loads((work / "00-start-here.ipynb").read_text())["metadata"] == meta


def test_lab_help_is_labkits_own(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LABKIT_WORK_DIR", str(tmp_path / "w"))
    assert cli.main(["lab", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: labkit lab") and "--reset NN" in out and str(tmp_path / "w") in out
    assert not (tmp_path / "w").exists()  # asking for help copies nothing


def test_lab_reset_from_the_command_line(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LABKIT_WORK_DIR", str(tmp_path / "w"))
    assert cli.main(["lab", "--reset", "02"]) == 0
    assert (tmp_path / "w" / "02-first-kernels.ipynb").exists()
    assert "fresh copy" in capsys.readouterr().out
    assert cli.main(["lab", "--reset", "77"]) == 2
    assert "there is no lab" in capsys.readouterr().err
