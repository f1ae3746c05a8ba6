"""Capture: journal a turn exactly once, then observe it (part of the composition root).

Exactly once: a turn is named by its idempotency key (the caller's, or derived from the messages
and the turn's time), written with an insert that keeps the first row of an id even when two
processes race, and a rerun of a capture returns the turn already journaled (observing it first
if a crash left it pending). Nothing is counted then inserted: a turn's ``seq`` is a position
hint that is settled afterwards, so two processes capturing into one session keep every turn.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta

from tiermem.pipelines import StageModel, observe_turn, observe_window, windows

from .._blocking import run_blocking
from .._clock import Clock, utc
from .._errors import EmbedderError, InvalidArgumentError, InvalidSubjectError, ModelError, error_kind
from .._identity import capture_keys, turn_id
from .._policy import MemoryPolicy
from .._records import MemoryContext, Message, Turn, WorkingEntry
from .._results import CaptureResult
from .._retries import NO_ERROR, RetryPolicy, blocked, model_config
from .._subjects import canonical_subject
from .._text import encodable_values, loggable
from .._tiers import Tiers, checked_context
from .._transcripts import normalize_messages
from ._background import BackgroundObserver

__all__ = ["DEDUPE_WINDOW", "Capture", "Locks"]

log = logging.getLogger(__name__)

RECENT_OBSERVED = 4096
"""Turn ids this process observed lately: a caller holding an older copy of one does not observe it twice."""
DEDUPE_WINDOW = timedelta(minutes=10)
"""Without a key or a turn time, the same messages in one session within this window are one turn."""
MAX_KEY = 256


class Locks:
    """Per-session asyncio locks of this process (other processes are handled by the store)."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}

    def session(self, ctx: MemoryContext) -> asyncio.Lock:
        return self._locks.setdefault((ctx.namespace, ctx.user_id, ctx.session_id or ""), asyncio.Lock())


def _speaker(messages: Sequence[Message], aliases: Mapping[str, str]) -> str:
    """Who spoke: a named speaker's subject (the user's display names are "user"), else the user."""
    name = next((m.name for m in messages if m.role == "user" and m.name), None)
    if name is None:
        return "user"
    try:
        return canonical_subject(name, aliases=aliases)
    except InvalidSubjectError:
        return "user"


def _user_names(aliases: Mapping[str, str]) -> list[str]:
    """The user's display names the observer is told, from the user's aliases."""
    return [name.title() for name, subject in aliases.items() if subject == "user"]


def turn_time(at: object) -> datetime | None:
    """``at`` as an aware UTC datetime (a naive one is taken as UTC)."""
    if at is None:
        return None
    if not isinstance(at, datetime):
        raise InvalidArgumentError(f"at must be a datetime, not {type(at).__name__}")
    return utc(at)


def _key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_KEY:
        raise InvalidArgumentError(f"idempotency_key must be a non-empty string of at most {MAX_KEY} characters")
    return value


class Capture:
    """Journal, then observe; the write side's first step."""

    def __init__(
        self,
        *,
        tiers: Tiers,
        stages: StageModel,
        clock: Clock,
        keep_roles: Collection[str],
        retries: RetryPolicy,
        policy: MemoryPolicy | None = None,
    ) -> None:
        self.tiers = tiers
        self.policy = policy
        """The system's memory policy; a capture's own override is kept on its turn (see :meth:`policy_for`)."""
        self.stages = stages
        self.clock = clock
        self.keep_roles = keep_roles
        self.retries = retries
        self.locks = Locks()
        self._flights: dict[str, asyncio.Future[CaptureResult]] = {}
        self._observed: OrderedDict[str, None] = OrderedDict()

    async def capture(
        self,
        ctx: MemoryContext,
        messages: Sequence[object],
        *,
        metadata: Mapping[str, object] | None,
        at: datetime | None,
        idempotency_key: str | None,
        background: BackgroundObserver | None = None,
        policy: MemoryPolicy | None = None,
    ) -> CaptureResult:
        sid = checked_context(ctx, session="capture").session_id
        assert sid is not None  # checked above
        msgs = self.tiers.secrets.messages(ctx, normalize_messages(messages, keep_roles=self.keep_roles))
        when, key = turn_time(at), _key(idempotency_key)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidArgumentError(f"metadata must be a mapping, not {type(metadata).__name__}")
        meta = dict(metadata or {})
        encodable_values(meta, "metadata")  # a lone surrogate anywhere: refused before anything is written
        parts = [(m.role, m.name, m.content) for m in msgs]
        async with self.locks.session(ctx):
            session = await run_blocking(self.tiers.session_turns, ctx, sid)  # one read: dedupe and context
            latest = [t.id for t in reversed(session[-2:])]
            keys = capture_keys(parts, key=key, at=when, now=self.clock.now(), window=DEDUPE_WINDOW, previous=latest)
            ids = [turn_id(ctx, session_id=sid, key=k) for k in keys]
            found = [t for t in session if t.id in set(ids)]
            if not found:
                previous = session[-1] if session else None
                turn = await run_blocking(self._journal, ctx, sid, msgs, ids[0], keys[0], when, meta, previous, policy)
                if turn is not None and background is not None:
                    await background.submit(ctx, turn)  # off the response path: observed by the queue
                    return CaptureResult(turn=turn, entries=[], queued=True)
                if turn is not None:
                    return await self.observe(ctx, turn)
                found = await run_blocking(self.tiers.session_turns, ctx, sid, ids=ids)  # another process won
            return await self._rerun(ctx, found[0])

    def _journal(
        self,
        ctx: MemoryContext,
        sid: str,
        msgs: tuple[Message, ...],
        id: str,
        key: str,
        when: datetime | None,
        meta: dict[str, object],
        previous: Turn | None,
        policy: MemoryPolicy | None = None,
    ) -> Turn | None:
        """Write the turn once (blocking); None when the same id was journaled first elsewhere.

        Another process's turns written since ``previous`` was read are found by settle_seq.
        """
        turn = Turn(
            id=id,
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            session_id=sid,
            seq=previous.seq + 1 if previous else 0,
            messages=msgs,
            subject=_speaker(msgs, self.tiers.aliases(ctx)),
            context=" ".join(m.content for m in previous.messages)[-1000:] if previous else "",
            created_at=when or self.clock.now(),
            key=key,
            dated=when is not None,
            policy=policy,
            metadata=meta,
        )
        if not self.tiers.journal(turn):
            return None
        return self.tiers.settle_seq(ctx, turn)

    async def _rerun(self, ctx: MemoryContext, turn: Turn) -> CaptureResult:
        """The first capture's result; a turn a crash left pending is observed now."""
        if turn.status == "pending" and not blocked(turn, model_config(self.stages)):
            return dataclasses.replace(await self.observe(ctx, turn), duplicate=True)
        entries = await run_blocking(self.tiers.turn_entries, ctx, turn)
        log.debug("turn %s was already captured: returning it", turn.id)
        return CaptureResult(turn=turn, entries=entries, duplicate=True)

    speaker = staticmethod(_speaker)

    def policy_for(self, turn: Turn) -> MemoryPolicy | None:
        """The policy ``turn`` is observed under: the system's, with the capture's own override over it."""
        if self.policy is None:
            return turn.policy
        return self.policy.overridden_by(turn.policy)

    async def observations(
        self, turn: Turn, *, aliases: Mapping[str, str], known_subjects: Sequence[str]
    ) -> list[WorkingEntry]:
        """The observer's entries for a journaled turn, written nowhere (an import writes a session's at once)."""
        observed = await observe_turn(
            self.stages, turn=turn, user_names=_user_names(aliases), aliases=aliases, known_subjects=known_subjects,
            policy=self.policy_for(turn),
        )  # fmt: skip
        return observed.entries

    def windows(
        self, turns: Sequence[Turn], *, size: int, aliases: Mapping[str, str], known_subjects: Sequence[str]
    ) -> list[list[Turn]]:
        """Consecutive turns of one session in the windows an import observes them by (see ``observe_window``)."""
        return windows(
            self.stages, turns, size=size, user_names=_user_names(aliases), known_subjects=known_subjects,
            policy=self.policy,
        )  # fmt: skip

    async def window_observations(
        self, turns: Sequence[Turn], *, aliases: Mapping[str, str], known_subjects: Sequence[str]
    ) -> list[list[WorkingEntry]]:
        """Each turn's entries from one observer call for the window ``turns``, written nowhere."""
        observed = await observe_window(
            self.stages, turns=turns, user_names=_user_names(aliases), aliases=aliases, known_subjects=known_subjects,
            policy=self.policy,
        )  # fmt: skip
        return [o.entries for o in observed]

    async def observe(self, ctx: MemoryContext, turn: Turn) -> CaptureResult:
        """Observe a journaled turn once: callers at the same time share one model call.

        The background queue, a rerun, ``end_session`` and ``retry_pending`` may all hold the same
        pending turn; only the first observes it, without holding the session's lock for the call.
        """
        flight = self._flights.get(turn.id)
        if flight is None or flight.get_loop() is not asyncio.get_running_loop():
            if turn.id in self._observed:  # observed since this caller read it: return what is stored
                stored = await run_blocking(self.tiers.session_turns, ctx, turn.session_id, ids=[turn.id])
                if stored and stored[0].status == "observed":
                    return CaptureResult(
                        turn=stored[0], entries=await run_blocking(self.tiers.turn_entries, ctx, stored[0])
                    )
            flight = asyncio.ensure_future(self._observe(ctx, turn))
            self._flights[turn.id] = flight
            flight.add_done_callback(lambda done: self._landed(turn.id, done))
        return await asyncio.shield(flight)  # a cancelled caller does not cancel the others' call

    def _landed(self, turn_id: str, flight: asyncio.Future[CaptureResult]) -> None:
        if self._flights.get(turn_id) is flight:
            del self._flights[turn_id]
        if not flight.cancelled() and flight.exception() is None and not flight.result().deferred:
            self._observed[turn_id] = None
            while len(self._observed) > RECENT_OBSERVED:
                self._observed.popitem(last=False)

    async def _observe(self, ctx: MemoryContext, turn: Turn) -> CaptureResult:
        """One observer call for a journaled turn; a failure leaves it pending with its error (never raised)."""
        try:
            aliases = await run_blocking(self.tiers.aliases, ctx)
            names = [name.title() for name, subject in aliases.items() if subject == "user"]
            known = await run_blocking(self.tiers.known_subjects, ctx)
            observed = await observe_turn(
                self.stages, turn=turn, user_names=names, aliases=aliases, known_subjects=known,
                policy=self.policy_for(turn),
            )  # fmt: skip
            entries = await run_blocking(self.tiers.add_working_entries, ctx, observed.entries, observed=[turn])
            done = turn.model_copy(update={**NO_ERROR, "status": "observed", "attempts": turn.attempts + 1})
            await run_blocking(self.tiers.put_turns, [done])
        except (ModelError, EmbedderError) as exc:
            config, now = model_config(self.stages), self.clock.now()
            failed = self.retries.failed(turn, exc, config=config, now=now, parked_status="failed")
            await run_blocking(self.tiers.journal, failed, replace=True)
            log.warning(
                "turn %s journaled, observation deferred (%s failure): %s", turn.id, error_kind(exc), loggable(exc)
            )
            return CaptureResult(turn=failed, entries=[], deferred=True, error=str(exc), exception=exc)
        log.debug("turn %s observed: %d entries", turn.id, len(entries))
        return CaptureResult(turn=done, entries=entries)
