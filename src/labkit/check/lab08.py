"""Checks for lab 08 (collectives and scaling): one ring all-reduce step on NumPy arrays, nccl-tests' algbw and
busbw, NVLS busbw on a DGX H200, all-reduce time across DGX generations, data-parallel scaling efficiency, and MIG
slices.

Expected values come from :mod:`labkit.hw`, :mod:`labkit.bandwidth` and :mod:`labkit.collectives` (never typed in
here). Each check names the usual slip when an answer matches it: the missing 2(n-1)/n factor, a bidirectional
figure used as per direction, bits for bytes, microseconds for seconds. Everything is NumPy and arithmetic: the
same in ``gpu`` and ``sim`` mode, milliseconds per check.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .answers import close, number, ratio_cause
from .core import Failed, Unsolved, exercise
from .numeric import call_answer, dict_answer, expect, need_function, pair_answer

RS, AG = "reduce-scatter", "all-gather"
ALLREDUCE_SYSTEMS = ("DGX-1 (V100)", "DGX-2", "DGX A100", "DGX H100")
PARAMS = 300e6  # the DGX-2 talk's speech model (FACTS A)


def _call(fn: Any, *args: Any) -> Any:
    need_function(fn, cause="pass the function itself, without calling it.")
    return call_answer(fn, *args, what="your function", tail=".", keep=(Failed, Unsolved))


# ---------------------------------------------------------------------------------------------- 08.ring-step


def _ref_ring_step() -> Callable[..., None]:
    from labkit.dist.collectives import ring_step

    return ring_step


def _variant_step(kind: str) -> Callable[[list[list[np.ndarray]], str, int], None]:
    """Wrong steps a learner typically writes, to name the slip when the learner's state matches one."""

    def step(chunks: list[list[np.ndarray]], phase: str, s: int) -> None:
        n = len(chunks)
        if n == 1:
            return
        shift = 0 if phase == RS else 1
        sends = []
        for g in range(n):
            c = (g + shift - s) % n
            dst = (g + 1) % n
            if kind == "left":
                dst, c = (g - 1) % n, (g - shift + s) % n
            elif kind == "plus":
                c = (g - shift + s) % n
            elif kind == "gather-same-chunk":
                c = (g - s) % n
            sends.append((g, dst, c))
        payload = [chunks[g][c].copy() for g, _, c in sends]
        for (g, dst, c), data in zip(sends, payload):
            add = phase == RS
            if kind == "overwrite-scatter":
                add = False
            if kind == "add-gather":
                add = True
            if add:
                chunks[dst][c] += data
            else:
                chunks[dst][c][...] = data

    return step


_VARIANT_CAUSES = {
    "left": "you send to GPU g - 1. That ring works too, but this exercise's ring sends to GPU (g + 1) % n, "
    "so chunk indices differ; follow the schedule in the task.",
    "plus": "the chunk index runs the wrong way round the ring: GPU g sends chunk (g - step) % n in the reduce-scatter "
    "(and (g + 1 - step) % n in the all-gather), not g + step.",
    "gather-same-chunk": "in the all-gather GPU g sends the chunk it finished, (g + 1 - step) % n, not (g - step) % n: "
    "after the reduce-scatter GPU g holds the complete chunk (g + 1) % n.",
    "overwrite-scatter": "in the reduce-scatter the receiver must ADD the chunk to its own copy (+=), not replace it.",
    "add-gather": "in the all-gather the receiver must REPLACE its copy with the complete chunk (=), not add to it: "
    "the chunk is already the full sum.",
}


def _fresh(n: int, size: int, dtype: Any, seed: int) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    from labkit.dist.collectives import split

    rng = np.random.default_rng(seed)
    bufs = [rng.integers(-50, 50, size).astype(dtype) for _ in range(n)]  # integers: sums are exact in any order
    if np.dtype(dtype) == np.float64:  # plus multiples of 2**-30: still exact in any order in float64, but not
        for b in bufs:  # representable in float32, so a step that goes through float32 shows
            b += rng.integers(1, 1 << 20, size) * 2.0**-30
    return bufs, [split(b, n) for b in bufs]


def _state(chunks: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    return [[c.copy() for c in row] for row in chunks]


def _same(a: list[list[np.ndarray]], b: list[list[np.ndarray]]) -> bool:
    return all(np.array_equal(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def _first_diff(a: list[list[np.ndarray]], b: list[list[np.ndarray]]) -> tuple[int, int, int] | None:
    for g, (ra, rb) in enumerate(zip(a, b)):
        for c, (x, y) in enumerate(zip(ra, rb)):
            if x.shape != y.shape:
                return g, c, -1
            bad = np.flatnonzero(x != y)
            if bad.size:
                return g, c, int(bad[0])
    return None


@exercise("08.ring-step", kind="code", reference=_ref_ring_step)
def ring_step(fn: Any) -> str:
    """Grade ``fn(chunks, phase, step)``: one ring all-reduce step, in place, where ``chunks[g][c]`` is GPU g's copy of
    chunk c. Run over every step of both phases for n = 1 to 12 (fresh each run) and sizes that n does not divide."""
    from labkit.dist.collectives import ring_schedule
    from labkit.dist.collectives import ring_step as ref

    from .draws import between, not_multiple
    from .harness import rng

    changed_any = False
    # fresh buffers and sizes each run (n does not divide most of them); n from 1 to 12, one size below n
    cases = [
        (4, not_multiple(9, 40, 4)),
        (3, not_multiple(7, 30, 3)),
        (2, not_multiple(3, 21, 2)),
        (8, not_multiple(17, 60, 8)),
        (5, 5),
        (8, between(2, 7)),
        (1, between(2, 9)),
        (3, not_multiple(900, 1100, 3)),
        (between(6, 12), between(13, 50)),
    ]
    seed = int(rng().integers(0, 2**31))
    for k, (n, size) in enumerate(cases):
        dtype = np.float64 if k % 2 == 0 else np.float32
        bufs, mine = _fresh(n, size, dtype, seed=seed + k)
        pieces = [list(row) for row in mine]  # each chunk is a piece of its GPU's buffer, as in ring_allreduce
        inputs = [b.copy() for b in bufs]
        _, want = _fresh(n, size, dtype, seed=seed + k)
        variants = {name: _fresh(n, size, dtype, seed=seed + k)[1] for name in _VARIANT_CAUSES}
        for phase in (RS, AG):
            for s in range(n - 1):
                before = _state(mine)
                result = _call(fn, mine, phase, s)
                if isinstance(result, list) and result is not mine:
                    raise Failed(
                        "your function returned a new list; it should change `chunks` in place (and return nothing).",
                        cause="write into chunks[dst][c] (+= or [...] =) instead of building new arrays.",
                    )
                rebound = next(
                    ((g, c) for g, row in enumerate(mine) for c, piece in enumerate(row) if piece is not pieces[g][c]), None
                )
                if rebound is not None:
                    g, c = rebound
                    raise Failed(
                        f"n = {n}, {phase} step {s}: chunks[{g}][{c}] was replaced by a new array instead of "
                        "written into: the chunk is a piece of GPU" + f"{g}'s buffer, so the data never reaches it.",
                        cause="write into the chunk in place: `chunks[dst][c][:] = ...` or `chunks[dst][c] += ...`.",
                    )
                ref(want, phase, s)
                for name, state in variants.items():
                    _variant_step(name)(state, phase, s)
                if not _same(before, mine):
                    changed_any = True
                if _same(mine, want):
                    for name, state in variants.items():  # keep the variants in step with the right answer
                        variants[name] = _state(want)
                    continue
                if not changed_any:
                    raise Unsolved("your step does not change any chunk yet; write the sends of one step.")
                cause = next((_VARIANT_CAUSES[nm] for nm, st in variants.items() if _same(mine, st)), None)
                if cause is None and _same(before, mine):
                    cause = f"this {phase} step changed nothing; every GPU sends one chunk in every step."
                if cause is None:
                    full = sum(np.sum(b) for b in inputs)
                    if phase == RS and s == 0 and n > 2 and math.isclose(float(sum(np.sum(c) for c in mine[0])), float(full)):
                        cause = "that looks like the whole sum in one go; a step moves one chunk per GPU to its neighbour only."
                g, c, i = _first_diff(mine, want) or (0, 0, 0)
                if (
                    cause is None
                    and dtype == np.float64
                    and i >= 0
                    and mine[g][c].shape == want[g][c].shape
                    and np.allclose(mine[g][c], want[g][c], rtol=0, atol=4e-6 * (1 + float(np.abs(want[g][c]).max())))
                ):
                    # float32 rounds each operand by up to 6e-8 of its size: a sum that cancels keeps that error
                    cause = (
                        "the values are float64, but this step sent them through float32 (astype(np.float32), or a "
                        "float32 scratch buffer): they lose their last digits. Keep the chunks' dtype "
                        "(np.empty_like(chunk), chunk.copy())."
                    )
                sends = ", ".join(f"GPU{a}->GPU{b} chunk {ch}" for a, b, ch in ring_schedule(n, phase, s)[:3])
                where = f"GPU{g}'s chunk {c}" + (f", element {i}" if i >= 0 else " has the wrong shape")
                raise Failed(
                    f"n = {n}, {size} elements, {phase} step {s}: {where} differs from the expected state "
                    f"(this step's sends: {sends}{', ...' if n > 3 else ''}).",
                    cause=cause,
                )
        total = np.sum(np.stack(inputs), axis=0)
        for g in range(n):
            if not np.array_equal(np.concatenate(mine[g]) if n else mine[g], total):
                raise Failed(f"n = {n}: after all steps GPU{g} does not hold the sum.")
    if not changed_any:
        raise Unsolved("your step does not change any chunk yet; write the sends of one step.")
    return (
        "correct: 2(n-1) steps, one chunk per GPU per step, and every GPU ends with the sum, for n = "
        f"{', '.join(str(n) for n in sorted({n for n, _ in cases[:-1]}))} and one n drawn from 6 to 12, fresh sizes "
        "n does not divide and one smaller than n."
    )


# ---------------------------------------------------------------------------------------------- 08.nccl-busbw


def _ref_nccl_bw() -> Callable[[float, float, str, int], tuple[float, float]]:
    from labkit.gpu import bandwidth as bw

    def nccl_bw(size_bytes: float, time_us: float, collective: str, n: int) -> tuple[float, float]:
        a = bw.algbw(size_bytes, time_us * 1e-6)
        return a, a * bw.busbw_factor(collective, n)

    return nccl_bw


def _algbw_cause(got: float, want: float, busbw: float, size: int, coll: str) -> str | None:
    """The likely slip behind a wrong algbw ``got`` (``want`` is right, ``busbw`` the right busbw)."""
    from .slips import int32_wrap_cause

    cause = ratio_cause(
        got,
        want,
        {
            1e-6: "the time is in microseconds: multiply by 1e-6 to get seconds.",
            1e-3: "1000 times too small: TB/s where GB/s are asked (bytes/s divided by 10^12, not 10^9), or the "
            "time taken as milliseconds: it is in microseconds, not milliseconds; multiply by 1e-6.",
            1e3: "1000 times the right figure: MB/s where GB/s are asked (bytes/s divided by 10^6, not 10^9), or "
            "the time taken as nanoseconds: it is in microseconds (1e-6 s).",
            1e9: "that is bytes per second; divide by 10^9 for GB/s.",
            8.0: "that is gigabits per second; nccl-tests reports bytes.",
            1e9 / 2**30: "that is GiB/s (2^30); nccl-tests and the course use GB/s (10^9 bytes/s).",
        },
    )
    if cause is None and close(got, busbw) and coll != "broadcast":
        cause = "algbw is size / time only; the factor belongs to busbw."
    if cause is None:
        cause = int32_wrap_cause(got, want, size)
    return cause


def _busbw_cause(got: float, algbw: float, coll: str, n: int) -> str | None:
    """The likely slip behind a wrong busbw ``got``, from the learner's own ``algbw``."""
    from labkit.gpu import bandwidth as bw

    if close(got, algbw) and coll != "broadcast":
        return f"busbw is algbw times the collective's factor ({bw.busbw_formula(coll)} for {coll}), not algbw itself."
    if coll in ("all_gather", "reduce_scatter") and close(got, algbw * bw.busbw_factor("all_reduce", n)):
        return f"2(n-1)/n is all_reduce's factor; {coll} moves each byte around the ring once: (n-1)/n."
    if coll == "all_reduce" and close(got, algbw * (n - 1) / n):
        return "all_reduce is a reduce-scatter plus an all-gather: its factor is 2(n-1)/n, not (n-1)/n."
    if close(got, algbw * 2 * n / (n - 1)) or close(got, algbw * n / (n - 1)):
        return "the factor is upside down: multiply by (n-1)/n, not n/(n-1)."
    if close(got, algbw * 2):
        return "the factor depends on n: 2(n-1)/n for all_reduce (it approaches 2 only for large n)."
    return None


def _nccl_cases() -> list[tuple[int, float, str, int]]:
    """Fresh sizes and times each run, every collective, rings of 2 to 72 GPUs (n = 2: all_reduce's factor is 1),
    one size past 2^31 bytes (int32 byte arithmetic overflows there)."""
    from .draws import choice
    from .harness import rng

    r = rng()
    drawn = [0]

    def draw(coll: str, n: int) -> tuple[int, float, str, int]:
        # sizes alternate between powers of two (MiB, GiB) and decimal ones (GB): both kinds on every run
        drawn[0] += 1
        size = int(2 ** int(r.integers(20, 33))) if drawn[0] % 2 else int(r.integers(1, 10)) * 10**9
        return size, float(round(size / (r.uniform(20, 400) * 1e3), 1)), coll, n  # a time for 20 to 400 GB/s

    cases = [
        draw("all_reduce", 8),
        draw("all_gather", 8),
        draw("reduce_scatter", 4),
        draw("all_reduce", 16),
        draw("broadcast", int(choice((4, 8)))),  # broadcast's factor is 1 for every n
        draw("all_gather", 2),
        draw("all_reduce", 2),
    ]
    cases += [draw(coll, int(r.integers(3, 73))) for coll in ("all_reduce", "all_gather", "reduce_scatter")]  # odd rings too
    big = int(r.integers(3, 9)) * 2**30 + int(r.integers(1, 2**20))  # past 2^31 bytes: int32 byte arithmetic overflows
    cases[3] = (big, float(round(big / (r.uniform(20, 400) * 1e3), 1)), "all_reduce", 16)
    return cases


@exercise("08.nccl-busbw", kind="numeric", reference=_ref_nccl_bw)
def nccl_tests_bandwidth(fn: Any) -> str:
    """Grade ``fn(size_bytes, time_us, collective, n) -> (algbw, busbw)`` in GB/s, as nccl-tests computes them."""
    from labkit.gpu import bandwidth as bw

    for size, t_us, coll, n in _nccl_cases():
        a_got, b_got = pair_answer(_call(fn, size, t_us, coll, n), ("algbw", "busbw"))
        a_want = bw.algbw(size, t_us * 1e-6)
        b_want = a_want * bw.busbw_factor(coll, n)
        call = f"nccl_bw({size}, {t_us}, {coll!r}, {n})"
        expect(
            a_got,
            a_want,
            call,
            "algbw",
            " GB/s",
            lambda: (
                _algbw_cause(a_got, a_want, b_want, size, coll)
                or "algbw = size_bytes / (time_us × 1e-6 s) / 1e9: bytes over seconds, in GB/s."
            ),
        )
        expect(
            b_got,
            b_want,
            call,
            "busbw",
            " GB/s",
            lambda: (
                _busbw_cause(b_got, a_got, coll, n)
                or "busbw = algbw × the collective's factor: 2(n-1)/n for all_reduce, (n-1)/n for all_gather and "
                "reduce_scatter, 1 for broadcast."
            ),
        )
    return (
        "correct: algbw = size / time; busbw = algbw x 2(n-1)/n for all_reduce and (n-1)/n for all_gather, so a "
        "faster-looking all_gather can load the links no more than an all_reduce."
    )


# ---------------------------------------------------------------------------------------------- 08.allreduce-dgx


def _allreduce_ms() -> dict[str, float]:
    from labkit.gpu import bandwidth as bw

    from .. import hw

    out = {}
    for name in ALLREDUCE_SYSTEMS:
        s = hw.system(name)
        n = int(s.gpu_count.value)
        per_dir = s.gpu_model.nvlink_bandwidth.to("GB/s").value / 2
        out[s.name] = bw.busbw_factor("all_reduce", n) * PARAMS * 4 / (per_dir * 1e9) * 1e3
    return out


@exercise("08.allreduce-dgx", kind="numeric", reference=_allreduce_ms)
def allreduce_across_dgx(answer: Any) -> str:
    """Grade ``{system: milliseconds}`` for a bandwidth-only ring all-reduce of 300 M FP32 gradients over all the GPUs of
    DGX-1 (V100), DGX-2, DGX A100 and DGX H100, each GPU sending at its NVLink bandwidth per direction."""
    from .. import hw

    if not isinstance(answer, dict):
        raise Failed(f"expected a dict {{system name: milliseconds}}, got {type(answer).__name__}.")
    want = _allreduce_ms()
    got: dict[str, Any] = {}
    for key, value in answer.items():
        try:
            got[hw.system(str(key)).name] = value
        except Exception:
            raise Failed(
                f"{key!r} is not a system labkit knows.", cause=f"use the names {', '.join(ALLREDUCE_SYSTEMS)}."
            ) from None
    missing = [s for s in want if s not in got]
    if missing:
        raise Failed(f"the dict lacks {', '.join(missing)}.")
    if all(got[s] is Ellipsis or got[s] is None for s in want):
        raise Unsolved("fill in the times (milliseconds) for the four systems.")
    for s, w in want.items():
        if got[s] is Ellipsis or got[s] is None:
            raise Unsolved(f"{s} is still `...`.")
        g = number(got[s], f"the time for {s}")
        if not close(g, w, 0.02):
            n = int(hw.system(s).gpu_count.value)
            f = 2 * (n - 1) / n
            cause = ratio_cause(
                g,
                w,
                {
                    0.5: "that is half: the NVLink figure in labkit.hw is bidirectional (both directions added); a GPU sends "
                    "at half of it, OR you used 2 bytes per gradient (FP16); these are FP32 (4 bytes).",
                    1 / f: "the 2(n-1)/n factor is missing: each GPU sends 2(n-1)/n x the buffer, not the buffer once.",
                    1 / (2 * f): "the 2(n-1)/n factor is missing and the bandwidth is the bidirectional figure.",
                    1e3: "that is microseconds; report milliseconds.",
                    1e-3: "that is seconds; report milliseconds.",
                    8.0: "that divides bits by bytes per second: 300 M x 4 bytes is 1.2e9 bytes, and GB/s are bytes.",
                    0.125: "the bandwidth was read as gigabits per second; NVLink figures in labkit.hw are GB/s (bytes).",
                    2.0: "that is twice the answer: FP32 gradients are 4 bytes (not 8), and per direction is half the "
                    "bidirectional figure (not a quarter).",
                },
            )
            raise Failed(
                f"{s}: {g:.4g} ms, expected {w:.4g} ms (ring, {n} GPUs, bandwidth only).",
                cause=cause
                or f"time = 2(n-1)/n × 300e6 × 4 bytes / (one GPU's NVLink rate per direction, half of labkit.hw's "
                f"bidirectional figure, in bytes/s), in milliseconds; n = {n} here.",
            )
    rows = "; ".join(f"{s} {w:.1f} ms" for s, w in want.items())
    return f"correct: {rows}. The DGX-2 reduces twice as many GPUs in about the time of a DGX-1; NVSwitch generations cut it further."


# ---------------------------------------------------------------------------------------------- 08.scaling-efficiency


def _ref_scaling() -> Callable[[float, float, int, float], tuple[float, float]]:
    def data_parallel(compute_s: float, allreduce_s: float, n: int, overlap: float = 0.0) -> tuple[float, float]:
        hidden = min(allreduce_s, overlap * compute_s) if n > 1 else 0.0
        step = compute_s + (allreduce_s if n > 1 else 0.0) - hidden
        speedup = n * compute_s / step
        return speedup, speedup / n

    return data_parallel


def _speedup_cause(got: float, efficiency: float, c: float, a: float, n: int, f: float) -> str | None:
    """The likely slip behind a wrong speedup ``got`` for compute ``c``, all-reduce ``a``, ``n`` GPUs, overlap ``f``
    (``efficiency`` is the right efficiency)."""
    if n == 1:
        return "with one GPU there is nothing to all-reduce: speedup 1."
    if close(got, n):
        return "n x is the ideal; the all-reduce makes each step longer than compute_s."
    if close(got, n * c / (c + a)) and f > 0:
        return "the overlap is ignored: up to overlap x compute_s of the all-reduce hides behind the backward pass."
    if close(got, n * c / max(c, a)) and f < 1:
        return "max(compute, all-reduce) assumes perfect overlap; only overlap x compute_s can hide communication."
    if close(got, c / (c + a)) or close(got, efficiency):
        return "that is the efficiency; the speedup is n times it."
    if close(got, n * c / (c + a - f * c)) and f * c > a:
        return (
            "the hidden part is capped at the all-reduce itself: `hidden = min(allreduce_s, overlap * compute_s)`; "
            "overlap x compute_s larger than the all-reduce hides only the all-reduce."
        )
    if got > n * (1 + 1e-9):
        return (
            f"a speedup above n = {n} is impossible here (each GPU does the same work per step and waits for the "
            "all-reduce): the hidden part is at most the all-reduce, `min(allreduce_s, overlap * compute_s)`."
        )
    return None


def _efficiency_cause(got: float, want: float, speedup: float) -> str | None:
    """The likely slip behind a wrong efficiency ``got`` (``speedup`` is the right speedup)."""
    if close(got, 100 * want):
        return "give the efficiency as a fraction (0.8), not a percentage (80)."
    if close(got, speedup):
        return "efficiency = speedup / n."
    return None


@exercise("08.scaling-efficiency", kind="code", reference=_ref_scaling)
def data_parallel_scaling(fn: Any) -> str:
    """Grade ``fn(compute_s, allreduce_s, n, overlap) -> (speedup, efficiency)`` for weak scaling: each GPU keeps its
    batch; an all-reduce of the gradients follows each step; ``overlap`` x compute can hide communication."""
    from .harness import rng

    ref = _ref_scaling()
    r = rng()

    def ms(lo: float, hi: float) -> float:
        return float(round(r.uniform(lo, hi), 4))

    # fresh times each run: communication longer than compute with some overlap, no overlap, all-reduce fully
    # hidden (overlap 1, all-reduce shorter than compute), partly hidden, no communication, and one GPU
    cases = [
        (ms(0.005, 0.015), ms(0.02, 0.04), 16, 0.5),
        (ms(0.08, 0.12), ms(0.01, 0.03), 8, 0.0),
        (ms(0.04, 0.06), ms(0.005, 0.015), 4, 0.0),
        (ms(0.06, 0.09), ms(0.01, 0.02), int(r.integers(2, 65)), 0.5),
        (ms(0.008, 0.012), ms(0.003, 0.006), 8, 1.0),
        (ms(0.05, 0.15), 0.0, 8, 0.0),
        (ms(0.05, 0.15), ms(0.01, 0.06), 1, 0.0),
        (ms(0.05, 0.15), ms(0.01, 0.06), 1, 0.5),  # one GPU with overlap: still nothing to hide, speedup 1
        (ms(0.02, 0.05), ms(0.01, 0.04), 2, float(round(r.uniform(0.1, 0.9), 2))),  # two GPUs: the smallest ring
        (ms(0.01, 0.1), ms(0.01, 0.1), int(r.integers(2, 257)), float(round(r.uniform(0.1, 0.9), 2))),
    ]
    for c, a, n, f in cases:
        s_got, e_got = pair_answer(_call(fn, c, a, n, f), ("speedup", "efficiency"))
        s_want, e_want = ref(c, a, n, f)
        call = f"data_parallel({c}, {a}, {n}, overlap={f})"
        expect(s_got, s_want, call, "speedup", "", lambda: _speedup_cause(s_got, e_want, c, a, n, f))
        expect(e_got, e_want, call, "efficiency", "", lambda: _efficiency_cause(e_got, e_want, s_want))
    return (
        "correct: efficiency = compute / step. The all-reduce costs the same fraction whatever n is once n is large; "
        "faster GPUs shrink the compute and so lower the efficiency unless the links grow too."
    )


# ---------------------------------------------------------------------------------------------- 08.mig


def _ref_mig() -> dict[str, float]:
    from labkit.dist.collectives import mig_summary

    m = mig_summary("DGX A100")
    return {"per_gpu": m["instances_per_gpu"], "memory_gb": m["smallest_instance_memory_gb"]}


@exercise("08.mig", kind="numeric", reference=_ref_mig)
def mig_slices(answer: Any) -> str:
    """Grade ``{"per_gpu": ..., "memory_gb": ...}``: MIG instances per A100 of a DGX A100, and the memory (GB) of the
    smallest instance."""
    from labkit.dist.collectives import MIG_MEMORY_SLICES

    from .. import hw

    dict_answer(answer, ("per_gpu", "memory_gb"))
    want = _ref_mig()
    s = hw.system("DGX A100")
    per = number(answer["per_gpu"], "per_gpu")
    if close(per, want["per_gpu"]) and per != round(per):
        raise Failed(
            f"per_gpu = {per:g} is not a whole number: a GPU holds whole MIG instances.",
            cause="per_gpu counts MIG instances, which come whole: compute it from the whole counts in "
            "labkit.hw (mig_instances / gpu_count), not from a rounded or measured figure.",
        )
    if not close(per, want["per_gpu"]):
        cause = None
        if close(per, s.mig_instances.value):
            cause = f"{s.mig_instances.value:g} is the whole DGX A100 ({s.gpu_count.value:g} GPUs); divide by the GPU count."
        elif close(per, MIG_MEMORY_SLICES):
            cause = "memory comes in 8 slices, but compute in 7: at most 7 instances per A100."
        raise Failed(
            f"per_gpu is {per:g}, expected {want['per_gpu']:g}.",
            cause=cause
            or "per_gpu = the DGX A100's MIG instances (labkit.hw: mig_instances) divided by its GPU count: whole "
            "instances, at most 7 per A100.",
        )
    mem = number(answer["memory_gb"], "memory_gb")
    if not close(mem, want["memory_gb"]):
        full = s.gpu_model.memory_size.to("GB").value
        cause = None
        if close(mem, full / want["per_gpu"]):
            cause = (
                f"{full:g} GB / {want['per_gpu']:g} assumes memory splits like compute; MIG splits memory into "
                f"{MIG_MEMORY_SLICES} slices, and the smallest instance (1g) gets one."
            )
        elif close(mem, full):
            cause = "that is the whole GPU's memory; an instance gets a slice of it."
        elif close(mem, 80 / MIG_MEMORY_SLICES):
            cause = "the DGX A100 in labkit.hw has the 40 GB A100; use its memory_size."
        raise Failed(
            f"memory_gb is {mem:g}, expected {want['memory_gb']:g} GB.",
            cause=cause
            or f"the smallest instance (1g) gets one of the {MIG_MEMORY_SLICES} memory slices: the GPU's memory_size "
            f"in GB divided by {MIG_MEMORY_SLICES}.",
        )
    return (
        f"correct: {want['per_gpu']:g} instances per A100, the smallest with {want['memory_gb']:g} GB "
        f"(one of {MIG_MEMORY_SLICES} memory slices) and its own SMs, L2 slice and memory bandwidth."
    )


# ---------------------------------------------------------------------------------------------- 08.nvls-busbw

NVLS_SYSTEM = "DGX H200"


def _ref_nvls() -> dict[str, Any]:
    from labkit.gpu import bandwidth as bw

    from .. import hw

    s = hw.system(NVLS_SYSTEM)
    n = int(s.gpu_count.value)
    B = s.gpu_model.nvlink_bandwidth.to("GB/s").value / 2
    factor = bw.busbw_factor("all_reduce", n)
    # ring: time 2(n-1)/n S / B, so algbw = B / factor and busbw = B; NVLS: time S / B, algbw = B, busbw = factor x B
    return {"ring_busbw": B, "nvls_busbw": factor * B, "faster": "NVLS"}


@exercise("08.nvls-busbw", kind="numeric", reference=_ref_nvls)
def nvls_busbw(answer: Any) -> str:
    """Grade ``{"ring_busbw": GB/s, "nvls_busbw": GB/s, "faster": "Ring" or "NVLS"}``: the busbw nccl-tests would
    report for a large all-reduce over the 8 GPUs of a DGX H200 at the full NVLink rate, for a ring and for NVLS."""
    from .. import hw

    dict_answer(
        answer,
        ("ring_busbw", "nvls_busbw", "faster"),
        unsolved="one value is still `...`.",
        all_unsolved="fill in the three values.",
    )
    want = _ref_nvls()
    s = hw.system(NVLS_SYSTEM)
    n = int(s.gpu_count.value)
    B = want["ring_busbw"]
    f = want["nvls_busbw"] / B
    ring = number(answer["ring_busbw"], "ring_busbw")
    if not close(ring, B):
        cause = ratio_cause(
            ring,
            B,
            {
                2.0: "that is the bidirectional NVLink figure; a GPU sends at half of it in each direction.",
                1 / f: "that is the ring's algbw (S / time); busbw multiplies it by 2(n-1)/n, which gives back the link rate.",
                f: "for a ring, busbw is the per-direction link rate itself: the 2(n-1)/n of busbw cancels the 2(n-1)/n "
                "of the bytes a ring GPU sends.",
            },
        )
        raise Failed(
            f"ring_busbw is {ring:g} GB/s, expected {B:g}.",
            cause=cause
            or "for a ring, busbw = algbw × 2(n-1)/n, which comes back to the per-direction NVLink rate of one GPU: "
            "half of labkit.hw's bidirectional nvlink_bandwidth.",
        )
    nvls = number(answer["nvls_busbw"], "nvls_busbw")
    if not close(nvls, want["nvls_busbw"]):
        cause = ratio_cause(
            nvls,
            want["nvls_busbw"],
            {
                1 / f: "that is NVLS's algbw (each GPU sends S once, at B); nccl-tests still multiplies by 2(n-1)/n, "
                "because its busbw formula assumes a ring: hence a busbw above the link.",
                2.0: "that uses the bidirectional figure; per direction is half.",
                2 / f: "the factor is 2(n-1)/n (1.75 for 8 GPUs), not 2.",
            },
        )
        raise Failed(
            f"nvls_busbw is {nvls:g} GB/s, expected {want['nvls_busbw']:g}.",
            cause=cause
            or "NVLS: each GPU sends the buffer once at the per-direction rate B, so algbw = B; nccl-tests' busbw "
            "multiplies it by 2(n-1)/n all the same: busbw = 2(n-1)/n × B.",
        )
    faster = str(answer["faster"]).strip().lower()
    if faster != "nvls":
        raise Failed(
            f"faster is {answer['faster']!r}.",
            cause="NVLS sends S per GPU, the ring 2(n-1)/n x S, on the same links: NVLS takes less time.",
        )
    return (
        f"correct: on {n} GPUs a ring's busbw is at most the link rate ({B:g} GB/s per direction), NVLS's up to "
        f"2(n-1)/n = {f:g} x it ({want['nvls_busbw']:g} GB/s): the switch does the adding, so each GPU sends half as much."
    )
