"""labkit.ddp and 08.ddp-buckets: DDP's bucket rule, the check against typical slips, and one real data-parallel run
on 2 processes (the learner's ring all-reducing buckets during the backward pass; every rank ends with the same
parameters as one process on the whole batch). Cost: about 3 s (one launch of 2 processes)."""

from __future__ import annotations

import numpy as np
import pytest

from labkit import ddp, ranks
from labkit.check import lab08_ddp
from labkit.errors import LabkitError
from labkit.mpi_ring import ring_allreduce


def test_bucket_rule() -> None:
    assert ddp.make_buckets([4, 4, 4], 8) == [[0, 1], [2]]
    assert ddp.make_buckets([9, 1], 8) == [[0], [1]]
    assert ddp.make_buckets([3, 5, 0, 2], 8) == [[0, 1], [2, 3]]
    assert ddp.make_buckets([], 8) == []
    assert ddp.make_buckets([1, 2, 3], 100) == [[0, 1, 2]]
    with pytest.raises(LabkitError):
        ddp.make_buckets([1, 2], 0)
    with pytest.raises(LabkitError):
        ddp.make_buckets([1, -2], 5)
    sizes, order = ddp.grad_sizes((8, 4, 2))
    assert order == [2, 3, 0, 1] and sizes == [4 * 4 * 2, 4 * 2, 4 * 8 * 4, 4 * 4]


def _strict(sizes, cap):  # noqa: ANN001, ANN202
    return lab08_ddp._variant("strict", sizes, cap)


def _before(sizes, cap):  # noqa: ANN001, ANN202
    return lab08_ddp._variant("before", sizes, cap)


def _forward(sizes, cap):  # noqa: ANN001, ANN202
    return lab08_ddp._variant("forward", sizes, cap)


def _rule(sizes, cap):  # noqa: ANN001, ANN202
    """DDP's rule written here, as a learner would (an answer may not call labkit's ddp.make_buckets)."""
    buckets, open_, held = [], [], 0
    for k, s in enumerate(sizes):
        open_.append(k)
        held += s
        if held >= cap:
            buckets.append(open_)
            open_, held = [], 0
    return buckets + ([open_] if open_ else [])


def _drop_last(sizes, cap):  # noqa: ANN001, ANN202
    full = _rule(sizes, cap)
    return full[:-1] if full and sum(sizes[k] for k in full[-1]) < cap else full


def _values(sizes, cap):  # noqa: ANN001, ANN202
    return lab08_ddp._variant("sizes", sizes, cap)


def _skeleton(sizes, cap):  # noqa: ANN001, ANN202
    raise NotImplementedError


@pytest.mark.parametrize("fn,words", [(_strict, ">="), (_before, "never closes short"), (_forward, "do not reverse"),
                                      (_drop_last, "last bucket"), (_values, "positions")])
def test_check_names_each_slip(fn, words: str) -> None:  # noqa: ANN001
    for _ in range(3):  # every run, not by luck
        r = lab08_ddp.ddp_buckets(fn)
        assert r.status == "failed" and words in (r.cause or ""), r.report()


def test_check_accepts_the_rule_and_reports_a_skeleton() -> None:
    assert lab08_ddp.ddp_buckets(_rule)
    assert lab08_ddp.ddp_buckets(lambda s, c: [list(b) for b in _rule(s, c)])
    assert lab08_ddp.ddp_buckets(_skeleton).status == "unsolved"


def test_labkits_own_rule_is_not_an_answer() -> None:
    for answer in (ddp.make_buckets, lambda s, c: [list(b) for b in ddp.make_buckets(s, c)]):
        for _ in range(3):  # every run
            r = lab08_ddp.ddp_buckets(answer)
            assert r.status == "failed" and "labkit.ddp.make_buckets" in r.report(), r.report()


def test_plans_are_checked() -> None:
    with pytest.raises(LabkitError, match="every gradient position"):
        ddp.run(ring_allreduce, 2, [[[0, 1]]])


@pytest.mark.skipif(not ranks.available()[0], reason=ranks.available()[1])
def test_a_data_parallel_run_is_right_and_measured() -> None:
    layers = (64, 256, 256, 256, 16)
    sizes, _ = ddp.grad_sizes(layers)
    plans = [ddp.make_buckets(sizes, 1 << 40), ddp.make_buckets(sizes, 1)]
    rows = ddp.run(ring_allreduce, 2, plans, layers=layers, batch=32, steps=2)
    assert [len(r.buckets) for r in rows] == [1, len(sizes)]
    for r in rows:
        assert r.ranks_agree and r.max_rel_error < 1e-4
        assert min(r.compute_s, r.comm_s, r.sequential_s, r.overlapped_s) > 0
        assert 0.0 <= r.window <= 1.0 and r.model()[0] >= r.compute_s
    assert ranks.leftovers() == []


class _OneRank:
    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1


@pytest.mark.parametrize("overlap", [False, True])
def test_buckets_become_ready_in_backward_order(overlap: bool) -> None:
    """In one process: a bucket is handed to the all-reduce as soon as its last gradient exists (one bucket: only
    after the whole backward pass; one per gradient: after the first), and the reduced gradients are the sums."""
    import sys

    sys.path.insert(0, str(ranks.WORKER.parent))
    import _rank_ddp

    layers = [8, 16, 4]
    params = _rank_ddp.init_params(layers, 1)
    x, y = _rank_ddp.batch(layers, 5, 1, 0)
    order = _rank_ddp.grad_order(len(layers) - 1)
    assert order == [2, 3, 0, 1]
    want = _rank_ddp.forward_backward(params, x, y)
    reduced = []

    def ring(comm, buf):  # noqa: ANN001, ANN202
        reduced.append(buf.size)
        return buf

    for plan, first in (([order], 4), ([[i] for i in order], 1), ([order[:2], order[2:]], 2)):
        red = _rank_ddp.Reducer(ring, _OneRank(), plan, params, overlap=overlap)
        red.start()
        _rank_ddp.forward_backward(params, x, y, red.ready)
        got = red.finish()
        assert red.first_ready_count == first
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert reduced == [sum(p.size for p in params)] + [params[i].size for i in order] + [
        params[2].size + params[3].size, params[0].size + params[1].size]
