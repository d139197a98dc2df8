"""Kernel launches in the simulator: Numba's launch path, with the course's engine underneath.

:func:`install` replaces ``FakeCUDAKernel.__call__`` of Numba's simulator, so that *every* launch in ``sim``
mode, a learner's direct ``kernel[blocks, threads](...)`` as much as a check's, runs on
:mod:`labkit.sim.engine`: greenlets instead of threads, a limit on CPU time, and Interrupt that stops it at
once. Arguments are prepared as Numba prepares them (host arrays copied in and back).

:func:`launch` runs one launch with a given time limit; :class:`time_limit` sets the limit of launches that
name none (the learner can raise it for a long experiment); :func:`options` hands a memory model and a
schedule to the next launch (:func:`labkit.sim.launch_strict` and :func:`labkit.sim.trace` use it).
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from typing import Any, Iterator

import numpy as np

from . import atomics, engine, fastreads, lockstep
from .arrays import kernel_array
from .errors import FASTMATH_NOT_SIMULATED, KernelTimeout, NotSimulated
from .integers import tag_bytes_for, tagged
from .limits import LEARNER_CODE_LIMIT_S

_pending: dict[str, Any] = {}  # options for the next launch
_default_limit_s: list[float] = [LEARNER_CODE_LIMIT_S]


class time_limit:  # noqa: N801 - used like a function: labkit.sim.time_limit(60)
    """Set the CPU-time limit (seconds) of every simulator launch that names none; ``time_limit()`` reads it.

    ``labkit.sim.time_limit(120)`` raises it for the rest of the session; ``with labkit.sim.time_limit(120):``
    only inside the block. Checks keep their own limit. The default is
    :data:`~labkit.sim.limits.LEARNER_CODE_LIMIT_S`.
    """

    def __init__(self, seconds: float | None = None) -> None:
        self.previous = _default_limit_s[0]
        if seconds is not None:
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds > 0:
                from ..errors import LabkitError

                raise LabkitError(f"a time limit is a positive number of seconds, got {seconds!r}.")
            _default_limit_s[0] = float(seconds)
        self.seconds = _default_limit_s[0]

    def __enter__(self) -> float:
        return self.seconds

    def __exit__(self, *exc: Any) -> None:
        _default_limit_s[0] = self.previous

    def __float__(self) -> float:
        return self.seconds

    def __repr__(self) -> str:
        return f"simulator launches stop after {self.seconds:g} s of CPU time"


def default_limit_s() -> float:
    """The limit of a launch that names none."""
    return _default_limit_s[0]


@contextlib.contextmanager
def options(**opts: Any) -> Iterator[None]:
    """Options (``hooks``, ``schedule``, ``seed``, ``blocks_to_run``, ``on_block_error``, ``time_limit_s``) for the
    launch made inside the ``with`` block."""
    saved = dict(_pending)
    _pending.clear()
    _pending.update(opts)
    try:
        yield
    finally:
        _pending.clear()
        _pending.update(saved)


def launch(kernel: Any, griddim: Any, blockdim: Any, *args: Any, time_limit_s: float | None = None) -> None:
    """Run ``kernel[griddim, blockdim](*args)`` in the simulator, under the course's rules (:func:`labkit.sim.install`,
    which :func:`labkit.sim.launch` runs first), and wait for it.

    A launch still running after ``time_limit_s`` seconds of CPU time (default: :func:`default_limit_s`) is
    stopped with :class:`~labkit.sim.errors.KernelTimeout`; every other error of a thread is raised as it was.
    """
    with options(time_limit_s=time_limit_s):
        kernel[griddim, blockdim](*args)


def _fake_arg(kernel: Any, arg: Any, retr: list[Any]) -> Any:
    """An argument as Numba's simulator passes it to a kernel (host arrays become device arrays, copied back)."""
    from numba.cuda.simulator import kernel as sim_kernel  # (its InOut, which a check may replace to count copies)
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    _, arg = functools.reduce(lambda ty_val, ext: ext.prepare_args(*ty_val, stream=0, retr=retr), kernel.extensions, (None, arg))
    if isinstance(arg, np.ndarray) and arg.ndim > 0:
        ret = sim_kernel.InOut(arg).to_device(retr)
    elif isinstance(arg, sim_kernel.ArgHint):
        ret = arg.to_device(retr)
    elif isinstance(arg, np.void):
        ret = FakeCUDAArray(arg)
    else:
        ret = arg
    if isinstance(ret, FakeCUDAArray):
        live = ret._ary
        if isinstance(live, np.ndarray) and live.ndim > 0 and live.dtype.names is None:
            return kernel_array(live)
        return FakeWithinKernelCUDAArray(ret)  # (records and structured arrays: Numba's own wrapper)
    return ret


def _declared_types(sig: Any) -> tuple | None:
    """The argument types of a signature given to ``cuda.jit`` (None: none, several, or one it cannot read)."""
    try:
        from numba.cuda.core.sigutils import is_signature, normalize_signature

        if not is_signature(sig):
            return None
        return tuple(normalize_signature(sig)[0])
    except Exception:  # noqa: BLE001 - Numba's simulator itself ignores signatures: so does a launch it cannot read
        return None


def _as_declared(value: Any, ty: Any) -> Any:
    """A scalar argument as the declared type makes it on a GPU: an integer narrower than 64 bits wraps and counts
    its own bits (:func:`labkit.sim.integers.tagged`). Floats stay as given, as in Numba's simulator: Python's
    ``round()`` of a ``np.float32`` differs from Numba's compiled one (numba-cuda's test_round_to_f4_halfway)."""
    from numba.cuda import types as nbtypes

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return value
    if isinstance(ty, nbtypes.Integer):
        return tagged(value, np.dtype(f"{'i' if ty.signed else 'u'}{ty.bitwidth // 8}"))
    return value


def declared_args(kernel: Any, args: tuple) -> tuple:
    """``args`` converted to the argument types of the kernel's declared signature, if it has one."""
    types = getattr(kernel, "_labkit_argtypes", None)
    if not types or len(types) != len(args):
        return args
    return tuple(_as_declared(a, t) for a, t in zip(args, types))


def _jit(original: Any) -> Any:
    """Numba's simulator ``cuda.jit``, which keeps the argument types of a declared signature for the launch."""

    @functools.wraps(original)
    def jit(func_or_sig: Any = None, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("fastmath"):
            warnings.warn(FASTMATH_NOT_SIMULATED, NotSimulated, stacklevel=2)
        made = original(func_or_sig, *args, **kwargs)
        types = _declared_types(func_or_sig) if func_or_sig is not None and not callable(func_or_sig) else None
        if types is None or not callable(made):
            return made

        def wrapper(fn: Any) -> Any:
            kernel = made(fn)
            kernel._labkit_argtypes = types
            return kernel

        return wrapper

    jit._labkit = True  # type: ignore[attr-defined]
    return jit


def _explain_direct(exc: KernelTimeout, limit_s: float) -> None:
    """A learner's own launch that ran past its limit: its message also gives the likely cause and how to raise the
    limit (a check prints the cause itself, and keeps its own limit)."""
    if not exc.args or "labkit.sim.time_limit" in str(exc.args[0]):
        return
    cause = f"\nLikely cause: {exc.cause}" if exc.cause else ""
    suggest = int(10 * math.ceil(max(2 * limit_s, 30) / 10))
    tip = (
        f"\nThe limit is {limit_s:g} s of CPU time per launch (the wall time can be longer on a busy machine). For a "
        f"launch that is right but long, raise it: labkit.sim.time_limit({suggest}) for this session, or "
        f"`with labkit.sim.time_limit({suggest}):` around the launch."
    )
    exc.args = (f"{exc.args[0]}{cause}{tip}",)


def _debug_threads(fn: Any) -> Any:
    """A ``debug=True`` kernel's threads: a division by zero raises (:class:`labkit.sim.engine.DivisionByZero`),
    as on a GPU, instead of giving ``inf``."""

    def debug_thread(*args: Any) -> None:
        with np.errstate(divide="raise"):
            fn(*args)

    return debug_thread


def kernel_call(self: Any, *args: Any) -> Any:
    """``FakeCUDAKernel.__call__``: a device function is called in place; a launch runs on the engine."""
    from numba.cuda.errors import normalize_kernel_dimensions
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator.kernelapi import swapped_cuda_module

    if getattr(self, "_labkit_argtypes", None):
        args = declared_args(self, args)
    if self._device or sim_kernel._kernel_context is not None:
        with swapped_cuda_module(self.fn, sim_kernel._kernel_context):
            return self.fn(*args)
    grid, block = normalize_kernel_dimensions(self.grid_dim, self.block_dim)
    module = engine.Module(grid, block, self.dynshared_size)
    opts = dict(_pending)
    _pending.clear()
    direct = not opts.get("time_limit_s")  # a launch of the learner's own (a check or a trace names its limit)
    opts["time_limit_s"] = opts.get("time_limit_s") or default_limit_s()
    tag_bytes_for(self.fn)  # (8-bit reads as labkit.sim.integers.Byte if the kernel uses bit intrinsics)
    with sim_kernel._push_kernel_context(module):
        retr: list[Any] = []
        fake_args = [_fake_arg(self, a, retr) for a in args]
        setup = opts.pop("setup", None)
        if setup is not None:
            setup(module)
        module._atomic = atomics.Checked(module._atomic)  # (element types a GPU compile takes, for every launch)
        # (a kernel lockstep runs, all threads at once as NumPy arrays; else, or if it gives up, the engine)
        done = not getattr(self, "_debug", False) and lockstep.run(self.fn, grid, block, fake_args, **opts)
        fn = self.fn if done else fastreads.for_launch(self.fn, fake_args)
        fn = _debug_threads(fn) if getattr(self, "_debug", False) else fn
        with swapped_cuda_module(self.fn, module):
            engine.debug_launch = bool(getattr(self, "_debug", False))
            try:
                if not done:
                    engine.run(fn, grid, block, fake_args, module=module, **opts)
            except KernelTimeout as exc:
                if direct:
                    _explain_direct(exc, opts["time_limit_s"])
                raise
            except TypeError as exc:
                fastreads.retype(exc)
                raise
            finally:
                engine.debug_launch = False
        for write_back in retr:
            write_back()
    return None


_installed = False


def install() -> None:
    """Make every launch of Numba's simulator run on the engine (sim mode only; idempotent)."""
    global _installed
    if _installed:
        return
    import numba.cuda
    from numba.cuda.simulator import api
    from numba.cuda.simulator import kernel as sim_kernel

    sim_kernel.FakeCUDAKernel.__call__ = kernel_call
    if not getattr(api.jit, "_labkit", False):
        api.jit = _jit(api.jit)
    if getattr(numba.cuda, "jit", None) is not None and not getattr(numba.cuda.jit, "_labkit", False):
        numba.cuda.jit = api.jit
    _installed = True
