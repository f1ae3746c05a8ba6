"""The hygiene janitor: decay, archive, expire, settle dangling edges, compact facts and storage.

Each step has its switch in :class:`HygieneOptions`; ``hygiene=False`` turns them all off, and
then a run reads nothing but the options and writes nothing. The clocks count store time (see
``tiermem.memory._decay``), and a run that would remove too much of a user at once stops for that
user unless forced (``jobs._guard``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime

from tiermem.memory._blocking import run_blocking
from tiermem.memory._decay import effective_confidence, turn_decay
from tiermem.memory._errors import TiermemError, UserErasedError
from tiermem.memory._options import HygieneOptions
from tiermem.memory._records import Fact, MemoryContext, shared_kind
from tiermem.memory._store import Where, user_writes, user_writes_async
from tiermem.memory._text import loggable
from tiermem.memory._tiers import scope
from tiermem.pipelines import compact_subject

from ._expiry import expire
from ._guard import GUARDED, Stopped, weigh
from ._host import MaintainedSystem

__all__ = ["STEPS", "JanitorReport", "Stopped", "run_janitor"]

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
    stopped: list[Stopped] = field(default_factory=list)
    """Users the removal guard left as they were (``HygieneOptions.max_removed_share``), with what it spared."""
    store: dict[str, dict[str, int]] = field(default_factory=dict)

    def removed(self) -> dict[str, int]:
        """What the run took out of live memory (a dry run: would take), per tier."""
        return {
            "facts": self.facts_archived,
            "episodes": self.episodes_expired,
            "turns": self.turns_removed,
            "working": self.working_faded,
            "edges": self.edges_removed,
        }

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def add(self, user: JanitorReport) -> None:
        """Count one user's pass in this run's totals."""
        for f in fields(self):
            value = getattr(user, f.name)
            if type(value) is int and f.name != "users":  # the counts (a bool is an int, but not its type)
                setattr(self, f.name, getattr(self, f.name) + value)


def enabled_steps(hygiene: HygieneOptions | None) -> list[str]:
    """The steps ``hygiene`` switches on (none for ``hygiene=False``)."""
    return [] if hygiene is None else [step for step in STEPS if getattr(hygiene, step)]


async def run_janitor(
    mem: MaintainedSystem, now: datetime | None = None, *, dry_run: bool = False, force: bool = False
) -> JanitorReport:
    """One pass over every user in the store; idempotent and safe beside live captures.

    A user the run would take more than ``hygiene.max_removed_share`` of is left as they are, logged
    at WARNING and listed in ``stopped`` (a dry run says so too); ``force=True`` runs them anyway.
    """
    now = now or mem.clock.now()
    hygiene = mem.capability.hygiene
    steps = enabled_steps(hygiene)
    report = JanitorReport(dry_run=dry_run, steps=steps)
    # An erase's purge that could not run then (another process was purging, or it died): an erase's promise.
    if not dry_run and not await run_blocking(mem.store.purge_pending):
        log.info("janitor: the requested purge is still pending: another process is purging")
    if hygiene is None or not steps:  # hygiene off: not even a read that could create a missing table
        log.info("janitor: every step is off for this system")
        return report
    guarded = not force and hygiene.max_removed_share is not None
    for ctx in await run_blocking(_users, mem):
        report.users += 1
        preview = await _user(mem, ctx, now, steps, dry_run=True) if guarded else None
        if preview is not None:  # what the run would remove, weighed before anything changes
            would = {tier: n for tier, n in preview.removed().items() if tier in GUARDED}
            stop = await run_blocking(weigh, mem, ctx, would, hygiene)
            if stop is not None:
                log.warning(
                    "janitor: stopped for %s/%s: this run would remove %d of their %d facts, episodes and turns "
                    "(%s), more than max_removed_share=%s; nothing of theirs changed. Check the clock and the TTL; "
                    "if it is meant, run it with force=True (tiermem janitor --force)",
                    ctx.namespace, ctx.user_id, sum(would.values()), stop.held, would, hygiene.max_removed_share,
                )  # fmt: skip
                report.stopped.append(stop)
                continue
        try:
            done = preview if dry_run and preview is not None else await _user(mem, ctx, now, steps, dry_run=dry_run)
            report.add(done)
        except UserErasedError:  # erased while this pass ran: nothing of theirs written back
            log.info("janitor: %s/%s was erased during the pass", ctx.namespace, ctx.user_id)
    if not dry_run and "optimize" in steps:
        await run_blocking(mem.store.optimize, cleanup_older_than=hygiene.cleanup_older_than)
    report.store = await run_blocking(mem.store.stats)
    log.info("janitor: %s", report.as_dict())
    return report


async def _user(
    mem: MaintainedSystem, ctx: MemoryContext, now: datetime, steps: list[str], *, dry_run: bool
) -> JanitorReport:
    """One user's pass: what it changed (a dry run: would change); in an erasure fence (``Store.fenced``)."""
    async with mem.store.fenced():
        return await _user_pass(mem, ctx, now, steps, dry_run=dry_run)


async def _user_pass(
    mem: MaintainedSystem, ctx: MemoryContext, now: datetime, steps: list[str], *, dry_run: bool
) -> JanitorReport:
    report = JanitorReport(dry_run=dry_run, steps=steps)
    # What these steps read is what they write back: a correction or consolidation waits, none is undone.
    async with nullcontext() if dry_run else user_writes_async(mem.store, ctx):
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
    if "compaction" in steps:  # its model call holds no lease; its write checks what it merged is unchanged
        await _compact(mem, ctx, now, report, dry_run)
    return report


def _users(mem: MaintainedSystem) -> list[MemoryContext]:
    """Every user with memories, edges included: edges can outlive every fact they were derived from; then
    every shared scope holding memories (a team's facts decay, expire and compact like a user's), read
    through the operator's view of it (no user's context reaches a scope's rows)."""
    pairs = set(mem.tiers.owners()) | set(mem.store.scopes("edges"))
    users = [MemoryContext(namespace=ns, user_id=u) for ns, u in sorted(pairs) if shared_kind(u) is None]
    access = mem.capability.access
    return users + [access.operator_view(ns, u) for ns, u in sorted(pairs) if shared_kind(u) is not None]


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
            plan = await compact_subject(
                mem.stages, ctx=ctx, subject=subject, facts=group, now=now, policy=mem.policy
            )  # the system's policy: no merge restates what it keeps out
        except TiermemError as exc:  # a failed merge leaves the facts as they were; next run retries
            log.warning("janitor: compaction of %s/%s failed: %s", ctx.user_id, loggable(subject), loggable(exc))
            report.compaction_failed += 1
            continue
        report.compaction_refused += plan.refused
        if plan.facts and not await run_blocking(_merged, mem, ctx, group, plan.facts):
            log.info("janitor: %s/%s changed during its compaction; the next run retries", ctx.user_id, subject)
            report.compaction_failed += 1
            continue
        if plan.facts:
            report.facts_merged += plan.merged_sources
            excess -= plan.merged_sources - sum(1 for f in plan.facts if f.status == "active")


def _merged(mem: MaintainedSystem, ctx: MemoryContext, shown: Sequence[Fact], merged: Sequence[Fact]) -> bool:
    """Write a compaction's facts if none it replaces changed since the model saw them; whether it wrote."""
    seen = {f.id: f for f in shown}
    replaced = sorted({f.id for f in merged} & set(seen))
    with user_writes(mem.store, ctx):
        current = {f.id: f for f in mem.store.get("facts", Where(eq=scope(ctx)), replaced)}
        if any(current.get(i) != seen[i] for i in replaced):
            return False
        mem.tiers.put_facts(merged)
    return True
