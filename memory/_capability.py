"""The read side: ``create_memory_capability()`` and the ``MemoryCapability`` it returns.

A capability holds three blocking components over one store: the tier repository
(:class:`~tiermem.memory._tiers.Tiers`), the relations graph
(:class:`~tiermem.memory._relations.Relations`) and recall's search
(:class:`~tiermem.memory._search.Search`). Its async methods check their arguments, then run the
component's method of the same name and signature off the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Never, Protocol, runtime_checkable

from ._blocking import Blocking, run_blocking
from ._clock import Clock, SystemClock
from ._context import TokenCounter, approx_tokens, render_context
from ._embedder_names import embedder_for_store, resolve_embedder
from ._embedders import Embedder
from ._errors import ConfigurationError, InvalidArgumentError
from ._feedback import FeedbackReport, RecallResult, Receipts, apply_feedback
from ._governance import Governance
from ._lineage import Lineage, checked_where
from ._memory_views import MemoryPage, MemoryStats, MemoryVersion
from ._options import (
    MEMORY_CAPABILITY_PRESETS,
    CapabilityPreset,
    DigestOptions,
    EpisodicOptions,
    HygieneOptions,
    RecallOptions,
    SemanticOptions,
    WorkingOptions,
    reject_unknown,
)
from ._portability import Destination, ExportReport, Portability
from ._recall import rank_without_cue
from ._recorded import resolve_options
from ._records import (
    Alias,
    Digest,
    Edge,
    Episode,
    Fact,
    MemoryContext,
    MemoryItem,
    RankedMemoryItem,
    Tier,
    WorkingEntry,
)
from ._relations import Relations
from ._search import Search, SearchTier
from ._store import Store
from ._subjects import USER
from ._tiers import Tiers, checked_context
from ._tools import MemoryTool, RecallArguments, Toolset

__all__ = ["MemoryCapability", "MemoryProvider", "create_memory_capability"]


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
        where: Mapping[str, Any] | None = None,
    ) -> list[RankedMemoryItem]: ...

    async def format_context(self, ctx: MemoryContext, input: str, *, max_tokens: int | None = None) -> str: ...


def _checked_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a string, not {type(value).__name__}")
    return value


class MemoryCapability:
    """Recall, the context block, tools and typed tier helpers over one store."""

    def __init__(
        self,
        *,
        tiers: Tiers,
        episodic: EpisodicOptions | None,
        digest: DigestOptions | None,
        hygiene: HygieneOptions | None,
        recall_options: RecallOptions,
        preset: CapabilityPreset,
        max_context_tokens: int,
        token_counter: TokenCounter,
    ) -> None:
        self.tiers = tiers
        self.relations = Relations(tiers=tiers, semantic=tiers.semantic)
        self.working = tiers.working
        self.episodic = episodic
        self.semantic = tiers.semantic
        self.digest_options = digest
        self.hygiene = hygiene
        self.recall_options = recall_options
        self.preset = preset
        self.max_context_tokens = max_context_tokens
        self.token_counter = token_counter
        self.lineage = Lineage(tiers.store)
        self.search = Search(
            tiers=tiers,
            relations=self.relations,
            enabled=self.enabled_tiers(),
            options=recall_options,
            lineage=self.lineage,
        )
        self.governance = Governance(
            store=tiers.store,
            embedder=tiers.embedder,
            clock=tiers.clock,
            semantic=tiers.semantic,
            working=tiers.working,
            lineage=self.lineage,
        )
        self.receipts = Receipts()
        self.option_conflicts: list[str] = []
        """Explicit options that differ from those recorded in the store (used here, reported, not recorded)."""
        self.portability = Portability(self.governance)

    @property
    def store(self) -> Store:
        return self.tiers.store

    @property
    def embedder(self) -> Embedder:
        return self.tiers.embedder

    @property
    def clock(self) -> Clock:
        return self.tiers.clock

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

    def item(self, record: Any, now: datetime, session_seq: int = 0) -> MemoryItem:
        """Any stored record as a memory item, its confidence decayed to ``now``."""
        return self.search.item(record, now, session_seq)

    # -- recall -----------------------------------------------------------------------------

    async def recall(
        self,
        ctx: MemoryContext,
        cue: str | None = None,
        *,
        limit: int = 10,
        tiers: Sequence[str] | None = None,
        subject: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> RecallResult:
        """Memories across the enabled tiers, ranked for ``cue`` (most recent and salient without one).

        ``where``: only memories from turns captured with matching metadata (``{"channel": "email"}``,
        ``{"labels": {"contains": "work"}}``, ``{"source": {"in": [...]}}``). The result is a list with a
        ``receipt`` for :meth:`feedback`. What no longer holds (a superseded fact, a turn all of whose facts
        were superseded) has ``metadata["superseded"]`` and ranks below what replaced it.
        """
        checked_context(ctx)
        return await run_blocking(self.recall_sync, ctx, cue, limit=limit, tiers=tiers, subject=subject, where=where)

    def recall_sync(
        self,
        ctx: MemoryContext,
        cue: str | None = None,
        *,
        limit: int = 10,
        tiers: Sequence[str] | None = None,
        subject: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> RecallResult:
        """The blocking body of :meth:`recall`."""
        checked_context(ctx)
        if cue is not None:
            _checked_text(cue, "cue")
        if subject is not None:
            _checked_text(subject, "subject")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidArgumentError("limit must be an int between 1 and 1000")
        if isinstance(tiers, str):
            raise InvalidArgumentError("tiers must be a list of tier names, not a string")
        found = self.search.recall(ctx, cue, limit=limit, tiers=tiers, subject=subject, where=checked_where(where))
        return RecallResult(found, receipt=self.receipts.issue(ctx, (i.id for i in found), self.clock.now()))

    async def feedback(
        self, ctx: MemoryContext, receipt: str, *, used: Sequence[str] = (), unhelpful: Sequence[str] = ()
    ) -> FeedbackReport:
        """Say which memories of a recall helped: ``used`` ones are reinforced, ``unhelpful`` ones lose a
        step of confidence (never below 0, never when pinned). Only ids that recall returned; once per
        receipt (the same call again changes nothing). Each change shows in ``history``."""
        checked_context(ctx)
        return await run_blocking(
            apply_feedback, self.governance, self.receipts, ctx, receipt, used=used, unhelpful=unhelpful
        )

    # -- context block ----------------------------------------------------------------------

    async def format_context(self, ctx: MemoryContext, input: str, *, max_tokens: int | None = None) -> str:
        """The per-turn ``<memory>`` block for ``input``, a section per tier, within ``max_tokens``."""
        checked_context(ctx)
        return await run_blocking(self.format_context_sync, ctx, input, max_tokens=max_tokens)

    def format_context_sync(self, ctx: MemoryContext, input: str, *, max_tokens: int | None = None) -> str:
        """The blocking body of :meth:`format_context`."""
        checked_context(ctx)
        _checked_text(input, "input")
        budget = max_tokens if max_tokens is not None else self.max_context_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 16:
            raise InvalidArgumentError("max_tokens must be an int of at least 16")
        wanted = [s for s in self.preset.sections if s in self.enabled_tiers() or s == "relation"]
        sections: dict[str, list[MemoryItem]] = {s: [] for s in wanted}
        search = [t for t in self.enabled_tiers() if t in wanted and t != "digest"]
        if search and input.strip():
            for item in self.search.recall(ctx, input, limit=24, tiers=search, subject=None):
                sections.setdefault(item.tier, []).append(item)
        now = self.clock.now()
        if "digest" in wanted:
            latest = self.tiers.latest_digest(ctx)
            sections["digest"] = [self.item(latest, now)] if latest else []
        if "working" in wanted and ctx.session_id is not None:
            seen = {i.id for i in sections.get("working", [])}
            session = self.tiers.working_memory(ctx, include_inactive=True)  # one read: entries and turn count
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

    def tools(self, ctx: MemoryContext, *, write: bool = False) -> Toolset:
        """Tools bound to ``ctx``; arguments can never change whose memory they read.

        ``write``: the agent's write tools, which only the write side offers (``system(...).tools``).
        """
        checked_context(ctx)
        if write is not False:
            raise ConfigurationError(
                "a capability is the read side and offers no write tools: use system(...).tools(ctx, write=True)"
            )
        bound: list[MemoryTool] = []
        if "memory_recall" in self.preset.tools:
            bound.append(self._recall_tool(ctx))
        if self.relations.options is not None and "memory_connect" in self.preset.tools:
            bound.append(self.relations.connect_tool(ctx))
        return Toolset(bound)

    def _recall_tool(self, ctx: MemoryContext) -> MemoryTool:
        async def handler(args: Any) -> list[RankedMemoryItem]:
            assert isinstance(args, RecallArguments)
            return await self.recall(ctx, args.query, limit=args.limit, tiers=args.tiers, subject=args.subject)

        return MemoryTool(
            name="memory_recall",
            description=(
                "Search long-term memory about the user and the people and organisations in their life. "
                "Returns memories ranked by relevance, each with its id, tier, subject, date and text "
                "(verbose: also confidence, scores, provenance and metadata)."
            ),
            arguments=RecallArguments,
            handler=handler,
        )

    # -- the tiers, one by one (each the async twin of the Tiers / Relations method) ----------

    async def add_alias(self, ctx: MemoryContext, name: str, subject: str = USER) -> Alias:
        """Record that ``name`` (e.g. "Caroline") stands for ``subject`` (by default the user)."""
        return await run_blocking(self.tiers.add_alias, checked_context(ctx), name, subject)

    async def aliases(self, ctx: MemoryContext) -> dict[str, str]:
        """Display name (lowercased) -> subject, for this user."""
        return await run_blocking(self.tiers.aliases, checked_context(ctx))

    async def working_memory(self, ctx: MemoryContext, *, include_inactive: bool = False) -> list[WorkingEntry]:
        """This session's working entries (the active ones unless ``include_inactive``)."""
        return await run_blocking(self.tiers.working_memory, checked_context(ctx), include_inactive=include_inactive)

    async def add_working_memory(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        kind: str = "note",
        salience: float = 0.5,
        seq: int | None = None,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> WorkingEntry:
        """Add one observation to this session's working memory."""
        return await run_blocking(
            self.tiers.add_working_memory, checked_context(ctx), text, subject=subject, kind=kind,
            salience=salience, seq=seq, provenance=provenance, metadata=metadata,
        )  # fmt: skip

    async def add_episode(self, episode: Episode) -> Episode:
        """Write one episode (its scope is its own)."""
        if not isinstance(episode, Episode):
            raise InvalidArgumentError(f"add_episode needs an Episode, not {type(episode).__name__}")
        return await run_blocking(self.tiers.add_episode, episode)

    async def recent_episodes(self, ctx: MemoryContext, *, limit: int = 5) -> list[Episode]:
        """The latest live episodes."""
        return await run_blocking(self.tiers.recent_episodes, checked_context(ctx), limit=limit)

    async def facts(
        self, ctx: MemoryContext, *, subject: str | None = None, include_inactive: bool = False
    ) -> list[Fact]:
        """This user's facts, oldest first (active only unless ``include_inactive``)."""
        return await run_blocking(
            self.tiers.facts, checked_context(ctx), subject=subject, include_inactive=include_inactive
        )

    async def add_semantic_fact(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        confidence: float = 0.8,
        provenance: Sequence[str] = (),
        valid_from: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Fact:
        """Add a fact; the same fact again reinforces it instead of duplicating it.

        ConfigurationError when the semantic tier is off: recall would never return the fact.
        """
        if self.semantic is None:
            raise ConfigurationError(
                "remember() and add_semantic_fact() write a semantic fact, but the semantic tier is off "
                "(semantic=False) and recall would never return it: turn it on, or capture the text as a turn"
            )
        return await run_blocking(
            self.tiers.add_semantic_fact, checked_context(ctx), text, subject=subject, confidence=confidence,
            provenance=provenance, valid_from=valid_from, metadata=metadata,
        )  # fmt: skip

    async def remember(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> Fact:
        """Store something the application was told to remember, as a high-confidence fact.

        ``metadata`` is merged over ``{"source": "remember"}`` (the agent's tool sets ``"agent"``);
        ``provenance``: the turns it came from.
        """
        return await self.add_semantic_fact(
            ctx, text, subject=subject, confidence=0.95, provenance=provenance,
            metadata={"source": "remember", **(metadata or {})},
        )  # fmt: skip

    async def set_digest(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> Digest:
        """Replace the user's digest (one per user; the revision counts up in metadata)."""
        return await run_blocking(
            self.tiers.set_digest, checked_context(ctx), text, provenance=provenance, metadata=metadata
        )

    async def latest_digest(self, ctx: MemoryContext) -> Digest | None:
        return await run_blocking(self.tiers.latest_digest, checked_context(ctx))

    async def connections(
        self, ctx: MemoryContext, entity: str, *, as_of: datetime | None = None, include_history: bool = False
    ) -> list[Edge]:
        """Edges into or out of ``entity`` that hold now (empty when relations are off).

        ``as_of``: the edges that held at that moment; ``include_history``: closed edges too.
        """
        return await run_blocking(
            self.relations.connections, checked_context(ctx), _checked_text(entity, "entity"),
            as_of=as_of, include_history=include_history,
        )  # fmt: skip

    async def relate(
        self,
        ctx: MemoryContext,
        a: str,
        b: str,
        *,
        max_hops: int | None = None,
        as_of: datetime | None = None,
        include_history: bool = False,
    ) -> list[Edge] | None:
        """The edges of a shortest path from ``a`` to ``b`` over edges that hold now, or None.

        ``as_of``: over the edges that held at that moment; ``include_history``: closed edges too.
        """
        return await run_blocking(
            self.relations.relate, checked_context(ctx), _checked_text(a, "a"), _checked_text(b, "b"),
            max_hops=max_hops, as_of=as_of, include_history=include_history,
        )  # fmt: skip

    async def ego_graph(
        self,
        ctx: MemoryContext,
        entity: str,
        *,
        radius: int = 1,
        as_of: datetime | None = None,
        include_history: bool = False,
    ) -> dict[str, Any]:
        """``{"nodes": [...], "edges": [...]}`` within ``radius`` hops of ``entity``, edges that hold now.

        ``as_of``: the edges that held at that moment; ``include_history``: closed edges too.
        """
        return await run_blocking(
            self.relations.ego_graph, checked_context(ctx), _checked_text(entity, "entity"), radius=radius,
            as_of=as_of, include_history=include_history,
        )  # fmt: skip

    # -- inspect (the governance component, memory/_governance.py) --------------------------

    async def get(self, ctx: MemoryContext, id: str) -> MemoryItem:
        """One memory of any tier (or a captured turn) by id; MemoryNotFoundError when not this user's."""
        return await self.governance.get(ctx, id)

    async def history(self, ctx: MemoryContext, id: str) -> list[MemoryVersion]:
        """Every version of a memory, oldest first, with validity times and the captured turns behind each."""
        return await self.governance.history(ctx, id)

    async def subjects(self, ctx: MemoryContext) -> list[str]:
        """The canonical subjects the user's memories are about."""
        return await self.governance.subjects(ctx)

    async def stats(self, ctx: MemoryContext) -> MemoryStats:
        """Counts per tier and status, pending work, and the store's bytes on disk."""
        return await self.governance.stats(ctx)

    async def export(self, ctx: MemoryContext, destination: Destination) -> ExportReport:
        """Write the user's memory as JSON Lines (a header, then every record) to a path or text file."""
        return await self.portability.export(ctx, destination)

    async def list(  # last in the class: below it, ``list`` in an annotation would name this method
        self,
        ctx: MemoryContext,
        *,
        tier: Tier | Sequence[Tier] | None = None,
        subject: str | None = None,
        status: str | Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        """The user's memories oldest first, a page at a time: pass ``next_cursor`` back for the next.

        ``where``: only memories from turns captured with matching metadata, as for :meth:`recall`.
        """
        return await self.governance.list_memories(
            ctx, tier=tier, subject=subject, status=status, where=where, limit=limit, cursor=cursor
        )


def _default_store() -> str:
    return os.environ.get("TIERMEM_STORE") or str(Path.home() / ".tiermem" / "store")


def _storage_options(options: Mapping[str, str] | None, store: object) -> dict[str, str]:
    """Checked object-store options: string keys and values, and no Store already opened with its own."""
    if options is None:
        return {}
    pairs = options.items() if isinstance(options, Mapping) else None
    if pairs is None or not all(isinstance(k, str) and isinstance(v, str) for k, v in pairs):
        raise ConfigurationError("storage_options must be a mapping of str to str (e.g. {'allow_http': 'true'})")
    if isinstance(store, Store):
        raise ConfigurationError("storage_options apply to a store path or URI, not to an already opened Store")
    return dict(options)


def create_memory_capability(
    *,
    store: str | Path | Store | None = None,
    storage_options: Mapping[str, str] | None = None,
    embedder: Embedder | str | None = None,
    embedder_dimensions: int | None = None,
    working: bool | dict[str, Any] | WorkingOptions | None = None,
    episodic: bool | dict[str, Any] | EpisodicOptions | None = None,
    semantic: bool | dict[str, Any] | SemanticOptions | None = None,
    digest: bool | dict[str, Any] | DigestOptions | None = None,
    hygiene: bool | dict[str, Any] | HygieneOptions | None = None,
    recall: dict[str, Any] | RecallOptions | None = None,
    preset: str | CapabilityPreset = "default",
    clock: Clock | None = None,
    max_context_tokens: int = 1000,
    token_counter: TokenCounter | None = None,
    create: bool = True,
    **unknown: Never,
) -> MemoryCapability:
    """Build the read side over a store (a folder, ``s3://...`` or ``db://...``).

    ``storage_options``: credentials and endpoint of an object store, as LanceDB takes them (e.g.
    ``aws_endpoint``, ``aws_access_key_id``, ``allow_http``); without them the ``AWS_*`` variables apply.
    ``embedder``: a name, a litellm model (+ ``embedder_dimensions``) or an :class:`Embedder`;
    ``working``, ``episodic``, ``semantic``, ``digest``, ``hygiene``: True / False / dict / options
    model each; ``recall``: ranking weights; ``preset``: which tools and context sections. The options
    a store was created with are recorded in it: one left unset (None) takes the recorded value (else
    on / the defaults); an explicit one that differs is used here and reported in ``option_conflicts``.
    ``create=False``: a read-only flow; a missing store raises StoreNotFoundError and nothing is created.
    An unknown keyword raises :class:`ConfigurationError` naming the closest valid one.
    """
    reject_unknown(create_memory_capability, unknown)
    if isinstance(preset, str):
        if preset not in MEMORY_CAPABILITY_PRESETS:
            raise ConfigurationError(f"unknown preset {preset!r}; choose from {sorted(MEMORY_CAPABILITY_PRESETS)}")
        preset = MEMORY_CAPABILITY_PRESETS[preset]
    if not isinstance(preset, CapabilityPreset):
        raise ConfigurationError(f"preset must be a name or a CapabilityPreset, not {type(preset).__name__}")
    if isinstance(max_context_tokens, bool) or not isinstance(max_context_tokens, int) or max_context_tokens < 16:
        raise ConfigurationError("max_context_tokens must be an int of at least 16")
    options = _storage_options(storage_options, store)
    if embedder is None and (store is None or isinstance(store, (str, Path))):  # an existing store keeps its own
        embedder = embedder_for_store(str(store) if store is not None else _default_store(), storage_options=options)
    emb = resolve_embedder(embedder, dimensions=embedder_dimensions)
    if isinstance(store, Store):
        if (store.embedder_id, store.dimensions) != (emb.id, emb.dimensions):
            raise ConfigurationError("the given Store was opened for another embedder")
        opened = store
    elif store is None or isinstance(store, (str, Path)):
        uri = str(store) if store is not None else _default_store()
        opened = Store(uri, embedder_id=emb.id, dimensions=emb.dimensions, storage_options=options, create=create)
    else:
        raise ConfigurationError(f"store must be a path, a URI or a Store, not {type(store).__name__}")
    given = {"working": working, "episodic": episodic, "semantic": semantic, "digest": digest, "hygiene": hygiene,
             "recall": recall}  # fmt: skip
    resolved = resolve_options(opened, given, record=create)
    tiers = Tiers(
        store=opened,
        embedder=emb,
        clock=clock or SystemClock(),
        working=resolved.values["working"],
        semantic=resolved.values["semantic"],
    )
    capability = MemoryCapability(
        tiers=tiers,
        episodic=resolved.values["episodic"],
        digest=resolved.values["digest"],
        hygiene=resolved.values["hygiene"],
        recall_options=resolved.values["recall"] or RecallOptions(),
        preset=preset,
        max_context_tokens=max_context_tokens,
        token_counter=token_counter or approx_tokens,
    )
    capability.option_conflicts = resolved.conflicts
    return capability
