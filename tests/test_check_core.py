"""The exercise mechanism: results, not-solved-yet, hints, expectations, references; lab 00's grader."""

import numpy as np
import pytest
from numba import cuda

import labkit
from labkit.check import core, harness
from labkit.errors import LabkitError


# ---- kernels for the vector-add grader: one right, several wrong in the ways learners get wrong
@cuda.jit
def right(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def right_grid_stride(a, b, out):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, stride):
        out[i] = b[i] + a[i]


@cuda.jit
def no_bounds_check(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]


@cuda.jit
def off_by_one(a, b, out):
    i = cuda.grid(1)
    if i < out.size - 1:
        out[i + 1] = a[i] + b[i]


@cuda.jit
def bound_too_short(a, b, out):
    i = cuda.grid(1)
    if i < out.size - 1:
        out[i] = a[i] + b[i]


@cuda.jit
def first_block_only(a, b, out):
    i = cuda.threadIdx.x
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def wrong_formula(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] - b[i]


@cuda.jit
def empty(a, b, out):
    pass


@cuda.jit
def raises_inside(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i] + undefined_thing  # noqa: F821


@cuda.jit
def wrong_signature(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i]


@cuda.jit
def spins_forever(a, b, out):
    i = 0
    while i >= 0:
        i = (i + 1) % 7


def test_right_kernels_pass() -> None:
    assert labkit.check.vector_add(right)
    assert labkit.check.vector_add(right_grid_stride)


@pytest.mark.parametrize(
    "kernel, status, words",
    [
        (no_bounds_check, "failed", "bounds check"),
        (off_by_one, "failed", "index"),
        (bound_too_short, "failed", "never written"),
        (first_block_only, "failed", "race between blocks"),
        (wrong_formula, "failed", "expected"),
        (empty, "unsolved", "wrote nothing"),
        (raises_inside, "failed", "undefined_thing"),
        (wrong_signature, "failed", "arguments"),
        (3.5, "failed", "@cuda.jit"),
        (..., "unsolved", "skeleton"),
    ],
)
def test_wrong_kernels_are_rejected(kernel, status: str, words: str, capsys: pytest.CaptureFixture) -> None:
    result = labkit.check.vector_add(kernel)
    assert not result and result.status == status
    out = capsys.readouterr().out
    assert words in out, out
    assert "Hint: labkit.check.hint('00.vector-add')" in out


def test_hang_is_stopped(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(harness, "CASE_TIME_LIMIT_S", 1.0)
    result = labkit.check.vector_add(spins_forever)
    assert result.status == "failed" and "did not finish within 1 s" in capsys.readouterr().out


def test_guard_zone_catches_writes_past_the_end() -> None:
    g = harness.Guarded(10, np.float32)
    g._buffer[g.guard + 10] = 1.0  # what a missing bounds check does on a GPU
    with pytest.raises(core.Failed, match="outside the output array"):
        g.fetch()


def test_compare_reports_first_index_and_swap() -> None:
    exp = np.arange(9, dtype=np.float32).reshape(3, 3)
    with pytest.raises(core.Failed) as info:
        harness.compare(exp.T.copy(), exp, label="3x3")
    assert "first at index (0, 1)" in str(info.value) and "swapped" in info.value.cause


def test_sizes_cover_the_awkward_cases() -> None:
    sizes = harness.sizes_for(32)
    assert 1 in sizes and 31 in sizes and 33 in sizes and any(s % 32 for s in sizes)
    assert sizes[0] == 3 * 32 + 7


def test_hints_are_levelled(capsys: pytest.CaptureFixture) -> None:
    core._HINT_LEVEL.clear()
    for _ in range(3):
        labkit.check.hint("00.vector-add")
    first, second, third = capsys.readouterr().out.splitlines()
    assert first.startswith("Hint 1/3") and second.startswith("Hint 2/3") and third.startswith("Hint 3/3 (that is the last one)")
    labkit.check.hint("00.vector-add", level=3)
    assert capsys.readouterr().out.startswith("Hint 3/3")
    with pytest.raises(LabkitError):
        labkit.check.hint("00.vector-add", level=4)


def test_unknown_exercise_suggests() -> None:
    with pytest.raises(LabkitError, match="Did you mean 00.vector-add"):
        labkit.check.run("00.vectoradd", right)


def test_exercises_lists_status() -> None:
    labkit.check.vector_add(right)
    rows = {r[0]: r for r in labkit.check.exercises("00")}
    assert rows["00.vector-add"][2] == "passed"


def test_expectations_turn_disagreement_into_assertion(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_EXPECT", "solved")
    with pytest.raises(AssertionError, match="did not pass"):
        labkit.check.vector_add(empty)
    monkeypatch.setenv("LABKIT_EXPECT", "unsolved")
    with pytest.raises(AssertionError, match="reported passed"):
        labkit.check.vector_add(right)
    labkit.check.vector_add(...)  # agrees: no error


def test_solved_or_reference(capsys: pytest.CaptureFixture) -> None:
    from labkit.check import answers_guard

    labkit.check.vector_add(empty)
    ref = labkit.check.solved_or_reference("00.vector-add", empty)
    try:
        assert ref is not empty and "reference answer" in capsys.readouterr().out
        handed = labkit.check.vector_add(ref)  # what was handed out is labkit's, not an answer
        assert handed.status == "failed" and "labkit's own reference" in handed.message
    finally:  # other tests grade labkit's reference kernel directly
        answers_guard._HANDED.clear()
    labkit.check.vector_add(right)
    assert labkit.check.solved_or_reference("00.vector-add", right) is right


def test_every_exercise_has_hints_and_a_title() -> None:
    core._load_all()
    for ex in core._REGISTRY.values():
        assert ex.title and len(ex.hints) >= 2, ex.exercise_id
        assert ex.exercise_id[:2].isdigit() and ex.exercise_id[2] == "."


@cuda.jit
def runs_in_sim_only(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        parts = {"a": a[i], "b": b[i]}  # a dict: fine in Python, not in a CUDA kernel
        out[i] = parts["a"] + parts["b"]


def test_ptx_audit_compiles_what_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_PTX_AUDIT", "sm_70,sm_90")
    assert labkit.check.vector_add(right)  # compiles: no error
    with pytest.raises(AssertionError, match="does not compile for sm_70"):
        labkit.check.vector_add(runs_in_sim_only)


def test_launch_signature_inference() -> None:
    assert harness._numba_type(np.zeros((2, 3), np.float32)) == "float32[:, :]"
    assert harness._numba_type(3) == "int64" and harness._numba_type(2.5) == "float64"
    assert harness._numba_type(np.zeros(4, np.uint8)) == "uint8[:]"


def test_check_names_are_unique_across_labs() -> None:
    """labkit.check.<name> looks a check up across every lab module: a name used twice would be ambiguous."""
    import importlib
    import pkgutil

    import labkit.check as pkg

    owners: dict[str, str] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("lab"):
            module = importlib.import_module(f"labkit.check.{info.name}")
            for name, value in vars(module).items():
                if hasattr(value, "exercise_id"):
                    assert name not in owners, f"check {name!r} is defined in {owners.get(name)} and {info.name}"
                    owners[name] = info.name
    assert len(owners) >= 30
