"""A Numba kernel as the source of a module of its own: the kernel, its device functions and the globals it
uses, for another process (the PTX worker of :mod:`labkit.cuda.ptx`, the trace subprocess of :mod:`.trace`).
Moved from ``labkit.ptx`` (issue 32) so that the simulator no longer imports the CUDA package above it."""

from __future__ import annotations

import inspect
import textwrap
import types
from typing import Any

import numpy as np

from labkit.errors import CompileError


def _module_import(name: str, mod: types.ModuleType) -> str:
    full = mod.__name__
    if full in ("numba.cuda", "numba_cuda.numba.cuda") or full.startswith("numba.cuda.simulator"):
        return f"from numba import cuda as {name}"
    if "." in full:
        parent, leaf = full.rsplit(".", 1)
        return f"from {parent} import {leaf} as {name}"
    return f"import {full} as {name}"


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _function_source(fn: Any, *, keep_decorators: bool) -> str:
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise CompileError(
            f"cannot read the source of {getattr(fn, '__name__', fn)!r} ({exc}).",
            fix="Define the kernel in a notebook cell or a .py file, not with exec().",
        ) from None
    if not keep_decorators:
        lines = src.splitlines()
        while lines and not lines[0].lstrip().startswith("def "):
            lines.pop(0)
        src = "\n".join(lines) + "\n"
    return src


_UNSUPPORTED_GLOBAL = (
    "class __labkit_unsupported_global:\n"
    "    def __init__(self, name, kind): self.name, self.kind = name, kind\n"
    "    def __getattr__(self, attr): raise TypeError(f'the kernel uses the global {self.name!r}, a Python {self.kind}')"
)


def _standalone_source(fn: Any) -> tuple[str, int]:
    """A self-contained module defining ``fn`` and the globals it uses; returns (source, line of def)."""
    header: list[str] = ["import numba", "from numba import cuda", _UNSUPPORTED_GLOBAL]
    defs: list[str] = []
    seen: set[int] = set()

    def visit(func: Any, keep_decorators: bool) -> None:
        py = getattr(func, "py_func", func)
        if id(py) in seen:
            return
        seen.add(id(py))
        g = dict(py.__globals__)
        if py.__closure__:  # variables a kernel made inside a function closes over
            g.update({n: c.cell_contents for n, c in zip(py.__code__.co_freevars, py.__closure__)})
        for name in sorted(_names(py.__code__) | set(py.__code__.co_freevars)):
            if name not in g:
                continue
            value = g[name]
            if isinstance(value, types.ModuleType):
                header.append(_module_import(name, value))
            elif isinstance(value, (bool, int, float, str)) or (
                isinstance(value, tuple) and all(isinstance(v, (bool, int, float)) for v in value)
            ):
                header.append(f"{name} = {value!r}")
            elif hasattr(value, "py_func"):  # another @cuda.jit function (device function)
                visit(value, keep_decorators=True)
            elif type(value).__module__.startswith("numba"):
                header.append(f"{name} = numba.types.{value}")
            elif isinstance(value, type) and value.__module__ == "numpy":
                header.append(f"import numpy; {name} = numpy.{value.__name__}")
            elif isinstance(value, np.ndarray) and value.size <= 65536:  # a global array: a constant on the GPU
                header.append(f"import numpy; {name} = numpy.array({value.tolist()!r}, dtype=numpy.{value.dtype.name})")
            elif isinstance(value, np.dtype):
                header.append(f"import numpy; {name} = numpy.dtype({value.name!r})")
            elif isinstance(value, (np.integer, np.floating)):
                header.append(f"import numpy; {name} = numpy.{value.dtype.name}({value.item()!r})")
            else:  # what the real compiler makes of it (a list, a dict, an object) is the real compiler's to say
                header.append(f"{name} = __labkit_unsupported_global({name!r}, {type(value).__name__!r})")
        defs.append(_function_source(py, keep_decorators=keep_decorators))

    visit(fn, keep_decorators=False)
    prefix = "\n".join(dict.fromkeys(header)) + "\n\n"
    body = "\n\n".join(defs)
    main = defs[-1]
    offset = prefix.count("\n") + body[: body.rindex(main)].count("\n") + 1
    return prefix + body, offset
