"""The hygiene janitor: decay, archive, expire, drop dangling edges, compact facts and storage."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime

from tiermem.memory._blocking import run_blocking
from tiermem.memory._decay import effective_confidence, turn_decay
from tiermem.memory._errors import TiermemError
from tiermem.memory._records import Fact, MemoryContext
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


async def run_janitor(mem: MemorySystem, now: datetime | None = None, *, dry_run: bool = False) -> JanitorReport:
    """One pass over every user in the store; idempotent and safe beside live captures."""
    now = now or mem.clock.now()
    report = JanitorReport(dry_run=dry_run)
    for ctx in await run_blocking(mem.tiers.users):
        report.users += 1
        archived = await _facts(mem, ctx, now, report, dry_run)
        await _working(mem, ctx, now, report, dry_run)
        await _episodes(mem, ctx, now, report, dry_run)
        if mem.relations.options is not None:
            if dry_run:  # the facts this run would archive count as gone
                report.edges_removed += len(await run_blocking(mem.relations.dangling_edges, ctx, ignoring=archived))
            else:
                report.edges_removed += await run_blocking(mem.relations.remove_dangling_edges, ctx)
        await _compact(mem, ctx, now, report, dry_run)
    hygiene = mem.capability.hygiene
    if not dry_run and hygiene is not None:
        await run_blocking(mem.store.optimize, cleanup_older_than=hygiene.cleanup_older_than)
    report.store = await run_blocking(mem.store.stats)
    log.info("janitor: %s", report.as_dict())
    return report


async def _facts(
    mem: MemorySystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool
) -> set[str]:
    """Archive facts whose effective confidence fell under the floor; returns their ids."""
    semantic = mem.capability.semantic
    if semantic is None:
        return set()
    half_life, floor = semantic.half_life, semantic.archive_below
    facts = await run_blocking(mem.tiers.facts, ctx)
    faded = [
        f.model_copy(update={"status": "archived", "updated_at": now})
        for f in facts
        if not f.pinned and effective_confidence(f, now, half_life=half_life) < floor
    ]
    report.facts_archived += len(faded)
    if faded and not dry_run:
        await run_blocking(mem.tiers.put_facts, faded)
    return {f.id for f in faded}


async def _working(mem: MemorySystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool) -> None:
    working = mem.capability.working
    if working is None:
        return
    entries = await run_blocking(mem.tiers.active_working, ctx)
    latest: dict[str, int] = {}
    for e in entries:
        latest[e.session_id] = max(latest.get(e.session_id, 0), e.seq)
    half = working.salience_half_life
    faded = [
        e.model_copy(update={"status": "overflow", "updated_at": now})
        for e in entries
        if turn_decay(e.salience, latest[e.session_id] - e.seq, half_life_turns=half) < WORKING_FADE_BELOW
    ]
    report.working_faded += len(faded)
    if faded and not dry_run:
        await run_blocking(mem.tiers.put_working, faded)


async def _episodes(mem: MemorySystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool) -> None:
    episodic = mem.capability.episodic
    if episodic is None or episodic.ttl is None:
        return
    cutoff = now - episodic.ttl
    episodes = await run_blocking(mem.tiers.episodes, ctx)
    expired = [e for e in episodes if e.ended_at < cutoff and e.status != "pending" and not e.pinned]
    report.episodes_expired += len(expired)
    if expired and not dry_run:  # TTL means gone: the episode, its turns, its session's closed entries
        await run_blocking(mem.tiers.forget_episodes, ctx, expired)


async def _compact(mem: MemorySystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool) -> None:
    semantic = mem.capability.semantic
    if semantic is None:
        return
    facts = await run_blocking(mem.tiers.facts, ctx)
    if len(facts) <= semantic.max_facts or dry_run:
        return
    by_subject: dict[str, list[Fact]] = {}
    for f in facts:
        if not f.pinned:  # a pinned fact is never merged away
            by_subject.setdefault(f.subject, []).append(f)
    excess = len(facts) - semantic.max_facts
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
            await run_blocking(mem.tiers.put_facts, plan.facts)
            report.facts_merged += plan.merged_sources
            excess -= plan.merged_sources - sum(1 for f in plan.facts if f.status == "active")
