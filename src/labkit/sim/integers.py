"""Integer arithmetic in the simulator as Numba does it on a GPU.

Numba types arithmetic on integers narrower than 64 bits as 64-bit (``uint8 * 299`` is ``int64``), while
NumPy 2 keeps the narrow type and raises ``OverflowError`` (``np.uint8(200) * 299``) or wraps. Reading an
element of a narrow integer array as a 64-bit integer (:data:`READS`: a Python int for 8 bits, which also keeps
``float32 * pixel`` in float32 as Numba does) makes the simulator compute what the GPU computes; a store
of a wide integer into a narrow array keeps the low bits, as a GPU store does, and so does an atomic.

One difference remains: Numba types ``uint8 - uint8`` as ``uint64`` (it wraps around below zero), the
simulator as ``int64`` (it goes negative). Stored back into a narrow array both give the same bits.

8-bit elements read as Python ints (fast, and NumPy treats them as Numba types them beside a ``float32``), 16- and
32-bit ones as ``np.int64``. A kernel that calls a bit intrinsic (``cuda.popc``, ``clz``, ``brev``, ``ffs``), itself
or in a device function it calls, reads them tagged with their width instead (:func:`tag_bytes_for`): the same
numbers (:class:`Byte`, :class:`Wide16`, :class:`Wide32`), whose intrinsics count the element's bits. (Making a
tagged ``np.int64`` costs seven times a plain one: a kernel that never asks for bits does not pay for them.)
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np


class Int32(int):
    """An integer that Numba types as 32-bit on a GPU (``threadIdx.x``, an ``int32`` argument of a declared
    signature): arithmetic with it widens as Python's (Numba widens ``int32`` with an ``int64``), and ``cuda.popc``,
    ``clz``, ``ffs`` and ``brev`` count its 32 bits."""

    __slots__ = ()
    bits = 32


class Int16(int):
    """:class:`Int32` of 16 bits (an ``int16``/``uint16`` argument of a declared signature)."""

    __slots__ = ()
    bits = 16


class Int8(int):
    """:class:`Int32` of 8 bits."""

    __slots__ = ()
    bits = 8


TAGGED_INTS = {8: Int8, 16: Int16, 32: Int32}


class Byte(int):
    """An element of an 8-bit integer array as a kernel that uses bit intrinsics reads it: a Python int in every
    operation (with a NumPy scalar too: NumPy defers to it, and it hands NumPy a plain int, so ``np.float32 * pixel``
    stays ``float32`` as Numba types it), whose ``cuda.popc``, ``clz``, ``brev`` and ``ffs`` count its 8 bits. Any
    arithmetic gives a plain int (Numba widens ``uint8`` arithmetic to 64 bits)."""

    __slots__ = ()
    bits = 8
    __array_priority__ = 1000.0  # (NumPy's scalars defer to it: its own operators decide)
    __hash__ = int.__hash__

    def __repr__(self) -> str:
        return int.__repr__(self)


def _forward(op: Any) -> Any:
    return lambda self, other: op(int(self), other)


def _reflected(op: Any) -> Any:
    return lambda self, other: op(other, int(self))


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift"):
    _op = getattr(operator, _name if _name not in ("and", "or") else f"{_name}_")
    setattr(Byte, f"__{_name}__", _forward(_op))
    setattr(Byte, f"__r{_name}__", _reflected(_op))
Byte.__divmod__ = _forward(divmod)  # type: ignore[method-assign]
Byte.__rdivmod__ = _reflected(divmod)  # type: ignore[method-assign]
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Byte, f"__{_name}__", _forward(getattr(operator, _name)))

_UNSIGNED_BYTES = [Byte(v) for v in range(256)]
_SIGNED_BYTES = [Byte(v) for v in range(-128, 128)]


def _signed_byte(value: Any) -> Byte:
    return _SIGNED_BYTES[int(value) + 128]


#: what an 8-bit element reads as in a launch whose kernel uses bit intrinsics (:func:`tag_bytes_for`)
BYTE_READS: dict[np.dtype, Any] = {np.dtype(np.uint8): _UNSIGNED_BYTES.__getitem__, np.dtype(np.int8): _signed_byte}
_byte_tags = [False]  # this launch reads 8-bit elements as Byte (set by tag_bytes_for)
_INTRINSICS = frozenset({"popc", "clz", "brev", "ffs"})
_uses: dict[Any, bool] = {}


def uses_bit_intrinsics(fn: Any, seen: set | None = None) -> bool:
    """True when ``fn`` (a kernel's Python function) or a device function it names calls ``popc``, ``clz``, ``brev``
    or ``ffs`` (read from the names of its code, so a kernel pays nothing for it after its first launch)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    found = _uses.get(code)
    if found is not None:
        return found
    seen = seen if seen is not None else set()
    seen.add(code)
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    found = bool(names & _INTRINSICS)
    glob = getattr(fn, "__globals__", {})
    named = [glob.get(name) for name in names] + [_contents(c) for c in getattr(fn, "__closure__", None) or ()]
    for obj in named if not found else ():
        try:
            inner = getattr(obj, "py_func", None)
        except Exception:  # noqa: BLE001 - an object that answers every attribute with an error of its own
            inner = None
        if inner is not None and getattr(inner, "__code__", None) not in seen and uses_bit_intrinsics(inner, seen):
            found = True
            break
    _uses[code] = found
    return found


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # (an empty cell)
        return None


def tag_bytes_for(fn: Any) -> None:
    """Arrays made for the next launch of ``fn`` read 8-bit elements as :class:`Byte` if it uses bit intrinsics."""
    _byte_tags[0] = uses_bit_intrinsics(fn)


def reads_for(dtype: np.dtype) -> Any:
    """What a read of an element of ``dtype`` gives for this launch (None: the element itself)."""
    if dtype.kind not in "iu" or dtype.itemsize >= 8:
        return None
    if not _byte_tags[0]:  # (the kernel asks no element for its width)
        return int if dtype.itemsize == 1 else np.int64
    return BYTE_READS[dtype] if dtype.itemsize == 1 else READS[dtype]


class _Wide(np.int64):
    """An element of a narrow integer array as a kernel reads it: an ``np.int64`` (arithmetic as Numba types it on
    a GPU) that remembers its element's width for the bit intrinsics (``bits``)."""

    __slots__ = ()
    bits = 64

    def __repr__(self) -> str:
        return repr(np.int64(self))


class Wide8(_Wide):
    __slots__ = ()
    bits = 8


class Wide16(_Wide):
    __slots__ = ()
    bits = 16


class Wide32(_Wide):
    __slots__ = ()
    bits = 32


#: the class a narrow NumPy integer scalar widens to (:func:`widen`: what an atomic returns): ``np.int64``, 16 and
#: 32 bits tagged with their width.
WIDE: dict[np.dtype, type] = {
    np.dtype(t): {1: Wide8, 2: Wide16, 4: Wide32}[np.dtype(t).itemsize]
    for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)
}

#: the class a kernel's read of an element of each narrow integer dtype gives (the arrays of :mod:`labkit.sim.arrays`
#: and :mod:`labkit.sim.memory`). 8-bit elements (images) read as Python ``int``: with integers it widens as Numba's
#: int64 does (``uint8 * 299``), and with a float32 it stays float32 (NumPy treats a Python int as weak), as Numba
#: types ``float32 * uint8`` on a GPU: ``np.float32(0.299) * pixel`` costs 57 ns where an ``np.int64`` pixel took
#: 1,060 ns and gave a float64. A kernel that calls bit intrinsics reads them as :class:`Byte` (:func:`reads_for`); an
#: int // int of two pixels by zero stops the launch with labkit's words (:class:`labkit.sim.errors.ZeroDivisor`).
READS: dict[np.dtype, type] = {dt: (int if dt.itemsize == 1 else cls) for dt, cls in WIDE.items()}


def widen(value: Any) -> Any:
    """A narrow NumPy integer scalar as ``np.int64`` (16 and 32 bits tagged with their width, :class:`Wide32`);
    anything else unchanged."""
    if isinstance(value, np.integer) and value.dtype.itemsize < 8:
        return WIDE[value.dtype](value)
    return value


def bit_width(value: Any) -> int:
    """Bits of an integer as Numba types it on a GPU: 32 for ``threadIdx.x``, an element of an ``int32`` array or an
    ``int32`` argument; a NumPy integer's own width; 64 for a Python ``int``."""
    bits = getattr(type(value), "bits", None)
    if bits is not None:
        return bits
    if isinstance(value, np.integer):
        return value.dtype.itemsize * 8
    return 64


def tagged(value: Any, dtype: np.dtype) -> Any:
    """``value`` as a kernel gets an integer argument declared of ``dtype`` in its signature: narrower than 64
    bits, wrapped to that width and tagged (:class:`Int32`); 64 bits, as it is."""
    if dtype.itemsize >= 8 or isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        return value
    return TAGGED_INTS[dtype.itemsize * 8](int(store_value(int(value), dtype)))


_RANGES: dict[np.dtype, tuple[int, int]] = {}


def _range(dtype: np.dtype) -> tuple[int, int]:
    found = _RANGES.get(dtype)
    if found is None:
        info = np.iinfo(dtype)
        found = _RANGES[dtype] = (int(info.min), int(info.max))
    return found


def store_value(value: Any, dtype: np.dtype) -> Any:
    """``value`` ready to store into an integer array of ``dtype``: integers wrap to its width like a GPU store."""
    if type(value) is int and dtype.kind in "iu":
        low, high = _range(dtype)
        if low <= value <= high:  # the usual case: it fits, nothing to wrap
            return value
    if dtype.kind in "iu" and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        wide = np.uint64 if isinstance(value, np.unsignedinteger) or (isinstance(value, int) and value >= 1 << 63) else np.int64
        try:
            return np.array(value, dtype=wide).astype(dtype)
        except OverflowError:  # beyond 64 bits: keep the low 64, as the GPU's int64 arithmetic would have
            return np.array(int(value) & ((1 << 64) - 1), dtype=np.uint64).astype(dtype)
    return value


def _cast(value: Any, dtype: np.dtype) -> Any:
    """An atomic's operand in the array's own type, as Numba converts it on a GPU."""
    if dtype.kind in "iu" and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return dtype.type(store_value(value, dtype))
    if dtype.kind == "f" and isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return dtype.type(value)
    return value


def _atomic(original: Any) -> Any:
    def atomic(self: Any, array: Any, index: Any, *rest: Any) -> Any:
        dtype = getattr(array, "dtype", None)
        if isinstance(dtype, np.dtype):
            rest = tuple(_cast(v, dtype) for v in rest)
        with np.errstate(over="ignore", invalid="ignore"):
            return widen(original(self, array, index, *rest))

    return atomic


_ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "cas")
_installed = False


def install() -> None:
    """Make element reads and stores of kernels' array arguments follow GPU integer rules (sim mode; idempotent)."""
    global _installed
    if _installed:
        return
    from numba.cuda.simulator.cudadrv import devicearray

    cls = devicearray.FakeWithinKernelCUDAArray
    get, put = cls.__getitem__, cls.__setitem__

    def getitem(self: Any, idx: Any) -> Any:
        return widen(get(self, idx))

    def setitem(self: Any, idx: Any, value: Any) -> None:
        dtype = getattr(self._item, "dtype", None)
        put(self, idx, store_value(value, dtype) if isinstance(dtype, np.dtype) else value)

    cls.__getitem__, cls.__setitem__ = getitem, setitem
    from numba.cuda.simulator import kernelapi

    for name in _ATOMICS:  # integer atomics wrap around in the array's width, as on a GPU
        setattr(kernelapi.FakeCUDAAtomic, name, _atomic(kernelapi.FakeCUDAAtomic.__dict__[name]))
    _installed = True
