"""Governing one user's memory: list and inspect it.

:class:`Governance` holds what it needs (the store, the embedder, the clock); the capability exposes
its reads (``list``, ``get``, ``history``, ``subjects``, ``stats``). Correcting and pinning live in
``_corrections``, forgetting and erasing in ``_erasure``, export, import and fork in ``_portability``,
all over this component. Every read and write is scoped by the context's
namespace and user: an id of another user is not found, and nothing is written when an argument
does not validate. What the reads return is in ``_memory_views``, ``list``'s cursor in ``_paging``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeAlias

import numpy as np

from .._blocking import run_blocking
from .._clock import Clock
from .._embed import Embedder
from .._errors import InvalidArgumentError, MemoryNotFoundError
from .._items import MemoryItem
from .._options import SemanticOptions, WorkingOptions
from .._paging import checked_id, checked_strings, decode_cursor, window
from .._policy import checked_categories
from .._records import Digest, Edge, Episode, Fact, MemoryContext, Tier, Turn, WorkingEntry
from .._secrets import Redactor
from .._store import MEMORY_TABLES, TIER_TABLES, Store, TableName, TierTable, Where
from .._subjects import canonical_subject
from .._tiers import Lineage, checked_context, checked_where, embedded_vectors, scope, to_memory_item
from .._when import checked_window
from ._views import MemoryPage, MemoryStats, MemoryVersion

__all__ = [
    "Governance",
    "MemoryNotFoundError",
    "MemoryPage",
    "MemoryStats",
    "MemoryVersion",
]

Record: TypeAlias = WorkingEntry | Episode | Fact | Digest | Edge | Turn

# Where an id may live, guessed from its prefix first (ids are "<kind>_<digest>").
_PREFIXES: dict[str, TableName] = {
    "fact": "facts", "wm": "working", "ep": "episodes", "digest": "digests", "edge": "edges", "turn": "turns",
    "alias": "aliases",
}  # fmt: skip


def _about(record: Episode | Edge) -> tuple[str, ...]:
    return record.subjects if isinstance(record, Episode) else (record.source, record.target)


class Governance:
    """Reads of one store's memories, always within one user's scope, and the lookups and writes its peers share."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        clock: Clock,
        semantic: SemanticOptions | None = None,
        working: WorkingOptions | None = None,
        lineage: Lineage | None = None,
        secrets: Redactor | None = None,
    ) -> None:
        self.store = store
        self.secrets = secrets or Redactor()
        self.embedder = embedder
        self.clock = clock
        self.semantic = semantic
        self.working = working
        self.lineage = lineage or Lineage(store)

    # -- the async API (each runs its blocking body off the event loop) ----------------------

    async def list_memories(
        self,
        ctx: MemoryContext,
        *,
        tier: Tier | Sequence[Tier] | None = None,
        subject: str | None = None,
        status: str | Sequence[str] | None = None,
        where: Mapping[str, object] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
        categories: Sequence[str] | None = None,
    ) -> MemoryPage:
        """The user's memories oldest first, by ``(created_at, id)``: a page and the cursor of the next."""
        return await run_blocking(
            self.list_sync, checked_context(ctx), tier=tier, subject=subject, status=status, where=where,
            since=since, until=until, limit=limit, cursor=cursor, categories=categories,
        )  # fmt: skip

    async def get(self, ctx: MemoryContext, id: str) -> MemoryItem:
        """One memory of any tier (or a captured turn) by id."""
        return await run_blocking(self.get_sync, checked_context(ctx), id)

    async def history(self, ctx: MemoryContext, id: str) -> list[MemoryVersion]:
        """Every version of a memory, oldest first, with validity times and the turns behind each."""
        return await run_blocking(self.history_sync, checked_context(ctx), id)

    async def subjects(self, ctx: MemoryContext) -> list[str]:
        """The canonical subjects the user's memories are about."""
        return await run_blocking(self.subjects_sync, checked_context(ctx))

    async def stats(self, ctx: MemoryContext) -> MemoryStats:
        """Counts per tier and status, pending work, and the store's bytes on disk."""
        return await run_blocking(self.stats_sync, checked_context(ctx))

    # -- helpers ----------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts`` with the store's embedder."""
        if not texts:
            return np.zeros((0, self.embedder.dimensions), dtype=np.float32)
        return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)

    def put(self, table: TableName, records: Sequence[Record]) -> None:
        """Upsert records with fresh vectors, in one commit."""
        if records:
            self.store.upsert(table, list(records), embedded_vectors(records, self.embed))

    def item(self, record: Record) -> MemoryItem:
        """A record as a memory item, its confidence as it stands now."""
        return to_memory_item(record, self.clock.now(), semantic=self.semantic, working=self.working)

    def find(self, ctx: MemoryContext, rid: str, tables: Sequence[TableName] = MEMORY_TABLES) -> tuple[TableName, Any]:
        """The table and record of ``rid`` within the user's scope, or :class:`MemoryNotFoundError`."""
        rid = checked_id(rid)
        hint = _PREFIXES.get(rid.split("_", 1)[0])
        ordered = [t for t in tables if t == hint] + [t for t in tables if t != hint]
        for table in ordered:
            found = self.store.get(table, Where(eq=scope(ctx)), [rid])
            if found:
                return table, found[0]
        raise MemoryNotFoundError(f"no memory {rid!r} for user {ctx.user_id!r} in namespace {ctx.namespace!r}")

    def aliases(self, ctx: MemoryContext) -> dict[str, str]:
        """The user's display names -> the canonical subjects they stand for."""
        return {a.name: a.subject for a in self.store.query("aliases", Where(eq=scope(ctx)))}

    # -- read -------------------------------------------------------------------------------

    def list_sync(
        self,
        ctx: MemoryContext,
        *,
        tier: Tier | Sequence[Tier] | None = None,
        subject: str | None = None,
        status: str | Sequence[str] | None = None,
        where: Mapping[str, object] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
        categories: Sequence[str] | None = None,
    ) -> MemoryPage:
        """The blocking body of ``list``; ``where`` filters on captured metadata (see :mod:`.._tiers._lineage`),
        ``since``/``until`` on when a memory was said (see :mod:`.._when`), ``categories`` on the labels."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidArgumentError("limit must be an integer between 1 and 1000")
        tiers = list(TIER_TABLES) if tier is None else checked_strings(tier, "tier")
        unknown = [t for t in tiers if t not in TIER_TABLES]
        if unknown or not tiers:
            raise InvalidArgumentError(f"unknown tiers {unknown}; choose from {list(TIER_TABLES)}")
        statuses = None if status is None else checked_strings(status, "status")
        if cursor is not None:
            decode_cursor(cursor)  # a bad cursor is refused before any table is read
        tables = [table for t, table in TIER_TABLES.items() if t in tiers]
        labels = checked_categories(categories)
        allowed = self.lineage.allowed(ctx, checked_where(where), checked_window(since, until), tables, labels)
        canon = canonical_subject(subject, aliases=self.aliases(ctx)) if subject is not None else None
        keys: list[tuple[datetime, str, TierTable]] = []
        for table in (table for t, table in TIER_TABLES.items() if t in tiers):
            eq = scope(ctx)
            isin = {"status": statuses} if statuses is not None else None
            if canon is not None and table in ("episodes", "edges"):  # about several subjects: filter records
                about = self.store.query(table, Where(eq=eq, isin=isin))
                keys += [(r.created_at, r.id, table) for r in about if canon in _about(r)]
                continue
            if canon is not None:
                eq["subject"] = canon
            keys += [(when, rid, table) for when, rid in self.store.keys(table, Where(eq=eq, isin=isin))]
        if allowed is not None:
            keys = [k for k in keys if k[1] in allowed.get(k[2], ())]
        keys.sort()
        shown = window(keys, cursor, limit)
        page = keys[shown.start : shown.stop]
        by_table: dict[TierTable, list[str]] = {}
        for _, rid, table in page:
            by_table.setdefault(table, []).append(rid)
        records: dict[str, Record] = {}
        for table, ids in by_table.items():
            records.update({r.id: r for r in self.store.get(table, Where(eq=scope(ctx)), ids)})
        items = tuple(self.item(records[rid]) for _, rid, _ in page if rid in records)
        return MemoryPage(
            items=items, next_cursor=shown.next_cursor, prev_cursor=shown.prev_cursor, total=len(keys),
            offset=shown.start,
        )  # fmt: skip

    def get_sync(self, ctx: MemoryContext, rid: str) -> MemoryItem:
        """The blocking body of ``get``."""
        return self.item(self.find(ctx, rid)[1])

    def facts_by_id(self, ctx: MemoryContext) -> dict[str, Fact]:
        """Every fact of the user, whatever its status, by id."""
        return {f.id: f for f in self.store.query("facts", Where(eq=scope(ctx)))}

    @staticmethod
    def predecessors(facts: dict[str, Fact]) -> dict[str, set[str]]:
        """Fact id -> the ids of the versions it replaced (``superseded_by``, or named in its provenance)."""
        before: dict[str, set[str]] = {}
        for f in facts.values():
            if f.superseded_by is not None:
                before.setdefault(f.superseded_by, set()).add(f.id)
            for p in f.provenance:
                if p in facts and p != f.id:
                    before.setdefault(f.id, set()).add(p)
        return before

    @staticmethod
    def ancestors(rid: str, before: dict[str, set[str]]) -> set[str]:
        """``rid`` and every version before it, transitively (a merge has several)."""
        seen, todo = {rid}, [rid]
        while todo:
            for prev in before.get(todo.pop(), ()):
                if prev not in seen:
                    seen.add(prev)
                    todo.append(prev)
        return seen

    def history_sync(self, ctx: MemoryContext, rid: str) -> list[MemoryVersion]:
        """The blocking body of ``history``."""
        table, record = self.find(ctx, rid)
        versions: list[Record] = [record]
        before: dict[str, set[str]] = {}
        if table == "facts":
            facts = self.facts_by_id(ctx)
            before = self.predecessors(facts)
            latest, hops = record, 0
            while latest.superseded_by in facts and hops < len(facts):
                latest, hops = facts[latest.superseded_by], hops + 1
            versions = [facts[i] for i in self.ancestors(latest.id, before)]
        turn_ids = sorted({p for v in versions for p in getattr(v, "provenance", ()) if p.startswith("turn_")})
        turns = {t.id: t for t in self.store.get("turns", Where(eq=scope(ctx)), turn_ids)}
        out = []
        for v in versions:
            out.append(
                MemoryVersion(
                    item=self.item(v),
                    status=getattr(v, "status", "active"),
                    valid_from=getattr(v, "valid_from", None),
                    valid_to=getattr(v, "valid_to", None),
                    superseded_by=getattr(v, "superseded_by", None),
                    supersedes=tuple(sorted(before.get(v.id, ()))),
                    pinned=getattr(v, "pinned", False),
                    turns=tuple(turns[p] for p in getattr(v, "provenance", ()) if p in turns),
                    feedback=tuple(getattr(v, "metadata", {}).get("feedback", ())),
                )
            )
        depth = {v.id: len(self.ancestors(v.id, before)) for v in versions}  # a version comes after its ancestors
        return sorted(out, key=lambda m: (m.valid_from or m.item.created_at, depth[m.item.id], m.item.id))

    def subjects_sync(self, ctx: MemoryContext) -> list[str]:
        """The blocking body of ``subjects``."""
        where = Where(eq=scope(ctx))
        found = set(self.store.column_values("facts", where, "subject"))
        found |= set(self.store.column_values("working", where, "subject"))
        for edge in self.store.query("edges", where):
            found |= {edge.source, edge.target}
        for episode in self.store.query("episodes", where):
            found |= set(episode.subjects)
        return sorted(found)

    def stats_sync(self, ctx: MemoryContext) -> MemoryStats:
        """The blocking body of ``stats``."""
        where = Where(eq=scope(ctx))
        counts: dict[str, dict[str, int]] = {
            t: self.store.counts(table, where, "status") for t, table in TIER_TABLES.items()
        }
        counts["turns"] = self.store.counts("turns", where, "status")
        aliases = self.store.count("aliases", where)
        counts["aliases"] = {"active": aliases} if aliases else {}
        pending = {  # "parked": out of retries, waiting for retry_pending(include_parked=True)
            "turns": counts["turns"].get("pending", 0),
            "turns_parked": counts["turns"].get("failed", 0),
            "episodes": counts["episodic"].get("pending", 0),
            "episodes_failed": counts["episodic"].get("failed", 0),
            "episodes_parked": counts["episodic"].get("parked", 0),
        }
        return MemoryStats(
            counts=counts, pending=pending, bytes_on_disk=self.store.disk_bytes(), redacted=self.secrets.tally(ctx)
        )
