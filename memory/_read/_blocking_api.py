"""``BlockingCapability``: the type of ``MemoryCapability.blocking()``, each async method's sync twin.

Declared, not derived: :class:`~tiermem.memory._blocking.Blocking` answers any name at run time, so mypy
learns the facade's methods from here. ``tests/memory/test_blocking_types.py`` checks that this lists
every public async method of the capability with the same parameters and result, so it cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from .._blocking import Blocking
from .._govern import Destination, ExportReport, FeedbackReport, MemoryPage, MemoryStats, MemoryVersion, RecallResult
from .._records import Alias, Digest, Edge, Episode, Fact, MemoryContext, MemoryItem, Tier, WorkingEntry
from .._subjects import USER

__all__ = ["BlockingCapability"]


class BlockingCapability(Protocol):
    """The read side's sync facade: ``capability.blocking()``; each method blocks until its async twin is done."""

    def tools(self, ctx: MemoryContext, *, write: bool = False) -> Blocking:
        """The capability's tools bound to ``ctx``, their ``execute`` blocking too."""
        ...

    def recall(
        self,
        ctx: MemoryContext,
        cue: str | None = None,
        *,
        limit: int = 10,
        tiers: Sequence[str] | None = None,
        subject: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> RecallResult: ...

    def feedback(
        self, ctx: MemoryContext, receipt: str, *, used: Sequence[str] = (), unhelpful: Sequence[str] = ()
    ) -> FeedbackReport: ...

    def format_context(self, ctx: MemoryContext, input: str, *, max_tokens: int | None = None) -> str: ...

    def get(self, ctx: MemoryContext, id: str) -> MemoryItem: ...

    def history(self, ctx: MemoryContext, id: str) -> list[MemoryVersion]: ...

    def subjects(self, ctx: MemoryContext) -> list[str]: ...

    def stats(self, ctx: MemoryContext) -> MemoryStats: ...

    def export(self, ctx: MemoryContext, destination: Destination) -> ExportReport: ...

    def add_alias(self, ctx: MemoryContext, name: str, subject: str = USER) -> Alias: ...

    def aliases(self, ctx: MemoryContext) -> dict[str, str]: ...

    def working_memory(self, ctx: MemoryContext, *, include_inactive: bool = False) -> list[WorkingEntry]: ...

    def add_working_memory(
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
    ) -> WorkingEntry: ...

    def add_episode(self, episode: Episode) -> Episode: ...

    def recent_episodes(self, ctx: MemoryContext, *, limit: int = 5) -> list[Episode]: ...

    def facts(
        self, ctx: MemoryContext, *, subject: str | None = None, include_inactive: bool = False
    ) -> list[Fact]: ...

    def add_semantic_fact(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        confidence: float = 0.8,
        provenance: Sequence[str] = (),
        valid_from: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Fact: ...

    def remember(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> Fact: ...

    def set_digest(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> Digest: ...

    def latest_digest(self, ctx: MemoryContext) -> Digest | None: ...

    def connections(
        self, ctx: MemoryContext, entity: str, *, as_of: datetime | None = None, include_history: bool = False
    ) -> list[Edge]: ...

    def relate(
        self,
        ctx: MemoryContext,
        a: str,
        b: str,
        *,
        max_hops: int | None = None,
        as_of: datetime | None = None,
        include_history: bool = False,
    ) -> list[Edge] | None: ...

    def ego_graph(
        self,
        ctx: MemoryContext,
        entity: str,
        *,
        radius: int = 1,
        as_of: datetime | None = None,
        include_history: bool = False,
    ) -> dict[str, Any]: ...

    def list(
        self,
        ctx: MemoryContext,
        *,
        tier: Tier | Sequence[Tier] | None = None,
        subject: str | None = None,
        status: str | Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage: ...
