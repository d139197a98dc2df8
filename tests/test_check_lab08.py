"""Lab 08 checks accept right answers (in their variants) and reject wrong ones with a likely cause."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from labkit import bandwidth as bw
from labkit import check, hw
from labkit import collectives as co
from labkit.check import lab08

# ---------------------------------------------------------------------------------------------- 08.ring-step


def _step_without_copy(chunks: list, phase: str, step: int) -> None:
    n = len(chunks)
    for g in range(n):
        c = (g - step) % n if phase == "reduce-scatter" else (g + 1 - step) % n
        if phase == "reduce-scatter":
            chunks[(g + 1) % n][c] += chunks[g][c]
        else:
            chunks[(g + 1) % n][c][:] = chunks[g][c]


def test_ring_step_accepts_variants() -> None:
    assert lab08.ring_step(co.ring_step)
    assert lab08.ring_step(_step_without_copy)  # no read-before-write hazard in this schedule
    assert check.ring_step(co.ring_step)  # reachable by name


@pytest.mark.parametrize("kind", list(lab08._VARIANT_CAUSES))
def test_ring_step_rejects_typical_slips(kind: str) -> None:
    r = lab08.ring_step(lab08._variant_step(kind))
    assert r.status == "failed"
    assert r.cause == lab08._VARIANT_CAUSES[kind]


def test_ring_step_rejects_whole_sum_and_new_lists() -> None:
    def whole(chunks: list, phase: str, step: int) -> None:
        n = len(chunks)
        tot = [sum(chunks[g][c] for g in range(n)) for c in range(n)]
        for g in range(n):
            for c in range(n):
                chunks[g][c][...] = tot[c]

    r = lab08.ring_step(whole)
    assert r.status == "failed" and "whole sum" in (r.cause or "")

    def new_list(chunks: list, phase: str, step: int) -> list:
        out = [[c.copy() for c in row] for row in chunks]
        co.ring_step(out, phase, step)
        return out

    r = lab08.ring_step(new_list)
    assert r.status == "failed" and "in place" in r.message


def test_ring_step_skeletons_unsolved() -> None:
    def skeleton(chunks: list, phase: str, step: int) -> None:
        raise NotImplementedError

    assert lab08.ring_step(skeleton).status == "unsolved"
    assert lab08.ring_step(lambda chunks, phase, step: None).status == "unsolved"
    assert lab08.ring_step(...).status == "unsolved"

    def crash(chunks: list, phase: str, step: int) -> None:
        raise IndexError("list index out of range")

    r = lab08.ring_step(crash)
    assert r.status == "failed" and "IndexError" in r.message


# ---------------------------------------------------------------------------------------------- 08.nccl-busbw


def test_nccl_bw_accepts() -> None:
    assert lab08.nccl_tests_bandwidth(lab08._ref_nccl_bw())
    assert lab08.nccl_tests_bandwidth(lambda s, t, c, n: (bw.algbw(s, t / 1e6), bw.busbw(s, t / 1e6, c, n)))


@pytest.mark.parametrize("wrong,cause", [
    (lambda s, t, c, n: (s / t / 1e9, s / t / 1e9 * bw.busbw_factor(c, n)), "microseconds"),
    (lambda s, t, c, n: (s / (t * 1e-3) / 1e9, s / (t * 1e-3) / 1e9 * bw.busbw_factor(c, n)), "not milliseconds"),
    (lambda s, t, c, n: (s / (t * 1e-6) / 1e9, s / (t * 1e-6) / 1e9), "not algbw itself"),
    (lambda s, t, c, n: (s / (t * 1e-6) / 1e9, s / (t * 1e-6) / 1e9 * 2 * (n - 1) / n), "all_reduce's factor"),
    (lambda s, t, c, n: (s / (t * 1e-6) / 1e9, s / (t * 1e-6) / 1e9 * (n - 1) / n), "2(n-1)/n, not (n-1)/n"),
    (lambda s, t, c, n: (8 * s / (t * 1e-6) / 1e9, 8 * s / (t * 1e-6) / 1e9 * bw.busbw_factor(c, n)), "gigabits"),
    (lambda s, t, c, n: (s / (t * 1e-6) / 2**30, s / (t * 1e-6) / 2**30 * bw.busbw_factor(c, n)), "GiB/s"),
])
def test_nccl_bw_rejects(wrong: Any, cause: str) -> None:
    r = lab08.nccl_tests_bandwidth(wrong)
    assert r.status == "failed" and cause in (r.cause or ""), r.cause


def test_nccl_bw_shape_and_skeleton() -> None:
    assert lab08.nccl_tests_bandwidth(lambda s, t, c, n: 3.0).status == "failed"
    assert lab08.nccl_tests_bandwidth(lambda s, t, c, n: None).status == "unsolved"


# ---------------------------------------------------------------------------------------------- 08.allreduce-dgx


def _times(bytes_per_grad: float = 4, bidirectional: bool = False, factor: bool = True) -> dict[str, float]:
    out = {}
    for name in lab08.ALLREDUCE_SYSTEMS:
        s = hw.system(name)
        n = int(s.gpu_count.value)
        B = s.gpu_model.nvlink_bandwidth.value / (1 if bidirectional else 2)
        f = 2 * (n - 1) / n if factor else 1
        out[name] = f * 300e6 * bytes_per_grad / (B * 1e9) * 1e3
    return out


def test_allreduce_dgx_accepts() -> None:
    assert lab08.allreduce_across_dgx(_times())
    assert lab08.allreduce_across_dgx({k.lower(): v for k, v in _times().items()})  # names normalised
    assert lab08.allreduce_across_dgx(lab08._allreduce_ms())


@pytest.mark.parametrize("answer,cause", [
    (_times(bidirectional=True), "bidirectional"),
    (_times(bytes_per_grad=2), "FP16"),
    (_times(factor=False), "2(n-1)/n factor is missing"),
    ({k: v / 1e3 for k, v in _times().items()}, "seconds"),
    ({k: v * 8 for k, v in _times().items()}, "bits"),
])
def test_allreduce_dgx_rejects(answer: dict, cause: str) -> None:
    r = lab08.allreduce_across_dgx(answer)
    assert r.status == "failed" and cause in (r.cause or ""), r.cause


def test_allreduce_dgx_shape() -> None:
    assert lab08.allreduce_across_dgx({k: ... for k in lab08.ALLREDUCE_SYSTEMS}).status == "unsolved"
    assert lab08.allreduce_across_dgx({"DGX-2": 15.0}).status == "failed"
    assert lab08.allreduce_across_dgx({**_times(), "DGX-9": 1.0}).status == "failed"
    assert lab08.allreduce_across_dgx([1, 2]).status == "failed"


# ---------------------------------------------------------------------------------------------- 08.scaling-efficiency


def test_scaling_accepts() -> None:
    assert lab08.data_parallel_scaling(lab08._ref_scaling())

    def via_labkit(c: float, a: float, n: int, f: float) -> tuple[float, float]:
        step, _ = co.step_time(c, a if n > 1 else 0.0, f)
        return n * c / step, c / step

    assert lab08.data_parallel_scaling(via_labkit)


@pytest.mark.parametrize("wrong,cause", [
    (lambda c, a, n, f: (n, 1.0), "ideal"),
    (lambda c, a, n, f: (n * c / (c + a), c / (c + a)), "overlap is ignored"),
    (lambda c, a, n, f: (n * c / max(c, a), c / max(c, a)), "perfect overlap"),
    (lambda c, a, n, f: (c / (c + a - min(a, f * c)), c / (c + a - min(a, f * c))), "speedup is n times"),
])
def test_scaling_rejects(wrong: Any, cause: str) -> None:
    r = lab08.data_parallel_scaling(wrong)
    assert r.status == "failed" and cause in (r.cause or ""), (r.message, r.cause)


def test_scaling_percent_and_n1() -> None:
    ref = lab08._ref_scaling()
    r = lab08.data_parallel_scaling(lambda c, a, n, f: (ref(c, a, n, f)[0], 100 * ref(c, a, n, f)[1]))
    assert r.status == "failed" and "fraction" in (r.cause or "")

    def no_n1(c: float, a: float, n: int, f: float) -> tuple[float, float]:
        step = c + a - min(a, f * c)
        return n * c / step, c / step

    r = lab08.data_parallel_scaling(no_n1)
    assert r.status == "failed" and "one GPU" in (r.cause or "")


# ---------------------------------------------------------------------------------------------- 08.mig


def test_mig_accepts_and_rejects() -> None:
    s = hw.system("DGX A100")
    assert lab08.mig_slices({"per_gpu": 7, "memory_gb": 5})
    assert lab08.mig_slices(lab08._ref_mig())
    cases = [
        ({"per_gpu": s.mig_instances.value, "memory_gb": 5}, "whole DGX A100"),
        ({"per_gpu": 8, "memory_gb": 5}, "at most 7"),
        ({"per_gpu": 7, "memory_gb": 40 / 7}, "8 slices"),
        ({"per_gpu": 7, "memory_gb": 40}, "whole GPU"),
        ({"per_gpu": 7, "memory_gb": 10}, "40 GB A100"),
    ]
    for answer, cause in cases:
        r = lab08.mig_slices(answer)
        assert r.status == "failed" and cause in (r.cause or ""), (answer, r.cause)
    assert lab08.mig_slices({"per_gpu": ..., "memory_gb": ...}).status == "unsolved"
    assert lab08.mig_slices({"per_gpu": 7}).status == "failed"


# ---------------------------------------------------------------------------------------------- registry


def test_lab08_exercises_registered_with_hints_and_references() -> None:
    ids = [row[0] for row in check.exercises("08.")]
    assert ids == sorted(["08.ring-step", "08.nccl-busbw", "08.allreduce-dgx", "08.scaling-efficiency", "08.mig"])
    from labkit.check.core import _REGISTRY

    for ex_id in ids:
        ex = _REGISTRY[ex_id]
        assert len(ex.hints) == 3 and ex.reference is not None
        assert ex.reference() is not None


def test_check_names_do_not_clash() -> None:
    import importlib
    import pkgutil

    import labkit.check as pkg

    names: dict[str, str] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("lab"):
            mod = importlib.import_module(f"labkit.check.{info.name}")
            for name, obj in vars(mod).items():
                if callable(obj) and getattr(obj, "exercise_id", None):
                    assert name not in names or names[name] == info.name, f"{name} in {names.get(name)} and {info.name}"
                    names[name] = info.name
    assert {"ring_step", "nccl_tests_bandwidth", "allreduce_across_dgx", "data_parallel_scaling", "mig_slices"} <= set(names)
    assert np is not None
