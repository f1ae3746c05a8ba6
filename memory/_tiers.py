"""The tier repository: every read and write of the store's tables, scoped by a ``MemoryContext``.

Blocking by design (each call is a LanceDB round trip and maybe an embedding); the async facades
run it through :func:`~tiermem.memory._blocking.run_blocking`. Which text of a record is embedded
is decided once, by :func:`embedded_text`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import numpy as np

from ._clock import Clock
from ._decay import reinforce, turn_decay
from ._embedders import Embedder
from ._errors import EmbedderError, InvalidArgumentError, ModelError
from ._identity import alias_id, digest_id, fact_id, working_entry_id
from ._options import SemanticOptions, WorkingOptions
from ._records import Alias, Digest, Edge, Episode, Fact, MemoryContext, Turn, WorkingEntry
from ._store import Store, TableName, Where
from ._subjects import USER, canonical_subject

__all__ = ["Tiers", "checked_context", "embedded_text", "scope"]

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_TEXT = 8000
_CACHE_SIZE = 4096
Embedded = Turn | WorkingEntry | Episode | Fact | Edge | Digest


def embedded_text(record: Embedded) -> str:
    """The text whose vector a record is stored with: an episode's summary, otherwise its text.

    A turn's text is its messages, an edge's is ``source --relation--> target``. Retrieval keys are
    not embedded: measured, broader terms in the vector cost the default embedder hit@1 and let the
    static one recall more unrelated cues (bench/RESULTS-paraphrase.md, "Retrieval keys"); they are
    searched by full text instead (:func:`~tiermem.memory._rows.search_context`).
    """
    if isinstance(record, Episode):
        return record.summary
    return record.text


def checked_context(ctx: object, *, session: str | None = None) -> MemoryContext:
    """``ctx`` if it is a MemoryContext (with a session_id when ``session`` names the caller)."""
    if not isinstance(ctx, MemoryContext):
        raise InvalidArgumentError(f"ctx must be a MemoryContext, not {type(ctx).__name__}")
    if session is not None and ctx.session_id is None:
        raise InvalidArgumentError(f"{session} needs a MemoryContext with a session_id")
    return ctx


def scope(ctx: MemoryContext) -> dict[str, str]:
    """The columns that confine a read or write to one user (checked: every repository call passes here)."""
    checked_context(ctx)
    return {"namespace": ctx.namespace, "user_id": ctx.user_id}


def _text(value: object, what: str = "text") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{what} must be a non-empty string")
    if len(value) > MAX_TEXT:
        raise InvalidArgumentError(f"{what} is longer than {MAX_TEXT} characters")
    return " ".join(value.split())


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
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.working = working
        self.semantic = semantic
        self._derived: dict[tuple[str, str, str], tuple[int, Any]] = {}
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._vectors_lock = threading.Lock()

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

    def _write(self, table: TableName, records: Sequence[Embedded], *, new: bool = False) -> None:
        """Upsert (or, for a fresh turn, insert) records with the vectors of their embedded text."""
        if records:
            write = self.store.insert if new else self.store.upsert
            write(table, list(records), self.embed([embedded_text(r) for r in records]))

    def users(self) -> list[MemoryContext]:
        """Every user with facts, working memory or episodes in the store."""
        pairs = {pair for table in ("facts", "working", "episodes") for pair in self.store.scopes(table)}
        return [MemoryContext(namespace=ns, user_id=user) for ns, user in sorted(pairs)]

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
        display = _text(name, "name").lower()
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

    # -- the session log --------------------------------------------------------------------

    def put_turns(self, turns: Sequence[Turn], *, new: bool = False) -> None:
        """Journal turns (``new``: plain inserts, for turns never written before)."""
        self._write("turns", turns, new=new)

    def journal(self, turn: Turn, *, replace: bool = False) -> bool:
        """Write a turn even when the embedder fails (a zero vector: full-text search still finds it, and
        the observer's write re-embeds it). New turns are inserted only if their id is absent, atomically
        across processes; returns whether this call wrote the turn.
        """
        try:
            vectors = self.embed([embedded_text(turn)])
        except (EmbedderError, ModelError) as exc:
            log.warning("turn %s journaled without a vector (embedder failed: %s)", turn.id, exc)
            vectors = np.zeros((1, self.embedder.dimensions), dtype=np.float32)
        if replace:
            self.store.upsert("turns", [turn], vectors)
            return True
        return self.store.insert_absent("turns", [turn], vectors) == 1

    def journal_new(self, turns: Sequence[Turn]) -> int:
        """Journal many turns in one commit and one embedding batch, each only if its id is absent, as
        :meth:`journal` does one; returns how many this call wrote."""
        return self.journal_many(turns)

    def journal_many(self, turns: Sequence[Turn], *, replace: bool = False) -> int:
        """Journal turns in one commit and one embedding batch (an import): inserted if absent, or with
        ``replace`` written as they are. An embedder failure writes zero vectors, as :meth:`journal`.
        Returns how many this call wrote."""
        if not turns:
            return 0
        try:
            vectors = self.embed([embedded_text(t) for t in turns])
        except (EmbedderError, ModelError) as exc:
            log.warning("%d turns journaled without vectors (embedder failed: %s)", len(turns), exc)
            vectors = np.zeros((len(turns), self.embedder.dimensions), dtype=np.float32)
        if replace:
            self.store.upsert("turns", turns, vectors)
            return len(turns)
        return self.store.insert_absent("turns", turns, vectors)

    def settle_seq(self, ctx: MemoryContext, turn: Turn) -> Turn:
        """Make the turn's ``seq`` unique in its session after a concurrent writer took the same one.

        Of two turns sharing a seq, the later (time, id) moves past the end as soon as it sees the
        other. The earlier one waits a moment for it to do so, then moves itself: the other may have
        returned before it could see this one. Each process moves only its own turn, so this converges
        without a lock (seq stays unique; it may skip a number).
        """
        patience = 3
        for _ in range(64):
            turns = self.session_turns(ctx, turn.session_id)
            rivals = [t for t in turns if t.seq == turn.seq and t.id != turn.id]
            if not rivals:
                return turn
            if patience and all((t.created_at, t.id) > (turn.created_at, turn.id) for t in rivals):
                patience -= 1
                time.sleep(0.02 + 0.06 * random.random())  # the later writer moves when it sees us
                continue
            turn = turn.model_copy(update={"seq": max(t.seq for t in turns) + 1})
            self.put_turns([turn])
            patience = 3
        return turn

    def turn_entries(self, ctx: MemoryContext, turn: Turn) -> list[WorkingEntry]:
        """The working entries observed from one turn."""
        return [e for e in self.session_entries(ctx, [turn.session_id]) if turn.id in e.provenance]

    def session_turns(self, ctx: MemoryContext, session_id: str, *, ids: Sequence[str] | None = None) -> list[Turn]:
        """The session's turns in order (only ``ids`` when given)."""
        where = Where(eq={**scope(ctx), "session_id": session_id})
        turns: list[Turn] = self.store.query("turns", where) if ids is None else self.store.get("turns", where, ids)
        return sorted(turns, key=lambda t: (t.seq, t.created_at, t.id))

    def sessions_turns(self, ctx: MemoryContext, session_ids: Sequence[str]) -> dict[str, list[Turn]]:
        """Each of these sessions' turns in order (as :meth:`session_turns`), in one read."""
        where = Where(eq=scope(ctx), isin={"session_id": list(session_ids)})
        out: dict[str, list[Turn]] = {sid: [] for sid in session_ids}
        for turn in sorted(self.store.query("turns", where), key=lambda t: (t.seq, t.created_at, t.id)):
            out[turn.session_id].append(turn)
        return out

    def pending_turns(self, ctx: MemoryContext | None = None, *, include_parked: bool = False) -> list[Turn]:
        """Turns the observer has not done yet: this user's, or every user's without ``ctx``."""
        statuses = ["pending", "failed"] if include_parked else ["pending"]
        turns: list[Turn] = self.store.query("turns", Where(eq=scope(ctx) if ctx else {}, isin={"status": statuses}))
        return sorted(turns, key=lambda t: (t.namespace, t.user_id, t.session_id, t.seq))

    # -- working ----------------------------------------------------------------------------

    def session_seq(self, ctx: MemoryContext) -> int:
        """The latest turn number seen in this session's working memory."""
        return max((e.seq for e in self.working_memory(ctx, include_inactive=True)), default=0)

    def working_memory(self, ctx: MemoryContext, *, include_inactive: bool = False) -> list[WorkingEntry]:
        """This session's working entries (the active ones unless ``include_inactive``)."""
        if ctx.session_id is None:
            return []
        statuses = ["active", "overflow", "closed"] if include_inactive else ["active"]
        where = Where(eq={**scope(ctx), "session_id": ctx.session_id}, isin={"status": statuses})
        entries: list[WorkingEntry] = self.store.query("working", where)
        return sorted(entries, key=lambda e: (e.seq, e.created_at, e.id))

    def session_entries(self, ctx: MemoryContext, session_ids: Sequence[str]) -> list[WorkingEntry]:
        """Every working entry of these sessions, whatever its status, in observation order."""
        entries: list[WorkingEntry] = self.store.query(
            "working", Where(eq=scope(ctx), isin={"session_id": list(session_ids)})
        )
        return sorted(entries, key=lambda e: (e.session_id, e.seq, e.id))

    def active_working(self, ctx: MemoryContext) -> list[WorkingEntry]:
        """The active working entries of every session of this user."""
        entries: list[WorkingEntry] = self.store.query("working", Where(eq=scope(ctx), isin={"status": ["active"]}))
        return entries

    def put_working(self, entries: Sequence[WorkingEntry]) -> None:
        """Write entries as they are (status changes; no capacity rule)."""
        self._write("working", entries)

    def add_working_entries(self, ctx: MemoryContext, entries: Sequence[WorkingEntry]) -> list[WorkingEntry]:
        """Write entries keeping at most ``capacity`` active per session by effective salience, in one write.

        Entries pushed out become "overflow": no longer in the active set, still in the session log
        (and so in the episode). Entries of several sessions (an import's) are ranked each in its own
        session, read and written together.
        """
        if not entries:
            return []
        capacity = self.working.capacity if self.working else 7
        half = self.working.salience_half_life if self.working else 8.0
        sessions = list(dict.fromkeys(e.session_id for e in entries))
        where = Where(eq=scope(ctx), isin={"session_id": sessions, "status": ["active"]})
        current: list[WorkingEntry] = self.store.query("working", where)
        new_ids = {e.id for e in entries}
        now = self.clock.now()
        pushed: set[str] = set()
        demoted: list[WorkingEntry] = []
        for sid in sessions:
            active = {e.id: e for e in current if e.session_id == sid}
            active.update({e.id: e for e in entries if e.session_id == sid})
            now_seq = max(e.seq for e in active.values())
            ranked = sorted(
                active.values(),
                key=lambda e: (-turn_decay(e.salience, now_seq - e.seq, half_life_turns=half), -e.seq, e.id),
            )
            pushed |= {e.id for e in ranked[capacity:]}
            demoted += [
                e.model_copy(update={"status": "overflow", "updated_at": now})
                for e in ranked[capacity:]
                if e.id not in new_ids
            ]
        writes = [e.model_copy(update={"status": "overflow"}) if e.id in pushed else e for e in entries]
        self.put_working(writes + demoted)
        return writes

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
    ) -> WorkingEntry:
        """Add one observation to this session's working memory."""
        if ctx.session_id is None:
            raise InvalidArgumentError("working memory needs a MemoryContext with a session_id")
        body = _text(text)
        canon = self.subject(ctx, subject)
        now = self.clock.now()
        entry = WorkingEntry(
            id=working_entry_id(ctx, session_id=ctx.session_id, subject=canon, text=body),
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
        self.add_working_entries(ctx, [entry])
        return entry

    # -- episodic ---------------------------------------------------------------------------

    def add_episode(self, episode: Episode) -> Episode:
        """Write one episode (its scope is its own)."""
        self.put_episodes([episode])
        return episode

    def put_episodes(self, episodes: Sequence[Episode]) -> None:
        self._write("episodes", episodes)

    def episode(self, ctx: MemoryContext, episode_id: str) -> Episode | None:
        found: list[Episode] = self.store.get("episodes", Where(eq=scope(ctx)), [episode_id])
        return found[0] if found else None

    def episodes(self, ctx: MemoryContext, *, statuses: Sequence[str] | None = None) -> list[Episode]:
        """This user's episodes, latest first (only ``statuses`` when given)."""
        where = Where(eq=scope(ctx), isin={"status": list(statuses)} if statuses else None)
        episodes: list[Episode] = self.store.query("episodes", where)
        return sorted(episodes, key=lambda e: (e.ended_at, e.id), reverse=True)

    def unfinished_episodes(self, ctx: MemoryContext | None = None, *, include_parked: bool = False) -> list[Episode]:
        """Episodes whose encoding failed or that wait for consolidation (every user's without ``ctx``)."""
        statuses = ["failed", "pending", "parked"] if include_parked else ["failed", "pending"]
        episodes: list[Episode] = self.store.query(
            "episodes", Where(eq=scope(ctx) if ctx else {}, isin={"status": statuses})
        )
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
        facts: list[Fact] = self.store.query("facts", where)
        return sorted(facts, key=lambda f: (f.created_at, f.id))

    def nearest_facts(
        self, ctx: MemoryContext, vector: np.ndarray, *, subjects: Sequence[str], limit: int
    ) -> list[Fact]:
        """The active facts of ``subjects`` nearest to ``vector``."""
        where = Where(eq=scope(ctx), isin={"status": ["active"], "subject": list(subjects)})
        return [hit.record for hit in self.store.vector_search("facts", vector, where, limit=limit)]

    def put_facts(self, facts: Sequence[Fact]) -> None:
        self._write("facts", facts)

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
    ) -> Fact:
        """Add a fact; the same fact again reinforces it instead of duplicating it."""
        body = _text(text)
        canon = self.subject(ctx, subject)
        now = self.clock.now()
        fid = fact_id(ctx, subject=canon, text=body)
        existing: list[Fact] = self.store.get("facts", Where(eq=scope(ctx)), [fid])
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
        edges: list[Edge] = self.store.query("edges", Where(eq=scope(ctx)))
        return sorted(edges, key=lambda e: e.id)

    def put_edges(self, edges: Sequence[Edge]) -> None:
        self._write("edges", edges)

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
        metadata: Mapping[str, Any] | None = None,
    ) -> Digest:
        """Replace the user's digest (one per user; the revision counts up in metadata)."""
        now = self.clock.now()
        previous = self.latest_digest(ctx)
        meta = {**(metadata or {}), "revision": (previous.metadata.get("revision", 0) + 1) if previous else 1}
        digest = Digest(
            id=digest_id(ctx),
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            text=_text(text),
            created_at=previous.created_at if previous else now,
            updated_at=now,
            provenance=tuple(provenance),
            metadata=meta,
        )
        self._write("digests", [digest])
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
        kept: list[Turn] = self.store.get("turns", Where(eq=where), [t for t in covered if t in keep])
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
