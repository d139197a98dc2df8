"""Lab 04 checks accept correct kernels and reject lost updates, missing barriers and block-size assumptions."""

from __future__ import annotations

import numpy as np

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402

from labkit import check, kernels  # noqa: E402
from labkit.check import harness  # noqa: E402

NB = 256


# ----------------------------------------------------------------------------- histograms
@cuda.jit
def hist_plain(data, hist):
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        hist[data[i]] += 1


@cuda.jit
def hist_one_per_thread_no_stride(data, hist):  # misses elements when the grid is small
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(hist, data[i], 1)


@cuda.jit
def hist_empty(data, hist):
    pass


@cuda.jit
def hist_shared_no_first_barrier(data, hist):
    local = cuda.shared.array(NB, np.int32)
    t = cuda.threadIdx.x
    for b in range(t, NB, cuda.blockDim.x):
        local[b] = 0
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NB, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])


@cuda.jit
def hist_shared_no_second_barrier(data, hist):
    local = cuda.shared.array(NB, np.int32)
    t = cuda.threadIdx.x
    for b in range(t, NB, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    for b in range(t, NB, cuda.blockDim.x):
        cuda.atomic.add(hist, b, local[b])


@cuda.jit
def hist_shared_plain_merge(data, hist):  # merges with a plain += across blocks
    local = cuda.shared.array(NB, np.int32)
    t = cuda.threadIdx.x
    for b in range(t, NB, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NB, cuda.blockDim.x):
        hist[b] += local[b]


@cuda.jit
def hist_shared_all_bins_by_thread0(data, hist):  # valid variant: thread 0 zeroes and merges everything
    local = cuda.shared.array(NB, np.int32)
    if cuda.threadIdx.x == 0:
        for b in range(NB):
            local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], 1)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        for b in range(NB):
            cuda.atomic.add(hist, b, local[b])


def test_histogram_global() -> None:
    assert check.histogram_global(kernels.get("histogram_global")).passed
    r = check.histogram_global(hist_plain)
    assert r.status == "failed" and "atomic" in r.cause
    r = check.histogram_global(hist_one_per_thread_no_stride)
    assert r.status == "failed" and "1 block(s) of 64 threads" in r.message and "grid-stride" in r.cause
    assert check.histogram_global(hist_empty).status == "unsolved"
    r = check.histogram_global(kernels.get("histogram_shared"))  # right, but not the exercise's global atomics
    assert r.passed or r.status == "failed"


def _hist_shared_narrow(dtype):
    @cuda.jit
    def k(data, hist):  # counts in a shared array of a narrow type: wraps past 255 (uint8) or 65,535 (uint16)
        local = cuda.shared.array(NB, dtype)
        t = cuda.threadIdx.x
        for b in range(t, NB, cuda.blockDim.x):
            local[b] = 0
        cuda.syncthreads()
        for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
            cuda.atomic.add(local, data[i], 1)
        cuda.syncthreads()
        for b in range(t, NB, cuda.blockDim.x):
            cuda.atomic.add(hist, b, local[b])

    return k


@cuda.jit
def hist_four_rounds(data, hist):  # a fixed number of grid-stride rounds
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for r in range(4):
        i = start + r * stride
        if i < data.size:
            cuda.atomic.add(hist, data[i], 1)


def test_histogram_rejects_shortcuts() -> None:
    r = check.histogram_global(hist_four_rounds)
    assert r.status == "failed" and "never written" not in r.message
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's overflow warning inside the simulator
        for narrow in (np.uint8, np.uint16):  # (a GPU has no atomics for them: a compile for one stops)
            r = check.histogram_shared(_hist_shared_narrow(narrow))
            assert r.status == "failed" and "narrower than int32" in r.cause, r.message
            assert f"cuda.atomic.add on an array of {np.dtype(narrow).name}" in r.message, r.message
    assert check.histogram_shared(_hist_shared_narrow(np.uint32)).passed  # unsigned 32 bits: wide enough


def test_histogram_shared() -> None:
    assert check.histogram_shared(kernels.get("histogram_shared")).passed
    assert check.histogram_shared(hist_shared_all_bins_by_thread0).passed
    for k in (hist_shared_no_first_barrier, hist_shared_no_second_barrier, hist_shared_plain_merge):
        r = check.histogram_shared(k)
        assert r.status == "failed", (k, r.message)
    r = check.histogram_shared(kernels.get("histogram_global"))
    assert r.status == "failed" and "shared" in r.message


# ----------------------------------------------------------------------------- block sum
@cuda.jit
def bsum_fixed_128(x, partial):  # assumes 128 threads per block
    sh = cuda.shared.array(256, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = 64
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def bsum_no_barrier_in_loop(x, partial):
    sh = cuda.shared.array(256, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def bsum_interleaved(x, partial):  # valid variant: interleaved addressing (stride doubling)
    sh = cuda.shared.array(256, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = 1
    while s < cuda.blockDim.x:
        if t % (2 * s) == 0:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def bsum_no_guard_load(x, partial):
    sh = cuda.shared.array(256, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t] = x[i]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def bsum_float64_partial(x, partial):  # writes through a float64 accumulation: still right (accepted)
    sh = cuda.shared.array(256, np.float64)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def bsum_sized_for_128(x, partial):  # the shared array holds 128 threads: too small for the 256-thread blocks
    sh = cuda.shared.array(128, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


def test_block_sum_rejects_small_shared_array() -> None:
    r = check.block_sum(bsum_sized_for_128)
    assert r.status == "failed" and "256 threads" in r.message


def test_block_sum() -> None:
    assert check.block_sum(kernels.get("block_sum")).passed
    assert check.block_sum(bsum_interleaved).passed
    assert check.block_sum(bsum_float64_partial).passed
    r = check.block_sum(bsum_fixed_128)
    assert r.status == "failed" and "block" in r.message
    r = check.block_sum(bsum_no_barrier_in_loop)
    assert r.status == "failed" and "race" in r.message
    r = check.block_sum(bsum_no_guard_load)
    assert r.status == "failed" and "out of bounds" in r.message + "indexed"


# ----------------------------------------------------------------------------- full sum
@cuda.jit
def fsum_plain_add(x, out):
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    sh[t] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[0] += sh[0]


@cuda.jit
def fsum_every_thread_atomic(x, out):  # valid (slow) variant: one atomic per element
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        cuda.atomic.add(out, 0, x[i])


@cuda.jit
def fsum_four_rounds(x, out):  # a fixed number of grid-stride rounds per thread
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    acc = 0.0
    for r in range(4):
        i = cuda.grid(1) + r * cuda.gridsize(1)
        if i < x.size:
            acc += x[i]
    sh[t] = acc
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(out, 0, sh[0])


@cuda.jit
def fsum_tree_from_64(x, out):  # starts the tree at 64: right for blocks of 128, wrong for 256
    sh = cuda.shared.array(256, np.float32)
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    sh[t] = acc
    cuda.syncthreads()
    s = 64
    while s > 0:
        if t < s and t + s < cuda.blockDim.x:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(out, 0, sh[0])


def test_full_sum_rejects_shortcuts() -> None:
    for k in (fsum_four_rounds, fsum_tree_from_64):
        r = check.full_sum(k)
        assert r.status == "failed" and "elements are wrong" in r.message, (k, r.message)


def test_full_sum() -> None:
    assert check.full_sum(kernels.get("sum_all")).passed
    r = check.full_sum(fsum_every_thread_atomic)  # no tree: every thread adds its own sum to out[0]
    assert r.status == "failed" and "atomic adds reached out[0]" in r.message and "tree" in r.cause, r.message
    r = check.full_sum(fsum_plain_add)
    assert r.status == "failed" and "between blocks" in r.message and "atomic" in r.cause


# ----------------------------------------------------------------------------- warp sum
@cuda.jit
def wsum_xor(x, out):  # valid variant: butterfly with shfl_xor_sync
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, m)
        m //= 2
    if cuda.laneid == 0 and i // 32 < out.size:
        out[i // 32] = v


@cuda.jit
def wsum_missing_step(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    offset = 8
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.size:
        out[i // 32] = v


@cuda.jit
def wsum_early_return(x, out):  # lanes past the end leave: the full-mask shuffle cannot complete
    i = cuda.grid(1)
    if i >= x.size:
        return
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // 32] = v


@cuda.jit
def wsum_shared(x, out):  # right values through shared memory, no shuffles
    sh = cuda.shared.array(128, np.float32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    if cuda.laneid == 0 and i // 32 < out.size:
        s = 0.0
        for k in range(32):
            s += sh[t + k]
        out[i // 32] = s


@cuda.jit
def wsum_four_warps_per_block(x, out):  # assumes 128-thread blocks when numbering warps
    v = x[cuda.grid(1)] if cuda.grid(1) < x.size else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    w = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if cuda.laneid == 0 and w < out.size:
        out[w] = v


def test_warp_sum_rejects_fixed_warps_per_block() -> None:
    assert check.warp_sum(wsum_four_warps_per_block).status == "failed"


def test_warp_sum() -> None:
    assert check.warp_sum(kernels.get("warp_sum")).passed
    assert check.warp_sum(wsum_xor).passed
    assert check.warp_sum(wsum_missing_step).status == "failed"
    assert check.warp_sum(wsum_shared).status == "failed"
    r = check.warp_sum(wsum_early_return)
    assert r.status == "failed" and "never reached" in r.message


# ----------------------------------------------------------------------------- race
@cuda.jit
def count_racy(x, threshold, counts):
    count = cuda.shared.array(1, np.int32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.size and x[i] > threshold:
        count[0] += 1
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]


@cuda.jit
def count_no_final_barrier(x, threshold, counts):
    count = cuda.shared.array(1, np.int32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(count, 0, 1)
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]


@cuda.jit
def count_syncthreads_count(x, threshold, counts):  # valid variant: the barrier counts for us
    i = cuda.grid(1)
    n = cuda.syncthreads_count(1 if i < x.size and x[i] > threshold else 0)
    if cuda.threadIdx.x == 0:
        counts[cuda.blockIdx.x] = n


def test_race() -> None:
    assert check.race(kernels.get("count_above")).passed
    assert check.race(count_syncthreads_count).passed
    r = check.race(count_racy)
    assert r.status == "failed" and "race" in r.message and "thread" in r.message
    r = check.race(count_no_final_barrier)
    assert r.status == "failed" and "race" in r.message


def test_find_race_reports(capsys) -> None:
    x = np.random.default_rng().standard_normal(100).astype(np.float32)
    counts = np.zeros(2, np.int32)
    race = harness.find_race(count_racy, 2, 64, x, np.float32(0.0), counts)
    assert race is not None and "race" in capsys.readouterr().out.lower()
    assert harness.find_race(kernels.get("count_above"), 2, 64, x, np.float32(0.0), counts) is None


@cuda.jit
def count_at_least(x, threshold, counts):  # counts x >= threshold: elements equal to it are not "above"
    count = cuda.shared.array(1, np.int32)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.size and x[i] >= threshold:
        cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]


def test_race_rejects_greater_or_equal() -> None:
    assert check.race(count_at_least).status == "failed"


@cuda.jit
def count_uint8(x, threshold, counts):  # a uint8 counter: wraps in the 1024-thread block
    count = cuda.shared.array(1, np.uint8)
    t, i = cuda.threadIdx.x, cuda.grid(1)
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]


def test_race_rejects_narrow_counter() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = check.race(count_uint8)
    assert r.status == "failed" and "uint8" in r.message and "narrower than int32" in r.cause, r.message


# ----------------------------------------------------------------------------- 04.scan
SB = 256


@cuda.jit
def scan_double_buffer(x, sums, out):  # correct, written differently: two shared buffers, one barrier per step
    a = cuda.shared.array(SB, np.float32)
    b = cuda.shared.array(SB, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    a[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    offset = 1
    src = 0
    while offset < cuda.blockDim.x:
        if src == 0:
            b[t] = a[t] + (a[t - offset] if t >= offset else 0.0)
        else:
            a[t] = b[t] + (b[t - offset] if t >= offset else 0.0)
        cuda.syncthreads()
        src = 1 - src
        offset *= 2
    v = a[t] if src == 0 else b[t]
    if i < out.size:
        out[i] = v
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = v


@cuda.jit
def scan_one_barrier(x, sums, out):  # reads and writes sh in the same step without a barrier between: a race
    sh = cuda.shared.array(SB, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        if t >= offset:
            sh[t] += sh[t - offset]
        cuda.syncthreads()
        offset *= 2
    if i < out.size:
        out[i] = sh[t]
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = sh[t]


@cuda.jit
def scan_sums_from_thread0(x, sums, out):  # the block total is in the last thread, not the first
    sh = cuda.shared.array(SB, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        v = sh[t - offset] if t >= offset else 0.0
        cuda.syncthreads()
        sh[t] += v
        cuda.syncthreads()
        offset *= 2
    if i < out.size:
        out[i] = sh[t]
    if t == 0:
        sums[cuda.blockIdx.x] = sh[t]


@cuda.jit
def scan_sums_inside_bounds(x, sums, out):  # the partial last block's last thread is past n: its total is lost
    sh = cuda.shared.array(SB, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        v = sh[t - offset] if t >= offset else 0.0
        cuda.syncthreads()
        sh[t] += v
        cuda.syncthreads()
        offset *= 2
    if i < out.size:
        out[i] = sh[t]
        if t == cuda.blockDim.x - 1:
            sums[cuda.blockIdx.x] = sh[t]


@cuda.jit
def scan_exclusive(x, sums, out):
    sh = cuda.shared.array(SB, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        v = sh[t - offset] if t >= offset else 0.0
        cuda.syncthreads()
        sh[t] += v
        cuda.syncthreads()
        offset *= 2
    if i < out.size:
        out[i] = sh[t] - x[i]
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = sh[t]


@cuda.jit
def scan_from_global(x, sums, out):  # every thread sums its block's prefix from global memory: right but no sharing
    sh = cuda.shared.array(SB, np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    start = cuda.blockIdx.x * cuda.blockDim.x
    acc = 0.0
    for j in range(start, min(i + 1, x.size)):
        acc += x[j]
    sh[t] = acc
    cuda.syncthreads()
    if i < out.size:
        out[i] = sh[t]
    if t == cuda.blockDim.x - 1:
        sums[cuda.blockIdx.x] = sh[t]


@cuda.jit
def offsets_same_block(partial, offsets, out):  # adds the block's own scanned sum: one block too far
    i = cuda.grid(1)
    if i < out.size:
        out[i] = partial[i] + offsets[cuda.blockIdx.x]


@cuda.jit
def offsets_skip_first(partial, offsets, out):  # block 0 writes nothing
    i = cuda.grid(1)
    b = cuda.blockIdx.x
    if i < out.size and b > 0:
        out[i] = partial[i] + offsets[b - 1]


def _scan_status(scan_block, add_offsets) -> tuple[str, str]:
    r = check.scan(scan_block, add_offsets)
    return r.status, r.message + " " + (r.cause or "")


def test_scan_accepts_the_reference_and_a_double_buffer() -> None:
    ref_scan, ref_add = kernels.get("scan_block"), kernels.get("add_offsets")
    assert check.scan(ref_scan, ref_add)
    assert check.scan(scan_double_buffer, ref_add)


def test_scan_rejects_wrong_block_scans() -> None:
    add = kernels.get("add_offsets")
    for kernel, needle in ((scan_one_barrier, ""), (scan_sums_from_thread0, "sums["), (scan_sums_inside_bounds, "sums["),
                           (scan_exclusive, "expected"), (scan_from_global, "read")):
        status, text = _scan_status(kernel, add)
        assert status == "failed" and needle in text, (kernel.__name__, text)


def test_scan_rejects_wrong_offsets_and_wrong_calls() -> None:
    ref_scan = kernels.get("scan_block")
    for kernel in (offsets_same_block, offsets_skip_first):
        status, _ = _scan_status(ref_scan, kernel)
        assert status in ("failed", "unsolved")
    assert check.scan(ref_scan).status == "failed"  # one kernel only: a message
    assert check.scan(ref_scan, 3).status == "failed"
