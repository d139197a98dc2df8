"""Issue 44 item 3 for 08.mpi-ring: the learner's rank function is called again with the same sizes and new values
inside the same MPI launch, until each rank has called it :data:`labkit.check.properties.REPEATS` (44) times, so
an answer wrong on 10% of its calls fails with probability 1 - 0.9^44 >= 99% (on one rank alone), and a cache by
size hands back a stale sum. The answers here run in the rank processes (their source is sent there, as the
learner's is), so each keeps its state in a default argument, as a learner's cache would.

- the plan: every rank of every cap (2 to 8 processes) makes 44 calls or more; the 100,000-float case runs once;
- an answer wrong on a seeded 10% of its calls on the highest rank (its own RNG, seeded inside the rank) fails, for
  each of five seeds (without the repeats, that rank made 3 calls: such an answer passed 73% of runs);
- one wrong only on the highest rank's 44th call fails, naming "call 44 of 44": that rank (the one in the fewest
  cases) is called that often, and that call is compared; this is also the control that its first 43 were right;
- an answer that caches by size fails with the cause naming the earlier call it repeats;
- an answer that raises on a repeated call is reported with that call's number; the reference passes;
- an answer too slow for the repeats' time budget passes with fewer calls, and the pass line says how many.

Cost: ten launches of 4 processes: about 8 s on the shared 2-core machine when idle, 15 s under load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from labkit import ranks
from labkit.check import lab08_ranks, properties
from labkit.mpi_ring import ring_allreduce

pytest.importorskip("mpi4py", reason="make test installs mpi4py and mpich (pyproject.toml)")
needs_mpi = pytest.mark.skipif(not ranks.available()[0], reason=ranks.available()[1])


@pytest.fixture(autouse=True)
def _four_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_MAX_RANKS", "4")


# ------------------------------------------------------------------------------------------ the plan (no MPI)
@pytest.mark.parametrize("cap", range(2, 9))
def test_every_rank_is_planned_44_calls_and_the_large_case_one(monkeypatch: pytest.MonkeyPatch, cap: int) -> None:
    monkeypatch.setenv("LABKIT_MAX_RANKS", str(cap))
    todo = lab08_ranks.cases()
    big = [k for k, c in enumerate(todo) if c[1] >= 2 * lab08_ranks.BIG_CHUNK]
    assert len(big) == 1
    plan = ranks._plan_calls(todo, properties.REPEATS, once=big)
    per_rank = [sum(p for c, p in zip(todo, plan) if c[0] > r) for r in range(cap)]
    assert min(per_rank) >= properties.REPEATS, (todo, plan, per_rank)
    assert min(per_rank) == properties.REPEATS, "no more calls than needed on the rank with the fewest"
    assert plan[big[0]] == 1, "the expensive no-deadlock case runs once"
    top = [k for k, c in enumerate(todo) if c[0] == cap and k not in big]
    assert all(plan[k] > 1 for k in top), "each size of the widest cases is called again"
    assert ranks._plan_calls(todo, 1) == [1] * len(todo)


# ------------------------------------------------------------------------------------------ answers (run in the ranks)
def _flaky_1(comm, buf, _rng=[]):  # noqa: ANN001, ANN202, B006
    if not _rng:
        _rng.append(np.random.default_rng([1, comm.Get_rank()]))
    r, n = comm.Get_rank(), comm.Get_size()
    chunks = np.array_split(buf, n)
    tmp = np.empty_like(chunks[0])
    for s in range(n - 1):
        recv = (r - s - 1) % n
        comm.Sendrecv(chunks[(r - s) % n], dest=(r + 1) % n, recvbuf=tmp[: chunks[recv].size], source=(r - 1) % n)
        chunks[recv] += tmp[: chunks[recv].size]
    for s in range(n - 1):
        comm.Sendrecv(chunks[(r + 1 - s) % n], dest=(r + 1) % n, recvbuf=chunks[(r - s) % n], source=(r - 1) % n)
    if _rng[0].random() < 0.1 and r == 3:  # the highest rank of 4 (in the fewest cases): wrong on 10% of its calls
        buf[-1] += 1
    return buf


def _with_seed(seed: int, folder: Path) -> Any:
    """``_flaky_1`` with its RNG seeded by ``seed``: a function defined in a file of its own (the ranks run its
    source, read from there, as they run a notebook cell's)."""
    import importlib.util
    import inspect

    path = folder / f"flaky_{seed}.py"
    source = inspect.getsource(_flaky_1).replace("default_rng([1,", f"default_rng([{seed},")
    path.write_text("import numpy as np\n\n\n" + source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"flaky_{seed}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._flaky_1


def _late(comm, buf, _calls=[0]):  # noqa: ANN001, ANN202, B006
    _calls[0] += 1
    r, n = comm.Get_rank(), comm.Get_size()
    chunks = np.array_split(buf, n)
    tmp = np.empty_like(chunks[0])
    for s in range(n - 1):
        recv = (r - s - 1) % n
        comm.Sendrecv(chunks[(r - s) % n], dest=(r + 1) % n, recvbuf=tmp[: chunks[recv].size], source=(r - 1) % n)
        chunks[recv] += tmp[: chunks[recv].size]
    for s in range(n - 1):
        comm.Sendrecv(chunks[(r + 1 - s) % n], dest=(r + 1) % n, recvbuf=chunks[(r - s) % n], source=(r - 1) % n)
    if r == 3 and _calls[0] == 44:  # the highest rank of 4, only on its 44th call
        buf[0] += 1
    return buf


def _cached(comm, buf, _memo={}):  # noqa: ANN001, ANN202, B006
    key = (buf.size, buf.dtype.str)
    if key in _memo:  # the sum of an earlier buffer of this size
        return _memo[key].copy()
    r, n = comm.Get_rank(), comm.Get_size()
    chunks = np.array_split(buf, n)
    tmp = np.empty_like(chunks[0])
    for s in range(n - 1):
        recv = (r - s - 1) % n
        comm.Sendrecv(chunks[(r - s) % n], dest=(r + 1) % n, recvbuf=tmp[: chunks[recv].size], source=(r - 1) % n)
        chunks[recv] += tmp[: chunks[recv].size]
    for s in range(n - 1):
        comm.Sendrecv(chunks[(r + 1 - s) % n], dest=(r + 1) % n, recvbuf=chunks[(r - s) % n], source=(r - 1) % n)
    _memo[key] = buf.copy()
    return buf


def _raises_on_call_10(comm, buf, _calls=[0]):  # noqa: ANN001, ANN202, B006
    _calls[0] += 1
    if _calls[0] == 10:
        raise RuntimeError("out of patience")
    r, n = comm.Get_rank(), comm.Get_size()
    chunks = np.array_split(buf, n)
    tmp = np.empty_like(chunks[0])
    for s in range(n - 1):
        recv = (r - s - 1) % n
        comm.Sendrecv(chunks[(r - s) % n], dest=(r + 1) % n, recvbuf=tmp[: chunks[recv].size], source=(r - 1) % n)
        chunks[recv] += tmp[: chunks[recv].size]
    for s in range(n - 1):
        comm.Sendrecv(chunks[(r + 1 - s) % n], dest=(r + 1) % n, recvbuf=chunks[(r - s) % n], source=(r - 1) % n)
    return buf


# ------------------------------------------------------------------------------------------ the check
@needs_mpi
def test_the_reference_passes_and_says_how_often_it_was_called() -> None:
    r = lab08_ranks.mpi_ring(ring_allreduce)
    assert r.passed, r.report()
    assert f"each rank called it {properties.REPEATS} times or more" in r.message, r.message
    assert ranks.leftovers() == []


@needs_mpi
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_an_answer_wrong_on_10_percent_of_its_calls_fails(seed: int, tmp_path: Path) -> None:
    r = lab08_ranks.mpi_ring(_with_seed(seed, tmp_path))
    assert r.status == "failed", r.report()
    assert "MPI.Allreduce gives" in r.message or "the sum of the ranks' inputs is" in r.message, r.message


@needs_mpi
def test_an_answer_wrong_only_on_the_highest_ranks_44th_call_fails_naming_it() -> None:
    r = lab08_ranks.mpi_ring(_late)
    assert r.status == "failed", r.report()
    assert "called again with the same sizes and new values: rank 3's call 44 of 44" in r.message, r.message
    assert "keep no state between calls" in (r.cause or ""), r.cause


@needs_mpi
def test_an_answer_that_caches_by_size_fails_naming_the_stale_call() -> None:
    r = lab08_ranks.mpi_ring(_cached)
    assert r.status == "failed", r.report()
    assert "called again with the same sizes and new values" in r.message, r.message
    assert "returned exactly what its call" in (r.cause or "") and "cache keyed by size" in (r.cause or ""), r.cause
    assert ranks.leftovers() == []


@needs_mpi
def test_an_error_on_a_repeated_call_names_that_call() -> None:
    r = lab08_ranks.mpi_ring(_raises_on_call_10)
    assert r.status == "failed", r.report()
    assert "RuntimeError: out of patience" in r.message and "call 10 of this rank" in r.message, r.message
    assert ranks.leftovers() == []


def _slow(comm, buf):  # noqa: ANN001, ANN202
    import time

    time.sleep(0.02)
    r, n = comm.Get_rank(), comm.Get_size()
    chunks = np.array_split(buf, n)
    tmp = np.empty_like(chunks[0])
    for s in range(n - 1):
        recv = (r - s - 1) % n
        comm.Sendrecv(chunks[(r - s) % n], dest=(r + 1) % n, recvbuf=tmp[: chunks[recv].size], source=(r - 1) % n)
        chunks[recv] += tmp[: chunks[recv].size]
    for s in range(n - 1):
        comm.Sendrecv(chunks[(r + 1 - s) % n], dest=(r + 1) % n, recvbuf=chunks[(r - s) % n], source=(r - 1) % n)
    return buf


@needs_mpi
def test_an_answer_too_slow_for_the_budget_gets_fewer_calls_and_the_pass_line_says_how_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The repeats stop past ranks.REPEAT_BUDGET_S seconds per rank (here 0.2 s, for an answer of 20 ms a call): the
    ranks agree on the count, nothing hangs, and the pass line states the calls made, not 44."""
    import re

    monkeypatch.setattr(ranks, "REPEAT_BUDGET_S", 0.2)
    r = lab08_ranks.mpi_ring(_slow)
    assert r.passed, r.report()
    made = int(re.search(r"each rank called it (\d+) times or more", r.message).group(1))  # type: ignore[union-attr]
    assert 3 <= made < properties.REPEATS and "the calls again stop after 0.2 s per rank" in r.message, r.message
    assert ranks.leftovers() == []
