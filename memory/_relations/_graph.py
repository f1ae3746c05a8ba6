"""The relations graph: the only module that imports networkx.

A ``MultiDiGraph`` per namespace and user, built from the stored edges and cached until the
edges table changes. Reads use graph views (undirected view, subgraph view), never copies.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

import networkx as nx

from .._records import Edge

__all__ = ["GraphCache", "RelationGraph"]


class RelationGraph:
    """Read-only queries over one user's edges."""

    def __init__(self, edges: Sequence[Edge]) -> None:
        self._graph = nx.MultiDiGraph()
        for edge in edges:
            self._graph.add_edge(edge.source, edge.target, key=edge.id, edge=edge)
        self._undirected = self._graph.to_undirected(as_view=True)

    @property
    def nodes(self) -> list[str]:
        return sorted(self._graph.nodes)

    def __contains__(self, entity: object) -> bool:
        return entity in self._graph

    def __len__(self) -> int:
        return int(self._graph.number_of_edges())

    def _edges_between(self, a: str, b: str) -> list[Edge]:
        found = [d["edge"] for d in self._graph.get_edge_data(a, b, default={}).values()]
        found += [d["edge"] for d in self._graph.get_edge_data(b, a, default={}).values()]
        return found

    def neighbours(self, entity: str) -> list[Edge]:
        """Every edge into or out of ``entity``, strongest first."""
        if entity not in self._graph:
            return []
        edges = [d["edge"] for _, _, d in self._graph.out_edges(entity, data=True)]
        edges += [d["edge"] for _, _, d in self._graph.in_edges(entity, data=True)]
        return sorted(edges, key=lambda e: (-e.confidence, e.id))

    def neighbour_nodes(self, entity: str) -> list[str]:
        if entity not in self._graph:
            return []
        return sorted(set(self._undirected.neighbors(entity)) - {entity})

    def path(self, source: str, target: str, *, max_hops: int | None = None) -> list[Edge] | None:
        """Edges of a shortest path (direction ignored), the strongest edge per hop; None if unreachable."""
        if source not in self._graph or target not in self._graph:
            return None
        if source == target:
            return []
        try:
            nodes = nx.shortest_path(self._undirected, source, target)
        except nx.NetworkXNoPath:
            return None
        if max_hops is not None and len(nodes) - 1 > max_hops:
            return None
        hops = itertools.pairwise(nodes)
        return [max(self._edges_between(a, b), key=lambda e: (e.confidence, e.id)) for a, b in hops]

    def ego(self, entity: str, *, radius: int = 1) -> tuple[list[str], list[Edge]]:
        """Nodes within ``radius`` hops and the edges among them."""
        if entity not in self._graph:
            return [], []
        reach = nx.single_source_shortest_path_length(self._undirected, entity, cutoff=radius)
        view = self._graph.subgraph(reach)
        edges = sorted((d["edge"] for _, _, d in view.edges(data=True)), key=lambda e: e.id)
        return sorted(reach), edges


class GraphCache:
    """One graph per (namespace, user), rebuilt when the edges table's version moves."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[str, str], tuple[int, RelationGraph]] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str], version: int) -> RelationGraph | None:
        with self._lock:
            cached = self._graphs.get(key)
        return cached[1] if cached and cached[0] == version else None

    def put(self, key: tuple[str, str], version: int, graph: RelationGraph) -> None:
        with self._lock:
            self._graphs[key] = (version, graph)

    def invalidate(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._graphs.pop(key, None)
