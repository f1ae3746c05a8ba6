"""Time and turn decay: how much a memory still counts now."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TypeVar

from ._records import Edge, Fact

__all__ = ["DEFAULT_HALF_LIFE", "effective_confidence", "recency", "reinforce", "turn_decay"]

M = TypeVar("M", Fact, Edge)

DEFAULT_HALF_LIFE = timedelta(days=180)


def effective_confidence(fact: Fact | Edge, now: datetime, *, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """``confidence * 0.5 ** (age / half_life)``, age counted from the last reinforcement.

    A pinned fact never decays: its confidence stands as it is.
    """
    if isinstance(fact, Fact) and fact.pinned:
        return float(fact.confidence)
    since = fact.reinforced_at if isinstance(fact, Fact) else fact.updated_at
    age = max((now - since).total_seconds(), 0.0)
    return float(fact.confidence * 0.5 ** (age / half_life.total_seconds()))


def recency(when: datetime, now: datetime, *, half_life: timedelta) -> float:
    """1.0 for now, 0.5 one half-life ago."""
    age = max((now - when).total_seconds(), 0.0)
    return float(0.5 ** (age / half_life.total_seconds()))


def turn_decay(salience: float, turns_ago: int, *, half_life_turns: float) -> float:
    """Working-memory salience after ``turns_ago`` further turns."""
    return float(salience * 0.5 ** (max(turns_ago, 0) / half_life_turns))


def reinforce(memory: M, *, confidence: float, now: datetime, provenance: Iterable[str] = ()) -> M:
    """The same fact or edge seen again: confidence never drops, decay restarts, provenance grows."""
    update: dict[str, object] = {
        "confidence": max(memory.confidence, confidence),
        "updated_at": now,
        "reinforcements": memory.reinforcements + 1,
        "provenance": tuple(dict.fromkeys((*memory.provenance, *provenance))),
    }
    if isinstance(memory, Fact):
        update["reinforced_at"] = now
    return memory.model_copy(update=update)
