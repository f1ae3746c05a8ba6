"""Relations between subjects: the edges, the graph over them, and the ``memory_connect`` tool.

Off unless ``semantic={"relations": True | {...}}``; when off, every read answers empty or None,
nothing is written, and the connect tool answers with a recoverable error envelope.

Edges are bi-temporal: each holds from ``valid_from`` until ``valid_to`` (None while current) and
names its support, the facts it was derived from. When the last supporting fact stops being active
(superseded, archived, forgotten) the edge is closed, kept as history; the janitor deletes an edge
once none of its supporting facts is stored at all (history of nothing). Reads see current edges;
``as_of=`` answers for a past moment and ``include_history=True`` shows closed edges too.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from .._blocking import run_blocking
from .._decay import reinforce
from .._errors import InvalidArgumentError
from .._items import MemoryItem
from .._options import RelationsOptions, SemanticOptions
from .._records import Edge, Fact, MemoryContext, mentions
from .._subjects import USER, canonical_subject
from .._tiers import Tiers, edge_to_memory_item
from .._tools import CONNECT, ConnectArguments, MemoryTool
from ._graph import GraphCache, RelationGraph

__all__ = ["ConnectArguments", "Relations"]  # ConnectArguments: the tool table's, named where it always was

_ENDED = re.compile(r"\b(?:no longer|not any ?more|used to|previously|formerly)\b", re.IGNORECASE)


def _eviction_order(edge: Edge) -> tuple[bool, datetime, float, str]:
    """Which edges ``max_edges`` drops first: history, then the least recent, least confident; ids break ties."""
    return (edge.current, edge.updated_at, edge.confidence, edge.id)


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
        """Every edge of this user, by id, closed ones included."""
        return self.tiers.edges(ctx) if self.options is not None else []

    def current_edges(self, ctx: MemoryContext) -> list[Edge]:
        """The edges that hold now."""
        return [e for e in self.edges(ctx) if e.current]

    def _view(self, ctx: MemoryContext, *, as_of: datetime | None, include_history: bool) -> list[Edge]:
        edges = self.edges(ctx)
        if include_history:
            return edges
        if as_of is not None:
            return [e for e in edges if e.valid_at(as_of)]
        return [e for e in edges if e.current]

    def put_edges(self, ctx: MemoryContext, edges: Sequence[Edge]) -> list[Edge]:
        """Add edges; a repeated edge reinforces the stored one.

        Over ``max_edges`` the excess goes: closed edges first, then the least recent (``updated_at``),
        then the least confident, then by id (see :class:`RelationsOptions`).
        """
        rel = self.options
        if rel is None or not edges:
            return []
        now = self.tiers.clock.now()
        current = {e.id: e for e in self.edges(ctx)}
        written: list[Edge] = []
        for edge in edges:
            old = current.get(edge.id)
            if old is not None:
                seen = edge
                edge = reinforce(old, confidence=seen.confidence, now=now, provenance=seen.provenance)
                update: dict[str, Any] = {"support": tuple(sorted({*old.support, *seen.support}))}
                if not old.current:  # said again after it ended: it holds again from now
                    update |= {"valid_from": seen.valid_from or now, "valid_to": None}
                edge = edge.model_copy(update=update)
            current[edge.id] = edge
            written.append(edge)
        self.tiers.put_edges(written)
        excess = len(current) - rel.max_edges
        if excess > 0:
            self.tiers.delete_edges(ctx, [e.id for e in sorted(current.values(), key=_eviction_order)[:excess]])
        self.graphs.invalidate((ctx.namespace, ctx.user_id))
        return written

    def unsupported_edges(
        self, ctx: MemoryContext, *, ignoring: Collection[str] = (), facts: Sequence[Fact] | None = None
    ) -> list[Edge]:
        """Current edges with a support set none of whose facts is active any more, as closed edges.

        ``valid_to`` is when the last supporting fact ended (its ``valid_to``, else its last change);
        ``ignoring``: fact ids to treat as gone already (closed at the clock's now).
        """
        if self.options is None:
            return []
        facts = self.tiers.facts(ctx, include_inactive=True) if facts is None else facts
        by_id = {f.id: f for f in facts}
        now = self.tiers.clock.now()

        def holds(fact: Fact | None, edge: Edge) -> bool:
            # A correction or a merge that still names both endpoints carries the support on, unless it
            # says the relation ended ("The user no longer works at Acme Corp").
            for _ in range(len(by_id) + 1):
                if fact is None or fact.id in ignoring:
                    return False
                if fact.status == "active":
                    named = mentions(fact, edge.source) and mentions(fact, edge.target) and not _ENDED.search(fact.text)
                    return fact.id in edge.support or named
                fact = by_id.get(fact.superseded_by) if fact.superseded_by else None
            return False

        closed: list[Edge] = []
        for edge in self.edges(ctx):
            if not edge.current or not edge.support:
                continue
            support = [by_id.get(i) for i in edge.support]
            if any(holds(f, edge) for f in support):
                continue
            ends = [f.valid_to or f.updated_at for f in support if f is not None and f.id not in ignoring]
            end = max(ends) if ends and not any(f is None or f.id in ignoring for f in support) else now
            end = max(end, edge.valid_from or edge.created_at)
            closed.append(edge.model_copy(update={"valid_to": end, "updated_at": now}))
        return closed

    def close_unsupported_edges(self, ctx: MemoryContext) -> list[Edge]:
        """Close the current edges whose supporting facts all ended; returns the closed edges."""
        closed = self.unsupported_edges(ctx)
        if closed:
            self.tiers.put_edges(closed)
            self.graphs.invalidate((ctx.namespace, ctx.user_id))
        return closed

    def dangling_edges(self, ctx: MemoryContext, *, ignoring: Collection[str] = ()) -> list[Edge]:
        """Edges that no longer stand, by the same support set as supersession: to close, then to delete.

        See :meth:`remove_dangling_edges` for which is which. Edges to close come as their closed
        versions (``valid_to`` set, ``support`` trimmed to the facts still stored), edges to delete as
        stored. ``ignoring``: fact ids to treat as ended already (a dry run's would-be archived facts).
        """
        close, delete = self.dangling(ctx, ignoring=ignoring)
        return close + delete

    def dangling(self, ctx: MemoryContext, *, ignoring: Collection[str] = ()) -> tuple[list[Edge], list[Edge]]:
        """``(to_close, to_delete)``: :meth:`dangling_edges`, split by what the janitor does with them."""
        rel = self.options
        if rel is None:
            return [], []
        facts = self.tiers.facts(ctx, include_inactive=True)
        stored = {f.id for f in facts}
        edges = self.edges(ctx)
        # No supporting fact left at all (each was forgotten): nothing to keep the edge as history of.
        orphans = [e for e in edges if e.support and not stored.intersection(e.support)]
        gone = {e.id for e in orphans}
        close = [
            e.model_copy(update={"support": tuple(i for i in e.support if i in stored)})
            for e in self.unsupported_edges(ctx, ignoring=ignoring, facts=facts)
            if e.id not in gone
        ]
        had = {f.subject for f in facts}
        live = {f.subject for f in facts if f.status == "active" and f.id not in ignoring} | {USER}

        def stands(subject: str, edge: Edge) -> bool:
            minted = subject not in had and (
                rel.create_implicit_entities or subject in edge.metadata.get("implicit", ())
            )
            return subject in live or minted

        # Edges stored before support sets: only their endpoints can keep them; there is no history to keep.
        legacy = [e for e in edges if e.current and not e.support and not (stands(e.source, e) and stands(e.target, e))]
        return close, orphans + legacy

    def remove_dangling_edges(self, ctx: MemoryContext) -> int:
        """The janitor's edge rule; returns how many edges it closed or deleted.

        * Closed (kept as history): a current edge none of whose supporting facts is active any more
          (superseded, archived), exactly as supersession closes it.
        * Deleted: an edge, current or closed, none of whose supporting facts is stored any more (all
          forgotten: history must not outlive what it was derived from); and an edge without a support
          set (stored before them) whose endpoint has no active fact ("user" always stands, and so does
          an entity minted by ``create_implicit_entities`` or marked implicit by the consolidator).
        """
        close, delete = self.dangling(ctx)
        self.settle_dangling(ctx, close, delete)
        return len(close) + len(delete)

    def settle_dangling(self, ctx: MemoryContext, close: Sequence[Edge], delete: Sequence[Edge]) -> None:
        """Write what :meth:`dangling` found: the closed versions, and the deletions."""
        if close:
            self.tiers.put_edges(close)
        if delete:
            self.tiers.delete_edges(ctx, [e.id for e in delete])
        if close or delete:
            self.graphs.invalidate((ctx.namespace, ctx.user_id))

    # -- graph reads ------------------------------------------------------------------------

    def graph(
        self, ctx: MemoryContext, *, as_of: datetime | None = None, include_history: bool = False
    ) -> RelationGraph:
        """The user's graph of current edges, from cache while the edges table has not moved.

        ``as_of``: the edges that held then; ``include_history``: every edge, closed ones too (not cached).
        """
        if as_of is not None or include_history:
            return RelationGraph(self._view(ctx, as_of=as_of, include_history=include_history))
        key = (ctx.namespace, ctx.user_id)
        version = self.tiers.store.version("edges")
        graph = self.graphs.get(key, version)
        if graph is None:
            graph = RelationGraph(self.current_edges(ctx))
            self.graphs.put(key, version, graph)
        return graph

    def _entity(self, ctx: MemoryContext, entity: str) -> str:
        return canonical_subject(entity, aliases=self.tiers.aliases(ctx))

    def connections(
        self, ctx: MemoryContext, entity: str, *, as_of: datetime | None = None, include_history: bool = False
    ) -> list[Edge]:
        """Current edges into or out of ``entity`` (empty when relations are off); see :meth:`graph`."""
        if self.options is None:
            return []
        graph = self.graph(ctx, as_of=as_of, include_history=include_history)
        return graph.neighbours(self._entity(ctx, entity))

    def relate(
        self,
        ctx: MemoryContext,
        a: str,
        b: str,
        *,
        max_hops: int | None = None,
        as_of: datetime | None = None,
        include_history: bool = False,
    ) -> list[Edge] | None:
        """The edges of a shortest path from ``a`` to ``b`` over current edges, or None; see :meth:`graph`."""
        if self.options is None:
            return None
        graph = self.graph(ctx, as_of=as_of, include_history=include_history)
        return graph.path(self._entity(ctx, a), self._entity(ctx, b), max_hops=max_hops)

    def ego_graph(
        self,
        ctx: MemoryContext,
        entity: str,
        *,
        radius: int = 1,
        as_of: datetime | None = None,
        include_history: bool = False,
    ) -> dict[str, Any]:
        """``{"nodes": [...], "edges": [...]}`` within ``radius`` hops of ``entity``; see :meth:`graph`."""
        if self.options is None:
            return {"nodes": [], "edges": []}
        if radius < 0:
            raise InvalidArgumentError("radius must be >= 0")
        graph = self.graph(ctx, as_of=as_of, include_history=include_history)
        nodes, edges = graph.ego(self._entity(ctx, entity), radius=radius)
        return {"nodes": nodes, "edges": edges}

    # -- the connect tool -------------------------------------------------------------------

    def connect_tool(self, ctx: MemoryContext) -> MemoryTool:
        """``memory_connect`` bound to ``ctx`` (offered while relations are on; see :data:`~.._tools.TOOLS`)."""

        async def handler(args: ConnectArguments) -> list[MemoryItem]:
            if self.options is None:
                raise InvalidArgumentError("relations are off for this memory; use memory_recall instead")
            now = self.tiers.clock.now()
            as_of, history = args.as_of, args.include_history
            if args.to is None:
                edges = await run_blocking(self.connections, ctx, args.from_, as_of=as_of, include_history=history)
            else:
                path = await run_blocking(
                    self.relate, ctx, args.from_, args.to, max_hops=args.max_hops, as_of=as_of, include_history=history
                )
                edges = path or []
            return [edge_to_memory_item(e, now, half_life=self.semantic) for e in edges]

        return CONNECT.bind(handler)
