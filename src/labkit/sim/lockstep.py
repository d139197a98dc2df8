"""Lockstep launches: every thread of a launch at once, as NumPy arrays of lane values (SIMT run as SIMD).

The engine (:mod:`.engine`) runs each CUDA thread as a greenlet, one Python step per element per thread. A kernel
with no warp function and no local array does not need that: for such a kernel, recognised once from its source,
this module runs all threads of a launch (or of a chunk of its blocks) together: a local variable is an array with
one value per thread, ``if`` and loops become masks of the threads that take them, a ``for`` over ``range`` with
bounds that differ between threads runs while any thread is still in it, and ``return`` takes a thread out. A loop
whose iterations depend on nothing carried from one to the next (its body assigns each name before reading it, reads
no array it stores and has no barrier: a grid-stride loop over elements) runs its iterations side by side too, each
(thread, iteration) a lane of its own.

Shared memory and barriers: ``name = cuda.shared.array(shape, dtype)`` as a statement of the kernel's body gives each
block of the chunk an array (rows of one NumPy array) filled with the strict model's poison, and
``cuda.syncthreads()`` as a statement is a barrier that every thread of each block must reach (all lanes active,
none returned: else it gives up, and the engine names the divergence). Between two barriers the threads' accesses
to a shared array are kept, and at the barrier (and at the end) two threads touching one element with one of them
writing, or a plain access of an element an atomic updated, gives up: without those, the order in which the
statements of an epoch ran cannot show, so running them statement after statement for all threads gives the
engine's values. Integer atomics on a shared array are applied at once (they commute); a float one gives up.

What it accepts (anything else runs on the engine, with the same results, only slower): assignments and augmented
assignments to names and to array elements, ``if``/``elif``/``else``, ``for ... in range(...)``, ``while``, ``return``
without a value; arithmetic, comparisons, ``and``/``or``/``not``, conditional expressions, ``cuda.grid``,
``cuda.gridsize``, ``cuda.threadIdx``/``blockIdx``/``blockDim``/``gridDim``, ``.shape``/``.size``/``.ndim`` and
``len`` of array arguments, element reads and stores with integer indices, ``abs``/``min``/``max``/``int``/``float``,
``np.float32``/``np.float64``, ``math.sqrt``/``math.fabs``, and ``cuda.atomic.add``/``sub``/``max``/``min`` as
statements on arrays the kernel touches in no other way (on a shared array, integer atomics mixed with other
accesses), shared arrays and barriers as above. :func:`refusal` says what in a kernel it does not take.

Every value keeps the type the engine would give it (a Python ``int``/``float``/``bool``, labkit's ``Int32`` for
``threadIdx``, or a NumPy scalar type; where threads hold different types, one array per type), and each operation
takes NumPy's promotion of those types, so results are the engine's bit for bit: integers are checked against a
bound that keeps them exact, mixing an integer with a float only where the conversion is exact.

Whenever a strict rule *could* speak, the lockstep run gives up and the launch runs again on the engine, with its
arrays restored first, so that the verdict, its message and its traceback are the engine's own: an index out of
bounds, two threads touching one element with one of them writing (an argument's anywhere in the launch, even
with a barrier between them; a shared array's between two barriers), a read of poison, a
division by zero, a floating-point warning, an integer that might leave its exact range, a variable a thread reads
before it assigned it, or more CPU time than :data:`BUDGET_SHARE` of the launch's limit (:data:`BUDGET_MAX_S` at most). Atomics are applied at the end of the launch in the order the engine's
schedule gives them (which only float atomics can tell). Interrupt stops a lockstep run at once, with the engine's
words and the kernel's line. A recorded launch keeps each statement's accesses as arrays and gives them back as the
strict model's log (:class:`LaneLog`) in the engine's order (:class:`Order`: block after block, epoch after epoch,
thread after thread), with each access's epoch.
"""

from __future__ import annotations

import ast
import math
import operator
import random
import sys
import time
import types
from typing import Any, Callable, Sequence

import numpy as np

from ..hw.occupancy import STATIC_SHARED_PER_BLOCK
from .atomics import TYPES as GPU_ATOMIC_TYPES
from .integers import Int8, Int16, Int32
from .limits import LEARNER_CODE_LIMIT_S

__all__ = ["BUDGET_SHARE", "accepts", "refusal", "run"]

#: the share of a launch's CPU-time limit a lockstep run may take (at most :data:`BUDGET_MAX_S`) before it gives up
#: and the launch runs on the engine under its whole limit
BUDGET_SHARE = 0.25
BUDGET_MAX_S = 1.0
#: lanes run together at most (a larger launch runs chunk after chunk of whole blocks)
CHUNK_LANES = 1 << 16
#: bytes of one shared array for all blocks of a chunk at most (more: the launch runs on the engine, a block at a time)
SHARED_BYTES_MAX = 64 << 20
#: False: every launch runs on the engine (tests of the engine's own behaviour turn lockstep off)
ENABLED = True
#: what the last launch did: "ran", "not run: <why>" (the kernel or its arguments), "gave up: <why>" (engine ran it)
last = ""
#: an error of lockstep's own (not a :class:`Bail`) is raised instead of running the launch on the engine (tests)
RAISE_INTERNAL = False

# value tags: what a value is in the engine, per thread
# Python int, float, bool; COND: a truth value only (``a and b`` of mixed types)
I, F, B, COND = "int", "float", "bool", "cond"  # noqa: E741
MIX = "mixed"  # a value whose type differs between threads: ``a`` is a list of (value, its lanes) of one type each
F32, F64, I64, BOOL = "float32", "float64", "int64", "bool_"  # NumPy scalars (strings: a dtype == str is slow)
DT_F32, DT_F64, DT_I64, DT_BOOL = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_)
# labkit.sim.integers' Int32 (threadIdx, blockIdx, a declared int32 argument), Int16, Int8: Python ints to Python,
# but not weak to NumPy (``np.float32(1.5) * Int32(3)`` is a float64)
I32, I16, I8 = "Int32", "Int16", "Int8"
_STORAGE = {
    I: DT_I64, F: DT_F64, B: DT_BOOL, COND: DT_BOOL, F32: DT_F32, F64: DT_F64, I64: DT_I64, BOOL: DT_BOOL,
    I32: DT_I64, I16: DT_I64, I8: DT_I64,
}  # fmt: skip
_TAGS = {DT_F32: F32, DT_F64: F64, DT_I64: I64, DT_BOOL: BOOL}  # the tag of a NumPy scalar's dtype
_SAMPLES = {
    I: 3, F: 1.5, B: True, F32: np.float32(1.5), F64: np.float64(1.5), I64: np.int64(3), BOOL: np.bool_(True),
    I32: Int32(3), I16: Int16(3), I8: Int8(3),
}  # fmt: skip
_TAGGED = {Int32: I32, Int16: I16, Int8: I8}
_EXACT = {F32: 1 << 24, F64: 1 << 53, F: 1 << 53}  # integers below this convert to the float exactly
_INT_LIMIT = 1 << 62  # integer values are kept below this in magnitude (no wrap, no Python big int)
_INTS = (I, I64, I32, I16, I8)
_NARROW = (I32, I16, I8)  # (their arithmetic, negation, abs give a plain int)
READ, WRITE, ATOMIC = 0, 1, 2  # (the kinds of labkit.sim.memory's log)
_any = np.count_nonzero  # (a C call: ndarray.any() goes through Python)


class Bail(Exception):
    """The lockstep run cannot give the engine's result for this launch: it runs on the engine instead."""


class Unsupported(Exception):
    """The kernel's text is outside what lockstep runs (found once, when the kernel is first seen)."""


class V:
    """A value: ``a`` (a scalar, the same for every thread, or an array with one element per lane), its tag ``t``
    (module constants) and, for integers, ``n``, a bound on its magnitude."""

    __slots__ = ("a", "t", "n")

    def __init__(self, a: Any, t: Any, n: int = 0) -> None:
        self.a, self.t, self.n = a, t, n


class TupleV:
    """A tuple of values (``cuda.grid(2)``, ``a.shape``): only unpacked or indexed by a constant."""

    __slots__ = ("items",)

    def __init__(self, items: list[V]) -> None:
        self.items = items


def _tag_of(value: Any) -> Any:
    """The tag of a scalar as the engine holds it (None: a type lockstep does not run)."""
    if isinstance(value, np.generic):
        dt = value.dtype
        return _TAGS.get(dt)
    if isinstance(value, bool):
        return B
    if isinstance(value, int):
        return _TAGGED.get(type(value), I) if type(value) is not int else I
    if isinstance(value, float):
        return F
    return None


def _scalar(value: Any) -> V:
    t = _tag_of(value)
    if t is None:
        raise Bail(f"a value of type {type(value).__name__}")
    if t in _INTS:
        n = abs(int(value))
        if n >= _INT_LIMIT:
            raise Bail("an integer too large to keep exact")
        return V(int(value) if t == I else value, t, n)
    return V(value, t)


_result_tags: dict[tuple[Any, Any, Any], Any] = {}
_MISSING = object()


def _result_tag(op: Callable[[Any, Any], Any], ta: Any, tb: Any) -> Any:
    """The tag of ``op(a, b)`` for values tagged ``ta`` and ``tb``, as the engine's scalars give it (None: an error)."""
    key = (op, ta, tb)
    found = _result_tags.get(key, _MISSING)
    if found is _MISSING:
        try:
            with np.errstate(all="ignore"):
                found = _tag_of(op(_SAMPLES[ta], _SAMPLES[tb]))
        except Exception:  # noqa: BLE001 - the engine raises here: lockstep does not run it
            found = None
        _result_tags[key] = found
    return found


def _arr(v: V, tag: Any) -> Any:
    """``v``'s data in the storage of ``tag`` (an array, or a NumPy scalar for a uniform value)."""
    dt = _STORAGE[tag]
    a = v.a
    if isinstance(a, np.ndarray):
        return a if a.dtype == dt else a.astype(dt)
    return dt.type(a)


def _magnitude(v: V) -> int:
    """The largest magnitude of an integer value (its bound, or measured when the bound is too loose)."""
    if isinstance(v.a, np.ndarray) and v.a.size:
        return int(np.abs(v.a).max())
    return abs(int(v.a)) if not isinstance(v.a, np.ndarray) else 0


def _exact_in(v: V, float_tag: Any) -> None:
    """An integer ``v`` that meets a float of ``float_tag``: it must convert exactly (else :class:`Bail`)."""
    limit = _EXACT.get(float_tag)
    if limit is not None and v.n >= limit and _magnitude(v) >= limit:
        raise Bail("an integer that a float cannot hold exactly")


def _int_bound(op: Any, a: V, b: V) -> int:
    na, nb = a.n, b.n
    if op is operator.add or op is operator.sub:
        return na + nb
    if op is operator.mul:
        return na * nb
    if op is operator.floordiv:
        return na + 1
    if op is operator.mod:
        return nb
    if op in (operator.and_, operator.or_, operator.xor):
        return 1 << max(na.bit_length(), nb.bit_length(), 1)
    if op is operator.lshift:
        return na << min(nb, 64)
    if op is operator.rshift:
        return na
    return _INT_LIMIT


_DIVIDING = (operator.truediv, operator.floordiv, operator.mod)
_SHIFTS = (operator.lshift, operator.rshift)


_plans: dict[tuple[Any, Any, Any], tuple] = {}
_CMP = (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne)


def _plan(op: Any, ta: Any, tb: Any) -> tuple:
    """How ``op`` of values tagged ``ta`` and ``tb`` is computed: (result tag, mode, the tag both are computed in,
    the float each integer operand must convert to exactly (or None), dividing or shifting)."""
    if ta == COND or tb == COND:
        raise Bail("a mixed truth value used as a number")
    tr = _result_tag(op, ta, tb)
    if tr is None:
        raise Bail("an operation the engine refuses")
    if op in _CMP or (tr in (B, BOOL) and op in (operator.and_, operator.or_, operator.xor)):
        mode = "cmp"
        tp = _result_tag(operator.add, ta, tb) if op in _CMP else tr
        if tp is None:
            raise Bail("a comparison the engine refuses")
    elif tr in _INTS:
        mode, tp = "int", tr
    else:
        mode, tp = "float", tr
        if op is operator.truediv and (ta in _INTS or ta == B) and (tb in _INTS or tb == B):
            tp = F64  # (integers that convert exactly, divided once: Python's correctly rounded int / int)
    float_tag = tp if tp in _EXACT else None
    ca = float_tag if ta in _INTS else None
    cb = float_tag if tb in _INTS else None
    special = 1 if op in _DIVIDING else 2 if op in _SHIFTS else 0
    plan = (tr, mode, tp, ca, cb, special)
    _plans[(op, ta, tb)] = plan
    return plan


def binop(op: Any, a: V, b: V, m: np.ndarray) -> V:
    """``op(a, b)`` per lane with the engine's types (lanes outside ``m`` give a harmless value)."""
    if a.t == MIX or b.t == MIX:  # (per pair of types the lanes hold)
        return _merge([(binop(op, pa, pb, gb), gb) for pa, ga in _parts(a, m) for pb, gb in _parts(b, ga)])
    plan = _plans.get((op, a.t, b.t))
    if plan is None:
        plan = _plan(op, a.t, b.t)
    tr, mode, tp, ca, cb, special = plan
    if ca is not None and a.n >= _EXACT[ca]:
        _exact_in(a, ca)
    if cb is not None and b.n >= _EXACT[cb]:
        _exact_in(b, cb)
    bound = 0
    if mode == "int":
        bound = _int_bound(op, a, b)
        if bound >= _INT_LIMIT:
            a.n, b.n = _magnitude(a), _magnitude(b)
            bound = _int_bound(op, a, b)
            if bound >= _INT_LIMIT:
                raise Bail("an integer that may leave its exact range")
    xa, xb = a.a, b.a
    if special:
        if isinstance(xb, np.ndarray):
            bad = (xb == 0) if special == 1 else (xb < 0)
            if _any(bad & m):
                raise Bail("a division by zero" if special == 1 else "a negative shift")
            if _any(bad):
                xb = np.where(bad, 1, xb)
                b = V(xb, b.t, b.n)
        elif (xb == 0 if special == 1 else xb < 0) and _any(m):
            raise Bail("a division by zero" if special == 1 else "a negative shift")
        if op is operator.lshift and b.n >= 63:
            raise Bail("a shift too wide")
    if not isinstance(xa, np.ndarray) and not isinstance(xb, np.ndarray):
        try:
            r = op(xa, xb)  # (both the same for every thread: the engine's own arithmetic)
        except Exception as exc:  # noqa: BLE001 - the engine raises it: it runs the launch
            raise Bail(str(exc)) from None
        return V(r, tr, bound)
    return V(op(_arr(a, tp), _arr(b, tp)), tr, bound)


def truth(v: V) -> Any:
    """Each lane's truth value (a bool array or a Python bool)."""
    a = v.a
    if v.t == MIX:
        out = np.zeros(len(a[0][1]), dtype=bool)
        for part, lanes in a:
            out = np.where(lanes, truth(part), out)
        return out
    if v.t in (B, BOOL, COND):
        return a if isinstance(a, np.ndarray) else bool(a)
    if isinstance(a, np.ndarray):
        return a != 0
    return bool(a)


def _parts(v: V, m: np.ndarray) -> list[tuple[V, np.ndarray]]:
    """``v`` as values of one type each, with the lanes of ``m`` each holds."""
    if v.t != MIX:
        return [(v, m)]
    out = []
    for part, lanes in v.a:
        g = m & lanes
        if _any(g):
            out.append((part, g))
    return out


def _merge(pieces: list[tuple[V, np.ndarray]]) -> V:
    """One value of pieces that hold in disjoint lanes: of one type, a plain value; else :data:`MIX`."""
    by_tag: dict[Any, tuple[V, np.ndarray]] = {}
    flat: list[tuple[V, np.ndarray]] = []
    for v, g in pieces:
        flat.extend(_parts(v, g) if v.t == MIX else [(v, g)])
    for v, g in flat:
        found = by_tag.get(v.t)
        by_tag[v.t] = (v, g) if found is None else (select(g, v, found[0]), g | found[1])
    if not by_tag:
        raise Bail("a value no thread holds")
    if len(by_tag) == 1:
        return next(iter(by_tag.values()))[0]
    return V(list(by_tag.values()), MIX)


def _per_part(fn: Callable[[V], V], v: V, m: np.ndarray) -> V:
    """``fn`` of each part of a :data:`MIX` value (of a plain value, ``fn(v)``)."""
    if v.t != MIX:
        return fn(v)
    return _merge([(fn(part), g) for part, g in _parts(v, m)])


def select(c: Any, x: V, y: V) -> V:
    """Per lane, ``x`` where ``c`` else ``y`` (of two types: a :data:`MIX` value)."""
    if x.t != y.t or x.t == MIX:
        return _merge([(x, c), (y, ~c)])
    if x.t in _INTS:
        return V(np.where(c, x.a, y.a), x.t, max(x.n, y.n))
    dt = _STORAGE[x.t]
    return V(np.where(c, x.a, y.a).astype(dt, copy=False), x.t)


# ----------------------------------------------------------------------------- the state of one lockstep run
class Launch:
    """What every chunk of one launch shares: arrays, accesses to check for races, atomics to apply, the clock."""

    def __init__(self, budget_end: float, wall_end: float) -> None:
        self.budget_end, self.wall_end = budget_end, wall_end  # (CPU time, wall time: a loaded machine gives CPU slowly)
        self.reads: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}  # position -> [(flat, thread)]
        self.writes: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self.atomics: list[tuple[str, int, np.ndarray, Any, Any, int, int]] = []  # (op, position, flats,
        # values, threads (None: an integer atomic, whose order does not matter), step, updates it stands for)
        self.batch_writes: list[tuple] = []  # a flattened loop's batch: (position, flats, threads, iterations)
        self.records: list[tuple] = []  # recorded accesses: (step, position, kind, flats, threads, values stored,
        # line of the kernel's code)
        self.at = 0  # the line of the element access being made (of its subscript, or of its atomic's call)
        self.step = 0  # accesses so far (a thread's accesses come in the order of their steps)
        self.barrier_steps: list[int] = []  # the step of each barrier of the launch (chunk after chunk)
        self.chunks: list[tuple[int, int, int, int]] = []  # per chunk: (its first block, blocks, barriers before
        # it, barriers in it)
        self.barriers = 0  # barriers passed, counted per block (what the strict model counts)
        self.shared_atomics = 0  # atomic updates of shared arrays
        self.shared_arrays: dict[int, SharedInfo] = {}  # position (negative) -> what the report says of it
        self.model: Any = None  # the strict model of the launch, if any
        self.line = 0  # the line of the statement running now, and of the innermost loop it is in (for Interrupt)
        self.loop = 0


class Lanes:
    """One chunk: the lanes (threads) of some blocks, their indices, and the kernel's locals."""

    def __init__(self, launch: Launch, blocks: list[Any], block: tuple[int, int, int], first: int) -> None:
        bx, by, bz = block
        size = bx * by * bz
        n = size * len(blocks)
        self.n = n
        self.launch = launch
        k = np.arange(n, dtype=np.int64)
        t = k % size
        which = k // size
        pts = np.array(blocks, dtype=np.int64).reshape(-1, 3)
        self.tx, self.ty, self.tz = t % bx, (t // bx) % by, t // (bx * by)
        self.bx, self.by, self.bz = pts[which, 0], pts[which, 1], pts[which, 2]
        self.tid = first * size + k  # a lane's thread, unique in the launch (by the order blocks are listed)
        self.blk = which  # a lane's block within the chunk (its shared arrays' row)
        self.nblocks = len(blocks)
        self.shared: list[SharedArr] = []  # the shared arrays the chunk allocated
        self.env: dict[str, Any] = {}
        self.undefined: dict[str, np.ndarray] = {}  # a local's lanes that have not assigned it yet
        self.ret = np.zeros(n, dtype=bool)  # lanes that returned
        self.any_ret = False
        self.full = np.ones(n, dtype=bool)  # the mask of every lane (compared by identity: no lane is masked off)
        self.kk: np.ndarray | None = None  # in a flattened loop: each lane's iteration (of the batch, from 0)

    def expanded(self, lane_of: np.ndarray, k_of: np.ndarray, drop: frozenset[str]) -> "Lanes":
        """The lanes of a flattened loop: lane ``j`` is thread ``lane_of[j]`` in its iteration ``k_of[j]``, with the
        thread's values (but those of ``drop``, the names the loop's body assigns before it reads them)."""
        e = Lanes.__new__(Lanes)
        e.n = len(lane_of)
        e.launch = self.launch
        # (the thread and block indices of a lane are read from the values; Interrupt names the chunk's threads)
        e.tx = e.ty = e.tz = e.bx = e.by = e.bz = self.tx[:0]
        e.tid = self.tid[lane_of]
        e.blk = self.blk[lane_of]
        e.nblocks = self.nblocks
        e.shared = self.shared
        e.env = _LazyEnv(self.env, lane_of, drop)
        e.undefined = {k: u[lane_of] for k, u in self.undefined.items() if k not in drop}
        e.ret = np.zeros(e.n, dtype=bool)
        e.any_ret = False
        e.full = np.ones(e.n, dtype=bool)
        e.kk = k_of
        return e


class _LazyEnv(dict):
    """The values of a flattened loop's lanes: a thread's value, expanded to its iterations when first read (most
    of the launch's values, thread and block indices among them, are never read in the loop)."""

    def __init__(self, parent: dict[str, Any], lane_of: np.ndarray, drop: frozenset[str]) -> None:
        super().__init__()
        self.parent, self.lane_of, self.drop = parent, lane_of, drop

    def __missing__(self, key: str) -> Any:
        if key in self.drop:
            raise KeyError(key)
        value = self[key] = _expand(self.parent[key], self.lane_of)
        return value


def _expand(v: Any, lane_of: np.ndarray) -> Any:
    """A value of the threads as the lanes of a flattened loop see it."""
    if isinstance(v, V):
        if v.t == MIX:
            return V([(_expand(part, lane_of), lanes[lane_of]) for part, lanes in v.a], MIX)
        return V(v.a[lane_of], v.t, v.n) if isinstance(v.a, np.ndarray) else v
    if isinstance(v, TupleV):
        return TupleV([_expand(x, lane_of) for x in v.items])
    return v  # (an array argument)


#: a flattened loop's iterations are this many steps apart (more steps in one iteration's body: lockstep gives up)
STRIDE = 1 << 24


def _step(L: Lanes, m: np.ndarray) -> Any:
    """The step of an access: the launch's count; in a flattened loop, per lane, its iteration's place after it."""
    if L.kk is None:
        return L.launch.step
    return L.launch.step + (L.kk if m is L.full else L.kk[m]) * STRIDE


#: a loop with at least this many trips still to make (a ``while``: that has made them) by fewer than NARROW_LANES
#: threads (or under 1/64 of the lanes) leaves the launch to the engine: a trip costs lockstep a few NumPy calls per
#: statement whatever the number of threads in it, the engine well under a microsecond per thread (one thread summing
#: 4,096 elements: 61 ms against 1.3 ms)
NARROW_TRIPS = 32
NARROW_LANES = 16
NARROW_WHY = "a long loop that few threads run (the engine runs it faster)"


def _narrow(L: Lanes, running: Any) -> bool:
    return running < NARROW_LANES or running * 64 < L.n


def _check_time(lanes: Lanes) -> None:
    launch = lanes.launch
    if time.thread_time() > launch.budget_end or time.monotonic() > launch.wall_end:
        raise Bail("the lockstep run took its share of the time limit")


# ----------------------------------------------------------------------------- compiling the kernel's text
Expr = Callable[[Lanes, np.ndarray], Any]
Stmt = Callable[[Lanes, np.ndarray], None]

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_CMPOPS = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_BUILTINS: dict[str, Callable[..., Any]] = {"abs": abs, "min": min, "max": max, "int": int, "float": float}
_DIM_NAMES = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
_ATOMIC_OPS = {"add", "sub", "max", "min"}


class Program:
    """A kernel compiled for lockstep runs: its body as closures, its parameters, the arrays it writes, reads
    and updates atomically (by parameter position), the names it takes from its globals."""

    def __init__(self, fn: Any, node: ast.FunctionDef, cuda_names: frozenset[str]) -> None:
        self.fn = fn
        self.params = [a.arg for a in node.args.args]
        self.position = {p: k for k, p in enumerate(self.params)}
        self.cuda_names = cuda_names
        self.locals: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self.locals.add(n.id)
        if self.locals & set(self.params):
            raise Unsupported("a parameter assigned")
        self.stored: set[int] = set()  # positions of arrays stored into (plain)
        self.indexed: set[int] = set()  # positions of arrays read by an index
        self.atomic: set[int] = set()  # positions of arrays updated atomically
        self.free: set[str] = set()  # names from globals or the closure (resolved at each launch)
        self.node = node
        # shared arrays: ``name = cuda.shared.array(shape, dtype)`` as a statement of the body itself, the name
        # assigned nowhere else; a position of their own (negative: -1, -2, ...)
        self.shared: dict[str, int] = {}
        self.type_names: set[str] = set()  # names a shared array's dtype is read from (resolved at each launch)
        allocations = {id(s.value) for s in node.body if self._is_allocation(s)}  # type: ignore[attr-defined]
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and _is_shared_call(n.func, cuda_names) and id(n) not in allocations:
                raise Unsupported("a shared array allocated inside a statement")
        for s in node.body:
            if self._is_allocation(s):
                name = s.targets[0].id  # type: ignore[attr-defined]
                stores = sum(
                    1 for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                )
                if name in self.shared or stores != 1:
                    raise Unsupported("a shared array's name assigned again")
                self.shared[name] = -1 - len(self.shared)
        self.locals -= set(self.shared)
        self.body = self._block(node.body)
        if self.atomic & (self.stored | self.indexed) & set(self.position.values()):
            raise Unsupported("an array updated atomically and also read or written")

    def _is_allocation(self, s: ast.stmt) -> bool:
        return (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Call)
            and _is_shared_call(s.value.func, self.cuda_names)
        )

    # -- statements
    def _block(self, stmts: list[ast.stmt]) -> Stmt:
        compiled = []
        for s in stmts:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue  # a docstring
            returns = any(isinstance(n, ast.Return) for n in ast.walk(s))
            compiled.append((self._stmt(s), returns, s.lineno))
        items = tuple(compiled)

        def block(L: Lanes, m: np.ndarray) -> None:
            launch = L.launch
            for run_stmt, returns, line in items:
                launch.line = line
                run_stmt(L, m)
                if returns and L.any_ret:
                    m = m & ~L.ret
                    if not _any(m):
                        return

        return block

    def _stmt(self, s: ast.stmt) -> Stmt:
        if self._is_allocation(s):
            return self._allocation(s)  # type: ignore[arg-type]
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise Unsupported("chained assignment")
            if isinstance(s.value, ast.Tuple) and isinstance(s.targets[0], ast.Tuple):
                return self._assign(s.targets[0], self._tuple(s.value))
            return self._assign(s.targets[0], self._expr(s.value))
        if isinstance(s, ast.AugAssign):
            op = _BINOPS.get(type(s.op))
            if op is None:
                raise Unsupported("an augmented operator")
            target = s.target
            value = self._expr(s.value)
            if isinstance(target, ast.Subscript):  # A[i] += v: the index once, a read, v, a store (Python's order)
                pos, index = self._element(target)
                self.stored.add(pos)
                self.indexed.add(pos)
                key = f"@{pos}"
                line = target.lineno

                def update(L: Lanes, m: np.ndarray) -> None:
                    arr = L.env[key]
                    idx = index(L, m)
                    L.launch.at = line
                    old = _load(L, arr, pos, idx, m)
                    new = binop(op, old, value(L, m), m)
                    L.launch.at = line
                    _store(L, arr, pos, idx, new, m)

                return update
            if not isinstance(target, ast.Name):
                raise Unsupported("an augmented target")
            read = self._expr(ast.Name(target.id, ast.Load()))

            def combined(L: Lanes, m: np.ndarray) -> Any:
                return binop(op, read(L, m), value(L, m), m)

            return self._assign(target, combined)
        if isinstance(s, ast.If):
            return self._if(s)
        if isinstance(s, ast.For):
            return self._for(s)
        if isinstance(s, ast.While):
            return self._while(s)
        if isinstance(s, ast.Return):
            if s.value is not None:
                raise Unsupported("a kernel returns a value")

            def ret(L: Lanes, m: np.ndarray) -> None:
                L.ret = L.ret | m
                L.any_ret = True

            return ret
        if isinstance(s, ast.Pass):
            return lambda L, m: None
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            if (
                isinstance(f, ast.Attribute)
                and f.attr == "syncthreads"
                and isinstance(f.value, ast.Name)
                and f.value.id in self.cuda_names
            ):
                if s.value.args or s.value.keywords:
                    raise Unsupported("syncthreads() with arguments")
                return _barrier
            return self._atomic(s.value)
        raise Unsupported(type(s).__name__)

    def _allocation(self, s: ast.Assign) -> Stmt:
        """``name = cuda.shared.array(shape, dtype)``: the chunk's blocks get one array each, filled with poison."""
        call = s.value
        assert isinstance(call, ast.Call)
        pos = self.shared[s.targets[0].id]  # type: ignore[attr-defined]
        given = dict(zip(("shape", "dtype"), call.args))
        for k in call.keywords:
            if k.arg not in ("shape", "dtype") or k.arg in given:
                raise Unsupported("a shared array with alignment or another keyword")
            given[k.arg] = k.value
        if len(call.args) > 2 or set(given) != {"shape", "dtype"}:
            raise Unsupported("a shared array's arguments")
        node = given["shape"]
        shape = [self._expr(p) for p in (node.elts if isinstance(node, ast.Tuple) else [node])]
        dtype = self._dtype(given["dtype"])
        line, col, key = call.lineno, call.col_offset, f"@{pos}"

        def allocate(L: Lanes, m: np.ndarray) -> None:
            dims = []
            for e in shape:
                v = e(L, L.full)
                if not isinstance(v, V) or v.t not in _INTS or isinstance(v.a, np.ndarray) or int(v.a) <= 0:
                    raise Bail("a shared array of a shape that is not positive integers")
                dims.append(int(v.a))
            dt = dtype(L)
            launch = L.launch
            info = launch.shared_arrays.get(pos)
            if info is None:
                name = _shared_label(self.fn, line, col) if launch.model is not None else ""
                info = launch.shared_arrays[pos] = SharedInfo(name, tuple(dims), dt)
            if sum(math.prod(s.shape) * s.dtype.itemsize for s in launch.shared_arrays.values()) > STATIC_SHARED_PER_BLOCK:
                raise Bail("static shared memory past a GPU build's 48 KiB a block (the engine says so)")
            if L.nblocks * math.prod(dims) * dt.itemsize > SHARED_BYTES_MAX:
                raise Bail("shared arrays larger than lockstep keeps for a chunk of blocks")
            arr = SharedArr(L.nblocks, tuple(dims), dt)
            model = launch.model
            arr.recorded = model is not None and model.record and (model.record_only is None or info.name in model.record_only)
            L.env[key] = arr
            L.shared.append(arr)

        return allocate

    def _dtype(self, node: ast.expr) -> Callable[[Lanes], np.dtype]:
        """A shared array's dtype (``np.float32``, ``float32``, ``"float32"``), read from the kernel's globals at
        each launch."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            return lambda L: _as_dtype(text)
        if isinstance(node, ast.Name) and node.id not in self.locals and node.id not in self.position:
            key = f"&{node.id}"
            self.type_names.add(node.id)
            return lambda L: _as_dtype(L.env[key])
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id not in self.locals:
            key, attr = f"&{node.value.id}", node.attr
            self.type_names.add(node.value.id)
            return lambda L: _as_dtype(getattr(L.env[key], attr, None))
        raise Unsupported("a shared array's dtype")

    def _assign(self, target: ast.expr, value: Expr) -> Stmt:
        if isinstance(target, ast.Name):
            name = target.id

            def assign(L: Lanes, m: np.ndarray) -> None:
                _set(L, name, value(L, m), m)

            return assign
        if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            names = [e.id for e in target.elts]  # type: ignore[attr-defined]

            def unpack(L: Lanes, m: np.ndarray) -> None:
                v = value(L, m)
                if not isinstance(v, TupleV) or len(v.items) != len(names):
                    raise Bail("an unpacking the engine refuses")
                for name, item in zip(names, v.items):
                    _set(L, name, item, m)

            return unpack
        if isinstance(target, ast.Subscript):
            pos, index = self._element(target)
            self.stored.add(pos)
            line = target.lineno

            def store(L: Lanes, m: np.ndarray) -> None:
                v = value(L, m)
                idx = index(L, m)
                L.launch.at = line
                _store(L, L.env[f"@{pos}"], pos, idx, v, m)

            return store
        raise Unsupported("an assignment target")

    def _if(self, s: ast.If) -> Stmt:
        test = self._expr(s.test)
        then = self._block(s.body)
        other = self._block(s.orelse) if s.orelse else None

        def if_(L: Lanes, m: np.ndarray) -> None:
            c = truth(test(L, m))
            if isinstance(c, bool):
                if c:
                    then(L, m)
                elif other is not None:
                    other(L, m)
                return
            mt = c if m is L.full else m & c
            if _any(mt):
                then(L, mt)
            if other is not None:
                me = m & ~c
                if _any(me):
                    other(L, me & ~L.ret)

        return if_

    def _for(self, s: ast.For) -> Stmt:
        if s.orelse or not isinstance(s.target, ast.Name):
            raise Unsupported("for with else, or a target that is not a name")
        it = s.iter
        if not (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id == "range"
            and "range" not in self.locals
            and 1 <= len(it.args) <= 3
            and not it.keywords
        ):
            raise Unsupported("a loop that is not over range()")
        self.free.add("range")
        args = [self._expr(a) for a in it.args]
        body = self._block(s.body)
        name = s.target.id
        line = s.lineno
        drop = self._independent(s)

        def for_(L: Lanes, m: np.ndarray) -> None:
            launch = L.launch
            outer = launch.loop
            launch.loop = line
            _for(L, m)
            launch.loop = outer  # (not on an exception: Interrupt names the innermost loop)

        def _for(L: Lanes, m: np.ndarray) -> None:
            vals = [a(L, m) for a in args]
            for v in vals:
                if v.t not in _INTS:
                    raise Bail("range() of a value that is not an integer")
            if len(vals) == 1:
                start, stop, step = V(0, I, 0), vals[0], V(1, I, 1)
            elif len(vals) == 2:
                start, stop, step = vals[0], vals[1], V(1, I, 1)
            else:
                start, stop, step = vals
            st = step.a
            if isinstance(st, np.ndarray):
                if _any((st == 0) & m):
                    raise Bail("range() with a step of zero")
                st = np.where(st == 0, 1, st)
            elif st == 0:
                raise Bail("range() with a step of zero")
            # iterations per lane: len(range(start, stop, step))
            a0, a1 = start.a, stop.a
            if isinstance(st, np.ndarray) or not st > 0:
                pos = st > 0
                count = np.where(pos, (a1 - a0 + st - 1) // np.where(pos, st, 1), (a0 - a1 - st - 1) // np.where(pos, 1, -st))
            else:
                count = (a1 - a0 + st - 1) // st
            count = np.maximum(count, 0)
            if not isinstance(count, np.ndarray):
                count = np.full(L.n, count, dtype=np.int64)
            full = m is L.full
            if not full:
                count = np.where(m, count, 0)
            total = int(count.max()) if L.n else 0
            every = int(count.min()) if full and L.n else 0  # iterations that every lane makes
            bound = max(start.n, stop.n) + step.n
            batch = min(total, CHUNK_LANES // max(L.n, 1))
            if drop is not None and L.kk is None and batch >= 2:
                _flattened(L, m, count, total, batch, a0, st, bound)
                return
            for k in range(total):
                if k < every and not L.any_ret:
                    active = L.full
                else:
                    active = count > k
                    if L.any_ret:
                        active &= ~L.ret
                    running = _any(active)
                    if not running:
                        break
                    if total - k >= NARROW_TRIPS and _narrow(L, running):
                        raise Bail(NARROW_WHY)
                i = a0 + k * st
                _set(L, name, V(i, I, bound), active)
                body(L, active)
                _check_time(L)

        def _flattened(L: Lanes, m: np.ndarray, count: np.ndarray, total: int, batch: int, a0: Any, st: Any, bound: int) -> None:
            """The iterations of the loop ``batch`` at a time, each (thread, iteration) a lane of its own: the body
            assigns every name before it reads it and reads no array it writes, so iterations depend on nothing
            but the thread's values before the loop."""
            launch = L.launch
            lanes = np.arange(L.n, dtype=np.int64)
            assert drop is not None
            for k0 in range(0, total, batch):
                ks = min(batch, total - k0)
                lane_of = np.tile(lanes, ks)
                k_of = np.repeat(np.arange(ks, dtype=np.int64), L.n)
                active = count[lane_of] > k_of + k0
                if L.any_ret:
                    active &= ~L.ret[lane_of]
                if not _any(active):
                    break
                E = L.expanded(lane_of, k_of, drop)  # noqa: N806
                if active.all():
                    active = E.full
                i = (a0[lane_of] if isinstance(a0, np.ndarray) else a0) + (k_of + k0) * (
                    st[lane_of] if isinstance(st, np.ndarray) else st
                )
                _set(E, name, V(i, I, bound), active)
                base = launch.step
                body(E, active)
                _one_iteration_each(launch)
                if launch.step - base >= STRIDE:
                    raise Bail("a loop body of too many steps to flatten")
                launch.step = base + ks * STRIDE
                _check_time(L)

        return for_

    def _independent(self, s: ast.For) -> frozenset[str] | None:
        """The names the loop's body assigns, when its iterations can run as lanes of their own (see
        :func:`_flattened`): no ``return`` in it, every name it assigns assigned before it is read in each iteration
        and read nowhere outside it, no array both read and stored in it. None otherwise."""
        body = s.body
        nodes = [n for st in body for n in ast.walk(st)]
        if any(isinstance(n, (ast.Return, ast.Break, ast.Continue)) for n in nodes):
            return None
        if any(isinstance(n, ast.Attribute) and n.attr == "syncthreads" for n in nodes):
            return None  # (a barrier is met by every thread of a block at once)
        assigned = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        assigned.add(s.target.id)  # type: ignore[attr-defined]
        inside = {id(n) for n in nodes}
        outside = {
            n.id for n in ast.walk(self.node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside
        }
        if assigned & outside:
            return None
        read_arrays = {
            n.value.id
            for n in nodes
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        stored_arrays = {
            n.value.id
            for n in nodes
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        updated = {
            n.target.value.id
            for n in nodes
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript) and isinstance(n.target.value, ast.Name)
        }  # (A[i] += v reads A too)
        if updated or read_arrays & stored_arrays:
            return None
        if not _defined_first(body, {s.target.id}, assigned):  # type: ignore[attr-defined]
            return None
        return frozenset(assigned)

    def _while(self, s: ast.While) -> Stmt:
        if s.orelse:
            raise Unsupported("while with else")
        test = self._expr(s.test)
        body = self._block(s.body)
        line = s.lineno

        def while_(L: Lanes, m: np.ndarray) -> None:
            launch = L.launch
            outer = launch.loop
            launch.loop = line
            _while(L, m)
            launch.loop = outer  # (not on an exception: Interrupt names the innermost loop)

        def _while(L: Lanes, m: np.ndarray) -> None:
            active = m
            trips = 0
            while True:
                c = truth(test(L, active))
                active = active & c
                running = _any(active)
                if not running:
                    return
                trips = trips + 1 if _narrow(L, running) else 0
                if trips >= NARROW_TRIPS:
                    raise Bail(NARROW_WHY)
                body(L, active)
                active = active & ~L.ret
                _check_time(L)

        return while_

    def _atomic(self, call: ast.Call) -> Stmt:
        f = call.func
        if not (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Attribute)
            and f.value.attr == "atomic"
            and isinstance(f.value.value, ast.Name)
            and f.value.value.id in self.cuda_names
            and f.attr in _ATOMIC_OPS
            and len(call.args) == 3
            and not call.keywords
            and isinstance(call.args[0], ast.Name)
            and (call.args[0].id in self.position or call.args[0].id in self.shared)
        ):
            raise Unsupported("a call as a statement that is not an atomic")
        kind = f.attr
        target = call.args[0].id  # type: ignore[attr-defined]
        pos = self.position[target] if target in self.position else self.shared[target]
        self.atomic.add(pos)
        idx_node = call.args[1]
        parts = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
        index = [self._expr(p) for p in parts]
        value = self._expr(call.args[2])
        line = call.lineno

        def atomic(L: Lanes, m: np.ndarray) -> None:
            arr = L.env[f"@{pos}"]
            idx = [i(L, m) for i in index]
            full = m is L.full
            v = value(L, m)
            L.launch.at = line
            if arr.dtype.name not in GPU_ATOMIC_TYPES[kind]:
                raise Bail("an atomic on an element type a GPU has none for")  # (the engine says so in words)
            if pos < 0:
                _shared_atomic(L, arr, pos, kind, idx, v, m)
                return
            dt = arr.dtype
            vals = v.a
            if (
                dt.kind in "iu"
                and kind in ("add", "sub")
                and not arr.recorded
                and v.t in _INTS
                and not isinstance(vals, np.ndarray)
                and all(not isinstance(x.a, np.ndarray) for x in idx)
            ):
                # one element, one value, for every lane (a counter): the lanes' updates folded into one
                _, parts = _locate(arr, idx, m, full, False)
                flat = sum(int(p) * k for p, k in zip(parts, arr.mult))
                ops = int(L.n if full else _any(m))
                launch = L.launch
                total: int = int(vals) * ops
                if abs(total) >= _INT_LIMIT:
                    raise Bail("an atomic's value too large")
                launch.atomics.append((kind, pos, np.array([flat], dtype=np.int64), total, None, launch.step, ops))
                launch.step += 1
                return
            flat, _ = _locate(arr, idx, m, full)
            if dt.kind in "iu":
                if v.t not in _INTS:
                    raise Bail("a float value of an atomic on an integer array")
                if v.n >= 1 << 62:
                    raise Bail("an atomic's value too large")
                tids = None  # (integer atomics commute: their order does not matter)
                if isinstance(vals, np.ndarray):
                    vals = vals if full else vals[m]
                else:
                    vals = int(vals)
            else:
                if v.t not in (I, I64, F, F32, F64):
                    raise Bail("an atomic's value of another type")
                if v.t in _INTS:
                    _exact_in(v, _TAGS.get(dt))
                vals = np.asarray(vals).astype(dt)
                if vals.ndim:
                    vals = vals if full else vals[m]
                tids = L.tid if full else L.tid[m]
            launch = L.launch
            if arr.recorded:
                tids = L.tid if full else L.tid[m]
                launch.records.append((_step(L, m), pos, ATOMIC, flat, tids, None, line))
            launch.atomics.append((kind, pos, flat, vals, tids, _step(L, m), flat.size))
            launch.step += 1

        return atomic

    def _element(self, node: ast.Subscript) -> tuple[int, Callable[[Lanes, np.ndarray], list[V]]]:
        """(the array's position, the compiled index) of ``A[i]`` / ``A[i, j]`` where ``A`` is a parameter or a shared
        array."""
        base = node.value
        if not isinstance(base, ast.Name) or (base.id not in self.position and base.id not in self.shared):
            raise Unsupported("an element of something that is not an array parameter or a shared array")
        pos = self.position[base.id] if base.id in self.position else self.shared[base.id]
        sl = node.slice
        parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if any(isinstance(p, (ast.Slice, ast.Starred)) for p in parts):
            raise Unsupported("a slice")
        index = [self._expr(p) for p in parts]

        def idx(L: Lanes, m: np.ndarray) -> list[V]:
            return [i(L, m) for i in index]

        return pos, idx

    # -- expressions
    def _expr(self, e: ast.expr) -> Any:
        if isinstance(e, ast.Constant):
            value = e.value
            if _tag_of(value) is None or isinstance(value, np.generic):
                raise Unsupported("a constant of another type")
            const = _scalar(value)
            return lambda L, m: const
        if isinstance(e, ast.Name):
            return self._name(e.id)
        if isinstance(e, ast.BinOp):
            op = _BINOPS.get(type(e.op))
            if op is None:
                raise Unsupported(f"the operator {type(e.op).__name__}")
            left, right = self._expr(e.left), self._expr(e.right)
            return lambda L, m: binop(op, left(L, m), right(L, m), m)
        if isinstance(e, ast.UnaryOp):
            return self._unary(e)
        if isinstance(e, ast.Compare):
            return self._compare(e)
        if isinstance(e, ast.BoolOp):
            return self._boolop(e)
        if isinstance(e, ast.IfExp):
            return self._ifexp(e)
        if isinstance(e, ast.Subscript):
            return self._subscript(e)
        if isinstance(e, ast.Attribute):
            return self._attribute(e)
        if isinstance(e, ast.Call):
            return self._call(e)
        raise Unsupported(type(e).__name__)

    def _tuple(self, e: ast.Tuple) -> Expr:
        """The right side of ``tx, ty = cuda.threadIdx.x, cuda.threadIdx.y`` (a tuple is taken only to be unpacked)."""
        if any(isinstance(x, ast.Starred) for x in e.elts):
            raise Unsupported("a starred item")
        items = [self._expr(x) for x in e.elts]

        def tuple_(L: Lanes, m: np.ndarray) -> TupleV:
            return TupleV([item(L, m) for item in items])

        return tuple_

    def _name(self, name: str) -> Expr:
        if name in self.shared:
            raise Unsupported("a shared array used other than by its elements")
        if name in self.position:
            key = f"@{self.position[name]}"

            def param(L: Lanes, m: np.ndarray) -> Any:
                return L.env[key]

            return param
        if name in self.locals:

            def local(L: Lanes, m: np.ndarray) -> Any:
                try:
                    v = L.env[name]
                except KeyError:
                    raise Bail("a variable read before it is assigned") from None
                undefined = L.undefined.get(name)
                if undefined is not None and _any(undefined & m):
                    raise Bail("a variable read before it is assigned")
                return v

            return local
        self.free.add(name)
        key = f"${name}"
        return lambda L, m: L.env[key]

    def _unary(self, e: ast.UnaryOp) -> Expr:
        operand = self._expr(e.operand)
        if isinstance(e.op, ast.Not):

            def not_(L: Lanes, m: np.ndarray) -> V:
                c = truth(operand(L, m))
                return V(~c if isinstance(c, np.ndarray) else not c, B)

            return not_
        if isinstance(e.op, ast.UAdd):
            return operand
        if isinstance(e.op, ast.USub):

            def neg(L: Lanes, m: np.ndarray) -> V:
                return _per_part(_negative, operand(L, m), m)

            return neg
        if isinstance(e.op, ast.Invert):

            def inv(L: Lanes, m: np.ndarray) -> V:
                return _per_part(_invert, operand(L, m), m)

            return inv
        raise Unsupported("a unary operator")

    def _compare(self, e: ast.Compare) -> Expr:
        ops = []
        for op in e.ops:
            f = _CMPOPS.get(type(op))
            if f is None:
                raise Unsupported("is / in")
            ops.append(f)
        operands = [self._expr(x) for x in [e.left, *e.comparators]]
        if len(ops) == 1:
            left, right, op1 = operands[0], operands[1], ops[0]
            return lambda L, m: binop(op1, left(L, m), right(L, m), m)
        # a < b < c is (a < b) and (b < c), b evaluated once, c only where a < b
        steps = list(zip(ops, operands[1:]))

        def chain(L: Lanes, m: np.ndarray) -> V:
            left = operands[0](L, m)
            results: list[V] = []
            live = m
            for op, operand in steps:
                right = operand(L, live)
                r = binop(op, left, right, live)
                results.append(r)
                c = truth(r)
                live = live & c
                if isinstance(live, bool) and not live or isinstance(live, np.ndarray) and not _any(live):
                    break
                left = right
            return _and_values(results, m)

        return chain

    def _boolop(self, e: ast.BoolOp) -> Expr:
        values = [self._expr(x) for x in e.values]
        is_and = isinstance(e.op, ast.And)

        def boolop(L: Lanes, m: np.ndarray) -> V:
            results: list[V] = []
            live = m
            for value in values:
                r = value(L, live)
                results.append(r)
                c = truth(r)
                live = live & (c if is_and else ~c if isinstance(c, np.ndarray) else not c)
                if isinstance(live, bool) and not live or isinstance(live, np.ndarray) and not _any(live):
                    break
            return _and_values(results, m) if is_and else _or_values(results, m)

        return boolop

    def _ifexp(self, e: ast.IfExp) -> Expr:
        test, body, orelse = self._expr(e.test), self._expr(e.body), self._expr(e.orelse)

        def ifexp(L: Lanes, m: np.ndarray) -> V:
            c = truth(test(L, m))
            if isinstance(c, bool):
                return body(L, m) if c else orelse(L, m)
            mt, me = m & c, m & ~c
            if not _any(me):
                return body(L, m)
            if not _any(mt):
                return orelse(L, m)
            return select(c, body(L, mt), orelse(L, me))

        return ifexp

    def _subscript(self, e: ast.Subscript) -> Expr:
        base = e.value
        if isinstance(base, ast.Attribute) and base.attr == "shape" and isinstance(e.slice, ast.Constant):
            shape = self._expr(base)
            k = e.slice.value
            if not isinstance(k, int):
                raise Unsupported("a shape index")

            def dim(L: Lanes, m: np.ndarray) -> V:
                s = shape(L, m)
                try:
                    return s.items[k]
                except IndexError:
                    raise Bail("a shape index out of range") from None

            return dim
        pos, index = self._element(e)
        self.indexed.add(pos)
        key = f"@{pos}"

        line = e.lineno

        def read(L: Lanes, m: np.ndarray) -> V:
            idx = index(L, m)
            L.launch.at = line
            return _load(L, L.env[key], pos, idx, m)

        return read

    def _attribute(self, e: ast.Attribute) -> Expr:
        v = e.value
        if isinstance(v, ast.Name) and v.id in self.position and e.attr in ("shape", "size", "ndim"):
            key, attr = f"@{self.position[v.id]}", e.attr

            def array_attr(L: Lanes, m: np.ndarray) -> Any:
                return L.env[key].attrs[attr]

            return array_attr
        if (
            isinstance(v, ast.Attribute)
            and v.attr in _DIM_NAMES
            and isinstance(v.value, ast.Name)
            and v.value.id in self.cuda_names
            and e.attr in ("x", "y", "z")
        ):
            key = f"#{v.attr}.{e.attr}"
            return lambda L, m: L.env[key]
        raise Unsupported(f"the attribute .{e.attr}")

    def _call(self, e: ast.Call) -> Expr:
        f = e.func
        if e.keywords:
            raise Unsupported("keyword arguments")
        args = [self._expr(a) for a in e.args]
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.cuda_names:
            if f.attr in ("grid", "gridsize") and len(e.args) == 1 and isinstance(e.args[0], ast.Constant):
                ndim = e.args[0].value
                if ndim not in (1, 2, 3):
                    raise Unsupported("cuda.grid of another dimension")
                key = f"#{f.attr}{ndim}"
                return lambda L, m: L.env[key]
            raise Unsupported(f"cuda.{f.attr}")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in _CASTS and len(args) == 1:
            self.free.add(f.value.id)
            key, dt, arg = f"${f.value.id}", _CASTS[f.attr], args[0]

            def cast(L: Lanes, m: np.ndarray) -> V:
                if L.env[key] is not np:
                    raise Bail("not NumPy")
                return _per_part(lambda v: _cast(dt, v), arg(L, m), m)

            return cast
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in ("sqrt", "fabs") and len(args) == 1:
            self.free.add(f.value.id)
            key, fn_name, arg = f"${f.value.id}", f.attr, args[0]

            def mathcall(L: Lanes, m: np.ndarray) -> V:
                if L.env[key] is not math:
                    raise Bail("not the math module")
                return _per_part(lambda v: _math(fn_name, v, m), arg(L, m), m)

            return mathcall
        if isinstance(f, ast.Name) and f.id not in self.locals and f.id not in self.position:
            name = f.id
            self.free.add(name)
            key = f"${name}"
            if name == "len" and len(args) == 1 and isinstance(e.args[0], ast.Name) and e.args[0].id in self.position:
                shape = self._expr(ast.Attribute(e.args[0], "shape", ast.Load()))

                def len_(L: Lanes, m: np.ndarray) -> V:
                    if L.env[key] is not len:
                        raise Bail("len is not the builtin")
                    return shape(L, m).items[0]

                return len_
            builtin = _BUILTINS.get(name)
            if builtin is None or (name in ("min", "max") and len(args) != 2) or (name not in ("min", "max") and len(args) != 1):
                raise Unsupported(f"a call of {name}")

            def call(L: Lanes, m: np.ndarray) -> V:
                if L.env[key] is not builtin:
                    raise Bail(f"{name} is not the builtin")
                vals = [a(L, m) for a in args]
                if len(vals) == 1:
                    return _per_part(lambda v: _builtin(name, [v], m), vals[0], m)
                return _builtin(name, vals, m)

            return call
        raise Unsupported("a call")


def _one_iteration_each(launch: Launch) -> None:
    """A flattened batch ran its iterations' statements one after another, not its iterations: an element that two
    iterations of one thread wrote may hold the wrong one's value, so lockstep gives up then."""
    writes, launch.batch_writes = launch.batch_writes, []
    by_pos: dict[int, list[tuple]] = {}
    for w in writes:
        by_pos.setdefault(w[0], []).append(w)
    for items in by_pos.values():
        flats = np.concatenate([w[1] for w in items])
        tids = np.concatenate([w[2] for w in items])
        ks = np.concatenate([w[3] for w in items])
        if flats.size < 2:
            continue
        key = flats * (int(tids.max()) + 1) + tids
        order = np.lexsort((ks, key))
        key, ks = key[order], ks[order]
        if _any((key[1:] == key[:-1]) & (ks[1:] != ks[:-1])):
            raise Bail("an element two iterations of a flattened loop wrote")


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _defined_first(stmts: list[ast.stmt], defined: set[str], assigned: set[str]) -> bool:
    """True when, statement after statement, each name of ``assigned`` is stored before any load of it (a store in an
    ``if`` or a loop counts only inside it)."""
    defined = set(defined)
    for st in stmts:
        if isinstance(st, ast.Assign):
            if (_loads(st.value) & assigned) - defined:
                return False
            for t in st.targets:
                if (_loads(t) & assigned) - defined:
                    return False
                defined |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        elif isinstance(st, ast.AugAssign):
            target = st.target
            names = _loads(st.value) | _loads(target) | ({target.id} if isinstance(target, ast.Name) else set())
            if (names & assigned) - defined:
                return False
        elif isinstance(st, ast.If):
            if (_loads(st.test) & assigned) - defined:
                return False
            if not _defined_first(st.body, defined, assigned) or not _defined_first(st.orelse, defined, assigned):
                return False
        elif isinstance(st, ast.For):
            if (_loads(st.iter) & assigned) - defined:
                return False
            inner = defined | {st.target.id} if isinstance(st.target, ast.Name) else defined
            if not _defined_first(st.body, inner, assigned):
                return False
        elif isinstance(st, ast.While):
            if (_loads(st.test) & assigned) - defined:
                return False
            if not _defined_first(st.body, defined, assigned):
                return False
        elif (_loads(st) & assigned) - defined:
            return False
    return True


def _set(L: Lanes, name: str, v: Any, m: np.ndarray) -> None:
    """Assign ``v`` to the local ``name`` in the lanes of ``m``."""
    if isinstance(v, TupleV) or not isinstance(v, V):
        raise Bail("a local that is not a number")
    if m is L.full:
        L.env[name] = v
        if L.undefined:
            L.undefined.pop(name, None)
        return
    old = L.env.get(name)
    if old is None:
        L.env[name] = v
        out = ~m
        if _any(out):
            L.undefined[name] = out
        return
    undefined = L.undefined.get(name)
    if undefined is not None:
        undefined = undefined & ~m
        if _any(undefined):
            L.undefined[name] = undefined
        else:
            del L.undefined[name]
    if old.t != v.t or v.t == MIX:
        keep = ~m if undefined is None else ~m & ~undefined
        L.env[name] = _merge([(v, m), *_parts(old, keep)]) if _any(keep) else v
        return
    L.env[name] = select(m, v, old)


def _negative(v: V) -> V:
    if v.t in (B, BOOL, COND):
        raise Bail("the negative of a truth value")
    return V(-v.a, I if v.t in _NARROW else v.t, v.n)


def _invert(v: V) -> V:
    if v.t not in _INTS:
        raise Bail("~ of a value that is not an integer")
    return V(~v.a, I if v.t in _NARROW else v.t, v.n + 1)


def _and_values(results: list[V], m: np.ndarray) -> V:
    """``r0 and r1 and ...``: per lane the first false value, else the last."""
    t = results[0].t
    if t in (B, BOOL) and all(r.t == t and isinstance(r.a, np.ndarray) for r in results):
        a = results[0].a
        for r in results[1:]:
            a = a & r.a  # (of truth values, ``and`` is ``&``)
        return V(a, t)
    out = results[-1]
    for r in reversed(results[:-1]):
        c = truth(r)
        if isinstance(c, bool):
            out = out if c else r
            continue
        out = _choose(c, out, r)
    return out


def _or_values(results: list[V], m: np.ndarray) -> V:
    """``r0 or r1 or ...``: per lane the first true value, else the last."""
    t = results[0].t
    if t in (B, BOOL) and all(r.t == t and isinstance(r.a, np.ndarray) for r in results):
        a = results[0].a
        for r in results[1:]:
            a = a | r.a
        return V(a, t)
    out = results[-1]
    for r in reversed(results[:-1]):
        c = truth(r)
        if isinstance(c, bool):
            out = r if c else out
            continue
        out = _choose(c, r, out)
    return out


def _choose(c: np.ndarray, x: V, y: V) -> V:
    """Per lane ``x`` where ``c`` else ``y``; of different types, a truth value only (:data:`COND`)."""
    if x.t == y.t and x.t in (B, BOOL) and isinstance(x.a, np.ndarray) and isinstance(y.a, np.ndarray):
        return V((c & x.a) | (~c & y.a), x.t)  # (truth values: where, without np.where)
    if x.t == y.t and x.t != COND:
        return select(c, x, y)
    return V(np.where(c, truth(x), truth(y)), COND)


_CASTS: dict[str, Any] = {"float32": DT_F32, "float64": DT_F64}


def _cast(dt: np.dtype, v: V) -> V:
    """``np.float32(v)`` / ``np.float64(v)``."""
    if v.t == COND:
        raise Bail("a cast of a mixed truth value")
    tag = _TAGS[dt]
    if v.t in _INTS:
        _exact_in(v, tag)
    a = v.a
    if isinstance(a, np.ndarray):
        return V(a.astype(dt), tag)
    try:
        return V(dt.type(a), tag)
    except Exception as exc:  # noqa: BLE001 - the engine raises it
        raise Bail(str(exc)) from None


def _math(name: str, v: V, m: np.ndarray) -> V:
    if v.t in (COND,):
        raise Bail("math of a truth value")
    if v.t in _INTS:
        _exact_in(v, F)
    x = v.a
    if not isinstance(x, np.ndarray):
        try:
            return V(getattr(math, name)(x), F)
        except Exception as exc:  # noqa: BLE001 - the engine raises it
            raise Bail(str(exc)) from None
    x = x.astype(DT_F64)
    if name == "sqrt":
        if _any((x < 0) & m):
            raise Bail("math.sqrt of a negative number")
        return V(np.sqrt(np.where(x < 0, 0.0, x)), F)
    return V(np.fabs(x), F)


def _builtin(name: str, vals: list[V], m: np.ndarray) -> V:
    v = vals[0]
    if any(x.t in (COND, MIX) for x in vals) and name not in ("min", "max"):
        raise Bail("a builtin of a mixed truth value")
    if all(not isinstance(x.a, (np.ndarray, list)) for x in vals):
        try:
            r = _BUILTINS[name](*[x.a for x in vals])
        except Exception as exc:  # noqa: BLE001 - the engine raises it
            raise Bail(str(exc)) from None
        return _scalar(r)
    if name == "abs":
        if v.t in (B, BOOL):
            raise Bail("abs of a truth value")
        return V(np.abs(v.a), I if v.t in _NARROW else v.t, v.n)
    if name in ("min", "max"):
        a, b = vals
        # min(a, b) is b if b < a else a; max(a, b) is b if b > a else a (Python's own rule, NaN included)
        c = truth(binop(operator.lt if name == "min" else operator.gt, b, a, m))
        return select(c, b, a)
    if name == "int":
        if v.t in _INTS:
            return V(v.a.astype(DT_I64), I, v.n)
        if v.t in (B, BOOL):
            return V(v.a.astype(DT_I64), I, 1)
        x = v.a
        if not np.isfinite(x[m]).all():
            raise Bail("int() of inf or nan")
        if _any(np.abs(x[m]) >= 2.0**62):
            raise Bail("int() of a float too large")
        t = np.trunc(np.where(m, x, 0)).astype(DT_I64)
        return V(t, I, int(np.abs(t).max()) if t.size else 0)
    # float()
    if v.t in _INTS:
        _exact_in(v, F)
    if v.t in (B, BOOL):
        raise Bail("float of a truth value")
    return V(v.a.astype(DT_F64), F)


# ----------------------------------------------------------------------------- arrays
class ArrayArg:
    """An array argument of a lockstep run: the NumPy array, its bounds, how a read of an element looks."""

    __slots__ = ("live", "dtype", "shape", "mult", "attrs", "tracked", "poison", "read_tag", "read_bound", "arg", "recorded")

    def __init__(self, arg: Any, live: np.ndarray) -> None:
        self.arg = arg
        self.live = live
        self.dtype = live.dtype
        self.shape = live.shape
        mult, k = [], 1
        for n in reversed(live.shape):
            mult.append(k)
            k *= n
        self.mult = tuple(reversed(mult))
        self.attrs = {
            "shape": TupleV([V(int(n), I, int(n)) for n in live.shape]),
            "size": V(int(live.size), I, int(live.size)),
            "ndim": V(live.ndim, I, live.ndim),
        }
        self.tracked = False
        self.recorded = bool(getattr(arg, "_record", False))  # (a strict launch that records this array's accesses)
        self.poison: Any = None
        dt = live.dtype
        self.read_tag: Any = _TAGS.get(dt)
        self.read_bound = 0
        if dt.kind == "f" and dt.itemsize in (4, 8):
            pass
        elif dt.kind in "iu" and dt.itemsize == 1:
            self.read_tag, self.read_bound = I, 256
        elif dt.kind in "iu" and dt.itemsize in (2, 4):
            self.read_tag, self.read_bound = I64, 1 << 32
        elif dt == DT_I64:
            self.read_tag, self.read_bound = I64, 1 << 63
        else:
            raise Bail(f"an array of {dt}")


def _locate(arr: ArrayArg, idx: list[V], m: np.ndarray, full: bool, flat_too: bool = True) -> tuple[Any, tuple]:
    """(the flat element of each lane of ``m`` (None unless ``flat_too``), the index for NumPy of every lane); an
    index out of bounds in a lane of ``m`` gives up (the engine names it)."""
    shape = arr.shape
    if len(idx) != len(shape):
        raise Bail("an index of another number of dimensions")
    parts = []
    flat: Any = 0
    for v, n, k in zip(idx, shape, arr.mult):
        if v.t not in _INTS:
            raise Bail("an index that is not an integer")
        i = v.a
        if isinstance(i, np.ndarray):
            bad = i.view(np.uint64) >= n  # (one test for both ends: below zero is beyond 2**63)
            if _any(bad):
                if full or _any(bad & m):
                    raise Bail("an index out of bounds")
                i = np.where(bad, 0, i)
        elif not 0 <= i < n:
            raise Bail("an index out of bounds")
        parts.append(i)
        if flat_too:
            flat = flat + i * k if k != 1 else flat + i
    if not flat_too:
        return None, tuple(parts)
    if isinstance(flat, np.ndarray):
        flat_m = flat if full else flat[m]
    else:
        flat_m = np.full(len(m) if full else _any(m), flat, dtype=np.int64)
    return flat_m, tuple(parts)


def _log(table: dict[int, list], pos: int, flat: np.ndarray, L: Lanes, m: np.ndarray) -> None:
    table.setdefault(pos, []).append((flat, L.tid if m is L.full else L.tid[m]))


def _load(L: Lanes, arr: ArrayArg, pos: int, idx: list[V], m: np.ndarray) -> V:
    if pos < 0:
        return _shared_load(L, arr, pos, idx, m)  # type: ignore[arg-type]
    flat, parts = _locate(arr, idx, m, m is L.full, arr.tracked or arr.recorded)
    launch = L.launch
    if arr.tracked:
        _log(launch.reads, pos, flat, L, m)
    if arr.recorded:
        launch.records.append((_step(L, m), pos, READ, flat, L.tid if m is L.full else L.tid[m], None, launch.at))
    launch.step += 1
    got = arr.live[parts]
    if arr.poison is not None:
        seen = got[m] if isinstance(got, np.ndarray) and m is not L.full else got
        if _poisoned(arr, seen):
            raise Bail("a read of poison")
    return _read_value(arr, got)


def _read_value(arr: ArrayArg, got: Any) -> V:
    """The value elements ``got`` of ``arr`` give a thread, as the engine's reads give it."""
    tag = arr.read_tag
    if not isinstance(got, np.ndarray):
        return _scalar(int(got) if tag == I else np.int64(got) if tag == I64 else got)
    if tag == I or tag == I64:
        return V(got.astype(DT_I64, copy=False), tag, arr.read_bound if tag == I else _bound64(got, arr))
    return V(got, tag)


def _bound64(got: np.ndarray, arr: ArrayArg) -> int:
    return arr.read_bound if arr.read_bound < 1 << 63 else (int(np.abs(got).max()) if got.size else 0)


def _store(L: Lanes, arr: ArrayArg, pos: int, idx: list[V], v: V, m: np.ndarray) -> None:
    if isinstance(v, V) and v.t == MIX:  # (each type's lanes stored as the engine stores that type)
        for part, g in _parts(v, m):
            _store(L, arr, pos, idx, part, g)
        return
    if not isinstance(v, V) or v.t in (B, BOOL, COND):
        raise Bail("a store of a truth value")
    full = m is L.full
    dt = arr.dtype
    if dt.kind in "iu":
        if v.t not in _INTS:
            raise Bail("a float stored into an integer array")
        data = v.a
        if v.n >= _INT_LIMIT:
            raise Bail("an integer too large")
        data = np.asarray(data, dtype=np.int64).astype(dt)  # (wraps to the element's width, as a GPU store)
    else:
        if v.t in _INTS:
            _exact_in(v, _TAGS.get(dt))
        data = np.asarray(v.a).astype(dt)
    if pos < 0:
        _shared_store(L, arr, pos, idx, data, m, v)  # type: ignore[arg-type]
        return
    flat, parts = _locate(arr, idx, m, full)
    launch = L.launch
    _log(launch.writes, pos, flat, L, m)
    if L.kk is not None:  # (a flattened loop: which iteration wrote, see _one_iteration_each)
        launch.batch_writes.append((pos, flat, L.tid if full else L.tid[m], L.kk if full else L.kk[m]))
    if data.ndim and not full:
        data = data[m]
    if arr.recorded:
        given = _given(v, data, m, full, flat.size)
        launch.records.append((_step(L, m), pos, WRITE, flat, L.tid if full else L.tid[m], given, launch.at))
    launch.step += 1
    if full and any(isinstance(p, np.ndarray) for p in parts):
        arr.live[parts] = data
        return
    sel = tuple(p[m] if isinstance(p, np.ndarray) else p for p in parts)
    if all(not isinstance(p, np.ndarray) for p in parts):
        if data.ndim:
            arr.live[sel] = data[-1]
        else:
            arr.live[sel] = data
        return
    arr.live[sel] = data


# ----------------------------------------------------------------------------- shared memory and barriers
def _is_shared_call(func: ast.expr, cuda_names: frozenset[str]) -> bool:
    """``func`` is ``cuda.shared.array``."""
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "array"
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "shared"
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id in cuda_names
    )


def _as_dtype(value: Any) -> np.dtype:
    """A shared array's dtype as the engine reads it (``np.float32``, Numba's ``float32``, ``"float32"``)."""
    from .engine import _as_dtype as engine_dtype

    try:
        return engine_dtype(value)
    except Exception:  # noqa: BLE001 - not a dtype: the engine says so
        raise Bail("a shared array's dtype") from None


def _shared_label(fn: Any, line: int, col: int) -> str:
    """What the strict model calls the shared array allocated at ``line`` of the kernel (``shared array `tile```)."""
    memory = _memory()
    if memory is None:
        return f"shared array (line {line})"
    return str(memory.shared_name_at(fn.__code__.co_filename, line, lambda: col))


class SharedInfo:
    """A shared array as a recorded access names it (what the checks read of the engine's: ``name``, ``space``,
    ``shape``, ``dtype``), one for every block."""

    __slots__ = ("name", "space", "shape", "dtype")

    def __init__(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.name, self.space, self.shape, self.dtype = name, "shared", shape, dtype

    def __repr__(self) -> str:
        return f"<{self.name}>"


class SharedArr(ArrayArg):
    """A shared array of a chunk: one per block (rows of one NumPy array), filled with the strict model's poison,
    and this epoch's accesses (flat index in the chunk's array, thread) for the race checks at the next barrier."""

    __slots__ = ("flat", "bsize", "reads", "writes", "atomics")

    def __init__(self, nblocks: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        every = np.empty((nblocks, *shape), dtype=dtype)
        super().__init__(None, every[0])  # (the element type, bounds and reads of one block's array)
        memory = _memory()
        self.poison = (
            memory.poison_value(dtype) if memory is not None else np.nan if dtype.kind == "f" else np.iinfo(dtype).max - 7
        )
        every[...] = self.poison
        self.flat = every.reshape(-1)
        self.bsize = every[0].size
        self.reads: list[tuple[np.ndarray, np.ndarray]] = []
        self.writes: list[tuple[np.ndarray, np.ndarray]] = []
        self.atomics: list[np.ndarray] = []


def _shared_index(L: Lanes, arr: SharedArr, idx: list[V], m: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any]:
    """(each lane's element in the chunk's array, those of the lanes of ``m``, their index in their block's array)."""
    full = m is L.full
    _, parts = _locate(arr, idx, m, full, False)
    local: Any = 0
    for p, k in zip(parts, arr.mult):
        local = local + p * k if k != 1 else local + p
    g = L.blk * arr.bsize + local
    if full:
        return g, g, local
    return g, g[m], local[m] if isinstance(local, np.ndarray) else local


def _record(L: Lanes, pos: int, kind: int, local: Any, m: np.ndarray, values: Any = None) -> None:
    """Record a shared access of the lanes of ``m`` (``local``: the element in each lane's block's array)."""
    tids = L.tid if m is L.full else L.tid[m]
    flats = local if isinstance(local, np.ndarray) else np.full(tids.size, local, dtype=np.int64)
    L.launch.records.append((_step(L, m), pos, kind, flats, tids, values, L.launch.at))


def _poisoned(arr: ArrayArg, seen: Any) -> bool:
    return bool(_any(np.isnan(seen) if arr.poison != arr.poison else seen == arr.poison))


def _shared_load(L: Lanes, arr: SharedArr, pos: int, idx: list[V], m: np.ndarray) -> V:
    g, gm, local = _shared_index(L, arr, idx, m)
    arr.reads.append((gm, L.tid if m is L.full else L.tid[m]))
    if arr.recorded:
        _record(L, pos, READ, local, m)
    L.launch.step += 1
    got = arr.flat[g]
    if _poisoned(arr, got if m is L.full else got[m]):
        raise Bail("a read of shared memory that may not be written yet")
    return _read_value(arr, got)


def _given(v: V, data: np.ndarray, m: np.ndarray, full: bool, size: int) -> np.ndarray:
    """The values a store of ``v`` logs, one per lane of ``m``, as the engine logs them: a float element's the value
    given (a float64 stored into a float32 array logs the float64), an integer element's as stored."""
    if data.dtype.kind == "f":
        given = np.asarray(v.a, dtype=np.float64)
        if given.ndim and not full:
            given = given[m]
    else:
        given = data
    return given if given.ndim else np.full(size, given)


def _shared_store(L: Lanes, arr: SharedArr, pos: int, idx: list[V], data: np.ndarray, m: np.ndarray, v: V) -> None:
    full = m is L.full
    _, gm, local = _shared_index(L, arr, idx, m)
    tids = L.tid if full else L.tid[m]
    if data.ndim and not full:
        data = data[m]
    arr.writes.append((gm, tids))
    launch = L.launch
    if L.kk is not None:
        launch.batch_writes.append((pos, gm, tids, L.kk if full else L.kk[m]))
    if arr.recorded:
        _record(L, pos, WRITE, local, m, _given(v, data, m, full, gm.size))
    launch.step += 1
    arr.flat[gm] = data


def _shared_atomic(L: Lanes, arr: SharedArr, pos: int, kind: str, idx: list[V], v: V, m: np.ndarray) -> None:
    """An atomic on an integer shared array, applied at once (integer atomics commute; a plain access of an element
    that an atomic of the same epoch updates gives up at the barrier)."""
    dt = arr.dtype
    if dt.kind not in "iu":
        raise Bail("a float atomic on shared memory (its order)")
    if v.t not in _INTS or v.n >= _INT_LIMIT:
        raise Bail("an atomic's value that is not a small integer")
    _, gm, local = _shared_index(L, arr, idx, m)
    vals = v.a
    if isinstance(vals, np.ndarray):
        vals = vals if m is L.full else vals[m]
    else:
        vals = np.full(gm.size, int(vals), dtype=np.int64)
    flat = arr.flat
    if _poisoned(arr, flat[gm]):
        raise Bail("an atomic on shared memory that may not be written yet")
    info = np.iinfo(dt)
    if kind in ("add", "sub"):
        if vals.size and int(np.abs(vals).max()) * vals.size >= 1 << 53:
            raise Bail("atomics that may leave the exact range")
        sums = np.bincount(gm, weights=vals)  # (exact: below 2**53)
        touched = np.flatnonzero(sums)
        delta = sums[touched].astype(np.int64)
        new = flat[touched].astype(np.int64) + (delta if kind == "add" else -delta)
        if new.size and (int(new.min()) < info.min or int(new.max()) > info.max):
            raise Bail("an atomic past its element's range")
        flat[touched] = new
    else:
        if vals.size and (int(vals.min()) < info.min or int(vals.max()) > info.max):
            raise Bail("an atomic's value past the element's range")
        (np.maximum if kind == "max" else np.minimum).at(flat, gm, vals.astype(dt))
    arr.atomics.append(gm)
    launch = L.launch
    launch.shared_atomics += gm.size
    if arr.recorded:
        _record(L, pos, ATOMIC, local, m)
    launch.step += 1


def _barrier(L: Lanes, m: np.ndarray) -> None:
    """``cuda.syncthreads()``: every thread of each block must reach it (else the engine names the divergence); the
    epoch's shared accesses are checked for races, and a new epoch starts."""
    if L.kk is not None or (m is not L.full and not m.all()) or (L.any_ret and _any(L.ret)):
        raise Bail("a barrier that not every thread of a block reaches")
    _end_epoch(L)
    launch = L.launch
    launch.barrier_steps.append(launch.step)
    launch.step += 1
    launch.barriers += L.nblocks


def _end_epoch(L: Lanes) -> None:
    """The chunk's shared accesses since its last barrier: two threads touching one element with one of them
    writing, or a plain access of an element updated atomically, gives up (the engine names the race)."""
    for arr in L.shared:
        if arr.writes or arr.atomics:
            if _conflict(arr.writes, arr.reads, arr.atomics):
                raise Bail("a race in shared memory")
        arr.reads, arr.writes, arr.atomics = [], [], []


# ----------------------------------------------------------------------------- the cache of compiled kernels
_programs: dict[Any, Any] = {}
_refusals: dict[Any, str] = {}


def program(fn: Any) -> Program | None:
    """The kernel compiled for lockstep runs, or None when its text is outside the subset (decided once per code)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    found = _programs.get(code, _MISSING)
    if found is _MISSING:
        found = None
        named = _engine_only(code)
        try:
            from . import fastreads

            source = fastreads._source(fn, code) if named is None else None
            if named is not None:
                _refusals[code] = f"it names {named}"
            elif source is not None:
                node = source.fresh()  # (the tree parsed first: a variant of the engine's, if ever made, parses again)
                args = node.args
                if not (args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults):
                    found = Program(fn, node, source.cuda_names)
            else:
                _refusals[code] = "its source cannot be read"
        except Exception as exc:  # noqa: BLE001 - a text it cannot read or take (a constant too large, ...): the engine
            _refusals[code] = str(exc) or type(exc).__name__
            found = None
        _programs[code] = found
    return found


#: names whose use lockstep never runs (barriers with a value, local memory, warp functions, bit intrinsics, print): a
#: kernel that names one is left to the engine without its text being read (a variable of such a name too)
ENGINE_ONLY_NAMES = frozenset(
    {
        "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp", "local",
        "const", "laneid", "warpsize", "activemask", "lanemask_lt", "popc", "clz", "brev", "ffs", "print", "cg",
        "this_grid", "threadfence", "threadfence_block", "threadfence_system", "nanosleep", "fma", "cbrt",
    }
)  # fmt: skip


def _engine_only(code: types.CodeType) -> str | None:
    """A name in the kernel's code (``cuda.syncthreads``, ``cuda.shfl_down_sync``, ...) that lockstep never runs."""
    for name in code.co_names:
        if name in ENGINE_ONLY_NAMES or name.endswith("_sync"):
            return name
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            return "a nested function"
    return None


def refusal(fn: Any) -> str | None:
    """Why lockstep does not run the kernel (what in its text it does not take), or None when it does."""
    fn = getattr(fn, "py_func", fn)
    if program(fn) is not None:
        return None
    return _refusals.get(getattr(fn, "__code__", None), "not a kernel it can read")


def accepts(fn: Any) -> bool:
    """True when the kernel's text is one lockstep runs (its launches may still fall back, see the module's docstring)."""
    return program(getattr(fn, "py_func", fn)) is not None


# ----------------------------------------------------------------------------- a launch
class Order:
    """The engine's order of a lockstep launch's accesses: block after block in the schedule's order; in a block,
    epoch after epoch (barrier to barrier); in an epoch, thread after thread in the schedule's order (a shuffle
    draws a fresh one at the block's start and after each barrier, from one stream, block after block, as the
    engine draws them); a thread's accesses in the order it made them (their steps)."""

    def __init__(self, points: list[Any], size: int, schedule: str, seed: int | None, listed: bool, launch: Launch) -> None:
        n = len(points)
        order = list(range(n))
        if not listed and schedule == "reverse":
            order.reverse()
        elif not listed and schedule == "shuffle":
            random.Random(None if seed is None else seed ^ 0x5EED).shuffle(order)
        self.size = size
        self.brank = np.empty(n, dtype=np.int64)
        self.brank[order] = np.arange(n, dtype=np.int64)
        passed = np.zeros(n, dtype=np.int64)  # barriers each block passed
        self.base = np.zeros(n, dtype=np.int64)  # barriers of the launch before its chunk
        for first, count, before, barriers in launch.chunks:
            passed[first : first + count] = barriers
            self.base[first : first + count] = before
        self.steps = np.array(launch.barrier_steps, dtype=np.int64)
        self.epochs = int(passed.max()) + 1 if n else 1
        self.reverse = schedule == "reverse"
        self.table: np.ndarray | None = None  # (block, epoch, thread) -> its place in the epoch (a shuffle)
        if schedule == "shuffle":
            rng = random.Random(seed)
            self.table = np.zeros((n, self.epochs, size), dtype=np.int64)
            places = np.arange(size, dtype=np.int64)
            for b in order:
                for e in range(int(passed[b]) + 1):
                    ts = list(range(size))
                    rng.shuffle(ts)
                    self.table[b, e, np.asarray(ts, dtype=np.int64)] = places  # (thread ts[k] runs k-th)

    def epoch(self, tids: np.ndarray, steps: np.ndarray, blocks: np.ndarray | None = None) -> np.ndarray:
        """The epoch of each access (barriers its block had passed; ``blocks``: ``tids // size``, when known)."""
        if not self.steps.size:
            return np.zeros(tids.size, dtype=np.int64)
        epoch = np.searchsorted(self.steps, steps, side="right")
        epoch -= self.base[tids // self.size if blocks is None else blocks]
        return epoch

    def keys(self, tids: np.ndarray, steps: np.ndarray, epoch: np.ndarray | None = None) -> np.ndarray:
        """A key per access that sorts, with the steps as the second key, into the engine's order (``epoch``: each
        access's, when known)."""
        size = self.size
        blk, t = np.divmod(tids, size)
        epoch = self.epoch(tids, steps) if epoch is None else epoch
        key = self.brank[blk]
        key *= self.epochs
        key += epoch
        key *= size
        if self.table is not None:
            key += self.table[blk, epoch, t]
        elif self.reverse:
            key += size - 1
            key -= t
        else:
            key += t
        return key

    def sort(self, tids: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """The accesses' indices in the engine's order."""
        return np.lexsort((steps, self.keys(tids, steps)))


def _races(launch: Launch) -> bool:
    """True when two threads touched one element of an argument with one of them writing (the engine would name a
    race)."""
    return any(_conflict(writes, launch.reads.get(pos, [])) for pos, writes in launch.writes.items())


def _conflict(writes: list[tuple[np.ndarray, np.ndarray]], reads: list[tuple[np.ndarray, np.ndarray]], atomics: Any = ()) -> bool:
    """True when two threads wrote one element, one read what another wrote, or an element ``atomics`` updated was
    also read or written (accesses as (flat indices, threads))."""
    if atomics:
        updated = np.sort(np.concatenate(atomics))
        plain = [f for f, _ in writes] + [f for f, _ in reads]
        if plain and updated.size:
            touched = np.concatenate(plain)
            at = np.minimum(np.searchsorted(updated, touched), updated.size - 1)
            if _any(updated[at] == touched):
                return True
    if not writes:
        return False
    wf = np.concatenate([f for f, _ in writes])
    wt = np.concatenate([t for _, t in writes])
    if not wf.size:
        return False
    span = int(wt.max()) + 1
    pairs = np.sort(wf * span + wt)  # (np.unique's first call imports numpy.ma: 30 ms of a first launch)
    if pairs.size > 1:
        pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]
    flats, threads = pairs // span, pairs % span
    if _any(flats[1:] == flats[:-1]):
        return True
    if reads:
        rf = np.concatenate([f for f, _ in reads])
        rt = np.concatenate([t for _, t in reads])
        at = np.minimum(np.searchsorted(flats, rf), flats.size - 1)
        if _any((flats[at] == rf) & (threads[at] != rt)):
            return True
    return False


def _steps(steps: list[Any], sizes: list[int]) -> np.ndarray:
    """Each access's step: an entry's one step repeated, or its lanes' own (a flattened loop's, see :func:`_step`)."""
    if all(not isinstance(x, np.ndarray) for x in steps):
        return np.repeat(np.array(steps, dtype=np.int64), sizes)
    return np.concatenate([x if isinstance(x, np.ndarray) else np.full(n, x, dtype=np.int64) for x, n in zip(steps, sizes)])


def _values(items: list[tuple], dtype: Any) -> np.ndarray:
    """The atomics' values of ``items`` in one array, one per flat index (a scalar repeated for its lanes)."""
    if all(not isinstance(it[3], np.ndarray) or not it[3].ndim for it in items):
        return np.repeat(np.array([it[3] for it in items], dtype=dtype), [it[2].size for it in items])
    return np.concatenate([np.full(it[2].size, it[3], dtype=dtype) if not np.ndim(it[3]) else it[3] for it in items])


def _apply_atomics(launch: Launch, arrays: dict[int, ArrayArg], ranks: Any) -> dict[int, tuple[int, np.ndarray]]:
    """Apply the atomics, each array's in the engine's order; returns {position: (count, flats)}."""
    done: dict[int, tuple[int, np.ndarray]] = {}
    by_pos: dict[int, list[tuple]] = {}
    for item in launch.atomics:
        by_pos.setdefault(item[1], []).append(item)
    for pos, items in by_pos.items():
        arr = arrays[pos]
        live = arr.live
        kinds = {it[0] for it in items}
        if len(kinds) != 1:
            raise Bail("atomics of several kinds on one array")
        (kind,) = kinds
        dt = arr.dtype
        if dt not in (np.dtype(np.int32), np.dtype(np.uint32), DT_I64, DT_F32, DT_F64):
            raise Bail(f"an atomic on {dt}")
        if not live.flags.c_contiguous:
            raise Bail("an atomic on an array that is not contiguous")
        view = live.reshape(-1)
        flats = np.concatenate([it[2] for it in items])
        if dt.kind in "iu":
            vals = _values(items, DT_I64)
            if kind in ("add", "sub"):
                if vals.size and int(np.abs(vals).max()) * vals.size >= 1 << 53:
                    raise Bail("atomics that may leave the exact range")
                sums = np.bincount(flats, weights=vals, minlength=view.size)  # (exact: below 2**53)
                touched = np.flatnonzero(sums) if kind == "add" else np.flatnonzero(sums)
                delta = sums[touched].astype(np.int64)
                view[touched] = (view[touched].astype(np.int64) + (delta if kind == "add" else -delta)).astype(dt)
            else:
                (np.maximum if kind == "max" else np.minimum).at(view, flats, vals.astype(dt))
        else:
            if kind not in ("add", "sub"):
                raise Bail("a float atomic max/min (the order of NaNs)")
            vals = _values(items, dt)
            steps = _steps([it[5] for it in items], [it[2].size for it in items])
            order = ranks.sort(np.concatenate([it[4] for it in items]), steps)
            with np.errstate(all="raise"):
                try:
                    (np.add if kind == "add" else np.subtract).at(view, flats[order], vals[order])
                except FloatingPointError:
                    raise Bail("a float atomic that overflowed") from None
        done[pos] = (sum(it[6] for it in items), flats)
    return done


def _module_values(grid: tuple[int, int, int], block: tuple[int, int, int]) -> dict[str, V]:
    """``cuda.blockDim``, ``gridDim`` and ``gridsize`` of the launch (the same for every thread)."""
    out: dict[str, V] = {}
    for name, dims in (("blockDim", block), ("gridDim", grid)):
        for axis, n in zip("xyz", dims):
            out[f"#{name}.{axis}"] = V(int(n), I, int(n))
    size = [g * b for g, b in zip(grid, block)]
    for ndim in (1, 2, 3):
        vals = [V(int(size[k]), I, int(size[k])) for k in range(ndim)]
        out[f"#gridsize{ndim}"] = vals[0] if ndim == 1 else TupleV(vals)  # type: ignore[assignment]
    return out


def _fill_lanes(L: Lanes, block: tuple[int, int, int], consts: dict[str, Any]) -> None:
    env = L.env
    env.update(consts)
    bx, by, bz = block
    gbound = [int(consts[f"#gridDim.{a}"].a) * n for a, n in zip("xyz", block)]
    env["#threadIdx.x"], env["#threadIdx.y"], env["#threadIdx.z"] = V(L.tx, I32, bx), V(L.ty, I32, by), V(L.tz, I32, bz)
    env["#blockIdx.x"] = V(L.bx, I32, gbound[0] // bx)  # (Int32 in the engine, as Numba types them)
    env["#blockIdx.y"] = V(L.by, I32, gbound[1] // by)
    env["#blockIdx.z"] = V(L.bz, I32, gbound[2] // bz)
    gx, gy, gz = L.bx * bx + L.tx, L.by * by + L.ty, L.bz * bz + L.tz
    env["#grid1"] = V(gx, I, gbound[0])
    env["#grid2"] = TupleV([V(gx, I, gbound[0]), V(gy, I, gbound[1])])
    env["#grid3"] = TupleV([V(gx, I, gbound[0]), V(gy, I, gbound[1]), V(gz, I, gbound[2])])


def _free_value(fn: Any, name: str) -> Any:
    code = fn.__code__
    if name in code.co_freevars:
        cell = fn.__closure__[code.co_freevars.index(name)]
        try:
            return cell.cell_contents
        except ValueError:
            raise Bail(f"{name} is not defined") from None
    glob = fn.__globals__
    if name in glob:
        return glob[name]
    builtins = glob.get("__builtins__", {})
    builtins = builtins if isinstance(builtins, dict) else vars(builtins)
    if name in builtins:
        return builtins[name]
    raise Bail(f"{name} is not defined")


def _interrupted(exc: KeyboardInterrupt, fn: Any, L: Lanes | None, started: float, args: Sequence[Any]) -> None:
    """An Interrupt during a lockstep run: the engine's words (``stopped by Interrupt after 4.1 s: thread (0, 0, 0) of
    block (0, 0, 0) was at line 4 of saxpy: ...``: the first thread still running, at the innermost loop it is in,
    else its statement) and a traceback that ends at that line of the kernel, in a frame of the kernel's name and
    parameters (a lockstep run has no frame of the kernel's own)."""
    from .blocks import Stuck

    if exc.args:
        return
    launch = L.launch if L is not None else None
    line = (launch.loop or launch.line) if launch is not None else 0
    code = fn.__code__
    if L is None or line <= code.co_firstlineno:
        exc.args = (f"stopped by Interrupt after {time.monotonic() - started:.1f} s",)
        return
    live = np.flatnonzero(~L.ret)
    k = int(live[0]) if live.size else 0
    stuck = Stuck(
        (int(L.tx[k]), int(L.ty[k]), int(L.tz[k])),
        (int(L.bx[k]), int(L.by[k]), int(L.bz[k])),
        code.co_filename,
        line,
        code.co_name,
    )
    exc.args = (f"stopped by Interrupt after {time.monotonic() - started:.1f} s: {stuck.words()}",)
    tb = _at_line(exc, fn, line, args)
    if tb is not None:
        exc.with_traceback(tb)


def _at_line(exc: BaseException, fn: Any, line: int, args: Sequence[Any]) -> Any:
    """A traceback of one frame: line ``line`` of the kernel's file, in a function of the kernel's name called with
    the launch's arguments (what IPython's box shows of a frame), in a copy of the kernel's globals."""
    code = fn.__code__
    first = code.co_firstlineno
    params = ", ".join(code.co_varnames[: code.co_argcount])
    text = "\n" * (first - 1) + f"def {code.co_name}({params}):\n" + "\n" * (line - first - 1) + "    raise _lk_exc\n"
    namespace = dict(fn.__globals__)
    namespace["_lk_exc"] = exc
    exc.__traceback__ = None  # (the stub's frame is the whole traceback)
    try:
        exec(compile(text, code.co_filename, "exec"), namespace)  # noqa: S102 - our own one-line stub
        stub = namespace[code.co_name]
        stub.__qualname__ = fn.__qualname__
        stub(*args)
    except BaseException as raised:  # noqa: BLE001
        if raised is not exc:
            return None
        tb = raised.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != code.co_filename:
            tb = tb.tb_next
        return tb
    return None


def run(
    fn: Any,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[Any],
    *,
    hooks: Any = None,
    schedule: str = "forward",
    seed: int | None = None,
    blocks_to_run: Any = None,
    time_limit_s: float | None = None,
    **others: Any,
) -> bool:
    """Run a launch in lockstep if the kernel and its arguments allow it; True when it ran (the arrays hold its
    results), False when the engine must run it (nothing was changed)."""
    global last
    last = "not run: lockstep is off, or the launch is traced"
    if not ENABLED or others.get("on_block_error") is not None:
        return False
    prog = program(fn)
    if prog is None:
        last = "not run: the kernel's text"
        return False
    memory = _memory()
    model = hooks
    if model is not None and (memory is None or type(model) is not memory.Model or model.syncwarps or model.log):
        last = "not run: a memory model of another kind"
        return False
    if any(type(d) is not int for d in (*grid, *block)):  # (np.int32 dimensions make blockDim.x an np.int32: its
        last = "not run: grid or block dimensions that are not Python ints"  # products are typed as NumPy's)
        return False
    try:
        prepared = _prepare(prog, fn, args)
    except Exception as why:  # noqa: BLE001 - an argument it does not take (Bail), or one that fails to answer
        if not isinstance(why, Bail) and RAISE_INTERNAL:
            raise
        last = f"not run: {why}"
        return False
    arrays, consts = prepared
    points = (
        [tuple(int(v) for v in p) for p in blocks_to_run]
        if blocks_to_run is not None
        else [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    )
    size = int(block[0] * block[1] * block[2])
    if not points or not size:
        return False
    keep = {pos: arrays[pos].live.copy() for pos in prog.stored | prog.atomic if pos >= 0}
    limit = float(time_limit_s or LEARNER_CODE_LIMIT_S)
    started_cpu = time.thread_time()
    started = time.monotonic()
    budget = min(BUDGET_SHARE * limit, BUDGET_MAX_S)
    launch = Launch(started_cpu + budget, started + budget)
    launch.model = model
    consts.update(_module_values(grid, block))
    per_chunk = max(1, CHUNK_LANES // size)
    L: Lanes | None = None
    flags: list[str] = []
    from . import engine, limits

    outer = engine.launch_active
    engine.launch_active = True
    limits.launches_running += 1
    try:
        with np.errstate(all="call", call=lambda kind, flag: flags.append(kind)):
            for first in range(0, len(points), per_chunk):
                L = Lanes(launch, points[first : first + per_chunk], block, first)
                _fill_lanes(L, block, consts)
                before = len(launch.barrier_steps)
                prog.body(L, L.full)
                _end_epoch(L)
                launch.chunks.append((first, L.nblocks, before, len(launch.barrier_steps) - before))
                if flags:
                    raise Bail("a floating-point warning")
            if _races(launch):
                raise Bail("a race")
            ranks = (
                Order(points, size, schedule, seed, blocks_to_run is not None, launch)
                if launch.atomics or launch.records
                else None
            )
            done = _apply_atomics(launch, arrays, ranks)
            if flags:
                raise Bail("a floating-point warning")
    except (Bail, Exception) as exc:
        if not isinstance(exc, Bail) and RAISE_INTERNAL:
            raise
        for pos, saved in keep.items():
            arrays[pos].live[...] = saved
        last = f"gave up: {exc}" if isinstance(exc, Bail) else f"gave up: {type(exc).__name__}: {exc}"
        return False
    except KeyboardInterrupt as exc:
        from . import tracebacks

        last = "interrupted"
        _interrupted(exc, fn, L, started, args)
        tracebacks.hide_engine(exc)
        raise
    finally:
        limits.launches_running -= 1
        engine.launch_active = outer
    if model is not None:
        _report(arrays, launch, done, model)
        if launch.records and ranks is not None:
            named = {pos: arr.arg for pos, arr in arrays.items()} | dict(launch.shared_arrays)
            model.log = LaneLog(launch.records, named, ranks, points, grid, block)
    last = "ran"
    return True


class LaneThread:
    """A thread as a recorded access names it (what :class:`labkit.sim.memory.Access` and the checks read of the
    engine's threads: ``key``, ``blockIdx``, ``threadIdx``, ``thread_id``, ``lane``, ``warp``)."""

    __slots__ = ("key", "blockIdx", "threadIdx", "thread_id", "lane", "warp")

    def __init__(self, block: tuple[int, int, int], linear: int, thread: int, dims: tuple[int, int, int]) -> None:
        bx, by, _ = dims
        self.blockIdx = block
        self.threadIdx = (thread % bx, (thread // bx) % by, thread // (bx * by))
        self.thread_id = thread
        self.key = (linear, thread)
        self.lane, self.warp = thread % 32, thread // 32

    def __repr__(self) -> str:
        return f"<thread {self.threadIdx} of block {self.blockIdx}>"


class LaneLog(Sequence[tuple]):
    """The accesses of a recorded lockstep launch, as a strict launch's log gives them: (array, thread, flat, kind,
    epoch, value), thread after thread in the engine's order, each thread's in the order it made them (the engine's
    log holds the same accesses of each array in the same order). Built as tuples only when read; as columns by
    :meth:`statements`, :meth:`raw_columns` and :meth:`engine_order`."""

    def __init__(self, records: list[tuple], named: dict[int, Any], order: Order, points: list, grid: Any, block: Any) -> None:
        self._records, self._named, self._order = records, named, order
        self._points, self._grid, self._block = points, grid, block
        self._sizes = np.array([r[3].size for r in records], dtype=np.int64)
        self._size = int(self._sizes.sum())
        self._raw: dict[str, np.ndarray] | None = None
        self._runs: dict[str, np.ndarray] | None = None
        self._engine: np.ndarray | None = None

    def __len__(self) -> int:
        return self._size

    @property
    def named(self) -> dict[int, Any]:
        """The arrays by position (an argument's, or a shared array's negative one): what each access names."""
        return self._named

    @property
    def threads_per_block(self) -> int:
        """The launch's threads per block."""
        return int(self._block[0] * self._block[1] * self._block[2])

    def statements(self) -> dict[str, np.ndarray]:
        """The log's entries, one per statement a set of lanes ran (in the order run): ``size`` (its accesses, one
        per lane, or per lane and trip of a loop run side by side), ``position`` (the array: an argument's position,
        a shared array's negative one), ``kind`` and ``line`` (of the kernel's code)."""
        records = self._records
        return {
            "size": self._sizes,
            "position": np.array([r[1] for r in records], dtype=np.int64),
            "kind": np.array([r[2] for r in records], dtype=np.int64),
            "line": np.array([r[6] for r in records], dtype=np.int64),
        }

    def raw_columns(self) -> dict[str, np.ndarray]:
        """One column per access, the accesses in the order of :meth:`statements`, computed once: ``tid`` (the
        thread: its place among the threads of the blocks run, as listed), ``block`` (linear, as the engine numbers
        blocks), ``thread`` (within its block), ``flat``, ``kind``, ``epoch``, ``step`` (a thread's accesses in the
        order of their steps) and ``value`` (a write's, as a float; NaN for the others)."""
        if self._raw is None:
            records, sizes = self._records, self._sizes
            size = self.threads_per_block
            gx, gy, _ = self._grid
            pts = np.array(self._points, dtype=np.int64).reshape(-1, 3)
            linear = pts[:, 0] + gx * (pts[:, 1] + gy * pts[:, 2])
            tids = np.concatenate([r[4] for r in records]) if records else np.zeros(0, dtype=np.int64)
            steps = _steps([r[0] for r in records], sizes.tolist())
            values = np.full(tids.size, np.nan)
            for start, r in zip((np.cumsum(sizes) - sizes).tolist(), records):
                if r[2] == WRITE and r[5] is not None:
                    values[start : start + r[3].size] = np.asarray(r[5], dtype=np.float64)
            blocks, threads = np.divmod(tids, size)
            self._raw = {
                "tid": tids,
                "block": linear[blocks],
                "thread": threads.astype(np.int32),
                "flat": np.concatenate([r[3] for r in records]) if records else np.zeros(0, dtype=np.int64),
                "kind": np.repeat(self.statements()["kind"].astype(np.int8), sizes),
                "epoch": self._order.epoch(tids, steps, blocks),
                "step": steps,
                "value": values,
            }
        return self._raw

    def runs(self) -> dict[str, np.ndarray]:
        """The log's runs, computed once: the accesses one statement made at one step (a statement's lanes, or one
        trip of a loop run side by side), each a stretch of :meth:`raw_columns`: ``start`` (one more entry: the
        end), ``step``, ``statement`` (its place in :meth:`statements`) and ``distinct`` (True when every run's
        lanes rise: a thread at most once in a run)."""
        if self._runs is None:
            raw = self.raw_columns()
            steps, tids = raw["step"], raw["tid"]
            cut = np.flatnonzero(steps[1:] != steps[:-1]) + 1
            start = np.concatenate(([0], cut, [steps.size])) if steps.size else np.zeros(1, dtype=np.int64)
            rising = tids[1:] > tids[:-1]
            rising[cut - 1] = True
            self._runs = {
                "start": start,
                "step": steps[start[:-1]],
                "statement": np.searchsorted(np.cumsum(self._sizes), start[:-1], side="right"),
                "distinct": np.array(bool(rising.all())),
            }
        return self._runs

    def engine_order(self) -> np.ndarray:
        """The indices of :meth:`raw_columns` in the engine's order (:class:`Order`); computed once."""
        if self._engine is None:
            raw, runs = self.raw_columns(), self.runs()
            count = runs["step"].size
            keys = self._order.keys(raw["tid"], raw["step"], raw["epoch"])
            if runs["distinct"] and (runs["step"][1:] > runs["step"][:-1]).all():
                self._engine = np.argsort(keys, kind="stable")  # (each thread's accesses already in step order)
            elif (int(keys.max(initial=0)) + 1) * count < 1 << 62:  # (then by the rank of the access's run's step)
                rank = np.empty(count, dtype=np.int64)
                rank[np.argsort(runs["step"], kind="stable")] = np.arange(count)
                keys *= count
                keys += np.repeat(rank, np.diff(runs["start"]))
                self._engine = np.argsort(keys, kind="stable")
            else:
                self._engine = np.lexsort((raw["step"], keys))
        return self._engine

    def __iter__(self) -> Any:
        records, sizes = self._records, self._sizes
        raw, order = self.raw_columns(), self.engine_order()
        which = np.repeat(np.arange(len(records)), sizes)
        at = np.arange(self._size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        threads: dict[int, LaneThread] = {}
        size = self.threads_per_block
        gx, gy, _ = self._grid
        named = self._named
        columns = (which[order], at[order], raw["flat"][order], raw["tid"][order], raw["epoch"][order])
        for w, j, flat, tid, epoch in zip(*(c.tolist() for c in columns)):
            _, pos, kind, _, _, values, _ = records[w]
            t = threads.get(tid)
            if t is None:
                b = self._points[tid // size]
                t = threads[tid] = LaneThread(b, b[0] + gx * (b[1] + gy * b[2]), tid % size, self._block)
            yield (named[pos], t, flat, kind, epoch, values[j] if values is not None else None)

    def __getitem__(self, k: Any) -> Any:
        return list(self)[k]

    def __repr__(self) -> str:
        return f"<LaneLog of {len(self):,} accesses>"


def _report(arrays: dict[int, ArrayArg], launch: Launch, atomics: dict[int, tuple[int, np.ndarray]], model: Any) -> None:
    """What the strict model keeps of a launch that ran in lockstep: the elements written, the atomics counted, the
    shared arrays and the barriers."""
    for info in launch.shared_arrays.values():
        if not any(s[0] == info.name for s in model.shared):
            model.shared.append((info.name, info.shape, info.dtype))
    model.barriers += launch.barriers
    model.lockstep_shared_atomics += launch.shared_atomics
    for pos, arr in arrays.items():
        tracked = arr.arg
        wmask = getattr(tracked, "wmask", None)
        if wmask is None:
            continue
        marks = np.frombuffer(wmask, dtype=np.uint8)
        for flats, _ in launch.writes.get(pos, ()):
            marks[flats] = 1
        if pos in atomics:
            count, flats = atomics[pos]
            marks[flats] = 1
            tracked.natomics += count


def _prepare(prog: Program, fn: Any, args: Sequence[Any]) -> tuple[dict[int, ArrayArg], dict[str, Any]]:
    """The launch's arrays and scalars as lockstep values (:class:`Bail` for any it does not take)."""
    from .arrays import KernelArray

    memory = _memory()
    TrackedArray = memory.TrackedArray if memory is not None else ()  # noqa: N806

    if len(args) != len(prog.params):
        raise Bail("another number of arguments")
    consts: dict[str, Any] = {}
    arrays: dict[int, ArrayArg] = {}
    lives = []
    for k, a in enumerate(args):
        if isinstance(a, TrackedArray):
            arr = ArrayArg(a, a.live)
            if k in prog.stored or k in prog.atomic:
                if not a._track:
                    raise Bail("an array the model does not watch")
            arr.tracked = k in prog.stored
            if a.poisoned:
                arr.poison = memory.poison_value(a.live.dtype)
            arrays[k] = arr
            lives.append(a.live)
            consts[f"@{k}"] = arr
        elif isinstance(a, KernelArray):
            arr = ArrayArg(a, a.live)
            arr.tracked = k in prog.stored
            arrays[k] = arr
            lives.append(a.live)
            consts[f"@{k}"] = arr
        else:
            if k in prog.stored or k in prog.atomic or k in prog.indexed:
                raise Bail("an element of something that is not an array")
            consts[f"@{k}"] = _scalar(a)
    for k, a in enumerate(lives):
        for b in lives[k + 1 :]:
            if np.may_share_memory(a, b):
                raise Bail("arguments that share memory")
    for name in prog.type_names:
        consts[f"&{name}"] = _free_value(fn, name)
    for name in prog.free:
        value = _free_value(fn, name)
        if name == "range":
            if value is not range:
                raise Bail("range is not the builtin")
            continue
        if isinstance(value, (types.ModuleType, types.BuiltinFunctionType)) or value in (int, float):
            consts[f"${name}"] = value
            continue
        consts[f"${name}"] = _scalar(value)
    return arrays, consts


def _memory() -> Any:
    """:mod:`labkit.sim.memory` if it is loaded (a strict launch's arrays and model exist only then); lockstep does
    not import it (the memory model imports the launch layer, which imports lockstep)."""
    return sys.modules.get(f"{__package__}.memory")
