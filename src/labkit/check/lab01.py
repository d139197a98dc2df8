"""Checks for lab 01 (GPU and DGX architecture): vendor claims dissected with labkit.hw and labkit.topology.

Expected values are computed from :mod:`labkit.hw` (never typed in here), so a check agrees with the data
the notebook prints. Wrong answers that come from a known slip (bidirectional for per direction, dense for
sparse, bits for bytes, TFLOP/s for PFLOP/s) are named as the likely cause.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from .. import hw
from .answers import judge, number
from .core import Failed, Unsolved, exercise
from .harness import rng
from .numeric import call_answer, figure, listed_slips

# Answers within 0.8% pass: they are computed from the labkit.hw figures the notebook prints, so only rounding
# separates a right answer from the expected one (20 for 19.87 passes), while the nearest plausible wrong answer
# (19.5, the A100's FP32 peak, against a ratio of 19.87) is 1.9% away. An answer nearer to a slip than to the right
# value is named as that slip. The tests check that every slip lies further than 2 x REL from the right value.
REL = 0.008


def _near(x: float, y: float, rel: float = REL) -> bool:
    return abs(x - y) <= rel * abs(y)


def _diagnose(got: float, expected: float, what: str, slips: dict[str, float], unit: str) -> str:
    """Raise Failed naming the slip nearest to ``got``; return a message when ``got`` is right."""
    return judge(got, expected, what, unit, rel=REL, slips=slips, unit_factors=True)


def _v100_vs_p100() -> tuple[float, float]:
    v = hw.gpu("V100").peak("fp16").value
    p = hw.gpu("P100")
    return v / p.peak("fp32").value, v / p.peak("fp16").value


def _v100_vs_p100_slips() -> tuple[dict[str, float], dict[str, float]]:
    """Plausible wrong values of (ratio_fp32, ratio_fp16), each with its cause."""
    v, p = hw.gpu("V100"), hw.gpu("P100")
    simt = v.peak("fp16", tensor_core=False).value
    return (
        {
            "you used the V100's FP32 peak; the claim is about its Tensor Cores (fp16)": v.peak("fp32").value
            / p.peak("fp32").value,
            "you used the V100's FP16 rate on its CUDA cores; the claim is about its Tensor Cores": simt / p.peak("fp32").value,
            "that is a peak in TFLOP/s, not a ratio: divide the V100 figure by the P100 figure": v.peak("fp16").value,
        },
        {
            "you used the V100's FP16 rate on its CUDA cores; the claim is about its Tensor Cores": simt / p.peak("fp16").value,
            "that is a peak in TFLOP/s, not a ratio: divide the V100 figure by the P100 figure": v.peak("fp16").value,
        },
    )


@exercise("01.v100-vs-p100", kind="numeric", reference=_v100_vs_p100)
def v100_vs_p100(ratio_fp32: Any, ratio_fp16: Any) -> str:
    """Two ratios: V100 Tensor Core FP16 peak / P100 FP32 peak, and / P100 FP16 peak."""
    r32, r16 = number(ratio_fp32, "ratio_fp32"), number(ratio_fp16, "ratio_fp16")
    e32, e16 = _v100_vs_p100()
    if _near(r32, e16) and _near(r16, e32):
        raise Failed(
            "the two ratios are swapped.", cause="ratio_fp32 divides by the P100's FP32 peak, ratio_fp16 by its FP16 peak"
        )
    if _near(r32, 1 / e32) or _near(r16, 1 / e16):
        raise Failed("a ratio is upside down.", cause="divide the V100 figure by the P100 figure")
    s32, s16 = _v100_vs_p100_slips()
    _diagnose(r32, e32, "ratio_fp32", s32, "x")
    _diagnose(r16, e16, "ratio_fp16", s16, "x")
    return (
        f"V100 Tensor Cores vs P100: {r32:.1f}x its FP32 peak, but {r16:.1f}x its FP16 peak. "
        "'More than 10x' holds only against FP32."
    )


def _a100_20x() -> float:
    return hw.gpu("A100").peak("tf32", sparse=True).value / hw.gpu("V100").peak("fp32").value


def _a100_20x_slips() -> dict[str, float]:
    """Plausible wrong values of the A100/V100 ratio, each with its cause (the first is the trap the lab names)."""
    a, v = hw.gpu("A100"), hw.gpu("V100")
    return {
        f"{a.peak('fp32').value:g} is the A100's plain FP32 peak in TFLOP/s, the figure launch coverage quoted: it is "
        "not a ratio, and it is not the 20x. Divide an A100 peak by a V100 peak.": a.peak("fp32").value,
        "you used dense TF32: the 20x counts 2:4 structured sparsity, which doubles the rate": a.peak("tf32").value
        / v.peak("fp32").value,
        "you compared FP32 with FP32 (no Tensor Cores): the claim uses TF32 Tensor Cores": a.peak("fp32").value
        / v.peak("fp32").value,
        "you compared against the V100's Tensor Core FP16 peak (or FP16 with FP16, dense); the claim uses TF32 against "
        "the V100's plain FP32 peak": a.peak("tf32", sparse=True).value / v.peak("fp16").value,
        "you used FP16 with sparsity; the claim is for FP32 inputs, which run as TF32": a.peak("fp16", sparse=True).value
        / v.peak("fp32").value,
        "the ratio is upside down: divide the A100 figure by the V100 figure": v.peak("fp32").value
        / a.peak("tf32", sparse=True).value,
    }


@exercise("01.a100-20x", kind="numeric", reference=_a100_20x)
def a100_20x(ratio: Any) -> str:
    """The ratio behind "up to 20x Volta"."""
    r = figure(ratio, "ratio", _a100_20x, _a100_20x_slips, "x", rel=REL)
    a, v = hw.gpu("A100"), hw.gpu("V100")
    return (
        f"{r:.1f}x: A100 TF32 Tensor Cores with sparsity against V100 plain FP32. Like for like (FP16 Tensor Cores, dense) "
        f"it is {a.peak('fp16').value / v.peak('fp16').value:.1f}x."
    )


def _dgx_a100_pflops() -> float:
    s = hw.system("DGX A100")
    return s.gpu_count.value * s.gpu_model.peak("fp16", sparse=True).value / 1000


@exercise("01.dgx-a100-5pf", kind="numeric", reference=_dgx_a100_pflops)
def dgx_a100_pflops(pflops: Any) -> str:
    """DGX A100 AI compute in PFLOP/s, from its GPU count and one GPU's peak."""
    x = figure(pflops, "pflops", _dgx_a100_pflops, listed_slips("01.dgx-a100-5pf", _dgx_a100_pflops), "PFLOP/s", rel=REL)
    s = hw.system("DGX A100")
    return (
        f"{x:.2f} PFLOP/s: {s.gpu_count.value:g} GPUs x {s.gpu_model.peak('fp16', sparse=True).value:g} TFLOP/s FP16 "
        "with 2:4 sparsity. Dense it is half that."
    )


def _superpod() -> tuple[int, float]:
    pod = hw.system("SuperPOD")
    dgx = hw.system(pod.system)
    return int(pod.system_count.value * dgx.gpu_count.value), pod.system_count.value * dgx.headline.to("PFLOP/s").value


def _superpod_slips() -> dict[str, float]:
    eg, ep = _superpod()
    return {
        "that is TFLOP/s; give PFLOP/s": ep * 1000,
        "you used dense FP16; the 700 counts sparsity": ep / 2,
        "you multiplied the GPU count by the system headline": eg * 5,
    }


@exercise("01.superpod", kind="numeric", reference=_superpod)
def superpod(gpus: Any, pflops: Any) -> str:
    """How many A100 GPUs a 140-system SuperPOD has, and its AI PFLOP/s."""
    g, p = number(gpus, "gpus"), number(pflops, "pflops")
    eg, ep = _superpod()
    if _near(g, eg / 8):
        raise Failed(f"gpus = {g:g} counts systems, not GPUs.", cause="each DGX A100 holds 8 GPUs")
    if g != int(g):
        raise Failed(
            f"gpus = {g:g} is not a whole number: a SuperPOD holds whole GPUs.",
            cause="count them exactly (systems x GPUs per system), with no rounding or estimate.",
        )
    judge(g, eg, "gpus", "GPUs", rel=0.0, slips={"you counted 8 GPUs per system twice (systems x 8 x 8)": eg * 8})
    _diagnose(p, ep, "pflops", _superpod_slips(), "PFLOP/s")
    return f"{g:g} GPUs, {p:g} PFLOP/s (FP16 with sparsity) — the 700 PFLOPS headline."


def _backplane() -> float:
    nv = hw.link("NVLink 2").per_link.value
    return 6 * 8 * nv * 2


@exercise("01.dgx2-backplane", kind="numeric", reference=_backplane)
def dgx2_backplane(gbps_bidirectional: Any) -> str:
    """Bidirectional GB/s from one DGX-2 baseboard to the backplane, from link counts."""
    x = figure(
        gbps_bidirectional, "gbps_bidirectional", _backplane, listed_slips("01.dgx2-backplane", _backplane), "GB/s", rel=REL
    )
    return f"{x:g} GB/s bidirectional = 6 switches x 8 links x {hw.link('NVLink 2').per_link.value:g} GB/s x 2 directions."


def _dgx1_pairs() -> tuple[float, float, float]:
    per = hw.link("NVLink 2").per_link.value
    return 2 * per, 1 * per, 0.0


@exercise("01.dgx1-pairs", kind="numeric", reference=_dgx1_pairs)
def dgx1_pairs(gpu0_gpu3: Any, gpu0_gpu1: Any, gpu0_gpu5: Any) -> str:
    """Per-direction NVLink GB/s between GPU0 and GPUs 3, 1 and 5 of a DGX-1 (V100)."""
    got = [number(x, n) for x, n in ((gpu0_gpu3, "gpu0_gpu3"), (gpu0_gpu1, "gpu0_gpu1"), (gpu0_gpu5, "gpu0_gpu5"))]
    exp = _dgx1_pairs()
    names = ("gpu0_gpu3", "gpu0_gpu1", "gpu0_gpu5")
    for g, e, n in zip(got, exp, names):
        if e == 0:
            if g != 0:
                raise Failed(
                    f"{n} = {g:g} GB/s, but GPU0 and GPU5 share no NVLink.",
                    cause="traffic between them goes over PCIe and the CPUs: 0 GB/s over NVLink",
                )
            continue
        if _near(g, 2 * e):
            raise Failed(
                f"{n} = {g:g} GB/s is the bidirectional figure.", cause="you used bidirectional where per direction was asked"
            )
        if _near(g, e / 25 if e else 0) and g != 0:
            raise Failed(f"{n} = {g:g}: that is the link count, not GB/s.", cause="multiply by 25 GB/s per link")
        _diagnose(g, e, n, {"you swapped the one-link and two-link pairs": exp[1] if e == exp[0] else exp[0]}, "GB/s")
    return f"GPU0-GPU3 {got[0]:g}, GPU0-GPU1 {got[1]:g}, GPU0-GPU5 {got[2]:g} GB/s per direction: not every pair is equal on a DGX-1."


def _ring_reference(nbytes: float, n_gpus: int, bus_gbps: float) -> float:
    return 2 * (n_gpus - 1) / n_gpus * nbytes / (bus_gbps * 1e9)


_RING_SLIPS: dict[str, Callable[[float, int, float], float]] = {
    "the factor 2 is missing: reduce-scatter and all-gather each move (n-1)/n of the data": lambda b, n, w: (
        _ring_reference(b, n, w) / 2
    ),
    "use (n-1)/n, not n: each GPU sends n-1 of its n pieces per phase": lambda b, n, w: 2 * n * b / (w * 1e9),
    "use 2(n-1)/n, not 2(n-1): each piece is 1/n of the buffer": lambda b, n, w: 2 * (n - 1) * b / (w * 1e9),
    "units: GB/s is 1e9 bytes per second (not 2**30)": lambda b, n, w: _ring_reference(b, n, w) * 1e9 / 2**30,
    "units: convert GB/s to bytes/s (x 1e9) and give seconds": lambda b, n, w: _ring_reference(b, n, w) * 1e9,
    "milliseconds where seconds were asked": lambda b, n, w: _ring_reference(b, n, w) * 1e3,
    "exactly 8 times too long: bits where bytes were meant (the bandwidth is in GB/s, bytes)": lambda b, n, w: (
        _ring_reference(b, n, w) * 8
    ),
    "exactly 8 times too short: a divide by 8 too many (nbytes is already bytes, bus_gbps already GB/s)": lambda b, n, w: (
        _ring_reference(b, n, w) / 8
    ),
    "1000 times too short: GB/s taken as 1e12 bytes/s, or microseconds mixed with milliseconds": lambda b, n, w: (
        _ring_reference(b, n, w) / 1e3
    ),
}


@exercise("01.ring-allreduce", kind="numeric", reference=lambda: _ring_reference)
def ring_allreduce(fn: Callable[[float, int, float], float]) -> str:
    """A function ``(nbytes, n_gpus, bus_gbps) -> seconds`` for a bandwidth-only ring all-reduce."""
    if not callable(fn):
        raise Failed(f"pass the function itself, not {type(fn).__name__}.")
    try:
        inspect.signature(fn).bind(1.0, 2, 1.0)
    except (TypeError, ValueError):
        raise Failed("the function must take three arguments: (nbytes, n_gpus, bus_gbps).") from None
    r = rng()
    # fresh cases each run: 2 GPUs, a few, a DGX's 8 and 16, and a large ring; sizes and bandwidths at random
    cases = [
        (float(r.uniform(1e6, 4e9)), int(n), float(r.uniform(10.0, 1000.0)))
        for n in (2, r.integers(3, 8), 8, 16, r.integers(17, 257), r.integers(2, 65))
    ]
    results: list[tuple[float, int, float, float]] = []
    for nbytes, n, bw in cases:
        got = call_answer(fn, nbytes, n, bw, what=f"ring_allreduce_time({nbytes:g}, {n}, {bw:g})")
        if got is None or got is Ellipsis:
            raise Unsolved("the function returns nothing yet.")
        results.append((nbytes, n, bw, number(got, "the returned time")))
    wrong = [(nbytes, n, bw, got) for nbytes, n, bw, got in results if not _near(got, _ring_reference(nbytes, n, bw), 1e-6)]
    if not wrong:
        return "your model matches 2(n-1)/n x bytes / bandwidth on every case."
    nbytes, n, bw, got = wrong[0]
    # the slips every wrong case agrees with: a single case (2 GPUs, say) cannot tell some of them apart
    fitting = [cause for cause, slip in _RING_SLIPS.items() if all(_near(g, slip(b, k, w), 1e-3) for b, k, w, g in results)]
    if not fitting:
        fitting = [cause for cause, slip in _RING_SLIPS.items() if _near(got, slip(nbytes, n, bw), 1e-3)]
    where = f"for {nbytes:g} bytes on {n} GPUs at {bw:g} GB/s you return {got:.4g} s"
    if len(fitting) == 1:
        raise Failed(f"{where}.", cause=fitting[0])
    if fitting:
        raise Failed(
            f"{where}.", cause="slips that give these same numbers (they cannot be told apart): " + "; or ".join(fitting)
        )
    raise Failed(
        f"{where}, which does not match the model (expected {_ring_reference(nbytes, n, bw):.4g} s).",
        cause="time = 2(n-1)/n x nbytes / (bus_gbps x 1e9)",
    )


def _two_dgx1_ms() -> float:
    nbytes = 300e6 * 4
    edr = hw.link("InfiniBand EDR").per_link.value
    ports = 4
    return _ring_reference(nbytes, 16, ports * edr) * 1e3


@exercise("01.two-dgx1", kind="numeric", reference=_two_dgx1_ms)
def two_dgx1(ms: Any) -> str:
    """Milliseconds to all-reduce 300 M FP32 gradients over 16 GPUs in two DGX-1 joined by InfiniBand."""
    x = figure(ms, "ms", _two_dgx1_ms, listed_slips("01.two-dgx1", _two_dgx1_ms), "ms", rel=REL)
    g = hw.gpu("DGX-2")
    per_gpu = g.nvlink_bandwidth.value / 2
    one_box = _ring_reference(300e6 * 4, 16, per_gpu) * 1e3
    return (
        f"{x:.1f} ms over InfiniBand, {x / one_box:.1f}x the {one_box:.0f} ms of one DGX-2, whose NVSwitches give every GPU "
        f"{per_gpu:g} GB/s per direction."
    )
