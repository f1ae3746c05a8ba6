"""Forgetting one memory and erasing a user: what was removed leaves no trace, in the tables or on disk.

``forget`` deletes a memory with its older versions and what was derived only from it: edges it
alone supported (an edge shares provenance with the facts it was extracted with and names both its
endpoints there), observations and episodes left without any source, and the digest written from it,
which is then rewritten through the system's digest stage. Every other text derived from it is
rewritten without it (:mod:`._derived_text`). Other records drop the removed ids from their
provenance and metadata, so nothing points at them. The captured turns stay unless
``include_turns``: they are what the user said, verbatim, which the user did not ask to remove.

``erase_user`` works in two phases, safe beside writers and readers in other processes. It marks
the user erased first (work already running never writes them back: ``Store.fenced``), deletes
every row of the user in every table (ordinary commits), then has the store purge them from disk
(``Store.purge_pending``: rewrite each table, delete its old versions and files, behind a fence the
writers wait on; see :mod:`tiermem.memory._store._purge`). LanceDB keeps deleted rows in old
versions, deletion files and index files until then. The purge is requested before the deletes, so
if it cannot run now (another process is purging) or the process dies, the janitor or the next
erase does it; the report says whether it is done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from pydantic import BaseModel, ConfigDict, Field

from .._blocking import run_blocking
from .._records import Alias, Edge, Fact, MemoryContext
from .._store import MEMORY_TABLES, USER_TABLES, TableName, TierTable, Where, user_writes
from .._tiers import checked_context, scope
from ._derived_text import DerivedText, TextRewriter
from ._governance import Governance, Record

__all__ = ["DigestWriter", "EraseReport", "Erasure", "ForgetReport"]

DigestWriter = Callable[[MemoryContext], Awaitable[object]]
"""Rewrites the user's digest (``MemorySystem.digest``); its result's ``digest`` is the new one."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ForgetReport(_Frozen):
    """What :meth:`Erasure.forget` removed."""

    forgotten: tuple[str, ...] = Field(description="The memory and its older versions.")
    edges_removed: tuple[str, ...] = Field(default=(), description="Edges derived only from it.")
    derived_removed: tuple[str, ...] = Field(default=(), description="Working entries, episodes left without source.")
    turns_removed: tuple[str, ...] = Field(default=(), description="Captured turns removed (include_turns).")
    records_cleaned: int = Field(default=0, description="Other records whose provenance or metadata dropped the ids.")
    digest_rewritten: bool = Field(default=False, description="The digest drew on it and was written anew.")
    texts_rewritten: tuple[str, ...] = Field(
        default=(), description="Records kept, their text rewritten without it (summaries, observations, keys)."
    )


class EraseReport(_Frozen):
    """What :meth:`Erasure.erase_user` removed, per table."""

    rows: dict[str, int] = Field(description="Rows removed per table.")
    purged: bool = Field(
        default=True, description="The bytes left the disk; False: the purge is pending (the janitor finishes it)."
    )


def _drop(values: Iterable[str], gone: set[str]) -> tuple[str, ...]:
    return tuple(v for v in values if v not in gone)


def _without(metadata: dict[str, object], gone: set[str]) -> dict[str, object]:
    """Metadata with removed ids dropped from its id lists (``episodes``, ``merged_from``...)."""
    out: dict[str, object] = {}
    for key, value in metadata.items():
        if isinstance(value, list) and any(isinstance(v, str) and v in gone for v in value):
            value = [v for v in value if v not in gone]
        elif isinstance(value, str) and value in gone:
            continue
        out[key] = value
    return out


def _mentions(fact: Fact, entity: str) -> bool:
    return fact.subject == entity or entity.replace("-", " ") in fact.text.lower().replace("-", " ")


class Erasure:
    """Forget and erase over a :class:`Governance` (its store and lookups)."""

    def __init__(
        self,
        governance: Governance,
        *,
        rewrite_digest: DigestWriter | None = None,
        rewrite_text: TextRewriter | None = None,
    ) -> None:
        self.governance = governance
        self.store = governance.store
        self.rewrite_digest = rewrite_digest
        self.derived = DerivedText(governance, rewrite=rewrite_text)

    def _plan_forget(self, ctx: MemoryContext, rid: str, include_turns: bool) -> tuple[dict[TableName, set[str]], bool]:
        """Ids to delete per table, and whether the digest must be rewritten."""
        table, record = self.governance.find(ctx, rid, (*MEMORY_TABLES, "aliases"))  # a display name too
        gone: dict[TableName, set[str]] = {t: set() for t in USER_TABLES}
        facts = self.governance.facts_by_id(ctx)
        if table == "facts":
            gone["facts"] = self.governance.ancestors(record.id, self.governance.predecessors(facts))
        else:
            gone[table].add(record.id)
        records: list[Record | Alias] = [facts[i] for i in gone["facts"]] or [record]
        if include_turns:
            gone["turns"] |= {p for r in records for p in getattr(r, "provenance", ()) if p.startswith("turn_")}
        where = Where(eq=scope(ctx))
        if gone["facts"]:
            live = [f for f in facts.values() if f.status == "active" and f.id not in gone["facts"]]
            for edge in self.store.query("edges", where):

                def supports(f: Fact, edge: Edge = edge) -> bool:
                    if edge.support:  # the facts it was derived from, recorded by the consolidator
                        return f.id in edge.support
                    shared = f.id in edge.provenance or bool(set(f.provenance) & set(edge.provenance))
                    return shared and _mentions(f, edge.source) and _mentions(f, edge.target)

                if any(supports(facts[i]) for i in gone["facts"]) and not any(supports(f) for f in live):
                    gone["edges"].add(edge.id)
        # Observations, episodes and edges whose every source is removed were derived only from it.
        removed: set[str] = set().union(*gone.values())
        derived_tables: tuple[TierTable, ...] = ("working", "episodes", "edges")
        for derived in derived_tables:
            for r in self.store.query(derived, where):
                if r.provenance and not _drop(r.provenance, removed) and r.id not in gone[derived]:
                    gone[derived].add(r.id)
        digest = self.store.query("digests", where)
        removed = set().union(*gone.values())
        rewrite = any(set(d.provenance) & removed for d in digest) and not gone["digests"]
        if rewrite:
            gone["digests"] |= {d.id for d in digest}
        return gone, rewrite

    async def forget(self, ctx: MemoryContext, id: str, *, include_turns: bool = False) -> ForgetReport:
        """Delete one memory (with its older versions), or a display name, and what was derived only from it.

        Edges it alone supported go; other records drop its id from their provenance; every text
        derived from it (episode summaries, observations, retrieval keys, the digest) is rewritten
        without it, keeping its id. Its turns, what the user said, stay (and stay searchable) unless
        ``include_turns``; then the next turn's copy of it (its context) goes too.
        """
        rid = id
        ctx = checked_context(ctx)
        gone, rewrite = await run_blocking(self._plan_forget, ctx, rid, include_turns)
        forgotten = await run_blocking(self.derived.forgotten, ctx, gone)
        texts, carried = await self.derived.rewrite_all(ctx, gone, forgotten)  # before deleting: a rerun finds it
        rewrite = rewrite or carried
        cleaned = await run_blocking(self._apply_forget, ctx, gone)
        rewritten = False
        if rewrite and self.rewrite_digest is not None:
            rewritten = getattr(await self.rewrite_digest(ctx), "digest", None) is not None
        target = set(gone["facts"]) or {rid}
        return ForgetReport(
            forgotten=tuple(sorted(target)),
            edges_removed=tuple(sorted(gone["edges"] - target)),
            derived_removed=tuple(sorted((gone["working"] | gone["episodes"]) - target)),
            turns_removed=tuple(sorted(gone["turns"] - target)),
            records_cleaned=cleaned,
            digest_rewritten=rewritten,
            texts_rewritten=tuple(sorted(texts - set().union(*gone.values()))),
        )

    def _apply_forget(self, ctx: MemoryContext, gone: dict[TableName, set[str]]) -> int:
        """Clean the others' provenance first and delete last, so a crash leaves a rerunnable forget."""
        with user_writes(self.store, ctx):  # what it reads is what it writes back: no correction lost between
            return self._clean_and_delete(ctx, gone)

    def _clean_and_delete(self, ctx: MemoryContext, gone: dict[TableName, set[str]]) -> int:
        removed: set[str] = set().union(*gone.values())
        where = Where(eq=scope(ctx))
        cleaned = 0
        tier_tables: tuple[TierTable, ...] = ("facts", "working", "episodes", "edges", "digests")
        for table in tier_tables:
            dirty: list[Record] = []
            for r in self.store.query(table, where):
                meta = _without(r.metadata, removed)
                support: tuple[str, ...] = getattr(r, "support", ())
                touched = set(r.provenance) & removed or set(support) & removed or meta != r.metadata
                if r.id not in gone[table] and touched:
                    update = {"provenance": _drop(r.provenance, removed), "metadata": meta}
                    if support:
                        update["support"] = _drop(support, removed)
                    dirty.append(r.model_copy(update=update))
            self.governance.put(table, dirty)
            cleaned += len(dirty)
        order: tuple[TableName, ...] = ("digests", "edges", "working", "episodes", "turns", "aliases", "facts")
        for name in order:
            if gone[name]:
                self.store.delete(name, Where(eq=scope(ctx), isin={"id": sorted(gone[name])}))
        return cleaned

    async def erase_user(self, ctx: MemoryContext) -> EraseReport:
        """Delete every row of the user in every table and purge old versions: the bytes leave the disk.

        Safe beside other processes' writes and reads: the purge makes their commits wait for a few
        seconds (twice the store's ``purge_drain`` and the rewrites). ``purged`` is False when another
        process was purging: the request stays and the janitor (or the next erase) completes it.
        """
        return await run_blocking(self.erase_user_sync, checked_context(ctx))

    def erase_user_sync(self, ctx: MemoryContext) -> EraseReport:
        """The blocking body of :meth:`erase_user`."""
        self.store.mark_erased(ctx)  # first: work begun before it writes nothing of the user from now on
        where = Where(eq=scope(ctx))
        rows: dict[str, int] = {}
        self.store.request_purge()  # first: a crash after the deletes leaves the purge requested
        for table in USER_TABLES:
            rows[table] = self.store.count(table, where)
            if rows[table]:
                self.store.delete(table, where)
        # Also the bytes of rows deleted earlier (forget, TTL), still in old versions of every table.
        return EraseReport(rows=rows, purged=self.store.purge_pending())
