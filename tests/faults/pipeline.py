"""The faulty run: capture a workload through a failing model, end every session, consolidate, then
``retry_pending()`` with the model healthy again; the same for the test and the bench."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiermem import MemoryContext, system
from tiermem.memory._llm import LLM
from tiermem.memory._system import MemorySystem
from tiermem.memory.testing import FrozenClock, HashingEmbedder
from tiermem.pipelines import LLMStages

from .census import Spec
from .model import TokenModel

__all__ = ["FaultyRun", "build", "run_faulty"]


def build(
    store: str | Path,
    fake: TokenModel,
    *,
    num_retries: int = 0,
    validation_retries: int = 0,
    clock: FrozenClock | None = None,
    storage_options: dict[str, str] | None = None,
) -> MemorySystem:
    """A system on ``store`` answered by ``fake`` through litellm.

    ``num_retries`` / ``validation_retries``: the LLM's own retries (0: every fault reaches the pipeline).
    Transient retries wait 10 ms instead of half a second, so a run's time is the library's, not sleeps.
    """
    llm = LLM(fake.model, num_retries=num_retries, validation_retries=validation_retries, retry_backoff=0.01)
    return system(
        model=LLMStages(llm),
        store=str(store),
        storage_options=storage_options,
        embedder=HashingEmbedder(64),
        clock=clock or FrozenClock(),
        digest=False,
    )


@dataclass(kw_only=True)
class FaultyRun:
    """What the run saw before the census: deferrals while faulty, what the retry did."""

    captures: int = 0
    deferred_captures: int = 0
    deferred_sessions: int = 0
    deferred_consolidations: int = 0
    retries: list[dict[str, Any]] = field(default_factory=list)
    parked: bool = False


async def _capture_user(mem: MemorySystem, specs: Sequence[Spec], run: FaultyRun) -> None:
    by_session: dict[str, list[Spec]] = defaultdict(list)
    for spec in specs:
        by_session[spec.session_id].append(spec)
    for sid, turns in by_session.items():
        for spec in turns:
            result = await mem.capture(spec.ctx, spec.messages, idempotency_key=spec.key, at=spec.at)
            run.captures += 1
            run.deferred_captures += int(result.deferred)
        ended = await mem.end_session(turns[0].ctx, sid)
        run.deferred_sessions += int(ended.deferred)
    done = await mem.consolidate(MemoryContext(user_id=specs[0].user_id))
    run.deferred_consolidations += int(done.deferred)


def _parked(mem: MemorySystem) -> bool:
    """Anything out of attempts: a turn ("failed") or an episode ("parked"), any user's."""
    turns = mem.tiers.pending_turns(None, include_parked=True)
    episodes = mem.tiers.unfinished_episodes(None, include_parked=True)
    return any(t.status == "failed" for t in turns) or any(e.status == "parked" for e in episodes)


async def run_faulty(mem: MemorySystem, fake: TokenModel, specs: Sequence[Spec]) -> FaultyRun:
    """Users side by side on one event loop (an app serving several), each session ended, each user
    consolidated; then the model heals and ``retry_pending()`` runs (again with ``include_parked`` if
    anything was parked)."""
    run = FaultyRun()
    users: dict[str, list[Spec]] = defaultdict(list)
    for spec in specs:
        users[spec.user_id].append(spec)
    await asyncio.gather(*(_capture_user(mem, user_specs, run) for user_specs in users.values()))
    fake.faults.enabled = False
    report = await mem.retry_pending()
    run.retries.append(vars(report))
    if await asyncio.to_thread(_parked, mem):
        run.parked = True
        run.retries.append(vars(await mem.retry_pending(include_parked=True)))
    return run
