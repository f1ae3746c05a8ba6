"""The agent's write tools, opt-in: ``memory_remember`` and ``memory_forget``, bound to one context.

Offered by the write side only (``MemorySystem.tools(ctx, write=True)``, ``tiermem mcp
--allow-writes``): a capability alone is the read side and never offers them. Like every tool they
take no user, namespace or session: what they write and delete is always the bound user's.

``memory_remember`` stores one fact through :meth:`MemoryCapability.remember`, marked
``metadata["source"] == "agent"``, with the session's latest captured turn as provenance when the
context has a session. Its ``subject`` must be canonical (``"user"``, ``"moni"``, ``"acme-corp"``)
or a display name the user's aliases resolve (``"Caroline"`` when she is an alias); anything else is
refused with the canonical spelling to retry with. A subject may never be a user id of the
namespace (another user's, or the user's own: that is ``"user"``), so no memory reads as being
about another account. ``memory_forget`` deletes one memory of the bound user by id through the
system's forget (what was derived only from it goes too, the digest is rewritten); a foreign or
unknown id is "not found", and a memory the user pinned is refused. A refusal writes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._blocking import run_blocking
from .._errors import InvalidArgumentError, InvalidSubjectError
from .._records import MemoryContext, MemoryItem
from .._store import USER_TABLES, Where
from .._subjects import MAX_SUBJECT_LENGTH, USER, canonical_subject
from .._tools import MemoryTool

if TYPE_CHECKING:
    from .._read import MemoryCapability

__all__ = ["AGENT_SOURCE", "Forget", "ForgetArguments", "RememberArguments", "agent_subject", "write_tools"]

AGENT_SOURCE = "agent"
"""``metadata["source"]`` of a memory the agent wrote with ``memory_remember``."""

Forget = Callable[[MemoryContext, str], Awaitable[object]]
"""Delete one memory of the context's user by id, with what was derived only from it (``MemorySystem.forget``)."""

Kind = Literal["fact", "preference", "event", "plan", "note"]


class RememberArguments(BaseModel):
    """Arguments of ``memory_remember``: what to store and whom it is about; never whose memory it goes to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1, max_length=2000, description="The fact to remember, one sentence.")
    subject: str = Field(
        default=USER,
        min_length=1,
        max_length=MAX_SUBJECT_LENGTH,
        description="Whom it is about: 'user' (the default), a lowercase first name ('moni') or a "
        "lowercase-hyphenated organisation ('acme-corp').",
    )
    kind: Kind | None = Field(default=None, description="What sort of memory it is, when clear.")


class ForgetArguments(BaseModel):
    """Arguments of ``memory_forget``: which memory, by the id ``memory_recall`` returned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=256, description="The id of the memory to delete, as recall returned it.")


def _is_user_id(capability: MemoryCapability, ctx: MemoryContext, name: str) -> bool:
    """Whether ``name`` is the id of a user with any row in ``ctx``'s namespace (or ``ctx``'s own user)."""
    if name == ctx.user_id:
        return True
    where = Where(eq={"namespace": ctx.namespace, "user_id": name})
    return any(capability.store.count(table, where) for table in USER_TABLES)


def agent_subject(capability: MemoryCapability, ctx: MemoryContext, raw: str) -> str:
    """The subject an agent-written memory of ``ctx``'s user is stored under, or InvalidSubjectError.

    Accepted: a canonical subject, or a display name the user's aliases resolve. Refused: any other
    spelling (the error names the canonical one) and a user id of the namespace.
    """
    aliases = capability.tiers.aliases(ctx)
    key = " ".join(raw.split()).lower()
    if key in aliases:
        subject = aliases[key]
    else:
        subject = canonical_subject(raw)  # InvalidSubjectError for what cannot be a name
        if subject != raw:
            raise InvalidSubjectError(f"subject {raw[:80]!r} is not canonical: use {subject!r}")
    if subject != USER and _is_user_id(capability, ctx, subject):
        own = " (that is the user themself: use 'user')" if subject == ctx.user_id else ""
        raise InvalidSubjectError(
            f"subject {subject!r} is the id of a user of this store{own}; a subject is 'user', "
            "or a person or an organisation in the user's life"
        )
    return subject


def _provenance(capability: MemoryCapability, ctx: MemoryContext) -> tuple[str, ...]:
    """The session's latest captured turn: the conversation the agent was in when it wrote."""
    if ctx.session_id is None:
        return ()
    turns = capability.tiers.session_turns(ctx, ctx.session_id)
    return (turns[-1].id,) if turns else ()


def _remember_tool(capability: MemoryCapability, ctx: MemoryContext) -> MemoryTool:
    async def handler(args: BaseModel) -> list[MemoryItem]:
        assert isinstance(args, RememberArguments)
        subject = await run_blocking(agent_subject, capability, ctx, args.subject)
        provenance = await run_blocking(_provenance, capability, ctx)
        metadata: dict[str, Any] = {"source": AGENT_SOURCE}
        if args.kind is not None:
            metadata["kind"] = args.kind
        if ctx.session_id is not None:
            metadata["session_id"] = ctx.session_id
        fact = await capability.remember(ctx, args.text, subject=subject, provenance=provenance, metadata=metadata)
        return [capability.item(fact, capability.clock.now())]

    return MemoryTool(
        name="memory_remember",
        description=(
            "Store one fact in the user's long-term memory, when they ask you to remember something or tell "
            "you something lasting about themselves. One sentence; 'subject' says whom it is about: 'user' "
            "(the default), a lowercase first name or a lowercase-hyphenated organisation. Returns the memory."
        ),
        arguments=RememberArguments,
        handler=handler,
    )


def _forget_tool(capability: MemoryCapability, forget: Forget, ctx: MemoryContext) -> MemoryTool:
    async def handler(args: BaseModel) -> list[MemoryItem]:
        assert isinstance(args, ForgetArguments)
        # MemoryNotFoundError unless the id is this user's: another user's memory is "not found" too.
        _, record = await run_blocking(capability.governance.find, ctx, args.id)
        if getattr(record, "pinned", False):  # the user's own decision; an agent cannot overrule it
            raise InvalidArgumentError(f"memory {args.id!r} is pinned by the user; they can unpin it first")
        item = capability.item(record, capability.clock.now())
        await forget(ctx, args.id)
        return [item]

    return MemoryTool(
        name="memory_forget",
        description=(
            "Delete one memory, by the id the recall tool returned, when the user asks you to forget it. "
            "Memories derived only from it go too. Returns what was deleted."
        ),
        arguments=ForgetArguments,
        handler=handler,
    )


def write_tools(capability: MemoryCapability, ctx: MemoryContext, *, forget: Forget) -> list[MemoryTool]:
    """``memory_remember`` (when the semantic tier is on) and ``memory_forget``, bound to ``ctx``."""
    tools = [_remember_tool(capability, ctx)] if capability.semantic is not None else []
    return [*tools, _forget_tool(capability, forget, ctx)]
