"""Search: the candidates recall ranks, from full-text, vector and graph searches over the tiers.

Blocking, like the repository it reads through; :class:`~tiermem.memory._read._create.MemoryCapability`
runs it off the event loop.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

import numpy as np

from .._errors import InvalidArgumentError
from .._index import CachedSearches, fts_columns, pooled_scores
from .._items import MemoryItem, RankedMemoryItem
from .._options import RecallOptions
from .._records import Alias, Chunk, Document, Fact, MemoryContext, StoredRecord, Turn, WorkingEntry
from .._relations import Relations
from .._store import TableName, Where
from .._subjects import canonical_subject
from .._text import stem, terms
from .._tiers import Lineage, MetadataFilter, Tiers, marked_past, scope, to_memory_item
from .._when import TALK_WORDS, TimeWindow, time_mention
from ._graph_reach import through_graph
from ._hops import merged, widened
from ._ranking import Candidate, named_subjects, rank, rank_without_cue
from ._relevance import Calibration, calibration
from ._scopes import labelled

__all__ = ["SEARCH_TIERS", "Search", "SearchTier"]

log = logging.getLogger(__name__)

SearchTier = Literal["working", "episodic", "semantic", "digest", "document"]
# Where each tier is searched. The episodic tier is the sessions' episodes plus their turn log:
# a summary finds the right conversation, the log the line in it.
_SOURCES: dict[SearchTier, tuple[TableName, ...]] = {
    "working": ("working",),
    "episodic": ("episodes", "turns"),
    "semantic": ("facts",),
    "digest": ("digests",),
    "document": ("chunks",),  # passages of ingested documents, in the same ranking as the tiers
}
SEARCH_TIERS: tuple[SearchTier, ...] = tuple(_SOURCES)
_LIVE: dict[TableName, list[str]] = {
    "working": ["active", "overflow"],
    "episodes": ["pending", "consolidated"],
    "facts": ["active"],
    "digests": ["active"],
    "chunks": ["active"],
}
# A cue also finds superseded facts: they answer "where did I work before?", marked past and ranked below
# what replaced them. Browsing without a cue shows what holds.
_SEARCHED: dict[TableName, list[str]] = {**_LIVE, "facts": ["active", "superseded"]}
_BROWSE = ("working", "episodes", "facts", "digests")  # without a cue the raw log is noise

_TALK_TERMS = frozenset(stem(w) for w in TALK_WORDS)  # as :func:`terms` gives them
_SEARCHES = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tiermem-search")


@dataclass(frozen=True, kw_only=True, slots=True)
class _Asked:
    """What one ranked list asks of every scope it reads: the tiers, the filters and the time it is ranked at."""

    chosen: tuple[SearchTier, ...]
    tables: tuple[TableName, ...]
    subject: str | None  # as asked: each scope reads it through its own aliases
    where: MetadataFilter | None
    window: TimeWindow | None
    categories: frozenset[str] | None
    now: datetime


class Search:
    """Recall over one store: candidates from every enabled tier, fused and ranked."""

    def __init__(
        self,
        *,
        tiers: Tiers,
        relations: Relations,
        enabled: Sequence[SearchTier],
        options: RecallOptions,
        lineage: Lineage | None = None,
    ) -> None:
        self.tiers = tiers
        self.relations = relations
        self.enabled = list(enabled)
        self.options = options
        self.lineage = lineage or Lineage(tiers.store)

    def chosen(self, tiers: Sequence[str] | None) -> list[SearchTier]:
        """The enabled tiers among ``tiers`` (all enabled ones for None)."""
        if tiers is None:
            return list(self.enabled)
        unknown = [t for t in tiers if t not in _SOURCES]
        if unknown:
            raise InvalidArgumentError(f"unknown tiers {unknown}; choose from {list(_SOURCES)}")
        return [t for t in self.enabled if t in tiers]

    def item(self, record: StoredRecord, now: datetime, session_seq: int = 0) -> MemoryItem:
        """Any stored record as a memory item, its confidence decayed to ``now``."""
        if isinstance(record, Alias | Document):  # never in the tables recall reads: they name, they are not memories
            raise TypeError(f"{type(record).__name__.lower()} {record.id} is not a memory item")
        return to_memory_item(
            record, now, semantic=self.tiers.semantic, working=self.tiers.working, session_seq=session_seq
        )

    def _where(
        self,
        ctx: MemoryContext,
        table: TableName,
        subject: str | None,
        allowed: dict[str, frozenset[str]] | None = None,
        *,
        browse: bool = False,
    ) -> Where | None:
        """The scope of one table's search; None when nothing in it can match."""
        eq = scope(ctx)
        if subject is not None:
            eq["subject"] = subject
        ids = None if allowed is None else sorted(allowed.get(table, ()))
        if ids is not None and not ids:
            return None
        isin = {} if ids is None else {"id": ids}
        if table == "working":
            if ctx.session_id is None:
                return None
            eq["session_id"] = ctx.session_id
        if table == "turns":
            # The current session's turns are already in the agent's context window.
            return Where(eq=eq, isin=isin or None, ne={"session_id": ctx.session_id} if ctx.session_id else None)
        return Where(eq=eq, isin={**isin, "status": (_LIVE if browse else _SEARCHED)[table]})

    def recall(
        self,
        ctx: MemoryContext,
        cue: str | None,
        *,
        limit: int,
        tiers: Sequence[str] | None,
        subject: str | None,
        where: MetadataFilter | None = None,
        window: TimeWindow | None = None,
        as_of: datetime | None = None,
        categories: frozenset[str] | None = None,
        shared: Sequence[tuple[str, MemoryContext]] = (),
    ) -> list[RankedMemoryItem]:
        """Memories across the chosen tiers, ranked for ``cue`` (most recent and salient without one).

        ``shared``: (scope, owner context) of each shared scope read besides ``ctx``'s own memories (checked
        by the caller): their candidates join the same pool and one ranking, each item labelled with its
        scope in ``metadata["scope"]`` (the user's own "user"), so a small scope's best is not inflated.

        ``where``: only memories matching it (captured metadata, see :mod:`.._tiers._lineage`).
        ``categories``: only working entries and facts with one of these policy labels.
        ``window``: only memories said within it (see :mod:`.._when`). Without one, a cue naming a time
        ("last week", "in May", resolved against ``as_of`` or now) ranks what was said then first: the
        cue less its time words within the window (everything said then, when nothing else is left),
        then the whole cue over all time, so a time named wrongly or in passing loses nothing.
        """
        # One version check per table for the whole recall: aliases, lineage and searches read one version.
        with self.tiers.store.pinned_versions():

            def ranked(asked: str | None, within: TimeWindow | None) -> list[RankedMemoryItem]:
                return self._recall(
                    ctx, asked, limit=limit, tiers=tiers, subject=subject, where=where, window=within,
                    categories=categories, shared=shared,
                )  # fmt: skip

            mention = time_mention(cue, as_of or self.tiers.clock.now()) if cue and window is None else None
            if cue is None or mention is None:
                first = ranked(cue, window)
                hops = self.options.second_hop
                wider = widened(cue, first, hops) if cue and hops and first else None
                return first if wider is None else merged(first, ranked(wider, window), limit)
            asked = mention.without(cue)
            then = ranked(asked if terms(asked) - _TALK_TERMS else None, mention.window)
            if len(then) >= limit:
                return then
            seen = {item.id for item in then}
            return then + [item for item in ranked(cue, None) if item.id not in seen][: limit - len(then)]

    def _recall(
        self,
        ctx: MemoryContext,
        cue: str | None,
        *,
        limit: int,
        tiers: Sequence[str] | None,
        subject: str | None,
        where: MetadataFilter | None,
        window: TimeWindow | None,
        categories: frozenset[str] | None = None,
        shared: Sequence[tuple[str, MemoryContext]] = (),
    ) -> list[RankedMemoryItem]:
        aliases = self.tiers.aliases(ctx)
        chosen = self.chosen(tiers)
        asked = _Asked(
            chosen=tuple(chosen),
            tables=tuple(table for tier in chosen for table in _SOURCES[tier]),
            subject=subject,
            where=where,
            window=window,
            categories=categories,
            now=self.tiers.clock.now(),
        )
        # The user's own memories and each shared scope's, labelled with their scope when there are several.
        owners = [("user" if shared else "", ctx), *shared]
        if cue is None or not cue.strip():
            items = [
                labelled(item, label) if label else item
                for label, owner in owners
                for item in self._browsed(owner, asked)
            ]
            return rank_without_cue(items, now=asked.now, options=self.options, limit=limit)
        meaning = self._meaning(cue)
        named = named_subjects(cue, aliases)
        candidates: list[Candidate] = []
        tables: list[str] = []
        searched = 0  # memories the vector searches compared: how high "unrelated" reaches
        for label, owner in owners:  # one pool: every scope's candidates ranked together, on one scale
            names = named if owner is ctx else named_subjects(cue, self.tiers.aliases(owner))  # its own graph's
            found, compared = self._candidates(
                owner, asked, cue, meaning, names, pool=max(limit * 3, 30), columns=bool(shared)
            )
            searched += compared
            candidates += [replace(c, item=labelled(c.item, label)) if label else c for c in found.values()]
            tables += [table for table, _ in found]
        if shared:  # each scope's index weighs words by its own rows: scored again over the one pool, per table
            for table in dict.fromkeys(tables):
                at = [i for i, t in enumerate(tables) if t == table and candidates[i].columns is not None]
                columns = [candidates[i].columns or ("", "") for i in at]
                bm25 = pooled_scores(cue, [c[0] for c in columns], [c[1] for c in columns])
                for i, score in zip(at, bm25.tolist(), strict=True):
                    candidates[i] = replace(candidates[i], lexical=score)
        return rank(
            candidates,
            now=asked.now,
            options=self.options,
            cue=cue,
            # Without a meaning only shared words make a memory related.
            related_similarity=meaning[0].threshold(searched, self.options.unrelated_rate) if meaning else math.inf,
            unrelated_similarity=meaning[0].threshold(searched, 0.5) if meaning else math.inf,
            named=named,
            aliases=aliases,
            limit=limit,
        )

    def _canonical(self, ctx: MemoryContext, subject: str | None) -> str | None:
        """``subject`` as ``ctx``'s owner names it (its aliases), None for none."""
        return None if subject is None else canonical_subject(subject, aliases=self.tiers.aliases(ctx))

    def _browsed(self, ctx: MemoryContext, asked: _Asked) -> list[MemoryItem]:
        """Without a cue: one owner's memories of the chosen tiers, for :func:`rank_without_cue`."""
        allowed = self.lineage.allowed(ctx, asked.where, asked.window, asked.tables, asked.categories)
        session_seq = self.tiers.session_seq(ctx) if "working" in asked.chosen else 0
        # Within a window the log is what was said then; over all time it is noise beside the episodes.
        browsed = _BROWSE if asked.window is None else (*_BROWSE, "turns")
        items: list[MemoryItem] = []
        for table in (t for t in asked.tables if t in browsed):
            scoped = self._where(ctx, table, self._canonical(ctx, asked.subject), allowed, browse=True)
            if scoped is not None:
                items += [self.item(r, asked.now, session_seq) for r in self.tiers.store.query(table, scoped)]
        return items

    def _candidates(
        self,
        ctx: MemoryContext,
        asked: _Asked,
        cue: str,
        meaning: tuple[Calibration, np.ndarray] | None,
        named: set[str],
        *,
        pool: int,
        columns: bool = False,
    ) -> tuple[dict[tuple[str, str], Candidate], int]:
        """One owner's candidates for ``cue``, by key, and how many memories its vector searches compared
        (``columns``: each with the full-text columns a pooled BM25 scores)."""
        tables, canon, now = asked.tables, self._canonical(ctx, asked.subject), asked.now
        allowed = self.lineage.allowed(ctx, asked.where, asked.window, tables, asked.categories)
        # A document's passages are recalled once its last one is written (a rerun finishes a stopped one).
        unfinished = self.lineage.unfinished_documents(ctx) if "chunks" in tables else frozenset()
        session_seq = self.tiers.session_seq(ctx) if "working" in asked.chosen else 0
        store = self.tiers.store
        found: dict[tuple[str, str], Candidate] = {}
        # One full-text and one vector search per table. A user's cached rows are searched here, in memory;
        # the others' searches go to LanceDB, all in flight at once (it releases the GIL).
        searches: list[tuple[TableName, CachedSearches | Callable[[], CachedSearches]]] = []
        # The facts lineage parsed (it needs them all to mark what no longer holds): hits need no parse of their own.
        parsed = self.lineage.facts(ctx) if "facts" in tables else {}
        for table in tables:
            scoped = self._where(ctx, table, canon, allowed)
            if scoped is not None:
                known = parsed if table == "facts" else None
                cached = store.cached_searches(
                    table, cue, meaning[1] if meaning else None, scoped, limit=pool, parsed=known
                )
                searches.append((table, cached or self._submitted(table, cue, meaning, scoped, pool)))
        searched = 0
        for table, result in searches:
            done = result if isinstance(result, CachedSearches) else result()
            searched += done.searched
            pooled = done.pool
            if not pooled.records:
                continue
            similarity = meaning[0].similarity(meaning[1], pooled.vectors) if meaning else np.zeros(len(pooled.records))
            for record, sim, lex in zip(pooled.records, similarity.tolist(), pooled.lexical.tolist(), strict=True):
                if isinstance(record, Chunk) and record.document_id in unfinished:
                    continue
                found[(table, record.id)] = Candidate(
                    item=self.item(record, now, session_seq),
                    similarity=sim,
                    lexical=lex,
                    # isinstance, not getattr with a default: a pydantic model's missing attribute
                    # raises inside its __getattr__ (6 us, twice per candidate of every recall).
                    context=record.context if isinstance(record, Turn) else "",
                    keys=record.keys if isinstance(record, WorkingEntry | Fact) else (),
                    columns=fts_columns(record) if columns else None,
                )
        query_vector = meaning[1] if meaning else None
        self._mark_past(ctx, query_vector, now, found, canon, allowed if "semantic" in asked.chosen else {})
        # Not under a filter: a graph neighbour is linked to the cue, not to the turns or times the filter chose.
        graph = self.relations.options is not None and canon is None and "semantic" in asked.chosen and allowed is None
        if graph and query_vector is not None:
            through_graph(self.tiers, self.relations, ctx, query_vector, named, now, found)
        return found, searched

    def _submitted(
        self, table: TableName, cue: str, meaning: tuple[Calibration, np.ndarray] | None, scoped: Where, pool: int
    ) -> Callable[[], CachedSearches]:
        """One table's searches through LanceDB, submitted to the search threads; call the result to wait."""
        store = self.tiers.store
        lexical_job = _SEARCHES.submit(store.text_search, table, cue, scoped, limit=pool)
        vector_job = _SEARCHES.submit(store.vector_search, table, meaning[1], scoped, limit=pool) if meaning else None

        def result() -> CachedSearches:
            return CachedSearches.of(
                text=lexical_job.result(),
                vector=vector_job.result() if vector_job else [],
                searched=store.searched(table, scoped) if meaning else 0,
            )

        return result

    def _meaning(self, cue: str) -> tuple[Calibration, np.ndarray] | None:
        """The embedder's calibration and the cue's vector, centered on its background (see _relevance).

        None when the embedder fails: recall then goes by shared words alone rather than not at all.
        """
        try:
            calibrated = calibration(self.tiers.embedder)
            return calibrated, calibrated.query(self.tiers.embed([cue])[0])
        except Exception as exc:  # any embedder, any failure (a local model, a remote API): recall still answers
            log.warning("embedder %s failed (%s); recalling by full-text search only", self.tiers.embedder.id, exc)
            return None

    def _mark_past(
        self,
        ctx: MemoryContext,
        query_vector: np.ndarray | None,
        now: datetime,
        found: dict[tuple[str, str], Candidate],
        subject: str | None,
        allowed: dict[str, frozenset[str]] | None,
    ) -> None:
        """Mark found facts and turns that no longer hold, and bring in the current facts that replaced them.

        ``allowed``: the facts that may be brought in (None: any; without "facts": none).
        """
        memories = [(rid, c.item.provenance) for (table, rid), c in found.items() if table not in ("digests", "edges")]
        past = self.lineage.past(ctx, memories) if memories else {}
        if not past:
            return
        for key in [k for k in found if k[1] in past]:
            found[key] = replace(found[key], item=marked_past(found[key].item, past[key[1]]))
        wanted = {r for p in past.values() for r in p.replaced_by} - {rid for table, rid in found if table == "facts"}
        if allowed is not None:
            wanted &= allowed.get("facts", frozenset())
        if not wanted:
            return
        eq = scope(ctx) | ({"subject": subject} if subject is not None else {})
        where = Where(eq=eq, isin={"status": ["active"], "id": sorted(wanted)})
        if query_vector is None:  # the embedder failed: the replacements, without a similarity
            for record in self.tiers.store.query("facts", where):
                found[("facts", record.id)] = Candidate(item=self.item(record, now), similarity=0.0, lexical=0.0)
            return
        similarity = calibration(self.tiers.embedder).similarity
        for hit in self.tiers.store.vector_search("facts", query_vector, where, limit=len(wanted)):
            found[("facts", hit.record.id)] = Candidate(
                item=self.item(hit.record, now),
                similarity=float(similarity(query_vector, hit.vector)[0]),
                lexical=0.0,
            )
