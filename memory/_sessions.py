"""Ending a session: its observed turns become one episode (part of the composition root).

An episode covers the turns that were observed, and says so in its provenance; a turn still
pending when the session ends is encoded when it is observed later (the episode is re-encoded
and goes back to consolidation). Every step is idempotent, so a rerun after a crash finishes what
the crash left: an episode already written still closes its session's working entries. Another
process ending the same session at the same time is kept out by a lease in the store.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Literal

from tiermem.pipelines import PROVISIONAL, StageModel, encode_session, provisional_episode

from ._blocking import run_blocking
from ._capture import Capture
from ._clock import Clock
from ._errors import EmbedderError, ModelError, error_kind
from ._identity import episode_id, lease_key
from ._leases import Lease, Leases
from ._records import Episode, MemoryContext, Turn
from ._results import SessionResult
from ._retries import NO_ERROR, RetryPolicy, blocked, model_config
from ._tiers import Tiers

__all__ = ["LEASE_TTL", "Sessions", "held", "holder_id", "record_time"]

log = logging.getLogger(__name__)

LEASE_TTL = timedelta(minutes=10)
"""How long a dead process's lease blocks others; live holders renew it between model calls."""


def holder_id() -> str:
    """Names this process's leases (host, pid and a random part: two systems in one process differ)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@asynccontextmanager
async def held(leases: Leases, key: str, *, holder: str, ttl: timedelta = LEASE_TTL) -> AsyncIterator[Lease | None]:
    """The lease on ``key`` for the block, or None when another live holder has it."""
    lease = await run_blocking(leases.acquire, key, holder=holder, ttl=ttl)
    try:
        yield lease
    finally:
        if lease is not None:
            await run_blocking(leases.release, lease)


def _extended(existing: Episode, part: Episode, observed: Sequence[Turn]) -> Episode:
    """``existing`` with ``part`` (the summary of turns observed since it was consolidated) appended."""
    base, previous = existing.summary, str(existing.metadata.get("extension", ""))
    if previous and base.endswith(previous):  # an extension not yet consolidated: ``part`` covers its turns too
        base = base[: -len(previous)].rstrip()
    return existing.model_copy(
        update={
            "summary": f"{base} {part.summary}",
            "subjects": tuple(dict.fromkeys([*existing.subjects, *part.subjects])),
            "started_at": min(t.created_at for t in observed),
            "ended_at": max(t.created_at for t in observed),
            "updated_at": part.updated_at,
            "salience": max(existing.salience, part.salience),
            "status": "pending",
            "provenance": tuple(t.id for t in observed),
            **NO_ERROR,
            "attempts": 0,
            "metadata": {**existing.metadata, "extension": part.summary},
        }
    )


def record_time(clock: Clock, turns: Sequence[Turn]) -> datetime:
    """When records derived from ``turns`` are dated: the latest turn's own time for an import, else now."""
    if turns and all(t.dated for t in turns):
        return max(t.created_at for t in turns)
    return clock.now()


class Sessions:
    """``end_session`` and the re-encoding of sessions whose turns were observed late."""

    def __init__(
        self,
        *,
        tiers: Tiers,
        stages: StageModel,
        clock: Clock,
        capture: Capture,
        leases: Leases,
        holder: str,
        retries: RetryPolicy,
        encode: Literal["session", "consolidation"] = "session",
    ) -> None:
        self.tiers = tiers
        self.stages = stages
        self.clock = clock
        self.capture = capture
        self.leases = leases
        self.holder = holder
        self.retries = retries
        self.encode = encode
        """``"session"``: one model call encodes the session when it ends; ``"consolidation"``: no call, the
        episode is provisional (extractive) until the consolidation call summarises it."""

    async def end(self, ctx: MemoryContext, sid: str) -> SessionResult:
        """Encode the session (one model call, or none when encoding waits for consolidation) and close its
        working memory; idempotent."""
        sctx = ctx.model_copy(update={"session_id": sid})
        async with (
            self.capture.locks.session(sctx),
            held(self.leases, lease_key("session", ctx, session_id=sid), holder=self.holder) as lease,
        ):
            if lease is None:
                return SessionResult(episode=None, busy=True)
            return await self._encode(sctx, sid)

    async def _encode(self, ctx: MemoryContext, sid: str) -> SessionResult:
        config = model_config(self.stages)
        turns = await run_blocking(self.tiers.session_turns, ctx, sid)
        if not turns:
            return SessionResult(episode=None)
        for turn in [t for t in turns if t.status == "pending" and not blocked(t, config)]:
            await self.capture.observe(ctx, turn)  # one more chance before the session closes
        turns = await run_blocking(self.tiers.session_turns, ctx, sid)
        eid = episode_id(ctx, session_id=sid)
        existing = await run_blocking(self.tiers.episode, ctx, eid)
        if existing is not None and existing.status == "expired":
            # The janitor expired this session and kept only turns live facts cite: never re-encode those.
            turns = [t for t in turns if t.id not in set(existing.provenance)]
            if not turns:
                return SessionResult(episode=None)
        observed = [t for t in turns if t.status == "observed"]
        encoded = existing is not None and existing.status not in ("failed", "expired")
        if existing is not None and encoded and set(existing.provenance) >= {t.id for t in observed}:
            await run_blocking(self._close, ctx, self.clock.now())  # a crash may have left them open
            return SessionResult(episode=existing)  # encoded and nothing new since
        now = record_time(self.clock, observed or turns)
        if not observed:
            exc = ModelError(f"none of the session's {len(turns)} turns is observed yet")
            return await self._deferred(ctx, sid, turns, existing, exc, now)
        entries = await run_blocking(self.tiers.working_memory, ctx, include_inactive=True)
        covered = {t.id for t in observed}
        entries = [e for e in entries if not e.provenance or covered & set(e.provenance)]
        aliases = await run_blocking(self.tiers.aliases, ctx)
        names = [name.title() for name, subject in aliases.items() if subject == "user"]
        done = set(existing.metadata.get("consolidated_turns", [])) if existing and existing.summary else set()
        fresh = [t for t in observed if t.id not in done]
        # Consolidated before and extended since (turns observed late): encode only the new turns and
        # append them, so consolidation sees only what is new; else encode the whole session.
        part_turns = fresh if done and fresh else observed
        part_entries = [e for e in entries if not e.provenance or {t.id for t in part_turns} & set(e.provenance)]
        if self.encode == "consolidation":  # no call: the consolidation call writes the summary
            episode = provisional_episode(
                ctx=ctx, session_id=sid, entries=part_entries, turns=part_turns, user_names=names, aliases=aliases,
                now=now,
            )  # fmt: skip
        else:
            try:
                episode = await encode_session(
                    self.stages, ctx=ctx, session_id=sid, entries=part_entries, turns=part_turns,
                    user_names=names, aliases=aliases, now=now,
                )  # fmt: skip
            except (ModelError, EmbedderError) as exc:
                return await self._deferred(ctx, sid, turns, existing, exc, now)
        if existing is not None and done and fresh:
            episode = _extended(existing, episode, observed)
            if self.encode == "consolidation":
                episode = episode.model_copy(update={"metadata": {**episode.metadata, PROVISIONAL: True}})
        if existing is not None and existing.pinned:
            episode = episode.model_copy(update={"pinned": True})
        if all(t.dated for t in observed):  # an import: its facts are dated by it too
            episode = episode.model_copy(update={"metadata": {**episode.metadata, "dated": True}})
        await run_blocking(self.tiers.add_episode, episode)
        await run_blocking(self._close, ctx, now)
        log.debug("session %s encoded as episode %s (%d of %d turns)", sid, episode.id, len(observed), len(turns))
        return SessionResult(episode=episode)

    def _close(self, ctx: MemoryContext, now: datetime) -> None:
        """Close the session's working entries (blocking); entries of turns observed later close on re-encoding."""
        entries = self.tiers.working_memory(ctx, include_inactive=True)
        closed = [e.model_copy(update={"status": "closed", "updated_at": now}) for e in entries if e.status != "closed"]
        self.tiers.put_working(closed)

    async def _deferred(
        self,
        ctx: MemoryContext,
        sid: str,
        turns: Sequence[Turn],
        existing: Episode | None,
        exc: ModelError | EmbedderError,
        now: datetime,
    ) -> SessionResult:
        """Record that the session waits for encoding: a failed marker episode retry_pending finds."""
        if existing is not None and existing.status in ("pending", "consolidated") and existing.summary:
            # Keep what it says, but as "failed": retry_pending re-encodes it with the turns it lacks.
            stale = existing.model_copy(update={"status": "failed"})
            stale = self.retries.failed(stale, exc, config=model_config(self.stages), now=self.clock.now(),
                                        parked_status="parked")  # fmt: skip
            await run_blocking(self.tiers.add_episode, stale)
            log.warning("session %s: re-encoding deferred, the previous summary stays (%s)", sid, exc)
            return SessionResult(episode=stale, deferred=True, error=str(exc), exception=exc)
        marker = existing or Episode(
            id=episode_id(ctx, session_id=sid), namespace=ctx.namespace, user_id=ctx.user_id, session_id=sid,
            summary="", started_at=turns[0].created_at, ended_at=turns[-1].created_at, created_at=now,
            updated_at=now, status="failed",
        )  # fmt: skip
        marker = marker.model_copy(
            update={"status": "failed", "provenance": () if not marker.summary else marker.provenance}
        )
        config = model_config(self.stages)
        marker = self.retries.failed(marker, exc, config=config, now=self.clock.now(), parked_status="parked")
        await run_blocking(self.tiers.add_episode, marker)
        log.warning("session %s: episode encoding deferred (%s failure): %s", sid, error_kind(exc), exc)
        return SessionResult(episode=None, deferred=True, error=str(exc), exception=exc)

    async def reencode_late(self, turns: Sequence[Turn]) -> int:
        """Re-encode ended sessions that gained observed turns since their episode; returns how many."""
        done = 0
        for ns, user, sid in sorted({(t.namespace, t.user_id, t.session_id) for t in turns if t.status == "observed"}):
            ctx = MemoryContext(namespace=ns, user_id=user, session_id=sid)
            episode = await run_blocking(self.tiers.episode, ctx, episode_id(ctx, session_id=sid))
            if episode is None or episode.status == "expired":
                continue  # the session is still open (or gone): it is encoded when it ends
            late = {t.id for t in turns if t.session_id == sid} - set(episode.provenance)
            if late and not (await self.end(ctx, sid)).deferred:
                done += 1
        return done

    @staticmethod
    def cleared(episode: Episode, now: datetime) -> Episode:
        """``episode`` with its failure forgotten (after a successful step)."""
        return episode.model_copy(update={**NO_ERROR, "attempts": 0, "updated_at": now})
