"""The rank side of a :mod:`labkit.ranks` data-parallel job (``mode: ddp``): a small model trained on every rank,
its gradients all-reduced in buckets with the learner's ring, overlapped with the backward pass as PyTorch DDP does.

Imported by ``_rank_worker.py`` inside each rank (NumPy and mpi4py only). The model is a multilayer perceptron
(``tanh`` between linear layers, mean-squared error against a fixed random "teacher"); every rank draws its own
batch. Gradients become ready in backward order, a layer at a time (weights, then bias); a bucket's gradients are
flattened into one buffer and all-reduced by ``fn(comm, buf)`` as soon as the last of them is ready, on a
communication thread, while the main thread goes on with the backward pass of earlier layers. Then every rank
divides by n and takes the same SGD step.

For each bucket plan the job measures, as medians over steps of the slowest rank: the forward + backward pass
alone (``compute``), the all-reduce of every bucket alone (``comm``), a step that reduces after the backward pass
(``sequential``) and one that overlaps (``overlapped``), and when the first bucket was ready (``first_ready``,
seconds after the backward pass began). It also checks that every rank ends with the same parameters, equal to
one process training on all the ranks' batches at once.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import numpy as np


def init_params(layers: list[int], seed: int) -> list[np.ndarray]:
    """``[W0, b0, W1, b1, ...]`` in forward order, float32, the same on every rank."""
    rng = np.random.default_rng([seed, 12345])
    out = []
    for a, b in zip(layers[:-1], layers[1:]):
        out.append((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32))
        out.append(np.zeros(b, np.float32))
    return out


def batch(layers: list[int], size: int, seed: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's inputs and targets (the teacher is the same on every rank)."""
    teacher = np.random.default_rng([seed, 999]).standard_normal((layers[0], layers[-1])).astype(np.float32)
    x = np.random.default_rng([seed, rank]).standard_normal((size, layers[0])).astype(np.float32)
    return x, np.tanh(x @ teacher / np.sqrt(layers[0])).astype(np.float32)


def grad_order(n_layers: int) -> list[int]:
    """Parameter indices in the order the backward pass produces their gradients: the last layer's W and b first."""
    return [i for layer in reversed(range(n_layers)) for i in (2 * layer, 2 * layer + 1)]


def forward_backward(params: list[np.ndarray], x: np.ndarray, y: np.ndarray, on_ready: Any = None) -> list[np.ndarray]:
    """Gradients of the mean-squared error; ``on_ready(index, grad)`` is called as each gradient is produced."""
    n_layers = len(params) // 2
    acts, pre = [x], []
    for layer in range(n_layers):
        z = acts[-1] @ params[2 * layer] + params[2 * layer + 1]
        pre.append(z)
        acts.append(np.tanh(z) if layer < n_layers - 1 else z)
    grads: list[Any] = [None] * len(params)
    delta = (2.0 / acts[-1].size) * (acts[-1] - y)
    for layer in reversed(range(n_layers)):
        if layer < n_layers - 1:
            delta = delta * (1.0 - np.tanh(pre[layer]) ** 2)
        gw = acts[layer].T @ delta
        gb = delta.sum(axis=0)
        grads[2 * layer], grads[2 * layer + 1] = gw, gb
        if on_ready is not None:
            on_ready(2 * layer, gw)
            on_ready(2 * layer + 1, gb)
        if layer:
            delta = delta @ params[2 * layer].T
    return grads


class Reducer:
    """Buckets of gradients all-reduced with ``fn``: on a thread (``overlap=True``) or after the backward pass."""

    def __init__(self, fn: Any, comm: Any, buckets: list[list[int]], params: list[np.ndarray], overlap: bool) -> None:
        self.fn, self.comm, self.buckets, self.overlap = fn, comm, buckets, overlap
        self.where = {i: k for k, b in enumerate(buckets) for i in b}
        self.shapes = [p.shape for p in params]
        self.n = comm.Get_size()
        self.first_ready: float | None = None
        self.t0 = 0.0
        self._jobs: queue.Queue = queue.Queue()
        self._error: list[BaseException] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.pending = [set(b) for b in self.buckets]
        self.grads: list[Any] = [None] * len(self.shapes)
        self.first_ready = None
        self.seen = 0
        self.first_ready_count: int | None = None  # gradients produced when the first bucket was complete
        if self.overlap:
            self._thread = threading.Thread(target=self._work, daemon=True)
            self._thread.start()
        self.t0 = time.perf_counter()  # the pass starts now (the thread is already running)

    def _reduce(self, k: int) -> None:
        idx = self.buckets[k]
        flat = np.concatenate([self.grads[i].ravel() for i in idx])
        out = self.fn(self.comm, flat)
        out = flat if out is None else np.asarray(out)
        out = out / self.n
        pos = 0
        for i in idx:
            size = int(np.prod(self.shapes[i]))
            self.grads[i] = out[pos : pos + size].reshape(self.shapes[i]).astype(np.float32)
            pos += size

    def _work(self) -> None:
        while True:
            k = self._jobs.get()
            if k is None:
                return
            try:
                self._reduce(k)
            except BaseException as exc:  # reported by finish(), in the main thread
                self._error.append(exc)
                return

    def ready(self, i: int, grad: np.ndarray) -> None:
        self.grads[i] = grad
        k = self.where[i]
        self.pending[k].discard(i)
        self.seen += 1
        if not self.pending[k]:
            if self.first_ready is None:
                self.first_ready = time.perf_counter() - self.t0
                self.first_ready_count = self.seen
            if self.overlap:
                self._jobs.put(k)

    def finish(self) -> list[np.ndarray]:
        if self.overlap and self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            if self._error:
                raise self._error[0]
        else:
            for k in range(len(self.buckets)):
                self._reduce(k)
        return self.grads


def run(fn: Any, job: dict[str, Any], world: Any, status: Any, comm_cls: Any) -> dict[str, Any]:
    """Rank side of a data-parallel job: train, measure and verify for each bucket plan in ``job["plans"]``."""
    from mpi4py import MPI

    layers, size, seed, lr = list(job["layers"]), int(job["batch"]), int(job["seed"]), float(job["lr"])
    steps = int(job["steps"])
    rank, n = world.Get_rank(), world.Get_size()
    comm = comm_cls(world, status)
    can_overlap = MPI.Query_thread() >= MPI.THREAD_SERIALIZED  # MPI calls from the communication thread
    x, y = batch(layers, size, seed, rank)
    results = []

    def slowest(t: float) -> float:
        return world.allreduce(t, op=MPI.MAX)

    for plan_no, buckets in enumerate(job["plans"]):
        status.case = f"data-parallel plan {plan_no + 1}: {len(buckets)} bucket(s) on {n} ranks"
        row: dict[str, Any] = {"buckets": [list(b) for b in buckets]}
        timings: dict[str, list[float]] = {"compute": [], "comm": [], "sequential": [], "overlapped": [], "first_ready": []}
        for mode in ("compute", "comm", "sequential", "overlapped"):
            params = init_params(layers, seed)
            for step in range(steps + 1):  # step 0 warms up
                world.Barrier()
                t0 = time.perf_counter()
                if mode == "compute":
                    grads = forward_backward(params, x, y)
                elif mode == "comm":
                    red = Reducer(fn, comm, buckets, params, overlap=False)
                    red.start()
                    for i, g in enumerate(cached):  # noqa: F821  (set by the compute mode)
                        red.ready(i, g)
                    t0 = time.perf_counter()
                    grads = red.finish()
                else:
                    red = Reducer(fn, comm, buckets, params, overlap=(mode == "overlapped" and can_overlap))
                    red.start()
                    forward_backward(params, x, y, red.ready)
                    grads = red.finish()
                dt = slowest(time.perf_counter() - t0)
                if step:
                    timings[mode].append(dt)
                    if mode == "overlapped":
                        timings["first_ready"].append(slowest(red.first_ready or 0.0))
                if mode == "compute":
                    cached = grads  # noqa: F841 - read by the next mode ("comm"), a later turn of the outer loop
                else:
                    params = [p - lr * g for p, g in zip(params, grads)]
            if mode == "overlapped":
                final = params
            if mode == "sequential":
                seq_final = params
        row.update({k: float(np.median(v)) for k, v in timings.items()})
        # every rank holds the same parameters, equal to one process on the whole batch
        flat = np.concatenate([p.ravel() for p in final])
        spread = world.allreduce(float(np.max(np.abs(flat - world.bcast(flat, root=0)))), op=MPI.MAX)
        row["ranks_agree"] = spread == 0.0
        if rank == 0:
            xs, ys = zip(*(batch(layers, size, seed, r) for r in range(n)))
            xa, ya = np.concatenate(xs), np.concatenate(ys)
            ref = init_params(layers, seed)
            for _ in range(steps + 1):
                ref = [p - lr * g for p, g in zip(ref, forward_backward(ref, xa, ya))]
            err = max(float(np.max(np.abs(a - b))) / (float(np.max(np.abs(b))) + 1e-12) for a, b in zip(final, ref))
            err_seq = max(float(np.max(np.abs(a - b))) / (float(np.max(np.abs(b))) + 1e-12) for a, b in zip(seq_final, ref))
            row["max_rel_error"] = max(err, err_seq)
        results.append(row)
    sizes = [int(p.nbytes) for p in init_params(layers, seed)]
    return {"plans": results, "grad_bytes": sizes, "order": grad_order(len(layers) - 1), "threads": can_overlap}
