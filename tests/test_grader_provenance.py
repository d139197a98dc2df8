"""Provenance by code (issue 44, item 4): an answer that runs labkit's reference, or a function its check compares
with, is rejected whatever the route (a kernel rebuilt from the reference's ``py_func``, a ``types.FunctionType``
copy, ``functools.partial``, ``functools.lru_cache``, ``functools.wraps``, a bound method, a callable object, a
closure, a default argument), with a message naming it (said when the check would otherwise
pass: a wrong answer keeps the check's own words); labkit's reference as labkit made it, and correct answers that
use the helpers a statement offers, still pass. About 20 s on one core.
"""

from __future__ import annotations

import contextlib
import functools
import io
import types
from typing import Any, Callable

import pytest

import labkit

labkit.setup(quiet=True)
from numba import cuda  # noqa: E402

from labkit import check  # noqa: E402
from labkit.check import core  # noqa: E402


def _quiet(fn: Callable[..., Any], *args: Any) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def _ref(exercise: str) -> Any:
    return core._get(exercise).reference()


def _rejected(check_fn: Callable[..., Any], answer: Any, *words: str) -> None:
    r = _quiet(check_fn, answer)
    text = r.message + " " + (r.cause or "")
    assert r.status == "failed", (r.status, r.message)
    for w in words:
        assert w in text, (w, r.message)


# ------------------------------------------------------------------------------------------ kernels
@pytest.mark.parametrize("exercise, check_name, name", [
    ("00.vector-add", "vector_add", "vector_add"),
    ("02.saxpy", "saxpy", "saxpy"),
    ("02.grayscale", "grayscale", "grayscale"),
    ("04.block-sum", "block_sum", "block_sum"),
    ("09.erode", "erode", ""),
])
def test_a_kernel_rebuilt_from_the_reference_py_func_is_rejected(exercise: str, check_name: str, name: str) -> None:
    rebuilt = cuda.jit(_ref(exercise).py_func)
    fn = getattr(check, check_name, None) or (lambda k, e=exercise: core.run(e, k))
    _rejected(fn, rebuilt, "kernel compiled from", "labkit's reference answer", name)


def test_a_kernel_from_a_copied_function_is_rejected() -> None:
    py = _ref("02.saxpy").py_func
    copy = types.FunctionType(py.__code__, py.__globals__, "my_saxpy", py.__defaults__, py.__closure__)
    _rejected(check.saxpy, cuda.jit(copy), "kernel compiled from", "saxpy")


def test_scan_with_one_kernel_from_labkit_is_rejected() -> None:
    scan_block, add_offsets = _ref("04.scan")
    r = _quiet(check.scan, scan_block, cuda.jit(add_offsets.py_func))
    assert r.status == "failed" and "labkit's reference answer" in r.message, r.message


# ------------------------------------------------------------------------------------------ host functions
def _routes(ref: Callable[..., Any]) -> dict[str, Any]:
    class Calls:
        def __call__(self, *args: Any) -> Any:
            return ref(*args)

    class Holds:
        def __init__(self) -> None:
            self.fn = ref

        def run(self, *args: Any) -> Any:
            return self.fn(*args)

    @functools.wraps(ref)
    def wrapped(*args: Any) -> Any:
        return wrapped.__wrapped__(*args)  # type: ignore[attr-defined]

    def with_default(*args: Any, _f: Any = ref) -> Any:
        return _f(*args)

    def closure(*args: Any) -> Any:
        return ref(*args)

    return {
        "copy": types.FunctionType(ref.__code__, ref.__globals__, "mine", ref.__defaults__, ref.__closure__),
        "partial": functools.partial(ref),
        "lru_cache": functools.lru_cache(maxsize=None)(ref),
        "wraps": wrapped,
        "bound method": Holds().run,
        "callable object": Calls(),
        "default argument": with_default,
        "closure": closure,
    }


@pytest.mark.parametrize("exercise, check_name", [
    ("06.te-scale", "te_scale"),
    ("08.ddp-buckets", "ddp_buckets"),
    ("08.scaling-efficiency", "data_parallel_scaling"),
    ("06.loss-scale", "loss_scale"),
    ("02.launch-config", "launch_config"),
])
def test_every_route_to_a_reference_function_is_rejected(exercise: str, check_name: str) -> None:
    ref = _ref(exercise)
    fn = getattr(check, check_name, None) or (lambda a, e=exercise: core.run(e, a))
    for route, answer in _routes(ref).items():
        r = _quiet(fn, answer)
        text = r.message + " " + (r.cause or "")
        assert r.status == "failed", (route, r.message)
        if "unhashable" in text:  # lru_cache over list arguments: the check's own failure comes first
            continue
        assert "labkit" in text and ("reference" in text or "compares with" in text), (route, r.message)


def test_a_cuda_cpp_source_equal_to_labkits_is_not_refused() -> None:
    source = _ref("05.leaky-relu")
    assert _quiet(check.leaky_relu, "".join(list(source)))  # the same lines, written out: the solution notebook's


def test_labkits_own_reference_still_passes() -> None:
    assert _quiet(check.saxpy, _ref("02.saxpy"))
    assert _quiet(check.te_scale, _ref("06.te-scale"))
    assert _quiet(check.ddp_buckets, _ref("08.ddp-buckets"))


def test_a_partial_of_a_compared_function_is_not_labkit_calling_its_helper() -> None:
    from labkit import precision as P

    _rejected(check.tf32_round, functools.partial(P.round_to, fmt="tf32"), "labkit.precision.round_to")
    _rejected(check.tf32_round, functools.lru_cache(P.round_tf32_bits), "labkit.precision.round_tf32_bits")


def test_correct_answers_in_wrappers_of_their_own_still_pass() -> None:
    import math

    import numpy as np

    from labkit import precision as P

    def te(h: list, fmt: str, margin: int, prev: float) -> float:
        amax = float(np.max(h))  # NaN anywhere gives NaN (Python's max() skips one that is not first)
        return prev if not math.isfinite(amax) or amax <= 0 else P.format_info(fmt).max_normal / amax / 2**margin

    class Scaler:
        def __call__(self, h: list, fmt: str, margin: int, prev: float) -> float:
            return te(h, fmt, margin, prev)

    assert _quiet(check.te_scale, Scaler())
    assert _quiet(check.te_scale, functools.partial(te))
