"""Generic properties, declared once per exercise kind (issue 44, item 3), not per check.

Host functions (``labkit.check.properties``): every answer is called again with the same shapes and new values
(a cache keyed by shape, size or length fails), often enough that an answer wrong on 10% of calls fails with
probability ≥ 99% (a counter that is wrong on every tenth call fails every time), and returns the reference's type
(float32 for float64 fails). Kernels: the simulator runs the blocks of a grid in the schedule's order (reversed,
shuffled), and a passed kernel that computes in FP64 where labkit's reference does not gets the FP64 note in every
lab (lab 09's capstone too). About 15 s on one core.
"""

from __future__ import annotations

import contextlib
import io
import math
import random
from typing import Any, Callable

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402

from labkit import check  # noqa: E402
from labkit import precision as P  # noqa: E402
from labkit.check import properties  # noqa: E402


def _quiet(fn: Callable[..., Any], *args: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def _text(r: Any) -> str:
    return r.message + " " + (r.cause or "")


def test_repeats_catch_an_answer_wrong_on_10_percent_of_calls_with_99_percent() -> None:
    assert 0.9**properties.REPEATS <= 0.01 < 0.9 ** (properties.REPEATS - 1)


# ------------------------------------------------------------------------------------------ answers to call
def te(h: list, fmt: str, margin: int, prev: float) -> float:
    amax = float(np.max(h))  # NaN anywhere gives NaN (Python's max() skips one that is not first)
    return prev if not math.isfinite(amax) or amax <= 0 else P.format_info(fmt).max_normal / amax / 2**margin


def te_cached_by_length() -> Callable[..., float]:
    cache: dict[Any, float] = {}

    def answer(h: list, fmt: str, margin: int, prev: float) -> float:
        key = (len(h), fmt, margin, prev)  # everything but the values
        if key not in cache:
            cache[key] = te(h, fmt, margin, prev)
        return cache[key]

    return answer


def te_every_tenth_call_wrong() -> Callable[..., float]:
    calls = [0]

    def answer(h: list, fmt: str, margin: int, prev: float) -> float:
        calls[0] += 1
        return te(h, fmt, margin, prev) * (2.0 if calls[0] % 10 == 0 else 1.0)

    return answer


def te_wrong_30_percent(h: list, fmt: str, margin: int, prev: float) -> float:
    return te(h, fmt, margin, prev) * (2.0 if random.random() < 0.3 else 1.0)


def tf32(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    out = u.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def tf32_cached_by_shape() -> Callable[[np.ndarray], np.ndarray]:
    cache: dict[Any, np.ndarray] = {}

    def answer(x: np.ndarray) -> np.ndarray:
        if x.shape not in cache:
            cache[x.shape] = tf32(x)
        return cache[x.shape].copy()

    return answer


def buckets(sizes: list, cap: int) -> list:
    out, open_, held = [], [], 0
    for k, s in enumerate(sizes):
        open_.append(k)
        held += s
        if held >= cap:
            out.append(open_)
            open_, held = [], 0
    return out + ([open_] if open_ else [])


def buckets_cached_by_length() -> Callable[[list, int], list]:
    cache: dict[Any, list] = {}

    def answer(sizes: list, cap: int) -> list:
        key = (len(sizes), cap)
        if key not in cache:
            cache[key] = buckets(sizes, cap)
        return [list(b) for b in cache[key]]

    return answer


@pytest.mark.parametrize("check_name, make, words", [
    ("te_scale", te_cached_by_length, "same shapes and new values"),
    ("tf32_round", tf32_cached_by_shape, "same shapes and new values"),
    ("ddp_buckets", buckets_cached_by_length, "same shapes and new values"),
    ("te_scale", te_every_tenth_call_wrong, "called again"),
])
def test_state_kept_between_calls_fails_every_run(check_name: str, make: Callable[[], Any], words: str) -> None:
    for _ in range(3):
        r = _quiet(getattr(check, check_name), make())
        assert r.status == "failed" and words in _text(r), _text(r)


def test_an_answer_wrong_on_30_percent_of_calls_fails_every_run() -> None:
    for _ in range(5):
        assert _quiet(check.te_scale, te_wrong_30_percent).status == "failed"


def test_float32_for_float64_fails_naming_the_type() -> None:
    def ring(nbytes: float, n_gpus: int, bus_gbps: float) -> Any:
        return np.float32(2 * (n_gpus - 1) / n_gpus * nbytes / (bus_gbps * 1e9))

    r = _quiet(check.ring_allreduce, ring)
    assert r.status == "failed" and "float32" in r.message and "float64" in r.message, _text(r)


def test_correct_answers_pass_the_properties() -> None:
    for _ in range(2):
        assert _quiet(check.te_scale, te)
        assert _quiet(check.tf32_round, tf32)
        assert _quiet(check.ddp_buckets, buckets)


# ------------------------------------------------------------------------------------------ kernels
@cuda.jit
def block_tickets(order):
    if cuda.threadIdx.x == 0:
        t = cuda.atomic.add(order, 0, 1)
        order[1 + t] = cuda.blockIdx.x


def test_the_simulator_runs_blocks_in_the_schedules_order() -> None:
    from labkit.sim import launch_strict

    def run(schedule: str, seed: int | None = None) -> list[int]:
        order = cuda.to_device(np.zeros(9, np.int32))
        launch_strict(block_tickets, 8, 32, order, schedule=schedule, seed=seed, allow_races=True)
        return order.copy_to_host()[1:].tolist()

    assert run("forward") == list(range(8))
    assert run("reverse") == list(range(7, -1, -1))
    shuffled = run("shuffle", 12)
    assert sorted(shuffled) == list(range(8)) and shuffled != list(range(8)) and shuffled == run("shuffle", 12)


@cuda.jit
def fused_fp64(frame, bg, mask, alpha, thresh):
    col, row = cuda.grid(2)
    if row < frame.shape[0] and col < frame.shape[1]:
        b = bg[row, col]
        d = float(frame[row, col]) - b  # FP64: the learner study's P-09b
        mask[row, col] = 1 if abs(d) > thresh else 0
        bg[row, col] = b + alpha * d


def test_fp64_in_a_capstone_kernel_gets_the_note() -> None:
    r = _quiet(check.fused_update, fused_fp64)
    assert r.passed and "FP64" in (r.details.get("note") or ""), r.report()
