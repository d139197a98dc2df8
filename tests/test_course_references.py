"""Instructor material names only what exists: every exercise id, notebook and notebook section that a file under
course/ names is in the registry, the manifest or that lab's notebook. Cost: well under a second."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import labkit.check._labs  # noqa: F401  (registers every exercise)
from labkit import course
from labkit.check import core

ROOT = Path(__file__).resolve().parents[1]
COURSE_FILES = sorted((ROOT / "course").rglob("*.md"))
EXERCISE_ID = re.compile(r"(?<![\w.])(0\d\.[a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])")
NOTEBOOK = re.compile(r"(?<![\w-])(\d\d-[a-z][a-z0-9-]*)\.ipynb")
PART = re.compile(r"Lab (\d\d) \(part: sections? ([^)]*)\)")
HEADING = re.compile(r"^# #+ (?:\d+\.\s*)?(.+?)\s*$", re.M)


def _norm(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).strip()


def _headings(lab_id: str) -> list[str]:
    lab = next(lab for lab in course.labs() if lab.id == lab_id)
    source = (ROOT / "notebooks" / "src" / f"{lab.notebook}.py").read_text(encoding="utf-8")
    return [_norm(h) for h in HEADING.findall(source)]


@pytest.mark.parametrize("path", COURSE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_exercise_ids_named_in_course_exist(path: Path) -> None:
    named = set(EXERCISE_ID.findall(path.read_text(encoding="utf-8")))
    missing = sorted(n for n in named if n not in core._REGISTRY)
    assert not missing, f"{path.name} names exercises that do not exist: {missing}"


@pytest.mark.parametrize("path", COURSE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebooks_named_in_course_exist(path: Path) -> None:
    known = {lab.notebook for lab in course.labs()}
    missing = sorted(set(NOTEBOOK.findall(path.read_text(encoding="utf-8"))) - known)
    assert not missing, f"{path.name} names notebooks that do not exist: {missing}"


@pytest.mark.parametrize("path", COURSE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_sections_named_in_course_exist(path: Path) -> None:
    """``Lab 03 (part: sections Coalescing; Shared memory: a transpose)``: each section is the start of one of that
    notebook's headings (numbers and punctuation ignored)."""
    missing = []
    for lab_id, sections in PART.findall(path.read_text(encoding="utf-8")):
        headings = _headings(lab_id)
        for section in sections.split(";"):
            if not any(h.startswith(_norm(section)) for h in headings):
                missing.append(f"Lab {lab_id}: {section.strip()!r}")
    assert not missing, f"{path.name} names sections that are not headings of the notebook: {missing}"


def test_the_patterns_find_what_they_should() -> None:
    text = "see 03.transpose and labkit.check.hint('02.saxpy'); CUDA 12.9; notebooks/00-start-here.ipynb"
    assert EXERCISE_ID.findall(text) == ["03.transpose", "02.saxpy"]
    assert NOTEBOOK.findall(text) == ["00-start-here"]
    assert PART.findall("| Lab 01 (part: sections Anatomy of a GPU; Wiring) — x |") == [("01", "Anatomy of a GPU; Wiring")]
    assert "anatomy of a gpu" in _headings("01")
