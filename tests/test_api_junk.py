"""Every public function of labkit, given junk, raises a LabkitError that says what it expected: never a traceback.

The callables are found by introspection, so a function added later is covered without touching this file:

- every submodule of ``labkit`` (and of ``labkit.widgets`` and ``labkit.kernels``) except :data:`NOT_HERE`, and its
  public functions: the names in ``__all__``, or else the functions it defines whose names do not start with ``_``;
- the public methods of the objects those functions return (``roofline("H100").bound(...)``,
  ``topology.load("DGX-2").route(...)``), when the function can be called with the known-good arguments of
  :data:`GOOD` (looked up by parameter name).

Each function is called with every value of :data:`JUNK` in every parameter at once, and, when its required
parameters all have known-good values, with each junk value in one parameter while the others are good. A call may
succeed (a junk value that is still meaningful, such as ``nan`` for ``bits()``) or raise a LabkitError; any other
exception fails the test, naming the call. A call that runs past :data:`CALL_LIMIT_S` fails too (junk must not
hang). Argument counts are always right here (every required parameter gets a value), so a TypeError is never an
"acceptable" wrong-arity error: it is an escape like any other.

GPU-only functions run too: in ``sim`` mode they must raise a LabkitError (``NoGPUError``) whatever they are given.
Functions that do long work once their arguments are valid (measurements, whole pipelines) are in :data:`SLOW`,
called only with all-junk arguments. Known escapes in modules owned by others are in :data:`KNOWN_ESCAPES`
(strict xfail: fixing one makes its entry fail until it is removed).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
import signal
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest

import labkit
import labkit.collectives
import labkit.cupylab
import labkit.mode
import labkit.sim
from labkit._moved import public_name
from labkit.errors import LabkitError

CALL_LIMIT_S = 15.0  # wall time: a hang is caught either way, a loaded CI machine does not fail a 0.4 s call

#: Modules not probed here, and why.
NOT_HERE = {
    "labkit.check": "the checks have their own junk tests (tests/test_adversarial_answers.py, test_grader_rules.py)",
    "labkit.widgets.trace": "labkit.show and the trace explorer: tested by their owner (tests/test_widgets_trace.py)",
    "labkit.cli": "the command line: argparse reports bad arguments itself",
    "labkit.progress_service": "a web service, not a learner API (tests/test_progress_service.py)",
    "labkit.hub_native": "JupyterHub deployment code, not a learner API",
    "labkit.hub_setup": "JupyterHub deployment code, not a learner API",
    "labkit.errors": "the error classes themselves",
    "labkit.workcopy": "copies notebooks into the learner's home: side effects on files",
    "labkit.progress": "writes the learner's progress file: side effects on files",
    "labkit.doctor": "inspects the whole installation (slow); its functions take no learner arguments",
    "labkit.validate": "the argument checks themselves, called by labkit's code with constant ranges",
    "labkit.kernels.memory": "kernel bodies that labkit.kernels.get() compiles with cuda.jit; never called from Python",
    "labkit.kernels.numba_basics": "kernel bodies (see labkit.kernels.memory)",
    "labkit.kernels.reductions": "kernel bodies (see labkit.kernels.memory)",
    "labkit.kernels.scan": "kernel bodies (see labkit.kernels.memory)",
    "labkit.kernels.video": "kernel bodies (see labkit.kernels.memory)",
    "labkit.nvml": "the driver-library wrapper behind topology.from_nvml and bandwidth: takes NVML handles, not learner input",
    "labkit.spin": "bench's spin kernel: takes CuPy and stream objects from bench, not learner input",
    "labkit.device": "mode's device probe: takes driver objects, not learner input",
    "labkit.gpuerrors": "turns CUDA exceptions into LabkitErrors: takes exceptions, not learner input",
    "labkit.cuda_host": "the host compiler behind cuda_cpp.RawKernel: reached through cuda_cpp, not called by learners",
    "labkit.learner_frames": "turns tracebacks into the learner's view: takes frames and exceptions, not learner input",
}

#: Submodules not walked: their public functions are probed through their package's ``__all__`` only (the rest are
#: the simulator's internals, called by the engine with its own objects, never by a learner).
NOT_WALKED = {
    "labkit.sim.arrays": "the simulator's array stand-ins (internals)",
    "labkit.sim.blocks": "barriers inside a launch (internals)",
    "labkit.sim.engine": "the greenlet engine (internals)",
    "labkit.sim.errors": "the simulator's error classes",
    "labkit.sim.integers": "narrow-integer arithmetic inside a launch (internals)",
    "labkit.sim.launch": "labkit.sim.launch and time_limit, probed through labkit.sim",
    "labkit.sim.limits": "the time limit of learner code, used by the checks (internals)",
    "labkit.sim.memory": "launch_strict, bank_conflicts and sectors_per_request, probed through labkit.sim",
    "labkit.sim.trace": "labkit.sim.trace, probed through labkit.sim",
    "labkit.sim.tracebacks": "the learner's view of a launch's traceback (labkit.learner_frames; internals)",
    "labkit.sim.warp": "warp shuffles and votes inside a launch (internals)",
}

#: Functions not called at all, and why (command-line hooks take argparse's parsed arguments, not a learner's).
SKIP = {
    "labkit.kernels.benchmark_suite": "times every reference kernel on any arguments (about 1 s a call in sim)",
    "labkit.sim.time_limit": "sets the time limit of every later launch in the session (tested in tests/test_sim_limits.py)",
}
CLI_NAMES = ("cli", "add_cli", "main")

#: Junk for every parameter: nothing, text, wrong types, negative, zero, huge, fractional, NaN, infinity, containers, bool.
JUNK: list[Any] = [None, "x", "", -1, 0, 10**12, -2.5, 2.5, math.nan, math.inf, [1, 2], ["a"], {}, object(), True]

#: Known-good values by parameter name (for one junk parameter at a time); ``"module.function"`` keys override.
GOOD: dict[str, Any] = {
    "arch": "sm_90", "gpu_name": "H100", "gpu": "H100", "system": "DGX H100", "precision": "fp32", "fmt": "fp16",
    "x": 1.0, "threads_per_block": 256, "addresses": [0, 4, 8], "name": "H100", "pattern": "contiguous",
    "intensity": 1.0, "value": 0.1, "formats": ("fp16",), "timings": [], "fn": math.pi.__abs__, "label": "GPUs",
    "a": 0, "b": 1, "shape": 8, "block": 4, "threads": 256, "registers": 32, "shared": 0, "n": 4,
    "nbytes": 1_000_000, "link_gbps": 100.0, "size": 1024, "collective": "all_reduce", "seconds": 1e-3,
    "sm_count": 66, "memory_bytes": 80_000_000_000, "whole": labkit.hw.gpu("H100"), "device_name": "NVIDIA H100 80GB HBM3",
    "sim": 4, "approx": [1.0, 2.0], "reference": [1.0, 2.5], "v": 1.0, "bits": 8, "ks": [64, 256],
    "curves": {"FP16, FP32 acc": [1e-3, 2e-3]},
    "text": (Path(__file__).parent / "fixtures" / "nvidia-smi-topo-dgx1-v100.txt").read_text(),
}
GOOD_FOR: dict[str, dict[str, Any]] = {
    "labkit.topology.load": {"name": "DGX-1 (V100)"},
    "labkit.topology.cluster": {"name": "DGX-1 (V100)", "count": 2},
    "labkit.widgets.architecture.system_explorer": {"system": "DGX-1 (V100)"},
    "labkit.widgets.architecture.roofline_explorer": {"precision": "bf16"},
    "labkit.course.lab": {"lab_id": "01"},
    "labkit.kernels_cuda.get": {"name": "saxpy"},
    "labkit.hw.link": {"name": "NVLink 4"},
    "labkit.topology.from_nvidia_smi": {"gpu": "V100"},
    "labkit.precision.gemm": {"a": [[1.0, 2.0]], "b": [[1.0], [0.5]]},
    "labkit.precision.gemm_error": {"a": [[1.0, 2.0]], "b": [[1.0], [0.5]]},
    "labkit.precision.gemm_tolerance": {"a": [[1.0, 2.0]], "b": [[1.0], [0.5]]},
    "labkit.precision.decode": {"pattern": "0 01111 0000000000"},
    "labkit.precision.classify": {"x": [1.0, 1e-9]},
}

#: Functions that work for seconds once their arguments are valid: called with all-junk arguments only.
SLOW = {
    "labkit.bandwidth.host_stream", "labkit.bandwidth.host_sweep", "labkit.bandwidth.cache_sizes",
    "labkit.tensorcores.cpu_gemm_throughput", "labkit.video.time_reference", "labkit.video.time_stages",
    "labkit.video.run_kernels", "labkit.video.run_reference", "labkit.video.reference_kernels",
    "labkit.cupylab.fusion_benchmark", "labkit.cupylab.overlap_benchmark", "labkit.cupylab.benchmarks",
    "labkit.kernels_cuda.all_kernels", "labkit.ptx.toolchain", "labkit.ptx.header_dirs", "labkit.kernels.benchmark_suite",
}

#: Functions that hang on junk (a huge count), found here and reported: not run (each call would cost CALL_LIMIT_S).
KNOWN_HANGS: dict[str, str] = {}

#: Escapes found in modules whose owners have not fixed them yet (reported to the lead): ``"module.function"``.
#: Each is a strict xfail: once its function raises only LabkitErrors, remove its line here.
KNOWN_ESCAPES: dict[str, str] = {
}


class _TooSlow(BaseException):
    pass


def _alarm(*_: Any) -> None:
    raise _TooSlow()


def _modules() -> list[ModuleType]:
    found = ["labkit"]
    for info in pkgutil.walk_packages(labkit.__path__, "labkit."):
        name = public_name(info.name)
        if (any(name == n or name.startswith(n + ".") for n in (*NOT_HERE, *NOT_WALKED))
                or any(p.startswith("_") for p in name.split(".")[1:])):
            continue
        found.append(name)
    return [importlib.import_module(n) for n in sorted(set(found))]


def _public(module: ModuleType) -> list[tuple[str, Callable[..., Any]]]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]
    out = []
    for n in names:
        v = getattr(module, n, None)
        if (inspect.isfunction(v) or _learner_class(v)) and f"{module.__name__}.{n}" not in ("labkit.show",):
            out.append((f"{public_name(module.__name__)}.{n}", v))
    return out


def _learner_class(v: Any) -> bool:
    """A class a learner constructs (``cuda_cpp.RawKernel(source, name)``): one with its own ``__init__``, not a
    record (dataclass, named tuple), an exception or a typing Protocol."""
    return (inspect.isclass(v) and "__init__" in vars(v) and not dataclasses.is_dataclass(v)
            and not issubclass(v, (BaseException, tuple)) and not getattr(v, "_is_protocol", False))


def _callables() -> list[tuple[str, Callable[..., Any]]]:
    seen: dict[str, Callable[..., Any]] = {}
    for m in _modules():
        for qual, f in _public(m):
            home = public_name(getattr(f, "__module__", "") or "")
            if qual == "labkit.show" or any(home == n or home.startswith(n + ".") for n in NOT_HERE):
                continue  # re-exported from a module not probed here (cuda_cpp re-exports cuda_host's functions)
            if qual in SKIP or qual.rsplit(".", 1)[-1] in CLI_NAMES:
                continue
            seen.setdefault(f"{public_name(f.__module__)}.{f.__name__}" if f.__module__.startswith("labkit") else qual, f)
    return sorted(seen.items())


def _params(f: Callable[..., Any], skip_self: bool = False) -> list[inspect.Parameter]:
    ps = [p for p in inspect.signature(f).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return ps[1:] if skip_self else ps


def _call(f: Callable[..., Any], kwargs: dict[str, Any], positional: list[Any]) -> tuple[str, Any]:
    """``("ok", result)``, ``("labkit", error)`` or ``("escape", text)``.

    The per-call limit borrows SIGALRM and gives it back as it was, with pytest-timeout's timer (``--timeout``)
    re-armed for what is left of it."""
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, CALL_LIMIT_S)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", f(*positional, **kwargs)
    except LabkitError as exc:
        return "labkit", exc
    except _TooSlow:
        return "escape", f"still running after {CALL_LIMIT_S:g} s"
    except Exception as exc:  # noqa: BLE001 - the point: anything else is an escape
        return "escape", f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - started), 1e-3))


def _junk_calls(label: str, f: Callable[..., Any], good: dict[str, Any], params: list[inspect.Parameter],
                one_at_a_time: bool) -> tuple[list[str], Any]:
    """Escapes of ``f`` with junk; and the result of one call with good arguments (None if there is none)."""
    escapes: list[str] = []
    required = [p for p in params if p.default is p.empty]
    if not params:  # nothing to give junk to; a GPU-only function must still say NoGPUError in sim
        if not one_at_a_time:
            return escapes, None
        kind, what = _call(f, {}, [])
        if kind == "escape":
            escapes.append(f"{label}() -> {what}")
        return escapes, what if kind == "ok" else None
    for j in JUNK:  # junk in every parameter at once (never the defaults alone: they may start long work)
        pos = [j for p in params if p.kind is p.POSITIONAL_ONLY]
        kw = {p.name: j for p in params if p.kind is not p.POSITIONAL_ONLY}
        kind, what = _call(f, kw, pos)
        if kind == "escape":
            escapes.append(f"{label}(all={j!r}) -> {what}")
    if not one_at_a_time or not all(p.name in good for p in required) or any(p.kind is p.POSITIONAL_ONLY for p in params):
        return escapes, None
    base = {p.name: good[p.name] for p in required}
    kind, result = _call(f, dict(base), [])
    for p in params:
        for j in JUNK:
            kind, what = _call(f, {**base, p.name: j}, [])
            if kind == "escape":
                escapes.append(f"{label}({p.name}={j!r}) -> {what}")
    return escapes, result if kind == "ok" else None


def _probe(qual: str, f: Callable[..., Any]) -> list[str]:
    good = {**GOOD, **GOOD_FOR.get(qual, {})}
    escapes, result = _junk_calls(qual, f, good, _params(f), qual not in SLOW)
    if result is None or not type(result).__module__.startswith("labkit"):
        return escapes
    base = {p.name: good[p.name] for p in _params(f) if p.default is p.empty}
    kind, result = _call(f, base, [])  # a fresh object: a junk call above must not have changed it
    if kind != "ok":
        return escapes
    for name in sorted(dir(type(result))):
        method = getattr(type(result), name, None)
        if name.startswith("_") or not inspect.isfunction(method):
            continue
        escapes += _junk_calls(f"{qual}(...).{name}", getattr(result, name), good, _params(method, skip_self=True), True)[0]
    return escapes


CALLABLES = _callables()


def test_the_probe_reaches_the_api() -> None:
    """The enumeration finds the helper API the notebooks use (a broken introspection would pass everything)."""
    names = {q for q, _ in CALLABLES}
    for expected in ("labkit.bench.measure", "labkit.bench.table", "labkit.occupancy.occupancy", "labkit.roofline.roofline",
                     "labkit.precision.bits", "labkit.hw.gpu", "labkit.topology.load",
                     "labkit.widgets.kernels.occupancy_calculator", "labkit.widgets.architecture.system_explorer",
                     "labkit.widgets.precision.range_chart", "labkit.mode.size"):
        assert expected in names, expected
    assert not any(q.startswith("labkit.widgets.trace") or q == "labkit.show" for q in names)
    assert len(names) > 150


def test_an_escape_is_caught() -> None:
    """The probe itself can fail: a function that indexes its argument escapes with a TypeError."""
    def broken(arch: str) -> str:
        return arch[0]

    assert any("TypeError" in e for e in _probe("broken", broken))
    assert _probe("fine", lambda arch: labkit.occupancy.limits(arch)) == []


def _marks(qual: str) -> list[Any]:
    if qual in KNOWN_HANGS:
        return [pytest.mark.xfail(run=False, reason=f"known hang; once fixed, delete its line in KNOWN_HANGS ({KNOWN_HANGS[qual]})")]
    if qual in KNOWN_ESCAPES:
        return [pytest.mark.xfail(strict=True,
                                  reason=f"known escape; once fixed, delete its line in KNOWN_ESCAPES ({KNOWN_ESCAPES[qual]})")]
    return []


@pytest.mark.parametrize("qual,f", [pytest.param(q, f, id=q, marks=_marks(q)) for q, f in CALLABLES])
def test_junk_gives_a_labkit_error(qual: str, f: Callable[..., Any]) -> None:
    escapes = _probe(qual, f)
    assert not escapes, f"{len(escapes)} junk call(s) ended in a raw exception:\n" + "\n".join(escapes[:12])


def test_mode_size_refuses_junk() -> None:
    """``size(gpu="x", sim="x")`` used to return "x" silently; mixed kinds (a number and a shape) are refused too."""
    for bad in ({"gpu": "x", "sim": "x"}, {"gpu": 0, "sim": 4}, {"gpu": 8, "sim": (2, 3)}, {"gpu": (8, 0), "sim": (2, 3)}):
        with pytest.raises(LabkitError):
            labkit.mode.size(**bad)
    assert labkit.mode.size(gpu=(1080, 1920), sim=(24, 40)) in ((1080, 1920), (24, 40))


def _a_kernel() -> Any:
    """A @cuda.jit kernel (in sim mode, Numba's simulator kernel)."""
    from numba import cuda

    def noop(a: Any) -> None:  # pragma: no cover - never launched
        pass

    return cuda.jit(noop)


@pytest.mark.parametrize("call,limit", [
    (lambda: labkit.collectives.chunk_bounds(1024, 10**12), "65,536"),
    (lambda: labkit.cupylab.pipeline(1.0, 1.0, 1.0, 10**12), "65,536"),
    (lambda: labkit.cupylab.overlap_model(1 << 20, chunks=10**12), "65,536"),
    (lambda: labkit.sim.launch(_a_kernel(), 10**12, 1), "2,147,483,647"),
    (lambda: labkit.sim.launch_strict(_a_kernel(), 1, 10**12), "1024"),
], ids=["chunk_bounds", "pipeline", "overlap_model", "sim.launch", "sim.launch_strict"])
def test_absurd_sizes_are_refused_at_once(call: Callable[[], Any], limit: str) -> None:
    """Counts that once ran for minutes (10**12 chunks) are refused at once, the limit stated in the message."""
    started = time.monotonic()
    with pytest.raises(LabkitError) as info:
        call()
    assert limit in str(info.value) and time.monotonic() - started < 1.0
