"""Fresh sizes for graded launches: drawn anew each run from ranges, so that no fixed list of cases can be
learned, and chosen so that each range holds the case a shortcut gets wrong (many grid-stride rounds, a partial
last block or tile, the largest block an exercise allows)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from .harness import rng

T = TypeVar("T")


def between(lo: int, hi: int) -> int:
    """An integer drawn uniformly from ``lo .. hi`` (both included)."""
    return int(rng().integers(lo, hi + 1))


def not_multiple(lo: int, hi: int, of: int | tuple[int, ...]) -> int:
    """An integer in ``lo .. hi`` that is not a multiple of ``of`` (nor of any of them, for a tuple)."""
    divisors = (of,) if isinstance(of, int) else of
    for _ in range(1000):
        n = between(lo, hi)
        if all(n % d for d in divisors if d > 1):
            return n
    raise ValueError(f"no integer in {lo}..{hi} avoids the multiples of {divisors}")


def choice(options: Sequence[T]) -> T:
    """One of ``options``, drawn at random."""
    return options[int(rng().integers(0, len(options)))]


def sizes_1d(block: int) -> list[int]:
    """Sizes that expose indexing bugs, fresh each run: first a few blocks and a partial last block (a kernel that
    writes nothing there is "not solved yet"), then one element, one short of or one past a block, and a
    multiple of the block."""
    return [not_multiple(2 * block + 1, 4 * block - 1, block), 1, block + int(choice((-1, 1))), block * between(1, 3)]


def drawn(spec: Any) -> Any:
    """A value drawn from its spec written as data (``labkit/data/exercises.yml``): a number is itself; a list draws
    each of its items in order, as a tuple (a shape, a case); a mapping calls the draw it names, ``{between: [lo,
    hi]}`` or ``{not_multiple: [lo, hi, of]}``, times ``times`` where it gives one (``{times: 32, between: [1, 2]}``)."""
    if isinstance(spec, list):
        return tuple(drawn(item) for item in spec)
    if isinstance(spec, dict):
        draws: dict[str, Callable[..., int]] = {"between": between, "not_multiple": not_multiple}
        (name,) = set(spec) - {"times"}
        return spec.get("times", 1) * draws[name](*spec[name])
    return spec
