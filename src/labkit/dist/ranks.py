"""Run a function on several local MPI processes ("ranks") from a notebook, and stop them safely.

    >>> from labkit import ranks
    >>> def hello(comm):
    ...     return comm.Get_rank() * 10
    >>> ranks.call(hello, 4).values                            # doctest: +SKIP
    [0, 10, 20, 30]

How it works, and why this way: the function's **source** is written to a file in a fresh temporary directory,
next to a small driver (``labkit/_rank_worker.py``), and ``mpiexec -n N`` (the one the ``mpich`` wheel installs)
starts N Python processes that run it. Each run starts new processes and ends them: nothing lives between cells,
a hung run is stopped as a whole, and the notebook, the tests and CI run the very same command. (ipyparallel's MPI
engines would keep processes alive between cells, which is faster to reuse but leaves state and processes behind
when something hangs.) The rank processes see only the function's own code, ``np`` (NumPy) and ``MPI``
(``mpi4py.MPI``): a function that uses another name from the notebook gets a clear ``NameError``.

Every run has a time limit (:data:`DEFAULT_LIMIT_S`, the course's limit for learner code), counted once every
process has started. A rank that waits
forever (a ``Recv`` that no ``Send`` matches) is reported by rank and call, read from each rank's status file,
and every process of the run is killed: :func:`leftovers` is empty afterwards (the tests check it).

Results are :class:`RankRun` objects. Timings of these processes are CPU processes talking through shared
memory, never GPU figures.
"""

from __future__ import annotations

import inspect
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from labkit.errors import LabkitError, MissingPackageError
from labkit.gpu import bandwidth as _bw
from labkit.learner_frames import hide_library_frames

#: Never more local processes than this (a DGX has 8 GPUs; a laptop has few cores).
MAX_RANKS = 8
#: The course's time limit for learner code (labkit.sim.limits.LEARNER_CODE_LIMIT_S), here for a whole run.
DEFAULT_LIMIT_S = 20.0
#: How long the processes may take to start (mpiexec, Python, NumPy, mpi4py), before the limit above begins.
STARTUP_LIMIT_S = 60.0
WORKER = Path(__file__).with_name("_rank_worker.py")
STATUS_BYTES = 512


class RankError(LabkitError):
    """A run on several processes failed: a rank raised, hung, or the run could not start."""


@dataclass
class RankRun:
    """One finished run: each rank's result (``results[r]``), the wall time, and the command that ran."""

    n: int
    results: list[dict[str, Any]]
    seconds: float
    command: list[str]
    script: str = ""
    notes: list[str] = field(default_factory=list)
    output: str = ""  # what the ranks printed (stdout and stderr, interleaved)

    @property
    def values(self) -> list[Any]:
        """What ``fn`` returned on each rank (``call`` runs)."""
        return [r.get("value") for r in self.results]


# ---------------------------------------------------------------------------------------------- the command


def mpiexec() -> str:
    """Path of ``mpiexec`` (the ``mpich`` wheel's, next to this Python first), or a clear error."""
    here = Path(sys.executable).with_name("mpiexec")
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if not found:
        raise MissingPackageError(
            "mpiexec is not installed, so labkit cannot start several processes.",
            fix="Install MPI from PyPI: python -m pip install mpich mpi4py (make lab does).",
        )
    return found


_MPI_LIBRARY: list[str | None] = []  # the answer of _mpi_library(), once per process (the loader's path is fixed at start)


def _mpi_library() -> str | None:
    """None when ``from mpi4py import MPI`` finds an MPI library, else why not. Asked once, in a child process with
    this one's environment: importing ``mpi4py.MPI`` here would initialise MPI inside the learner's kernel. (mpi4py
    without a library, as on a GPU image, imports; only ``mpi4py.MPI`` fails: "cannot load MPI library".)"""
    if not _MPI_LIBRARY:
        try:
            res = subprocess.run([sys.executable, "-c", "from mpi4py import MPI"], capture_output=True, text=True, timeout=60)
            lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
            _MPI_LIBRARY.append(None if res.returncode == 0 else (lines[-1] if lines else f"exit {res.returncode}"))
        except (OSError, subprocess.TimeoutExpired) as exc:
            _MPI_LIBRARY.append(f"{type(exc).__name__}: {exc}")
    return _MPI_LIBRARY[0]


def available() -> tuple[bool, str]:
    """``(can_run, reason)``: whether mpi4py imports, finds an MPI library (``mpi4py.MPI`` loads) and mpiexec exists."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False, "mpi4py is not installed (python -m pip install mpich mpi4py)"
    try:
        mpiexec()
    except LabkitError as exc:
        return False, str(exc)
    why = _mpi_library()
    if why is not None:
        return False, (
            f"mpi4py is installed but finds no MPI library ({why}): install the mpich wheel (python -m pip "
            "install mpich), or put its lib/ folder on LD_LIBRARY_PATH"
        )
    return True, "mpi4py with MPICH's mpiexec"


def max_ranks() -> int:
    """The most local processes a run may start: :data:`MAX_RANKS`, or fewer when ``LABKIT_MAX_RANKS`` says so
    (the test suite runs on 2 cores with 4)."""
    raw = os.environ.get("LABKIT_MAX_RANKS", "")
    try:
        return max(1, min(MAX_RANKS, int(raw))) if raw else MAX_RANKS
    except ValueError:
        return MAX_RANKS


def _count(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_RANKS:
        raise RankError(
            f"the number of processes must be a whole number from 1 to {MAX_RANKS}, got {n!r}.",
            fix="Use 2, 4 or 8: one process per GPU of a DGX at most.",
        )
    if n > max_ranks():
        raise RankError(
            f"{n} processes asked for; LABKIT_MAX_RANKS allows {max_ranks()} here.",
            fix="Ask for fewer, or unset LABKIT_MAX_RANKS.",
        )
    return n


def source_of(fn: Callable[..., Any] | str) -> tuple[str, str]:
    """``(source, name)`` of a function defined with ``def`` (in a notebook cell or a file), or of source text
    that defines exactly one top-level function."""
    if isinstance(fn, str):
        import ast

        try:
            tree = ast.parse(textwrap.dedent(fn))
        except SyntaxError as exc:
            raise RankError(f"the source does not parse: {exc}.") from None
        names = [d.name for d in tree.body if isinstance(d, ast.FunctionDef)]
        if len(names) != 1:
            raise RankError(f"the source must define one function, it defines {len(names)}.")
        return textwrap.dedent(fn), names[0]
    if not inspect.isfunction(fn):
        raise RankError(
            f"expected a function defined with def, got {type(fn).__name__}.",
            fix="Pass the function itself, e.g. ranks.call(my_fn, 4).",
        )
    if fn.__name__ == "<lambda>":
        raise RankError("a lambda cannot be sent to other processes by its source.", fix="Define it with def.")
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise RankError(
            f"labkit cannot read the source of {fn.__name__}.", fix="Define the function in a notebook cell or a file, with def."
        ) from None
    return src, fn.__name__


# ---------------------------------------------------------------------------------------------- processes


def _tree(pid: int) -> list[Any]:
    import psutil

    try:
        p = psutil.Process(pid)
        return [p, *p.children(recursive=True)]
    except psutil.Error:
        return []


def _kill(proc: subprocess.Popen, known: list[Any]) -> None:
    """Kill the run's process group and every process seen in it; wait until they are gone."""
    import psutil

    procs = {p.pid: p for p in known + _tree(proc.pid)}
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in procs.values():
        try:
            p.kill()
        except psutil.Error:
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.perf_counter() + 5
    while time.perf_counter() < deadline:  # gone, or a zombie waiting for its (killed) parent's reaper
        if not any(_running(p) for p in procs.values()):
            break
        time.sleep(0.01)


def _running(p: Any) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


_STARTED: set[int] = set()


def leftovers() -> list[int]:
    """PIDs of processes that labkit's runs started and that still exist (should always be empty)."""
    import psutil

    alive = []
    for pid in sorted(_STARTED):
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            pass
    return alive


def _statuses(jobdir: Path, n: int) -> list[str]:
    out = []
    for r in range(n):
        try:
            raw = (jobdir / f"status.{r}").read_bytes()[:STATUS_BYTES]
            out.append(raw.split(b"\0", 1)[0].decode(errors="replace"))
        except OSError:
            out.append("")
    return out


def _hang_message(statuses: list[str], limit: float, stopped: str = "every process of the run was killed") -> tuple[str, str]:
    stuck = []
    for r, st in enumerate(statuses):
        case, _, what = st.rpartition("|")
        if what.startswith("comm."):
            stuck.append((r, case, what))
    if not stuck:
        states = ", ".join(f"rank {r}: {st.rpartition('|')[2] or 'not started'}" for r, st in enumerate(statuses))
        return (
            f"the run did not finish within {limit:g} s and was stopped ({states}); {stopped}.",
            "Look for a loop that never ends in your function.",
        )
    case = stuck[0][1]
    lines = "; ".join(f"rank {r} is stuck in {what}" for r, _, what in stuck)
    recv = [w for _, _, w in stuck if w.startswith("comm.Recv")]
    fix = (
        "A Recv waits until some rank sends to it: give every Recv a matching Send on the source rank, or use "
        "Sendrecv, which sends and receives in one call."
        if recv
        else "Every rank must make the same sequence of calls: a Sendrecv to rank d needs rank d to call Sendrecv "
        "(or Recv) with source = this rank."
    )
    return (f"{case + ': ' if case else ''}{lines}. Stopped after {limit:g} s: {stopped}.", fix)


def _left_running(proc: subprocess.Popen, everyone: list[Any]) -> list[int]:
    """PIDs of the run's processes (``mpiexec`` and every process seen under it) that still run after the kill."""
    left = [p.pid for p in everyone if p.pid != proc.pid and _running(p)]
    return ([proc.pid] if proc.poll() is None else []) + left


def _stopped_words(n: int, left: list[int]) -> str:
    """``the 4 ranks were killed, none left running``, or which processes are, measured after the kill."""
    if not left:
        return f"the {n} rank{'s were' if n != 1 else ' was'} killed, none left running"
    return (
        f"the {n} ranks were killed, but {len(left)} process(es) still run (PID {', '.join(map(str, left))}): "
        "restart the kernel to end them"
    )


def _interrupt_summary(n: int, seconds: float, statuses: list[str], left: list[int]) -> str:
    """The one line an Interrupt of a run ends with: after how long, where the ranks were, what is left running."""
    stuck = [(r, st.rpartition("|")[2]) for r, st in enumerate(statuses) if st.rpartition("|")[2].startswith("comm.")]
    where = "; ".join(f"rank {r} was in {what}" for r, what in stuck[:3])
    return f"stopped by Interrupt after {seconds:.1f} s: {where + '; ' if where else ''}{_stopped_words(n, left)}"


def launch(job: dict[str, Any], n: int, *, limit_s: float | None = None, keep_script: bool = False) -> RankRun:
    """Start ``n`` ranks on ``job`` (see ``_rank_worker``), wait at most ``limit_s`` seconds, collect the results.

    Raises :class:`RankError` naming the rank and the call when a rank hangs or raises; no process of the run is
    left behind in any case (KeyboardInterrupt included).
    """
    n = _count(n)
    limit_s = DEFAULT_LIMIT_S if limit_s is None else float(limit_s)
    ok, why = available()
    if not ok:
        raise MissingPackageError(f"cannot start MPI processes: {why}.", fix="python -m pip install mpich mpi4py")
    jobdir = Path(tempfile.mkdtemp(prefix="labkit-ranks-"))
    script = jobdir / "your_function.py"
    script.write_text(job["source"], encoding="utf-8")
    job = dict(job, filename=str(script))
    with open(jobdir / "job.pkl", "wb") as f:
        pickle.dump(job, f)
    cmd = [mpiexec(), "-launcher", "fork", "-n", str(n), sys.executable, str(WORKER), str(jobdir)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    log = open(jobdir / "output.txt", "wb")  # a file, not a pipe: ranks that print a lot never block on it
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True, cwd=str(jobdir)
    )
    _STARTED.add(proc.pid)
    seen: list[Any] = []
    try:
        deadline = None  # the limit counts from when every rank has started (a loaded machine starts slowly)
        while proc.poll() is None:
            now = time.perf_counter()
            statuses = _statuses(jobdir, n)
            if deadline is None and all(st not in ("", "|starting") for st in statuses):
                deadline = now + limit_s
            if (deadline is not None and now > deadline) or now > t0 + STARTUP_LIMIT_S + limit_s:
                everyone = seen + _tree(proc.pid)
                _kill(proc, everyone)
                stopped = _stopped_words(n, _left_running(proc, everyone))
                if deadline is None:
                    raise RankError(
                        f"the {n} processes did not all start within {STARTUP_LIMIT_S:g} s; {stopped}.",
                        fix="Run `labkit doctor`; a machine this busy may need fewer processes.",
                    )
                msg, fix = _hang_message(statuses, limit_s, stopped)
                raise RankError(msg, fix=fix)
            for p in _tree(proc.pid):
                if p.pid not in _STARTED:
                    _STARTED.add(p.pid)
                    seen.append(p)
            if any(st.endswith("|failed") for st in statuses):
                time.sleep(0.05)  # its result file is written before its status says so; stop the others now
                _kill(proc, seen + _tree(proc.pid))
                break
            time.sleep(0.02)
        log.close()
        output = (jobdir / "output.txt").read_text(errors="replace")
        seconds = time.perf_counter() - t0
        _kill(proc, seen)  # nothing should be left; make sure
        results: list[dict[str, Any]] = []
        for r in range(n):
            try:
                with open(jobdir / f"result.{r}.pkl", "rb") as f:
                    results.append(pickle.load(f))
            except (OSError, EOFError, pickle.UnpicklingError):
                results.append({})
        failed = [(r, res) for r, res in enumerate(results) if res.get("ok") is False]
        if failed:
            r, res = failed[0]
            where = f" ({res['case']})" if res.get("case") and res["case"] != "your function" else ""
            fix = "Fix that error; the other ranks were stopped."
            if str(res["error"]).startswith("NameError"):
                fix = (
                    "The processes see only your function's own code, np (NumPy) and MPI (mpi4py.MPI): define or "
                    "import inside the function what else it uses."
                )
            raise RankError(f"rank {r} of {n}{where} raised {res['error']}", fix=fix)
        if proc.returncode != 0 or not all(res.get("ok") for res in results):
            tail = "\n".join(output.strip().splitlines()[-6:])
            raise RankError(
                f"the {n} processes ended with exit status {proc.returncode} without their results.\n{tail}",
                fix="Run `labkit doctor`: it says whether MPI works here.",
            )
        return RankRun(n, results, seconds, cmd, script.read_text(encoding="utf-8") if keep_script else "", output=output)
    except KeyboardInterrupt as exc:  # Interrupt: stop every process, then one line says what happened
        statuses, everyone = _statuses(jobdir, n), seen + _tree(proc.pid)
        _kill(proc, everyone)
        if not exc.args:
            exc.args = (_interrupt_summary(n, time.perf_counter() - t0, statuses, _left_running(proc, everyone)),)
        exc.__suppress_context__ = True  # whatever library code the Interrupt landed in was handling is not the learner's
        raise hide_library_frames(exc)  # noqa: B904 - the same exception: in IPython its red box ends at the learner's line
    except RankError as exc:  # a hang past the time limit, a rank that raised: already killed above
        raise hide_library_frames(exc)  # noqa: B904 - the same exception, its engine frames hidden
    except BaseException:
        _kill(proc, seen)
        raise
    finally:
        log.close()
        shutil.rmtree(jobdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- the public calls


def call(fn: Callable[..., Any] | str, n: int, *args: Any, limit_s: float | None = None) -> RankRun:
    """Run ``fn(comm, *args)`` on ``n`` local processes; ``.values`` holds what each rank returned.

    ``comm`` offers a ring's calls of ``mpi4py.MPI.Comm``: ``Sendrecv``, ``Send``, ``Recv``, ``Barrier``,
    ``Get_rank``, ``Get_size``. The arguments and the return values travel by pickle.
    """
    src, name = source_of(fn)
    return launch({"mode": "call", "source": src, "name": name, "args": tuple(args)}, n, limit_s=limit_s)


#: The most seconds each rank may spend calling the function again in :func:`grade_cases` (past it, fewer calls).
REPEAT_BUDGET_S = 4.0


def _plan_calls(cases: Sequence[tuple[int, int, str, int]], least: int, once: Collection[int] = ()) -> list[int]:
    """How many times :func:`grade_cases` runs each case (its first call and the same sizes again with new values) so
    that every rank of the launch calls the function at least ``least`` times in all: rank r takes part in the cases
    with more than r processes, so the extra calls go to the cases the highest rank is in, in turn (every size is
    repeated), then to those of the next rank down where it still has too few. The cases at the indices ``once``
    run once."""
    calls = [1] * len(cases)
    width = max((c[0] for c in cases), default=0)
    for r in range(width - 1, -1, -1):
        mine = [k for k, c in enumerate(cases) if c[0] > r]
        free = sorted((k for k in mine if k not in once), key=lambda k: -cases[k][0])
        short = least - sum(calls[k] for k in mine)
        for i in range(max(0, short) if free else 0):
            calls[free[i % len(free)]] += 1
    return calls


def grade_cases(
    fn: Callable[..., Any] | str,
    cases: Sequence[tuple[int, int, str, int]],
    *,
    limit_s: float | None = None,
    calls: int = 1,
    once: Collection[int] = (),
) -> list[dict[str, Any]]:
    """Run the all-reduce ``fn(comm, buf)`` on each case ``(n, size, dtype, seed)`` in one launch of
    ``max(n)`` processes (smaller cases on the first n ranks), and return rank 0's record of each case with
    every rank's record under ``"ranks"`` (what each returned against ``MPI.Allreduce``, bytes it sent).

    With ``calls`` above 1, every rank calls ``fn`` that many times in all (:func:`_plan_calls`; the cases at the
    indices ``once`` run once), the same launch running a case's sizes again with new values; a rank's record then
    has ``"again"``, its first wrong call of those (call number, the element, whether it returned an earlier
    call's result), ``"repeated"`` (how many more calls the case got: fewer than planned only past
    :data:`REPEAT_BUDGET_S` seconds of repeats) and ``"of"``, the rank's calls in all."""
    src, name = source_of(fn)
    width = max(c[0] for c in cases)
    job = {
        "mode": "grade",
        "source": src,
        "name": name,
        "cases": [tuple(c) for c in cases],
        "repeats": _plan_calls(cases, calls, once),
        "budget_s": REPEAT_BUDGET_S,
    }
    run = launch(job, width, limit_s=limit_s)
    per_rank = [r["cases"] for r in run.results]
    out = []
    for k, (n, size, dtype, seed) in enumerate(cases):
        recs = []
        for r in range(n):
            idx = sum(1 for j in range(k) if cases[j][0] > r)  # rank r took part in the earlier cases with more ranks
            recs.append(per_rank[r][idx] if idx < len(per_rank[r]) else {})
        out.append({"n": n, "size": size, "dtype": dtype, "seed": seed, "ranks": recs})
    return out


@dataclass(frozen=True)
class Timing:
    """One size of :func:`bench`: median seconds of the learner's all-reduce and of ``MPI.Allreduce``."""

    n: int
    nbytes: int
    seconds: float
    mpi_seconds: float

    @property
    def algbw(self) -> float:
        """GB/s: bytes / time (nccl-tests' algbw)."""
        return self.nbytes / self.seconds / 1e9

    @property
    def busbw(self) -> float:
        """GB/s: algbw x 2(n-1)/n (nccl-tests' all-reduce busbw)."""
        return self.algbw * _bw.busbw_factor("all_reduce", self.n)

    @property
    def mpi_busbw(self) -> float:
        """GB/s: ``MPI.Allreduce``'s busbw, as :attr:`busbw`."""
        return self.nbytes / self.mpi_seconds / 1e9 * _bw.busbw_factor("all_reduce", self.n)


def bench(
    fn: Callable[..., Any] | str, n: int, sizes: Sequence[int], reps: int = 5, *, limit_s: float | None = None
) -> list[Timing]:
    """Time the all-reduce ``fn(comm, buf)`` and ``MPI.Allreduce`` on ``n`` local processes for float32 buffers of
    each size (elements): the median over ``reps`` of the slowest rank. CPU processes over shared memory."""
    src, name = source_of(fn)
    if not sizes or any(not isinstance(s, int) or s < 1 for s in sizes):
        raise RankError(f"sizes must be whole numbers of elements >= 1, got {list(sizes)!r}.")
    run = launch({"mode": "bench", "source": src, "name": name, "sizes": list(sizes), "reps": int(reps)}, n, limit_s=limit_s)
    return [Timing(n, row["nbytes"], row["learner"], row["mpi"]) for row in run.results[0]["rows"]]


# ---------------------------------------------------------------------------------------------- one process per GPU


def gpu_status() -> tuple[bool, str]:
    """``(can_run, reason)`` for :func:`gpu_bench`: gpu mode, two GPUs or more, NCCL for CuPy and MPI."""
    from labkit.mode import env

    e = env()
    if not e.is_gpu:
        return False, f"labkit is in sim mode ({e.reason}): no GPU for one process per GPU"
    if e.gpu_count < 2:
        return False, (
            f"this machine has one GPU ({e.device_name}): a ring needs two processes on two GPUs; "
            "the CPU processes above run the same code"
        )
    try:
        from cupy.cuda import nccl
    except Exception as exc:  # ImportError, or CuPy without NCCL
        return False, f"cupy.cuda.nccl is not importable ({type(exc).__name__}); pip install nvidia-nccl-cu12"
    if not getattr(nccl, "available", True):
        return False, "CuPy was built without NCCL (cupy.cuda.nccl.available is False)"
    ok, why = available()
    return (True, f"{e.gpu_count} GPUs, NCCL through cupy.cuda.nccl, {why}") if ok else (False, why)


@dataclass(frozen=True)
class GpuTiming:
    """One size of :func:`gpu_bench`, measured with CUDA events (the slowest GPU counts)."""

    n: int
    nbytes: int
    correct: bool
    seconds: float  # the learner's ring over NCCL send/recv
    nccl_seconds: float  # NCCL's own allReduce
    cuda_aware_mpi_seconds: float | None

    def busbw(self, seconds: float | None = None) -> float:
        """nccl-tests' all-reduce busbw (GB/s) for ``seconds`` (default: the learner's ring)."""
        t = self.seconds if seconds is None else seconds
        return self.nbytes / t / 1e9 * _bw.busbw_factor("all_reduce", self.n)


def gpu_bench(
    fn: Callable[..., Any] | str,
    n: int | None = None,
    sizes: Sequence[int] = (1 << 20, 1 << 26),
    reps: int = 5,
    *,
    limit_s: float = 120.0,
) -> tuple[list[GpuTiming], dict[str, Any]]:
    """Run the rank function ``fn(comm, buf)`` with one process per GPU on CuPy buffers: ``comm.Sendrecv`` over
    NCCL (unique id broadcast over MPI), checked against NCCL's ``allReduce`` and timed beside it, and over
    CUDA-aware MPI where the MPI library has it. Needs :func:`gpu_status` to say yes."""
    from labkit.errors import NoGPUError
    from labkit.mode import env

    ok, why = gpu_status()
    if not ok:
        raise NoGPUError(f"gpu_bench cannot run: {why}.", fix="Use ranks.bench (CPU processes) and the models here.")
    n = min(env().gpu_count, MAX_RANKS) if n is None else n
    src, name = source_of(fn)
    run = launch({"mode": "gpu", "source": src, "name": name, "sizes": list(sizes), "reps": int(reps)}, n, limit_s=limit_s)
    first = run.results[0]
    rows = [
        GpuTiming(
            n,
            row["nbytes"],
            all(r["rows"][k]["correct"] for r in run.results),
            row["learner"],
            row["nccl"],
            row.get("cuda_aware_mpi"),
        )
        for k, row in enumerate(first["rows"])
    ]
    return rows, {
        "device": first["device_name"],
        "cuda_aware_mpi": first["cuda_aware"],
        "devices": [r["rows"][0]["device"] if r["rows"] else None for r in run.results],
    }
