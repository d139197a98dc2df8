"""The one design rule: every lab runs in ``gpu`` mode or in ``sim`` mode, chosen once per process.

``gpu``: a CUDA driver and device are present and CuPy runs an operation on the device; Numba kernels run
on the device, ``labkit.xp`` is CuPy, timings come from CUDA events. ``sim``: no GPU; Numba kernels run in the CUDA simulator (enabled here
before numba is imported), ``labkit.xp`` is NumPy, problem sizes shrink, timings are simulator timings.
``LABKIT_MODE=gpu|sim`` forces a mode. A GPU without a working CuPy gives ``sim`` (forced ``gpu``: a
:class:`~labkit.errors.ModeError`) with what is missing and the exact install command for the driver's CUDA
major (:func:`install_command`). A MIG slice is ``gpu`` mode with the slice named (:attr:`Environment.mig`).
"""

from __future__ import annotations

import os
import platform
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal

from .device import DriverProbe, GPUInfo, probe_driver
from .errors import LabkitError, ModeError, install_notebook_handler
from .validate import describe, require_int

Mode = Literal["gpu", "sim"]

TIMING_NOTE = {
    "gpu": "timings are CUDA-event times on the GPU",
    "sim": "timings are CPU times of the CUDA simulator or NumPy, never GPU speed",
}


@dataclass(frozen=True)
class Environment:
    """The mode labkit chose and the device behind it."""

    mode: Mode
    device_name: str
    compute_capability: tuple[int, int] | None
    memory_bytes: int | None
    sm_count: int | None
    gpu_count: int
    driver_version: str | None
    reason: str  # why this mode was chosen
    gpus: tuple[GPUInfo, ...] = field(default=(), repr=False)
    mig: str | None = None  # a MIG slice: what it is (SMs, memory) beside the whole GPU; None for a whole GPU

    @property
    def is_gpu(self) -> bool:
        return self.mode == "gpu"

    @property
    def arch(self) -> str:
        """``sm_XY`` of the device, or ``sm_90`` (the course's default target) in ``sim`` mode."""
        if self.compute_capability is None:
            return "sm_90"
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def banner(self) -> str:
        """The one-line banner :func:`setup` prints."""
        if self.is_gpu:
            cc = ".".join(map(str, self.compute_capability or ()))
            mem = (self.memory_bytes or 0) / 2**30
            more = f" (+{self.gpu_count - 1} more)" if self.gpu_count > 1 else ""
            what = f"{self.device_name}{more}, cc {cc}, {self.sm_count} SMs, {mem:.0f} GiB"
            if self.mig:
                what += f" ({self.mig})"
        else:
            what = f"CUDA simulator on {platform.processor() or platform.machine()} ({self.reason})"
        return f"labkit {self.mode} mode: {what}; {TIMING_NOTE[self.mode]}."

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpus"] = [asdict(g) for g in self.gpus]
        return d


_ENV: Environment | None = None


def _no_rules() -> None:
    """Nothing to install (until the package root plugs in the simulator's rules)."""


def _whole_gpu(gpu: GPUInfo) -> str | None:
    """No slice to describe (until the package root plugs in the hardware records' comparison)."""
    return None


@dataclass
class SetupSteps:
    """What :func:`setup` asks of the layers above this one, plugged in by the package root (``labkit/__init__.py``,
    which every import of labkit runs first), so that mode imports nothing above it: ``install_sim_rules`` (the
    course's rules for Numba's simulator, :func:`labkit.sim.install`, in ``sim`` mode) and ``describe_slice`` (what
    a MIG slice is beside its whole GPU, :func:`labkit.hw.slices.describe_slice`, for the banner)."""

    install_sim_rules: Callable[[], Any] = _no_rules
    describe_slice: Callable[[GPUInfo], str | None] = _whole_gpu


SETUP_STEPS = SetupSteps()


def numpy_compat() -> bool:
    """Give NumPy 2.5+ back ``numpy.row_stack`` (an alias of ``vstack``), which numba-cuda <= 0.30.4 overloads when it
    compiles its first kernel: without it every ``@cuda.jit`` compile fails with "module 'numpy' has no attribute
    'row_stack'" (NVIDIA/numba-cuda#907, not to be fixed upstream). Runs when labkit is imported and in
    :func:`setup`, before any Numba compile, and in the PTX worker (``ptx._WORKER``). Returns True when it added the
    alias (False also where NumPy is not importable: then Numba is not either)."""
    try:
        import numpy
    except ImportError:
        return False

    if hasattr(numpy, "row_stack"):
        return False
    numpy.row_stack = numpy.vstack
    return True


numpy_compat()


def _numba_cuda_sim_state() -> bool | None:
    """True/False if numba's CUDA target is already imported (as simulator or not), None if not yet."""
    if "numba.cuda" not in sys.modules:
        return None
    try:
        from numba.cuda.core import config  # numba-cuda's own config
    except ImportError:  # pragma: no cover - older layouts
        from numba.core import config
    return bool(config.ENABLE_CUDASIM)


def install_command(driver_version: str | None) -> str:
    """The exact command that installs CuPy (with its CUDA library wheels) for a driver's CUDA version.

    CUDA 12.x drivers get ``.[cuda12]``, CUDA 13.x and newer ``.[cuda13]`` (the same CUDA 12.9 stack: a newer driver
    runs older CUDA libraries); a driver older than CUDA 12 needs an update first."""
    if driver_version is not None and not (
        isinstance(driver_version, str) and re.fullmatch(r"\s*(\d+(\.\d+)*)?\s*", driver_version)
    ):
        raise LabkitError(
            f"driver_version must be a CUDA version string such as '12.4' (or None), got {describe(driver_version)}.",
            fix="Pass the driver's CUDA version as nvidia-smi prints it, e.g. '12.4'.",
        )
    driver_version = driver_version.strip() if driver_version else None
    major = int(driver_version.split(".")[0]) if driver_version else None
    if major is not None and major < 12:
        return (
            f"update the NVIDIA driver (it supports CUDA {driver_version}; the course's CUDA 12.9 libraries need a "
            "CUDA 12 driver or newer), then: pip install -c constraints.txt -e '.[cuda12]'"
        )
    extra = "cuda13" if major is not None and major >= 13 else "cuda12"
    return f"pip install -c constraints.txt -e '.[{extra}]'  (from the course repository, inside its .venv)"


def cupy_ready(probe: DriverProbe) -> str | None:
    """None when CuPy runs an operation on the first device; otherwise what is missing, in one sentence.

    Checks that CuPy imports, that its CUDA runtime is not newer than the driver's CUDA major, and that a small
    kernel (which NVRTC compiles) runs and comes back right."""
    if not isinstance(probe, DriverProbe):
        raise LabkitError(f"probe must be a DriverProbe (labkit.device.probe_driver() returns one), got {describe(probe)}.")
    try:
        import cupy
    except ImportError as exc:
        return f"CuPy is not installed ({exc})"
    except Exception as exc:  # noqa: BLE001 - a broken CuPy install (missing CUDA libraries) is a reason, not a crash
        return f"CuPy does not import ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    try:
        runtime = int(cupy.cuda.runtime.runtimeGetVersion())
    except Exception as exc:  # noqa: BLE001
        return f"CuPy cannot load its CUDA runtime ({type(exc).__name__}: {exc})"
    major = probe.driver_major
    if major is not None and runtime // 1000 > major:
        return (
            f"CuPy {cupy.__version__} is built for CUDA {runtime // 1000}.{(runtime % 1000) // 10}, newer than "
            f"the driver's CUDA {probe.driver_version} (remove it first: pip uninstall -y cupy-cuda{runtime // 1000}x)"
        )
    try:
        with cupy.cuda.Device(0):
            x = cupy.arange(8, dtype=cupy.float32)
            total = float((x * 2).sum())
            cupy.cuda.runtime.deviceSynchronize()
    except Exception as exc:  # noqa: BLE001 - no device, driver too old, NVRTC missing: say which
        text = str(exc).splitlines()[0] if str(exc) else ""
        hint = ""
        if probe.usable and re.search(r"InsufficientDriver|UnsupportedPtxVersion|PTX_VERSION", text):
            hint = (
                f"; the driver (CUDA {probe.driver_version}) is older than CuPy's CUDA "
                f"{runtime // 1000}.{(runtime % 1000) // 10} libraries: update the driver"
            )
        return f"CuPy {cupy.__version__} could not run an operation on the GPU ({type(exc).__name__}: {text}){hint}"
    if total != 56.0:
        return f"CuPy's test operation on the GPU returned {total}, not 56"
    return None


def _decide(requested: str | None) -> tuple[Mode, str, tuple[GPUInfo, ...], str | None]:
    probe = probe_driver()
    if requested not in (None, "", "gpu", "sim", "auto"):
        raise ModeError(f"LABKIT_MODE={requested!r} is not a mode.", fix="Use LABKIT_MODE=gpu, sim or auto (or unset it).")
    if requested == "sim":
        return "sim", "forced by LABKIT_MODE=sim", (), probe.driver_version
    if not probe.usable:
        if requested == "gpu":
            raise ModeError(
                f"gpu mode was forced (LABKIT_MODE=gpu) but {probe.reason}.",
                fix="Unset LABKIT_MODE to run in the simulator, or run on a machine with an NVIDIA GPU and driver.",
            )
        return "sim", probe.reason or "no GPU", (), probe.driver_version
    missing = cupy_ready(probe)
    if missing is not None:
        name = probe.gpus[0].name
        if requested == "gpu":
            raise ModeError(
                f"gpu mode was forced (LABKIT_MODE=gpu) and the driver sees {name}, but {missing}.",
                fix=install_command(probe.driver_version),
            )
        return (
            "sim",
            f"{name} found, but {missing}; for gpu mode: {install_command(probe.driver_version)}",
            (),
            probe.driver_version,
        )
    why = "forced by LABKIT_MODE=gpu" if requested == "gpu" else "a CUDA driver and device were found and CuPy runs on it"
    return "gpu", why, probe.gpus, probe.driver_version


def setup(mode: str | None = None, *, quiet: bool = False) -> Environment:
    """Choose the mode for this process (once), print a one-line banner and return the :class:`Environment`.

    ``mode`` (or the ``LABKIT_MODE`` variable) forces ``"gpu"`` or ``"sim"``. Calling again returns the same
    environment; asking for a different mode than the one already chosen is a :class:`~labkit.errors.ModeError`.
    """
    global _ENV
    numpy_compat()
    install_notebook_handler()
    requested = mode if mode is not None else os.environ.get("LABKIT_MODE")
    if _ENV is not None:
        if requested in ("gpu", "sim") and requested != _ENV.mode:
            raise ModeError(
                f"this kernel is already in {_ENV.mode} mode; it cannot switch to {requested}.",
                fix="Restart the kernel, then run `import labkit; labkit.setup(...)` first.",
            )
        if not quiet:
            print(_ENV.banner())
        return _ENV
    chosen, reason, gpus, driver = _decide(requested)
    sim_state = _numba_cuda_sim_state()
    if sim_state is not None and sim_state != (chosen == "sim"):
        already = "the CUDA simulator" if sim_state else "the real CUDA target"
        raise ModeError(
            f"numba's CUDA target was imported before labkit.setup() and is {already}, so {chosen} mode is impossible now.",
            fix="Restart the kernel and run `import labkit; env = labkit.setup()` before importing numba.",
        )
    if chosen == "sim":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        if "numba.cuda.core.config" in sys.modules:
            sys.modules["numba.cuda.core.config"].ENABLE_CUDASIM = 1  # type: ignore[attr-defined]
        if "numba.core.config" in sys.modules:
            sys.modules["numba.core.config"].ENABLE_CUDASIM = 1  # type: ignore[attr-defined]
        SETUP_STEPS.install_sim_rules()  # the course's rules for Numba's simulator (barriers, warps, integers, time limits)
    else:
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    first = gpus[0] if gpus else None
    _ENV = Environment(
        mode=chosen,
        device_name=first.name if first else "CUDA simulator (CPU)",
        compute_capability=first.compute_capability if first else None,
        memory_bytes=first.memory_bytes if first else None,
        sm_count=first.sm_count if first else None,
        gpu_count=len(gpus),
        driver_version=driver,
        reason=reason,
        gpus=gpus,
        mig=SETUP_STEPS.describe_slice(first) if first else None,
    )
    if not quiet:
        print(_ENV.banner())
    return _ENV


def env() -> Environment:
    """The current environment; runs :func:`setup` quietly if it has not run yet."""
    return _ENV if _ENV is not None else setup(quiet=True)


def current_mode() -> Mode:
    """``"gpu"`` or ``"sim"``."""
    return env().mode


def size(*, gpu: int, sim: int) -> int:
    """The problem size for the current mode: ``gpu`` on a device, ``sim`` in the simulator.

    Each is a positive whole number or a shape (a tuple of them, such as ``(1080, 1920)``), both of the same kind."""
    gpu, sim = _size(gpu, "gpu"), _size(sim, "sim")
    if isinstance(gpu, tuple) != isinstance(sim, tuple):
        raise LabkitError(
            f"size(gpu=..., sim=...) takes two numbers or two shapes, got gpu={gpu!r} and sim={sim!r}.",
            fix="e.g. size(gpu=1 << 20, sim=256) or size(gpu=(1080, 1920), sim=(32, 48)).",
        )
    return gpu if current_mode() == "gpu" else sim


def _size(value: Any, name: str) -> Any:
    """A positive whole number, or a tuple of them (a shape), as :func:`size` takes them."""
    fix = "e.g. size(gpu=1 << 20, sim=256) or size(gpu=(1080, 1920), sim=(32, 48))."
    if isinstance(value, tuple):
        if not value:
            raise LabkitError(f"{name} must be a positive whole number or a shape, got an empty tuple.", fix=fix)
        return tuple(require_int(v, f"{name}[{i}]", min=1, fix=fix) for i, v in enumerate(value))
    require_int(value, name, min=1, fix=fix)
    return value


def array_module() -> Any:
    """CuPy in ``gpu`` mode, NumPy in ``sim`` mode."""
    if current_mode() == "gpu":
        from .errors import require

        return require("cupy", feature="gpu mode", install=install_command(env().driver_version))
    import numpy

    return numpy


def cuda_module() -> Any:
    """``numba.cuda`` (the simulator in ``sim`` mode: labkit.setup() must have run first)."""
    current_mode()  # make sure the mode (and NUMBA_ENABLE_CUDASIM) is set before numba is imported
    from numba import cuda

    return cuda
