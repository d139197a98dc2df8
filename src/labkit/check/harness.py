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
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..mode import current_mode
from .core import Failed, Unsolved

if TYPE_CHECKING:
    from . import memory_model

SIM_TIME_LIMIT_S = 60.0
CASE_TIME_LIMIT_S = 20.0  # one graded launch of a lab check (run_case) in the simulator
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
    """A trace function that stops simulator threads once a deadline has passed.

    It traces lines only in frames of the learner's file (the kernel's and its device functions'), so a loop
    of pure arithmetic is caught too, while the simulator's own code runs untraced.
    """

    def __init__(self, seconds: float, filename: str | None) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.filename = filename

    def _expired(self) -> None:
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"the kernel did not finish within {self.seconds:.0f} s in the simulator")

    def _line(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self._expired()
        return self._line

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_filename == self.filename:
            self._expired()
            return self._line
        return None


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
    """Kernels launched since the last call, with the signature they were launched with (for the PTX audit)."""
    out = list(_launched.values())
    _launched.clear()
    return out


def launch(kernel: Any, griddim: Any, blockdim: Any, *args: Any, time_limit_s: float | None = None) -> None:
    """Launch ``kernel[griddim, blockdim](*args)`` and wait; any error becomes a :class:`Failed` message.

    In ``sim`` mode a kernel still running after ``time_limit_s`` (default :data:`SIM_TIME_LIMIT_S`) is stopped.
    """
    cuda = cuda_module()
    if not hasattr(kernel, "__getitem__") or not callable(kernel):
        raise Failed(f"expected a @cuda.jit kernel, got {type(kernel).__name__}.", cause="decorate the function with @cuda.jit.")
    sim = current_mode() == "sim"
    _remember_launch(kernel, args)
    py = getattr(kernel, "py_func", None)
    filename = py.__code__.co_filename if py is not None else None
    tracer = _Deadline(time_limit_s or SIM_TIME_LIMIT_S, filename) if sim else None
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
    written: np.ndarray | None = None,
    unwritten_cause: str | None = None,
) -> None:
    """Raise :class:`Failed` (or :class:`Unsolved`) at the first element where ``got`` differs from ``expected``.

    ``written`` (from a strict launch) tells elements never written from elements written with a poisoned value
    (one read from memory no thread had written yet); ``unwritten_cause`` replaces the default likely cause.
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
    if poison.any():
        idx = tuple(int(i) for i in np.argwhere(poison)[0])
        count = int(poison.sum())
        raise Failed(
            f"{label}: {count} of {got.size} elements were never written; the first is at index {_fmt(idx)}.",
            cause=unwritten_cause or "some threads do no work: check the index arithmetic, the grid covers the whole array, and the loop bounds.",
        )
    if got.dtype.kind == "f" or expected.dtype.kind == "f":
        bad = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    else:
        bad = got != expected
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise Failed(
            f"{label}: {int(bad.sum())} of {got.size} elements are wrong; first at index {_fmt(idx)}: "
            f"expected {_v(expected[idx])}, got {_v(got[idx])}.",
            cause=_guess_cause(got, expected, idx),
        )


def _v(x: Any) -> str:
    """A value as a learner reads it: 0.25 rather than np.float32(0.25)."""
    x = x.item() if hasattr(x, "item") else x
    return f"{x:.7g}" if isinstance(x, float) else repr(x)


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
    names: Sequence[str] = (),
    out_init: Any = None,
    reverse: bool = False,
    record: bool = False,
    first: bool = False,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    unwritten_cause: str | None = None,
    out_position: int = -1,
    time_limit_s: float | None = None,
    extra_cause: str | None = None,
    _repeat: bool = True,
) -> memory_model.LaunchReport | None:
    """One graded launch: inputs to the device, a poisoned and guarded output (or one filled with ``out_init``),
    a strict launch (``sim``) or plain one (GPU), the guard check, and :func:`compare` against ``expected``.

    ``inputs`` are host arrays (copied) or scalars (passed as they are); the output goes at ``out_position``
    among the arguments (default last). ``first``: an output left untouched means "not solved yet".
    Every failure names ``label`` (size and launch configuration); ``extra_cause`` is added to its likely cause.
    """
    if _repeat and current_mode() == "gpu":  # no strict model on a device: repeat, so that a race has more chances to show
        for _ in range(GPU_REPEATS - 1):
            run_case(kernel, grid, block, inputs, out_shape=out_shape, out_dtype=out_dtype, expected=expected, label=label,
                     names=names, out_init=out_init, first=first, rtol=rtol, atol=atol, unwritten_cause=unwritten_cause,
                     out_position=out_position, extra_cause=extra_cause, _repeat=False)
    args: list[Any] = [device(a) if isinstance(a, np.ndarray) else a for a in inputs]
    out = Guarded(out_shape, out_dtype, fill=out_init)
    pos = len(args) if out_position == -1 else out_position
    args.insert(pos, out.device)
    arg_names = list(names) or [f"argument {k + 1}" for k in range(len(args))]
    try:
        from . import memory_model  # the strict model imports this module: import it here

        report = memory_model.launch_strict(kernel, grid, block, *args, reverse=reverse, record=record, names=arg_names,
                               time_limit_s=time_limit_s or CASE_TIME_LIMIT_S)
    except Failed as exc:
        raise Failed(f"{label}: {exc}", cause=_more(exc.cause, extra_cause)) from None
    got = out.fetch()
    written = report.written.get(arg_names[pos]) if report is not None else None
    if report is not None and report.float_into_int and not np.allclose(got.astype(np.float64), expected, rtol=rtol, atol=atol):
        raise Failed(f"{label}: {report.float_into_int}.",
                     cause="a value of the wrong type stored into an integer array: round it (`int(v + 0.5)`) or "
                           "compute in integers, so the store does not truncate.")
    if out_init is not None:
        written = None  # an initialised output (a counter) may legitimately stay at its initial value
        if first and (got == out_init).all() and not (expected == out_init).all():
            raise Unsolved("the kernel ran but its output is still all " + repr(out_init) + "; write the kernel body.")
    try:
        compare(got, expected, label=label, rtol=rtol, atol=atol, unwritten_means_unsolved=first, written=written,
                unwritten_cause=unwritten_cause)
    except Failed as exc:
        raise Failed(str(exc), cause=_more(exc.cause, extra_cause)) from None
    return report


def _more(cause: str | None, extra: str | None) -> str | None:
    if not extra:
        return cause
    return f"{cause} {extra}" if cause else extra


def find_race(kernel: Any, griddim: Any, blockdim: Any, *args: Any, names: Sequence[str] | None = None) -> memory_model.Race | None:
    """Run ``kernel`` once under the strict memory model and print the first data race it has (or that it has none).

    ``sim`` mode only: on a GPU, NVIDIA's ``compute-sanitizer --tool racecheck`` does this for shared memory.
    """
    if current_mode() != "sim":
        print("find_race runs kernels in the CUDA simulator (sim mode). On a GPU, run the program under "
              "`compute-sanitizer --tool racecheck python script.py` instead.")
        return None
    from . import memory_model  # the strict model imports this module: import it here

    report = memory_model.launch_strict(kernel, griddim, blockdim, *[device(a) if isinstance(a, np.ndarray) else a for a in args],
                           allow_races=True, names=names)
    assert report is not None
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
