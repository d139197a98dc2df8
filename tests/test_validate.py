"""labkit.validate: each argument check accepts what it should, in canonical form, and refuses the rest in words."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labkit.errors import LabkitError
from labkit.validate import (describe, did_you_mean, require_array, require_bool, require_callable, require_choice,
                             require_int, require_number, require_sequence, require_str)


def test_require_int() -> None:
    assert require_int(5, "n") == 5 and require_int(np.int32(5), "n") == 5 and require_int(256.0, "n") == 256
    assert type(require_int(np.int64(7), "n")) is int
    for junk in (None, "5", True, 2.5, math.nan, math.inf, [1], object()):
        with pytest.raises(LabkitError, match=r"^n must be a whole number"):
            require_int(junk, "n")
    with pytest.raises(LabkitError, match=r"n must be a whole number from 1 to 4, got 5\.\n  What to do: fewer"):
        require_int(5, "n", min=1, max=4, fix="fewer")
    with pytest.raises(LabkitError, match=r"n must be a positive whole number, got 0"):
        require_int(0, "n", min=1)
    with pytest.raises(LabkitError, match=r"n must be a non-negative whole number, got -1"):
        require_int(-1, "n", min=0)


def test_require_number() -> None:
    assert require_number(2, "x") == 2.0 and require_number(np.float32(0.5), "x") == 0.5
    assert require_number(math.inf, "x", finite=False) == math.inf
    assert math.isnan(require_number(math.nan, "x", nan=True, min=0))
    for junk in (None, "1", True, math.nan, math.inf, [1.0], 1j):
        with pytest.raises(LabkitError, match=r"^x must be a finite number"):
            require_number(junk, "x")
    with pytest.raises(LabkitError, match=r"x must be a positive finite number, got 0"):
        require_number(0, "x", min=0, min_open=True)
    with pytest.raises(LabkitError, match=r"x must be a finite number from 0.01 to 10000, got 100000.0"):
        require_number(1e5, "x", min=0.01, max=10_000)


def test_require_bool_str_callable() -> None:
    assert require_bool(np.bool_(True), "flag") is True
    for junk in (1, 0, "yes", None):
        with pytest.raises(LabkitError, match="flag must be True or False"):
            require_bool(junk, "flag")
    assert require_str("  a ", "s") == "a" and require_str("", "s", empty=True) == ""
    for junk in ("", "  ", None, 3, ["a"]):
        with pytest.raises(LabkitError, match="s must be a non-empty string"):
            require_str(junk, "s")
    assert require_callable(len, "fn") is len
    with pytest.raises(LabkitError, match=r"fn must be a kernel, got 3"):
        require_callable(3, "fn", what="a kernel")


def test_require_choice_with_did_you_mean() -> None:
    assert require_choice("SM_90 ", "arch", ["sm_80", "sm_90"]) == "sm_90"
    assert require_choice(4, "size", [1, 2, 4]) == 4
    with pytest.raises(LabkitError, match=r"unknown arch 'sm_91'\. Did you mean sm_90"):
        require_choice("sm_91", "arch", ["sm_80", "sm_90"])
    with pytest.raises(LabkitError, match=r"arch must be one of 'sm_80', 'sm_90'; got None"):
        require_choice(None, "arch", ["sm_80", "sm_90"])
    with pytest.raises(LabkitError, match=r"size must be one of 1, 2, 4; got True"):
        require_choice(True, "size", [1, 2, 4])  # True == 1, but a bool is not a size
    assert did_you_mean("fp61", ["fp16", "bf16", "int8"], n=1) == " Did you mean fp16?"
    assert did_you_mean("zzz", ["fp16"]) == ""


def test_require_sequence() -> None:
    assert require_sequence((1, 2), "xs") == [1, 2] and require_sequence(np.arange(3), "xs") == [0, 1, 2]
    assert require_sequence(["1"], "xs", item=lambda v, n: require_int(int(v), n)) == [1]
    for junk in (None, "ab", 3, {"a": 1}, np.zeros((2, 2))):
        with pytest.raises(LabkitError, match="xs must be a list"):
            require_sequence(junk, "xs")
    with pytest.raises(LabkitError, match=r"xs must have 2 element\(s\), got 1"):
        require_sequence([1], "xs", min_len=2, max_len=2)
    with pytest.raises(LabkitError, match=r"xs\[1\] must be a whole number"):
        require_sequence([1, "b"], "xs", item=require_int)


def test_require_array() -> None:
    assert require_array([[1, 2]], "a", ndim=2).shape == (1, 2)
    for junk in (None, "x", {"a": 1}, [["a"]], [[1, 2], [3]]):
        with pytest.raises(LabkitError, match="a must be"):
            require_array(junk, "a")
    with pytest.raises(LabkitError, match=r"a must be a 2-D array of numbers, got a 1-D one of shape \(3,\)"):
        require_array([1, 2, 3], "a", ndim=2)
    with pytest.raises(LabkitError, match="NaN or infinity"):
        require_array([1.0, math.nan], "a", finite=True)
    with pytest.raises(LabkitError, match="at least 1 element"):
        require_array([], "a", min_size=1)


def test_describe_is_short_and_names_the_type() -> None:
    assert describe(None) == "None" and describe("x") == "'x'"
    assert describe(list(range(100))).endswith("... (a list)") and len(describe(list(range(100)))) < 80
