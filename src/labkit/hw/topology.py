"""DGX systems as graphs of GPUs, NVSwitches, CPUs, PCIe switches, NICs and links.

    >>> from labkit import topology
    >>> t = topology.load("DGX-2")
    >>> t.peer_bandwidth(0, 15, bidirectional=True)   # GB/s, any pair
    300.0
    >>> t.max_flow(range(8), range(8, 16), bidirectional=True)  # one baseboard to the other
    2400.0

Every edge carries ``kind`` (``nvlink``, ``pcie``, ``cpu``, ``network``), ``links`` (how many links in
parallel) and ``per_link`` (GB/s per direction, from :mod:`labkit.hw`). Bandwidth queries count NVLink
(direct or through NVSwitches) unless they say otherwise. Everything here is a model built from data
sheets: the numbers are what the wiring allows, not what a program measures (lab 07 measures).

The machine in front of you: :func:`from_nvidia_smi` reads ``nvidia-smi topo -m`` output and
:func:`from_nvml` asks NVML (``gpu`` mode only); both return the same :class:`Topology`.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import networkx as nx

from labkit import hw
from labkit.device import normalise_bus_id
from labkit.errors import LabkitError, NoGPUError
from labkit.validate import describe, require_bool, require_int, require_number, require_sequence, require_str

GB = 1e9

#: nvidia-smi's legend: how two devices connect.
LEGEND = {
    "X": "the device itself",
    "SYS": "PCIe plus the SMP interconnect between NUMA nodes (e.g. QPI/UPI)",
    "NODE": "PCIe plus the interconnect between PCIe host bridges within one NUMA node",
    "PHB": "PCIe plus a PCIe host bridge (typically the CPU)",
    "PXB": "several PCIe bridges, without a host bridge",
    "PIX": "at most one PCIe bridge",
    "NV#": "a bonded set of # NVLinks",
}
_PCIE_ORDER = ["PIX", "PXB", "PHB", "NODE", "SYS"]  # nearest first

# DGX-1 link maps: pairs with two NVLinks and with one (FACTS.md; numbering as nvidia-smi shows it).
DGX1_V100_DOUBLE = [(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)]
DGX1_V100_SINGLE = [(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)]
# DGX-1 P100 (unconfirmed): GPUs 0-3 all-to-all, 4-7 all-to-all, plus i <-> i+4, one link each.
DGX1_P100_SINGLE = [p for q in (range(4), range(4, 8)) for p in itertools.combinations(q, 2)] + [(i, i + 4) for i in range(4)]

_COLOURS = {"gpu": "#76b900", "nvswitch": "#1f77b4", "cpu": "#7f7f7f", "pcie": "#bcbd22", "nic": "#9467bd", "network": "#d62728"}
_EDGE_COLOURS = {"nvlink": "#76b900", "pcie": "#bcbd22", "cpu": "#7f7f7f", "network": "#9467bd"}


@dataclass
class Topology:
    """A system's wiring as a graph, with bandwidth queries. GPUs are addressed by index (``0`` or ``"GPU0"``)."""

    name: str
    graph: nx.Graph
    origin: str  # "model" (from labkit.hw), "nvidia-smi topo -m" or "NVML"
    gpu_model: str | None = None
    relations: dict[tuple[int, int], str] = field(default_factory=dict)  # nvidia-smi style, e.g. (0, 3): "NV2"
    notes: list[str] = field(default_factory=list)
    p2p: dict[tuple[int, int], bool] = field(default_factory=dict)  # NVML: may GPU i read GPU j's memory directly

    # ------------------------------------------------------------------ nodes
    def gpus(self) -> list[int]:
        """GPU indices, in order."""
        return sorted(d["index"] for _, d in self.graph.nodes(data=True) if d["kind"] == "gpu")

    def nodes(self, kind: str) -> list[str]:
        """Node names of one kind: ``gpu``, ``nvswitch``, ``cpu``, ``pcie``, ``nic``, ``network``."""
        return [n for n, d in self.graph.nodes(data=True) if d["kind"] == kind]

    def _gpu(self, g: Any) -> str:
        valid = self.gpus()
        span = f"{valid[0]}-{valid[-1]}" if len(valid) > 1 else str(valid[0]) if valid else "none"
        if isinstance(g, str) and re.fullmatch(r"(?i)\s*gpu\s*(\d+)\s*", g):
            g = int(re.findall(r"\d+", g)[0])
        try:
            if isinstance(g, bool):
                raise TypeError
            index = int(g)
            if index != g and not isinstance(g, str):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            raise LabkitError(
                f"{g!r} is not a GPU of {self.name}.", fix=f"Give a GPU index ({span}) or a name like 'GPU0'."
            ) from None
        if index not in valid:
            raise LabkitError(
                f"GPU {index} does not exist in {self.name}: it has GPUs {span}.", fix=f"Use a GPU index from {span}."
            )
        return f"GPU{index}"

    def _gpu_set(self, gs: Any, what: str) -> list[str]:
        if isinstance(gs, (int, str)):
            gs = [gs]
        gs = require_sequence(gs, what, what="a GPU index or a list of them", fix="e.g. [0, 1, 2, 3].")
        out = [self._gpu(g) for g in gs]
        if not out:
            raise LabkitError(f"{what} is empty.", fix="Give at least one GPU index.")
        return list(dict.fromkeys(out))

    # ------------------------------------------------------------------ links
    def links_between(self, a: Any, b: Any) -> int:
        """Number of direct NVLinks between GPUs ``a`` and ``b`` (0 if none: traffic goes through switches or PCIe)."""
        na, nb = self._gpu(a), self._gpu(b)
        if na == nb:
            return 0
        e = self.graph.get_edge_data(na, nb)
        return int(e["links"]) if e and e["kind"] == "nvlink" else 0

    def relation(self, a: Any, b: Any) -> str:
        """How ``a`` and ``b`` connect, in nvidia-smi's words: ``NV2``, ``NV12`` (through switches), ``SYS``, ``X`` ..."""
        na, nb = self._gpu(a), self._gpu(b)
        ia, ib = self.graph.nodes[na]["index"], self.graph.nodes[nb]["index"]
        if ia == ib:
            return "X"
        if (ia, ib) in self.relations:
            return self.relations[(ia, ib)]
        direct = self.links_between(ia, ib)
        if direct:
            return f"NV{direct}"
        nv = self._nvlink_graph(keep={na, nb})
        if na in nv and nb in nv and nx.has_path(nv, na, nb):
            return f"NV{round(self._flow(nv, [na], [nb]) / self._per_link_any(na))}"
        return "SYS" if self._cpu_of(na) != self._cpu_of(nb) else "PHB"

    def _per_link_any(self, node: str) -> float:
        vals = [d["per_link"] for _, _, d in self.graph.edges(node, data=True) if d["kind"] == "nvlink" and d["per_link"]]
        return vals[0] if vals else 1.0

    def _cpu_of(self, node: str) -> str | None:
        cpus = set(self.nodes("cpu"))
        try:
            paths = nx.single_source_shortest_path(self._kind_graph({"pcie"}), node)
        except nx.NodeNotFound:
            return None
        near = [c for c in cpus if c in paths]
        return min(near, key=lambda c: len(paths[c])) if near else None

    def _kind_graph(self, kinds: set[str]) -> nx.Graph:
        return self.graph.edge_subgraph([(u, v) for u, v, d in self.graph.edges(data=True) if d["kind"] in kinds])

    def _capacity_graph(self, kinds: set[str], keep: set[str] | None) -> nx.Graph:
        """Directed-capable capacity graph of the edges of ``kinds``; GPUs outside ``keep`` are removed (they do not forward)."""
        g = nx.Graph()
        for u, v, d in self.graph.edges(data=True):
            if d["kind"] not in kinds:
                continue
            if keep is not None and any(self.graph.nodes[x]["kind"] == "gpu" and x not in keep for x in (u, v)):
                continue
            if d["per_link"] is None:
                if d["kind"] == "cpu":
                    continue
                raise LabkitError(
                    f"{self.name} does not know the bandwidth of its {d['kind']} link {u}-{v}.",
                    fix="Pass gpu='H100' (or the GPU model) to from_nvidia_smi / from_nvml so labkit can look up per-link figures.",
                )
            g.add_edge(u, v, capacity=d["links"] * d["per_link"])
        return g

    def _nvlink_graph(self, keep: set[str] | None) -> nx.Graph:
        return self._capacity_graph({"nvlink"}, keep)

    @staticmethod
    def _flow(g: nx.Graph, src: list[str], dst: list[str]) -> float:
        if not all(n in g for n in src + dst):
            return 0.0
        h = nx.DiGraph()
        for u, v, d in g.edges(data=True):
            h.add_edge(u, v, capacity=d["capacity"])
            h.add_edge(v, u, capacity=d["capacity"])
        for s in src:
            h.add_edge("__src__", s)  # no capacity attribute: unbounded
        for t in dst:
            h.add_edge(t, "__dst__")
        return float(nx.maximum_flow_value(h, "__src__", "__dst__"))

    def peer_bandwidth(self, a: Any, b: Any, bidirectional: bool = False) -> float:
        """GB/s between GPUs ``a`` and ``b`` over NVLink: direct links, or paths through NVSwitches (the bottleneck
        along each path, all paths together). Other GPUs do not forward. 0 when no NVLink path exists.
        Per direction unless ``bidirectional=True`` (both directions added)."""
        bidirectional = require_bool(bidirectional, "bidirectional")
        na, nb = self._gpu(a), self._gpu(b)
        if na == nb:
            raise LabkitError(f"peer bandwidth needs two different GPUs, got {na} twice.", fix="Pick two different GPU indices.")
        bw = self._flow(self._nvlink_graph(keep={na, nb}), [na], [nb])
        return bw * 2 if bidirectional else bw

    def route(self, a: Any, b: Any) -> dict[str, Any]:
        """How traffic from ``a`` to ``b`` travels: ``{"kind", "path", "links", "bandwidth"}`` (GB/s per direction)."""
        na, nb = self._gpu(a), self._gpu(b)
        if na == nb:
            raise LabkitError(f"a route needs two different GPUs, got {na} twice.", fix="Pick two different GPU indices.")
        direct = self.links_between(na, nb)
        bw = self.peer_bandwidth(na, nb)
        if direct:
            return {"kind": "direct NVLink", "path": [na, nb], "links": direct, "bandwidth": bw}
        nv = self._kind_graph({"nvlink"}).subgraph(
            [n for n in self.graph if self.graph.nodes[n]["kind"] != "gpu" or n in (na, nb)]
        )
        if na in nv and nb in nv and nx.has_path(nv, na, nb):
            path = nx.shortest_path(nv, na, nb)
            return {"kind": "NVLink through NVSwitch", "path": path, "links": None, "bandwidth": bw}
        rest = self.graph.edge_subgraph([(u, v) for u, v, d in self.graph.edges(data=True) if d["kind"] != "nvlink"])
        path = nx.shortest_path(rest, na, nb) if na in rest and nb in rest and nx.has_path(rest, na, nb) else [na, nb]
        via = "PCIe, NICs and the network" if any(self.graph.nodes[n]["kind"] == "network" for n in path) else "PCIe and the CPUs"
        return {"kind": f"no NVLink: {via}", "path": path, "links": 0, "bandwidth": 0.0}

    def max_flow(
        self,
        src_gpus: Iterable[Any],
        dst_gpus: Iterable[Any],
        bidirectional: bool = False,
        relay: bool = True,
        over: str = "nvlink",
    ) -> float:
        """Best total GB/s from the GPUs ``src_gpus`` to ``dst_gpus`` over NVLink, using every path at once.

        ``relay=True`` lets other GPUs forward traffic (as NCCL's rings do); ``relay=False`` allows only switches.
        ``over="all"`` adds PCIe and the network (between the systems of a cluster).
        Per direction unless ``bidirectional=True``."""
        bidirectional, relay = require_bool(bidirectional, "bidirectional"), require_bool(relay, "relay")
        if over not in ("nvlink", "all"):
            raise LabkitError(f"over must be 'nvlink' or 'all', got {over!r}.")
        src, dst = self._gpu_set(src_gpus, "src_gpus"), self._gpu_set(dst_gpus, "dst_gpus")
        both = set(src) & set(dst)
        if both:
            raise LabkitError(
                f"{', '.join(sorted(both))} is in both src_gpus and dst_gpus.", fix="Give two disjoint sets of GPUs."
            )
        keep = None if relay else set(src) | set(dst)
        kinds = {"nvlink"} if over == "nvlink" else {"nvlink", "pcie", "network"}
        bw = self._flow(self._capacity_graph(kinds, keep), src, dst)
        return bw * 2 if bidirectional else bw

    def bisection_bandwidth(self, bidirectional: bool = False, over: str = "nvlink") -> float:
        """The smallest max-flow between two halves of the GPUs, over every way of halving them (GB/s).

        ``over="nvlink"`` counts NVLink (and NVSwitches) only; ``over="all"`` adds PCIe and the network (for clusters).
        """
        bidirectional = require_bool(bidirectional, "bidirectional")
        if over not in ("nvlink", "all"):
            raise LabkitError(f"over must be 'nvlink' or 'all', got {over!r}.")
        gpus = [f"GPU{i}" for i in self.gpus()]
        if len(gpus) < 2:
            raise LabkitError(f"{self.name} has one GPU: there is nothing to bisect.")
        g = self._nvlink_graph(None) if over == "nvlink" else self._capacity_graph({"nvlink", "pcie", "network"}, None)
        half = len(gpus) // 2
        # If whole connected groups of GPUs make up exactly half, the halves need not talk at all.
        sizes = [sum(1 for n in comp if n in gpus) for comp in nx.connected_components(g)] if len(g) else []
        sizes += [1] * sum(1 for n in gpus if n not in g)
        reach = {0}
        for k in sizes:
            reach |= {r + k for r in reach}
        if len(sizes) > 1 and half in reach:
            return 0.0
        # GPUs with the same neighbours and capacities are interchangeable: enumerate how many of each class go left.
        classes: dict[frozenset, list[str]] = {}
        for n in gpus:
            key = frozenset((m, d["capacity"]) for m, d in g[n].items()) if n in g else frozenset()
            classes.setdefault(key, []).append(n)
        groups = list(classes.values())
        splits = [c for c in itertools.product(*(range(len(c) + 1) for c in groups)) if sum(c) == half]
        if len(splits) > 4000:
            raise LabkitError(
                f"an exact bisection of {self.name} needs {len(splits)} max-flow runs; labkit stops at 4000.",
                fix="Ask max_flow(first_half, second_half) for the split you care about.",
            )
        best = math.inf
        for counts in splits:
            left = [n for c, k in zip(groups, counts) for n in c[:k]]
            right = [n for n in gpus if n not in left]
            best = min(best, self._flow(g, left, right))
        return best * 2 if bidirectional else best

    # ------------------------------------------------------------------ collectives
    def ring_allreduce_time(self, nbytes: float, n_gpus: int | None = None, efficiency: float = 1.0) -> tuple[float, list[str]]:
        """Model of a ring all-reduce of ``nbytes`` over the first ``n_gpus`` GPUs: ``(seconds, assumptions)``.

        time = 2(n-1)/n x bytes / B, with B the ring bandwidth per GPU per direction: the smallest cut between any
        two of the GPUs over NVLink (other GPUs do not forward), or over PCIe and the network when NVLink does not
        join them all. ``efficiency`` scales the link rates (e.g. 0.8 for NCCL's 20 of 25 GB/s).
        """
        nbytes = require_number(nbytes, "nbytes", min=0, fix="nbytes is the size of the buffer to all-reduce, in bytes.")
        efficiency = require_number(
            efficiency,
            "efficiency",
            min=0,
            min_open=True,
            max=1,
            fix="efficiency scales the link rates, e.g. 0.8 for 80% of the datasheet rate.",
        )
        all_gpus = self.gpus()
        n = len(all_gpus) if n_gpus is None else require_int(n_gpus, "n_gpus", fix=f"{self.name} has {len(all_gpus)} GPUs.")
        if not 1 <= n <= len(all_gpus):
            raise LabkitError(f"n_gpus must be 1 to {len(all_gpus)} for {self.name}, got {n_gpus!r}.")
        chosen = [f"GPU{i}" for i in all_gpus[:n]]
        size = f"{nbytes / GB:g} GB"
        if n == 1:
            return 0.0, ["one GPU: there is nothing to all-reduce"]

        def joins(graph: nx.Graph) -> bool:
            return chosen[0] in graph and all(c in graph and nx.has_path(graph, chosen[0], c) for c in chosen[1:])

        nv = self._nvlink_graph(set(chosen))
        if joins(nv):
            graph, over = nv, "NVLink"
        else:
            graph, over = self._capacity_graph({"nvlink", "pcie", "network"}, set(chosen)), "NVLink, PCIe and the network"
            if not joins(graph):
                raise LabkitError(f"the first {n} GPUs of {self.name} are not connected by links labkit knows.")
        ring = round(min(self._flow(graph, [chosen[0]], [t]) for t in _unlike(graph, chosen[1:])), 6) * efficiency
        seconds = 2 * (n - 1) / n * nbytes / (ring * GB)
        per_link = sorted({d["per_link"] for _, _, d in self.graph.edges(data=True) if d["kind"] == "nvlink" and d["per_link"]})
        assumptions = [
            f"ring all-reduce over {n} GPUs: each GPU sends (and receives) 2(n-1)/n x {size} = {2 * (n - 1) / n * nbytes / GB:.4g} GB",
            f"ring bandwidth {ring:g} GB/s per GPU per direction over {over}: the smallest cut between any two of the GPUs "
            "(an upper bound that NCCL's set of rings approaches)",
            "bandwidth only: no per-step latency, no overlap with computation",
            (
                f"links at {efficiency:.0%} of their datasheet rate"
                if efficiency < 1
                else f"links at their datasheet rate ({', '.join(f'{p:g}' for p in per_link)} GB/s per NVLink per direction); "
                "real transfers reach about 80% of it"
            ),
        ]
        return seconds, assumptions

    # ------------------------------------------------------------------ drawing
    def draw(self, highlight: Iterable[str] | None = None, title: str | None = None) -> Any:
        """A plotly figure of the graph: GPUs green, NVSwitches blue, CPUs grey; line width grows with the link count.
        ``highlight`` is a path of node names (e.g. ``route(a, b)["path"]``) drawn in red."""
        import plotly.graph_objects as go

        hl = (
            []
            if highlight is None
            else require_sequence(highlight, "highlight", what="a path of node names, e.g. route(0, 5)['path']", item=require_str)
        )
        unknown = [n for n in hl if n not in self.graph]
        if unknown:
            raise LabkitError(
                f"highlight names {unknown[0]!r}, which is not a node of {self.name}.",
                fix="Use a path from route(a, b)['path'], or node names such as 'GPU0'.",
            )
        if title is not None:
            title = require_str(title, "title", empty=True)
        pos = _positions(self)
        fig = go.Figure()
        hl_edges = {frozenset(p) for p in zip(hl, hl[1:])}
        for kind, colour in _EDGE_COLOURS.items():
            edges = [(u, v, d) for u, v, d in self.graph.edges(data=True) if d["kind"] == kind]
            by_width: dict[float, list] = {}
            for u, v, d in edges:
                by_width.setdefault(1 + 1.2 * min(d["links"], 8) if kind == "nvlink" else 1.0, []).append((u, v, d))
            dense = len(edges) > 200  # an NVL72 has 1,296 GPU-switch links: thin, light lines keep the GPUs visible
            for width, group in sorted(by_width.items()):
                xs, ys = [], []
                for u, v, _ in group:
                    xs += [pos[u][0], pos[v][0], None]
                    ys += [pos[u][1], pos[v][1], None]
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=ys,
                        mode="lines",
                        hoverinfo="skip",
                        showlegend=False,
                        opacity=0.25 if dense else 1.0,
                        line={"color": colour, "width": 0.6 if dense else width, "dash": "solid" if kind == "nvlink" else "dot"},
                    )
                )
            if edges:
                mx = [(pos[u][0] + pos[v][0]) / 2 for u, v, _ in edges]
                my = [(pos[u][1] + pos[v][1]) / 2 for u, v, _ in edges]
                text = [_edge_text(u, v, d) for u, v, d in edges]
                fig.add_trace(
                    go.Scatter(
                        x=mx,
                        y=my,
                        mode="markers",
                        marker={"size": 3 if len(edges) > 200 else 6, "color": colour, "opacity": 0.25},
                        hovertext=text,
                        hoverinfo="text",
                        name=f"{kind} links",
                        showlegend=True,
                    )
                )
        if hl_edges:
            xs, ys = [], []
            for pair in hl_edges:
                u, v = tuple(pair)
                xs += [pos[u][0], pos[v][0], None]
                ys += [pos[u][1], pos[v][1], None]
            fig.add_trace(
                go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#d62728", "width": 5}, name="route", hoverinfo="skip")
            )
        for kind, colour in _COLOURS.items():
            nodes = [n for n, d in self.graph.nodes(data=True) if d["kind"] == kind]
            if not nodes:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[pos[n][0] for n in nodes],
                    y=[pos[n][1] for n in nodes],
                    mode="markers+text",
                    marker={
                        "size": 26 if kind == "gpu" else 18,
                        "color": colour,
                        "symbol": "square" if kind == "gpu" else "circle",
                        "line": {"width": 2, "color": ["#d62728" if n in hl else "white" for n in nodes]},
                    },
                    text=[self.graph.nodes[n].get("label", n) for n in nodes],
                    textposition="middle center" if kind == "gpu" else "bottom center",
                    textfont={"size": 9},
                    hovertext=[_node_text(self, n) for n in nodes],
                    hoverinfo="text",
                    name=kind,
                )
            )
        label = {"model": "model from labkit.hw"}.get(self.origin, f"from {self.origin}")
        fig.update_layout(
            title=title or f"{self.name} ({label})",
            showlegend=True,
            template="plotly_white",
            height=480,
            xaxis={"visible": False},
            yaxis={"visible": False, "scaleanchor": "x"},
            margin={"l": 10, "r": 10, "t": 50, "b": 10},
        )
        return fig

    def summary(self) -> str:
        """A few lines on the GPUs, switches and NVLink bandwidth of this topology."""
        gpus = self.gpus()
        lines = [
            f"{self.name} ({self.origin}): {len(gpus)} GPUs, {len(self.nodes('nvswitch'))} NVSwitch chips"
            + (f", {len(self.nodes('cpu'))} CPUs" if self.nodes("cpu") else "")
        ]
        if len(gpus) > 1:
            try:
                per_gpu = [
                    self._flow(self._nvlink_graph(None), [f"GPU{g}"], [f"GPU{h}" for h in gpus if h != g]) for g in gpus[:1]
                ]
                lines.append(f"NVLink per GPU: {per_gpu[0]:g} GB/s per direction, {2 * per_gpu[0]:g} GB/s bidirectional")
            except LabkitError as exc:
                lines.append(f"NVLink bandwidth unknown: {exc}")
        lines += self.notes
        return "\n".join(lines)

    def describe(self) -> str:
        """:meth:`summary` plus the GPU-to-GPU matrix in nvidia-smi's words (``NV2``, ``NV6``, ``SYS``, ...)."""
        gpus = self.gpus()
        lines = [self.summary()]
        if 1 < len(gpus) <= 16:
            lines.append("")
            lines.append("      " + "".join(f"{'GPU' + str(g):>7}" for g in gpus))
            for a in gpus:
                lines.append(f"{'GPU' + str(a):6}" + "".join(f"{self.relation(a, b):>7}" for b in gpus))
            lines.append("NV# = # NVLinks (directly or through NVSwitches); SYS/PHB/NODE/PXB/PIX = PCIe paths, as nvidia-smi.")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Topology {self.name!r}: {len(self.gpus())} GPUs, {len(self.nodes('nvswitch'))} NVSwitches ({self.origin})>"


def _unlike(graph: nx.Graph, gpus: list[str]) -> list[str]:
    """One GPU of each set of interchangeable ``gpus``: the same neighbours over the same capacities (swapping two
    such GPUs maps the graph onto itself, so a flow to either is the same). An NVL72's 71 targets become one."""
    seen: dict[frozenset, str] = {}
    for n in gpus:
        key = frozenset((m, d["capacity"]) for m, d in graph[n].items()) if n in graph else frozenset({n})
        seen.setdefault(key, n)
    return list(seen.values())


def _edge_text(u: str, v: str, d: dict) -> str:
    if d["per_link"] is None:
        return f"{u} - {v}: {d['kind']} ({d.get('label', 'bandwidth unknown')})"
    total = d["links"] * d["per_link"]
    many = f"{d['links']} x {d['per_link']:g} GB/s = " if d["links"] > 1 else ""
    return f"{u} - {v}: {d.get('label', d['kind'])}, {many}{total:g} GB/s per direction"


def _node_text(t: Topology, n: str) -> str:
    d = t.graph.nodes[n]
    return f"{n}: {d.get('detail', d['kind'])}"


def _positions(t: Topology) -> dict[str, tuple[float, float]]:
    pos = {n: d["pos"] for n, d in t.graph.nodes(data=True) if d.get("pos") is not None}
    missing = [n for n in t.graph if n not in pos]
    if missing:
        auto = nx.spring_layout(t.graph, seed=1, pos=pos or None, fixed=list(pos) or None)
        pos.update({n: tuple(auto[n]) for n in missing})
    return pos


# ---------------------------------------------------------------------------------------------- builders


def _add_gpu(g: nx.Graph, i: int, pos: tuple[float, float], detail: str) -> str:
    g.add_node(f"GPU{i}", kind="gpu", index=i, pos=pos, label=f"GPU{i}", detail=detail)
    return f"GPU{i}"


def _link(g: nx.Graph, a: str, b: str, kind: str, links: int, per_link: float | None, label: str) -> None:
    if g.has_edge(a, b):
        g[a][b]["links"] += links
    else:
        g.add_edge(a, b, kind=kind, links=links, per_link=per_link, label=label)


def _pcie_tree(
    g: nx.Graph,
    gpus: list[str],
    pcie: str,
    nics: int,
    per_switch: int,
    cpu_split: int,
    nic_link: str,
    x0: float = 0.0,
    y: float = -2.0,
    width: float = 7.0,
    cpus: tuple[str, ...] = ("CPU0", "CPU1"),
    tag: str = "",
) -> None:
    """PCIe switches with ``per_switch`` GPUs and ``nics`` NICs each; the first ``cpu_split`` switches hang off the first CPU."""
    bw = hw.link(pcie).per_link.value
    ib = hw.link(nic_link).per_link.value
    n_sw = math.ceil(len(gpus) / per_switch)
    for c, cpu in enumerate(cpus):
        if cpu not in g:
            g.add_node(
                cpu,
                kind="cpu",
                pos=(x0 + width * (0.25 + 0.5 * c), y - 1.8 if len(cpus) > 1 else y - 1.8),
                label=cpu,
                detail="host CPU",
            )
    for k in range(n_sw):
        sw = f"PCIe{k}{tag}"
        x = x0 + (k + 0.5) * width / n_sw
        g.add_node(sw, kind="pcie", pos=(x, y), label=sw, detail=f"PCIe switch ({pcie} x16 uplinks)")
        cpu = cpus[0] if k < cpu_split else cpus[-1]
        _link(g, sw, cpu, "pcie", 1, bw, f"{pcie} x16")
        for gp in gpus[k * per_switch : (k + 1) * per_switch]:
            _link(g, gp, sw, "pcie", 1, bw, f"{pcie} x16")
        for j in range(nics):
            nic = f"NIC{k * nics + j}{tag}"
            g.add_node(
                nic,
                kind="nic",
                pos=(x + (j - (nics - 1) / 2) * 0.5, y - 0.8),
                label=nic,
                detail=f"{nic_link} port ({ib:g} GB/s per direction)",
            )
            _link(g, nic, sw, "pcie", 1, bw, f"{pcie} x16")
    if len(cpus) == 2:
        _link(g, cpus[0], cpus[1], "cpu", 1, None, "CPU-CPU interconnect (QPI/UPI/Infinity Fabric)")


def _dgx1(system: str) -> Topology:
    s = hw.system(system)
    gen = hw.link(s.nvlink)
    per = gen.per_link.value
    g = nx.Graph()
    # two squares side by side: 0-3 on the left, 4-7 on the right (the cube-mesh drawn flat)
    square = [(0, 1), (1, 1), (0, 0), (1, 0)]
    for i in range(8):
        x, y = square[i % 4]
        _add_gpu(g, i, (x * 2.0 + (4.0 if i >= 4 else 0.0), y * 2.0), s.gpu)
    if "P100" in s.name:
        pairs = [(p, 1) for p in DGX1_P100_SINGLE]
    else:
        pairs = [(p, 2) for p in DGX1_V100_DOUBLE] + [(p, 1) for p in DGX1_V100_SINGLE]
    for (a, b), k in pairs:
        _link(g, f"GPU{a}", f"GPU{b}", "nvlink", k, per, s.nvlink)
    _pcie_tree(g, [f"GPU{i}" for i in range(8)], s.pcie or "PCIe 3", nics=1, per_switch=2, cpu_split=2, nic_link="InfiniBand EDR")
    notes = [
        f"{s.name}: hybrid cube-mesh, {len(pairs)} GPU pairs joined directly by {sum(k for _, k in pairs)} NVLinks; no NVSwitch."
    ]
    if "P100" in s.name:
        notes.append("The DGX-1 (P100) link map is unconfirmed: labkit assumes GPUs 0-3 and 4-7 all-to-all plus i <-> i+4.")
    notes.append("PCIe tree simplified: 4 PCIe switches with 2 GPUs and 1 InfiniBand EDR port each.")
    return Topology(s.name, g, "model", s.gpu, notes=notes)


def _dgx2() -> Topology:
    s = hw.system("DGX-2")
    per = hw.link(s.nvlink).per_link.value
    g = nx.Graph()
    for b in range(2):
        y_gpu, y_sw = (3.0, 1.5) if b == 0 else (-3.0, -1.5)
        sws = []
        for k in range(6):
            sw = f"NVSwitch{6 * b + k}"
            g.add_node(sw, kind="nvswitch", pos=(1.0 + k * 1.0, y_sw), label=sw, detail=f"NVSwitch 1 on baseboard {b}")
            sws.append(sw)
        for i in range(8):
            gp = _add_gpu(g, 8 * b + i, (i * 1.0, y_gpu), f"{s.gpu}, baseboard {b}")
            for sw in sws:
                _link(g, gp, sw, "nvlink", 1, per, "NVLink 2")
    for k in range(6):  # NVBridge backplane: switch k on board 0 <-> switch k on board 1, 8 links
        _link(g, f"NVSwitch{k}", f"NVSwitch{6 + k}", "nvlink", 8, per, "NVLink 2 over the backplane")
    # PCIe: each baseboard's GPUs reach one CPU through 4 PCIe switches (simplified), with one EDR port per switch
    g2 = [f"GPU{i}" for i in range(16)]
    for board, y, cpu, tag in ((g2[:8], 3.0, "CPU0", ""), (g2[8:], -1.0, "CPU1", "b")):
        _pcie_tree(
            g,
            board,
            "PCIe 3",
            nics=1,
            per_switch=2,
            cpu_split=4,
            nic_link="InfiniBand EDR",
            x0=8.0,
            y=y,
            width=4.0,
            cpus=(cpu,),
            tag=tag,
        )
    _link(g, "CPU0", "CPU1", "cpu", 1, None, "CPU-CPU interconnect (UPI)")
    notes = [
        "DGX-2: 2 baseboards x 8 GPUs; 6 NVSwitches per baseboard; each GPU has one NVLink to each switch on its board;",
        "each switch has 8 links to GPUs and 8 to its twin on the other board over the NVBridge backplane.",
        "PCIe tree simplified: per baseboard 4 PCIe switches with 2 GPUs and 1 InfiniBand EDR port each.",
    ]
    return Topology(s.name, g, "model", s.gpu, notes=notes)


def _switched(system: str, links_per_switch: list[int], pcie: str, nic_link: str, nics_per_switch: int) -> Topology:
    s = hw.system(system)
    per = hw.link(s.nvlink).per_link.value
    n = int(s.gpu_count.value)
    g = nx.Graph()
    # up to 16 GPUs in one row; more (72 in an NVL72) in columns of 4, one per compute tray, so the drawing stays readable
    per_col = 1 if n <= 16 else 4
    cols = -(-n // per_col)
    width = max(cols - 1, 1) * 1.0
    sws = []
    for k, _ in enumerate(links_per_switch):
        sw = f"NVSwitch{k}"
        x = (k + 0.5) * width / len(links_per_switch)
        g.add_node(
            sw, kind="nvswitch", pos=(x, 0.0), label=sw if len(links_per_switch) <= 8 else f"SW{k}", detail=f"{s.nvswitch}"
        )
        sws.append(sw)
    for i in range(n):
        gp = _add_gpu(g, i, (float(i // per_col), 2.0 + (i % per_col)), s.gpu)
        if per_col > 1:
            g.nodes[gp]["label"] = str(i)  # "GPU71" does not fit a square in a drawing of 72
        for sw, k in zip(sws, links_per_switch):
            _link(g, gp, sw, "nvlink", k, per, s.nvlink)
    split = (
        f"{links_per_switch[0]} to each chip, {sum(links_per_switch)} NVLinks in all"
        if len(set(links_per_switch)) == 1
        else f"{' + '.join(map(str, links_per_switch))} = {sum(links_per_switch)} NVLinks to them"
    )
    notes = [f"{s.name}: {len(sws)} NVSwitch chips; each GPU has {split}."]
    if not pcie:
        notes.append(f"{s.cpu or 'The CPUs'} and their NVLink-C2C links to the GPUs are not drawn; no network is modelled.")
    if pcie:
        _pcie_tree(
            g,
            [f"GPU{i}" for i in range(n)],
            pcie,
            nics=nics_per_switch,
            per_switch=2,
            cpu_split=n // 4,
            nic_link=nic_link,
            y=-2.0,
            width=width,
        )
        notes.append(f"PCIe tree simplified: {n // 2} PCIe switches with 2 GPUs and {nics_per_switch} {nic_link} port(s) each.")
    return Topology(s.name, g, "model", s.gpu, notes=notes)


_BUILDERS = {
    "DGX-1 (P100)": lambda: _dgx1("DGX-1 (P100)"),
    "DGX-1 (V100)": lambda: _dgx1("DGX-1 (V100)"),
    "DGX-2": _dgx2,
    "DGX A100": lambda: _switched("DGX A100", [2] * 6, "PCIe 4", "InfiniBand HDR", 1),
    "DGX H100": lambda: _switched("DGX H100", [5, 4, 4, 5], "PCIe 5", "InfiniBand NDR", 1),
    "DGX H200": lambda: _switched("DGX H200", [5, 4, 4, 5], "PCIe 5", "InfiniBand NDR", 1),
    # HGX B200/B300: two NVLink 5 switch chips (NVSwitch 4, 72 ports each); each GPU has 9 of its 18 links on each
    # chip, so 8 x 18 = 144 links fill both chips (hw.yml: DGX B200/B300 fabric and nvswitch_count; NVSwitch 4 ports).
    "DGX B200": lambda: _switched("DGX B200", [9, 9], "PCIe 5", "InfiniBand NDR", 1),
    "DGX B300": lambda: _switched("DGX B300", [9, 9], "PCIe 6", "InfiniBand XDR", 1),
    # NVL72: 18 NVLink switch chips (9 switch trays x 2); each GPU has one of its 18 links on every chip.
    "GB200 NVL72": lambda: _switched("GB200 NVL72", [1] * 18, "", "", 0),
    "GB300 NVL72": lambda: _switched("GB300 NVL72", [1] * 18, "", "", 0),
}


def systems() -> list[str]:
    """Names :func:`load` accepts (a cluster such as ``"2x DGX-1 (V100)"`` works too)."""
    return list(_BUILDERS)


def load(name: str) -> Topology:
    """The modelled topology of a system: ``load("DGX-2")``, ``load("dgx h100")``, ``load("2x DGX-1 (V100)")``."""
    if not isinstance(name, str):
        raise LabkitError(
            f"a system name must be a string, not {type(name).__name__}.", fix=f"Use one of: {', '.join(systems())}."
        )
    m = re.fullmatch(r"\s*(\d+)\s*[x×*]\s*(.+)", name)
    if m:
        return cluster(m.group(2), int(m.group(1)))
    try:
        rec = hw.system(name)
    except LabkitError as exc:
        raise LabkitError(str(exc).split("\n")[0], fix=f"topology.systems() lists them: {', '.join(systems())}.") from None
    if rec.name not in _BUILDERS:
        raise LabkitError(
            f"labkit has data for {rec.name} but no wiring model of it.", fix=f"Models exist for: {', '.join(systems())}."
        )
    return _built(rec.name)


_MODELS: dict[str, Topology] = {}


def _built(name: str) -> Topology:
    """A fresh copy of the model called ``name`` (each is built once: an NVL72 has 1,296 links)."""
    if name not in _MODELS:
        _MODELS[name] = _BUILDERS[name]()
    t = _MODELS[name]
    return Topology(t.name, t.graph.copy(), t.origin, t.gpu_model, dict(t.relations), list(t.notes), dict(t.p2p))


def cluster(name: str, count: int, network: str | None = None) -> Topology:
    """``count`` copies of a system joined by an InfiniBand switch through their NICs (GPUs renumbered 0..)."""
    count = require_int(count, "count", min=1, max=64, fix="A cluster of 1 to 64 systems, e.g. cluster('DGX H100', 2).")
    if network is not None:
        network = require_str(network, "network", fix="A network of labkit.hw.links(), e.g. 'InfiniBand NDR'.")
    one = load(name)
    rec = hw.system(one.name)
    net = network or {
        "DGX-1 (P100)": "InfiniBand EDR",
        "DGX-1 (V100)": "InfiniBand EDR",
        "DGX-2": "InfiniBand EDR",
        "DGX A100": "InfiniBand HDR",
    }.get(rec.name, "InfiniBand NDR")
    per = hw.link(net).per_link.value
    g = nx.Graph()
    n = len(one.gpus())
    xs = [p[0] for _, p in one.graph.nodes(data="pos")]
    span = (max(xs) - min(xs)) + 3.0
    for k in range(count):

        def rename(node: str) -> str:
            if one.graph.nodes[node]["kind"] == "gpu":
                return f"GPU{one.graph.nodes[node]['index'] + k * n}"
            return f"{node}@{k}"

        for node, d in one.graph.nodes(data=True):
            d2 = dict(d)
            d2["pos"] = (d["pos"][0] + k * span, d["pos"][1])
            if d["kind"] == "gpu":
                d2["index"] = d["index"] + k * n
                d2["label"] = f"GPU{d2['index']}"
                d2["detail"] = f"{d['detail']}, system {k}"
            else:
                d2["label"] = f"{d.get('label', node)}@{k}"
            g.add_node(rename(node), **d2)
        for u, v, d in one.graph.edges(data=True):
            g.add_edge(rename(u), rename(v), **d)
    g.add_node("IB switch", kind="network", pos=((count - 1) * span / 2 + 3.0, -6.0), label="IB switch", detail=f"{net} switch")
    for node, d in list(g.nodes(data=True)):
        if d["kind"] == "nic":
            _link(g, node, "IB switch", "network", 1, per, net)
    notes = [f"{count} x {one.name} joined by {net} ({per:g} GB/s per port per direction) through their NICs."] + one.notes
    return Topology(f"{count}x {one.name}", g, "model", one.gpu_model, notes=notes)


# ---------------------------------------------------------------------------------------------- nvidia-smi


def _split_row(line: str) -> list[str]:
    if "\t" in line:
        return [c.strip() for c in line.rstrip("\n").split("\t")]
    return [c.strip() for c in re.split(r"\s{2,}", line.rstrip())]


def from_nvidia_smi(text: str, gpu: str | None = None, name: str = "this machine") -> Topology:
    """Build a :class:`Topology` from the output of ``nvidia-smi topo -m``.

    ``gpu`` names the GPU model (``"H100"``, or a driver name such as ``"NVIDIA A100-SXM4-80GB"``) so that NVLink
    and PCIe links get bandwidths from :mod:`labkit.hw`; without it the wiring is known but bandwidth queries raise.
    When every GPU reaches every other with more NVLinks than a GPU has (``NV12`` all round on a DGX A100), the GPUs
    sit behind NVSwitches: the graph gets one switch node, each GPU joined to it by that many links.
    """
    if not isinstance(text, str) or not text.strip():
        raise LabkitError(
            "from_nvidia_smi needs the text that `nvidia-smi topo -m` prints; got nothing.",
            fix="Run `nvidia-smi topo -m` and pass its output as a string.",
        )
    if gpu is not None:
        gpu = require_str(gpu, "gpu", fix="The GPU model, e.g. 'H100' or 'NVIDIA A100-SXM4-80GB', or None.")
    name = require_str(name, "name", fix="A name for this machine, e.g. 'this machine'.")
    lines = text.splitlines()
    header_i = next(
        (i for i, ln in enumerate(lines) if re.search(r"\bGPU0\b", ln) and "X" not in [c.strip() for c in _split_row(ln)]), None
    )
    if header_i is None:
        raise LabkitError(
            "this does not look like `nvidia-smi topo -m` output: no header row with GPU0, GPU1, ... was found.",
            fix="Pass the full output of `nvidia-smi topo -m` (the matrix and its legend).",
        )
    header = [c for c in _split_row(lines[header_i]) if c]
    devices = [c for c in header if not re.search(r"affinity|numa", c, re.I)]
    extra = [c for c in header if c not in devices]
    rows: dict[str, list[str]] = {}
    for ln in lines[header_i + 1 :]:
        if not ln.strip() or ln.strip().startswith("Legend"):
            if rows:
                break
            continue
        cells = _split_row(ln)
        if cells and cells[0] == "":
            cells = cells[1:]
        cells = [c for c in cells]
        if cells[0] in devices:
            rows[cells[0]] = cells[1:]
    nic_names = dict(re.findall(r"^\s*(NIC\d+)\s*:\s*(\S+)", text, re.M))
    gpu_names = [d for d in devices if re.fullmatch(r"GPU\d+", d)]
    if not gpu_names or any(gn not in rows for gn in gpu_names):
        raise LabkitError(
            "the `nvidia-smi topo -m` matrix is incomplete: a GPU row is missing.",
            fix="Pass the whole output, header row and one row per GPU.",
        )
    model = None
    if gpu is not None:
        model = hw.match_device(gpu.split(" MIG ")[0])  # a MIG slice sits on its parent GPU's links
        if model is None:
            model = hw.gpu(gpu)
    per_nv = hw.link(model.nvlink).per_link.value if model else None
    pcie_name = (
        {"6": "PCIe 3", "7": "PCIe 3", "8": "PCIe 4", "9": "PCIe 5", "10": "PCIe 5"}.get(str(model.compute_capability[0]))
        if model
        else None
    )
    per_pcie = hw.link(pcie_name).per_link.value if pcie_name else None

    idx = {d: i for i, d in enumerate(devices)}
    rel: dict[tuple[str, str], str] = {}
    for a, cells in rows.items():
        for b in devices:
            if idx[b] >= len(cells):
                raise LabkitError(f"row {a} of the `nvidia-smi topo -m` matrix is too short.", fix="Pass the output unchanged.")
            v = cells[idx[b]].strip()
            if v != "X" and v not in _PCIE_ORDER and not re.fullmatch(r"NV\d+", v):
                raise LabkitError(
                    f"unknown entry {v!r} in row {a}, column {b} of the `nvidia-smi topo -m` matrix.",
                    fix=f"Entries are X, NV#, {', '.join(_PCIE_ORDER)}.",
                )
            rel[(a, b)] = v
    g = nx.Graph()
    n = len(gpu_names)
    numa: dict[str, str] = {}
    for k, gn in enumerate(gpu_names):
        i = int(gn[3:])
        angle = 2 * math.pi * k / max(n, 1)
        pos = (3 * math.sin(angle), 3 * math.cos(angle)) if n > 1 else (0.0, 0.0)
        _add_gpu(g, i, pos, model.name if model else "GPU (model unknown)")
        cells = rows[gn]
        after = [c for c in cells[len(devices) :] if c]
        info = dict(zip(extra, after))
        node = info.get("NUMA Affinity", "").strip()
        cpus_aff = info.get("CPU Affinity", "").strip()
        key = node if node and node.upper() != "N/A" else (cpus_aff or "0")
        numa[gn] = key
        g.nodes[gn]["detail"] += f"; CPU affinity {cpus_aff or '?'}; NUMA node {node or '?'}"
    cpu_keys = list(dict.fromkeys(numa.values()))
    for c, key in enumerate(cpu_keys):
        cpu = f"CPU{c}"
        g.add_node(
            cpu,
            kind="cpu",
            pos=(-3.0 + 6.0 * c / max(len(cpu_keys) - 1, 1), -5.0),
            label=f"CPU (NUMA {key})",
            detail=f"NUMA node / CPU affinity {key}",
        )
    for gn in gpu_names:
        _link(g, gn, f"CPU{cpu_keys.index(numa[gn])}", "pcie", 1, per_pcie, pcie_name or "PCIe (generation unknown)")
    if len(cpu_keys) == 2:
        _link(g, "CPU0", "CPU1", "cpu", 1, None, "CPU-CPU interconnect")
    # NVLink: direct, or behind switches when the link counts exceed what one GPU has
    nv = {(a, b): int(rel[(a, b)][2:]) for a in gpu_names for b in gpu_names if a != b and rel[(a, b)].startswith("NV")}
    per_gpu_total = {a: sum(k for (x, _), k in nv.items() if x == a) for a in gpu_names}
    switched = n > 2 and max(per_gpu_total.values(), default=0) > 18
    notes = [f"From `nvidia-smi topo -m`: {n} GPU(s)."]
    if switched:
        g.add_node("NVSwitch", kind="nvswitch", pos=(0.0, 0.0), label="NVSwitch", detail="NVSwitch fabric (inferred)")
        for a in gpu_names:
            k = max(v for (x, _), v in nv.items() if x == a)
            _link(g, a, "NVSwitch", "nvlink", k, per_nv, model.nvlink if model else "NVLink")
        notes.append("Every GPU pair shows more NVLinks than one GPU has: the GPUs sit behind NVSwitches (drawn as one node).")
    else:
        for (a, b), k in nv.items():
            if a < b or not g.has_edge(a, b):
                if not g.has_edge(a, b):
                    _link(g, a, b, "nvlink", k, per_nv, model.nvlink if model else "NVLink")
    for d in devices:
        if d in gpu_names or d not in rows:
            continue
        nearest = min(gpu_names, key=lambda gn: _PCIE_ORDER.index(rel[(d, gn)]) if rel[(d, gn)] in _PCIE_ORDER else 99)
        label = nic_names.get(d, d)
        g.add_node(label, kind="nic", pos=None, label=label, detail=f"NIC {label}, nearest {nearest} ({rel[(d, nearest)]})")
        _link(g, label, f"CPU{cpu_keys.index(numa[nearest])}", "pcie", 1, per_pcie, pcie_name or "PCIe")
    relations = {(int(a[3:]), int(b[3:])): rel[(a, b)] for a in gpu_names for b in gpu_names}
    if model is None:
        notes.append("GPU model not given: link bandwidths unknown (pass gpu=...).")
    return Topology(name, g, "nvidia-smi topo -m", model.name if model else None, relations=relations, notes=notes)


def in_cuda_order(topo: Topology, smi_bus_ids: dict[int, str], cuda_bus_ids: list[str]) -> Topology:
    """``topo`` (from :func:`from_nvidia_smi`, whose GPUk is nvidia-smi's, i.e. NVML's, k-th GPU in PCI order) with
    its GPUs renumbered as CUDA numbers them, so ``GPU0`` here is the ``GPU0`` of a measurement.

    ``smi_bus_ids``: nvidia-smi's index -> PCI bus id (``nvidia-smi --query-gpu=index,pci.bus_id``);
    ``cuda_bus_ids``: the bus id of each CUDA device, in CUDA's order. CUDA's order differs from NVML's under
    ``CUDA_VISIBLE_DEVICES`` or ``CUDA_DEVICE_ORDER=FASTEST_FIRST``. When the two sets of GPUs are not the same (a
    GPU hidden from CUDA, a bus id missing), the numbering stays nvidia-smi's and a note says so."""
    if not isinstance(topo, Topology):
        raise LabkitError(
            f"in_cuda_order() takes a Topology first, got {describe(topo)}.",
            fix="e.g. in_cuda_order(from_nvidia_smi(text), smi_bus_ids, cuda_bus_ids).",
        )
    if not isinstance(smi_bus_ids, dict) or not all(
        isinstance(k, (int, str)) and not isinstance(k, bool) and str(k).strip().isdigit() and isinstance(v, str)
        for k, v in smi_bus_ids.items()
    ):
        raise LabkitError(
            f"smi_bus_ids must be a dict of nvidia-smi index -> PCI bus id string, got {describe(smi_bus_ids)}.",
            fix="e.g. {0: '00000000:18:00.0', 1: '00000000:2A:00.0'}.",
        )
    cuda_bus_ids = require_sequence(
        cuda_bus_ids, "cuda_bus_ids", what="a list of PCI bus id strings, in CUDA's order", item=require_str
    )
    cuda = [normalise_bus_id(b) for b in cuda_bus_ids]
    smi = {int(k): normalise_bus_id(v) for k, v in smi_bus_ids.items()}
    gpus = topo.gpus()
    mapping = {k: cuda.index(smi[k]) for k in gpus if k in smi and smi[k] in cuda}
    if len(mapping) != len(gpus) or len(set(mapping.values())) != len(gpus) or len(cuda) != len(gpus):
        note = (
            "GPUs are numbered as nvidia-smi (NVML, PCI order) numbers them, which need not be CUDA's order: "
            "CUDA sees other GPUs than nvidia-smi here (CUDA_VISIBLE_DEVICES?)."
        )
        return Topology(
            topo.name, topo.graph, topo.origin, topo.gpu_model, dict(topo.relations), topo.notes + [note], dict(topo.p2p)
        )
    g = nx.relabel_nodes(topo.graph, {f"GPU{k}": f"GPU{v}" for k, v in mapping.items()}, copy=True)
    for k, v in mapping.items():
        g.nodes[f"GPU{v}"].update(index=v, label=f"GPU{v}")
    relations = {(mapping[a], mapping[b]): r for (a, b), r in topo.relations.items() if a in mapping and b in mapping}
    p2p = {(mapping[a], mapping[b]): ok for (a, b), ok in topo.p2p.items() if a in mapping and b in mapping}
    moved = {k: v for k, v in mapping.items() if k != v}
    note = (
        "GPUs renumbered from nvidia-smi's order to CUDA's by PCI bus id: "
        + ", ".join(f"nvidia-smi GPU{k} is CUDA GPU{v}" for k, v in sorted(moved.items()))
        + "."
        if moved
        else "nvidia-smi's order and CUDA's are the same here (matched by PCI bus id)."
    )
    return Topology(topo.name, g, topo.origin, topo.gpu_model, relations, topo.notes + [note], p2p)


# ---------------------------------------------------------------------------------------------- NVML

_ANCESTOR = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def from_nvml(name: str = "this machine") -> Topology:
    """Build a :class:`Topology` of this machine's GPUs from NVML (NVLink state of every link, P2P status, PCIe
    ancestry). GPUs are numbered as CUDA numbers them (each matched to NVML by UUID or PCI bus id, never by index).
    Needs ``gpu`` mode; otherwise raises :class:`~labkit.errors.NoGPUError`. Without NVML (no nvidia-ml-py, no
    driver library) it returns the GPUs CUDA sees, with no links and a note saying why NVLink, P2P and PCIe
    ancestry are missing (``origin`` says "CUDA only")."""
    from labkit.mode import env

    e = env()
    if not e.is_gpu:
        raise NoGPUError(
            f"from_nvml() asks the NVIDIA driver about the GPUs in this machine, and labkit is in sim mode ({e.reason}).",
            fix="Use topology.load('DGX H100') for a model, or topology.from_nvidia_smi(text) with saved `nvidia-smi topo -m` output.",
        )
    from labkit.hw import nvml as nv

    try:
        return _from_nvml_module(nv.load(), name, e.gpus)
    except nv.NvmlUnavailable as exc:
        return _cuda_only(name, e.gpus, nv.skipped("NVLink, P2P and PCIe ancestry", exc))


def _cuda_only(name: str, gpus: Any, why: str) -> Topology:
    """The GPUs CUDA sees, without links: what is known when NVML cannot be asked."""
    g = nx.Graph()
    count = len(gpus)
    for i, gpu in enumerate(gpus):
        a = 2 * math.pi * i / max(count, 1)
        _add_gpu(g, i, (3 * math.sin(a), 3 * math.cos(a)) if count > 1 else (0.0, 0.0), gpu.name)
    model = hw.match_device(gpus[0].name.split(" MIG ")[0]) if gpus else None
    notes = [f"From CUDA: {count} GPU(s){', ' + gpus[0].name if gpus else ''}.", why + "."]
    return Topology(name, g, "CUDA only (NVML unavailable)", model.name if model else None, notes=notes)


def _from_nvml_module(nvml: Any, name: str = "this machine", gpus: Any = None) -> Topology:
    """The work of :func:`from_nvml`, with the NVML module and the CUDA devices passed in (tests give fakes)."""
    from labkit.hw import nvml as nv
    from labkit.mode import env

    gpus = tuple(env().gpus if gpus is None else gpus)
    with nv.session(nvml):
        count = len(gpus)
        handles = nv.handles_for(nvml, gpus)
        names = [_text(nvml.nvmlDeviceGetName(h)) for h in handles]
        bus = [nv.bus_id(nvml, h) for h in handles]
        model = hw.match_device(names[0]) if names else None
        per_nv = hw.link(model.nvlink).per_link.value if model else None
        g = nx.Graph()
        for i in range(count):
            a = 2 * math.pi * i / max(count, 1)
            _add_gpu(g, i, (3 * math.sin(a), 3 * math.cos(a)) if count > 1 else (0.0, 0.0), names[i])
        max_links = nv.constant(nvml, "NVML_NVLINK_MAX_LINKS", 18)
        enabled = nv.constant(nvml, "NVML_FEATURE_ENABLED", 1)
        stop_codes = {nv.constant(nvml, "NVML_ERROR_NOT_SUPPORTED", 3), nv.constant(nvml, "NVML_ERROR_INVALID_ARGUMENT", 2)}
        switch_links: dict[int, int] = {}
        link_errors: list[str] = []
        for i, h in enumerate(handles):
            for link in range(max_links):
                try:
                    if nvml.nvmlDeviceGetNvLinkState(h, link) != enabled:
                        continue
                    remote = normalise_bus_id(_text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
                except nvml.NVMLError as exc:  # NOT_SUPPORTED / INVALID_ARGUMENT: no such link (or no NVLink)
                    if getattr(exc, "value", None) not in stop_codes:
                        link_errors.append(f"GPU{i} link {link}: {exc}")
                    break
                if remote in bus:
                    j = bus.index(remote)
                    if i < j:
                        _link(g, f"GPU{i}", f"GPU{j}", "nvlink", 1, per_nv, model.nvlink if model else "NVLink")
                else:
                    switch_links[i] = switch_links.get(i, 0) + 1
        if switch_links:
            g.add_node("NVSwitch", kind="nvswitch", pos=(0.0, 0.0), label="NVSwitch", detail="NVSwitch fabric (NVML)")
            for i, k in switch_links.items():
                _link(g, f"GPU{i}", "NVSwitch", "nvlink", k, per_nv, model.nvlink if model else "NVLink")
        relations: dict[tuple[int, int], str] = {}
        p2p: dict[tuple[int, int], bool] = {}
        read = nv.cap_index(nvml, "READ")
        ok = nv.constant(nvml, "NVML_P2P_STATUS_OK", 0)
        for i, j in itertools.product(range(count), repeat=2):
            if i == j:
                relations[(i, j)] = "X"
                continue
            e = g.get_edge_data(f"GPU{i}", f"GPU{j}")
            if e and e["kind"] == "nvlink":
                relations[(i, j)] = f"NV{e['links']}"
            elif i in switch_links and j in switch_links:
                relations[(i, j)] = f"NV{min(switch_links[i], switch_links[j])}"
            else:
                try:
                    relations[(i, j)] = _ANCESTOR.get(
                        int(nvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])), "SYS"
                    )
                except nvml.NVMLError:
                    relations[(i, j)] = "SYS"
            try:
                p2p[(i, j)] = nvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], read) == ok
            except nvml.NVMLError as exc:
                p2p[(i, j)] = False
                link_errors.append(f"P2P {i}->{j}: {exc}")
        g.add_node("CPU0", kind="cpu", pos=(0.0, -5.0), label="CPU0", detail="host")
        for i in range(count):
            _link(g, f"GPU{i}", "CPU0", "pcie", 1, None, "PCIe")
        notes = [
            f"From NVML: {count} GPU(s), {names[0] if names else ''}; numbered as CUDA numbers them "
            "(matched by UUID / PCI bus id)."
        ]
        no_p2p = [f"{i}->{j}" for (i, j), v in p2p.items() if not v]
        if count > 1:
            notes.append(
                "Peer-to-peer reads allowed between every pair." if not no_p2p else f"No peer-to-peer reads: {', '.join(no_p2p)}."
            )
        if link_errors:
            notes.append("NVML errors: " + "; ".join(link_errors[:6]))
        return Topology(name, g, "NVML", model.name if model else None, relations=relations, notes=notes, p2p=p2p)


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)
