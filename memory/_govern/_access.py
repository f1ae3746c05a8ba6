"""Access to shared scopes: the operator's grants, and the one choke point every read and write passes.

A shared scope (``team:<id>``, ``org:<id>``, ``agent:<id>``) is stored as a pseudo-owner: its rows carry
the scope in the ``user_id`` column of the same tables, so every per-user mechanism (search, lineage,
history, erasure) serves it unchanged. A ``MemoryContext`` cannot name a scope as its user (its validator
refuses), so the only way to a shared scope's rows is a context :meth:`Access.owner` mints, after
:meth:`Access.check` found the grant. Grants live in the store's meta table, one key per
(namespace, user, scope); ``write`` implies ``read``.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import AccessDeniedError, InvalidArgumentError
from .._records import MemoryContext, shared_kind
from .._scope import checked_context
from .._store import Store

__all__ = ["Access", "Grant", "Right"]

Right = Literal["read", "write"]
_KEY = "grant "
_RANK = {"read": 1, "write": 2}


class Grant(BaseModel):
    """One user's access to one shared scope of a namespace."""

    model_config = ConfigDict(frozen=True)

    namespace: str = Field(description="The namespace the scope and the user belong to.")
    user_id: str = Field(description="The user granted access.")
    scope: str = Field(description="The shared scope: 'team:<id>', 'org:<id>' or 'agent:<id>'.")
    right: Right = Field(description="'read', or 'write' (which includes read).")


def _key(namespace: str, user_id: str, scope: str) -> str:
    return _KEY + json.dumps([namespace, user_id, scope])


class Access:
    """The grants of one store, and the check of a context against them."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- the operator's grants --------------------------------------------------------------

    def grants(self, namespace: str | None = None) -> list[Grant]:
        """Every grant in force (of ``namespace``, if given), sorted."""
        found = []
        for key, right in self.store.meta().items():
            if key.startswith(_KEY) and right in _RANK:  # a revoked grant's key stays, its right emptied
                ns, user, scope = json.loads(key[len(_KEY) :])
                if namespace is None or ns == namespace:
                    found.append(
                        Grant.model_validate({"namespace": ns, "user_id": user, "scope": scope, "right": right})
                    )
        return sorted(found, key=lambda g: (g.namespace, g.scope, g.user_id))

    def grant(self, namespace: str, user_id: str, scope: str, right: Right = "read") -> Grant:
        """Let ``user_id`` of ``namespace`` read (or read and write) ``scope``; replaces a grant held before."""
        if right not in _RANK:
            raise InvalidArgumentError(f"right must be 'read' or 'write', not {right!r}")
        ctx = self._checked(namespace, user_id, scope)
        self.store.set_meta({_key(ctx.namespace, ctx.user_id, scope): right})
        return Grant(namespace=namespace, user_id=user_id, scope=scope, right=right)

    def revoke(self, namespace: str, user_id: str, scope: str) -> bool:
        """Withdraw ``user_id``'s access to ``scope``; whether there was one."""
        self._checked(namespace, user_id, scope)
        held = self._held(namespace, user_id)
        if scope not in held:
            return False
        self.store.set_meta({_key(namespace, user_id, scope): ""})
        return True

    @staticmethod
    def _checked(namespace: str, user_id: str, scope: str) -> MemoryContext:
        try:
            return MemoryContext(namespace=namespace, user_id=user_id, read_scopes=(scope,))
        except ValidationError as exc:  # an id or scope malformed
            raise InvalidArgumentError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None

    def _held(self, namespace: str, user_id: str) -> dict[str, str]:
        """The scopes ``user_id`` of ``namespace`` holds, with their right."""
        return {g.scope: g.right for g in self.grants(namespace) if g.user_id == user_id}

    def rights(self, ctx: MemoryContext) -> dict[str, str]:
        """The shared scopes ``ctx``'s user holds, with their right ("read" or "write")."""
        return self._held(ctx.namespace, ctx.user_id)

    # -- the choke point --------------------------------------------------------------------

    def check(self, ctx: object) -> MemoryContext:
        """``ctx`` if its user holds a grant for every shared scope it asks for (write for its write_scope),
        else AccessDeniedError: nothing of the call is read or written. Every front calls this first."""
        ctx = checked_context(ctx)
        if shared_kind(ctx.user_id) is not None:  # only model_copy, which skips the validator, makes one
            raise AccessDeniedError(f"user_id {ctx.user_id!r} names a shared scope: no context acts as one")
        if not ctx.shared:
            return ctx  # the user's own memory: no grant to read
        held = self._held(ctx.namespace, ctx.user_id)
        for scope in ctx.shared:
            need = "write" if scope == ctx.write_scope else "read"
            if _RANK.get(held.get(scope, ""), 0) < _RANK[need]:
                raise AccessDeniedError(
                    f"user {ctx.user_id!r} of namespace {ctx.namespace!r} holds no {need} grant for {scope!r}"
                )
        return ctx

    def readable(self, ctx: object) -> list[tuple[str, MemoryContext]]:
        """The scopes ``ctx`` reads, checked: ("user", its own context) then each shared scope's owner."""
        ctx = self.check(ctx)
        shared = [s for s in (*ctx.read_scopes, ctx.agent_scope, ctx.write_scope) if s is not None]
        return [("user", ctx), *((s, self._owner(ctx, s)) for s in dict.fromkeys(shared))]

    def writable(self, ctx: object, scope: str | None) -> MemoryContext:
        """The owner context to write ``scope`` with: ``ctx`` must name it as its write_scope or agent scope
        and hold a write grant for it."""
        ctx = self.check(ctx)
        if scope is None or scope not in (ctx.write_scope, ctx.agent_scope):
            raise AccessDeniedError(f"no write grant applies: the context names {scope!r} as neither its write scope "
                                    "nor its agent's scope")  # fmt: skip
        if _RANK.get(self._held(ctx.namespace, ctx.user_id).get(scope, ""), 0) < _RANK["write"]:
            raise AccessDeniedError(f"user {ctx.user_id!r} holds no write grant for {scope!r}")
        return self._owner(ctx, scope)

    def operator_view(self, namespace: str, scope: str) -> MemoryContext:
        """The owner context of ``scope`` for the operator's own calls (``erase_scope``, ``propose_shared``),
        which no user's context reaches: the system's API takes no context for them."""
        return self._owner(self._checked(namespace, "operator", scope), scope)

    def erasable(self, namespace: str, scope: str) -> MemoryContext:
        """The operator's erasure of a whole shared scope: its owner context, every grant of it revoked first."""
        owner = self.operator_view(namespace, scope)
        gone = {_key(g.namespace, g.user_id, g.scope): "" for g in self.grants(namespace) if g.scope == scope}
        if gone:
            self.store.set_meta(gone)
        return owner

    def forget_user(self, namespace: str, user_id: str) -> int:
        """Revoke every grant of an erased user; how many there were."""
        gone = {_key(g.namespace, g.user_id, g.scope): "" for g in self.grants(namespace) if g.user_id == user_id}
        if gone:
            self.store.set_meta(gone)
        return len(gone)

    @staticmethod
    def _owner(ctx: MemoryContext, scope: str) -> MemoryContext:
        """The context whose rows are ``scope``'s, in ``ctx``'s namespace (only after a check: see above)."""
        if shared_kind(scope) is None:
            raise InvalidArgumentError(f"{scope!r} is not a shared scope")
        # model_construct: the validator refuses a scope as user_id, on purpose, for every caller but this
        return MemoryContext.model_construct(
            namespace=ctx.namespace, user_id=scope, session_id=None, read_scopes=(), write_scope=None, agent_id=None
        )
