"""The course's lab manifest (``labkit/data/labs.yml``): titles, times, prerequisites, status.

Notebooks, syllabi and the README are checked against it, so they never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from .errors import LabkitError


@dataclass(frozen=True)
class Lab:
    """One lab of the course."""

    id: str
    notebook: str
    title: str
    minutes: int
    teaching: int
    exercises: int
    prerequisites: tuple[str, ...]
    status: str

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def filename(self) -> str:
        return f"{self.notebook}.ipynb"


@lru_cache(maxsize=1)
def labs() -> tuple[Lab, ...]:
    """All labs in order."""
    import yaml

    data = yaml.safe_load(resources.files("labkit").joinpath("data/labs.yml").read_text())
    out = []
    for row in data["labs"]:
        row = dict(row)
        row["prerequisites"] = tuple(row.get("prerequisites", ()))
        out.append(Lab(**row))
    return tuple(out)


def lab(lab_id: str) -> Lab:
    """The lab with id ``"03"`` (or 3)."""
    key = f"{int(lab_id):02d}" if str(lab_id).isdigit() else str(lab_id)
    for item in labs():
        if item.id == key:
            return item
    raise LabkitError(f"there is no lab {lab_id!r}; labs are {', '.join(x.id for x in labs())}.")


def course_map(relative_to: str | None = None) -> str:
    """A Markdown table of the labs with times and links (ready labs link to their notebook).

    Links are relative to ``relative_to``; by default they lead to the learner labs from where the notebook runs:
    ``../`` from ``solutions/`` (as every link in a solution notebook does), else the same folder."""
    if relative_to is None:
        from pathlib import Path

        here = Path.cwd()
        relative_to = "../" if here.name == "solutions" and (here.parent / labs()[0].filename).exists() else ""
    rows = ["| # | lab | time | prerequisites |", "|---|---|---|---|"]
    for item in labs():
        name = f"[{item.title}]({relative_to}{item.filename})" if item.ready else f"{item.title} (planned)"
        pre = ", ".join(item.prerequisites) or "—"
        rows.append(f"| {item.id} | {name} | {item.minutes} min | {pre} |")
    return "\n".join(rows)
