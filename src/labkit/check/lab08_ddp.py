"""Check for lab 08's data-parallel exercise: gradient buckets as PyTorch DDP forms them (``08.ddp-buckets``).

The learner's ``make_buckets(sizes, cap_bytes)`` is compared with :func:`labkit.ddp.make_buckets` on fresh lists of
gradient sizes (zero-byte gradients included) and caps below every size, above their sum, equal to a running sum
(the bucket closes at the cap, not after it) and in between, plus the course model's own gradients. Plain Python:
milliseconds, the same in both modes. The usual slips get their cause: a bucket closed only above the cap, the
gradients taken in forward order, the last partial bucket dropped, a bucket closed before the gradient that fills
it, sizes returned instead of positions.
"""

from __future__ import annotations

from typing import Any

from .core import Failed, Unsolved, exercise
from .numeric import call_answer, need_function


def _ref() -> Any:
    from labkit.dist.ddp import make_buckets

    return make_buckets


def _variant(kind: str, sizes: list[int], cap: int) -> list[list[int]] | None:
    """What a typical wrong answer returns (None when the slip does not apply)."""
    from labkit.dist.ddp import make_buckets

    out: list[list[int]] = []
    cur: list[int] = []
    held = 0
    if kind == "strict":
        for k, s in enumerate(sizes):
            cur.append(k)
            held += s
            if held > cap:
                out.append(cur)
                cur, held = [], 0
        return out + ([cur] if cur else [])
    if kind == "before":
        for k, s in enumerate(sizes):
            if cur and held + s > cap:
                out.append(cur)
                cur, held = [], 0
            cur.append(k)
            held += s
        return out + ([cur] if cur else [])
    if kind == "drop-last":
        full = make_buckets(sizes, cap)
        return full[:-1] if full and sum(sizes[k] for k in full[-1]) < cap else None
    if kind == "forward":
        rev = make_buckets(sizes[::-1], cap)
        return [[len(sizes) - 1 - k for k in b] for b in rev]
    if kind == "sizes":
        return [[sizes[k] for k in b] for b in make_buckets(sizes, cap)]
    if kind == "one":
        return [list(range(len(sizes)))] if sizes else []
    if kind == "each":
        return [[k] for k in range(len(sizes))]
    if kind == "reversed":
        return make_buckets(sizes[::-1], cap)
    if kind == "carry":
        for k, s in enumerate(sizes):
            cur.append(k)
            held += s
            if held >= cap:
                out.append(cur)
                cur, held = [], held - cap
        return out + ([cur] if cur else [])
    return None


_CAUSES = {
    "strict": "a bucket closes as soon as it holds cap_bytes or more (>=); with > a bucket that reaches the cap exactly "
    "stays open.",
    "before": "add the gradient to the open bucket first, then close the bucket if it holds cap_bytes or more: a "
    "bucket may exceed the cap (DDP does not split a gradient), it never closes short of it.",
    "drop-last": "the last bucket, smaller than the cap, is still a bucket: its gradients must be all-reduced too.",
    "forward": "the sizes are already in the order the backward pass produces them; walk them from the first, "
    "do not reverse them.",
    "sizes": "return positions in `sizes` (0, 1, 2, ...), not the sizes themselves.",
    "one": "every gradient went into one bucket: close the open bucket as soon as it holds cap_bytes or more, and open "
    "a new one for the next gradient.",
    "each": "one bucket per gradient: keep adding gradients to the open bucket until it holds cap_bytes or more.",
    "reversed": "these are positions in the reversed list: the sizes are already in backward order; walk them as "
    "given and return positions in `sizes` as given.",
    "carry": "a closed bucket's bytes above the cap were carried into the next one: each new bucket starts empty (held = 0).",
}
GENERAL = (
    "walk the sizes in the order given; add each position to the open bucket; close it once it holds "
    "cap_bytes or more; after the loop, a non-empty open bucket is the last one."
)


def cases() -> list[tuple[list[int], int]]:
    """Fresh ``(sizes, cap)`` cases: every kind of cap, zero-byte gradients, and the course model's gradients."""
    from labkit.dist.ddp import grad_sizes

    from .harness import rng

    r = rng()
    out: list[tuple[list[int], int]] = []
    for _ in range(3):
        sizes = [int(x) for x in r.integers(1, 5000, int(r.integers(6, 30)))]
        if len(sizes) > 3:
            sizes[int(r.integers(1, len(sizes)))] = 0  # a bias of zero width, or a frozen layer (not the first: the
            #                                            running sum below must be a cap of at least 1 byte)
        k = int(r.integers(1, len(sizes) - 1))
        out += [
            (sizes, int(sum(sizes[:k]))),  # equal to a running sum: closes exactly at the cap
            (sizes, int(sum(sizes[:k])) + 1),  # a running sum one byte short of the cap: the bucket stays open
            (sizes, max(1, int(sum(sizes[:k])) - 1)),  # one byte over the cap: it closes there
            (sizes, int(r.integers(5000, 12000))),
            (sizes, int(min(s for s in sizes if s) // 2 + 1)),
            (sizes, int(sum(sizes)) + int(r.integers(1, 100))),
        ]
    model, _ = grad_sizes()
    out += [(model, 1 << 20), (model, int(r.integers(200_000, 900_000))), ([4096], 1 << 20), ([], 100)]
    out.append((out[0][0], 1))  # the smallest cap, 1 byte: every gradient with bytes closes its bucket
    return out


@exercise("08.ddp-buckets", kind="code", reference=_ref)
def ddp_buckets(fn: Any) -> str:
    """Grade ``fn(sizes, cap_bytes) -> list of buckets`` (lists of positions in ``sizes``) against DDP's rule."""
    from labkit.dist.ddp import make_buckets

    need_function(fn, "your function", cause="pass the function itself.")
    for sizes, cap in cases():
        want = make_buckets(sizes, cap)
        got = call_answer(fn, list(sizes), cap, what=f"make_buckets({_short(sizes)}, {cap})", tail=".")
        if got is None or got is Ellipsis:
            raise Unsolved("your function returns nothing yet; return the list of buckets.")
        try:
            norm = [[int(k) for k in b] for b in got]
        except (TypeError, ValueError):
            raise Failed(
                f"make_buckets({_short(sizes)}, {cap}) returned {got!r}: expected a list of lists of positions."
            ) from None
        if norm != want:
            matched = [c for kind, c in _CAUSES.items() if _variant(kind, sizes, cap) == norm]
            cause = " Or: ".join(matched) if matched else GENERAL  # slips with the same result here, named together
            raise Failed(
                f"make_buckets({_short(sizes)}, cap_bytes={cap}) returned {_short(norm)}, expected {_short(want)}.", cause=cause
            )
    return (
        "correct: gradients in backward order, a bucket closed once it holds the cap or more, the last one kept; "
        "the first bucket is ready while the backward pass still has earlier layers to do."
    )


def _short(x: Any, limit: int = 160) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 5] + " ...]"
