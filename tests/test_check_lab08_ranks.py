"""08.mpi-ring: the learner's ring all-reduce graded on real MPI processes (4 at most here, as on 2 cores in
`make test`); right answers pass, each slip gets its cause, a hang names the rank and the call. Cost: about 8 s
(six launches of 4 processes)."""

from __future__ import annotations

import pytest

from labkit import ranks
from labkit.check import lab08_ranks
from labkit.mpi_ring import ring_allreduce

pytest.importorskip("mpi4py", reason="make test installs mpi4py and mpich (pyproject.toml)")
needs_mpi = pytest.mark.skipif(not ranks.available()[0], reason=ranks.available()[1])


@pytest.fixture(autouse=True)
def _four_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_MAX_RANKS", "4")


def test_cases_cover_counts_sizes_and_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    for cap in ("8", "4", "3"):
        monkeypatch.setenv("LABKIT_MAX_RANKS", cap)
        for _ in range(5):
            cs = lab08_ranks.cases()
            top = int(cap)
            assert {n for n, *_ in cs} == set(range(2, top + 1)) and cs[0][0] == top
            assert all(size % n for n, size, *_ in cs if size >= n), "sizes the count does not divide"
            assert any(size < n for n, size, *_ in cs), "a size below the process count"
            assert {c[2] for c in cs} == {"float32", "int32"}
    monkeypatch.setenv("LABKIT_MAX_RANKS", "8")
    a, b = lab08_ranks.cases(), lab08_ranks.cases()
    assert [c[1] for c in a] != [c[1] for c in b] or a[0][3] != b[0][3], "fresh draws each run"


def _reduce_scatter_only(comm, buf):  # noqa: ANN001, ANN202
    r, n = comm.Get_rank(), comm.Get_size()
    chunks = np.array_split(buf, n)
    tmp = np.empty_like(chunks[0])
    for s in range(n - 1):
        recv = (r - s - 1) % n
        comm.Sendrecv(chunks[(r - s) % n], dest=(r + 1) % n, recvbuf=tmp[: chunks[recv].size], source=(r - 1) % n)
        chunks[recv] += tmp[: chunks[recv].size]
    return buf


def _whole_buffers(comm, buf):  # noqa: ANN001, ANN202
    r, n = comm.Get_rank(), comm.Get_size()
    out, cur, tmp = buf.copy(), buf.copy(), np.empty_like(buf)
    for _ in range(n - 1):
        comm.Sendrecv(cur, dest=(r + 1) % n, recvbuf=tmp, source=(r - 1) % n)
        out += tmp
        cur = tmp.copy()
    return out


def _as_float64(comm, buf):  # noqa: ANN001, ANN202
    r, n = comm.Get_rank(), comm.Get_size()
    chunks = np.array_split(buf, n)
    tmp = np.empty_like(chunks[0])
    for s in range(n - 1):
        recv = (r - s - 1) % n
        comm.Sendrecv(chunks[(r - s) % n], dest=(r + 1) % n, recvbuf=tmp[: chunks[recv].size], source=(r - 1) % n)
        chunks[recv] += tmp[: chunks[recv].size]
    for s in range(n - 1):
        comm.Sendrecv(chunks[(r + 1 - s) % n], dest=(r + 1) % n, recvbuf=chunks[(r - s) % n], source=(r - 1) % n)
    return buf.astype(np.float64)  # the right sum in the wrong dtype


def _skeleton(comm, buf):  # noqa: ANN001, ANN202
    raise NotImplementedError("your code here")


def _hangs(comm, buf):  # noqa: ANN001, ANN202
    if comm.Get_rank() == 1:
        comm.Recv(buf, source=0)
    return buf


@needs_mpi
def test_the_reference_passes_and_leaves_nothing() -> None:
    r = lab08_ranks.mpi_ring(ring_allreduce)
    assert r.passed, r.report()
    assert ranks.leftovers() == []


@needs_mpi
@pytest.mark.parametrize("fn,status,words", [
    (_skeleton, "unsolved", "NotImplementedError"),
    (_reduce_scatter_only, "failed", "reduce-scatter only"),
    (_whole_buffers, "failed", "not the whole buffer"),
    (_as_float64, "failed", "keep the buffer's dtype"),
])
def test_slips_are_named(fn, status: str, words: str) -> None:  # noqa: ANN001
    r = lab08_ranks.mpi_ring(fn)
    assert r.status == status, r.report()
    assert words in (r.message + " " + (r.cause or ""))


@needs_mpi
def test_a_hang_is_stopped_within_the_limit_naming_rank_and_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranks, "DEFAULT_LIMIT_S", 2.0)
    r = lab08_ranks.mpi_ring(_hangs)
    assert r.status == "failed"
    assert "rank 1 is stuck in comm.Recv(" in r.message and "killed" in r.message
    assert ranks.leftovers() == []
