"""The working tier, a part of the tier repository: each session's observations, at most ``capacity`` active.

:class:`~tiermem.memory._tiers._tiers.Tiers` holds a :class:`WorkingTier` and answers these methods with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._decay import turn_decay
from .._errors import InvalidArgumentError
from .._filters import Where
from .._identity import working_entry_id
from .._record_text import checked_text
from .._records import MemoryContext, Turn, WorkingEntry
from .._scope import scope
from .._subjects import USER
from .._text import encodable_values
from ._parts import TierParts

__all__ = ["WorkingTier"]


class WorkingTier:
    """The working entries of every session, over the repository's store, clock and working options."""

    def __init__(self, tiers: TierParts) -> None:
        self.tiers = tiers

    def session_seq(self, ctx: MemoryContext) -> int:
        """The latest turn number seen in this session's working memory."""
        return max((e.seq for e in self.working_memory(ctx, include_inactive=True)), default=0)

    def working_memory(self, ctx: MemoryContext, *, include_inactive: bool = False) -> list[WorkingEntry]:
        """This session's working entries (the active ones unless ``include_inactive``)."""
        if ctx.session_id is None:
            return []
        statuses = ["active", "overflow", "closed"] if include_inactive else ["active"]
        where = Where(eq={**scope(ctx), "session_id": ctx.session_id}, isin={"status": statuses})
        entries = self.tiers.store.query("working", where, cached=True)
        return sorted(entries, key=lambda e: (e.seq, e.created_at, e.id))

    def turn_entries(self, ctx: MemoryContext, turn: Turn) -> list[WorkingEntry]:
        """The working entries observed from one turn."""
        return [e for e in self.session_entries(ctx, [turn.session_id]) if turn.id in e.provenance]

    def session_entries(self, ctx: MemoryContext, session_ids: Sequence[str]) -> list[WorkingEntry]:
        """Every working entry of these sessions, whatever its status, in observation order."""
        entries = self.tiers.store.query("working", Where(eq=scope(ctx), isin={"session_id": list(session_ids)}))
        return sorted(entries, key=lambda e: (e.session_id, e.seq, e.id))

    def active_working(self, ctx: MemoryContext) -> list[WorkingEntry]:
        """The active working entries of every session of this user."""
        where = Where(eq=scope(ctx), isin={"status": ["active"]})
        entries = self.tiers.store.query("working", where)
        return entries

    def put_working(self, entries: Sequence[WorkingEntry]) -> None:
        """Write entries as they are (status changes; no capacity rule)."""
        self.tiers.write("working", entries)

    def add_working_entries(
        self, ctx: MemoryContext, entries: Sequence[WorkingEntry], *, observed: Sequence[Turn] = ()
    ) -> list[WorkingEntry]:
        """Write entries keeping at most ``capacity`` active per session by effective salience, in one write.

        Entries pushed out become "overflow": no longer in the active set, still in the session log
        (and so in the episode). Entries of several sessions (an import's) are ranked each in its own
        session, read and written together. ``entries`` are the whole observation of the ``observed``
        turns: an earlier observation's entries of those turns alone (a retry whose model answered
        otherwise) are deleted once these are written, and never rank against them.
        """
        stale = self._stale(ctx, entries, observed)
        if not entries:
            self._delete_working(ctx, stale)
            return []
        options = self.tiers.working
        capacity = options.capacity if options else 7
        half = options.salience_half_life if options else 8.0
        sessions = list(dict.fromkeys(e.session_id for e in entries))
        where = Where(eq=scope(ctx), isin={"session_id": sessions, "status": ["active"]})
        current = [e for e in self.tiers.store.query("working", where, cached=True) if e.id not in stale]
        new_ids = {e.id for e in entries}
        now = self.tiers.clock.now()
        pushed: set[str] = set()
        demoted: list[WorkingEntry] = []
        for sid in sessions:
            active = {e.id: e for e in current if e.session_id == sid}
            active.update({e.id: e for e in entries if e.session_id == sid})
            now_seq = max(e.seq for e in active.values())
            ranked = sorted(
                active.values(),
                key=lambda e: (-turn_decay(e.salience, now_seq - e.seq, half_life_turns=half), -e.seq, e.id),
            )
            pushed |= {e.id for e in ranked[capacity:]}
            demoted += [
                e.model_copy(update={"status": "overflow", "updated_at": now})
                for e in ranked[capacity:]
                if e.id not in new_ids
            ]
        writes = [e.model_copy(update={"status": "overflow"}) if e.id in pushed else e for e in entries]
        self.put_working(writes + demoted)
        self._delete_working(ctx, stale)  # after the write: a crash between leaves the turn pending, replaced again
        return writes

    def _stale(self, ctx: MemoryContext, entries: Sequence[WorkingEntry], observed: Sequence[Turn]) -> set[str]:
        """Ids of stored entries observed from the ``observed`` turns alone that ``entries`` do not rewrite."""
        if not observed:
            return set()
        turns = {t.id for t in observed}
        fresh = {e.id for e in entries}
        stored = self.session_entries(ctx, list(dict.fromkeys(t.session_id for t in observed)))
        return {e.id for e in stored if e.provenance and set(e.provenance) <= turns and e.id not in fresh}

    def _delete_working(self, ctx: MemoryContext, ids: set[str]) -> None:
        if ids:
            self.tiers.store.delete("working", Where(eq=scope(ctx), isin={"id": sorted(ids)}))

    def add_working_memory(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        kind: str = "note",
        salience: float = 0.5,
        seq: int | None = None,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, object] | None = None,
    ) -> WorkingEntry:
        """Add one observation to this session's working memory."""
        if ctx.session_id is None:
            raise InvalidArgumentError("working memory needs a MemoryContext with a session_id")
        body = self.tiers.secrets.for_user(ctx, checked_text(text))
        encodable_values(metadata, "metadata")
        canon = self.tiers.subject(ctx, subject)
        now = self.tiers.clock.now()
        entry = WorkingEntry(
            id=working_entry_id(ctx, session_id=ctx.session_id, subject=canon, text=body),
            namespace=ctx.namespace,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
            subject=canon,
            kind=kind,
            text=body,
            salience=salience,
            seq=self.session_seq(ctx) if seq is None else seq,
            created_at=now,
            updated_at=now,
            provenance=tuple(provenance),
            metadata=dict(metadata or {}),
        )
        self.add_working_entries(ctx, [entry])
        return entry
