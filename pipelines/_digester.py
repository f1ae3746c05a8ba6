"""Digester: a user's facts -> a narrative about the primary user."""

from __future__ import annotations

from collections.abc import Sequence

from tiermem.memory._records import Edge, Fact
from tiermem.prompts import digest

from ._model import StageModel

__all__ = ["write_digest"]


async def write_digest(
    model: StageModel,
    *,
    facts: Sequence[Fact],
    edges: Sequence[Edge],
    user_names: Sequence[str],
    previous: str | None,
) -> str:
    """One model call; returns the digest text."""
    inputs = digest.Input(facts=list(facts), edges=list(edges), user_names=list(user_names), previous=previous)
    output = await model.run(digest.STAGE, inputs)
    return " ".join(output.text.split())
