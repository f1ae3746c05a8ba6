"""Retrying pending work, a part of the write side: the model work that failed, redone.

:class:`~tiermem.memory._write._write_side.MemorySystem` holds a :class:`PendingRetries` and answers
``retry_pending`` with it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from tiermem.pipelines import StageModel

from .._blocking import run_blocking
from .._clock import Clock
from .._records import MemoryContext
from .._results import RetryReport, SessionResult
from .._retries import blocked, due, model_config
from .._scope import checked_context
from .._tiers import Tiers
from ._capture import Capture
from ._consolidation import Consolidation
from ._sessions import Sessions

__all__ = ["PendingRetries"]

log = logging.getLogger(__name__)


class PendingRetries:
    """Turns, episode encodings and consolidations that failed, redone through the write side's parts."""

    def __init__(
        self,
        *,
        tiers: Tiers,
        stages: StageModel,
        clock: Clock,
        capture: Capture,
        sessions: Sessions,
        consolidation: Consolidation,
        end_session: Callable[[MemoryContext], Awaitable[SessionResult]],
    ) -> None:
        self.tiers = tiers
        self.stages = stages
        self.clock = clock
        self._capture = capture
        self._sessions = sessions
        self._consolidation = consolidation
        self.end_session = end_session

    async def retry_pending(
        self, ctx: MemoryContext | None = None, *, include_parked: bool = False, due_only: bool = False
    ) -> RetryReport:
        """Redo the model work that failed: turns, episode encodings, consolidations (this user's, or all).

        Work that failed permanently under the model configuration still in use is skipped (and
        counted in ``skipped``): it would fail the same way until the key, model or settings change.
        Parked work (out of attempts) is retried only with ``include_parked``; ``due_only`` (the
        scheduled job) leaves work whose backoff has not passed.
        """
        report = RetryReport()
        config, now = model_config(self.stages), self.clock.now()
        scope = checked_context(ctx) if ctx is not None else None
        turns = await run_blocking(self.tiers.pending_turns, scope, include_parked=include_parked)
        observed = []
        for turn in sorted(turns, key=lambda t: (t.session_id, t.seq)):
            if blocked(turn, config):
                report.skipped += 1
                continue
            if due_only and not due(turn, now):
                continue
            tctx = MemoryContext(namespace=turn.namespace, user_id=turn.user_id, session_id=turn.session_id)
            report.turns += 1
            async with self._capture.locks.session(tctx):
                result = await self._capture.observe(tctx, turn)
            report.turns_ok += 0 if result.deferred else 1
            observed.append(result.turn)
        report.sessions = await self._sessions.reencode_late(observed)
        episodes = await run_blocking(self.tiers.unfinished_episodes, scope, include_parked=include_parked)
        users: dict[tuple[str, str], MemoryContext] = {}
        for episode in episodes:
            if blocked(episode, config):
                report.skipped += 1
                continue
            ectx = MemoryContext(namespace=episode.namespace, user_id=episode.user_id, session_id=episode.session_id)
            if episode.status == "failed" or (episode.status == "parked" and not episode.summary):
                if due_only and not due(episode, now):
                    continue
                report.episodes += 1
                report.episodes_ok += 0 if (await self.end_session(ectx)).deferred else 1
            users[(episode.namespace, episode.user_id)] = ectx
        for uctx in users.values():
            done = await self._consolidation.consolidate(uctx, due_only=due_only, include_parked=include_parked)
            if not done.deferred and not done.busy:
                report.consolidations += 1
        if report.skipped:
            log.warning(
                "%d turns or episodes not retried: they failed permanently under model configuration %s; "
                "fix the configuration (key, model, settings) and they are retried",
                report.skipped,
                config,
            )
        return report
