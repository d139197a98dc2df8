"""Check for lab 05's CUDA Graph exercise: the copy → kernel → copy pipeline captured once and replayed per frame.

The learner's ``graph_pipeline(cp, frames, x, y, kernel)`` gets the array module ``cp`` (CuPy on a GPU; in ``sim`` mode
:class:`~labkit.check.graphs.RecordingGraphCuPy`), a list of host frames, two pinned host buffers ``x`` (the input the
graph copies from) and ``y`` (the output it copies back into), and ``kernel(d_in, d_out)``. It returns one result
per frame. The stand-in runs a replay only when the host waits for it, so the mistakes a GPU punishes fail here too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import Failed, exercise
from .numeric import need_function


def _reference(cp: Any, frames: list[np.ndarray], x: np.ndarray, y: np.ndarray, kernel: Any) -> list[np.ndarray]:
    stream = cp.cuda.Stream(non_blocking=True)
    d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)  # the graph keeps these addresses
    with stream:
        stream.begin_capture()
        d_in.set(x)  # from the pinned buffer: the replay copies whatever x holds then
        kernel(d_in, d_out)
        d_out.get(out=y, blocking=False)
        graph = stream.end_capture()
    results = []
    for frame in frames:
        x[...] = frame  # refill the buffer the captured copy reads
        graph.launch(stream)
        stream.synchronize()  # the replay is asynchronous: wait before reading y
        results.append(y.copy())
    return results


def _eager(cp: Any, frames: list[np.ndarray], x: np.ndarray, y: np.ndarray, kernel: Any) -> list[np.ndarray]:
    """The same pipeline without a graph: three host calls per frame (for the launch-count comparison)."""
    stream = cp.cuda.Stream(non_blocking=True)
    d_in, d_out = cp.empty(x.size, x.dtype), cp.empty(x.size, x.dtype)
    results = []
    for frame in frames:
        x[...] = frame
        with stream:
            d_in.set(x)
            kernel(d_in, d_out)
            d_out.get(out=y, blocking=False)
        stream.synchronize()
        results.append(y.copy())
    return results


def _standin_case(n: int, n_frames: int) -> tuple[Any, list[np.ndarray], np.ndarray, np.ndarray, Any]:
    from .graphs import RecordingGraphCuPy

    rng = np.random.default_rng()
    rec = RecordingGraphCuPy()
    frames = [rng.standard_normal(n).astype(np.float32) for _ in range(n_frames)]
    x, y = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    rec.pinned += [x, y]
    kernel = rec.kernel(lambda a, b: np.copyto(b, 2 * a - 1), "scale_shift")
    return rec, frames, x, y, kernel


def _judge_results(results: Any, frames: list[np.ndarray], y: np.ndarray, label: str, x: np.ndarray | None = None) -> None:
    if not isinstance(results, (list, tuple)):
        raise Failed(
            f"{label}: graph_pipeline returned {type(results).__name__}, not a list with one result per frame.",
            cause="append each frame's result (y.copy()) to a list and return the list.",
        )
    if len(results) != len(frames):
        raise Failed(f"{label}: {len(results)} results for {len(frames)} frames.", cause="one result per frame, in order.")
    expected = [2 * f - 1 for f in frames]
    for k, got in enumerate(results):
        got = np.asarray(got)
        if got.shape != frames[k].shape or not np.allclose(got, expected[k], rtol=1e-5, atol=1e-6):
            if isinstance(results[k], np.ndarray) and np.shares_memory(results[k], y):
                cause = "every result is the buffer y itself, which the next replay overwrites: append y.copy()."
            elif x is not None and np.isnan(np.asarray(x)).all():
                cause = (
                    "the pinned buffer x was never filled: the captured copy reads x at every replay, so put "
                    "each frame into it (x[...] = frame) before graph.launch(stream)."
                )
            elif got.shape == frames[k].shape and np.isnan(got).all():
                cause = (
                    "y was read before the replay had copied anything into it: graph.launch() returns at once; "
                    "call stream.synchronize() before reading y."
                )
            elif k > 0 and got.shape == frames[k].shape and np.allclose(got, expected[0], rtol=1e-5, atol=1e-6):
                cause = (
                    "this is frame 0's result again: a replay copies from the same host address it captured, so "
                    "refill the pinned buffer x with each frame (x[...] = frame) before launching the graph; "
                    "`x = frame` only rebinds the name x to another array, which the graph never reads."
                )
            elif k > 0 and got.shape == frames[k].shape and np.allclose(got, expected[k - 1], rtol=1e-5, atol=1e-6):
                cause = (
                    "this is the previous frame's result: either y was read before this frame's replay finished "
                    "(call stream.synchronize() after graph.launch() and before reading y), or x was refilled after "
                    "graph.launch() instead of before it (the replay copies x when it runs)."
                )
            else:
                cause = "compare with the reference: copy x in, run kernel(d_in, d_out), copy d_out back into y."
            raise Failed(f"{label}: the result for frame {k} is wrong.", cause=cause)


def _grade_standin(fn: Any, n: int, n_frames: int) -> str:
    from .streams import call_learner

    rec, frames, x, y, kernel = _standin_case(n, n_frames)
    label = f"n={n}, {n_frames} frames"
    results = call_learner(fn, rec, frames, x, y, kernel, what=f"{label}: graph_pipeline")
    if rec.capturing is not None:
        raise Failed(f"{label}: the capture never ended.", cause="call graph = stream.end_capture() after the work.")
    if not rec.graphs:
        raise Failed(
            f"{label}: no CUDA graph was captured.",
            cause="with stream: stream.begin_capture(); the copy in, the kernel, the copy out; "
            "graph = stream.end_capture(); then graph.launch(stream) per frame.",
        )
    launched = [g for g in rec.graphs if g.launches]
    if not launched:
        raise Failed(f"{label}: the graph was captured but never launched.", cause="call graph.launch(stream) per frame.")
    kinds = sorted(set().union(*(g.kinds() for g in launched)))
    if not {"h2d", "kernel", "d2h"} <= set(kinds):
        raise Failed(
            f"{label}: the launched graph holds only {', '.join(kinds)}.",
            cause="capture the whole pipeline, the copy in (d_in.set(x)) and the copy out "
            "(d_out.get(out=y, blocking=False)) too: one replay is then one host call per frame.",
        )
    if rec.eager_ops:
        raise Failed(
            f"{label}: {rec.eager_ops} copies or kernels were issued outside the graph.",
            cause="inside the frame loop only refill x, launch the graph, synchronize and keep y.copy(); "
            "the graph already holds the copies and the kernel.",
        )
    if len(rec.graphs) > 1:
        raise Failed(
            f"{label}: {len(rec.graphs)} graphs were captured for {n_frames} frames.",
            cause="capture the pipeline once, before the frame loop, and replay that one graph per frame: a "
            "capture per frame costs more host time than the three calls it replaces.",
        )
    from .streams import BLOCKING_STREAM_CAUSE, blocking_stream_problem

    captured = [s for s in rec._streams if s.name in {g.captured_on for g in rec.graphs}]
    blocking = blocking_stream_problem(captured, label, "captured the graph")
    if blocking:
        raise Failed(blocking, cause=BLOCKING_STREAM_CAUSE)
    replays = sum(g.launches for g in rec.graphs)
    if replays != n_frames:
        raise Failed(
            f"{label}: the graph was launched {replays} times for {n_frames} frames.", cause="one graph.launch(stream) per frame."
        )
    _judge_results(results, frames, y, label, x)
    return label


def _grade_gpu(fn: Any) -> str:
    import cupy as cp
    import cupyx

    n, n_frames = 1 << 20, 5
    rng = np.random.default_rng()
    frames = [rng.standard_normal(n).astype(np.float32) for _ in range(n_frames)]
    x = cupyx.empty_pinned((n,), dtype=np.float32)
    y = cupyx.empty_pinned((n,), dtype=np.float32)
    x[...] = np.nan
    y[...] = np.nan
    kernel = cp.ElementwiseKernel("float32 a", "float32 b", "b = 2 * a - 1", "labkit_scale_shift")
    results = fn(cp, frames, x, y, kernel)
    _judge_results(results, frames, y, f"on the GPU, n={n}, {n_frames} frames")
    return f" On the GPU: {n_frames} replays of 2^20 elements correct."


@exercise("05.graph", kind="code", reference=lambda: _reference)
def graph_pipeline(fn: Any) -> str:
    """Grade ``graph_pipeline(cp, frames, x, y, kernel) -> list``: capture copy-in, kernel and copy-out once on a
    stream, then per frame refill pinned ``x``, launch the graph, wait, and keep a copy of pinned ``y``. In ``sim``
    mode ``cp`` is the recording stand-in with graph capture (replays run when the host waits for them)."""
    from labkit.gpu.cupylab import cupy_or_none

    need_function(fn, "a function graph_pipeline(cp, frames, x, y, kernel)")
    rng = np.random.default_rng()
    sizes = [(int(rng.integers(200, 900)) * 3 + 1, int(rng.integers(3, 7))) for _ in range(2)]
    sizes.append(sizes[0])  # the first sizes again, with new values: nothing may be kept from an earlier call
    labels = [_grade_standin(fn, n, frames) for n, frames in sizes]
    extra = _grade_gpu(fn) if cupy_or_none() is not None else ""
    return (
        f"one capture with both copies and the kernel, one replay per frame, right results on {len(labels)} cases "
        f"(the stand-in runs a replay only when the host waits for it).{extra}"
    )


def host_calls(fn: Any, n_frames: int = 8, n: int = 1024) -> dict[str, int]:
    """How many copies, kernels and graph launches the host issues for ``n_frames`` frames: ``fn`` (a graph pipeline)
    against the same pipeline without a graph, on the recording stand-in. Counts of calls, not times."""
    out = {}
    for name, pipeline in (("graph", fn), ("no graph", _eager)):
        rec, frames, x, y, kernel = _standin_case(n, n_frames)
        pipeline(rec, frames, x, y, kernel)
        out[name] = rec.api_calls
    return out
