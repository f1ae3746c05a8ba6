"""Shared scopes on the write side: an explicit promotion (``share``), and what erasing a user or a scope
does to them.

A shared memory is a copy: the user's own fact stays theirs, the scope gets a new fact whose provenance
names the original and whose ``metadata["shared_by"]`` names who shared it. Erasing that user leaves the
copy (the team still knows it) with its provenance anonymised; erasing the scope removes it whole.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .._errors import InvalidArgumentError
from .._read import MemoryCapability
from .._records import Fact, MemoryContext, shared_kind
from .._store import Where
from .._text import content_terms, tokens

__all__ = ["ERASED", "SHARED_BY", "SharedProposal", "anonymise", "contributions", "proposals", "share"]

SHARED_BY = "shared_by"
"""``metadata`` key of a shared memory: the user who shared or wrote it."""
ERASED = "(erased user)"
"""What ``shared_by`` says once that user was erased."""


def share(capability: MemoryCapability, ctx: MemoryContext, memory_id: str, scope: str) -> Fact:
    """Copy the user's fact ``memory_id`` into ``scope`` (their write scope, with a write grant), with provenance."""
    owner = capability.access.writable(ctx, scope)  # AccessDeniedError before anything is read
    _, record = capability.governance.find(ctx, memory_id, ("facts",))  # the user's own fact, or not found
    if not isinstance(record, Fact) or record.status != "active":
        raise InvalidArgumentError(f"memory {memory_id!r} is not a current fact: only those can be shared")
    metadata = {**record.metadata, SHARED_BY: ctx.user_id, "shared_from": record.id}
    return capability.tiers.add_semantic_fact(
        owner, record.text, subject=record.subject, confidence=record.confidence, provenance=(record.id,),
        valid_from=record.valid_from, metadata=metadata,
    )  # fmt: skip


def contributions(capability: MemoryCapability, ctx: MemoryContext) -> list[Fact]:
    """Every fact ``ctx``'s user shared or wrote into a shared scope of their namespace, whatever its status."""
    store, found = capability.store, []
    shared = sorted({u for ns, u in store.scopes("facts") if ns == ctx.namespace and shared_kind(u) is not None})
    for scope in shared:
        for fact in store.query("facts", Where(eq={"namespace": ctx.namespace, "user_id": scope})):
            if isinstance(fact, Fact) and fact.metadata.get(SHARED_BY) == ctx.user_id:
                found.append(fact)
    return found


def anonymise(capability: MemoryCapability, ctx: MemoryContext) -> int:
    """Before ``ctx``'s user is erased: the shared memories they contributed keep their text but no longer
    name them or their records. Returns how many changed."""
    changed = []
    for fact in contributions(capability, ctx):
        metadata = {k: v for k, v in fact.metadata.items() if k not in ("shared_from", "session_id")}
        changed.append(fact.model_copy(update={"metadata": {**metadata, SHARED_BY: ERASED}, "provenance": ()}))
    capability.tiers.put_facts(changed)
    return len(changed)


class SharedProposal(BaseModel):
    """A fact several users of a scope hold alike, proposed for the scope: nothing moves until someone shares it."""

    model_config = ConfigDict(frozen=True)

    scope: str = Field(description="The shared scope it is proposed for.")
    subject: str = Field(description="Its subject.")
    text: str = Field(description="The fact, as the first of its holders has it.")
    users: tuple[str, ...] = Field(description="The users granted the scope who hold it, sorted.")
    fact_ids: tuple[str, ...] = Field(description="Their facts, in the order of ``users``: share() takes one.")


# Stop words that change what a fact says, kept in its held-alike key: a negation ("we don't use
# pytest" is not "we use pytest") and the words that order or compare ("before" / "after").
_MEANING = frozenset(
    ["no", "not", "nor", "never", "against", "before", "after", "above", "below", "more", "most", "less", "least",
     "few", "only", "than"]
)  # fmt: skip


def _same(text: str) -> tuple[str, ...]:
    """Held alike: the same informative words in the same order, lightly stemmed, whatever the filler,
    case and punctuation ("We use pytest for tests." and "we use Pytest for testing"); the order keeps
    "I like cats more than dogs" apart from "I like dogs more than cats", and a negation or a word of
    comparison counts ("we do not use pytest", "we don't use pytest" alike, apart from "we use pytest")."""
    key = tuple(term for token in tokens(text) if (term := _key_term(token)) is not None)
    return key or (text.casefold().strip(),)


def _key_term(token: str) -> str | None:
    if token.endswith("n't") or token == "cannot":
        return "not"
    if token in _MEANING:
        return token
    found = content_terms(token)
    return found[0] if found else None


def proposals(capability: MemoryCapability, namespace: str, scope: str, *, min_users: int = 2) -> list[SharedProposal]:
    """Facts held alike (same subject, the same informative words in order) by at least ``min_users`` of
    the users granted ``scope`` and not yet in it: for the operator or the users to review, then ``share``."""
    if isinstance(min_users, bool) or not isinstance(min_users, int) or min_users < 2:
        raise InvalidArgumentError("min_users must be an int of at least 2")
    owner = capability.access.operator_view(namespace, scope)
    present = {(f.subject, _same(f.text)) for f in capability.tiers.facts(owner)}
    held: dict[tuple[str, tuple[str, ...]], dict[str, Fact]] = {}
    for grant in capability.access.grants(namespace):
        if grant.scope == scope:
            user = MemoryContext(namespace=namespace, user_id=grant.user_id)
            for fact in capability.tiers.facts(user):
                held.setdefault((fact.subject, _same(fact.text)), {}).setdefault(grant.user_id, fact)
    found = []
    for key, by_user in sorted(held.items()):
        if len(by_user) >= min_users and key not in present:
            users = tuple(sorted(by_user))
            found.append(SharedProposal(
                scope=scope, subject=key[0], text=by_user[users[0]].text, users=users,
                fact_ids=tuple(by_user[u].id for u in users),
            ))  # fmt: skip
    return found
