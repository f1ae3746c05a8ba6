"""The write side's governance: correct and pin, forget, erase a user or a shared scope, grant, share, import.

A part of :class:`~._write_side.MemorySystem`, which delegates to it name by name and runs its writes inside
the store's erasure fence (:mod:`._fencing`). The work itself is :mod:`tiermem.memory._govern`'s
(``_corrections``, ``_erasure``, ``_access``, ``_portability``) and :mod:`._sharing`'s.
"""

from __future__ import annotations

import builtins

from .._blocking import run_blocking
from .._govern import Corrections, EraseReport, Erasure, ForgetReport, Grant, ImportReport, Right, Source
from .._read import MemoryCapability
from .._records import Episode, Fact, MemoryContext
from .._scope import checked_context
from .._store import Where
from ._background import BackgroundObserver
from ._sharing import SharedProposal, anonymise, contributions, proposals, share

__all__ = ["GovernedWrites"]


class GovernedWrites:
    """The system's governance entry points over its capability: corrections, erasure, shared scopes, import."""

    def __init__(self, *, capability: MemoryCapability, erasure: Erasure, background: BackgroundObserver) -> None:
        self.capability = capability
        self.corrections = Corrections(capability.governance)
        self.erasure = erasure
        self.background = background  # erasing a user drops their queued turns

    async def update(self, ctx: MemoryContext, id: str, *, text: str | None = None, subject: str | None = None) -> Fact:
        """Correct a fact: the new version supersedes it; the old one keeps its text and validity as history.

        Edges the old version alone supported close unless the new one still names both endpoints.
        """
        fact = await self.corrections.update(ctx, id, text=text, subject=subject)
        await run_blocking(self.capability.relations.close_unsupported_edges, checked_context(ctx))
        return fact

    async def pin(self, ctx: MemoryContext, id: str) -> Fact | Episode:
        """Pin a fact or episode: it never decays, expires, is archived or compacted away."""
        return await self.corrections.pin(ctx, id)

    async def unpin(self, ctx: MemoryContext, id: str) -> Fact | Episode:
        """Undo :meth:`pin`: the memory decays again from its last reinforcement."""
        return await self.corrections.unpin(ctx, id)

    async def forget(self, ctx: MemoryContext, id: str, *, include_turns: bool = False) -> ForgetReport:
        """Delete one memory (with its older versions) and what was derived only from it; rewrite every text derived
        from it (episode summaries through the stage model, the digest). Its turns stay unless ``include_turns``."""
        return await self.erasure.forget(ctx, id, include_turns=include_turns)

    async def erase_user(self, ctx: MemoryContext, *, keep_shared: bool = True) -> EraseReport:
        """Delete every row of the user in every table and purge old versions: the bytes leave the disk.

        Needs the store to itself while it runs: another process on an older table version fails.
        Work on the user already running (queued observations, a consolidation waiting on the model, in
        this process or another) writes nothing of them afterwards; work begun after it starts afresh.
        Shared memories the user contributed stay, no longer naming them (``keep_shared=False``: they go too);
        their grants are revoked.
        """
        ctx = await run_blocking(self.capability.access.check, ctx)
        self.background.drop(ctx)  # its queued turns: not observed, not written back
        if keep_shared:
            await run_blocking(anonymise, self.capability, ctx)
        else:
            await run_blocking(self._erase_contributions, ctx)
        await run_blocking(self.capability.access.forget_user, ctx.namespace, ctx.user_id)
        return await self.erasure.erase_user(ctx)

    def _erase_contributions(self, ctx: MemoryContext) -> None:
        """``erase_user(keep_shared=False)``: the shared memories the user contributed go too."""
        for fact in contributions(self.capability, ctx):
            self.capability.store.delete("facts", Where(eq={"namespace": fact.namespace, "user_id": fact.user_id},
                                             isin={"id": [fact.id]}))  # fmt: skip

    async def grant(self, namespace: str, user_id: str, scope: str, right: Right = "read") -> Grant:
        """Let ``user_id`` of ``namespace`` read (or, with ``right="write"``, also write) the shared ``scope``
        (``"team:<id>"``, ``"org:<id>"``, ``"agent:<id>"``). The operator's call: no context names itself in."""
        return await run_blocking(self.capability.access.grant, namespace, user_id, scope, right)

    async def revoke(self, namespace: str, user_id: str, scope: str) -> bool:
        """Withdraw a grant; whether there was one. The user's next call naming ``scope`` is AccessDeniedError."""
        return await run_blocking(self.capability.access.revoke, namespace, user_id, scope)

    async def grants(self, namespace: str | None = None) -> builtins.list[Grant]:
        """Every grant in force (of ``namespace``, if given)."""
        return await run_blocking(self.capability.access.grants, namespace)

    async def share(self, ctx: MemoryContext, memory_id: str, scope: str) -> Fact:
        """Copy the user's fact ``memory_id`` into the shared ``scope`` (the context's write_scope, with a write
        grant): the copy names its origin in provenance and ``metadata["shared_by"]``; the original stays."""
        return await run_blocking(share, self.capability, ctx, memory_id, scope)

    async def propose_shared(self, namespace: str, scope: str, *, min_users: int = 2) -> builtins.list[SharedProposal]:
        """Facts held alike by at least ``min_users`` of the users granted ``scope`` and not yet in it, proposed for
        review: nothing moves until a user with a write grant ``share``s one (``fact_ids`` names theirs)."""
        return await run_blocking(proposals, self.capability, namespace, scope, min_users=min_users)

    async def erase_scope(self, namespace: str, scope: str) -> EraseReport:
        """Erase a shared scope whole (every row, old versions purged) and revoke every grant of it."""
        owner = await run_blocking(self.capability.access.erasable, namespace, scope)
        return await self.erasure.erase_user(owner)

    async def import_(self, ctx: MemoryContext, source: Source) -> ImportReport:
        """Read an export into ``ctx``'s user, re-embedded and re-keyed; importing twice changes nothing."""
        return await self.capability.portability.import_(ctx, source)

    async def fork(self, src: MemoryContext, dst: MemoryContext) -> ImportReport:
        """Copy a user's memory to a new user or namespace; writing to one never changes the other."""
        return await self.capability.portability.fork(src, dst)
