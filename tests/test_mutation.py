"""Mutation analysis of the exercise checks (tools/mutation.py): the operators make the mutants they promise, and a
seeded sample of every exercise's mutants is killed by the exercise's own check (any survivor not listed with a
reviewed reason in tools/mutation_equivalents.yml fails)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import mutation_ops as ops  # noqa: E402

KERNEL = """\
def k(a, out, n):
    s = cuda.shared.array(64, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    if i < n:
        s[t] = a[i] * float32(0.5)
    cuda.syncthreads()
    for j in range(i, n, cuda.gridsize(1)):
        cuda.atomic.add(out, 0, a[j])
    out[i, t] = s[t] // 3
"""

HOST = """\
def f(xs, n):
    total = 0
    for i in range(n):
        total += xs[i] * 1000
    return total // len(xs)
"""

CPP = """\
extern "C" __global__ void k(const float* x, float* y, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) s[threadIdx.x] = sqrtf(x[i]) * 2.0f;
    __syncthreads();
    if (i < n) atomicAdd(&y[0], s[threadIdx.x]);
}
"""


def _made(edits: list[ops.Edit], source: str, operator: str) -> list[str]:
    return [e.apply(source) for e in edits if e.operator == operator]


def _has(edits: list[ops.Edit], source: str, operator: str, fragment: str) -> bool:
    return any(fragment in m for m in _made(edits, source, operator))


@pytest.mark.parametrize(
    ("operator", "fragment"),
    [
        ("drop-barrier", "    None\n"),
        ("weaken-bound", "if i <= n:"),
        ("drop-bound", "if True:"),
        ("index+1", "s[t + 1] = a[i]"),
        ("loop-bound+1", "range(i, (n) + 1,"),
        ("swap-xy", "cuda.threadIdx.y"),
        ("swap-row-column", "out[t, i]"),
        ("grid-to-block-stride", "range(i, n, cuda.blockDim.x)"),
        ("atomic-to-plain", "out[0] += a[j]"),
        ("shared-to-local", "cuda.local.array(64, float32)"),
        ("uint16-index", "i = _mut_np.uint16(cuda.grid(1))"),
        ("int32-index", "i = _mut_np.int32(cuda.grid(1))"),
        ("float-literal-double", "a[i] * 0.5"),
        ("shift-division", "s[t] >> 1"),
        ("early-return", "    if not (i < n):\n        return\n    cuda.syncthreads()"),
        ("binary-operator", "a[i] / float32(0.5)"),
        ("number", "cuda.shared.array(65, float32)"),
    ],
)
def test_cuda_python_operators(operator: str, fragment: str) -> None:
    edits = ops.python_mutants(KERNEL, kernel=True)
    assert _has(edits, KERNEL, operator, fragment), (operator, _made(edits, KERNEL, operator))
    for e in edits:  # every mutant is still Python
        compile(e.apply(KERNEL), "<mutant>", "exec")


@pytest.mark.parametrize(
    ("operator", "fragment"),
    [
        ("count-1", "range((n) - 1)"),
        ("count+1", "range((n) + 1)"),
        ("count-1", "(len(xs) - 1)"),
        ("unit-factor", "xs[i] * 1024"),
        ("augmented-assign", "total -= xs[i]"),
        ("shift-division", "int(total) >> (int(len(xs)).bit_length() - 1)"),
        ("comparison", None),
    ],
)
def test_host_operators(operator: str, fragment: str | None) -> None:
    edits = ops.python_mutants(HOST, kernel=False)
    if fragment is None:  # no comparison in HOST: none made
        assert not _made(edits, HOST, operator)
        return
    assert _has(edits, HOST, operator, fragment), (operator, _made(edits, HOST, operator))


@pytest.mark.parametrize(
    ("operator", "fragment"),
    [
        ("drop-barrier", "    ;\n"),
        ("swap-xy", "blockIdx.y * blockDim.x"),
        ("atomic-to-plain", "y[0] += s[threadIdx.x];"),
        ("shared-to-local", "    float s[256];"),
        ("uint16-index", "unsigned short i = blockIdx.x"),
        ("float-literal-double", "* 2.0;"),
        ("float-literal-double", "sqrt(x[i])"),
        ("weaken-bound", "if (i <= n) s["),
        ("early-return", "if (!(i < n)) return;\n    __syncthreads();"),
        ("binary-operator", "blockIdx.x * blockDim.x - threadIdx.x"),
    ],
)
def test_cpp_operators(operator: str, fragment: str) -> None:
    edits = ops.cpp_mutants(CPP)
    assert _has(edits, CPP, operator, fragment), (operator, _made(edits, CPP, operator))


def test_every_class_names_its_cause_words() -> None:
    classes = {e.op_class for e in ops.python_mutants(KERNEL, kernel=True) + ops.python_mutants(HOST, kernel=False)}
    classes |= {e.op_class for e in ops.cpp_mutants(CPP)}
    assert classes <= set(ops.CAUSE_WORDS)
    assert all(ops.CAUSE_WORDS[c] for c in ops.CAUSE_WORDS)


def test_wrappers_mutate_an_input_and_cache_by_shape() -> None:
    import mutation
    import numpy as np

    double = mutation.wrap(lambda a: a * 2, "mutate-input")
    a = np.arange(3.0)
    assert list(double(a)) == [0.0, 2.0, 4.0] and a[0] == 1.0
    cached = mutation.wrap(lambda a: a.sum(), "cache-by-shape")
    assert cached(np.ones(3)) == 3.0 and cached(np.zeros(3)) == 3.0 and cached(np.zeros(4)) == 0.0


def test_seeded_sample_of_every_reference_is_killed() -> None:
    """A seeded sample of the mutants of every exercise's reference, each through its own check in sim mode: none
    may survive unless tools/mutation_equivalents.yml lists it with a reason."""
    env = dict(os.environ, LABKIT_MODE="sim", LABKIT_PROGRESS="off")
    env.pop("LABKIT_EXPECT", None)
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "mutation.py"),
            "--sample",
            "24",
            "--seed",
            "2026",
            "--quiet",
            "--timeout",
            "60",
            "--skip-null",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    seconds = time.perf_counter() - t0
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    assert last.startswith("mutation: ") and " 0 survived" in last, last
    print(f"{last} ({seconds:.0f} s)")


def test_annotations_are_not_mutated() -> None:
    source = "def f(a: int | None, b: list[int]) -> tuple[int, int] | None:\n    x: int | None = a\n    return a | b\n"
    made = [e.apply(source) for e in ops.python_mutants(source, kernel=False)]
    assert "    return a & b\n" in "".join(made)
    assert all("int | None, b" in m and "-> tuple[int, int] | None" in m and "x: int | None" in m for m in made)


def test_l2norm_refuses_a_combine_that_is_not_commutative(capsys: pytest.CaptureFixture[str]) -> None:
    """Mutation survivor closed: the CPU stand-in's two levels turn `a - b` into the true sum (0 - (0 - x) = x)."""
    os.environ.setdefault("LABKIT_MODE", "sim")
    from labkit import check
    from labkit.gpu.cupylab import reduction_kernel

    r = check.run("05.l2norm", reduction_kernel("T x", "T y", "x * x", "a - b", "y = sqrt(a)", "0", "l2norm"))
    assert not r.passed and "commutative and associative" in (r.cause or "")


def test_launch_plan_draws_a_target_only_1024_threads_reach() -> None:
    """Mutation survivor closed: a plan that never tries 1024-thread blocks fails (one block per SM fits)."""
    from labkit.check import lab03

    shared = 90_000
    assert [t for t in range(32, 1025, 32) if lab03._best_budget("sm_80", t, 0.5, shared)] == [1024]
