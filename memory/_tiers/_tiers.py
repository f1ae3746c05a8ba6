"""The tier repository: every read and write of the store's tables, scoped by a ``MemoryContext``.

Blocking by design (each call is a LanceDB round trip and maybe an embedding); the async facades
run it through :func:`~tiermem.memory._blocking.run_blocking`. Which text of a record is embedded
is decided once, by :func:`embedded_text` (a turn's two sides: :func:`embedded_vectors`). The session
log and the working tier are parts it holds (:mod:`._session_log`, :mod:`._working_tier`), their
methods answered here by name.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import numpy as np

from .._clock import Clock
from .._decay import reinforce
from .._delegation import delegate
from .._embed import Embedder
from .._identity import alias_id, digest_id, fact_id
from .._options import SemanticOptions, WorkingOptions
from .._record_text import Embedded, checked_text, embedded_text, embedded_vectors
from .._records import Alias, Digest, Edge, Episode, Fact, MemoryContext, Turn, shared_kind
from .._scope import checked_context, scope
from .._secrets import Redactor
from .._store import Store, TableName, Where, user_writes
from .._subjects import USER, canonical_subject
from .._text import encodable_values
from ._session_log import SessionLog
from ._working_tier import WorkingTier

__all__ = ["Tiers", "checked_context", "embedded_text", "embedded_vectors", "scope"]

T = TypeVar("T")
_CACHE_SIZE = 4096


class Tiers:
    """Per-tier reads and writes over a :class:`Store`; every method takes its scope from ``ctx``."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        clock: Clock,
        working: WorkingOptions | None,
        semantic: SemanticOptions | None,
        secrets: Redactor | None = None,
    ) -> None:
        self.store = store
        self.secrets = secrets or Redactor()
        """Replaces secrets in what is written (a turn's messages, a fact's text) before it is stored or embedded."""
        self.embedder = embedder
        self.clock = clock
        self.working = working
        self.semantic = semantic
        self._derived: dict[tuple[str, str, str], tuple[int, Any]] = {}
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._vectors_lock = threading.Lock()
        self.session_log = SessionLog(self)
        self.working_tier = WorkingTier(self)

    scope = staticmethod(scope)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed through a small LRU memo: a status rewrite of a record, or an observation repeated as a fact,
        never pays for the same text twice. Keyed by the embedder's id and the exact text, so it never serves
        a vector of another text or another embedder; bounded (``_CACHE_SIZE`` texts)."""
        model = self.embedder.id
        unique = list(dict.fromkeys(texts))
        with self._vectors_lock:
            known = {t: v for t in unique if (v := self._vectors.get((model, t))) is not None}
            for text in known:
                self._vectors.move_to_end((model, text))
        missing = [t for t in unique if t not in known]
        if missing:
            fresh = self.embedder.embed(missing)
            with self._vectors_lock:
                for text, vector in zip(missing, fresh, strict=True):
                    self._vectors[(model, text)] = known[text] = vector
                while len(self._vectors) > _CACHE_SIZE:
                    self._vectors.popitem(last=False)
        # Rows come from this call's own lookups: another thread may evict them from the memo meanwhile.
        rows = [known[t] for t in texts]
        return np.stack(rows) if rows else np.zeros((0, self.embedder.dimensions), dtype=np.float32)

    def write(self, table: TableName, records: Sequence[Embedded], *, new: bool = False) -> None:
        """Upsert (or, for a fresh turn, insert) records with the vectors of their embedded text."""
        if records:
            write = self.store.insert if new else self.store.upsert
            write(table, list(records), embedded_vectors(records, self.embed))

    def owners(self) -> list[tuple[str, str]]:
        """(namespace, user_id) of everyone with facts, working memory or episodes: users and shared scopes."""
        return sorted({pair for table in ("facts", "working", "episodes") for pair in self.store.scopes(table)})

    def users(self) -> list[MemoryContext]:
        """Every user with facts, working memory or episodes in the store (not a shared scope's pseudo-owner)."""
        return [MemoryContext(namespace=ns, user_id=u) for ns, u in self.owners() if shared_kind(u) is None]

    # -- subjects ---------------------------------------------------------------------------

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

    def aliases(self, ctx: MemoryContext) -> dict[str, str]:
        """Display name (lowercased) -> subject, for this user."""
        return dict(
            self._per_user(
                "aliases", ctx, lambda: {a.name: a.subject for a in self.store.query("aliases", Where(eq=scope(ctx)))}
            )
        )

    def known_subjects(self, ctx: MemoryContext) -> list[str]:
        """Subjects with facts for this user."""
        return list(
            self._per_user("facts", ctx, lambda: self.store.column_values("facts", Where(eq=scope(ctx)), "subject"))
        )

    def add_alias(self, ctx: MemoryContext, name: str, subject: str = USER) -> Alias:
        """Record that ``name`` (e.g. "Caroline") stands for ``subject`` (by default the user)."""
        display = checked_text(name, "name").lower()
        alias = Alias(
            id=alias_id(ctx, name=display),
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            name=display,
            subject=canonical_subject(subject),
            created_at=self.clock.now(),
        )
        self.store.upsert("aliases", [alias])  # looked up by name, never searched: no vector
        return alias

    def subject(self, ctx: MemoryContext, subject: str) -> str:
        """``subject`` canonicalised, a display name of this user's resolved through their aliases."""
        return canonical_subject(subject, aliases=self.aliases(ctx))

    # -- the session log (memory/_tiers/_session_log.py) -------------------------------------------

    put_turns = delegate("session_log", SessionLog.put_turns)
    journal = delegate("session_log", SessionLog.journal)
    journal_new = delegate("session_log", SessionLog.journal_new)
    journal_many = delegate("session_log", SessionLog.journal_many)
    settle_seq = delegate("session_log", SessionLog.settle_seq)
    session_turns = delegate("session_log", SessionLog.session_turns)
    sessions_turns = delegate("session_log", SessionLog.sessions_turns)
    pending_turns = delegate("session_log", SessionLog.pending_turns)

    # -- working (memory/_tiers/_working_tier.py) ---------------------------------------------------

    session_seq = delegate("working_tier", WorkingTier.session_seq)
    working_memory = delegate("working_tier", WorkingTier.working_memory)
    turn_entries = delegate("working_tier", WorkingTier.turn_entries)
    session_entries = delegate("working_tier", WorkingTier.session_entries)
    active_working = delegate("working_tier", WorkingTier.active_working)
    put_working = delegate("working_tier", WorkingTier.put_working)
    add_working_entries = delegate("working_tier", WorkingTier.add_working_entries)
    add_working_memory = delegate("working_tier", WorkingTier.add_working_memory)

    # -- episodic ---------------------------------------------------------------------------

    def add_episode(self, episode: Episode) -> Episode:
        """Write one episode (its scope is its own); secrets in its summary are redacted."""
        episode = self.secrets.record(MemoryContext(namespace=episode.namespace, user_id=episode.user_id), episode)
        self.put_episodes([episode])
        return episode

    def put_episodes(self, episodes: Sequence[Episode]) -> None:
        self.write("episodes", episodes)

    def episode(self, ctx: MemoryContext, episode_id: str) -> Episode | None:
        found = self.store.get("episodes", Where(eq=scope(ctx)), [episode_id])
        return found[0] if found else None

    def episodes(self, ctx: MemoryContext, *, statuses: Sequence[str] | None = None) -> list[Episode]:
        """This user's episodes, latest first (only ``statuses`` when given)."""
        where = Where(eq=scope(ctx), isin={"status": list(statuses)} if statuses else None)
        episodes = self.store.query("episodes", where)
        return sorted(episodes, key=lambda e: (e.ended_at, e.id), reverse=True)

    def unfinished_episodes(self, ctx: MemoryContext | None = None, *, include_parked: bool = False) -> list[Episode]:
        """Episodes whose encoding failed or that wait for consolidation (every user's without ``ctx``)."""
        statuses = ["failed", "pending", "parked"] if include_parked else ["failed", "pending"]
        episodes = self.store.query("episodes", Where(eq=scope(ctx) if ctx else {}, isin={"status": statuses}))
        return episodes

    def recent_episodes(self, ctx: MemoryContext, *, limit: int = 5) -> list[Episode]:
        """The latest live episodes."""
        return self.episodes(ctx, statuses=["pending", "consolidated"])[:limit]

    # -- semantic ---------------------------------------------------------------------------

    def facts(self, ctx: MemoryContext, *, subject: str | None = None, include_inactive: bool = False) -> list[Fact]:
        """This user's facts, oldest first (active only unless ``include_inactive``)."""
        eq = scope(ctx)
        if subject is not None:
            eq["subject"] = self.subject(ctx, subject)
        where = Where(eq=eq, isin=None if include_inactive else {"status": ["active"]})
        facts = self.store.query("facts", where)
        return sorted(facts, key=lambda f: (f.created_at, f.id))

    def nearest_facts(
        self, ctx: MemoryContext, vector: np.ndarray, *, subjects: Sequence[str], limit: int
    ) -> list[Fact]:
        """The active facts of ``subjects`` nearest to ``vector``."""
        where = Where(eq=scope(ctx), isin={"status": ["active"], "subject": list(subjects)})
        hits = self.store.vector_search("facts", vector, where, limit=limit)
        return [hit.record for hit in hits if isinstance(hit.record, Fact)]  # all of them: the table holds facts

    def put_facts(self, facts: Sequence[Fact]) -> None:
        self.write("facts", facts)

    def add_semantic_fact(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        confidence: float = 0.8,
        provenance: Sequence[str] = (),
        valid_from: datetime | None = None,
        metadata: Mapping[str, object] | None = None,
    ) -> Fact:
        """Add a fact; the same fact again reinforces it instead of duplicating it. Secrets in it are redacted."""
        body = self.secrets.for_user(ctx, checked_text(text))
        encodable_values(metadata, "metadata")
        canon = self.subject(ctx, subject)
        now = self.clock.now()
        fid = fact_id(ctx, subject=canon, text=body)
        with user_writes(self.store, ctx):  # a pin or correction made meanwhile is read, not overwritten
            existing = self.store.get("facts", Where(eq=scope(ctx)), [fid])
            fact: Fact
            if existing and existing[0].status == "active":
                fact = reinforce(existing[0], confidence=confidence, now=now, provenance=provenance)
            else:
                fact = Fact.new(
                    ctx,
                    subject=canon,
                    text=body,
                    now=now,
                    confidence=confidence,
                    valid_from=valid_from,
                    provenance=provenance,
                    metadata=metadata,
                )
            self.put_facts([fact])
            return fact

    # -- relations (the graph rules live in Relations) ---------------------------------------

    def edges(self, ctx: MemoryContext) -> list[Edge]:
        edges = self.store.query("edges", Where(eq=scope(ctx)))
        return sorted(edges, key=lambda e: e.id)

    def put_edges(self, edges: Sequence[Edge]) -> None:
        self.write("edges", edges)

    def delete_edges(self, ctx: MemoryContext, ids: Sequence[str]) -> None:
        if ids:
            self.store.delete("edges", Where(eq=scope(ctx), isin={"id": list(ids)}))

    # -- digest -----------------------------------------------------------------------------

    def set_digest(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, object] | None = None,
    ) -> Digest:
        """Replace the user's digest (one per user; the revision counts up in metadata)."""
        now = self.clock.now()
        previous = self.latest_digest(ctx)
        meta = {**(metadata or {}), "revision": (previous.metadata.get("revision", 0) + 1) if previous else 1}
        digest = Digest(
            id=digest_id(ctx),
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            text=self.secrets.for_user(ctx, checked_text(text)),
            created_at=previous.created_at if previous else now,
            updated_at=now,
            provenance=tuple(provenance),
            metadata=meta,
        )
        self.write("digests", [digest])
        return digest

    def latest_digest(self, ctx: MemoryContext) -> Digest | None:
        found = self.store.get("digests", Where(eq=scope(ctx)), [digest_id(ctx)])
        return found[0] if found else None

    # -- episodic TTL that keeps cited turns (which turns stay is the janitor's rule) --------

    def expire_episodes(
        self, ctx: MemoryContext, episodes: Sequence[Episode], *, keep: Collection[str] = ()
    ) -> list[str]:
        """Expire episodes: delete them, their turns and their sessions' closed entries, except turns in ``keep``.

        A kept turn is compacted to its messages (context, metadata and observer state dropped), and
        its episode stays as a tombstone: status "expired", no summary, ``provenance`` the kept turns,
        so the session is never encoded again from them and the next run finds them. ``episodes`` may
        hold tombstones; one left with no kept turn is deleted. Writes only what changes; returns the
        ids of the turns deleted.
        """
        if not episodes:
            return []
        where = scope(ctx)
        covered = list(dict.fromkeys(t for e in episodes for t in e.provenance))
        kept = self.store.get("turns", Where(eq=where), [t for t in covered if t in keep])
        self.put_turns([c for t in kept if (c := _compacted(t)) != t])
        kept_ids = {t.id for t in kept}
        gone = [t for t in covered if t not in kept_ids]
        # Every delete is a new table version, even of nothing: delete only rows that are there.
        if gone and self.store.count("turns", Where(eq=where, isin={"id": gone})):
            self.store.delete("turns", Where(eq=where, isin={"id": gone}))
        sessions = [e.session_id for e in episodes if e.status != "expired"]
        closed = Where(eq={**where, "status": "closed"}, isin={"session_id": sessions})
        if sessions and self.store.count("working", closed):
            self.store.delete("working", closed)
        now = self.clock.now()
        tombstones: list[Episode] = []
        dropped: list[str] = []
        for episode in episodes:
            mine = tuple(t for t in episode.provenance if t in kept_ids)
            if not mine:
                dropped.append(episode.id)
            elif episode.status != "expired" or mine != episode.provenance:
                tombstones.append(
                    episode.model_copy(
                        update={"status": "expired", "summary": "", "provenance": mine, "metadata": {},
                                "error": None, "error_kind": None, "error_config": None, "updated_at": now}
                    )
                )  # fmt: skip
        self.put_episodes(tombstones)
        if dropped:
            self.store.delete("episodes", Where(eq=where, isin={"id": dropped}))
        return gone


def _compacted(turn: Turn) -> Turn:
    """A turn kept past its episode's TTL only as evidence: its messages, nothing else of the capture."""
    return turn.model_copy(
        update={"context": "", "metadata": {}, "error": None, "error_kind": None, "error_config": None, "attempts": 0}
    )
