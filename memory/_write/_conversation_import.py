"""Importing past conversations with their real dates: every turn through the pipeline, resumable.

Each turn is journaled with its own time, so every record derived from it (working entries, the
episode, facts and their validity) is dated by the history, not by the import; decay and the TTL
count from the import (``stored_at``, see ``tiermem.memory._decay``). Sessions go,
in order, by groups of four through the bulk path (:mod:`._bulk_import`: a few commits per group,
observations concurrent, ``concurrency`` model calls in flight, each observing a window of up to
``observe_window`` consecutive turns of one session); each group ends in one
``end_sessions`` (a few commits more) once the groups before it are consolidated, and every full
batch of pending episodes is consolidated while later groups are still being observed, then the
user is digested. Every step is idempotent and turns are named as ``capture(at=)`` names them, so an import
interrupted by a crash is finished by running it again: turns already journaled are skipped
(``duplicates``), nothing is written twice. The crashed run's leases (a session's end, the consolidation,
the digest) are taken over at once when it ran on this machine; work another live process (or a crashed
one elsewhere) still holds a lease on is not done, and the report says what and until when (``leased``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from pydantic import ValidationError

from .._blocking import run_blocking
from .._clock import utc
from .._errors import InvalidArgumentError
from .._identity import lease_key
from .._records import MemoryContext, Message
from .._results import ConsolidationResult, DigestResult, SessionResult
from .._secrets import Redactor
from .._store import Leases
from .._tiers import checked_context
from .._transcripts import normalize_messages
from ._bulk_import import Observer, import_sessions, settled
from ._tasks import together

__all__ = [
    "MAX_OBSERVE_WINDOW",
    "OBSERVE_WINDOW",
    "Conversation",
    "HistoryProgress",
    "HistoryReport",
    "HistoryTurn",
    "LeasedWork",
    "import_conversations",
]

BATCH = 4
"""Episodes per consolidation call (``consolidate``'s default batch)."""
OBSERVE_WINDOW = 8
"""Consecutive turns of one session per observer call, by default (as many as fit the model's input)."""
MAX_OBSERVE_WINDOW = 32
"""The largest window taken: past it, one answer would carry a long stretch of the conversation."""


@dataclass(frozen=True, kw_only=True)
class HistoryTurn:
    """One past turn: when it happened and its messages (checked)."""

    at: datetime
    messages: tuple[Message, ...]


@dataclass(frozen=True, kw_only=True)
class Conversation:
    """One past session: its id and its turns in order."""

    session_id: str
    turns: tuple[HistoryTurn, ...]


@dataclass(frozen=True, kw_only=True)
class HistoryProgress:
    """Where an import is: turns and conversations done of the total."""

    turns_done: int
    turns_total: int
    conversations_done: int
    conversations_total: int


@dataclass(frozen=True, kw_only=True)
class LeasedWork:
    """Work an import left undone because another holder's lease covers it: run the import again after ``until``."""

    what: str
    """``"session <id>"`` (its end: the episode), ``"consolidation"`` or ``"digest"``."""
    holder: str | None
    """Who holds the lease (host, pid, ...), None if it was released since."""
    until: datetime | None
    """When the lease expires (UTC), None if it was released since (run again now)."""


@dataclass(kw_only=True)
class HistoryReport:
    """What an import did."""

    conversations: int = 0
    turns: int = 0
    duplicates: int = 0
    """Turns already journaled by an earlier (interrupted) run: skipped."""
    deferred: int = 0
    """Turns or sessions whose model work failed: pending, finished by ``retry_pending()``."""
    turns_deferred: int = 0
    """Of those, the turns: journaled, their observation pending."""
    episodes: int = 0
    consolidated: int = 0
    errors: list[str] = field(default_factory=list)
    leased: list[LeasedWork] = field(default_factory=list)
    """Work not done because another live holder (or a crashed process of another machine) holds its lease."""


class _Pipeline(Protocol):
    keep_roles: frozenset[str]

    async def end_sessions(self, ctx: MemoryContext, session_ids: Sequence[str]) -> list[SessionResult]: ...

    async def consolidate(self, ctx: MemoryContext, *, batch_size: int = 4) -> ConsolidationResult: ...

    async def digest(self, ctx: MemoryContext) -> DigestResult: ...


def _time(value: object, where: str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidArgumentError(f"{where}: 'at' is not an ISO 8601 time: {value!r}") from exc
    if not isinstance(value, datetime):
        raise InvalidArgumentError(f"{where}: 'at' must be a datetime or an ISO 8601 string")
    return utc(value)


def _conversation(raw: object, index: int, keep_roles: frozenset[str]) -> Conversation:
    if isinstance(raw, Conversation):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidArgumentError(f"conversation {index}: must be a mapping with session_id and turns")
    sid, turns = raw.get("session_id"), raw.get("turns")
    if not isinstance(sid, str) or not sid.strip():
        raise InvalidArgumentError(f"conversation {index}: session_id must be a non-empty string")
    try:  # it names a session: bounded, no control character or lone surrogate, as every session id
        MemoryContext(user_id="history", session_id=sid)
    except ValidationError as exc:
        raise InvalidArgumentError(f"conversation {index}: {exc.errors()[0]['msg']}") from None
    if not isinstance(turns, Sequence) or isinstance(turns, str | bytes):
        raise InvalidArgumentError(f"conversation {index}: turns must be a list")
    parsed = []
    for t, turn in enumerate(turns):
        where = f"conversation {index} turn {t}"
        if not isinstance(turn, Mapping) or "messages" not in turn:
            raise InvalidArgumentError(f"{where}: must be a mapping with 'at' and 'messages'")
        try:
            messages = normalize_messages(turn["messages"], keep_roles=keep_roles)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{where}: {exc}") from exc
        parsed.append(HistoryTurn(at=_time(turn.get("at"), where), messages=messages))
    return Conversation(session_id=sid, turns=tuple(parsed))


def _redacted(conversation: Conversation, ctx: MemoryContext, secrets: Redactor) -> Conversation:
    """The conversation with its secrets replaced: its turns are keyed, journaled and observed as ``capture`` would."""
    turns = tuple(HistoryTurn(at=t.at, messages=secrets.messages(ctx, t.messages)) for t in conversation.turns)
    return Conversation(session_id=conversation.session_id, turns=turns)


async def import_conversations(
    pipeline: _Pipeline,
    observer: Observer,
    ctx: MemoryContext,
    conversations: Iterable[Conversation | Mapping[str, object]],
    *,
    concurrency: int = 8,
    on_progress: Callable[[HistoryProgress], None] | None = None,
    consolidate: bool = True,
    observe_window: int = OBSERVE_WINDOW,
) -> HistoryReport:
    """Feed a user's past conversations through the pipeline; see the module docstring."""
    checked_context(ctx)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidArgumentError(f"concurrency must be an int >= 1, not {concurrency!r}")
    window = observe_window
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_OBSERVE_WINDOW:
        raise InvalidArgumentError(f"observe_window must be an int from 1 to {MAX_OBSERVE_WINDOW}, not {window!r}")
    # The whole history is checked before the first turn is written.
    parsed = [_conversation(c, i, pipeline.keep_roles) for i, c in enumerate(conversations)]
    if len({c.session_id for c in parsed}) != len(parsed):
        raise InvalidArgumentError("two conversations share a session_id")
    parsed = [_redacted(c, ctx, observer.tiers.secrets) for c in parsed]
    report = HistoryReport()
    total = sum(len(c.turns) for c in parsed)
    done = {"turns": 0, "conversations": 0}
    # ``concurrency`` sessions in bulk at once (whole groups, at least one), as many model calls in flight.
    imports, calls = asyncio.Semaphore(max(1, concurrency // BATCH)), asyncio.Semaphore(concurrency)
    ordered = sorted(parsed, key=lambda c: (c.turns[0].at.timestamp() if c.turns else 0.0, c.session_id))
    # Sessions end in groups of BATCH, each group after the one before it is consolidated, so every
    # consolidation sees the episodes of whole groups in order, whatever order their sessions finish in.
    groups = [asyncio.Event() for _ in range(0, len(ordered), BATCH)]
    tiers = observer.tiers
    # Fixed for the whole import (as when sessions are imported before any is consolidated), so what
    # a turn is observed with does not depend on how far the import got.
    aliases = await settled(run_blocking(tiers.aliases, ctx))
    known = await settled(run_blocking(tiers.known_subjects, ctx))
    waiting = {e.id for e in await settled(run_blocking(tiers.episodes, ctx, statuses=["pending"]))}

    def progress(turns: int = 0, conversations: int = 0) -> None:
        done["turns"] += turns
        done["conversations"] += conversations
        if on_progress is not None:
            on_progress(
                HistoryProgress(
                    turns_done=done["turns"],
                    turns_total=total,
                    conversations_done=done["conversations"],
                    conversations_total=len(parsed),
                )
            )

    leases = Leases(tiers.store)

    async def leased(what: str, kind: str, session_id: str | None = None) -> None:
        lease = await settled(run_blocking(leases.holder, lease_key(kind, ctx, session_id=session_id)))
        if lease is None:  # released since it was refused: nothing holds it now
            report.leased.append(LeasedWork(what=what, holder=None, until=None))
        else:
            report.leased.append(LeasedWork(what=what, holder=lease.holder, until=lease.expires_at))

    async def consolidated(last: bool = False) -> None:
        result = await settled(pipeline.consolidate(ctx, batch_size=BATCH))
        report.consolidated += result.episodes
        if result.error:
            report.errors.append(f"consolidate: {result.error}")
        if not result.busy:  # busy: another process consolidates; these stay pending for the next batch
            waiting.clear()
        elif last:  # the last chance of this import: say what is left and until when
            await leased("consolidation", "consolidate")

    async def group(g: int, members: Sequence[Conversation]) -> None:
        async with imports:  # the journal, observations and writes of a group, in a few commits
            imported = await import_sessions(
                observer, ctx, {c.session_id: [(t.at, t.messages) for t in c.turns] for c in members},
                calls=calls, aliases=aliases, known_subjects=known, on_turn=progress, window=window,
            )  # fmt: skip
        report.turns += sum(len(c.turns) for c in members)
        report.duplicates += imported.duplicates
        report.deferred += imported.deferred
        report.turns_deferred += imported.deferred
        if g:  # a group of sessions ends once the groups before it are consolidated (see below)
            await groups[g - 1].wait()
        # One bulk end for the group: per session what end_session does, in a few round trips.
        results = await settled(pipeline.end_sessions(ctx, [c.session_id for c in members]))
        for conversation, result in zip(members, results, strict=True):
            report.episodes += result.episode is not None
            report.deferred += result.deferred
            if result.error:
                report.errors.append(f"{conversation.session_id}: {result.error}")
            if result.busy:
                await leased(f"session {conversation.session_id}", "session", conversation.session_id)
            if consolidate and result.episode is not None and result.episode.status == "pending":
                waiting.add(result.episode.id)
            report.conversations += 1
            progress(conversations=1)
        # A full batch is consolidated now, while later groups are still observed, and in order.
        if consolidate and len(waiting) >= BATCH:
            await consolidated()
        groups[g].set()

    progress()
    # A failure stops the import (store work in flight lands first: it runs in ``settled``); a rerun resumes it.
    await together(*(group(g // BATCH, ordered[g : g + BATCH]) for g in range(0, len(ordered), BATCH)))
    if consolidate and parsed:
        await consolidated(last=True)
        if (await settled(pipeline.digest(ctx))).busy:
            await leased("digest", "digest")
    return report
