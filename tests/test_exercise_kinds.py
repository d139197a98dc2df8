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
