"""The session log, a part of the tier repository: the turns table, journaled exactly once and read in order.

:class:`~tiermem.memory._tiers._tiers.Tiers` holds a :class:`SessionLog` and answers these methods with it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence

import numpy as np

from .._errors import EmbedderError, ModelError
from .._filters import Where
from .._record_text import embedded_vectors
from .._records import MemoryContext, Turn
from .._scope import scope
from ._parts import TierParts

__all__ = ["SessionLog"]

log = logging.getLogger(__name__)


class SessionLog:
    """Every turn of every session, over the repository's store and embedder."""

    def __init__(self, tiers: TierParts) -> None:
        self.tiers = tiers

    def put_turns(self, turns: Sequence[Turn], *, new: bool = False) -> None:
        """Journal turns (``new``: plain inserts, for turns never written before)."""
        self.tiers.write("turns", turns, new=new)

    def journal(self, turn: Turn, *, replace: bool = False) -> bool:
        """Write a turn even when the embedder fails (a zero vector: full-text search still finds it, and
        the observer's write re-embeds it). New turns are inserted only if their id is absent, atomically
        across processes; returns whether this call wrote the turn.
        """
        tiers = self.tiers
        try:
            vectors = embedded_vectors([turn], tiers.embed)
        except (EmbedderError, ModelError) as exc:
            log.warning("turn %s journaled without a vector (embedder failed: %s)", turn.id, exc)
            vectors = np.zeros((1, tiers.embedder.dimensions), dtype=np.float32)
        if replace:
            tiers.store.upsert("turns", [turn], vectors)
            return True
        return tiers.store.insert_absent("turns", [turn], vectors) == 1

    def journal_new(self, turns: Sequence[Turn]) -> int:
        """Journal many turns in one commit and one embedding batch, each only if its id is absent, as
        :meth:`journal` does one; returns how many this call wrote."""
        return self.journal_many(turns)

    def journal_many(self, turns: Sequence[Turn], *, replace: bool = False) -> int:
        """Journal turns in one commit and one embedding batch (an import): inserted if absent, or with
        ``replace`` written as they are. An embedder failure writes zero vectors, as :meth:`journal`.
        Returns how many this call wrote."""
        if not turns:
            return 0
        tiers = self.tiers
        try:
            vectors = embedded_vectors(turns, tiers.embed)
        except (EmbedderError, ModelError) as exc:
            log.warning("%d turns journaled without vectors (embedder failed: %s)", len(turns), exc)
            vectors = np.zeros((len(turns), tiers.embedder.dimensions), dtype=np.float32)
        if replace:
            tiers.store.upsert("turns", turns, vectors)
            return len(turns)
        return tiers.store.insert_absent("turns", turns, vectors)

    def settle_seq(self, ctx: MemoryContext, turn: Turn) -> Turn:
        """Make the turn's ``seq`` unique in its session after a concurrent writer took the same one.

        Of two turns sharing a seq, the later (time, id) moves past the end as soon as it sees the
        other. The earlier one waits a moment for it to do so, then moves itself: the other may have
        returned before it could see this one. Each process moves only its own turn, so this converges
        without a lock (seq stays unique; it may skip a number).
        """
        patience = 3
        for _ in range(64):
            turns = self.session_turns(ctx, turn.session_id)
            rivals = [t for t in turns if t.seq == turn.seq and t.id != turn.id]
            if not rivals:
                return turn
            if patience and all((t.created_at, t.id) > (turn.created_at, turn.id) for t in rivals):
                patience -= 1
                time.sleep(0.02 + 0.06 * random.random())  # the later writer moves when it sees us
                continue
            turn = turn.model_copy(update={"seq": max(t.seq for t in turns) + 1})
            self.put_turns([turn])
            patience = 3
        return turn

    def session_turns(self, ctx: MemoryContext, session_id: str, *, ids: Sequence[str] | None = None) -> list[Turn]:
        """The session's turns in order (only ``ids`` when given)."""
        store = self.tiers.store
        where = Where(eq={**scope(ctx), "session_id": session_id})
        # Capture reads its session before and after journaling: a session's turns are a small, hot read.
        turns = store.query("turns", where, cached=True) if ids is None else store.get("turns", where, ids)
        return sorted(turns, key=lambda t: (t.seq, t.created_at, t.id))

    def sessions_turns(self, ctx: MemoryContext, session_ids: Sequence[str]) -> dict[str, list[Turn]]:
        """Each of these sessions' turns in order (as :meth:`session_turns`), in one read."""
        where = Where(eq=scope(ctx), isin={"session_id": list(session_ids)})
        out: dict[str, list[Turn]] = {sid: [] for sid in session_ids}
        for turn in sorted(self.tiers.store.query("turns", where), key=lambda t: (t.seq, t.created_at, t.id)):
            out[turn.session_id].append(turn)
        return out

    def pending_turns(self, ctx: MemoryContext | None = None, *, include_parked: bool = False) -> list[Turn]:
        """Turns the observer has not done yet: this user's, or every user's without ``ctx``."""
        statuses = ["pending", "failed"] if include_parked else ["pending"]
        where = Where(eq=scope(ctx) if ctx else {}, isin={"status": statuses})
        turns = self.tiers.store.query("turns", where)
        return sorted(turns, key=lambda t: (t.namespace, t.user_id, t.session_id, t.seq))
