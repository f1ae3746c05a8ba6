"""Ending a session: its observed turns become one episode (part of the composition root).

An episode covers the turns that were observed, and says so in its provenance; a turn still
pending when the session ends is encoded when it is observed later (the episode is re-encoded
and goes back to consolidation). Every step is idempotent, so a rerun after a crash finishes what
the crash left: an episode already written still closes its session's working entries. Another
process ending the same session at the same time is kept out by a lease in the store.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from tiermem.pipelines import PROVISIONAL, StageModel, encode_session, provisional_episode

from .._blocking import run_blocking
from .._clock import Clock
from .._errors import EmbedderError, ModelError, error_kind
from .._identity import episode_id, lease_key
from .._records import Episode, MemoryContext, Turn, WorkingEntry
from .._results import SessionResult
from .._retries import NO_ERROR, RetryPolicy, blocked, model_config
from .._store import Lease, Leases, Where, process_holder
from .._text import loggable
from .._tiers import Tiers, scope
from ._capture import Capture
from ._tasks import together

__all__ = ["LEASE_TTL", "Sessions", "held", "holder_id", "record_time"]

log = logging.getLogger(__name__)

LEASE_TTL = timedelta(minutes=10)
"""How long a dead process's lease blocks others; live holders renew it between model calls."""


def holder_id() -> str:
    """Names this process's leases (host, pid, a random part: two systems in one process differ, and what lets
    a process of this machine tell that the holder died: see ``process_holder``)."""
    return process_holder()


@asynccontextmanager
async def held(leases: Leases, key: str, *, holder: str, ttl: timedelta = LEASE_TTL) -> AsyncIterator[Lease | None]:
    """The lease on ``key`` for the block, or None when another live holder has it."""
    lease = await run_blocking(leases.acquire, key, holder=holder, ttl=ttl)
    try:
        yield lease
    finally:
        if lease is not None:
            await run_blocking(leases.release, lease)


@asynccontextmanager
async def held_many(
    leases: Leases, keys: Sequence[str], *, holder: str, ttl: timedelta = LEASE_TTL
) -> AsyncIterator[dict[str, Lease]]:
    """The leases on ``keys`` another live holder does not have, for the block, in one commit each way."""
    won = await run_blocking(leases.acquire_many, keys, holder=holder, ttl=ttl)
    try:
        yield won
    finally:
        if won:
            await run_blocking(leases.release_many, list(won.values()))


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


@dataclass(frozen=True, kw_only=True)
class _Ended:
    """One session's end before the group's writes: its result, the episode to write (its new one, or the marker
    of a deferred encoding) and when its open entries close (None: they stay as they are)."""

    result: SessionResult
    write: Episode | None = None
    close: datetime | None = None


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
        return (await self.end_many(ctx, [sid]))[0]

    async def end_many(self, ctx: MemoryContext, sids: Sequence[str]) -> list[SessionResult]:
        """:meth:`end` for several sessions of one user (an import ends its sessions by groups): per session the
        same steps, lock, lease and result, but one read of their turns, episodes and entries, their episodes
        written in one commit and their entries closed in one more. Results in the order of ``sids``."""
        results: dict[str, SessionResult] = {}
        async with AsyncExitStack() as stack:
            for sid in sorted(set(sids)):  # one order: two ends of overlapping groups never wait on each other
                await stack.enter_async_context(self.capture.locks.session(ctx.model_copy(update={"session_id": sid})))
            keys = {sid: lease_key("session", ctx, session_id=sid) for sid in sids}
            leases = await stack.enter_async_context(held_many(self.leases, list(keys.values()), holder=self.holder))
            mine = [sid for sid, key in keys.items() if key in leases]
            results.update({sid: SessionResult(episode=None, busy=True) for sid in keys if sid not in mine})
            if mine:
                results.update(await self._encode(ctx, mine))
        return [results[sid] for sid in sids]

    def _episodes(self, ctx: MemoryContext, sids: Sequence[str]) -> dict[str, Episode]:
        """The sessions' episodes that exist, in one read (blocking)."""
        ids = {episode_id(ctx, session_id=sid): sid for sid in sids}
        found = self.tiers.store.get("episodes", Where(eq=scope(ctx)), list(ids))
        return {ids[e.id]: e for e in found}

    async def _encode(self, ctx: MemoryContext, sids: Sequence[str]) -> dict[str, SessionResult]:
        config = model_config(self.stages)
        turns = await run_blocking(self.tiers.sessions_turns, ctx, sids)
        late = [t for sid in sids for t in turns[sid] if t.status == "pending" and not blocked(t, config)]
        for turn in late:  # one more chance before the session closes
            await self.capture.observe(ctx.model_copy(update={"session_id": turn.session_id}), turn)
        if late:
            turns = await run_blocking(self.tiers.sessions_turns, ctx, sids)
        existing = await run_blocking(self._episodes, ctx, sids)
        entries: dict[str, list[WorkingEntry]] = {sid: [] for sid in sids}
        for entry in await run_blocking(self.tiers.session_entries, ctx, sids):
            entries[entry.session_id].append(entry)
        aliases = await run_blocking(self.tiers.aliases, ctx)
        # Model calls only (one per session unless encoding waits for consolidation): nothing is written until
        # every session is done, so a failure or a cancellation leaves nothing half-written.
        ended = await together(
            *(self._session(ctx, sid, turns[sid], existing.get(sid), entries[sid], aliases) for sid in sids)
        )
        # Every episode, then every close: a crash between them leaves episodes whose rerun closes their entries.
        await run_blocking(self.tiers.put_episodes, [e.write for e in ended if e.write is not None])
        await run_blocking(self._close, ctx, {sid: e.close for sid, e in zip(sids, ended, strict=True) if e.close})
        return {sid: e.result for sid, e in zip(sids, ended, strict=True)}

    async def _session(
        self,
        ctx: MemoryContext,
        sid: str,
        turns: list[Turn],
        existing: Episode | None,
        entries: list[WorkingEntry],
        aliases: dict[str, str],
    ) -> _Ended:
        """One session's end from what was read: the episode to write and when its entries close."""
        ctx = ctx.model_copy(update={"session_id": sid})
        if not turns:
            return _Ended(result=SessionResult(episode=None))
        if existing is not None and existing.status == "expired":
            # The janitor expired this session and kept only turns live facts cite: never re-encode those.
            turns = [t for t in turns if t.id not in set(existing.provenance)]
            if not turns:
                return _Ended(result=SessionResult(episode=None))
        observed = [t for t in turns if t.status == "observed"]
        encoded = existing is not None and existing.status not in ("failed", "expired")
        now = record_time(self.clock, observed or turns)
        if existing is not None and encoded and set(existing.provenance) >= {t.id for t in observed}:
            # Encoded and nothing new since: a crash may have left its entries open (closed as the end would have).
            return _Ended(result=SessionResult(episode=existing), close=now)
        if not observed:
            exc = ModelError(f"none of the session's {len(turns)} turns is observed yet")
            return self._deferred(ctx, sid, turns, existing, exc, now)
        covered = {t.id for t in observed}
        entries = [e for e in entries if not e.provenance or covered & set(e.provenance)]
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
                now=now, policy=self.capture.policy,
            )  # fmt: skip
        else:
            try:
                episode = await encode_session(
                    self.stages, ctx=ctx, session_id=sid, entries=part_entries, turns=part_turns,
                    user_names=names, aliases=aliases, now=now, policy=self.capture.policy,
                )  # fmt: skip
            except (ModelError, EmbedderError) as exc:
                return self._deferred(ctx, sid, turns, existing, exc, now)
        if existing is not None and done and fresh:
            episode = _extended(existing, episode, observed)
            if self.encode == "consolidation":
                episode = episode.model_copy(update={"metadata": {**episode.metadata, PROVISIONAL: True}})
        if existing is not None and existing.pinned:
            episode = episode.model_copy(update={"pinned": True})
        if all(t.dated for t in observed):  # an import: its facts are dated by it too; its TTL counts from now
            stored = self.clock.now()
            episode = episode.model_copy(update={"metadata": {**episode.metadata, "dated": True}, "stored_at": stored})
        log.debug("session %s encoded as episode %s (%d of %d turns)", sid, episode.id, len(observed), len(turns))
        return _Ended(result=SessionResult(episode=episode), write=episode, close=now)

    def _close(self, ctx: MemoryContext, when: Mapping[str, datetime]) -> None:
        """Close the sessions' working entries (blocking), each session's at its time, in one write; entries of
        turns observed later close on re-encoding. Read again after the episodes' write, as what is closed."""
        if not when:
            return
        entries = self.tiers.session_entries(ctx, list(when))
        closed = [
            e.model_copy(update={"status": "closed", "updated_at": when[e.session_id]})
            for e in entries
            if e.status != "closed"
        ]
        self.tiers.put_working(closed)

    def _deferred(
        self,
        ctx: MemoryContext,
        sid: str,
        turns: Sequence[Turn],
        existing: Episode | None,
        exc: ModelError | EmbedderError,
        now: datetime,
    ) -> _Ended:
        """That the session waits for encoding: a failed marker episode (to write) retry_pending finds."""
        if existing is not None and existing.status in ("pending", "consolidated") and existing.summary:
            # Keep what it says, but as "failed": retry_pending re-encodes it with the turns it lacks.
            stale = existing.model_copy(update={"status": "failed"})
            stale = self.retries.failed(stale, exc, config=model_config(self.stages), now=self.clock.now(),
                                        parked_status="parked")  # fmt: skip
            log.warning("session %s: re-encoding deferred, the previous summary stays (%s)", sid, loggable(exc))
            return _Ended(
                result=SessionResult(episode=stale, deferred=True, error=str(exc), exception=exc), write=stale
            )
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
        log.warning("session %s: episode encoding deferred (%s failure): %s", sid, error_kind(exc), loggable(exc))
        return _Ended(result=SessionResult(episode=None, deferred=True, error=str(exc), exception=exc), write=marker)

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
