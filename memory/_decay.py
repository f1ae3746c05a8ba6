"""Time and turn decay: how much a memory still counts now."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TypeVar

from ._records import Edge, Episode, Fact

__all__ = [
    "DEFAULT_HALF_LIFE",
    "decay_start",
    "effective_confidence",
    "recency",
    "reinforce",
    "ttl_start",
    "turn_decay",
]

M = TypeVar("M", Fact, Edge)

DEFAULT_HALF_LIFE = timedelta(days=180)


# The clocks count store time: when a memory entered the store or was last reinforced there. An
# imported history keeps its own dates (valid_from, started_at, turn times) for recall and history,
# and ``stored_at`` says when the import took it in: a two-years-old conversation imported today
# decays and expires from today, not from two years ago.


def decay_start(fact: Fact) -> datetime:
    """When a fact's decay counts from: its last reinforcement, or the import that took it in if later."""
    return fact.reinforced_at if fact.stored_at is None else max(fact.reinforced_at, fact.stored_at)


def ttl_start(episode: Episode) -> datetime:
    """When an episode's TTL counts from: its end, or the import that took it in if later."""
    return episode.ended_at if episode.stored_at is None else max(episode.ended_at, episode.stored_at)


def effective_confidence(fact: Fact | Edge, now: datetime, *, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """``confidence * 0.5 ** (age / half_life)``, age counted from the last reinforcement (:func:`decay_start`).

    A pinned fact never decays: its confidence stands as it is.
    """
    if isinstance(fact, Fact) and fact.pinned:
        return float(fact.confidence)
    since = decay_start(fact) if isinstance(fact, Fact) else fact.updated_at
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
