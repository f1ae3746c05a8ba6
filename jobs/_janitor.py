"""The hygiene janitor: decay, archive, expire, settle dangling edges, compact facts and storage.

Each step has its switch in :class:`HygieneOptions`; ``hygiene=False`` turns them all off, and
then a run reads nothing but the options and writes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime

from tiermem.memory._blocking import run_blocking
from tiermem.memory._decay import effective_confidence, turn_decay
from tiermem.memory._errors import TiermemError
from tiermem.memory._options import HygieneOptions
from tiermem.memory._records import Fact, MemoryContext
from tiermem.pipelines import compact_subject

from ._expiry import expire
from ._host import MaintainedSystem

__all__ = ["STEPS", "JanitorReport", "run_janitor"]

log = logging.getLogger("tiermem.jobs.janitor")

WORKING_FADE_BELOW = 0.05  # a working entry this faded leaves the active set (it stays in the session log)
STEPS = ("decay", "archive", "dangling_edges", "ttl", "compaction", "optimize")
"""The janitor's steps in run order, each a switch of :class:`HygieneOptions`."""


@dataclass(kw_only=True)
class JanitorReport:
    """What one janitor run changed (or, in a dry run, would change)."""

    dry_run: bool
    steps: list[str] = field(default_factory=list)
    """The steps this run took (switched on in the hygiene options)."""
    users: int = 0
    facts_archived: int = 0
    working_faded: int = 0
    episodes_expired: int = 0
    turns_removed: int = 0
    """Turns of expired episodes deleted."""
    turns_kept: int = 0
    """Turns of expired episodes kept (compacted) because a live fact or edge cites them."""
    citations_rewritten: int = 0
    """Facts and edges whose provenance stopped citing expired turns (see ``jobs._expiry``)."""
    edges_removed: int = 0
    """Edges taken out of the current graph: closed, or deleted (``edges_deleted`` of them)."""
    edges_deleted: int = 0
    facts_merged: int = 0
    compaction_refused: int = 0
    compaction_failed: int = 0
    store: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def enabled_steps(hygiene: HygieneOptions | None) -> list[str]:
    """The steps ``hygiene`` switches on (none for ``hygiene=False``)."""
    return [] if hygiene is None else [step for step in STEPS if getattr(hygiene, step)]


async def run_janitor(mem: MaintainedSystem, now: datetime | None = None, *, dry_run: bool = False) -> JanitorReport:
    """One pass over every user in the store; idempotent and safe beside live captures."""
    now = now or mem.clock.now()
    hygiene = mem.capability.hygiene
    steps = enabled_steps(hygiene)
    report = JanitorReport(dry_run=dry_run, steps=steps)
    if not steps:  # hygiene off: not even a read that could create a missing table
        log.info("janitor: every step is off for this system")
        return report
    for ctx in await run_blocking(_users, mem):
        report.users += 1
        archived = await _facts(mem, ctx, now, report, dry_run) if "archive" in steps else set()
        if "decay" in steps:
            await _working(mem, ctx, now, report, dry_run)
        if "dangling_edges" in steps and mem.relations.options is not None:
            # In a dry run the facts this run would archive count as ended already.
            close, delete = await run_blocking(mem.relations.dangling, ctx, ignoring=archived if dry_run else ())
            report.edges_removed += len(close) + len(delete)
            report.edges_deleted += len(delete)
            if not dry_run:
                await run_blocking(mem.relations.settle_dangling, ctx, close, delete)
        if "ttl" in steps:  # after the edges settle: which turns stay depends on what is still live
            expiry = await expire(mem, ctx, now, dry_run=dry_run, ended=archived)
            report.episodes_expired += expiry.episodes
            report.turns_removed += expiry.turns_removed
            report.turns_kept += expiry.turns_kept
            report.citations_rewritten += expiry.citations_rewritten
        if "compaction" in steps:
            await _compact(mem, ctx, now, report, dry_run)
    if not dry_run and hygiene is not None and "optimize" in steps:
        await run_blocking(mem.store.optimize, cleanup_older_than=hygiene.cleanup_older_than)
    report.store = await run_blocking(mem.store.stats)
    log.info("janitor: %s", report.as_dict())
    return report


def _users(mem: MaintainedSystem) -> list[MemoryContext]:
    """Every user with memories, edges included: edges can outlive every fact they were derived from."""
    pairs = {(c.namespace, c.user_id) for c in mem.tiers.users()} | set(mem.store.scopes("edges"))
    return [MemoryContext(namespace=ns, user_id=user) for ns, user in sorted(pairs)]


async def _facts(
    mem: MaintainedSystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool
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


async def _working(
    mem: MaintainedSystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool
) -> None:
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


async def _compact(
    mem: MaintainedSystem, ctx: MemoryContext, now: datetime, report: JanitorReport, dry_run: bool
) -> None:
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
