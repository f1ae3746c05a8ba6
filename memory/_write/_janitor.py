"""One janitor pass for the command line, which reaches the jobs only through the composition root."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._write_side import MemorySystem

if TYPE_CHECKING:
    from tiermem.jobs import JanitorReport

__all__ = ["janitor_pass"]


async def janitor_pass(mem: MemorySystem, *, dry_run: bool = False, force: bool = False) -> JanitorReport:
    """``tiermem.jobs.run_janitor`` now, over every user of ``mem``'s store."""
    from tiermem.jobs import run_janitor  # lazy, as the worker's: the jobs package brings APScheduler

    return await run_janitor(mem, dry_run=dry_run, force=force)
