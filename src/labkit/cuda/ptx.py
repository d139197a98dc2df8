"""Compile Numba kernels and CUDA C++ to PTX without a GPU, and summarise what the PTX does.

- :func:`compile` takes a Numba kernel (``@cuda.jit``) or plain Python function and a signature string;
- :func:`compile_cuda` takes CUDA C++ source (as for CuPy's ``RawKernel``) and uses NVRTC;
- :class:`PTX` carries the text and gives :meth:`PTX.summary` (the instruction mix) and
  :meth:`PTX.resources` (registers, shared memory and spills, from ``ptxas -v`` when it is installed).

In ``sim`` mode numba's real compiler is not importable in this process (the simulator replaces it), so
Numba kernels are compiled in a helper process that runs without the simulator; the result is the same.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import CompileError, LabkitError
from labkit.sim.standalone import _UNSUPPORTED_GLOBAL, _function_source, _module_import, _names, _standalone_source  # noqa: F401  (re-exported: labkit.ptx's names as before)
from labkit.validate import require_int, require_sequence, require_str

ARCHES = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")


def _cc(arch: str) -> tuple[int, int]:
    if not isinstance(arch, str):
        raise LabkitError(
            f"an architecture is named by a string such as 'sm_90', got {arch!r:.60}.", fix=f"Use one of {', '.join(ARCHES)}."
        )
    m = re.fullmatch(r"(?:sm_|compute_)?(\d{1,2})(\d)a?", arch.strip())
    if not m:
        raise LabkitError(f"{arch!r} is not an architecture name.", fix=f"Use one of {', '.join(ARCHES)}.")
    return int(m.group(1)), int(m.group(2))


# ----------------------------------------------------------------------------- instruction mix
@dataclass(frozen=True)
class InstructionMix:
    """Counts of the instructions that matter for performance, read from PTX text."""

    global_loads: dict[int, int]  # width in bits -> count
    global_stores: dict[int, int]
    shared_loads: dict[int, int]
    shared_stores: dict[int, int]
    barriers: int
    atomics_global: int
    atomics_shared: int
    shuffles: int
    votes: int
    tensor_core: int
    fma: int
    total: int
    opcodes: Counter = field(repr=False, default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "opcodes"}

    def __str__(self) -> str:
        def widths(d: dict[int, int]) -> str:
            return ", ".join(f"{n}×{w}-bit" for w, n in sorted(d.items())) or "none"

        rows = [
            ("global loads", widths(self.global_loads)),
            ("global stores", widths(self.global_stores)),
            ("shared loads", widths(self.shared_loads)),
            ("shared stores", widths(self.shared_stores)),
            ("barriers (bar.sync)", self.barriers),
            ("atomics global / shared", f"{self.atomics_global} / {self.atomics_shared}"),
            ("warp shuffles / votes", f"{self.shuffles} / {self.votes}"),
            ("Tensor Core (wmma/mma)", self.tensor_core),
            ("FMA", self.fma),
            ("instructions in all", self.total),
        ]
        return "\n".join(f"  {name:<26} {value}" for name, value in rows)


def _width(op: str) -> int:
    """Bits moved by a load/store opcode such as ``ld.global.v4.f32`` (vector × element)."""
    vec = re.search(r"\.v(\d)\b", op)
    elem = re.findall(r"\.[bfsu](8|16|32|64|128)\b", op)
    bits = int(elem[-1]) if elem else 32
    return bits * (int(vec.group(1)) if vec else 1)


def summarize(ptx_text: str) -> InstructionMix:
    """Count global/shared loads and stores (with widths), barriers, atomics, shuffles, votes and Tensor Core ops.

    Numba addresses arrays with generic ``ld``/``st`` (no state space); those are counted as global accesses,
    which they are for arrays in device memory.
    """
    ptx_text = require_str(
        ptx_text, "ptx_text", empty=True, fix="Pass PTX text, e.g. labkit.ptx.compile(kernel, signature).text."
    )
    gl, gs, sl, ss = Counter(), Counter(), Counter(), Counter()
    ops: Counter = Counter()
    barriers = atom_g = atom_s = shfl = vote = tc = fma = total = 0
    for raw in ptx_text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", ".", "{", "}", "$", "@!")) and not line.startswith("@"):
            continue
        if line.endswith(":"):
            continue
        if line.startswith("@"):
            line = line.split(None, 1)[1] if " " in line else ""
        op = line.split(None, 1)[0].rstrip(";")
        if not op or op.startswith("."):
            continue
        total += 1
        ops[op.split(".")[0]] += 1
        space = op.split(".")[1] if "." in op else ""
        if op.startswith(("ld.shared", "ld.volatile.shared")):
            sl[_width(op)] += 1
        elif op.startswith(("st.shared", "st.volatile.shared")):
            ss[_width(op)] += 1
        elif op.startswith(("ld.", "ldu.")) and space not in ("param", "local", "const"):
            gl[_width(op)] += 1  # ld.global, or a generic ld (Numba's arrays) that reaches global memory
        elif op.startswith("st.") and space not in ("param", "local"):
            gs[_width(op)] += 1
        elif op.startswith(("bar.", "barrier.")):
            barriers += 1
        elif op.startswith(("atom.shared", "red.shared")):
            atom_s += 1
        elif op.startswith(("atom", "red.")):
            atom_g += 1
        elif op.startswith("shfl"):
            shfl += 1
        elif op.startswith("vote"):
            vote += 1
        elif op.startswith(("wmma", "mma", "wgmma")):
            tc += 1
        elif op.startswith("fma"):
            fma += 1
    return InstructionMix(dict(gl), dict(gs), dict(sl), dict(ss), barriers, atom_g, atom_s, shfl, vote, tc, fma, total, ops)


def fp64_instructions(ptx_text: str) -> list[str]:
    """Instruction lines whose opcode has an ``.f64`` part: FP64 arithmetic and conversions to or from FP64.

    In a Numba kernel a Python float literal (``0.299``) is a float64, so ``0.299 * x`` converts ``x`` to FP64 and
    multiplies in FP64 (``cvt.rn.f64.*``, ``mul.f64``) unless the constant is written ``np.float32(0.299)``. GPUs
    outside the HPC line run FP64 at a small fraction of the FP32 rate (``labkit.hw.arithmetic_rates``)."""
    if not isinstance(ptx_text, str):
        raise LabkitError(
            f"fp64_instructions takes PTX text (a string), got {type(ptx_text).__name__}.",
            fix="Pass ptx.text, or call .fp64() on the PTX object that labkit.ptx.compile returns.",
        )
    out = []
    for raw in ptx_text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", ".", "{", "}")) or line.endswith(":"):
            continue
        body = line.split(None, 1)[1] if line.startswith("@") and " " in line else line
        op = body.split(None, 1)[0].rstrip(";")
        if ".f64" in op:
            out.append(line)
    return out


# ----------------------------------------------------------------------------- resources via ptxas
@dataclass(frozen=True)
class Resources:
    """What ``ptxas -v`` reports for one kernel."""

    kernel: str
    registers: int
    shared_bytes: int
    spill_stores: int
    spill_loads: int
    local_bytes: int


def _wheel_files(suffix: str, kinds: tuple[str, ...]) -> list[tuple[int | None, Path]]:
    """(CUDA major, path) of the files ending in ``suffix`` in the installed CUDA wheels of ``kinds`` (nvcc, nvvm)."""
    import importlib.metadata as md

    out = []
    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        m = re.fullmatch(r"nvidia-(?:cuda-)?(\w+?)(?:-cu\d+)?", name)
        if not m or m.group(1) not in kinds:
            continue
        try:
            major: int | None = int(dist.version.split(".")[0])
        except ValueError:
            major = None
        for f in dist.files or ():
            if str(f).replace("\\", "/").endswith(suffix):
                path = Path(str(dist.locate_file(f)))
                if path.exists():
                    out.append((major, path))
    return out


def _same_major_first(found: list[tuple[int | None, Path]]) -> Path | None:
    """The file of the NVRTC's CUDA major version; None when only other versions' files are there."""
    v = nvrtc_version()
    for major, path in found:
        if v is None or major in (None, v[0]):
            return path
    return None


def ptxas_path() -> str | None:
    """The ``ptxas`` of the installed CUDA wheels (the NVRTC's CUDA version), else a toolkit's, else one on PATH, else None."""
    found = _same_major_first(_wheel_files("bin/ptxas", ("nvcc",)))
    if found is not None:
        return str(found)
    v = nvrtc_version()
    for _, root in toolkit_roots():
        if (root / "bin" / "ptxas").is_file() and (v is None or (toolkit_version(root) or v)[0] == v[0]):
            return str(root / "bin" / "ptxas")
    return shutil.which("ptxas")


def _resources(ptx_text: str, arch: str) -> list[Resources]:
    exe = ptxas_path()
    if exe is None:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx_text)
        proc = subprocess.run(
            [exe, "-v", f"-arch={arch}", str(src), "-o", str(Path(tmp) / "k.cubin")], capture_output=True, text=True, timeout=120
        )
    if proc.returncode != 0:
        raise CompileError(f"ptxas rejected the PTX for {arch}: {proc.stderr.strip()[:500]}")
    out: list[Resources] = []
    current = None
    stats: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            if current is not None:
                out.append(Resources(current, **stats))
            current, stats = m.group(1), dict(registers=0, shared_bytes=0, spill_stores=0, spill_loads=0, local_bytes=0)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current:
            stats.update(local_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            stats["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            stats["shared_bytes"] = int(s.group(1)) if s else 0
    if current is not None:
        out.append(Resources(current, **stats))
    return out


# ----------------------------------------------------------------------------- PTX result
@dataclass(frozen=True)
class PTX:
    """PTX text for one architecture, with its instruction mix and (through ptxas) resource use."""

    text: str
    arch: str
    name: str

    def summary(self) -> InstructionMix:
        return summarize(self.text)

    def resources(self) -> list[Resources]:
        """Registers, shared memory and spills per kernel (empty when ptxas is not installed)."""
        return _resources(self.text, self.arch)

    def lines(self, *patterns: str) -> list[str]:
        """Instruction lines containing any of ``patterns`` (all instruction lines if none)."""
        body = [ln.strip() for ln in self.text.splitlines() if ln.strip() and not ln.strip().startswith(("//", "."))]
        return [ln for ln in body if not patterns or any(p in ln for p in patterns)]

    def fp64(self) -> list[str]:
        """The instructions that compute, or convert to or from, 64-bit floating point (``mul.f64``, ``cvt.rn.f64.u16``):
        what a Python float literal such as ``0.299`` puts in a Numba kernel (see :func:`fp64_instructions`)."""
        return fp64_instructions(self.text)

    def show(self, *patterns: str, limit: int = 12) -> None:
        """Print the instruction mix, resources and the lines matching ``patterns``."""
        print(f"PTX of {self.name} for {self.arch}: {len(self.text.splitlines())} lines")
        print(self.summary())
        for r in self.resources():
            print(
                f"  ptxas: {r.kernel[:40]}: {r.registers} registers, {r.shared_bytes} B shared, "
                f"{r.spill_stores} B spill stores, {r.spill_loads} B spill loads"
            )
        if patterns:
            found = self.lines(*patterns)
            print(f"  lines with {', '.join(patterns)} ({len(found)}):")
            for ln in found[:limit]:
                print(f"    {ln}")
            if len(found) > limit:
                print(f"    ... {len(found) - limit} more")

    def __repr__(self) -> str:
        return f"<PTX {self.name} {self.arch}: {len(self.text.splitlines())} lines>"


# ----------------------------------------------------------------------------- Numba kernels


_WORKER = r"""
import json, sys, types, linecache
import numpy
if not hasattr(numpy, "row_stack"):  # NumPy 2.5 removed it; numba-cuda <= 0.30.4 overloads it (labkit.mode.numpy_compat)
    numpy.row_stack = numpy.vstack
import numba.cuda.dispatcher as _dispatcher
import numba.core.errors as _errors1
try:
    import numba.cuda.core.errors as _errors2  # numba-cuda 0.21 and later
except ImportError:  # numba-cuda <= 0.20 has no numba.cuda.core: numba.core.errors holds the location alone
    _errors2 = None
_LOCS = [m.loc_info for m in (_errors2, _errors1) if m is not None and hasattr(m, "loc_info")]
_target = types.SimpleNamespace(compute_capability=(9, 0))
# Device functions compile for "the current device"; without a GPU there is none, so name the target here.
_dispatcher.get_current_device = lambda: _target
def _serve(line):
    req = json.loads(line)
    try:
        _target.compute_capability = tuple(req["cc"])
        for _loc in _LOCS: _loc.clear()
        ns = {}
        linecache.cache["<kernel>"] = (len(req["source"]), None, req["source"].splitlines(True), "<kernel>")
        exec(compile(req["source"], "<kernel>", "exec"), ns)
        import numba
        from numba import cuda
        sig = eval(req["signature"], {**vars(numba.types), "void": numba.types.void, "numba": numba})
        ptx, _ = cuda.compile_ptx(ns[req["name"]], sig, cc=tuple(req["cc"]), device=req["device"])
        out = {"ok": True, "ptx": ptx}
    except BaseException as exc:
        loc = getattr(exc, "loc", None) or next((l["loc"] for l in _LOCS if l.get("loc")), None)
        line = getattr(loc, "line", None) if getattr(loc, "filename", "") == "<kernel>" else None
        if line is None:
            tb = exc.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == "<kernel>":
                    line = tb.tb_lineno
                tb = tb.tb_next
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "line": line}
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
try:
    for line in sys.stdin:
        _serve(line)
except KeyboardInterrupt:
    pass
"""


class _Worker:
    """A long-lived process that runs numba's real CUDA compiler (no simulator).

    It runs in a session of its own and ends by itself when its stdin closes, that is when this process ends. In its
    own session because a Jupyter kernel, shut down, terminates the children in its process group and waits until
    they are gone: a terminated worker that nobody reaps stays listed (a zombie), and every kernel that compiled a
    kernel took about 2.5 s longer to shut down. A request cut short (an interrupt while it waits for the reply)
    stops the worker, so that the next request never reads the reply meant for this one."""

    proc: subprocess.Popen | None = None

    @classmethod
    def request(cls, payload: dict[str, Any]) -> dict[str, Any]:
        if cls.proc is None or cls.proc.poll() is not None:
            env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
            cls.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
                start_new_session=True,
            )
        assert cls.proc.stdin and cls.proc.stdout
        try:
            cls.proc.stdin.write(json.dumps(payload) + "\n")
            cls.proc.stdin.flush()
            line = cls.proc.stdout.readline()
        except BaseException:
            cls.stop()
            raise
        if not line:
            raise CompileError(
                "the PTX compiler process stopped unexpectedly.", fix="Run `labkit doctor` to check the PTX toolchain."
            )
        return json.loads(line)

    @classmethod
    def stop(cls) -> None:
        """End the worker (a later request starts another)."""
        proc, cls.proc = cls.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def _readable_numba_error(error: str, fn: Any, offset: int) -> str:
    """The compiler's message, short: its first line and, when Numba nests the real reason under "Rejected as the
    implementation raised a specific error", that reason too; ``<kernel>`` lines relabelled to the learner's lines."""
    py = getattr(fn, "py_func", fn)
    first = py.__code__.co_firstlineno

    def relabel(m: re.Match) -> str:
        return f"in {py.__name__}, line {int(m.group(1)) - offset + first}"

    text = re.sub(r'File "<kernel>", line (\d+)', relabel, error)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "During:" not in ln and "site-packages" not in ln]
    keep = lines[:2]
    for k, ln in enumerate(lines):
        if ln.startswith("Rejected as the implementation raised a specific error") and k + 1 < len(lines):
            keep.append(lines[k + 1])
            break
    keep = [ln for ln in dict.fromkeys(keep) if not ln.startswith("Rejected as")]
    return " ".join(keep)[:600]


def _guess_error_line(error: str, source_lines: list[str]) -> int | None:
    """Numba does not always say where a typing error is; find the line for the common cases."""
    m = re.search(r"name '(\w+)' is not defined|the global '(\w+)'", error)
    if m:
        pattern = re.compile(rf"\b{re.escape(m.group(1) or m.group(2))}\b")
    elif "yield in a closure" in error:
        pattern = re.compile(r"\(.*\bfor\b.*\bin\b")
    elif "Function(<class 'str'>)" in error:
        pattern = re.compile(r"\bf[\"']|\bstr\(|\.format\(")
    elif "shared.array" in error or "local.array" in error:
        pattern = re.compile(r"(shared|local)\.array")
    elif "setitem" in error:
        pattern = re.compile(r"\w\[[^\]]*\]\s*=[^=]")
    elif "getitem" in error:
        pattern = re.compile(r"\w\[")
    else:
        return None
    for i, text in enumerate(source_lines[1:], start=1):
        if pattern.search(text.split("#")[0]):
            return i
    return None


# What the compiler's words mean for a kernel that ran in the simulator, in plain words.
_PLAIN_REASONS: tuple[tuple[str, str], ...] = (
    (
        r"Function\(<class 'str'>\)|format_spec|FormattedValue|JoinedStr|str\(int|str\(float",
        "it formats a string (an f-string, str() or format()), which does not compile for a GPU: pass the values "
        'to print() separately, e.g. `print("i =", i)`.',
    ),
    (
        r"yield in a closure|generator",
        "it uses a generator expression (for example `sum(x[j] for j in ...)`), which does not compile for a GPU: "
        "write a for loop that adds into a variable.",
    ),
    (
        r"NRT required but not enabled|NRT_MemInfo|cannot be allocated|np\.empty|np\.zeros|np\.ones",
        "it creates a Python list or a NumPy array while running: a GPU kernel cannot allocate memory. Use scalar "
        "variables, or cuda.local.array / cuda.shared.array with a constant size.",
    ),
    (
        r"Function\(<function (shared|local)\.array",
        "the shape of cuda.shared.array (or cuda.local.array) must be known when the kernel compiles: an integer "
        "literal, a global integer constant, or a tuple of them. A computed shape such as `(TILE, TILE + 1)` or "
        "`cuda.blockDim.x` is not a constant: define a global `TILE_PAD = TILE + 1`, or use dynamic shared memory.",
    ),
    (
        r"Untyped global name '(\w+)'|uses the global '(\w+)'",
        "it uses a global that is not a number, a tuple of numbers or a NumPy array (a list, a dict, an object): a GPU "
        "kernel can only read those as constants. Use a tuple or a NumPy array, or pass it as an argument.",
    ),
    (
        r"Use of unsupported NumPy function|Unknown attribute '\w+' of type Module\(<module 'numpy'",
        "it calls a NumPy function that has no GPU implementation inside a kernel: compute it with a loop.",
    ),
)


def plain_reason(error: str) -> str | None:
    """The reason a kernel does not build for a GPU, in plain words, for the common cases; None otherwise."""
    error = require_str(error, "error", empty=True)
    for pattern, reason in _PLAIN_REASONS:
        if re.search(pattern, error):
            return reason
    return None


_COMPILED: dict[tuple[str, str, str, tuple[int, int], bool], PTX | CompileError] = {}


def compile(kernel: Any, signature: str, arch: str = "sm_90", *, device: bool = False) -> PTX:  # noqa: A001
    """Compile a Numba kernel (or device function, ``device=True``) to PTX for ``arch``; works without a GPU.

    ``signature`` is a Numba signature string, e.g. ``"void(float32[:], float32[:], float32[:])"``.
    A kernel that does not compile raises :class:`~labkit.errors.CompileError` with the reason in plain words
    (where it is a common one), the compiler's message and the line. Results are cached by source and types.
    """
    if not isinstance(signature, str):
        raise LabkitError('the signature must be a string such as "void(float32[:], float32[:])".')
    py = getattr(kernel, "py_func", kernel)
    if not callable(py) or not hasattr(py, "__code__"):
        raise LabkitError(f"expected a @cuda.jit kernel or a Python function, got {type(kernel).__name__}.")
    cc = _cc(arch)
    require_target(arch)
    source, offset = _standalone_source(kernel)
    key = (source, py.__name__, signature, cc, device)
    cached = _COMPILED.get(key)
    if cached is None:
        cached = _COMPILED[key] = _compile_uncached(kernel, py, source, offset, signature, cc, device)
    if isinstance(cached, CompileError):
        raise cached
    return cached


def _compile_uncached(
    kernel: Any, py: Any, source: str, offset: int, signature: str, cc: tuple[int, int], device: bool
) -> PTX | CompileError:
    reply = _Worker.request({"source": source, "name": py.__name__, "signature": signature, "cc": cc, "device": device})
    if reply["ok"]:
        return PTX(reply["ptx"], f"sm_{cc[0]}{cc[1]}", py.__name__)
    where = ""
    source_lines = _function_source(py, keep_decorators=False).splitlines()
    line = reply["line"] - offset if reply.get("line") else _guess_error_line(reply["error"], source_lines)
    if line is None or not 0 <= line < len(source_lines):
        line = _guess_error_line(reply["error"], source_lines)
    if line is not None and 0 <= line < len(source_lines):
        decorators = len(_function_source(py, keep_decorators=True).splitlines()) - len(source_lines)
        where = (
            f"\n  at line {py.__code__.co_firstlineno + decorators + line} of the cell or file ({py.__name__}): "
            f"{source_lines[line].strip()}"
        )
    reason = plain_reason(reply["error"])
    words = f"\n  Why: {reason}" if reason else ""
    detail = _readable_numba_error(reply["error"], kernel, offset)
    return CompileError(f"{py.__name__} does not compile for sm_{cc[0]}{cc[1]}:{where}{words}\n  The compiler says: {detail}")


# ----------------------------------------------------------------------------- CUDA C++ through NVRTC
class ArchNotSupported(CompileError):
    """The installed NVRTC cannot target this architecture (NVRTC 13 dropped sm_70, for instance).

    Not a fault of the source: callers that compile for several architectures skip it with a note."""


def nvrtc_version() -> tuple[int, int] | None:
    """(major, minor) of the NVRTC that cuda-bindings loads, or None when there is none."""
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
    except Exception:  # noqa: BLE001 - no cuda-bindings, or no NVRTC library: reported by toolchain()
        return None
    return (int(major), int(minor)) if int(err) == 0 else None


_SUPPORTED: dict[str, tuple[str, ...] | None] = {}


def supported_arches() -> tuple[str, ...] | None:
    """The architectures the installed NVRTC can target (``nvrtcGetSupportedArchs``), e.g. ``("sm_75", ..., "sm_120")``;
    None when NVRTC is missing or too old to say."""
    if "nvrtc" not in _SUPPORTED:
        try:
            from cuda.bindings import nvrtc

            err, archs = nvrtc.nvrtcGetSupportedArchs()
            _SUPPORTED["nvrtc"] = tuple(f"sm_{int(a)}" for a in archs) if int(err) == 0 else None
        except Exception:  # noqa: BLE001 - no NVRTC: compile_cuda says so itself
            _SUPPORTED["nvrtc"] = None
    return _SUPPORTED["nvrtc"]


def can_target(arch: str) -> bool:
    """True when the installed NVRTC compiles for ``arch`` (also when it cannot say: NVRTC then decides)."""
    cc = _cc(arch)
    known = supported_arches()
    return known is None or f"sm_{cc[0]}{cc[1]}" in known


def require_target(arch: str) -> None:
    """Raise :class:`ArchNotSupported` when the installed NVRTC cannot target ``arch`` (Numba's CUDA compiler asks the
    same NVRTC, so this holds for Numba kernels and CUDA C++ alike)."""
    if not can_target(arch):
        cc = _cc(arch)
        v = nvrtc_version()
        who = f"NVRTC {v[0]}.{v[1]}" if v else "the installed NVRTC"
        raise ArchNotSupported(
            f"{who} cannot target sm_{cc[0]}{cc[1]}; it targets {', '.join(supported_arches() or ())}.",
            fix="Compile for an architecture in that list (a CUDA 12 NVRTC still targets sm_70).",
        )


def targetable(arches: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """``arches`` split into (those the installed NVRTC targets, those it cannot)."""
    arches = require_sequence(
        arches, "arches", what="a list of architecture names such as ['sm_80', 'sm_90']", item=lambda a, n: require_str(a, n)
    )
    kept = [a for a in arches if can_target(a)]
    return kept, [a for a in arches if a not in kept]


def skipped_note(skipped: list[str] | tuple[str, ...]) -> str:
    """A sentence for architectures left out because the installed NVRTC cannot target them ("" when none)."""
    skipped = require_sequence(skipped, "skipped", what="a list of architecture names", item=lambda a, n: require_str(a, n))
    if not skipped:
        return ""
    v = nvrtc_version()
    who = f"NVRTC {v[0]}.{v[1]}" if v else "the installed NVRTC"
    return f" ({', '.join(skipped)} skipped: {who} cannot target {'it' if len(skipped) == 1 else 'them'}.)"


# Headers a kernel of the course includes, each found where an installed package puts it.
_ANCHOR_HEADERS = (
    "nvrtc.h",
    "cuda_runtime.h",
    "cuda_fp16.h",
    "cuda_bf16.h",
    "mma.h",
    "crt/mma.h",
    "crt/host_config.h",
    "cooperative_groups.h",
    "cuda/std/cstdint",
    "cuda/std/version",
)
# The wheels whose headers NVRTC may need: CUDA 12 names end in -cu12, CUDA 13 ones have no suffix.
_HEADER_WHEELS = ("runtime", "nvrtc", "nvcc", "crt", "cccl")


@dataclass(frozen=True)
class HeaderDir:
    """One folder of CUDA headers and where it came from."""

    path: str
    origin: str  # "wheel nvidia-cuda-runtime 13.0.96", "CUDA_HOME (CUDA 13.0)", ...
    cuda_major: int | None


def _wheel_header_dirs() -> list[HeaderDir]:
    """Header folders of the installed CUDA wheels, read from each wheel's own file list (RECORD)."""
    import importlib.metadata as md

    out: list[HeaderDir] = []
    seen: set[str] = set()
    dists = sorted(md.distributions(), key=lambda d: _HEADER_WHEELS.index(_wheel_kind(d) or "cccl"))
    for dist in dists:
        kind = _wheel_kind(dist)
        if kind is None:
            continue
        try:
            major = int(dist.version.split(".")[0])
        except ValueError:
            major = None
        for f in dist.files or ():
            name = str(f).replace("\\", "/")
            for anchor in _ANCHOR_HEADERS:
                # a bare name counts in a folder called include; a path (crt/mma.h, cuda/std/version) wherever it is
                if not name.endswith("/" + anchor) or ("/" not in anchor and not name.endswith("/include/" + anchor)):
                    continue
                inc = str(Path(str(dist.locate_file(name[: len(name) - len(anchor)]))))
                if inc not in seen and Path(inc).is_dir():
                    seen.add(inc)
                    out.append(HeaderDir(inc, f"wheel {dist.metadata['Name']} {dist.version}", major))
    return out


def _wheel_kind(dist: Any) -> str | None:
    name = (dist.metadata["Name"] or "").lower().replace("_", "-")
    m = re.fullmatch(r"nvidia-cuda-(\w+?)(?:-cu(\d+))?", name)
    return m.group(1) if m and m.group(1) in _HEADER_WHEELS else None


def toolkit_roots() -> list[tuple[str, Path]]:
    """CUDA toolkits to look in, in order: ``CUDA_HOME``, ``CUDA_PATH``, the one the ``nvcc`` on PATH belongs to,
    ``/usr/local/cuda``; as (how it was found, root)."""
    roots: list[tuple[str, Path]] = [(v, Path(os.environ[v])) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(("nvcc on PATH", Path(nvcc).resolve().parents[1]))
    roots.append(("/usr/local/cuda", Path("/usr/local/cuda")))
    out, seen = [], set()
    for how, root in roots:
        if str(root) not in seen:
            seen.add(str(root))
            out.append((how, root))
    return out


def toolkit_version(root: Path) -> tuple[int, int] | None:
    """The CUDA version of a toolkit folder: ``version.json``, else ``CUDA_VERSION`` in ``include/cuda.h``."""
    if not isinstance(root, (str, os.PathLike)) or not str(root).strip():
        raise LabkitError(f"root must be a folder path (a CUDA toolkit), got {root!r:.60}.")
    root = Path(root)
    try:
        data = json.loads((root / "version.json").read_text())
        major, minor = str(data["cuda"]["version"]).split(".")[:2]
        return int(major), int(minor)
    except (OSError, KeyError, ValueError, TypeError):
        pass
    try:
        m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", (root / "include" / "cuda.h").read_text(errors="replace"))
    except OSError:
        return None
    return (int(m.group(1)) // 1000, int(m.group(1)) % 1000 // 10) if m else None


def _toolkit_header_dirs() -> list[HeaderDir]:
    out = []
    for how, root in toolkit_roots():
        inc = root / "include"
        if not (inc / "cuda_runtime.h").is_file():
            continue
        v = toolkit_version(root)
        where = str(root) if how == str(root) else f"{how}={root}"
        label = f"toolkit {where} (CUDA {v[0]}.{v[1]})" if v else f"toolkit {where}"
        out.append(HeaderDir(str(inc), label, v[0] if v else None))
        if (inc / "cccl" / "cuda" / "std").is_dir():  # CUDA 13 puts libcu++/CUB/Thrust under include/cccl
            out.append(HeaderDir(str(inc / "cccl"), label, v[0] if v else None))
    return out


def header_dirs(cuda_major: int | None = None) -> list[HeaderDir]:
    """Every CUDA header folder NVRTC is given, with its origin: the installed wheels of the same CUDA major version
    as the NVRTC in use (``cuda_major``: another NVRTC's, such as CuPy's own when it is CUDA 13 and cuda-bindings 12) (CUDA 12: ``nvidia/cuda_runtime/include``, ...; CUDA 13: ``nvidia/cu13/include``), then a CUDA
    toolkit of that version (``CUDA_HOME``, ``CUDA_PATH``, ``nvcc`` on PATH, ``/usr/local/cuda``) for what the wheels lack
    (the CUDA 13 wheels of a GPU image have no ``crt/mma.h``). Headers of another CUDA version are never mixed in."""
    cuda_major = None if cuda_major is None else require_int(cuda_major, "cuda_major", min=1, max=99)
    key = (cuda_major, tuple(sys.path), *(os.environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH", "PATH")))
    if key not in _HEADER_CACHE:  # reading every wheel's file list takes a moment: once per environment
        _HEADER_CACHE[key] = _header_dirs_uncached(cuda_major)
    return list(_HEADER_CACHE[key])


_HEADER_CACHE: dict[tuple, list[HeaderDir]] = {}


def _header_dirs_uncached(cuda_major: int | None = None) -> list[HeaderDir]:
    v = nvrtc_version() if cuda_major is None else (cuda_major, 0)
    major = v[0] if v else None
    wheels = [h for h in _wheel_header_dirs() if major is None or h.cuda_major in (None, major)]
    toolkits = [h for h in _toolkit_header_dirs() if major is None or h.cuda_major in (None, major)]
    if major is None and wheels:
        toolkits = []  # without NVRTC nothing says which toolkit fits; keep the wheels (the pinned install)
    out, seen = [], set()
    for h in wheels + toolkits:
        if h.path not in seen:
            seen.add(h.path)
            out.append(h)
    return out


def cuda_include_dirs(cuda_major: int | None = None) -> list[str]:
    """Header folders for NVRTC (runtime headers, ``crt/``, ``mma.h``, libcu++): see :func:`header_dirs`."""
    cuda_major = None if cuda_major is None else require_int(cuda_major, "cuda_major", min=1, max=99)
    return [h.path for h in header_dirs(cuda_major)]


def _nvrtc_errors(log: str, source: str, name: str) -> str:
    """NVRTC's error lines, each followed by the source line it names."""
    src_lines = source.splitlines()
    out = []
    for line in log.splitlines():
        m = re.match(rf"{re.escape(name)}\((\d+)\): (?:catastrophic )?error", line)
        if m:
            out.append(line)
            n = int(m.group(1))
            if 1 <= n <= len(src_lines):
                out.append(f"    {n} | {src_lines[n - 1].strip()}")
    return "\n".join(out[:16]) or "\n".join(log.splitlines()[:12])


def compile_cuda(source: str, arch: str = "sm_90", *, name: str = "kernel.cu", options: tuple[str, ...] = ()) -> PTX:
    """Compile CUDA C++ source (as given to CuPy's ``RawKernel``) to PTX with NVRTC; works without a GPU.

    Errors come back as :class:`~labkit.errors.CompileError` with NVRTC's messages, each naming its line; an
    architecture the installed NVRTC cannot target raises :class:`ArchNotSupported` (see :func:`targetable`).
    """
    if not isinstance(source, str):
        raise LabkitError(f"source must be CUDA C++ source text (a string), got {source!r:.60}.")
    name = require_str(name, "name", fix="A file name for the messages, e.g. 'kernel.cu'.")
    options = tuple(
        require_sequence(
            options, "options", what="a list of NVRTC options such as ['-lineinfo']", item=lambda o, n: require_str(o, n)
        )
    )
    _cc(arch)
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        from labkit.errors import MissingPackageError

        raise MissingPackageError(
            "compiling CUDA C++ needs NVRTC (the cuda-bindings and nvidia-cuda-nvrtc packages).",
            fix="Reinstall the course environment: `make test` or `pip install -e .`",
        ) from None
    cc = _cc(arch)
    require_target(arch)
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    suffix = "a" if arch.strip().endswith("a") else ""  # sm_90a: arch-specific instructions (wgmma, setmaxnreg)
    opts = [f"--gpu-architecture=compute_{cc[0]}{cc[1]}{suffix}".encode(), b"--std=c++17"]
    opts += [f"-I{d}".encode() for d in cuda_include_dirs()] + [o.encode() for o in options]
    try:
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, log_size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * log_size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log_text = log.decode(errors="replace").rstrip("\x00").strip()
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"{name} does not compile for sm_{cc[0]}{cc[1]}:\n" + _nvrtc_errors(log_text, source, name))
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return PTX(buf.decode().rstrip("\x00"), f"sm_{cc[0]}{cc[1]}{suffix}", name)


def _has(dirs: list[str], rel: str) -> bool:
    return any((Path(d) / rel).is_file() for d in dirs)


def toolchain() -> dict[str, Any]:
    """State of the PTX toolchain: which CUDA it is (``"CUDA 12.9"``, ``"CUDA 13.0"``), NVRTC and the architectures it
    targets, NVVM, ptxas, the header folders and where each came from, and the headers the course's kernels need."""
    import importlib.metadata as md

    dirs = header_dirs()
    paths = [h.path for h in dirs]
    state: dict[str, Any] = {
        "ptxas": ptxas_path(),
        "include_dirs": paths,
        "headers_from": [{"path": h.path, "origin": h.origin} for h in dirs],
    }
    try:
        state["cuda_bindings"] = md.version("cuda-bindings")
    except md.PackageNotFoundError:
        state["cuda_bindings"] = None
    v = nvrtc_version()
    state["nvrtc"] = f"{v[0]}.{v[1]}" if v else None
    if v is None:
        try:
            from cuda.bindings import nvrtc

            nvrtc.nvrtcVersion()
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            state["nvrtc_error"] = str(exc)
    state["toolchain"] = f"CUDA {v[0]}.{v[1]}" if v else None
    state["arches"] = list(supported_arches() or ())
    state["headers"] = {h: _has(paths, h) for h in ("cuda_runtime.h", "cuda_fp16.h", "mma.h", "crt/mma.h")}
    nvvm = _wheel_files("libnvvm.so", ("nvcc", "nvvm"))
    state["nvvm"] = (
        bool(nvvm) or any((root / "nvvm" / "lib64" / "libnvvm.so").exists() for _, root in toolkit_roots()) or _pathfinder_nvvm()
    )
    return state


def _pathfinder_nvvm() -> bool:
    """Whether cuda-pathfinder finds libnvvm where numba-cuda looks for it (wheels, CUDA_HOME, the system's search
    path, a toolkit's ``lib/``): doctor must not call NVVM missing where Numba compiles (review gpu-review-3 C2)."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        load_nvidia_dynamic_lib("nvvm")
        return True
    except Exception:  # noqa: BLE001 - not found, or no pathfinder: NVVM is reported missing
        return False
