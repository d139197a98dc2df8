"""Checks for lab 02 (first kernels): SAXPY with a grid-stride loop, a 2-D greyscale kernel, choosing a
launch configuration, and keeping data on the device between launches."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Iterator

import numpy as np

from ..mode import current_mode
from .cases import big_2d_cases, blocks_words, called, compared, edge_blocks, grid_label, line_label, run_cases
from .core import Failed, Unsolved, exercise, exercise_data
from .draws import drawn
from .harness import Launch, cuda_module, grid_2d, kernel_reference, random_array

# ----------------------------------------------------------------------------- 02.saxpy
GRID_STRIDE = (
    "the grid had fewer threads than elements here: each thread must handle elements i, i + stride, "
    "i + 2·stride, ... with stride = cuda.gridsize(1) (a grid-stride loop), not just one element."
)


@exercise("02.saxpy", kind="kernel", reference=kernel_reference("saxpy"))
def saxpy(kernel: Any) -> str:
    """Grade ``saxpy(a, x, y, out)``: ``out[i] = a * x[i] + y[i]`` for any grid, including grids smaller than n."""
    from .draws import between, not_multiple

    # (n, threads per block, blocks), fresh each run: the first covers n with a partial last block; then one element,
    # two blocks of 96 threads striding (not a power of two: a shift for a division fails), more than 65,536 threads
    # on more elements still (an int16 or uint16 index wraps; the last block's threads stride once), more blocks than needed, a single block of 200 threads striding
    # once, the largest block (1024 threads) striding once more, and 100 to 140 rounds of one block of 32.
    first = not_multiple(129, 255, 64)
    few = between(50, 150)
    big = not_multiple(66_100, 68_000, 256)  # 257 to 264 blocks of 256: 65,792 threads or more, fewer than n
    cases = [
        (first, 64, -(-first // 64)),
        (1, 64, 1),
        (not_multiple(250, 450, 96), 96, 2),
        (big, 256, big // 256 - 1),
        (few, 64, -(-few // 64) + 2),
        (not_multiple(201, 390, 200), 200, 1),
        (not_multiple(1025, 1500, 1024), 1024, 1),
        (not_multiple(100 * 32 + 1, 140 * 32 - 1, 32), 32, 1),
    ]  # 100 to 140 rounds: no fixed count of rounds passes

    def launch(case: tuple[int, int, int]) -> Launch:
        n, block, grid = case
        a = np.float32(random_array(1, np.float32, -3, 3)[0])
        x, y = random_array(n), random_array(n)
        return Launch(
            grid,
            block,
            (a, x, y),
            a * x + y,
            line_label(n, grid, block),
            out_shape=n,
            unwritten_cause=GRID_STRIDE if grid * block < n else None,
            explain=lambda got, threads=grid * block: _rounds_cause(got, threads),
        )

    run_cases(kernel, cases, launch, reverse_at=3, names=("a", "x", "y", "out"), out_dtype=np.float32)
    return (
        f"correct on {len(cases)} launches of fresh sizes: grids that stride 10 times and more, grids with more threads "
        "than elements, more than 65,536 threads on up to 68,000 elements, blocks of 32 to 1024 threads; no out-of-bounds writes."
    )


def _rounds_cause(got: np.ndarray, threads: int) -> str | None:
    """A fixed number of grid-stride rounds: exactly the first r × ``threads`` elements (r >= 2) were written."""
    from ..sim.memory import is_poison

    done = ~is_poison(got)
    m = int(done.sum())
    if 2 * threads <= m < got.size and m % threads == 0 and done[:m].all():
        return (
            f"exactly the first {m} elements were written, {m // threads} rounds of the grid's {threads} threads: "
            "the grid-stride loop runs a fixed number of times; loop until the end of the array "
            "(`range(cuda.grid(1), out.size, cuda.gridsize(1))`)."
        )
    return None


# ----------------------------------------------------------------------------- 02.grayscale
SWAPPED = (
    "x = cuda.grid(2)[0] runs along a row, so it is the column: write `col, row = cuda.grid(2)` and index "
    "`img[row, col]`. Swapped indices, or a bounds check against the wrong axis, leave part of a non-square image unwritten."
)


def _grey(img: np.ndarray) -> np.ndarray:
    f = img.astype(np.float64)
    return 0.299 * f[..., 0] + 0.587 * f[..., 1] + 0.114 * f[..., 2]


def _grey_cause(got: np.ndarray, want: np.ndarray) -> str | None:
    """Truncation: every wrong pixel holds the luma rounded down."""
    wrong = np.abs(got.astype(np.float64) - want) > 0.5 + 1e-3
    if wrong.any() and np.array_equal(got[wrong].astype(np.float64), np.floor(want[wrong])):
        return (
            "every wrong pixel is the luma rounded down: `int(v)` (or storing the float into the uint8 output) "
            "truncates; round to the nearest with `int(v + 0.5)`."
        )
    return None


@exercise("02.grayscale", kind="kernel", reference=kernel_reference("grayscale"))
def grayscale(kernel: Any) -> str:
    """Grade ``grayscale(img, out)``: ``img`` uint8 (rows, cols, 3), ``out`` uint8 (rows, cols), rounded luma."""
    # fresh non-square shapes each run (labkit/data/exercises.yml), partial blocks both ways, up to 32 × 32 threads
    cases = [drawn(case) for case in exercise_data("02.grayscale")["cases"]] + big_2d_cases((16, 16))

    def launch(case: tuple[tuple[int, int], tuple[int, int]]) -> Launch:
        shape, block = case
        img = random_array((*shape, 3), np.uint8, 0, 231)  # grey < 231: never equal to the poison value 248
        grid = grid_2d(shape, block)
        blocks, owned = edge_blocks(grid, shape, (block[1], block[0]), lambda bx, by: (by, bx))
        label = grid_label("image {shape} (rows×cols)", shape, block) + blocks_words(blocks)
        explain = lambda got: _grey_cause(got, _grey(img))  # noqa: E731
        return Launch(grid, block, (img,), _grey(img), label, out_shape=shape, explain=explain, blocks=blocks, owned=owned)

    run_cases(kernel, cases, launch, names=("img", "out"), out_dtype=np.uint8, rtol=0, atol=0.5 + 1e-3, swapped_cause=SWAPPED)
    return (
        f"correct on {len(cases)} fresh images (non-square, 1×1, smaller than a block, more than 65,536 rows or columns) "
        "with 4 block shapes up to 32×32; rounding right; no out-of-bounds writes."
    )


# ----------------------------------------------------------------------------- 02.launch-config
def _grid_cause(got: tuple[int, int], shape: tuple[int, int], block: tuple[int, int], want: tuple[int, int]) -> str:
    """The slips whose formula gives exactly ``got`` for this case (all of them when several do), else a pointer."""
    rows, cols = shape
    bx, by = block
    slips = {
        "x and y are swapped: x (the first grid number) covers the columns, y the rows.": [
            want[::-1],
            grid_2d(shape[::-1], block),
        ],
        "too few blocks: floor division drops the partial last block; round up (ceiling division).": [(cols // bx, rows // by)],
        "more blocks than needed: `n // b + 1` adds a whole idle block when n is a multiple of b; use `(n + b - 1) // b`.": [
            (cols // bx + 1, rows // by + 1)
        ],
        (
            "a shift in place of the division: `>> k` divides by 2**k, right only when the block size is a power of two "
            f"({bx} x {by} here); use integer division `//`."
        ): _shifted(cols, bx, want[0], rows, by, want[1]),
        "the division is rounded to the nearest integer (`round`), not up: use `(n + b - 1) // b`.": [
            (round(cols / bx), round(rows / by))
        ],
        "the block's two numbers are swapped: bx = block[0] is the x extent (along the columns), by = block[1] the y.": [
            (-(-cols // by), -(-rows // bx))
        ],
    }
    fitting = [cause for cause, values in slips.items() if got in values and got != want]
    if len(fitting) == 1:
        return fitting[0]
    if fitting:
        return "slips that give these same numbers (this case cannot tell them apart): " + " Or: ".join(fitting)
    if got[0] * bx < cols or got[1] * by < rows:
        return "too few blocks to cover the array: each direction needs ceil(n / b) blocks, `(n + b - 1) // b`."
    return "more blocks than needed to cover the array: each direction needs ceil(n / b) blocks, `(n + b - 1) // b`."


def _shifted(cols: int, bx: int, gx: int, rows: int, by: int, gy: int) -> list[tuple[int, int]]:
    """Every grid a shift in place of the division gives, in one direction or both (``(n + b - 1) >> k`` or
    ``-(-n >> k)``, k rounded down or up from log2 b), the other direction right (``gx``, ``gy``)."""
    import math

    def ways(n: int, b: int, right: int) -> set[int]:
        ks = {int(math.log2(b)), math.ceil(math.log2(b))}
        return {right} | {(n + b - 1) >> k for k in ks} | {-(-n >> k) for k in ks}

    return [(x, y) for x in ways(cols, bx, gx) for y in ways(rows, by, gy) if (x, y) != (gx, gy)]


@exercise(
    "02.launch-config", kind="code", reference=lambda: lambda shape, block: (-(-shape[1] // block[0]), -(-shape[0] // block[1]))
)
def launch_config(grid_for: Callable[[tuple[int, int], tuple[int, int]], Any]) -> str:
    """Grade ``grid_for(shape, block) -> (gx, gy)``: the fewest blocks of ``block = (bx, by)`` threads covering
    a ``shape = (rows, cols)`` array, x along columns."""
    if not callable(grid_for):
        raise Failed(f"expected a function grid_for(shape, block), got {type(grid_for).__name__}.")
    from .draws import between, choice

    blocks = [(16, 16), (32, 8), (32, 32), (128, 1), (32, 4), (8, 8), (1024, 1), (64, 16), (24, 10), (96, 3), (48, 7)]
    # fixed cases first: the notebook's frame, a single element, and blocks that are not powers of two (a shift for
    # the division fails there), on an exact multiple and on shapes that leave a partial block in each direction
    cases = [
        ((1080, 1920), (16, 16)),
        ((1, 1), (32, 8)),
        ((30, 48), (24, 10)),
        ((31, 49), (24, 10)),
        ((700, 1000), (96, 3)),
        ((14, 96), (48, 7)),
        ((3000, 2), (1, 1000)),
    ]
    for _ in range(6):  # fresh shapes: arbitrary, exact multiples of the block, and smaller than the block in one axis
        bx, by = choice(blocks)  # type: ignore[misc]
        cases += [
            ((between(1, 3000), between(1, 3000)), (bx, by)),
            ((by * between(1, 40), bx * between(1, 8)), (bx, by)),
            ((between(1, by), between(bx + 1, 5000)), (bx, by)),
        ]
    for shape, block in cases:
        nothing = "grid_for returns nothing yet; return a tuple (gx, gy)."
        got = called(grid_for, shape, block, what=f"grid_for({shape}, {block})", nothing=nothing)
        try:
            gx, gy = got
            ok_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (gx, gy))
        except (TypeError, ValueError):
            raise Failed(f"grid_for({shape}, {block}) returned {got!r}; expected a pair (gx, gy).") from None
        if not ok_int:
            raise Failed(
                f"grid_for({shape}, {block}) returned {got!r}: block counts must be integers.",
                cause="`/` gives a float; use integer ceiling division `(n + b - 1) // b`.",
            )
        want = grid_2d(shape, block)
        if (gx, gy) == want:
            continue
        where = f"grid_for(shape={shape} (rows, cols), block={block}) returned {(int(gx), int(gy))}, expected {want}"
        raise Failed(where + ".", cause=_grid_cause((int(gx), int(gy)), shape, block, want))
    return f"right on {len(cases)} shapes, fresh ones included: exact multiples, 1×1 and non-square arrays."


# ----------------------------------------------------------------------------- 02.transfers
def _transfer_cause(
    got: np.ndarray,
    expected: np.ndarray,
    a: np.float32,
    x: np.ndarray,
    y: np.ndarray,
    steps: int,
    n: int,
    previous: np.ndarray | None = None,
) -> str | None:
    """What a wrong final y shows: a step too many or too few (a loop that always runs once), only part of the
    elements updated (a fixed launch without a grid-stride loop), or the result of another call (a cache)."""
    if got.shape != expected.shape:
        return None

    def after(k: int) -> np.ndarray:
        v = y.copy()
        for _ in range(k):
            v = (a * x + v).astype(np.float32)
        return v

    close = lambda u, v: bool(np.allclose(u, v, rtol=1e-5, atol=1e-5))  # noqa: E731
    for k, words in ((steps + 1, "one step too many"), (steps - 1, "one step too few"), (max(steps, 1), "")):
        if k >= 0 and k != steps and close(got, after(k)):
            if steps == 0:
                return (
                    "with steps = 0, y must come back unchanged: the loop ran once anyway (`range(steps)` runs 0 "
                    "times; a loop that launches before testing does not)."
                )
            return f"{words}: the loop must launch the kernel exactly `steps` times."
    if steps > 2:  # a loop that stops at a fixed count (a cap such as min(steps, 50))
        v = y.copy()
        for k in range(1, steps - 1):
            v = (a * x + v).astype(np.float32)
            if close(got, v):
                return f"y is what {k} steps give, not {steps}: the loop stops early; launch the kernel `steps` times."
    done = np.isclose(got, expected, rtol=1e-5, atol=1e-5)
    if steps > 0 and done[:1].all() and not done.all() and np.isclose(got[~done], y[~done], rtol=1e-5, atol=1e-5).all():
        first = int(np.argmin(done))
        return (
            f"elements from index {first} on were never updated: the launch covers only the first {first} of {n} "
            "elements. Choose the grid from n (or use a grid-stride loop), not a fixed number of blocks and threads."
        )
    if previous is not None and previous.shape == got.shape and close(got, previous):
        return (
            "this is the result of the earlier call with the same n and steps, on other data: a result kept "
            "between calls (a cache) is stale when x or y change. Compute it from this call's inputs."
        )
    return None


class _TransferCounter:
    def __init__(self) -> None:
        self.to_device = 0
        self.to_host = 0
        self.implicit = 0
        self.launches = 0


@contextlib.contextmanager
def _count_transfers() -> Iterator[_TransferCounter]:
    """Count host↔device copies: explicit ones (to_device, copy_to_host, copy_to_device from the host) and host
    arrays passed straight to a kernel (copied both ways implicitly)."""
    cuda = cuda_module()
    c = _TransferCounter()
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, name)
        saved.append((owner, name, original))
        setattr(owner, name, make(original))

    def to_device(orig: Any) -> Any:
        def f(ary: Any, *a: Any, **k: Any) -> Any:
            if isinstance(ary, np.ndarray) or np.isscalar(ary):
                c.to_device += 1
            return orig(ary, *a, **k)

        return f

    def copy_to_host(orig: Any) -> Any:
        def f(self: Any, *a: Any, **k: Any) -> Any:
            c.to_host += 1
            return orig(self, *a, **k)

        return f

    def copy_to_device(orig: Any) -> Any:
        def f(self: Any, ary: Any, *a: Any, **k: Any) -> Any:
            if isinstance(ary, np.ndarray):
                c.to_device += 1
            return orig(self, ary, *a, **k)

        return f

    if current_mode() == "sim":
        from numba.cuda.simulator import kernel as sim_kernel
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as ArrayClass

        class CountingInOut(sim_kernel.InOut):  # type: ignore[name-defined, misc]
            def to_device(self, retr: Any, stream: int = 0) -> Any:
                c.implicit += 1
                return super().to_device(retr, stream)

        saved.append((sim_kernel, "InOut", sim_kernel.InOut))
        sim_kernel.InOut = CountingInOut

        def sim_call(orig: Any) -> Any:
            def f(self: Any, *a: Any) -> Any:
                if not self._device and not sim_kernel._kernel_context:  # a launch, not a device-function call
                    c.launches += 1
                return orig(self, *a)

            return f

        patch(sim_kernel.FakeCUDAKernel, "__call__", sim_call)
    else:
        from numba.cuda import dispatcher as cuda_dispatcher
        from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase as ArrayClass  # type: ignore[assignment]

        def gpu_call(orig: Any) -> Any:
            def f(self: Any, *a: Any) -> Any:
                c.launches += 1
                return orig(self, *a)

            return f

        patch(cuda_dispatcher._LaunchConfiguration, "__call__", gpu_call)
    patch(cuda, "to_device", to_device)
    patch(ArrayClass, "copy_to_host", copy_to_host)
    patch(ArrayClass, "copy_to_device", copy_to_device)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield c
        c.implicit += sum("Host array used in CUDA kernel" in str(w.message) for w in caught)
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


@exercise("02.transfers", kind="code", reference=None)
def transfers(repeated_saxpy: Callable[..., Any]) -> str:
    """Grade ``repeated_saxpy(a, x, y, steps) -> numpy array``: y ← a·x + y, ``steps`` times, with 2 copies to
    the device and 1 back, whatever ``steps`` is."""
    if not callable(repeated_saxpy):
        raise Failed(f"expected a function repeated_saxpy(a, x, y, steps), got {type(repeated_saxpy).__name__}.")
    from .draws import between
    from .inputs import InputGuard

    # (n, steps): a few hundred elements first; the same n and steps again on new data (a result kept from an earlier
    # call, keyed by the step count, is wrong); 0 steps (y comes back as it was) and 1; thousands of elements (a
    # fixed launch such as 2 blocks of 128 threads without a grid-stride loop leaves elements out); and over 50 steps
    first_steps = between(2, 6)
    first_n = between(100, 400)
    plan = [
        (first_n, first_steps),
        (first_n, first_steps),
        (between(1, 99), 0),
        (between(1, 99), 1),
        (between(3000, 5000), between(2, 4)),
        (between(1, 64), between(51, 120)),  # many steps: a loop capped at some count (50, 64, 100) stops short
    ]
    answers: dict[tuple[int, int], np.ndarray] = {}
    for n, steps in plan:
        a = np.float32(random_array(1, np.float32, -1, 1)[0])
        x, y = random_array(n), random_array(n)
        x0, y0 = x.copy(), y.copy()
        expected = y0.copy()
        for _ in range(steps):
            expected = (a * x0 + expected).astype(np.float32)
        guard = InputGuard({"x": x}, who="repeated_saxpy")
        with _count_transfers() as count:
            try:
                got = repeated_saxpy(a, x, y, steps)
            except (NotImplementedError, Unsolved, Failed):
                raise
            except Exception as exc:  # noqa: BLE001
                from .harness import explain_exception

                raise explain_exception(exc) from None
        if got is None or got is Ellipsis:
            raise Unsolved("repeated_saxpy returns nothing yet; return the final y as a NumPy array.")
        if not isinstance(got, np.ndarray):
            raise Failed(
                f"repeated_saxpy returned a {type(got).__name__}, not a NumPy array.",
                cause="copy the result back with `.copy_to_host()` and return that.",
            )
        if got.dtype != np.float32:
            raise Failed(
                f"repeated_saxpy returned {got.dtype} values; the inputs are float32.",
                cause="a float64 array crept in (np.zeros without dtype, or a float64 `a`): keep float32 throughout.",
            )
        guard.verify()
        if not (np.array_equal(y, y0) or (got.shape == y.shape and np.allclose(y, expected))):
            raise Failed(
                f"repeated_saxpy wrote into its input `y` (n={n}, steps={steps}), and what it left there is not the final y.",
                cause="work on device copies of the inputs: the host y may only receive the final result, if anything.",
            )
        because = lambda: _transfer_cause(got, expected, a, x0, y0, steps, n, answers.get((n, steps)))  # noqa: E731
        compared(got, expected, because, label=f"n={n}, steps={steps}", rtol=1e-5, atol=1e-5)
        answers[(n, steps)] = got.copy()
        if count.implicit:
            raise Failed(
                f"n={n}, steps={steps}: {count.implicit} kernel launch(es) received a host (NumPy) array, "
                "which numba copies to the device and back around every launch.",
                cause="pass device arrays (from cuda.to_device) to the kernel, not NumPy arrays.",
            )
        if count.launches == 0 and steps > 0:
            raise Failed(
                f"n={n}, steps={steps}: the values are right, but no kernel was launched: the work ran on the host.",
                cause="copy x and y to the device once, launch your SAXPY kernel `steps` times on the device "
                "arrays, and copy y back once.",
            )
        if steps > 0 and count.launches != steps:
            raise Failed(
                f"n={n}, steps={steps}: the values are right, but {count.launches} kernel launch(es) ran for {steps} steps.",
                cause="launch your SAXPY kernel (k_saxpy) once per step, `steps` times, on the same device arrays: "
                "the exercise is the copies around a loop of launches.",
            )
        if count.to_device > 2 or count.to_host > 1:
            raise Failed(
                f"n={n}, steps={steps}: {count.to_device} copies to the device and {count.to_host} back; 2 and 1 are enough.",
                cause="copy before and after the loop, not inside it.",
            )
    return (
        f"correct on {len(plan)} cases from 0 to more than 50 steps, with 2 copies to the device and 1 back whatever "
        "the step count."
    )
