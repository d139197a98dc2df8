"""Likely causes read from evidence: what a wrong result, a kernel's source or its PTX shows about the slip.

Each function here returns a cause (a sentence for the learner) only when the evidence supports it, and None
otherwise, so that a check never offers a guess the data contradicts:

- :func:`counter_wrap_cause`: the counts equal the right ones modulo 2**8 or 2**16 (a narrow counter wrapped);
- :func:`whole_array_calls`: NumPy calls on whole arrays inside a kernel (``np.add(a, b)[i]``), which make every
  thread do the whole array's work;
- :func:`plain_words`: an exception's text without the simulator's internal class names;
- :func:`uninitialised_cause`: why a thread read shared memory nobody had written (accumulating without zeroing,
  a missing barrier, or a load that fills other elements than the reads use);
- :func:`fp64_note`: FP64 instructions in a kernel's PTX where labkit's reference has none (Python float literals).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any, Sequence

import numpy as np

# ----------------------------------------------------------------------------- narrow counters
_WIDTHS = ((8, "uint8 holds 0 to 255, int8 -128 to 127"), (16, "uint16 holds 0 to 65,535, int16 -32,768 to 32,767"))


def counter_wrap_cause(got: np.ndarray, expected: np.ndarray) -> str | None:
    """The cause "a counter narrower than int32 wraps" when every wrong count equals the right one modulo 2**8 or
    2**16 (and some count reaches that far), else None. For integer results (counts, histograms)."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape or expected.dtype.kind not in "iu" or got.dtype.kind not in "iuf":
        return None
    g, e = got.astype(np.int64), expected.astype(np.int64)
    wrong = g != e
    if not wrong.any():
        return None
    fits = [
        (bits, words)
        for bits, words in _WIDTHS  # every width that holds each count seen and explains each wrong one
        if ((e - g)[wrong] % (1 << bits) == 0).all() and g.max() < (1 << bits) and g.min() >= -(1 << (bits - 1))
    ]
    if not fits:
        return None
    m = 1 << fits[0][0]
    return (
        f"the wrong counts are the right ones minus a multiple of {m:,}: a counter narrower than int32 wraps "
        f"around ({'; '.join(words for _, words in fits)}). Count in int32 (np.int32 shared or local arrays) and "
        "store into the int32 output."
    )


# ----------------------------------------------------------------------------- whole-array work in a kernel
_SCALAR_NP = {
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool_",
    "complex64",
    "complex128",
    "intp",
    "uintp",
}
_ARRAY_METHODS = {
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "dot",
    "cumsum",
    "copy",
    "sort",
    "argmax",
    "argmin",
    "std",
    "var",
    "any",
    "all",
    "reshape",
    "flatten",
    "ravel",
    "astype",
    "copy_to_host",
    "transpose",
}


def _source_tree(kernel: Any) -> ast.FunctionDef | None:
    fn = getattr(kernel, "py_func", kernel)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            return node
    return None


def mentions(kernel: Any, *names: str) -> bool:
    """True when ``kernel``'s source (comments aside) names one of ``names`` as an attribute or a variable
    (``gridsize``, ``gridDim``): a likely-cause remark about something the code already does is left out. True when
    there is no source to read (the remark is then left out too: it may not apply)."""
    fn = _source_tree(kernel)
    if fn is None:
        return True
    for node in ast.walk(fn):
        if (isinstance(node, ast.Attribute) and node.attr in names) or (isinstance(node, ast.Name) and node.id in names):
            return True
    return False


def source_matches(kernel: Any, pattern: str) -> bool:
    """True when ``kernel``'s source, comments left out, matches the regular expression ``pattern`` (True too when
    there is no source to read: a remark that may not apply is left out)."""
    import re

    fn = getattr(kernel, "py_func", kernel)
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return True
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    return re.search(pattern, code) is not None


def stores_in_source(kernel: Any, out_name: str | None = None) -> bool:
    """True when ``kernel``'s source stores into an array element (``out[i] = ...``, ``out[i] += ...``) or calls an
    atomic: the learner wrote a body, so an untouched output is a wrong answer, not a skeleton. ``out_name`` (a
    parameter name) restricts it to stores into that parameter, taken by position."""
    fn = _source_tree(kernel)
    if fn is None:
        return False
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        for t in targets:
            if isinstance(t, ast.Subscript):
                return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "atomic"
        ):
            return True
    return False


def whole_array_calls(kernel: Any) -> list[str]:
    """Calls in ``kernel``'s source that work on a whole array argument at once: ``np.add(a, b)``, ``np.sum(x)``,
    ``x.sum()``, ``a + b`` of two array parameters used as a whole. Empty when there are none (or no source)."""
    fn = _source_tree(kernel)
    if fn is None:
        return []
    params = {a.arg for a in fn.args.args}
    found: list[str] = []

    def is_param(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in params

    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner, attr = node.func.value, node.func.attr
            if isinstance(owner, ast.Name) and owner.id in ("np", "numpy") and attr not in _SCALAR_NP:
                if any(is_param(a) for a in node.args):
                    found.append(ast.unparse(node))
            elif is_param(owner) and attr in _ARRAY_METHODS:
                found.append(ast.unparse(node))
        elif isinstance(node, ast.BinOp) and is_param(node.left) and is_param(node.right):
            found.append(ast.unparse(node))
    return list(dict.fromkeys(found))


def whole_array_cause(calls: Sequence[str], *, slow: bool = True) -> str:
    """The cause for a kernel that does whole-array work (see :func:`whole_array_calls`): slow (``slow``: every
    thread computes the whole result) or refused (the simulator's device arrays have no whole-array arithmetic)."""
    shown = ", ".join(f"`{c}`" for c in calls[:3])
    if not slow:
        return (
            f"{shown} works on whole arrays; inside a kernel each thread works on single elements "
            "(`a[i] + b[i]`), and neither a GPU nor the simulator does whole-array arithmetic there."
        )
    return (
        f"{shown} works on whole arrays, so every thread computes the entire result to use one element of it: "
        "n threads do n × n work (and on a GPU Numba cannot compile it). Index single elements instead "
        "(`a[i] + b[i]`)."
    )


# ----------------------------------------------------------------------------- words a learner can read
_INTERNAL = re.compile(
    r"\b(?:_?(?:Unwatched|Tracked)(?:Narrow)?(?:1D|2D|ND)?(?:Array)?|TrackedArray|FakeCUDAArray|"
    r"FakeCUDAKernel|FakeCUDAModule|FakeWithinKernelCUDAArray|KernelArray|NarrowIntArray|_Row|"
    r"SharedArrays|SimThread|WarpInt32|_?Snapshot(?:1D|2D|3D)?)\b"
)


def plain_words(text: str) -> str:
    """``text`` with the simulator's internal class names (``FakeCUDAArray``, ``TrackedArray``, ...) replaced by what
    they stand for: a device array (or a kernel)."""

    def word(m: re.Match[str]) -> str:
        name = m.group(0)
        if "Kernel" in name and "Array" not in name:
            return "kernel"
        if name in ("SimThread",):
            return "thread"
        if name == "WarpInt32":
            return "int"
        return "device array"

    return _INTERNAL.sub(word, text)


# ----------------------------------------------------------------------------- reads of unwritten shared memory
def uninitialised_cause(read: Any, later: Sequence[tuple[int, str]] | None, me: int, *, counters: bool = False) -> str:
    """Why ``read`` (a :class:`labkit.sim.memory.UninitialisedRead` of shared memory, by the thread whose linear
    index in the block is ``me``) happened, given ``later``: the (linear thread index, kind) of the accesses to the
    same element in the same block from that read on (an atomic included), in order; None when unknown.
    "Zero it first" only when the element is updated in place (the first write after the read is the reader's own,
    a ``+=``, or an atomic); a missing barrier when another thread writes it later; a load of the wrong elements
    when no thread of the block ever writes it (zeroing would hide that), unless the array is a set of counters
    (``counters``: the block updates it with atomics), which must start at zero."""
    from ..sim.memory import fmt_index

    where = f"element {fmt_index(read.index)} of {read.array}"
    if read.space != "shared":
        return _output_read_cause(where, later, me)
    if later is None:
        return (
            f"{where} was read before any thread of the block wrote it: fill shared memory (every element that is "
            "read, halo included) and call cuda.syncthreads() before reading it."
        )
    writes = [(t, k) for t, k in later if k in ("write", "atomic")]
    if not writes and counters:
        return (
            f"{where} was read before anything set it, and the block counts into this array with atomics: "
            "shared memory starts each block with garbage, so zero it first (every element; threads share the "
            "work), then cuda.syncthreads() before counting."
        )
    if not writes:
        return (
            f"{where} is read, but no thread of the block ever writes it: the reads use elements that the load "
            "never fills. Check the indices and bounds of the load against those of the reads (a tile, a halo, or "
            "a loop that assumes another block size). Zeroing it would only hide this."
        )
    first_t, first_k = writes[0]
    if first_k == "atomic" or first_t == me:
        return (
            f"{where} is updated in place (`+=` or an atomic) but nothing set it first: shared memory starts each "
            "block with garbage, so zero it first, then cuda.syncthreads() before the updates."
        )
    return (
        f"{where} was read before the thread that fills it had written it: a missing cuda.syncthreads() between "
        "filling shared memory and reading it, or the read placed before the load."
    )


def _output_read_cause(where: str, later: Sequence[tuple[int, str]] | None, me: int) -> str:
    """:func:`uninitialised_cause` for an output argument (global memory, poisoned before the launch)."""
    writes = [(t, k) for t, k in (later or ()) if k in ("write", "atomic")]
    if later is not None and writes and writes[0][0] == me:
        return (
            f"{where} was read before it was written, then written by the same thread: an output starts with "
            "garbage, so assign it (`=`) rather than accumulate into it (`+=`), or set it first; better, "
            "accumulate in a local variable and store once."
        )
    if later is not None and writes:
        return (
            f"{where} was read before the thread that computes it had written it: threads of one launch cannot "
            "pass values through the output in an order you choose; compute what you need from the inputs (or "
            "share it through shared memory with cuda.syncthreads())."
        )
    if later is not None:
        return (
            f"{where} was read, but nothing in the launch writes it: an index of the output that no thread "
            "covers is read (check the index you read against the ones you write)."
        )
    return (
        f"{where} was read before the kernel wrote it: an output starts with garbage, so assign (`=`) rather "
        "than accumulate (`+=`)."
    )


# ----------------------------------------------------------------------------- FP64 in the PTX
def fp64_count(kernel: Any, signature: str, arch: str = "sm_80") -> int | None:
    """How many FP64 (``.f64``) arithmetic instructions ``kernel``'s PTX has for ``signature``; None if it does not build."""
    from labkit.cuda import ptx

    from ..errors import CompileError

    try:
        text = ptx.compile(kernel, signature, arch).text
    except (CompileError, Exception):  # noqa: BLE001 - no note rather than an error
        return None
    return sum(
        1
        for line in text.splitlines()
        if re.search(r"^\s*(?:add|sub|mul|fma|div|neg|abs|min|max|rcp|sqrt|setp|mad)\.[a-z.]*f64\b", line)
    )


FP64_CAUSE = (
    "its PTX has FP64 (`.f64`) arithmetic where labkit's reference has none: a Python float literal (`0.5`, "
    "`acc = 0.0`) is a float64, so Numba computes that expression in FP64, which runs at 1/32 to 1/64 of the "
    "FP32 rate on many GPUs (L4, L40S, RTX). Wrap the literals in np.float32(...) (`acc = np.float32(0.0)`)."
)


def fp64_note(kernel: Any, reference: Any, signature: str) -> str | None:
    """:data:`FP64_CAUSE` with the count, when ``kernel`` has FP64 arithmetic in its PTX and ``reference`` has none."""
    mine = fp64_count(kernel, signature)
    if not mine:
        return None
    theirs = fp64_count(reference, signature)
    if theirs is None or theirs > 0:
        return None
    return f"{mine} instruction(s): " + FP64_CAUSE


# ------------------------------------------------------------------------------------------- barriers, from the code
def _shared_names(fn: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and "shared.array" in ast.unparse(node.value.func):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _is_barrier(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in (
        "syncthreads",
        "syncthreads_count",
        "syncthreads_and",
        "syncthreads_or",
    )


def _events(stmts: list[ast.stmt], arrays: set[str], cond: bool = False) -> list[Any]:
    """Program order of one statement list: ("R"|"W", array, source) for shared reads and writes, ("B",) for a
    barrier, ("L", [...], cond) for a loop's body (``cond``: inside an ``if``, which not every thread may take).
    A statement's reads come before its writes."""
    out: list[Any] = []

    def accesses(node: ast.AST, skip: ast.AST | None = None) -> None:
        for sub in ast.walk(node):
            if sub is skip:
                continue
            if _is_barrier(sub):
                out.append(("B",))
            elif (
                isinstance(sub, ast.Subscript)
                and isinstance(sub.value, ast.Name)
                and sub.value.id in arrays
                and isinstance(sub.ctx, ast.Load)
            ):
                out.append(("R", sub.value.id, ast.unparse(node)[:70]))

    for st in stmts:
        if isinstance(st, (ast.For, ast.While)):
            accesses(st.iter if isinstance(st, ast.For) else st.test)
            out.append(("L", _events(st.body, arrays, cond), cond))
        elif isinstance(st, ast.If):
            accesses(st.test)
            out.extend(_events(st.body, arrays, True))
            out.extend(_events(st.orelse, arrays, True))
        elif isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if st.value is not None:
                accesses(st.value)
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in arrays:
                    accesses(t.slice)
                    if isinstance(st, ast.AugAssign):
                        out.append(("R", t.value.id, ast.unparse(st)[:70]))
                    out.append(("W", t.value.id, ast.unparse(st)[:70]))
        elif isinstance(st, ast.Expr):
            accesses(st)
            call = st.value
            if (
                isinstance(call, ast.Call)
                and ".atomic." in "." + ast.unparse(call.func) + "."
                and call.args
                and isinstance(call.args[0], ast.Name)
                and call.args[0].id in arrays
            ):
                out.append(("W", call.args[0].id, ast.unparse(st)[:70]))  # an atomic update writes its array
    return out


def _flat(events: list[Any]) -> list[Any]:
    out = []
    for e in events:
        out.extend(_flat(e[1]) if e[0] == "L" else [e])
    return out


def barrier_gaps(kernel: Any, array: str) -> list[tuple[str, str, str, bool]]:
    """Where the kernel's code lacks a barrier for shared array ``array``, read from the order of its statements
    (not from the order the simulator ran the threads): ``(kind, first, second)`` with kind ``"after-write"`` (a
    write, then a read of the array with no barrier between, in one pass), ``"end-of-step"`` (a loop body writes it
    and the next iteration reads it with no barrier between) or ``"end-of-iteration"`` (a loop body reads it and the
    next iteration overwrites it with no barrier between); ``first``/``second`` are the two statements, and the last
    item says the loop runs inside an ``if`` (where cuda.syncthreads() would hang)."""
    fn = _source_tree(kernel)
    if fn is None or array not in _shared_names(fn):
        return []
    found: list[tuple[str, str, str, bool]] = []

    def within(seq: list[Any]) -> None:
        last_w = None
        for e in seq:
            if e[0] == "B":
                last_w = None
            elif e[0] == "W" and e[1] == array:
                last_w = e
            elif e[0] == "R" and e[1] == array and last_w is not None and last_w[2] != e[2]:
                found.append(("after-write", last_w[2], e[2], False))
                return

    def across(seq: list[Any]) -> None:
        # from the last barrier of the body round to the first barrier of the next iteration
        b = [k for k, e in enumerate(seq) if e[0] == "B"]
        tail, head = (seq[b[-1] + 1 :], seq[: b[0]]) if b else (seq, seq)
        t_w = [e for e in tail if e[0] == "W" and e[1] == array]
        t_r = [e for e in tail if e[0] == "R" and e[1] == array]
        h_r = [e for e in head if e[0] == "R" and e[1] == array]
        h_w = [e for e in head if e[0] == "W" and e[1] == array]
        if t_w and h_r:
            found.append(("end-of-step", t_w[-1][2], h_r[0][2], False))
        elif t_r and h_w:
            found.append(("end-of-iteration", t_r[-1][2], h_w[0][2], False))

    def walk(events: list[Any]) -> None:
        within(_flat(events))
        for e in events:
            if e[0] == "L":
                n = len(found)
                across(_flat(e[1]))
                if e[2]:  # the loop runs inside an `if`: say so with its gap
                    found[n:] = [(k, x, y, True) for k, x, y, _ in found[n:]]
                walk(e[1])

    walk(_events(fn.body, _shared_names(fn)))
    found.sort(key=lambda g: g[0] == "after-write")  # a loop's own gap is the more specific one
    seen, out = set(), []
    for g in found:
        if g not in seen:
            seen.add(g)
            out.append(g)
    return out


def barrier_cause(kernel: Any, array: str) -> str | None:
    """The likely cause of a race on shared array ``array`` read from the kernel's code (:func:`barrier_gaps`), or
    None when the code shows no missing barrier (the simulator's own cause then stands)."""
    gaps = barrier_gaps(kernel, array)
    if not gaps:
        return None
    words = {
        "after-write": "a missing cuda.syncthreads() between writing `{a}` and reading it: `{x}` stores elements that "
        "other threads then read in `{y}`, and nothing makes them wait for the stores. Put the barrier "
        "after the loads, before the first use.",
        "after-atomic": "a missing cuda.syncthreads() between the atomic updates of `{a}` and reading it: `{x}` adds "
        "to `{a}`, and `{y}` reads it before the other threads' updates are done. Put the barrier after the atomic "
        "updates, before `{y}`.",
        "end-of-step": "a missing cuda.syncthreads() at the end of each step of the loop: `{x}` writes `{a}`, and the "
        "next step's `{y}` reads elements other threads wrote in this one. Put the barrier inside the "
        "loop, after each step.",
        "end-of-iteration": "a missing cuda.syncthreads() at the end of each iteration: `{x}` still reads `{a}` while "
        "faster threads start the next iteration and overwrite it in `{y}`. Put a second barrier "
        "at the end of the loop body.",
    }
    kind, x, y, in_branch = gaps[0]
    if kind == "after-write" and "atomic" in _short(x):
        kind = "after-atomic"
    text = words[kind].format(a=array, x=_short(x), y=_short(y))
    if in_branch:
        text = text.replace("a missing cuda.syncthreads()", "a missing barrier", 1)
        text += (
            " This loop runs inside an `if` that not every thread of the block takes, where cuda.syncthreads() "
            "would hang: if only the lanes of one warp run it, order the steps with cuda.syncwarp() (read into a "
            "register, cuda.syncwarp(), write, cuda.syncwarp()); otherwise move the barrier out of the branch."
        )
    return text


def _short(statement: str) -> str:
    """A statement as quoted in a cause: cut before a conditional expression, and at 48 characters."""
    text = statement.split(" if ", 1)[0]
    return text if len(text) <= 48 else text[:45] + "..."


# ------------------------------------------------------------------------------------------- an axis the launch lacks
_FAMILIES = ("threadIdx", "blockIdx", "blockDim", "gridDim")
_CPP_AXIS = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*([xyz])\b")
# a flattened index multiplies the y (z) index by a width: ``threadIdx.y * blockDim.x`` is 0 in a flat launch, rightly
_FLATTENS = {"threadIdx": ("blockDim",), "blockIdx": ("gridDim",), "blockDim": ("blockDim",), "gridDim": ("gridDim",)}


def _cpp_code(source: str) -> str:
    """CUDA C++ ``source`` with its comments blanked out."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)


def axis_uses(kernel: Any) -> dict[tuple[str, str], bool] | None:
    """The launch components a kernel reads, ``{(family, axis): flattening_only}`` (``("threadIdx", "y")``: True when
    every use multiplies it by a width, as a flattened index does, or comes from ``cuda.grid``), from a Numba kernel's Python source or a CUDA C++
    source string; ``cuda.grid(k)``/``cuda.gridsize(k)`` read the first ``k`` axes of threadIdx and blockIdx (and the
    dims). None when there is no source to read."""
    uses: dict[tuple[str, str], bool] = {}

    def add(key: tuple[str, str], flat: bool) -> None:
        uses[key] = uses.get(key, True) and flat

    if isinstance(kernel, str):
        code = _cpp_code(kernel)
        for m in _CPP_AXIS.finditer(code):
            fam, ax = m.group(1), m.group(2)
            widths = "|".join(_FLATTENS[fam])
            before, after = code[max(0, m.start() - 40) : m.start()], code[m.end() : m.end() + 40]
            flat = bool(
                re.match(rf"\s*\*\s*\(?\s*(?:{widths})\s*\.", after) or re.search(rf"(?:{widths})\s*\.\s*[xyz]\s*\*\s*$", before)
            )
            add((fam, ax), flat)
        return uses
    fn = _source_tree(kernel)
    if fn is None:
        return None

    def component(node: ast.AST) -> tuple[str, str] | None:
        if isinstance(node, ast.Attribute) and node.attr in "xyz" and len(node.attr) == 1:
            owner = node.value
            fam = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else None
            if fam in _FAMILIES:
                return fam, node.attr
        return None

    flat_ids: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                ca, cb = component(a), component(b)
                if ca and cb and cb[0] in _FLATTENS[ca[0]]:
                    flat_ids.add(id(a))
    for node in ast.walk(fn):
        comp = component(node)
        if comp is not None:
            add(comp, id(node) in flat_ids)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("grid", "gridsize")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, int)
        ):
            fams = ("threadIdx", "blockIdx") if node.func.attr == "grid" else ("blockDim", "gridDim")
            for ax in "xyz"[: node.args[0].value]:
                for fam in fams:
                    add((fam, ax), True)  # read, but not by that name: never named as a flat axis
    return uses


_WARP_WIDE = re.compile(r"wmma|mma_sync|shfl|laneid|ballot|activemask|tiled_partition|coalesced_threads|syncwarp")


def _warp_collective(kernel: Any) -> bool:
    """True when the kernel's code has warp-wide operations (WMMA, shuffles, votes): its lanes cooperate, so a lane
    need not read its own index. True too when there is no source to read (a remark that may not apply is left out)."""
    if isinstance(kernel, str):
        return _WARP_WIDE.search(_cpp_code(kernel)) is not None
    return source_matches(kernel, _WARP_WIDE.pattern)


def _dims3(dim: Any) -> tuple[int, int, int]:
    if dim is None:  # a one-dimensional launch of any width
        return (0, 1, 1)
    d = tuple(int(v) for v in (dim if isinstance(dim, (tuple, list)) else (dim,)))
    return (*d, 1, 1, 1)[:3]  # type: ignore[return-value]


_AXIS_WORDS = {
    "threadIdx": ("0 in every thread of", "all threads of a block get the same value from it", "the thread's index in its block"),
    "blockIdx": ("0 in every block of", "all blocks get the same value from it", "the block's index in the grid"),
    "blockDim": ("1 in", "it is not the block's width", "the block's width"),
    "gridDim": ("1 in", "it is not the grid's width", "the grid's width"),
}


def axis_cause(kernel: Any, grid: Any, block: Any) -> str | None:
    """The cause "the kernel reads an axis this launch does not have" (``threadIdx.y`` in blocks of (128, 1, 1) in a
    grid of (8, 1, 1): 0 in every thread, so all threads of a block get the same index from it; a grid and blocks
    both flat along the axis, not a 2-D launch whose grid happens to be one block high), or "the launch has an axis the kernel never
    reads" (blocks of 16 × 16 threads, no ``threadIdx.y`` and no ``cuda.grid(2)``: threads that differ only in y do the
    same work). ``kernel``: a Numba kernel or a CUDA C++ source string; ``grid``/``block``: the launch's (None: one-
    dimensional, of any width). A y or z index multiplied by a width (a
    flattened index, ``threadIdx.y * blockDim.x``) is right in a flat launch and is not named. None when neither
    holds, or there is no source."""
    uses = axis_uses(kernel)
    if not uses:
        return None
    g, b = _dims3(grid), _dims3(block)
    extent = {"threadIdx": b, "blockDim": b, "blockIdx": g, "gridDim": g}
    blocks = f"blocks of {b}" if block is not None else "one-dimensional blocks"
    grids = f"a grid of {g}" if grid is not None else "a one-dimensional grid"
    shape = {"threadIdx": blocks, "blockDim": blocks, "blockIdx": grids, "gridDim": grids}
    py = not isinstance(kernel, str)
    for fam in _FAMILIES:
        for k, ax in ((1, "y"), (2, "z")):
            if (fam, ax) in uses and not uses[(fam, ax)] and g[k] == 1 and b[k] == 1:  # the launch has no y at all
                value, effect, meaning = _AXIS_WORDS[fam]
                name = ("cuda." if py else "") + f"{fam}.{ax}"
                along = ("cuda." if py else "") + f"{fam}.x"
                return (
                    f"your kernel reads `{name}`, which is {value} this launch ({blocks} in {grids}: nothing along "
                    f"{ax}), so {effect}. If you meant {meaning}, that is `{along}` (x and {ax} swapped?)."
                )
    warp_wide = _warp_collective(kernel)  # a warp's lanes along x work together (WMMA, shuffles): x may go unread
    for fam in ("threadIdx", "blockIdx"):
        for k, ax in enumerate("xyz"):
            others = [o for o in "xyz" if o != ax and (fam, o) in uses]
            if warp_wide and (fam, ax) == ("threadIdx", "x"):
                continue
            if extent[fam][k] > 1 and (fam, ax) not in uses and others:
                name = ("cuda." if py else "") + f"{fam}.{ax}"
                unit = "threads of a block" if fam == "threadIdx" else "blocks"
                grid_call = " (nor cuda.grid(2))" if py and ax in "xy" else ""
                return (
                    f"this launch has {shape[fam]}, {extent[fam][k]} {unit} along {ax}, but your kernel never reads "
                    f"`{name}`{grid_call}: {unit} that differ only in {ax} compute the same indices and do the same "
                    f"work, so the rest of the {ax} range is never covered (both indices taken from "
                    f"{others[0]}: x and y mixed up?)."
                )
    return None


# ------------------------------------------------------------------------------------------- slips read from the code
def _thread_names(fn: ast.FunctionDef) -> set[str]:
    """Names assigned the thread's index in its block: from an expression that reads ``threadIdx`` (``t =
    cuda.threadIdx.x``, ``tx, ty = cuda.threadIdx.x, cuda.threadIdx.y``)."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and "threadIdx" in ast.unparse(node.value):
            for t in node.targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def local_array_cause(kernel: Any) -> str | None:
    """The cause "a per-thread array where the threads share values": a ``cuda.local.array`` that the kernel updates
    with an atomic or indexes by the thread's index in its block (``sh[t]``, ``t = cuda.threadIdx.x``): each thread
    has its own copy, so no thread sees what another stored in it. None when the kernel has no such array (or no
    source); a private scratch array indexed otherwise (``buf[k]``, ``buf[i % 4]``) is not named."""
    fn = _source_tree(kernel)
    if fn is None:
        return None
    local: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and "local.array" in ast.unparse(node.value.func):
            local.update(t.id for t in node.targets if isinstance(t, ast.Name))
    if not local:
        return None
    threads = _thread_names(fn)
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and ".atomic." in "." + ast.unparse(node.func) + "."
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in local
        ):
            name, how = node.args[0].id, f"`{ast.unparse(node)}` adds to the calling thread's own copy only"
            break
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in local
            and any((isinstance(n, ast.Name) and n.id in threads) or "threadIdx" in ast.unparse(n) for n in ast.walk(node.slice))
        ):
            name, how = node.value.id, f"indexing it by the thread (`{ast.unparse(node)}`) picks an element of a private array"
            break
    else:
        return None
    return (
        f"`{name}` is a cuda.local.array: each thread has its own private copy, which no other thread sees, so "
        f"{how}, and what the other threads store never reaches it (a private copy starts as garbage, too). Values "
        "the threads of a block share (partial sums, counters, a tile) go in cuda.shared.array, with "
        "cuda.syncthreads() between the writes and the reads."
    )


def block_stride_cause(kernel: Any) -> str | None:
    """The cause "a grid-stride loop that steps by one block": ``for i in range(cuda.grid(1), n, cuda.blockDim.x)``
    (a start that differs per block, a step of one block's width), so the blocks' ranges overlap and elements are
    taken several times. None otherwise (a loop from ``threadIdx.x`` in steps of ``blockDim.x`` is a block's own
    loop, and right)."""
    fn = _source_tree(kernel)
    if fn is None:
        return None
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Call)
            and ast.unparse(node.iter.func) == "range"
            and len(node.iter.args) == 3
        ):
            start, step = ast.unparse(node.iter.args[0]), ast.unparse(node.iter.args[2])
            per_grid = "cuda.grid(" in start or "blockIdx" in start
            if per_grid and "blockDim" in step and not any(k in step for k in ("gridDim", "gridsize")):
                return (
                    f"the loop `for {ast.unparse(node.target)} in range({start}, ..., {step})` starts at the thread's "
                    f"index in the whole grid but steps by one block's width (`{step}`): the blocks' ranges overlap, "
                    "so elements are taken by several threads (and added or counted more than once). A grid-stride "
                    "loop steps by the whole grid: cuda.gridsize(1)."
                )
    return None


def halving_loop_cause(kernel: Any) -> str | None:
    """The cause of a kernel that never ends because a halving loop's condition holds at 0: ``while s >= 0:`` with
    ``s //= 2`` (or ``>>= 1``) in its body: 0 // 2 is 0, so the condition stays true. None otherwise."""
    fn = _source_tree(kernel)
    if fn is None:
        return None
    for node in ast.walk(fn):
        if not (isinstance(node, ast.While) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1):
            continue
        left, op, right = node.test.left, node.test.ops[0], node.test.comparators[0]
        if not (isinstance(left, ast.Name) and isinstance(right, ast.Constant) and right.value in (0, -1)):
            continue
        if not (isinstance(op, ast.GtE) and right.value == 0 or isinstance(op, ast.Gt) and right.value == -1):
            continue
        v = left.id
        halves = any(
            isinstance(s, ast.AugAssign)
            and isinstance(s.target, ast.Name)
            and s.target.id == v
            and (isinstance(s.op, ast.FloorDiv) or isinstance(s.op, ast.RShift))
            for s in ast.walk(node)
        )
        if halves:
            return (
                f"`while {ast.unparse(node.test)}:` never ends: halving `{v}` stops at 0 (0 // 2 is 0), and `{v}` equal "
                f"to 0 still meets the condition, so every thread loops for ever. The bound must exclude 0: "
                f"`while {v} > 0:`."
            )
    return None


def tree_guard_cause(kernel: Any) -> str | None:
    """The cause of a race in a tree reduction whose step ``sh[t] += sh[t + s]`` (in a loop that halves ``s``) runs
    under ``if t <= s:`` or under no test (CUDA C++ too: ``if (threadIdx.x <= s) a[threadIdx.x] += a[threadIdx.x + s];``): thread ``s`` also adds, writing ``sh[s]`` while thread 0 reads it in the
    same step. None when the step is guarded otherwise (``t < s``, or a test this does not read), or no source."""
    if isinstance(kernel, str):
        return _cpp_tree_guard(kernel)
    fn = _source_tree(kernel)
    if fn is None:
        return None

    def halved(loop: ast.While) -> set[str]:
        return {
            s.target.id
            for s in ast.walk(loop)
            if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and isinstance(s.op, (ast.FloorDiv, ast.RShift))
        }

    def step(st: ast.stmt, strides: set[str]) -> tuple[str, str, str] | None:
        """(array, index, stride) of ``a[t] += a[t + s]`` (or ``a[t] = a[t] + a[t + s]``)."""
        if not isinstance(st, (ast.AugAssign, ast.Assign)):
            return None
        target = st.target if isinstance(st, ast.AugAssign) else st.targets[0]
        if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and isinstance(target.slice, ast.Name)):
            return None
        arr, t = target.value.id, target.slice.id
        for sub in ast.walk(st.value):
            if (
                isinstance(sub, ast.Subscript)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == arr
                and isinstance(sub.slice, ast.BinOp)
                and isinstance(sub.slice.op, ast.Add)
                and {ast.unparse(sub.slice.left), ast.unparse(sub.slice.right)} & {t}
            ):
                s = ({ast.unparse(sub.slice.left), ast.unparse(sub.slice.right)} - {t}).pop()
                if s in strides:
                    return arr, t, s
        return None

    def guard(test: ast.expr, t: str, s: str) -> str:
        """One test against the step: "right" (t < s), "loose" (t <= s), "none" (``True``) or "other"."""
        if isinstance(test, ast.Constant) and test.value is True:
            return "none"
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            kinds = [guard(v, t, s) for v in test.values]
            return "right" if "right" in kinds else "loose" if "loose" in kinds and "other" not in kinds else "other"
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = ast.unparse(test.left), test.ops[0], ast.unparse(test.comparators[0])
            if (left, right) == (t, s) and isinstance(op, ast.Lt) or (left, right) == (s, t) and isinstance(op, ast.Gt):
                return "right"
            if (left, right) == (t, s) and isinstance(op, ast.LtE) or (left, right) == (s, t) and isinstance(op, ast.GtE):
                return "loose"
        return "other"

    def visit(stmts: list[ast.stmt], tests: list[ast.expr], strides: set[str]) -> str | None:
        for st in stmts:
            if isinstance(st, ast.While):
                found = visit(st.body, [], strides | halved(st))
            elif isinstance(st, ast.If):
                found = visit(st.body, [*tests, st.test], strides)
            else:
                hit = step(st, strides)
                found = None
                if hit is not None:
                    arr, t, s = hit
                    kinds = [guard(x, t, s) for x in tests]
                    if "right" in kinds or "other" in kinds:
                        return None
                    how = f"`if {t} <= {s}:`" if "loose" in kinds else "no test"
                    found = (
                        f"the tree step `{ast.unparse(st)}` runs under {how}: thread {s} adds too, writing "
                        f"`{arr}[{s}]` while thread 0 reads `{arr}[0 + {s}]` in the same step (and threads past the "
                        f"stride read beyond the live half). Guard the step so that only the threads below the stride "
                        f"add: `if {t} < {s}:`."
                    )
            if found:
                return found
        return None

    return visit(fn.body, [], set())


_LAUNCH_WORDS = re.compile(r"grid \((\d+), (\d+), (\d+)\), block \((\d+), (\d+), (\d+)\)")


def axis_cause_in(source: str, report: str) -> str | None:
    """:func:`axis_cause` for the launch a CPU stand-in report names (``... (grid (3, 1, 1), block (32, 4, 1)) ...``),
    for a race or a wrong store it reports; None when the report names no launch."""
    m = _LAUNCH_WORDS.search(report)
    if m is None:
        return None
    d = [int(v) for v in m.groups()]
    return axis_cause(source, tuple(d[:3]), tuple(d[3:]))


_CPP_LOOSE_STEP = re.compile(
    r"if\s*\(\s*(?P<t>[\w.]+)\s*<=\s*(?P<s>\w+)\s*\)\s*\{?\s*(?P<a>\w+)\s*\[\s*(?P=t)\s*\]\s*\+=\s*"
    r"(?P=a)\s*\[\s*(?P=t)\s*\+\s*(?P=s)\s*\]"
)


def _cpp_tree_guard(source: str) -> str | None:
    """:func:`tree_guard_cause` for CUDA C++: the step ``a[t] += a[t + s]`` under ``if (t <= s)``."""
    m = _CPP_LOOSE_STEP.search(_cpp_code(source))
    if m is None:
        return None
    t, s, a = m.group("t"), m.group("s"), m.group("a")
    return (
        f"the tree step `{a}[{t}] += {a}[{t} + {s}]` runs under `if ({t} <= {s})`: the thread whose index is {s} adds "
        f"too, writing `{a}[{s}]` while thread 0 reads it in the same step. Guard the step so that only the threads "
        f"below the stride add: `if ({t} < {s})`."
    )


_WRITER = re.compile(r"thread \((\d+), (\d+), (\d+)\) of block \((\d+), (\d+), (\d+)\)[^:;]*? wrote (\w+)\[(\d+)\]")


def wrapped_index_in(report: str) -> str | None:
    """The cause "a 16-bit index wrapped" for a CPU stand-in report of a flat launch in which a thread wrote element
    ``k`` of an array although its index in the grid is ``k`` + a multiple of 65,536 (``... (grid (548, 1, 1), block
    (128, 1, 1)) ...: thread (0, 0, 0) of block (512, 0, 0) wrote y[0] ...``); None otherwise."""
    launch, writer = _LAUNCH_WORDS.search(report), _WRITER.search(report)
    if launch is None or writer is None:
        return None
    block_x = int(launch.group(4))
    tx, bx, k = int(writer.group(1)), int(writer.group(4)), int(writer.group(8))
    g = bx * block_x + tx
    if g == k or g < 65_536 or (g - k) % 65_536:
        return None
    return (
        f"thread {tx} of block {bx} has index {g:,} in the grid, but it wrote `{writer.group(7)}[{k}]`, {g - k:,} "
        "lower: a 16-bit index wraps around at 65,536 (a short holds -32,768 to 32,767, an unsigned short 0 to "
        "65,535), so the threads past that range write over the first elements again. Compute the index as an int."
    )


def halo_guard_cause(kernel: Any) -> str | None:
    """The cause of two threads writing one shared element when a halo store ``sh[t] = ...`` runs under ``if t <=
    R:`` (or under no test) beside the block's own store ``sh[t + R] = ...``: thread R's halo store lands on the slot
    thread 0 fills. None when the halo store is guarded by ``t < R`` (or a test this does not read), or no source."""
    fn = _source_tree(kernel)
    if fn is None:
        return None
    own: dict[str, tuple[str, str]] = {}  # array -> (index name, offset) of a store a[t + R]
    halo: list[tuple[str, str, list[ast.expr], ast.stmt]] = []

    def visit(stmts: list[ast.stmt], tests: list[ast.expr]) -> None:
        for st in stmts:
            if isinstance(st, ast.If):
                visit(st.body, [*tests, st.test])
                continue
            if isinstance(st, (ast.For, ast.While)):
                continue  # a loop's stores are another pattern
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Subscript)):
                continue
            target = st.targets[0]
            if not isinstance(target.value, ast.Name):
                continue
            arr, idx = target.value.id, target.slice
            if isinstance(idx, ast.Name):
                halo.append((arr, idx.id, tests, st))
            elif isinstance(idx, ast.BinOp) and isinstance(idx.op, ast.Add) and isinstance(idx.left, ast.Name) and not tests:
                own.setdefault(arr, (idx.left.id, ast.unparse(idx.right)))

    visit(fn.body, [])
    for arr, t, tests, st in halo:
        if arr not in own or own[arr][0] != t:
            continue
        r = own[arr][1]
        kinds = []
        for test in tests:
            text = ast.unparse(test).replace(" ", "")
            kinds.append(
                "none" if text == "True" else "right" if text == f"{t}<{r}" else "loose" if text == f"{t}<={r}" else "other"
            )
        if "right" in kinds or "other" in kinds:
            continue
        how = f"`if {t} <= {r}:`" if "loose" in kinds else "no guard"
        return (
            f"the halo store `{ast.unparse(st)}` runs under {how}: thread {r} stores it too, into `{arr}[{r}]`, the "
            f"slot thread 0 fills with `{arr}[{t} + {r}]`, so two threads write one element. Guard it so that only "
            f"the first {r} threads load the halo: `if {t} < {r}:`."
        )
    return None
