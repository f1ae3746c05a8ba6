"""The bulk path of an import: one past session journaled, observed and written in a few commits.

Per session: one read finds what an earlier run journaled (the resume); the turns not yet journaled
are embedded in one batch and inserted if absent in one commit; the turns still to observe are
observed concurrently (a shared semaphore bounds the model calls in flight); their working entries
are written in one commit and their status in one more. Capture's per-turn path makes about three
commits and five reads per turn; this one makes three commits and two reads per session.

Exactly once, as ``capture(at=)``: a turn is named by the same idempotency key (its messages and
its time), so a rerun after a crash at any point, or a later ``capture(at=)`` of the same turn,
finds it. Entries are named by their turn and position, so observing a turn again (a crash after
the entries, before the status) replaces them. Store work is never abandoned half-way: a cancelled
import lets the worker thread's commit land before the cancellation goes on (:func:`settled`), so
no commit of a dead import races the next run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from ._clock import Clock
from ._errors import EmbedderError, ModelError, error_kind
from ._identity import capture_keys, turn_id
from ._records import MemoryContext, Message, Turn, WorkingEntry
from ._retries import NO_ERROR, RetryPolicy, blocked, model_config
from ._tiers import Tiers

__all__ = ["Observer", "SessionImport", "import_session", "settled"]

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_CONTEXT = 1000
"""The previous turn's text a turn keeps as its context (as capture keeps it)."""


class _Locks(Protocol):
    def session(self, ctx: MemoryContext) -> asyncio.Lock: ...


class Observer(Protocol):
    """What the bulk path needs of the capture side (the composition root hands its ``Capture``)."""

    @property
    def tiers(self) -> Tiers: ...

    @property
    def stages(self) -> object: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def retries(self) -> RetryPolicy: ...

    @property
    def locks(self) -> _Locks: ...

    def speaker(self, messages: Sequence[Message], aliases: Mapping[str, str]) -> str: ...

    async def observations(
        self, turn: Turn, *, aliases: Mapping[str, str], known_subjects: Sequence[str]
    ) -> list[WorkingEntry]: ...


@dataclass(kw_only=True)
class SessionImport:
    """What importing one session did."""

    turns: list[Turn]
    """The session's turns of this history, as stored now, in order."""
    duplicates: int = 0
    """Turns an earlier run (or a capture) had journaled: not journaled again."""
    deferred: int = 0
    """Turns whose observation failed: pending with their error, for ``retry_pending()``."""


async def settled(work: Awaitable[T]) -> T:
    """``work``'s result; when the caller is cancelled, ``work`` still runs to its end first.

    A worker thread cannot be stopped: left running, its commit would land after the import
    returned, racing whatever runs next (a rerun of the import).
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: its failure is not the one to report
        raise


def _key(at: datetime, messages: Sequence[Message]) -> str:
    """The idempotency key ``capture(messages, at=at)`` gives the turn (the window is unused with a time)."""
    parts = [(m.role, m.name, m.content) for m in messages]
    return capture_keys(parts, key=None, at=at, now=at, window=timedelta(minutes=10))[0]


def _journal(
    observer: Observer, ctx: MemoryContext, history: Sequence[tuple[datetime, tuple[Message, ...]]]
) -> SessionImport:
    """Journal the session's turns not journaled yet, in one commit (blocking)."""
    tiers, sid = observer.tiers, ctx.session_id
    assert sid is not None  # the caller's session context
    keys = [_key(at, messages) for at, messages in history]
    ids = [turn_id(ctx, session_id=sid, key=key) for key in keys]
    stored = tiers.session_turns(ctx, sid)  # the resume: one read
    by_id, mine = {t.id: t for t in stored}, set(ids)
    # Turns of the session that are not this history's (captured live) come first, as capture would put them.
    previous = next((t for t in reversed(stored) if t.id not in mine), None)
    aliases = tiers.aliases(ctx)
    placed: dict[str, Turn] = {}
    new: list[Turn] = []
    duplicates = 0
    for (at, messages), key, id in zip(history, keys, ids, strict=True):
        if id in placed:  # the same messages at the same time twice: one turn, as capture makes them
            duplicates += 1
            continue
        turn = by_id.get(id)
        if turn is None:
            turn = Turn(
                id=id, namespace=ctx.namespace, user_id=ctx.user_id, session_id=sid,
                seq=previous.seq + 1 if previous else 0, messages=messages,
                subject=observer.speaker(messages, aliases),
                context=" ".join(m.content for m in previous.messages)[-MAX_CONTEXT:] if previous else "",
                created_at=at, key=key, dated=True,
            )  # fmt: skip
            new.append(turn)
        else:
            duplicates += 1
        placed[id] = previous = turn
    turns = list(placed.values())
    if new and (written := tiers.journal_new(new)) < len(new):
        # Another process journaled some of them first: its rows stand.
        duplicates += len(new) - written
        theirs = {t.id: t for t in tiers.session_turns(ctx, sid, ids=[t.id for t in new])}
        turns = [theirs.get(t.id, t) for t in turns]
    return SessionImport(turns=turns, duplicates=duplicates)


def _write(
    observer: Observer,
    ctx: MemoryContext,
    observed: Sequence[tuple[Turn, list[WorkingEntry]]],
    failed: Sequence[tuple[Turn, ModelError | EmbedderError]],
) -> int:
    """The session's entries in one commit, then its turns' status in one more (blocking); returns the
    turns left pending. Entries first: a crash between the two leaves the turns pending, observed again."""
    tiers = observer.tiers
    config, now = model_config(observer.stages), observer.clock.now()
    failures = list(failed)
    try:
        # One write ranks all of them by decayed salience as turn-by-turn writes would: the ranking
        # (salience halving per turn of age) orders two entries alike whatever the current turn.
        tiers.add_working_entries(ctx, [e for _, entries in observed for e in entries])
        tiers.put_turns([t.model_copy(update={**NO_ERROR, "status": "observed", "attempts": t.attempts + 1})
                         for t, _ in observed])  # fmt: skip
    except (ModelError, EmbedderError) as exc:  # the embedder: every turn of the session waits, as in capture
        failures += [(t, exc) for t, _ in observed]
    for turn, error in failures:
        tiers.journal(
            observer.retries.failed(turn, error, config=config, now=now, parked_status="failed"), replace=True
        )
        log.warning("turn %s journaled, observation deferred (%s failure): %s", turn.id, error_kind(error), error)
    return len(failures)


async def import_session(
    observer: Observer,
    ctx: MemoryContext,
    history: Sequence[tuple[datetime, tuple[Message, ...]]],
    *,
    calls: asyncio.Semaphore,
    aliases: Mapping[str, str],
    known_subjects: Sequence[str],
    on_turn: Callable[[int], None],
) -> SessionImport:
    """Journal, observe and write one session's turns (``ctx`` names the session); ``on_turn(n)`` as
    ``n`` more turns are done. Turns an earlier run observed are skipped, its pending ones observed."""
    async with observer.locks.session(ctx):
        result = await settled(asyncio.to_thread(_journal, observer, ctx, history))
        config = model_config(observer.stages)
        todo = [t for t in result.turns if t.status == "pending" and not blocked(t, config)]
        on_turn(len(history) - len(todo))

        async def observe(turn: Turn) -> tuple[Turn, list[WorkingEntry] | ModelError | EmbedderError]:
            async with calls:
                try:
                    return turn, await observer.observations(turn, aliases=aliases, known_subjects=known_subjects)
                except (ModelError, EmbedderError) as exc:
                    return turn, exc

        tasks = [asyncio.ensure_future(observe(t)) for t in todo]
        outcomes: dict[str, list[WorkingEntry] | ModelError | EmbedderError] = {}
        try:
            for next_done in asyncio.as_completed(tasks):
                turn, outcome = await next_done
                outcomes[turn.id] = outcome
                on_turn(1)
        finally:
            for task in tasks:
                task.cancel()  # model calls only: nothing half-written
            await asyncio.gather(*tasks, return_exceptions=True)
        observed = [(t, o) for t in todo if isinstance(o := outcomes[t.id], list)]
        failed = [(t, o) for t in todo if not isinstance(o := outcomes[t.id], list)]
        if todo:
            result.deferred = await settled(asyncio.to_thread(_write, observer, ctx, observed, failed))
    return result
