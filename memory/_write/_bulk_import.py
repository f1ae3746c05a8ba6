"""The bulk path of an import: a group of past sessions journaled, observed and written in a few commits.

Per group (the sessions an import ends together): one read finds what an earlier run journaled (the
resume); the turns still to observe are observed concurrently, by windows of consecutive turns of one
session (one model call per window, :mod:`tiermem.prompts.observe_window`; a window that fails after
its retries is observed turn by turn; a shared semaphore bounds the model calls in flight); their
working entries are written in one commit (each session's ranked in it), then the turns, each as it
now stands (observed, or pending with its error), in one more: the new ones inserted if absent, in
one embedding batch. Capture's per-turn path makes about three commits and five reads per turn; this
one makes two commits and two reads per group of sessions.

An import journals a turn after observing it, not before as capture does: the history it reads is
the journal, so a turn that dies with the process is not lost but imported again by the rerun, and
the turn's row is written once, in its final state, instead of once pending and once observed.

Exactly once, as ``capture(at=)``: a turn is named by the same idempotency key (its messages and
its time), so a rerun after a crash at any point, or a later ``capture(at=)`` of the same turn,
finds it. Entries are named by their turn and position, so observing a turn again (a crash after
the entries, before the turns) replaces them. A turn another writer journaled while this import was
observing it keeps that writer's row, and the entries of this import's observation are not written
(one more read per group, just before the entries). Store work is never abandoned half-way: a
cancelled import lets the worker thread's commit land before the cancellation goes on
(:func:`settled`), so no commit of a dead import races the next run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from .._blocking import run_blocking
from .._clock import Clock
from .._errors import EmbedderError, ModelError, error_kind
from .._identity import capture_keys, turn_id
from .._records import MemoryContext, Message, Turn, WorkingEntry
from .._retries import NO_ERROR, RetryPolicy, blocked, model_config
from .._store import Where
from .._text import loggable
from .._tiers import Tiers, scope
from ._tasks import together

__all__ = ["History", "Observer", "SessionsImport", "import_sessions", "settled"]

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

    def windows(
        self, turns: Sequence[Turn], *, size: int, aliases: Mapping[str, str], known_subjects: Sequence[str]
    ) -> list[list[Turn]]: ...

    async def window_observations(
        self, turns: Sequence[Turn], *, aliases: Mapping[str, str], known_subjects: Sequence[str]
    ) -> list[list[WorkingEntry]]: ...


@dataclass(kw_only=True)
class SessionsImport:
    """What importing a group of sessions did."""

    turns: dict[str, list[Turn]]
    """Each session's turns of this history, as stored now, in order."""
    duplicates: int = 0
    """Turns an earlier run (or a capture) had journaled: not journaled again."""
    deferred: int = 0
    """Turns whose observation failed: pending with their error, for ``retry_pending()``."""
    new: set[str] = field(default_factory=set)
    """Ids of the turns no store held at the resume: journaled (inserted if absent) after their observation."""


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


History = Sequence[tuple[datetime, tuple[Message, ...]]]
"""One session's past turns: each one's time and messages, in order."""


def _placed(
    observer: Observer, ctx: MemoryContext, history: History, stored: Sequence[Turn], aliases: Mapping[str, str]
) -> tuple[list[Turn], list[Turn], int]:
    """One session's turns as they stand after the journal (those stored kept), the ones to journal, and how
    many were there already."""
    sid = ctx.session_id
    assert sid is not None  # the caller's session context
    keys = [_key(at, messages) for at, messages in history]
    ids = [turn_id(ctx, session_id=sid, key=key) for key in keys]
    by_id, mine = {t.id: t for t in stored}, set(ids)
    # Turns of the session that are not this history's (captured live) come first, as capture would put them.
    previous = next((t for t in reversed(stored) if t.id not in mine), None)
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
    return list(placed.values()), new, duplicates


def _resume(
    observer: Observer, ctx: MemoryContext, sessions: Mapping[str, History], aliases: Mapping[str, str]
) -> SessionsImport:
    """The sessions' turns as they will stand, those an earlier run journaled read back in one read (blocking).
    Speakers are attributed with the import's ``aliases``, as the observer reads them."""
    tiers = observer.tiers
    stored = tiers.sessions_turns(ctx, list(sessions))
    result = SessionsImport(turns={})
    for sid, history in sessions.items():
        sctx = ctx.model_copy(update={"session_id": sid})
        result.turns[sid], fresh, duplicates = _placed(observer, sctx, history, stored[sid], aliases)
        result.new.update(t.id for t in fresh)
        result.duplicates += duplicates
    return result


def _write(
    observer: Observer,
    ctx: MemoryContext,
    result: SessionsImport,
    observed: Sequence[tuple[Turn, list[WorkingEntry]]],
    failed: Sequence[tuple[Turn, ModelError | EmbedderError]],
) -> None:
    """The sessions' entries in one commit, then their turns as they now stand in one more (blocking); updates
    ``result`` (turns, duplicates, deferred). Entries first: a crash between the two leaves the turns to the
    rerun (new ones) or pending (an earlier run's), observed again, their entries replaced."""
    tiers = observer.tiers
    config, now = model_config(observer.stages), observer.clock.now()
    where = Where(eq=scope(ctx))
    # Journaled by another writer while this import observed them (a capture, another import): theirs stand.
    new = [t.id for t, _ in [*observed, *failed] if t.id in result.new]
    theirs = {t.id: t for t in tiers.store.get("turns", where, new)}
    observed = [(t, entries) for t, entries in observed if t.id not in theirs]
    failures = [(t, e) for t, e in failed if t.id not in theirs]
    try:
        # One write ranks each session's entries by decayed salience as turn-by-turn writes would: the ranking
        # (salience halving per turn of age) orders two entries alike whatever the current turn.
        tiers.add_working_entries(
            ctx, [e for _, entries in observed for e in entries], observed=[t for t, _ in observed]
        )
        done = [t.model_copy(update={**NO_ERROR, "status": "observed", "attempts": t.attempts + 1})
                for t, _ in observed]  # fmt: skip
    except (ModelError, EmbedderError) as exc:  # the embedder: every turn of the sessions waits, as in capture
        failures += [(t, exc) for t, _ in observed]
        done = []
    waiting = [observer.retries.failed(t, e, config=config, now=now, parked_status="failed") for t, e in failures]
    final = {t.id: t for t in done + waiting}
    tiers.journal_many([t for i, t in final.items() if i not in result.new], replace=True)
    fresh = [t for i, t in final.items() if i in result.new]
    if fresh and tiers.journal_many(fresh) < len(fresh):  # another writer came first for some, just now
        stored = {t.id: t for t in tiers.store.get("turns", where, [t.id for t in fresh])}
        theirs.update((i, t) for i, t in stored.items() if t.model_dump_json() != final[i].model_dump_json())
        failures = [(t, e) for t, e in failures if t.id not in theirs]
    for turn, error in failures:
        log.warning(
            "turn %s journaled, observation deferred (%s failure): %s", turn.id, error_kind(error), loggable(error)
        )
    final.update(theirs)
    result.turns = {sid: [final.get(t.id, t) for t in turns] for sid, turns in result.turns.items()}
    result.duplicates += len(theirs)
    result.deferred = len(failures)


Outcome = list[WorkingEntry] | ModelError | EmbedderError
"""A turn's entries, or why it could not be observed."""


def _runs(turns: Mapping[str, Sequence[Turn]], todo: Sequence[Turn]) -> list[list[Turn]]:
    """The turns to observe as runs of consecutive turns of one session: a turn observed already (or parked)
    ends a run, so a window never shows the model two turns as neighbours that are not."""
    wanted = {t.id for t in todo}
    runs: list[list[Turn]] = []
    for session in turns.values():
        runs.append([])
        for turn in session:
            if turn.id in wanted:
                runs[-1].append(turn)
            elif runs[-1]:
                runs.append([])
    return [r for r in runs if r]


async def import_sessions(
    observer: Observer,
    ctx: MemoryContext,
    sessions: Mapping[str, History],
    *,
    calls: asyncio.Semaphore,
    aliases: Mapping[str, str],
    known_subjects: Sequence[str],
    on_turn: Callable[[int], None],
    window: int = 1,
) -> SessionsImport:
    """Observe a group of one user's sessions (``ctx`` names the user), then write their entries and journal
    their turns; ``on_turn(n)`` as ``n`` more turns are done. Turns an earlier run observed are skipped, its
    pending ones observed, by windows of up to ``window`` consecutive pending turns of one session per model call.
    """
    async with AsyncExitStack() as stack:
        for sid in sorted(sessions):  # one order, as ``end_sessions`` takes them
            await stack.enter_async_context(observer.locks.session(ctx.model_copy(update={"session_id": sid})))
        result = await settled(run_blocking(_resume, observer, ctx, sessions, aliases))
        config = model_config(observer.stages)
        todo = [t for ts in result.turns.values() for t in ts if t.status == "pending" and not blocked(t, config)]
        on_turn(sum(len(h) for h in sessions.values()) - len(todo))

        async def one(turn: Turn) -> tuple[Turn, Outcome]:
            async with calls:
                try:
                    return turn, await observer.observations(turn, aliases=aliases, known_subjects=known_subjects)
                except (ModelError, EmbedderError) as exc:
                    return turn, exc

        async def observe(turns: list[Turn]) -> list[tuple[Turn, Outcome]]:
            if len(turns) == 1:
                return [await one(turns[0])]
            async with calls:
                try:
                    found = await observer.window_observations(turns, aliases=aliases, known_subjects=known_subjects)
                    return [(turn, entries) for turn, entries in zip(turns, found, strict=True)]
                except (ModelError, EmbedderError) as exc:
                    # Its output was retried already: each turn alone now, failing (deferred) as capture's would.
                    log.info("a window of %d turns failed (%s), observing them one by one: %s", len(turns),
                             error_kind(exc), exc)  # fmt: skip
            return list(await asyncio.gather(*(one(t) for t in turns)))

        planned = [
            w for run in _runs(result.turns, todo)
            for w in observer.windows(run, size=window, aliases=aliases, known_subjects=known_subjects)
        ]  # fmt: skip
        outcomes: dict[str, Outcome] = {}

        async def counted(turns: list[Turn]) -> None:
            done = await observe(turns)
            outcomes.update((turn.id, outcome) for turn, outcome in done)
            on_turn(len(done))  # as each window ends, not in plan order

        await together(*(counted(w) for w in planned))  # model calls only: a failure leaves nothing half-written
        observed = [(t, o) for t in todo if isinstance(o := outcomes[t.id], list)]
        failed = [(t, o) for t in todo if not isinstance(o := outcomes[t.id], list)]
        if todo:
            await settled(run_blocking(_write, observer, ctx, result, observed, failed))
    return result
