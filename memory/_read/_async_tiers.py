"""The tiers one by one, async: a part of the read side, each method the async twin of the
:class:`~tiermem.memory._tiers._tiers.Tiers` or :class:`~tiermem.memory._relations._relations.Relations` method of its
name, its arguments checked, run off the event loop.

:class:`~tiermem.memory._read._capability.MemoryCapability` holds an :class:`AsyncTiers` and answers these
methods with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .._blocking import run_blocking
from .._errors import ConfigurationError, InvalidArgumentError
from .._records import Alias, Digest, Edge, Episode, Fact, MemoryContext, WorkingEntry
from .._relations import Relations
from .._scope import checked_context, checked_string
from .._subjects import USER
from .._tiers import Tiers

__all__ = ["AsyncTiers"]


class AsyncTiers:
    """The typed tier helpers of a capability, over its tier repository and relations graph."""

    def __init__(self, *, tiers: Tiers, relations: Relations) -> None:
        self.tiers = tiers
        self.relations = relations

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
        if self.tiers.semantic is None:
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
            self.relations.connections, checked_context(ctx), checked_string(entity, "entity"),
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
            self.relations.relate, checked_context(ctx), checked_string(a, "a"), checked_string(b, "b"),
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
            self.relations.ego_graph, checked_context(ctx), checked_string(entity, "entity"), radius=radius,
            as_of=as_of, include_history=include_history,
        )  # fmt: skip
