"""Reads of read-only arrays compiled into the kernel: ``A[i, k]`` of an array no thread writes becomes a bounds test and
a list index in the kernel's own code, with no Python call.

A strict launch reads an array that no thread writes, and that shares memory with no other argument, from a copy
held as nested lists (:class:`labkit.sim.memory._Snapshot`). Even so each read was a call of the snapshot's
``__getitem__``, which cost a barrier-free kernel such as a naive matrix multiply two thirds of its time. For such a
launch this module compiles a variant of the kernel from its source in which every element read of those arrays is

    (rows_A[i][k] if 0 <= i < n0_A and 0 <= k < n1_A else A[i, k])

``rows_A``, ``n0_A``, ``n1_A`` are free variables of the variant (closure cells holding the launch's values), so a
thread pays nothing to find them and they are not parameters (a traceback lists the kernel's own arguments only). An
index out of bounds takes the ``else`` branch, the snapshot's own read, which raises as it always did; an index that
is not an integer fails the list index, and :func:`retype` gives that error the snapshot's message.

The same variant calls the memory model's short path for ``cuda.atomic.add(A, i, v)`` (histograms, counters, the
atomics that end a reduction) when ``A`` is a name: ``(A._lk_add_(i, v) if A.__class__ in FAST else
cuda.atomic.add(A, i, v))`` (``_lk_add`` where the old value is used), so an atomic of a strict launch costs one
method call instead of four; any other array takes the ``else`` branch, the call as written.

The variant keeps the kernel's name, qualified name, file, lines, globals and closure: tracebacks (the arrow on the
learner's line), the stuck line of a time-out and ``swapped_cuda_module`` see the learner's code as written. Nothing
else changes: writes, barriers, reads of watched arrays and device functions run as written.

A kernel whose source cannot be read (``exec`` of a string) or parsed, or whose index expressions are not plain
arithmetic of names and numbers, runs as written: correct, only slower.
"""

from __future__ import annotations

import ast
import copy
import inspect
import linecache
import textwrap
import types
from typing import Any, Callable, Sequence

__all__ = ["for_launch", "retype", "written_positions"]

_PREFIX = "_lk_"
_PURE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor)
_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_LIST_INDEX = "list indices must be integers or slices, not "


class _Source:
    """A kernel's parsed source, which of its parameters are only ever read (candidates for fast reads), and the
    names its globals give Numba's ``cuda`` module (for the atomics' short path)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.text, self.first, parsed = _source_of(fn)
        node = parsed if parsed is not None else self.parse()
        if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
            raise ValueError("not a plain function definition")
        names: set[str] = set()
        changed: set[str] = set()
        indexed: set[str] = set()  # names indexed somewhere (a parameter never indexed has no reads to compile)
        stored: set[str] = set()  # names stored into by an index (A[i] = v)
        calls: list[ast.Call] = []
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                names.add(n.id)
                if not isinstance(n.ctx, ast.Load):
                    changed.add(n.id)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                changed.update(n.names)
            elif isinstance(n, ast.Subscript):
                if isinstance(n.value, ast.Name):
                    indexed.add(n.value.id)
                    if not isinstance(n.ctx, ast.Load):
                        changed.add(n.value.id)
                        stored.add(n.value.id)
            elif isinstance(n, ast.Call):
                calls.append(n)
        if any(name.startswith(_PREFIX) for name in names):
            raise ValueError("the kernel uses labkit's own prefix")
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        self.origin = ast.Expr(ast.Constant(None), lineno=node.lineno, col_offset=node.col_offset)  # (where the def is)
        self.unused: ast.FunctionDef | None = node  # (the first variant's tree: _compile changes it)
        self.positions = {p: k for k, p in enumerate(params) if p not in changed and p in indexed}
        glob = getattr(fn, "__globals__", {})
        self.cuda_names = frozenset(n for n in names - changed if n not in params and _is_numba_cuda(glob.get(n)))
        self.atomics = any(_atomic_call(n, self.cuda_names) is not None for n in calls)
        stored.update(target.id for target in (_atomic_target(n, self.cuda_names) for n in calls) if target is not None)
        self.stored = frozenset(k for k, p in enumerate(params) if p in stored)

    def fresh(self) -> ast.FunctionDef:
        """A tree of the kernel's definition the caller may change: the one parsed first, then a new one each time."""
        node, self.unused = self.unused, None
        return node if node is not None else self.parse()

    def parse(self) -> ast.FunctionDef:
        """A fresh tree of the kernel's definition, at its lines in its file (the variant's rewriter changes it)."""
        tree = ast.parse("\n" * (self.first - 1) + self.text)  # (at its own lines, with no walk to move them)
        (node,) = tree.body
        return node  # type: ignore[return-value]


def _atomic_target(node: ast.Call, cuda_names: frozenset[str]) -> ast.Name | None:
    """The array named by a call ``cuda.atomic.<any operation>(A, ...)``, else None."""
    f = node.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and f.value.attr == "atomic"):
        return None
    if not isinstance(f.value.value, ast.Name) or f.value.value.id not in cuda_names:
        return None
    return node.args[0] if node.args and isinstance(node.args[0], ast.Name) else None


def written_positions(fn: Callable[..., Any]) -> frozenset[int]:
    """The positions of the parameters that the kernel's own text stores into (``A[i] = v``, ``A[i] += v``) or
    hands to a ``cuda.atomic`` operation: the arrays a strict launch watches from its first run, instead of finding
    out at the first such store and running the launch again (a write made elsewhere, in a device function, is
    still found that way). Empty for a kernel whose source cannot be read."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return frozenset()
    source = _source(fn, code)
    return source.stored if source is not None else frozenset()


def _source(fn: Callable[..., Any], code: types.CodeType) -> _Source | None:
    """The kernel's :class:`_Source` (parsed once per code object), or None when it cannot be read."""
    if code not in _sources:
        try:
            _sources[code] = _Source(fn)
        except Exception:  # noqa: BLE001 - no source, or source it cannot read: the kernel runs as written
            _sources[code] = None
    return _sources[code]


def _is_numba_cuda(value: Any) -> bool:
    """True for Numba's ``cuda`` module (what a kernel's ``cuda.atomic.add`` must name to take the short path)."""
    try:
        return getattr(value, "__name__", None) == "numba.cuda"
    except Exception:  # noqa: BLE001 - an object that answers every attribute with an error of its own
        return False


def _source_of(fn: Callable[..., Any]) -> tuple[str, int, ast.FunctionDef | None]:
    """The dedented source of ``fn``'s definition, its first line, and its parsed tree at those lines (None: not
    parsed yet): the lines of its block read from ``linecache`` (the indented lines after the ``def``, which is what
    ``inspect.getsourcelines`` finds with the tokenizer, at a tenth of the cost); ``inspect``'s answer when that block
    does not parse alone (a string that runs to column 0)."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename, getattr(fn, "__globals__", None))
    start = code.co_firstlineno - 1
    if 0 <= start < len(lines):
        indent = len(lines[start]) - len(lines[start].lstrip())
        end = start
        while end < len(lines) and lines[end].lstrip().startswith("@"):  # (decorators: the code's first line)
            end += 1
        end += 1
        while end < len(lines):
            line = lines[end]
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and len(line) - len(line.lstrip()) <= indent:
                break
            end += 1
        text = textwrap.dedent("".join(lines[start:end]))
        try:
            tree = ast.parse("\n" * start + text)  # (at its own lines: the tree _Source reads, parsed once)
        except SyntaxError:
            pass
        else:
            body = tree.body
            return text, start + 1, body[0] if len(body) == 1 and isinstance(body[0], ast.FunctionDef) else None
    source, first = inspect.getsourcelines(fn)
    return textwrap.dedent("".join(source)), first, None


#: the classes whose ``cuda.atomic.add`` a variant calls directly (:mod:`labkit.sim.memory` sets it: this module
#: imports nothing of the simulator, which imports it)
FAST_ATOMIC_CLASSES: frozenset[type] = frozenset()
_sources: dict[Any, _Source | None] = {}
_variants: dict[tuple[Any, tuple[tuple[str, int], ...]], tuple[types.CodeType, list[str]] | None] = {}
_variant_codes: set[types.CodeType] = set()  # the code of every variant (retype knows its errors by it)


def for_launch(fn: Callable[..., Any], args: Sequence[Any]) -> Callable[..., Any]:
    """``fn`` itself, or its variant for a launch with ``args``: fast reads where some array the kernel only reads is
    a snapshot (an argument with ``fast_rows()`` that gives its elements as nested lists), the atomics' short path
    where the kernel calls ``cuda.atomic.add`` on a name."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn
    source = _source(fn, code)
    if source is None:
        return fn
    rows: dict[str, list[Any]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    logs: dict[str, Callable[[int], Any]] = {}  # recorded arrays: what takes the flat index of each read
    if any(hasattr(type(a), "fast_rows") for a in args):  # (the type's: Numba's record wrapper answers any
        # attribute with a lookup of its own)
        for name, position in source.positions.items():
            arg = args[position] if position < len(args) else None
            fast_rows = getattr(type(arg), "fast_rows", None)
            got = fast_rows(arg) if fast_rows is not None else None
            if got is not None:
                rows[name], shapes[name] = got, tuple(arg.shape)
                log = type(arg).fast_log(arg)
                if log is not None:
                    logs[name] = log
    if not rows and not source.atomics:
        return fn
    key = (code, tuple(sorted((name, len(shape), name in logs) for name, shape in shapes.items())))
    if key not in _variants:
        try:
            _variants[key] = _compile(fn, source, {name: len(shape) for name, shape in shapes.items()}, set(logs))
        except Exception:  # noqa: BLE001 - as above
            _variants[key] = None
    variant = _variants[key]
    if variant is None:
        return fn
    fast_code, used = variant
    values: dict[str, Any] = dict(zip(code.co_freevars, fn.__closure__ or ()))
    if f"{_PREFIX}fast" in fast_code.co_freevars:
        values[f"{_PREFIX}fast"] = types.CellType(FAST_ATOMIC_CLASSES)
    for name in used:
        values[f"{_PREFIX}rows_{name}"] = types.CellType(rows[name])
        if name in logs:
            values[f"{_PREFIX}log_{name}"] = types.CellType(logs[name])
        if name in logs and len(shapes[name]) > 1:
            values[f"{_PREFIX}flat_{name}"] = types.CellType(flat_indices(shapes[name]))
        for axis, n in enumerate(shapes[name]):
            values[f"{_PREFIX}n{axis}_{name}"] = types.CellType(n)
    made = types.FunctionType(
        fast_code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(values[n] for n in fast_code.co_freevars)
    )
    made.__kwdefaults__ = fn.__kwdefaults__
    made.__doc__ = fn.__doc__
    made.__qualname__ = fn.__qualname__
    return made


def _compile(
    fn: Callable[..., Any], source: _Source, ndims: dict[str, int], logged: set[str] | None = None
) -> tuple[types.CodeType, list[str]]:
    """The variant's code object (compiled inside an enclosing function whose parameters, the kernel's free
    variables and the variant's own values, become its closure) and the arrays whose reads it rewrote."""
    node = source.fresh()
    node.decorator_list = []
    node.returns = None
    for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
        a.annotation = None
    logged = logged or set()
    rewriter = _Rewriter(ndims, source.cuda_names, logged)
    node.body = [rewriter.visit(stmt) for stmt in node.body]
    used = sorted(rewriter.used)
    if not used and not rewriter.atomics:
        raise ValueError("nothing to rewrite")
    extra = (
        ([f"{_PREFIX}fast"] if rewriter.atomics else [])
        + [f"{_PREFIX}rows_{n}" for n in used]
        + [f"{_PREFIX}log_{n}" for n in used if n in logged]
        + [f"{_PREFIX}flat_{n}" for n in used if n in logged and ndims[n] > 1]
        + [f"{_PREFIX}n{axis}_{n}" for n in used for axis in range(ndims[n])]
    )
    free = list(fn.__code__.co_freevars)
    outer = ast.FunctionDef(
        name=f"{_PREFIX}outer",
        args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in free + extra], kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        body=[node, ast.Return(ast.Name(node.name, ast.Load()))],
        decorator_list=[],
    )
    module = ast.Module(body=[outer], type_ignores=[])
    _locate(module, source.origin, inside=node)  # (the rewritten expressions were located as they were made)
    code = compile(module, fn.__code__.co_filename, "exec", dont_inherit=True)
    outer_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == node.name)
    if not set(inner.co_freevars) <= set(free + extra):
        raise ValueError("free variables differ")
    inner = inner.replace(co_qualname=fn.__code__.co_qualname)
    _variant_codes.add(inner)
    return inner, used


def _locate(tree: ast.AST, origin: ast.AST, inside: ast.AST | None = None) -> None:
    """Give every new node (no line yet) the line of the nearest located node above it (not looking into ``inside``,
    whose nodes all have theirs)."""

    def walk(node: ast.AST, line: int, col: int) -> None:
        if "lineno" in node._attributes:
            if getattr(node, "lineno", None) is None:
                node.lineno, node.col_offset = line, col  # type: ignore[attr-defined]
                node.end_lineno, node.end_col_offset = line, col  # type: ignore[attr-defined]
            line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
        if node is inside:
            return
        for child in ast.iter_child_nodes(node):
            walk(child, line, col)

    walk(tree, origin.lineno, origin.col_offset)  # type: ignore[attr-defined]


def _located(new: ast.expr, old: ast.expr) -> ast.expr:
    """``new``, which replaces ``old``, with ``old``'s place, and its own new nodes located inside it."""
    ast.copy_location(new, old)
    _locate(new, old)
    return new


_FAST_ATOMICS = ("add",)


def _atomic_call(node: ast.AST, cuda_names: frozenset[str]) -> tuple[str, ast.Name, list[ast.expr]] | None:
    """(operation, array, arguments) of a call ``cuda.atomic.<op>(A, i, v)`` with ``A`` a name, else None."""
    if not isinstance(node, ast.Call) or node.keywords or len(node.args) != 3:
        return None
    f = node.func
    if not (isinstance(f, ast.Attribute) and f.attr in _FAST_ATOMICS and isinstance(f.value, ast.Attribute)):
        return None
    if f.value.attr != "atomic" or not isinstance(f.value.value, ast.Name) or f.value.value.id not in cuda_names:
        return None
    array = node.args[0]
    if not isinstance(array, ast.Name) or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    return f.attr, array, node.args[1:]


class _Rewriter(ast.NodeTransformer):
    """Rewrites element reads ``A[i, j]`` of the arrays in ``ndims`` (name -> dimensions) in the kernel's own body,
    and calls of ``cuda.atomic.add`` on a name (``cuda_names``: what the kernel calls Numba's ``cuda``)."""

    def __init__(self, ndims: dict[str, int], cuda_names: frozenset[str] = frozenset(), logged: set[str] | None = None) -> None:
        self.ndims = ndims
        self.logged = logged or set()
        self.cuda_names = cuda_names
        self.used: set[str] = set()
        self.atomics = 0
        self.temps = 0

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, _SCOPES):
            return node  # (a nested function, lambda or comprehension runs as written)
        return super().generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        """A statement that is a call alone: an atomic whose old value nobody uses takes the shorter path."""
        if _atomic_call(node.value, self.cuda_names) is not None:
            self.generic_visit(node.value)
            node.value = self._atomic(node.value, used=False)
            return node
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _atomic_call(node, self.cuda_names) is not None:
            return self._atomic(node, used=True)
        return node

    def _atomic(self, node: ast.Call, *, used: bool) -> ast.expr:
        found = _atomic_call(node, self.cuda_names)
        assert found is not None
        op, array, rest = found
        self.atomics += 1
        method = f"{_PREFIX}{op}" + ("" if used else "_")
        fast = ast.Call(ast.Attribute(ast.Name(array.id, ast.Load()), method, ast.Load()), rest, [])
        test = ast.Compare(
            ast.Attribute(ast.Name(array.id, ast.Load()), "__class__", ast.Load()),
            [ast.In()],
            [ast.Name(f"{_PREFIX}fast", ast.Load())],
        )
        slow = copy.deepcopy(node)
        return _located(ast.IfExp(test, fast, slow), node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        array = node.value
        if not (isinstance(array, ast.Name) and array.id in self.ndims and isinstance(node.ctx, ast.Load)):
            return node
        ndim = self.ndims[array.id]
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) and ndim > 1 else [index] if ndim == 1 else None
        if parts is None or len(parts) != ndim or not all(_pure(p) for p in parts):
            return node
        tests, fast_parts = [], []
        for axis, part in enumerate(parts):
            if isinstance(part, (ast.Name, ast.Constant)):
                value: ast.expr = part
                fast_parts.append(part)
            else:
                temp = f"{_PREFIX}t{self.temps}"
                self.temps += 1
                value = ast.NamedExpr(ast.Name(temp, ast.Store()), part)
                fast_parts.append(ast.Name(temp, ast.Load()))
            bound = ast.Name(f"{_PREFIX}n{axis}_{array.id}", ast.Load())
            tests.append(ast.Compare(ast.Constant(0), [ast.LtE(), ast.Lt()], [value, bound]))
        fast: ast.expr = ast.Name(f"{_PREFIX}rows_{array.id}", ast.Load())
        for part in fast_parts:
            fast = ast.Subscript(fast, part, ast.Load())
        slow = ast.Subscript(ast.Name(array.id, ast.Load()), index, ast.Load())
        self.used.add(array.id)
        if array.id in self.logged:  # a recorded launch: the read is logged as Model.note logs it (the append's None)
            tests.append(ast.UnaryOp(ast.Not(), self._note(array.id, fast_parts)))
        test = tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)
        return _located(ast.IfExp(test, fast, slow), node)

    def _note(self, name: str, parts: list[ast.expr]) -> ast.expr:
        """``_lk_log_A(flat)``: the read's flat index, which the array's recorder (``fast_log``) keeps for the log; for
        an array of two or more dimensions taken from a table of them (``_lk_flat_A[i][j]``, :func:`flat_indices`),
        so that a read makes no new int to log."""
        flat: ast.expr = parts[0]
        if len(parts) > 1:
            flat = ast.Name(f"{_PREFIX}flat_{name}", ast.Load())
            for part in parts:
                flat = ast.Subscript(flat, part, ast.Load())
        return ast.Call(ast.Name(f"{_PREFIX}log_{name}", ast.Load()), [flat], [])


_flat_tables: dict[tuple[int, ...], list[Any]] = {}


def flat_indices(shape: tuple[int, ...]) -> list[Any]:
    """Nested lists of the row-major flat index of every element of an array of ``shape`` (two or more
    dimensions), shared by the launches of that shape (nobody changes them)."""
    table = _flat_tables.get(shape)
    if table is None:
        if len(_flat_tables) > 64:
            _flat_tables.clear()
        import numpy as np

        table = _flat_tables[shape] = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape).tolist()
    return table


def _pure(node: ast.expr) -> bool:
    """Integer arithmetic of names and numbers: evaluating it twice (the bounds test, then the snapshot's own read
    when out of bounds) does nothing more than once."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _PURE_OPS) and _pure(node.left) and _pure(node.right)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and _pure(node.operand)
    if isinstance(node, ast.Attribute):
        return isinstance(node.ctx, ast.Load) and _pure(node.value)
    return False


def retype(exc: BaseException) -> None:
    """A fast read's list index refused an index that is not an integer: give ``exc`` the message the snapshot's
    read gives (the engine calls this for every error a thread raises; its traceback still ends at the learner's
    line)."""
    if not isinstance(exc, TypeError) or not exc.args or not isinstance(exc.args[0], str):
        return
    text = exc.args[0]
    at = text.find(_LIST_INDEX)
    if at < 0:
        return
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or tb.tb_frame.f_code not in _variant_codes:
        return
    exc.args = (f"{text[:at]}array index must be an integer, got {text[at + len(_LIST_INDEX) :]}",)
