"""The hygiene janitor: decay, archive, expire, drop dangling edges, compact facts and storage."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime

from tiermem.memory._decay import effective_confidence, turn_decay
from tiermem.memory._errors import TiermemError
from tiermem.memory._records import Episode, Fact, MemoryContext, WorkingEntry
from tiermem.memory._store import Where
from tiermem.memory._system import MemorySystem
from tiermem.pipelines import compact_subject

__all__ = ["JanitorReport", "run_janitor"]

log = logging.getLogger("tiermem.jobs.janitor")

WORKING_FADE_BELOW = 0.05  # a working entry this faded leaves the active set (it stays in the session log)


@dataclass(kw_only=True)
class JanitorReport:
    """What one janitor run changed (or, in a dry run, would change)."""

    dry_run: bool
    users: int = 0
    facts_archived: int = 0
    working_faded: int = 0
    episodes_expired: int = 0
    edges_removed: int = 0
    facts_merged: int = 0
    compaction_refused: int = 0
    compaction_failed: int = 0
    store: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _scopes(mem: MemorySystem) -> list[MemoryContext]:
    pairs = set(mem.store.scopes("facts")) | set(mem.store.scopes("working")) | set(mem.store.scopes("episodes"))
    return [MemoryContext(namespace=ns, user_id=user) for ns, user in sorted(pairs)]


async def run_janitor(mem: MemorySystem, now: datetime | None = None, *, dry_run: bool = False) -> JanitorReport:
    """One pass over every user in the store; idempotent and safe beside live captures."""
    now = now or mem.clock.now()
    report = JanitorReport(dry_run=dry_run)
    for ctx in _scopes(mem):
        report.users += 1
        archived = await _facts(mem, ctx, now, report, dry_run)
        await _working(mem, ctx, now, report, dry_run)
        await _episodes(mem, ctx, now, report, dry_run)
        if mem.relations is not None:
            if dry_run:  # the facts this run would archive count as gone
                report.edges_removed += len(await asyncio.to_thread(mem.dangling_edges_sync, ctx, ignoring=archived))
            else:
                report.edges_removed += await asyncio.to_thread(mem.remove_dangling_edges_sync, ctx)
        await _compact(mem, ctx, now, report, dry_run)
    if not dry_run and mem.hygiene is not None:
        cleanup = mem.hygiene.cleanup_older_than
        await asyncio.to_thread(mem.store.optimize, cleanup_older_than=cleanup)
    report.store = await asyncio.to_thread(mem.store.stats)
    log.info("janitor: %s", report.as_dict())
    return report


async def _facts(
    mem: MemorySystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool
) -> set[str]:
    """Archive facts whose effective confidence fell under the floor; returns their ids."""
    if mem.semantic is None:
        return set()
    half_life, floor = mem.semantic.half_life, mem.semantic.archive_below
    facts: list[Fact] = await asyncio.to_thread(mem.facts_sync, ctx)
    faded = [
        f.model_copy(update={"status": "archived", "updated_at": now})
        for f in facts
        if effective_confidence(f, now, half_life=half_life) < floor
    ]
    report.facts_archived += len(faded)
    if faded and not dry_run:
        await asyncio.to_thread(mem.put_facts_sync, faded)
    return {f.id for f in faded}


async def _working(mem: MemorySystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool) -> None:
    if mem.working is None:
        return
    where = Where(eq=mem.scope(ctx), isin={"status": ["active"]})
    entries: list[WorkingEntry] = await asyncio.to_thread(mem.store.query, "working", where)
    latest: dict[str, int] = {}
    for e in entries:
        latest[e.session_id] = max(latest.get(e.session_id, 0), e.seq)
    half = mem.working.salience_half_life
    faded = [
        e.model_copy(update={"status": "overflow", "updated_at": now})
        for e in entries
        if turn_decay(e.salience, latest[e.session_id] - e.seq, half_life_turns=half) < WORKING_FADE_BELOW
    ]
    report.working_faded += len(faded)
    if faded and not dry_run:
        await asyncio.to_thread(mem.store.upsert, "working", faded, mem.embed([e.text for e in faded]))


async def _episodes(mem: MemorySystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool) -> None:
    if mem.episodic is None or mem.episodic.ttl is None:
        return
    cutoff = now - mem.episodic.ttl
    episodes: list[Episode] = await asyncio.to_thread(mem.episodes_sync, ctx)
    expired = [e for e in episodes if e.ended_at < cutoff and e.status != "pending"]
    report.episodes_expired += len(expired)
    if expired and not dry_run:
        # TTL means gone: the episode, the turns it covers and its session's closed working entries.
        # A reused session id may have newer turns and live working memory: those stay.
        scope = mem.scope(ctx)
        turns = [t for e in expired for t in e.provenance]
        closed = Where(eq={**scope, "status": "closed"}, isin={"session_id": [e.session_id for e in expired]})
        await asyncio.to_thread(mem.store.delete, "episodes", Where(eq=scope, isin={"id": [e.id for e in expired]}))
        if turns:
            await asyncio.to_thread(mem.store.delete, "turns", Where(eq=scope, isin={"id": turns}))
        await asyncio.to_thread(mem.store.delete, "working", closed)


async def _compact(mem: MemorySystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool) -> None:
    if mem.semantic is None:
        return
    facts: list[Fact] = await asyncio.to_thread(mem.facts_sync, ctx)
    if len(facts) <= mem.semantic.max_facts or dry_run:
        return
    by_subject: dict[str, list[Fact]] = {}
    for f in facts:
        by_subject.setdefault(f.subject, []).append(f)
    excess = len(facts) - mem.semantic.max_facts
    for subject, group in sorted(by_subject.items(), key=lambda kv: -len(kv[1])):
        if excess <= 0:
            break
        try:
            plan = await compact_subject(mem.stages, ctx=ctx, subject=subject, facts=group, now=now)
        except TiermemError as exc:  # a failed merge leaves the facts as they were; next run retries
            log.warning("janitor: compaction of %s/%s failed: %s", ctx.user_id, subject, exc)
            report.compaction_failed += 1
            continue
        report.compaction_refused += plan.refused
        if plan.facts:
            await asyncio.to_thread(mem.put_facts_sync, plan.facts)
            report.facts_merged += plan.merged_sources
            excess -= plan.merged_sources - sum(1 for f in plan.facts if f.status == "active")
