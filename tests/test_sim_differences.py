"""The README's "Differences from a GPU": every item names the tests that show it, and those tests exist (issue 45,
item 2), so the list and the tests cannot drift apart. Also the Python engine's part of the floating-point item: a
float ``a * b + c`` rounds twice, math functions are within CUDA's documented bounds, and ``fastmath=True`` (which
a GPU honours and the simulator does not) is said where the kernel is compiled."""

from __future__ import annotations

import ast
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import labkit

env = labkit.setup(quiet=True)

from numba import cuda  # noqa: E402

from labkit.sim.errors import NotSimulated  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sim_only = pytest.mark.skipif(env.is_gpu, reason="what the simulator does")


def _difference_items() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Differences from a GPU", 1)[1].split("\n##", 1)[0]
    return [item.strip() for item in re.split(r"\n- ", "\n" + section.split("\n- ", 1)[1])[1:]]


def _tests_named(item: str) -> dict[str, list[str]]:
    """The test files an item names and, for each, the test functions named after it (up to the next file)."""
    named: dict[str, list[str]] = {}
    current = None
    for token in re.finditer(r"(tests/[\w/]+\.py)|`(test_\w+)`", item):
        if token.group(1):
            current = token.group(1)
            named.setdefault(current, [])
        else:
            assert current is not None, f"{token.group(2)} is named before any test file in: {item[:60]}..."
            named[current].append(token.group(2))
    return named


def test_every_readme_difference_names_tests_that_exist() -> None:
    items = _difference_items()
    assert 1 <= len(items) <= 6, "the README's list of differences from a GPU is to stay short"
    for item in items:
        named = _tests_named(item)
        assert named and all(named.values()), f"no test named for: {item[:70]}..."
        for path, names in named.items():
            tree = ast.parse((ROOT / path).read_text())
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            missing = sorted(set(names) - defined)
            assert not missing, f"{path} has no {missing} (named by: {item[:60]}...)"


def test_the_mapping_reads_what_the_readme_says() -> None:
    item = "- **x** (tests/a.py: `test_one`, `test_two`; tests/b.py: `test_three`)"
    assert _tests_named(item) == {"tests/a.py": ["test_one", "test_two"], "tests/b.py": ["test_three"]}
    with pytest.raises(AssertionError):
        _tests_named("`test_orphan` before tests/a.py")


@cuda.jit
def muladd(a, b, c, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] * b[i] + c[i]


@sim_only
def test_a_float_multiply_add_rounds_twice_in_the_simulator() -> None:
    rng = np.random.default_rng(8)
    a, b = (np.float32(1) + rng.integers(1, 2**12, 1000).astype(np.float32) * np.float32(2.0**-12) for _ in range(2))
    c = -(a * b)  # a*b + c is the product's rounding error: only one rounding (a GPU's FMA) keeps it
    out = np.full_like(a, np.nan)
    muladd[8, 128](a, b, c, out)
    np.testing.assert_array_equal(out, np.zeros_like(a))
    fused = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
    assert (fused != 0).sum() > 250


@cuda.jit
def math_functions(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i, 0] = math.exp(v)
        out[i, 1] = math.log(v)
        out[i, 2] = math.sin(v)
        out[i, 3] = math.cos(v)
        out[i, 4] = math.tanh(v)
        out[i, 5] = math.pow(v, y[i])


# The CUDA C++ Programming Guide's maximum ulp errors of the single-precision functions Numba calls for float32
# (expf, logf, sinf, cosf, tanhf, powf), against the exact value rounded to float.
CUDA_ULPS = (2, 1, 2, 2, 2, 4)


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    def ordered(v: np.ndarray) -> np.ndarray:
        i = np.asarray(v, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    return np.abs(ordered(a) - ordered(b))


@sim_only
def test_math_functions_are_within_cudas_bounds() -> None:
    rng = np.random.default_rng(9)
    x = rng.uniform(0.01, 40.0, 2000).astype(np.float32)
    y = rng.uniform(-3.0, 3.0, 2000).astype(np.float32)
    out = np.zeros((x.size, 6), np.float32)
    math_functions[16, 128](x, y, out)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    exact = (np.exp(x64), np.log(x64), np.sin(x64), np.cos(x64), np.tanh(x64), x64**y64)
    for k, (want, bound) in enumerate(zip(exact, CUDA_ULPS)):
        off = _ulps(out[:, k], want.astype(np.float32))
        assert off.max() <= bound, k
        assert (off == 0).mean() > 0.99, k  # the host's libm in double, rounded once: nearly always the nearest


@sim_only
def test_fastmath_is_not_simulated_and_the_simulator_says_so() -> None:
    with pytest.warns(NotSimulated, match=r"fastmath=True is not simulated.*__expf"):

        @cuda.jit(fastmath=True)
        def fast_exp(x, out):  # pragma: no cover - compiled only
            i = cuda.grid(1)
            if i < x.size:
                out[i] = math.exp(x[i])

    x = np.array([80.0, 1.5], np.float32)
    out = np.zeros_like(x)
    fast_exp[1, 32](x, out)
    np.testing.assert_array_equal(out, np.exp(x.astype(np.float64)).astype(np.float32))  # as without fastmath
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # without fastmath: no warning

        @cuda.jit
        def plain(x, out):  # pragma: no cover - compiled only
            out[0] = x[0]
