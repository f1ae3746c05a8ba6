"""Importing past conversations with their real dates: every turn through the pipeline, resumable.

Each turn is captured with its own time (``capture(..., at=)``), so every record derived from it
(working entries, the episode, facts and their validity, decay) is dated by the history, not by
the import. Captures with a time are idempotent, sessions are ended and the user consolidated
idempotently, so an import interrupted by a crash is finished by running it again: turns already
journaled are skipped (``duplicates``), nothing is written twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from ._errors import InvalidArgumentError
from ._records import MemoryContext, Message
from ._results import CaptureResult, ConsolidationResult, DigestResult, SessionResult
from ._tiers import checked_context
from ._transcripts import normalize_messages

__all__ = ["Conversation", "HistoryProgress", "HistoryReport", "HistoryTurn", "import_conversations"]


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


@dataclass(kw_only=True)
class HistoryReport:
    """What an import did."""

    conversations: int = 0
    turns: int = 0
    duplicates: int = 0
    """Turns already journaled by an earlier (interrupted) run: skipped."""
    deferred: int = 0
    """Turns or sessions whose model work failed: pending, finished by ``retry_pending()``."""
    episodes: int = 0
    consolidated: int = 0
    errors: list[str] = field(default_factory=list)


class _Pipeline(Protocol):
    keep_roles: frozenset[str]

    async def capture(
        self,
        ctx: MemoryContext,
        messages: Sequence[Any],
        *,
        metadata: Mapping[str, Any] | None = ...,
        at: datetime | None = ...,
        idempotency_key: str | None = ...,
    ) -> CaptureResult: ...

    async def end_session(self, ctx: MemoryContext, session_id: str | None = None) -> SessionResult: ...

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
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _conversation(raw: object, index: int, keep_roles: frozenset[str]) -> Conversation:
    if isinstance(raw, Conversation):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidArgumentError(f"conversation {index}: must be a mapping with session_id and turns")
    sid, turns = raw.get("session_id"), raw.get("turns")
    if not isinstance(sid, str) or not sid.strip():
        raise InvalidArgumentError(f"conversation {index}: session_id must be a non-empty string")
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


async def import_conversations(
    pipeline: _Pipeline,
    ctx: MemoryContext,
    conversations: Iterable[Conversation | Mapping[str, Any]],
    *,
    concurrency: int = 4,
    on_progress: Callable[[HistoryProgress], None] | None = None,
    consolidate: bool = True,
) -> HistoryReport:
    """Feed a user's past conversations through the pipeline; see the module docstring."""
    checked_context(ctx)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidArgumentError(f"concurrency must be an int >= 1, not {concurrency!r}")
    # The whole history is checked before the first turn is written.
    parsed = [_conversation(c, i, pipeline.keep_roles) for i, c in enumerate(conversations)]
    if len({c.session_id for c in parsed}) != len(parsed):
        raise InvalidArgumentError("two conversations share a session_id")
    report = HistoryReport()
    total = sum(len(c.turns) for c in parsed)
    done = {"turns": 0, "conversations": 0}
    gate = asyncio.Semaphore(concurrency)

    def progress() -> None:
        if on_progress is not None:
            on_progress(
                HistoryProgress(
                    turns_done=done["turns"],
                    turns_total=total,
                    conversations_done=done["conversations"],
                    conversations_total=len(parsed),
                )
            )

    async def one(conversation: Conversation) -> None:
        sctx = ctx.model_copy(update={"session_id": conversation.session_id})
        async with gate:
            for turn in conversation.turns:  # in order: each turn's context is the one before
                result = await pipeline.capture(sctx, turn.messages, at=turn.at)
                report.turns += 1
                report.duplicates += result.duplicate
                report.deferred += result.deferred
                done["turns"] += 1
                progress()
            ended = await pipeline.end_session(sctx)
            report.episodes += ended.episode is not None
            report.deferred += ended.deferred
            if ended.error:
                report.errors.append(f"{conversation.session_id}: {ended.error}")
            report.conversations += 1
            done["conversations"] += 1
            progress()

    progress()
    ordered = sorted(parsed, key=lambda c: (c.turns[0].at.timestamp() if c.turns else 0.0, c.session_id))
    tasks = [asyncio.ensure_future(one(c)) for c in ordered]
    try:
        finished, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in finished:
            task.result()  # the first failure, raised as itself
    finally:
        for task in tasks:
            task.cancel()  # a failure stops the import; running it again resumes it
        await asyncio.gather(*tasks, return_exceptions=True)
    if consolidate and parsed:
        result = await pipeline.consolidate(ctx)
        report.consolidated = result.episodes
        if result.error:
            report.errors.append(f"consolidate: {result.error}")
        await pipeline.digest(ctx)
    return report
