"""Fakes of the GPU packages derived from the real installed modules, so a misspelt function, a wrong argument
count or a tuple-valued constant cannot hide behind a hand-written fake.

- :func:`signature_of`: ``inspect.signature`` where Python has one; for CuPy's Cython functions, the signature
  Cython embeds in the docstring (``memcpyAsync(intptr_t dst, intptr_t src, size_t size, int kind, intptr_t stream)``).
- :func:`checked`: wraps a fake implementation so every call is first bound to the real function's signature.
- :class:`FakeNvml`: ``pynvml`` with the real constants and exception classes, and every function an autospec of
  the real one (``unittest.mock.create_autospec``) whose behaviour comes from a small device table.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable
from unittest import mock

import numpy as np

_DOC_SIG = re.compile(r"^\s*(?:[\w.]+\s+)?(\w+)\((.*?)\)", re.S)


def signature_of(obj: Any) -> inspect.Signature:
    """The call signature of a Python or Cython function (from its embedded docstring signature)."""
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        pass
    doc = (getattr(obj, "__doc__", None) or "").strip()
    m = _DOC_SIG.match(doc)
    if not m:
        raise TypeError(f"{obj!r} has no signature and no embedded one in its docstring")
    params = []
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    for raw in filter(None, (p.strip() for p in m.group(2).replace("\n", " ").split(","))):
        if raw == "/":
            continue
        if raw == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        default = inspect.Parameter.empty
        if "=" in raw:
            raw, _, dflt = raw.partition("=")
            default = dflt.strip()
        word = raw.strip().split()[-1]
        name = word.lstrip("*")
        if name == "self":
            continue
        if word.startswith("**"):
            params.append(inspect.Parameter(name, inspect.Parameter.VAR_KEYWORD))
        elif word.startswith("*"):
            params.append(inspect.Parameter(name, inspect.Parameter.VAR_POSITIONAL))
            kind = inspect.Parameter.KEYWORD_ONLY
        else:
            params.append(inspect.Parameter(name, kind, default=default))
    return inspect.Signature(params)


def checked(real: Any, impl: Callable[..., Any]) -> Callable[..., Any]:
    """``impl`` behind the real function's signature: a call the real one would refuse fails the same way."""
    sig = signature_of(real)

    @functools.wraps(impl)
    def call(*args: Any, **kwargs: Any) -> Any:
        sig.bind(*args, **kwargs)
        return impl(*args, **kwargs)

    return call


def check_fake_against(fake: Any, real_module: Any, names: list[str] | None = None) -> None:
    """Assert every public callable of ``fake`` exists in ``real_module`` and binds to its signature; wraps them."""
    for name in names or [n for n in dir(fake) if not n.startswith("_")]:
        impl = getattr(fake, name)
        if not callable(impl) or isinstance(impl, type):
            continue
        assert hasattr(real_module, name), f"the fake defines {name}, which {real_module.__name__} does not have"
        setattr(fake, name, checked(getattr(real_module, name), impl))


# ---------------------------------------------------------------------------------------------- NVML


@dataclass
class NvmlGpu:
    """One GPU as the fake NVML knows it."""

    name: str
    uuid: str
    bus_id: str  # NVML's spelling, 8-digit domain: "00000000:19:00.0"
    nvlinks: list[str] = field(default_factory=list)  # remote bus id per active link ("" = not active)
    pcie: tuple[int, int] = (5, 16)


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class FakeNvml:
    """``pynvml`` backed by a list of :class:`NvmlGpu`: real constants and errors, autospecced functions."""

    def __init__(self, gpus: list[NvmlGpu], p2p_ok: bool = True, init_error: bool = False,
                 refuse: dict[str, str] | None = None) -> None:
        import pynvml

        self._real = pynvml
        self._gpus, self._p2p_ok, self._init_error = gpus, p2p_ok, init_error
        #: query name -> the NVML error it answers (``"NOT_SUPPORTED"``, ``"NO_PERMISSION"``, ``"UNKNOWN"``): what a VM's
        #: NVML does where nvidia-smi shows N/A (see :data:`VM_REFUSES`)
        self._refuse = {name: getattr(pynvml, f"NVML_ERROR_{code}") for name, code in (refuse or {}).items()}
        self._impl: dict[str, Callable[..., Any]] = {
            "nvmlInit": self._init, "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: len(gpus),
            "nvmlDeviceGetHandleByIndex": lambda i: _Handle(self._index(i)),
            "nvmlDeviceGetHandleByUUID": self._by_uuid, "nvmlDeviceGetHandleByPciBusId": self._by_bus,
            "nvmlDeviceGetName": lambda h: gpus[h.index].name,
            "nvmlDeviceGetPciInfo": self._pci,
            "nvmlDeviceGetNvLinkState": self._link_state, "nvmlDeviceGetNvLinkRemotePciInfo": self._remote,
            "nvmlDeviceGetTopologyCommonAncestor": lambda a, b: pynvml.NVML_TOPOLOGY_SYSTEM,
            "nvmlDeviceGetP2PStatus": self._p2p,
            "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: gpus[h.index].pcie[0],
            "nvmlDeviceGetCurrPcieLinkWidth": lambda h: gpus[h.index].pcie[1],
            "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: gpus[h.index].pcie[0],
            "nvmlDeviceGetMaxPcieLinkWidth": lambda h: gpus[h.index].pcie[1],
        }
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._real, name)  # AttributeError for a name pynvml does not have: the point of the fake
        if not callable(real) or isinstance(real, type):
            return real  # constants (NVML_P2P_CAPS_INDEX_READ is the tuple (0,)) and NVMLError classes as they are
        impl = self._impl.get(name, self._not_supported)

        def side_effect(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name in self._refuse:
                raise self._error(self._refuse[name])
            return impl(*args, **kwargs)

        fn = mock.create_autospec(real, side_effect=side_effect)
        self.__dict__[name] = fn
        return fn

    def _error(self, code: int) -> Exception:
        return self._real.NVMLError(code)

    def _not_supported(self, *a: Any, **k: Any) -> Any:
        raise self._error(self._real.NVML_ERROR_NOT_SUPPORTED)

    def _init(self) -> None:
        if self._init_error:
            raise self._error(self._real.NVML_ERROR_LIBRARY_NOT_FOUND)

    def _index(self, i: Any) -> int:
        ctypes.c_uint(i)  # what the real call does with the index: a non-integer fails here as it would there
        if not 0 <= i < len(self._gpus):
            raise self._error(self._real.NVML_ERROR_INVALID_ARGUMENT)
        return i

    def _by_uuid(self, uuid: Any) -> _Handle:
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        for i, g in enumerate(self._gpus):
            if g.uuid == uuid:
                return _Handle(i)
        raise self._error(self._real.NVML_ERROR_NOT_FOUND)

    def _by_bus(self, bus: Any) -> _Handle:
        from labkit.device import normalise_bus_id

        for i, g in enumerate(self._gpus):
            if normalise_bus_id(g.bus_id) == normalise_bus_id(bus):
                return _Handle(i)
        raise self._error(self._real.NVML_ERROR_NOT_FOUND)

    def _pci(self, h: _Handle) -> Any:
        info = self._real.nvmlPciInfo_t()
        info.busId = self._gpus[h.index].bus_id.encode()
        return info

    def _link_state(self, h: _Handle, link: int) -> int:
        links = self._gpus[h.index].nvlinks
        if link >= len(links):
            raise self._error(self._real.NVML_ERROR_INVALID_ARGUMENT)
        return self._real.NVML_FEATURE_ENABLED if links[link] else self._real.NVML_FEATURE_DISABLED

    def _remote(self, h: _Handle, link: int) -> Any:
        info = self._real.nvmlPciInfo_t()
        info.busId = self._gpus[h.index].nvlinks[link].encode()
        return info

    def _p2p(self, a: _Handle, b: _Handle, index: Any) -> int:
        try:
            ctypes.c_int(index)  # the real call hands the index to C: a tuple raises ctypes.ArgumentError there
        except TypeError:
            raise ctypes.ArgumentError(f"argument 3: TypeError: Don't know how to convert parameter 3 ({index!r})") from None
        return self._real.NVML_P2P_STATUS_OK if self._p2p_ok else self._real.NVML_P2P_STATUS_NOT_SUPPORTED


#: What the NVML of a GPU passed through to a virtual machine may refuse (nvidia-smi shows "N/A" or
#: "[Not Supported]"): the PCIe link, persistence mode, clocks and power, topology; a PCIe card has no NVLink at all
#: (every link "Not Supported"). Every NVML query labkit makes that a VM may refuse is here.
VM_REFUSES: dict[str, str] = {
    "nvmlDeviceGetCurrPcieLinkGeneration": "NOT_SUPPORTED", "nvmlDeviceGetCurrPcieLinkWidth": "NOT_SUPPORTED",
    "nvmlDeviceGetMaxPcieLinkGeneration": "NOT_SUPPORTED", "nvmlDeviceGetMaxPcieLinkWidth": "NO_PERMISSION",
    "nvmlDeviceGetNvLinkState": "NOT_SUPPORTED", "nvmlDeviceGetNvLinkRemotePciInfo": "NOT_SUPPORTED",
    "nvmlDeviceGetTopologyCommonAncestor": "NOT_SUPPORTED", "nvmlDeviceGetP2PStatus": "UNKNOWN",
    "nvmlDeviceGetPersistenceMode": "NOT_SUPPORTED", "nvmlDeviceGetClockInfo": "NOT_SUPPORTED",
    "nvmlDeviceGetPowerUsage": "NOT_SUPPORTED",
}


def vm_nvml(name: str = "NVIDIA H100 80GB HBM3", gpus: int = 1) -> FakeNvml:
    """NVML as a GPU passed through to a VM answers it: one PCIe-attached GPU (no NVLink), every query of
    :data:`VM_REFUSES` refused."""
    return FakeNvml([NvmlGpu(name, f"GPU-{i}{i}{i}{i}{i}{i}{i}{i}-0000-0000-0000-000000000000", f"00000000:{0x18 + i:02X}:00.0")
                     for i in range(gpus)], refuse=VM_REFUSES)


class LazyLoadDeadlock(RuntimeError):
    """What a real GPU would do instead: wait for the device to go idle behind a spin kernel that waits for the host."""


class LazyLoading:
    """CUDA's lazy loading (``CUDA_MODULE_LOADING=LAZY``, the default) for a fake CuPy: a kernel's function is loaded at
    its first launch unless something loaded it before (reading its attributes: ``cuFuncGetAttribute``), and loading
    waits for the device to go idle. A first load while a spin kernel holds a stream never finishes on a GPU; here it
    raises :class:`LazyLoadDeadlock`, so a test fails where the GPU would hang until the spin kernel's timeout."""

    def __init__(self) -> None:
        self.holds: list[tuple[Any, Any]] = []  # (the flag as two ints, the object that owns its memory)
        self.loads: list[tuple[str, bool]] = []  # (kernel name, loaded while a stream was held)

    def hold(self, flag_address: int, owner: Any = None) -> None:
        """A spin kernel was launched on the flag at ``flag_address`` (flag[0] == 0 while it holds its stream)."""
        import ctypes

        self.holds.append(((ctypes.c_int * 2).from_address(int(flag_address)), owner))

    @property
    def held(self) -> bool:
        return any(flag[0] == 0 for flag, _ in self.holds)

    def kernel(self, name: str, launch: Callable[..., Any] | None = None) -> "LazyKernel":
        return LazyKernel(self, name, launch)


class LazyKernel:
    """A fake ``cupy.RawKernel`` under :class:`LazyLoading`: ``attributes`` loads it; a first launch loads it too,
    and fails with :class:`LazyLoadDeadlock` while a stream is held. ``launch(grid, block, args, stream)`` is the work."""

    def __init__(self, lazy: LazyLoading, name: str, launch: Callable[..., Any] | None = None) -> None:
        self.lazy, self.name, self._launch, self.loaded = lazy, name, launch, False

    def _load(self) -> None:
        if not self.loaded:
            held = self.lazy.held
            self.lazy.loads.append((self.name, held))
            if held:
                raise LazyLoadDeadlock(f"{self.name} is first loaded while a spin kernel holds a stream: loading waits "
                                       "for the device to go idle, the spin kernel waits for the host (a deadlock)")
            self.loaded = True

    @property
    def attributes(self) -> dict[str, int]:
        self._load()
        return {"max_threads_per_block": 1024, "num_regs": 16, "shared_size_bytes": 0}

    def __call__(self, grid: tuple, block: tuple, args: tuple, stream: Any = None, **kw: Any) -> None:
        self._load()
        if self._launch is not None:
            self._launch(grid, block, args, stream)


# ---------------------------------------------------------------------------------------------- RawKernel launches

_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}

#: What a scalar parameter of each C type must be given as (CuPy passes a NumPy scalar as its dtype's bytes, a Python
#: int as a 64-bit integer and a Python float as a double: an argument of another width is read as garbage).
C_SCALARS: dict[str, str] = {
    "float": "float32", "double": "float64", "half": "float16", "__half": "float16",
    "int": "int32", "int32_t": "int32", "unsigned int": "uint32", "unsigned": "uint32", "uint32_t": "uint32",
    "long long": "int64", "long long int": "int64", "int64_t": "int64", "long": "int64",
    "unsigned long long": "uint64", "unsigned long long int": "uint64", "uint64_t": "uint64", "size_t": "uint64",
    "unsigned long": "uint64", "char": "int8", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "short": "int16", "unsigned short": "uint16",
}


def kernel_params(source: str, name: str) -> list[tuple[str, bool]]:
    """The parameters of ``extern "C" __global__ void name(...)`` in ``source``: ``(base C type, is a pointer)`` each,
    qualifiers dropped (``const float* x`` is ``("float", True)``). Read here from the source text, not by labkit."""
    text = _C_COMMENT.sub(" ", source)
    m = re.search(r"__global__[^;{}()]*?\bvoid\s+" + re.escape(name) + r"\s*\(([^)]*)\)", text, re.S)
    if m is None:
        raise AssertionError(f"no __global__ void {name}(...) in the kernel source")
    out = []
    for raw in filter(None, (p.strip() for p in m.group(1).split(","))):
        pointer = "*" in raw
        words = [w for w in re.split(r"[\s*&]+", raw) if w and w not in _QUALIFIERS]
        out.append((" ".join(words[:-1]), pointer))  # the last word is the parameter's name
    return out


def check_launch(source: str, name: str, args: tuple) -> None:
    """Fail as a GPU would be wrong (silently, there) when ``args`` do not fit ``name``'s parameter list: a count that
    differs, an array or a 64-bit address where a scalar is, or a scalar of another width or kind than its C type."""
    import numpy as np

    params = kernel_params(source, name)
    assert isinstance(args, tuple), f"{name}: CuPy's RawKernel takes its arguments as a tuple, got {type(args).__name__}"
    assert len(args) == len(params), f"{name} takes {len(params)} arguments, launched with {len(args)}"
    for k, (arg, (ctype, pointer)) in enumerate(zip(args, params)):
        where = f"{name} argument {k} ({ctype}{' *' if pointer else ''})"
        if pointer:
            if hasattr(arg, "data") and hasattr(arg.data, "ptr"):  # a device array
                want = C_SCALARS.get(ctype)
                assert want is None or np.dtype(arg.dtype) == np.dtype(want), f"{where}: an array of {arg.dtype}"
            else:  # an address: CuPy passes a uint64 / int64 NumPy scalar as the pointer's 8 bytes
                assert isinstance(arg, (np.uint64, np.int64)), f"{where}: {type(arg).__name__} is not a device address"
            continue
        want = C_SCALARS.get(ctype)
        assert want is not None, f"{where}: the fake does not know this C type; add it to C_SCALARS"
        assert not hasattr(arg, "shape") or isinstance(arg, np.generic), f"{where}: an array where a scalar belongs"
        if isinstance(arg, np.generic):
            got = arg.dtype.name
        elif isinstance(arg, bool):
            got = "bool"
        elif isinstance(arg, int):
            got = "int64"
        elif isinstance(arg, float):
            got = "float64"
        else:
            raise AssertionError(f"{where}: {type(arg).__name__} cannot be passed to a kernel")
        assert got == want, f"{where}: given a {got}, the kernel reads a {want}"


# ---------------------------------------------------------------------------------------------- a NumPy-backed CuPy


class DeviceArray:
    """Marker base: see :func:`array_type`."""


def array_type() -> type:
    """``numpy.ndarray`` with CuPy's ``.data.ptr``, ``.get()`` and ``.set()``: a stand-in for ``cupy.ndarray``."""
    import numpy as np

    class _Memory:
        def __init__(self, arr: Any) -> None:
            self.ptr = int(arr.__array_interface__["data"][0])

    class FakeDeviceArray(np.ndarray, DeviceArray):
        @property
        def data(self) -> Any:  # noqa: D401 - CuPy's MemoryPointer, as far as .ptr goes
            return _Memory(self)

        def get(self, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True) -> Any:
            if out is None:
                return np.array(self, copy=True).view(np.ndarray)
            out[...] = self
            return out

        def set(self, arr: Any, stream: Any = None) -> None:
            self[...] = arr

    return FakeDeviceArray


class _Ctx:
    def __enter__(self) -> "_Ctx":
        return self

    def __exit__(self, *a: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass


class CheckedRawKernel:
    """``cupy.RawKernel`` whose launches are checked against the kernel's parameter list (:func:`check_launch`)
    and then run by a NumPy version of the kernel from ``impls`` (by name), if there is one."""

    def __init__(self, fake: "ArrayCuPy", code: str, name: str, options: tuple = (), **kw: Any) -> None:
        kernel_params(code, name)  # the entry exists in the source
        self.fake, self.code, self.name, self.options = fake, code, name, options
        self.attributes = {"max_threads_per_block": 1024, "num_regs": 32, "shared_size_bytes": 0}

    def __call__(self, grid: tuple, block: tuple, args: tuple, *, stream: Any = None, shared_mem: int = 0) -> None:
        check_launch(self.code, self.name, args)
        self.fake.launches.append((self.name, grid, block))
        impl = self.fake.impls.get(self.name)
        if impl is not None:
            impl(grid, block, *args)


class _TraceProxy:
    """What ``cupy.fuse`` passes a function while it traces it (CuPy's ``_ScalarProxy``/``_ArrayProxy``): arithmetic
    gives another proxy; it is no number, and its ``repr`` raises, as the new fusion's proxy's does."""

    __module__ = "cupy._core._fusion_interface"

    def _op(self, *other: Any) -> "_TraceProxy":
        return _TraceProxy()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __neg__ = _op

    def __repr__(self) -> str:
        raise AttributeError("'_ScalarProxy' object has no attribute '_emit_param_name'")

    def __float__(self) -> float:
        raise TypeError("a fusion proxy is no number")


class ArrayCuPy:
    """Enough of ``cupy`` (on NumPy, in host memory) for labkit's GPU paths that move data: arrays with device
    pointers, ``memcpyAsync`` on real addresses, streams and events (no timing: every elapsed time is 1 ms), and
    :class:`CheckedRawKernel` launches. ``impls``: NumPy versions of the kernels, by name."""

    def __init__(self, impls: dict[str, Callable[..., None]] | None = None) -> None:
        import cupy
        import numpy as np

        self.np, self.Array = np, array_type()
        self.impls = dict(impls or {})
        self.launches: list[tuple[str, tuple, tuple]] = []
        self.__version__ = "14.0.0 (fake)"
        for t in ("float16", "float32", "float64", "int32", "int64", "uint8", "uint32", "uint64", "nan", "bool_"):
            setattr(self, t, getattr(np, t))
        fake = self
        real_rt = cupy.cuda.runtime

        class _Runtime:
            memcpyHostToDevice, memcpyDeviceToHost = real_rt.memcpyHostToDevice, real_rt.memcpyDeviceToHost
            memcpyDeviceToDevice, memcpyDefault = real_rt.memcpyDeviceToDevice, real_rt.memcpyDefault

            @staticmethod
            def memcpyAsync(dst: int, src: int, size: int, kind: int, stream: int) -> None:
                ctypes.memmove(int(dst), int(src), int(size))

            @staticmethod
            def deviceSynchronize() -> None:
                pass

            @staticmethod
            def getDevice() -> int:
                return 0

        check_fake_against(_Runtime, real_rt, ["memcpyAsync", "deviceSynchronize", "getDevice"])
        for name in ("synchronize", "wait_event", "record"):  # the stream and event methods the fake offers exist
            assert hasattr(cupy.cuda.Stream, name) and (name == "wait_event" or hasattr(cupy.cuda.Event, name)), name

        class _Stream(_Ctx):
            def __init__(self, non_blocking: bool = False, null: bool = False, ptds: bool = False, priority: int = 0) -> None:
                self.ptr = id(self)

            def wait_event(self, event: Any) -> None:
                pass

            def record(self, event: Any = None) -> Any:
                return event if event is not None else _Event()

        class _Event(_Ctx):
            def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
                pass

            def record(self, stream: Any = None) -> None:
                pass

        class _Cuda:
            runtime = _Runtime
            Stream, Event = _Stream, _Event

            @staticmethod
            def Device(d: int | None = None) -> _Ctx:
                return _Ctx()

            @staticmethod
            def get_elapsed_time(a: Any, b: Any) -> float:
                return 1.0

            @staticmethod
            def get_current_stream() -> Any:
                return _Stream()

        self.cuda = _Cuda

        class _Rng:
            def __init__(self, seed: Any = None) -> None:
                self.g = np.random.default_rng(seed)

            def standard_normal(self, size: Any = None, dtype: Any = np.float64) -> Any:
                return fake.asarray(self.g.standard_normal(size, dtype=dtype))

            def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None, dtype: Any = np.float64) -> Any:
                return fake.asarray(self.g.uniform(low, high, size).astype(dtype))

        class _Random:
            default_rng = _Rng

            @staticmethod
            def standard_normal(size: Any = None, dtype: Any = np.float64) -> Any:
                return _Rng().standard_normal(size, dtype)

        self.random = _Random

    # arrays
    def asarray(self, a: Any, dtype: Any = None) -> Any:
        return self.np.array(a, dtype=dtype, copy=True).view(self.Array)

    def empty(self, shape: Any, dtype: Any = float) -> Any:
        return self.np.empty(shape, dtype=dtype).view(self.Array)

    def zeros(self, shape: Any, dtype: Any = float) -> Any:
        return self.np.zeros(shape, dtype=dtype).view(self.Array)

    def full(self, shape: Any, fill_value: Any, dtype: Any = None) -> Any:
        return self.np.full(shape, fill_value, dtype=dtype).view(self.Array)

    def asnumpy(self, a: Any, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True) -> Any:
        return self.np.array(a, copy=True).view(self.np.ndarray)

    def allclose(self, a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> Any:
        return self.np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)

    def matmul(self, a: Any, b: Any) -> Any:
        return self.np.matmul(a, b).view(self.Array)

    def fuse(self, fn: Callable[..., Any] | None = None, **kw: Any) -> Any:
        """``cupy.fuse``: the first call traces ``fn`` on proxies, as CuPy does (no numbers, a ``repr`` that raises:
        a function that checks its scalars as numbers fails here as under real CuPy, review gpu-review-3 B2), then
        runs it on the arrays. The real tracing is rehearsed in tests/test_rehearsal_cupy.py."""
        def fused(f: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(f)
            def call(*args: Any) -> Any:
                f(*[_TraceProxy() for _ in args])
                return f(*args)
            return call
        return fused(fn) if fn is not None else fused

    def RawKernel(self, code: str, name: str, options: tuple = (), **kw: Any) -> CheckedRawKernel:
        return CheckedRawKernel(self, code, name, options, **kw)

    def get_default_memory_pool(self) -> Any:
        class _Pool:
            def free_all_blocks(self) -> None:
                pass

        return _Pool()

    def cupyx(self) -> Any:
        """A matching ``cupyx`` (``empty_pinned``, ``profiler.benchmark`` with 1 ms per call)."""
        import types

        np = self.np
        mod = types.ModuleType("cupyx")
        mod.empty_pinned = lambda shape, dtype=float: np.empty(shape, dtype=dtype)  # type: ignore[attr-defined]
        prof = types.ModuleType("cupyx.profiler")

        def benchmark(func: Callable[..., Any], args: tuple = (), n_repeat: int = 10000, n_warmup: int = 10, **kw: Any) -> Any:
            func(*args)
            return types.SimpleNamespace(gpu_times=np.full((1, n_repeat), 1e-3), cpu_times=np.full(n_repeat, 1e-3))

        prof.benchmark = benchmark  # type: ignore[attr-defined]
        mod.profiler = prof  # type: ignore[attr-defined]
        return mod


def _grid_threads(grid: tuple, block: tuple) -> int:
    g, b = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
    return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]


def scale_shift_impl(grid: tuple, block: tuple, x: Any, y: Any, a: Any, b: Any, n: Any) -> None:
    """``scale_shift``'s grid-stride loop (kernels/cuda/scale_shift.cu): y[i] = a * x[i] + b for i < n."""
    n = int(n)
    y[:n] = a * x[:n] + b


def leaky_relu_impl(grid: tuple, block: tuple, x: Any, y: Any, alpha: Any, n: Any) -> None:
    """``leaky_relu`` with its bounds check: one thread per element, threads past n write nothing."""
    import numpy as np

    m = min(int(n), _grid_threads(grid, block))
    y[:m] = np.where(x[:m] > 0, x[:m], alpha * x[:m])


def wmma_gemm_impl(grid: tuple, block: tuple, A: Any, B: Any, C: Any, M: Any, N: Any, K: Any) -> None:
    """``wmma_gemm``: C = A @ B, FP16 inputs, FP32 accumulation."""
    import numpy as np

    a = np.asarray(A, dtype=np.float32).reshape(int(M), int(K))
    b = np.asarray(B, dtype=np.float32).reshape(int(K), int(N))
    C.reshape(int(M), int(N))[...] = a @ b


KERNEL_IMPLS = {"scale_shift": scale_shift_impl, "leaky_relu": leaky_relu_impl, "wmma_gemm": wmma_gemm_impl}


# ---------------------------------------------------------------------------------------------- a clocked CuPy for labkit.bandwidth
# Streams carry a clock that each copy advances at a link's rate (FakeRuntime.rates), so the figures labkit.bandwidth
# computes from event times are known in advance; RawKernel launches are checked against the kernel's parameters
# (check_launch) and run under LazyLoading.

class _FakeStream:
    def __init__(self, cp: "FakeCuPy") -> None:
        self.cp, self.clock = cp, 0.0
        self.ptr = id(self)
        cp.streams[self.ptr] = self

    def synchronize(self) -> None:
        pass

    def wait_event(self, event: "_FakeEvent") -> None:
        self.clock = max(self.clock, event.t)  # work queued after this starts no earlier than the event
        self.cp.waits += 1


class _FakeEvent:
    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
        self.t = 0.0

    def record(self, stream: _FakeStream | None = None) -> None:
        self.t = stream.clock if stream is not None else 0.0

    def synchronize(self) -> None:
        pass


class _FakeDevice:
    def __init__(self, cp: "FakeCuPy", d: int | None = None) -> None:
        self.cp, self.d = cp, d

    def __enter__(self) -> "_FakeDevice":
        self.prev = self.cp.runtime.current
        if self.d is not None:
            self.cp.runtime.current = self.d
        return self

    def __exit__(self, *a: Any) -> None:
        self.cp.runtime.current = self.prev

    def synchronize(self) -> None:
        pass


class _FakeRuntime:
    """cupy.cuda.runtime as far as labkit.bandwidth goes; the fixture binds every method to the real signature and
    the constants are the real ones."""

    memcpyHostToDevice, memcpyDeviceToHost, memcpyDeviceToDevice = 1, 2, 3
    hostAllocPortable, hostAllocMapped, hostAllocWriteCombined = 1, 2, 4  # replaced by the real ones (install_bandwidth_fake)

    def __init__(self, cp: "FakeCuPy", n: int, can_peer: bool, free: int) -> None:
        self.cp, self.n, self.can_peer, self.free_bytes = cp, n, can_peer, free
        self.current = 0
        self.device_mem: dict[int, tuple[int, int]] = {}
        self.host_mem: dict[int, Any] = {}
        self.next = 1 << 40
        self.copies: list[tuple[str, int]] = []
        self.host_allocs: list[tuple[int, int]] = []  # (size, flags) of every hostAlloc
        self.rates = {"h2d": 50e9, "d2h": 50e9, "d2d": 2000e9, "peer": 100e9, "staged": 10e9, "sm": 1800e9}  # B/s

    def getDeviceCount(self) -> int:
        return self.n

    def getDevice(self) -> int:
        return self.current

    def setDevice(self, d: int) -> None:
        self.current = d

    def deviceCanAccessPeer(self, a: int, b: int) -> int:
        return int(self.can_peer)

    def memGetInfo(self) -> tuple[int, int]:
        return self.free_bytes, 2 * self.free_bytes

    def malloc(self, n: int) -> int:
        self.next += n + 4096
        self.device_mem[self.next] = (self.current, n)
        return self.next

    def free(self, p: int) -> None:
        del self.device_mem[p]

    def memset(self, p: int, v: int, n: int) -> None:
        assert p in self.device_mem

    def hostAlloc(self, n: int, flags: int) -> int:
        """cudaHostAlloc(size, flags): ``flags`` an OR of the real cudaHostAlloc* constants (so a size passed as the
        flags, the arguments swapped, fails here), and Mapped among them: the spin kernel and the copies read
        pinned memory through its device address."""
        known = self.hostAllocPortable | self.hostAllocMapped | self.hostAllocWriteCombined
        assert isinstance(n, int) and n > 0, f"hostAlloc size {n!r}"
        assert isinstance(flags, int) and flags & ~known == 0, (
            f"hostAlloc flags {flags:#x} are not an OR of cudaHostAllocPortable, Mapped, WriteCombined "
            f"({self.hostAllocPortable}, {self.hostAllocMapped}, {self.hostAllocWriteCombined}): arguments swapped?")
        assert flags & self.hostAllocMapped, "pinned memory labkit hands to a kernel or a copy engine must be mapped"
        self.host_allocs.append((n, flags))
        buf = ctypes.create_string_buffer(n)
        p = ctypes.addressof(buf)
        self.host_mem[p] = buf
        return p

    def freeHost(self, p: int) -> None:
        del self.host_mem[p]

    def _advance(self, stream_ptr: int, nbytes: int, rate: float, what: str) -> None:
        s = self.cp.streams[stream_ptr]
        s.clock += 2e-6 + nbytes / rate  # a fixed cost per copy, then the link's rate
        self.copies.append((what, nbytes))

    def memcpyAsync(self, dst: int, src: int, n: int, kind: int, stream: int) -> None:
        what = {self.memcpyHostToDevice: "h2d", self.memcpyDeviceToHost: "d2h", self.memcpyDeviceToDevice: "d2d"}[kind]
        self._advance(stream, n, self.rates[what], what)

    def memcpyPeerAsync(self, dst: int, dd: int, src: int, sd: int, n: int, stream: int) -> None:
        peer_on = (sd, dd) in self.cp.peer_enabled
        self._advance(stream, n, self.rates["peer" if peer_on else "staged"], "peer")

    def deviceGetAttribute(self, attr: int, d: int) -> int:
        return {13: 1_980_000, 16: 132}[attr]

    def getDeviceProperties(self, d: int) -> dict[str, Any]:
        return {"name": b"Fake H200"}

    def deviceSynchronize(self) -> None:
        pass


def _fake_kernel(cp: "FakeCuPy", source: str, name: str) -> Any:
    """A RawKernel under CUDA's lazy loading (gpu_fakes.LazyKernel): a first load behind a held stream fails."""

    def launch(grid: tuple, block: tuple, args: tuple, stream: _FakeStream | None) -> None:
        assert stream is not None
        check_launch(source, name, args)  # the arguments fit the kernel's parameter list
        if name == "labkit_spin":
            ctypes.c_int.from_address(int(args[0])).value  # the flag must be readable host memory
            cp.lazy.hold(int(args[0]), cp.runtime.host_mem.get(int(args[0])))
            return
        stream.clock += 1e-6 + int(args[2]) / cp.runtime.rates["sm"]
        cp.runtime.copies.append(("sm", int(args[2])))

    return cp.lazy.kernel(name, launch)


class FakeCuPy:
    uint64 = np.uint64

    def __init__(self, n: int = 2, can_peer: bool = True, free: int = 64 * 2**30) -> None:
        self.lazy = LazyLoading()
        self.streams: dict[int, _FakeStream] = {}
        self.waits = 0
        self.peer_enabled: set[tuple[int, int]] = set()
        self.runtime = _FakeRuntime(self, n, can_peer, free)
        cp = self

        class _Cuda:
            runtime = cp.runtime

            @staticmethod
            def Device(d: int | None = None) -> _FakeDevice:
                return _FakeDevice(cp, d)

            @staticmethod
            def Stream(non_blocking: bool = False) -> _FakeStream:
                return _FakeStream(cp)

            Event = _FakeEvent

            @staticmethod
            def get_elapsed_time(a: _FakeEvent, b: _FakeEvent) -> float:
                return (b.t - a.t) * 1e3

        self.cuda = _Cuda

    def RawKernel(self, src: str, name: str) -> Any:
        kernel_params(src, name)  # the entry is in the source
        return _fake_kernel(self, src, name)


class _FakeCudart:
    """cuda.bindings.runtime, as far as peer access goes."""

    class cudaError_t:
        cudaSuccess, cudaErrorPeerAccessAlreadyEnabled, cudaErrorPeerAccessNotEnabled = 0, 704, 705

    def __init__(self, cp: FakeCuPy) -> None:
        self.cp = cp

    def cudaSetDevice(self, d: int) -> tuple[int]:
        self.cp.runtime.current = d
        return (0,)

    def cudaDeviceEnablePeerAccess(self, peer: int, flags: int) -> tuple[int]:
        key = (self.cp.runtime.current, peer)
        if key in self.cp.peer_enabled:
            return (704,)
        self.cp.peer_enabled.add(key)
        return (0,)

    def cudaDeviceDisablePeerAccess(self, peer: int) -> tuple[int]:
        key = (self.cp.runtime.current, peer)
        if key not in self.cp.peer_enabled:
            return (705,)
        self.cp.peer_enabled.discard(key)
        return (0,)

    def cudaGetErrorString(self, err: int) -> tuple[int, bytes]:
        return (0, b"fake error")


def install_bandwidth_fake(monkeypatch: Any, **kw: Any) -> FakeCuPy:
    """A :class:`FakeCuPy` put behind ``labkit.bandwidth`` (and its peer-access calls), its runtime checked against
    the real ``cupy.cuda.runtime`` (same functions, same signatures, the real constants). ``kw``: FakeCuPy's."""
    import pytest

    cupy = pytest.importorskip("cupy")
    from cuda.bindings import runtime as cudart

    from labkit import bandwidth as bw
    from labkit import spin

    cp = FakeCuPy(**kw)
    real = cupy.cuda.runtime
    for name in ("memcpyHostToDevice", "memcpyDeviceToHost", "memcpyDeviceToDevice", "hostAllocPortable", "hostAllocMapped",
                 "hostAllocWriteCombined"):
        setattr(cp.runtime, name, getattr(real, name))  # the real constants
    check_fake_against(cp.runtime, real)  # every fake function exists there and takes the same arguments
    for cls, real_cls in ((_FakeStream, cupy.cuda.Stream), (_FakeEvent, cupy.cuda.Event)):
        for name in ("synchronize", "wait_event", "record"):
            if hasattr(cls, name):
                assert hasattr(real_cls, name), f"{real_cls.__name__} has no {name}"
    assert all(hasattr(cudart, n) for n in dir(_FakeCudart) if n.startswith("cuda"))
    monkeypatch.setattr(bw, "_gpu", lambda what: cp)
    monkeypatch.setattr(bw, "_cudart", lambda: _FakeCudart(cp))
    monkeypatch.setattr(bw, "_p2p_reasons_safe", lambda: {(0, 1): "NVML says the PCIe topology does not support peer-to-peer"})
    monkeypatch.setattr(bw, "_KERNEL_CACHE", {})
    monkeypatch.setattr(spin, "_KERNELS", {})
    for name in ("attributes", "name"):
        assert hasattr(cupy.RawKernel, name), name  # what labkit.spin.load reads exists on the real RawKernel
    return cp
