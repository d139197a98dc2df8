"""Every exercise records what the learner writes (kernel, code or numeric), and most are kernels or code.
Cost: under a second (imports the check modules)."""

from __future__ import annotations

from collections import Counter

import labkit.check._labs  # noqa: F401  (registers every exercise)
from labkit.check import core


def test_every_exercise_has_a_kind() -> None:
    missing = sorted(i for i, ex in core._REGISTRY.items() if ex.kind not in core.KINDS)
    assert not missing, f"exercises without a kind (kernel, code or numeric): {missing}"


def test_most_exercises_are_kernels_or_code() -> None:
    counts = Counter(ex.kind for ex in core._REGISTRY.values())
    assert counts["kernel"] + counts["code"] >= 25, counts
    assert counts["kernel"] + counts["code"] > counts["numeric"], counts


def test_every_lab_with_kernels_has_a_kernel_exercise() -> None:
    labs = {i.split(".")[0] for i, ex in core._REGISTRY.items() if ex.kind == "kernel"}
    assert {"00", "02", "03", "04", "05", "06", "09"} <= labs


def test_course_readme_table_matches_the_manifest_and_the_kinds() -> None:
    """course/README.md lists each lab's minutes and its exercises by kind: they agree with labs.yml and the registry."""
    import re
    from pathlib import Path

    from labkit import course

    text = (Path(__file__).resolve().parents[1] / "course" / "README.md").read_text(encoding="utf-8")
    per: dict[str, Counter] = {}
    for ex_id, ex in core._REGISTRY.items():
        per.setdefault(ex_id[:2], Counter())[ex.kind] += 1
    for lab in course.labs():
        row = re.search(rf"^\| {lab.id} \| {re.escape(lab.title)} \| (\d+) \((\d+) \+ (\d+)\) \| [^|]+ \| (\d+) / (\d+) / (\d+) \|$",
                        text, flags=re.M)
        assert row, f"course/README.md has no row for lab {lab.id}"
        assert tuple(map(int, row.groups()[:3])) == (lab.minutes, lab.teaching, lab.exercises), lab.id
        c = per.get(lab.id, Counter())
        assert tuple(map(int, row.groups()[3:])) == (c["kernel"], c["code"], c["numeric"]), lab.id
    total = Counter(ex.kind for ex in core._REGISTRY.values())
    assert f"{total['kernel']} kernel, {total['code']} code and {total['numeric']} numeric exercises" in text
