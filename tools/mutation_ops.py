"""Mutation operators for ``tools/mutation.py``: each turns a piece of source into single-change mutants.

Python sources (Numba kernels, host functions, the functions that compute a figure) are parsed with parso (the
parser Cosmic Ray's operators work on); an operator yields :class:`Edit` objects, a span of the source and its
replacement. The standard operators are mutmut's (one partner per operator, number + 1, keyword swaps), the
CUDA operators are the course's own. CUDA C++ sources (strings handed to NVRTC or its stand-in, and the expressions
of an ElementwiseKernel or ReductionKernel) get the same CUDA operators on their text.

Every operator class names the words a right cause contains (:data:`CAUSE_WORDS`): the report counts the killed
mutants whose check message has one of them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterator

import parso
from parso.python import tree

# the words a message that names the right cause contains, per operator class (case-insensitive, any one of them)
# an arithmetic, constant or logic slip has no name of its own: a right message shows where the answer goes wrong: a
# value next to the right one or the error the answer raised at a named input (not "compare with the statement" alone)
VALUE_WORDS = (
    "expected", "should be", "should keep", "instead of", "reference gives", "differs", "wrong value", "does not match",
    "your function gave", "you returned", "yours is", "got ", "returned", "raised", "elements are wrong", "gives",
    # or the element, thread and access where a kernel goes wrong (the index a slip produced, the element it races on)
    "indexed element", "at index", "never written", "wrote outside", "is stuck in",
)  # fmt: skip
CAUSE_WORDS: dict[str, tuple[str, ...]] = {
    # standard (mutmut) classes (see VALUE_WORDS)
    "arithmetic": VALUE_WORDS,
    "comparison": VALUE_WORDS + ("boundary", "bound", "equal"),
    "constant": VALUE_WORDS,
    "logic": VALUE_WORDS,
    # CUDA classes: the message names the mechanism
    "barrier": ("barrier", "syncthreads", "syncwarp", "sync()", "race", "before every thread"),
    "bounds": ("out of bounds", "out-of-bounds", "past the end", "outside", "bounds", "if i < n", "guard"),
    "off-by-one": (
        "one",
        "last",
        "first",
        "past the end",
        "out of bounds",
        "out-of-bounds",
        "neighbour",
        "shifted",
        "no thread had stored",
        "never writes",
        "indexed element",
    ),  # fmt: skip
    "swap-xy": ("row", "column", "transpos", ".x", ".y", "swapped", "x and y"),
    "grid-stride": ("grid-stride", "grid stride", "stride", "gridsize", "whole grid", "every block"),
    "atomic": ("atomic", "race", "lost", "same time", "same element", "at once"),
    "shared-local": ("shared", "local", "per-thread", "its own copy", "other threads"),
    "narrow-index": ("overflow", "int32", "uint16", "65535", "65536", "wraps", "large", "16-bit", "32-bit"),
    "fp64": ("fp64", "float64", "double"),
    "shift-division": ("power of two", "shift", "divid", "not a multiple"),
    "early-return": ("return", "barrier", "divergent", "every thread", "all threads"),
    # host-function classes
    "units": ("unit", "1000", "1024", "bits", "bytes", "factor", "gb/s", "mb", "ms", "kilo", "giga", "×", "times"),
    "count": ("one", "count", "off by", "last", "first", "missing", "extra"),
    "mutate-input": ("input", "changed", "modif", "in place", "overwr", "argument"),
    "cache": ("same shape", "cache", "again", "new values", "second call", "earlier call", "previous"),
}


@dataclass(frozen=True)
class Edit:
    """One single change: replace ``source[start:end]`` with ``text``."""

    operator: str
    op_class: str
    start: int
    end: int
    text: str

    def apply(self, source: str) -> str:
        return source[: self.start] + self.text + source[self.end :]


# ======================================================================================== Python (parso) helpers
def _offsets(source: str) -> list[int]:
    out, pos = [0], 0
    for line in source.splitlines(keepends=True):
        pos += len(line)
        out.append(pos)
    return out


class _Src:
    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = _offsets(source)
        self.module = parso.parse(source, version="3.11")

    def off(self, pos: tuple[int, int]) -> int:
        return self.lines[pos[0] - 1] + pos[1]

    def span(self, node: tree.NodeOrLeaf) -> tuple[int, int]:
        return self.off(node.start_pos), self.off(node.end_pos)

    def code(self, node: tree.NodeOrLeaf) -> str:
        a, b = self.span(node)
        return self.source[a:b]

    def edit(self, op: str, cls: str, node: tree.NodeOrLeaf, text: str) -> Edit:
        a, b = self.span(node)
        return Edit(op, cls, a, b, text)


def _walk(node: tree.NodeOrLeaf) -> Iterator[tree.NodeOrLeaf]:
    yield node
    for child in getattr(node, "children", ()):
        yield from _walk(child)


BINARY = {
    "+": "-",
    "-": "+",
    "*": "/",
    "/": "*",
    "//": "/",
    "%": "/",
    "**": "*",
    "<<": ">>",
    ">>": "<<",
    "&": "|",
    "|": "&",
    "^": "&",
}
AUGMENTED = {
    "+=": "-=",
    "-=": "+=",
    "*=": "/=",
    "/=": "*=",
    "//=": "/=",
    "%=": "/=",
    "<<=": ">>=",
    ">>=": "<<=",
    "&=": "|=",
    "|=": "&=",
    "^=": "&=",
}
COMPARE = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
KEYWORDS = {"True": "False", "False": "True", "and": "or", "or": "and", "break": "continue", "continue": "break"}
BINARY_PARENTS = {"arith_expr", "term", "shift_expr", "and_expr", "xor_expr", "expr", "power"}
UNIT_FACTORS = {
    1000: ("1024",),
    1024: ("1000",),
    8: ("1",),
    1_000_000: ("1048576", "1000"),
    1_000_000_000: ("1073741824", "1000000"),
}
UNIT_FLOATS = {
    1e3: ("1024.0",),
    1e6: ("1048576.0", "1e3"),
    1e9: ("1073741824.0", "1e6"),
    1e12: ("1e9",),
    1e-3: ("1e-6",),
    1e-6: ("1e-9", "1e-3"),
    1e-9: ("1e-6",),
}
FLOAT32_CASTS = ("float32", "np.float32", "numpy.float32", "types.float32", "numba.float32")


def _in_if_test(node: tree.NodeOrLeaf) -> bool:
    """True where ``node`` sits in the test of an ``if``/``elif`` (not its body)."""
    child, parent = node, node.parent
    while parent is not None and parent.type not in ("if_stmt", "funcdef", "suite", "simple_stmt"):
        child, parent = parent, parent.parent
    if parent is None or parent.type != "if_stmt":
        return False
    kids = parent.children
    return any(kids[i] is child and i > 0 and getattr(kids[i - 1], "value", "") in ("if", "elif") for i in range(len(kids)))


def _dotted(src: _Src, node: tree.NodeOrLeaf) -> str:
    return re.sub(r"\s+", "", src.code(node))


def standard_ops(src: _Src, *, kernel: bool) -> Iterator[Edit]:
    """mutmut's operators: binary and augmented operators swapped, comparisons flipped, keywords swapped, ``not``
    and unary minus removed, every number + 1 (in a kernel, comparisons in an ``if`` test are the CUDA class
    "bounds": weakening a bounds check)."""
    for node in _walk(src.module):
        if node.type == "operator":
            v, parent = node.value, node.parent
            if v in BINARY and parent is not None and parent.type in BINARY_PARENTS:
                yield src.edit("binary-operator", "arithmetic", node, BINARY[v])
            elif v in AUGMENTED:
                yield src.edit("augmented-assign", "arithmetic", node, AUGMENTED[v])
            elif v in COMPARE and parent is not None and parent.type == "comparison":
                bound = kernel and v in ("<", "<=", ">", ">=") and _in_if_test(node)
                yield src.edit("weaken-bound" if bound else "comparison", "bounds" if bound else "comparison", node, COMPARE[v])
            elif v == "-" and parent is not None and parent.type == "factor":
                yield src.edit("unary-remove", "arithmetic", node, "")
        elif node.type == "keyword" and node.value in KEYWORDS:
            if node.value in ("and", "or") and (node.parent is None or node.parent.type not in ("and_test", "or_test")):
                continue
            yield src.edit("keyword", "logic", node, KEYWORDS[node.value])
        elif node.type == "name" and node.value in ("True", "False"):
            yield src.edit("keyword", "logic", node, KEYWORDS[node.value])
        elif node.type == "not_test":
            yield src.edit("not-remove", "logic", node, src.code(node.children[1]))
        elif node.type == "number":
            yield from _number_ops(src, node, kernel=kernel)


def _number_ops(src: _Src, node: tree.Leaf, *, kernel: bool) -> Iterator[Edit]:
    text = node.value.replace("_", "")
    try:
        value = int(text, 0) if re.fullmatch(r"(0[xob])?[0-9a-fA-F]+", text) else float(text)
    except ValueError:
        return
    if isinstance(value, int):
        yield src.edit("number", "constant", node, str(value + 1))
    else:
        yield src.edit("number", "constant", node, repr(value + 1))
    if not kernel:
        for alt in UNIT_FACTORS.get(value, ()) if isinstance(value, int) else UNIT_FLOATS.get(value, ()):
            yield src.edit("unit-factor", "units", node, alt)


def _calls(src: _Src, node: tree.NodeOrLeaf) -> tuple[str, tree.Node] | None:
    """``(dotted name, trailer)`` where ``node`` is a call ``a.b.c(...)`` (a power/atom_expr ending in ``(...)``)."""
    if node.type not in ("power", "atom_expr"):
        return None
    kids = node.children
    last = kids[-1]
    if last.type != "trailer" or last.children[0].value != "(":
        return None
    name = "".join(_dotted(src, k) for k in kids[:-1])
    return name, last


def _call_args(trailer: tree.Node) -> list[tree.NodeOrLeaf]:
    if len(trailer.children) < 3:
        return []
    inner = trailer.children[1]
    if inner.type == "arglist":
        return [c for c in inner.children if not (c.type == "operator" and c.value == ",")]
    return [inner]


def _stmt_of(node: tree.NodeOrLeaf) -> tree.Node | None:
    while node is not None and node.type != "simple_stmt":
        node = node.parent
    return node


def _indent(src: _Src, node: tree.NodeOrLeaf) -> str:
    return " " * node.start_pos[1]


def _first_if_test(src: _Src, fn: tree.NodeOrLeaf) -> str | None:
    """The test of the first ``if`` that compares with ``<``, ``<=``, ``>`` or ``>=`` (a bound), or None."""
    for node in _walk(fn):
        if node.type == "if_stmt":
            test = node.children[1]
            if any(getattr(leaf, "value", "") in ("<", "<=", ">", ">=") for leaf in _walk(test)):
                return src.code(test)
    return None


def cuda_python_ops(src: _Src) -> Iterator[Edit]:
    """The course's CUDA operators on a Numba kernel's Python source."""
    fn = next((n for n in _walk(src.module) if n.type == "funcdef"), src.module)
    barriers: list[tree.Node] = []
    for node in _walk(src.module):
        call = _calls(src, node)
        if call is not None:
            name, trailer = call
            args = _call_args(trailer)
            stmt = _stmt_of(node)
            if name.endswith(("syncthreads", "syncwarp")) or name.endswith(".sync"):
                if stmt is not None and src.code(stmt).strip() == src.code(node).strip():
                    barriers.append(stmt)
                    yield Edit("drop-barrier", "barrier", *src.span(node), "None")
            elif name.startswith("cuda.atomic.") and len(args) == 3 and stmt is not None:
                arr, idx, val = (src.code(a) for a in args)
                kind = name.rsplit(".", 1)[1]
                new = {
                    "add": f"{arr}[{idx}] += {val}",
                    "sub": f"{arr}[{idx}] -= {val}",
                    "max": f"{arr}[{idx}] = max({arr}[{idx}], {val})",
                    "min": f"{arr}[{idx}] = min({arr}[{idx}], {val})",
                }.get(kind)
                if new is None:
                    continue
                if src.code(stmt).strip() == src.code(node).strip():
                    yield Edit("atomic-to-plain", "atomic", *src.span(node), new)
                else:  # old = cuda.atomic.add(a, i, v): old = a[i]; then the plain update on the next line
                    first = stmt.children[0]
                    if first.type == "expr_stmt" and src.code(first.children[-1]).strip() == src.code(node).strip():
                        target = src.code(first.children[0])
                        yield src.edit("atomic-to-plain", "atomic", stmt, f"{target} = {arr}[{idx}]\n{_indent(src, stmt)}{new}\n")
            elif name == "cuda.gridsize":
                yield src.edit("grid-to-block-stride", "grid-stride", node, "cuda.blockDim.x")
            elif name in FLOAT32_CASTS and len(args) == 1 and args[0].type == "number":
                lit = args[0].value
                yield src.edit("float-literal-double", "fp64", node, lit if any(c in lit for c in ".eE") else lit + ".0")
            elif name == "range" and args:
                bound = args[0] if len(args) == 1 else args[1]
                yield src.edit("loop-bound+1", "off-by-one", bound, f"({src.code(bound)}) + 1")
        if node.type in ("power", "atom_expr"):
            code = _dotted(src, node)
            if code.startswith("cuda.shared.array("):
                a, _ = src.span(node)
                yield Edit("shared-to-local", "shared-local", a, a + len("cuda.shared"), "cuda.local")
            # x <-> y on the thread/block registers
            kids = node.children
            if len(kids) >= 3 and _dotted(src, kids[0]) == "cuda" and kids[1].type == "trailer":
                reg = _dotted(src, kids[1])
                if reg in (".threadIdx", ".blockIdx", ".blockDim", ".gridDim") and kids[2].type == "trailer":
                    axis = kids[2].children[-1]
                    if axis.type == "name" and axis.value in ("x", "y"):
                        yield src.edit("swap-xy", "swap-xy", axis, "y" if axis.value == "x" else "x")
            # subscripts: off-by-one index, rows and columns swapped
            for k in kids[1:]:
                if k.type == "trailer" and k.children[0].value == "[":
                    sub = k.children[1]
                    if sub.type == "subscriptlist":
                        parts = [c for c in sub.children if c.type != "operator"]
                        if len(parts) == 2 and all(p.type != "subscript" for p in parts):
                            yield src.edit("swap-row-column", "swap-xy", sub, f"{src.code(parts[1])}, {src.code(parts[0])}")
                            yield src.edit("index+1", "off-by-one", parts[-1], f"{src.code(parts[-1])} + 1")
                    elif sub.type not in ("subscript", "number"):
                        yield src.edit("index+1", "off-by-one", sub, f"{src.code(sub)} + 1")
        if node.type == "term":  # cuda.gridDim.x * cuda.blockDim.x -> cuda.blockDim.x
            code = _dotted(src, node)
            if code in ("cuda.gridDim.x*cuda.blockDim.x", "cuda.blockDim.x*cuda.gridDim.x"):
                yield src.edit("grid-to-block-stride", "grid-stride", node, "cuda.blockDim.x")
            ops = [c for c in node.children if c.type == "operator"]
            if len(node.children) == 3 and ops and ops[0].value == "//" and node.children[2].type == "number":
                k = int(node.children[2].value)
                if k > 1 and k & (k - 1):
                    yield src.edit(
                        "shift-division", "shift-division", node, f"{src.code(node.children[0])} >> {int(math.log2(k))}"
                    )
        if node.type == "if_stmt":
            test = node.children[1]
            comps = (
                [test]
                if test.type == "comparison"
                else [c for c in test.children if c.type == "comparison"]
                if test.type == "and_test"
                else []
            )
            for comp in comps:
                if any(getattr(c, "value", "") in ("<", "<=", ">", ">=") for c in comp.children):
                    yield src.edit("drop-bound", "bounds", comp, "True")
        if node.type == "expr_stmt" and len(node.children) == 3 and getattr(node.children[1], "value", "") == "=":
            rhs = node.children[2]
            code = _dotted(src, rhs)
            if node.children[0].type == "name" and any(r in code for r in ("cuda.grid(1)", "threadIdx", "blockIdx")):
                for t in ("uint16", "int32"):
                    yield src.edit(f"{t}-index", "narrow-index", rhs, f"_mut_np.{t}({src.code(rhs)})")
    if barriers:
        test = _first_if_test(src, fn)
        if test is not None:
            stmt = barriers[0]
            a = src.off((stmt.start_pos[0], 0))
            yield Edit(
                "early-return", "early-return", a, a, f"{_indent(src, stmt)}if not ({test}):\n{_indent(src, stmt)}    return\n"
            )


def host_python_ops(src: _Src) -> Iterator[Edit]:
    """Host-code operators on a Python function's source: off-by-one counts and integer division by a shift."""
    for node in _walk(src.module):
        call = _calls(src, node)
        if call is not None:
            name, trailer = call
            args = _call_args(trailer)
            if name == "range" and args:
                bound = args[0] if len(args) == 1 else args[1]
                yield src.edit("count-1", "count", bound, f"({src.code(bound)}) - 1")
                yield src.edit("count+1", "count", bound, f"({src.code(bound)}) + 1")
            elif name == "len" and len(args) == 1:
                yield src.edit("count-1", "count", node, f"({src.code(node)} - 1)")
        if node.type == "term" and len(node.children) == 3 and getattr(node.children[1], "value", "") == "//":
            a, b = node.children[0], node.children[2]
            if b.type == "number":
                k = int(b.value) if b.value.isdigit() else 0
                if k > 1 and k & (k - 1):
                    yield src.edit("shift-division", "shift-division", node, f"{src.code(a)} >> {int(math.log2(k))}")
            else:
                yield src.edit(
                    "shift-division", "shift-division", node, f"int({src.code(a)}) >> (int({src.code(b)}).bit_length() - 1)"
                )


def _annotations(src: _Src) -> list[tuple[int, int]]:
    """The spans of type annotations (a parameter's, a return's, an annotated assignment's): never mutated, since
    they do not run (``from __future__ import annotations``)."""
    spans = []
    for node in _walk(src.module):
        if node.type == "param" and getattr(node, "annotation", None) is not None:
            spans.append(src.span(node.annotation))
        elif node.type == "funcdef":
            kids = node.children
            for i, k in enumerate(kids[:-1]):
                if getattr(k, "value", "") == "->":
                    spans.append(src.span(kids[i + 1]))
        elif node.type == "annassign":
            spans.append(src.span(node.children[1]))
    return spans


def python_mutants(source: str, *, kernel: bool) -> list[Edit]:
    """Every single-change edit of ``source`` (one function's source, dedented), annotations left alone."""
    src = _Src(source)
    edits = list(standard_ops(src, kernel=kernel))
    edits += cuda_python_ops(src) if kernel else host_python_ops(src)
    skip = _annotations(src)
    seen: set[tuple[int, int, str]] = set()
    out = []
    for e in edits:
        if any(a <= e.start and e.end <= b for a, b in skip):
            continue
        key = (e.start, e.end, e.text)
        if key not in seen and e.apply(source) != source:
            seen.add(key)
            out.append(e)
    return out


# ================================================================================================== CUDA C++ text
_CPP_SKIP = re.compile(r"^\s*(#|//|template\b)")


def _code_lines(source: str) -> Iterator[tuple[int, str]]:
    """(offset, line) of each line of C++ code that is not a preprocessor line or a comment."""
    pos = 0
    in_block = False
    for line in source.splitlines(keepends=True):
        stripped = line.strip()
        if in_block:
            in_block = "*/" not in stripped
        elif stripped.startswith("/*"):
            in_block = "*/" not in stripped
        elif not _CPP_SKIP.match(line):
            yield pos, line.split("//", 1)[0]
        pos += len(line)


CPP_RULES: list[tuple[str, str, str, str]] = [
    # (operator, class, pattern, replacement)
    ("drop-barrier", "barrier", r"__syncthreads\(\)\s*;", ";"),
    ("drop-barrier", "barrier", r"__syncwarp\([^)]*\)\s*;", ";"),
    ("drop-barrier", "barrier", r"\b\w+\.sync\(\)\s*;", ";"),
    ("swap-xy", "swap-xy", r"\b(threadIdx|blockIdx|blockDim|gridDim)\.x\b", r"\1.y"),
    ("swap-xy", "swap-xy", r"\b(threadIdx|blockIdx|blockDim|gridDim)\.y\b", r"\1.x"),
    ("grid-to-block-stride", "grid-stride", r"\bblockDim\.x\s*\*\s*gridDim\.x\b", "blockDim.x"),
    ("grid-to-block-stride", "grid-stride", r"\bgridDim\.x\s*\*\s*blockDim\.x\b", "blockDim.x"),
    ("atomic-to-plain", "atomic", r"\batomicAdd\(\s*&([^,;]+),\s*([^;]+?)\)\s*;", r"\1 += \2;"),
    ("shared-to-local", "shared-local", r"__shared__\s+", ""),
    (
        "uint16-index",
        "narrow-index",
        r"\b(?:unsigned\s+int|int|unsigned|size_t|long)\s+(\w+\s*=[^;]*(?:threadIdx|blockIdx)[^;]*;)",
        r"unsigned short \1",
    ),
    ("float-literal-double", "fp64", r"\b(\d+\.\d*(?:[eE][-+]?\d+)?)[fF]\b", r"\1"),
    ("float-literal-double", "fp64", r"\b(sqrt|exp|log|fabs|fmax|fmin|rsqrt|tanh|pow)f\(", r"\1("),
    ("weaken-bound", "bounds", r"(\bif\s*\([^;{]*?\w)\s<\s", r"\1 <= "),
    ("weaken-bound", "bounds", r"(\bif\s*\([^;{]*?\w)\s>=\s", r"\1 > "),
    ("loop-bound+1", "off-by-one", r"(\bfor\s*\([^;]*;[^;]*?\w)\s<\s", r"\1 <= "),
    ("binary-operator", "arithmetic", r"(?<=\w|\))\s\+\s(?=[\w(])", " - "),
    ("binary-operator", "arithmetic", r"(?<=\w|\))\s-\s(?=[\w(])", " + "),
    ("binary-operator", "arithmetic", r"(?<=\w|\))\s\*\s(?=[\w(])", " / "),
    ("binary-operator", "arithmetic", r"(?<=\w|\))\s/\s(?=[\w(])", " * "),
    ("comparison", "comparison", r"\s==\s", " != "),
    ("comparison", "comparison", r"\s!=\s", " == "),
    ("augmented-assign", "arithmetic", r"\s\+=\s", " -= "),
    ("augmented-assign", "arithmetic", r"\s>>=\s", " <<= "),
    ("augmented-assign", "arithmetic", r"\s<<=\s", " >>= "),
    ("shift-division", "shift-division", r"\s/\s(3|5|6|7|9|10|12|24|48|96|100|1000)\b", None),  # type: ignore[list-item]
]


def cpp_mutants(source: str) -> list[Edit]:
    """Every single-change edit of a CUDA C++ source (a kernel, or an ElementwiseKernel's expression)."""
    out: list[Edit] = []
    seen: set[tuple[int, int, str]] = set()
    for base, line in _code_lines(source):
        for op, cls, pattern, repl in CPP_RULES:
            for m in re.finditer(pattern, line):
                if repl is None:  # a division by k that is not a power of two: shift by floor(log2 k)
                    text = f" >> {int(math.log2(int(m.group(1))))}"
                else:
                    text = m.expand(repl)
                e = Edit(op, cls, base + m.start(), base + m.end(), text)
                if (e.start, e.end, e.text) not in seen:
                    seen.add((e.start, e.end, e.text))
                    out.append(e)
    # early return before the first barrier, with the first if's test
    sync = re.search(r"^([ \t]*)__syncthreads\(\)\s*;", source, re.M)
    cond = re.search(r"\bif\s*\(([^;{]*?)\)\s*(?:\{|\n|[\w])", source)
    if sync is not None and cond is not None and cond.start() < len(source):
        text = f"{sync.group(1)}if (!({cond.group(1)})) return;\n"
        out.append(Edit("early-return", "early-return", sync.start(), sync.start(), text))
    return out
