"""The course's structure: manifest ↔ notebooks ↔ syllabi ↔ README, lockstep of learner and solution
notebooks, no stored outputs in learner notebooks, first and last cells, links that resolve, and the
conda environment in agreement with pyproject.toml."""

from __future__ import annotations

import re
import subprocess
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


def _build_notebooks():  # noqa: ANN202
    sys.path.insert(0, str(ROOT / "tools"))
    import build_notebooks

    return build_notebooks


@pytest.mark.parametrize("lab", READY, ids=lambda lab: lab.id)
def test_first_code_cell_is_the_bootstrap(lab: course.Lab) -> None:
    """Every lab, learner and solution, starts its code with the one bootstrap cell, written for the repository that
    pyproject.toml names: a lone notebook gets labkit (or says what to do), the course's own copy only imports."""
    bn = _build_notebooks()
    want = bn.bootstrap_source(*bn.course_repository())
    src = (NOTEBOOKS / "src" / f"{lab.notebook}.py").read_text()
    assert f'# %% tags=["bootstrap"]\n{bn.BOOTSTRAP_SOURCE}\n' in src, "the source's first code cell is tagged bootstrap"
    for path in (NOTEBOOKS / lab.filename, NOTEBOOKS / "solutions" / lab.filename):
        code = [c for c in _read(path).cells if c.cell_type == "code"]
        assert code[0].source == want and "bootstrap" in _tags(code[0]), path.name
        assert sum(c.source == want for c in code) == 1


FAKE_PIP = """#!/bin/sh
# a fake `python -m pip install ...`: logs its arguments, then installs a tiny labkit (or fails, with FAKE_PIP_FAIL)
echo "$@" >> "$FAKE_LOG"
if [ -n "$FAKE_PIP_FAIL" ]; then echo "ERROR: Could not find a version that satisfies the requirement" >&2; exit 1; fi
mkdir -p "$FAKE_SITE/labkit"
printf 'def setup():\\n    print("labkit.setup() ran")\\n    return "env"\\n' > "$FAKE_SITE/labkit/__init__.py"
"""
HARNESS = "import sys; sys.executable = {pip!r}; exec(compile(open({cell!r}).read(), 'cell', 'exec'), {{}})"


def _run_bootstrap(tmp_path: Path, cell: str, smi: str | None = None, fail: bool = False,
                   labkit_there: bool = False) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run a bootstrap cell as a lone notebook would, in a Python with no site-packages (so no labkit), with a fake
    pip (``sys.executable -m pip`` is the cell's only way to install) and, when ``smi`` is given, a fake nvidia-smi
    printing it. Returns the run and the pip command lines it made."""
    bin_dir, site = tmp_path / "bin", tmp_path / "site"
    bin_dir.mkdir(parents=True)
    site.mkdir()
    pip = bin_dir / "python"
    pip.write_text(FAKE_PIP)
    pip.chmod(0o755)
    if smi is not None:
        (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho '{smi}'\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
    if labkit_there:
        (site / "labkit").mkdir()
        (site / "labkit" / "__init__.py").write_text('def setup():\n    print("labkit.setup() ran")\n')
    (tmp_path / "cell.py").write_text(cell)
    log = tmp_path / "pip.log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(site), "FAKE_LOG": str(log), "FAKE_SITE": str(site),
           **({"FAKE_PIP_FAIL": "1"} if fail else {})}
    run = subprocess.run([sys.executable, "-S", "-c", HARNESS.format(pip=str(pip), cell=str(tmp_path / "cell.py"))],
                         capture_output=True, text=True, env=env, timeout=60)
    return run, log.read_text().splitlines() if log.exists() else []


URL = "https://github.com/someone/dgx-course"


@pytest.mark.parametrize(("smi", "extra"), [(None, ""), ("| NVIDIA-SMI 570.86   Driver Version: 570.86   CUDA Version: 12.8 |",
                                               "[cuda12]"),
                                              ("| NVIDIA-SMI 580.65   Driver Version: 580.65   CUDA Version: 13.0 |",
                                               "[cuda13]")], ids=["cpu", "cuda12", "cuda13"])
def test_bootstrap_installs_the_course_labkit_where_it_is_missing(tmp_path: Path, smi: str | None, extra: str) -> None:
    """A lone notebook (Colab, Binder, a download): the cell pip-installs labkit from the repository at the course's
    tag, with CuPy for the driver's CUDA major where nvidia-smi sees a GPU, says so in one line, and labkit.setup()
    (which chooses the mode) runs."""
    bn = _build_notebooks()
    run, pip_calls = _run_bootstrap(tmp_path, bn.bootstrap_source(URL, "v9.9.9"), smi=smi)
    assert run.returncode == 0, run.stderr
    want = f"labkit{extra} @ git+{URL}@v9.9.9"
    assert pip_calls == [f"-m pip install -q {want}"]
    lines = run.stdout.splitlines()
    assert lines[0] == f"labkit is missing: installing {want}" + (" (a GPU is here: with CuPy)" if extra else "") + " ... done"
    assert lines[1:] == ["labkit.setup() ran"] and not run.stderr


def test_bootstrap_failure_and_no_repository_say_what_to_do(tmp_path: Path) -> None:
    bn = _build_notebooks()
    run, _ = _run_bootstrap(tmp_path / "a", bn.bootstrap_source(URL, "v9.9.9"), fail=True)
    assert run.returncode != 0 and "ModuleNotFoundError: failed:" in run.stderr
    assert "Could not find a version" in run.stderr  # pip's own reason
    assert f"Get the course instead: git clone {URL} && cd dgx-course && make lab" in run.stderr
    run, pip_calls = _run_bootstrap(tmp_path / "b", bn.bootstrap_source("", "v9.9.9"))
    assert run.returncode != 0 and not pip_calls
    assert run.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: labkit is not installed: this notebook is a lab of a course; get the course and run "
        "`make lab` in its folder (its README says how)")


@pytest.mark.parametrize("url", [URL, ""], ids=["repository", "none"])
def test_bootstrap_only_imports_inside_the_course(tmp_path: Path, url: str) -> None:
    bn = _build_notebooks()
    run, pip_calls = _run_bootstrap(tmp_path, bn.bootstrap_source(url, "v1"), smi="CUDA Version: 12.8", labkit_there=True)
    assert run.returncode == 0 and not pip_calls and run.stdout == "labkit.setup() ran\n", run.stdout + run.stderr


@pytest.mark.slow
def test_bootstrap_install_command_resolves_with_the_real_pip(tmp_path: Path) -> None:
    """The requirement the cell hands to pip, with this repository as a ``git+file://`` URL at its HEAD commit for the
    ref: real pip clones it, builds labkit's metadata (in an isolated build, as in Colab) and resolves it to the
    course's version with the extra asked for (``--dry-run --no-deps``: the dependencies are what ``make lab`` installs;
    about 10 s)."""
    import json
    import re
    import tomllib

    bn = _build_notebooks()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    cell = bn.bootstrap_source(f"file://{ROOT}", head)
    spec = re.search(r'want = f"(labkit\{extra\} @ [^"]+)"', cell).group(1).replace("{extra}", "[cuda12]")
    assert spec == f"labkit[cuda12] @ git+file://{ROOT}@{head}"
    report = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "-q",
                          "--report", str(report), spec], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    (got,) = json.loads(report.read_text())["install"]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (got["metadata"]["name"], got["metadata"]["version"], got["requested_extras"]) == ("labkit", version, ["cuda12"])
    assert got["download_info"]["vcs_info"]["commit_id"] == head


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


def test_binder_builds_the_labs_environment_and_installs_labkit() -> None:
    """Binder's repo2docker reads .binder/ (and then ignores the root's files): its environment.yml holds exactly
    pyproject.toml's dependencies on the root's Python, and postBuild installs labkit from the clone, so a lab opened
    on Binder only imports it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / ".binder" / "environment.yml").read_text())
    root = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == project["dependencies"]
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert python == [d for d in root["dependencies"] if isinstance(d, str) and d.startswith("python")]
    post = ROOT / ".binder" / "postBuild"
    assert post.stat().st_mode & 0o111, "repo2docker runs postBuild only when it is executable"
    commands = [ln for ln in post.read_text().splitlines() if ln and not ln.startswith("#")]
    assert commands == ["set -euo pipefail", "pip install --no-deps --no-cache-dir -e ."]


def test_ci_runs_the_readme_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()
