"""The removal guard: a janitor run that would take too much of one user's memory at once stops for them.

Memories age a little at a time, so one run removing most of what a user holds is far likelier a
mistake (a clock or TTL set wrong, an old import whose clocks counted from the conversation's date)
than ageing. The guard compares what the run would remove (found by a dry run of that user first)
with what the user holds, and stops the run for that user over ``HygieneOptions.max_removed_share``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tiermem.memory._options import HygieneOptions
from tiermem.memory._records import MemoryContext
from tiermem.memory._scope import scope
from tiermem.memory._store import Where

from ._host import MaintainedSystem

__all__ = ["GUARDED", "Stopped", "held", "stop_for", "weigh"]

GUARDED = ("facts", "episodes", "turns")
"""What the guard weighs (``JanitorReport.removed()`` tiers): what leaves recall for good. A faded working
entry stays in the session log, a closed edge stays as history."""


@dataclass(kw_only=True)
class Stopped:
    """A user the guard left as they were: what the run would have removed, and out of how much."""

    namespace: str
    user_id: str
    would_remove: dict[str, int]
    """Per tier: facts archived, episodes expired, turns deleted."""
    held: int
    """The user's active facts, episodes and turns together."""
    share: float


def held(mem: MaintainedSystem, ctx: MemoryContext) -> int:
    """What the user holds, blocking: active facts, episodes not yet expired, stored turns."""
    facts = len(mem.tiers.facts(ctx))
    episodes = sum(1 for e in mem.tiers.episodes(ctx) if e.status != "expired")
    return facts + episodes + mem.store.count("turns", Where(eq=scope(ctx)))


def weigh(
    mem: MaintainedSystem, ctx: MemoryContext, would_remove: dict[str, int], hygiene: HygieneOptions
) -> Stopped | None:
    """Blocking: :func:`stop_for`, reading what the user holds only when the run removes enough to be stopped."""
    if hygiene.max_removed_share is None or sum(would_remove.values()) < max(hygiene.guard_min_removed, 1):
        return None
    return stop_for(ctx, would_remove, held(mem, ctx), hygiene)


def stop_for(ctx: MemoryContext, would_remove: dict[str, int], holding: int, hygiene: HygieneOptions) -> Stopped | None:
    """The stop, when removing ``would_remove`` of ``holding`` records is more than the options allow."""
    removing = sum(would_remove.values())
    limit = hygiene.max_removed_share
    if limit is None or removing == 0 or removing < hygiene.guard_min_removed:
        return None
    share = removing / max(holding, removing)
    if share <= limit:
        return None
    return Stopped(
        namespace=ctx.namespace, user_id=ctx.user_id, would_remove=would_remove, held=holding, share=round(share, 4)
    )
