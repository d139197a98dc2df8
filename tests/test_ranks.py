"""labkit.ranks: functions run on real local MPI processes (mpiexec from the mpich wheel); a hung rank is named by
rank and call and stopped with every process; errors name the rank and the line. Cost: about 5 s (four launches
of 2-4 processes on 2 cores)."""

from __future__ import annotations

import time

import pytest

from labkit import ranks

pytest.importorskip("mpi4py", reason="make test installs mpi4py and mpich (pyproject.toml)")
pytestmark = pytest.mark.skipif(not ranks.available()[0], reason=ranks.available()[1])


def _hello(comm):  # noqa: ANN001, ANN202
    import os

    print("x" * 100_000)  # more than a pipe holds: the run must not block on it
    return comm.Get_rank() * 10 + comm.Get_size(), os.environ.get("MPI_LOCALRANKID")  # what picks a rank's GPU


def _hang(comm):  # noqa: ANN001, ANN202
    buf = np.zeros(3)
    if comm.Get_rank() == 1:
        comm.Recv(buf, source=0)  # no rank sends: waits forever
    return 0


def _boom(comm):  # noqa: ANN001, ANN202
    if comm.Get_rank() == 2:
        return 1 / 0
    comm.Barrier()
    return 0


def _forbidden(comm):  # noqa: ANN001, ANN202
    return comm.allreduce(1)


def test_call_runs_on_every_rank_and_leaves_nothing() -> None:
    run = ranks.call(_hello, 4)
    assert run.values == [(4, "0"), (14, "1"), (24, "2"), (34, "3")]
    assert run.output.count("x") == 4 * 100_000  # interleaved, all of it
    assert ranks.leftovers() == []


def test_a_hung_rank_is_named_with_its_call_and_every_process_stopped() -> None:
    t0 = time.perf_counter()
    with pytest.raises(ranks.RankError) as err:
        ranks.call(_hang, 2, limit_s=2.0)
    assert time.perf_counter() - t0 < 2.0 + 8.0  # the limit, plus start-up and the kill on a loaded machine
    text = str(err.value)
    assert "rank 1 is stuck in comm.Recv(" in text and "source=0" in text and "rank 0" not in text.split("What to do")[0]
    assert "matching Send" in (err.value.fix or "")
    assert ranks.leftovers() == []


def test_an_error_names_the_rank_and_the_line_and_the_rest_stop() -> None:
    with pytest.raises(ranks.RankError, match=r"rank 2 of 3 raised ZeroDivisionError.*line 3 of your function"):
        ranks.call(_boom, 3)
    with pytest.raises(ranks.RankError, match="Sendrecv, Send, Recv, Barrier"):
        ranks.call(_forbidden, 2)
    assert ranks.leftovers() == []


def test_arguments_are_checked_before_anything_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ranks.RankError, match="1 to 8"):
        ranks.call(_hello, 9)
    with pytest.raises(ranks.RankError, match="lambda"):
        ranks.call(lambda comm: 0, 2)
    with pytest.raises(ranks.RankError, match="def"):
        ranks.call(print, 2)
    with pytest.raises(ranks.RankError, match="one function"):
        ranks.call("x = 1", 2)
    monkeypatch.setenv("LABKIT_MAX_RANKS", "2")
    assert ranks.max_ranks() == 2
    with pytest.raises(ranks.RankError, match="LABKIT_MAX_RANKS"):
        ranks.call(_hello, 4)


def test_bench_reports_cpu_algbw_and_busbw() -> None:
    from labkit.mpi_ring import ring_allreduce

    rows = ranks.bench(ring_allreduce, 2, [1 << 14], reps=2)
    assert len(rows) == 1 and rows[0].n == 2 and rows[0].nbytes == 4 << 14
    assert rows[0].seconds > 0 and rows[0].busbw == pytest.approx(rows[0].algbw)  # 2(n-1)/n = 1 for n = 2
    assert rows[0].mpi_busbw > 0
    assert ranks.leftovers() == []


def test_interrupt_stops_the_run_at_once_and_leaves_nothing() -> None:
    import signal

    def interrupt(signum, frame):  # noqa: ANN001, ANN202  (what Jupyter's Interrupt does: SIGINT -> KeyboardInterrupt)
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    t0 = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            ranks.call(_hang, 2, limit_s=30.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.perf_counter() - t0 < 8.0  # 1 s, then the kill (slower on a loaded machine)
    assert ranks.leftovers() == []
