"""labkit.check.numeric: numeric exercises as data, graded by one function; the shared steps of the numeric checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from labkit.check.core import Failed, Unsolved
from labkit.check.numeric import (
    FunctionExercise,
    array_answer,
    call_answer,
    dict_answer,
    expect,
    figure,
    grade_function,
    pair_answer,
    slip_cause,
)

DOUBLE = FunctionExercise(
    "double",
    lambda: [(3, 5), (2**31 + 7, 1), (0, 4)],
    lambda x, k: 2.0 * x * k,
    "{got:.4g}, expected {want:.4g}.",
    zero_atol=1e-9,
    first=lambda x, k: "a case of its own" if k == 4 else None,
    values=lambda want, x, k: {"added instead of multiplied": 2.0 * (x + k)},
    ratios=lambda x, k: {0.5: "the factor 2 is missing"},
    nbytes=0,
    otherwise="2 x k",
)


def _plain_call(fn: Any, *args: Any) -> Any:
    return fn(*args)


def _failure(fn: Any, ex: FunctionExercise = DOUBLE) -> Failed:
    with pytest.raises(Failed) as info:
        grade_function(fn, ex, _plain_call)
    return info.value


def test_grade_function_passes_the_right_function_and_within_rel() -> None:
    grade_function(lambda x, k: 2.0 * x * k, DOUBLE, _plain_call)
    grade_function(lambda x, k: 2.0 * x * k * 1.009, DOUBLE, _plain_call)  # within 1%


def test_grade_function_names_each_kind_of_slip() -> None:
    exc = _failure(lambda x, k: x * k)
    assert str(exc) == "double(3, 5) returned 15, expected 30." and exc.cause == "the factor 2 is missing"
    assert _failure(lambda x, k: 2.0 * (x + k)).cause == "added instead of multiplied"
    assert "bits" in str(_failure(lambda x, k: 2.0 * x * k * 8).cause)  # an exact unit factor: bits for bytes
    assert "unit" in str(_failure(lambda x, k: 2.0 * x * k * 1e3).cause)
    assert _failure(lambda x, k: 2.0 * x * k * 1.3).cause == "2 x k"
    wrapped = _failure(lambda x, k: 2.0 * float(np.int64(x).astype(np.int32)) * k if x > 2**31 else 2.0 * x * k)
    assert "2^31" in str(wrapped.cause) and str(wrapped).startswith(f"double({2**31 + 7}, 1) returned")


def test_grade_function_zero_tolerance_and_first_cause() -> None:
    grade_function(lambda x, k: 2.0 * x * k + (5e-10 if x == 0 else 0.0), DOUBLE, _plain_call)  # below zero_atol
    exc = _failure(lambda x, k: 2.0 * x * k + (1e-6 if x == 0 else 0.0))
    assert exc.cause == "a case of its own"


def test_grade_function_draws_cases_lazily_and_stops_at_the_first_wrong() -> None:
    drawn: list[int] = []

    def cases() -> Any:
        for k in range(5):
            drawn.append(k)
            yield (k + 1, 1)

    ex = FunctionExercise("f", cases, lambda x, k: float(x), "{got}, expected {want}.")
    with pytest.raises(Failed):
        grade_function(lambda x, k: 99.0 if x == 2 else float(x), ex, _plain_call)
    assert drawn == [0, 1]


def test_slip_cause_order() -> None:
    assert slip_cause(2.0, 1.0, (), ratios=lambda: {2.0: "ratio"}, values=lambda w: {"value": 2.0}) == "value"
    assert slip_cause(1.7, 1.0, (), otherwise="none fits") == "none fits"
    assert slip_cause(1.7, 1.0) is None


def test_figure_reads_and_judges() -> None:
    assert figure(10.05, "x", lambda: 10.0, lambda: {"halved": 5.0}, "GB/s", rel=0.01) == 10.05
    with pytest.raises(Failed) as info:
        figure(5.0, "x", lambda: 10.0, lambda: {"halved": 5.0}, "GB/s", rel=0.01)
    assert info.value.cause == "halved"
    with pytest.raises(Failed, match="should be a number"):
        figure("10", "x", lambda: 10.0, dict, "GB/s", rel=0.01)


def test_call_answer() -> None:
    assert call_answer(lambda a, b: a + b, 1, 2, what="f") == 3
    with pytest.raises(Failed, match=r"^f\(1\) raised ZeroDivisionError: division by zero!$"):
        call_answer(lambda a: a / 0, 1, what="f(1)", tail="!")
    with pytest.raises(NotImplementedError):
        call_answer(lambda: (_ for _ in ()).throw(NotImplementedError()), what="f")
    inner = Failed("inner")
    with pytest.raises(Failed) as info:
        call_answer(lambda: (_ for _ in ()).throw(inner), what="f", keep=(Failed,))
    assert info.value is inner
    with pytest.raises(Failed, match="f raised Failed: inner"):
        call_answer(lambda: (_ for _ in ()).throw(inner), what="f")


def test_pair_answer() -> None:
    assert pair_answer((1, 2.5), ("a", "b")) == (1.0, 2.5)
    with pytest.raises(Unsolved, match=r"return \(a, b\)"):
        pair_answer(None, ("a", "b"))
    with pytest.raises(Failed, match=r"return two numbers, \(a, b\); got 3"):
        pair_answer(3, ("a", "b"))
    with pytest.raises(Failed, match="b should be a number"):
        pair_answer((1, "x"), ("a", "b"))


def test_dict_answer() -> None:
    good = {"a": 1, "b": 2}
    assert dict_answer(good, ("a", "b")) is good
    with pytest.raises(Failed, match=r"^expected a dict with keys 'a', 'b' and 'c', got list\.$"):
        dict_answer([], ("a", "b", "c"))
    with pytest.raises(Failed, match=r"^the dict lacks b\.$"):
        dict_answer({"a": 1}, ("a", "b"))
    with pytest.raises(Unsolved, match="fill in both values"):
        dict_answer({"a": ..., "b": 2}, ("a", "b"))
    with pytest.raises(Unsolved, match="all blank"):
        dict_answer({"a": ..., "b": ...}, ("a", "b"), unsolved="one blank", all_unsolved="all blank")
    with pytest.raises(Unsolved, match="one blank"):
        dict_answer({"a": ..., "b": 1}, ("a", "b"), unsolved="one blank", all_unsolved="all blank")


def test_array_answer() -> None:
    arr = array_answer([1, 2], "f", "f(x)", "an array")
    assert arr.dtype == np.float64 and arr.tolist() == [1.0, 2.0]
    with pytest.raises(Unsolved, match=r"^f returns nothing yet\.$"):
        array_answer(..., "f", "f(x)", "an array")
    with pytest.raises(Failed, match=r"^f\(x\) returned dict, not an array\.$"):
        array_answer({"a": 1}, "f", "f(x)", "an array")


def test_expect() -> None:
    calls: list[int] = []

    def cause() -> str:
        calls.append(1)
        return "why"

    expect(10.05, 10.0, "f()", "rate", " GB/s", cause)
    assert calls == []  # no cause looked for when the figure is right
    with pytest.raises(Failed, match=r"^f\(\): rate 12, expected 10 GB/s\.$") as info:
        expect(12.0, 10.0, "f()", "rate", " GB/s", cause)
    assert info.value.cause == "why"


def test_judge_expected_adds_the_right_figure_to_the_message() -> None:
    from labkit.check.numeric import judge_expected

    judge_expected(10.0, 10.0, "f()", "GB/s", expected="Expected 10.", rel=0.01, slips={}, otherwise="o")
    with pytest.raises(Failed) as info:
        judge_expected(5.0, 10.0, "f()", "GB/s", expected="Expected 10.", rel=0.01, slips={"halved": 5.0}, otherwise="o")
    assert str(info.value) == "f(): you have 5 GB/s; that is not it. Expected 10." and info.value.cause == "halved"


def test_need_function() -> None:
    from labkit.check.numeric import need_function

    need_function(len)
    with pytest.raises(Failed, match=r"^expected a function, got float\.$"):
        need_function(2.5)
    with pytest.raises(Failed, match=r"^expected f\(x\), got str\.$") as info:
        need_function("x", "f(x)", cause="pass f itself")
    assert info.value.cause == "pass f itself"
