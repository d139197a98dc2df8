"""Reads of read-only arrays compiled into the kernel: ``A[i, k]`` of an array no thread writes becomes a bounds test and
a list index in the kernel's own code, with no Python call.

A strict launch reads an array that no thread writes, and that shares memory with no other argument, from a copy
held as nested lists (:class:`labkit.sim.memory._Snapshot`). Even so each read was a call of the snapshot's
``__getitem__``, which cost a barrier-free kernel such as a naive matrix multiply two thirds of its time. For such a
launch this module compiles a variant of the kernel from its source in which every element read of those arrays is

    (rows_A[i][k] if 0 <= i < n0_A and 0 <= k < n1_A else A[i, k])

``rows_A``, ``n0_A``, ``n1_A`` are keyword-only parameters with the launch's values as defaults, so a thread pays
nothing to find them. An index out of bounds takes the ``else`` branch, the snapshot's own read, which raises as it
always did; an index that is not an integer fails the list index, and the variant raises labkit's message for it.
The variant keeps the kernel's file, lines, globals and closure: tracebacks, the stuck line of a time-out and
``swapped_cuda_module`` see the learner's code as before. Nothing else changes: writes, atomics, barriers, reads of
watched arrays and device functions run as written.

A kernel whose source cannot be read (``exec`` of a string) or parsed, or whose index expressions are not plain
arithmetic of names and numbers, runs as written: correct, only slower.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap
import types
from typing import Any, Callable, Sequence

__all__ = ["for_launch"]

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
    """A kernel's parsed source and which of its parameters are only ever read (candidates for fast reads)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        ast.increment_lineno(tree, first - 1)
        (node,) = tree.body
        if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
            raise ValueError("not a plain function definition")
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if any(name.startswith(_PREFIX) for name in names):
            raise ValueError("the kernel uses labkit's own prefix")
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        changed = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        changed |= {name for n in ast.walk(node) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        changed |= {
            n.value.id
            for n in ast.walk(node)
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        self.node = node
        self.positions = {p: k for k, p in enumerate(params) if p not in changed}


_sources: dict[Any, _Source | None] = {}
_variants: dict[tuple[Any, tuple[tuple[str, int], ...]], tuple[types.CodeType, list[str]] | None] = {}


def for_launch(fn: Callable[..., Any], args: Sequence[Any]) -> Callable[..., Any]:
    """``fn`` itself, or its fast-read variant for a launch with ``args`` when some array the kernel only reads is a
    snapshot (an argument with ``fast_rows()`` that gives its elements as nested lists)."""
    code = getattr(fn, "__code__", None)
    if code is None or not any(hasattr(type(a), "fast_rows") for a in args):  # (the type's: Numba's record wrapper
        # answers any attribute with a lookup of its own)
        return fn
    if code not in _sources:
        try:
            _sources[code] = _Source(fn)
        except Exception:  # noqa: BLE001 - no source, or source it cannot read: the kernel runs as written
            _sources[code] = None
    source = _sources[code]
    if source is None:
        return fn
    rows: dict[str, list[Any]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for name, position in source.positions.items():
        arg = args[position] if position < len(args) else None
        fast_rows = getattr(type(arg), "fast_rows", None)
        got = fast_rows(arg) if fast_rows is not None else None
        if got is not None:
            rows[name], shapes[name] = got, tuple(arg.shape)
    if not rows:
        return fn
    key = (code, tuple(sorted((name, len(shape)) for name, shape in shapes.items())))
    if key not in _variants:
        try:
            _variants[key] = _compile(fn, source, {name: len(shape) for name, shape in shapes.items()})
        except Exception:  # noqa: BLE001 - as above
            _variants[key] = None
    variant = _variants[key]
    if variant is None:
        return fn
    fast_code, used = variant
    if not used:
        return fn
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    made = types.FunctionType(
        fast_code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(cells[n] for n in fast_code.co_freevars)
    )
    defaults = dict(fn.__kwdefaults__ or {})
    defaults[f"{_PREFIX}retype"] = _retype
    for name in used:
        defaults[f"{_PREFIX}rows_{name}"] = rows[name]
        for axis, n in enumerate(shapes[name]):
            defaults[f"{_PREFIX}n{axis}_{name}"] = n
    made.__kwdefaults__ = defaults
    made.__doc__ = fn.__doc__
    return made


def _compile(fn: Callable[..., Any], source: _Source, ndims: dict[str, int]) -> tuple[types.CodeType, list[str]]:
    """The variant's code object (inside an enclosing function that gives it the kernel's free variables) and the
    arrays whose reads it rewrote."""
    node = copy.deepcopy(source.node)
    node.decorator_list = []
    node.returns = None
    for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
        a.annotation = None
    rewriter = _Rewriter(ndims)
    node.body = [rewriter.visit(stmt) for stmt in node.body]
    used = sorted(rewriter.used)
    extra = (
        [f"{_PREFIX}retype"]
        + [f"{_PREFIX}rows_{n}" for n in used]
        + [f"{_PREFIX}n{axis}_{n}" for n in used for axis in range(ndims[n])]
    )
    node.args.kwonlyargs += [ast.arg(arg=name) for name in extra]
    node.args.kw_defaults += [None] * len(extra)
    handler = ast.ExceptHandler(
        type=ast.Name("TypeError", ast.Load()),
        name=f"{_PREFIX}e",
        body=[
            ast.Expr(ast.Call(ast.Name(f"{_PREFIX}retype", ast.Load()), [ast.Name(f"{_PREFIX}e", ast.Load())], [])),
            ast.Raise(),
        ],
    )
    node.body = [ast.Try(body=node.body, handlers=[handler], orelse=[], finalbody=[])]
    free = list(fn.__code__.co_freevars)
    outer = ast.FunctionDef(
        name=f"{_PREFIX}outer",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in free], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[node, ast.Return(ast.Name(node.name, ast.Load()))],
        decorator_list=[],
    )
    module = ast.Module(body=[outer], type_ignores=[])
    _locate(module, source.node)
    code = compile(module, fn.__code__.co_filename, "exec", dont_inherit=True)
    outer_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == node.name)
    if not set(inner.co_freevars) <= set(free):
        raise ValueError("free variables differ")
    return inner, used


def _locate(tree: ast.AST, origin: ast.AST) -> None:
    """Give every new node (no line yet) the line of the nearest located node above it."""

    def walk(node: ast.AST, line: int, col: int) -> None:
        if "lineno" in node._attributes:
            if getattr(node, "lineno", None) is None:
                node.lineno, node.col_offset = line, col  # type: ignore[attr-defined]
                node.end_lineno, node.end_col_offset = line, col  # type: ignore[attr-defined]
            line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
        for child in ast.iter_child_nodes(node):
            walk(child, line, col)

    walk(tree, origin.lineno, origin.col_offset)  # type: ignore[attr-defined]


class _Rewriter(ast.NodeTransformer):
    """Rewrites element reads ``A[i, j]`` of the arrays in ``ndims`` (name -> dimensions) in the kernel's own body."""

    def __init__(self, ndims: dict[str, int]) -> None:
        self.ndims = ndims
        self.used: set[str] = set()
        self.temps = 0

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, _SCOPES):
            return node  # (a nested function, lambda or comprehension runs as written)
        return super().generic_visit(node)

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
        test = tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)
        return ast.copy_location(ast.IfExp(test, fast, slow), node)


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


def _retype(exc: TypeError) -> None:
    """A fast read's list index refused an index that is not an integer: the message becomes the one the snapshot's
    read gives (the handler then re-raises it, its traceback ending at the learner's line as before)."""
    text = str(exc)
    if not text.startswith(_LIST_INDEX):
        return
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or f"{_PREFIX}retype" not in tb.tb_frame.f_code.co_varnames:
        return
    exc.args = (f"array index must be an integer, got {text[len(_LIST_INDEX) :]}",)
