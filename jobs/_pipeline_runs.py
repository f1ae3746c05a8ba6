"""Scheduled pipeline work: consolidation, digests, idle sessions, retries.

Plain async functions taking the system and ``now``; each is idempotent, safe beside live
captures, and returns (and logs) a report of counts.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import datetime, timedelta

from tiermem.memory._blocking import run_blocking
from tiermem.memory._records import Episode, MemoryContext, consolidation_order
from tiermem.memory._store import Where

from ._host import MaintainedSystem

__all__ = ["close_idle_sessions", "retry_pending", "run_consolidation", "run_digests"]

log = logging.getLogger("tiermem.jobs")


CONSOLIDATION_BATCH = 4
"""Episodes per consolidation call (``consolidate``'s default ``batch_size``): a full batch is not waited on."""


async def run_consolidation(mem: MaintainedSystem, now: datetime | None = None) -> dict[str, int]:
    """Consolidate every user with pending episodes.

    Only full batches go at once: the episodes beyond the last full batch wait until they hold the
    episodic option ``batch_turns`` turns together (20 by default) or the oldest of them has waited
    ``batch_wait`` (3 days by default; ``waiting`` counts the users with episodes left waiting):
    fewer, fuller model calls. A ``batch_wait`` of ``None`` consolidates whatever is pending;
    ``MaintainedSystem.consolidate`` itself never waits.
    """
    now = now or mem.clock.now()
    episodic = mem.capability.episodic
    wait = episodic.batch_wait if episodic is not None else None
    turns = episodic.batch_turns if episodic is not None else None
    scopes = await run_blocking(mem.store.scopes, "episodes", Where(eq={}, isin={"status": ["pending"]}))
    report: dict[str, int] = {"users": 0, "episodes": 0, "deferred": 0, "refused": 0, "waiting": 0}
    for namespace, user in scopes:
        ctx = MemoryContext(namespace=namespace, user_id=user)
        limit = None
        if wait is not None:
            limit = _ready(
                await run_blocking(mem.tiers.episodes, ctx, statuses=["pending"]), now, wait=wait, turns=turns
            )
            if limit is not None:
                report["waiting"] += 1
                if limit == 0:
                    continue
        result = await mem.consolidate(ctx, batch_size=CONSOLIDATION_BATCH, limit=limit)
        report["users"] += 1
        report["episodes"] += result.episodes
        report["deferred"] += int(result.deferred)
        report["refused"] += len(result.refusals)
    log.info("consolidation: %s", report)
    return report


def _ready(pending: list[Episode], now: datetime, *, wait: timedelta, turns: int | None) -> int | None:
    """How many of ``pending`` to consolidate now (None: all): the full batches, in consolidation's
    order, unless the partial batch after them holds ``turns`` turns or has waited ``wait`` (from
    its oldest session's end)."""
    pending = sorted(pending, key=consolidation_order)
    full = len(pending) // CONSOLIDATION_BATCH * CONSOLIDATION_BATCH
    rest = pending[full:]
    if not rest or now - min(e.ended_at for e in rest) >= wait:
        return None
    if turns is not None and sum(len(e.provenance) for e in rest) >= turns:
        return None
    return full


async def run_digests(mem: MaintainedSystem, now: datetime | None = None) -> dict[str, int]:
    """Rewrite the digest of every user whose facts changed since their last digest.

    A fact the digest was written from that is superseded, archived or forgotten makes it stale too;
    ``digest`` itself decides (and makes no model call for an unchanged user).
    """
    report: dict[str, int] = {"users": 0, "written": 0, "unchanged": 0, "deferred": 0}
    if mem.capability.digest_options is None:
        return report
    scopes = await run_blocking(mem.store.scopes, "facts", Where(eq={}, isin={"status": ["active"]}))
    for namespace, user in scopes:
        ctx = MemoryContext(namespace=namespace, user_id=user)
        report["users"] += 1
        result = await mem.digest(ctx)
        report["unchanged"] += int(result.unchanged)
        report["written"] += int(result.digest is not None and not result.unchanged)
        report["deferred"] += int(result.deferred)
    log.info("digests: %s", report)
    return report


async def close_idle_sessions(
    mem: MaintainedSystem, now: datetime | None = None, *, idle_after: timedelta | None = None
) -> dict[str, int]:
    """Sessions with no turn for ``idle_after`` (default: the episodic option) become episodes."""
    now = now or mem.clock.now()
    episodic = mem.capability.episodic
    idle = idle_after or (episodic.idle_after if episodic else timedelta(minutes=30))
    report: dict[str, int] = {"closed": 0, "deferred": 0}
    last_turn = await run_blocking(mem.store.last_activity, "turns")
    encoded = await run_blocking(mem.store.last_activity, "episodes")
    for (namespace, user, session), when in sorted(last_turn.items()):
        if when > now - idle:
            continue
        episode_at = encoded.get((namespace, user, session))
        if episode_at is not None and episode_at >= when:
            continue  # already encoded after its last turn
        result = await mem.end_session(MemoryContext(namespace=namespace, user_id=user, session_id=session))
        report["closed"] += int(result.episode is not None)
        report["deferred"] += int(result.deferred)
    log.info("idle sessions: %s", report)
    return report


async def retry_pending(mem: MaintainedSystem, now: datetime | None = None) -> dict[str, int]:
    """Redo failed model work whose backoff has passed: pending turns, failed encodings, stalled consolidations.

    Work out of attempts stays parked (``stats()`` shows it) until ``retry_pending(include_parked=True)``.
    """
    report = asdict(await mem.retry_pending(due_only=True))
    log.info("retries: %s", report)
    return report
