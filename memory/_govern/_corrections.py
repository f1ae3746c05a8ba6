"""Correcting one user's memories: update a fact (a new version supersedes it), pin and unpin.

:class:`Corrections` works over :class:`~._governance.Governance` (its store, clock, lookups and
writes), as erasure and portability do; the system exposes ``update``, ``pin`` and ``unpin``.
Nothing is written when an argument does not validate, and each correction reads and commits
within the user's write lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._blocking import run_blocking
from .._errors import InvalidArgumentError, MemoryNotFoundError
from .._identity import fact_id
from .._records import Episode, Fact, MemoryContext
from .._store import TableName, Where, user_writes
from .._subjects import canonical_subject
from .._tiers import checked_context, scope
from ._governance import Governance

__all__ = ["Corrections", "carry_pins"]

_MAX_TEXT = 8000
_UNPINNABLE: dict[TableName, str] = {
    "turns": "a captured turn (what was said, kept in the turn log)",
    "working": "a working-memory entry (it fades with its session)",
    "digests": "a digest (rewritten from the facts)",
    "edges": "a relation (it holds while its fact does)",
}


def carry_pins(facts: Sequence[Fact]) -> list[Fact]:
    """A pinned fact superseded in this batch passes its pin to the version replacing it."""
    pinned = {f.superseded_by for f in facts if f.pinned and f.status == "superseded" and f.superseded_by}
    return [f.model_copy(update={"pinned": True}) if f.id in pinned and not f.pinned else f for f in facts]


class Corrections:
    """Updates and pins of one store's memories, always within one user's scope."""

    def __init__(self, governance: Governance) -> None:
        self.governance = governance

    async def update(self, ctx: MemoryContext, id: str, *, text: str | None = None, subject: str | None = None) -> Fact:
        """Correct a fact: the new version supersedes it, which keeps its text and validity as history."""
        return await run_blocking(self.update_sync, checked_context(ctx), id, text=text, subject=subject)

    async def pin(self, ctx: MemoryContext, id: str) -> Fact | Episode:
        """Pin a fact or episode: it never decays, expires, is archived or compacted away."""
        return await run_blocking(self.pin_sync, checked_context(ctx), id, pinned=True)

    async def unpin(self, ctx: MemoryContext, id: str) -> Fact | Episode:
        """Undo :meth:`pin`: the memory decays again from its last reinforcement."""
        return await run_blocking(self.pin_sync, checked_context(ctx), id, pinned=False)

    def _fact(self, ctx: MemoryContext, rid: str, action: str) -> Fact:
        table, record = self.governance.find(ctx, rid)
        if table != "facts":
            raise InvalidArgumentError(f"only semantic facts can be {action}, {rid!r} is in {table}")
        assert isinstance(record, Fact)
        return record

    def update_sync(self, ctx: MemoryContext, rid: str, *, text: str | None = None, subject: str | None = None) -> Fact:
        """The blocking body of ``update``."""
        if text is None and subject is None:
            raise InvalidArgumentError("update needs a new text, a new subject or both")
        if text is not None and (not isinstance(text, str) or not text.strip() or len(text) > _MAX_TEXT):
            raise InvalidArgumentError(f"text must be a non-empty string of at most {_MAX_TEXT} characters")
        with user_writes(
            self.governance.store, ctx
        ):  # read to commit: a concurrent write is waited for, never overwritten
            return self._update(ctx, rid, text=text, subject=subject)

    def _update(self, ctx: MemoryContext, rid: str, *, text: str | None, subject: str | None) -> Fact:
        old = self._fact(ctx, rid, "updated")
        if old.status != "active":
            raise InvalidArgumentError(
                f"fact {old.id!r} is {old.status}" + (f"; update {old.superseded_by!r}" if old.superseded_by else "")
            )
        body = self.governance.secrets.for_user(ctx, " ".join(text.split())) if text is not None else old.text
        canon = canonical_subject(subject, aliases=self.governance.aliases(ctx)) if subject is not None else old.subject
        new_id = fact_id(ctx, subject=canon, text=body)
        if new_id == old.id:
            return old
        now = self.governance.clock.now()
        provenance = (old.id, *old.provenance)
        current = self.governance.store.get("facts", Where(eq=scope(ctx)), [new_id])
        if current and current[0].status == "active":  # the correction is a fact we hold already
            new = current[0].model_copy(
                update={
                    "updated_at": now,
                    "reinforced_at": now,
                    "reinforcements": current[0].reinforcements + 1,
                    "provenance": tuple(dict.fromkeys((*current[0].provenance, *provenance))),
                    "pinned": current[0].pinned or old.pinned,
                }
            )
        else:
            new = Fact.new(
                ctx,
                subject=canon,
                text=body,
                now=now,
                confidence=max(old.confidence, 0.95),
                valid_from=now,
                provenance=provenance,
                pinned=old.pinned,
                categories=old.categories,  # a correction keeps what the fact is about
                metadata={"source": "update"},
            )
        superseded = old.model_copy(
            update={"status": "superseded", "valid_to": now, "superseded_by": new.id, "updated_at": now}
        )
        self.governance.put("facts", [new, superseded])  # one commit: never two active versions, never none
        return new

    def pin_sync(self, ctx: MemoryContext, rid: str, *, pinned: bool = True) -> Fact | Episode:
        """The blocking body of ``pin`` / ``unpin``. Pinning an archived fact makes it active again."""
        with user_writes(self.governance.store, ctx):
            return self._pin(ctx, rid, pinned=pinned)

    def _pin(self, ctx: MemoryContext, rid: str, *, pinned: bool) -> Fact | Episode:
        try:
            table, record = self.governance.find(ctx, rid, ("facts", "episodes"))
        except MemoryNotFoundError:
            other, _ = self.governance.find(ctx, rid)  # nowhere at all: "no memory"
            raise InvalidArgumentError(
                f"{rid!r} is {_UNPINNABLE[other]}: only facts and episodes can be pinned; pin the fact or episode "
                "learnt from it (list them with tier semantic or episodic)"
            ) from None
        if isinstance(record, Fact) and record.status == "superseded":
            raise InvalidArgumentError(f"fact {record.id!r} was superseded by {record.superseded_by!r}: pin that one")
        if record.pinned == pinned and (not pinned or record.status != "archived"):
            return record  # type: ignore[no-any-return]
        update: dict[str, object] = {"pinned": pinned, "updated_at": self.governance.clock.now()}
        if pinned and isinstance(record, Fact) and record.status == "archived":
            update["status"] = "active"
        changed: Fact | Episode = record.model_copy(update=update)
        self.governance.put(table, [changed])
        return changed
