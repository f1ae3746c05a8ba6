"""Relations between subjects: edge writes, graph helpers, the connect tool and graph expansion.

Off unless ``semantic={"relations": True | {...}}``; when off, every helper returns empty or
None, nothing is written, and the connect tool answers with a recoverable error envelope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._decay import reinforce
from ._errors import InvalidArgumentError
from ._graph import GraphCache, RelationGraph
from ._options import RelationsOptions
from ._recall import edge_to_memory_item
from ._records import Edge, MemoryContext, MemoryItem
from ._store import Where
from ._subjects import USER
from ._tiers import TierWriter
from ._tools import MemoryTool

__all__ = ["ConnectArguments", "RelationsMixin"]


class ConnectArguments(BaseModel):
    """Arguments of ``memory_connect``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    from_: str = Field(alias="from", min_length=1, max_length=64, description="Entity to start from ('user', 'moni').")
    to: str | None = Field(default=None, max_length=64, description="Entity to reach; omit to list all connections.")
    max_hops: int = Field(default=3, ge=1, le=6, description="Longest path to consider.")


class RelationsMixin(TierWriter):
    """Edges and the relations graph for one store."""

    _graphs: GraphCache | None = None

    @property
    def relations(self) -> RelationsOptions | None:
        """The relations options, or None when relations are off."""
        rel = self.semantic.relations if self.semantic is not None else None
        return rel if rel is not None and rel.enabled else None

    def _graph_cache(self) -> GraphCache:
        if self._graphs is None:
            self._graphs = GraphCache()
        return self._graphs

    # -- writes -----------------------------------------------------------------------------

    def edges_sync(self, ctx: MemoryContext) -> list[Edge]:
        if self.relations is None:
            return []
        edges: list[Edge] = self.store.query("edges", Where(eq=self.scope(ctx)))
        return sorted(edges, key=lambda e: e.id)

    def put_edges_sync(self, ctx: MemoryContext, edges: Sequence[Edge]) -> list[Edge]:
        """Add edges; a repeated edge reinforces the stored one; ``max_edges`` drops the weakest, oldest."""
        rel = self.relations
        if rel is None or not edges:
            return []
        now = self.clock.now()
        current = {e.id: e for e in self.edges_sync(ctx)}
        written: list[Edge] = []
        for edge in edges:
            old = current.get(edge.id)
            if old is not None:
                edge = reinforce(old, confidence=edge.confidence, now=now, provenance=edge.provenance)
            current[edge.id] = edge
            written.append(edge)
        self.store.upsert("edges", written, self.embed([e.text for e in written]))
        excess = len(current) - rel.max_edges
        if excess > 0:
            weakest = sorted(current.values(), key=lambda e: (e.confidence, e.updated_at, e.id))[:excess]
            self.store.delete("edges", Where(eq=self.scope(ctx), isin={"id": [e.id for e in weakest]}))
        self._graph_cache().invalidate((ctx.namespace, ctx.user_id))
        return written

    def dangling_edges_sync(self, ctx: MemoryContext, *, ignoring: Collection[str] = ()) -> list[Edge]:
        """Edges with an endpoint that has no active fact.

        "user" always stands, and so does an entity minted from an edge (never had a fact) when
        ``create_implicit_entities`` is on or the consolidator marked it implicit.
        ``ignoring``: fact ids to treat as gone already (a dry run's would-be archived facts).
        """
        rel = self.relations
        if rel is None:
            return []
        facts = self.facts_sync(ctx, include_inactive=True)
        had = {f.subject for f in facts}
        live = {f.subject for f in facts if f.status == "active" and f.id not in ignoring} | {USER}

        def stands(subject: str, edge: Edge) -> bool:
            minted = subject not in had and (
                rel.create_implicit_entities or subject in edge.metadata.get("implicit", ())
            )
            return subject in live or minted

        return [e for e in self.edges_sync(ctx) if not (stands(e.source, e) and stands(e.target, e))]

    def remove_dangling_edges_sync(self, ctx: MemoryContext) -> int:
        """Drop the dangling edges; returns how many."""
        dangling = [e.id for e in self.dangling_edges_sync(ctx)]
        if dangling:
            self.store.delete("edges", Where(eq=self.scope(ctx), isin={"id": dangling}))
            self._graph_cache().invalidate((ctx.namespace, ctx.user_id))
        return len(dangling)

    # -- graph reads ------------------------------------------------------------------------

    def graph_sync(self, ctx: MemoryContext) -> RelationGraph:
        """The user's graph, from cache while the edges table has not moved."""
        key = (ctx.namespace, ctx.user_id)
        version = self.store.version("edges")
        cache = self._graph_cache()
        graph = cache.get(key, version)
        if graph is None:
            graph = RelationGraph(self.edges_sync(ctx))
            cache.put(key, version, graph)
        return graph

    def _entity(self, ctx: MemoryContext, entity: str) -> str:
        return self.canonical(entity, self.aliases_sync(ctx))

    def connections_sync(self, ctx: MemoryContext, entity: str) -> list[Edge]:
        if self.relations is None:
            return []
        return self.graph_sync(ctx).neighbours(self._entity(ctx, entity))

    def relate_sync(self, ctx: MemoryContext, a: str, b: str, *, max_hops: int | None = None) -> list[Edge] | None:
        if self.relations is None:
            return None
        return self.graph_sync(ctx).path(self._entity(ctx, a), self._entity(ctx, b), max_hops=max_hops)

    def ego_graph_sync(self, ctx: MemoryContext, entity: str, *, radius: int = 1) -> dict[str, Any]:
        if self.relations is None:
            return {"nodes": [], "edges": []}
        if radius < 0:
            raise InvalidArgumentError("radius must be >= 0")
        nodes, edges = self.graph_sync(ctx).ego(self._entity(ctx, entity), radius=radius)
        return {"nodes": nodes, "edges": edges}

    async def connections(self, ctx: MemoryContext, entity: str) -> list[Edge]:
        """Edges into or out of ``entity`` (empty when relations are off)."""
        return await asyncio.to_thread(self.connections_sync, ctx, entity)

    async def relate(self, ctx: MemoryContext, a: str, b: str, *, max_hops: int | None = None) -> list[Edge] | None:
        """The edges of a shortest path from ``a`` to ``b``, or None."""
        return await asyncio.to_thread(self.relate_sync, ctx, a, b, max_hops=max_hops)

    async def ego_graph(self, ctx: MemoryContext, entity: str, *, radius: int = 1) -> dict[str, Any]:
        """``{"nodes": [...], "edges": [...]}`` within ``radius`` hops of ``entity``."""
        return await asyncio.to_thread(self.ego_graph_sync, ctx, entity, radius=radius)

    # -- the connect tool -------------------------------------------------------------------

    def connect_tool(self, ctx: MemoryContext) -> MemoryTool:
        async def handler(args: Any) -> list[MemoryItem]:
            assert isinstance(args, ConnectArguments)
            if self.relations is None:
                raise InvalidArgumentError("relations are off for this memory; use memory_recall instead")
            now = self.clock.now()
            if args.to is None:
                edges = await self.connections(ctx, args.from_)
            else:
                edges = await self.relate(ctx, args.from_, args.to, max_hops=args.max_hops) or []
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
