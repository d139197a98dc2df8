"""Each lab's first cell names, as links, exactly the prerequisites of the manifest (which lab 00's course map shows)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from labkit import course

SRC = Path(__file__).resolve().parents[1] / "notebooks" / "src"


def _prerequisites(lab: course.Lab) -> tuple[set[str], set[str]]:
    """(required, optional) labs linked in the source's **Prerequisites:** paragraph; optional ones "help"."""
    text = (SRC / f"{lab.notebook}.py").read_text()
    para = re.search(r"\*\*Prerequisites:\*\*(.*?)(?:\n#\s*\n|\n# \*\*)", text, flags=re.S)
    assert para, f"{lab.notebook}: no **Prerequisites:** paragraph"
    required, optional = set(), set()
    for part in re.split(r";|\.\s", para.group(1)):
        ids = set(re.findall(r"\[Lab (\d\d)\]\(\1-[a-z0-9-]+\.ipynb\)", part))
        (optional if re.search(r"\bhelps?\b", part) else required).update(ids)
    unlinked = set(re.findall(r"(?<!\[)Lab (\d\d)\b(?!\])", para.group(1)))
    assert not unlinked, f"{lab.notebook}: Lab {', '.join(sorted(unlinked))} named without a link"
    return required, optional


@pytest.mark.parametrize("lab", [lab for lab in course.labs() if lab.ready and lab.id != "00"], ids=lambda lab: lab.id)
def test_first_cell_links_the_manifests_prerequisites(lab: course.Lab) -> None:
    required, optional = _prerequisites(lab)
    assert required == set(lab.prerequisites), (
        f"lab {lab.id}: the notebook requires {sorted(required)}, labs.yml (lab 00's course map) {list(lab.prerequisites)}")
    assert not optional & required
