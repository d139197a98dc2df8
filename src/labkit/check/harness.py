"""Grading Numba kernels like a strict reviewer, in ``gpu`` and ``sim`` mode alike.

Tools the lab checks combine:

- :func:`random_array`: fresh random inputs for every run;
- :class:`Guarded`: an output buffer filled with poison, with guard zones on both sides that catch writes
  past the end (on a GPU the guard changes; in the simulator NumPy's bounds check raises at once);
- :func:`launch`: run a kernel with a given grid, turn compile errors, exceptions inside threads and
  hangs (a time limit in ``sim``) into learner-facing :class:`~labkit.check.core.Failed` messages;
- :func:`compare`: first wrong index, expected against got, and a likely cause.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..mode import current_mode
from .core import Failed, Unsolved

SIM_TIME_LIMIT_S = 60.0
GUARD = 64  # elements of guard zone on each side of an output

_rng = np.random.default_rng()


def rng() -> np.random.Generator:
    """The generator checks draw fresh inputs from (a new stream per process, never a fixed seed)."""
    return _rng


def random_array(shape: int | tuple[int, ...], dtype: Any = np.float32, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """A fresh random host array; integers are drawn in ``[low, high)``."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return _rng.integers(int(low), int(high), size=shape).astype(dt)
    return _rng.uniform(low, high, size=shape).astype(dt)


def poison_value(dtype: Any) -> Any:
    """NaN for floats, an unlikely sentinel for integers."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.nan
    if dt.kind in "iu":
        return np.iinfo(dt).max - 7
    if dt.kind == "b":
        return True
    raise TypeError(f"no poison for dtype {dt}")


def _is_poison(a: np.ndarray) -> np.ndarray:
    value = poison_value(a.dtype)
    if isinstance(value, float) and np.isnan(value):
        return np.isnan(a)
    return a == value


def cuda_module() -> Any:
    """``numba.cuda`` (the simulator in ``sim`` mode: labkit.setup() must have run first)."""
    current_mode()  # make sure the mode (and NUMBA_ENABLE_CUDASIM) is set before numba is imported
    from numba import cuda

    return cuda


class Guarded:
    """A poisoned output buffer with guard zones; pass :attr:`device` to the kernel."""

    def __init__(self, shape: int | tuple[int, ...], dtype: Any = np.float32, guard: int = GUARD) -> None:
        cuda = cuda_module()
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.dtype = np.dtype(dtype)
        self.guard = guard
        n = int(np.prod(self.shape))
        self._host = np.full(n + 2 * guard, poison_value(self.dtype), dtype=self.dtype)
        self._buffer = cuda.to_device(self._host)
        inner = self._buffer[guard : guard + n]
        self.device = inner.reshape(self.shape) if len(self.shape) > 1 else inner

    def fetch(self) -> np.ndarray:
        """Copy back; raise :class:`Failed` if anything was written into a guard zone."""
        full = self._buffer.copy_to_host()
        n = full.size - 2 * self.guard
        before, inner, after = full[: self.guard], full[self.guard : self.guard + n], full[self.guard + n :]
        if not _is_poison(before).all() or not _is_poison(after).all():
            side = "before the start" if not _is_poison(before).all() else "past the end"
            raise Failed(
                f"the kernel wrote outside the output array ({side}, shape {self.shape}).",
                cause="a missing or wrong bounds check: threads beyond the last element must not write.",
            )
        return inner.reshape(self.shape)


_SIM_INDEX_ERROR = re.compile(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)")


def _explain_exception(exc: BaseException) -> Failed:
    text = f"{type(exc).__name__}: {exc}"
    first = text.strip().splitlines()[0][:400]
    m = _SIM_INDEX_ERROR.search(text)
    if m:
        return Failed(
            f"a thread indexed element {m.group(1)} of an axis of size {m.group(3)} ({first}).",
            cause="a missing or wrong bounds check (`if i < n:`), or a row/column index mix-up.",
        )
    name = type(exc).__name__
    if name in ("TypingError", "UnsupportedError", "NumbaError", "LoweringError") or "numba" in type(exc).__module__:
        return Failed(f"the kernel does not compile: {first}", cause="look at the line the compiler names.")
    if isinstance(exc, TimeoutError):
        return Failed(str(exc), cause="a loop whose condition never becomes false, or a barrier some threads never reach.")
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return Failed(f"the kernel was called with arguments it does not accept: {first}", cause="the kernel's parameters must match the exercise's signature.")
    return Failed(f"the kernel raised {first}")


class _Deadline:
    """A trace function that aborts simulator threads once a deadline has passed."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and time.monotonic() > self.deadline:
            raise TimeoutError(f"the kernel did not finish within {self.seconds:.0f} s in the simulator")
        return None


def launch(kernel: Any, griddim: Any, blockdim: Any, *args: Any, time_limit_s: float | None = None) -> None:
    """Launch ``kernel[griddim, blockdim](*args)`` and wait; any error becomes a :class:`Failed` message.

    In ``sim`` mode a kernel still running after ``time_limit_s`` (default :data:`SIM_TIME_LIMIT_S`) is stopped.
    """
    cuda = cuda_module()
    if not hasattr(kernel, "__getitem__") or not callable(kernel):
        raise Failed(f"expected a @cuda.jit kernel, got {type(kernel).__name__}.", cause="decorate the function with @cuda.jit.")
    sim = current_mode() == "sim"
    tracer = _Deadline(time_limit_s or SIM_TIME_LIMIT_S) if sim else None
    if tracer:
        threading.settrace(tracer)
    try:
        kernel[griddim, blockdim](*args)
        cuda.synchronize()
    except Failed:
        raise
    except Exception as exc:  # noqa: BLE001 - every learner error is reported, none escapes
        raise _explain_exception(exc) from None
    finally:
        if tracer:
            threading.settrace(None)  # type: ignore[arg-type]


def compare(
    got: np.ndarray,
    expected: np.ndarray,
    *,
    label: str,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    unwritten_means_unsolved: bool = False,
) -> None:
    """Raise :class:`Failed` (or :class:`Unsolved`) at the first element where ``got`` differs from ``expected``."""
    if got.shape != expected.shape:
        raise Failed(f"{label}: result has shape {got.shape}, expected {expected.shape}.")
    poison = _is_poison(got)
    if unwritten_means_unsolved and poison.all():
        raise Unsolved("the kernel ran but wrote nothing to its output; write the kernel body.")
    if poison.any():
        idx = tuple(int(i) for i in np.argwhere(poison)[0])
        count = int(poison.sum())
        raise Failed(
            f"{label}: {count} of {got.size} elements were never written; the first is at index {_fmt(idx)}.",
            cause="some threads do no work: check the index arithmetic, the grid covers the whole array, and the loop bounds.",
        )
    if got.dtype.kind == "f" or expected.dtype.kind == "f":
        bad = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    else:
        bad = got != expected
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise Failed(
            f"{label}: {int(bad.sum())} of {got.size} elements are wrong; first at index {_fmt(idx)}: "
            f"expected {expected[idx]!r}, got {got[idx]!r}.",
            cause=_guess_cause(got, expected, idx),
        )


def _fmt(idx: tuple[int, ...]) -> str:
    return str(idx[0]) if len(idx) == 1 else str(idx)


def _guess_cause(got: np.ndarray, expected: np.ndarray, idx: tuple[int, ...]) -> str:
    if got.ndim == 2 and got.shape[0] == got.shape[1] and np.allclose(got, expected.T, equal_nan=False):
        return "rows and columns are swapped (x is the column, y is the row)."
    flat_got, flat_exp = got.ravel(), expected.ravel()
    for shift in (1, -1):
        if np.allclose(flat_got[max(shift, 0): flat_got.size + min(shift, 0)], flat_exp[max(-shift, 0): flat_exp.size + min(-shift, 0)]):
            return "an off-by-one in the index: every element comes from its neighbour."
    return "compare your formula with the task statement for this element."


@dataclass(frozen=True)
class Case:
    """One graded run: a label (size and launch configuration) and the arrays involved."""

    label: str
    size: int | tuple[int, ...]
    threads: int | tuple[int, ...]


def sizes_for(block: int, *, sim_cap: int = 1500) -> list[int]:
    """Sizes that expose indexing bugs: smaller than one block, not a multiple of the block, exact multiples.

    The first size is a few blocks and not a multiple of the block size: a kernel that writes nothing there
    is reported as not solved yet.
    """
    candidates = [3 * block + 7, 1, block - 1, block, block + 1, 5 * block]
    cap = sim_cap if current_mode() == "sim" else 1 << 20
    out = list(dict.fromkeys(s for s in candidates if 0 < s <= cap))  # first: a mid size, to spot an empty kernel
    if current_mode() == "gpu":
        out.append(1_000_003)
    return out


def check_kernel_1d(
    kernel: Any,
    *,
    make_inputs: Callable[[int], Sequence[np.ndarray]],
    reference: Callable[..., np.ndarray],
    out_dtype: Any = np.float32,
    blocks: Sequence[int] = (32, 128),
    grid_for: Callable[[int, int], int] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    extra_args: Callable[[int], Sequence[Any]] = lambda n: (),
) -> str:
    """Grade a 1-D elementwise kernel ``kernel(*inputs, *extra, out)`` over sizes and block sizes.

    Inputs are fresh random arrays per case, the output is poisoned and guarded. ``grid_for(n, block)``
    gives the number of blocks (default: enough to cover ``n``; pass a smaller one to test grid-stride loops).
    Returns the success message; raises :class:`Failed` or :class:`Unsolved`.
    """
    cuda = cuda_module()
    runs = 0
    first = True
    for block in blocks:
        for n in sizes_for(block):
            host_inputs = make_inputs(n)
            extras = tuple(extra_args(n))
            dev_inputs = [cuda.to_device(a) for a in host_inputs]
            out = Guarded(n, out_dtype)
            grid = grid_for(n, block) if grid_for else (n + block - 1) // block
            label = f"n={n}, {grid} block(s) of {block} threads"
            launch(kernel, grid, block, *dev_inputs, *extras, out.device)
            got = out.fetch()
            compare(got, reference(*host_inputs, *extras), label=label, rtol=rtol, atol=atol, unwritten_means_unsolved=first)
            first = False
            runs += 1
    return f"correct on {runs} runs (sizes from 1 up, block sizes {', '.join(map(str, blocks))}), no out-of-bounds writes."
