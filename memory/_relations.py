"""Relations between subjects: the edges, the graph over them, and the ``memory_connect`` tool.

Off unless ``semantic={"relations": True | {...}}``; when off, every read answers empty or None,
nothing is written, and the connect tool answers with a recoverable error envelope.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._blocking import run_blocking
from ._decay import reinforce
from ._errors import InvalidArgumentError
from ._graph import GraphCache, RelationGraph
from ._options import RelationsOptions, SemanticOptions
from ._recall import edge_to_memory_item
from ._records import Edge, MemoryContext, MemoryItem
from ._subjects import USER, canonical_subject
from ._tiers import Tiers
from ._tools import MemoryTool

__all__ = ["ConnectArguments", "Relations"]


class ConnectArguments(BaseModel):
    """Arguments of ``memory_connect``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: str = Field(alias="from", min_length=1, max_length=64, description="Entity to start from ('user', 'moni').")
    to: str | None = Field(default=None, max_length=64, description="Entity to reach; omit to list all connections.")
    max_hops: int = Field(default=3, ge=1, le=6, description="Longest path to consider.")


class Relations:
    """One store's edges and the per-user graph built from them (blocking, like the repository)."""

    def __init__(self, *, tiers: Tiers, semantic: SemanticOptions | None) -> None:
        self.tiers = tiers
        self.semantic = semantic
        rel = semantic.relations if semantic is not None else None
        # None when relations are off: every read answers empty and nothing is written.
        self.options: RelationsOptions | None = rel if rel is not None and rel.enabled else None
        self.graphs = GraphCache()

    # -- writes -----------------------------------------------------------------------------

    def edges(self, ctx: MemoryContext) -> list[Edge]:
        """Every edge of this user, by id."""
        return self.tiers.edges(ctx) if self.options is not None else []

    def put_edges(self, ctx: MemoryContext, edges: Sequence[Edge]) -> list[Edge]:
        """Add edges; a repeated edge reinforces the stored one; ``max_edges`` drops the weakest, oldest."""
        rel = self.options
        if rel is None or not edges:
            return []
        now = self.tiers.clock.now()
        current = {e.id: e for e in self.edges(ctx)}
        written: list[Edge] = []
        for edge in edges:
            old = current.get(edge.id)
            if old is not None:
                edge = reinforce(old, confidence=edge.confidence, now=now, provenance=edge.provenance)
            current[edge.id] = edge
            written.append(edge)
        self.tiers.put_edges(written)
        excess = len(current) - rel.max_edges
        if excess > 0:
            weakest = sorted(current.values(), key=lambda e: (e.confidence, e.updated_at, e.id))[:excess]
            self.tiers.delete_edges(ctx, [e.id for e in weakest])
        self.graphs.invalidate((ctx.namespace, ctx.user_id))
        return written

    def dangling_edges(self, ctx: MemoryContext, *, ignoring: Collection[str] = ()) -> list[Edge]:
        """Edges with an endpoint that has no active fact.

        "user" always stands, and so does an entity minted from an edge (never had a fact) when
        ``create_implicit_entities`` is on or the consolidator marked it implicit.
        ``ignoring``: fact ids to treat as gone already (a dry run's would-be archived facts).
        """
        rel = self.options
        if rel is None:
            return []
        facts = self.tiers.facts(ctx, include_inactive=True)
        had = {f.subject for f in facts}
        live = {f.subject for f in facts if f.status == "active" and f.id not in ignoring} | {USER}

        def stands(subject: str, edge: Edge) -> bool:
            minted = subject not in had and (
                rel.create_implicit_entities or subject in edge.metadata.get("implicit", ())
            )
            return subject in live or minted

        return [e for e in self.edges(ctx) if not (stands(e.source, e) and stands(e.target, e))]

    def remove_dangling_edges(self, ctx: MemoryContext) -> int:
        """Drop the dangling edges; returns how many."""
        dangling = [e.id for e in self.dangling_edges(ctx)]
        if dangling:
            self.tiers.delete_edges(ctx, dangling)
            self.graphs.invalidate((ctx.namespace, ctx.user_id))
        return len(dangling)

    # -- graph reads ------------------------------------------------------------------------

    def graph(self, ctx: MemoryContext) -> RelationGraph:
        """The user's graph, from cache while the edges table has not moved."""
        key = (ctx.namespace, ctx.user_id)
        version = self.tiers.store.version("edges")
        graph = self.graphs.get(key, version)
        if graph is None:
            graph = RelationGraph(self.edges(ctx))
            self.graphs.put(key, version, graph)
        return graph

    def _entity(self, ctx: MemoryContext, entity: str) -> str:
        return canonical_subject(entity, aliases=self.tiers.aliases(ctx))

    def connections(self, ctx: MemoryContext, entity: str) -> list[Edge]:
        """Edges into or out of ``entity`` (empty when relations are off)."""
        if self.options is None:
            return []
        return self.graph(ctx).neighbours(self._entity(ctx, entity))

    def relate(self, ctx: MemoryContext, a: str, b: str, *, max_hops: int | None = None) -> list[Edge] | None:
        """The edges of a shortest path from ``a`` to ``b``, or None."""
        if self.options is None:
            return None
        return self.graph(ctx).path(self._entity(ctx, a), self._entity(ctx, b), max_hops=max_hops)

    def ego_graph(self, ctx: MemoryContext, entity: str, *, radius: int = 1) -> dict[str, Any]:
        """``{"nodes": [...], "edges": [...]}`` within ``radius`` hops of ``entity``."""
        if self.options is None:
            return {"nodes": [], "edges": []}
        if radius < 0:
            raise InvalidArgumentError("radius must be >= 0")
        nodes, edges = self.graph(ctx).ego(self._entity(ctx, entity), radius=radius)
        return {"nodes": nodes, "edges": edges}

    # -- the connect tool -------------------------------------------------------------------

    def connect_tool(self, ctx: MemoryContext) -> MemoryTool:
        """``memory_connect`` bound to ``ctx``."""

        async def handler(args: Any) -> list[MemoryItem]:
            assert isinstance(args, ConnectArguments)
            if self.options is None:
                raise InvalidArgumentError("relations are off for this memory; use memory_recall instead")
            now = self.tiers.clock.now()
            if args.to is None:
                edges = await run_blocking(self.connections, ctx, args.from_)
            else:
                path = await run_blocking(self.relate, ctx, args.from_, args.to, max_hops=args.max_hops)
                edges = path or []
            return [edge_to_memory_item(e, now, half_life=self.semantic) for e in edges]

        return MemoryTool(
            name="memory_connect",
            description=(
                "Explore how people and organisations in the user's life are related. With 'from' alone, list "
                "everything connected to it; with 'from' and 'to', return the chain of relations between them."
            ),
            arguments=ConnectArguments,
            handler=handler,
        )
