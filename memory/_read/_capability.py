"""``MemoryCapability``: recall, the context block, tools and typed tier helpers over one store, the read
side (:func:`~tiermem.memory._read._create.create_memory_capability` builds it).

A capability holds three blocking components over one store: the tier repository
(:class:`~tiermem.memory._tiers._tiers.Tiers`), the relations graph
(:class:`~tiermem.memory._relations._relations.Relations`) and recall's search
(:class:`~tiermem.memory._recall._search.Search`). Its async methods check their arguments, then run the
component's method of the same name and signature off the event loop; the tiers' one by one are those
of its part :class:`~tiermem.memory._read._async_tiers.AsyncTiers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from .._blocking import Blocking, run_blocking
from .._clock import Clock
from .._delegation import delegate_async
from .._embed import Embedder
from .._errors import AccessDeniedError, ConfigurationError, InvalidArgumentError, MemoryNotFoundError
from .._govern import (
    Access,
    Destination,
    ExportReport,
    FeedbackReport,
    Governance,
    MemoryPage,
    MemoryStats,
    MemoryVersion,
    Portability,
    RecallResult,
    Receipts,
    apply_feedback,
)
from .._items import MemoryItem, RankedMemoryItem
from .._options import CapabilityPreset, DigestOptions, EpisodicOptions, HygieneOptions, RecallOptions
from .._policy import MemoryPolicy, checked_categories
from .._recall import Search, SearchTier, TokenCounter, labelled, rank_without_cue, render_context
from .._records import MemoryContext, Tier
from .._relations import Relations
from .._scope import checked_string
from .._store import Store
from .._tiers import Lineage, Tiers, checked_context, checked_where
from .._tool_arguments import recall_arguments
from .._tools import CONNECT, RECALL, MemoryTool, RecallArguments, ToolOption, Toolset, offer
from .._when import checked_instant, checked_window
from ._async_tiers import AsyncTiers
from ._blocking_capability import BlockingMemoryCapability

__all__ = ["MemoryCapability", "read_tools"]

T = TypeVar("T")


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
            secrets=tiers.secrets,
        )
        self.access = Access(tiers.store)
        """The choke point: every read of this class checks its context's shared scopes here first."""
        self.receipts = Receipts()
        self.option_conflicts: list[str] = []
        """Explicit options that differ from those recorded in the store (used here, reported, not recorded)."""
        self.portability = Portability(self.governance)
        self.async_tiers = AsyncTiers(tiers=tiers, relations=self.relations, access=self.access)
        needs: dict[ToolOption, object] = {"semantic": self.semantic, "relations": self.relations.options}
        self.tool_options = frozenset(option for option, on in needs.items() if on is not None)
        """The options of the tool table that are on here: which of its tools can be offered."""
        self.policy: MemoryPolicy | None = None
        """The write side's memory policy (None for a capability alone): the agent's tools obey it too."""

    @property
    def vocabulary(self) -> tuple[str, ...] | None:
        """The memory policy's labels when it has some: the recall tool's ``categories`` may name only these
        (and its schema lists them). None (no policy, or one without labels): any well-formed label."""
        return (self.policy.labels or None) if self.policy is not None else None

    @property
    def store(self) -> Store:
        return self.tiers.store

    @property
    def embedder(self) -> Embedder:
        return self.tiers.embedder

    @property
    def clock(self) -> Clock:
        return self.tiers.clock

    def blocking(self) -> BlockingMemoryCapability:
        """A synchronous facade for scripts without asyncio: same methods, no ``await``."""
        # Blocking forwards by __getattr__; the generated protocol says what it forwards, with its types
        return cast(BlockingMemoryCapability, Blocking(self))

    def enabled_tiers(self) -> list[SearchTier]:
        flags: dict[SearchTier, object] = {
            "working": self.working,
            "episodic": self.episodic,
            "semantic": self.semantic,
            "digest": self.digest_options,
            "document": True,  # passages of ingested documents: searched whenever the user has any
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
        since: datetime | None = None,
        until: datetime | None = None,
        as_of: datetime | None = None,
        categories: Sequence[str] | None = None,
    ) -> RecallResult:
        """Memories across the enabled tiers, ranked for ``cue`` (most recent and salient without one).

        ``where``: only memories from turns captured with matching metadata (``{"channel": "email"}``,
        ``{"labels": {"contains": "work"}}``, ``{"source": {"in": [...]}}``). ``since``/``until``: only
        memories said in that window (a turn's time, an episode's turns, a fact's first evidence). Without
        them, a time the cue names ("last week", "in May", "on March 3") is resolved against ``as_of``
        (default now) and what was said then ranks first. The result is a list with a ``receipt`` for
        :meth:`feedback`. What no longer holds (a superseded fact, a turn all of whose facts were
        superseded) has ``metadata["superseded"]`` and ranks below what replaced it.
        ``categories``: only memories the observer or consolidator labelled with one of these (the memory
        policy's labels, ``system(categories=[...])``): working entries and facts.
        """
        checked_context(ctx)
        return await run_blocking(
            self.recall_sync, ctx, cue, limit=limit, tiers=tiers, subject=subject, where=where, since=since,
            until=until, as_of=as_of, categories=categories,
        )  # fmt: skip

    def recall_sync(
        self,
        ctx: MemoryContext,
        cue: str | None = None,
        *,
        limit: int = 10,
        tiers: Sequence[str] | None = None,
        subject: str | None = None,
        where: Mapping[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        as_of: datetime | None = None,
        categories: Sequence[str] | None = None,
    ) -> RecallResult:
        """The blocking body of :meth:`recall`."""
        self.access.check(ctx)
        if cue is not None:
            checked_string(cue, "cue")
        if subject is not None:
            checked_string(subject, "subject")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidArgumentError("limit must be an int between 1 and 1000")
        if isinstance(tiers, str):
            raise InvalidArgumentError("tiers must be a list of tier names, not a string")
        window, as_of = checked_window(since, until), checked_instant(as_of, "as_of")
        cue = cue if cue is None else self.tiers.secrets.text(cue)  # a cue is embedded, maybe by a provider
        checked, picked = checked_where(where), checked_categories(categories)
        (_, own), *shared = self.access.readable(ctx)  # the user's own, then each granted shared scope
        found = self.search.recall(
            own, cue, limit=limit, tiers=tiers, subject=subject, where=checked, window=window, as_of=as_of,
            categories=picked, shared=shared,
        )  # fmt: skip
        return RecallResult(found, receipt=self.receipts.issue(ctx, (i.id for i in found), self.clock.now()))

    async def feedback(
        self, ctx: MemoryContext, receipt: str, *, used: Sequence[str] = (), unhelpful: Sequence[str] = ()
    ) -> FeedbackReport:
        """Say which memories of a recall helped: ``used`` ones are reinforced, ``unhelpful`` ones lose a
        step of confidence (never below 0, never when pinned). Only ids that recall returned; once per
        receipt (the same call again changes nothing). Each change shows in ``history``. A shared scope's
        memory is reinforced by any reader's ``used``, lowered only by a writer's ``unhelpful``."""

        def give() -> FeedbackReport:
            (_, own), *scopes = self.access.readable(ctx)  # a team fact recall returned is the team's to reinforce
            rights = self.access.rights(own)
            shared = [(owner, rights.get(scope) == "write") for scope, owner in scopes]
            return apply_feedback(
                self.governance, self.receipts, own, receipt, used=used, unhelpful=unhelpful, shared=shared
            )

        return await run_blocking(give)

    # -- context block ----------------------------------------------------------------------

    async def format_context(self, ctx: MemoryContext, input: str, *, max_tokens: int | None = None) -> str:
        """The per-turn ``<memory>`` block for ``input``, a section per tier, within ``max_tokens``."""
        checked_context(ctx)
        return await run_blocking(self.format_context_sync, ctx, input, max_tokens=max_tokens)

    def format_context_sync(self, ctx: MemoryContext, input: str, *, max_tokens: int | None = None) -> str:
        """The blocking body of :meth:`format_context`."""
        readable = self.access.readable(ctx)
        checked_string(input, "input")
        budget = max_tokens if max_tokens is not None else self.max_context_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 16:
            raise InvalidArgumentError("max_tokens must be an int of at least 16")
        wanted = [s for s in self.preset.sections if s in self.enabled_tiers() or s == "relation"]
        sections: dict[str, list[MemoryItem]] = {s: [] for s in wanted}
        search = [t for t in self.enabled_tiers() if t in wanted and t != "digest"]
        if search and input.strip():
            input = self.tiers.secrets.text(input)  # embedded, maybe by a provider: as the captured turn will say it
            (_, own), *shared = [(label, owner) for label, owner in readable if not label.startswith("agent:")]
            # One ranking over every scope read: the best 24 of them all, each scope searched as deep as one.
            for item in self.search.recall(own, input, limit=24, tiers=search, subject=None, shared=shared):
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
        for label, owner in readable:
            if label == ctx.agent_scope:  # the agent's procedures: all of them, most confident first
                procedures = sorted(self.tiers.facts(owner), key=lambda f: -f.confidence)[:12]
                sections["procedures"] = [labelled(self.item(f, now), label) for f in procedures]
                wanted = ["procedures", *wanted] if procedures else wanted
        return render_context(sections, order=wanted, max_tokens=budget, count=self.token_counter)

    # -- tools ------------------------------------------------------------------------------

    def tools(self, ctx: MemoryContext, *, write: bool = False) -> Toolset:
        """Tools bound to ``ctx``; arguments can never change whose memory they read.

        ``write``: the agent's write tools, which only the write side offers (``system(...).tools``).
        """
        self.access.check(ctx)
        if write is not False:
            raise ConfigurationError(
                "a capability is the read side and offers no write tools: use system(...).tools(ctx, write=True)"
            )
        return offer(read_tools(self, ctx), chosen=self.preset.tools, write=False, options=self.tool_options)

    # -- the tiers, one by one (memory/_read/_async_tiers.py: each the async twin of the Tiers / Relations method) --

    add_alias = delegate_async("async_tiers", AsyncTiers.add_alias)
    aliases = delegate_async("async_tiers", AsyncTiers.aliases)
    working_memory = delegate_async("async_tiers", AsyncTiers.working_memory)
    add_working_memory = delegate_async("async_tiers", AsyncTiers.add_working_memory)
    add_episode = delegate_async("async_tiers", AsyncTiers.add_episode)
    recent_episodes = delegate_async("async_tiers", AsyncTiers.recent_episodes)
    facts = delegate_async("async_tiers", AsyncTiers.facts)
    add_semantic_fact = delegate_async("async_tiers", AsyncTiers.add_semantic_fact)
    remember = delegate_async("async_tiers", AsyncTiers.remember)
    set_digest = delegate_async("async_tiers", AsyncTiers.set_digest)
    latest_digest = delegate_async("async_tiers", AsyncTiers.latest_digest)
    connections = delegate_async("async_tiers", AsyncTiers.connections)
    relate = delegate_async("async_tiers", AsyncTiers.relate)
    ego_graph = delegate_async("async_tiers", AsyncTiers.ego_graph)

    # -- inspect (the governance component, memory/_govern/_governance.py) --------------------------

    async def get(self, ctx: MemoryContext, id: str) -> MemoryItem:
        """One memory of any tier (or a captured turn) by id, the user's or of a shared scope the context reads;
        MemoryNotFoundError when neither."""
        return await run_blocking(self._in_readable, ctx, id, self.governance.get_sync)

    async def history(self, ctx: MemoryContext, id: str) -> list[MemoryVersion]:
        """Every version of a memory, oldest first, with validity times and the captured turns behind each."""
        return await run_blocking(self._in_readable, ctx, id, self.governance.history_sync)

    async def subjects(self, ctx: MemoryContext) -> list[str]:
        """The canonical subjects the user's memories are about."""
        return await self.governance.subjects(await self._checked(ctx))

    async def stats(self, ctx: MemoryContext) -> MemoryStats:
        """Counts per tier and status, pending work, and the store's bytes on disk."""
        return await self.governance.stats(await self._checked(ctx))

    async def export(self, ctx: MemoryContext, destination: Destination) -> ExportReport:
        """Write the user's memory as JSON Lines (a header, then every record) to a path or text file."""
        return await self.portability.export(await self._checked(ctx), destination)

    async def _checked(self, ctx: MemoryContext) -> MemoryContext:
        """``ctx``, once :meth:`Access.check` passed it (off the event loop: it reads the grants)."""
        return await run_blocking(self.access.check, ctx)

    def _in_readable(self, ctx: MemoryContext, id: str, read: Callable[[MemoryContext, str], T]) -> T:
        """``read`` of the first readable scope (the user's own first) that has ``id``."""
        readable = self.access.readable(ctx)
        for _, owner in readable[:-1]:
            try:
                return read(owner, id)
            except MemoryNotFoundError:
                continue
        try:
            return read(readable[-1][1], id)
        except MemoryNotFoundError:  # the message names the user, never a scope the id was looked for in
            raise MemoryNotFoundError(
                f"no memory {id!r} for user {ctx.user_id!r} in namespace {ctx.namespace!r}"
            ) from None

    async def list(  # last in the class: below it, ``list`` in an annotation would name this method
        self,
        ctx: MemoryContext,
        *,
        tier: Tier | Sequence[Tier] | None = None,
        subject: str | None = None,
        status: str | Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
        categories: Sequence[str] | None = None,
        scope: str | None = None,
    ) -> MemoryPage:
        """The user's memories oldest first, a page at a time: pass ``next_cursor`` (``prev_cursor``) back for the
        next (previous) page; ``total`` and ``offset`` say where the page stands.

        ``where``, ``since``, ``until`` and ``categories``: only memories from turns captured with matching
        metadata, said in that window, or labelled with one of those categories, as for :meth:`recall`.
        ``scope``: list a shared scope the context reads (``"team:eng"``) instead of the user's own.
        """
        owner = dict(self.access.readable(ctx)).get("user" if scope is None else scope)
        if owner is None:
            raise AccessDeniedError(f"the context does not read {scope!r}: name it in read_scopes")
        return await self.governance.list_memories(
            owner, tier=tier, subject=subject, status=status, where=where, since=since, until=until, limit=limit,
            cursor=cursor, categories=categories,
        )  # fmt: skip


def read_tools(capability: MemoryCapability, ctx: MemoryContext) -> dict[str, MemoryTool]:
    """The tools of the table the read side implements, bound to ``ctx`` by name, whether offered or not
    (``tools()`` and the write side choose among them with :func:`~tiermem.memory._tools.offer`)."""

    vocabulary = capability.vocabulary

    async def recall(args: RecallArguments) -> list[RankedMemoryItem]:
        # checked here too: REST validates its body with the table's model, not the narrowed one
        categories = checked_categories(args.categories, vocabulary=vocabulary)
        return await capability.recall(
            ctx, args.query, limit=args.limit, tiers=args.tiers, subject=args.subject,
            since=args.since, until=args.until, categories=None if categories is None else sorted(categories),
        )  # fmt: skip

    recall_tool = RECALL.bind(recall, recall_arguments(vocabulary))
    return {RECALL.name: recall_tool, CONNECT.name: capability.relations.connect_tool(ctx)}
