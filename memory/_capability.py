"""The read side: ``create_memory_capability()`` and the ``MemoryCapability`` it returns."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, runtime_checkable

from ._blocking import Blocking
from ._clock import Clock, SystemClock
from ._context import TokenCounter, approx_tokens, render_context
from ._embedders import Embedder, resolve_embedder
from ._errors import ConfigurationError, InvalidArgumentError
from ._options import (
    DigestOptions,
    EpisodicOptions,
    HygieneOptions,
    RecallOptions,
    SemanticOptions,
    WorkingOptions,
    resolve_tier,
)
from ._recall import BACKGROUND, Candidate, named_subjects, rank, rank_without_cue, to_memory_item
from ._records import MemoryContext, MemoryItem, RankedMemoryItem
from ._relations import RelationsMixin
from ._store import Store, TableName, Where
from ._tools import MemoryTool, RecallArguments, Toolset

__all__ = [
    "MEMORY_CAPABILITY_PRESETS",
    "CapabilityPreset",
    "MemoryCapability",
    "MemoryProvider",
    "capability_options",
    "create_memory_capability",
]

P = ParamSpec("P")
T = TypeVar("T")
SearchTier = Literal["working", "episodic", "semantic", "digest"]
# Where each tier is searched. The episodic tier is the sessions' episodes plus their turn log:
# a summary finds the right conversation, the log the line in it.
_SOURCES: dict[SearchTier, tuple[TableName, ...]] = {
    "working": ("working",),
    "episodic": ("episodes", "turns"),
    "semantic": ("facts",),
    "digest": ("digests",),
}
_LIVE: dict[TableName, list[str]] = {
    "working": ["active", "overflow"],
    "episodes": ["pending", "consolidated"],
    "facts": ["active"],
    "digests": ["active"],
}
_BROWSE = ("working", "episodes", "facts", "digests")  # without a cue the raw log is noise


_SEARCHES = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tiermem-search")
_GRAPH_EDGES = 10  # edges per named entity admitted by graph expansion
_GRAPH_FACTS = 8  # neighbour facts admitted by graph expansion
# Relevance given to what only the graph links to the cue: enough to be recalled, below direct matches.
_GRAPH_EDGE_FLOOR = 0.4
_GRAPH_FACT_FLOOR = 0.35


@dataclass(frozen=True, kw_only=True)
class CapabilityPreset:
    """Which tools and which context sections a capability offers."""

    tools: tuple[str, ...]
    sections: tuple[str, ...]


_ALL_SECTIONS = ("digest", "working", "semantic", "relation", "episodic")
MEMORY_CAPABILITY_PRESETS: dict[str, CapabilityPreset] = {
    "default": CapabilityPreset(tools=("memory_recall", "memory_connect"), sections=_ALL_SECTIONS),
    "connect": CapabilityPreset(tools=("memory_recall", "memory_connect"), sections=_ALL_SECTIONS),
    "recall": CapabilityPreset(tools=("memory_recall",), sections=_ALL_SECTIONS),
    "context": CapabilityPreset(tools=(), sections=_ALL_SECTIONS),
    "tools": CapabilityPreset(tools=("memory_recall", "memory_connect"), sections=()),
}


@runtime_checkable
class MemoryProvider(Protocol):
    """The read-side contract any memory implementation can satisfy."""

    async def recall(
        self,
        ctx: MemoryContext,
        cue: str | None = None,
        *,
        limit: int = 10,
        tiers: Sequence[str] | None = None,
        subject: str | None = None,
    ) -> list[RankedMemoryItem]: ...

    async def format_context(self, input: str, ctx: MemoryContext, *, max_tokens: int | None = None) -> str: ...


def _default_store() -> str:
    return os.environ.get("TIERMEM_STORE") or str(Path.home() / ".tiermem" / "store")


class MemoryCapability(RelationsMixin):
    """Recall, the context block, tools and typed tier helpers over one store."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        clock: Clock,
        working: WorkingOptions | None,
        episodic: EpisodicOptions | None,
        semantic: SemanticOptions | None,
        digest: DigestOptions | None,
        hygiene: HygieneOptions | None,
        recall_options: RecallOptions,
        preset: CapabilityPreset,
        max_context_tokens: int,
        token_counter: TokenCounter,
    ) -> None:
        super().__init__(store=store, embedder=embedder, clock=clock, working=working, semantic=semantic)
        self.episodic = episodic
        self.digest_options = digest
        self.hygiene = hygiene
        self.recall_options = recall_options
        self.preset = preset
        self.max_context_tokens = max_context_tokens
        self.token_counter = token_counter
        self._background: Any = None

    # -- plumbing ---------------------------------------------------------------------------

    @staticmethod
    async def _run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Store and embedder work is blocking I/O: keep it off the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    def blocking(self) -> Blocking:
        """A synchronous facade for scripts without asyncio: same methods, no ``await``."""
        return Blocking(self)

    def enabled_tiers(self) -> list[SearchTier]:
        flags: dict[SearchTier, object] = {
            "working": self.working,
            "episodic": self.episodic,
            "semantic": self.semantic,
            "digest": self.digest_options,
        }
        return [tier for tier, opts in flags.items() if opts is not None]

    def _tiers(self, tiers: Sequence[str] | None) -> list[SearchTier]:
        enabled = self.enabled_tiers()
        if tiers is None:
            return enabled
        unknown = [t for t in tiers if t not in _SOURCES]
        if unknown:
            raise InvalidArgumentError(f"unknown tiers {unknown}; choose from {list(_SOURCES)}")
        return [t for t in enabled if t in tiers]

    def _where(self, ctx: MemoryContext, table: TableName, subject: str | None) -> Where | None:
        eq = self.scope(ctx)
        if subject is not None:
            eq["subject"] = subject
        if table == "working":
            if ctx.session_id is None:
                return None
            eq["session_id"] = ctx.session_id
        if table == "turns":
            # The current session's turns are already in the agent's context window.
            return Where(eq=eq, ne={"session_id": ctx.session_id} if ctx.session_id else None)
        return Where(eq=eq, isin={"status": _LIVE[table]})

    def _tables(self, tiers: Sequence[SearchTier]) -> list[TableName]:
        return [table for tier in tiers for table in _SOURCES[tier]]

    # -- recall -----------------------------------------------------------------------------

    async def recall(
        self,
        ctx: MemoryContext,
        cue: str | None = None,
        *,
        limit: int = 10,
        tiers: Sequence[str] | None = None,
        subject: str | None = None,
    ) -> list[RankedMemoryItem]:
        """Memories across the enabled tiers, ranked for ``cue`` (most recent and salient without one)."""
        return await self._run(self.recall_sync, ctx, cue, limit=limit, tiers=tiers, subject=subject)

    def recall_sync(
        self,
        ctx: MemoryContext,
        cue: str | None = None,
        *,
        limit: int = 10,
        tiers: Sequence[str] | None = None,
        subject: str | None = None,
    ) -> list[RankedMemoryItem]:
        """The blocking body of :meth:`recall`."""
        if not 1 <= limit <= 1000:
            raise InvalidArgumentError("limit must be between 1 and 1000")
        aliases = self.aliases_sync(ctx)
        canon = self.canonical(subject, aliases) if subject is not None else None
        now = self.clock.now()
        chosen = self._tiers(tiers)
        session_seq = self.session_seq(ctx) if "working" in chosen else 0
        if cue is None or not cue.strip():
            items: list[MemoryItem] = []
            for table in (t for t in self._tables(chosen) if t in _BROWSE):
                where = self._where(ctx, table, canon)
                if where is not None:
                    records = self.store.query(table, where)
                    items += [self.item(r, now, session_seq) for r in records]
            return rank_without_cue(items, now=now, options=self.recall_options, limit=limit)
        query_vector = self.embed([cue])[0]
        pool = max(limit * 3, 30)
        found: dict[tuple[str, str], Candidate] = {}
        # One full-text and one vector search per table, all in flight at once (LanceDB releases the GIL).
        searches = []
        for table in self._tables(chosen):
            where = self._where(ctx, table, canon)
            if where is not None:
                lexical_job = _SEARCHES.submit(self.store.text_search, table, cue, where, limit=pool)
                vector_job = _SEARCHES.submit(self.store.vector_search, table, query_vector, where, limit=pool)
                searches.append((table, lexical_job, vector_job))
        for table, lexical_job, vector_job in searches:
            text_hits = lexical_job.result()
            lexical = {h.record.id: h.score for h in text_hits}
            hits = {h.record.id: h for h in vector_job.result()}
            hits.update({h.record.id: h for h in text_hits})
            for rid, hit in hits.items():
                found[(table, rid)] = Candidate(
                    item=self.item(hit.record, now, session_seq),
                    similarity=float(hit.vector @ query_vector),
                    lexical=lexical.get(rid, 0.0),
                )
        named = named_subjects(cue, aliases)
        if self.relations is not None and canon is None and "semantic" in chosen:
            self._expand_through_graph(ctx, query_vector, named, now, found)
        return rank(
            list(found.values()),
            now=now,
            options=self.recall_options,
            cue=cue,
            related_similarity=self._related_similarity(query_vector),
            named=named,
            limit=limit,
        )

    def _related_similarity(self, query_vector: Any) -> float:
        """The cosine a memory must reach to count as related on its vector alone, for this cue."""
        if self._background is None:
            self._background = self.embedder.embed(list(BACKGROUND))
        return float((self._background @ query_vector).max()) + self.recall_options.related_margin

    def _expand_through_graph(
        self, ctx: MemoryContext, query_vector: Any, named: set[str], now: Any, found: dict[tuple[str, str], Candidate]
    ) -> None:
        """Entities the cue names bring their edges and their one-hop neighbours' facts into the pool."""
        graph = self.graph_sync(ctx)
        entities = sorted(n for n in named if n in graph)
        if not entities:
            return
        edges = {e.id: e for entity in entities for e in graph.neighbours(entity)[:_GRAPH_EDGES]}
        if edges:
            vectors = self.embed([e.text for e in edges.values()])
            for edge, vector in zip(edges.values(), vectors, strict=True):
                found.setdefault(
                    ("edges", edge.id),
                    Candidate(
                        item=self.item(edge, now),
                        similarity=float(vector @ query_vector),
                        lexical=0.0,
                        via_graph=_GRAPH_EDGE_FLOOR,
                    ),
                )
        neighbours = sorted({n for entity in entities for n in graph.neighbour_nodes(entity)} - set(entities))
        if not neighbours:
            return
        where = Where(eq=self.scope(ctx), isin={"status": ["active"], "subject": neighbours})
        for hit in self.store.vector_search("facts", query_vector, where, limit=_GRAPH_FACTS):
            key = ("facts", hit.record.id)
            old = found.get(key)
            found[key] = Candidate(
                item=old.item if old else self.item(hit.record, now),
                similarity=float(hit.vector @ query_vector),
                lexical=old.lexical if old else 0.0,
                via_graph=_GRAPH_FACT_FLOOR,
            )

    def item(self, record: Any, now: Any, session_seq: int = 0) -> MemoryItem:
        return to_memory_item(record, now, semantic=self.semantic, working=self.working, session_seq=session_seq)

    # -- context block ----------------------------------------------------------------------

    async def format_context(self, input: str, ctx: MemoryContext, *, max_tokens: int | None = None) -> str:
        """The per-turn ``<memory>`` block for ``input``, a section per tier, within ``max_tokens``."""
        return await self._run(self.format_context_sync, input, ctx, max_tokens=max_tokens)

    def format_context_sync(self, input: str, ctx: MemoryContext, *, max_tokens: int | None = None) -> str:
        """The blocking body of :meth:`format_context`."""
        budget = max_tokens if max_tokens is not None else self.max_context_tokens
        if budget < 16:
            raise InvalidArgumentError("max_tokens must be at least 16")
        wanted = [s for s in self.preset.sections if s in self.enabled_tiers() or s == "relation"]
        sections: dict[str, list[MemoryItem]] = {s: [] for s in wanted}
        search = [t for t in self.enabled_tiers() if t in wanted and t != "digest"]
        if search and input.strip():
            for item in self.recall_sync(ctx, input, limit=24, tiers=search):
                sections.setdefault(item.tier, []).append(item)
        now = self.clock.now()
        if "digest" in wanted:
            latest = self.latest_digest_sync(ctx)
            sections["digest"] = [self.item(latest, now)] if latest else []
        if "working" in wanted and ctx.session_id is not None:
            seen = {i.id for i in sections.get("working", [])}
            session = self.working_memory_sync(ctx, include_inactive=True)  # one read: entries and turn count
            seq = max((e.seq for e in session), default=0)
            recent = rank_without_cue(
                [self.item(e, now, seq) for e in session if e.status == "active"],
                now=now,
                options=self.recall_options,
                limit=self.working.capacity if self.working else 7,
            )
            sections["working"] = [*sections.get("working", []), *(i for i in recent if i.id not in seen)]
        return render_context(sections, order=wanted, max_tokens=budget, count=self.token_counter)

    # -- tools ------------------------------------------------------------------------------

    def tools(self, ctx: MemoryContext) -> Toolset:
        """Tools bound to ``ctx``; arguments can never change whose memory they read."""
        bound: list[MemoryTool] = []
        if "memory_recall" in self.preset.tools:
            bound.append(self._recall_tool(ctx))
        bound += self.extra_tools(ctx)
        return Toolset(bound)

    def extra_tools(self, ctx: MemoryContext) -> list[MemoryTool]:
        """``memory_connect`` when relations are on and the preset offers it."""
        if self.relations is not None and "memory_connect" in self.preset.tools:
            return [self.connect_tool(ctx)]
        return []

    def _recall_tool(self, ctx: MemoryContext) -> MemoryTool:
        async def handler(args: Any) -> list[RankedMemoryItem]:
            assert isinstance(args, RecallArguments)
            return await self.recall(ctx, args.query, limit=args.limit, tiers=args.tiers, subject=args.subject)

        return MemoryTool(
            name="memory_recall",
            description=(
                "Search long-term memory about the user and the people and organisations in their life. "
                "Returns memories ranked by relevance, each with its tier, subject and confidence."
            ),
            arguments=RecallArguments,
            handler=handler,
        )


def capability_options(
    *,
    store: str | Path | Store | None = None,
    embedder: Embedder | str | None = None,
    embedder_dimensions: int | None = None,
    working: bool | dict[str, Any] | WorkingOptions = True,
    episodic: bool | dict[str, Any] | EpisodicOptions = True,
    semantic: bool | dict[str, Any] | SemanticOptions = True,
    digest: bool | dict[str, Any] | DigestOptions = True,
    hygiene: bool | dict[str, Any] | HygieneOptions = True,
    recall: dict[str, Any] | RecallOptions | None = None,
    preset: str | CapabilityPreset = "default",
    clock: Clock | None = None,
    max_context_tokens: int = 1000,
    token_counter: TokenCounter | None = None,
) -> dict[str, Any]:
    """Validate the options shared by ``create_memory_capability`` and ``system``; open the store."""
    if isinstance(preset, str):
        if preset not in MEMORY_CAPABILITY_PRESETS:
            raise ConfigurationError(f"unknown preset {preset!r}; choose from {sorted(MEMORY_CAPABILITY_PRESETS)}")
        preset = MEMORY_CAPABILITY_PRESETS[preset]
    if max_context_tokens < 16:
        raise ConfigurationError("max_context_tokens must be at least 16")
    emb = resolve_embedder(embedder, dimensions=embedder_dimensions)
    if isinstance(store, Store):
        if (store.embedder_id, store.dimensions) != (emb.id, emb.dimensions):
            raise ConfigurationError("the given Store was opened for another embedder")
        opened = store
    else:
        uri = str(store) if store is not None else _default_store()
        opened = Store(uri, embedder_id=emb.id, dimensions=emb.dimensions)
    return {
        "store": opened,
        "embedder": emb,
        "clock": clock or SystemClock(),
        "working": resolve_tier(working, WorkingOptions, "working"),
        "episodic": resolve_tier(episodic, EpisodicOptions, "episodic"),
        "semantic": resolve_tier(semantic, SemanticOptions, "semantic"),
        "digest": resolve_tier(digest, DigestOptions, "digest"),
        "hygiene": resolve_tier(hygiene, HygieneOptions, "hygiene"),
        "recall_options": resolve_tier(recall or True, RecallOptions, "recall") or RecallOptions(),
        "preset": preset,
        "max_context_tokens": max_context_tokens,
        "token_counter": token_counter or approx_tokens,
    }


def create_memory_capability(**options: Any) -> MemoryCapability:
    """Build the read side over a store (a folder, ``s3://...`` or ``db://...``).

    Options: ``store``, ``embedder`` (+ ``embedder_dimensions`` for litellm models), ``working``,
    ``episodic``, ``semantic``, ``digest``, ``hygiene`` (each True / False / dict / options model),
    ``recall`` (ranking weights), ``preset``, ``clock``, ``max_context_tokens``, ``token_counter``.
    """
    return MemoryCapability(**capability_options(**options))
