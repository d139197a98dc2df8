"""PTX entries, compiles for the course's architectures and launch checks: what an NVRTC launch
(:mod:`labkit.cuda.cpp`) and the C++ stand-in (:mod:`labkit.cuda.host`) share. Split from ``cuda_cpp`` (issue 32)
so that the stand-in no longer imports the module that imports it; ``labkit.cuda.cpp`` re-exports every name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from labkit.errors import LabkitError
from labkit.validate import require_int, require_sequence, require_str

#: The architectures the course compiles for: Volta, Ampere, Hopper.
COURSE_ARCHES = ("sm_70", "sm_80", "sm_90")

# ----------------------------------------------------------------------------------------- PTX entries
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+([\w$]+)")


@dataclass(frozen=True)
class Entry:
    """One kernel entry point in PTX: its (possibly mangled) name, parameter types and body text."""

    name: str
    params: tuple[str, ...]  # PTX types: "u64" (a pointer or a 64-bit integer), "f32", "u32", ...
    body: str

    @property
    def mangled(self) -> bool:
        """True when the name is a C++-mangled one (``_Z...``): the source lacks ``extern "C"``."""
        return self.name.startswith("_Z")

    @property
    def plain_name(self) -> str:
        """The name as written in the source (demangled from ``_Z<len><name>...`` when needed)."""
        m = re.match(r"_Z(\d+)", self.name)
        if m:
            k = int(m.group(1))
            start = m.end()
            return self.name[start : start + k]
        return self.name


def entries(ptx_text: str) -> list[Entry]:
    """Every ``.entry`` (kernel) in a PTX text, in order."""
    _ptx_text(ptx_text)
    found = []
    matches = list(_ENTRY.finditer(ptx_text))
    for k, m in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(ptx_text)
        params = tuple(t for t, _ in _PARAM.findall(m.group(2)))
        found.append(Entry(m.group(1), params, ptx_text[m.end() : end]))
    return found


def _ptx_text(ptx_text: Any) -> str:
    if not isinstance(ptx_text, str):
        raise LabkitError(
            f"ptx_text must be PTX text (a string), got {ptx_text!r:.60}.",
            fix="Pass the .text of a compiled PTX, e.g. compile_for(source, name)['sm_90'].text.",
        )
    return ptx_text


def _entry(entry: Any) -> "Entry":
    if not isinstance(entry, Entry):
        raise LabkitError(f"entry must be a kernel Entry (find_entry(ptx_text, name) returns one), got {entry!r:.60}.")
    return entry


def _arches(arches: Any) -> list[str]:
    return require_sequence(
        arches, "arches", what="a list of architecture names such as ['sm_80', 'sm_90']", item=lambda a, n: require_str(a, n)
    )


def find_entry(ptx_text: str, name: str, *, n_params: int | None = None) -> Entry:
    """The kernel called ``name``; raise :class:`LabkitError` saying what is wrong (missing, mangled, wrong arity)."""
    _ptx_text(ptx_text)
    name = require_str(name, "name", fix='The kernel\'s name as declared: extern "C" __global__ void NAME(...).')
    n_params = None if n_params is None else require_int(n_params, "n_params", min=0)
    all_entries = entries(ptx_text)
    for e in all_entries:
        if e.name == name:
            if n_params is not None and len(e.params) != n_params:
                raise LabkitError(
                    f"kernel {name!r} has {len(e.params)} parameter(s); the exercise calls it with {n_params}.",
                    fix="Use exactly the parameter list the task gives, in that order.",
                )
            return e
    for e in all_entries:
        if e.mangled and e.plain_name == name:
            raise LabkitError(
                f"kernel {name!r} compiled, but under the C++ name {e.name!r}, so CuPy cannot find it by name.",
                fix='Start the declaration with extern "C": extern "C" __global__ void ' + name + "(...)",
            )
    names = ", ".join(e.plain_name for e in all_entries) or "none"
    raise LabkitError(
        f"the source has no kernel called {name!r} (kernels found: {names}).",
        fix=f'Declare it as extern "C" __global__ void {name}(...), spelled exactly so.',
    )


# ----------------------------------------------------------------------------------------- bounds-check signal
_REG = re.compile(r"%[\w.]+")


def _instructions(body: str) -> list[tuple[str | None, str, list[str]]]:
    """(guard predicate, opcode, operands) for each instruction of an entry body."""
    out = []
    for raw in body.splitlines():
        line = raw.split("//")[0].strip().rstrip(";").strip()
        if not line or line.startswith((".", "{", "}")) or line.endswith(":"):
            continue
        guard = None
        if line.startswith("@"):
            guard, _, line = line.partition(" ")
            guard = guard.lstrip("@").lstrip("!")
            line = line.strip()
        op, _, rest = line.partition(" ")
        operands = [o.strip() for o in rest.replace("[", " ").replace("]", " ").split(",")]
        out.append((guard, op, [o for o in operands if o]))
    return out


def guards_with(entry: Entry, param_index: int) -> bool:
    """Static signal: does a comparison with parameter ``param_index`` (the size) steer what the kernel does?

    True when a ``setp`` reads a value derived from that parameter (followed through ``mov``, ``cvt``, arithmetic)
    and its predicate guards a branch, a store or a ``selp``. It cannot tell ``i < n`` from ``i <= n``; the
    CPU stand-in (:func:`run_on_host`) or a GPU run catches that.
    """
    _entry(entry)
    param_index = require_int(param_index, "param_index", min=0)
    pname = f"{entry.name}_param_{param_index}"
    insts = _instructions(entry.body)
    tainted: set[str] = set()
    for _ in range(3):  # loops can carry values backwards: a few passes reach the fixed point
        for guard, op, ops in insts:
            if not ops:
                continue
            dest, srcs = ops[0], ops[1:]
            if op.startswith("ld.param") and any(pname == s for s in srcs):
                tainted.add(dest)
            elif not op.startswith(("st.", "bra", "setp", "ret")) and any(s in tainted for s in srcs):
                tainted.add(dest)
    preds: set[str] = set()
    for _ in range(3):
        for guard, op, ops in insts:
            if op.startswith("setp") and len(ops) >= 3 and any(s in tainted for s in ops[1:]):
                preds.update(p for p in ops[0].split("|") if p)
            elif op.endswith(".pred") and len(ops) >= 2 and any(s in preds for s in ops[1:]):
                preds.add(ops[0])  # and.pred / or.pred / not.pred combine conditions
    for guard, op, ops in insts:
        if guard in preds and (op.startswith(("bra", "st.", "ret", "exit")) or op == "ret"):
            return True
        if op.startswith("selp") and ops and ops[-1] in preds:
            return True
    return False


def stores_global(entry: Entry) -> bool:
    """True when the kernel writes memory (``st.global``, a generic ``st``, an atomic, a ``wmma.store``): it does something."""
    insts = _instructions(_entry(entry).body)
    return any(
        op.startswith("st.") and ".shared" not in op and ".local" not in op and ".param" not in op for _, op, _ in insts
    ) or any(op.startswith(("atom.", "red.")) or (op.startswith("wmma.store") and ".shared" not in op) for _, op, _ in insts)


# ----------------------------------------------------------------------------------------- compile
def compile_for(source: str, name: str, arches: Sequence[str] = COURSE_ARCHES) -> dict[str, Any]:
    """Compile ``source`` with NVRTC for each architecture the installed NVRTC targets; ``{arch: labkit.ptx.PTX}``.

    An architecture the NVRTC cannot target (NVRTC 13 has no sm_70) is left out of the result, not an error:
    :func:`skipped_arches` names those. Raises CompileError when the source does not compile, and
    :class:`labkit.ptx.ArchNotSupported` when NVRTC targets none of ``arches``."""
    if not isinstance(source, str):
        raise LabkitError(
            f"the CUDA C++ source must be a string, got {type(source).__name__}.",
            fix='Put the kernel in a Python string: source = r"""extern "C" __global__ void ..."""',
        )
    from labkit.cuda import ptx

    name = require_str(name, "name", fix="The kernel's name as declared in the source.")
    arches = _arches(arches)
    kept, _ = ptx.targetable(arches)
    if not kept and arches:
        ptx.compile_cuda(source, arches[0], name=f"{name}.cu")  # raises ArchNotSupported, naming what NVRTC targets
    return {arch: ptx.compile_cuda(source, arch, name=f"{name}.cu") for arch in kept}


def skipped_arches(arches: Sequence[str] = COURSE_ARCHES) -> list[str]:
    """The architectures of ``arches`` that :func:`compile_for` leaves out: the installed NVRTC cannot target them."""
    from labkit.cuda import ptx

    return ptx.targetable(_arches(arches))[1]


def arches_compiled(arches: Sequence[str] = COURSE_ARCHES) -> str:
    """ "sm_70, sm_80, sm_90", or "sm_80, sm_90 (sm_70 skipped: NVRTC 13.0 cannot target it.)": for check messages."""
    from labkit.cuda import ptx

    kept, skipped = ptx.targetable(_arches(arches))
    return ", ".join(kept) + ptx.skipped_note(skipped)


# ----------------------------------------------------------------------------------------- CPU stand-in (labkit.cuda_host)
#: ctypes and NumPy types of PTX parameter types, for scalar arguments (PTX's unsigned and untyped 32- and 64-bit
#: parameters pass as signed integers of the same width).
_CTYPES = {
    ptx: types
    for ptxs, types in (
        ("f32", ("c_float", np.float32)),
        ("f64", ("c_double", np.float64)),
        ("u32 s32 b32", ("c_int32", np.int32)),
        ("u64 s64 b64", ("c_int64", np.int64)),
        ("u16", ("c_uint16", np.uint16)),
        ("s16", ("c_int16", np.int16)),
        ("u8", ("c_uint8", np.uint8)),
        ("s8", ("c_int8", np.int8)),
    )
    for ptx in ptxs.split()
}


def _dims(value: Any, what: str) -> list[int]:
    dims = [value] if isinstance(value, (int, np.integer)) else list(value) if isinstance(value, (tuple, list)) else None
    if dims is None or not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and d >= 1 for d in dims):
        raise LabkitError(
            f"{what} must be a positive int or a tuple of 1 to 3 positive ints, got {value!r}.",
            fix="For n elements and 128 threads per block: grid=((n + 127) // 128,), block=(128,).",
        )
    return [int(d) for d in dims] + [1] * (3 - len(dims))


def check_launch(entry: Entry, grid: Any, block: Any, args: Sequence[Any], *, on_gpu: bool) -> tuple[list[int], list[int]]:
    """Validate a launch before it happens: grid and block shapes, and each argument against the PTX parameter type.

    Pointer parameters (``u64``) need arrays (CuPy arrays on the current GPU, NumPy arrays in ``sim`` mode); ``f32``
    needs ``numpy.float32``, ``s32``/``u32`` need ``numpy.int32``/``numpy.uint32``: CuPy passes a Python ``float`` as a
    double and a Python ``int`` as a 64-bit integer, which a ``float``/``int`` parameter would misread.
    """
    _entry(entry)
    g, b = _dims(grid, "grid"), _dims(block, "block")
    if b[0] * b[1] * b[2] > 1024:
        raise LabkitError(
            f"a block of {b[0] * b[1] * b[2]} threads is more than the 1024 a CUDA block may have.",
            fix="Use at most 1024 threads per block (128 or 256 are good choices).",
        )
    if not isinstance(args, (tuple, list)):
        raise LabkitError("the kernel's arguments must be a tuple, e.g. (x, y, np.float32(alpha), np.int32(n)).")
    if len(args) != len(entry.params):
        raise LabkitError(
            f"{entry.plain_name} takes {len(entry.params)} argument(s), got {len(args)}.",
            fix="Pass one value per kernel parameter, in order, as a tuple.",
        )
    for k, (arg, ptype) in enumerate(zip(args, entry.params)):
        where = f"argument {k} of {entry.plain_name}"
        is_np = isinstance(arg, np.ndarray)
        is_dev = hasattr(arg, "__cuda_array_interface__")
        if is_np or is_dev:
            if ptype not in ("u64", "b64", "s64"):
                raise LabkitError(
                    f"{where} is an array, but the kernel's parameter is a {ptype} scalar.",
                    fix="Pass a NumPy scalar of the parameter's type here, e.g. np.float32(...) or np.int32(...).",
                )
            if on_gpu and is_np:
                raise LabkitError(
                    f"{where} is a NumPy array in host memory; a GPU kernel needs device memory.",
                    fix="Copy it to the GPU first: x_gpu = cupy.asarray(x).",
                )
            if on_gpu and is_dev:
                _check_device(arg, where)
            if (is_np and not arg.flags.c_contiguous) or (is_dev and not _cai_contiguous(arg)):
                raise LabkitError(
                    f"{where} is not contiguous; a raw kernel indexes it as a flat array.", fix="Pass xp.ascontiguousarray(x)."
                )
            continue
        if isinstance(arg, (bool, int, float)) and not isinstance(arg, np.generic):
            want = _CTYPES.get(ptype, (None, None))[1]
            wname = np.dtype(want).name if want is not None else ptype
            raise LabkitError(
                f"{where} is a Python {type(arg).__name__}; the kernel's parameter is {ptype}.",
                fix=f"Wrap it: np.{wname}({arg!r}). CuPy would pass a Python {type(arg).__name__} as a 64-bit value.",
            )
        if isinstance(arg, np.generic):
            want = _CTYPES.get(ptype, (None, None))[1]
            if ptype in ("u64", "b64", "s64") and arg.dtype.itemsize == 8 and arg.dtype.kind in "iu":
                continue
            if (
                want is None
                or np.dtype(want).itemsize != arg.dtype.itemsize
                or (np.dtype(want).kind == "f") != (arg.dtype.kind == "f")
            ):
                wname = np.dtype(want).name if want is not None else ptype
                raise LabkitError(
                    f"{where} is a {arg.dtype.name}, but the kernel's parameter is {ptype}.",
                    fix=f"Pass np.{wname}(...) here." if ptype not in ("u64",) else "Pass an array here.",
                )
            continue
        raise LabkitError(
            f"{where} is a {type(arg).__name__}, which a kernel cannot take.",
            fix="Pass arrays for pointer parameters and NumPy scalars (np.float32, np.int32) for the others.",
        )
    return g, b


def _cai_contiguous(arr: Any) -> bool:
    flags = getattr(arr, "flags", None)
    return bool(getattr(flags, "c_contiguous", True)) if flags is not None else True


def _check_device(arr: Any, where: str) -> None:
    import cupy  # gpu mode only

    dev = getattr(arr, "device", None)
    current = cupy.cuda.Device().id
    if dev is not None and getattr(dev, "id", current) != current:
        raise LabkitError(
            f"{where} lives on GPU {dev.id}, but kernels launch on GPU {current}.",
            fix=f"Copy it: with cupy.cuda.Device({current}): x = cupy.asarray(x); or launch inside `with cupy.cuda.Device({dev.id}):`.",
        )


_PTX_CACHE: dict[tuple[str, str], str] = {}


_PTX_BY_SOURCE: dict[str, str] = {}


def _ptx_sm90(source: str, name: str) -> str:
    """The sm_90 PTX of ``source``: one NVRTC compile per source, whichever of its kernels is asked for (``name`` only
    names the file in NVRTC's messages, so a source that compiled once is not compiled again for another kernel)."""
    if source in _PTX_BY_SOURCE:
        return _PTX_BY_SOURCE[source]
    key = (source, name)
    if key not in _PTX_CACHE:
        _PTX_CACHE[key] = compile_for(source, name, ("sm_90",))["sm_90"].text
    _PTX_BY_SOURCE[source] = _PTX_CACHE[key]
    return _PTX_CACHE[key]
