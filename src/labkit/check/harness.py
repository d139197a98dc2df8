"""Grading Numba kernels like a strict reviewer, in ``gpu`` and ``sim`` mode alike.

Tools the lab checks combine:

- :func:`random_array`: fresh random inputs for every run;
- :class:`Guarded`: an output buffer filled with poison, with guard zones on both sides that catch writes
  past the end (on a GPU the guard changes; in the simulator NumPy's bounds check raises at once);
- :func:`launch`: run a kernel with a given grid, turn compile errors, exceptions inside threads and
  hangs (a time limit in ``sim``) into learner-facing :class:`~labkit.check.core.Failed` messages;
- :func:`compare`: first wrong index, expected against got, and a likely cause.

Every graded launch (:func:`grade`, so :func:`run_case` and every :class:`Launch`) also compares each input array
after the launch with the host array it was copied from: a kernel that writes into an input fails with "your kernel
wrote into its input `a`" (before any race or wrong value it causes), unless ``Launch(in_place=("a",))`` says the
statement lets it. Host-function checks get the same from :func:`labkit.check.inputs.inputs_kept`. Likely causes
are read from evidence (:mod:`labkit.check.causes`): ``Launch(explain=...)`` gives a check's own reading of a wrong
result; :func:`counter_wrap_cause` names a narrow counter that wrapped (every kernel check gets it; call it for
counts compared outside :func:`grade`); :func:`block_size_note` names a kernel that passed power-of-two blocks and
fails on another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..mode import (
    cuda_module,  # re-exported: checks and kernels call harness.cuda_module
    current_mode,
)
from ..sim.limits import LEARNER_CODE_LIMIT_S, LIKELY_HANG
from ..sim.memory import fmt_index as _fmt
from ..sim.memory import is_poison as _is_poison
from ..sim.memory import poison_value
from .causes import counter_wrap_cause  # re-exported: checks that compare counts themselves call it for their cause
from .core import Failed, Unsolved
from .inputs import fmt_value as _v
from .replay import DRAWS, GEN

if TYPE_CHECKING:
    from ..sim import memory

CASE_TIME_LIMIT_S = LEARNER_CODE_LIMIT_S  # one graded launch of a lab check (run_case) in the simulator
GPU_REPEATS = 3  # on a GPU, run_case launches each case this many times (races show by chance there)
GUARD = 64  # elements of guard zone on each side of an output

_rng = GEN


def rng() -> np.random.Generator:
    """The generator checks draw fresh inputs from (a new stream per process, never a fixed seed); its scalar
    integer draws can be replayed (:func:`labkit.check.replay.same_sizes`)."""
    return DRAWS  # type: ignore[return-value]


def random_array(shape: int | tuple[int, ...], dtype: Any = np.float32, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """A fresh random host array; integers are drawn in ``[low, high)``."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return _rng.integers(int(low), int(high), size=shape).astype(dt)
    return _rng.uniform(low, high, size=shape).astype(dt)


class Guarded:
    """A poisoned output buffer with guard zones; pass :attr:`device` to the kernel."""

    def __init__(self, shape: int | tuple[int, ...], dtype: Any = np.float32, guard: int = GUARD, fill: Any = None) -> None:
        cuda = cuda_module()
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.dtype = np.dtype(dtype)
        self.guard = guard
        n = int(np.prod(self.shape))
        self._host = np.full(n + 2 * guard, poison_value(self.dtype), dtype=self.dtype)
        if fill is not None:  # an output the kernel accumulates into (a counter) starts at ``fill``, guards stay poisoned
            self._host[guard : guard + n] = fill
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
_NARROW = re.compile(r"out of bounds for (u?int(?:8|16))")
_NARROW_RANGE = {"int8": "-128 to 127", "uint8": "0 to 255", "int16": "-32,768 to 32,767", "uint16": "0 to 65,535"}
_NOT_SUBSCRIPTABLE = re.compile(r"'(int|float|bool|numpy\.\w+)' object (is not subscriptable|does not support item assignment)")


def explain_exception(exc: BaseException, kernel: Any = None) -> Failed:
    """A learner-facing :class:`Failed` for anything a kernel launch raised (``kernel``, when given, lets a time-out
    caused by whole-array NumPy work in the kernel be named as such). Internal class names never reach the learner."""
    from ..errors import LabkitError
    from ..sim.errors import KernelFault
    from .causes import halving_loop_cause, plain_words, whole_array_calls, whole_array_cause

    where = getattr(exc, "sim_thread", None)
    at = f" (thread {where[0]} of block {where[1]})" if where else ""

    def hang_cause(otherwise: str | None) -> str | None:  # a time-out: what the kernel's code shows, else ``otherwise``
        calls = whole_array_calls(kernel) if kernel is not None else []
        if calls:
            return whole_array_cause(calls)
        return (halving_loop_cause(kernel) if kernel is not None else None) or otherwise

    if isinstance(exc, KernelFault):
        return Failed(plain_words(f"{exc}{at}"), cause=hang_cause(exc.cause) if isinstance(exc, TimeoutError) else exc.cause)
    text = plain_words(f"{type(exc).__name__}: {exc}")
    first = text.strip().splitlines()[0][:400]
    m = _SIM_INDEX_ERROR.search(text)
    if m and int(m.group(1)) < 0:
        return Failed(
            f"a thread indexed element {m.group(1)} of an axis of size {m.group(3)}{at} ({first}).",
            cause="a missing lower bounds check: an index computed by subtracting (`i - RADIUS`, `row - 1`) goes below "
            "0 at the start of the array; test `0 <= j` (`if 0 <= j < n:`) before reading. (Python would read from the "
            "end of the array; a GPU reads memory outside it.)",
        )
    if m:
        return Failed(
            f"a thread indexed element {m.group(1)} of an axis of size {m.group(3)}{at} ({first}).",
            cause="a missing or wrong bounds check (`if i < n:`), or a row/column index mix-up.",
        )
    name = type(exc).__name__
    if name in ("TypingError", "UnsupportedError", "NumbaError", "LoweringError") or "numba" in type(exc).__module__:
        return Failed(f"the kernel does not compile: {first}", cause="look at the line the compiler names.")
    if isinstance(exc, TimeoutError):
        return Failed(plain_words(str(exc)), cause=hang_cause(LIKELY_HANG))
    if isinstance(exc, TypeError) and "unsupported operand" in text and "device array" in text:
        calls = whole_array_calls(kernel) if kernel is not None else []
        return Failed(
            f"the kernel raised {first}{at}",
            cause=whole_array_cause(calls, slow=False)
            if calls
            else "arithmetic on whole arrays inside a kernel: each thread works on elements (`a[i] + b[i]`).",
        )
    if isinstance(exc, AttributeError) and "'device array' object has no attribute" in text:
        return Failed(
            f"the kernel raised {first}{at}",
            cause="inside a kernel an array offers indexing and .shape, .size, .ndim and .dtype only: NumPy "
            "methods (.sum(), .copy(), ...) do not exist there. Work element by element.",
        )
    if isinstance(exc, OverflowError) and _NARROW.search(text):
        kind = _NARROW.search(text).group(1)
        return Failed(
            f"the kernel raised {first}{at}",
            cause=f"a value past what {kind} holds ({_NARROW_RANGE.get(kind, 'a narrow range')}): an index or "
            f"count in {kind} cannot reach it (on a GPU it wraps around silently). Keep indices in the "
            "default int (64 bits) or int32.",
        )
    if (isinstance(exc, TypeError) and _NOT_SUBSCRIPTABLE.search(text)) or "invalid index to scalar variable" in text:
        return Failed(
            f"the kernel indexed a number as if it were an array{at}: {first}",
            cause="the kernel's parameters are in a different order from the exercise's signature, "
            "or a scalar parameter is used as an array.",
        )
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return Failed(
            f"the kernel was called with arguments it does not accept: {first}",
            cause="the kernel's parameters must match the exercise's signature (their number and order).",
        )
    if where is None and isinstance(exc, LabkitError):  # labkit refused the launch itself: its grid, block or options
        said = str(exc.args[0]) if exc.args else str(exc)  # the message; its fix becomes the likely cause
        return Failed(
            f"the launch was refused on the host, before any thread ran: {plain_words(said)}",
            cause=getattr(exc, "fix", None) or "check the grid and block of the launch against CUDA's limits.",
        )
    if where is None and not _raised_in_kernel(exc):
        return Failed(
            f"your code raised {first} on the host (outside any kernel).",
            cause="look at the line of your host code the error names (a misspelt name, a wrong argument).",
        )
    return Failed(f"the kernel raised {first}{at}")


def _raised_in_kernel(exc: BaseException) -> bool:
    """True when the traceback of ``exc`` passes through a simulated kernel launch (its thread run)."""
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module.startswith(
            ("labkit.sim", "numba.cuda.simulator.kernel", "numba.cuda.dispatcher", "numba.cuda.compiler", "numba.core")
        ):
            return True
        tb = tb.tb_next
    return False


_launched: dict[Any, tuple[Any, str]] = {}


def _numba_type(arg: Any) -> str | None:
    """The Numba type name of a kernel argument (``float32[:, :]``, ``int64``), or None if unsure."""
    if isinstance(arg, bool):
        return "boolean"
    if isinstance(arg, int):
        return "int64"
    if isinstance(arg, float):
        return "float64"
    dtype, ndim = getattr(arg, "dtype", None), getattr(arg, "ndim", None)
    if dtype is None:
        return None
    name = np.dtype(dtype).name
    if name == "bool":
        name = "boolean"
    return name if not ndim else f"{name}[{', '.join([':'] * int(ndim))}]"


def _remember_launch(kernel: Any, args: tuple[Any, ...]) -> None:
    py = getattr(kernel, "py_func", None)
    types_ = [_numba_type(a) for a in args]
    if py is not None and None not in types_:
        _launched[py.__code__] = (kernel, f"void({', '.join(types_)})")  # type: ignore[arg-type]


def take_launched() -> list[tuple[Any, str]]:
    """Kernels launched since the last call, with the signature they were launched with (for the GPU build).
    Also forgets the block sizes earlier cases passed with (a check starts afresh)."""
    out = list(_launched.values())
    _launched.clear()
    _passed_blocks.clear()
    _graded[0] = 0
    return out


_passed_blocks: list[tuple[int, ...]] = []  # block shapes of the cases the kernel passed in the running check
_graded = [0]  # launches graded in the running check (the first one also watches for whole-array work in one thread)


def _dims(block: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in (block if isinstance(block, (tuple, list)) else (block,)))


def block_size_note(block: Any) -> str | None:
    """Evidence that the kernel assumes a power-of-two block: it passed earlier cases of this check with blocks whose
    sizes are all powers of two, and fails with this ``block``, which has a size that is not."""
    dims = _dims(block)
    pow2 = lambda v: v > 0 and v & (v - 1) == 0  # noqa: E731
    if all(pow2(d) for d in dims):
        return None
    earlier = [b for b in _passed_blocks if all(pow2(d) for d in b)]
    if not earlier:
        return None
    shown = ", ".join(sorted({fmt_shape(b if len(b) > 1 else b[0]) for b in earlier}))
    return (
        f"it passed with blocks of {shown} threads and fails with {fmt_shape(dims if len(dims) > 1 else dims[0])}, "
        "which is not a power of two: something in the kernel assumes one, such as a shift or a mask in place of a "
        "multiply or divide by cuda.blockDim, or a constant block size."
    )


def require_kernel(kernel: Any) -> None:
    """Raise :class:`Failed` unless ``kernel`` is a ``@cuda.jit`` kernel (not its result, a device function, a plain function)."""
    if kernel is None:
        raise Failed(
            "got None instead of a kernel: pass the kernel itself (`saxpy`), not the result of launching it "
            "(`saxpy[blocks, threads](...)` returns None)."
        )
    if getattr(kernel, "_device", False) or (getattr(kernel, "targetoptions", {}) or {}).get("device"):
        raise Failed(
            f"{getattr(kernel, '__name__', 'this')} is a device function (`@cuda.jit(device=True)`), which "
            "cannot be launched: the exercise wants a kernel.",
            cause="decorate it with plain @cuda.jit.",
        )
    if not hasattr(kernel, "__getitem__") or not callable(kernel) or not hasattr(kernel, "py_func"):
        raise Failed(f"expected a @cuda.jit kernel, got {type(kernel).__name__}.", cause="decorate the function with @cuda.jit.")


def launch(kernel: Any, griddim: Any, blockdim: Any, *args: Any, time_limit_s: float | None = None) -> None:
    """Launch ``kernel[griddim, blockdim](*args)`` and wait; any error becomes a :class:`Failed` message.

    In ``sim`` mode learner code still running after ``time_limit_s`` (default :data:`CASE_TIME_LIMIT_S`) is stopped.
    """
    cuda = cuda_module()
    require_kernel(kernel)
    _remember_launch(kernel, args)
    try:
        if current_mode() == "sim":
            from .. import sim

            sim.launch(kernel, griddim, blockdim, *args, time_limit_s=time_limit_s or CASE_TIME_LIMIT_S)
        else:
            kernel[griddim, blockdim](*args)
        cuda.synchronize()
    except Failed:
        raise
    except Exception as exc:  # noqa: BLE001 - every learner error is reported, none escapes
        raise explain_exception(exc, kernel) from None


SWAPPED_AXES = (
    "rows and columns are swapped: x = cuda.grid(2)[0] runs along a row, so it is the column (x is the column, y is the row)."
)


def launch_strict(kernel: Any, griddim: Any, blockdim: Any, *args: Any, **options: Any) -> memory.LaunchReport | None:
    """:func:`labkit.sim.launch_strict` in ``sim`` mode (a plain :func:`launch` on a GPU, returning None), with every
    error of the kernel turned into a :class:`Failed` message."""
    require_kernel(kernel)
    _remember_launch(kernel, args)
    if current_mode() != "sim":
        launch(kernel, griddim, blockdim, *args)
        return None
    from .. import sim

    try:
        return sim.launch_strict(kernel, griddim, blockdim, *args, **options)
    except Exception as exc:  # noqa: BLE001 - every learner error is reported, none escapes
        raise explain_exception(exc, kernel) from None


def compare(
    got: np.ndarray,
    expected: np.ndarray,
    *,
    label: str,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    unwritten_means_unsolved: bool = False,
    written: np.ndarray | None = None,
    unwritten_cause: str | None = None,
    swapped_cause: str | None = None,
    swapped: bool = False,
) -> None:
    """Raise :class:`Failed` (or :class:`Unsolved`) at the first element where ``got`` differs from ``expected``.

    ``written`` (from a strict launch) tells elements never written from elements written with a poisoned value
    (one read from memory no thread had written yet); ``unwritten_cause`` replaces the default likely cause of
    unwritten elements; ``swapped_cause`` is given instead when the values written look transposed (or when
    ``swapped``: the caller saw the writes cover the launch's extents with rows and columns exchanged).
    """
    if got.shape != expected.shape:
        raise Failed(f"{label}: result has shape {got.shape}, expected {expected.shape}.")
    poison = _is_poison(got) & ~_is_poison(expected)
    if unwritten_means_unsolved and _is_poison(got).all() and (written is None or not written.any()):
        raise Unsolved("the kernel ran but wrote nothing to its output; write the kernel body.")
    if written is not None and (poison & written).any():
        idx = tuple(int(i) for i in np.argwhere(poison & written)[0])
        raise _at(
            idx,
            Failed(
                f"{label}: element {_fmt(idx)} was written with a value that no thread had stored (expected {_v(expected[idx])}).",
                cause="a read of memory before any thread wrote it: a missing cuda.syncthreads() after filling shared memory, "
                "or an index outside the part of a tile (or halo) that was loaded.",
            ),
        )
    transposed = swapped or _looks_transposed(got, expected, rtol, atol)
    if poison.any():
        idx = tuple(int(i) for i in np.argwhere(poison)[0])
        count = int(poison.sum())
        cause = (swapped_cause or SWAPPED_AXES) if transposed else (unwritten_cause or UNWRITTEN_CAUSE)
        raise _at(
            idx,
            Failed(
                f"{label}: {count} of {got.size} elements were never written; the first is at index {_fmt(idx)}.", cause=cause
            ),
        )
    bad = _mismatch(got, expected, rtol, atol)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise _at(
            idx,
            Failed(
                f"{label}: {int(bad.sum())} of {got.size} elements are wrong; first at index {_fmt(idx)}: "
                f"expected {_v(expected[idx])}, got {_v(got[idx])}.",
                cause=(swapped_cause or SWAPPED_AXES) if transposed else _guess_cause(got, expected, rtol, atol),
            ),
        )


def _mismatch(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    if got.dtype.kind == "f" or expected.dtype.kind == "f":
        return ~np.isclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    return got != expected


def _looks_transposed(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """True when most written elements of a 2-D result hold the value of the mirrored element: ``got[r, c] ==
    expected[c, r]`` where that exists and differs from ``expected[r, c]``."""
    if got.ndim != 2 or min(got.shape) < 2:
        return False
    rows, cols = got.shape
    n = min(rows, cols)
    g, e = got[:n, :n], expected[:n, :n]
    seen = ~_is_poison(g)
    off = ~np.eye(n, dtype=bool) & seen & _mismatch(e, e.T, rtol, atol)  # elements where a swap makes a difference
    if off.sum() < 2:
        return False
    return bool((~_mismatch(g, e.T, rtol, atol) & off).sum() >= 0.8 * off.sum())


def _extent(dim: Any, axis: int) -> int:
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    return int(dims[axis]) if axis < len(dims) else 1


def swapped_coverage(got: np.ndarray, grid: Any, block: Any) -> bool:
    """True when a 2-D (rows, cols) result was written exactly where a kernel with x taken as the row would write:
    rows below the grid's x extent and columns below its y extent, and that is not the whole array."""
    if got.ndim != 2:
        return False
    rows, cols = got.shape
    x_extent = _extent(grid, 0) * _extent(block, 0)
    y_extent = _extent(grid, 1) * _extent(block, 1)
    region = np.zeros(got.shape, dtype=bool)
    region[: min(rows, x_extent), : min(cols, y_extent)] = True
    return not region.all() and bool(np.array_equal(~_is_poison(got), region))


def _guess_cause(got: np.ndarray, expected: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> str:
    """The likely cause read from the pattern of wrong values (an off-by-one shift), or a general pointer."""
    flat_got, flat_exp = got.ravel(), expected.ravel()
    if flat_got.size >= 3:
        for shift in (1, -1):
            a = flat_got[max(shift, 0) : flat_got.size + min(shift, 0)]
            b = flat_exp[max(-shift, 0) : flat_exp.size + min(-shift, 0)]
            if not _mismatch(a, b, rtol, atol).any() and _mismatch(flat_got, flat_exp, rtol, atol).sum() > 1:
                return "an off-by-one in the index: every element comes from its neighbour."
    return GENERIC_CAUSE


GENERIC_CAUSE = "compare your formula with the task statement for this element."
UNWRITTEN_CAUSE = "some threads do no work: check the index arithmetic, the grid covers the whole array, and the loop bounds."


@dataclass
class Launch:
    """One graded launch of a learner's kernel: configuration, inputs, the output it must produce, and how to judge it.

    ``inputs`` are host arrays (copied to the device) or scalars (passed as they are); the output, poisoned and
    guarded (or filled with ``out_init``), goes at ``out_position`` among the arguments (default last).
    ``first``: an output left untouched means "not solved yet". ``reverse`` starts each block's threads in
    reverse order; otherwise the first case runs them forward and the others in a shuffled order (``schedule``
    and ``seed`` choose one; a failure names the seed, to replay it). ``record`` keeps every access
    (coalescing, bank conflicts). Every failure names ``label``;
    ``unwritten_cause`` / ``swapped_cause`` / ``extra_cause`` refine the likely cause; ``explain(got)`` is the check's
    own reading of a wrong result (the slip whose result it equals), used before the general guesses.

    Inputs are part of the answer: after the launch every array in ``inputs`` is copied back and compared with the
    host array it came from; a change fails the case naming the argument ("your kernel wrote into its input `a`"),
    unless ``in_place`` names it (an exercise whose statement says it works in place). Compute ``expected`` from
    the check's host arrays: the kernel only ever sees device copies of them.
    """

    grid: Any
    block: Any
    inputs: Sequence[Any]
    expected: np.ndarray
    label: str
    out_dtype: Any = np.float32
    out_shape: int | tuple[int, ...] | None = None  # default: expected.shape
    names: Sequence[str] = ()
    out_init: Any = None
    out_position: int = -1
    rtol: float = 1e-5
    atol: float = 1e-6
    first: bool = False
    reverse: bool = False
    record: bool | Sequence[str] = False  # keep every access, or those of the arrays named
    unwritten_cause: str | None = None
    swapped_cause: str | None = None
    extra_cause: str | None = None
    in_place: Sequence[str] = ()  # inputs the statement lets the kernel change (all others are compared after the launch)
    explain: Callable[[np.ndarray], str | None] | None = None  # the check's own likely cause for a wrong result, or None
    time_limit_s: float | None = None
    schedule: str | None = None  # "forward", "reverse" or "shuffle" (default: from first and reverse)
    seed: int | None = None  # of a shuffled schedule (default: drawn afresh)
    # a large grid in sim mode: run only these blocks (x, y, z) and judge only the output elements ``owned`` (a bool
    # mask) that they compute; every other element must stay as it started (poison, or ``out_init``). For grids whose
    # indices pass 65,535 (a 16-bit index wraps) where the whole grid would cost the simulator too much. A GPU runs
    # the whole grid and is judged on all of it.
    blocks: Sequence[tuple[int, int, int]] | None = None
    owned: np.ndarray | None = None

    def thread_order(self) -> tuple[str, int | None]:
        """(schedule, seed) of the strict launch: see the class docstring."""
        schedule = self.schedule or ("reverse" if self.reverse else "forward" if self.first else "shuffle")
        seed = (self.seed if self.seed is not None else int(_rng.integers(1 << 31))) if schedule == "shuffle" else None
        return schedule, seed


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
    runs, largest = 0, 0
    for block in blocks:
        for n in sizes_for(block):
            largest = max(largest, n)
            host_inputs = list(make_inputs(n))
            extras = tuple(extra_args(n))
            grid = grid_for(n, block) if grid_for else (n + block - 1) // block
            grade(
                kernel,
                Launch(
                    grid,
                    block,
                    [*host_inputs, *extras],
                    reference(*host_inputs, *extras),
                    f"n={n}, {grid} block(s) of {block} threads",
                    out_dtype=out_dtype,
                    out_shape=n,
                    rtol=rtol,
                    atol=atol,
                    first=runs == 0,
                    reverse=runs % 2 == 1,
                ),
            )
            runs += 1
    return (
        f"correct on {runs} runs (sizes from 1 to {largest:,}, block sizes {', '.join(map(str, blocks))}), no "
        "out-of-bounds writes."
    )


# ============================================================================= helpers the lab checks share
def kernel_reference(name: str) -> Callable[[], Any]:
    """The ``reference=`` of an exercise whose reference is labkit's kernel ``name`` (:func:`labkit.kernels.get`),
    fetched only when asked for (importing a check does not build kernels)."""

    def get() -> Any:
        from .. import kernels

        return kernels.get(name)

    return get


def grid_2d(shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
    """Blocks to cover a (rows, cols) array with (x, y) = (columns, rows) blocks: x runs along a row."""
    rows, cols = shape
    return (-(-cols // block[0]), -(-rows // block[1]))


def device(a: np.ndarray) -> Any:
    """Copy a host array to the device (the simulator's fake device in ``sim`` mode)."""
    return cuda_module().to_device(a)


def fmt_shape(shape: int | tuple[int, ...]) -> str:
    return str(shape) if isinstance(shape, int) else "×".join(map(str, shape))


def run_case(
    kernel: Any,
    grid: Any,
    block: Any,
    inputs: Sequence[Any],
    *,
    out_shape: int | tuple[int, ...],
    out_dtype: Any,
    expected: np.ndarray,
    label: str,
    **options: Any,
) -> memory.LaunchReport | None:
    """:func:`grade` with the launch given as arguments (see :class:`Launch` for ``options``)."""
    return grade(kernel, Launch(grid, block, inputs, expected, label, out_dtype=out_dtype, out_shape=out_shape, **options))


def grade(kernel: Any, case: Launch) -> memory.LaunchReport | None:
    """One graded launch: inputs to the device, a poisoned and guarded output, a strict launch (``sim``) or
    :data:`GPU_REPEATS` plain ones (GPU, where a race has more chances to show), the guard check, and
    :func:`compare` against ``case.expected``, with a likely cause read from what the kernel did.
    Returns the strict launch's report in ``sim`` mode."""
    require_kernel(kernel)
    sim = current_mode() == "sim"
    report = None
    schedule, seed = case.thread_order()
    label = case.label if schedule == "forward" or not sim else f"{case.label} (threads in {_order_words(schedule, seed)})"
    for _ in range(1 if sim else GPU_REPEATS):
        args: list[Any] = [device(a) if isinstance(a, np.ndarray) else a for a in case.inputs]
        out = Guarded(case.out_shape if case.out_shape is not None else case.expected.shape, case.out_dtype, fill=case.out_init)
        pos = len(args) if case.out_position == -1 else case.out_position
        args.insert(pos, out.device)
        names = list(case.names) or [f"argument {k + 1}" for k in range(len(args))]
        guard = _input_guard(case, args, names, pos)
        _remember_launch(kernel, tuple(args))
        try:
            if sim:
                from .. import sim as simulator

                watch = _graded[0] == 0
                record = _with_inputs_recorded(case, names, pos) if watch else case.record
                report = simulator.launch_strict(
                    kernel,
                    case.grid,
                    case.block,
                    *args,
                    schedule=schedule,
                    seed=seed,
                    record=record,
                    names=names,
                    outputs=(names[pos],),
                    time_limit_s=case.time_limit_s or CASE_TIME_LIMIT_S,
                    allow_races=True,
                    blocks=case.blocks,
                )
            else:
                launch(kernel, case.grid, case.block, *args)
            got = out.fetch()
        except Failed as exc:
            raise Failed(
                f"{label}: {exc}",
                cause=_more(exc.cause, case.extra_cause),
                show=show_hint_for(kernel, case, exc, f"{label}: {exc}"),
            ) from None
        except Exception as exc:  # noqa: BLE001 - every learner error is reported, none escapes
            failed = explain_exception(exc, kernel)
            raise Failed(
                f"{label}: {failed}",
                cause=_more(failed.cause, case.extra_cause),
                show=show_hint_for(kernel, case, exc, f"{label}: {failed}"),
            ) from None
        _graded[0] += 1
        whole = _one_thread_did_it_all(report, case, names, pos) if report is not None and _graded[0] == 1 else None
        if whole is not None:
            raise Failed(f"{label}: {whole}", cause=ONE_THREAD_CAUSE)
        wrote_input = guard.problem()
        if wrote_input is not None:  # before any race or wrong value: those often follow from it
            raise Failed(
                f"{label}: {wrote_input}",
                cause=wrote_input.cause,
                show=show_hint_for(kernel, case, None, f"{label}: {wrote_input}"),
            )
        note = block_size_note(case.block)
        if report is not None and report.race is not None:
            race = report.race
            overlap = (race.first, race.second) == ("write", "write")  # two threads mapped to one element
            cause = race.cause()
            if overlap and race.space == "shared":
                from .causes import halo_guard_cause

                cause = halo_guard_cause(kernel) or cause  # a halo store under `t <= R`: read from the code
            message = f"{label}: {race.message()}"
            if race.space == "shared" and race.scope != "grid" and not race.lost_update and "read" in (race.first, race.second):
                from .causes import barrier_cause, tree_guard_cause

                name = race.array.split("`")[1] if race.array.count("`") >= 2 else race.array
                cause = barrier_cause(kernel, name) or tree_guard_cause(kernel) or cause  # read from the code
            written = report.written.get(race.array)
            if (
                race.scope == "grid"
                and (race.first, race.second) == ("write", "write")
                and tuple(race.first_thread) == tuple(race.second_thread)
                and len(race.index) == 1
                and int(race.index[0]) == int(race.first_thread[0])
                and written is not None
                and int(written.sum()) > 1
            ):
                cause = (
                    f"check the index formula: two blocks' thread {race.first_thread[0]} both wrote element "
                    f"{race.index[0]}, so each thread uses its index within its block (cuda.threadIdx.x) and every "
                    "block does the same elements. Use the thread's index in the whole grid, cuda.grid(1) "
                    "(= blockIdx.x * blockDim.x + threadIdx.x)."
                )
            cause = _axis_cause(kernel, case) or cause  # the code reads an axis the launch lacks, or the reverse
            unread = report.uninitialised
            if unread is not None and unread.space == "shared":
                message += (
                    f" And {unread.array} at index {_fmt(unread.index)} was read before any thread of the block had "
                    "written it (uninitialised shared memory)."
                )
            raise Failed(
                message,
                cause=_more(_more(note, cause) if overlap else cause, case.extra_cause),
                show=show_hint_for(kernel, case, race, message),
            )
        if sim and case.owned is not None:
            got = _outside_owned(got, case, label, names[pos])
        try:
            _judge(got, case, report, names[pos], kernel=kernel, args=args)
        except Failed as exc:
            message = str(exc) if label == case.label else str(exc).replace(case.label, label, 1)
            raise Failed(
                message,
                cause=_with_block_note(note, _code_cause(kernel, case) or exc.cause),
                show=show_hint_for(kernel, case, exc, message, output=names[pos], report=report),
            ) from None
    _passed_blocks.append(_dims(case.block))
    return report


WRAPPED_CAUSE = (
    "an index that wraps around (the usual reason here): a global index past 65,535 stored in a 16-bit integer "
    "(np.uint16, np.int16) comes back to 0, so the last blocks write over the first ones. Keep indices in the type "
    "cuda.grid() and cuda.blockIdx give (32- or 64-bit integers)."
)


def _outside_owned(got: np.ndarray, case: Launch, label: str, out_name: str) -> np.ndarray:
    """A launch of ``case.blocks`` only: every element outside ``case.owned`` must be as it started (else
    :class:`Failed`: those blocks wrote an element that belongs to another block); returns ``got`` with those
    elements set to the expected values, so that the owned ones alone are judged."""
    owned = np.asarray(case.owned, dtype=bool).reshape(got.shape)
    start = _is_poison(got) if case.out_init is None else got == case.out_init
    moved = ~owned & ~start
    if moved.any():
        idx = tuple(int(i) for i in np.argwhere(moved)[0])
        blocks = ", ".join(str(tuple(b)) for b in list(case.blocks or ())[:4])
        raise Failed(
            f"{label}: only blocks {blocks}{' ...' if len(case.blocks or ()) > 4 else ''} ran, and they wrote "
            f"`{out_name}` at index {_fmt(idx)} ({int(moved.sum()):,} element(s) that other blocks own, none of "
            "theirs when the index is right).",
            cause=WRAPPED_CAUSE,
        )
    wanted = np.asarray(case.expected).reshape(got.shape)
    if got.dtype.kind in "iub":  # an integer output: the nearest value (a float expectation truncated is off by one)
        wanted = np.rint(wanted)
    return np.where(owned, got, wanted).astype(got.dtype)


def _axis_cause(kernel: Any, case: Launch) -> str | None:
    """:func:`labkit.check.causes.axis_cause` for ``case``'s launch: the kernel reads ``threadIdx.y`` in a flat launch
    (x and y swapped), or never reads an axis the launch has."""
    from .causes import axis_cause

    return axis_cause(kernel, case.grid, case.block)


def _code_cause(kernel: Any, case: Launch) -> str | None:
    """The cause a wrong result's kernel shows in its code, where it shows one: an axis the launch lacks
    (:func:`_axis_cause`), a per-thread array where the threads share values, a grid-stride loop that steps by one
    block (:mod:`labkit.check.causes`)."""
    from .causes import block_stride_cause, local_array_cause

    return _axis_cause(kernel, case) or local_array_cause(kernel) or block_stride_cause(kernel)


#: An input of at least this many elements, read almost whole by one thread, is whole-array work in one thread.
WHOLE_ARRAY_MIN = 256
ONE_THREAD_CAUSE = (
    "one thread looped over the whole input (a loop over range(x.size), or sum(x)/np.sum(x)) while "
    "the grid's other threads waited: that is a serial CPU-style computation inside a kernel. Give every "
    "thread its share (one element, or a grid-stride loop from cuda.grid(1) in steps of "
    "cuda.gridsize(1)) and combine the threads' results as the exercise asks."
)


def _with_inputs_recorded(case: Launch, names: Sequence[str], pos: int) -> bool | Sequence[str]:
    """What the strict launch records: ``case.record``, plus the large array inputs (for a check's first graded
    launch: to see a thread that reads all of one, :func:`_one_thread_did_it_all`)."""
    if case.record is True:
        return case.record
    big = [
        names[k if k < pos else k + 1]
        for k, v in enumerate(case.inputs)
        if isinstance(v, np.ndarray) and v.size >= WHOLE_ARRAY_MIN and (k if k < pos else k + 1) < len(names)
    ]
    if not big:
        return case.record
    return tuple(dict.fromkeys([*(case.record or ()), *big]))


def _one_thread_did_it_all(report: Any, case: Launch, names: Sequence[str], pos: int) -> str | None:
    """A sentence when one thread read (nearly) every element of a large input by itself in a launch of many
    threads: the whole array's work done serially in one thread (``sum(x)``, a loop over ``range(x.size)``)."""
    threads = int(np.prod(_dims(case.grid))) * int(np.prod(_dims(case.block)))
    if threads < 32 or not report.log:
        return None
    sizes = {
        names[k if k < pos else k + 1]: v.size
        for k, v in enumerate(case.inputs)
        if isinstance(v, np.ndarray) and v.size >= WHOLE_ARRAY_MIN and (k if k < pos else k + 1) < len(names)
    }
    from ..sim.memory import READ

    seen: dict[tuple[str, tuple[int, ...], int], set[int]] = {}
    for array, t, flat, kind, _, _ in report.log:
        if kind == READ and array.name in sizes:
            seen.setdefault((array.name, tuple(t.blockIdx), t.thread_id), set()).add(flat)
    for (name, block, thread), flats in seen.items():
        if len(flats) >= 0.9 * sizes[name]:
            return (
                f"thread {thread} of block {block} read {len(flats):,} of the {sizes[name]:,} elements of `{name}` "
                f"by itself, in a launch of {threads:,} threads: one thread did the whole array's work."
            )
    return None


def _with_block_note(note: str | None, cause: str | None) -> str | None:
    """``cause`` with the :func:`block_size_note` ``note`` added, only where the cause says nothing more specific (the
    evidence of a block size is indirect): the note replaces the general pointer, or comes before the unwritten one."""
    if note is None or not (cause is None or cause.startswith((GENERIC_CAUSE, UNWRITTEN_CAUSE))):
        return cause
    if cause and cause.startswith(GENERIC_CAUSE):
        return note + cause[len(GENERIC_CAUSE) :]
    return _more(note, cause)


def _input_guard(case: Launch, args: Sequence[Any], names: Sequence[str], pos: int) -> Any:
    """An :class:`~labkit.check.inputs.InputGuard` over the launch's array inputs (not ``case.in_place`` ones): the
    device copies, compared after the launch with the host arrays they came from (``case.inputs``)."""
    from .inputs import InputGuard

    guard = InputGuard({}, who="your kernel")
    for k, value in enumerate(case.inputs):
        if not isinstance(value, np.ndarray):
            continue
        at = k if k < pos else k + 1
        name = names[at] if at < len(names) else f"argument {at + 1}"
        if name in case.in_place:
            continue
        guard.watch(name, args[at], value)  # the check's host array: never given to the kernel, so as it was
    return guard


def _order_words(schedule: str, seed: int | None) -> str:
    """``schedule 'shuffle', seed 12``: how the threads ran, enough to replay it with labkit.sim.launch_strict."""
    from ..sim.engine import describe_schedule

    return describe_schedule(schedule, seed)


def _wrote_elsewhere(report: memory.LaunchReport | None, out_name: str) -> bool:
    """True when a strict launch shows work other than into the output: writes into another array, shared memory,
    barriers or atomics (then an untouched output is a wrong answer, not a skeleton)."""
    if report is None:
        return False
    others = any(mask.any() for name, mask in report.written.items() if name != out_name)
    return bool(others or report.shared or report.barriers or sum(report.atomics.values()))


NO_STORE_REACHED = (
    "the stores are never reached: a loop that runs zero times (a range whose start is already "
    "past its end, a grid-stride loop that starts at the wrong place or compares with the wrong size) "
    "or a condition no thread meets (a bounds check that is always false). labkit.show(...) draws what "
    "each thread did."
)


def _judge(
    got: np.ndarray,
    case: Launch,
    report: memory.LaunchReport | None,
    out_name: str,
    *,
    kernel: Any = None,
    args: Sequence[Any] = (),
) -> None:
    expected, rtol, atol = case.expected, case.rtol, case.atol
    written = report.written.get(out_name) if report is not None else None
    first = case.first and not _wrote_elsewhere(report, out_name)
    if case.first and not first and _is_poison(got).all() and case.out_init is None and (written is None or not written.any()):
        raise Failed(
            f"{case.label}: the kernel ran and did work, but wrote nothing into its output `{out_name}`.",
            cause=f"store each result into `{out_name}` (the exercise's output argument), not into another "
            "array or only into shared memory.",
        )
    if report is not None and report.float_into_int and not np.allclose(got.astype(np.float64), expected, rtol=rtol, atol=atol):
        raise Failed(
            f"{case.label}: {report.float_into_int}.",
            cause="a value of the wrong type stored into an integer array: round it (`int(v + 0.5)`) or "
            "compute in integers, so the store does not truncate.",
        )
    from .causes import stores_in_source

    body = kernel is not None and stores_in_source(kernel)
    untouched = _is_poison(got).all() if case.out_init is None else bool((got == case.out_init).all())
    if (
        first
        and body
        and untouched
        and not (case.out_init is not None and (expected == case.out_init).all())
        and (written is None or not written.any())
    ):
        raise Failed(
            f"{case.label}: your kernel has code that stores results, but no thread stored anything into "
            f"`{out_name}` in this launch.",
            cause=NO_STORE_REACHED,
        )
    if case.out_init is not None:
        written = None  # an initialised output (a counter) may legitimately stay at its initial value
        if first and (got == case.out_init).all() and not (expected == case.out_init).all():
            raise Unsolved("the kernel ran but its output is still all " + repr(case.out_init) + "; write the kernel body.")
    try:
        compare(
            got,
            expected,
            label=case.label,
            rtol=rtol,
            atol=atol,
            unwritten_means_unsolved=first,
            written=written,
            unwritten_cause=case.unwritten_cause,
            swapped_cause=case.swapped_cause,
            swapped=swapped_coverage(got, case.grid, case.block),
        )
    except Failed as exc:
        cause = exc.cause
        if report is not None and report.uninitialised is not None:
            cause = _uninitialised_cause(kernel, case, report, args)
        elif case.explain is not None and (told := case.explain(got)) is not None:
            cause = told
        elif (pattern := coverage_cause(got, case.grid, case.block)) is not None and (
            exc.cause in (None, GENERIC_CAUSE, UNWRITTEN_CAUSE) or exc.cause == case.unwritten_cause
        ):
            cause = pattern
        elif (wrap := counter_wrap_cause(got, expected)) is not None:
            cause = wrap
        raise _at(getattr(exc, "element", None), Failed(str(exc), cause=_more(cause, case.extra_cause))) from None


def _at(element: tuple[int, ...] | None, failed: Failed) -> Failed:
    """``failed`` with the output element it names (``failed.element``), for the picture of the failing case."""
    failed.element = element  # type: ignore[attr-defined]
    return failed


def coverage_cause(got: np.ndarray, grid: Any, block: Any) -> str | None:
    """What the elements a 1-D kernel wrote show: exactly blocks of another size (``blockIdx.x * 128 + t`` with
    blocks of 64: the index assumes a block size), or exactly a prefix that is not a whole number of the grid's
    threads (a fixed bound where the array's size belongs). None when the pattern is neither."""
    if got.ndim != 1 or not isinstance(block, (int, np.integer)) or not isinstance(grid, (int, np.integer)):
        return None
    done = ~_is_poison(got)
    if done.all() or not done.any():
        return None
    idx = np.arange(got.size)
    block, grid = int(block), int(grid)
    fitting = [
        assumed
        for assumed in (32, 64, 128, 256, 512, 1024)
        if assumed != block
        and (
            np.array_equal(done, (idx % assumed < block) & (idx < assumed * grid)) or np.array_equal(done, idx % assumed < block)
        )
    ]
    if fitting:
        sizes = " or ".join(map(str, fitting))
        which = "" if len(fitting) == 1 else " (this case cannot tell which)"
        return (
            f"the elements written are exactly those blocks of {sizes} threads would cover{which}, but this launch "
            f"has blocks of {block}: the index assumes a block size; use cuda.grid(1), or cuda.blockDim.x, in "
            "place of the constant."
        )
    m = int(done.sum())
    if done[:m].all() and m % (grid * block):
        return (
            f"exactly elements 0 to {m - 1} were written and none after: the kernel stops at {m}, short of the "
            f"{got.size} elements: a fixed bound (or another array's size) where out.size belongs."
        )
    return None


def _uninitialised_cause(kernel: Any, case: Launch, report: memory.LaunchReport, args: Sequence[Any]) -> str:
    """Why a thread read memory nobody had written, from evidence: for shared memory the launch is replayed with that
    array recorded, to see whether the element is written later by the same thread (an update in place: zero it
    first), by another (a missing barrier) or never (the load fills other elements)."""
    from .causes import uninitialised_cause

    read = report.uninitialised
    if read.space not in ("shared", "global") or kernel is None or current_mode() != "sim":
        return read.cause()
    try:
        from .. import sim as simulator

        fresh = [device(a) if isinstance(a, np.ndarray) else a for a in case.inputs]
        out = Guarded(case.out_shape if case.out_shape is not None else case.expected.shape, case.out_dtype, fill=case.out_init)
        pos = len(fresh) if case.out_position == -1 else case.out_position
        fresh.insert(pos, out.device)
        names = list(case.names) or [f"argument {k + 1}" for k in range(len(fresh))]
        again = simulator.launch_strict(
            kernel,
            case.grid,
            case.block,
            *fresh,
            schedule=report.schedule,
            seed=report.seed,
            record=(read.array,),
            names=names,
            outputs=(names[pos],),
            time_limit_s=case.time_limit_s or CASE_TIME_LIMIT_S,
            allow_races=True,
        )
    except Exception:  # noqa: BLE001 - the replay is only for a better cause
        return uninitialised_cause(read, None, -1)
    block = _pad3(read.block)
    flat = _flat_index(read.index, next((s for n, s, _ in again.shared if n == read.array), None))
    seq = [(a.thread, a.kind) for a in again.accesses if a.array == read.array and _pad3(a.block) == block and a.flat == flat]
    first = next((k for k, (_, kind) in enumerate(seq) if kind in ("read", "atomic")), None)
    if first is None:
        return uninitialised_cause(read, None, -1)
    later = seq[first:] if seq[first][1] == "atomic" else seq[first + 1 :]
    counters = any(a.kind == "atomic" for a in again.accesses if a.array == read.array and _pad3(a.block) == block)
    return uninitialised_cause(read, later, _thread_flat(read.thread, case.block), counters=counters)


def _pad3(v: Any) -> tuple[int, ...]:
    t = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    return t + (0,) * (3 - len(t))


def _flat_index(index: Any, shape: Any) -> int:
    idx = tuple(index) if isinstance(index, (tuple, list)) else (int(index),)
    if shape is None or len(idx) == 1:
        return int(idx[0])
    return int(np.ravel_multi_index(idx, tuple(shape)))


def _thread_flat(thread: Any, block: Any) -> int:
    t = _pad3(thread)
    dims = tuple(int(d) for d in (block if isinstance(block, (tuple, list)) else (block,)))
    dims = dims + (1,) * (3 - len(dims))
    return int(t[0] + dims[0] * (t[1] + dims[1] * t[2]))


def _more(cause: str | None, extra: str | None) -> str | None:
    """``cause`` and the case's ``extra`` remark, each thing said once: a remark that repeats what the cause says is
    left out (of one about a counter that wraps around, only the case's fact stays: "one bin counts more than 255")."""
    if extra and cause:
        kept = [
            part if not _says_again(cause, part) else f"{part.split(':', 1)[0]}.)" if "wraps around" in part else ""
            for part in re.split(r"(?<=\))\s+(?=\()", extra)
        ]
        extra = " ".join(p for p in kept if p)
    if not extra:
        return cause
    return f"{cause} {extra}" if cause else extra


def _says_again(cause: str, remark: str) -> bool:
    """True when ``remark`` repeats what ``cause`` already says (the same key phrase)."""
    return any(key in cause and key in remark for key in ("wraps around", "grid-stride loop", "blockDim.x // 2"))


def find_race(kernel: Any, griddim: Any, blockdim: Any, *args: Any, names: Sequence[str] | None = None) -> memory.Race | None:
    """Run ``kernel`` once under the strict memory model and print the first data race it has (or that it has none).

    ``sim`` mode only: on a GPU, NVIDIA's ``compute-sanitizer --tool racecheck`` finds races in shared memory
    (not in global memory).
    """
    if current_mode() != "sim":
        print(
            "find_race runs kernels in the CUDA simulator (sim mode). On a GPU, run the program under "
            "`compute-sanitizer --tool racecheck python script.py`, which finds races in shared memory."
        )
        return None
    from .. import sim

    try:
        require_kernel(kernel)
        report = sim.launch_strict(
            kernel,
            griddim,
            blockdim,
            *[device(a) if isinstance(a, np.ndarray) else a for a in args],
            allow_races=True,
            names=names,
        )
    except Failed as exc:
        print(f"find_race: {exc}")
        return None
    except Exception as exc:  # noqa: BLE001 - the learner's kernel failed in another way: say how
        failed = explain_exception(exc)
        print(f"find_race: the kernel failed before a race could be looked for: {failed}")
        if failed.cause:
            print("  Likely cause: " + failed.cause)
        return None
    if report.race is None:
        print("no race found in this launch.")
    else:
        print("RACE: " + report.race.message())
        print("  Likely cause: " + report.race.cause())
    return report.race


_FEATURES = {
    "shared memory": lambda m: sum(m.shared_loads.values()) > 0 or sum(m.shared_stores.values()) > 0,
    "a barrier": lambda m: m.barriers > 0,
    "shared-memory atomics": lambda m: m.atomics_shared > 0,
    "global atomics": lambda m: m.atomics_global > 0,
    "warp shuffles": lambda m: m.shuffles > 0,
}


def require_ptx(kernel: Any, signature: str, features: Sequence[str], *, label: str, cause: str) -> None:
    """Raise :class:`Failed` unless the kernel's PTX (for sm_80) shows each of ``features``
    (keys of :data:`_FEATURES`): the structural part of a check where no strict simulator run can see it (GPU mode)."""
    from labkit.cuda import ptx

    from ..errors import CompileError

    try:
        mix = ptx.compile(kernel, signature, "sm_80").summary()
    except CompileError as exc:
        raise Failed(f"{label}: the kernel does not compile to PTX: {str(exc).splitlines()[0]}") from None
    missing = [f for f in features if not _FEATURES[f](mix)]
    if missing:
        raise Failed(f"{label}: the values are right, but its PTX shows no {' and no '.join(missing)}.", cause=cause)


# ----------------------------------------------------------------------------- the picture of a failed case
_failed_case: Any = None


def show_hint_for(
    kernel: Any, case: Launch, evidence: Any = None, finding: str = "", *, output: str | None = None, report: Any = None
) -> str | None:
    """Remember ``case`` as the failed case and return the line that draws it: what each thread of ``kernel`` read
    and wrote on these inputs (``labkit.show``, traced in the simulator). Appended to a failed kernel check's message."""
    global _failed_case
    import types

    try:
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in case.inputs]
        shape = case.out_shape if case.out_shape is not None else np.shape(case.expected)
        out = np.zeros(shape, case.out_dtype) if case.out_init is None else np.full(shape, case.out_init, case.out_dtype)
        args.insert(len(args) if case.out_position == -1 else case.out_position, out)
    except (TypeError, ValueError):  # an output labkit cannot rebuild: no picture offered rather than an error
        return None
    from .focus import focus_of

    schedule, seed = case.thread_order() if current_mode() == "sim" else ("forward", None)
    names = list(case.names) or None
    out_name = names[case.out_position] if names and case.out_position != -1 else (names[-1] if names else None)
    _failed_case = types.SimpleNamespace(
        grid=case.grid,
        block=case.block,
        args=args,
        names=names,
        label=case.label,
        schedule=schedule,
        seed=seed,
        outputs=(out_name,) if out_name and case.out_init is None else (),
        focus=focus_of(evidence, finding or case.label, output=output, report=report),
    )
    name = getattr(getattr(kernel, "py_func", kernel), "__name__", "kernel")
    return f"labkit.show({name}, labkit.check.harness.failed_case())"


def failed_case() -> Any:
    """The case :func:`show_hint_for` last remembered, for ``labkit.show``: ``grid``, ``block``, ``args``, ``names``,
    the order its threads ran in (``schedule``, ``seed``), the ``outputs`` that started poisoned, and the ``focus``
    (:class:`labkit.sim.trace.Focus`) the picture opens on."""
    if _failed_case is None:
        from ..errors import LabkitError

        raise LabkitError(
            "no kernel check has failed in this session yet.", fix="Run a check first; a failed kernel check names this call."
        )
    return _failed_case
