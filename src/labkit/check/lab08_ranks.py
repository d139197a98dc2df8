"""Check for lab 08's multi-process exercise: a ring all-reduce over MPI processes (``08.mpi-ring``).

The learner's rank function ``fn(comm, buf)`` runs on real local processes (:mod:`labkit.ranks`, ``mpiexec`` of
the function's source). One launch grades every case: 2 up to 8 processes (fewer when ``LABKIT_MAX_RANKS`` caps
them, as the test suite does on 2 cores), buffer sizes drawn fresh that the process count does not divide, sizes
smaller than the process count, float32 and int32. Each rank's result is compared with ``MPI.Allreduce`` of the
same buffers; then, in the same launch, the small cases run again with the same sizes and new values until each
rank has called the function :data:`~labkit.check.properties.REPEATS` times (44: an answer wrong on 10% of its
calls fails with probability ≥ 99%), each result compared with the NumPy sum of the ranks' inputs, so a cache by
size or state kept between calls fails with the call's number (the large no-deadlock case runs once). The bytes
each rank sent and the ranks it talked to name the usual slips (no all-gather, whole buffers instead of chunks, a
non-neighbour, a changed dtype). A rank that raises or hangs is reported by rank and call, within the course's
time limit, and every process is stopped.
"""

from __future__ import annotations

from typing import Any

from ..dist._rank_comm import RankCounters
from .core import Failed, Unsolved, exercise
from .numeric import need_function
from .properties import REPEATS


def _ref() -> Any:
    from labkit.dist.mpi_ring import ring_allreduce

    return ring_allreduce


class _OneRank(RankCounters):
    """A communicator of one rank, in this process: a skeleton's NotImplementedError shows without starting MPI."""

    def __init__(self) -> None:
        self._start_counting(0, 1)

    def _exchange(self, sendbuf: Any, dest: int, sendtag: int, recvbuf: Any, source: Any, recvtag: Any, status: Any) -> None:
        if recvbuf is not None:
            recvbuf[...] = sendbuf  # one rank sends to itself

    def Barrier(self) -> None:  # noqa: N802
        pass


def _preflight(fn: Any) -> None:
    """Run ``fn`` once on one rank here: a skeleton is "not solved yet" at once. Anything else it does is left to the
    real processes, which report it with the rank and the call."""
    import numpy as np

    try:
        fn(_OneRank(), np.arange(3, dtype=np.float32))
    except NotImplementedError:
        raise
    except KeyboardInterrupt as exc:  # Interrupt in the learner's own loop: the red box ends at their line
        from ..learner_frames import hide_library_frames

        if not exc.args:
            exc.args = (
                "stopped by Interrupt in your function, run once on one rank in this process before any MPI "
                "process started (none was started)",
            )
        raise hide_library_frames(exc) from None
    except Exception:  # noqa: BLE001 - judged on real processes below
        pass


def cases() -> list[tuple[int, int, str, int]]:
    """Fresh cases ``(n, size, dtype, seed)``: every n from 2 to the cap, sizes n does not divide and sizes below n,
    float32 and int32 (the largest n gets both kinds of size)."""
    from labkit.dist import ranks

    from .draws import between, not_multiple
    from .harness import rng

    top = min(8, ranks.max_ranks())
    seed = int(rng().integers(0, 2**31))
    out: list[tuple[int, int, str, int]] = []
    for k, n in enumerate(range(top, 1, -1)):  # largest first: one launch of `top` processes serves them all
        dtype = "float32" if k % 2 == 0 else "int32"
        out.append((n, not_multiple(n + 1, 40 * n, n), dtype, seed + 2 * k))
        if n > 2 and (k % 2 == 1 or n == top):
            out.append((n, between(1, n - 1), "int32" if dtype == "float32" else "float32", seed + 2 * k + 1))
    out.insert(1, (top, not_multiple(2000, 5000, top), "int32", seed + 99))
    # chunks of 100,000+ floats (400 KB): past what MPI buffers for a blocking Send, so Send-then-Recv on every rank
    # deadlocks here as it would on a real network; a Sendrecv or an Isend/Irecv pair does not
    out.append((2, not_multiple(BIG_CHUNK * 2, BIG_CHUNK * 2 + 40_000, 2), "float32", seed + 98))
    return out


#: Elements of a chunk in the large case: 400 KB of float32, far past MPI's eager (buffered) message size.
BIG_CHUNK = 100_000


_SENDS = {"Send": 2, "Isend": 2, "Ssend": 2, "Bsend": 2, "Rsend": 2, "send": 2, "isend": 2, "ssend": 2}
_RECVS = {"Recv": 2, "Irecv": 2, "recv": 2, "irecv": 2}


def _tags(fn: Any) -> tuple[set[str], set[str]] | None:
    """The tags ``fn``'s source sends with and receives with (as written: ``7``, ``step``; a send without one uses
    tag 0, a receive without one takes any tag, ``*``), or None when there is no source to read."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    sent: set[str] = set()
    taken: set[str] = set()

    def tag(call: ast.Call, keyword: str, position: int, default: str) -> str:
        for kw in call.keywords:
            if kw.arg == keyword:
                return "*" if "ANY_TAG" in ast.unparse(kw.value) else ast.unparse(kw.value)
        if len(call.args) > position:
            text = ast.unparse(call.args[position])
            return "*" if "ANY_TAG" in text else text
        return default

    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        if name in _SENDS:
            sent.add(tag(node, "tag", _SENDS[name], "0"))
        elif name in _RECVS:
            taken.add(tag(node, "tag", _RECVS[name], "*"))
        elif name in ("Sendrecv", "sendrecv", "Sendrecv_replace"):
            sent.add(tag(node, "sendtag", 2, "0"))
            taken.add(tag(node, "recvtag", 5 if name == "Sendrecv" else 4, "*"))
    return sent, taken


def tag_mismatch(fn: Any) -> str | None:
    """The likely cause when the tags ``fn`` sends with never match those it receives with (a receive waits for a
    message of its own tag: it hangs, however the sends block), or None."""
    found = _tags(fn)
    if found is None:
        return None
    sent, taken = found
    if not sent or not taken or "*" in taken or sent & taken:
        return None
    numbers = all(t.lstrip("-").isdigit() for t in sent | taken)
    if not numbers and len(sent | taken) > 1 and not (sent <= {"0"}):
        return None  # tags computed from variables may match at run time: nothing to say from the source
    return (
        f"the messages are sent with tag {', '.join(sorted(sent))} but received with tag "
        f"{', '.join(sorted(taken))}: a receive waits for a message with its own tag (and source), so no receive "
        "ever matches and every rank waits. Use the same tag on both sides (or leave both out: a Send's tag is 0, "
        "a Recv takes any tag)."
    )


_RAISED = (
    (
        ("Message truncated", "MPI_ERR_TRUNCATE", "truncat"),
        "a message was larger than the buffer that received it: the chunks of np.array_split differ by one element "
        "when n does not divide the size, so the receive buffer must be the size of the chunk being sent "
        "(np.empty_like(chunks[k]) for the chunk k that arrives), and of the same dtype.",
    ),
    (
        ("could not be broadcast",),
        "a received chunk was added to a chunk of another size: with np.array_split the chunks differ by one "
        "element when n does not divide the size; receive chunk k into a buffer shaped like chunks[k], and add it "
        "to chunks[k] itself.",
    ),
    (
        ("expecting buffer", "buffer interface", "cannot infer count", "expected a writeable", "message:"),
        "comm.Send, Recv and Sendrecv (capital letters) take NumPy arrays, filled in place; comm.send and comm.recv "
        "(small letters) pickle Python objects and return the received object. Pass contiguous NumPy arrays to "
        "the capital-letter calls (np.ascontiguousarray(chunk)).",
    ),
    (
        ("IndexError",),
        "a chunk index out of range: the chunk a rank sends at step s is (r - s) % n and the one it receives "
        "(r - s - 1) % n; without % n the index leaves 0 .. n-1.",
    ),
)


def raised_cause(text: str) -> str | None:
    """The likely cause of an error a rank raised, read from its words (MPI's or NumPy's), or None."""
    return next((cause for keys, cause in _RAISED if any(k in text for k in keys)), None)


def _stuck_cause(text: str, fn: Any = None) -> str | None:
    """The cause of a hang or an error the rank processes report, read from the calls the ranks are stuck in, the
    error a rank raised and (for a hang) the tags the function's source uses."""
    mismatch = tag_mismatch(fn) if fn is not None and "stuck in comm." in text else None
    if mismatch:
        return mismatch
    if " raised " in text.split("\n", 1)[0] and (told := raised_cause(text)):
        return told
    if "stuck in comm.Send" in text or "stuck in comm.send" in text or "stuck in comm.Ssend" in text:
        return (
            "every rank sends first with a blocking Send and only then receives: a Send returns only once the "
            f"message is delivered or buffered, and a chunk of {BIG_CHUNK:,} floats is too large for MPI to "
            "buffer, so all ranks wait in Send for a Recv nobody has posted (a deadlock; small chunks hide it). "
            "Use comm.Sendrecv(sendbuf, dest=..., recvbuf=..., source=...), which sends and receives together, "
            "or a non-blocking pair: req = comm.Isend(...); comm.Recv(...); req.Wait()."
        )
    if "ended with exit status" in text and "without their results" in text:
        return (
            "a rank's MPI call failed and MPI aborted the whole run (the lines above are MPI's own words): most "
            "often a message that does not fit the receive buffer, because the sender and the receiver disagree "
            "on a chunk's size or dtype (float64 data is twice the bytes of a float32 buffer). Send and receive "
            "chunks of the buffer's own dtype; np.empty_like(chunks[0]) fits any chunk."
        )
    return None


def _cause(rec: dict[str, Any], n: int, size: int, itemsize: int) -> str | None:
    bad = rec.get("bad")
    chunk = -(-size // n) * itemsize
    if rec.get("calls", 0) == 0 and n > 1:
        return "this rank never called Sendrecv: a ring all-reduce sends and receives 2(n-1) times."
    if bad and bad[0] == "dtype":
        return (
            f"the result is {bad[1]}, the buffer {bad[2]}: keep the buffer's dtype (reduce in place, or "
            "np.empty_like(chunk) for the receive buffer)."
        )
    if bad and bad[0] == "shape":
        return "return the whole summed buffer (every chunk), not one chunk."
    if bad and bad[0] == "type":
        return f"return the summed NumPy array (or reduce buf in place and return it), not a {bad[1]}."
    far = [p for p in rec.get("partners", []) if p not in ((rec.get("rank", 0) + 1) % n, (rec.get("rank", 0) - 1) % n)]
    if far:
        return f"this rank sent to rank(s) {far}: a ring talks to its two neighbours only, (r + 1) % n and (r - 1) % n."
    ok = rec.get("chunks_ok") or []
    if bad and bad[0] == "value":
        if bad[5]:
            return "the buffer came back unchanged: add what you receive into your chunks (+=)."
        if bad[6]:
            return "every element is twice the sum: the receive buffer was added to a chunk that already held it."
        if ok and sum(ok) == 1:
            return (
                "one chunk is summed and the others are not: that is the reduce-scatter only. The all-gather "
                "(n - 1 more Sendrecv steps) passes each finished chunk round the ring, replacing, not adding."
            )
        if ok and sum(ok) == 0 and size >= n:
            return (
                "no chunk holds the sum: check which chunk each step sends, (r - s) % n, and which it receives "
                "into, (r - s - 1) % n, in the reduce-scatter."
            )
    if rec.get("sent", 0) > 2 * (n - 1) * chunk + itemsize:
        return (
            f"this rank sent {rec['sent']} bytes, more than 2(n-1) chunks of at most {chunk} bytes: send one chunk "
            "per step (np.array_split(buf, n)), not the whole buffer."
        )
    return None


@exercise("08.mpi-ring", kind="code", reference=_ref)
def mpi_ring(fn: Any) -> str:
    """Grade the rank function ``fn(comm, buf) -> summed buffer`` on 2 to 8 real MPI processes."""
    import numpy as np

    from labkit.dist import ranks

    ok, why = ranks.available()
    if not ok:
        raise Failed(
            f"this check starts MPI processes and cannot here: {why}.",
            cause="install MPI from PyPI: python -m pip install mpich mpi4py (make lab does).",
        )
    need_function(fn, "your rank function", cause="pass the function itself.")
    _preflight(fn)
    todo = cases()
    try:
        graded = ranks.grade_cases(fn, todo, calls=REPEATS, once=[k for k, c in enumerate(todo) if c[1] >= 2 * BIG_CHUNK])
    except ranks.RankError as exc:
        text = str(exc)
        if "NotImplementedError" in text:
            raise Unsolved("the function still raises NotImplementedError; write its body.") from None
        raise Failed(text.split("\n  What to do:")[0], cause=_stuck_cause(text, fn) or exc.fix) from None
    for case in graded:
        n, size, dtype = case["n"], case["size"], case["dtype"]
        itemsize = np.dtype(dtype).itemsize
        where = f"{n} processes, {size} {dtype} elements{' (fewer than the processes)' if size < n else ''}"
        for r, rec in enumerate(case["ranks"]):
            rec = dict(rec, rank=r)
            bad = rec.get("bad")
            if (
                rec.get("calls", 0) == 0
                and bad
                and bad[0] == "value"
                and bad[5]
                and all(x.get("calls", 0) == 0 for c in graded for x in c["ranks"])
            ):
                raise Unsolved("your function returns the buffer without talking to the other ranks yet.")
            cause = _cause(rec, n, size, itemsize)
            if bad:
                if bad[0] == "value":
                    raise Failed(
                        f"{where}: rank {r}'s element {bad[1]} is {bad[3]}, MPI.Allreduce gives {bad[2]} "
                        f"({bad[4]} of {size} elements wrong).",
                        cause=cause,
                    )
                raise Failed(f"{where}: rank {r}'s result is wrong ({bad[0]}).", cause=cause)
            if cause is not None and "sent" in cause:
                raise Failed(f"{where}: the sum is right but rank {r} is not a chunked ring.", cause=cause)
            far = cause is not None and "neighbours" in cause
            if far:
                raise Failed(f"{where}: the sum is right but rank {r} is not a ring.", cause=cause)
        _repeats_right(case, where, itemsize)
    least = min(rec.get("of", 0) for case in graded for rec in case["ranks"])
    short = (
        f" (not {REPEATS}: the calls again stop after {ranks.REPEAT_BUDGET_S:g} s per rank, and each of yours took long)"
        if least < REPEATS
        else ""
    )
    return (
        "correct: every rank equals MPI.Allreduce on every process count from 2 to the most this machine runs (at "
        "most 8), for sizes the process count does not "
        "divide, sizes smaller than it, float32 and int32, one chunk per step to a neighbour; and with chunks of "
        f"{BIG_CHUNK:,}+ floats, too large for MPI to buffer, it did not deadlock (no blocking Send before Recv). "
        f"In the same launch each rank called it {least} times or more{short}, the smaller cases' sizes again with "
        "new values, each result compared with the sum."
    )


def _repeats_right(case: dict[str, Any], where: str, itemsize: int) -> None:
    """Raise :class:`Failed` for the earliest wrong call among the case's repeats (its sizes again, new values)."""
    n, size = case["n"], case["size"]
    wrong = [(rec["again"]["call"], r, rec) for r, rec in enumerate(case["ranks"]) if rec.get("again")]
    if not wrong:
        return
    call, r, rec = min(wrong, key=lambda w: (w[0], w[1]))
    again = dict(rec["again"], rank=r)
    bad, first, total = again["bad"], again["first"], rec.get("of", call)
    head = (
        f"{where}, called again with the same sizes and new values: rank {r}'s call {call} of {total} "
        f"(its call {first} with these sizes was right)"
    )
    if bad[0] == "value":
        message = (
            f"{head} gave element {bad[1]} = {bad[3]} where the sum of the ranks' inputs is {bad[2]} (this rank's "
            f"input there: {again['mine']}; {bad[4]} of {size} elements wrong)."
        )
    else:
        message = f"{head} returned a wrong result ({bad[0]}: {', '.join(map(str, bad[1:]))})."
    if again.get("stale") is not None:
        cause: str | None = (
            f"it returned exactly what its call {again['stale']} returned for the same sizes: a result kept from an "
            "earlier call (a cache keyed by size, shape or dtype, or a buffer kept between calls) is stale as soon as "
            "the values change. Compute every call from the buffer it is given."
        )
    else:
        cause = _cause(again, n, size, itemsize)
    raise Failed(
        message,
        cause=cause
        or "the same sizes gave the right sum before and a wrong one now: keep no state between calls (a counter, a "
        "cache, a list that grows), draw nothing at random, and compute every call from the buffer it is given.",
    )
