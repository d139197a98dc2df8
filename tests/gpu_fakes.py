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

    def __init__(self, gpus: list[NvmlGpu], p2p_ok: bool = True, init_error: bool = False) -> None:
        import pynvml

        self._real = pynvml
        self._gpus, self._p2p_ok, self._init_error = gpus, p2p_ok, init_error
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
