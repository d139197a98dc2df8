"""Checks for lab 07 (bandwidth and NVLink): link peaks, pinned against pageable, copy time, the DGX-1 peer
matrix, the ring all-reduce's traffic, and the two bidirectional conventions. Every check here is arithmetic on
the learner's function or values, so it runs the same in ``gpu`` and ``sim`` mode and takes milliseconds."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .answers import close, number
from .core import Failed, Unsolved, exercise
from .numeric import FunctionExercise, call_answer, dict_answer, function_exercise, need_function
from .slips import merge_slips, unit_cause

DGX1 = "DGX-1 (V100)"


def _call(fn: Any, *args: Any) -> Any:
    """Call the learner's function; turn its exceptions (other than NotImplementedError) into a report."""
    need_function(fn, cause="pass the function itself, without calling it.")
    value = call_answer(fn, *args, what="your function", tail=f" (arguments {args}).")
    if value is None or value is Ellipsis:
        raise Unsolved("your function returns nothing yet; finish its body and return the number.")
    return value


# ---------------------------------------------------------------------------------------------- 07.pcie-peak


def _ref_pcie() -> Callable[[int, int], float]:
    from labkit.gpu.bandwidth import pcie_peak

    return pcie_peak


def _pcie_cases() -> list[tuple[int, int]]:
    """Every generation and width, in a fresh order each run (x16 first: its slips have distinct ratios)."""
    from .harness import rng

    combos = [(gen, lanes) for gen in (3, 4, 5) for lanes in (8, 4, 2, 1, 32)]
    return [(int(g), 16) for g in rng().permutation([3, 4, 5])] + [combos[int(k)] for k in rng().permutation(len(combos))]


def _pcie_ratios(gen: int, lanes: int) -> dict[float, str]:
    """The slips of a PCIe figure as ``{wrong / right: cause}``; one ratio of two slips names both."""
    slips = {"the result does not depend on the lane count: an x16 figure for every width.": 16.0 / lanes} if lanes != 16 else {}
    slips.update(
        {
            "that is both directions added; the question asks for one direction.": 2.0,
            "that is gigabits per second; divide by 8 bits per byte.": 8.0,
            "that looks like GiB/s (2^30); the course uses GB/s (10^9 bytes/s).": 1 / 1.073741824,
            "that is the bandwidth of one lane; multiply by the number of lanes.": 1 / 16,
            "that leaves out the line code: PCIe 3 to 5 send 130 bits for every 128 bits of data "
            "(128b/130b), so the data rate is GT/s × lanes × 128/130 / 8.": 130 / 128,
        }
    )
    return {factor: cause for cause, factor in merge_slips(slips, 1e-6).items()}


def _pcie_passed() -> str:
    from labkit.gpu.bandwidth import pcie_peak

    return (
        f"correct: Gen4 x16 = {pcie_peak(4, 16):.2f} GB/s and Gen5 x16 = {pcie_peak(5, 16):.2f} GB/s per direction, "
        "twice that with both directions busy."
    )


_PCIE = FunctionExercise(
    "pcie_gbps",
    _pcie_cases,
    lambda gen, lanes: _ref_pcie()(gen, lanes),
    "{got:.3f}, expected {want:.3f} GB/s per direction.",
    ratios=_pcie_ratios,
    otherwise="per direction, a link of `lanes` lanes carries per_link / 16 × lanes (labkit.hw.link(f'PCIe {gen}').per_link "
    "is the x16 figure).",
    question="Grade ``fn(generation, lanes)`` -> theoretical GB/s per direction of a PCIe link.",
    passed=_pcie_passed,
)


pcie_link_bandwidth = function_exercise("07.pcie-peak", "pcie_link_bandwidth", _PCIE, _call, _ref_pcie, __name__)


# ---------------------------------------------------------------------------------------------- 07.pageable-model


def _ref_pageable() -> Callable[[float, float], float]:
    return lambda link_gbps, staging_gbps: 1.0 / (1.0 / link_gbps + 1.0 / staging_gbps)


def _pageable_cases() -> list[tuple[float, float]]:
    """Fresh rates each run: staging slower than the link, both equal, staging faster, and two more at random."""
    from .harness import rng

    r = rng()
    slow, fast = float(round(r.uniform(20, 100), 1)), float(round(r.uniform(3, 15), 1))
    same = float(round(r.uniform(5, 60), 1))
    return [(slow, fast), (same, same), (fast, slow)] + [
        (float(round(a, 1)), float(round(b, 1))) for a, b in r.uniform(2, 120, (2, 2))
    ]


def _pageable_slips(want: float, link: float, staging: float) -> dict[str, float]:
    """The wrong rates of the usual slips, each with its cause, in the order they are tried."""
    return {
        "min(link, staging) assumes the two stages overlap perfectly. This exercise asks for the "
        "no-overlap model: the stages take turns, so their times add.": min(link, staging),
        "rates do not add for steps done one after the other; times do.": link + staging,
        "the average of the rates is not the rate of the whole; add the times per byte.": (link + staging) / 2,
        "multiply gives the wrong units; add the times per byte (1/rate), then invert.": link * staging,
        "that is the time per byte (1/link + 1/staging); the rate is its inverse.": 1 / want,
        "that is twice the staged rate: 1 / (1/link + 1/staging), with no factor 2 (one byte crosses each stage once).": 2 * want,
    }


_PAGEABLE = FunctionExercise(
    "pageable_gbps",
    _pageable_cases,
    lambda link, staging: 1.0 / (1.0 / link + 1.0 / staging),
    "{got:.3f}, expected {want:.3f} GB/s.",
    values=_pageable_slips,
    otherwise="per byte the two stages take 1/link + 1/staging seconds (per GB); the rate is 1 / (1/link + 1/staging).",
    question="Grade ``fn(link_gbps, staging_gbps)`` -> GB/s of a copy staged through pinned memory with no overlap.",
    passed="correct: with no overlap the staged copy's rate is 1 / (1/link + 1/staging), below the slower stage.",
)


pageable_copy_model = function_exercise("07.pageable-model", "pageable_copy_model", _PAGEABLE, _call, _ref_pageable, __name__)


# ---------------------------------------------------------------------------------------------- 07.copy-time


def _ref_copy_time() -> Callable[[float, float], float]:
    return lambda nbytes, peak_gbps: 2 * nbytes / (peak_gbps * 1e9)


def _copy_time_cases() -> list[tuple[int, float]]:
    """Fresh sizes (4 KiB to 8 GiB) and peaks (20 to 5000 GB/s) each run."""
    from .harness import rng

    r = rng()
    cases = [(int(2 ** r.uniform(12, 33)), float(round(r.uniform(20, 5000), 1))) for _ in range(5)]
    cases[0] = (int(r.integers(1, 9)) * 2**30, cases[0][1])  # a whole number of GiB: GiB against GB shows
    cases[1] = (int(r.integers(2**31 + 1, 2**34)), cases[1][1])  # past 2^31: 32-bit integer byte arithmetic overflows
    return cases


_COPY_TIME = FunctionExercise(
    "copy_seconds",
    _copy_time_cases,
    lambda nbytes, peak: 2 * nbytes / (peak * 1e9),
    "{got:.4g} s, expected {want:.4g} s.",
    ratios=lambda nbytes, peak: {
        0.5: "a copy reads every byte and writes it again: count 2 x nbytes of memory traffic.",
        1e3: "that is milliseconds; return seconds.",
        1e6: "that is microseconds; return seconds.",
        1e9 / 2**30: "the peak is in GB/s = 10^9 bytes/s, not GiB/s.",
        1e-9: "convert GB/s to bytes per second: multiply by 10^9.",
        4.0: "a copy moves 2 × nbytes, not 4 × nbytes: the read and the write, each once.",
    },
    nbytes=0,
    otherwise="time = 2 × nbytes / (peak_gbps × 10^9) seconds: bytes read plus bytes written, over the rate.",
    question="Grade ``fn(nbytes, peak_gbps)`` -> the shortest time in seconds to copy ``nbytes`` within one memory.",
    passed="correct: a copy moves its bytes twice through memory (read + write), so it takes 2N / bandwidth.",
)


hbm_copy_time = function_exercise("07.copy-time", "hbm_copy_time", _COPY_TIME, _call, _ref_copy_time, __name__)


# ---------------------------------------------------------------------------------------------- 07.dgx1-peer-matrix


def _dgx1_expected() -> list[list[float]]:
    from labkit.hw import topology

    t = topology.load(DGX1)
    return [[0.0 if i == j else t.peer_bandwidth(i, j) for j in t.gpus()] for i in t.gpus()]


@exercise("07.dgx1-peer-matrix", kind="numeric", reference=_dgx1_expected)
def dgx1_peer_matrix(answer: Any) -> str:
    """Grade an 8x8 matrix (nested lists or an array) of GB/s per direction over direct NVLinks of a DGX-1 (V100)."""
    want = _dgx1_expected()
    n = len(want)
    try:
        rows = [list(r) for r in answer]
    except TypeError:
        raise Failed(f"expected an {n}x{n} matrix (a list of {n} rows), got {type(answer).__name__}.") from None
    if len(rows) != n or any(len(r) != n for r in rows):
        raise Failed(f"expected {n} rows of {n} numbers (one per GPU), got {len(rows)} rows of lengths {[len(r) for r in rows]}.")
    got = [[number(v, f"entry [{i}][{j}]") for j, v in enumerate(r)] for i, r in enumerate(rows)]
    for i in range(n):
        if got[i][i] != 0:
            raise Failed(f"entry [{i}][{i}] is {got[i][i]:g}; a GPU's copy to itself is not a peer copy: put 0.")
    bad = [
        (i, j)
        for i in range(n)
        for j in range(n)
        if not close(got[i][j], want[i][j]) and not (want[i][j] == 0 and got[i][j] == 0)
    ]
    if not bad:
        top = max(max(r) for r in want)
        none = sum(1 for i in range(n) for j in range(i + 1, n) if want[i][j] == 0)
        return (
            f"correct: pairs with two NVLinks get {top:g} GB/s per direction, pairs with one link {top / 2:g}, "
            f"and {none} of the {n * (n - 1) // 2} pairs have no NVLink at all."
        )
    i, j = bad[0]
    ratios = {got[a][b] / want[a][b] for a, b in bad if want[a][b]}
    cause = None
    if len(ratios) == 1 and len(bad) == sum(1 for r in want for v in r if v):
        (r,) = ratios
        if close(r, 2.0):
            cause = "every NVLink entry is doubled: that is both directions added. Give one direction."
        elif close(r, 0.8):
            cause = "20 GB/s per link is NCCL's model of usable bandwidth; the wiring's figure is labkit.hw's per_link."
        elif close(r, 0.5):
            cause = "the entries count links but not two links' worth for NV2 pairs, or use half a link's bandwidth."
    if cause is None and want[i][j] == 0 and got[i][j] != 0:
        cause = (
            f"GPU{i} and GPU{j} have no NVLink between them (nvidia-smi shows SYS): traffic takes PCIe through the "
            "CPUs. Put 0 in this matrix of direct NVLink bandwidth."
        )
    if cause is None and all(close(got[a][b], want[b][a]) for a, b in bad):
        cause = "the matrix is transposed? It should be symmetric; check the indices."
    if cause is None and len(ratios) == 1:
        cause = unit_cause(next(iter(ratios)), 1.0)
    if (
        cause is None
        and want[i][j]
        and got[i][j]
        and close(got[i][j] * 2, want[i][j])
        or (cause is None and want[i][j] and close(got[i][j], 2 * want[i][j]))
    ):
        cause = (
            f"GPU{i} and GPU{j} are joined by {round(want[i][j] / (max(max(r) for r in want) / 2))} NVLink(s): "
            "count the links of this pair, topo.links_between(i, j), and multiply by one link's bandwidth."
        )
    if cause is None:
        cause = (
            "entry [i][j] = topo.links_between(i, j) × labkit.hw.link('NVLink 2').per_link (per direction), 0 on the "
            "diagonal and where no NVLink joins the pair."
        )
    raise Failed(
        f"entry [{i}][{j}] (GPU{i} -> GPU{j}) is {got[i][j]:g}, expected {want[i][j]:g} GB/s per direction; "
        f"{len(bad)} entries differ.",
        cause=cause,
    )


# ---------------------------------------------------------------------------------------------- 07.allreduce-bytes


def _ref_ring() -> Callable[[float, int], float]:
    return lambda nbytes, n: 2 * (n - 1) * nbytes / n


def _ring_bytes_cases() -> Iterator[tuple[int, int]]:
    """4 GPUs first (its wrong answers have distinct ratios), then a fresh mix of ring sizes, one GPU included; fresh
    sizes, one past 2^31 every time (byte arithmetic in 32-bit integers, np.int32, overflows there). Drawn as the
    cases are graded."""
    from .harness import rng

    r = rng()
    sizes = [int(r.integers(2, 9)), int(r.integers(9, 33)), int(r.integers(33, 1025))]
    for n in (4, *sizes, 2, 1):
        for nbytes in (int(2 ** r.uniform(10, 34)), int(r.integers(1, 100)) * 10**7, int(r.integers(2**31 + 1, 2**35))):
            yield nbytes, n


_RING_BYTES = FunctionExercise(
    "ring_allreduce_sent",
    _ring_bytes_cases,
    lambda nbytes, n: 2 * (n - 1) * nbytes / n,
    "{got:.6g}, expected {want:.6g} bytes.",
    zero_atol=1e-9,
    first=lambda nbytes, n: "with one GPU there is nobody to send to: 0 bytes." if n == 1 else None,
    ratios=lambda nbytes, n: {
        0.5: "that is one phase; the ring all-reduce has two (reduce-scatter, then all-gather).",
        n / (n - 1): "each phase has n - 1 steps, not n.",
        n: "each step sends one chunk of nbytes / n, not the whole buffer.",
    },
    nbytes=0,
    otherwise="two phases (reduce-scatter, all-gather) of n - 1 steps, each step one chunk of nbytes / n: 2 (n - 1) / n × nbytes.",
    question="Grade ``fn(nbytes, n)`` -> bytes each GPU sends in a ring all-reduce of ``nbytes`` over ``n`` GPUs.",
    passed="correct: each GPU sends 2(n-1)/n x the buffer, so busbw = algbw x 2(n-1)/n is what each link carries.",
)


allreduce_ring_bytes = function_exercise("07.allreduce-bytes", "allreduce_ring_bytes", _RING_BYTES, _call, _ref_ring, __name__)


# ---------------------------------------------------------------------------------------------- 07.bidir-conventions


def _dgx2_bidirectional() -> float:
    from labkit.hw import topology

    return topology.load("DGX-2").peer_bandwidth(0, 15, bidirectional=True)


@exercise("07.bidir-conventions", kind="numeric")
def bidirectional_conventions(answer: Any, forward: float, backward: float) -> str:
    """Grade ``{"p2p_sum": ..., "dgx2_per_direction": ...}`` for a pair measured (or modelled) per direction as
    ``forward`` and ``backward`` GB/s."""
    dict_answer(answer, ("p2p_sum", "dgx2_per_direction"))
    fwd, back = float(forward), float(backward)
    s = number(answer["p2p_sum"], "p2p_sum")
    want = fwd + back
    if not close(s, want):
        cause = None
        if close(s, fwd) or close(s, back):
            cause = "that is one direction (nvbandwidth's figure); p2pBandwidthLatencyTest adds the two."
        elif close(s, want / 2):
            cause = "that is the mean of the two directions; p2pBandwidthLatencyTest adds them."
        else:
            cause = unit_cause(s, want) or "p2p_sum = forward + backward: the two measured directions, added."
        raise Failed(f"p2p_sum is {s:g}, expected {want:g} GB/s (both directions added).", cause=cause)
    bidir = _dgx2_bidirectional()
    d = number(answer["dgx2_per_direction"], "dgx2_per_direction")
    if not close(d, bidir / 2):
        cause = (
            "300 GB/s is already both directions added: halve it."
            if close(d, bidir)
            else (
                "that doubles it; the bidirectional figure is the sum, so one direction is half."
                if close(d, 2 * bidir)
                else unit_cause(d, bidir / 2)
                or "the DGX-2's figure between two GPUs is both directions added: one direction is half of it."
            )
        )
        raise Failed(f"dgx2_per_direction is {d:g}, expected {bidir / 2:g} GB/s.", cause=cause)
    return (
        f"correct: the same link reads {want / 2:g} (per direction, nvbandwidth) or {want:g} (sum, "
        f"p2pBandwidthLatencyTest); the DGX-2's {bidir:g} GB/s is {bidir / 2:g} each way."
    )


# ------------------------------------------------------------------------------------------ 07.event-timing
def _reference_event_timing() -> Callable[..., dict[str, float]]:
    def time_copies(cp: Any, host: Any, repeat: int) -> dict[str, float]:
        stream = cp.cuda.Stream(non_blocking=True)
        a, b = cp.empty(host.shape, host.dtype), cp.empty(host.shape, host.dtype)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        with stream:
            a.set(host)  # warm-up
            start.record()
            for _ in range(repeat):
                a.set(host)
            end.record()
            end.synchronize()
            h2d = repeat * host.nbytes / (cp.cuda.get_elapsed_time(start, end) * 1e-3) / 1e9
            b[...] = a  # warm-up
            start.record()
            for _ in range(repeat):
                b[...] = a
            end.record()
            end.synchronize()
            d2d = 2 * repeat * host.nbytes / (cp.cuda.get_elapsed_time(start, end) * 1e-3) / 1e9
        return {"h2d": h2d, "d2d_read_write": d2d}

    return time_copies


_TIMING_KEYS = ("h2d", "d2d_read_write")


def _timed_regions(rec: Any) -> dict[str, tuple[Any, Any, list[Any]]]:
    """For each event pair whose time the function read: the operations recorded between the two events, by kind."""
    regions: dict[str, tuple[Any, Any, list[Any]]] = {}
    for start, end in rec.elapsed_reads:
        ops = rec.ops[start._recorded_after : end._recorded_after]
        kinds = {o.kind for o in ops}
        if len(kinds) == 1:
            regions[kinds.pop()] = (start, end, ops)
    return regions


def _grade_timing_record(rec: Any, got: Any, host: Any, repeat: int, label: str) -> dict[str, float]:
    """What the learner's events measured, checked against how the lab says to measure: returns the GB/s figures."""
    from .answers import judge

    if not rec.ops:
        if isinstance(got, dict) and any(v is not None and v is not Ellipsis for v in got.values()):
            raise Failed(
                f"{label}: time_copies returned figures without timing a single copy.",
                cause="measure them: copies of `host` to the device and between device arrays, bracketed by "
                "CUDA events; a figure from a data sheet or a guess is not a measurement.",
            )
        raise Unsolved("time_copies issued no copies yet; write its body.")
    if not isinstance(got, dict) or set(_TIMING_KEYS) - set(got):
        raise Failed(f"{label}: return a dict with the keys {', '.join(map(repr, _TIMING_KEYS))}, got {got!r:.80}.")
    if any(got[k] is Ellipsis or got[k] is None for k in _TIMING_KEYS):
        raise Unsolved("fill in both figures of the dict.")
    pageable = rec.pageable_copies()
    if pageable:
        raise Failed(
            f"{label}: {len(pageable)} copies use pageable host memory (the first: {pageable[0].label}), not the "
            "pinned `host` the function was given.",
            cause="copy from `host` itself (a.set(host)): host.copy(), np.array(host) or host.astype(...) make a "
            "new, pageable buffer, and a copy from pageable memory is staged through a pinned one by the "
            "driver: it measures the pageable rate, not the link's.",
        )
    regions = _timed_regions(rec)
    out = {}
    for key, kind, factor, what in (
        ("h2d", "h2d", 1, "host→device copies (d.set(host))"),
        ("d2d_read_write", "d2d", 2, "device→device copies (b[...] = a)"),
    ):
        if kind not in regions:
            raise Failed(
                f"{label}: no pair of events brackets the {what} alone, or their time was never read.",
                cause="record start, issue the copies of one kind, record end, end.synchronize(), then "
                "cupy.cuda.get_elapsed_time(start, end); one pair of events per kind of copy.",
            )
        start, end, ops = regions[kind]
        if len(ops) != repeat:
            raise Failed(
                f"{label}: {len(ops)} {what} between the events; repeat={repeat} were asked for.",
                cause="time a batch of `repeat` copies: one copy is too short to time with events.",
            )
        if not any(o.kind == kind for o in rec.ops[: start._recorded_after]):
            raise Failed(
                f"{label}: the first of the {what} is inside the timed region: nothing warmed up.",
                cause="do one copy of the same kind before recording start: the first copy pays set-up costs.",
            )
        early = [o for o in rec.not_after(start) if o in ops]
        if early:
            raise Failed(
                f"{label}: {len(early)} of the {what} are not ordered after the start event: they ran on a "
                "stream that never waits for the stream start was recorded on (a non-blocking stream does not "
                "wait for the null stream), so the GPU may run them before start is stamped.",
                cause="record the events on the stream the copies run on (inside `with stream:`, "
                "event.record() uses the current stream).",
            )
        if not rec.covers_all(end):
            raise Failed(
                f"{label}: the end event does not follow the {what}: they ran on another stream than the events.",
                cause="record the events on the stream the copies run on (inside `with stream:`, "
                "event.record() uses the current stream).",
            )
        ms = (end._t - start._t) * 1e3
        want = factor * repeat * host.nbytes / (ms * 1e-3) / 1e9
        value = number(got[key], f"{key!r}", positive=True)
        slips = (
            {
                "counted each byte once: a copy inside one memory reads and writes it, so the memory moved 2 x nbytes "
                "per copy": want / 2
            }
            if factor == 2
            else {"counted both directions or read+write: a host→device copy moves each byte once over the link": want * 2}
        )
        slips.update(
            {
                "GiB/s (2^30) instead of GB/s (10^9)": want * 1e9 / 2**30,
                "1000 times the figure: MB/s where GB/s are asked (bytes/s divided by 10^6, not 10^9), or "
                "get_elapsed_time's milliseconds taken as seconds (divide by 1e3 for seconds)": want * 1e3,
                "1000 times too small: TB/s where GB/s are asked (bytes/s divided by 10^12), or the milliseconds "
                "divided by 1e3 once too often (milliseconds are 1e-3 s)": want / 1e3,
                "the bytes of one copy, not of the whole batch": want / repeat,
                "gigabits per second: the figure is in bytes (GB/s), 8 bits each": want * 8,
            }
        )
        judge(
            value,
            want,
            key,
            "GB/s",
            rel=0.01,
            slips=merge_slips(slips, 0.01),
            unit_factors=True,
            otherwise="GB/s = bytes moved in the timed region / seconds between the events / 1e9.",
        )
        out[key] = value
    return out


@exercise("07.event-timing", kind="code", reference=_reference_event_timing)
def event_timing(fn: Any) -> str:
    """Grade ``time_copies(cp, host, repeat) -> {"h2d": GB/s, "d2d_read_write": GB/s}``. In ``sim`` mode ``cp`` is a
    recording stand-in of CuPy's stream and event API whose copies are real host-memory copies, timed by the host
    clock where the events sit: the check reads where the events are, how many copies they bracket, and whether the
    figures follow from them. On a GPU ``cp`` is CuPy and the figures are also compared with ``labkit.bandwidth``'s
    nvbandwidth-style measurements (host→device within 30%; device→device from 60% to 130% of the better of the
    copy-engine and SM copies)."""
    import numpy as np

    from labkit.gpu import bandwidth as bw
    from labkit.gpu.cupylab import cupy_or_none

    from .harness import rng as draws_rng
    from .streams import RecordingCuPy, call_learner

    need_function(fn, "a function time_copies(cp, host, repeat)")
    rng = draws_rng()  # (its sizes repeat when the generic rule runs the check again with new values)
    # 1-3 MB of float32, not a round size: the figures are graded against the learner's own events, so the size
    # only has to make each copy take measurable time on the host
    n = int(rng.integers(1, 4)) * (1 << 18) + int(rng.integers(1, 1000))
    repeat = int(rng.integers(4, 9))
    host = rng.standard_normal(n).astype(np.float32)
    host_before = host.copy()
    rec = RecordingCuPy(clock="host")
    rec.pinned.append(host)
    label = f"{host.nbytes / 1e6:.1f} MB, repeat={repeat}"
    try:
        got = call_learner(fn, rec, host, repeat, what=f"time_copies(cp, host, repeat={repeat})")
    except Failed as exc:
        if any(e._t == s._t for s, e in rec.elapsed_reads):
            raise Failed(
                str(exc),
                cause="the events measured 0 ms: no work ran between them on their stream. Record "
                "them on the stream the copies run on (inside `with stream:`, event.record() "
                "uses the current stream).",
            ) from None
        raise
    if not np.array_equal(host, host_before):
        k = int(np.argmax(host != host_before))
        raise Failed(
            f"{label}: your function wrote into its input `host` (host[{k}] was {host_before[k]!r}, is now {host[k]!r}).",
            cause="time copies *from* host; leave its contents alone (no d.get(out=host)).",
        )
    _grade_timing_record(rec, got, host, repeat, label)  # host-memory timings vary with the machine's load: the
    # figures are graded against the learner's own events; the notebook prints labkit's host measurement beside them
    extra = ""
    cp = cupy_or_none()
    if cp is not None:
        import cupyx

        size = 256 * 2**20
        pinned = cupyx.empty_pinned((size // 4,), dtype=np.float32)
        pinned[:] = 1.0
        mine = call_learner(fn, cp, pinned, 8, what="time_copies on the GPU")
        if not isinstance(mine, dict) or set(_TIMING_KEYS) - set(mine):
            raise Failed("on the GPU: time_copies did not return the dict.")
        h2d = bw.host_to_device(0, size, "pinned").gbps
        # a device copy may run on the copy engine or on the SMs (b[...] = a is a kernel): compare with the better
        d2d = max(bw.device_local_copy(0, size, "ce").read_write_gbps, bw.device_local_copy(0, size, "sm").read_write_gbps)
        for key, theirs, low in (("h2d", h2d, 0.7), ("d2d_read_write", d2d, 0.6)):
            yours = number(mine[key], key, positive=True)
            if not low <= yours / theirs <= 1.3:
                raise Failed(
                    f"on the GPU: your {key} {yours:.1f} GB/s against labkit.bandwidth's {theirs:.1f} GB/s: "
                    f"outside {low:.0%} to 130% of it.",
                    cause="pinned host memory, a warm-up copy, a batch of copies between the events, the "
                    "events on the copies' stream, end.synchronize() before reading the time.",
                )
        extra = f" On the GPU: h2d {mine['h2d']:.1f} GB/s (labkit {h2d:.1f}), d2d {mine['d2d_read_write']:.0f} GB/s read+write (labkit {d2d:.0f})."
    return (
        "events bracket a warmed-up batch of each kind of copy on the copies' stream, and both GB/s figures follow "
        "from them (host-memory copies in sim mode)." + extra
    )
