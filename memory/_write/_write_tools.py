"""The agent's write tools, opt-in: the handlers of ``memory_remember`` and ``memory_forget`` (their
entries, arguments included, are the tool table's: :data:`~tiermem.memory._tools.TOOLS`).

Offered by the write side only (``MemorySystem.tools(ctx, write=True)``, ``tiermem mcp
--allow-writes``, both through :func:`agent_tools`): a capability alone is the read side and never
offers them. Like every tool they take no user, namespace or session: what they write and delete is
always the bound user's.

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

from .._blocking import run_blocking
from .._errors import InvalidArgumentError, InvalidSubjectError
from .._items import MemoryItem
from .._read import MemoryCapability, read_tools
from .._records import MemoryContext
from .._store import USER_TABLES, Where
from .._subjects import USER, canonical_subject
from .._tools import FORGET, REMEMBER, ForgetArguments, MemoryTool, RememberArguments, Toolset, offer
from ._sharing import SHARED_BY

# The argument models are the tool table's, named here where they always were.
__all__ = ["AGENT_SOURCE", "Forget", "ForgetArguments", "RememberArguments", "agent_subject", "agent_tools"]

AGENT_SOURCE = "agent"
"""``metadata["source"]`` of a memory the agent wrote with ``memory_remember``."""

Forget = Callable[[MemoryContext, str], Awaitable[object]]
"""Delete one memory of the context's user by id, with what was derived only from it (``MemorySystem.forget``)."""


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
    async def handler(args: RememberArguments) -> list[MemoryItem]:
        # whose memory comes from the context alone: the argument only picks among the scopes it names
        named = {"user": None, "agent": ctx.agent_scope, "shared": ctx.write_scope}[args.scope]
        target = ctx if args.scope == "user" else await run_blocking(capability.access.writable, ctx, named)
        subject = await run_blocking(agent_subject, capability, ctx, args.subject)
        if capability.policy is not None and subject in capability.policy.exclude_subjects:
            raise InvalidArgumentError(f"the memory policy keeps memories about {subject!r} out: nothing was stored")
        provenance = await run_blocking(_provenance, capability, ctx)
        metadata: dict[str, object] = {"source": AGENT_SOURCE}
        if target is not ctx:
            metadata[SHARED_BY] = ctx.user_id
        if args.kind is not None:
            metadata["kind"] = args.kind
        if ctx.session_id is not None:
            metadata["session_id"] = ctx.session_id
        fact = await capability.remember(target, args.text, subject=subject, provenance=provenance, metadata=metadata)
        return [capability.item(fact, capability.clock.now())]

    return REMEMBER.bind(handler)


def _forget_tool(capability: MemoryCapability, forget: Forget, ctx: MemoryContext) -> MemoryTool:
    async def handler(args: ForgetArguments) -> list[MemoryItem]:
        # MemoryNotFoundError unless the id is this user's: another user's memory is "not found" too.
        _, record = await run_blocking(capability.governance.find, ctx, args.id)
        if getattr(record, "pinned", False):  # the user's own decision; an agent cannot overrule it
            raise InvalidArgumentError(f"memory {args.id!r} is pinned by the user; they can unpin it first")
        item = capability.item(record, capability.clock.now())
        await forget(ctx, args.id)
        return [item]

    return FORGET.bind(handler)


def agent_tools(capability: MemoryCapability, ctx: MemoryContext, *, forget: Forget | None) -> Toolset:
    """The capability's tools bound to ``ctx``, and with ``forget`` (the write side's) the write tools too.

    One selection over the tool table: the read tools the capability's preset names, and with
    ``forget`` every write tool (``memory_remember`` only while the semantic tier is on), in the
    table's order.
    """
    bound = read_tools(capability, ctx)
    if forget is not None:
        bound |= {REMEMBER.name: _remember_tool(capability, ctx), FORGET.name: _forget_tool(capability, forget, ctx)}
    return offer(bound, chosen=capability.preset.tools, write=forget is not None, options=capability.tool_options)
