"""What each MPI rank runs when :mod:`labkit.ranks` launches a job: ``python _rank_worker.py JOBDIR``.

Run as a script by ``mpiexec`` (never imported by labkit itself, so a rank starts in a fraction of a second:
it imports NumPy and mpi4py only, not labkit). The job directory holds ``job.pkl``: the learner's function as
source text, its name, and what to do with it:

- ``call``: every rank returns ``fn(comm, *args)``;
- ``grade``: for each case ``(n, size, dtype, seed)`` the first ``n`` ranks all-reduce fresh buffers with
  ``fn(comm, buf)`` on a communicator of ``n`` ranks, and compare with ``MPI.Allreduce`` of the same buffers; then
  call ``fn`` again as often as ``repeats`` says for that case, the same sizes with new values, each result compared
  with the NumPy sum of the ranks' inputs (a cache by size, state kept between calls, a random slip);
- ``bench``: time ``fn`` and ``MPI.Allreduce`` on every rank for each size (the slowest rank counts);
- ``gpu``: one process per GPU, ``fn`` over CuPy arrays through NCCL (``_rank_gpu.py``);
- ``ddp``: data-parallel training with ``fn`` all-reducing bucketed gradients during the backward pass (``_rank_ddp.py``).

The communicator handed to ``fn`` is a :class:`Comm`: the point-to-point calls of ``mpi4py.MPI.Comm`` a ring
needs (``Sendrecv``, ``Send``, ``Recv``, ``Barrier``, ``Get_rank``, ``Get_size``), each recorded before it
starts in this rank's status file (a small memory-mapped file): when a rank hangs, the launcher reads which call
it is stuck in. Results go to ``result.<rank>.pkl``; a rank whose function raises writes the error and aborts
the job, so the other ranks do not wait for it forever.
"""

from __future__ import annotations

import mmap
import os
import pickle
import sys
import time
import traceback
from typing import Any

import numpy as np
from _rank_comm import RankCounters  # next to this script
from mpi4py import MPI

STATUS_BYTES = 512


class LabkitError(Exception):
    """Stands in for labkit.errors.LabkitError inside a rank (labkit's reference rank function raises it)."""

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message if fix is None else f"{message} {fix}")


class Status:
    """This rank's status file: one line saying what it is doing, rewritten before each call."""

    def __init__(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(b"\0" * STATUS_BYTES)
        self._f = open(path, "r+b")
        self._m = mmap.mmap(self._f.fileno(), STATUS_BYTES)
        self.case = ""

    def set(self, text: str) -> None:
        data = (f"{self.case}|{text}".encode()[: STATUS_BYTES - 1]).ljust(STATUS_BYTES, b"\0")
        self._m[:] = data


def _describe(buf: Any) -> str:
    shape = getattr(buf, "shape", None)
    dtype = getattr(buf, "dtype", None)
    return f"{dtype}{list(shape)}" if shape is not None else type(buf).__name__


def _who(source: Any) -> str:
    return "MPI.ANY_SOURCE" if source == MPI.ANY_SOURCE else str(source)


class Comm(RankCounters):
    """The communicator a learner's rank function gets: a ring's point-to-point calls of ``mpi4py.MPI.Comm``.

    Each call is written to the status file before it starts and counted (bytes sent, partners), so a hang names
    its call and the grader can tell a chunked ring from one that sends whole buffers.
    """

    def __init__(self, comm: Any, status: Status) -> None:
        self._comm = comm
        self._status = status
        self._start_counting(comm.Get_rank(), comm.Get_size())

    def _note(self, text: str) -> None:
        self.calls += 1
        self._status.set(text)

    def _exchange(self, sendbuf: Any, dest: int, sendtag: int, recvbuf: Any, source: Any, recvtag: Any, status: Any) -> None:
        source = MPI.ANY_SOURCE if source is None else source
        self._status.set(
            f"comm.Sendrecv(sendbuf={_describe(sendbuf)}, dest={dest}, recvbuf={_describe(recvbuf)}, source={_who(source)})"
        )
        self._comm.Sendrecv(sendbuf, dest, sendtag, recvbuf, source, MPI.ANY_TAG if recvtag is None else recvtag, status)
        self._status.set("running")

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:  # noqa: N802
        self._note(f"comm.Send(buf={_describe(buf)}, dest={dest}, tag={tag})")
        self._count(buf, dest)
        self._comm.Send(buf, dest, tag)
        self._status.set("running")

    def Recv(self, buf: Any, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG, status: Any = None) -> None:  # noqa: N802
        self._note(f"comm.Recv(buf={_describe(buf)}, source={_who(source)}{'' if tag == MPI.ANY_TAG else f', tag={tag}'})")
        self._comm.Recv(buf, source, tag, status)
        self._status.set("running")

    def Barrier(self) -> None:  # noqa: N802
        self._note("comm.Barrier()")
        self._comm.Barrier()
        self._status.set("running")

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"this exercise's communicator has Sendrecv, Send, Recv, Barrier, Get_rank and Get_size; not {name!r}. "
            "Write the ring with Sendrecv between neighbours (MPI.Allreduce is what it is checked against)."
        )


def _load(job: dict[str, Any]) -> Any:
    ns: dict[str, Any] = {"np": np, "numpy": np, "MPI": MPI, "__name__": "__rank__", "LabkitError": LabkitError}
    exec(compile(job["source"], job.get("filename", "<your function>"), "exec"), ns)
    return ns[job["name"]]


def _fresh(size: int, dtype: str, seed: int, rank: int, again: int = 0) -> np.ndarray:
    """Rank ``rank``'s buffer for a case (``again``: the how-manieth repeat of it, 0 for its first call)."""
    rng = np.random.default_rng([seed, rank] if again == 0 else [seed, rank, again])
    return rng.integers(-1000, 1000, size).astype(dtype)  # whole numbers: every summation order gives the same sum


def _array(got: Any) -> np.ndarray | None:
    """A copy of ``got`` as an array (an array, or a list or tuple of numbers), or None (anything else, ragged lists)."""
    if not isinstance(got, (np.ndarray, list, tuple)):
        return None
    try:
        return np.array(got, copy=True)
    except (ValueError, TypeError):
        return None


def _compare(got: Any, want: np.ndarray, buf: np.ndarray, n: int) -> dict[str, Any]:
    """What is wrong with ``got`` (returned for input ``buf``) against the sum ``want``: ``{"bad": (...)}`` naming
    the first wrong element (and ``chunks_ok``), or ``{}`` when it is right."""
    arr = _array(got)
    if arr is None:
        return {"bad": ("type", type(got).__name__)}
    if arr.shape != want.shape:
        return {"bad": ("shape", list(arr.shape), list(want.shape))}
    if arr.dtype != want.dtype:
        return {"bad": ("dtype", str(arr.dtype), str(want.dtype))}
    out: dict[str, Any] = {
        "chunks_ok": [bool(np.array_equal(a, b)) for a, b in zip(np.array_split(arr, n), np.array_split(want, n))]
    }
    wrong = np.flatnonzero(arr != want)
    if wrong.size:
        i = int(wrong[0])
        out["bad"] = (
            "value",
            i,
            want[i].item(),
            arr[i].item(),
            int(wrong.size),
            bool(np.array_equal(arr, buf)),
            bool(np.array_equal(arr, want * 2)),
        )
    return out


def _counters(comm: Comm) -> dict[str, Any]:
    return {"sent": comm.sent_bytes, "partners": sorted(comm.partners), "calls": comm.calls}


def _again(
    fn: Any, sub: Any, status: Status, case: tuple[int, int, str, int], label: str, more: int, made: int, first: np.ndarray | None
) -> tuple[dict[str, Any] | None, int]:
    """Call ``fn`` ``more`` times again on ``case``'s sizes with new values (every rank of ``sub`` the same number of
    times), each result compared with the NumPy sum of the ranks' inputs (each rank draws them all from the seeds).
    Returns the first wrong call's record (or None) and this rank's call count after them (``made`` before)."""
    n, size, dtype, seed = case
    rank = sub.Get_rank()
    earlier = [(made, first if first is not None else np.empty(0))]  # this size's results so far, with their call numbers
    found: dict[str, Any] | None = None
    for j in range(1, more + 1):
        made += 1
        status.case = f"{label}, call {made} of this rank: these sizes again, new values"
        status.set("setting up")
        inputs = [_fresh(size, dtype, seed, q, j) for q in range(n)]
        want = inputs[0].copy()
        for x in inputs[1:]:
            want += x
        comm = Comm(sub, status)
        mine = inputs[rank].copy()
        status.set("running")
        got = fn(comm, mine)
        status.set("checking")
        got = mine if got is None else got
        if found is None:
            verdict = _compare(got, want, inputs[rank], n)
            arr = _array(got)
            if verdict.get("bad"):
                stale = None
                if arr is not None:
                    stale = next((c for c, old in earlier if arr.shape == old.shape and np.array_equal(arr, old)), None)
                i = verdict["bad"][1] if verdict["bad"][0] == "value" else None
                found = dict(
                    verdict,
                    **_counters(comm),
                    call=made,
                    first=earlier[0][0],
                    stale=stale,
                    mine=None if i is None else inputs[rank][i].item(),
                )
            elif arr is not None:
                earlier.append((made, arr))
    return found, made


def case_label(case: tuple[int, int, str, int]) -> str:
    """``n = 4, 3001 int32 elements``: a case as the status file and the messages say it."""
    n, size, dtype, _ = case
    return f"n = {n}, {size} {dtype} elements"


def _grade(fn: Any, job: dict[str, Any], world: Any, status: Status) -> dict[str, Any]:
    """Each case: its first call compared with ``MPI.Allreduce``, then (``job["repeats"]``) the same sizes again with
    new values until the planned calls are made or this rank has spent ``job["budget_s"]`` seconds in the repeats
    (the ranks of a case agree on the count first: every rank makes the same calls)."""
    rank = world.Get_rank()
    cases = [tuple(c) for c in job["cases"]]
    repeats = job.get("repeats") or [1] * len(cases)
    budget = float(job.get("budget_s", 4.0))
    out: dict[str, Any] = {"cases": []}
    made, spent = 0, 0.0  # this rank's calls of fn, and the seconds its repeats took
    for k, (n, size, dtype, seed) in enumerate(cases):
        label = status.case = f"case {k + 1}: {case_label((n, size, dtype, seed))}"
        status.set("setting up")
        sub = world.Split(0 if rank < n else MPI.UNDEFINED, rank)
        if sub == MPI.COMM_NULL:
            status.set("waiting (not in this case)")
            world.Barrier()
            continue
        buf = _fresh(size, dtype, seed, rank)
        want = np.empty_like(buf)
        sub.Allreduce(buf, want, op=MPI.SUM)
        comm = Comm(sub, status)
        mine = buf.copy()
        status.set("running")
        made += 1
        t0 = time.perf_counter()
        got = fn(comm, mine)
        took = time.perf_counter() - t0
        status.set("checking")
        if got is None:
            got = mine  # reduced in place
        rec: dict[str, Any] = {"n": n, "size": size, "dtype": dtype, **_counters(comm), "call": made}
        rec.update(_compare(got, want, buf, n))
        if repeats[k] > 1:  # as many more as this rank's time left affords, at the slowest rank's pace: agreed
            afford = int(max(0.0, budget - spent) / max(took, 1e-6))
            more = int(sub.allreduce(min(repeats[k] - 1, afford), op=MPI.MIN))
            t0 = time.perf_counter()
            first = _array(got)
            rec["again"], made = _again(fn, sub, status, (n, size, dtype, seed), label, more, made, first)
            spent += time.perf_counter() - t0
            rec["repeated"] = more
        out["cases"].append(rec)
        sub.Free()
        status.case = label
        status.set("waiting for the other ranks")
        world.Barrier()
    for rec in out["cases"]:
        rec["of"] = made  # this rank's calls in all
    out["made"] = made
    return out


def _bench(fn: Any, job: dict[str, Any], world: Any, status: Status) -> dict[str, Any]:
    n = world.Get_size()
    rows = []
    for size in job["sizes"]:
        status.case = f"timing {size} float32 elements on {n} ranks"
        buf = np.random.default_rng([size, world.Get_rank()]).standard_normal(size).astype(np.float32)
        res = np.empty_like(buf)
        comm = Comm(world, status)
        row: dict[str, Any] = {"size": size, "nbytes": buf.nbytes}
        for label, call in (("learner", lambda: fn(comm, buf.copy())), ("mpi", lambda: world.Allreduce(buf, res, op=MPI.SUM))):
            call()  # warm-up
            times = []
            for _ in range(job["reps"]):
                world.Barrier()
                t0 = time.perf_counter()
                call()
                dt = time.perf_counter() - t0
                times.append(world.allreduce(dt, op=MPI.MAX))  # the slowest rank counts
            row[label] = float(np.median(times))
        rows.append(row)
    return {"rows": rows}


def main(jobdir: str) -> int:
    """Run the job in ``jobdir`` on this rank; write ``result.<rank>.pkl``. Returns the exit status."""
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    status = Status(os.path.join(jobdir, f"status.{rank}"))
    status.set("starting")
    with open(os.path.join(jobdir, "job.pkl"), "rb") as f:
        job = pickle.load(f)
    result: dict[str, Any]
    try:
        fn = _load(job)
        if job["mode"] == "grade":
            result = _grade(fn, job, world, status)
        elif job["mode"] == "bench":
            result = _bench(fn, job, world, status)
        elif job["mode"] == "ddp":
            import _rank_ddp  # next to this script

            result = _rank_ddp.run(fn, job, world, status, Comm)
        elif job["mode"] == "gpu":
            import _rank_gpu  # next to this script

            result = _rank_gpu.run(fn, job, world, status, Comm)
        else:
            status.case = "your function"
            status.set("running")
            result = {"value": fn(Comm(world, status), *job.get("args", ()))}
        result["ok"] = True
    except BaseException as exc:  # the learner's error: reported by the launcher, then the job stops
        tb = traceback.extract_tb(exc.__traceback__)
        mine = [fr for fr in tb if fr.filename == job.get("filename")]
        where = f" (line {mine[-1].lineno} of your function: {mine[-1].line})" if mine else ""
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}{where}", "case": status.case}
        with open(os.path.join(jobdir, f"result.{rank}.pkl"), "wb") as f:
            pickle.dump(result, f)
        status.set("failed")
        world.Abort(3)
        return 3
    status.set("done")
    with open(os.path.join(jobdir, f"result.{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
