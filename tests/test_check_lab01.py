"""Lab 01 checks accept right answers and reject wrong ones with the likely cause."""

from __future__ import annotations

import pytest

from labkit import check
from labkit.check import lab01


@pytest.fixture(autouse=True)
def _no_expectation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LABKIT_EXPECT", raising=False)


def _cause(result) -> str:
    return f"{result.message} {result.cause or ''}"


def test_registered(capsys) -> None:
    ids = [e[0] for e in check.exercises("01.")]
    assert len(ids) >= 6 and all(i.startswith("01.") for i in ids)
    for ex_id in ids:
        check.hint(ex_id, 1)
        assert capsys.readouterr().out.startswith("Hint 1/")


def test_skeletons_are_unsolved() -> None:
    assert check.v100_vs_p100(..., ...).status == "unsolved"
    assert check.a100_20x(...).status == "unsolved"
    assert check.dgx_a100_pflops(...).status == "unsolved"
    assert check.superpod(..., ...).status == "unsolved"
    assert check.dgx2_backplane(...).status == "unsolved"
    assert check.dgx1_pairs(..., ..., ...).status == "unsolved"
    assert check.two_dgx1(...).status == "unsolved"

    def skeleton(nbytes, n_gpus, bus_gbps):
        raise NotImplementedError

    assert check.ring_allreduce(skeleton).status == "unsolved"
    assert check.ring_allreduce(lambda a, b, c: ...).status == "unsolved"


def test_v100_vs_p100() -> None:
    assert check.v100_vs_p100(125 / 10.6, 125 / 21.2)
    assert check.v100_vs_p100(11.8, 5.9)
    r = check.v100_vs_p100(5.9, 11.8)
    assert not r and "swapped" in _cause(r)
    r = check.v100_vs_p100(15.7 / 10.6, 5.9)
    assert not r and "Tensor Cores" in _cause(r)
    r = check.v100_vs_p100(10.6 / 125, 5.9)
    assert not r and "upside down" in _cause(r)
    assert not check.v100_vs_p100("12", 5.9)


def test_a100_20x() -> None:
    assert check.a100_20x(312 / 15.7)
    assert check.a100_20x(20)  # within 2% of 19.87? no: 20 / 19.87 = 1.0065 -> passes
    r = check.a100_20x(156 / 15.7)
    assert not r and "sparsity" in _cause(r)
    r = check.a100_20x(19.5 / 15.7)
    assert not r and "FP32 with FP32" in _cause(r)
    r = check.a100_20x(312 / 125)
    assert not r and "Tensor Core FP16" in _cause(r)
    assert not check.a100_20x(7)
    r = check.a100_20x(19.5)  # the A100's FP32 peak, the trap the lab names: 1.9% from the ratio
    assert not r and "plain FP32 peak" in _cause(r) and "not a ratio" in _cause(r)
    r = check.a100_20x("19.87")
    assert not r and "should be a number, got str" in r.message


def test_dgx_a100_pflops() -> None:
    assert check.dgx_a100_pflops(4.992) and check.dgx_a100_pflops(5)
    r = check.dgx_a100_pflops(4992)
    assert not r and "PFLOP/s" in _cause(r)
    r = check.dgx_a100_pflops(2.496)
    assert not r and "dense" in _cause(r)
    assert not check.dgx_a100_pflops(1.0)


def test_superpod() -> None:
    assert check.superpod(1120, 700) and check.superpod(1120, 698.88)
    r = check.superpod(140, 700)
    assert not r and "counts systems" in _cause(r)
    r = check.superpod(1120, 350)
    assert not r and "dense" in _cause(r)
    r = check.superpod(1120, 700_000)
    assert not r and "TFLOP/s" in _cause(r)


def test_dgx2_backplane() -> None:
    assert check.dgx2_backplane(2400)
    r = check.dgx2_backplane(1200)
    assert not r and "per-direction" in _cause(r)
    r = check.dgx2_backplane(2.4)
    assert not r and "TB/s" in _cause(r)
    r = check.dgx2_backplane(4800)
    assert not r and "already bidirectional" in _cause(r)
    assert not check.dgx2_backplane(999)


def test_dgx1_pairs() -> None:
    assert check.dgx1_pairs(50, 25, 0)
    r = check.dgx1_pairs(100, 50, 0)
    assert not r and "bidirectional where per direction" in _cause(r)
    r = check.dgx1_pairs(50, 25, 25)
    assert not r and "share no NVLink" in _cause(r)
    r = check.dgx1_pairs(25, 50, 0)
    assert not r and "swapped" in _cause(r)
    r = check.dgx1_pairs(2, 1, 0)
    assert not r and "link count" in _cause(r)


def test_ring_allreduce() -> None:
    assert check.ring_allreduce(lambda nbytes, n_gpus, bus_gbps: 2 * (n_gpus - 1) / n_gpus * nbytes / (bus_gbps * 1e9))
    assert check.ring_allreduce(lambda b, n, g: (n - 1) * 2 * b / n / g / 1e9)
    r = check.ring_allreduce(lambda b, n, g: (n - 1) / n * b / (g * 1e9))
    assert not r and "factor 2" in _cause(r)
    r = check.ring_allreduce(lambda b, n, g: 2 * (n - 1) * b / (g * 1e9))
    assert not r and "each piece is 1/n" in _cause(r)
    r = check.ring_allreduce(lambda b, n, g: 2 * (n - 1) / n * b / g)
    assert not r and "bytes/s" in _cause(r)
    r = check.ring_allreduce(lambda b, n, g: 2 * (n - 1) / n * b / (g * 2**30))
    assert not r and "2**30" in _cause(r)
    r = check.ring_allreduce(lambda b, n: 0.0)
    assert not r and "three arguments" in _cause(r)
    r = check.ring_allreduce(lambda b, n, g: 1 / 0)
    assert not r and "ZeroDivisionError" in _cause(r)
    assert not check.ring_allreduce(42)


def test_two_dgx1() -> None:
    e = 2 * 15 / 16 * 1.2e9 / 50e9 * 1e3
    assert check.two_dgx1(e) and check.two_dgx1(45)
    r = check.two_dgx1(e / 8)
    assert not r and "gigabits" in _cause(r)
    r = check.two_dgx1(e / 1000)
    assert not r and "seconds" in _cause(r)
    r = check.two_dgx1(e * 4)
    assert not r and "one EDR port" in _cause(r)
    r = check.two_dgx1(e / 2)
    assert not r and "4 bytes" in _cause(r)


# Every numeric check of lab 01: plausible wrong answers, each with a word of the message it must get. The
# tolerance must be tighter than the distance from the right value to every slip the check knows.
WRONG = [
    (check.a100_20x, (19.5,), "launch coverage quoted"),
    (check.a100_20x, (156 / 15.7,), "dense TF32"),
    (check.a100_20x, (624 / 15.7,), "FP16 with sparsity"),
    (check.a100_20x, (15.7 / 312,), "upside down"),
    (check.a100_20x, (19.5 / 15.7,), "FP32 with FP32"),
    (check.v100_vs_p100, (31.4 / 10.6, 31.4 / 21.2), "CUDA cores"),
    (check.v100_vs_p100, (125, 125), "not a ratio"),
    (check.dgx_a100_pflops, (0.624,), "one GPU's peak"),
    (check.dgx_a100_pflops, (1.248,), "TF32"),
    (check.dgx_a100_pflops, (4992,), "TFLOP/s"),
    (check.superpod, (1120, 350), "dense"),
    (check.superpod, (1120, 5600), "GPU count by the system headline"),
    (check.dgx2_backplane, (400,), "one switch"),
    (check.dgx2_backplane, (4800,), "doubled twice"),
    (check.two_dgx1, (45 / 3,), "InfiniBand"),
    (check.two_dgx1, (45 * 1.75 / 1.875,), "n = 16"),
    (check.two_dgx1, (45 * 4,), "one EDR port"),
    (check.dgx1_pairs, (100, 25, 0), "bidirectional"),
]


@pytest.mark.parametrize("fn, args, word", WRONG, ids=[f"{f.__name__}-{a}" for f, a, _ in WRONG])
def test_plausible_wrong_answers_named(fn, args, word) -> None:
    r = fn(*args)
    assert r.status == "failed" and word in _cause(r), _cause(r)


def test_tolerance_tighter_than_every_slip() -> None:
    from labkit.check.answers import separation
    from labkit.check.numeric import listed_slips

    s32, s16 = lab01._v100_vs_p100_slips()
    e32, e16 = lab01._v100_vs_p100()
    listed = [("01.dgx-a100-5pf", lab01._dgx_a100_pflops), ("01.dgx2-backplane", lab01._backplane), ("01.two-dgx1", lab01._two_dgx1_ms)]
    tables = [(e32, s32), (e16, s16), (lab01._a100_20x(), lab01._a100_20x_slips()), (lab01._superpod()[1], lab01._superpod_slips())]
    tables += [(ref(), listed_slips(ex, ref)()) for ex, ref in listed]
    for want, slips in tables:
        assert separation(want, slips) > 2 * lab01.REL, (want, slips)
    assert abs(19.5 - lab01._a100_20x()) / lab01._a100_20x() > 2 * lab01.REL  # the named trap


@pytest.mark.parametrize("fn, args", [(check.dgx_a100_pflops, ("5",)), (check.superpod, ("1120", 700)),
                                      (check.dgx2_backplane, (b"2400",)), (check.dgx1_pairs, (50, "25", 0)),
                                      (check.two_dgx1, ("45 ms",)), (check.v100_vs_p100, (True, 5.9))])
def test_strings_are_not_numbers(fn, args) -> None:
    r = fn(*args)
    assert r.status == "failed" and "should be a number" in r.message


def test_references_match_labkit_models() -> None:
    from labkit import topology

    t2, _ = topology.load("2x DGX-1 (V100)").ring_allreduce_time(300e6 * 4)
    assert lab01._two_dgx1_ms() == pytest.approx(t2 * 1e3)
    assert topology.load("DGX-2").max_flow(range(8), range(8, 16), bidirectional=True) == pytest.approx(lab01._backplane())
    t = topology.load("DGX-1 (V100)")
    assert lab01._dgx1_pairs() == (t.peer_bandwidth(0, 3), t.peer_bandwidth(0, 1), t.peer_bandwidth(0, 5))
    assert check.solved_or_reference("01.a100-20x", None) == pytest.approx(312 / 15.7)


def test_expect_solved_raises_on_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_EXPECT", "solved")
    with pytest.raises(AssertionError):
        check.a100_20x(10)
    monkeypatch.setenv("LABKIT_EXPECT", "unsolved")
    check.a100_20x(...)
