"""The course's structure: manifest ↔ notebooks ↔ syllabi ↔ README, lockstep of learner and solution
notebooks, no stored outputs in learner notebooks, first and last cells, links that resolve, and the
conda environment in agreement with pyproject.toml."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

from labkit import course

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
READY = [lab for lab in course.labs() if lab.ready]
MIN_EXERCISES = {"00": 1, "01": 6, "02": 4, "03": 4, "04": 4, "05": 5, "06": 5, "07": 4, "08": 4, "09": 4, "10": 0}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return cell.metadata.get("tags", [])


def test_manifest_and_notebooks_agree() -> None:
    on_disk = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    assert on_disk == {lab.notebook for lab in READY}
    for lab in READY:
        assert (NOTEBOOKS / "solutions" / lab.filename).exists(), lab.id
        assert (NOTEBOOKS / "src" / f"{lab.notebook}.py").exists(), lab.id
        assert lab.minutes == lab.teaching + lab.exercises, lab.id
    for lab in course.labs():
        assert all(p in {x.id for x in course.labs()} for p in lab.prerequisites)


def test_notebooks_are_built_from_their_sources() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import build_notebooks

    assert build_notebooks.main(["--check"]) == 0


@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.id)
def test_learner_and_solution_in_lockstep(lab: course.Lab) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import build_notebooks

    learner, solution = _read(NOTEBOOKS / lab.filename), _read(NOTEBOOKS / "solutions" / lab.filename)
    assert len(learner.cells) == len(solution.cells)
    exercises = 0
    for i, (a, b) in enumerate(zip(learner.cells, solution.cells)):
        assert a.cell_type == b.cell_type, f"cell {i}"
        assert ("exercise" in _tags(a)) == ("exercise" in _tags(b)), f"cell {i}"
        if "exercise" in _tags(a):
            exercises += 1
            assert a.source != b.source, f"cell {i}: the exercise's skeleton equals its solution"
        elif a.cell_type == "markdown":  # the solution's title, banner and links to the learner labs (the build's)
            assert build_notebooks.solution_markdown(a.source, i, lab.notebook) == b.source, f"cell {i} differs"
        else:
            assert a.source == b.source, f"cell {i} differs outside an exercise cell"
    assert exercises >= MIN_EXERCISES[lab.id]
    checks = sum("labkit.check." in c.source for c in learner.cells if c.cell_type == "code")
    assert checks >= MIN_EXERCISES[lab.id], "each exercise needs a check cell"


@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.id)
def test_learner_notebooks_have_no_outputs(lab: course.Lab) -> None:
    for cell in _read(NOTEBOOKS / lab.filename).cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None


@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.id)
def test_solution_notebooks_store_no_errors_or_warnings(lab: course.Lab) -> None:
    """What a solution notebook stores is what nbval then expects: an error or a warning on stderr stored there would
    be demanded of every later run (a RuntimeWarning once was)."""
    for k, cell in enumerate(_read(NOTEBOOKS / "solutions" / lab.filename).cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            assert out.output_type != "error" and not (out.output_type == "stream" and out.name == "stderr"), (k, out)


@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.id)
def test_first_second_and_last_cells(lab: course.Lab) -> None:
    cells = _read(NOTEBOOKS / lab.filename).cells
    first = cells[0]
    assert first.cell_type == "markdown"
    assert first.source.startswith(f"# Lab {lab.id} — {lab.title}")
    assert "**Learning objectives**" in first.source and "**Prerequisites:**" in first.source
    assert f"**Time:** {lab.minutes} minutes (teaching {lab.teaching}, exercises {lab.exercises})" in first.source
    assert "import labkit" in cells[1].source and "labkit.setup()" in cells[1].source
    last = cells[-1]
    assert last.cell_type == "markdown" and LINK.search(last.source), "the last cell links onward"


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "course").rglob("*.md")), *sorted((ROOT / "docs").glob("*.md"))]


def _links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks and inline code hold no links
    text = re.sub(r"`[^`]*`", "", text)
    return [m for m in LINK.findall(text) if not m.startswith(("http://", "https://", "mailto:", "#"))]


def test_relative_links_resolve() -> None:
    broken = []
    for path in _markdown_files():
        for target in _links(path.read_text()):
            if not (path.parent / target.split("#")[0]).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    for nb_path in sorted(NOTEBOOKS.rglob("*.ipynb")):
        for cell in _read(nb_path).cells:
            if cell.cell_type == "markdown":
                for target in _links(cell.source):
                    if not (nb_path.parent / target.split("#")[0]).exists():
                        broken.append(f"{nb_path.relative_to(ROOT)} -> {target}")
    assert not broken, "\n".join(broken)


SYLLABI = {"syllabus-2h.md": 120, "syllabus-4h.md": 240, "syllabus-1day.md": 480, "syllabus-2day.md": 960}


@pytest.mark.parametrize("name", SYLLABI)
def test_syllabi_name_real_labs(name: str) -> None:
    text = (ROOT / "course" / name).read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("Labs: ")]
    assert len(lines) == 1, "one machine-readable `Labs:` line"
    ids = [x.strip() for x in lines[0][len("Labs: "):].split(",")]
    known = {lab.id: lab for lab in course.labs()}
    assert ids and all(i in known for i in ids)
    for i in ids:
        if not known[i].ready:
            assert f"Lab {i}" in text and "planned" in text, f"planned lab {i} must be marked as planned"
    for lab in known.values():  # a whole lab in a schedule row carries the manifest's minutes
        for row in re.findall(rf"^\|[^|]*\|\s*(\d+)\s*\|\s*Lab {lab.id} — ", text, flags=re.M):
            assert int(row) == lab.minutes, f"{name}: Lab {lab.id} scheduled for {row} min, manifest says {lab.minutes}"


def test_readme_lab_map_matches_manifest() -> None:
    text = (ROOT / "README.md").read_text()
    for lab in course.labs():
        row = next((ln for ln in text.splitlines() if ln.startswith(f"| {lab.id} |")), None)
        assert row is not None, f"README lab map lacks lab {lab.id}"
        assert f"{lab.minutes} min" in row
        assert ("planned" in row) != lab.ready
    assert "make test" in text and "make lab" in text


def test_environment_yml_matches_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip) == wanted


def test_ci_runs_the_readme_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()
