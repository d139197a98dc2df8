"""05.graph and the graph stand-in: right pipelines pass; each mistake a GPU punishes fails with its own cause.
Cost: well under a second (NumPy only)."""

from __future__ import annotations

import numpy as np
import pytest

import labkit

labkit.setup(quiet=True)
from labkit import check  # noqa: E402
from labkit.check import lab05_graphs  # noqa: E402
from labkit.check.graphs import RecordingGraphCuPy  # noqa: E402
from labkit.check.streams import StandInError  # noqa: E402


def _capture(cp, x, y, kernel, stream):
    d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)
    with stream:
        stream.begin_capture()
        d_in.set(x)
        kernel(d_in, d_out)
        d_out.get(out=y, blocking=False)
        return stream.end_capture()


def variant_upload(cp, frames, x, y, kernel):  # right: upload first, launch on the current stream
    s = cp.cuda.Stream(non_blocking=True)
    graph = _capture(cp, x, y, kernel, s)
    graph.upload(s)
    out = []
    for f in frames:
        x[:] = f
        with s:
            graph.launch()
        s.synchronize()
        out.append(np.array(y))
    return out


def no_sync(cp, frames, x, y, kernel):
    s = cp.cuda.Stream(non_blocking=True)
    graph = _capture(cp, x, y, kernel, s)
    out = []
    for f in frames:
        x[...] = f
        graph.launch(s)
        out.append(y.copy())
    return out


def refill_once(cp, frames, x, y, kernel):  # x filled with frame 0 only
    s = cp.cuda.Stream(non_blocking=True)
    x[...] = frames[0]
    graph = _capture(cp, x, y, kernel, s)
    out = []
    for _ in frames:
        graph.launch(s)
        s.synchronize()
        out.append(y.copy())
    return out


def same_buffer(cp, frames, x, y, kernel):
    s = cp.cuda.Stream(non_blocking=True)
    graph = _capture(cp, x, y, kernel, s)
    out = []
    for f in frames:
        x[...] = f
        graph.launch(s)
        s.synchronize()
        out.append(y)
    return out


def eager(cp, frames, x, y, kernel):
    return lab05_graphs._eager(cp, frames, x, y, kernel)


def sync_in_capture(cp, frames, x, y, kernel):
    s = cp.cuda.Stream(non_blocking=True)
    d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)
    with s:
        s.begin_capture()
        d_in.set(x)
        kernel(d_in, d_out)
        d_out.get(out=y)  # blocking: the host waits during the capture
        graph = s.end_capture()
    return [graph]


def null_stream(cp, frames, x, y, kernel):
    s = cp.cuda.Stream.null
    s.begin_capture()
    return []


def kernel_only(cp, frames, x, y, kernel):
    s = cp.cuda.Stream(non_blocking=True)
    d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)
    with s:
        s.begin_capture()
        kernel(d_in, d_out)
        graph = s.end_capture()
    out = []
    for f in frames:
        x[...] = f
        with s:
            d_in.set(x)
            graph.launch(s)
            d_out.get(out=y, blocking=False)
        s.synchronize()
        out.append(y.copy())
    return out


def pageable_frame(cp, frames, x, y, kernel):  # captures a copy straight from a pageable frame
    s = cp.cuda.Stream(non_blocking=True)
    d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)
    with s:
        s.begin_capture()
        d_in.set(frames[0])
        graph = s.end_capture()
    return [graph]


def test_accepts_the_reference_and_a_variant() -> None:
    assert check.graph_pipeline(lab05_graphs._reference).status == "passed"
    assert check.graph_pipeline(variant_upload).status == "passed"


@pytest.mark.parametrize("answer, words", [
    (no_sync, "synchronize"),
    (refill_once, "refill the pinned buffer x"),
    (same_buffer, "y.copy()"),
    (eager, "no CUDA graph was captured"),
    (sync_in_capture, "cudaErrorStreamCaptureUnsupported"),
    (null_stream, "legacy default stream"),
    (kernel_only, "holds only kernel"),
    (pageable_frame, "pageable"),
])
def test_rejects_with_the_cause(answer, words) -> None:
    r = check.graph_pipeline(answer)
    assert r.status == "failed", answer.__name__
    assert words in r.message + " " + (r.cause or ""), (answer.__name__, r.message, r.cause)


def test_skeleton_is_unsolved() -> None:
    def skeleton(cp, frames, x, y, kernel):
        raise NotImplementedError

    assert check.graph_pipeline(skeleton).status == "unsolved"


def test_replay_runs_only_when_the_host_waits_and_counts_host_calls() -> None:
    rec = RecordingGraphCuPy()
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    rec.pinned += [x, y]
    s = rec.cuda.Stream(non_blocking=True)
    graph = _capture(rec, x, y, rec.kernel(lambda a, b: np.copyto(b, a + 1)), s)
    assert graph.kinds() == ["h2d", "kernel", "d2h"] and rec.api_calls == 0 and not y.any()
    graph.launch(s)
    assert not y.any() and rec.unfinished() == 3  # asynchronous: nothing ran yet
    s.synchronize()
    assert y.tolist() == [1, 2, 3, 4] and rec.api_calls == 1
    calls = lab05_graphs.host_calls(lab05_graphs._reference, n_frames=8)
    assert calls == {"graph": 8, "no graph": 24}
    with pytest.raises(StandInError, match="another capture|already capturing"):
        s.begin_capture()
        s.begin_capture()
