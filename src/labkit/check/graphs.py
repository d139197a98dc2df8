"""CUDA Graph capture for the recording CuPy stand-in (:mod:`labkit.check.streams`), for grading in ``sim`` mode.

:class:`RecordingGraphCuPy` is :class:`~labkit.check.streams.RecordingCuPy` with CuPy's graph names:
``stream.begin_capture()``, ``stream.is_capturing()``, ``stream.end_capture()`` returning a :class:`Graph`, and
``graph.launch(stream=None)`` / ``graph.upload(stream=None)``. What it does, as a GPU would:

- **capture records, it does not run**: work issued on the capturing stream becomes the graph's nodes (copies and
  kernels, in order); nothing is copied or computed until the graph is launched;
- **a launch replays the same nodes**: the same device buffers and the same host addresses every time, so a
  captured copy from ``frames[0]`` copies ``frames[0]`` at every replay;
- **a launch is asynchronous**: its nodes run when the host waits for them (a stream, event or device synchronize),
  so reading a result before that reads what was there before, and refilling an input buffer before the previous
  replay is waited for changes what that replay reads;
- **what capture forbids is an error**, in CUDA's words: a synchronising call while a stream captures (a
  synchronize, a blocking ``get()``, a copy from pageable host memory, which CuPy's docs call synchronous
  transfers), work on another stream while one captures, capturing the legacy default stream.

It counts what the host issued (:attr:`RecordingGraphCuPy.api_calls`): one call per copy or kernel outside a
graph, one per graph launch, which is what CUDA Graphs save. Events inside a capture are not supported by the
stand-in (it says so). Importing this module imports neither CuPy nor numba.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .streams import Op, RecordingCuPy, StandInError, Stream

CAPTURE_ERROR = "cudaErrorStreamCaptureUnsupported"


@dataclass
class Node:
    """One captured operation: what it is, the memory it touches, and the host code that performs it."""

    kind: str
    nbytes: int
    reads: list[tuple[int, int, int]]
    writes: list[tuple[int, int, int]]
    run: Callable[[], None]
    label: str


@dataclass
class Graph:
    """``cupy.cuda.graph.Graph``: the nodes a capture recorded, launched with :meth:`launch`."""

    _rec: "RecordingGraphCuPy"
    nodes: list[Node]
    launches: int = 0
    uploads: int = 0
    captured_on: str = ""

    def launch(self, stream: Stream | None = None) -> None:
        """Replay every node, in order, on ``stream`` (the current stream if None): asynchronous, one host call."""
        self._rec._launch_graph(self, stream)

    def upload(self, stream: Stream | None = None) -> None:
        """Prepare the graph on the device ahead of its first launch (no work of its own)."""
        self._rec._stream(stream)
        self.uploads += 1

    def kinds(self) -> list[str]:
        """The kinds of the nodes, in order (``h2d``, ``kernel``, ``d2h``, ``d2d``)."""
        return [n.kind for n in self.nodes]


@dataclass
class _Pending:
    op: Op
    run: Callable[[], None]
    done: bool = False


@dataclass
class _GraphNamespace:
    Graph: type = Graph
    graphs: list[Graph] = field(default_factory=list)


class RecordingGraphCuPy(RecordingCuPy):
    """The recording stand-in with CUDA Graph capture and replay (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.capturing: Stream | None = None
        self._nodes: list[Node] = []
        self.graphs: list[Graph] = []
        self._pending: list[_Pending] = []
        self.api_calls = 0
        self.eager_ops = 0  # copies and kernels issued outside any graph
        rec = self
        base = self.cuda.Stream

        class _Stream(base):  # type: ignore[misc, valid-type]
            def begin_capture(self, mode: Any = None) -> None:
                rec._begin_capture(self)

            def end_capture(self) -> Graph:
                return rec._end_capture(self)

            def is_capturing(self) -> bool:
                return rec.capturing is self

        _Stream.null = self.null  # type: ignore[attr-defined]
        self.cuda.Stream = _Stream
        self.cuda.graph = _GraphNamespace()

        def null_capture(mode: Any = None) -> None:
            raise StandInError(
                f"{CAPTURE_ERROR}: the legacy default stream cannot be captured.",
                fix="Capture on a stream of your own: s = cp.cuda.Stream(non_blocking=True); with s: s.begin_capture() ...",
            )

        base_event = self.cuda.Event

        class _Event(base_event):  # type: ignore[misc, valid-type]
            def record(self, stream: Stream | None = None) -> None:
                if rec.capturing is not None:
                    raise StandInError(
                        "the grading stand-in does not record events inside a capture.",
                        fix="Record events outside the capture, around graph.launch(), to time replays.",
                    )
                super().record(stream)

        self.cuda.Event = _Event
        self.null.begin_capture = null_capture  # type: ignore[attr-defined]
        self.null.is_capturing = lambda: False  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ capture
    def _begin_capture(self, stream: Stream) -> None:
        if self.capturing is not None:
            raise StandInError(
                f"{CAPTURE_ERROR}: {self.capturing!r} is already capturing.",
                fix="End one capture (stream.end_capture()) before beginning another.",
            )
        self.capturing, self._nodes = stream, []

    def _end_capture(self, stream: Stream) -> Graph:
        if self.capturing is not stream:
            raise StandInError(
                "cudaErrorIllegalState: end_capture() on a stream that is not capturing.",
                fix="Call end_capture() on the stream you called begin_capture() on.",
            )
        graph = Graph(self, self._nodes, captured_on=stream.name)
        self.capturing, self._nodes = None, []
        self.graphs.append(graph)
        self.cuda.graph.graphs.append(graph)
        return graph

    def _issue(
        self, kind: str, stream: Stream, nbytes: int, reads: list, writes: list, run: Callable[[], None], label: str
    ) -> Op:
        if self.capturing is not None:
            if stream is not self.capturing:
                raise StandInError(
                    f"{CAPTURE_ERROR}: {label} was issued on {stream!r} while {self.capturing!r} is capturing.",
                    fix="Issue the work to capture inside `with stream:` on the "
                    "capturing stream, and everything else after end_capture().",
                )
            self._nodes.append(Node(kind, nbytes, reads, writes, run, label))
            return Op(-1, kind, stream, nbytes, reads, writes, label=label)
        op = super()._issue(kind, stream, nbytes, reads, writes, lambda: None, label)
        self._run_before(op)
        run()
        self.api_calls += 1
        self.eager_ops += 1
        return op

    def _launch_graph(self, graph: Graph, stream: Stream | None) -> None:
        if self.capturing is not None:
            raise StandInError(
                "the stand-in does not capture a graph launch inside another capture.",
                fix="Launch the graph after end_capture().",
            )
        s = self._stream(stream)  # launching on the default stream is allowed; only capturing it is refused
        for node in graph.nodes:
            op = super()._issue(
                node.kind,
                s,
                node.nbytes,
                node.reads,
                node.writes,
                lambda: None,
                f"{node.label} (graph replay {graph.launches + 1})",
            )
            self._pending.append(_Pending(op, node.run))
        graph.launches += 1
        self.api_calls += 1

    # ------------------------------------------------------------------ when replayed work runs
    def _run_before(self, op: Op) -> None:
        """Run the pending replayed work that ``op`` depends on (it must have finished before ``op`` starts)."""
        self._flush(self._ancestors(set(op.deps)))

    def _flush(self, ops: set[int]) -> None:
        for p in self._pending:
            if not p.done and p.op.index in ops:
                p.run()
                p.done = True
        self._pending = [p for p in self._pending if not p.done]

    def _host_waits(self, ops: set[int], until: float) -> None:
        if self.capturing is not None:
            raise StandInError(
                f"{CAPTURE_ERROR}: the host waited (a synchronize, a blocking get(), or a copy from "
                f"pageable host memory) while {self.capturing!r} was capturing.",
                fix="Inside a capture use only asynchronous work: set() from pinned memory, kernels, "
                "get(out=pinned, blocking=False); synchronize after launching the graph.",
            )
        self._flush(self._ancestors(ops))
        super()._host_waits(ops, until)

    def unfinished(self) -> int:
        """Replayed operations the host never waited for (their results may not be there yet)."""
        return sum(1 for p in self._pending if not p.done)

    def finish(self) -> None:
        """Run what is still pending, as the GPU eventually would (after grading has looked at the results)."""
        for p in self._pending:
            if not p.done:
                p.run()
                p.done = True
        self._pending = []
