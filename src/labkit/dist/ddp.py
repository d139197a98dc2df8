"""Data-parallel training over local processes: gradient buckets as PyTorch DDP forms them, a run that overlaps
their all-reduce with the backward pass, and the measured overlap next to lab 08's scaling model.

- :func:`make_buckets` is the rule DDP applies to each bucket (labkit's reference for exercise 08.ddp-buckets): walk
  the gradients in the order the backward pass produces them and close a bucket as soon as it holds at least
  ``cap_bytes``. DDP itself caps its first bucket at 1 MiB and the others at ``bucket_cap_mb`` (25 MiB).
- :func:`run` trains a small NumPy model on ``n`` processes (:mod:`labkit.ranks`, ``_rank_ddp.py`` on each rank)
  with a ring all-reduce function of yours, for one or more bucket plans, and **measures** on these CPU processes:
  the forward + backward pass alone, the all-reduce alone, a step that reduces after the backward pass, and one
  that overlaps; it checks every rank ends with the same parameters as one process on the whole batch.
- :meth:`DdpPlan.model` is lab 08's step-time **model** (:func:`labkit.collectives.step_time`) for the same
  compute and all-reduce times, with the overlap window the plan allows: the part of the backward pass left after
  the first bucket is ready.

Times are of CPU processes over shared memory on this machine, never GPU figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from labkit.dist._rank_ddp import grad_order
from labkit.errors import LabkitError

#: The model :func:`run` trains by default: widths of its layers (input, hidden..., output).
LAYERS = (256, 512, 512, 512, 512, 64)
#: Samples per process per step.
BATCH = 64


def make_buckets(sizes: Sequence[int], cap_bytes: int) -> list[list[int]]:
    """Group gradients into buckets: ``sizes[k]`` is the ``k``-th gradient to become ready (bytes); walk them in that
    order, add each to the open bucket, and close it once it holds ``cap_bytes`` or more. Returns lists of positions
    in ``sizes`` (every position once, in order); the last bucket may be smaller."""
    if isinstance(cap_bytes, bool) or not isinstance(cap_bytes, int) or cap_bytes < 1:
        raise LabkitError(f"cap_bytes must be a whole number of bytes >= 1, got {cap_bytes!r}.")
    try:
        sizes = [int(s) for s in sizes]
    except (TypeError, ValueError):
        raise LabkitError(f"sizes must be a list of byte counts, got {sizes!r}.") from None
    if any(s < 0 for s in sizes):
        raise LabkitError("sizes are byte counts: none may be negative.")
    buckets: list[list[int]] = []
    open_: list[int] = []
    held = 0
    for k, s in enumerate(sizes):
        open_.append(k)
        held += s
        if held >= cap_bytes:
            buckets.append(open_)
            open_, held = [], 0
    if open_:
        buckets.append(open_)
    return buckets


def grad_sizes(layers: Sequence[int] = LAYERS) -> tuple[list[int], list[int]]:
    """``(sizes, order)``: the bytes of each float32 gradient in the order the backward pass produces them, and the
    parameter index of each (``[W0, b0, W1, b1, ...]`` numbering): the last layer's weights and bias come first."""
    try:
        widths = [int(w) for w in layers]
    except (TypeError, ValueError):
        raise LabkitError(f"layers are two or more positive widths, got {layers!r}.") from None
    if len(widths) < 2 or any(w < 1 for w in widths):
        raise LabkitError(f"layers are two or more positive widths, got {list(layers)!r}.")
    nbytes = []
    for a, b in zip(widths[:-1], widths[1:]):
        nbytes += [4 * a * b, 4 * b]
    order = grad_order(len(widths) - 1)  # the order the rank processes produce them in
    return [nbytes[i] for i in order], order


@dataclass(frozen=True)
class DdpPlan:
    """One bucket plan of :func:`run`: measured medians (seconds, slowest process) and the verification."""

    n: int
    buckets: list[list[int]]  # parameter indices per bucket
    compute_s: float  # forward + backward alone
    comm_s: float  # all-reduce of every bucket alone
    sequential_s: float  # backward, then the all-reduces
    overlapped_s: float  # all-reduces on a thread during the backward pass
    first_ready_s: float  # when the first bucket was ready, after the step began
    ranks_agree: bool
    max_rel_error: float  # against one process training on all the batches

    @property
    def hidden_s(self) -> float:
        """Communication hidden by the overlap: sequential step - overlapped step (measured)."""
        return max(0.0, self.sequential_s - self.overlapped_s)

    @property
    def window(self) -> float:
        """Fraction of the compute time after the first bucket is ready: what the model may overlap."""
        return max(0.0, min(1.0, 1.0 - self.first_ready_s / self.compute_s)) if self.compute_s > 0 else 0.0

    def model(self) -> tuple[float, float]:
        """Lab 08's model for this plan: ``(step seconds, hidden seconds)`` = ``step_time(compute, comm, window)``."""
        from labkit.dist.collectives import step_time

        return step_time(self.compute_s, self.comm_s, self.window)


def run(
    fn: Callable[..., Any] | str,
    n: int,
    plans: Sequence[Sequence[Sequence[int]]],
    *,
    layers: Sequence[int] = LAYERS,
    batch: int = BATCH,
    steps: int = 3,
    lr: float = 0.05,
    seed: int = 8,
    limit_s: float | None = 60.0,
) -> list[DdpPlan]:
    """Train on ``n`` local processes with the all-reduce ``fn(comm, buf)`` for each bucket plan (lists of positions
    in :func:`grad_sizes`' order, as :func:`make_buckets` returns them) and measure; see the module docstring."""
    from labkit.dist import ranks

    sizes, order = grad_sizes(layers)
    as_params = []
    for plan in plans if isinstance(plans, (list, tuple)) else [plans]:
        try:
            flat = [int(k) for b in plan for k in b]
        except (TypeError, ValueError):
            flat = []
        if sorted(flat) != list(range(len(sizes))) or flat != sorted(flat):
            raise LabkitError(
                f"a bucket plan must list every gradient position 0..{len(sizes) - 1} once, in order; got {plan!r}.",
                fix="Build it with make_buckets(sizes, cap_bytes).",
            )
        as_params.append([[order[int(k)] for k in b] for b in plan])
    if not as_params:
        raise LabkitError("give one bucket plan or more (a list of plans).", fix="plans = [make_buckets(sizes, 1 << 20)]")
    src, name = ranks.source_of(fn)
    job = {
        "mode": "ddp",
        "source": src,
        "name": name,
        "plans": as_params,
        "layers": [int(w) for w in layers],
        "batch": int(batch),
        "steps": int(steps),
        "lr": float(lr),
        "seed": int(seed),
    }
    out = ranks.launch(job, n, limit_s=limit_s)
    rows = out.results[0]["plans"]
    return [
        DdpPlan(
            n,
            r["buckets"],
            r["compute"],
            r["comm"],
            r["sequential"],
            r["overlapped"],
            r["first_ready"],
            all(res["plans"][k]["ranks_agree"] for res in out.results),
            r["max_rel_error"],
        )
        for k, r in enumerate(rows)
    ]
