"""check/cases.py: the one case loop of the kernel exercises, and the small steps around it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from labkit.check import cases
from labkit.check.core import Failed, Unsolved
from labkit.check.harness import Launch


def _launch(n: int) -> Launch:
    return Launch(1, 32, (np.zeros(n, np.float32),), np.zeros(n), f"n={n}", out_shape=n)


@pytest.fixture
def graded(monkeypatch: pytest.MonkeyPatch) -> list[Launch]:
    """Replace the graded launch with a record of what run_cases asked for (a failing case: n == 13)."""
    seen: list[Launch] = []

    def grade(kernel: Any, launch: Launch) -> str:
        seen.append(launch)
        if launch.out_shape == 13:
            raise Failed(f"{launch.label}: wrong", cause="the grader's cause")
        if launch.out_shape == 0:
            raise Unsolved("nothing yet")
        return f"report of {launch.label}"

    monkeypatch.setattr(cases, "grade", grade)
    return seen


def test_run_cases_sets_first_reverse_record_and_shared_options(graded: list[Launch]) -> None:
    made: list[int] = []

    def make(n: int) -> Launch:
        made.append(n)  # drawn just before its own launch: one case made per launch so far
        assert len(made) == len(graded) + 1
        return _launch(n)

    reports: list[tuple[int, str, Any]] = []
    ran = cases.run_cases(
        "kernel",
        [5, 6, 7],
        make,
        reverse_at=1,
        record_at=2,
        record=("x",),
        then=lambda n, launch, report: reports.append((n, launch.label, report)),
        names=("x", "out"),
        rtol=0,
    )
    assert ran == 3 and made == [5, 6, 7]
    assert [g.first for g in graded] == [True, False, False]
    assert [g.reverse for g in graded] == [False, True, False]
    assert [g.record for g in graded] == [False, False, ("x",)]
    assert all(g.names == ("x", "out") and g.rtol == 0 for g in graded)
    assert reports == [(5, "n=5", "report of n=5"), (6, "n=6", "report of n=6"), (7, "n=7", "report of n=7")]


def test_run_cases_stops_at_a_failure_and_lets_failed_explain_it(graded: list[Launch]) -> None:
    with pytest.raises(Failed, match="n=13: wrong") as plain:
        cases.run_cases("kernel", [5, 13, 7], _launch)
    assert plain.value.cause == "the grader's cause" and len(graded) == 2

    def better(n: int, launch: Launch, exc: Failed) -> None:
        raise Failed(str(exc), cause=f"case {n} explained") from None

    with pytest.raises(Failed) as explained:
        cases.run_cases("kernel", [13], _launch, failed=better)
    assert explained.value.cause == "case 13 explained"
    with pytest.raises(Failed) as kept:  # a hook that finds nothing better leaves the failure as it was
        cases.run_cases("kernel", [13], _launch, failed=lambda n, launch, exc: None)
    assert kept.value.cause == "the grader's cause"
    calls: list[int] = []
    with pytest.raises(Unsolved):  # not solved yet: no hook reads it
        cases.run_cases("kernel", [0], _launch, failed=lambda n, launch, exc: calls.append(n))
    assert calls == []


def test_labels() -> None:
    assert cases.line_label(1000, 4, 256) == "n=1000, 4 block(s) of 256 threads"
    assert cases.line_label(9, 1, 32, " bytes") == "n=9 bytes, 1 block(s) of 32 threads"
    assert cases.grid_label("array", (9, 20), (16, 8)) == "array 9×20, grid (2, 2) of blocks (16, 8)"
    assert (
        cases.grid_label("image {shape} (rows×cols)", (1, 1), (16, 8)) == "image 1×1 (rows×cols), grid (1, 1) of blocks (16, 8)"
    )


def test_compared_gives_the_checks_cause_or_the_comparisons_own() -> None:
    got, want = np.array([1.0, 2.0]), np.array([1.0, 3.0])
    cases.compared(want, want, lambda: "never asked", label="same")
    with pytest.raises(Failed, match="case: 1 of 2 elements are wrong") as own:
        cases.compared(got, want, lambda: "off by one", label="case")
    assert own.value.cause == "off by one"
    with pytest.raises(Failed) as general:
        cases.compared(got, want, lambda: None, label="case")
    assert general.value.cause and general.value.cause != "off by one"


def test_called() -> None:
    assert cases.called(lambda a, b: a + b, 1, 2, what="f(1, 2)", nothing="-") == 3
    with pytest.raises(Failed, match=r"f\(1\) raised ZeroDivisionError"):
        cases.called(lambda a: a / 0, 1, what="f(1)", nothing="-")
    with pytest.raises(Unsolved, match="nothing yet"):
        cases.called(lambda: ..., what="f()", nothing="nothing yet")

    def template() -> None:
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        cases.called(template, what="f()", nothing="-")
