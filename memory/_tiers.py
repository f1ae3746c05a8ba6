"""Typed helpers that add and read each tier directly (for application code, pipelines and tests)."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import numpy as np

from ._clock import Clock
from ._decay import reinforce, turn_decay
from ._embedders import Embedder
from ._errors import InvalidArgumentError
from ._identity import fact_id, stable_id
from ._options import SemanticOptions, WorkingOptions
from ._records import Alias, Digest, Episode, Fact, MemoryContext, Turn, WorkingEntry
from ._store import Store, TableName, Where
from ._subjects import USER, canonical_subject

__all__ = ["TierWriter"]

T = TypeVar("T")
MAX_TEXT = 8000
_CACHE_SIZE = 4096


def _text(value: str, what: str = "text") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{what} must be a non-empty string")
    if len(value) > MAX_TEXT:
        raise InvalidArgumentError(f"{what} is longer than {MAX_TEXT} characters")
    return " ".join(value.split())


class TierWriter:
    """Per-tier reads and writes over a :class:`Store`; every method takes its scope from ``ctx``."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        clock: Clock,
        working: WorkingOptions | None,
        semantic: SemanticOptions | None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.working = working
        self.semantic = semantic
        self._derived: dict[tuple[str, str, str], tuple[int, Any]] = {}
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._vectors_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed through a small LRU cache: status rewrites of a record never pay for its vector twice."""
        with self._vectors_lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        fresh = self.embedder.embed(missing) if missing else None
        with self._vectors_lock:
            for i, text in enumerate(missing):
                assert fresh is not None
                self._vectors[text] = fresh[i]
            for text in texts:
                self._vectors.move_to_end(text)
            rows = [self._vectors[t] for t in texts]
            while len(self._vectors) > _CACHE_SIZE:
                self._vectors.popitem(last=False)
        return np.stack(rows) if rows else np.zeros((0, self.embedder.dimensions), dtype=np.float32)

    # -- scope and subjects -----------------------------------------------------------------

    @staticmethod
    def scope(ctx: MemoryContext) -> dict[str, str]:
        return {"namespace": ctx.namespace, "user_id": ctx.user_id}

    def canonical(self, subject: str, aliases: Mapping[str, str] | None = None) -> str:
        return canonical_subject(subject, aliases=aliases)

    def _per_user(self, table: TableName, ctx: MemoryContext, load: Callable[[], T]) -> T:
        """A per-user value derived from one table, cached until that table's version moves."""
        key = (table, ctx.namespace, ctx.user_id)
        version = self.store.version(table)
        cached = self._derived.get(key)
        if cached is not None and cached[0] == version:
            return cast(T, cached[1])
        value = load()
        self._derived[key] = (version, value)
        return value

    def aliases_sync(self, ctx: MemoryContext) -> dict[str, str]:
        """Display name (lowercased) -> subject, for this user."""
        return dict(
            self._per_user(
                "aliases",
                ctx,
                lambda: {a.name: a.subject for a in self.store.query("aliases", Where(eq=self.scope(ctx)))},
            )
        )

    def known_subjects_sync(self, ctx: MemoryContext) -> list[str]:
        """Subjects with facts for this user."""
        return list(
            self._per_user(
                "facts", ctx, lambda: self.store.column_values("facts", Where(eq=self.scope(ctx)), "subject")
            )
        )

    def add_alias_sync(self, ctx: MemoryContext, name: str, subject: str = USER) -> Alias:
        """Record that ``name`` (e.g. "Caroline") stands for ``subject`` (by default the user)."""
        display = _text(name, "name").lower()
        canon = canonical_subject(subject)
        alias = Alias(
            id=stable_id("alias", ctx.namespace, ctx.user_id, display),
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            name=display,
            subject=canon,
            created_at=self.clock.now(),
        )
        self.store.upsert("aliases", [alias])
        return alias

    async def add_alias(self, ctx: MemoryContext, name: str, subject: str = USER) -> Alias:
        return await asyncio.to_thread(self.add_alias_sync, ctx, name, subject)

    async def aliases(self, ctx: MemoryContext) -> dict[str, str]:
        return await asyncio.to_thread(self.aliases_sync, ctx)

    def _subject(self, ctx: MemoryContext, subject: str) -> str:
        return canonical_subject(subject, aliases=self.aliases_sync(ctx))

    # -- the session log --------------------------------------------------------------------

    def put_turns_sync(self, turns: Sequence[Turn], *, new: bool = False) -> None:
        """Journal turns; the log is searchable, so each turn carries the vector of its text."""
        if turns:
            write = self.store.insert if new else self.store.upsert
            write("turns", list(turns), self.embed([t.text for t in turns]))

    # -- working ----------------------------------------------------------------------------

    def session_seq(self, ctx: MemoryContext) -> int:
        """The latest turn number seen in this session's working memory."""
        return max((e.seq for e in self.working_memory_sync(ctx, include_inactive=True)), default=0)

    def working_memory_sync(self, ctx: MemoryContext, *, include_inactive: bool = False) -> list[WorkingEntry]:
        if ctx.session_id is None:
            return []
        statuses = ["active", "overflow", "closed"] if include_inactive else ["active"]
        where = Where(eq={**self.scope(ctx), "session_id": ctx.session_id}, isin={"status": statuses})
        entries: list[WorkingEntry] = self.store.query("working", where)
        return sorted(entries, key=lambda e: (e.seq, e.created_at, e.id))

    async def working_memory(self, ctx: MemoryContext, *, include_inactive: bool = False) -> list[WorkingEntry]:
        return await asyncio.to_thread(self.working_memory_sync, ctx, include_inactive=include_inactive)

    def add_working_entries_sync(self, ctx: MemoryContext, entries: Sequence[WorkingEntry]) -> list[WorkingEntry]:
        """Write entries keeping at most ``capacity`` active by effective salience, in one write.

        Entries pushed out become "overflow": no longer in the active set, still in the session log
        (and so in the episode).
        """
        if not entries:
            return []
        capacity = self.working.capacity if self.working else 7
        half = self.working.salience_half_life if self.working else 8.0
        active = {e.id: e for e in self.working_memory_sync(ctx)}
        active.update({e.id: e for e in entries})
        now_seq = max(e.seq for e in active.values())
        ranked = sorted(
            active.values(),
            key=lambda e: (-turn_decay(e.salience, now_seq - e.seq, half_life_turns=half), -e.seq, e.id),
        )
        pushed = {e.id for e in ranked[capacity:]}
        new_ids = {e.id for e in entries}
        now = self.clock.now()
        writes = [e.model_copy(update={"status": "overflow"}) if e.id in pushed else e for e in entries]
        writes += [
            e.model_copy(update={"status": "overflow", "updated_at": now})
            for e in ranked[capacity:]
            if e.id not in new_ids
        ]
        self.store.upsert("working", writes, self.embed([e.text for e in writes]))
        return writes[: len(entries)]

    def add_working_memory_sync(
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
        if ctx.session_id is None:
            raise InvalidArgumentError("working memory needs a MemoryContext with a session_id")
        body = _text(text)
        canon = self._subject(ctx, subject)
        now = self.clock.now()
        entry = WorkingEntry(
            id=stable_id("wm", ctx.namespace, ctx.user_id, ctx.session_id, canon, body.lower()),
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
            subject=canon,
            kind=kind,
            text=body,
            salience=salience,
            seq=self.session_seq(ctx) if seq is None else seq,
            created_at=now,
            updated_at=now,
            provenance=tuple(provenance),
            metadata=dict(metadata or {}),
        )
        self.add_working_entries_sync(ctx, [entry])
        return entry

    async def add_working_memory(self, ctx: MemoryContext, text: str, **kwargs: Any) -> WorkingEntry:
        return await asyncio.to_thread(self.add_working_memory_sync, ctx, text, **kwargs)

    # -- episodic ---------------------------------------------------------------------------

    def add_episode_sync(self, episode: Episode) -> Episode:
        self.store.upsert("episodes", [episode], self.embed([episode.summary]))
        return episode

    async def add_episode(self, episode: Episode) -> Episode:
        return await asyncio.to_thread(self.add_episode_sync, episode)

    def episodes_sync(self, ctx: MemoryContext, *, statuses: Sequence[str] | None = None) -> list[Episode]:
        where = Where(eq=self.scope(ctx), isin={"status": list(statuses)} if statuses else None)
        episodes: list[Episode] = self.store.query("episodes", where)
        return sorted(episodes, key=lambda e: (e.ended_at, e.id), reverse=True)

    def recent_episodes_sync(self, ctx: MemoryContext, *, limit: int = 5) -> list[Episode]:
        return self.episodes_sync(ctx, statuses=["pending", "consolidated"])[:limit]

    async def recent_episodes(self, ctx: MemoryContext, *, limit: int = 5) -> list[Episode]:
        return await asyncio.to_thread(self.recent_episodes_sync, ctx, limit=limit)

    # -- semantic ---------------------------------------------------------------------------

    def facts_sync(
        self, ctx: MemoryContext, *, subject: str | None = None, include_inactive: bool = False
    ) -> list[Fact]:
        eq = self.scope(ctx)
        if subject is not None:
            eq["subject"] = self._subject(ctx, subject)
        where = Where(eq=eq, isin=None if include_inactive else {"status": ["active"]})
        facts: list[Fact] = self.store.query("facts", where)
        return sorted(facts, key=lambda f: (f.created_at, f.id))

    async def facts(
        self, ctx: MemoryContext, *, subject: str | None = None, include_inactive: bool = False
    ) -> list[Fact]:
        return await asyncio.to_thread(self.facts_sync, ctx, subject=subject, include_inactive=include_inactive)

    def put_facts_sync(self, facts: Sequence[Fact]) -> None:
        if facts:
            self.store.upsert("facts", list(facts), self.embed([f.text for f in facts]))

    def add_semantic_fact_sync(
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
        """Add a fact; the same fact again reinforces it instead of duplicating it."""
        body = _text(text)
        canon = self._subject(ctx, subject)
        now = self.clock.now()
        fid = fact_id(ctx.namespace, ctx.user_id, canon, body)
        existing: list[Fact] = self.store.get("facts", Where(eq=self.scope(ctx)), [fid])
        fact: Fact
        if existing and existing[0].status == "active":
            fact = reinforce(existing[0], confidence=confidence, now=now, provenance=provenance)
        else:
            fact = Fact(
                id=fid,
                namespace=ctx.namespace,
                user_id=ctx.user_id,
                subject=canon,
                text=body,
                confidence=confidence,
                created_at=now,
                updated_at=now,
                reinforced_at=now,
                valid_from=valid_from,
                provenance=tuple(provenance),
                metadata=dict(metadata or {}),
            )
        self.put_facts_sync([fact])
        return fact

    async def add_semantic_fact(self, ctx: MemoryContext, text: str, **kwargs: Any) -> Fact:
        return await asyncio.to_thread(self.add_semantic_fact_sync, ctx, text, **kwargs)

    async def remember(self, ctx: MemoryContext, text: str, *, subject: str = USER) -> Fact:
        """Store something the application was told to remember, as a high-confidence fact."""
        return await self.add_semantic_fact(
            ctx, text, subject=subject, confidence=0.95, metadata={"source": "remember"}
        )

    # -- digest -----------------------------------------------------------------------------

    def set_digest_sync(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> Digest:
        """Replace the user's digest (one per user; the previous text is kept in metadata)."""
        now = self.clock.now()
        previous = self.latest_digest_sync(ctx)
        meta = {**(metadata or {}), "revision": (previous.metadata.get("revision", 0) + 1) if previous else 1}
        digest = Digest(
            id=stable_id("digest", ctx.namespace, ctx.user_id),
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            text=_text(text),
            created_at=previous.created_at if previous else now,
            updated_at=now,
            provenance=tuple(provenance),
            metadata=meta,
        )
        self.store.upsert("digests", [digest], self.embed([digest.text]))
        return digest

    async def set_digest(self, ctx: MemoryContext, text: str, **kwargs: Any) -> Digest:
        return await asyncio.to_thread(self.set_digest_sync, ctx, text, **kwargs)

    def latest_digest_sync(self, ctx: MemoryContext) -> Digest | None:
        found = self.store.get("digests", Where(eq=self.scope(ctx)), [stable_id("digest", ctx.namespace, ctx.user_id)])
        return found[0] if found else None

    async def latest_digest(self, ctx: MemoryContext) -> Digest | None:
        return await asyncio.to_thread(self.latest_digest_sync, ctx)
