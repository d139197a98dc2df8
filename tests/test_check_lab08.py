"""Lab 08 checks accept right answers (in their variants) and reject wrong ones with a likely cause."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from labkit import bandwidth as bw
from labkit import check, hw
from labkit import collectives as co
from labkit.check import core, lab08

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
    assert lab08.ring_step(core._get("08.ring-step").reference())
    assert lab08.ring_step(_step_without_copy)  # no read-before-write hazard in this schedule
    assert check.ring_step(core._get("08.ring-step").reference())  # reachable by name


def test_labkits_own_ring_step_is_not_an_answer() -> None:
    r = lab08.ring_step(co.ring_step)
    assert r.status == "failed" and "labkit.collectives.ring_step" in r.report(), r.report()


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
        sends = co.ring_schedule(len(out), phase, step)
        data = [out[src][c].copy() for src, _, c in sends]
        for (src, dst, c), d in zip(sends, data):
            if phase == co.RS:
                out[dst][c] += d
            else:
                out[dst][c][...] = d
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
        ({"per_gpu": 7.05, "memory_gb": 5}, "come whole"),  # within 1% of 7, but no GPU holds 7.05 instances
    ]
    for answer, cause in cases:
        r = lab08.mig_slices(answer)
        assert r.status == "failed" and cause in (r.cause or ""), (answer, r.cause)
    assert lab08.mig_slices({"per_gpu": ..., "memory_gb": ...}).status == "unsolved"
    assert lab08.mig_slices({"per_gpu": 7}).status == "failed"


# ---------------------------------------------------------------------------------------------- registry


def test_lab08_exercises_registered_with_hints_and_references() -> None:
    ids = [row[0] for row in check.exercises("08.")]
    assert ids == sorted(["08.ring-step", "08.nccl-busbw", "08.nvls-busbw", "08.allreduce-dgx", "08.scaling-efficiency",
                          "08.mig", "08.mpi-ring", "08.ddp-buckets", "08.nvl72-allreduce", "08.mig-b200"])
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


# ---------------------------------------------------------------------------------------------- numeric tolerances
# 08.allreduce-dgx passes within 2%, 08.mig and the functions within 1%; every plausible wrong answer lies further.
@pytest.mark.parametrize("factor, cause", [
    (0.5, "bidirectional"), (2.0, "twice"), (1e3, "microseconds"), (1e-3, "seconds"), (8.0, "bits"), (0.125, "gigabits"),
])
def test_allreduce_dgx_each_slip_is_named(factor: float, cause: str) -> None:
    r = lab08.allreduce_across_dgx({k: v * factor for k, v in _times().items()})
    assert r.status == "failed" and cause in (r.cause or ""), r.cause
    assert lab08.allreduce_across_dgx({k: v * 1.012 for k, v in _times().items()})  # rounded: passes


def test_allreduce_dgx_nearest_slip_lies_beyond_the_tolerance() -> None:
    for name in lab08.ALLREDUCE_SYSTEMS:
        n = int(hw.system(name).gpu_count.value)
        f = 2 * (n - 1) / n
        for ratio in (0.5, 1 / f, 1 / (2 * f), 2.0):
            assert abs(ratio - 1) > 2 * 0.02, (name, ratio)
    r = lab08.allreduce_across_dgx({**_times(), "DGX-2": "15"})
    assert r.status == "failed" and "should be a number, got str" in r.message


def test_mig_strings_and_near_misses() -> None:
    assert "should be a number" in lab08.mig_slices({"per_gpu": "7", "memory_gb": 5}).message
    assert lab08.mig_slices({"per_gpu": 7.0, "memory_gb": 5.0})
    assert not lab08.mig_slices({"per_gpu": 7, "memory_gb": 5.2})  # 4% off: not rounding


def test_fresh_cases_defeat_lookup_tables() -> None:
    ref_nccl = check.core._get("08.nccl-busbw").reference()
    old = {(2**30, 8123.4, "all_reduce", 8): ref_nccl(2**30, 8123.4, "all_reduce", 8)}
    assert lab08.nccl_tests_bandwidth(lambda s, t, c, n: old.get((s, t, c, n), (1.0, 1.0))).status == "failed"
    ref_scaling = lab08._ref_scaling()
    old_s = {(0.010, 0.030, 16, 0.5): ref_scaling(0.010, 0.030, 16, 0.5)}
    assert lab08.data_parallel_scaling(lambda c, a, n, f: old_s.get((c, a, n, f), (n, 1.0))).status == "failed"


def test_functions_returning_strings_are_rejected() -> None:
    ref_nccl = check.core._get("08.nccl-busbw").reference()
    r = lab08.nccl_tests_bandwidth(lambda s, t, c, n: tuple(f"{v:.6g}" for v in ref_nccl(s, t, c, n)))
    assert r.status == "failed" and "should be a number, got str" in r.message
    ref_scaling = lab08._ref_scaling()
    r = lab08.data_parallel_scaling(lambda c, a, n, f: (str(ref_scaling(c, a, n, f)[0]), ref_scaling(c, a, n, f)[1]))
    assert r.status == "failed" and "should be a number, got str" in r.message


def test_ring_step_cases_are_fresh() -> None:
    # a step that hard-codes the old fixed seed's buffers cannot exist any more: two runs see different data
    from labkit.check import lab08 as m

    seen = []
    real = m._fresh

    def spy(n, size, dtype, seed):
        seen.append(seed)
        return real(n, size, dtype, seed)

    try:
        m._fresh = spy
        lab08.ring_step(check.core._get("08.ring-step").reference())
        first = set(seen)
        seen.clear()
        lab08.ring_step(check.core._get("08.ring-step").reference())
    finally:
        m._fresh = real
    assert first != set(seen)


# ---------------------------------------------------------------------------------------------- 08.nvls-busbw


def test_nvls_busbw_accepts_the_model_and_names_slips() -> None:
    B = hw.system("DGX H200").gpu_model.nvlink_bandwidth.value / 2
    f = bw.busbw_factor("all_reduce", 8)
    assert lab08.nvls_busbw({"ring_busbw": B, "nvls_busbw": f * B, "faster": "NVLS"})
    assert lab08.nvls_busbw({"ring_busbw": B, "nvls_busbw": f * B, "faster": " nvls "})
    assert lab08.nvls_busbw({"ring_busbw": ..., "nvls_busbw": ..., "faster": ...}).status == "unsolved"
    slips = [
        ({"ring_busbw": 2 * B, "nvls_busbw": f * B, "faster": "NVLS"}, "bidirectional"),
        ({"ring_busbw": B / f, "nvls_busbw": f * B, "faster": "NVLS"}, "algbw"),
        ({"ring_busbw": B, "nvls_busbw": B, "faster": "NVLS"}, "assumes a ring"),
        ({"ring_busbw": B, "nvls_busbw": 2 * B, "faster": "NVLS"}, "not 2"),
        ({"ring_busbw": B, "nvls_busbw": f * B, "faster": "Ring"}, "less time"),
    ]
    for answer, words in slips:
        r = lab08.nvls_busbw(answer)
        assert r.status == "failed" and words in (r.cause or ""), (answer, r.report())
    assert lab08.nvls_busbw([1, 2]).status == "failed"
    assert lab08.nvls_busbw({"ring_busbw": B}).status == "failed"


def test_ring_step_calling_labkits_step_is_rejected_by_name() -> None:
    r = lab08.ring_step(lambda chunks, phase, step: co.ring_step(chunks, phase, step))
    assert r.status == "failed" and "labkit.collectives.ring_step" in r.message


# ---------------------------------------------------------------------------------------------- 08.nvl72-allreduce
def _nvl72(nbytes, n, *, B=900e9, ring_f=None, nvls_f=1.0, trays=None):
    if n == 1:
        return 0.0, 0.0, 1
    f = 2 * (n - 1) / n if ring_f is None else ring_f
    return f * nbytes / B, nvls_f * nbytes / B, (trays or (lambda k: -(-k // 4)))(n)


def test_nvl72_allreduce_accepts_the_model_and_a_hand_version() -> None:
    from labkit.check import lab08_nvl72 as N

    assert N.nvl72_allreduce(lambda s, n: _nvl72(s, n))
    assert check.nvl72_allreduce(lambda s, n: list(_nvl72(s, n)))  # reachable by name; a list is fine


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"B": 1800e9}, "bidirectional"),
        ({"ring_f": 1.0}, "2(n−1)/n"),
        ({"trays": lambda n: n // 4}, "round up"),
        ({"trays": lambda n: -(-n // 8)}, "4 GPUs"),
        ({"B": 50e9}, "one NVLink domain"),
    ],
)
def test_nvl72_allreduce_names_each_slip(kwargs, word) -> None:
    from labkit.check import lab08_nvl72 as N

    r = N.nvl72_allreduce(lambda s, n: _nvl72(s, n, **kwargs))
    assert not r and word in f"{r.message} {r.cause}", r.report()


def test_nvl72_allreduce_nvls_slip_skeleton_and_junk() -> None:
    from labkit.check import lab08_nvl72 as N

    r = N.nvl72_allreduce(lambda s, n: _nvl72(s, n, nvls_f=2 * (n - 1) / n if n > 1 else 1.0))
    assert not r and "about the buffer once" in r.cause
    assert N.nvl72_allreduce(lambda s, n: ...).status == "unsolved"
    assert not N.nvl72_allreduce(lambda s, n: 3.0) and not N.nvl72_allreduce(lambda s, n: (1.0, float("nan"), 2))
    r = N.nvl72_allreduce(lambda s, n: co.allreduce_time("GB200 NVL72", s, n, "nvls", 0).seconds)
    assert not r  # labkit's own model is out of reach while the answer runs
    cases = N._nvl72_cases()
    assert (3.0e8, 1) in cases and any(n == 72 for _, n in cases) and any(n % 4 for _, n in cases)


# ---------------------------------------------------------------------------------------------- 08.mig-b200
def _class(learners, instructors, per=7, per_dgx=8, with_instructors=True, ceil=True):
    lg = -(-learners // per) if ceil else learners // per
    gpus = lg + (instructors if with_instructors else 0)
    return gpus, -(-gpus // per_dgx), lg * per - learners


def test_mig_b200_agrees_with_labkit_mig_plan() -> None:
    from labkit import mig
    from labkit.check import lab08_nvl72 as N

    for learners, instructors in N._class_cases() + [(1, 0), (7, 0), (56, 0), (57, 8)]:
        p = mig.plan("B200", learners, instructor_gpus=instructors)
        assert N._ref_class(learners, instructors) == (p.gpus, p.dgx_systems_mixed, p.spare_slices)
    assert N.mig_b200_class(lambda ln, i: _class(ln, i))
    assert check.mig_b200_class(lambda ln, i: list(_class(ln, i)))  # reachable by name


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"ceil": False}, "round up"),
        ({"per": 8}, "not 8"),
        ({"with_instructors": False}, "instructors' whole GPUs"),
        ({"per_dgx": 7}, "8 GPUs"),
    ],
)
def test_mig_b200_names_each_slip(kwargs, word) -> None:
    from labkit.check import lab08_nvl72 as N

    r = N.mig_b200_class(lambda ln, i: _class(ln, i, **kwargs))
    assert not r and word in f"{r.message} {r.cause}", r.report()
    assert N.mig_b200_class(lambda ln, i: ...).status == "unsolved"
