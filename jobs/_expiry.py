"""Episodic TTL that keeps provenance sound: nothing live is left citing a deleted turn.

An expiring episode takes its turns with it, except the turns a live memory cites: an active
fact, or a current edge without a support set. Those stay, compacted to their messages, under a
summary-less "expired" tombstone of the episode (see ``Tiers.expire_episodes``); each run looks at
them again and lets go of the ones no live memory cites any more.

Other citations of an expiring turn are rewritten before the turn goes:

* an edge with a support set (current or closed) cites its supporting facts instead: it was
  derived from them, and they are stored records whose own turns stay while they are active;
* an inactive fact and a closed edge without support drop the citation: history keeps its text,
  the TTL takes the raw conversation. A fact's ``metadata["episodes"]`` drops deleted episodes.

Why keep the turns rather than rewrite every citation: for a live fact the turns are the only
evidence (``history()`` shows them, a user can check what was said), and no other record holds it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from tiermem.memory._blocking import run_blocking
from tiermem.memory._decay import ttl_start
from tiermem.memory._records import Edge, Fact, MemoryContext

from ._host import MaintainedSystem

__all__ = ["Expiry", "expire"]


@dataclass(kw_only=True)
class Expiry:
    """What one user's TTL pass does (or, in a dry run, would do)."""

    episodes: int = 0
    turns_removed: int = 0
    turns_kept: int = 0
    citations_rewritten: int = 0


async def expire(
    mem: MaintainedSystem, ctx: MemoryContext, now: datetime, *, dry_run: bool, ended: Collection[str] = ()
) -> Expiry:
    """Expire this user's episodes past the TTL (from :func:`ttl_start`); ``ended``: facts this run archives."""
    out = Expiry()
    episodic = mem.capability.episodic
    if episodic is None or episodic.ttl is None:
        return out
    cutoff = now - episodic.ttl
    episodes = await run_blocking(mem.tiers.episodes, ctx)
    # Never work not done yet (pending, parked: not consolidated), nor a pin; tombstones are looked at again below.
    idle = {"pending", "parked", "expired"}
    expired = [e for e in episodes if e.status not in idle and ttl_start(e) < cutoff and not e.pinned]
    tombstones = [e for e in episodes if e.status == "expired"]
    out.episodes = len(expired)
    if not expired and not tombstones:
        return out
    facts = await run_blocking(mem.tiers.facts, ctx, include_inactive=True)
    edges = await run_blocking(mem.tiers.edges, ctx)  # relations off or not: stored edges cite turns too
    expiring = {t for e in [*expired, *tombstones] for t in e.provenance}
    stored = {f.id for f in facts}
    keep = expiring & _cited_by_live(facts, edges, stored, ended)
    gone = expiring - keep
    deleted = {e.id for e in [*expired, *tombstones] if not keep.intersection(e.provenance)}
    new_facts = [f for f in (_fact(f, gone, deleted) for f in facts) if f is not None]
    new_edges = [e for e in (_edge(e, expiring, gone, stored) for e in edges) if e is not None]
    out.turns_kept = len(keep)
    out.citations_rewritten = len(new_facts) + len(new_edges)
    if dry_run:
        out.turns_removed = len(gone)
        return out
    # Citations first, deletions last: a run cut short leaves live records pointing only at rows still there.
    await run_blocking(mem.tiers.put_facts, new_facts)
    await run_blocking(mem.tiers.put_edges, new_edges)
    removed = await run_blocking(mem.tiers.expire_episodes, ctx, [*expired, *tombstones], keep=keep)
    out.turns_removed = len(removed)
    return out


def _cited_by_live(facts: Sequence[Fact], edges: Sequence[Edge], stored: set[str], ended: Collection[str]) -> set[str]:
    """Ids live memories cite as their evidence: active facts, current edges with no stored support fact."""
    cited = {p for f in facts if f.status == "active" and f.id not in ended for p in f.provenance}
    unsupported = (e for e in edges if e.current and not stored.intersection(e.support))
    return cited | {p for e in unsupported for p in e.provenance}


def _fact(fact: Fact, gone: set[str], deleted: set[str]) -> Fact | None:
    """The fact without citations of deleted turns and episodes, or None when it cites none."""
    episodes = fact.metadata.get("episodes")
    stale_meta = isinstance(episodes, list) and any(e in deleted for e in episodes)
    if not stale_meta and not gone.intersection(fact.provenance):
        return None
    update: dict[str, object] = {"provenance": tuple(p for p in fact.provenance if p not in gone)}
    if stale_meta:
        assert isinstance(episodes, list)
        update["metadata"] = {**fact.metadata, "episodes": [e for e in episodes if e not in deleted]}
    return fact.model_copy(update=update)  # updated_at stays: bookkeeping, not a change of what is known


def _edge(edge: Edge, expiring: set[str], gone: set[str], stored: set[str]) -> Edge | None:
    """The edge citing its stored support instead of expiring turns (without any: minus deleted turns)."""
    support = tuple(s for s in edge.support if s in stored)
    if support:
        if not expiring.intersection(edge.provenance):
            return None
        cited = [support if p in expiring else (p,) for p in edge.provenance]
        provenance = tuple(dict.fromkeys(p for group in cited for p in group))
    else:
        if not gone.intersection(edge.provenance):
            return None
        provenance = tuple(p for p in edge.provenance if p not in gone)
    return edge.model_copy(update={"provenance": provenance})
