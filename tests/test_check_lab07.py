"""Lab 07 checks accept right answers (in their variants) and reject wrong ones with a likely cause."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from labkit import check, hw, topology
from labkit.check import lab07


def _status(result: Any) -> str:
    return result.status


# ---------------------------------------------------------------------------------------------- 07.pcie-peak


def test_pcie_accepts_variants() -> None:
    assert lab07.pcie_link_bandwidth(lambda g, n: hw.link(f"PCIe {g}").per_link.value * n / 16)
    assert lab07.pcie_link_bandwidth(lambda g, n: {3: 8, 4: 16, 5: 32}[g] * 128 / 130 / 8 * n)  # from GT/s and encoding


@pytest.mark.parametrize("wrong,cause", [
    (lambda g, n: 2 * hw.link(f"PCIe {g}").per_link.value * n / 16, "both directions"),
    (lambda g, n: hw.link(f"PCIe {g}").per_link.value, "lane count"),
    (lambda g, n: hw.link(f"PCIe {g}").per_link.value / 16, "one lane"),
    (lambda g, n: 8 * hw.link(f"PCIe {g}").per_link.value * n / 16, "gigabits"),
])
def test_pcie_rejects(wrong: Any, cause: str) -> None:
    r = lab07.pcie_link_bandwidth(wrong)
    assert r.status == "failed" and cause in (r.cause or "")


def test_pcie_skeleton_and_crash() -> None:
    def skeleton(g: int, n: int) -> float:
        raise NotImplementedError

    assert _status(lab07.pcie_link_bandwidth(skeleton)) == "unsolved"
    assert _status(lab07.pcie_link_bandwidth(...)) == "unsolved"
    assert _status(lab07.pcie_link_bandwidth(lambda g, n: None)) == "unsolved"
    r = lab07.pcie_link_bandwidth(lambda g, n: 1 / 0)
    assert r.status == "failed" and "ZeroDivisionError" in r.message
    assert _status(lab07.pcie_link_bandwidth(31.5)) == "failed"


# ---------------------------------------------------------------------------------------------- 07.pageable-model


def test_pageable() -> None:
    assert lab07.pageable_copy_model(lambda p, s: 1 / (1 / p + 1 / s))
    assert lab07.pageable_copy_model(lambda p, s: p * s / (p + s))
    r = lab07.pageable_copy_model(lambda p, s: min(p, s))
    assert r.status == "failed" and "overlap" in r.cause
    r = lab07.pageable_copy_model(lambda p, s: p + s)
    assert r.status == "failed" and "times do" in r.cause
    assert _status(lab07.pageable_copy_model(lambda p, s: (p + s) / 2)) == "failed"


# ---------------------------------------------------------------------------------------------- 07.copy-time


def test_copy_time() -> None:
    assert lab07.hbm_copy_time(lambda n, g: 2 * n / (g * 1e9))
    assert lab07.hbm_copy_time(lambda n, g: n / (g * 1e9 / 2))
    r = lab07.hbm_copy_time(lambda n, g: n / (g * 1e9))
    assert r.status == "failed" and "2 x nbytes" in r.cause
    r = lab07.hbm_copy_time(lambda n, g: 2 * n / (g * 1e9) * 1e3)
    assert r.status == "failed" and "milliseconds" in r.cause
    r = lab07.hbm_copy_time(lambda n, g: 2 * n / (g * 2**30))
    assert r.status == "failed" and "GiB" in r.cause


# ---------------------------------------------------------------------------------------------- 07.dgx1-peer-matrix


def _dgx1(per_link: float = 25.0) -> list[list[float]]:
    t = topology.load("DGX-1 (V100)")
    return [[t.links_between(i, j) * per_link for j in range(8)] for i in range(8)]


def test_dgx1_accepts_lists_and_arrays() -> None:
    assert lab07.dgx1_peer_matrix(_dgx1())
    assert lab07.dgx1_peer_matrix(np.array(_dgx1()))
    assert lab07.dgx1_peer_matrix(lab07._dgx1_expected())


def test_dgx1_rejects() -> None:
    r = lab07.dgx1_peer_matrix(_dgx1(50.0))
    assert r.status == "failed" and "both directions" in r.cause
    r = lab07.dgx1_peer_matrix(_dgx1(20.0))
    assert r.status == "failed" and "NCCL" in r.cause
    filled = _dgx1()
    filled[0][5] = filled[5][0] = 15.75  # the PCIe bound where there is no NVLink
    r = lab07.dgx1_peer_matrix(filled)
    assert r.status == "failed" and "no NVLink" in r.cause
    diag = _dgx1()
    diag[2][2] = 900
    assert "itself" in lab07.dgx1_peer_matrix(diag).message
    assert _status(lab07.dgx1_peer_matrix([[0] * 8] * 7)) == "failed"
    assert _status(lab07.dgx1_peer_matrix(42)) == "failed"
    assert _status(lab07.dgx1_peer_matrix(...)) == "unsolved"
    ones = [[1.0 if i != j and t else 0.0 for j, t in enumerate(row)] for i, row in enumerate(_dgx1())]
    assert _status(lab07.dgx1_peer_matrix(ones)) == "failed"


# ---------------------------------------------------------------------------------------------- 07.allreduce-bytes


def test_ring_allreduce() -> None:
    assert lab07.allreduce_ring_bytes(lambda s, n: 2 * (n - 1) * s / n)
    assert lab07.allreduce_ring_bytes(lambda s, n: sum(s / n for _ in range(2 * (n - 1))))  # step by step
    r = lab07.allreduce_ring_bytes(lambda s, n: (n - 1) * s / n)
    assert r.status == "failed" and "two" in r.cause
    r = lab07.allreduce_ring_bytes(lambda s, n: 2 * s)
    assert r.status == "failed" and "n - 1 steps" in r.cause
    r = lab07.allreduce_ring_bytes(lambda s, n: 2 * (n - 1) * s)
    assert r.status == "failed" and "chunk" in r.cause


# ---------------------------------------------------------------------------------------------- 07.bidir-conventions


def test_bidir_conventions() -> None:
    ok = {"p2p_sum": 48.0 + 47.0, "dgx2_per_direction": 150.0}
    assert lab07.bidirectional_conventions(ok, 48.0, 47.0)
    r = lab07.bidirectional_conventions({"p2p_sum": 48.0, "dgx2_per_direction": 150.0}, 48.0, 47.0)
    assert r.status == "failed" and "one direction" in r.cause
    r = lab07.bidirectional_conventions({"p2p_sum": 95.0, "dgx2_per_direction": 300.0}, 48.0, 47.0)
    assert r.status == "failed" and "halve" in r.cause
    assert _status(lab07.bidirectional_conventions({"p2p_sum": ..., "dgx2_per_direction": ...}, 1.0, 1.0)) == "unsolved"
    assert _status(lab07.bidirectional_conventions(..., 1.0, 1.0)) == "unsolved"
    assert _status(lab07.bidirectional_conventions({"p2p_sum": 2.0}, 1.0, 1.0)) == "failed"


def test_registered_with_hints_and_references(capsys) -> None:
    ids = [e[0] for e in check.exercises("07.")]
    assert len(ids) == 7  # with 07.event-timing
    for ex_id in ids:
        check.hint(ex_id, 1)
        assert "Hint 1/3" in capsys.readouterr().out
    assert lab07.pcie_link_bandwidth(check.core._get("07.pcie-peak").reference())
    assert lab07.pageable_copy_model(check.core._get("07.pageable-model").reference())
    assert lab07.hbm_copy_time(check.core._get("07.copy-time").reference())
    assert lab07.allreduce_ring_bytes(check.core._get("07.allreduce-bytes").reference())


# ------------------------------------------------------------------------------------------ 07.event-timing
def _time_copies(*, warm=True, once=False, gib=False, copies=None, other_stream=False, per_copy=False, keys=None):
    """time_copies(cp, host, repeat) answers: the defaults give the correct one."""

    def time_copies(cp, host, repeat):
        work = cp.cuda.Stream(non_blocking=True)
        timing = cp.cuda.Stream(non_blocking=True) if other_stream else work
        a, b = cp.empty(host.shape, host.dtype), cp.empty(host.shape, host.dtype)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        k = repeat if copies is None else copies
        figures = {}
        for name, copy, factor in (("h2d", lambda: a.set(host), 1), ("d2d_read_write", lambda: b.__setitem__(Ellipsis, a), 2)):
            with work:
                if warm:
                    copy()
                start.record(timing)
                for _ in range(k):
                    copy()
                end.record(timing)
            end.synchronize()
            seconds = cp.cuda.get_elapsed_time(start, end) * 1e-3
            nbytes = host.nbytes * (1 if per_copy else repeat) * (1 if once else factor)
            figures[name] = nbytes / seconds / (2**30 if gib else 1e9)
        return figures if keys is None else {key: figures[old] for key, old in zip(keys, figures)}

    return time_copies


def test_event_timing_accepts_the_reference_and_a_variant() -> None:
    from labkit.check import core

    assert check.event_timing(core._REGISTRY["07.event-timing"].reference())
    assert check.event_timing(_time_copies())


@pytest.mark.parametrize(("answer", "needle"), [
    (_time_copies(warm=False), "nothing warmed up"),
    (_time_copies(once=True), "counted each byte once"),
    (_time_copies(gib=True), "GiB/s"),
    (_time_copies(copies=1), "repeat="),
    (_time_copies(other_stream=True), "stream the copies run on"),
    (_time_copies(per_copy=True), "one copy"),
    (_time_copies(keys=("h2d", "d2d")), "keys"),
])
def test_event_timing_rejects_wrong_measurements(answer, needle) -> None:
    result = check.event_timing(answer)
    assert result.status == "failed", result.report()
    assert needle in result.message + (result.cause or ""), result.report()


def test_event_timing_without_events_or_sync() -> None:
    import time

    def wall_clock(cp, host, repeat):
        a = cp.empty(host.shape, host.dtype)
        t0 = time.perf_counter()
        for _ in range(repeat):
            a.set(host)
        return {"h2d": repeat * host.nbytes / (time.perf_counter() - t0) / 1e9, "d2d_read_write": 1.0}

    assert "events" in check.event_timing(wall_clock).cause

    def no_sync(cp, host, repeat):
        a = cp.empty(host.shape, host.dtype)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            a.set(host)
            start.record()
            a.set(host)
            end.record()
        return {"h2d": cp.cuda.get_elapsed_time(start, end), "d2d_read_write": 1.0}

    result = check.event_timing(no_sync)
    assert result.status == "failed" and "synchronize" in (result.cause or "")


def test_event_timing_wrong_calls_get_messages() -> None:
    assert check.event_timing("no").status == "failed"
    assert check.event_timing(lambda cp, host, repeat: 1 / 0).status == "failed"
    assert check.event_timing(lambda cp, host: None).status == "failed"


# ---------------------------------------------------------------------------------------------- numeric tolerances
# Every numeric check of lab 07, with the plausible wrong answers (each a factor of the right one) and a word of the
# cause each must get. A right answer off by 0.4% (rounding) passes: the tolerance (1%) lies between the two.
def _pcie(g, n):
    return hw.link(f"PCIe {g}").per_link.value * n / 16


def _pageable(p, s):
    return 1 / (1 / p + 1 / s)


def _copy(n, g):
    return 2 * n / (g * 1e9)


def _ring(s, n):
    return 2 * (n - 1) * s / n


SLIPS = [
    (lab07.pcie_link_bandwidth, _pcie, 2.0, "both directions"),
    (lab07.pcie_link_bandwidth, _pcie, 8.0, "gigabits"),
    (lab07.pcie_link_bandwidth, _pcie, 1 / 1.073741824, "GiB/s"),
    (lab07.hbm_copy_time, _copy, 0.5, "2 x nbytes"),
    (lab07.hbm_copy_time, _copy, 1e3, "milliseconds"),
    (lab07.hbm_copy_time, _copy, 1e6, "microseconds"),
    (lab07.hbm_copy_time, _copy, 1e-9, "multiply by 10^9"),
    (lab07.allreduce_ring_bytes, _ring, 0.5, "one phase"),
]


@pytest.mark.parametrize("check_fn, right, factor, word", SLIPS, ids=[f"{c.__name__}-{f:g}" for c, _, f, _ in SLIPS])
def test_each_slip_is_named_and_rounding_passes(check_fn, right, factor, word) -> None:
    r = check_fn(lambda *a: right(*a) * factor)
    assert r.status == "failed" and word in (r.cause or ""), r.cause
    assert check_fn(lambda *a: right(*a) * 1.004)


def test_fresh_cases_defeat_a_lookup_table() -> None:
    # answers learned from the old fixed cases, right there and wrong elsewhere
    table = {(63.0, 10.0): _pageable(63.0, 10.0), (31.5, 31.5): 15.75}
    assert _status(lab07.pageable_copy_model(lambda p, s: table.get((p, s), min(p, s)))) == "failed"
    copies = {2**30: _copy(2**30, 4800.0)}
    assert _status(lab07.hbm_copy_time(lambda n, g: copies.get(n, n / (g * 1e9)))) == "failed"
    ring = {(2**20, 4): _ring(2**20, 4)}
    assert _status(lab07.allreduce_ring_bytes(lambda s, n: ring.get((s, n), 2 * s))) == "failed"


def test_strings_are_not_numbers() -> None:
    for check_fn, right in ((lab07.pcie_link_bandwidth, _pcie), (lab07.pageable_copy_model, _pageable),
                            (lab07.hbm_copy_time, _copy), (lab07.allreduce_ring_bytes, _ring)):
        r = check_fn(lambda *a: f"{right(*a):.6g}")
        assert r.status == "failed" and "should be a number, got str" in r.message
    r = lab07.bidirectional_conventions({"p2p_sum": "95", "dgx2_per_direction": 150.0}, 48.0, 47.0)
    assert r.status == "failed" and "should be a number" in r.message
    m = _dgx1()
    m[0][3] = "50"
    assert "should be a number" in lab07.dgx1_peer_matrix(m).message
