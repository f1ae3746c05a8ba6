"""The tiers one by one, async: a part of the read side, each method the async twin of the
:class:`~tiermem.memory._tiers._tiers.Tiers` or :class:`~tiermem.memory._relations._relations.Relations` method of its
name, its arguments checked, run off the event loop.

:class:`~tiermem.memory._read._capability.MemoryCapability` holds an :class:`AsyncTiers` and answers these
methods with it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Concatenate, ParamSpec, TypeVar, cast

from .._blocking import run_blocking
from .._errors import ConfigurationError, InvalidArgumentError
from .._govern import Access
from .._records import Episode, Fact, MemoryContext
from .._relations import Relations
from .._scope import checked_context, checked_string
from .._subjects import USER
from .._tiers import Tiers

__all__ = ["AsyncTiers", "twin"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")  # the part's class


# Argument checks by parameter name, in signature order: the blocking methods trust their callers.
_CHECKS: dict[str, Callable[[object], object]] = {
    "ctx": checked_context,
    "entity": lambda value: checked_string(value, "entity"),
    "a": lambda value: checked_string(value, "a"),
    "b": lambda value: checked_string(value, "b"),
    "episode": lambda value: _checked_episode(value),
}


def _checked_episode(episode: object) -> Episode:
    if not isinstance(episode, Episode):
        raise InvalidArgumentError(f"add_episode needs an Episode, not {type(episode).__name__}")
    return episode


def twin(
    part: str, method: Callable[Concatenate[S, P], R]
) -> Callable[Concatenate[object, P], Coroutine[object, None, R]]:
    """The async twin of ``method`` of the part held as ``self.<part>``: same signature and docstring,
    its arguments checked (``_CHECKS``), run through :func:`run_blocking` (a store round trip)."""
    signature = inspect.signature(method)
    checked = [name for name in signature.parameters if name in _CHECKS]

    @functools.wraps(method)
    async def twinned(self: object, /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound = signature.bind(getattr(self, part), *args, **kwargs)
        for name in checked:
            if name in bound.arguments:
                bound.arguments[name] = _CHECKS[name](bound.arguments[name])
        ctx = bound.arguments.get("ctx")
        if isinstance(ctx, MemoryContext) and ctx.shared:  # a caller's context naming shared scopes: checked
            await run_blocking(cast("AsyncTiers", self).access.check, ctx)
        return await run_blocking(method, *bound.args, **bound.kwargs)

    return twinned


class AsyncTiers:
    """The typed tier helpers of a capability, over its tier repository and relations graph."""

    def __init__(self, *, tiers: Tiers, relations: Relations, access: Access) -> None:
        self.tiers = tiers
        self.relations = relations
        self.access = access
        """Each method's context, when it names shared scopes, must pass :meth:`Access.check` (their rows are
        reached by recall, list, get and history, never here: these read and write the user's own)."""

    add_alias = twin("tiers", Tiers.add_alias)
    aliases = twin("tiers", Tiers.aliases)
    working_memory = twin("tiers", Tiers.working_memory)
    add_working_memory = twin("tiers", Tiers.add_working_memory)
    add_episode = twin("tiers", Tiers.add_episode)
    recent_episodes = twin("tiers", Tiers.recent_episodes)
    facts = twin("tiers", Tiers.facts)
    set_digest = twin("tiers", Tiers.set_digest)
    latest_digest = twin("tiers", Tiers.latest_digest)
    connections = twin("relations", Relations.connections)
    relate = twin("relations", Relations.relate)
    ego_graph = twin("relations", Relations.ego_graph)
    _add_semantic_fact = twin("tiers", Tiers.add_semantic_fact)

    async def add_semantic_fact(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        confidence: float = 0.8,
        provenance: Sequence[str] = (),
        valid_from: datetime | None = None,
        metadata: Mapping[str, object] | None = None,
    ) -> Fact:
        """Add a fact; the same fact again reinforces it instead of duplicating it.

        ConfigurationError when the semantic tier is off: recall would never return the fact.
        """
        if self.tiers.semantic is None:
            raise ConfigurationError(
                "remember() and add_semantic_fact() write a semantic fact, but the semantic tier is off "
                "(semantic=False) and recall would never return it: turn it on, or capture the text as a turn"
            )
        return await self._add_semantic_fact(
            ctx, text, subject=subject, confidence=confidence, provenance=provenance, valid_from=valid_from,
            metadata=metadata,
        )  # fmt: skip

    async def remember(
        self,
        ctx: MemoryContext,
        text: str,
        *,
        subject: str = USER,
        provenance: Sequence[str] = (),
        metadata: Mapping[str, object] | None = None,
    ) -> Fact:
        """Store something the application was told to remember, as a high-confidence fact.

        ``metadata`` is merged over ``{"source": "remember"}`` (the agent's tool sets ``"agent"``);
        ``provenance``: the turns it came from.
        """
        return await self.add_semantic_fact(
            ctx, text, subject=subject, confidence=0.95, provenance=provenance,
            metadata={"source": "remember", **(metadata or {})},
        )  # fmt: skip
