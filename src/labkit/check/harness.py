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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..mode import current_mode
from ..sim.limits import LEARNER_CODE_LIMIT_S, LIKELY_HANG
from ..sim.memory import fmt_index as _fmt
from ..sim.memory import is_poison as _is_poison
from ..sim.memory import poison_value
from .core import Failed, Unsolved

if TYPE_CHECKING:
    from ..sim import memory

CASE_TIME_LIMIT_S = LEARNER_CODE_LIMIT_S  # one graded launch of a lab check (run_case) in the simulator
GPU_REPEATS = 3  # on a GPU, run_case launches each case this many times (races show by chance there)
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


def cuda_module() -> Any:
    """``numba.cuda`` (the simulator in ``sim`` mode: labkit.setup() must have run first)."""
    current_mode()  # make sure the mode (and NUMBA_ENABLE_CUDASIM) is set before numba is imported
    from numba import cuda

    return cuda


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
_NOT_SUBSCRIPTABLE = re.compile(r"'(int|float|bool|numpy\.\w+)' object (is not subscriptable|does not support item assignment)")


def explain_exception(exc: BaseException) -> Failed:
    """A learner-facing :class:`Failed` for anything a kernel launch raised."""
    from ..sim.errors import KernelFault

    where = getattr(exc, "sim_thread", None)
    at = f" (thread {where[0]} of block {where[1]})" if where else ""
    if isinstance(exc, KernelFault):
        return Failed(f"{exc}{at}", cause=exc.cause)
    text = f"{type(exc).__name__}: {exc}"
    first = text.strip().splitlines()[0][:400]
    m = _SIM_INDEX_ERROR.search(text)
    if m:
        return Failed(
            f"a thread indexed element {m.group(1)} of an axis of size {m.group(3)}{at} ({first}).",
            cause="a missing or wrong bounds check (`if i < n:`), or a row/column index mix-up.",
        )
    name = type(exc).__name__
    if name in ("TypingError", "UnsupportedError", "NumbaError", "LoweringError") or "numba" in type(exc).__module__:
        return Failed(f"the kernel does not compile: {first}", cause="look at the line the compiler names.")
    if isinstance(exc, TimeoutError):
        return Failed(str(exc), cause=LIKELY_HANG)
    if (isinstance(exc, TypeError) and _NOT_SUBSCRIPTABLE.search(text)) or "invalid index to scalar variable" in text:
        return Failed(f"the kernel indexed a number as if it were an array{at}: {first}",
                      cause="the kernel's parameters are in a different order from the exercise's signature, "
                            "or a scalar parameter is used as an array.")
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return Failed(f"the kernel was called with arguments it does not accept: {first}",
                      cause="the kernel's parameters must match the exercise's signature (their number and order).")
    return Failed(f"the kernel raised {first}{at}")


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
    """Kernels launched since the last call, with the signature they were launched with (for the GPU build)."""
    out = list(_launched.values())
    _launched.clear()
    return out


def require_kernel(kernel: Any) -> None:
    """Raise :class:`Failed` unless ``kernel`` is a ``@cuda.jit`` kernel (not its result, a device function, a plain function)."""
    if kernel is None:
        raise Failed("got None instead of a kernel: pass the kernel itself (`saxpy`), not the result of launching it "
                     "(`saxpy[blocks, threads](...)` returns None).")
    if getattr(kernel, "_device", False) or (getattr(kernel, "targetoptions", {}) or {}).get("device"):
        raise Failed(f"{getattr(kernel, '__name__', 'this')} is a device function (`@cuda.jit(device=True)`), which "
                     "cannot be launched: the exercise wants a kernel.", cause="decorate it with plain @cuda.jit.")
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
        raise explain_exception(exc) from None


SWAPPED_AXES = "rows and columns are swapped: x = cuda.grid(2)[0] runs along a row, so it is the column (x is the column, y is the row)."


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
        raise explain_exception(exc) from None


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
        raise Failed(
            f"{label}: element {_fmt(idx)} was written with a value that no thread had stored (expected {_v(expected[idx])}).",
            cause="a read of memory before any thread wrote it: a missing cuda.syncthreads() after filling shared memory, "
                  "or an index outside the part of a tile (or halo) that was loaded.",
        )
    transposed = swapped or _looks_transposed(got, expected, rtol, atol)
    if poison.any():
        idx = tuple(int(i) for i in np.argwhere(poison)[0])
        count = int(poison.sum())
        cause = (swapped_cause or SWAPPED_AXES) if transposed else (
            unwritten_cause or "some threads do no work: check the index arithmetic, the grid covers the whole array, "
                               "and the loop bounds.")
        raise Failed(f"{label}: {count} of {got.size} elements were never written; the first is at index {_fmt(idx)}.",
                     cause=cause)
    bad = _mismatch(got, expected, rtol, atol)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise Failed(
            f"{label}: {int(bad.sum())} of {got.size} elements are wrong; first at index {_fmt(idx)}: "
            f"expected {_v(expected[idx])}, got {_v(got[idx])}.",
            cause=(swapped_cause or SWAPPED_AXES) if transposed else _guess_cause(got, expected, rtol, atol),
        )


def _mismatch(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    if got.dtype.kind == "f" or expected.dtype.kind == "f":
        return ~np.isclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    return got != expected


def _v(x: Any) -> str:
    """A value as a learner reads it: 0.25 rather than np.float32(0.25)."""
    x = x.item() if hasattr(x, "item") else x
    return f"{x:.7g}" if isinstance(x, float) else repr(x)


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
            a = flat_got[max(shift, 0): flat_got.size + min(shift, 0)]
            b = flat_exp[max(-shift, 0): flat_exp.size + min(-shift, 0)]
            if not _mismatch(a, b, rtol, atol).any() and _mismatch(flat_got, flat_exp, rtol, atol).sum() > 1:
                return "an off-by-one in the index: every element comes from its neighbour."
    return "compare your formula with the task statement for this element."


@dataclass
class Launch:
    """One graded launch of a learner's kernel: configuration, inputs, the output it must produce, and how to judge it.

    ``inputs`` are host arrays (copied to the device) or scalars (passed as they are); the output, poisoned and
    guarded (or filled with ``out_init``), goes at ``out_position`` among the arguments (default last).
    ``first``: an output left untouched means "not solved yet". ``reverse`` starts each block's threads in
    reverse order; otherwise the first case runs them forward and the others in a shuffled order (``schedule``
    and ``seed`` choose one; a failure names the seed, to replay it). ``record`` keeps every access
    (coalescing, bank conflicts). Every failure names ``label``;
    ``unwritten_cause`` / ``swapped_cause`` / ``extra_cause`` refine the likely cause.
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
    time_limit_s: float | None = None
    schedule: str | None = None  # "forward", "reverse" or "shuffle" (default: from first and reverse)
    seed: int | None = None  # of a shuffled schedule (default: drawn afresh)

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
    runs = 0
    for block in blocks:
        for n in sizes_for(block):
            host_inputs = list(make_inputs(n))
            extras = tuple(extra_args(n))
            grid = grid_for(n, block) if grid_for else (n + block - 1) // block
            grade(kernel, Launch(grid, block, [*host_inputs, *extras], reference(*host_inputs, *extras),
                                 f"n={n}, {grid} block(s) of {block} threads", out_dtype=out_dtype, out_shape=n,
                                 rtol=rtol, atol=atol, first=runs == 0, reverse=runs % 2 == 1))
            runs += 1
    return f"correct on {runs} runs (sizes from 1 up, block sizes {', '.join(map(str, blocks))}), no out-of-bounds writes."


# ============================================================================= helpers the lab checks share
def grid_2d(shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
    """Blocks to cover a (rows, cols) array with (x, y) = (columns, rows) blocks: x runs along a row."""
    rows, cols = shape
    return (-(-cols // block[0]), -(-rows // block[1]))


def device(a: np.ndarray) -> Any:
    """Copy a host array to the device (the simulator's fake device in ``sim`` mode)."""
    return cuda_module().to_device(a)


def fmt_shape(shape: int | tuple[int, ...]) -> str:
    return str(shape) if isinstance(shape, int) else "×".join(map(str, shape))


def run_case(kernel: Any, grid: Any, block: Any, inputs: Sequence[Any], *, out_shape: int | tuple[int, ...],
             out_dtype: Any, expected: np.ndarray, label: str, **options: Any) -> memory.LaunchReport | None:
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
        _remember_launch(kernel, tuple(args))
        try:
            if sim:
                from .. import sim as simulator

                report = simulator.launch_strict(kernel, case.grid, case.block, *args, schedule=schedule, seed=seed,
                                                 record=case.record, names=names, outputs=(names[pos],),
                                                 time_limit_s=case.time_limit_s or CASE_TIME_LIMIT_S)
            else:
                launch(kernel, case.grid, case.block, *args)
            got = out.fetch()
        except Failed as exc:
            raise Failed(f"{label}: {exc}", cause=_more(exc.cause, case.extra_cause),
                         show=show_hint_for(kernel, case)) from None
        except Exception as exc:  # noqa: BLE001 - every learner error is reported, none escapes
            failed = explain_exception(exc)
            raise Failed(f"{label}: {failed}", cause=_more(failed.cause, case.extra_cause),
                         show=show_hint_for(kernel, case)) from None
        try:
            _judge(got, case, report, names[pos])
        except Failed as exc:
            message = str(exc) if label == case.label else str(exc).replace(case.label, label, 1)
            raise Failed(message, cause=exc.cause, show=show_hint_for(kernel, case)) from None
    return report


def _order_words(schedule: str, seed: int | None) -> str:
    """``schedule 'shuffle', seed 12``: how the threads ran, enough to replay it with labkit.sim.launch_strict."""
    from ..sim.engine import describe_schedule

    return describe_schedule(schedule, seed)


def _judge(got: np.ndarray, case: Launch, report: memory.LaunchReport | None, out_name: str) -> None:
    expected, rtol, atol = case.expected, case.rtol, case.atol
    written = report.written.get(out_name) if report is not None else None
    if report is not None and report.float_into_int and not np.allclose(got.astype(np.float64), expected, rtol=rtol, atol=atol):
        raise Failed(f"{case.label}: {report.float_into_int}.",
                     cause="a value of the wrong type stored into an integer array: round it (`int(v + 0.5)`) or "
                           "compute in integers, so the store does not truncate.")
    if case.out_init is not None:
        written = None  # an initialised output (a counter) may legitimately stay at its initial value
        if case.first and (got == case.out_init).all() and not (expected == case.out_init).all():
            raise Unsolved("the kernel ran but its output is still all " + repr(case.out_init) + "; write the kernel body.")
    try:
        compare(got, expected, label=case.label, rtol=rtol, atol=atol, unwritten_means_unsolved=case.first,
                written=written, unwritten_cause=case.unwritten_cause, swapped_cause=case.swapped_cause,
                swapped=swapped_coverage(got, case.grid, case.block))
    except Failed as exc:
        cause = exc.cause
        if report is not None and report.uninitialised is not None:
            cause = report.uninitialised.cause()
        raise Failed(str(exc), cause=_more(cause, case.extra_cause)) from None


def _more(cause: str | None, extra: str | None) -> str | None:
    if not extra:
        return cause
    return f"{cause} {extra}" if cause else extra


def find_race(kernel: Any, griddim: Any, blockdim: Any, *args: Any, names: Sequence[str] | None = None) -> memory.Race | None:
    """Run ``kernel`` once under the strict memory model and print the first data race it has (or that it has none).

    ``sim`` mode only: on a GPU, NVIDIA's ``compute-sanitizer --tool racecheck`` finds races in shared memory
    (not in global memory).
    """
    if current_mode() != "sim":
        print("find_race runs kernels in the CUDA simulator (sim mode). On a GPU, run the program under "
              "`compute-sanitizer --tool racecheck python script.py`, which finds races in shared memory.")
        return None
    from .. import sim

    try:
        require_kernel(kernel)
        report = sim.launch_strict(kernel, griddim, blockdim, *[device(a) if isinstance(a, np.ndarray) else a for a in args],
                                   allow_races=True, names=names)
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
    from .. import ptx
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


def show_hint_for(kernel: Any, case: Launch) -> str | None:
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
    _failed_case = types.SimpleNamespace(grid=case.grid, block=case.block, args=args, names=list(case.names) or None,
                                         label=case.label)
    name = getattr(getattr(kernel, "py_func", kernel), "__name__", "kernel")
    return f"labkit.show({name}, labkit.check.harness.failed_case())"


def failed_case() -> Any:
    """The case :func:`show_hint_for` last remembered (``grid``, ``block``, ``args``, ``names``), for ``labkit.show``."""
    if _failed_case is None:
        from ..errors import LabkitError

        raise LabkitError("no kernel check has failed in this session yet.",
                          fix="Run a check first; a failed kernel check names this call.")
    return _failed_case
