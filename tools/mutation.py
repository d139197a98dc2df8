"""Mutation analysis of every exercise's check: mutate labkit's reference answer, run the mutant through the
exercise's own check in sim mode, count the mutants the check kills.

    python tools/mutation.py                       # the full run (one worker), report on stdout
    python tools/mutation.py --jobs 2 --json R.json --md R.md
    python tools/mutation.py --exercise 02.saxpy --list
    python tools/mutation.py --sample 40 --seed 7  # a seeded sample (tests/test_mutation.py)

What is mutated: a Numba kernel's Python source, a host function's source (or the factory function that builds the
reference, where the reference is a local function or a figure), a lambda's text, a CUDA C++ source, or the
expressions of an ElementwiseKernel/ReductionKernel. The operators are in ``tools/mutation_ops.py``; host functions
also get two operators on the function as a whole: mutate an input after computing, cache results by shape.

A mutant is *killed* when the check does not pass it, *survived* when it passes, *equivalent* when
``tools/mutation_equivalents.yml`` lists it with a reviewed reason (it computes what the reference computes for
every input the statement allows), *timed out* when its check ran past ``--timeout`` seconds (the worker is then
restarted), and *unbuildable* when the mutant could not even be built (a syntax or type error at build time: not
counted, like a mutant a compiler rejects). A mutant whose check passes with a Note that names its slip (the FP64 note)
is killed by that note. The last line of the report is
``mutation: K/N killed, E equivalent, S survived, causes named C/K`` with N = K + E + S + timed out.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import hashlib
import inspect
import io
import json
import os
import random
import selectors
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mutation_ops as ops  # noqa: E402

EQUIVALENTS = HERE / "mutation_equivalents.yml"


# ============================================================================================== subjects (in-worker)
@dataclass
class Subject:
    """One piece of the reference answer that is mutated: ``make(source)`` gives the answer's item ``slot`` (or, with
    ``slot`` None, the whole answer: a factory or lambda that builds every item)."""

    label: str
    source: str
    language: str  # "kernel", "python", "cpp"
    make: Callable[[str], Any]
    slot: int | None = None
    wrappable: bool = False  # a host function: also the whole-function operators (mutate an input, cache)


@dataclass
class Mutant:
    exercise: str
    index: int
    key: str
    operator: str
    op_class: str
    subject: str
    before: str
    after: str
    edit: ops.Edit | None = None
    wrapper: str | None = None
    status: str = ""
    cause_named: bool = False
    message: str = ""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _setup() -> None:
    os.environ["LABKIT_MODE"] = "sim"
    os.environ["LABKIT_PROGRESS"] = "off"
    os.environ.pop("LABKIT_EXPECT", None)
    import labkit

    with contextlib.redirect_stdout(io.StringIO()):
        labkit.setup()


def _namespace(fn: Any) -> dict[str, Any]:
    import numpy

    ns = dict(fn.__globals__)
    ns["_mut_np"] = numpy
    return ns


MUTANT_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / f"labkit-mutants-{os.getuid()}"


def source_path(source: str) -> str:
    """The file a mutant's source is written to (a real file: Numba's compiler and the checks read the source back)."""
    MUTANT_DIR.mkdir(parents=True, exist_ok=True)
    path = MUTANT_DIR / f"m_{hashlib.sha1(source.encode()).hexdigest()[:16]}.py"
    if not path.exists():
        path.write_text(source, encoding="utf-8")
    return str(path)


def _exec_def(source: str, ns: dict[str, Any], name: str) -> Any:
    code = compile(source, source_path(source), "exec")
    exec(code, ns)  # noqa: S102 - the mutant, built from labkit's own source
    return ns[name]


def _is_kernel(obj: Any) -> bool:
    return getattr(obj, "py_func", None) is not None


def _is_cpp(obj: Any) -> bool:
    return isinstance(obj, str) and "__global__" in obj


def _is_parts(obj: Any) -> bool:
    return type(obj).__name__ in ("Elementwise", "Reduction") and dataclasses.is_dataclass(obj)


def _module_function(obj: Any) -> bool:
    return inspect.isfunction(obj) and "<locals>" not in obj.__qualname__ and obj.__name__ != "<lambda>"


def _kernel_subject(kernel: Any, slot: int) -> Subject:
    fn = kernel.py_func

    def make(src: str) -> Any:
        made = _exec_def(src, _namespace(fn), fn.__name__)
        if _is_kernel(made):
            return made
        from numba import cuda  # labkit.kernels.get jits the plain functions of kernels/ the same way

        return cuda.jit(made)

    return Subject(fn.__name__, textwrap.dedent(inspect.getsource(fn)), "kernel", make, slot)


def _function_subject(fn: Any, slot: int) -> Subject:
    source = textwrap.dedent(inspect.getsource(fn))
    return Subject(fn.__name__, source, "python", lambda src: _exec_def(src, _namespace(fn), fn.__name__), slot, wrappable=True)


def _parts_subjects(obj: Any, slot: int) -> list[Subject]:
    out = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name in ("name", "in_params", "out_params") or not isinstance(value, str) or not value.strip():
            continue

        def make(src: str, _f: str = f.name) -> Any:
            new = dataclasses.replace(obj, **{_f: src})
            new.source()
            return new

        out.append(Subject(f"{type(obj).__name__}.{f.name}", value, "cpp", make, slot))
    return out


# exercises whose answer runs in other processes, rebuilt there from its source by name: a wrapper cannot travel
NO_WRAPPERS = ("08.mpi-ring",)
THIN = 12  # a host answer with fewer own mutants than this is thin: the labkit functions it calls are mutated too


def _callees(source: str, fn: Any) -> list[Any]:
    """The labkit functions (outside labkit.check) that ``source`` (the code of ``fn``) calls by name, through its
    module's globals or an import inside it."""
    import importlib

    import parso

    env: dict[str, Any] = dict(fn.__globals__)
    tree = parso.parse(source, version="3.11")

    def walk(node: Any) -> Any:
        yield node
        for c in getattr(node, "children", ()):
            yield from walk(c)

    for imp in (n for n in walk(tree) if n.type in ("import_from", "import_name")):
        for path, defined in zip(imp.get_paths(), imp.get_defined_names()):
            names = [n.value for n in path]
            if imp.type == "import_from" and imp.level:
                names = fn.__module__.split(".")[: -imp.level] + names
            full = ".".join(names)
            with contextlib.suppress(Exception):
                try:
                    obj = importlib.import_module(full)
                except ImportError:
                    obj = getattr(importlib.import_module(".".join(names[:-1])), names[-1])
                if imp.type == "import_name" and len(names) > 1 and defined.value == names[0]:
                    obj = importlib.import_module(names[0])  # import a.b binds a
                env[defined.value] = obj
    found: list[Any] = []
    for node in walk(tree):
        if node.type not in ("power", "atom_expr"):
            continue
        kids = node.children
        if kids[0].type != "name":
            continue
        obj = env.get(kids[0].value)
        for t in kids[1:]:
            if t.type == "trailer" and t.children[0].value == "." and obj is not None:
                obj = getattr(obj, t.children[1].value, None)
            elif t.type == "trailer" and t.children[0].value == "(":
                mod = getattr(obj, "__module__", "") or ""
                if (
                    inspect.isfunction(obj)
                    and mod.startswith("labkit.")
                    and not mod.startswith("labkit.check")
                    and obj not in found
                ):
                    found.append(obj)
                break
            else:
                break
    return found


@contextlib.contextmanager
def patched(fn: Any, new: Any) -> Any:
    """``fn``'s module attribute replaced by ``new`` for the duration."""
    mod = sys.modules[fn.__module__]
    old = getattr(mod, fn.__name__)
    setattr(mod, fn.__name__, new)
    try:
        yield
    finally:
        setattr(mod, fn.__name__, old)


def _callee_subject(callee: Any) -> Subject:
    source = textwrap.dedent(inspect.getsource(callee))
    sub = Subject(
        f"{callee.__module__.removeprefix('labkit.')}.{callee.__name__}",
        source,
        "python",
        lambda src: _exec_def(src, _namespace(callee), callee.__name__),
        None,
    )
    sub.callee = callee  # type: ignore[attr-defined]
    return sub


def _lambda_text(fn: Any) -> str | None:
    """The text of the lambda expression ``fn`` (found in its module's source by line and argument count)."""
    import parso

    module = inspect.getmodule(fn)
    if module is None:
        return None
    source = inspect.getsource(module)
    tree = parso.parse(source, version="3.11")
    line = fn.__code__.co_firstlineno
    lines = source.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def walk(node: Any) -> Any:
        yield node
        for c in getattr(node, "children", ()):
            yield from walk(c)

    for node in walk(tree):
        if node.type == "lambdef" and node.start_pos[0] == line:
            a = starts[node.start_pos[0] - 1] + node.start_pos[1]
            b = starts[node.end_pos[0] - 1] + node.end_pos[1]
            text = source[a:b]
            try:
                if eval(compile(text, "<string>", "eval"), dict(fn.__globals__)).__code__.co_argcount == fn.__code__.co_argcount:  # noqa: S307
                    return text
            except Exception:  # noqa: BLE001
                continue
    return None


def subjects(exercise_id: str) -> tuple[list[Subject], tuple[Any, ...]]:
    """The mutable pieces of ``exercise_id``'s reference, and the reference's items (the check's arguments)."""
    from labkit.check import core

    ex = core._get(exercise_id)
    if ex.reference is None:
        return [], ()
    factory = inspect.unwrap((ex.reference.__defaults__ or (None,))[0])  # the factory itself, not a marking wrapper
    result = factory()
    items = result if isinstance(result, tuple) else (result,)
    plain = all(_is_kernel(x) or _is_cpp(x) or _is_parts(x) or _module_function(x) for x in items)
    if plain:
        subs: list[Subject] = []
        for i, x in enumerate(items):
            if _is_kernel(x):
                subs.append(_kernel_subject(x, i))
            elif _is_cpp(x):
                subs.append(Subject(f"source{i}", x, "cpp", lambda src: src, i))
            elif _is_parts(x):
                subs += _parts_subjects(x, i)
            else:
                subs.append(_function_subject(x, i))
        return subs, items
    if factory.__name__ == "<lambda>":
        text = _lambda_text(factory)
        if text is None:
            return [], items

        def build_lambda(src: str) -> tuple[Any, ...]:
            made = eval(compile(src, "<string>", "eval"), _namespace(factory))()  # noqa: S307
            return made if isinstance(made, tuple) else (made,)

        return [Subject("<lambda>", text, "python", build_lambda, None, wrappable=len(items) == 1 and callable(items[0]))], items
    source = textwrap.dedent(inspect.getsource(factory))

    def build_factory(src: str) -> tuple[Any, ...]:
        made = _exec_def(src, _namespace(factory), factory.__name__)()
        return made if isinstance(made, tuple) else (made,)

    return [
        Subject(factory.__name__, source, "python", build_factory, None, wrappable=len(items) == 1 and callable(items[0]))
    ], items


def _owner(subs: list[Subject]) -> Subject | None:
    """The Python subject whose labkit callees a thin reference gets mutated: the host function the learner writes,
    or the factory that computes a figure."""
    return next((s for s in subs if s.wrappable), None) or next(
        (s for s in subs if s.language == "python" and s.slot is None and getattr(s, "callee", None) is None), None
    )


def _subject_function(exercise_id: str, sub: Subject) -> Any:
    """The Python function whose source ``sub`` is (for its globals)."""
    from labkit.check import core

    factory = inspect.unwrap((core._get(exercise_id).reference.__defaults__ or (None,))[0])
    if sub.slot is None:
        return factory
    items = factory()
    items = items if isinstance(items, tuple) else (items,)
    return items[sub.slot]


_REACHED: dict[tuple[str, str], set[int]] = {}


def _reached(exercise_id: str, sub: Subject, context: tuple[list[Subject], tuple[Any, ...]]) -> set[int]:
    """The lines of ``sub`` (a callee; numbered within its source) that the check runs when given the reference."""
    from labkit.check import core

    key = (exercise_id, sub.label)
    if key in _REACHED:
        return _REACHED[key]
    path = source_path(sub.source)
    lines: set[int] = set()

    def tracer(frame: Any, event: str, arg: Any) -> Any:  # the copy built from source: lines count from its first
        if frame.f_code.co_filename != path:
            return None
        if event in ("line", "call"):
            lines.add(frame.f_lineno)
        return tracer

    subs, items = context
    owner = _owner(subs)
    assert owner is not None
    old = sys.gettrace()
    sys.settrace(tracer)
    try:  # traced while the answer is built (a figure's factory calls the callee then) and while it is checked
        answer = assemble(subs, items, owner, owner.source)
        with contextlib.redirect_stdout(io.StringIO()):
            core.run(exercise_id, *answer)
    finally:
        sys.settrace(old)
    _REACHED[key] = lines
    return lines


def _line_of(source: str, offset: int) -> tuple[int, str]:
    line = source.count("\n", 0, offset)
    return line + 1, source.splitlines()[line] if source.splitlines() else ""


@contextlib.contextmanager
def _patched_all(replacements: dict[Any, Any]) -> Any:
    with contextlib.ExitStack() as stack:
        for fn, new in replacements.items():
            stack.enter_context(patched(fn, new))
        yield


def _base_items(subs: list[Subject], items: tuple[Any, ...], sub: Subject, source: str) -> list[Any]:
    if sub.slot is None:
        return list(sub.make(source))
    out = list(items)
    for other in subs:
        if other.slot is not None and other.slot != sub.slot and other.language != "cpp":
            out[other.slot] = other.make(other.source)
    out[sub.slot] = sub.make(source)
    return out


def assemble(subs: list[Subject], items: tuple[Any, ...], sub: Subject, source: str, wrapper: str | None = None) -> list[Any]:
    """The check's arguments with ``sub`` built from ``source``: the other items rebuilt from their own (unmutated)
    source, so that no argument is labkit's own object. The labkit functions a thin answer calls (callee subjects)
    are copies built from their source (``sub``'s from ``source``), patched into their modules while the answer is
    built and while it runs, never while the check computes what it expects. ``wrapper`` wraps the answer function
    as a whole (mutate an input, cache by shape)."""
    callees = [s for s in subs if getattr(s, "callee", None) is not None]
    replacements = {s.callee: s.make(source if s is sub else s.source) for s in callees}  # type: ignore[attr-defined]
    owner = (_owner(subs) or sub) if sub in callees else sub
    with _patched_all(replacements):
        out = _base_items(subs, items, owner, source if owner is sub else owner.source)
    slots = [i for i, x in enumerate(out) if callable(x) and not _is_kernel(x)]
    if replacements and slots:  # a function answer calls the callee when the check calls it: patched then too
        slot = slots[0]
        inner = out[slot]

        def answer(*args: Any, **kwargs: Any) -> Any:
            with _patched_all(replacements):
                return inner(*args, **kwargs)

        answer.__name__ = answer.__qualname__ = getattr(inner, "__name__", "answer")
        with contextlib.suppress(TypeError, ValueError):
            answer.__signature__ = inspect.signature(inner)  # type: ignore[attr-defined]
        out[slot] = answer
    if wrapper:
        slot = next(i for i, x in enumerate(out) if callable(x) and not _is_kernel(x))
        out[slot] = wrap(out[slot], wrapper)
    return out


def mutants(exercise_id: str) -> tuple[list[Mutant], tuple[list[Subject], tuple[Any, ...]]]:
    """Every mutant of ``exercise_id``'s reference, in a fixed order, with a stable key; and its subjects."""
    subs, items = subjects(exercise_id)
    own = sum(len(ops.python_mutants(s.source, kernel=False)) for s in subs if s.language == "python")
    owner = _owner(subs)
    if owner is not None and own < THIN:
        fn = _subject_function(exercise_id, owner)
        for callee in _callees(owner.source, fn) if fn is not None else []:
            with contextlib.suppress(OSError, TypeError):
                subs.append(_callee_subject(callee))
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    for s in subs:
        edits = ops.cpp_mutants(s.source) if s.language == "cpp" else ops.python_mutants(s.source, kernel=s.language == "kernel")
        reached = _reached(exercise_id, s, (subs, items)) if getattr(s, "callee", None) is not None else None
        for e in edits:
            new = e.apply(s.source)
            n, before = _line_of(s.source, e.start)
            if reached is not None and n not in reached:
                continue  # a line of the labkit function that this exercise's check never runs
            after_lines = new.splitlines()
            after = after_lines[n - 1] if n - 1 < len(after_lines) else ""
            if e.operator == "early-return":
                after = " / ".join(x.strip() for x in e.text.strip().splitlines())
            key = f"{exercise_id} {s.label}:{n} {e.operator}: {before.strip()} => {after.strip()}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                key += f" #{seen[key]}"
            out.append(Mutant(exercise_id, len(out), key, e.operator, e.op_class, s.label, before.strip(), after.strip(), edit=e))
        if s.wrappable and exercise_id not in NO_WRAPPERS:
            for w, cls in (("mutate-input", "mutate-input"), ("cache-by-shape", "cache")):
                key = f"{exercise_id} {s.label} {w}"
                out.append(Mutant(exercise_id, len(out), key, w, cls, s.label, "", w, wrapper=w))
    return out, (subs, items)


# ========================================================================================= whole-function wrappers
def _scribble(a: Any) -> bool:
    import numpy as np

    if isinstance(a, np.ndarray) and a.size and a.flags.writeable:
        flat = a.reshape(-1)
        flat[0] = flat[0] + 1 if a.dtype != bool else not flat[0]
        return True
    if isinstance(a, list) and a:
        a.append(copy.copy(a[-1]))
        return True
    if isinstance(a, dict):
        a["mutant"] = 1
        return True
    if isinstance(a, bytearray):
        a.append(0)
        return True
    return False


def _shape_key(a: Any) -> Any:
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        return ("array", tuple(a.shape), str(a.dtype))
    if isinstance(a, (list, tuple, dict, str, bytes)):
        return (type(a).__name__, len(a))
    return type(a).__name__


def wrap(fn: Callable[..., Any], how: str) -> Callable[..., Any]:
    """``fn`` with a whole-function mutation: ``mutate-input`` scribbles on its first mutable argument after
    computing; ``cache-by-shape`` returns the result of an earlier call whose arguments had the same shapes."""
    memo: dict[Any, Any] = {}

    def answer(*args: Any, **kwargs: Any) -> Any:
        if how == "cache-by-shape":
            key = (tuple(_shape_key(a) for a in args), tuple(sorted((k, _shape_key(v)) for k, v in kwargs.items())))
            if key not in memo:
                memo[key] = fn(*args, **kwargs)
            return memo[key]
        out = fn(*args, **kwargs)
        for a in (*args, *kwargs.values()):
            if _scribble(a):
                break
        return out

    answer.__name__ = answer.__qualname__ = getattr(fn, "__name__", "answer")
    with contextlib.suppress(TypeError, ValueError):
        answer.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return answer


# ================================================================================================ one mutant's run
def noted(op_class: str, report: str) -> bool:
    """True for a passed check whose Note names the operator's cause: the check tells the learner what the mutant
    does wrong although its values are right (a float32 kernel computing in FP64 gets the FP64 note)."""
    note = report.split("  Note: ", 1)[1] if "  Note: " in report else ""
    return op_class == "fp64" and bool(note) and cause_named(op_class, note)


def cause_named(op_class: str, report: str) -> bool:
    text = report.lower()
    return any(w.lower() in text for w in ops.CAUSE_WORDS[op_class])


def run_mutant(m: Mutant, context: tuple[list[Subject], tuple[Any, ...]]) -> dict[str, Any]:
    """Build ``m`` and run it through its exercise's check: status killed / survived / unbuildable, the report.
    ``m`` with neither edit nor wrapper is the null mutant: the reference rebuilt from its source."""
    from labkit.check import core

    subs, ref_items = context
    sub = next(s for s in subs if s.label == m.subject)
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            source = m.edit.apply(sub.source) if m.edit is not None else sub.source
            items = assemble(subs, ref_items, sub, source, m.wrapper)
    except Exception as exc:  # noqa: BLE001 - a mutant that does not build is not counted
        return {"status": "unbuildable", "message": f"{type(exc).__name__}: {exc}"[:300], "seconds": time.perf_counter() - t0}
    random.seed(m.index)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result = core.run(m.exercise, *items)
    except BaseException as exc:  # noqa: BLE001 - a check that breaks on a mutant kills it, without a cause
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {
            "status": "killed",
            "message": f"check raised {type(exc).__name__}: {exc}"[:600],
            "cause_named": False,
            "seconds": time.perf_counter() - t0,
        }
    report = result.report()
    flagged = result.passed and noted(m.op_class, report)  # passed, with a Note that names the slip: killed by the note
    return {
        "status": "survived" if result.passed and not flagged else "killed",
        "message": report[:1200],
        "cause_named": (not result.passed or flagged) and cause_named(m.op_class, report),
        "seconds": time.perf_counter() - t0,
    }


def worker() -> None:
    """Read ``{"exercise", "index"}`` lines on stdin, write one JSON result line per mutant on stdout."""
    _setup()
    out = sys.stdout
    sys.stdout = io.StringIO()  # nothing but result lines on the real stdout
    cache: dict[str, tuple[list[Mutant], Any]] = {}
    for line in sys.stdin:
        job = json.loads(line)
        ex = job["exercise"]
        if ex not in cache:
            cache[ex] = mutants(ex)
        ms, context = cache[ex]
        if job["index"] < 0:  # the null mutant of each subject: the reference rebuilt from source must pass
            sub = context[0][-1 - job["index"]]
            m = Mutant(ex, job["index"], f"{ex} {sub.label} null", "null", "logic", sub.label, "", "")
        else:
            m = ms[job["index"]]
        res = run_mutant(m, context)
        res.update(exercise=ex, index=m.index)
        out.write(json.dumps(res) + "\n")
        out.flush()
        sys.stdout = io.StringIO()


# ================================================================================================ the parent's side
def _reviewed(path: Path, section: str, what: str) -> list[dict[str, Any]]:
    """The entries of ``section`` in the reviewed file, each of which must name a ``key`` or an ``operator`` and give
    its ``reason``."""
    import yaml

    if not path.exists():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    entries = list(data.get(section) or [])
    for entry in entries:
        if not str(entry.get("reason", "")).strip():
            raise SystemExit(f"{path}: {what} {entry.get('key') or entry.get('operator')!r} has no reason")
        if not (entry.get("key") or entry.get("operator")):
            raise SystemExit(f"{path}: a {what} entry names neither a key nor an operator: {entry!r}")
    return entries


def load_equivalents(path: Path = EQUIVALENTS) -> list[dict[str, Any]]:
    """The reviewed equivalent mutants: entries with a ``key`` (one mutant) or an ``operator`` (every mutant of that
    operator, in the ``exercises`` listed or in all), each with its ``reason``."""
    return _reviewed(path, "equivalent", "equivalent mutant")


def load_known_survivors(path: Path = EQUIVALENTS) -> list[dict[str, Any]]:
    """Survivors that are not equivalent but that no check in sim mode can afford to kill (they differ only beyond
    the sizes the simulator runs in a check's time), each with its reason. They stay counted as survived; only the
    seeded sample in ``make test`` lets them through."""
    return _reviewed(path, "known_survivors", "known survivor")


def equivalent_reason(m: Mutant, entries: list[dict[str, Any]]) -> str | None:
    """The reviewed reason ``m`` is equivalent, or None."""
    for e in entries:
        if e.get("key") == m.key:
            return str(e["reason"]).strip()
        if e.get("operator") == m.operator and ("exercises" not in e or m.exercise in e["exercises"]):
            if all(part in m.key for part in e.get("key_contains", [])):
                return str(e["reason"]).strip()
    return None


class Pool:
    """Worker processes, each running one mutant at a time, restarted after a timeout."""

    def __init__(self, jobs: int, timeout: float, nice: int) -> None:
        self.timeout, self.nice = timeout, nice
        self.procs: list[subprocess.Popen[str] | None] = [None] * jobs

    def _start(self) -> subprocess.Popen[str]:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker"]
        if self.nice:
            cmd = ["nice", "-n", str(self.nice), *cmd]
        return subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
        )

    def run(self, todo: list[Mutant], progress: Callable[[Mutant], None]) -> None:
        queue = list(todo)
        busy: dict[int, tuple[Mutant, float]] = {}
        sel = selectors.DefaultSelector()
        while queue or busy:
            for w in range(len(self.procs)):
                if w in busy or not queue:
                    continue
                p = self.procs[w]
                if p is None or p.poll() is not None:
                    p = self.procs[w] = self._start()
                    sel.register(p.stdout, selectors.EVENT_READ, w)  # type: ignore[arg-type]
                m = queue.pop(0)
                assert p.stdin is not None
                p.stdin.write(json.dumps({"exercise": m.exercise, "index": m.index}) + "\n")
                p.stdin.flush()
                busy[w] = (m, time.monotonic())
            for key, _ in sel.select(timeout=1.0):
                w = key.data
                p = self.procs[w]
                assert p is not None and p.stdout is not None
                line = p.stdout.readline()
                m, _t = busy.pop(w)
                if not line:  # the worker died with the mutant (a crash of the interpreter)
                    sel.unregister(p.stdout)
                    self.procs[w] = None
                    m.status, m.message = "killed", "the check's process died"
                else:
                    res = json.loads(line)
                    m.status, m.message = res["status"], res.get("message", "")
                    m.cause_named, m.seconds = bool(res.get("cause_named")), float(res.get("seconds", 0.0))
                progress(m)
            now = time.monotonic()
            for w, (m, t) in list(busy.items()):
                if now - t > self.timeout:
                    p = self.procs[w]
                    assert p is not None
                    sel.unregister(p.stdout)  # type: ignore[arg-type]
                    p.kill()
                    p.wait()
                    self.procs[w] = None
                    busy.pop(w)
                    m.status, m.seconds = "timed out", now - t
                    progress(m)
        for p in self.procs:
            if p is not None:
                assert p.stdin is not None
                p.stdin.close()
                p.wait()


def all_exercises() -> list[str]:
    from labkit.check import core

    core._load_all()
    return sorted(core._REGISTRY)


def summarize(ms: list[Mutant], no_reference: list[str]) -> dict[str, Any]:
    per: dict[str, dict[str, int]] = {}
    classes: dict[str, dict[str, int]] = {}
    for m in ms:
        row = per.setdefault(
            m.exercise, {"killed": 0, "survived": 0, "equivalent": 0, "timed out": 0, "unbuildable": 0, "causes named": 0}
        )
        row[m.status] += 1
        c = classes.setdefault(
            m.op_class, {"killed": 0, "survived": 0, "equivalent": 0, "timed out": 0, "unbuildable": 0, "causes named": 0}
        )
        c[m.status] += 1
        if m.status == "killed" and m.cause_named:
            row["causes named"] += 1
            c["causes named"] += 1
    k = sum(r["killed"] for r in per.values())
    e = sum(r["equivalent"] for r in per.values())
    s = sum(r["survived"] for r in per.values())
    t = sum(r["timed out"] for r in per.values())
    c = sum(r["causes named"] for r in per.values())
    return {
        "killed": k, "equivalent": e, "survived": s, "timed out": t, "total": k + e + s + t, "causes named": c,
        "unbuildable": sum(r["unbuildable"] for r in per.values()),
        "per exercise": per, "per class": classes, "no reference": no_reference,
        "line": f"mutation: {k}/{k + e + s + t} killed, {e} equivalent, {s} survived, causes named {c}/{k}",
    }  # fmt: skip


def markdown(summary: dict[str, Any], ms: list[Mutant], meta: dict[str, Any]) -> str:
    lines = [f"# Mutation analysis of the exercise checks ({meta['date']})", ""]
    if meta.get("updated"):
        lines += [f"Updated after the full run (the wall time is the sum): {meta['updated']}.", ""]
    if meta.get("rescored"):
        lines += [f"The reviewed equivalents (tools/mutation_equivalents.yml) were applied again at {meta['rescored']}.", ""]
    lines += [
        f"Command: `{meta['command']}`; {meta['jobs']} worker(s), wall time {meta['seconds']:.0f} s; sim mode, CPU only.",
        "",
    ]
    lines += [
        "| exercise | killed | survived | equivalent | timed out | unbuildable | causes named |",
        "|---|---|---|---|---|---|---|",
    ]
    for ex, r in sorted(summary["per exercise"].items()):
        lines.append(
            f"| {ex} | {r['killed']} | {r['survived']} | {r['equivalent']} | {r['timed out']} | {r['unbuildable']} | {r['causes named']}/{r['killed']} |"
        )
    lines += ["", "Per operator class (causes named: killed mutants whose message names the class's cause words):", ""]
    lines += ["| class | killed | survived | equivalent | timed out | causes named |", "|---|---|---|---|---|---|"]
    for cls, r in sorted(summary["per class"].items()):
        lines.append(
            f"| {cls} | {r['killed']} | {r['survived']} | {r['equivalent']} | {r['timed out']} | {r['causes named']}/{r['killed']} |"
        )
    if summary["no reference"]:
        lines += ["", "Exercises with no reference to mutate: " + ", ".join(summary["no reference"])]
    surv = [m for m in ms if m.status in ("survived", "timed out")]
    known = load_known_survivors()
    lines += ["", f"## Survivors and timeouts ({len(surv)})", ""]
    for m in surv:
        why = equivalent_reason(m, known)
        lines.append(f"- `{m.key}` ({m.status})" + (f": known, {why}" if why else ""))
    if not surv:
        lines.append("none")
    if summary.get("references that fail when rebuilt"):
        lines += ["", "References that do not pass when rebuilt from their source (their mutants say nothing):", ""]
        lines += [f"- {b}" for b in summary["references that fail when rebuilt"]]
    lines += ["", summary["line"], ""]
    return "\n".join(lines)


def write_reports(a: argparse.Namespace, todo: list[Mutant], summary: dict[str, Any], meta: dict[str, Any]) -> None:
    if a.json:
        rows = [
            {"key": m.key, "exercise": m.exercise, "operator": m.operator, "class": m.op_class, "status": m.status,
             "cause_named": m.cause_named, "seconds": round(m.seconds, 3), "message": m.message}
            for m in todo
        ]  # fmt: skip
        a.json.write_text(json.dumps({"meta": meta, "summary": summary, "mutants": rows}, indent=1) + "\n", encoding="utf-8")
    if a.md:
        a.md.write_text(markdown(summary, todo, meta), encoding="utf-8")


def rescore(a: argparse.Namespace) -> int:
    """Apply tools/mutation_equivalents.yml to the mutants of an earlier run (``--rescore R.json``): a survivor the
    file lists becomes equivalent; the reports are written again (to ``--json``/``--md``, or over R.json)."""
    data = json.loads(a.rescore.read_text(encoding="utf-8"))
    entries = load_equivalents()
    todo = []
    for r in data["mutants"]:
        m = Mutant(r["exercise"], 0, r["key"], r["operator"], r["class"], "", "", "", status=r["status"])
        m.cause_named, m.seconds, m.message = r["cause_named"], r["seconds"], r["message"]
        reason = equivalent_reason(m, entries)
        if m.status == "killed" and m.message.startswith("["):  # the cause words as they are now, on the stored report
            m.cause_named = cause_named(m.op_class, m.message)
        if m.status == "survived" and m.message.startswith("[PASSED]") and noted(m.op_class, m.message):
            m.status, m.cause_named = "killed", True  # an earlier run's pass with a Note that names the slip
        elif m.status in ("survived", "timed out") and reason is not None:
            m.status, m.message = "equivalent", reason
        todo.append(m)
    summary = summarize(todo, data["summary"].get("no reference", []))
    summary["references that fail when rebuilt"] = data["summary"].get("references that fail when rebuilt", [])
    meta = dict(data["meta"], rescored=time.strftime("%Y-%m-%d %H:%M"))
    a.json = a.json or a.rescore
    write_reports(a, todo, summary, meta)
    for m in todo:
        if m.status in ("survived", "timed out"):
            print(f"{m.status}: {m.key}")
    print(summary["line"])
    known = load_known_survivors()
    return 1 if any(m.status in ("survived", "timed out") and equivalent_reason(m, known) is None for m in todo) else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--exercise", action="append", help="only this exercise (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the mutants and stop")
    ap.add_argument("--sample", type=int, default=0, help="run a seeded sample of this many mutants")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--nice", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds one mutant's check may take")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--skip-null", action="store_true", help="do not first check that each rebuilt reference passes")
    ap.add_argument("--rescore", type=Path, help="apply the reviewed equivalents to a run's JSON and write it again")
    ap.add_argument("--update", type=Path, help="replace the --exercise rows of this earlier run's JSON by a new run's")
    a = ap.parse_args(argv)
    if a.worker:
        worker()
        return 0
    if a.rescore:
        return rescore(a)
    t0 = time.perf_counter()
    _setup()
    equivalents = load_equivalents()
    exercises = a.exercise or all_exercises()
    every: list[Mutant] = []
    nulls: list[Mutant] = []
    no_reference = []
    for ex in exercises:
        ms, (subs, _) = mutants(ex)
        if not ms:
            no_reference.append(ex)
        every += ms
        # the null mutant of each subject (a C++ source rebuilt is labkit's source, which the guard rightly refuses)
        nulls += [
            Mutant(ex, -1 - i, f"{ex} {s.label} null", "null", "logic", s.label, "", "")
            for i, s in enumerate(subs)
            if s.language != "cpp"
        ]
    if a.list:
        for m in every:
            print(m.key)
        print(f"{len(every)} mutants")
        return 0
    todo = every
    if a.sample:
        todo = sorted(random.Random(a.seed).sample(every, min(a.sample, len(every))), key=lambda m: (m.exercise, m.index))
    run = []
    for m in todo:
        reason = equivalent_reason(m, equivalents)
        if reason is not None:
            m.status, m.message = "equivalent", reason
        else:
            run.append(m)
    done = [0]

    def progress(m: Mutant) -> None:
        done[0] += 1
        if not a.quiet:
            print(
                f"[{done[0]}/{len(run) + len(nulls)}] {m.status:10s} {'cause ' if m.cause_named else '      '}{m.key}",
                file=sys.stderr,
                flush=True,
            )

    if a.sample:
        nulls = [n for n in nulls if any(m.exercise == n.exercise for m in todo)]
    if a.skip_null:
        nulls = []
    Pool(a.jobs, a.timeout, a.nice).run(nulls + run, progress)
    broken = [f"{n.key}: {n.message[:200]}" for n in nulls if n.status != "survived"]
    if a.update:  # the earlier run's rows for every other exercise, this run's for the exercises run again
        earlier = json.loads(a.update.read_text(encoding="utf-8"))
        again = {m.exercise for m in todo}
        kept = []
        for r in earlier["mutants"]:
            if r["exercise"] not in again:
                m = Mutant(r["exercise"], 0, r["key"], r["operator"], r["class"], "", "", "", status=r["status"])
                m.cause_named, m.seconds, m.message = r["cause_named"], r["seconds"], r["message"]
                kept.append(m)
        todo = kept + todo
        no_reference = [x for x in earlier["summary"].get("no reference", []) if x not in again] + no_reference
        broken = [
            b for b in earlier["summary"].get("references that fail when rebuilt", []) if b.split(" ", 1)[0] not in again
        ] + broken
        t0 -= float(earlier["meta"]["seconds"])
    summary = summarize(todo, no_reference)
    summary["references that fail when rebuilt"] = broken
    for b in broken:
        print(f"reference rebuilt from source does not pass: {b}")
    seconds = time.perf_counter() - t0
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "command": "python tools/mutation.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "jobs": a.jobs,
        "seconds": seconds,
    }
    if a.update:
        meta["updated"] = f"rows of {', '.join(sorted({m.exercise for m in run}))} from a run at {time.strftime('%H:%M')}"
    write_reports(a, todo, summary, meta)
    for m in todo:
        if m.status in ("survived", "timed out"):
            print(f"{m.status}: {m.key}")
    print(summary["line"])
    known = load_known_survivors()
    unknown = [m for m in todo if m.status in ("survived", "timed out") and equivalent_reason(m, known) is None]
    for m in unknown:
        print(f"not listed: {m.key}")
    return 1 if unknown or broken else 0


if __name__ == "__main__":
    sys.exit(main())
