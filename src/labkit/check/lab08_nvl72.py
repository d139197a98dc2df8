"""Checks for lab 08's Blackwell exercises: an all-reduce over a GB200 NVL72's NVLink domain (72 GPUs in 18 compute
trays, each tray its own operating-system node), ring against NVLS; and seating a class on MIG slices of DGX B200s.

Both are host functions graded on fresh arguments against labkit's own models (:mod:`labkit.dist.collectives`; the
MIG profiles of :mod:`labkit.hw`, as ``labkit.mig.plan`` uses them), with each plausible slip named.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from .core import Failed, Unsolved, exercise
from .harness import rng
from .numeric import need_function

NVL72 = "GB200 NVL72"
GPUS_PER_TRAY = 4  # a GB200 NVL72 compute tray: 2 Grace CPUs and 4 Blackwell GPUs, one operating system (hw.yml)
_REL = 1e-6


def _numbers(got: Any, name: str, count: int) -> tuple[float, ...]:
    """``got`` as ``count`` finite numbers, or the reason it is not."""
    if got is None or got is Ellipsis:
        raise Unsolved(f"{name} returns nothing yet.")
    if not isinstance(got, (tuple, list)) or len(got) != count:
        raise Failed(f"{name} returned {type(got).__name__} {got!r:.80}; return a tuple of {count} numbers.")
    out = []
    for v in got:
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise Failed(f"{name} returned {v!r:.60} among its numbers; every item must be a number.") from None
        if not math.isfinite(f):
            raise Failed(f"{name} returned {f} among its numbers; every item must be a finite number.")
        out.append(f)
    return tuple(out)


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= _REL * max(abs(want), 1e-30)


# --------------------------------------------------------------------------------------------- 08.nvl72-allreduce


def _nvl72_per_direction() -> float:
    from labkit import hw

    return hw.system(NVL72).gpu_model.nvlink_bandwidth.value / 2


def _ref_nvl72(nbytes: float, n_gpus: int) -> tuple[float, float, int]:
    """Bandwidth-only ring and NVLS all-reduce times over the first ``n_gpus`` GPUs of a GB200 NVL72, and the
    compute trays (operating-system nodes) they span."""
    from labkit.dist import collectives as co

    trays = math.ceil(n_gpus / GPUS_PER_TRAY)
    if n_gpus == 1:
        return 0.0, 0.0, 1
    B = _nvl72_per_direction()
    return (co.ring_cost(nbytes, n_gpus, B, 0).seconds, co.nvls_cost(nbytes, n_gpus, B, 0).seconds, trays)


def _reference_nvl72() -> Callable[[float, int], tuple[float, float, int]]:
    return _ref_nvl72


def _nvl72_cases() -> list[tuple[float, int]]:
    """Fixed cases that defeat shortcuts (one GPU, one tray, a GPU count that is not a multiple of 4, the whole rack),
    then fresh sizes and counts."""
    gen = rng()
    cases = [(float(int(gen.integers(10**6, 10**9))), 72), (3.0e8, 1), (float(int(gen.integers(10**5, 10**7))), 4)]
    cases.append((float(int(gen.integers(10**6, 10**9))), 2))  # the smallest ring: two GPUs are not one
    for _ in range(4):
        n = int(gen.integers(5, 72))
        n += n % 4 == 0  # never a whole number of trays
        cases.append((float(int(gen.integers(10**4, 10**10))), n))
    return cases


def _nvl72_slip(nbytes: float, n: int, got: tuple[float, ...], want: tuple[float, float, int]) -> str:
    """The likely cause of a wrong answer, from the ratios of the learner's figures to the right ones."""
    ring, nvls, trays = got
    r_ring = ring / want[0] if want[0] else math.nan
    r_nvls = nvls / want[1] if want[1] else math.nan
    f = 2 * (n - 1) / n
    if not _close(trays, want[2]):
        if trays == n // GPUS_PER_TRAY:
            return f"{n} GPUs fill {n // GPUS_PER_TRAY} trays of 4 and part of one more: round up (math.ceil)."
        if trays == math.ceil(n / 8) or trays == math.ceil(72 / 8):
            return "8 GPUs per node is a DGX/HGX board; an NVL72 compute tray holds 4 GPUs (and 2 Grace CPUs)."
        return "the trays are the operating-system nodes: 4 GPUs each, so the first n GPUs span ceil(n / 4) of them."
    if _close(r_ring, 0.5) and _close(r_nvls, 0.5):
        return "the NVLink figure in labkit.hw is bidirectional: each GPU sends at half of it per direction (900 GB/s)."
    if n > 1 and _close(r_ring, 1 / f):
        return "a ring GPU sends 2(n−1)/n × the buffer (reduce-scatter, then all-gather), not the buffer once."
    if n > 1 and _close(r_nvls, f):
        return (
            "with NVLS the switch adds and multicasts: each GPU sends (and receives) about the buffer once, not 2(n−1)/n times."
        )
    if n > 1 and _close(ring, f * nbytes / (50e9)):
        return (
            "that is InfiniBand NDR's 50 GB/s per GPU: inside an NVL72 the whole rack is one NVLink domain, "
            "so even GPUs in different trays talk over NVLink."
        )
    if n == 1:
        return "one GPU has nothing to reduce: both times are 0 (and it sits in one tray)."
    return "bandwidth term only, B = 900 GB/s per direction: ring 2(n−1)/n × S / B, NVLS S / B."


@exercise("08.nvl72-allreduce", kind="code", reference=_reference_nvl72)
def nvl72_allreduce(fn: Callable[[float, int], Any]) -> str:
    """Grade ``nvl72_allreduce(nbytes, n_gpus)`` -> ``(ring_seconds, nvls_seconds, trays)``: bandwidth-only all-reduce
    times over the first ``n_gpus`` GPUs of a GB200 NVL72, and how many compute trays (operating-system nodes) they span."""
    from .streams import call_learner

    need_function(fn, "a function nvl72_allreduce(nbytes, n_gpus)")
    cases = _nvl72_cases()
    for nbytes, n in cases:
        label = f"nvl72_allreduce({nbytes:.0f}, {n})"
        got = _numbers(call_learner(fn, nbytes, n, what=label), label, 3)
        want = _ref_nvl72(nbytes, n)
        if all(_close(g, w) if w else abs(g) <= 1e-15 for g, w in zip(got, want)):
            continue
        raise Failed(
            f"{label} returned ({got[0]:.6g}, {got[1]:.6g}, {got[2]:g}); expected ({want[0]:.6g}, {want[1]:.6g}, {want[2]}).",
            cause=_nvl72_slip(nbytes, n, got, want),
        )
    return (
        f"right on {len(cases)} fresh cases (1 to 72 GPUs, partial trays): over NVLink the ring's time barely grows from 8 "
        "to 72 GPUs, and NVLS sends each GPU's buffer about once, across 18 nodes."
    )


# --------------------------------------------------------------------------------------------- 08.mig-b200

MIG_GPU = "B200"


def _ref_class(learners: int, instructor_gpus: int) -> tuple[int, int, int]:
    """``(gpus, dgx_b200_systems, spare_slices)`` for one 1g slice per learner and whole GPUs for instructors, slices
    and whole GPUs sharing a system (mig.strategy=mixed). The same figures as ``labkit.mig.plan`` (a test holds
    them together); computed here from labkit.hw, since checks sit below the classroom layer."""
    from labkit import hw
    from labkit.hw.slices import smallest_mig_slices

    per_gpu = int(smallest_mig_slices(MIG_GPU)[1].value)
    per_system = int(hw.system("DGX B200").gpu_count.value)
    learner_gpus = math.ceil(learners / per_gpu)
    gpus = learner_gpus + instructor_gpus
    return gpus, math.ceil(gpus / per_system), learner_gpus * per_gpu - learners


def _reference_class() -> Callable[[int, int], tuple[int, int, int]]:
    return _ref_class


def _class_cases() -> list[tuple[int, int]]:
    """Fixed cases (exactly one DGX B200 of slices, one learner past a multiple of 7, a few learners and two instructors),
    then fresh classes."""
    gen = rng()
    cases = [(56, 0), (7 * int(gen.integers(2, 9)) + 1, 0), (int(gen.integers(1, 7)), 2)]
    for _ in range(4):
        cases.append((int(gen.integers(8, 300)), int(gen.integers(0, 5))))
    return cases


def _class_slip(learners: int, instructors: int, got: tuple[float, ...]) -> str:
    """Every plausible slip that gives exactly the learner's figures (several can on one class), or the rule."""
    lg = math.ceil(learners / 7)

    def plan(learner_gpus: int, extra: int = instructors, per_dgx: int = 8, per: int = 7) -> tuple[float, ...]:
        gpus = learner_gpus + extra
        return float(gpus), float(math.ceil(gpus / per_dgx)), float(learner_gpus * per - learners)

    slips = {
        f"{learners} learners fill {learners // 7} GPUs of 7 slices and part of one more: round up (math.ceil).": plan(
            learners // 7
        ),
        "a B200 holds 7 1g.23gb slices (mig.profile('B200').per_gpu), not 8: memory comes in eighths, compute in "
        "sevenths, and each 1g instance needs one seventh of the SMs.": plan(math.ceil(learners / 8), per=8),
        "the instructors' whole GPUs count too: GPUs = learner GPUs + instructor GPUs.": plan(lg, extra=0),
        "a DGX B200 has 8 GPUs (hw.system('DGX B200').gpu_count): systems = ceil(GPUs / 8).": plan(lg, per_dgx=7),
        "spare slices are the unused slices of the learners' GPUs; the instructors' GPUs are not cut.": plan(lg)[:2]
        + (float(lg * 7 - learners + 7 * instructors),),
    }
    matched = [cause for cause, figures in slips.items() if figures == got]
    if matched:
        return " Or: ".join(matched)
    return "learner GPUs = ceil(learners / 7); GPUs = that + instructors; systems = ceil(GPUs / 8); spare = 7 × learner GPUs − learners."


@exercise("08.mig-b200", kind="code", reference=_reference_class)
def mig_b200_class(fn: Callable[[int, int], Any]) -> str:
    """Grade ``b200_class(learners, instructor_gpus)`` -> ``(gpus, systems, spare_slices)``: one MIG 1g.23gb slice per
    learner on DGX B200s, whole B200s for instructors (the figures ``labkit.mig.plan`` gives)."""
    from .streams import call_learner

    need_function(fn, "a function b200_class(learners, instructor_gpus)")
    cases = _class_cases()
    for learners, instructors in cases:
        label = f"b200_class({learners}, {instructors})"
        got = _numbers(call_learner(fn, learners, instructors, what=label), label, 3)
        want = _ref_class(learners, instructors)
        if got == tuple(float(w) for w in want):
            continue
        raise Failed(
            f"{label} returned {tuple(int(g) if g.is_integer() else g for g in got)}; expected {want}.",
            cause=_class_slip(learners, instructors, got),
        )
    return f"right on {len(cases)} fresh classes: 7 slices per B200, 8 B200s per DGX, partial GPUs rounded up."
